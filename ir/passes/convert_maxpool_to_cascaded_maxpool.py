"""ConvertMaxpoolToCascadedMaxpool: a max pool with a K x K kernel, K odd and above 3, stride 1
and "same" padding (K-1)/2 becomes (K-1)/2 max pools of 3 x 3, stride 1, padding 1 in a chain
(TI's model optimizer rule ``convert_maxpool_to_cascaded_maxpool``, on by default in TI's runner).
TIDL's pools take 1x1, 2x2 and 3x3 kernels; YOLO's SPP blocks use 5, 9 and 13.

    nn.max_pool2d(x, pool_size=[5, 5], padding=[2, 2, 2, 2])
    ->
    %0 = nn.max_pool2d(x, pool_size=[3, 3], padding=[1, 1, 1, 1]);
    nn.max_pool2d(%0, pool_size=[3, 3], padding=[1, 1, 1, 1])

TI's rule rewrites every MaxPool whose first kernel size is above 3 into that chain whatever its
strides, padding or second kernel size; the chain computes the same only in the form above, so
tidlx rewrites that form and leaves the others (which TI's rule would change: a 5x5 pool of
stride 2, for one, would lose its stride). All new calls take the pool's layer name.

Exactness: the max over a K x K window is the max over (K-1)/2 nested 3 x 3 windows; padding
is -inf in both forms, so the results are equal.
"""

from __future__ import annotations

from ..expr import Call
from ..op import call
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass

#: TI's name of the rule.
TI_RULE = "convert_maxpool_to_cascaded_maxpool"


def cascade_length(call_: Call) -> int:
    """How many 3x3 pools replace ``call_`` (0: the rule leaves it)."""
    if not isinstance(call_, Call) or call_.op_name != "nn.max_pool2d":
        return 0
    a = call_.attrs
    kh, kw = a.pool_size
    if kh != kw or kh <= 3 or kh % 2 == 0 or a.layout != "NCHW" or (a.out_layout or "NCHW") != "NCHW":
        return 0
    half = (kh - 1) // 2
    if tuple(a.strides) != (1, 1) or tuple(a.dilation) != (1, 1) or tuple(a.padding) != (half,) * 4:
        return 0
    return half


def _convert(m):
    pool = m.expr
    n = cascade_length(pool)
    if not n:
        return None
    out = pool.args[0]
    for _ in range(n):
        out = call("nn.max_pool2d", out, pool_size=[3, 3], strides=[1, 1], padding=[1, 1, 1, 1],
                   layer=pool.layer)
    return out


CONVERT_MAXPOOL_TO_CASCADED_MAXPOOL = RewriteTable([
    ("large_same_max_pool", is_op("nn.max_pool2d"), _convert),
], name="ConvertMaxpoolToCascadedMaxpool")


@module_pass("ConvertMaxpoolToCascadedMaxpool", opt_level=0)
def convert_maxpool_to_cascaded_maxpool(mod, ctx):
    """Turns a K x K stride-1 "same" max pool (K odd, above 3) into a chain of 3 x 3 max pools
    (TI's convert_maxpool_to_cascaded_maxpool)."""
    return CONVERT_MAXPOOL_TO_CASCADED_MAXPOOL.rewrite(mod)


ConvertMaxpoolToCascadedMaxpool = convert_maxpool_to_cascaded_maxpool

__all__ = ["ConvertMaxpoolToCascadedMaxpool", "CONVERT_MAXPOOL_TO_CASCADED_MAXPOOL", "cascade_length", "TI_RULE"]
