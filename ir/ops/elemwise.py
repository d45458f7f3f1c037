"""Element-wise ops: unary math, binary broadcasting arithmetic, comparisons, logic, where, cast."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import TidlxTypeError
from ..op import define_op
from ..types import TensorType
from ._rel import broadcast_shapes, check_dtype, check_dtype_name, normalize_axis, same_dtype, tensor_arg


def unary_rel(arg_types, attrs):
    return tensor_arg(arg_types, 0, "data")


UNARY = ("nn.relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "erf", "negative", "abs",
         "copy", "zeros_like", "ones_like", "floor", "ceil", "round", "sign", "trunc", "sin", "cos")
for _name in UNARY:
    define_op(_name, num_inputs=1, type_rel=unary_rel, arg_names=("data",), pattern="elemwise")


def binary_rel(arg_types, attrs):
    a = tensor_arg(arg_types, 0, "lhs")
    b = tensor_arg(arg_types, 1, "rhs")
    dtype = same_dtype(a, b)
    return TensorType(broadcast_shapes(a.shape, b.shape), dtype)


def compare_rel(arg_types, attrs):
    t = binary_rel(arg_types, attrs)
    return TensorType(t.shape, "bool")


def logical_binary_rel(arg_types, attrs):
    t = binary_rel(arg_types, attrs)
    check_dtype(tensor_arg(arg_types, 0, "lhs"), ("bool",), "lhs")
    return t


def logical_not_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    check_dtype(data, ("bool",), "data")
    return data


BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "floor_divide", "mod",
          "floor_mod")
COMPARE = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
for _name in BINARY:
    define_op(_name, num_inputs=2, type_rel=binary_rel, arg_names=("lhs", "rhs"), pattern="broadcast")
for _name in COMPARE:
    define_op(_name, num_inputs=2, type_rel=compare_rel, arg_names=("lhs", "rhs"), pattern="broadcast")
for _name in ("logical_and", "logical_or", "logical_xor"):
    define_op(_name, num_inputs=2, type_rel=logical_binary_rel, arg_names=("lhs", "rhs"),
                pattern="broadcast")
define_op("logical_not", num_inputs=1, type_rel=logical_not_rel, arg_names=("data",), pattern="elemwise")


@dataclass(frozen=True)
class LeakyReluAttrs:
    alpha: float = 0.25


define_op("nn.leaky_relu", num_inputs=1, attrs=LeakyReluAttrs, type_rel=unary_rel, arg_names=("data",),
            pattern="elemwise")


@dataclass(frozen=True)
class PReluAttrs:
    axis: int = 1


def prelu_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    alpha = tensor_arg(arg_types, 1, "alpha")
    axis = normalize_axis(attrs.axis, data.ndim)
    if alpha.shape != (data.shape[axis],):
        raise TidlxTypeError(f"alpha must have shape ({data.shape[axis]},) (the size of axis {attrs.axis}), "
                             f"got {alpha.shape}")
    same_dtype(data, alpha)
    return data


define_op("nn.prelu", num_inputs=2, attrs=PReluAttrs, type_rel=prelu_rel, arg_names=("data", "alpha"),
            pattern="broadcast")


@dataclass(frozen=True)
class ClipAttrs:
    a_min: float = 0.0
    a_max: float = 0.0


def clip_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    if attrs.a_min > attrs.a_max:
        raise TidlxTypeError(f"a_min={attrs.a_min} is greater than a_max={attrs.a_max}")
    return data


define_op("clip", num_inputs=1, attrs=ClipAttrs, type_rel=clip_rel, arg_names=("data",), pattern="elemwise")


@dataclass(frozen=True)
class CastAttrs:
    dtype: str = "float32"


def cast_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    return TensorType(data.shape, check_dtype_name(attrs.dtype, "dtype"))


define_op("cast", num_inputs=1, attrs=CastAttrs, type_rel=cast_rel, arg_names=("data",), pattern="elemwise")


def where_rel(arg_types, attrs):
    cond = tensor_arg(arg_types, 0, "condition")
    x = tensor_arg(arg_types, 1, "x")
    y = tensor_arg(arg_types, 2, "y")
    dtype = same_dtype(x, y)
    shape = broadcast_shapes(broadcast_shapes(cond.shape, x.shape), y.shape)
    return TensorType(shape, dtype)


define_op("where", num_inputs=3, type_rel=where_rel, arg_names=("condition", "x", "y"), pattern="broadcast")
