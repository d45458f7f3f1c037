"""Errors raised by the built-in model generators."""

from __future__ import annotations

from tidlx.ir.errors import TidlxError


class ModelArgumentError(TidlxError):
    """A built-in model was asked for with an argument it cannot take (the argument is named)."""

    def __init__(self, model: str, argument: str, problem: str):
        self.model = model
        self.argument = argument
        super().__init__(f"{model}: argument '{argument}' {problem}")
