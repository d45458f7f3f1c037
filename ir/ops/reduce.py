"""Reductions: sum/mean/max/min/prod/all/any, variance, argmax/argmin, and topk."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import TidlxTypeError
from ..op import define_op
from ..types import TensorType, TupleType
from ._rel import (INDEX_DTYPES, check_choice, check_dtype, check_dtype_name, int_tuple, normalize_axes,
                   normalize_axis, set_int_tuples, tensor_arg)


@dataclass(frozen=True)
class ReduceAttrs:
    axis: Optional[tuple] = None
    keepdims: bool = False
    exclude: bool = False

    def __post_init__(self):
        set_int_tuples(self, "axis")


@dataclass(frozen=True)
class ArgReduceAttrs:
    axis: Optional[tuple] = None
    keepdims: bool = False
    select_last_index: bool = False
    exclude: bool = False

    def __post_init__(self):
        set_int_tuples(self, "axis")


@dataclass(frozen=True)
class VarianceAttrs:
    axis: Optional[tuple] = None
    keepdims: bool = False
    exclude: bool = False
    unbiased: bool = False

    def __post_init__(self):
        set_int_tuples(self, "axis")


def reduced_axes(ndim: int, attrs) -> tuple:
    """The axes a reduction removes: all when ``axis`` is None or empty (TVM's rule, ``exclude``
    then does not apply), else the listed axes or, with ``exclude``, the others."""
    if attrs.axis is None or len(attrs.axis) == 0:
        return tuple(range(ndim))
    axes = normalize_axes(int_tuple(attrs.axis, "axis"), ndim)
    if attrs.exclude:
        axes = tuple(a for a in range(ndim) if a not in axes)
    return tuple(sorted(axes))


def reduce_shape(shape, attrs) -> tuple:
    axes = reduced_axes(len(shape), attrs)
    if attrs.keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def reduce_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    return TensorType(reduce_shape(data.shape, attrs), data.dtype)


for _name in ("sum", "mean", "max", "min", "prod"):
    define_op(_name, num_inputs=1, attrs=ReduceAttrs, type_rel=reduce_rel, arg_names=("data",),
                pattern="comm_reduce")


def logical_reduce_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    check_dtype(data, ("bool",), "data")
    return TensorType(reduce_shape(data.shape, attrs), "bool")


for _name in ("all", "any"):
    define_op(_name, num_inputs=1, attrs=ReduceAttrs, type_rel=logical_reduce_rel, arg_names=("data",),
                pattern="comm_reduce")


def arg_reduce_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    return TensorType(reduce_shape(data.shape, attrs), "int32")


for _name in ("argmax", "argmin"):
    define_op(_name, num_inputs=1, attrs=ArgReduceAttrs, type_rel=arg_reduce_rel, arg_names=("data",),
                pattern="comm_reduce")


def variance_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    mean = tensor_arg(arg_types, 1, "mean")
    keep = VarianceAttrs(attrs.axis, True, attrs.exclude)
    kept_shape = reduce_shape(data.shape, keep)
    if mean.shape != kept_shape and mean.shape != reduce_shape(data.shape, attrs):
        raise TidlxTypeError(f"mean must have the reduced shape {kept_shape}, got {mean.shape}")
    return TensorType(reduce_shape(data.shape, attrs), data.dtype)


define_op("variance", num_inputs=2, attrs=VarianceAttrs, type_rel=variance_rel, arg_names=("data", "mean"),
            pattern="comm_reduce")


# --- topk ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TopKAttrs:
    """Relay's topk attributes, plus ``sorted`` (ONNX's: False leaves the order of the k results
    open; TIDL's TopK layer refuses it, so the IR keeps it)."""

    k: int = 1
    axis: int = -1
    ret_type: str = "both"
    is_ascend: bool = False
    dtype: str = "int32"
    sorted: bool = True


TOPK_RET_TYPES = ("both", "values", "indices")


def topk_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    check_choice(attrs.ret_type, TOPK_RET_TYPES, "ret_type")
    check_dtype_name(attrs.dtype, "dtype", INDEX_DTYPES)
    axis = normalize_axis(attrs.axis, data.ndim)
    k = attrs.k
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= data.shape[axis]:
        raise TidlxTypeError(f"k={k!r} must be between 1 and the size {data.shape[axis]} of axis {axis}")
    shape = tuple(k if i == axis else d for i, d in enumerate(data.shape))
    values, indices = TensorType(shape, data.dtype), TensorType(shape, attrs.dtype)
    if attrs.ret_type == "values":
        return values
    if attrs.ret_type == "indices":
        return indices
    return TupleType((values, indices))


define_op("topk", num_inputs=1, attrs=TopKAttrs, type_rel=topk_rel, arg_names=("data",))
