"""Integer ops of dynamically quantized models (emulator/reference/op_integer.py) in Relax:
the operands minus their zero points in int32 (exact for 8-bit operands), then an int32
convolution or matmul; dynamic_quantize_linear computes its range, scale and zero point in
float32 as the reference does. Zero points may be runtime values (a DynamicQuantizeLinear's)."""

from __future__ import annotations

from ....ir.ops._rel import expand_padding
from ..facet import lowers
from ._layout import permute_from, permute_to


def _shifted(ctx, x, zp, axis=None, ndim=None):
    """``x - zp`` in int32; a zero point of several values broadcasts along ``axis``."""
    op = ctx.op
    zp = ctx.emit(op.astype(zp, "int32"))
    if len(ctx.shape(zp)) == 1 and ctx.shape(zp)[0] > 1:
        shape = [1] * ndim
        shape[axis % ndim] = ctx.shape(zp)[0]
        zp = ctx.emit(op.reshape(zp, shape))
    else:
        zp = ctx.emit(op.reshape(zp, ()))
    return ctx.emit(op.subtract(ctx.emit(op.astype(x, "int32")), zp))


@lowers("nn.conv2d_integer")
def conv2d_integer(ctx, call, args):
    a = call.attrs
    x = permute_to(ctx, _shifted(ctx, args[0], args[2]), a.data_layout, "NCHW")
    w = permute_to(ctx, _shifted(ctx, args[1], args[3], a.kernel_layout.index("O"), 4), a.kernel_layout, "OIHW")
    out = ctx.emit(ctx.op.nn.conv2d(x, w, strides=a.strides, padding=expand_padding(a.padding), dilation=a.dilation,
                                    groups=a.groups, out_dtype="int32"))
    return permute_from(ctx, out, "NCHW", a.out_layout or a.data_layout)


@lowers("nn.matmul_integer")
def matmul_integer(ctx, call, args):
    a, b, a_zp, b_zp = args
    a_s = _shifted(ctx, a, a_zp, -2, max(len(ctx.shape(a)), 2))
    b_s = _shifted(ctx, b, b_zp, -1, len(ctx.shape(b)))
    return ctx.op.matmul(a_s, b_s, out_dtype="int32")


@lowers("dynamic_quantize_linear")
def dynamic_quantize_linear(ctx, call, args):
    x = args[0]
    op = ctx.op
    zero, one = ctx.scalar(0, "float32"), ctx.scalar(1, "float32")
    low = ctx.emit(op.minimum(ctx.emit(op.min(x)), zero))
    high = ctx.emit(op.maximum(ctx.emit(op.max(x)), zero))
    span = ctx.emit(op.subtract(high, low))
    scale = ctx.emit(op.where(ctx.emit(op.equal(high, low)), one,
                              ctx.emit(op.divide(span, ctx.scalar(255, "float32")))))
    zero_point = ctx.emit(op.round(ctx.emit(op.clip(ctx.emit(op.subtract(zero, ctx.emit(op.divide(low, scale)))),
                                                    0.0, 255.0))))
    y = ctx.emit(op.add(ctx.emit(op.round(ctx.emit(op.divide(x, scale)))), zero_point))
    y = ctx.emit(op.astype(ctx.emit(op.clip(y, 0.0, 255.0)), "uint8"))
    return ctx.relax.Tuple([y, scale, ctx.emit(op.astype(zero_point, "uint8"))])
