"""ConvertDepth2spaceToReshpTrReshp: a depth-to-space (pixel shuffle) becomes reshape -> two
transposes -> reshape (TI's model optimizer rule ``convert_depth2space_to_reshp_tr_reshp``, on by
default in TI's runner; it runs before ``optimize_reshp_tr_reshp``).

    nn.depth_to_space(x, block_size=b, mode="DCR")      # x: (N, C, H, W), C' = C / b^2
    ->
    %0 = reshape(x, newshape=[N, b, b, C', H, W]);
    %1 = transpose(%0, axes=[0, 3, 4, 1, 2, 5]);        # (N, C', H, b, b, W)
    %2 = transpose(%1, axes=[0, 1, 2, 3, 5, 4]);        # (N, C', H, b, W, b)
    reshape(%2, newshape=[N, C', H * b, W * b])

Mode CRD reshapes to (N, C', b, b, H, W) and its first transpose is [0, 1, 4, 2, 3, 5]. TI writes
two transposes where one would do: its comment says TIDL's import turns a single-transpose
sequence back into a depth-to-space layer. The rewritten ops are judged one by one by the support
rules. Only a rank-4 NCHW input with a static shape qualifies (TI's rule skips other ranks). All
four calls take the depth-to-space's layer name.

Exactness: reshapes and transposes move values; the results are equal.
"""

from __future__ import annotations

from ..op import call
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass
from ._util import static_nchw

#: TI's name of the rule.
TI_RULE = "convert_depth2space_to_reshp_tr_reshp"

#: The first transpose per mode (the second swaps the last two axes in both).
_FIRST_PERM = {"DCR": [0, 3, 4, 1, 2, 5], "CRD": [0, 1, 4, 2, 3, 5]}


def _convert(m):
    d2s = m.expr
    shape = static_nchw(d2s)
    mode = str(d2s.attrs.mode).upper()
    if shape is None or mode not in _FIRST_PERM:
        return None
    n, c, h, w = shape
    b = int(d2s.attrs.block_size)
    if b < 1 or c % (b * b):
        return None
    cb = c // (b * b)
    split = [n, b, b, cb, h, w] if mode == "DCR" else [n, cb, b, b, h, w]
    layer = d2s.layer
    x = call("reshape", d2s.args[0], newshape=split, layer=layer)
    x = call("transpose", x, axes=_FIRST_PERM[mode], layer=layer)
    x = call("transpose", x, axes=[0, 1, 2, 3, 5, 4], layer=layer)
    return call("reshape", x, newshape=[n, cb, h * b, w * b], layer=layer)


CONVERT_DEPTH2SPACE_TO_RESHP_TR_RESHP = RewriteTable([
    ("depth_to_space", is_op("nn.depth_to_space"), _convert),
], name="ConvertDepth2spaceToReshpTrReshp")


@module_pass("ConvertDepth2spaceToReshpTrReshp", opt_level=0)
def convert_depth2space_to_reshp_tr_reshp(mod, ctx):
    """Turns each rank-4 depth-to-space into reshape -> two transposes -> reshape (TI's
    convert_depth2space_to_reshp_tr_reshp)."""
    return CONVERT_DEPTH2SPACE_TO_RESHP_TR_RESHP.rewrite(mod)


ConvertDepth2spaceToReshpTrReshp = convert_depth2space_to_reshp_tr_reshp

__all__ = ["ConvertDepth2spaceToReshpTrReshp", "CONVERT_DEPTH2SPACE_TO_RESHP_TR_RESHP", "TI_RULE"]
