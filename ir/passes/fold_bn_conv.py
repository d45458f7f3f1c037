"""FoldBatchNormIntoConv: ``conv2d [+ bias] -> batch_norm`` becomes ``conv2d + bias_add``.

    bn(conv(x, W) + b) = conv(x, W * s) + (b * s + t)     s, t = the BN's scale and shift

per output channel, with ``W`` scaled along its ``O`` axis. The BN may be ``nn.batch_norm(...).0``
or SimplifyInference's ``add(multiply(y, s), t)``; the bias may be ``nn.bias_add`` or an ``add``
of a per-channel constant. Folded only when the weights and the BN parameters are constants,
the BN acts on the conv's channel axis, and no intermediate result has another user. The new
conv and bias_add keep the conv's layer name (the BN merges into that layer, as TIDL does).
"""

from __future__ import annotations

from ..pattern import is_constant, is_op, wildcard
from ..rewrite import RewriteTable
from ..transform import module_pass
from ._bn_fold import (add_bias, all_single_use, bias_vector, bn_like, bn_vectors, scale_along, with_bias,
                       with_new_weight)
from ._util import is_float_tensor


def _conv_pattern():
    return is_op("nn.conv2d")(wildcard(), is_constant().named("weight")).named("producer")


def _fold(m):
    conv = m["producer"]
    out_t = conv.checked_type
    weight = m["weight"].data
    if not is_float_tensor(out_t) or weight.dtype.name != out_t.dtype:
        return None
    out_layout = conv.attrs.out_layout or conv.attrs.data_layout
    axis = out_layout.index("C")
    vectors = bn_vectors(m, out_t, axis)
    if vectors is None:
        return None
    scale, shift, inner = vectors
    bias = bias_vector(m, out_t, axis)
    if bias is None or not all_single_use(m, [conv, m.get("bias_op")] + inner):
        return None
    new_weight = scale_along(weight, scale, conv.attrs.kernel_layout.index("O"))
    new_conv = with_new_weight(conv, new_weight)
    return add_bias(new_conv, bias * scale + shift, axis, out_t.dtype, conv.layer)


FOLD_BN_INTO_CONV = RewriteTable([
    ("fold_bn_into_conv", bn_like(with_bias(_conv_pattern())), _fold),
], name="FoldBatchNormIntoConv")


@module_pass("FoldBatchNormIntoConv", opt_level=2)
def fold_batch_norm_into_conv(mod, ctx):
    """Folds an inference batch norm after a conv2d into the conv's weights and bias."""
    return FOLD_BN_INTO_CONV.rewrite(mod)


FoldBatchNormIntoConv = fold_batch_norm_into_conv
