"""SplitAsymmetricStrideConv: a conv2d with unequal H/W strides (TIDL needs equal ones) becomes
a conv2d with equal strides followed by a 1x1 max pool that keeps every k-th row or column.

    conv2d(x, W, strides=[1, 2])  ->  max_pool2d(conv2d(x, W, strides=[1, 1]),
                                                 pool_size=[1, 1], strides=[1, 2])

Why a 1x1 pool: a stride-s conv is the stride-1 conv sampled at every s-th position, and a 1x1
max pool with stride s is exactly that sampling (its window holds one element, so the "max" is
that element). TI's flow names this "conv + maxpool"; a 1x2 window would take the larger of two
neighbouring columns instead, which is a different result. TIDL supports 1x1 pooling with
stride 1 or 2.

In general strides ``(sh, sw)`` with the larger a multiple of the smaller ``s`` become a conv with
strides ``(s, s)`` and a pool with strides ``(sh / s, sw / s)``; the output sizes agree because
``floor(floor(span / s) / k) = floor(span / (s k))``. Padding, dilation, groups and layouts stay
on the conv. When the conv (with its only user, a per-channel ``nn.bias_add``) feeds the pool,
the pool goes after the bias_add so that TIDL can still merge conv + bias: sampling positions
commutes with adding a per-channel bias. The conv and the pool keep the conv's layer name, the
bias_add keeps its own.

Exactness: the kept outputs are the same dot products as before (the emulator may sum them in
another order, so float results agree to rounding); the extra positions computed by the
stride-1 conv are thrown away by the pool.
"""

from __future__ import annotations

import dataclasses

from ..expr import Call
from ..op import call
from ..ops._rel import pair
from ..pattern import is_op, wildcard
from ..rewrite import RewriteTable
from ..transform import module_pass


def _split_strides(conv: Call):
    """``(conv strides, pool strides)`` for a conv with unequal strides, or None."""
    sh, sw = pair(conv.attrs.strides, "strides")
    if sh == sw:
        return None
    small, large = min(sh, sw), max(sh, sw)
    if large % small:
        return None
    return (small, small), (sh // small, sw // small)


def _equal_stride_conv(conv: Call, strides) -> Call:
    attrs = dataclasses.replace(conv.attrs, strides=strides)
    return Call(conv.op, conv.args, attrs, layer=conv.layer)


def _pool(data, pool_strides, conv: Call) -> Call:
    layout = conv.attrs.out_layout or conv.attrs.data_layout
    return call("nn.max_pool2d", data, pool_size=(1, 1), strides=pool_strides, layout=layout, layer=conv.layer)


def _is_channel_bias_of(bias_add, conv: Call) -> bool:
    """Whether ``bias_add`` is an ``nn.bias_add`` (of ``conv``) along the conv's channel axis:
    adding such a bias commutes with sampling H and W."""
    if not isinstance(bias_add, Call) or bias_add.op_name != "nn.bias_add":
        return False
    layout = conv.attrs.out_layout or conv.attrs.data_layout
    ndim = conv.checked_type.ndim
    return bias_add.attrs.axis % ndim == layout.index("C") and bias_add.args[1].checked_type.ndim == 1


def _split_conv(m):
    conv = m.expr
    split = _split_strides(conv)
    if split is None:
        return None
    users = m.users(conv)  # the graph as it was at the start of the sweep
    if users is not None and len(users) == 1 and _is_channel_bias_of(users[0], conv):
        return None  # the bias_add rule puts the pool after the bias
    conv_strides, pool_strides = split
    return _pool(_equal_stride_conv(conv, conv_strides), pool_strides, conv)


def _split_conv_with_bias(m):
    conv, bias_add = m["conv"], m.expr
    split = _split_strides(conv)
    if split is None or m.num_users(conv) != 1 or not _is_channel_bias_of(bias_add, conv):
        return None
    conv_strides, pool_strides = split
    new_bias = Call(bias_add.op, (_equal_stride_conv(conv, conv_strides), bias_add.args[1]), bias_add.attrs,
                    layer=bias_add.layer)
    return _pool(new_bias, pool_strides, conv)


SPLIT_ASYMMETRIC_STRIDE_CONV = RewriteTable([
    ("conv_bias_with_unequal_strides",
     is_op("nn.bias_add")(is_op("nn.conv2d").named("conv"), wildcard()), _split_conv_with_bias),
    ("conv_with_unequal_strides", is_op("nn.conv2d"), _split_conv),
], name="SplitAsymmetricStrideConv")


@module_pass("SplitAsymmetricStrideConv", opt_level=0)
def split_asymmetric_stride_conv(mod, ctx):
    """Rewrites conv2d with unequal H/W strides as an equal-stride conv2d plus a 1x1 max pool."""
    return SPLIT_ASYMMETRIC_STRIDE_CONV.rewrite(mod)


SplitAsymmetricStrideConv = split_asymmetric_stride_conv

__all__ = ["SplitAsymmetricStrideConv", "SPLIT_ASYMMETRIC_STRIDE_CONV"]
