"""Dense layers, normalization, softmax, padding, flatten, dropout and pixel shuffles."""

from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from ..registry import epilogue, kernel
from ._common import from_nchw, matmul_any, out_dtype, to_nchw
from ._parallel import MIN_ELEMENTWISE_BLOCK, run_blocks


# --- matrix products ---------------------------------------------------------------------------

@kernel("nn.dense")
def dense(args, attrs, out_type):
    x, w = args
    return matmul_any(x, w.T, out_dtype(out_type))


@kernel("nn.matmul")
def matmul(args, attrs, out_type):
    a, b = args
    if attrs.transpose_a:
        a = np.swapaxes(a, -1, -2)
    if attrs.transpose_b:
        b = b.T
    return matmul_any(a, b, out_dtype(out_type))


@kernel("nn.batch_matmul")
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
    x, gamma, beta, mean, var = args
    return _batch_norm_into(x, args[1:], attrs, None), mean, var


@epilogue("nn.batch_norm")
def batch_norm_epilogue(x, others, attrs, in_place):
    """Item 0 of batch_norm (the interpreter fuses the op with its TupleGetItem 0)."""
    if x.dtype.kind != "f" or not x.flags.c_contiguous:
        return None
    return _batch_norm_into(x, others, attrs, x if in_place else None)


def _batch_norm_into(x, params, attrs, out):
    """Normalized x into ``out`` (x itself for in place; None: a new array)."""
    axis = attrs.axis % x.ndim
    scale, shift = _scale_shift(x.dtype, params, attrs)
    inner = math.prod(x.shape[axis + 1:])  # not np.prod: ~10 us of call overhead per batch norm
    if x.dtype.kind == "f" and x.size >= 4096 and inner >= 16:
        from ._jit import channel_affine, channel_affine_blocks, channel_affine_inplace, \
            channel_affine_inplace_blocks

        # (outer, C, inner) rows with one scale and shift each, in one pass
        rows = np.ascontiguousarray(x).reshape(-1, x.shape[axis], inner)
        count, min_block = rows.shape[0] * rows.shape[1], max(1, MIN_ELEMENTWISE_BLOCK // inner)
        if out is x:
            run_blocks(count, channel_affine_inplace, channel_affine_inplace_blocks, rows, scale, shift,
                       min_block=min_block)
            return x
        dst = np.empty_like(rows) if out is None else out.reshape(rows.shape)
        run_blocks(count, channel_affine, channel_affine_blocks, rows, scale, shift, dst, min_block=min_block)
        return dst.reshape(x.shape)
    y = np.multiply(x, _along(scale, axis, x.ndim), out=out)
    y += _along(shift, axis, x.ndim)  # in place: one pass, no second array
    return y


_scale_cache_lock = threading.Lock()
_scale_cache: dict = {}


def _scale_shift(dtype, params, attrs):
    """Inference form, as onnxruntime folds it: y = x * scale + (beta - mean * scale). Cached while
    the four parameter arrays live when they are read-only constants: the ~10 small numpy ops
    cost ~50 us, a quarter of a ResNet batch norm's time."""
    gamma, beta, mean, var = params
    constant = all(type(p) is np.ndarray and not p.flags.writeable for p in params)
    key = (tuple(id(p) for p in params), dtype, attrs.epsilon, attrs.scale, attrs.center)
    if constant:
        with _scale_cache_lock:
            hit = _scale_cache.get(key)
        if hit is not None and all(r() is p for r, p in zip(hit[0], params)):
            return hit[1]
    dt = dtype.type
    scale = dt(1) / np.sqrt(var + dt(attrs.epsilon))
    if attrs.scale:
        scale = scale * gamma
    shift = (beta if attrs.center else dt(0)) - mean * scale
    result = (scale.astype(dtype), np.asarray(shift, dtype))
    if constant:
        try:
            refs = tuple(weakref.ref(p, lambda _r, k=key: _scale_cache.pop(k, None)) for p in params)
        except TypeError:
            return result
        with _scale_cache_lock:
            _scale_cache[key] = (refs, result)
    return result


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
