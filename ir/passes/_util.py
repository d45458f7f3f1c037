"""Shared pieces of the passes: per-channel constants, batch-norm arithmetic, softmax axis swaps."""

from __future__ import annotations

from typing import List, Optional

import numpy as np

from ..expr import Call, Constant, Expr
from ..op import call
from ..types import TensorType

FLOAT_DTYPES = ("float16", "float32", "float64")


def is_float_tensor(t) -> bool:
    return isinstance(t, TensorType) and t.dtype in FLOAT_DTYPES


def per_channel_vector(value: Expr, out_type: TensorType, axis: int) -> Optional[np.ndarray]:
    """The length-C vector of a constant that, broadcast against a tensor of ``out_type``,
    varies only along ``axis`` (C = that axis' size) and does not enlarge the result; else None.

    ``(C,1,1)`` against ``(N,C,H,W)`` at axis 1, ``(C,)`` against ``(N,C)`` at axis 1, and
    scalars all qualify; ``(C,)`` against ``(N,C,H,W)`` does not (it broadcasts along W).
    """
    if not isinstance(value, Constant) or not isinstance(out_type, TensorType):
        return None
    data = value.data
    if data.dtype.name != out_type.dtype or data.ndim > out_type.ndim:
        return None
    shape = (1,) * (out_type.ndim - data.ndim) + data.shape
    channels = out_type.shape[axis]
    for i, size in enumerate(shape):
        if size != 1 and not (i == axis and size == channels):
            return None
    flat = data.reshape(-1)
    return np.full(channels, flat[0], dtype=data.dtype) if flat.size == 1 else flat.copy()


def channel_shape(channels: int, axis: int, ndim: int) -> tuple:
    """Shape of a per-channel constant that broadcasts along ``axis`` of a rank-``ndim`` tensor."""
    return (channels,) + (1,) * (ndim - 1 - axis)


def batch_norm_scale_shift(call: Call, gamma, beta, mean, var):
    """``(scale, shift)`` with ``batch_norm(x) == x * scale + shift`` along the BN axis.

    Computed in float64 and rounded once to the data dtype.
    """
    attrs = call.attrs
    std = np.sqrt(np.asarray(var, np.float64) + float(attrs.epsilon))
    scale = (np.asarray(gamma, np.float64) if attrs.scale else np.ones_like(std)) / std
    shift = -np.asarray(mean, np.float64) * scale
    if attrs.center:
        shift = shift + np.asarray(beta, np.float64)
    return scale, shift


def normalized_axis(axis: int, ndim: int) -> int:
    return axis % ndim if ndim else 0


def softmax_axis_swap(call_: Call, from_end: int) -> Optional[List[int]]:
    """The permutation swapping axis ``-from_end`` with the last when ``call_`` is a softmax along axis
    ``-from_end`` of a tensor of rank ``from_end`` or more, else None (TI's softmax axis rules)."""
    if not isinstance(call_, Call) or call_.op_name != "nn.softmax":
        return None
    t = call_.args[0].checked_type
    if not isinstance(t, TensorType) or t.ndim < from_end or call_.attrs.axis % t.ndim != t.ndim - from_end:
        return None
    perm = list(range(t.ndim))
    perm[-1], perm[-from_end] = perm[-from_end], perm[-1]
    return perm


def softmax_along_width(softmax: Call, perm: List[int]) -> Expr:
    """``softmax`` run along the last axis between two transposes by ``perm`` (a swap: its own inverse);
    all three calls take the softmax's layer name."""
    layer = softmax.layer
    inner = call("transpose", softmax.args[0], axes=perm, layer=layer)
    normed = call("nn.softmax", inner, axis=-1, layer=layer)
    return call("transpose", normed, axes=perm, layer=layer)


def static_nchw(call_: Call) -> Optional[List[int]]:
    """The static (N, C, H, W) shape of a pixel shuffle's input in layout NCHW, else None."""
    t = call_.args[0].checked_type
    if not isinstance(t, TensorType) or len(t.shape) != 4 or str(getattr(call_.attrs, "layout", "NCHW")) != "NCHW":
        return None
    try:
        return [int(d) for d in t.shape]
    except (TypeError, ValueError):
        return None


def plane_reduction_as_dense(x: Expr, form: str, keep: bool, column, layer) -> Expr:
    """A reduction of the 4-D ``x`` over its width (``form`` "w") or its plane ("hw") as TI's model
    optimizer writes it: a dense (MatMul) by the constant row ``column(n)`` of the reduced size,
    reshaped back to the reduction's shape (``keep``: keepdims)."""
    n, c, h, w = (int(d) for d in x.checked_type.shape)
    if form == "w":
        out = call("nn.dense", x, column(w), units=1, layer=layer)
        return out if keep else call("reshape", out, newshape=[n, c, h], layer=layer)
    flat = call("reshape", x, newshape=[n, 1, c, h * w], layer=layer)
    out = call("nn.dense", flat, column(h * w), units=1, layer=layer)
    return call("reshape", out, newshape=[n, c, 1, 1] if keep else [n, c], layer=layer)
