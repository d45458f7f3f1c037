"""Shared pieces of type relations."""

from __future__ import annotations

from typing import Sequence

from ..errors import TidlxTypeError
from ..types import TensorType, TupleType, Type


def tensor_arg(arg_types: Sequence[Type], i: int, op: str, what: str = "") -> TensorType:
    if i >= len(arg_types):
        raise TidlxTypeError(f"{op}: missing input {i}{' (' + what + ')' if what else ''}")
    t = arg_types[i]
    if not isinstance(t, TensorType):
        raise TidlxTypeError(f"{op}: input {i}{' (' + what + ')' if what else ''} must be a tensor, got {t}")
    return t


def tuple_arg(arg_types: Sequence[Type], i: int, op: str) -> TupleType:
    t = arg_types[i]
    if not isinstance(t, TupleType):
        raise TidlxTypeError(f"{op}: input {i} must be a tuple, got {t}")
    return t


def broadcast_shapes(a: Sequence[int], b: Sequence[int], op: str) -> tuple:
    """numpy/Relay broadcasting of two static shapes."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else 1
        db = b[-i] if i <= len(b) else 1
        if da != db and da != 1 and db != 1:
            raise TidlxTypeError(f"{op}: shapes {tuple(a)} and {tuple(b)} do not broadcast")
        out.append(max(da, db) if da != 0 and db != 0 else 0)
    return tuple(reversed(out))


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise TidlxTypeError(f"{op}: axis {axis} is out of range for rank {ndim}")
    return axis % ndim if ndim else 0


def same_dtype(op: str, *types: TensorType) -> str:
    dtypes = {t.dtype for t in types}
    if len(dtypes) != 1:
        raise TidlxTypeError(f"{op}: inputs have different dtypes {', '.join(sorted(dtypes))}")
    return types[0].dtype
