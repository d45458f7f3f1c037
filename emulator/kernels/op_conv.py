"""Convolutions: nn.conv2d (any groups, dilation, asymmetric padding, NCHW/NHWC) and nn.conv2d_transpose.

Dense 3x3 stride-1 convolutions use Winograd F(4x4, 3x3) from 28x28 outputs up and F(2x2, 3x3)
below, down to 7x7 in float32 (_winograd.py). Other dense and grouped convolutions are one BLAS matmul per group over an
im2col matrix built from a strided view of the (padded) input; 1x1 stride-1 convolutions
multiply the input directly.
Depthwise convolutions (one input channel per group) run in a numba loop. Floats accumulate in
float32 (sgemm), as onnxruntime does; integer operands multiply exactly (float64 for 8/16 bit).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...ir.errors import TidlxError
from ..registry import kernel
from . import _winograd as winograd
from ._parallel import MIN_ELEMENTWISE_BLOCK, matmul as gemm, run_blocks
from ._common import check_layout, expand_padding, from_nchw, int_matmul_dtype, out_dtype, pair, to_nchw, \
    weight_to_oihw


def _work_dtype(x: np.ndarray, w: np.ndarray, dtype: np.dtype) -> np.dtype:
    """The dtype the arithmetic runs in."""
    if x.dtype.kind == "f" and w.dtype.kind == "f":
        # Integer outputs of float operands are the exact integer sums of qnn kernels.
        return dtype if dtype.kind == "f" else np.dtype(np.float64)
    return int_matmul_dtype(x.dtype, w.dtype)


def _finish(res: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if res.dtype == dtype:
        return res
    if dtype.kind in "iu" and res.dtype.kind == "f":
        res = np.rint(res)
    return res.astype(dtype)


def _pad_nchw(x: np.ndarray, pt: int, pl: int, pb: int, pr: int, dtype: np.dtype) -> np.ndarray:
    n, c, h, w = x.shape
    if not (pt or pl or pb or pr):
        return x if x.dtype == dtype else x.astype(dtype)
    xp = np.zeros((n, c, h + pt + pb, w + pl + pr), dtype)
    xp[:, :, pt:pt + h, pl:pl + w] = x
    return xp


def _pad_nhwc(x: np.ndarray, pt: int, pl: int, pb: int, pr: int, dtype: np.dtype) -> np.ndarray:
    n, h, w, c = x.shape
    if not (pt or pl or pb or pr):
        return x if x.dtype == dtype else x.astype(dtype)
    xp = np.zeros((n, h + pt + pb, w + pl + pr, c), dtype)
    xp[:, pt:pt + h, pl:pl + w, :] = x
    return xp


def _im2col(xp: np.ndarray, kh: int, kw: int, strides, dilation, out_hw) -> np.ndarray:
    """The (n, c, kh, kw, oh, ow) im2col array of the padded input ``xp``, contiguous. For one
    image a numba gather in parallel blocks of (channel, kernel row) (a strided numpy copy runs on one thread at
    a fraction of memory speed: ~1 ms of the 224x224 stem's 3.5 ms); else a copy of a window view."""
    n, c = xp.shape[:2]
    (sh, sw), (dh, dw), (oh, ow) = strides, dilation, out_hw
    col = np.empty((n, c, kh, kw, oh, ow), xp.dtype)
    if n == 1 and xp.strides[-1] == xp.itemsize:
        from ._jit import im2col_chw, im2col_chw_blocks

        run_blocks(c * kh, im2col_chw, im2col_chw_blocks, xp[0], col[0], sh, sw, dh, dw,
                   min_block=max(1, MIN_ELEMENTWISE_BLOCK // (kw * oh * ow)))
        return col
    s_n, s_c, s_h, s_w = xp.strides
    col[...] = as_strided(xp, col.shape, (s_n, s_c, s_h * dh, s_w * dw, s_h * sh, s_w * sw), writeable=False)
    return col


def _conv_nchw(x, w, groups, strides, dilation, pads, out_hw, work):
    """x NCHW, w OIHW -> NCHW result in ``work`` dtype."""
    n, c, h, wd = x.shape
    o, i_per_group, kh, kw = w.shape
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = pads
    oh, ow = out_hw
    if w.dtype != work:
        w = w.astype(work)
    if kh == 1 and kw == 1 and not any(pads):
        xs = x if (sh, sw) == (1, 1) else x[:, :, ::sh, ::sw][:, :, :oh, :ow]
        if xs.dtype != work:
            xs = xs.astype(work)
        col = xs.reshape(n, groups, i_per_group, oh * ow)
        wm = w.reshape(groups, o // groups, i_per_group)
    else:
        xp = _pad_nchw(x, pt, pl, pb, pr, work)
        col = _im2col(xp, kh, kw, strides, dilation, out_hw).reshape(n, groups, i_per_group * kh * kw, oh * ow)
        wm = w.reshape(groups, o // groups, i_per_group * kh * kw)
    if n == 1 and groups == 1:
        res = gemm(wm[0], col[0, 0])
    elif wm[0].size * col.shape[-1] >= 2_000_000:  # big per-group products: one pooled GEMM each
        res = np.empty((n, groups, o // groups, oh * ow), np.result_type(wm, col))
        for b in range(n):
            for g in range(groups):
                gemm(wm[g], col[b, g], out=res[b, g])
    else:
        res = np.matmul(wm, col)
    return res.reshape(n, o, oh, ow)


def _conv_nhwc(x, w, strides, dilation, pads, out_hw, work):
    """x NHWC, w OIHW (groups=1) -> NHWC result: (pixels x KH*KW*C) @ (KH*KW*C x O)."""
    n, h, wd, c = x.shape
    o, _, kh, kw = w.shape
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = pads
    oh, ow = out_hw
    w_hwio = w.transpose(2, 3, 1, 0).reshape(kh * kw * c, o)
    if w_hwio.dtype != work:
        w_hwio = w_hwio.astype(work)
    xp = _pad_nhwc(x, pt, pl, pb, pr, work)
    s_n, s_h, s_w, s_c = xp.strides
    view = as_strided(xp, (n, oh, ow, kh, kw, c), (s_n, s_h * sh, s_w * sw, s_h * dh, s_w * dw, s_c),
                      writeable=False)
    col = view.reshape(n * oh * ow, kh * kw * c)
    return gemm(col, w_hwio).reshape(n, oh, ow, o)


def _conv_depthwise(x, w, strides, dilation, pads, out_hw, work):
    from ._jit import depthwise_conv_nchw, depthwise_conv_nchw_blocks

    n, c, h, wd = x.shape
    o = w.shape[0]
    x = np.ascontiguousarray(x, dtype=work)
    w = np.ascontiguousarray(w, dtype=work)
    out = np.empty((n, o, out_hw[0], out_hw[1]), work)
    per_plane = out_hw[0] * out_hw[1] * w.shape[2] * w.shape[3]
    run_blocks(n * o, depthwise_conv_nchw, depthwise_conv_nchw_blocks, x, w, out, strides[0], strides[1],
               dilation[0], dilation[1], pads[0], pads[1], o // c, min_block=max(1, 200_000 // max(per_plane, 1)))
    return out


def conv_out_size(size, k, s, d, before, after):
    return (size + before + after - d * (k - 1) - 1) // s + 1


@kernel("nn.conv2d")
def conv2d(args, attrs, out_type):
    x, w = args
    dtype = out_dtype(out_type)
    work = _work_dtype(x, w, dtype)
    strides, dilation = pair(attrs.strides, "strides"), pair(attrs.dilation, "dilation")
    pads = expand_padding(attrs.padding)
    groups = attrs.groups
    out_layout = attrs.out_layout or attrs.data_layout
    check_layout(out_layout, "NCHW")
    w4 = weight_to_oihw(w, attrs.kernel_layout)
    x4 = to_nchw(x, attrs.data_layout)
    n, c, h, wd = x4.shape
    o, i_per_group, kh, kw = w4.shape
    out_hw = (conv_out_size(h, kh, strides[0], dilation[0], pads[0], pads[2]),
              conv_out_size(wd, kw, strides[1], dilation[1], pads[1], pads[3]))
    if c != i_per_group * groups or o % groups:
        raise TidlxError(f"channels do not match: input {c}, weight {tuple(w4.shape)} (OIHW), groups {groups}")
    if groups > 1 and i_per_group == 1:
        res = _conv_depthwise(x4, w4, strides, dilation, pads, out_hw, work)
    elif winograd.usable(x4.shape, w4.shape, groups, strides, dilation, work) and x.dtype == work \
            and w.dtype == work:
        res = winograd.conv3x3(x4, w4, pads, out_hw, work)
    elif attrs.data_layout == "NHWC" and groups == 1:
        res = _conv_nhwc(x, w4, strides, dilation, pads, out_hw, work)
        return _finish(res if out_layout == "NHWC" else res.transpose(0, 3, 1, 2), dtype)
    else:
        res = _conv_nchw(x4, w4, groups, strides, dilation, pads, out_hw, work)
    return _finish(from_nchw(res, out_layout), dtype)


@kernel("nn.conv2d_transpose")
def conv2d_transpose(args, attrs, out_type):
    x, w = args
    dtype = out_dtype(out_type)
    work = _work_dtype(x, w, dtype)
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
    return _finish(np.ascontiguousarray(from_nchw(res, out_layout)), dtype)
