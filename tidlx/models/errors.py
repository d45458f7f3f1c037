"""Errors raised by the built-in model generators."""

from __future__ import annotations

from tidlx.ir.errors import TidlxError


class ModelArgumentError(TidlxError):
    """A built-in model was asked for with an argument it cannot take (the argument is named)."""

    def __init__(self, model: str, argument: str, problem: str):
        self.model = model
        self.argument = argument
        super().__init__(f"{model}: argument '{argument}' {problem}")


def save_model(model, path, model_name: str) -> None:
    """Writes a built-in model to ``path``; a path that cannot be written is a ModelArgumentError naming it."""
    import os

    import onnx

    try:
        onnx.save_model(model, os.fspath(path))
    except OSError as error:
        raise ModelArgumentError(model_name, "path", f"cannot be written ({path}): {error.strerror}") from error
