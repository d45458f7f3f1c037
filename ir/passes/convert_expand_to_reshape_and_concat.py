"""ConvertExpandToReshapeAndConcat: an expand (broadcast) becomes a reshape adding the leading
ones, if any, then along each axis the expand enlarges a concatenation of that many copies (TI's
model optimizer rule ``convert_expand_to_reshape_and_concat``, on by default in TI's runner).
TIDL has no Expand layer.

    broadcast_to(x, shape=[1, 3, 4, 5])       # x: (3, 1, 5)
    ->
    %0 = reshape(x, newshape=[1, 3, 1, 5]);
    concatenate((%0, %0, %0, %0), axis=-2)

The axes are taken in order, each concatenation reading the previous one's result, as TI's
rule does (its axis counted from the right). TI's rule compares its input with the Expand's
shape input; tidlx reads the expand's result shape, which is the same wherever the ONNX shape
does not carry a 1 for a larger input dimension. A constant input is left to constant folding.
All new calls take the expand's layer name. TI's next rule (``convert_single_concat_to_consecutive
_concats``) splits each concatenation of copies into two-input ones.

Exactness: both forms copy the same values.
"""

from __future__ import annotations

from ..expr import Call, Constant, Tuple
from ..op import call
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass
from ..types import TensorType

#: TI's name of the rule.
TI_RULE = "convert_expand_to_reshape_and_concat"


def _convert(m):
    expand = m.expr
    x = expand.args[0]
    t, out = x.checked_type, expand.checked_type
    if isinstance(x, Constant) or not isinstance(t, TensorType) or not isinstance(out, TensorType):
        return None
    target = [int(d) for d in out.shape]
    rank = len(target)
    dims = [1] * (rank - t.ndim) + [int(d) for d in t.shape]
    layer = expand.layer
    result = x if t.ndim == rank else call("reshape", x, newshape=dims, layer=layer)
    for axis, (have, want) in enumerate(zip(dims, target)):
        if have != want:
            result = call("concatenate", Tuple([result] * want), axis=axis - rank, layer=layer)
    return result


CONVERT_EXPAND_TO_RESHAPE_AND_CONCAT = RewriteTable([
    ("expand", is_op("broadcast_to"), _convert),
], name="ConvertExpandToReshapeAndConcat")


@module_pass("ConvertExpandToReshapeAndConcat", opt_level=0)
def convert_expand_to_reshape_and_concat(mod, ctx):
    """Turns an expand into a reshape and concatenations of copies (TI's
    convert_expand_to_reshape_and_concat)."""
    return CONVERT_EXPAND_TO_RESHAPE_AND_CONCAT.rewrite(mod)


ConvertExpandToReshapeAndConcat = convert_expand_to_reshape_and_concat

__all__ = ["ConvertExpandToReshapeAndConcat", "CONVERT_EXPAND_TO_RESHAPE_AND_CONCAT", "TI_RULE"]
