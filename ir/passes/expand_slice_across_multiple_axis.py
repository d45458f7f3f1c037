"""ExpandSliceAcrossMultipleAxis: a slice over several axes becomes a chain of slices over one
axis each, in the order the axes are listed (TI's model optimizer rule
``expand_slice_across_multiple_axis``, on by default in TI's runner). TIDL's Slice layer slices
along one axis.

    strided_slice(x, begin=[1, 2], end=[5, 7], strides=[1, 2], axes=[2, 3])
    ->
    %0 = strided_slice(x, begin=[1], end=[5], strides=[1], axes=[2]);
    strided_slice(%0, begin=[2], end=[7], strides=[2], axes=[3])

As in TI's rule, only a slice that lists its axes is split (ONNX Slice with its ``axes`` input;
tidlx's import always lists them), and every listed axis gets its slice, even one that keeps the
whole axis. All new calls take the slice's layer name.

Exactness: both forms copy the same values.
"""

from __future__ import annotations

from ..expr import Call
from ..op import call
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass

#: TI's name of the rule.
TI_RULE = "expand_slice_across_multiple_axis"


def slice_axes(call_: Call):
    """The axes of ``call_`` when it is a slice over several listed axes, else None."""
    if not isinstance(call_, Call) or call_.op_name != "strided_slice":
        return None
    a = call_.attrs
    if a.axes is None or len(a.axes) < 2 or a.slice_mode != "end":
        return None
    return tuple(a.axes)


def _convert(m):
    sl = m.expr
    axes = slice_axes(sl)
    if axes is None:
        return None
    a = sl.attrs
    strides = a.strides if a.strides else (1,) * len(axes)
    if len(strides) == 1:
        strides = strides * len(axes)
    out = sl.args[0]
    for i, axis in enumerate(axes):
        out = call("strided_slice", out, begin=[a.begin[i]], end=[a.end[i]], strides=[strides[i]], axes=[axis],
                   layer=sl.layer)
    return out


EXPAND_SLICE_ACROSS_MULTIPLE_AXIS = RewriteTable([
    ("slice_over_several_axes", is_op("strided_slice"), _convert),
], name="ExpandSliceAcrossMultipleAxis")


@module_pass("ExpandSliceAcrossMultipleAxis", opt_level=0)
def expand_slice_across_multiple_axis(mod, ctx):
    """Splits a slice over several axes into one slice per axis (TI's
    expand_slice_across_multiple_axis)."""
    return EXPAND_SLICE_ACROSS_MULTIPLE_AXIS.rewrite(mod)


ExpandSliceAcrossMultipleAxis = expand_slice_across_multiple_axis

__all__ = ["ExpandSliceAcrossMultipleAxis", "EXPAND_SLICE_ACROSS_MULTIPLE_AXIS", "slice_axes", "TI_RULE"]
