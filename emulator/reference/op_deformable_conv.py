"""Reference deformable convolution: nn.deformable_conv2d (Relay's DCNv1; NCHW data, OIHW weights).

Each kernel tap (i, j) of output pixel (y, x) samples the input at
``(y * stride - pad + i * dilation + dy, x * stride - pad + j * dilation + dx)``, with the offset
pair (dy, dx) of that tap, pixel and deformable group, by bilinear interpolation whose corners
outside the image read 0 (ONNX DeformConv, mmcv's DCN and TVM's topi agree on this). The sampled
values form an im2col matrix that is multiplied by the weights per group, as for nn.conv2d.
Positions and interpolation weights are computed in float64, the product in the data dtype.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ...ir.errors import TidlxError
from ..registry import kernel
from ._common import expand_padding, out_dtype, pair


def deformable_columns(x: np.ndarray, offset: np.ndarray, kernel_hw, strides, padding, dilation,
                       deformable_groups: int, mask: Optional[np.ndarray] = None) -> np.ndarray:
    """The sampled im2col matrix, N x C x KH*KW x OH*OW (float64).

    ``offset`` is N x (deformable_groups * KH * KW * 2) x OH x OW, (dy, dx) pairs tap by tap;
    ``mask`` (DCNv2, N x deformable_groups * KH * KW x OH x OW) scales each sample when given."""
    n, c, h, w = x.shape
    kh, kw = kernel_hw
    (sh, sw), (dh, dw), (pt, pl, _, _) = strides, dilation, padding
    oh, ow = offset.shape[2:]
    taps = kh * kw
    if c % deformable_groups or offset.shape[1] != 2 * deformable_groups * taps:
        raise TidlxError(f"deformable conv: offset {tuple(offset.shape)} does not match {deformable_groups} "
                         f"deformable group(s) of a {kh}x{kw} kernel over {c} channels")
    off = offset.astype(np.float64).reshape(n, deformable_groups, kh, kw, 2, oh, ow)
    base_y = (np.arange(oh) * sh - pt)[None, :] + (np.arange(kh) * dh)[:, None]     # KH x OH
    base_x = (np.arange(ow) * sw - pl)[None, :] + (np.arange(kw) * dw)[:, None]     # KW x OW
    sample_y = base_y[None, None, :, None, :, None] + off[:, :, :, :, 0]            # N x G x KH x KW x OH x OW
    sample_x = base_x[None, None, None, :, None, :] + off[:, :, :, :, 1]
    y0, x0 = np.floor(sample_y), np.floor(sample_x)
    fy, fx = sample_y - y0, sample_x - x0
    y0, x0 = y0.astype(np.int64), x0.astype(np.int64)
    scale = None if mask is None else mask.astype(np.float64).reshape(n, deformable_groups, kh, kw, oh, ow)

    channels = c // deformable_groups
    flat = x.astype(np.float64).reshape(n, deformable_groups, channels, h * w)
    cols = np.zeros((n, deformable_groups, channels, taps * oh * ow))
    for cy, wy in ((y0, 1.0 - fy), (y0 + 1, fy)):
        for cx, wx in ((x0, 1.0 - fx), (x0 + 1, fx)):
            inside = (cy >= 0) & (cy < h) & (cx >= 0) & (cx < w)
            weight = np.where(inside, wy * wx, 0.0)
            if scale is not None:
                weight = weight * scale
            index = np.where(inside, cy * w + cx, 0).reshape(n, deformable_groups, 1, -1)
            values = np.take_along_axis(flat, np.broadcast_to(index, (n, deformable_groups, channels, index.shape[-1])),
                                        axis=3)
            cols += values * weight.reshape(n, deformable_groups, 1, -1)
    return cols.reshape(n, c, taps, oh * ow)


def deformable_conv2d_nchw(x: np.ndarray, offset: np.ndarray, weight: np.ndarray, strides, padding, dilation,
                           groups: int, deformable_groups: int, dtype: np.dtype,
                           mask: Optional[np.ndarray] = None) -> np.ndarray:
    """N x O x OH x OW: the grouped product of the weights and the sampled columns."""
    n, c = x.shape[:2]
    o, cg, kh, kw = weight.shape
    if c != cg * groups or o % groups:
        raise TidlxError(f"deformable conv: channels do not match: input {c}, weight {tuple(weight.shape)} "
                         f"(OIHW), groups {groups}")
    oh, ow = offset.shape[2:]
    cols = deformable_columns(x, offset, (kh, kw), strides, padding, dilation, deformable_groups, mask)
    cols = cols.astype(dtype).reshape(n, groups, cg * kh * kw, oh * ow)
    wm = weight.astype(dtype, copy=False).reshape(groups, o // groups, cg * kh * kw)
    return np.matmul(wm, cols).reshape(n, o, oh, ow)


@kernel("nn.deformable_conv2d", fresh_result=True)
def deformable_conv2d(args, attrs, out_type):
    x, offset, weight = args
    dtype = out_dtype(out_type)
    if dtype.kind != "f":
        raise TidlxError(f"deformable conv: the emulator runs float deformable convolutions, not {dtype}")
    res = deformable_conv2d_nchw(x, offset, weight, pair(attrs.strides, "strides"), expand_padding(attrs.padding),
                                 pair(attrs.dilation, "dilation"), attrs.groups, attrs.deformable_groups, dtype)
    return np.ascontiguousarray(res)
