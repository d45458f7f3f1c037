"""FoldBatchNormIntoDense: the "BN + GEMM merge".

An inference batch norm next to an ``nn.dense`` is folded into the dense's weights and bias:

* into the preceding dense (BN on the dense's output features, axis -1):
      bn(dense(x, W) + b) = dense(x, W * s[:, None]) + (b * s + t)
* into the following dense (BN on the dense's input features, axis -1):
      dense(bn(y), W) + b = dense(y, W * s[None, :]) + (b + W @ t)

The preceding dense is preferred (it is met first, bottom-up); the following one is used when
the BN's input is not a foldable dense (e.g. ``dense -> relu -> BN -> dense``). The BN may be
``nn.batch_norm(...).0`` or SimplifyInference's ``add(multiply(y, s), t)``; the dense's bias may
be ``nn.bias_add`` or an ``add`` of a constant. Weights and BN parameters must be constants and
the intermediate results may have no other user, except one:

* a BN whose every user is a foldable dense (BEVDet's camera-aware DepthNet: ``bn`` feeds both
  ``context_mlp.fc1`` and ``depth_mlp.fc1``) is folded into each of them, every dense getting its
  own scaled weights and bias, and disappears. For TIDL this is the right outcome: kept, the BN
  would be a per-feature scale and bias on a rank-2 (N, 27) tensor, the shape of op TI's own
  flows warn crashes TIDL (an FC bias add of rank 2), while each folded dense is a plain
  InnerProduct. If any user is something else, the BN stays (folding into some users only
  would still need it for the others).

This merge is what broke TI's TIDL import for a user with a BatchNorm between two Gemms; turn
it off with ``PassContext(disabled_passes=["FoldBatchNormIntoDense"])``.
"""

from __future__ import annotations

import numpy as np

from ..expr import Call, Constant
from ..pattern import is_constant, is_op, wildcard
from ..rewrite import RewriteTable
from ..transform import module_pass
from ._bn_fold import (add_bias, all_single_use, bias_of_call, bias_vector, bn_like, bn_vectors, scale_along,
                       with_bias, with_new_weight)
from ._util import is_float_tensor


def _dense_ok(dense: Call, weight: np.ndarray) -> bool:
    t = dense.checked_type
    return is_float_tensor(t) and weight.dtype.name == t.dtype and dense.args[0].checked_type.dtype == t.dtype


# -- into the preceding dense ----------------------------------------------------------------

def _fold_into_previous(m):
    dense = m["producer"]
    weight = m["weight"].data
    if not _dense_ok(dense, weight):
        return None
    out_t = dense.checked_type
    axis = out_t.ndim - 1
    vectors = bn_vectors(m, out_t, axis)
    if vectors is None:
        return None
    scale, shift, inner = vectors
    bias = bias_vector(m, out_t, axis)
    if bias is None or not all_single_use(m, [dense, m.get("bias_op")] + inner):
        return None
    new_dense = with_new_weight(dense, scale_along(weight, scale, 0))
    return add_bias(new_dense, bias * scale + shift, axis, out_t.dtype, dense.layer)


# -- into the following dense ----------------------------------------------------------------

def _consumer_pattern():
    return is_op("nn.dense")(bn_like(wildcard().named("bn_input")).named("bn_out"),
                             is_constant().named("weight")).named("consumer")


def _fold_into_next(m, dense: Call, bias: np.ndarray, bias_op):
    weight = m["weight"].data
    if not _dense_ok(dense, weight):
        return None
    x_t = m["bn_input"].checked_type
    axis = x_t.ndim - 1
    vectors = bn_vectors(m, x_t, axis)
    if vectors is None:
        return None
    scale, shift, inner = vectors
    if not (_users_are_foldable_denses(m) and all_single_use(m, [dense, bias_op] + inner)):
        return None
    new_weight = scale_along(weight, scale, 1)
    new_bias = bias + weight.astype(np.float64) @ shift
    new_dense = Call(dense.op, (m["bn_input"], _const_like(new_weight)), dense.attrs, layer=dense.layer)
    out_t = dense.checked_type
    return add_bias(new_dense, new_bias, out_t.ndim - 1, out_t.dtype, dense.layer)


def _users_are_foldable_denses(m) -> bool:
    """The BN output's users are all nn.dense calls reading it as data with constant weights
    (one such user: the plain fold; several: each is folded, see the module docstring)."""
    users = m.users(m["bn_out"])
    if not users:
        return False
    if len(users) == 1:
        return True
    return all(isinstance(u, Call) and u.op_name == "nn.dense" and u.args[0] is m["bn_out"]
               and isinstance(u.args[1], Constant) for u in users)


def _const_like(arr):
    from ..expr import const

    return const(arr, dtype=arr.dtype.name)


def _fold_into_next_with_bias(m):
    dense = m["consumer"]
    out_t = dense.checked_type
    bias = bias_vector(m, out_t, out_t.ndim - 1)
    if bias is None:
        return None
    return _fold_into_next(m, dense, bias, m["bias_op"])


def _fold_into_next_without_bias(m):
    dense = m["consumer"]
    out_t = dense.checked_type
    users = m.users(dense)
    if users and len(users) == 1 and users[0] is not None and bias_of_call(users[0], out_t, out_t.ndim - 1) is not None:
        return None  # its bias is folded too, by the rule rooted at that bias (met next, bottom-up)
    return _fold_into_next(m, dense, np.zeros(out_t.shape[-1], np.float64), None)


def _biased_consumer_pattern():
    consumer = _consumer_pattern()
    bias = is_constant().named("bias")
    return (is_op("nn.bias_add")(consumer, bias).named("bias_op")
            | is_op("add")(consumer, bias).commutative().named("bias_op"))


def _previous_pattern():
    dense = is_op("nn.dense")(wildcard(), is_constant().named("weight")).named("producer")
    return bn_like(with_bias(dense))


FOLD_BN_INTO_DENSE = RewriteTable([
    ("fold_bn_into_previous_dense", _previous_pattern(), _fold_into_previous),
    ("fold_bn_into_next_dense_with_bias", _biased_consumer_pattern(), _fold_into_next_with_bias),
    ("fold_bn_into_next_dense", _consumer_pattern(), _fold_into_next_without_bias),
], name="FoldBatchNormIntoDense")


@module_pass("FoldBatchNormIntoDense", opt_level=2)
def fold_batch_norm_into_dense(mod, ctx):
    """Folds an inference batch norm into a neighbouring dense (the BN + GEMM merge)."""
    return FOLD_BN_INTO_DENSE.rewrite(mod)


FoldBatchNormIntoDense = fold_batch_norm_into_dense
