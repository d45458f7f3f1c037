"""Patterns and arithmetic shared by FoldBatchNormIntoConv and FoldBatchNormIntoDense.

A "BN-like" node is an inference batch norm with constant parameters in either form:
``nn.batch_norm(x, g, b, m, v).0`` or ``add(multiply(x, s), t)`` (what SimplifyInference
makes) with per-channel constants. Both mean ``x * scale + shift`` along one axis.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ..expr import Call, Constant, Expr, const
from ..op import call
from ..pattern import Match, Pattern, is_constant, is_op, is_tuple_get_item
from ..types import TensorType
from ._util import batch_norm_scale_shift, is_float_tensor, normalized_axis, per_channel_vector


def bn_like(inner: Pattern) -> Pattern:
    """Either BN form applied to ``inner``; captures ``bn`` (the batch_norm call) or ``affine``
    (the add), ``mul``, ``scale`` and ``shift`` of the multiply/add form."""
    bn = is_op("nn.batch_norm")(inner, is_constant(), is_constant(), is_constant(), is_constant()).named("bn")
    scaled = is_op("multiply")(inner, is_constant().named("scale")).commutative().named("mul")
    affine = is_op("add")(scaled, is_constant().named("shift")).commutative().named("affine")
    return is_tuple_get_item(bn, 0) | affine


def with_bias(producer: Pattern) -> Pattern:
    """``producer``, or ``producer`` plus a constant bias (``nn.bias_add`` or ``add``);
    captures ``bias_op`` and ``bias``."""
    bias = is_constant().named("bias")
    bias_add = is_op("nn.bias_add")(producer, bias).named("bias_op")
    add = is_op("add")(producer, bias).commutative().named("bias_op")
    return bias_add | add | producer


def bn_vectors(m: Match, x_type: TensorType, axis: int) -> Optional[Tuple[np.ndarray, np.ndarray, List[Expr]]]:
    """``(scale, shift, inner nodes)`` of the matched BN-like node when it acts along ``axis``
    of its input (of type ``x_type``); None otherwise. The inner nodes (the batch_norm call, or
    the multiply) must have no other user for a fold to be worth it."""
    if not is_float_tensor(x_type):
        return None
    if "bn" in m:
        bn = m["bn"]
        if normalized_axis(bn.attrs.axis, x_type.ndim) != axis:
            return None
        scale, shift = batch_norm_scale_shift(bn, *(p.data for p in bn.args[1:]))
        return scale, shift, [bn]
    mul = m["mul"]
    scale = per_channel_vector(m["scale"], x_type, axis)
    if scale is None or mul.checked_type != x_type:
        return None
    shift = per_channel_vector(m["shift"], x_type, axis)
    if shift is None or m["affine"].checked_type != x_type:
        return None
    return scale.astype(np.float64), shift.astype(np.float64), [mul]


def bias_vector(m: Match, out_type: TensorType, axis: int) -> Optional[np.ndarray]:
    """The per-channel bias of a matched ``with_bias`` (zeros when there is none), or None when
    the bias does not act along ``axis`` alone."""
    bias_op = m.get("bias_op")
    if bias_op is None:
        return np.zeros(out_type.shape[axis], np.float64)
    return bias_of_call(bias_op, out_type, axis)


def bias_of_call(bias_op: Expr, out_type: TensorType, axis: int) -> Optional[np.ndarray]:
    """The bias vector of ``bias_add(y, b)`` / ``add(y, b)`` along ``axis`` of ``y``, or None."""
    if not isinstance(bias_op, Call) or bias_op.op_name not in ("nn.bias_add", "add"):
        return None
    consts = [a for a in bias_op.args if isinstance(a, Constant)]
    if len(consts) != 1:
        return None
    if bias_op.op_name == "nn.bias_add":
        if not isinstance(bias_op.args[1], Constant):
            return None
        if normalized_axis(bias_op.attrs.axis, out_type.ndim) != axis:
            return None
        vec = consts[0].data
        return vec.astype(np.float64) if vec.dtype.name == out_type.dtype else None
    if bias_op.checked_type != out_type:
        return None
    vec = per_channel_vector(consts[0], out_type, axis)
    return None if vec is None else vec.astype(np.float64)


def all_single_use(m: Match, nodes) -> bool:
    return all(m.num_users(n) == 1 for n in nodes if n is not None)


def scale_along(weight: np.ndarray, scale: np.ndarray, axis: int) -> np.ndarray:
    """``weight`` with every slice along ``axis`` multiplied by ``scale`` (in float64, rounded once)."""
    shape = [1] * weight.ndim
    shape[axis] = scale.size
    return (weight.astype(np.float64) * scale.reshape(shape)).astype(weight.dtype)


def with_new_weight(producer: Call, weight: np.ndarray) -> Call:
    return Call(producer.op, (producer.args[0], const(weight, dtype=weight.dtype.name)), producer.attrs,
                layer=producer.layer)


def add_bias(producer_out: Call, bias: np.ndarray, axis: int, dtype: str, layer) -> Call:
    return call("nn.bias_add", producer_out, const(bias, dtype=dtype), axis=axis, layer=layer)


__all__ = ["bn_like", "with_bias", "bn_vectors", "bias_vector", "bias_of_call", "all_single_use", "scale_along",
           "with_new_weight", "add_bias"]
