"""ConvertSoftmaxAxisChannelToWidth: a softmax along the channel axis becomes transpose -> softmax
along the width axis -> transpose (TI's model optimizer rule ``convert_softmax_axis_channel_to_width``,
on by default in TI's runner). TIDL normalizes along the width or the height axis only.

    nn.softmax(x, axis=1)      # x: (N, C, H, W)
    ->
    %0 = transpose(x, axes=[0, 3, 2, 1]);       # (N, W, H, C)
    %1 = nn.softmax(%0, axis=-1);
    transpose(%1, axes=[0, 3, 2, 1])            # (N, C, H, W)

The channel axis is axis -3 (the third from the right), at rank 3 or more, as TI's rule takes it
(TI reads the axis as written in the ONNX node; the IR's axis is the same axis, whatever its
sign). The transposes swap axes -3 and -1 and leave the others in place; the permutation is its
own inverse, so both transposes use it. All three calls take the softmax's layer name (they are
what the one ONNX node became).

Exactness: the transposes move values without computing; the softmax sums the same values along
its axis, so the float results agree to rounding.
"""

from __future__ import annotations

from typing import List, Optional

from ..expr import Call
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass
from ._util import softmax_along_width, softmax_axis_swap

#: TI's name of the rule.
TI_RULE = "convert_softmax_axis_channel_to_width"


def channel_perm(call_: Call) -> Optional[List[int]]:
    """The permutation swapping the channel and width axes when ``call_`` is a softmax along the
    channel axis (axis -3) of a tensor of rank 3 or more, else None."""
    return softmax_axis_swap(call_, 3)


def _convert(m):
    perm = channel_perm(m.expr)
    return None if perm is None else softmax_along_width(m.expr, perm)


CONVERT_SOFTMAX_AXIS_CHANNEL_TO_WIDTH = RewriteTable([
    ("softmax_along_channel", is_op("nn.softmax"), _convert),
], name="ConvertSoftmaxAxisChannelToWidth")


@module_pass("ConvertSoftmaxAxisChannelToWidth", opt_level=0)
def convert_softmax_axis_channel_to_width(mod, ctx):
    """Runs a channel-axis softmax along the width axis between two transposes (TI's
    convert_softmax_axis_channel_to_width)."""
    return CONVERT_SOFTMAX_AXIS_CHANNEL_TO_WIDTH.rewrite(mod)


ConvertSoftmaxAxisChannelToWidth = convert_softmax_axis_channel_to_width

__all__ = ["ConvertSoftmaxAxisChannelToWidth", "CONVERT_SOFTMAX_AXIS_CHANNEL_TO_WIDTH", "channel_perm", "TI_RULE"]
