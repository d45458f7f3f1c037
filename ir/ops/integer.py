"""Integer ops of dynamically quantized models (ONNX's ConvInteger, MatMulInteger and
DynamicQuantizeLinear), with ONNX's semantics. Zero points have the dtype of the tensor they
belong to (uint8 or int8), as in ONNX.

* ``nn.conv2d_integer(data, weight, input_zero_point, kernel_zero_point)``: the exact int32 sums
  of (data - input_zero_point) * (weight - kernel_zero_point); nn.conv2d's attributes. The input
  zero point is one value, the kernel's one value or one per output channel.
* ``nn.matmul_integer(a, b, a_zero_point, b_zero_point)``: numpy.matmul of (a - a_zero_point)
  and (b - b_zero_point) in int32. A zero point is one value, or one per row of ``a`` / per
  column of ``b``.
* ``dynamic_quantize_linear(data)`` -> (y uint8, y_scale float32 scalar, y_zero_point uint8 scalar):
  ``data`` quantized with a scale and zero point computed from its own range (extended to hold 0).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import TidlxTypeError
from ..op import define_op
from ..types import TensorType, TupleType
from ._rel import broadcast_shapes, check_choice, check_dtype, tensor_arg
from .nn import Conv2DAttrs, conv2d_rel, kernel_dims

INTEGER_DTYPES = ("uint8", "int8")


def _zero_point(arg_types, i: int, what: str, dtype: str, count=None, per_what: str = "") -> TensorType:
    """A zero point: one value (shape () or (1,)), or a vector of ``count`` values."""
    t = tensor_arg(arg_types, i, what)
    if t.dtype != dtype:
        raise TidlxTypeError(f"{what} must have the dtype of its tensor ({dtype}), got {t.dtype}")
    if t.ndim == 0 or t.shape == (1,):
        return t
    if t.ndim == 1 and count is not None and t.shape[0] == count:
        return t
    extra = f" or a vector of {count} values ({per_what})" if count is not None else ""
    raise TidlxTypeError(f"{what} must be a single value{extra}, got shape {t.shape}")


# --- nn.conv2d_integer ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Conv2DIntegerAttrs(Conv2DAttrs):
    """nn.conv2d's attributes; the sums are int32."""
    out_dtype: str = "int32"


def conv2d_integer_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    check_dtype(data, INTEGER_DTYPES, "data")
    check_dtype(weight, INTEGER_DTYPES, "weight")
    check_choice(attrs.out_dtype or "int32", ("int32",), "out_dtype")
    out = conv2d_rel(arg_types[:2], attrs)
    out_channels = kernel_dims(weight.shape, attrs.kernel_layout)[0]
    _zero_point(arg_types, 2, "input_zero_point", data.dtype)
    _zero_point(arg_types, 3, "kernel_zero_point", weight.dtype, out_channels, "one per output channel")
    return TensorType(out.shape, "int32")


define_op("nn.conv2d_integer", num_inputs=4, attrs=Conv2DIntegerAttrs, type_rel=conv2d_integer_rel,
          arg_names=("data", "weight", "input_zero_point", "kernel_zero_point"))


# --- nn.matmul_integer ---------------------------------------------------------------------------

def matmul_shape(a: tuple, b: tuple) -> tuple:
    """numpy.matmul's result shape (1-D operands as a row / a column, dropped from the result)."""
    if not a or not b:
        raise TidlxTypeError(f"operands must have rank >= 1, got shapes {a} and {b}")
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        raise TidlxTypeError(f"shapes {tuple(a)} and {tuple(b)} do not multiply ({a2[-1]} != {b2[-2]})")
    out = broadcast_shapes(a2[:-2], b2[:-2]) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def matmul_integer_rel(arg_types, attrs):
    a = tensor_arg(arg_types, 0, "a")
    b = tensor_arg(arg_types, 1, "b")
    check_dtype(a, INTEGER_DTYPES, "a")
    check_dtype(b, INTEGER_DTYPES, "b")
    shape = matmul_shape(a.shape, b.shape)
    rows = a.shape[-2] if a.ndim >= 2 else None
    cols = b.shape[-1] if b.ndim >= 2 else None
    _zero_point(arg_types, 2, "a_zero_point", a.dtype, rows, "one per row of a")
    _zero_point(arg_types, 3, "b_zero_point", b.dtype, cols, "one per column of b")
    return TensorType(shape, "int32")


define_op("nn.matmul_integer", num_inputs=4, type_rel=matmul_integer_rel,
          arg_names=("a", "b", "a_zero_point", "b_zero_point"))


# --- dynamic_quantize_linear ---------------------------------------------------------------------

def dynamic_quantize_linear_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    check_dtype(data, ("float32",), "data")
    return TupleType((TensorType(data.shape, "uint8"), TensorType((), "float32"), TensorType((), "uint8")))


define_op("dynamic_quantize_linear", num_inputs=1, type_rel=dynamic_quantize_linear_rel, arg_names=("data",))
