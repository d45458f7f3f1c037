"""QNN ops with Relay's integer semantics (emulator/reference/op_qnn.py), in int64 Relax arithmetic.

Scales and zero points must be constants (as every QNN importer gives them): the fixed-point
multiplier and shift of a requantize (TVM's GetFixedPointMultiplierShift) are computed at
lowering time by the reference's own function, and the TVM code does the integer multiply,
rounding add and arithmetic shift.
"""

from __future__ import annotations

import numpy as np

from ....emulator.reference.op_qnn import fixed_point_multiplier
from ....ir.expr import Constant, Tuple
from ..facet import lowers
from ._layout import permute_from, permute_to


def _constant(ctx, call, index: int, field=None) -> np.ndarray:
    arg = call.args[index]
    if field is not None:
        arg = arg.fields[field] if isinstance(arg, Tuple) else None
    if not isinstance(arg, Constant):
        ctx.fail(f"argument {index}{'' if field is None else f'[{field}]'} (a scale or zero point) must be a "
                 f"constant to lower to TVM")
    return np.asarray(arg.data)


def _param_shape(value: np.ndarray, axis: int, ndim: int):
    """A scale or zero point reshaped to broadcast along ``axis`` (per channel) or to a scalar."""
    if value.ndim == 0 or value.size == 1:
        return value.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = value.shape[0]
    return value.reshape(shape)


def _saturate(ctx, x, dtype: str):
    info = np.iinfo(dtype)
    clipped = ctx.emit(ctx.op.clip(x, int(info.min), int(info.max)))
    return ctx.emit(ctx.op.astype(clipped, dtype))


def _fixed_point_multiply(ctx, t, multiplier: np.ndarray, rounding: str):
    """round(t * multiplier) as TVM's FixedPointMultiply computes it (int64 ``t``)."""
    op = ctx.op
    significand, exponent = fixed_point_multiplier(multiplier)
    left = np.maximum(exponent, 0)
    total_right = np.maximum(-exponent, 0) + 31
    if np.any(left):
        t = ctx.emit(op.left_shift(t, ctx.const(left, "int64")))
    t = ctx.emit(op.multiply(t, ctx.const(significand, "int64")))
    too_far = total_right >= 63
    shift = np.minimum(total_right, 62)
    pos = np.left_shift(np.int64(1), shift - 1)
    if rounding == "TONEAREST":
        nonneg = ctx.emit(op.greater_equal(t, ctx.scalar(0, "int64")))
        t = ctx.emit(op.add(t, ctx.emit(op.where(nonneg, ctx.const(pos, "int64"), ctx.const(pos - 1, "int64")))))
    else:  # "UPWARD", and TVM's default "None"
        t = ctx.emit(op.add(t, ctx.const(pos, "int64")))
    out = ctx.emit(op.right_shift(t, ctx.const(shift, "int64")))
    if np.any(too_far):
        out = ctx.emit(op.where(ctx.const(too_far, "bool"), ctx.scalar(0, "int64"), out))
    return out


def _requantize(ctx, x, in_scale, in_zp, out_scale, out_zp, axis, rounding="None", compute_dtype="None"):
    """The requantized values in int64, before the saturating cast (reference requantize_values)."""
    op = ctx.op
    ndim = max(len(ctx.shape(x)), 1)
    in_scale_v = _param_shape(in_scale, axis, ndim).astype(np.float32)
    out_scale_v = _param_shape(out_scale, axis, ndim).astype(np.float32)
    in_zp_v = _param_shape(in_zp, axis, ndim).astype(np.int64)
    out_zp_v = _param_shape(out_zp, axis, ndim).astype(np.int64)
    centered = ctx.emit(op.subtract(ctx.emit(op.astype(x, "int64")), ctx.const(in_zp_v, "int64")))
    if compute_dtype in ("float32", "float64"):
        multiplier = (in_scale_v.astype(np.float64) / out_scale_v.astype(np.float64)).astype(compute_dtype)
        scaled = ctx.emit(op.multiply(ctx.emit(op.astype(centered, compute_dtype)), ctx.const(multiplier, compute_dtype)))
        scaled = ctx.emit(op.astype(ctx.emit(op.round(scaled)), "int64"))
    elif np.array_equal(in_scale_v, out_scale_v) and in_scale_v.shape == out_scale_v.shape:
        scaled = centered
    else:
        multiplier = in_scale_v.astype(np.float64) / out_scale_v.astype(np.float64)
        scaled = _fixed_point_multiply(ctx, centered, multiplier, rounding)
    return ctx.emit(op.add(scaled, ctx.const(out_zp_v, "int64")))


@lowers("qnn.quantize")
def quantize(ctx, call, args):
    x = args[0]
    op = ctx.op
    ndim = max(len(ctx.shape(x)), 1)
    scale = _param_shape(_constant(ctx, call, 1), call.attrs.axis, ndim).astype(np.float32)
    zp = _param_shape(_constant(ctx, call, 2), call.attrs.axis, ndim).astype(np.float32)
    xf = ctx.emit(op.astype(x, "float32")) if ctx.dtype(x) != "float32" else x
    q = ctx.emit(op.round(ctx.emit(op.divide(xf, ctx.const(scale, "float32")))))
    q = ctx.emit(op.add(q, ctx.const(zp, "float32")))
    info = np.iinfo(call.checked_type.dtype)
    return op.astype(ctx.emit(op.clip(q, float(info.min), float(info.max))), call.checked_type.dtype)


@lowers("qnn.dequantize")
def dequantize(ctx, call, args):
    x = args[0]
    op = ctx.op
    ndim = max(len(ctx.shape(x)), 1)
    scale = _param_shape(_constant(ctx, call, 1), call.attrs.axis, ndim).astype(np.float32)
    zp = _param_shape(_constant(ctx, call, 2), call.attrs.axis, ndim).astype(np.int32)
    centered = ctx.emit(op.subtract(ctx.emit(op.astype(x, "int32")), ctx.const(zp, "int32")))
    res = ctx.emit(op.multiply(ctx.emit(op.astype(centered, "float32")), ctx.const(scale, "float32")))
    return op.astype(res, call.checked_type.dtype) if call.checked_type.dtype != "float32" else res


@lowers("qnn.requantize")
def requantize(ctx, call, args):
    a = call.attrs
    values = _requantize(ctx, args[0], _constant(ctx, call, 1), _constant(ctx, call, 2), _constant(ctx, call, 3),
                         _constant(ctx, call, 4), a.axis, a.rounding, a.compute_dtype)
    return _saturate(ctx, values, call.checked_type.dtype)


def _shifted(ctx, x, zp: np.ndarray):
    """``x - zp`` in int32 (exact: 8/16-bit operands)."""
    return ctx.emit(ctx.op.subtract(ctx.emit(ctx.op.astype(x, "int32")), ctx.const(zp.astype(np.int32), "int32")))


@lowers("qnn.conv2d")
def qnn_conv2d(ctx, call, args):
    """Exact integer sums of (x - zp_x) * (w - zp_w): shifting first makes zero padding the input
    zero point."""
    from ....ir.ops._rel import expand_padding

    a = call.attrs
    x_zp = _constant(ctx, call, 2).reshape(-1)[:1].reshape(())
    w_zp = _constant(ctx, call, 3)
    o_axis = a.kernel_layout.index("O")
    x = permute_to(ctx, _shifted(ctx, args[0], x_zp), a.data_layout, "NCHW")
    w = permute_to(ctx, _shifted(ctx, args[1], _param_shape(w_zp, o_axis, 4)), a.kernel_layout, "OIHW")
    out = ctx.emit(ctx.op.nn.conv2d(x, w, strides=a.strides, padding=expand_padding(a.padding), dilation=a.dilation,
                                    groups=a.groups, out_dtype="int32"))
    out = permute_from(ctx, out, "NCHW", a.out_layout or a.data_layout)
    return ctx.op.astype(out, call.checked_type.dtype) if call.checked_type.dtype != "int32" else out


@lowers("qnn.dense")
def qnn_dense(ctx, call, args):
    x_zp = _constant(ctx, call, 2).reshape(-1)[:1].reshape(())
    w_zp = _param_shape(_constant(ctx, call, 3), 0, 2)
    x = _shifted(ctx, args[0], x_zp)
    w = _shifted(ctx, args[1], w_zp)
    out = ctx.emit(ctx.op.matmul(x, ctx.emit(ctx.op.permute_dims(w, [1, 0])), out_dtype="int32"))
    return ctx.op.astype(out, call.checked_type.dtype) if call.checked_type.dtype != "int32" else out


def _requantize_or_upcast(ctx, x, scale, zp, out_scale, out_zp, axis):
    if np.array_equal(scale, out_scale) and np.array_equal(zp, out_zp):
        return ctx.emit(ctx.op.astype(x, "int64"))
    values = _requantize(ctx, x, scale, zp, out_scale, out_zp, axis)
    return ctx.emit(ctx.op.clip(values, -2 ** 31, 2 ** 31 - 1))


def _binary_params(ctx, call):
    return [_constant(ctx, call, i) for i in range(2, 8)]


def _add_sub(ctx, call, args, sign):
    ls, lz, rs, rz, os_, oz = _binary_params(ctx, call)
    a = _requantize_or_upcast(ctx, args[0], ls, lz, os_, oz, call.attrs.lhs_axis)
    b = _requantize_or_upcast(ctx, args[1], rs, rz, os_, oz, call.attrs.rhs_axis)
    zp = ctx.const(oz.astype(np.int64).reshape(()), "int64")
    op = ctx.op
    res = ctx.emit(op.subtract(ctx.emit(op.add(a, b)), zp)) if sign > 0 else \
        ctx.emit(op.add(ctx.emit(op.subtract(a, b)), zp))
    return _saturate(ctx, res, call.checked_type.dtype)


@lowers("qnn.add")
def qnn_add(ctx, call, args):
    return _add_sub(ctx, call, args, +1)


@lowers("qnn.subtract")
def qnn_subtract(ctx, call, args):
    return _add_sub(ctx, call, args, -1)


@lowers("qnn.mul")
def qnn_mul(ctx, call, args):
    ls, lz, rs, rz, os_, oz = _binary_params(ctx, call)
    op = ctx.op
    lhs, rhs = args[0], args[1]
    a = ctx.emit(op.subtract(ctx.emit(op.astype(lhs, "int64")), ctx.const(
        _param_shape(lz, call.attrs.lhs_axis, max(len(ctx.shape(lhs)), 1)).astype(np.int64), "int64")))
    b = ctx.emit(op.subtract(ctx.emit(op.astype(rhs, "int64")), ctx.const(
        _param_shape(rz, call.attrs.rhs_axis, max(len(ctx.shape(rhs)), 1)).astype(np.int64), "int64")))
    product = ctx.emit(op.clip(ctx.emit(op.multiply(a, b)), -2 ** 31, 2 ** 31 - 1))
    # TVM multiplies the two input scales in float32 and requantizes the int32 product.
    new_scale = np.float32(np.asarray(ls, np.float32).reshape(-1)[0] * np.asarray(rs, np.float32).reshape(-1)[0])
    values = _requantize(ctx, product, np.asarray(new_scale), np.asarray(np.int32(0)), os_, oz, -1)
    return _saturate(ctx, values, call.checked_type.dtype)


@lowers("qnn.concatenate")
def qnn_concatenate(ctx, call, args):
    data = args[0]
    out_scale, out_zp = _constant(ctx, call, 3), _constant(ctx, call, 4)
    dtype = call.checked_type.dtype
    parts = []
    for i, x in enumerate(data):
        s, z = _constant(ctx, call, 1, i), _constant(ctx, call, 2, i)
        if np.array_equal(s, out_scale) and np.array_equal(z, out_zp):
            parts.append(x)
        else:
            parts.append(_saturate(ctx, _requantize(ctx, x, s, z, out_scale, out_zp, -1), dtype))
    return ctx.op.concat(parts, axis=call.attrs.axis)
