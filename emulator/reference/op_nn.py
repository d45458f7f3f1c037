"""Reference kernels of dense layers, normalization, softmax, padding, flatten, dropout and pixel shuffles."""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._common import from_nchw, matmul_any, out_dtype, to_nchw


# --- matrix products ---------------------------------------------------------------------------

@kernel("nn.dense", fresh_result=True)
def dense(args, attrs, out_type):
    x, w = args
    return matmul_any(x, w.T, out_dtype(out_type))


@kernel("nn.matmul", fresh_result=True)
def matmul(args, attrs, out_type):
    a, b = args
    if attrs.transpose_a:
        a = np.swapaxes(a, -1, -2)
    if attrs.transpose_b:
        b = b.T
    return matmul_any(a, b, out_dtype(out_type))


@kernel("nn.batch_matmul", fresh_result=True)
def batch_matmul(args, attrs, out_type):
    a, b = args
    if attrs.transpose_a:
        a = a.transpose(0, 2, 1)
    if attrs.transpose_b:
        b = b.transpose(0, 2, 1)
    return matmul_any(a, b, out_dtype(out_type))


def _along(vec: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = vec.shape[0]
    return vec.reshape(shape)


@kernel("nn.bias_add")
def bias_add(args, attrs, out_type):
    x, b = args
    return x + _along(b, attrs.axis % x.ndim, x.ndim)


# --- normalization -----------------------------------------------------------------------------

@kernel("nn.batch_norm")
def batch_norm(args, attrs, out_type):
    """Inference form, as onnxruntime folds it: y = x * scale + shift with scale = gamma / sqrt(var + eps)
    and shift = beta - mean * scale (a multiply, then an add: two roundings)."""
    x, gamma, beta, mean, var = args
    axis = attrs.axis % x.ndim
    scale, shift = scale_shift(x.dtype, args[1:], attrs)
    return x * _along(scale, axis, x.ndim) + _along(shift, axis, x.ndim), mean, var


def scale_shift(dtype, params, attrs):
    """(scale, shift) of batch_norm's inference form, in ``dtype``."""
    gamma, beta, mean, var = params
    dt = dtype.type
    scale = dt(1) / np.sqrt(var + dt(attrs.epsilon))
    if attrs.scale:
        scale = scale * gamma
    shift = (beta if attrs.center else dt(0)) - mean * scale
    return scale.astype(dtype), np.asarray(shift, dtype)


def _normalize(x, axes, eps, gamma, beta, gamma_axis, center, scale):
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    var = np.mean(np.square(centered), axis=axes, keepdims=True)
    y = centered / np.sqrt(var + x.dtype.type(eps))
    if scale:
        y = y * _along(gamma, gamma_axis, x.ndim)
    if center:
        y = y + _along(beta, gamma_axis, x.ndim)
    return y.astype(x.dtype, copy=False)


@kernel("nn.layer_norm")
def layer_norm(args, attrs, out_type):
    x, gamma, beta = args
    axis = attrs.axis % x.ndim
    return _normalize(x, (axis,), attrs.epsilon, gamma, beta, axis, attrs.center, attrs.scale)


@kernel("nn.instance_norm")
def instance_norm(args, attrs, out_type):
    x, gamma, beta = args
    axis = attrs.axis % x.ndim
    axes = tuple(a for a in range(1, x.ndim) if a != axis)
    return _normalize(x, axes, attrs.epsilon, gamma, beta, axis, attrs.center, attrs.scale)


@kernel("nn.group_norm")
def group_norm(args, attrs, out_type):
    x, gamma, beta = args
    axis = attrs.axis % x.ndim
    groups = attrs.num_groups
    shape = x.shape
    # Split the channel axis into (groups, channels per group) and normalize each group.
    grouped = x.reshape(shape[:axis] + (groups, shape[axis] // groups) + shape[axis + 1:])
    axes = tuple(a for a in range(1, grouped.ndim) if a != axis)
    mean = grouped.mean(axis=axes, keepdims=True)
    centered = grouped - mean
    var = np.mean(np.square(centered), axis=axes, keepdims=True)
    y = (centered / np.sqrt(var + x.dtype.type(attrs.epsilon))).reshape(shape)
    if attrs.scale:
        y = y * _along(gamma, axis, x.ndim)
    if attrs.center:
        y = y + _along(beta, axis, x.ndim)
    return y.astype(x.dtype, copy=False)


@kernel("nn.lrn")
def lrn(args, attrs, out_type):
    x = args[0]
    axis = attrs.axis % x.ndim
    size = attrs.size
    # ONNX's window: floor((size-1)/2) channels before, ceil((size-1)/2) after.
    before, after = (size - 1) // 2, size // 2
    sq = np.square(x)
    pad = [(0, 0)] * x.ndim
    pad[axis] = (before, after)
    sqp = np.pad(sq, pad)
    csum = np.cumsum(sqp, axis=axis, dtype=np.float64)
    zero = np.zeros_like(np.take(csum, [0], axis=axis))
    csum = np.concatenate([zero, csum], axis=axis)
    n = x.shape[axis]
    window = np.take(csum, np.arange(size, size + n), axis=axis) - np.take(csum, np.arange(0, n), axis=axis)
    dt = x.dtype.type
    denom = (dt(attrs.bias) + dt(attrs.alpha / size) * window.astype(x.dtype)) ** dt(attrs.beta)
    return (x / denom).astype(x.dtype, copy=False)


@kernel("nn.l2_normalize")
def l2_normalize(args, attrs, out_type):
    x = args[0]
    axes = tuple(a % x.ndim for a in attrs.axis) if attrs.axis else tuple(range(x.ndim))
    sq = np.sum(np.square(x), axis=axes, keepdims=True)
    return (x / np.sqrt(np.maximum(sq, x.dtype.type(attrs.eps)))).astype(x.dtype, copy=False)


# --- softmax -----------------------------------------------------------------------------------

@kernel("nn.softmax")
def softmax(args, attrs, out_type):
    x = args[0]
    axis = attrs.axis % x.ndim
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@kernel("nn.log_softmax")
def log_softmax(args, attrs, out_type):
    x = args[0]
    axis = attrs.axis % x.ndim
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


# --- padding, flatten, dropout -----------------------------------------------------------------

@kernel("nn.pad")
def pad(args, attrs, out_type):
    x, value = args
    width = [tuple(int(v) for v in p) for p in attrs.pad_width]
    if attrs.pad_mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=value.astype(x.dtype).item())
    return np.pad(x, width, mode=attrs.pad_mode)


@kernel("nn.batch_flatten")
def batch_flatten(args, attrs, out_type):
    x = args[0]
    return x.reshape(x.shape[0], -1)


@kernel("nn.dropout")
def dropout(args, attrs, out_type):
    # Inference: the identity, with an all-ones mask as the second output.
    x = args[0]
    return x, np.ones_like(x)


# --- pixel shuffles ----------------------------------------------------------------------------

@kernel("nn.depth_to_space")
def depth_to_space(args, attrs, out_type):
    x = to_nchw(args[0], attrs.layout)
    n, c, h, w = x.shape
    b = attrs.block_size
    if attrs.mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:  # CRD
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return np.ascontiguousarray(from_nchw(y.reshape(n, c // (b * b), h * b, w * b), attrs.layout))


@kernel("nn.space_to_depth")
def space_to_depth(args, attrs, out_type):
    x = to_nchw(args[0], attrs.layout)
    n, c, h, w = x.shape
    b = attrs.block_size
    y = x.reshape(n, c, h // b, b, w // b, b)
    if attrs.mode == "CRD":
        y = y.transpose(0, 1, 3, 5, 2, 4)
    else:  # DCR, as ONNX SpaceToDepth
        y = y.transpose(0, 3, 5, 1, 2, 4)
    return np.ascontiguousarray(from_nchw(y.reshape(n, c * b * b, h // b, w // b), attrs.layout))
