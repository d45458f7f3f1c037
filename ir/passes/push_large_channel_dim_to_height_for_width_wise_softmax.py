"""PushLargeChannelDimToHeightForWidthWiseSoftmax: a softmax along the width axis of a tensor
with more than 1024 channels runs on the tensor reshaped to fewer channels and more rows, then
reshaped back (TI's model optimizer rule
``push_large_channel_dim_to_height_for_width_wise_softmax``, on by default in TI's runner: a
performance rule, TIDL runs such a softmax either way).

    nn.softmax(x, axis=-1)         # x: (1, 2048, 4, 8)
    ->
    %0 = reshape(x, newshape=[1, 2, 4096, 8]);
    %1 = nn.softmax(%0, axis=-1);
    reshape(%1, newshape=[1, 2048, 4, 8])

TI's choice of the new channel count c' (kept here): the candidates run from
ceil(C*H*W / 32768) up to C-1, those dividing C*H; the one whose new height C*H/c' has the
largest fractional part of height/64 above 0.5 wins (the first on a tie). Where no candidate
qualifies the softmax stays (TI's rule would then write a reshape without a shape). The new
calls take the softmax's layer name.

Exactness: the reshapes keep every row of the width axis whole, so each softmax sees the same
values; the results are equal.
"""

from __future__ import annotations

import math
from typing import List, Optional

from ..expr import Call
from ..op import call
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass
from ..types import TensorType

#: TI's name of the rule.
TI_RULE = "push_large_channel_dim_to_height_for_width_wise_softmax"

#: TI's thresholds: channels above this are large; the scratch volume; the height TI vectorizes on.
SOFTMAX_LARGE_DIM_THRESHOLD = 1024
GENERIC_SCRATCH_VOLUME = 32 * 1024
SOFTMAX_OPTIMAL_HEIGHT_DIM = 64


def pushed_shape(call_: Call) -> Optional[List[int]]:
    """The shape the softmax ``call_`` runs on after the rule, or None when it stays."""
    if not isinstance(call_, Call) or call_.op_name != "nn.softmax":
        return None
    t = call_.args[0].checked_type
    if not isinstance(t, TensorType) or t.ndim < 3 or call_.attrs.axis % t.ndim != t.ndim - 1:
        return None
    dims = [int(d) for d in t.shape]
    c, h, w = dims[-3:]
    if c <= SOFTMAX_LARGE_DIM_THRESHOLD:
        return None
    best, best_ratio = None, 0.5
    for channels in range(math.ceil(c * h * w / GENERIC_SCRATCH_VOLUME), c):
        if channels <= 0 or (c * h) % channels:
            continue
        height = c * h // channels
        ratio = height / SOFTMAX_OPTIMAL_HEIGHT_DIM
        ratio -= int(ratio)
        if ratio > best_ratio:
            best, best_ratio = dims[:-3] + [channels, height, w], ratio
    return best


def _convert(m):
    softmax = m.expr
    shape = pushed_shape(softmax)
    if shape is None:
        return None
    layer = softmax.layer
    dims = [int(d) for d in softmax.args[0].checked_type.shape]
    inner = call("reshape", softmax.args[0], newshape=shape, layer=layer)
    normed = call("nn.softmax", inner, axis=-1, layer=layer)
    return call("reshape", normed, newshape=dims, layer=layer)


PUSH_LARGE_CHANNEL_DIM_TO_HEIGHT_FOR_WIDTH_WISE_SOFTMAX = RewriteTable([
    ("width_softmax_of_many_channels", is_op("nn.softmax"), _convert),
], name="PushLargeChannelDimToHeightForWidthWiseSoftmax")


@module_pass("PushLargeChannelDimToHeightForWidthWiseSoftmax", opt_level=0)
def push_large_channel_dim_to_height_for_width_wise_softmax(mod, ctx):
    """Moves most of a width softmax's channels into its height (TI's
    push_large_channel_dim_to_height_for_width_wise_softmax)."""
    return PUSH_LARGE_CHANNEL_DIM_TO_HEIGHT_FOR_WIDTH_WISE_SOFTMAX.rewrite(mod)


PushLargeChannelDimToHeightForWidthWiseSoftmax = push_large_channel_dim_to_height_for_width_wise_softmax

__all__ = ["PushLargeChannelDimToHeightForWidthWiseSoftmax", "PUSH_LARGE_CHANNEL_DIM_TO_HEIGHT_FOR_WIDTH_WISE_SOFTMAX",
           "pushed_shape", "TI_RULE"]
