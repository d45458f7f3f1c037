"""Quantization: QuantizeLinear, DequantizeLinear, QLinearConv, QLinearMatMul -> qnn.*.

QNN ops take scales as float32 and zero points as int32 tensors; constant ones are converted
at import time, others with a cast.
"""

from __future__ import annotations

import numpy as np

from ....ir import Constant, Expr
from ..context import NodeContext
from ..graph import ir_dtype
from . import converter
from .nn import MATMUL_OPS, conv_setup, from_2d, matmul, transpose

QUANT_DTYPES = ("int8", "uint8", "int16")


def _as(ctx: NodeContext, x: Expr, dtype: str) -> Expr:
    if isinstance(x, Constant):
        return ctx.const_expr(np.asarray(x.data).astype(dtype))
    if ctx.dtype(x) == dtype:
        return x
    return ctx.call("cast", x, dtype=dtype)


def _scale(ctx: NodeContext, i: int, what: str) -> Expr:
    return _as(ctx, ctx.input(i, what), "float32")


def _zero_point(ctx: NodeContext, i: int, like: Expr) -> Expr:
    """Zero point input ``i`` as int32 (0 when absent), shaped like the scale ``like``."""
    if not ctx.has_input(i):
        return ctx.const_expr(np.zeros(ctx.shape(like), dtype=np.int32))
    return _as(ctx, ctx.input(i), "int32")


def _quant_dtype(ctx: NodeContext, i: int, default: str) -> str:
    """The quantized dtype: the zero point's, else ``output_dtype``, else ``default``."""
    if ctx.has_input(i):
        dtype = ctx.dtype(ctx.input(i))
    elif ctx.attr("output_dtype"):
        dtype = ir_dtype(int(ctx.attr("output_dtype")), f"{ctx.where}: attribute output_dtype")
    else:
        dtype = default
    if dtype not in QUANT_DTYPES:
        raise ctx.unsupported(f"quantized type {dtype} is not supported (supported: {', '.join(QUANT_DTYPES)})")
    return dtype


def _channel_axis(ctx: NodeContext, data: Expr, scale: Expr) -> int:
    """The QNN ``axis``: the ONNX axis for per-channel scales, -1 for per-tensor ones."""
    if int(np.prod(ctx.shape(scale))) == 1 and len(ctx.shape(scale)) <= 1:
        return -1
    ndim = ctx.ndim(data)
    axis = int(ctx.attr("axis", 1))
    if not -ndim <= axis < ndim:
        raise ctx.error(f"axis {axis} is out of range for rank {ndim}")
    return axis % ndim


def _per_tensor(ctx: NodeContext, x: Expr) -> Expr:
    """A single-value scale or zero point as a scalar."""
    if len(ctx.shape(x)) == 1 and ctx.shape(x)[0] == 1:
        if isinstance(x, Constant):
            return ctx.const_expr(x.data.reshape(()))
        return ctx.call("reshape", x, newshape=())
    return x


@converter("QuantizeLinear", produces=("cast", "qnn.quantize", "reshape"))
def convert_quantize(ctx: NodeContext):
    if int(ctx.attr("block_size", 0)):
        raise ctx.unsupported("blocked quantization (block_size > 0) is not supported")
    x = ctx.input(0, "x")
    if ctx.dtype(x) not in ("float32", "float16", "int32"):
        x = ctx.call("cast", x, dtype="float32")
    scale = _per_tensor(ctx, _scale(ctx, 1, "y_scale"))
    zero_point = _per_tensor(ctx, _zero_point(ctx, 2, scale))
    dtype = _quant_dtype(ctx, 2, "uint8")
    return ctx.call("qnn.quantize", x, scale, zero_point, axis=_channel_axis(ctx, x, scale), out_dtype=dtype)


@converter("DequantizeLinear", produces=("cast", "qnn.dequantize", "reshape"))
def convert_dequantize(ctx: NodeContext):
    if int(ctx.attr("block_size", 0)):
        raise ctx.unsupported("blocked quantization (block_size > 0) is not supported")
    x = ctx.input(0, "x")
    if ctx.dtype(x) not in QUANT_DTYPES + ("int32",):
        raise ctx.unsupported(f"dequantizing {ctx.dtype(x)} is not supported")
    out_dtype = "float16" if ctx.dtype(ctx.input(1, "x_scale")) == "float16" else "float32"
    scale = _per_tensor(ctx, _scale(ctx, 1, "x_scale"))
    zero_point = _per_tensor(ctx, _zero_point(ctx, 2, scale))
    return ctx.call("qnn.dequantize", x, scale, zero_point, axis=_channel_axis(ctx, x, scale),
                    out_dtype=out_dtype)


def _product(ctx: NodeContext, a: Expr, b: Expr) -> Expr:
    if isinstance(a, Constant) and isinstance(b, Constant):
        return ctx.const_expr((a.data * b.data).astype(np.float32))
    return ctx.call("multiply", a, b)


def _requantize(ctx: NodeContext, acc: Expr, input_scale: Expr, y_scale: Expr, y_zero_point: Expr,
                out_dtype: str, channel_axis: int) -> Expr:
    zero = ctx.const_expr(np.zeros(ctx.shape(input_scale), dtype=np.int32))
    axis = channel_axis if len(ctx.shape(input_scale)) == 1 and ctx.shape(input_scale)[0] > 1 else -1
    return ctx.call("qnn.requantize", acc, input_scale, zero, y_scale, y_zero_point, axis=axis,
                    rounding="TONEAREST", out_dtype=out_dtype)


def _scale_and_zero_point(ctx: NodeContext, index: int, name: str):
    """The per-tensor (scale, zero point) pair at inputs ``index`` and ``index + 1`` of a QLinear op."""
    scale = _per_tensor(ctx, _scale(ctx, index, f"{name}_scale"))
    return scale, _per_tensor(ctx, _zero_point(ctx, index + 1, scale))


@converter("QLinearConv",
           produces=("cast", "multiply", "nn.bias_add", "qnn.conv2d", "qnn.requantize", "reshape"))
def convert_qlinear_conv(ctx: NodeContext):
    x, w = ctx.input(0, "x"), ctx.input(3, "w")
    x_scale, x_zero_point = _scale_and_zero_point(ctx, 1, "x")
    w_scale, w_zero_point = _scale_and_zero_point(ctx, 4, "w")
    y_scale, y_zero_point = _scale_and_zero_point(ctx, 6, "y")
    out_dtype = ctx.dtype(ctx.input(7)) if ctx.has_input(7) else ctx.dtype(x)
    x, w, attrs, dims = conv_setup(ctx, x, w)
    acc = ctx.call("qnn.conv2d", x, w, x_zero_point, w_zero_point, x_scale, w_scale, out_dtype="int32", **attrs)
    if ctx.has_input(8):
        acc = ctx.call("nn.bias_add", acc, _as(ctx, ctx.input(8, "B"), "int32"), axis=1)
    out = _requantize(ctx, acc, _product(ctx, x_scale, w_scale), y_scale, y_zero_point, out_dtype, 1)
    return from_2d(ctx, out) if dims == 1 else out


@converter("QLinearMatMul", produces=("cast", "multiply", "qnn.dense", "qnn.dequantize", "qnn.quantize",
                                      "qnn.requantize") + MATMUL_OPS)
def convert_qlinear_matmul(ctx: NodeContext):
    a, b = ctx.input(0, "a"), ctx.input(3, "b")
    a_scale, a_zero_point = _scale_and_zero_point(ctx, 1, "a")
    b_scale, b_zero_point = _scale_and_zero_point(ctx, 4, "b")
    y_scale, y_zero_point = _scale_and_zero_point(ctx, 6, "y")
    out_dtype = ctx.dtype(ctx.input(7)) if ctx.has_input(7) else ctx.dtype(a)
    a_shape, b_shape = ctx.shape(a), ctx.shape(b)
    if len(b_shape) == 2 and len(a_shape) >= 1 and len(ctx.shape(a_scale)) == 0:
        # (..., K) x (K, N): qnn.dense with the weight as (N, K).
        acc = ctx.call("qnn.dense", a, transpose(ctx, b, (1, 0)), a_zero_point, b_zero_point, a_scale, b_scale,
                       units=b_shape[1], out_dtype="int32")
        return _requantize(ctx, acc, _product(ctx, a_scale, b_scale), y_scale, y_zero_point, out_dtype,
                           len(ctx.shape(acc)) - 1)
    # Batched operands: dequantize, multiply in float, quantize.
    a_axis = -1 if len(ctx.shape(a_scale)) == 0 else len(a_shape) - 2
    b_axis = -1 if len(ctx.shape(b_scale)) == 0 else len(b_shape) - 1
    a_float = ctx.call("qnn.dequantize", a, a_scale, a_zero_point, axis=a_axis)
    b_float = ctx.call("qnn.dequantize", b, b_scale, b_zero_point, axis=b_axis)
    product = matmul(ctx, a_float, b_float)
    return ctx.call("qnn.quantize", product, y_scale, y_zero_point, axis=-1, out_dtype=out_dtype)
