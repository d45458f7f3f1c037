"""ConvertGatherWithSingleIndexToSlice: a gather of one constant index ``t`` along an axis other
than the batch axis becomes a slice ``[t, t+1)`` on that axis and a reshape dropping the axis
(TI's model optimizer rule ``convert_gather_with_single_index_to_slice``, on by default in TI's
runner). TIDL's Gather takes index tensors; a Slice is a cheap layer.

    take(x, 2, axis=1)                          # x: (1, 8, 4, 6), a scalar index
    ->
    %0 = strided_slice(x, begin=[2], end=[3], strides=[1], axes=[1]);   # (1, 1, 4, 6)
    reshape(%0, newshape=[1, 4, 6])

As in TI's rule: the index is a constant scalar (rank 0), the input has rank 3 or more and the
axis is not the batch axis (axis 0). TI's rule writes ``end = t + 1`` from the index as given, so
a negative index (``-1``: ``end = 0``) would make an empty slice; tidlx leaves a gather of a
negative index alone. The new calls take the gather's layer name.

Exactness: both forms copy the same values.
"""

from __future__ import annotations

import numpy as np

from ..expr import Constant
from ..op import call
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass
from ..types import TensorType

#: TI's name of the rule.
TI_RULE = "convert_gather_with_single_index_to_slice"


def single_index(take) -> "tuple | None":
    """``(axis, index)`` when ``take`` is a gather the rule rewrites, else None."""
    if getattr(take, "op_name", None) != "take" or take.attrs.batch_dims or take.attrs.axis is None:
        return None
    t, idx = take.args[0].checked_type, take.args[1]
    if not isinstance(t, TensorType) or t.ndim < 3 or not isinstance(idx, Constant):
        return None
    data = np.asarray(idx.data)
    if data.ndim != 0:
        return None
    axis, index = take.attrs.axis % t.ndim, int(data)
    if axis == 0 or not 0 <= index < int(t.shape[axis]):
        return None
    return axis, index


def _convert(m):
    take = m.expr
    found = single_index(take)
    if found is None:
        return None
    axis, index = found
    shape = [int(d) for d in take.args[0].checked_type.shape]
    layer = take.layer
    part = call("strided_slice", take.args[0], begin=[index], end=[index + 1], strides=[1], axes=[axis],
                layer=layer)
    return call("reshape", part, newshape=shape[:axis] + shape[axis + 1:], layer=layer)


CONVERT_GATHER_WITH_SINGLE_INDEX_TO_SLICE = RewriteTable([
    ("gather_of_one_index", is_op("take"), _convert),
], name="ConvertGatherWithSingleIndexToSlice")


@module_pass("ConvertGatherWithSingleIndexToSlice", opt_level=0)
def convert_gather_with_single_index_to_slice(mod, ctx):
    """Turns a gather of one constant index into a slice and a reshape (TI's
    convert_gather_with_single_index_to_slice)."""
    return CONVERT_GATHER_WITH_SINGLE_INDEX_TO_SLICE.rewrite(mod)


ConvertGatherWithSingleIndexToSlice = convert_gather_with_single_index_to_slice

__all__ = ["ConvertGatherWithSingleIndexToSlice", "CONVERT_GATHER_WITH_SINGLE_INDEX_TO_SLICE", "single_index",
           "TI_RULE"]
