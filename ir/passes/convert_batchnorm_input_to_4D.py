"""ConvertBatchnormInputTo4D: a batch norm of a tensor of rank below 4 runs on that tensor
reshaped to 4-D with trailing ones, then reshaped back (TI's model optimizer rule
``convert_batchnorm_input_to_4D``, on by default in TI's runner). TIDL's BatchNorm is a layer
on N, C, H, W data.

    nn.batch_norm(x, g, b, m, v, axis=1).0          # x: (N, C)
    ->
    %0 = reshape(x, newshape=[N, C, 1, 1]);
    %1 = nn.batch_norm(%0, g, b, m, v, axis=1);
    reshape(%1.0, newshape=[N, C])

As in TI's rule, the ones are appended at the end (rank 2: two, rank 3: one), so the normalized
axis 1 stays axis 1. The new calls take the batch norm's layer name.

Exactness: the reshapes move no value; each value is normalized by the same per-channel
constants, so the results are equal.
"""

from __future__ import annotations

from ..expr import Call, TupleGetItem
from ..op import call
from ..pattern import is_op, is_tuple_get_item
from ..rewrite import RewriteTable
from ..transform import module_pass
from ..types import TensorType

#: TI's name of the rule.
TI_RULE = "convert_batchnorm_input_to_4D"


def _convert(m):
    item = m.expr
    bn = item.tuple_value
    t = bn.args[0].checked_type
    if not isinstance(t, TensorType) or not 2 <= t.ndim < 4 or bn.attrs.axis % t.ndim != 1:
        return None
    dims = [int(d) for d in t.shape]
    layer = bn.layer
    flat = call("reshape", bn.args[0], newshape=dims + [1] * (4 - t.ndim), layer=layer)
    norm = Call(bn.op, [flat] + list(bn.args[1:]), bn.attrs, layer=layer)
    return call("reshape", TupleGetItem(norm, 0), newshape=dims, layer=layer)


CONVERT_BATCHNORM_INPUT_TO_4D = RewriteTable([
    ("batch_norm_below_rank_4", is_tuple_get_item(is_op("nn.batch_norm"), 0), _convert),
], name="ConvertBatchnormInputTo4D")


@module_pass("ConvertBatchnormInputTo4D", opt_level=0)
def convert_batchnorm_input_to_4D(mod, ctx):
    """Runs each batch norm of a rank-2 or rank-3 tensor on the tensor reshaped to 4-D (TI's
    convert_batchnorm_input_to_4D)."""
    return CONVERT_BATCHNORM_INPUT_TO_4D.rewrite(mod)


ConvertBatchnormInputTo4D = convert_batchnorm_input_to_4D

__all__ = ["ConvertBatchnormInputTo4D", "CONVERT_BATCHNORM_INPUT_TO_4D", "TI_RULE"]
