"""Fast batch normalization: one numba pass per activation, the per-channel scale and shift cached
for constant parameters, and the epilogues (in-place fused forms) of batch_norm and bias_add. Same
bits as reference/op_nn.py (x * scale, then + shift; x + bias). Dense layers of one sample: the
matrix-vector product in blocks of rows over the run's threads (_parallel.matvec)."""

from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from ..reference import op_nn as ref
from ..reference._common import out_dtype
from ..registry import epilogue, fast_kernel
from ._parallel import MIN_ELEMENTWISE_BLOCK, matvec, run_blocks

#: |fast - reference| / max |reference| of a dense layer: each output is one BLAS dot product as in
#: the reference's product, but OpenBLAS does not promise that a block of rows sums like the whole
#: matrix (on every shape measured here it did: the same bits)
DENSE_TOLERANCE = 1e-5


def dense_as_matvec(x_shape: tuple, x_dtype: np.dtype, w: np.ndarray, dtype: np.dtype) -> bool:
    """Whether nn.dense(x, w) runs as one matrix-vector product: one float sample of w's dtype."""
    return len(x_shape) == 2 and x_shape[0] == 1 and x_dtype == w.dtype == dtype and dtype.kind == "f" and w.ndim == 2


@fast_kernel("nn.dense", fresh_result=True, tolerance=DENSE_TOLERANCE)
def dense(args, attrs, out_type):
    x, w = args
    if dense_as_matvec(x.shape, x.dtype, w, out_dtype(out_type)):
        return matvec(w, x.reshape(-1)).reshape(1, -1)
    return ref.dense(args, attrs, out_type)


@fast_kernel("nn.batch_norm")
def batch_norm(args, attrs, out_type):
    x, gamma, beta, mean, var = args
    return _batch_norm_into(x, args[1:], attrs, None), mean, var


@epilogue("nn.batch_norm", tuple_item=0, tail="affine")
def batch_norm_epilogue(x, others, attrs, in_place):
    """Item 0 of batch_norm (fusion absorbs the op with its TupleGetItem 0)."""
    if x.dtype.kind != "f" or not x.flags.c_contiguous:
        return None
    return _batch_norm_into(x, others, attrs, x if in_place else None)


def affine_rows(shape: tuple, axis: int, dtype: np.dtype):
    """(rows shape, row count, min_block) of the one numba pass of a per-channel affine over a
    tensor of this shape (``x * scale[c] + shift[c]`` on (outer, C, inner) rows), or None when
    numpy's multiply and add run it (small or narrow tensors)."""
    inner = math.prod(shape[axis + 1:])  # not np.prod: ~10 us of call overhead per batch norm
    if dtype.kind == "f" and math.prod(shape) >= 4096 and inner >= 16:
        return (-1, shape[axis], inner), math.prod(shape[:axis + 1]), max(1, MIN_ELEMENTWISE_BLOCK // inner)
    return None


def _batch_norm_into(x, params, attrs, out):
    """Normalized x into ``out`` (x itself for in place; None: a new array)."""
    axis = attrs.axis % x.ndim
    scale, shift = cached_scale_shift(x.dtype, params, attrs)
    plan = affine_rows(x.shape, axis, x.dtype)
    if plan is not None:
        from ._jit import channel_affine, channel_affine_blocks, channel_affine_inplace, \
            channel_affine_inplace_blocks

        rows_shape, count, min_block = plan
        rows = np.ascontiguousarray(x).reshape(rows_shape)
        if out is x:
            run_blocks(count, channel_affine_inplace, channel_affine_inplace_blocks, rows, scale, shift,
                       min_block=min_block)
            return x
        dst = np.empty_like(rows) if out is None else out.reshape(rows.shape)
        run_blocks(count, channel_affine, channel_affine_blocks, rows, scale, shift, dst, min_block=min_block)
        return dst.reshape(x.shape)
    y = np.multiply(x, ref._along(scale, axis, x.ndim), out=out)
    y += ref._along(shift, axis, x.ndim)  # in place: one pass, no second array
    return y


_scale_cache_lock = threading.Lock()
_scale_cache: dict = {}


def cached_scale_shift(dtype, params, attrs):
    """reference.op_nn.scale_shift, cached while the four parameter arrays live when they are
    read-only constants: its ~10 small numpy ops cost ~50 us, a quarter of a ResNet batch norm's time."""
    constant = all(type(p) is np.ndarray and not p.flags.writeable for p in params)
    if not constant:
        return ref.scale_shift(dtype, params, attrs)
    key = (tuple(id(p) for p in params), dtype, attrs.epsilon, attrs.scale, attrs.center)
    with _scale_cache_lock:
        hit = _scale_cache.get(key)
    if hit is not None and all(r() is p for r, p in zip(hit[0], params)):
        return hit[1]
    result = ref.scale_shift(dtype, params, attrs)
    try:
        refs = tuple(weakref.ref(p, lambda _r, k=key: _scale_cache.pop(k, None)) for p in params)
    except TypeError:
        return result
    with _scale_cache_lock:
        _scale_cache[key] = (refs, result)
    return result


@epilogue("nn.bias_add", tail="affine")
def bias_add_epilogue(x, others, attrs, in_place):
    """x + bias along the axis, written into x (a convolution's bias: no new activation). In a
    one-pass tail it is the affine step with scale 1 (x * 1 is x exactly, _tail.py)."""
    (bias,) = others
    if x.dtype.kind != "f" or type(bias) is not np.ndarray or bias.dtype != x.dtype or bias.ndim != 1 \
            or not x.flags.c_contiguous:
        return None
    axis = attrs.axis % x.ndim
    if bias.shape[0] != x.shape[axis]:
        return None
    return np.add(x, ref._along(bias, axis, x.ndim), out=x if in_place else None)
