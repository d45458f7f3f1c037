"""SimplifyInference: inference forms of training-time ops.

* ``nn.batch_norm(x, gamma, beta, mean, var).0`` -> ``add(multiply(x, scale), shift)`` with
  ``scale = gamma / sqrt(var + eps)`` (1 / sqrt(var + eps) when ``scale=False``) and
  ``shift = beta - mean * scale`` (``-mean * scale`` when ``center=False``), shaped to
  broadcast along the BN axis. With constant parameters the two vectors are computed here (in
  float64, rounded once); otherwise they are built from IR ops and ``expand_dims``, for
  FoldConstant to fold later. The new multiply and add keep the batch_norm's layer name.
* ``nn.dropout(x).0`` -> ``x``.
* ``nn.layer_norm`` and the other normalizations are left alone (TIDL has a layer for them).
"""

from __future__ import annotations

import numpy as np

from ..expr import Constant, Expr, const
from ..op import call
from ..pattern import is_op, is_tuple_get_item, wildcard
from ..rewrite import RewriteTable
from ..transform import module_pass
from ._util import batch_norm_scale_shift, channel_shape, is_float_tensor, normalized_axis


def _expand_to_axis(vec: Expr, axis: int, ndim: int, layer) -> Expr:
    """``vec`` of shape (C,) reshaped to broadcast along ``axis`` of a rank-``ndim`` tensor."""
    trailing = ndim - 1 - axis
    if trailing == 0:
        return vec
    return call("expand_dims", vec, axis=1, num_newaxis=trailing, layer=layer)


def _batch_norm_to_affine(m):
    bn = m["bn"]
    data = bn.args[0]
    t = data.checked_type
    if not is_float_tensor(t):
        return None
    axis = normalized_axis(bn.attrs.axis, t.ndim)
    channels = t.shape[axis]
    layer = bn.layer
    params = bn.args[1:]
    if all(isinstance(p, Constant) for p in params):
        scale, shift = batch_norm_scale_shift(bn, *(p.data for p in params))
        shape = channel_shape(channels, axis, t.ndim)
        scale_c = const(scale.reshape(shape), dtype=t.dtype)
        shift_c = const(shift.reshape(shape), dtype=t.dtype)
    else:
        gamma, beta, mean, var = params
        eps = const(np.asarray(bn.attrs.epsilon, dtype=t.dtype))
        std = call("sqrt", call("add", var, eps, layer=layer), layer=layer)
        if bn.attrs.scale:
            scale = call("divide", gamma, std, layer=layer)
        else:
            scale = call("divide", const(np.ones((), dtype=t.dtype)), std, layer=layer)
        shift = call("negative", call("multiply", mean, scale, layer=layer), layer=layer)
        if bn.attrs.center:
            shift = call("add", shift, beta, layer=layer)
        scale_c = _expand_to_axis(scale, axis, t.ndim, layer)
        shift_c = _expand_to_axis(shift, axis, t.ndim, layer)
    return call("add", call("multiply", data, scale_c, layer=layer), shift_c, layer=layer)


def _dropout_to_identity(m):
    return m["x"]


SIMPLIFY_INFERENCE = RewriteTable([
    ("batch_norm_to_affine", is_tuple_get_item(is_op("nn.batch_norm").named("bn"), 0), _batch_norm_to_affine),
    ("dropout_to_identity", is_tuple_get_item(is_op("nn.dropout")(wildcard().named("x")), 0),
     _dropout_to_identity),
], name="SimplifyInference")


@module_pass("SimplifyInference", opt_level=0)
def simplify_inference(mod, ctx):
    """Rewrites batch_norm into multiply/add and drops dropout."""
    return SIMPLIFY_INFERENCE.rewrite(mod)


SimplifyInference = simplify_inference
