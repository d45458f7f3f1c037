"""Reference convolutions: nn.conv2d (any groups, dilation, asymmetric padding, layouts) and nn.conv2d_transpose.

A convolution is one matrix product per group: the weights (O/g x C/g*KH*KW) times the im2col
matrix of the zero-padded input (C/g*KH*KW x OH*OW), read through a strided window view. Floats
accumulate in the output dtype (float32 for float models, sgemm, as onnxruntime does); integer
operands multiply exactly (float64 for 8/16 bit, int64 beyond).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...ir.errors import TidlxError
from ..registry import kernel
from ._common import check_layout, expand_padding, from_nchw, int_matmul_dtype, out_dtype, pair, to_nchw, \
    weight_to_oihw


def work_dtype(x: np.ndarray, w: np.ndarray, dtype: np.dtype) -> np.dtype:
    """The dtype the arithmetic runs in."""
    if x.dtype.kind == "f" and w.dtype.kind == "f":
        # Integer outputs of float operands are the exact integer sums of qnn kernels.
        return dtype if dtype.kind == "f" else np.dtype(np.float64)
    return int_matmul_dtype(x.dtype, w.dtype)


def finish(res: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The result in the output dtype (integer sums computed in floats are rounded first)."""
    if res.dtype == dtype:
        return res
    if dtype.kind in "iu" and res.dtype.kind == "f":
        res = np.rint(res)
    return res.astype(dtype)


def conv_out_size(size, k, s, d, before, after):
    return (size + before + after - d * (k - 1) - 1) // s + 1


class ConvGeometry:
    """A conv2d call's sizes, read from its attributes and operands (NCHW input, OIHW weights)."""

    def __init__(self, x4: np.ndarray, w4: np.ndarray, attrs):
        self.strides, self.dilation = pair(attrs.strides, "strides"), pair(attrs.dilation, "dilation")
        self.pads = expand_padding(attrs.padding)
        self.groups = attrs.groups
        n, c, h, wd = x4.shape
        o, i_per_group, kh, kw = w4.shape
        if c != i_per_group * self.groups or o % self.groups:
            raise TidlxError(f"channels do not match: input {c}, weight {tuple(w4.shape)} (OIHW), groups "
                             f"{self.groups}")
        pt, pl, pb, pr = self.pads
        self.out_hw = (conv_out_size(h, kh, self.strides[0], self.dilation[0], pt, pb),
                       conv_out_size(wd, kw, self.strides[1], self.dilation[1], pl, pr))


def conv_operands(args, attrs):
    """(x as NCHW, w as OIHW, output layout): views, no copies."""
    x, w = args
    out_layout = attrs.out_layout or attrs.data_layout
    check_layout(out_layout, "NCHW")
    return to_nchw(x, attrs.data_layout), weight_to_oihw(w, attrs.kernel_layout), out_layout


@kernel("nn.conv2d", fresh_result=True)
def conv2d(args, attrs, out_type):
    x4, w4, out_layout = conv_operands(args, attrs)
    geo = ConvGeometry(x4, w4, attrs)
    dtype = out_dtype(out_type)
    work = work_dtype(x4, w4, dtype)
    n, c, h, wd = x4.shape
    o, cg, kh, kw = w4.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr), (oh, ow), g = geo.strides, geo.dilation, geo.pads, geo.out_hw, geo.groups
    xp = np.pad(x4.astype(work, copy=False), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    s_n, s_c, s_h, s_w = xp.strides
    windows = as_strided(xp, (n, c, kh, kw, oh, ow), (s_n, s_c, s_h * dh, s_w * dw, s_h * sh, s_w * sw),
                         writeable=False)
    col = windows.reshape(n, g, cg * kh * kw, oh * ow)                       # (a copy)
    wm = w4.astype(work, copy=False).reshape(g, o // g, cg * kh * kw)
    res = np.matmul(wm, col).reshape(n, o, oh, ow)
    return finish(np.ascontiguousarray(from_nchw(res, out_layout)), dtype)


@kernel("nn.conv2d_transpose", fresh_result=True)
def conv2d_transpose(args, attrs, out_type):
    x, w = args
    dtype = out_dtype(out_type)
    work = work_dtype(x, w, dtype)
    sh, sw = pair(attrs.strides, "strides")
    dh, dw = pair(attrs.dilation, "dilation")
    oph, opw = pair(attrs.output_padding, "output_padding")
    pt, pl, pb, pr = expand_padding(attrs.padding)
    groups = attrs.groups
    out_layout = attrs.out_layout or attrs.data_layout
    check_layout(attrs.kernel_layout, "OIHW")
    # In a transposed conv's kernel layout, "I" is the input channels and "O" the outputs per group.
    w4 = w.transpose([attrs.kernel_layout.index(ch) for ch in "IOHW"])
    x4 = to_nchw(x, attrs.data_layout)
    n, c, h, wd = x4.shape
    _, o_per_group, kh, kw = w4.shape
    c_per_group = c // groups
    oh = (h - 1) * sh - pt - pb + dh * (kh - 1) + oph + 1
    ow = (wd - 1) * sw - pl - pr + dw * (kw - 1) + opw + 1
    full_h = max((h - 1) * sh + dh * (kh - 1) + 1, pt + oh)
    full_w = max((wd - 1) * sw + dw * (kw - 1) + 1, pl + ow)
    full = np.zeros((n, groups, o_per_group, full_h, full_w), work)
    xg = x4.reshape(n, groups, c_per_group, h * wd).astype(work, copy=False)
    wg = w4.reshape(groups, c_per_group, o_per_group * kh * kw).astype(work, copy=False)
    # cols[n, g, (o, i, j), pixel]: each input pixel's contribution to every kernel tap.
    cols = np.matmul(wg.transpose(0, 2, 1), xg).reshape(n, groups, o_per_group, kh, kw, h, wd)
    for i in range(kh):
        for j in range(kw):
            full[:, :, :, i * dh:i * dh + (h - 1) * sh + 1:sh, j * dw:j * dw + (wd - 1) * sw + 1:sw] += \
                cols[:, :, :, i, j]
    res = full.reshape(n, groups * o_per_group, full_h, full_w)[:, :, pt:pt + oh, pl:pl + ow]
    return finish(np.ascontiguousarray(from_nchw(res, out_layout)), dtype)
