"""ConvertSoftmaxAxisHeightToWidth: a softmax along the height axis becomes transpose -> softmax
along the width axis -> transpose (TI's model optimizer rule
``convert_softmax_axis_height_to_width``, on by default in TI's runner; it runs before
``convert_softmax_axis_channel_to_width``).

    nn.softmax(x, axis=2)      # x: (N, C, H, W)
    ->
    %0 = transpose(x, axes=[0, 1, 3, 2]);       # (N, C, W, H)
    %1 = nn.softmax(%0, axis=-1);
    transpose(%1, axes=[0, 1, 3, 2])            # (N, C, H, W)

The height axis is axis -2 at rank 2 or more, as TI's rule takes it; the transposes swap axes
-2 and -1 (their own inverse). All three calls take the softmax's layer name.

Exactness: the transposes move values; the softmax sums the same values along its axis, so the
float results agree to rounding.
"""

from __future__ import annotations

from typing import List, Optional

from ..expr import Call
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass
from ._util import softmax_along_width, softmax_axis_swap

#: TI's name of the rule.
TI_RULE = "convert_softmax_axis_height_to_width"


def height_perm(call_: Call) -> Optional[List[int]]:
    """The permutation swapping the height and width axes when ``call_`` is a softmax along the
    height axis (axis -2) of a tensor of rank 2 or more, else None."""
    return softmax_axis_swap(call_, 2)


def _convert(m):
    perm = height_perm(m.expr)
    return None if perm is None else softmax_along_width(m.expr, perm)


CONVERT_SOFTMAX_AXIS_HEIGHT_TO_WIDTH = RewriteTable([
    ("softmax_along_height", is_op("nn.softmax"), _convert),
], name="ConvertSoftmaxAxisHeightToWidth")


@module_pass("ConvertSoftmaxAxisHeightToWidth", opt_level=0)
def convert_softmax_axis_height_to_width(mod, ctx):
    """Runs a height-axis softmax along the width axis between two transposes (TI's
    convert_softmax_axis_height_to_width)."""
    return CONVERT_SOFTMAX_AXIS_HEIGHT_TO_WIDTH.rewrite(mod)


ConvertSoftmaxAxisHeightToWidth = convert_softmax_axis_height_to_width

__all__ = ["ConvertSoftmaxAxisHeightToWidth", "CONVERT_SOFTMAX_AXIS_HEIGHT_TO_WIDTH", "height_perm", "TI_RULE"]
