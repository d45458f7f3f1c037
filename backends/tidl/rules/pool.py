"""Pooling: windowed max/average pools and the global average pool."""

from __future__ import annotations

from ._base import pair, rule, shape

POOL_SIZES = (1, 2, 3)
POOL_STRIDES = (1, 2)
#: Largest plane (H*W) TIDL's global average pool takes.
MAX_GLOBAL_POOL_PLANE = 1024


def _layout(attrs):
    out_layout = attrs.out_layout or attrs.layout
    if attrs.layout != "NCHW" or out_layout != "NCHW":
        return f"layout {attrs.layout} is not supported (TIDL pools take NCHW data; convert the layout first)"
    return None


@rule("nn.max_pool2d", "nn.avg_pool2d", layer="Pool")
def pool2d(call, ctx):
    attrs = call.attrs
    reason = _layout(attrs)
    if reason:
        return reason
    kh, kw = pair(attrs.pool_size)
    sh, sw = pair(attrs.strides)
    if kh != kw or kh not in POOL_SIZES:
        return f"pool size {kh}x{kw} is not supported (pools: 1x1, 2x2 or 3x3 with stride 1 or 2)"
    # A 1x1 pool with strides [1, 2] only decimates: TI's own preparation turns a conv with stride
    # [1, 2] into a stride-1 conv plus such a pool, so TIDL takes unequal strides there.
    if sh not in POOL_STRIDES or sw not in POOL_STRIDES or (sh != sw and kh != 1):
        return f"stride {sh}x{sw} is not supported (pools: 1x1, 2x2 or 3x3 with stride 1 or 2)"
    if pair(attrs.dilation) != (1, 1):
        dh, dw = pair(attrs.dilation)
        return f"dilation {dh}x{dw} is not supported (pools: dilation 1)"
    return None


@rule("nn.global_avg_pool2d", layer="Pool")
def global_avg_pool2d(call, ctx):
    reason = _layout(call.attrs)
    if reason:
        return reason
    _, _, h, w = shape(call.args[0])
    if h * w > MAX_GLOBAL_POOL_PLANE:
        return (f"a {h}x{w} plane ({h * w} values) is too large (global average pools: H*W <= "
                f"{MAX_GLOBAL_POOL_PLANE})")
    return None


@rule("nn.adaptive_avg_pool2d", layer="Pool")
def adaptive_avg_pool2d(call, ctx):
    """TVM's PyTorch frontend writes a global average pool as an adaptive pool to 1x1."""
    reason = _layout(call.attrs)
    if reason:
        return reason
    _, _, oh, ow = shape(call)
    if (oh, ow) != (1, 1):
        return f"output size {oh}x{ow} is not supported (adaptive average pools: 1x1, a global average pool)"
    return global_avg_pool2d.body(call, ctx)
