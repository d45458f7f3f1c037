"""Shared pieces of type relations and attribute classes.

Messages name the input or attribute at fault but not the op: type inference prefixes
the op, layer and binding.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import TidlxTypeError
from ..types import DTYPES, TensorType, TupleType, Type

FLOAT_DTYPES = ("float16", "float32", "float64", "bfloat16")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
INDEX_DTYPES = ("int32", "int64")


def _input_name(i: int, what: str) -> str:
    return f"input {i} ({what})" if what else f"input {i}"


def tensor_arg(arg_types: Sequence[Type], i: int, what: str = "") -> TensorType:
    if i >= len(arg_types):
        raise TidlxTypeError(f"missing {_input_name(i, what)}")
    t = arg_types[i]
    if not isinstance(t, TensorType):
        raise TidlxTypeError(f"{_input_name(i, what)} must be a tensor, got {t}")
    return t


def tuple_arg(arg_types: Sequence[Type], i: int, what: str = "") -> TupleType:
    """A tuple of tensors (the input of concatenate, stack, ...)."""
    if i >= len(arg_types):
        raise TidlxTypeError(f"missing {_input_name(i, what)}")
    t = arg_types[i]
    if not isinstance(t, TupleType):
        raise TidlxTypeError(f"{_input_name(i, what)} must be a tuple of tensors, got {t}")
    for k, f in enumerate(t.fields):
        if not isinstance(f, TensorType):
            raise TidlxTypeError(f"field {k} of {_input_name(i, what)} must be a tensor, got {f}")
    return t


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> tuple:
    """numpy/Relay broadcasting of two static shapes."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else 1
        db = b[-i] if i <= len(b) else 1
        if da != db and da != 1 and db != 1:
            raise TidlxTypeError(f"shapes {tuple(a)} and {tuple(b)} do not broadcast")
        out.append(max(da, db) if da != 0 and db != 0 else 0)
    return tuple(reversed(out))


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    """``axis`` in ``[-ndim, ndim)`` mapped to ``[0, ndim)``."""
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TidlxTypeError(f"{what} must be an integer, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise TidlxTypeError(f"{what} {axis} is out of range for rank {ndim} (valid: {-ndim}..{ndim - 1})")
    return axis % ndim


def normalize_axes(axes: Sequence[int], ndim: int, what: str = "axis") -> Tuple[int, ...]:
    """Several axes, each normalized; duplicates are refused."""
    out = tuple(normalize_axis(a, ndim, what) for a in axes)
    if len(set(out)) != len(out):
        raise TidlxTypeError(f"{what} {list(axes)} names an axis twice")
    return out


def same_dtype(*types: TensorType) -> str:
    dtypes = {t.dtype for t in types}
    if len(dtypes) != 1:
        raise TidlxTypeError(f"inputs have different dtypes {', '.join(sorted(dtypes))}")
    return types[0].dtype


def operand_dtypes(a: TensorType, b: TensorType, what_a: str = "data", what_b: str = "weight") -> str:
    """The two operands of a convolution or matrix product: one dtype when floating point (a float32
    input with an int8 weight computes nothing meaningful); when integer, any mix of integer dtypes
    (uint8 data with int8 weights, as quantized kernels take, accumulating in ``out_dtype``)."""
    if a.dtype == b.dtype:
        return a.dtype
    if a.dtype in INT_DTYPES and b.dtype in INT_DTYPES:
        return a.dtype
    raise TidlxTypeError(f"{what_a} has dtype {a.dtype} but {what_b} has {b.dtype} (both must have one dtype; "
                         f"cast one of them, or quantize the model with QuantizeLinear/DequantizeLinear)")


def check_dtype(t: TensorType, allowed: Sequence[str], what: str) -> str:
    if t.dtype not in allowed:
        raise TidlxTypeError(f"{what} must have dtype {' or '.join(allowed)}, got {t.dtype}")
    return t.dtype


def check_dtype_name(dtype: str, what: str, allowed: Sequence[str] = DTYPES) -> str:
    if dtype not in allowed:
        raise TidlxTypeError(f"{what}='{dtype}' is not a known dtype (one of {', '.join(allowed)})")
    return dtype


def check_choice(value: str, choices: Sequence[str], what: str) -> str:
    if value not in choices:
        raise TidlxTypeError(f"{what}='{value}' is not supported (one of {', '.join(map(repr, choices))})")
    return value


def int_tuple(value, what: str) -> Tuple[int, ...]:
    """An attribute that must be a tuple of ints (a single int counts as one)."""
    if isinstance(value, bool):
        raise TidlxTypeError(f"{what} must be integers, got {value!r}")
    if isinstance(value, int):
        return (value,)
    if not isinstance(value, (tuple, list)) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
        raise TidlxTypeError(f"{what} must be a list of integers, got {value!r}")
    return tuple(value)


def pair(value, what: str) -> Tuple[int, int]:
    """One or two ints as an (h, w) pair."""
    values = int_tuple(value, what)
    if len(values) == 1:
        values = values * 2
    if len(values) != 2:
        raise TidlxTypeError(f"{what} must have 2 values, got {len(values)}")
    return values


def expand_padding(padding, n: int = 2) -> Tuple[int, ...]:
    """TVM's padding forms: 1 value, n values (each side), or 2n values (befores then afters)."""
    values = int_tuple(padding, "padding")
    if len(values) == 1:
        values = values * (2 * n)
    elif len(values) == n:
        values = values + values
    elif len(values) != 2 * n:
        raise TidlxTypeError(f"padding must have 1, {n} or {2 * n} values, got {len(values)}")
    if any(p < 0 for p in values):
        raise TidlxTypeError(f"padding {list(values)} has a negative value")
    return values


def positive(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise TidlxTypeError(f"{what} must be a positive integer, got {value!r}")
    return value


# --- attribute normalization (used in __post_init__ of frozen attrs) ---------------------------

def set_int_tuples(attrs, *names: str) -> None:
    """Attributes that TVM keeps as arrays: a single int becomes a 1-tuple, so that
    ``axis=1`` and ``axis=[1]`` build equal attributes. None stays None."""
    for name in names:
        value = getattr(attrs, name)
        if isinstance(value, int) and not isinstance(value, bool):
            object.__setattr__(attrs, name, (value,))
        elif isinstance(value, list):
            object.__setattr__(attrs, name, tuple(value))


# --- layouts ---------------------------------------------------------------------------------

class Layout:
    """A data layout such as ``NCHW``, ``NHWC``, ``OIHW`` or ``NCHW4c``.

    Upper-case letters are primal axes; ``<factor><lower-case letter>`` is a sub-axis
    that splits the primal axis of the same letter by ``factor``.
    """

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise TidlxTypeError(f"layout {name!r} is empty")
        self.name = name
        self.axes: List[Tuple[str, Optional[int]]] = []  # (letter, factor for sub-axes)
        i = 0
        while i < len(name):
            j = i
            while j < len(name) and name[j].isdigit():
                j += 1
            if j >= len(name) or not name[j].isalpha():
                raise TidlxTypeError(f"layout '{name}' is malformed at position {i}")
            letter = name[j]
            if j > i:
                if not letter.islower():
                    raise TidlxTypeError(f"layout '{name}': a factor must precede a lower-case sub-axis")
                factor = int(name[i:j])
                if factor <= 0:
                    raise TidlxTypeError(f"layout '{name}': sub-axis factor must be positive")
                self.axes.append((letter, factor))
            else:
                if letter.islower():
                    raise TidlxTypeError(f"layout '{name}': sub-axis '{letter}' needs a factor (e.g. 4{letter})")
                self.axes.append((letter, None))
            i = j + 1
        letters = [a for a, _ in self.axes]
        if len(set(letters)) != len(letters):
            raise TidlxTypeError(f"layout '{name}' repeats an axis")
        for letter, factor in self.axes:
            if factor is not None and letter.upper() not in letters:
                raise TidlxTypeError(f"layout '{name}': sub-axis '{letter}' has no primal axis '{letter.upper()}'")

    @property
    def ndim(self) -> int:
        return len(self.axes)

    @property
    def primal(self) -> str:
        return "".join(a for a, _ in self.axes if a.isupper())

    def index(self, letter: str) -> int:
        for i, (a, _) in enumerate(self.axes):
            if a == letter:
                return i
        return -1

    def has_split(self, letter: str) -> bool:
        return self.index(letter.lower()) >= 0

    def sub_factor(self, letter: str) -> int:
        i = self.index(letter.lower())
        return self.axes[i][1] if i >= 0 else 1

    def primal_sizes(self, shape: Sequence[int]) -> Dict[str, int]:
        """The size of each primal axis of a tensor of this layout."""
        if len(shape) != self.ndim:
            raise TidlxTypeError(f"layout '{self.name}' has {self.ndim} axes but the tensor has rank {len(shape)}")
        sizes = {}
        for (letter, factor), dim in zip(self.axes, shape):
            if factor is not None and dim != factor:
                raise TidlxTypeError(f"axis '{letter}' of layout '{self.name}' must have size {factor}, got {dim}")
            if letter.isupper():
                sizes[letter] = dim * self.sub_factor(letter)
        return sizes

    def shape_of(self, sizes: Dict[str, int]) -> Tuple[int, ...]:
        """The shape in this layout of a tensor with the given primal axis sizes."""
        shape = []
        for letter, factor in self.axes:
            if factor is not None:
                shape.append(factor)
                continue
            split = self.sub_factor(letter)
            if sizes[letter] % split:
                raise TidlxTypeError(f"axis {letter} of size {sizes[letter]} cannot be split by {split} "
                                     f"for layout '{self.name}'")
            shape.append(sizes[letter] // split)
        return tuple(shape)


def spatial_layout(name: str, what: str = "layout") -> Layout:
    """A layout with unsplit N, C, H and W axes (e.g. NCHW, NHWC), as 2-D ops require."""
    layout = Layout(name)
    for letter in "HW":
        if layout.index(letter) < 0 or layout.has_split(letter):
            raise TidlxTypeError(f"{what} '{name}' must have unsplit H and W axes")
    return layout
