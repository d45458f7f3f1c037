"""ConvertReducesumToMatmul: a sum over the width axis, the height axis, or both of a 4-D tensor
becomes a MatMul by a constant column of ones (TI's model optimizer rule
``convert_reducesum_to_matmul``, on by default in TI's runner). TIDL has no reduce-sum layer; it
has an inner product.

    sum(x, axis=[3], keepdims=True)     ->  nn.dense(x, ones(1, W), units=1)          # (N, C, H, 1)
    sum(x, axis=[2], keepdims=True)     ->  transpose(nn.dense(transpose(x, [0, 1, 3, 2]),
                                                               ones(1, H), units=1), [0, 1, 3, 2])
    sum(x, axis=[2, 3], keepdims=True)  ->  reshape(nn.dense(reshape(x, [N, 1, C, H*W]),
                                                             ones(1, H*W), units=1), [N, C, 1, 1])

Without keepdims, TI squeezes the last axis of the MatMul's result ((N, C, H) for the width,
(N, C, W) for the height), and the two-axis form reshapes to (N, C); tidlx writes each squeeze as
a reshape. The constant is the MatMul's (n, 1) column as tidlx imports a MatMul by a constant
(``nn.dense`` with the transposed weight). TI's rule also takes 2-D and 3-D inputs and reads
only the first listed axis (or the count, for two axes); tidlx takes the 4-D forms whose axes are
exactly those above. All new calls take the sum's layer name.

Exactness: the MatMul adds the same values in a different order; the float results agree to
rounding.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..expr import Call, Constant
from ..op import call
from ..ops.reduce import reduced_axes
from ._util import plane_reduction_as_dense
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass
from ..types import TensorType

#: TI's name of the rule.
TI_RULE = "convert_reducesum_to_matmul"

_SWAP_HW = [0, 1, 3, 2]


def sum_form(call_: Call) -> Optional[str]:
    """``"w"``, ``"h"`` or ``"hw"`` when ``call_`` is a sum the rule rewrites, else None."""
    if not isinstance(call_, Call) or call_.op_name != "sum":
        return None
    t = call_.args[0].checked_type
    if not isinstance(t, TensorType) or t.ndim != 4 or not t.dtype.startswith("float"):
        return None
    if getattr(call_.attrs, "exclude", False):
        return None
    return {(3,): "w", (2,): "h", (2, 3): "hw"}.get(tuple(sorted(reduced_axes(4, call_.attrs))))


def _ones(n: int, dtype: str) -> Constant:
    return Constant(np.ones((1, n), dtype=dtype))


def _convert(m):
    total = m.expr
    form = sum_form(total)
    if form is None:
        return None
    x = total.args[0]
    t = x.checked_type
    n, c, h, w = (int(d) for d in t.shape)
    keep, layer = bool(total.attrs.keepdims), total.layer
    if form == "h":
        swapped = call("transpose", x, axes=_SWAP_HW, layer=layer)
        out = call("nn.dense", swapped, _ones(h, t.dtype), units=1, layer=layer)
        if keep:
            return call("transpose", out, axes=_SWAP_HW, layer=layer)
        return call("reshape", out, newshape=[n, c, w], layer=layer)
    return plane_reduction_as_dense(x, form, keep, lambda size: _ones(size, t.dtype), layer)


CONVERT_REDUCESUM_TO_MATMUL = RewriteTable([
    ("sum_over_plane_height_or_width", is_op("sum"), _convert),
], name="ConvertReducesumToMatmul")


@module_pass("ConvertReducesumToMatmul", opt_level=0)
def convert_reducesum_to_matmul(mod, ctx):
    """Turns a sum over W, H, or H and W of a 4-D tensor into a MatMul by a column of ones (TI's
    convert_reducesum_to_matmul)."""
    return CONVERT_REDUCESUM_TO_MATMUL.rewrite(mod)


ConvertReducesumToMatmul = convert_reducesum_to_matmul

__all__ = ["ConvertReducesumToMatmul", "CONVERT_REDUCESUM_TO_MATMUL", "sum_form", "TI_RULE"]
