"""QNN ops with Relay's integer semantics (what TVM's QNN canonicalization lowers them to).

* quantize:   clip(round_half_to_even(x / scale) + zp)            (float32 division)
* dequantize: (x - zp) * scale                                    (float32)
* requantize: TVM's fixed-point multiply in int64: the multiplier in_scale/out_scale (double)
  becomes a 31-bit significand and a shift; rounding "UPWARD" (also TVM's default "None") adds
  half before the shift, "TONEAREST" rounds halves away from zero. compute_dtype float32/float64
  scales in floats and rounds half to even.
* conv2d / dense: exact integer sums of (x - zp_x) * (w - zp_w); padding is the input zero point.
* add / subtract / mul / concatenate: inputs requantized to the output parameters in int32
  (TVM's canonical forms), then the integer op, the output zero point and a saturating cast.
"""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._common import out_dtype
from .op_conv import conv2d as _float_conv2d


def _param(value: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """A scale or zero point, shaped to broadcast along ``axis`` when it is per channel."""
    value = np.asarray(value)
    if value.ndim == 0 or value.size == 1:
        return value.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = value.shape[0]
    return value.reshape(shape)


def _saturate(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(x, info.min, info.max).astype(dtype)


def fixed_point_multiplier(multiplier: np.ndarray):
    """TVM's GetFixedPointMultiplierShift: (significand as Q31 int, exponent), elementwise."""
    multiplier = np.asarray(multiplier, np.float64)
    mantissa, exponent = np.frexp(multiplier)
    significand = np.floor(mantissa * float(1 << 31) + 0.5).astype(np.int64)  # std::round, positive
    overflow = significand == (1 << 31)
    significand = np.where(overflow, significand // 2, significand)
    exponent = np.where(overflow, exponent + 1, exponent).astype(np.int64)
    zero = multiplier == 0
    return np.where(zero, 0, significand), np.where(zero, 0, exponent)


def fixed_point_multiply(x: np.ndarray, multiplier: np.ndarray, rounding: str) -> np.ndarray:
    """round(x * multiplier) the way TVM's FixedPointMultiply computes it, in int64."""
    significand, exponent = fixed_point_multiplier(multiplier)
    left = np.maximum(exponent, 0)
    total_right = np.maximum(-exponent, 0) + 31
    t = x.astype(np.int64)
    if np.any(left):
        t = np.left_shift(t, left)
    t = t * significand
    # Shifts of 63 or more leave nothing of a product below 2^62: the result is 0.
    too_far = total_right >= 63
    shift = np.minimum(total_right, 62)
    pos = np.left_shift(np.int64(1), shift - 1)
    if rounding == "TONEAREST":
        t = t + np.where(t >= 0, pos, pos - 1)
    else:  # "UPWARD", and TVM's default "None"
        t = t + pos
    out = np.right_shift(t, shift)
    if np.any(too_far):
        out = np.where(too_far, 0, out)
    return out


def requantize_values(x, in_scale, in_zp, out_scale, out_zp, axis, rounding="None", compute_dtype="None"):
    """Requantized values (int64, before the saturating cast), Relay's qnn.requantize."""
    ndim = max(x.ndim, 1)
    in_scale_v = _param(in_scale, axis, ndim).astype(np.float32)
    out_scale_v = _param(out_scale, axis, ndim).astype(np.float32)
    in_zp_v = _param(in_zp, axis, ndim).astype(np.int64)
    out_zp_v = _param(out_zp, axis, ndim).astype(np.int64)
    centered = x.astype(np.int64) - in_zp_v
    if compute_dtype in ("float32", "float64"):
        fdt = np.dtype(compute_dtype)
        multiplier = (in_scale_v.astype(np.float64) / out_scale_v.astype(np.float64)).astype(fdt)
        scaled = np.rint(centered.astype(fdt) * multiplier).astype(np.int64)
    else:
        if np.array_equal(in_scale_v, out_scale_v) and in_scale_v.shape == out_scale_v.shape:
            scaled = centered
        else:
            multiplier = in_scale_v.astype(np.float64) / out_scale_v.astype(np.float64)
            scaled = fixed_point_multiply(centered, multiplier, rounding)
    return scaled + out_zp_v


@kernel("qnn.quantize")
def quantize(args, attrs, out_type):
    x, scale, zp = args
    dtype = out_dtype(out_type)
    ndim = max(x.ndim, 1)
    xf = x.astype(np.float32, copy=False) if x.dtype != np.float16 else x.astype(np.float32)
    q = np.rint(xf / _param(scale, attrs.axis, ndim).astype(np.float32))
    q = q + _param(zp, attrs.axis, ndim).astype(np.float32)
    info = np.iinfo(dtype)
    return np.clip(q, info.min, info.max).astype(dtype)


@kernel("qnn.dequantize")
def dequantize(args, attrs, out_type):
    x, scale, zp = args
    ndim = max(x.ndim, 1)
    centered = x.astype(np.int32) - _param(zp, attrs.axis, ndim).astype(np.int32)
    res = centered.astype(np.float32) * _param(scale, attrs.axis, ndim).astype(np.float32)
    return res.astype(out_dtype(out_type), copy=False)


@kernel("qnn.requantize")
def requantize(args, attrs, out_type):
    x, in_scale, in_zp, out_scale, out_zp = args
    values = requantize_values(x, in_scale, in_zp, out_scale, out_zp, attrs.axis, attrs.rounding,
                               attrs.compute_dtype)
    return _saturate(values, out_dtype(out_type))


@kernel("qnn.conv2d")
def qnn_conv2d(args, attrs, out_type):
    x, w, x_zp, w_zp = args[:4]
    o_axis = attrs.kernel_layout.index("O")
    # Shifting by the zero points first makes zero padding equal to padding with the input zero point.
    xs = x.astype(np.float64) - float(np.asarray(x_zp).reshape(-1)[0])
    ws = w.astype(np.float64) - _param(w_zp, o_axis, w.ndim).astype(np.float64)
    return _float_conv2d([xs, ws], attrs, out_type)


@kernel("qnn.dense")
def qnn_dense(args, attrs, out_type):
    x, w, x_zp, w_zp = args[:4]
    xs = x.astype(np.float64) - float(np.asarray(x_zp).reshape(-1)[0])
    ws = w.astype(np.float64) - _param(w_zp, 0, 2).astype(np.float64)
    res = np.rint(np.matmul(xs, ws.T))
    return res.astype(out_dtype(out_type))


def _requantize_or_upcast(x, scale, zp, out_scale, out_zp, axis):
    same = np.array_equal(np.asarray(scale), np.asarray(out_scale)) and \
        np.array_equal(np.asarray(zp), np.asarray(out_zp))
    if same:
        return x.astype(np.int64)
    return np.clip(requantize_values(x, scale, zp, out_scale, out_zp, axis), -2**31, 2**31 - 1)


def _qnn_add_sub(args, attrs, out_type, sign):
    lhs, rhs, ls, lz, rs, rz, os_, oz = args
    a = _requantize_or_upcast(lhs, ls, lz, os_, oz, attrs.lhs_axis)
    b = _requantize_or_upcast(rhs, rs, rz, os_, oz, attrs.rhs_axis)
    zp = np.asarray(oz).astype(np.int64).reshape(())
    res = a + b - zp if sign > 0 else a - b + zp
    return _saturate(res, out_dtype(out_type))


@kernel("qnn.add")
def qnn_add(args, attrs, out_type):
    return _qnn_add_sub(args, attrs, out_type, +1)


@kernel("qnn.subtract")
def qnn_subtract(args, attrs, out_type):
    return _qnn_add_sub(args, attrs, out_type, -1)


@kernel("qnn.mul")
def qnn_mul(args, attrs, out_type):
    lhs, rhs, ls, lz, rs, rz, os_, oz = args
    a = lhs.astype(np.int64) - _param(lz, attrs.lhs_axis, max(lhs.ndim, 1)).astype(np.int64)
    b = rhs.astype(np.int64) - _param(rz, attrs.rhs_axis, max(rhs.ndim, 1)).astype(np.int64)
    product = np.clip(a * b, -2**31, 2**31 - 1)
    # TVM multiplies the two input scales in float32 and requantizes the int32 product.
    new_scale = np.asarray(ls, np.float32).reshape(-1)[0] * np.asarray(rs, np.float32).reshape(-1)[0]
    values = requantize_values(product, np.float32(new_scale), np.int32(0), os_, oz, -1)
    return _saturate(values, out_dtype(out_type))


@kernel("qnn.concatenate")
def qnn_concatenate(args, attrs, out_type):
    data, scales, zps, out_scale, out_zp = args
    dtype = out_dtype(out_type)
    parts = []
    for x, s, z in zip(data, scales, zps):
        if np.array_equal(np.asarray(s), np.asarray(out_scale)) and np.array_equal(np.asarray(z), np.asarray(out_zp)):
            parts.append(x)
        else:
            parts.append(_saturate(requantize_values(x, s, z, out_scale, out_zp, -1), dtype))
    return np.concatenate(parts, axis=attrs.axis)
