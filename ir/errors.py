"""The tidlx error family. Every error a user can cause is one of these, with the place named."""

from __future__ import annotations

import difflib
from typing import Iterable


class TidlxError(Exception):
    """Base of every error tidlx raises on bad input (models, text, options)."""


class TidlxInternalError(RuntimeError):
    """A bug in tidlx, not a problem of the input; the original exception is its ``__cause__``.
    Deliberately not a TidlxError: code that reports bad input (``except TidlxError``) must not
    swallow a bug as if the user had caused it."""


class TidlxWarning(UserWarning):
    """Something tidlx worked around and the user should know (e.g. a constant missing from text)."""


class TidlxTypeError(TidlxError):
    """A type relation failed: wrong shapes, dtypes or attributes for an op."""


class TensorTooLargeError(TidlxTypeError):
    """A value would need more bytes than the tensor budget (``TIDLX_MAX_TENSOR_BYTES``): refused
    from its type, before anything is allocated."""


class VerifyError(TidlxError):
    """The IR is malformed (unbound variable, bad arity, ill-typed call, ...)."""


class UnknownOpError(TidlxError):
    """An op name that the registry does not know."""

    def __init__(self, name: str, known: Iterable[str]):
        self.op_name = name
        self.suggestions = closest(name, known)
        hint = f"; closest known ops: {', '.join(self.suggestions)}" if self.suggestions else ""
        super().__init__(f"unknown op '{name}'{hint}")


class OpAttributeError(TidlxError):
    """An attribute that an op does not take, or a value of the wrong kind."""


def closest(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The candidates closest to ``name``, best first (for 'did you mean' hints)."""
    return difflib.get_close_matches(name, sorted(set(candidates)), n=n, cutoff=0.5)
