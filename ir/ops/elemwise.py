"""Element-wise ops: unary math, binary broadcasting arithmetic, comparisons, where, cast."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import TidlxTypeError
from ..op import register_op
from ..types import TensorType
from ._rel import broadcast_shapes, same_dtype, tensor_arg


def unary_rel(arg_types, attrs, op="unary"):
    return tensor_arg(arg_types, 0, op)


UNARY = ("nn.relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "erf", "negative", "abs",
         "copy", "zeros_like", "ones_like", "floor", "ceil", "round", "sign")
for _name in UNARY:
    register_op(_name, num_inputs=1, type_rel=unary_rel, arg_names=("data",), pattern="elemwise")


def binary_rel(arg_types, attrs, op="binary"):
    a = tensor_arg(arg_types, 0, op, "lhs")
    b = tensor_arg(arg_types, 1, op, "rhs")
    dtype = same_dtype(op, a, b)
    return TensorType(broadcast_shapes(a.shape, b.shape, op), dtype)


def compare_rel(arg_types, attrs, op="compare"):
    t = binary_rel(arg_types, attrs, op)
    return TensorType(t.shape, "bool")


BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "floor_divide", "mod")
COMPARE = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
for _name in BINARY:
    register_op(_name, num_inputs=2, type_rel=binary_rel, arg_names=("lhs", "rhs"), pattern="broadcast")
for _name in COMPARE:
    register_op(_name, num_inputs=2, type_rel=compare_rel, arg_names=("lhs", "rhs"), pattern="broadcast")


@dataclass(frozen=True)
class LeakyReluAttrs:
    alpha: float = 0.25


register_op("nn.leaky_relu", num_inputs=1, attrs=LeakyReluAttrs, type_rel=unary_rel, arg_names=("data",))


@dataclass(frozen=True)
class PReluAttrs:
    axis: int = 1


def prelu_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "nn.prelu", "data")
    alpha = tensor_arg(arg_types, 1, "nn.prelu", "alpha")
    axis = attrs.axis % max(data.ndim, 1)
    if alpha.shape != (data.shape[axis],):
        raise TidlxTypeError(f"nn.prelu: alpha must have shape ({data.shape[axis]},), got {alpha.shape}")
    return data


register_op("nn.prelu", num_inputs=2, attrs=PReluAttrs, type_rel=prelu_rel, arg_names=("data", "alpha"))


@dataclass(frozen=True)
class ClipAttrs:
    a_min: float = 0.0
    a_max: float = 0.0


register_op("clip", num_inputs=1, attrs=ClipAttrs, type_rel=unary_rel, arg_names=("data",))


@dataclass(frozen=True)
class CastAttrs:
    dtype: str = "float32"


def cast_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "cast")
    return TensorType(data.shape, attrs.dtype)


register_op("cast", num_inputs=1, attrs=CastAttrs, type_rel=cast_rel, arg_names=("data",))


def where_rel(arg_types, attrs):
    cond = tensor_arg(arg_types, 0, "where", "condition")
    x = tensor_arg(arg_types, 1, "where", "x")
    y = tensor_arg(arg_types, 2, "where", "y")
    dtype = same_dtype("where", x, y)
    shape = broadcast_shapes(broadcast_shapes(cond.shape, x.shape, "where"), y.shape, "where")
    return TensorType(shape, dtype)


register_op("where", num_inputs=3, type_rel=where_rel, arg_names=("condition", "x", "y"))
