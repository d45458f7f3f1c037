"""Pooling: max/avg (padding, dilation, ceil_mode, count_include_pad), global and adaptive pools.

Windows follow onnxruntime: padding never wins a max; an average divides by the taps inside
the image, or with ``count_include_pad`` by the taps inside the padded image (taps that only
exist because of ``ceil_mode`` never count).
"""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._common import expand_padding, pair, spatial_axes
from ._parallel import for_blocks, run_blocks


def _over_planes(kernel, driver, planes, out, *params, work_per_plane: int):
    """Runs a numba plane loop over all planes in parallel blocks (``driver``: its parallel form)."""
    count, min_block = planes.shape[0] * planes.shape[1], max(1, 200_000 // max(work_per_plane, 1))
    if driver is None:
        for_blocks(count, lambda start, stop: kernel(planes, out, *params, start, stop), min_block=min_block)
    else:
        run_blocks(count, kernel, driver, planes, out, *params, min_block=min_block)


def _to_planes(x: np.ndarray, layout: str):
    """A C-contiguous (N, C, H, W)-shaped array of ``x`` and the permutation that undoes it."""
    h_axis, w_axis = spatial_axes(layout)
    others = [a for a in range(x.ndim) if a not in (h_axis, w_axis)]
    perm = others + [h_axis, w_axis]
    planes = np.ascontiguousarray(x.transpose(perm))
    lead = planes.shape[:-2]
    planes = planes.reshape((1, int(np.prod(lead, dtype=np.int64))) + planes.shape[-2:])
    return planes, perm, lead


def _from_planes(out: np.ndarray, perm, lead) -> np.ndarray:
    out = out.reshape(tuple(lead) + out.shape[-2:])
    inverse = np.argsort(perm)
    return out.transpose(inverse) if list(perm) != sorted(perm) else out


def _out_size(size, k, s, d, pad_total, ceil_mode):
    span = size + pad_total - (d * (k - 1) + 1)
    if ceil_mode:
        span += s - 1
    return span // s + 1


def _geometry(attrs, h, w):
    kh, kw = pair(attrs.pool_size, "pool_size")
    sh, sw = pair(attrs.strides, "strides")
    dh, dw = pair(attrs.dilation, "dilation")
    pt, pl, pb, pr = expand_padding(attrs.padding)
    oh = _out_size(h, kh, sh, dh, pt + pb, attrs.ceil_mode)
    ow = _out_size(w, kw, sw, dw, pl + pr, attrs.ceil_mode)
    return kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow


def _lowest(dtype: np.dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


@kernel("nn.max_pool2d")
def max_pool2d(args, attrs, out_type):
    from ._jit import max_pool_nchw, max_pool_nchw_blocks

    x = args[0]
    planes, perm, lead = _to_planes(x, attrs.layout)
    h, w = planes.shape[-2:]
    kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow = _geometry(attrs, h, w)
    out = np.empty(planes.shape[:2] + (oh, ow), x.dtype)
    _over_planes(max_pool_nchw, max_pool_nchw_blocks, planes, out, kh, kw, sh, sw, dh, dw, pt, pl, _lowest(x.dtype),
                 work_per_plane=oh * ow * kh * kw)
    return _from_planes(out, perm, lead)


def _tap_counts(out_size, in_size, k, s, d, pad_before, pad_after, include_pad):
    """Per output index: how many of the k taps fall inside the image (or the padded image)."""
    starts = np.arange(out_size) * s - pad_before
    taps = starts[:, None] + np.arange(k)[None, :] * d
    lo, hi = (-pad_before, in_size + pad_after) if include_pad else (0, in_size)
    return ((taps >= lo) & (taps < hi)).sum(axis=1)


@kernel("nn.avg_pool2d")
def avg_pool2d(args, attrs, out_type):
    from ._jit import sum_pool_nchw, sum_pool_nchw_blocks

    x = args[0]
    planes, perm, lead = _to_planes(x, attrs.layout)
    h, w = planes.shape[-2:]
    kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow = _geometry(attrs, h, w)
    work = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    sums = np.empty(planes.shape[:2] + (oh, ow), work)
    _over_planes(sum_pool_nchw, sum_pool_nchw_blocks, planes.astype(work, copy=False), sums, kh, kw, sh, sw, dh, dw, pt, pl,
                 work_per_plane=oh * ow * kh * kw)
    counts = np.outer(_tap_counts(oh, h, kh, sh, dh, pt, pb, attrs.count_include_pad),
                      _tap_counts(ow, w, kw, sw, dw, pl, pr, attrs.count_include_pad))
    out = sums / np.maximum(counts, 1).astype(work)
    if x.dtype.kind != "f":
        out = np.trunc(out)  # integer averages truncate (TVM's C-semantics division)
    return _from_planes(out.astype(x.dtype, copy=False), perm, lead)


@kernel("nn.global_avg_pool2d")
def global_avg_pool2d(args, attrs, out_type):
    x = args[0]
    axes = spatial_axes(attrs.layout)
    if x.dtype.kind == "f":
        return x.mean(axis=axes, keepdims=True, dtype=x.dtype)
    return np.trunc(x.mean(axis=axes, keepdims=True, dtype=np.float64)).astype(x.dtype)


@kernel("nn.global_max_pool2d")
def global_max_pool2d(args, attrs, out_type):
    x = args[0]
    return x.max(axis=spatial_axes(attrs.layout), keepdims=True)


def _adaptive(x, attrs, is_max):
    from ._jit import adaptive_pool_nchw

    planes, perm, lead = _to_planes(x, attrs.layout)
    h, w = planes.shape[-2:]
    if attrs.output_size:
        oh, ow = pair(attrs.output_size, "output_size")
    else:
        oh, ow = h, w
    work = x.dtype if (is_max or x.dtype.kind == "f") else np.dtype(np.float64)
    out = np.empty(planes.shape[:2] + (oh, ow), work)
    _over_planes(adaptive_pool_nchw, None, planes.astype(work, copy=False), out, is_max, work_per_plane=h * w)
    if work != x.dtype:
        out = np.trunc(out).astype(x.dtype)
    return _from_planes(out, perm, lead)


@kernel("nn.adaptive_avg_pool2d")
def adaptive_avg_pool2d(args, attrs, out_type):
    return _adaptive(args[0], attrs, False)


@kernel("nn.adaptive_max_pool2d")
def adaptive_max_pool2d(args, attrs, out_type):
    return _adaptive(args[0], attrs, True)
