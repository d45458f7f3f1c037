"""ConvertSpace2depthToReshpTrReshp: a space-to-depth (YOLOv5's Focus, a pixel unshuffle) becomes
reshape -> transpose -> reshape (TI's model optimizer rule ``convert_space2depth_to_reshp_tr_reshp``,
on by default in TI's runner; it runs before ``optimize_reshp_tr_reshp``).

    nn.space_to_depth(x, block_size=b)                  # x: (N, C, H, W), ONNX's (DCR) order
    ->
    %0 = reshape(x, newshape=[N, C, H / b, b, W / b, b]);
    %1 = transpose(%0, axes=[0, 3, 5, 1, 2, 4]);        # (N, b, b, C, H / b, W / b)
    reshape(%1, newshape=[N, C * b * b, H / b, W / b])

TI's rule writes the first shape as (N, C, C / b, b, H / b, b), which holds the input's values only
when C, H and W are equal (otherwise the reshape's element count differs, or the values land in
the wrong places); tidlx writes the shape the transpose and the final reshape imply, as a TI user
would expect. Only a rank-4 NCHW input with a static shape in ONNX's order (mode DCR) qualifies;
the rewritten ops are judged one by one by the support rules. All three calls take the
space-to-depth's layer name.

Exactness: reshapes and transposes move values; the results are equal.
"""

from __future__ import annotations

from ..op import call
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass
from ._util import static_nchw

#: TI's name of the rule.
TI_RULE = "convert_space2depth_to_reshp_tr_reshp"


def _convert(m):
    s2d = m.expr
    shape = static_nchw(s2d)
    if shape is None or str(s2d.attrs.mode).upper() != "DCR":
        return None
    n, c, h, w = shape
    b = int(s2d.attrs.block_size)
    if b < 1 or h % b or w % b:
        return None
    layer = s2d.layer
    x = call("reshape", s2d.args[0], newshape=[n, c, h // b, b, w // b, b], layer=layer)
    x = call("transpose", x, axes=[0, 3, 5, 1, 2, 4], layer=layer)
    return call("reshape", x, newshape=[n, c * b * b, h // b, w // b], layer=layer)


CONVERT_SPACE2DEPTH_TO_RESHP_TR_RESHP = RewriteTable([
    ("space_to_depth", is_op("nn.space_to_depth"), _convert),
], name="ConvertSpace2depthToReshpTrReshp")


@module_pass("ConvertSpace2depthToReshpTrReshp", opt_level=0)
def convert_space2depth_to_reshp_tr_reshp(mod, ctx):
    """Turns each rank-4 space-to-depth into reshape -> transpose -> reshape (TI's
    convert_space2depth_to_reshp_tr_reshp)."""
    return CONVERT_SPACE2DEPTH_TO_RESHP_TR_RESHP.rewrite(mod)


ConvertSpace2depthToReshpTrReshp = convert_space2depth_to_reshp_tr_reshp

__all__ = ["ConvertSpace2depthToReshpTrReshp", "CONVERT_SPACE2DEPTH_TO_RESHP_TR_RESHP", "TI_RULE"]
