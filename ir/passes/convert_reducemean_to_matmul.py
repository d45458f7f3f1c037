"""ConvertReduceMeanToMatmul: a mean over the height and width axes, or over the width axis, of a
4-D tensor becomes a MatMul with a constant column of 1/n (TI's model optimizer rule
``convert_reducemean_to_matmul``, on by default in TI's runner). TIDL has no reduce-mean layer;
it has an inner product.

    mean(x, axis=[2, 3], keepdims=True)     # x: (N, C, H, W)
    ->
    %0 = reshape(x, newshape=[N, 1, C, H*W]);
    %1 = nn.dense(%0, ones(1, H*W) / (H*W), units=1);   # (N, 1, C, 1): ONNX MatMul by a constant
    reshape(%1, newshape=[N, C, 1, 1])                  # [N, C] with keepdims=False

    mean(x, axis=[3], keepdims=True)  ->  nn.dense(x, ones(1, W) / W, units=1)     # (N, C, H, 1)

The constant is the MatMul's (W*H, 1) column as tidlx imports a MatMul by a constant: ``nn.dense``
with the transposed weight. As TI's rule, a mean whose user is a subtract or add that feeds a
power, multiply or sqrt (a LayerNorm written out) is left alone. TI's rule also takes the height
axis alone (with transposes) and 2-D and 3-D inputs; those forms are not made here. All new
calls take the mean's layer name.

Exactness: each output is the sum of the same values times 1/n instead of their sum divided by
n; the float results agree to rounding (within 1e-6 relative for the sizes TIDL takes).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..expr import Call, Constant
from ..ops.reduce import reduced_axes
from ._util import plane_reduction_as_dense
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass
from ..types import TensorType

#: TI's name of the rule.
TI_RULE = "convert_reducemean_to_matmul"

_NORM_USERS = ("power", "multiply", "sqrt")


def mean_form(call_: Call) -> Optional[str]:
    """``"hw"`` or ``"w"`` when ``call_`` is a mean the rule rewrites (over H and W, or over W, of
    a 4-D float tensor), else None."""
    if not isinstance(call_, Call) or call_.op_name != "mean":
        return None
    t = call_.args[0].checked_type
    if not isinstance(t, TensorType) or t.ndim != 4 or not t.dtype.startswith("float"):
        return None
    axes = tuple(sorted(reduced_axes(4, call_.attrs)))
    if axes == (2, 3):
        return "hw"
    if axes == (3,):
        return "w"
    return None


def _in_layer_norm(m, mean: Call) -> bool:
    for user in m.users(mean) or ():
        if isinstance(user, Call) and user.op_name in ("subtract", "add"):
            if any(isinstance(u, Call) and u.op_name in _NORM_USERS for u in m.users(user) or ()):
                return True
    return False


def _column(n: int, dtype: str) -> Constant:
    return Constant(np.full((1, n), 1.0 / n, dtype=dtype))


def _convert(m):
    mean = m.expr
    form = mean_form(mean)
    if form is None or _in_layer_norm(m, mean):
        return None
    t = mean.args[0].checked_type
    return plane_reduction_as_dense(mean.args[0], form, bool(mean.attrs.keepdims), lambda size: _column(size, t.dtype),
                                    mean.layer)


CONVERT_REDUCEMEAN_TO_MATMUL = RewriteTable([
    ("mean_over_plane_or_width", is_op("mean"), _convert),
], name="ConvertReduceMeanToMatmul")


@module_pass("ConvertReduceMeanToMatmul", opt_level=0)
def convert_reducemean_to_matmul(mod, ctx):
    """Turns a mean over H and W, or over W, of a 4-D tensor into a MatMul by a constant column
    (TI's convert_reducemean_to_matmul)."""
    return CONVERT_REDUCEMEAN_TO_MATMUL.rewrite(mod)


ConvertReduceMeanToMatmul = convert_reducemean_to_matmul

__all__ = ["ConvertReduceMeanToMatmul", "CONVERT_REDUCEMEAN_TO_MATMUL", "mean_form", "TI_RULE"]
