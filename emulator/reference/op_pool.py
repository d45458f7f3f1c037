"""Reference pooling kernels: max/avg (padding, dilation, ceil_mode, count_include_pad), global and adaptive pools.

Windows follow onnxruntime: padding never wins a max; an average divides by the taps inside
the image, or with ``count_include_pad`` by the taps inside the padded image (taps that only
exist because of ``ceil_mode`` never count).

A max runs over the window's rows, then over its columns, each step ``np.maximum(tap, running)``:
NaN propagates, and of two equal values (+0.0 and -0.0) the one met first is kept. Sums add the
taps in row-major window order, starting from +0.0.
"""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._common import expand_padding, from_planes, pair, spatial_axes, to_planes


def _out_size(size, k, s, d, pad_total, ceil_mode):
    span = size + pad_total - (d * (k - 1) + 1)
    if ceil_mode:
        span += s - 1
    return span // s + 1


def pool_geometry(attrs, h, w):
    kh, kw = pair(attrs.pool_size, "pool_size")
    sh, sw = pair(attrs.strides, "strides")
    dh, dw = pair(attrs.dilation, "dilation")
    pt, pl, pb, pr = expand_padding(attrs.padding)
    oh = _out_size(h, kh, sh, dh, pt + pb, attrs.ceil_mode)
    ow = _out_size(w, kw, sw, dw, pl + pr, attrs.ceil_mode)
    return kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow


def lowest(dtype: np.dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def padded(planes: np.ndarray, geometry, fill) -> np.ndarray:
    """The (P, H, W) planes padded with ``fill`` on every side, far enough for every window."""
    kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow = geometry
    p, h, w = planes.shape
    height = max(pt + h, (oh - 1) * sh + (kh - 1) * dh + 1)
    width = max(pl + w, (ow - 1) * sw + (kw - 1) * dw + 1)
    xp = np.full((p, height, width), fill, planes.dtype)
    xp[:, pt:pt + h, pl:pl + w] = planes
    return xp


@kernel("nn.max_pool2d")
def max_pool2d(args, attrs, out_type):
    x = args[0]
    planes, perm, lead = to_planes(x, attrs.layout)
    geometry = pool_geometry(attrs, *planes.shape[-2:])
    kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow = geometry
    init = x.dtype.type(lowest(x.dtype))
    xp = padded(planes, geometry, init)
    rows = np.full((xp.shape[0], oh, xp.shape[2]), init)
    for i in range(kh):
        rows = np.maximum(xp[:, i * dh:i * dh + (oh - 1) * sh + 1:sh, :], rows)
    out = np.full((xp.shape[0], oh, ow), init)
    for j in range(kw):
        out = np.maximum(rows[:, :, j * dw:j * dw + (ow - 1) * sw + 1:sw], out)
    return from_planes(out, perm, lead)


def tap_counts(out_size, in_size, k, s, d, pad_before, pad_after, include_pad):
    """Per output index: how many of the k taps fall inside the image (or the padded image)."""
    starts = np.arange(out_size) * s - pad_before
    taps = starts[:, None] + np.arange(k)[None, :] * d
    lo, hi = (-pad_before, in_size + pad_after) if include_pad else (0, in_size)
    return ((taps >= lo) & (taps < hi)).sum(axis=1)


def avg_divide(sums: np.ndarray, attrs, h: int, w: int, geometry, dtype: np.dtype) -> np.ndarray:
    """Window sums divided by their tap counts, in the output dtype (integers truncate, as TVM)."""
    kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow = geometry
    counts = np.outer(tap_counts(oh, h, kh, sh, dh, pt, pb, attrs.count_include_pad),
                      tap_counts(ow, w, kw, sw, dw, pl, pr, attrs.count_include_pad))
    out = sums / np.maximum(counts, 1).astype(sums.dtype)
    if dtype.kind != "f":
        out = np.trunc(out)  # integer averages truncate (TVM's C-semantics division)
    return out.astype(dtype, copy=False)


def avg_work_dtype(dtype: np.dtype) -> np.dtype:
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


@kernel("nn.avg_pool2d")
def avg_pool2d(args, attrs, out_type):
    x = args[0]
    planes, perm, lead = to_planes(x, attrs.layout)
    h, w = planes.shape[-2:]
    geometry = pool_geometry(attrs, h, w)
    kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow = geometry
    work = avg_work_dtype(x.dtype)
    xp = padded(planes.astype(work, copy=False), geometry, 0)
    sums = np.zeros((xp.shape[0], oh, ow), work)
    for i in range(kh):
        for j in range(kw):
            sums += xp[:, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw]
    return from_planes(avg_divide(sums, attrs, h, w, geometry, x.dtype), perm, lead)


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


def adaptive_windows(out_len: int, in_len: int):
    """PyTorch/TVM adaptive windows: [floor(o*H/OH), ceil((o+1)*H/OH)) for each output index o."""
    return [((o * in_len) // out_len, ((o + 1) * in_len + out_len - 1) // out_len) for o in range(out_len)]


def adaptive_size(attrs, h: int, w: int):
    return pair(attrs.output_size, "output_size") if attrs.output_size else (h, w)


def adaptive_work_dtype(dtype: np.dtype, is_max: bool) -> np.dtype:
    return dtype if (is_max or dtype.kind == "f") else np.dtype(np.float64)


def _adaptive(x, attrs, is_max):
    planes, perm, lead = to_planes(x, attrs.layout)
    h, w = planes.shape[-2:]
    oh, ow = adaptive_size(attrs, h, w)
    work = adaptive_work_dtype(x.dtype, is_max)
    src = planes.astype(work, copy=False)
    out = np.empty(planes.shape[:1] + (oh, ow), work)
    for i, (h0, h1) in enumerate(adaptive_windows(oh, h)):
        for j, (w0, w1) in enumerate(adaptive_windows(ow, w)):
            acc = src[:, h0, w0] if is_max else np.zeros(src.shape[0], work)
            for r in range(h0, h1):
                for c in range(w0, w1):
                    acc = np.maximum(src[:, r, c], acc) if is_max else acc + src[:, r, c]
            out[:, i, j] = acc if is_max else acc / work.type((h1 - h0) * (w1 - w0))
    if work != x.dtype:
        out = np.trunc(out).astype(x.dtype)
    return from_planes(out, perm, lead)


@kernel("nn.adaptive_avg_pool2d")
def adaptive_avg_pool2d(args, attrs, out_type):
    return _adaptive(args[0], attrs, False)


@kernel("nn.adaptive_max_pool2d")
def adaptive_max_pool2d(args, attrs, out_type):
    return _adaptive(args[0], attrs, True)
