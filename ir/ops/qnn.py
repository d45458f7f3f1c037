"""QNN ops with Relay's argument order: scales and zero points are tensor inputs after the data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import TidlxTypeError
from ..op import define_op
from ..types import TensorType
from ._rel import (broadcast_shapes, check_choice, check_dtype, normalize_axis, tensor_arg, tuple_arg)
from .nn import Conv2DAttrs, conv2d_rel, dense_rel, kernel_dims
from .transform import ConcatenateAttrs, concat_shapes

QUANT_DTYPES = ("int8", "uint8", "int16", "int32")
QUANT_INPUT_DTYPES = ("int8", "uint8", "int16", "int32")
CONV_DTYPES = ("int8", "uint8", "int16")
SCALE_DTYPES = ("float32",)
ZERO_POINT_DTYPES = ("int32",)


def quant_param(arg_types, i: int, what: str, dtypes, channels: Optional[int] = None) -> TensorType:
    """A scale or zero point: a scalar, or a vector of one value per channel (``channels``)."""
    t = tensor_arg(arg_types, i, what)
    check_dtype(t, dtypes, what)
    if t.ndim == 0 or t.shape == (1,):
        return t
    if t.ndim != 1:
        raise TidlxTypeError(f"{what} must be a scalar or a 1-D per-channel vector, got shape {t.shape}")
    if channels is None:
        raise TidlxTypeError(f"{what} must be a scalar here, got shape {t.shape}")
    if t.shape[0] != channels:
        raise TidlxTypeError(f"{what} has {t.shape[0]} values but the channel axis has {channels}")
    return t


def _channels(data: TensorType, axis: int, what: str = "axis") -> Optional[int]:
    if data.ndim == 0:
        return None
    return data.shape[normalize_axis(axis, data.ndim, what)]


# --- quantize / dequantize / requantize --------------------------------------------------------

@dataclass(frozen=True)
class QuantizeAttrs:
    out_dtype: str = "int8"
    axis: int = -1


def quantize_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    check_dtype(data, ("float32", "float16", "int32"), "data")
    channels = _channels(data, attrs.axis)
    quant_param(arg_types, 1, "output_scale", SCALE_DTYPES, channels)
    quant_param(arg_types, 2, "output_zero_point", ZERO_POINT_DTYPES, channels)
    check_choice(attrs.out_dtype, QUANT_DTYPES, "out_dtype")
    return TensorType(data.shape, attrs.out_dtype)


define_op("qnn.quantize", num_inputs=3, attrs=QuantizeAttrs, type_rel=quantize_rel,
            arg_names=("data", "output_scale", "output_zero_point"))


@dataclass(frozen=True)
class DequantizeAttrs:
    out_dtype: str = "float32"
    axis: int = -1


def dequantize_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    check_dtype(data, QUANT_INPUT_DTYPES, "data")
    channels = _channels(data, attrs.axis)
    quant_param(arg_types, 1, "input_scale", SCALE_DTYPES, channels)
    quant_param(arg_types, 2, "input_zero_point", ZERO_POINT_DTYPES, channels)
    check_choice(attrs.out_dtype, ("float32", "float16"), "out_dtype")
    return TensorType(data.shape, attrs.out_dtype)


define_op("qnn.dequantize", num_inputs=3, attrs=DequantizeAttrs, type_rel=dequantize_rel,
            arg_names=("data", "input_scale", "input_zero_point"))


@dataclass(frozen=True)
class RequantizeAttrs:
    axis: int = -1
    rounding: str = "None"
    compute_dtype: str = "None"
    out_dtype: str = "int8"


def requantize_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    check_dtype(data, QUANT_INPUT_DTYPES, "data")
    channels = _channels(data, attrs.axis)
    quant_param(arg_types, 1, "input_scale", SCALE_DTYPES, channels)
    quant_param(arg_types, 2, "input_zero_point", ZERO_POINT_DTYPES, channels)
    quant_param(arg_types, 3, "output_scale", SCALE_DTYPES, channels)
    quant_param(arg_types, 4, "output_zero_point", ZERO_POINT_DTYPES, channels)
    check_choice(attrs.rounding, ("None", "UPWARD", "TONEAREST"), "rounding")
    check_choice(attrs.compute_dtype, ("None", "int64", "float32", "float64"), "compute_dtype")
    check_choice(attrs.out_dtype, QUANT_DTYPES, "out_dtype")
    return TensorType(data.shape, attrs.out_dtype)


define_op("qnn.requantize", num_inputs=5, attrs=RequantizeAttrs, type_rel=requantize_rel,
            arg_names=("data", "input_scale", "input_zero_point", "output_scale", "output_zero_point"))


# --- qnn.conv2d, qnn.dense ---------------------------------------------------------------------

@dataclass(frozen=True)
class QnnConv2DAttrs(Conv2DAttrs):
    """nn.conv2d's attributes; QNN convolutions accumulate in int32 by default."""
    out_dtype: str = "int32"


def qnn_conv2d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    check_dtype(data, CONV_DTYPES, "data")
    check_dtype(weight, CONV_DTYPES, "weight")
    out = conv2d_rel(arg_types[:2], attrs)
    out_channels = kernel_dims(weight.shape, attrs.kernel_layout)[0]
    quant_param(arg_types, 2, "input_zero_point", ZERO_POINT_DTYPES)
    quant_param(arg_types, 3, "kernel_zero_point", ZERO_POINT_DTYPES, out_channels)
    quant_param(arg_types, 4, "input_scale", SCALE_DTYPES)
    quant_param(arg_types, 5, "kernel_scale", SCALE_DTYPES, out_channels)
    dtype = check_choice(attrs.out_dtype or "int32", ("int16", "int32"), "out_dtype")
    return TensorType(out.shape, dtype)


define_op("qnn.conv2d", num_inputs=6, attrs=QnnConv2DAttrs, type_rel=qnn_conv2d_rel,
            arg_names=("data", "weight", "input_zero_point", "kernel_zero_point", "input_scale", "kernel_scale"),
            pattern="opaque")


@dataclass(frozen=True)
class QnnDenseAttrs:
    units: Optional[int] = None
    out_dtype: str = "int32"


def qnn_dense_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    check_dtype(data, CONV_DTYPES, "data")
    check_dtype(weight, CONV_DTYPES, "weight")
    out = dense_rel(arg_types[:2], attrs)
    units = weight.shape[0]
    quant_param(arg_types, 2, "input_zero_point", ZERO_POINT_DTYPES)
    quant_param(arg_types, 3, "kernel_zero_point", ZERO_POINT_DTYPES, units)
    quant_param(arg_types, 4, "input_scale", SCALE_DTYPES)
    quant_param(arg_types, 5, "kernel_scale", SCALE_DTYPES, units)
    dtype = check_choice(attrs.out_dtype or "int32", ("int16", "int32"), "out_dtype")
    return TensorType(out.shape, dtype)


define_op("qnn.dense", num_inputs=6, attrs=QnnDenseAttrs, type_rel=qnn_dense_rel,
            arg_names=("data", "weight", "input_zero_point", "kernel_zero_point", "input_scale", "kernel_scale"))


# --- qnn.add / qnn.subtract / qnn.mul ---------------------------------------------------------

@dataclass(frozen=True)
class QnnBinaryAttrs:
    """TVM's BroadcastAttrs of QNN binary ops."""
    lhs_axis: int = -1
    rhs_axis: int = -1


def qnn_binary_rel(arg_types, attrs):
    lhs = tensor_arg(arg_types, 0, "lhs")
    rhs = tensor_arg(arg_types, 1, "rhs")
    check_dtype(lhs, QUANT_INPUT_DTYPES, "lhs")
    if rhs.dtype != lhs.dtype:
        raise TidlxTypeError(f"lhs has dtype {lhs.dtype} but rhs has {rhs.dtype}")
    shape = broadcast_shapes(lhs.shape, rhs.shape)
    lhs_c = _channels(lhs, attrs.lhs_axis, "lhs_axis")
    rhs_c = _channels(rhs, attrs.rhs_axis, "rhs_axis")
    quant_param(arg_types, 2, "lhs_scale", SCALE_DTYPES, lhs_c)
    quant_param(arg_types, 3, "lhs_zero_point", ZERO_POINT_DTYPES, lhs_c)
    quant_param(arg_types, 4, "rhs_scale", SCALE_DTYPES, rhs_c)
    quant_param(arg_types, 5, "rhs_zero_point", ZERO_POINT_DTYPES, rhs_c)
    quant_param(arg_types, 6, "output_scale", SCALE_DTYPES)
    quant_param(arg_types, 7, "output_zero_point", ZERO_POINT_DTYPES)
    return TensorType(shape, lhs.dtype)


for _name in ("qnn.add", "qnn.subtract", "qnn.mul"):
    define_op(_name, num_inputs=8, attrs=QnnBinaryAttrs, type_rel=qnn_binary_rel,
                arg_names=("lhs", "rhs", "lhs_scale", "lhs_zero_point", "rhs_scale", "rhs_zero_point",
                           "output_scale", "output_zero_point"))


# --- qnn.concatenate --------------------------------------------------------------------------

def qnn_concatenate_rel(arg_types, attrs):
    data = tuple_arg(arg_types, 0, "data")
    scales = tuple_arg(arg_types, 1, "input_scales")
    zero_points = tuple_arg(arg_types, 2, "input_zero_points")
    n = len(data.fields)
    if n == 0:
        raise TidlxTypeError("needs at least one tensor")
    for what, tup in (("input_scales", scales), ("input_zero_points", zero_points)):
        if len(tup.fields) != n:
            raise TidlxTypeError(f"{what} has {len(tup.fields)} entries for {n} tensors")
    for k in range(n):
        quant_param(scales.fields, k, f"input_scales[{k}]", SCALE_DTYPES)
        quant_param(zero_points.fields, k, f"input_zero_points[{k}]", ZERO_POINT_DTYPES)
    quant_param(arg_types, 3, "output_scale", SCALE_DTYPES)
    quant_param(arg_types, 4, "output_zero_point", ZERO_POINT_DTYPES)
    dtype = data.fields[0].dtype
    check_dtype(data.fields[0], QUANT_INPUT_DTYPES, "data")
    for k, t in enumerate(data.fields):
        if t.dtype != dtype:
            raise TidlxTypeError(f"tensor {k} has dtype {t.dtype} but tensor 0 has {dtype}")
    return TensorType(concat_shapes([t.shape for t in data.fields], attrs.axis), dtype)


define_op("qnn.concatenate", num_inputs=5, attrs=ConcatenateAttrs, type_rel=qnn_concatenate_rel,
            arg_names=("data", "input_scales", "input_zero_points", "output_scale", "output_zero_point"))
