"""Types of the IR: tensors with static shapes, tuples and functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

#: dtypes the IR knows, by their Relay spelling.
DTYPES = (
    "float16", "float32", "float64", "bfloat16",
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "bool",
)


class Type:
    """Base of all IR types."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class TensorType(Type):
    shape: Tuple[int, ...]
    dtype: str = "float32"

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * dtype_bytes(self.dtype)

    def __str__(self) -> str:
        if len(self.shape) == 0:
            return f"{self.dtype}"
        return f"Tensor[({', '.join(str(d) for d in self.shape)}), {self.dtype}]"


@dataclass(frozen=True, slots=True)
class TupleType(Type):
    fields: Tuple[Type, ...]

    def __post_init__(self):
        object.__setattr__(self, "fields", tuple(self.fields))

    def __str__(self) -> str:
        if len(self.fields) == 1:
            return f"({self.fields[0]},)"
        return "(" + ", ".join(str(f) for f in self.fields) + ")"


@dataclass(frozen=True, slots=True)
class FuncType(Type):
    arg_types: Tuple[Type, ...]
    ret_type: Type

    def __post_init__(self):
        object.__setattr__(self, "arg_types", tuple(self.arg_types))

    def __str__(self) -> str:
        return f"fn ({', '.join(str(a) for a in self.arg_types)}) -> {self.ret_type}"


def scalar_type(dtype: str) -> TensorType:
    return TensorType((), dtype)


def dtype_bytes(dtype: str) -> int:
    if dtype == "bool":
        return 1
    if dtype == "bfloat16":
        return 2
    return np.dtype(dtype).itemsize


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype for an IR dtype (bfloat16 has none and is refused)."""
    from .errors import TidlxTypeError

    if dtype not in DTYPES or dtype == "bfloat16":
        raise TidlxTypeError(f"dtype '{dtype}' has no numpy equivalent")
    return np.dtype(dtype)
