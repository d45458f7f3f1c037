"""MergePadIntoConv: an explicit ``nn.pad`` of H/W is merged into the padding of the conv or
pool that reads it (TIDL pads inside the layer; a separate pad layer costs a copy).

Merged only when the result is exactly the same:

* ``nn.conv2d``: the pad is ``constant`` with value 0 (conv padding is zero padding);
* ``nn.avg_pool2d``: value 0, and the pool becomes ``count_include_pad=True``: the padded zeros
  were counted as data, so the divisor must keep counting them. A pool that had its own padding
  with ``count_include_pad=False`` (which left that padding out of the count) stays;
* ``nn.max_pool2d``: value ``-inf`` (the lowest value for integer data), which never wins a max,
  as the pool's own padding does not. A zero pad into a max pool would only be exact for
  non-negative data, so it stays.

The pad must be ``constant`` mode, with a constant scalar value, on a 4-D tensor, with zero
widths on N and C (the consumer's layout says which axes are H and W). The new padding is
written as four values ``[top, left, bottom, right]``. The merged op keeps its own layer name;
the pad disappears when nothing else uses it (its other users keep reading it).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

import numpy as np

from ..expr import Call, Constant
from ..ops._rel import expand_padding
from ..pattern import is_constant, is_op, wildcard
from ..rewrite import RewriteTable
from ..transform import module_pass


def _pad_value(pad: Call) -> Optional[np.ndarray]:
    value = pad.args[1]
    if pad.attrs.pad_mode != "constant" or not isinstance(value, Constant) or value.data.size != 1:
        return None
    return value.data.reshape(())


def _spatial_widths(pad: Call, layout: str) -> Optional[Tuple[int, int, int, int]]:
    """``(top, left, bottom, right)`` of a pad that touches only the H and W axes of ``layout``."""
    widths = [tuple(int(v) for v in w) for w in pad.attrs.pad_width]
    if len(widths) != 4 or len(layout) != 4:
        return None
    by_axis = dict(zip(layout, widths))
    if by_axis.get("N") != (0, 0) or by_axis.get("C") != (0, 0):
        return None
    (top, bottom), (left, right) = by_axis["H"], by_axis["W"]
    return top, left, bottom, right


def _merged_padding(old_padding, widths) -> tuple:
    return tuple(int(a + b) for a, b in zip(expand_padding(old_padding), widths))


def _with_padding(op_call: Call, data, padding, **more) -> Call:
    attrs = dataclasses.replace(op_call.attrs, padding=padding, **more)
    return Call(op_call.op, (data,) + op_call.args[1:], attrs, layer=op_call.layer)


def _merge_into_conv(m):
    conv, pad = m.expr, m["pad"]
    value = _pad_value(pad)
    widths = _spatial_widths(pad, conv.attrs.data_layout)
    if value is None or widths is None or value != 0:
        return None
    return _with_padding(conv, pad.args[0], _merged_padding(conv.attrs.padding, widths))


def _merge_into_avg_pool(m):
    pool, pad = m.expr, m["pad"]
    value = _pad_value(pad)
    widths = _spatial_widths(pad, pool.attrs.layout)
    if value is None or widths is None or value != 0:
        return None
    if not pool.attrs.count_include_pad and any(expand_padding(pool.attrs.padding)):
        return None
    return _with_padding(pool, pad.args[0], _merged_padding(pool.attrs.padding, widths), count_include_pad=True)


def _never_wins_a_max(value: np.ndarray) -> bool:
    if value.dtype.kind == "f":
        return bool(np.isneginf(value))
    if value.dtype.kind in "iu":
        return int(value) == np.iinfo(value.dtype).min
    return False


def _merge_into_max_pool(m):
    pool, pad = m.expr, m["pad"]
    value = _pad_value(pad)
    widths = _spatial_widths(pad, pool.attrs.layout)
    if value is None or widths is None or not _never_wins_a_max(value):
        return None
    return _with_padding(pool, pad.args[0], _merged_padding(pool.attrs.padding, widths))


def _pad():
    return is_op("nn.pad")(wildcard(), is_constant()).named("pad")


MERGE_PAD_INTO_CONV = RewriteTable([
    ("pad_into_conv2d", is_op("nn.conv2d")(_pad(), wildcard()), _merge_into_conv),
    ("pad_into_avg_pool2d", is_op("nn.avg_pool2d")(_pad()), _merge_into_avg_pool),
    ("pad_into_max_pool2d", is_op("nn.max_pool2d")(_pad()), _merge_into_max_pool),
], name="MergePadIntoConv")


@module_pass("MergePadIntoConv", opt_level=0)
def merge_pad_into_conv(mod, ctx):
    """Merges an explicit H/W pad (zeros; -inf before a max pool) into the next conv/pool's padding."""
    return MERGE_PAD_INTO_CONV.rewrite(mod)


MergePadIntoConv = merge_pad_into_conv

__all__ = ["MergePadIntoConv", "MERGE_PAD_INTO_CONV"]
