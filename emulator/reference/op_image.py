"""image.resize2d and nn.upsampling, with ONNX Resize semantics.

Coordinates are computed in float32 exactly as onnxruntime does (scale = out/in per axis):
every coordinate_transformation_mode, the nearest rounding modes, linear (clamped to the
image), cubic (``cubic_alpha``, ``cubic_exclude``) and tf_crop_and_resize with its
extrapolation value. Interpolation is separable: one pass per spatial axis with the per-output
taps and weights precomputed (``interpolate``; the fast set runs the same sums in numba).
"""

from __future__ import annotations

import numpy as np

from ...ir.errors import TidlxError
from ..registry import kernel
from ._common import from_planes, out_dtype, spatial_axes, to_planes

F32 = np.float32


def original_coords(out_len: int, in_len: int, mode: str, roi_start: float = 0.0, roi_end: float = 1.0):
    """The input coordinate of every output index, in float32 (onnxruntime's formulas)."""
    x = np.arange(out_len, dtype=F32)
    scale = F32(out_len) / F32(in_len)
    half = F32(0.5)
    if mode == "half_pixel":
        return (x + half) / scale - half
    if mode == "pytorch_half_pixel":
        return (x + half) / scale - half if out_len > 1 else np.zeros(out_len, F32)
    if mode == "align_corners":
        if out_len == 1:
            return np.zeros(out_len, F32)
        return x * F32(in_len - 1) / F32(out_len - 1)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_half_pixel_for_nn":
        return (x + half) / scale
    if mode == "tf_crop_and_resize":
        start, end = F32(roi_start), F32(roi_end)
        if out_len > 1:
            return start * F32(in_len - 1) + (x * (end - start) * F32(in_len - 1)) / F32(out_len - 1)
        return np.full(out_len, half * (start + end) * F32(in_len - 1), F32)
    raise TidlxError(f"coordinate_transformation_mode '{mode}' is not supported")


def nearest_indices(coords: np.ndarray, in_len: int, rounding: str) -> np.ndarray:
    if rounding == "round_prefer_floor":
        fl = np.floor(coords)
        idx = np.where(coords == fl + F32(0.5), fl, np.sign(coords) * np.floor(np.abs(coords) + F32(0.5)))
    elif rounding == "round_prefer_ceil":
        idx = np.sign(coords) * np.floor(np.abs(coords) + F32(0.5))  # std::round: halves away from 0
    elif rounding == "round":
        idx = np.rint(coords)  # TVM's round lowers to nearbyint: halves to even
    elif rounding == "floor":
        idx = np.floor(coords)
    elif rounding == "ceil":
        idx = np.ceil(coords)
    else:
        raise TidlxError(f"rounding_method '{rounding}' is not supported")
    return np.clip(idx, 0, in_len - 1).astype(np.int64)


def linear_taps(coords: np.ndarray, in_len: int):
    """(indices, weights) of shape (out, 2): onnxruntime's bilinear taps, coordinates clamped."""
    c = np.clip(coords, F32(0), F32(in_len - 1))
    i1 = np.minimum(c.astype(np.int64), in_len - 1)
    i2 = np.minimum(i1 + 1, in_len - 1)
    d1 = np.abs(c - i1.astype(F32))
    d2 = np.abs(c - i2.astype(F32))
    same = i1 == i2
    d1 = np.where(same, F32(0.5), d1)
    d2 = np.where(same, F32(0.5), d2)
    # The weight of a tap is the distance to the other tap.
    return np.stack([i1, i2], axis=1), np.stack([d2, d1], axis=1).astype(F32)


def cubic_taps(coords: np.ndarray, in_len: int, alpha: float, exclude_outside: bool):
    """(indices, weights) of shape (out, 4): taps floor(x)-1 .. floor(x)+2, edges clamped."""
    a = F32(alpha)
    base = np.floor(coords)
    s = (coords - base).astype(F32)
    dist = np.stack([F32(1) + s, s, F32(1) - s, F32(2) - s], axis=1)
    near = ((a + F32(2)) * dist - (a + F32(3))) * dist * dist + F32(1)
    far = ((a * dist - F32(5) * a) * dist + F32(8) * a) * dist - F32(4) * a
    w = np.where(dist <= F32(1), near, far).astype(F32)
    idx = base.astype(np.int64)[:, None] + np.arange(-1, 3)[None, :]
    if exclude_outside:
        inside = (idx >= 0) & (idx < in_len)
        w = np.where(inside, w, F32(0))
        w = (w / w.sum(axis=1, keepdims=True)).astype(F32)
    return np.clip(idx, 0, in_len - 1), w


def interpolate(src: np.ndarray, ri, rw, ci, cw) -> np.ndarray:
    """Separable interpolation of (P, H, W) planes: rows first, out[p, o, :] = sum_t rw[o, t] *
    src[p, ri[o, t], :] summed from 0 in tap order, then columns, out[p, h, o] = the same sum over
    ci/cw started from tap 0's product."""
    mid = np.zeros((src.shape[0], ri.shape[0], src.shape[2]), src.dtype)
    for t in range(ri.shape[1]):
        mid += rw[:, t][None, :, None] * src[:, ri[:, t], :]
    out = cw[:, 0] * mid[:, :, ci[:, 0]]
    for t in range(1, ci.shape[1]):
        out += cw[:, t] * mid[:, :, ci[:, t]]
    return out


def resize(x: np.ndarray, out_hw, layout: str, method: str, mode: str, rounding: str, alpha: float,
           exclude: bool, extrapolation: float, roi, dtype: np.dtype, interpolate=interpolate) -> np.ndarray:
    """ONNX Resize of ``x``; ``interpolate`` does the linear/cubic passes (the fast set passes its own)."""
    planes, perm, lead = to_planes(x, layout)
    in_h, in_w = planes.shape[-2:]
    out_h, out_w = out_hw
    # ONNX roi is [starts..., ends...]; Relay keeps the spatial part as (h0, w0, h1, w1).
    ys = original_coords(out_h, in_h, mode, roi[0], roi[2])
    xs = original_coords(out_w, in_w, mode, roi[1], roi[3])
    if method == "nearest_neighbor":
        if rounding == "":
            rounding = "round" if mode == "align_corners" else "floor"
        rows = nearest_indices(ys, in_h, rounding)
        cols = nearest_indices(xs, in_w, rounding)
        out = planes[:, rows][:, :, cols]
    elif method in ("linear", "cubic"):
        if method == "linear":
            ri, rw = linear_taps(ys, in_h)
            ci, cw = linear_taps(xs, in_w)
        else:
            ri, rw = cubic_taps(ys, in_h, alpha, bool(exclude))
            ci, cw = cubic_taps(xs, in_w, alpha, bool(exclude))
        work = planes.dtype if planes.dtype == np.float64 else np.dtype(F32)
        out = interpolate(planes.astype(work, copy=False), ri, rw.astype(work), ci, cw.astype(work))
    else:
        raise TidlxError(f"resize method '{method}' is not supported")
    if mode == "tf_crop_and_resize":
        out = out.copy() if not out.flags.writeable else out
        outside_h = (ys < 0) | (ys > in_h - 1)
        outside_w = (xs < 0) | (xs > in_w - 1)
        out[:, outside_h, :] = extrapolation
        out[:, :, outside_w] = extrapolation
    if out.dtype != dtype:
        if dtype.kind in "iu" and out.dtype.kind == "f":
            info = np.iinfo(dtype)
            out = np.clip(np.rint(out), info.min, info.max)
        out = out.astype(dtype)
    return from_planes(out, perm, lead)


@kernel("image.resize2d")
def resize2d(args, attrs, out_type, interpolate=interpolate):
    x = args[0]
    return resize(x, tuple(attrs.size) if len(attrs.size) == 2 else tuple(attrs.size) * 2, attrs.layout,
                  attrs.method, attrs.coordinate_transformation_mode, attrs.rounding_method, attrs.cubic_alpha,
                  attrs.cubic_exclude, attrs.extrapolation_value, attrs.roi, out_dtype(out_type), interpolate)


@kernel("nn.upsampling")
def upsampling(args, attrs, out_type, interpolate=interpolate):
    # TVM's upsampling is resize2d to the rounded scaled size, asymmetric or align_corners.
    x = args[0]
    h_axis, w_axis = spatial_axes(attrs.layout)
    method = {"nearest_neighbor": "nearest_neighbor", "bilinear": "linear", "bicubic": "cubic"}[attrs.method]
    mode = "align_corners" if attrs.align_corners else "asymmetric"
    return resize(x, (out_type.shape[h_axis], out_type.shape[w_axis]), attrs.layout, method, mode, "", -0.5, 0,
                  0.0, (0.0, 0.0, 1.0, 1.0), out_dtype(out_type), interpolate)
