"""ConvertLargeGlobalAvgPoolingToMatmul: a global average pool over a plane of 1024 values or
more becomes a reshape to (N, C, H*W), a MatMul by a constant column of 1/(H*W) and a reshape
back to (N, C, 1, 1) (TI's model optimizer rule ``convert_large_global_avg_pooling_to_matmul``,
on by default in TI's runner; TI's threshold: H*W >= 1024). TIDL's global average pool takes a
plane of at most 1024 values.

    nn.global_avg_pool2d(x)     # x: (1, 8, 32, 48)
    ->
    %0 = reshape(x, newshape=[1, 8, 1536]);
    %1 = nn.dense(%0, ones(1, 1536) / 1536, units=1);   # (1, 8, 1): ONNX MatMul by a constant
    reshape(%1, newshape=[1, 8, 1, 1])

The constant is the MatMul's (H*W, 1) column as tidlx imports a MatMul by a constant (``nn.dense``
with the transposed weight). TI's rule also takes a 3-D GlobalAveragePool (N, C, L), which tidlx
imports as a mean over the last axis; that form is not made here. All new calls take the pool's
layer name.

Exactness: each output is the sum of the same values times 1/n instead of their sum divided by
n; the float results agree to rounding.
"""

from __future__ import annotations

import numpy as np

from ..expr import Call, Constant
from ..op import call
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass
from ..types import TensorType

#: TI's name of the rule.
TI_RULE = "convert_large_global_avg_pooling_to_matmul"

#: TI's threshold: a pool over this many values or more is large.
LARGE_GLOBAL_AVG_POOLING_THRESHOLD = 1024


def is_large_pool(call_: Call) -> bool:
    """Whether ``call_`` is an NCHW global average pool over H*W >= 1024 values of a float tensor."""
    if not isinstance(call_, Call) or call_.op_name != "nn.global_avg_pool2d":
        return False
    t = call_.args[0].checked_type
    if not isinstance(t, TensorType) or t.ndim != 4 or not t.dtype.startswith("float"):
        return False
    if call_.attrs.layout != "NCHW" or (call_.attrs.out_layout or "NCHW") != "NCHW":
        return False
    return int(t.shape[2]) * int(t.shape[3]) >= LARGE_GLOBAL_AVG_POOLING_THRESHOLD


def _convert(m):
    pool = m.expr
    if not is_large_pool(pool):
        return None
    t = pool.args[0].checked_type
    n, c, h, w = (int(d) for d in t.shape)
    layer = pool.layer
    flat = call("reshape", pool.args[0], newshape=[n, c, h * w], layer=layer)
    column = Constant(np.full((1, h * w), 1.0 / (h * w), dtype=t.dtype))
    out = call("nn.dense", flat, column, units=1, layer=layer)
    return call("reshape", out, newshape=[n, c, 1, 1], layer=layer)


CONVERT_LARGE_GLOBAL_AVG_POOLING_TO_MATMUL = RewriteTable([
    ("large_global_average_pool", is_op("nn.global_avg_pool2d"), _convert),
], name="ConvertLargeGlobalAvgPoolingToMatmul")


@module_pass("ConvertLargeGlobalAvgPoolingToMatmul", opt_level=0)
def convert_large_global_avg_pooling_to_matmul(mod, ctx):
    """Turns a global average pool over 1024 values or more into a MatMul by a constant column
    (TI's convert_large_global_avg_pooling_to_matmul)."""
    return CONVERT_LARGE_GLOBAL_AVG_POOLING_TO_MATMUL.rewrite(mod)


ConvertLargeGlobalAvgPoolingToMatmul = convert_large_global_avg_pooling_to_matmul

__all__ = ["ConvertLargeGlobalAvgPoolingToMatmul", "CONVERT_LARGE_GLOBAL_AVG_POOLING_TO_MATMUL", "is_large_pool",
           "LARGE_GLOBAL_AVG_POOLING_THRESHOLD", "TI_RULE"]
