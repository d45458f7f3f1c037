"""Dynamically quantized ops: ConvInteger -> nn.conv2d_integer, MatMulInteger -> nn.matmul_integer,
DynamicQuantizeLinear -> dynamic_quantize_linear (ir/ops/integer.py). An absent zero point is 0.

1-D ConvIntegers are imported as 2-D ones over a height of 1, as Conv.
"""

from __future__ import annotations

import numpy as np

from ..context import NodeContext
from . import converter
from .nn import conv_setup, from_2d

INTEGER_DTYPES = ("uint8", "int8")


def _integer_input(ctx: NodeContext, i: int, what: str):
    x = ctx.input(i, what)
    if ctx.dtype(x) not in INTEGER_DTYPES:
        raise ctx.unsupported(f"input {i} ({what}) has dtype {ctx.dtype(x)}; only uint8 and int8 are supported")
    return x


def _zero_point(ctx: NodeContext, i: int, like):
    """Zero point input ``i``, or a 0 of the dtype of ``like`` when absent."""
    if ctx.has_input(i):
        return ctx.input(i)
    return ctx.const_expr(np.zeros((), ctx.dtype(like)))


@converter("ConvInteger", produces=("nn.conv2d_integer", "reshape"))
def convert_conv_integer(ctx: NodeContext):
    x, w = _integer_input(ctx, 0, "x"), _integer_input(ctx, 1, "w")
    x_zp, w_zp = _zero_point(ctx, 2, x), _zero_point(ctx, 3, w)
    x, w, attrs, dims = conv_setup(ctx, x, w)
    out = ctx.call("nn.conv2d_integer", x, w, x_zp, w_zp, **attrs)
    return from_2d(ctx, out) if dims == 1 else out


@converter("MatMulInteger", produces=("nn.matmul_integer",))
def convert_matmul_integer(ctx: NodeContext):
    a, b = _integer_input(ctx, 0, "A"), _integer_input(ctx, 1, "B")
    return ctx.call("nn.matmul_integer", a, b, _zero_point(ctx, 2, a), _zero_point(ctx, 3, b))


@converter("DynamicQuantizeLinear", produces=("dynamic_quantize_linear",))
def convert_dynamic_quantize_linear(ctx: NodeContext):
    x = ctx.input(0, "x")
    if ctx.dtype(x) != "float32":
        raise ctx.unsupported(f"input 0 (x) has dtype {ctx.dtype(x)}; DynamicQuantizeLinear takes float32")
    out = ctx.call("dynamic_quantize_linear", x)
    return [ctx.get(out, 0), ctx.get(out, 1), ctx.get(out, 2)]
