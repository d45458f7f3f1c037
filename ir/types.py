"""Types of the IR: tensors with static shapes, tuples and functions."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Iterator, Optional, Tuple

import numpy as np

#: dtypes the IR knows, by their Relay spelling.
DTYPES = (
    "float16", "float32", "float64", "bfloat16",
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "bool",
)


#: The largest dimension a tensor may have (TVM's and ONNX's dims are int64).
MAX_DIM = 2 ** 63 - 1
#: Dimension -1 marks an unknown (dynamic) size, as rules that refuse dynamic shapes see it;
#: any other negative dimension is refused.
DYNAMIC_DIM = -1

#: The tensor budget: the most bytes one value may need. Types know every size, so a value above
#: it is refused before anything is allocated (type inference, ONNX import-time folding).
MAX_TENSOR_BYTES_ENV = "TIDLX_MAX_TENSOR_BYTES"
#: 4 GiB: a few such values fit the 24 GiB this runs on; every model tidlx was built for stays far below.
DEFAULT_MAX_TENSOR_BYTES = 4 * 2 ** 30
_UNITS = {"": 1, "B": 1, "K": 2 ** 10, "KB": 10 ** 3, "KIB": 2 ** 10, "M": 2 ** 20, "MB": 10 ** 6, "MIB": 2 ** 20,
          "G": 2 ** 30, "GB": 10 ** 9, "GIB": 2 ** 30, "T": 2 ** 40, "TB": 10 ** 12, "TIB": 2 ** 40}
_budget_override: list = []


def parse_bytes(text: str, what: str = MAX_TENSOR_BYTES_ENV) -> int:
    """``'4294967296'``, ``'16G'``, ``'16GiB'``, ``'500MB'`` as a positive number of bytes."""
    from .errors import TidlxError

    raw = str(text).strip()
    number = raw.rstrip("bBkKmMgGtTiI ")
    unit = raw[len(number):].strip().upper()
    try:
        value = float(number)
    except ValueError:
        value = None
    if value is None or unit not in _UNITS or not value > 0 or value != value or value * _UNITS[unit] > 2 ** 80:
        raise TidlxError(f"{what}={text!r} is not a size in bytes (e.g. 8589934592, 8G, 8GiB, 500MB)")
    return int(value * _UNITS[unit])


def max_tensor_bytes() -> int:
    """The tensor budget in force: ``tensor_budget(...)`` if inside one, else the environment
    variable TIDLX_MAX_TENSOR_BYTES (read now), else DEFAULT_MAX_TENSOR_BYTES."""
    if _budget_override:
        return _budget_override[-1]
    env = os.environ.get(MAX_TENSOR_BYTES_ENV)
    if env is not None and env.strip():
        return parse_bytes(env)
    return DEFAULT_MAX_TENSOR_BYTES


@contextlib.contextmanager
def tensor_budget(nbytes) -> Iterator[int]:
    """Raises (or lowers) the tensor budget inside the block: ``with tensor_budget("32G"): ...``;
    what an option such as ``--max-tensor-bytes`` sets."""
    value = parse_bytes(nbytes, "max_tensor_bytes") if isinstance(nbytes, str) else nbytes
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        from .errors import TidlxError

        raise TidlxError(f"max_tensor_bytes={nbytes!r} must be a positive number of bytes")
    _budget_override.append(value)
    try:
        yield value
    finally:
        _budget_override.pop()


def format_bytes(n: int) -> str:
    for unit, size in (("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def check_tensor_bytes(t: "Type", what: str, budget: Optional[int] = None) -> None:
    """Refuses (TensorTooLargeError) a type whose tensors need more bytes than the budget; the
    message says ``what`` (the node), its type, the bytes and how to raise the budget."""
    from .errors import TensorTooLargeError

    budget = max_tensor_bytes() if budget is None else budget
    for tt in _tensors(t):
        if any(d < 0 for d in tt.shape):
            continue
        nbytes = tt.nbytes
        if nbytes > budget:
            raise TensorTooLargeError(
                f"{what}: {tt} would need {nbytes} bytes ({format_bytes(nbytes)}), more than the tensor budget of "
                f"{budget} bytes ({format_bytes(budget)}); if the model really needs it, raise the budget with the "
                f"environment variable {MAX_TENSOR_BYTES_ENV}=<bytes> (e.g. {MAX_TENSOR_BYTES_ENV}=32G) or "
                f"tidlx.ir.types.tensor_budget(<bytes>)")


def _tensors(t):
    if isinstance(t, TensorType):
        yield t
    elif isinstance(t, TupleType):
        for f in t.fields:
            yield from _tensors(f)


class Type:
    """Base of all IR types."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class TensorType(Type):
    shape: Tuple[int, ...]
    dtype: str = "float32"

    def __post_init__(self):
        shape = tuple(int(d) for d in self.shape)
        object.__setattr__(self, "shape", shape)
        for axis, d in enumerate(shape):
            if d < DYNAMIC_DIM or d > MAX_DIM:
                from .errors import TidlxTypeError

                raise TidlxTypeError(
                    f"dimension {axis} of shape ({', '.join(map(str, shape))}) is {d}: "
                    + ("dimensions cannot be negative" if d < 0 else f"beyond int64 (at most {MAX_DIM})"))

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
