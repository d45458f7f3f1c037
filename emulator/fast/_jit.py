"""numba loops for the kernels where numpy would need many passes or Python loops.

The fast kernel set's loops (fast/op_<family>.py); each computes what the reference kernel
defines, in the same float operations where the fast kernel promises the reference's bits.
The loops release the GIL and work on a block of planes ``[start, stop)``. Each hot loop has a
``*_blocks`` driver that runs ``blocks`` blocks of it in one numba parallel region;
_parallel.run_blocks picks the driver, or the Python thread pool, or one call. The drivers are
spelled out one per loop on purpose: a single driver taking the loop as an argument reloads from
numba's cache in ~1 s per loop and process, and drivers made by a factory (closures) are compiled
again in every process.
Compiled on first use and cached on disk (``cache=True``): numba writes the cache to
``__pycache__`` next to this file, or, when that folder is read-only, to its user-wide cache
directory (``NUMBA_CACHE_DIR`` overrides both). Imported lazily, so importing the emulator
does not import numba.

Array arguments are 4-D NCHW planes; the wrappers in the family files bring other layouts
to this form. Accumulation is in the output dtype (float32 for float models).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ._blas import _block_step, gemm_into
from ._blocks import block_range
from ._exp import swish_f32
from ._microkernel import (COLUMNS, DEPTHWISE_CHAINS, DEPTHWISE_WIDTH, STORE_ADD, STORE_AFFINE, STORE_CLIP,
                           STORE_HARD_SWISH, STORE_RELU, STORE_SWISH, depthwise_flat, depthwise_pad, depthwise_pad_s2,
                           masked_copies, pointwise_tile, store_rows,
                           depthwise_parts, direct_taps1, direct_taps2, direct_taps3, direct_taps_add1,
                           direct_taps_add2, direct_taps_add3, panel_product, panel_product_add, panel_taps)

#: the activation a conv tail may end with (tail_row's ``act``; _prepared merges swish and hard-swish steps)
ACT_NONE, ACT_SWISH, ACT_HARD_SWISH = 0, 1, 2


@njit(cache=True, nogil=True)
def any_nan(flat):
    """Whether a flat float array holds a NaN (numpy's isnan().any() allocates and costs ~3 us)."""
    for i in range(flat.size):
        if flat[i] != flat[i]:
            return True
    return False


# --- math --------------------------------------------------------------------------------------

@njit(cache=True)
def erf_f64(x):
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = math.erf(x[i])
    return out


# --- convolution -------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def depthwise_conv_nchw(x, w, out, sh, sw, dh, dw, pt, pl, multiplier, start, stop):
    """out[n, o] = sum_ij x[n, o // multiplier, oh*sh - pt + i*dh, ow*sw - pl + j*dw] * w[o, 0, i, j]."""
    n_batch, channels, height, width = x.shape
    out_channels, out_h, out_w = out.shape[1], out.shape[2], out.shape[3]
    kh, kw = w.shape[2], w.shape[3]
    for plane in range(start, stop):
        n = plane // out_channels
        o = plane % out_channels
        c = o // multiplier
        res = out[n, o]
        res[:, :] = 0
        for i in range(kh):
            for j in range(kw):
                wv = w[o, 0, i, j]
                # output columns whose input column is inside the image
                off = j * dw - pl
                lo = 0 if off >= 0 else (-off + sw - 1) // sw
                hi = (width - 1 - off) // sw + 1 if width - 1 - off >= 0 else 0
                if hi > out_w:
                    hi = out_w
                if lo >= hi:
                    continue
                first = lo * sw + off
                last = (hi - 1) * sw + off + 1
                for oh in range(out_h):
                    h = oh * sh - pt + i * dh
                    if h < 0 or h >= height:
                        continue
                    taps = x[n, c, h, first:last:sw]
                    dst = res[oh, lo:hi]
                    for k in range(dst.size):
                        dst[k] += taps[k] * wv


@njit(cache=True, nogil=True)
def _all_finite(a):
    for v in a.flat:
        if not np.isfinite(v):
            return False
    return True


@njit(cache=True, nogil=True)
def _pad_plane(plane, xp, pt, pl, sw, span, col0, col1):
    """xp's rows inside the image get the plane's columns [col0 - pl, col1 - pl) at padded columns
    [col0, col1), padded column p at (p % sw) * span + p // sw (the rest of xp stays as it is: zeros).
    Column strides 1 and 2 copy on the microkernel's vector loops, others on numba slices."""
    height, width = plane.shape
    padded_h, padded_w = xp.shape
    r1 = min(padded_h, pt + height)
    rows = r1 - pt
    if rows <= 0 or col0 >= col1:
        return
    src = plane.ctypes.data + 4 * (col0 - pl)
    if sw == 1:
        depthwise_pad(src, width, xp.ctypes.data + 4 * (pt * padded_w + col0), padded_w, rows, col1 - col0, 0)
        return
    if sw == 2:
        p0 = col0
        if p0 % 2 == 1:  # the first column alone is odd: the pairs start at an even one
            for r in range(pt, r1):
                xp[r, span + p0 // 2] = plane[r - pt, p0 - pl]
            p0 += 1
        pairs = (col1 - p0) // 2
        depthwise_pad_s2(plane.ctypes.data + 4 * (p0 - pl), width, xp.ctypes.data + 4 * (pt * padded_w + p0 // 2),
                         padded_w, rows, pairs, span)
        if (col1 - p0) % 2 == 1:  # a last even column without its odd one
            for r in range(pt, r1):
                xp[r, (col1 - 1) // 2] = plane[r - pt, col1 - 1 - pl]
        return
    for r in range(pt, r1):
        for phase in range(sw):
            p0 = col0 + (phase - col0) % sw
            if p0 < col1:
                count = (col1 - p0 + sw - 1) // sw
                xp[r, phase * span + p0 // sw:phase * span + p0 // sw + count] = plane[r - pt, p0 - pl:col1 - pl:sw]


@njit(cache=True, nogil=True)
def depthwise_conv_planes(x, w, out, sh, sw, dh, dw, pt, pl, multiplier, flat_positions, lanes, start, stop):
    """depthwise_conv_planes_tail without a tail."""
    depthwise_conv_planes_tail(x, w, out, sh, sw, dh, dw, pt, pl, multiplier, out[0, 0, 0], out[0, 0, 0], out, False,
                               False, False, False, False, out.dtype.type(0), out.dtype.type(0), ACT_NONE,
                               out[0, 0, 0], flat_positions, lanes, start, stop)


@njit(cache=True, nogil=True)
def depthwise_flat_usable(in_w, out_h, out_w, sh, sw, flat_positions):
    """Whether depthwise_conv_flat takes a plane: stride 1, outputs no wider than the input (they are
    computed on its row pitch), at most ``flat_positions`` outputs a plane."""
    return sh == 1 and sw == 1 and out_w <= in_w and out_h * out_w <= flat_positions


@njit(cache=True, nogil=True)
def depthwise_conv_flat(x, w, out, dh, dw, pt, pl, multiplier, scale, shift, other, has_tail, has_affine, has_add,
                        relu, clamp, lo, hi, act, act_consts, lanes, start, stop):
    """depthwise_conv_planes_tail at stride 1 on whole vectors of the flattened plane: output (r, c) is
    computed at r * W + c (W the input's width) as the sum over taps t = (i, j) of w[t] * x'_j[r * W + c
    + (i * dh - pt) * W + j * dw - pl], summed from 0 in order of t (_microkernel.depthwise_flat). x'_j
    is a copy of the plane between zero margins (rows outside the image read zeros) with the columns
    zeroed that tap column j reads only when it leaves its row (the last -d of each row for a tap d =
    j * dw - pl columns left, the first d for d right: a read past the row's end lands on the next
    row's first columns, one before its start on the previous row's last): such reads then get +0, as
    a padded plane's would, and no read inside the row is changed. The same products and
    sums in the same order, so depthwise_conv_nchw's bits, with no per-row work and no lanes past a
    row's end (a 7x7 plane is 4 vectors of 16, not 7 rows of 8). Where the outputs are narrower than
    the input, each row's extra columns are computed and dropped."""
    channels, height, width = x.shape[1], x.shape[2], x.shape[3]
    out_channels, out_h, out_w = out.shape[1], out.shape[2], out.shape[3]
    kh, kw = w.shape[2], w.shape[3]
    taps = kh * kw
    vectors = (out_h * width + lanes - 1) // lanes  # _microkernel.LANES (an argument: numba caches globals)
    computed = vectors * lanes
    plane_in, plane_out = height * width, out_h * out_w
    margin = pt * width + pl
    below = max(0, ((kh - 1) * dh - pt) * width + (kw - 1) * dw - pl)
    copy = margin + max(computed + below, plane_in) + lanes  # floats of one column copy with its margins
    copies = np.zeros(kw * copy, np.float32)
    masks = np.full((kw, plane_in), -1, np.int32)  # each copy's columns: kept (all ones) or zeroed
    for j in range(kw):
        d = j * dw - pl
        lo_col, hi_col = (max(0, width + d), width) if d < 0 else (0, min(d, width))
        for r in range(height):
            masks[j, r * width + lo_col:r * width + hi_col] = 0
    offsets = np.empty(taps, np.int64)
    for i in range(kh):
        for j in range(kw):
            offsets[i * kw + j] = j * copy + (i * dh - pt) * width + j * dw - pl
    sums = np.empty(computed, np.float32)
    mode = store_mode(has_tail, has_affine, has_add, relu, clamp, act)
    at_copies = copies.ctypes.data + 4 * margin
    filled = -1  # the (n, c) plane the copies hold
    for plane in range(start, stop):
        n = plane // out_channels
        o = plane % out_channels
        c = o // multiplier
        if not _all_finite(w[o, 0]):
            depthwise_conv_nchw(x, w, out, 1, 1, dh, dw, pt, pl, multiplier, plane, plane + 1)
            if has_tail:
                _plane_tail(out, other, scale, shift, n, o, has_affine, has_add, relu, clamp, lo, hi, act, act_consts)
            continue
        if n * channels + c != filled:
            masked_copies(x[n, c].ctypes.data, plane_in, masks.ctypes.data, kw, at_copies, copy)
            filled = n * channels + c
        depthwise_flat(at_copies, offsets.ctypes.data, w[o, 0].ctypes.data, taps, sums.ctypes.data, vectors)
        dst = out.ctypes.data + 4 * (n * out_channels + o) * plane_out
        res = other.ctypes.data + 4 * (n * other.shape[1] + o) * plane_out if has_tail else dst
        if out_w == width:  # the plane's outputs are consecutive sums
            store_rows(sums.ctypes.data, 0, dst, 0, 1, plane_out, scale.ctypes.data + 4 * o,
                       shift.ctypes.data + 4 * o, res, 0, mode, lo, hi, act_consts.ctypes.data)
        else:  # row by row (store_rows takes one scale per row)
            for r in range(out_h):
                store_rows(sums.ctypes.data + 4 * r * width, 0, dst + 4 * r * out_w, 0, 1, out_w,
                           scale.ctypes.data + 4 * o, shift.ctypes.data + 4 * o, res + 4 * r * out_w, 0, mode,
                           lo, hi, act_consts.ctypes.data)


@njit(cache=True, nogil=True)
def depthwise_conv_planes_tail(x, w, out, sh, sw, dh, dw, pt, pl, multiplier, scale, shift, other, has_tail,
                               has_affine, has_add, relu, clamp, lo, hi, act, act_consts, flat_positions, lanes,
                               start, stop):
    """depthwise_conv_nchw for float32 on the microkernel's depthwise_parts: the same sums in the
    same order (the same bits), each output written once. Each input plane is copied once into a
    zero-padded plane whose rows hold the ``sw`` column phases one after the other (padded column
    p at (p % sw) * span + p // sw), so every tap of every output column stride reads consecutive
    floats; the plane is wide enough for whole vectors of 8 outputs and tall enough for whole
    steps of rows (the extra columns and rows are computed on zeros and dropped). A row is split
    into near-equal parts of at most DEPTHWISE_WIDTH vectors. A plane whose weights are not all
    finite takes the plain loop: it skips the taps outside the image, where 0 * inf would be NaN.
    ``has_tail``: each output plane o then gets tail_row's operations (scale[o], shift[o], the
    residual other[n, o]) while it is in cache, the bits of conv_tail's pass after the convolution.
    Planes depthwise_flat_usable takes (small, stride 1) go to depthwise_conv_flat: the same bits."""
    if depthwise_flat_usable(x.shape[3], out.shape[2], out.shape[3], sh, sw, flat_positions):
        depthwise_conv_flat(x, w, out, dh, dw, pt, pl, multiplier, scale, shift, other, has_tail, has_affine, has_add,
                            relu, clamp, lo, hi, act, act_consts, lanes, start, stop)
        return
    channels, width = x.shape[1], x.shape[3]
    out_channels, out_h, out_w = out.shape[1], out.shape[2], out.shape[3]
    kh, kw = w.shape[2], w.shape[3]
    vectors = (out_w + 7) // 8
    parts = (vectors + DEPTHWISE_WIDTH - 1) // DEPTHWISE_WIDTH
    narrow = vectors // parts  # the first vectors % parts parts are one vector wider
    step = (DEPTHWISE_CHAINS + narrow - 1) // narrow  # the kernel's rows per step at that width
    rows = (out_h + step - 1) // step * step
    span = 8 * vectors + (kw - 1) * dw // sw  # floats of one column phase in a padded row
    padded_w = sw * span
    padded_h = (rows - 1) * sh + (kh - 1) * dh + 1
    xp = np.zeros((padded_h, padded_w), np.float32)
    offsets = np.empty(kh * kw, np.int64)
    for i in range(kh):
        for j in range(kw):
            p = j * dw
            offsets[i * kw + j] = i * dh * padded_w + (p % sw) * span + p // sw
    direct = out_w == 8 * vectors and rows == out_h  # the kernel writes the output plane itself
    rows_buffer = np.empty((rows, 8 * vectors), np.float32)
    col0, col1 = max(0, pl), min((out_w - 1) * sw + (kw - 1) * dw + 1, pl + width)
    filled = -1  # the (n, c) plane xp holds
    for plane in range(start, stop):
        n = plane // out_channels
        o = plane % out_channels
        c = o // multiplier
        if not _all_finite(w[o, 0]):
            depthwise_conv_nchw(x, w, out, sh, sw, dh, dw, pt, pl, multiplier, plane, plane + 1)
            if has_tail:
                _plane_tail(out, other, scale, shift, n, o, has_affine, has_add, relu, clamp, lo, hi, act, act_consts)
            continue
        if n * channels + c != filled:
            _pad_plane(x[n, c], xp, pt, pl, sw, span, col0, col1)
            filled = n * channels + c
        dst = out[n, o] if direct else rows_buffer
        first = 0
        for part in range(parts):
            part_width = narrow + 1 if part < vectors % parts else narrow
            depthwise_parts(xp.ctypes.data + 4 * first, sh * padded_w, offsets.ctypes.data, w[o, 0].ctypes.data,
                            kh * kw, dst.ctypes.data + 4 * first, 8 * vectors, rows, part_width)
            first += 8 * part_width
        if not direct:  # the plane's part of the rows (the vector loop of the padded copy)
            depthwise_pad(rows_buffer.ctypes.data, 8 * vectors, out[n, o].ctypes.data, out_w, out_h, out_w, 0)
        if has_tail:
            _plane_tail(out, other, scale, shift, n, o, has_affine, has_add, relu, clamp, lo, hi, act, act_consts)


@njit(cache=True, nogil=True)
def _plane_tail(out, other, scale, shift, n, o, has_affine, has_add, relu, clamp, lo, hi, act, act_consts):
    """The tail's operations on output plane (n, o), in place by store_rows (tail_row's bits; ``other``
    C-contiguous, as _prepared._depthwise_with_tail passes it). One thread, bn + residual + clip:
    245 -> 145 ns a 7x7 plane's convolution and tail against tail_row, 330 -> 238 at 14x14."""
    plane = out.shape[2] * out.shape[3]
    at = out.ctypes.data + 4 * (n * out.shape[1] + o) * plane
    store_rows(at, 0, at, 0, 1, plane, scale.ctypes.data + 4 * o, shift.ctypes.data + 4 * o,
               other.ctypes.data + 4 * (n * other.shape[1] + o) * plane, 0,
               store_mode(True, has_affine, has_add, relu, clamp, act), lo, hi, act_consts.ctypes.data)


@njit(cache=True, nogil=True, parallel=True)
def depthwise_conv_planes_blocks(x, w, out, sh, sw, dh, dw, pt, pl, multiplier, flat_positions, lanes, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            depthwise_conv_planes(x, w, out, sh, sw, dh, dw, pt, pl, multiplier, flat_positions, lanes, start, stop)


@njit(cache=True, nogil=True, parallel=True)
def depthwise_conv_planes_tail_blocks(x, w, out, sh, sw, dh, dw, pt, pl, multiplier, scale, shift, other, has_tail,
                                      has_affine, has_add, relu, clamp, lo, hi, act, act_consts, flat_positions,
                                      lanes, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            depthwise_conv_planes_tail(x, w, out, sh, sw, dh, dw, pt, pl, multiplier, scale, shift, other, has_tail,
                                       has_affine, has_add, relu, clamp, lo, hi, act, act_consts, flat_positions,
                                       lanes, start, stop)


@njit(cache=True, nogil=True, parallel=True)
def depthwise_conv_nchw_blocks(x, w, out, sh, sw, dh, dw, pt, pl, multiplier, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            depthwise_conv_nchw(x, w, out, sh, sw, dh, dw, pt, pl, multiplier, start, stop)


@njit(cache=True, nogil=True, inline="always")
def strided_row(dst, src, count, step):
    """dst[k] = src[k * step] for k < count. Steps 1 and 2 get loops of their own, which LLVM
    vectorizes (a gather with a run-time stride does not)."""
    if step == 1:
        for k in range(count):
            dst[k] = src[k]
    elif step == 2:
        for k in range(count):
            dst[k] = src[2 * k]
    else:
        for k in range(count):
            dst[k] = src[k * step]


@njit(cache=True, nogil=True)
def im2col_chw(xp, col, sh, sw, dh, dw, start, stop):
    """col[c, i, j, oh, ow] = xp[c, oh*sh + i*dh, ow*sw + j*dw] for the rows (c, i) in [start, stop)
    (xp: one padded image, C x H x W; rows by strided_row)."""
    kh, kw, out_h, out_w = col.shape[1], col.shape[2], col.shape[3], col.shape[4]
    for row in range(start, stop):
        c = row // kh
        i = row % kh
        for j in range(kw):
            for oh in range(out_h):
                strided_row(col[c, i, j, oh], xp[c, oh * sh + i * dh, j * dw:], out_w, sw)


@njit(cache=True, nogil=True, parallel=True)
def im2col_chw_blocks(xp, col, sh, sw, dh, dw, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            im2col_chw(xp, col, sh, sw, dh, dw, start, stop)


# Direct convolution of few input channels (the 3-channel stems, op_conv._conv_few_channels): a
# unit of work is a block of output rows of one image. Its input rows are copied once into a
# zero-padded patch whose rows are split by column phase (column k of phase p is input column
# sw * k + p - pl), so that every tap (c, i, j) reads 16 consecutive floats for 16 outputs of a row
# at a fixed offset; _microkernel.panel_taps then sums all taps of a panel of output channels x 16
# columns in registers.

@njit(cache=True, nogil=True)
def few_channel_offsets(channels, kh, kw, dh, dw, sw, patch_rows, span):
    """Offset (in floats, in the patch) of each tap (c, i, j) from its output's first column."""
    offsets = np.empty(channels * kh * kw, np.int64)
    for c in range(channels):
        for i in range(kh):
            for j in range(kw):
                col = j * dw
                offsets[(c * kh + i) * kw + j] = ((c * patch_rows + i * dh) * sw + col % sw) * span + col // sw
    return offsets


@njit(cache=True, nogil=True)
def fill_phase_patch(x, n, first_row, pl, sw, patch, row_buffer):
    """patch[c, r, p, k] = x[n, c, first_row + r, sw * k + p - pl], zero outside the image. Each input
    row goes through ``row_buffer`` (sw * span floats, zero on entry: columns past the image stay
    zero), copied in and split by phase in loops LLVM vectorizes (a strided gather with bounds
    checks took ~half of a stem's time)."""
    channels, height, width = x.shape[1], x.shape[2], x.shape[3]
    patch_rows, span = patch.shape[1], patch.shape[3]
    zero = np.float32(0)
    first_col = min(pl, sw * span)  # where the image starts in the buffer
    count = max(0, min(width, sw * span - pl))  # image columns the patch reaches
    for c in range(channels):
        for r in range(patch_rows):
            row = first_row + r
            if row < 0 or row >= height:
                for p in range(sw):
                    dst = patch[c, r, p]
                    for k in range(span):
                        dst[k] = zero
                continue
            src = x[n, c, row]
            inner = row_buffer[first_col:]
            for k in range(count):
                inner[k] = src[k]
            if sw == 1:
                dst = patch[c, r, 0]
                for k in range(span):
                    dst[k] = row_buffer[k]
            elif sw == 2:
                even, odd = patch[c, r, 0], patch[c, r, 1]
                for k in range(span):
                    even[k] = row_buffer[2 * k]
                    odd[k] = row_buffer[2 * k + 1]
            else:
                for p in range(sw):
                    dst = patch[c, r, p]
                    for k in range(span):
                        dst[k] = row_buffer[sw * k + p]


@njit(cache=True, nogil=True)
def conv_few_channels(x, wp, y, kh, kw, sh, sw, dh, dw, pt, pl, block_rows, scale, shift, other, has_tail,
                      has_affine, has_add, relu, clamp, lo, hi, act, act_consts, start, stop):
    """y[n, o, oy, ox] = sum over taps (c, i, j) in order of x[n, c, oy*sh - pt + i*dh, ox*sw - pl + j*dw]
    * w[o, c, i, j] (zero outside the image), float32, for the units [start, stop) (unit = image *
    row blocks + block of ``block_rows`` output rows). wp: the weights in panels of output
    channels, (panels, taps, rows of a panel: _microkernel.ROWS); x and y contiguous. A whole panel's
    row goes by calls of up to 3 vectors (direct_taps: up to 24 accumulators; ResNet-18's 7x7 stem
    0.75-0.86 -> 0.63-0.66 ms at two threads against panel_taps' 16 columns a call), what is left of it
    by panel_taps into the scratch: the same sums, so the same bits. ``has_tail``: each finished output
    row of channel o then gets the tail's operations (scale[o], shift[o], the C-contiguous residual
    other[n, o], the activation: store_rows) while it is in cache, the bits of the tail's own pass."""
    channels = x.shape[1]
    outs, out_h, out_w = y.shape[1], y.shape[2], y.shape[3]
    panels, taps, rows = wp.shape[0], wp.shape[1], wp.shape[2]
    segments = (out_w + COLUMNS - 1) // COLUMNS
    span = segments * COLUMNS + ((kw - 1) * dw) // sw + 1
    patch_rows = (block_rows - 1) * sh + (kh - 1) * dh + 1
    patch = np.empty((channels, patch_rows, sw, span), np.float32)
    row_buffer = np.zeros(sw * span, np.float32)
    offsets = few_channel_offsets(channels, kh, kw, dh, dw, sw, patch_rows, span)
    scratch = np.empty((rows, COLUMNS), np.float32)
    row_blocks = (out_h + block_rows - 1) // block_rows
    plane = out_h * out_w
    lanes = 16 if rows == 8 else 8  # the microkernel's vector width goes with its panel height (ROWS)
    widest = 3 if lanes == 16 else 2  # its DIRECT_VECTORS
    # the tail by store_rows on each panel's finished rows, in place (``other``: C-contiguous)
    mode = store_mode(has_tail, has_affine, has_add, relu, clamp, act)
    y_at, other_at = y.ctypes.data, other.ctypes.data
    for unit in range(start, stop):
        n = unit // row_blocks
        oy0 = (unit % row_blocks) * block_rows
        fill_phase_patch(x, n, oy0 * sh - pt, pl, sw, patch, row_buffer)
        for r in range(min(block_rows, out_h - oy0)):
            b = patch.ctypes.data + 4 * r * sh * sw * span
            for q in range(panels):
                a = wp[q].ctypes.data
                first = (n * outs + rows * q) * plane + (oy0 + r) * out_w
                live = min(rows, outs - rows * q)
                j = 0
                while j < out_w:
                    v = min(widest, (out_w - j) // lanes)
                    if live == rows and v > 0:  # whole vectors of a whole panel: into y, up to 3 vectors a call
                        _direct_taps(v, False, a, b + 4 * j, offsets.ctypes.data, y_at + 4 * (first + j), plane, taps)
                        j += v * lanes
                        continue
                    panel_taps(a, b + 4 * j, offsets.ctypes.data, scratch.ctypes.data, COLUMNS, taps)
                    store_rows(scratch.ctypes.data, COLUMNS, y_at + 4 * (first + j), plane, live, min(COLUMNS, out_w - j),
                               0, 0, 0, 0, 0, lo, hi, 0)
                    j += COLUMNS
                if has_tail:
                    o0 = rows * q
                    store_rows(y_at + 4 * first, plane, y_at + 4 * first, plane, live, out_w, scale.ctypes.data + 4 * o0,
                               shift.ctypes.data + 4 * o0, other_at + 4 * first, plane, mode, lo, hi,
                               act_consts.ctypes.data)


@njit(cache=True, nogil=True, parallel=True)
def conv_few_channels_blocks(x, wp, y, kh, kw, sh, sw, dh, dw, pt, pl, block_rows, scale, shift, other, has_tail,
                             has_affine, has_add, relu, clamp, lo, hi, act, act_consts, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            conv_few_channels(x, wp, y, kh, kw, sh, sw, dh, dw, pt, pl, block_rows, scale, shift, other, has_tail,
                              has_affine, has_add, relu, clamp, lo, hi, act, act_consts, start, stop)


# --- dense convolutions summed tap by tap on phase planes (op_conv._conv_direct) ----------------
#
# The input is padded once into phase planes: plane (c, a, b) holds the padded input's rows a, a + sh,
# ... and columns b, b + sw, ..., grid_w floats a row. Output (oy, ox) is then position
# p = oy * grid_w + ox, and each tap (c, i, j) reads the float at p + offsets[t] of the image's planes:
# a product of the packed weights by the input in place, without an im2col matrix. Positions with
# ox >= out_w are computed (on padding) and not stored.

@njit(cache=True, nogil=True, inline="always")
def padded_row(dst, src, first, last, step, offset):
    """dst[k] = src[k * step + offset] for k in [first, last), zero elsewhere in dst (a padded row)."""
    zero = dst.dtype.type(0)
    for k in range(first):
        dst[k] = zero
    for k in range(first, last):
        dst[k] = src[k * step + offset]
    for k in range(max(first, last), dst.shape[0]):
        dst[k] = zero


@njit(cache=True, nogil=True)
def _fill_column_pairs(x, dst_image, n, c, sh, pt, pl, rows, grid_w, r_lo, r_hi):
    """fill_phase_planes for column stride 2, one channel, plane rows [r_lo, r_hi): those rows of its
    sh x 2 phase planes zeroed, then per row phase one depthwise_pad_s2 call splitting each image row's
    column pairs into the two column phases (input column x goes to phase (x + pl) % 2, column
    (x + pl) // 2). One thread, 128 x 56 x 56 input: 0.53 ms by the per-row loop, 0.23 ms this way."""
    height, width = x.shape[2], x.shape[3]
    plane = rows * grid_w
    first = c * sh * 2 * plane
    dst = dst_image[first:first + sh * 2 * plane]
    zero = np.float32(0)
    for p in range(sh * 2):
        for k in range(p * plane + r_lo * grid_w, p * plane + r_hi * grid_w):
            dst[k] = zero
    x_end = min(width, 2 * grid_w - pl)  # input columns that land inside the planes
    if x_end <= 0:
        return
    pairs = x_end // 2
    even_phase, even_col = pl % 2, pl // 2
    odd_phase, odd_col = (pl + 1) % 2, (pl + 1) // 2
    src_image = x[n, c]
    for a in range(sh):
        # plane rows r whose image row r * sh + a - pt is in the image
        r0 = max(r_lo, (pt - a + sh - 1) // sh)
        r1 = min(r_hi, (height - 1 + pt - a) // sh + 1)
        if r0 >= r1:
            continue
        even_at = (a * 2 + even_phase) * plane + r0 * grid_w + even_col
        odd_at = (a * 2 + odd_phase) * plane + r0 * grid_w + odd_col
        src = src_image[r0 * sh + a - pt]
        if pairs > 0:
            depthwise_pad_s2(src.ctypes.data, sh * width, dst.ctypes.data + 4 * even_at, grid_w, r1 - r0, pairs,
                             odd_at - even_at)
        if x_end % 2:  # the last (even) column has no pair
            last = x_end - 1
            at = (a * 2 + (last + pl) % 2) * plane + r0 * grid_w + (last + pl) // 2
            for r in range(r1 - r0):
                dst[at + r * grid_w] = src_image[(r0 + r) * sh + a - pt, last]


@njit(cache=True, nogil=True)
def gather_strided(x, out, sh, sw, oh, ow, start, stop):
    """out[c, oy * ow + ox] = x[c, oy * sh, ox * sw] for channels [start, stop) (x: one C x H x W
    image): a strided 1x1 convolution's product input (rows by strided_row)."""
    for c in range(start, stop):
        src_plane = x[c]
        dst_plane = out[c]
        for oy in range(oh):
            strided_row(dst_plane[oy * ow:(oy + 1) * ow], src_plane[oy * sh], ow, sw)


@njit(cache=True, nogil=True, parallel=True)
def gather_strided_blocks(x, out, sh, sw, oh, ow, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            gather_strided(x, out, sh, sw, oh, ow, start, stop)


@njit(cache=True, nogil=True)
def fill_phase_planes(x, xp, sh, sw, pt, pl, rows, grid_w, bands, start, stop):
    """xp[n, ((c * sh + a) * sw + b) * rows * grid_w + r * grid_w + k] = x[n, c, r * sh + a - pt,
    k * sw + b - pl] (zero outside the image) for units [start, stop): unit = (band * images + image)
    * channels + channel, a band being the plane rows [band * rows // bands, (band + 1) * rows //
    bands), so that threads taking contiguous blocks of units fill horizontal bands of every channel:
    the rows the direct route's position chunks read (and the previous layer's threads wrote) on the
    same core. Stride 1: the band zeroed, then the image rows copied in by _microkernel.depthwise_pad
    (numba's row slices cost ~20 ns each, as long as copying a 56-float row); column stride 2 by
    _microkernel.depthwise_pad_s2 (_fill_column_pairs); other strides row by row."""
    images, channels, height, width = x.shape[0], x.shape[1], x.shape[2], x.shape[3]
    plane = rows * grid_w
    zero = np.float32(0)
    for unit in range(start, stop):
        band = unit // (images * channels)
        n = unit // channels % images
        c = unit % channels
        r_lo, r_hi = band * rows // bands, (band + 1) * rows // bands
        if r_lo >= r_hi:
            continue
        dst_image = xp[n]
        if sh == 1 and sw == 1:
            dst = dst_image[c * plane:(c + 1) * plane]
            for k in range(r_lo * grid_w, r_hi * grid_w):
                dst[k] = zero
            r0, r1 = max(r_lo, pt), min(r_hi, height + pt)   # band rows holding image rows
            k0, k1 = max(0, pl), min(grid_w, width + pl)     # plane columns holding image columns
            if r0 < r1 and k0 < k1:
                depthwise_pad(x[n, c, r0 - pt].ctypes.data + 4 * (k0 - pl), width, dst.ctypes.data + 4 * (r0 * grid_w + k0),
                              grid_w, r1 - r0, k1 - k0, 0)
            continue
        if sw == 2:
            _fill_column_pairs(x, dst_image, n, c, sh, pt, pl, rows, grid_w, r_lo, r_hi)
            continue
        for a in range(sh):
            for b in range(sw):
                first = ((c * sh + a) * sw + b) * plane
                # phase columns k whose input column k * sw + b - pl lies in the image: [k0, k1)
                k0 = min(grid_w, max(0, (pl - b + sw - 1) // sw))
                k1 = max(k0, min(grid_w, (width - 1 + pl - b) // sw + 1))
                for r in range(r_lo, r_hi):
                    dst = dst_image[first + r * grid_w:first + (r + 1) * grid_w]
                    row = r * sh + a - pt
                    if row < 0 or row >= height:
                        padded_row(dst, x[n, c, 0], 0, 0, 1, 0)
                    else:
                        padded_row(dst, x[n, c, row], k0, k1, sw, b - pl)


@njit(cache=True, nogil=True, parallel=True)
def fill_phase_planes_blocks(x, xp, sh, sw, pt, pl, rows, grid_w, bands, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            fill_phase_planes(x, xp, sh, sw, pt, pl, rows, grid_w, bands, start, stop)


@njit(cache=True, nogil=True, inline="always")
def _direct_taps(vectors, add, a, b, offsets, c, ldc, k):
    """The direct kernel of ``vectors`` vectors (1..3), storing or adding (_microkernel.direct_taps*)."""
    if add:
        if vectors == 3:
            direct_taps_add3(a, b, offsets, c, ldc, k)
        elif vectors == 2:
            direct_taps_add2(a, b, offsets, c, ldc, k)
        else:
            direct_taps_add1(a, b, offsets, c, ldc, k)
    elif vectors == 3:
        direct_taps3(a, b, offsets, c, ldc, k)
    elif vectors == 2:
        direct_taps2(a, b, offsets, c, ldc, k)
    else:
        direct_taps1(a, b, offsets, c, ldc, k)


@njit(cache=True, nogil=True)
def conv_direct(xp, wp, offsets, y, grid_w, lanes, vectors, strip, chunk_positions, chunk_taps, scale, shift, other,
                has_tail, has_affine, has_add, relu, clamp, lo, hi, act, act_consts, start, stop):
    """y[n, o, oy, ox] = sum over taps t of wp[o // R, t, o % R] * xp[n, oy * grid_w + ox + offsets[t]]
    (R = wp.shape[2], the panel height) for units [start, stop): unit = (image * chunks + position
    chunk) * panels + panel, a chunk being ``chunk_positions`` positions. A kernel call sums
    ``chunk_taps`` taps for R x (vectors * lanes) positions; the chunk sums are added in order. The
    calls go by strips of ``strip`` calls' positions, each tap chunk over the whole strip in turn, so
    the chunk's weights are read from L1 by all of the strip's calls. ``has_tail``: each stored row
    of output o then gets tail_row's operations (scale[o], shift[o], the residual other[n, o]) while
    it is in cache, the bits of conv_tail's pass after the convolution."""
    outs, out_h, out_w = y.shape[1], y.shape[2], y.shape[3]
    panels, taps, rows = wp.shape[0], wp.shape[1], wp.shape[2]
    columns = vectors * lanes
    width = strip * columns
    positions = (out_h - 1) * grid_w + out_w
    chunks = (positions + chunk_positions - 1) // chunk_positions
    scratch = np.empty((rows, width), np.float32)
    c = scratch.ctypes.data
    offs = offsets.ctypes.data
    # rows leave the scratch through store_rows, the tail on the way (``other``: C-contiguous, as y)
    mode = store_mode(has_tail, has_affine, has_add, relu, clamp, act)
    y_at, other_at, plane = y.ctypes.data, other.ctypes.data, out_h * out_w
    for unit in range(start, stop):
        q = unit % panels
        n = unit // panels // chunks
        p0 = (unit // panels % chunks) * chunk_positions
        p1 = min(positions, p0 + chunk_positions)
        a = wp[q].ctypes.data
        base = xp[n].ctypes.data
        o0 = rows * q
        live = min(rows, outs - o0)
        for s0 in range(p0, p1, width):
            s1 = min(p1, s0 + width)
            for t0 in range(0, taps, chunk_taps):
                k = min(taps - t0, chunk_taps)
                for p in range(s0, s1, columns):
                    _direct_taps(vectors, t0 > 0, a + 4 * rows * t0, base + 4 * p, offs + 8 * t0, c + 4 * (p - s0), width, k)
            pos = s0
            while pos < s1:
                oy = pos // grid_w
                ox = pos - oy * grid_w
                run = min(s1 - pos, grid_w - ox)
                keep = min(run, out_w - ox)
                if keep > 0:
                    at = 4 * (((n * outs + o0) * out_h + oy) * out_w + ox)
                    store_rows(c + 4 * (pos - s0), width, y_at + at, plane, live, keep, scale.ctypes.data + 4 * o0,
                               shift.ctypes.data + 4 * o0, other_at + at, plane, mode, lo, hi, act_consts.ctypes.data)
                pos += run


@njit(cache=True, nogil=True, parallel=True)
def conv_direct_blocks(xp, wp, offsets, y, grid_w, lanes, vectors, strip, chunk_positions, chunk_taps, scale, shift,
                       other, has_tail, has_affine, has_add, relu, clamp, lo, hi, act, act_consts, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            conv_direct(xp, wp, offsets, y, grid_w, lanes, vectors, strip, chunk_positions, chunk_taps, scale, shift,
                        other, has_tail, has_affine, has_add, relu, clamp, lo, hi, act, act_consts, start, stop)


@njit(cache=True, nogil=True)
def pointwise_lanes(x, wp, firsts, widths, y, lanes, chunk, scale, shift, other, has_tail, has_affine, has_add, relu,
                    clamp, lo, hi, act, act_consts, start, stop):
    """y[o, p] = sum over channels q of W[o, q] * x[q, p] for the units [start, stop) of output channels:
    unit u is the ``widths[u]`` vectors of ``lanes`` channels from vector ``firsts[u]``, whose weights
    are wp's (C, widths[u] * lanes) block at firsts[u] * lanes * C floats (op_conv.PointwiseConv packs
    them; channels past y's are zeros there, never stored). Each chunk of ``chunk`` channels is one
    ordered FMA chain per output (_microkernel.pointwise_tile, tiles of up to 8 positions), the chunk
    sums added in order in a scratch of positions x channels; the last chunk's tiles are transposed
    in registers and stored as the channels' rows. With a tail, the unit's rows then get tail_row's
    operations in place (_microkernel.store_rows), as in conv_direct."""
    channels, positions = x.shape
    outs = y.shape[0]
    most = 0
    for u in range(start, stop):
        most = max(most, widths[u])
    lds = most * lanes
    scratch = np.empty(positions * lds + 1, np.float32)
    x_at, s_at, y_at, other_at = x.ctypes.data, scratch.ctypes.data, y.ctypes.data, other.ctypes.data
    mode = store_mode(has_tail, has_affine, has_add, relu, clamp, act)
    for u in range(start, stop):
        width = widths[u] * lanes
        w_at = wp.ctypes.data + 4 * firsts[u] * lanes * channels
        o0 = firsts[u] * lanes
        live = min(outs - o0, width)
        for c0 in range(0, channels, chunk):
            k = min(chunk, channels - c0)
            shape = (128 if c0 + chunk >= channels else 0) + (64 if c0 > 0 else 0) + widths[u] * 8
            p0 = 0
            while p0 < positions:
                left = positions - p0
                r = 8 if left >= 8 else 4 if left >= 4 else 2 if left >= 2 else 1
                pointwise_tile(x_at + 4 * (c0 * positions + p0), positions, w_at + 4 * c0 * width, s_at + 4 * p0 * lds,
                               lds, k, shape + r, y_at + 4 * (o0 * positions + p0), positions, live)
                p0 += r
        if mode:
            at = 4 * o0 * positions
            store_rows(y_at + at, positions, y_at + at, positions, live, positions, scale.ctypes.data + 4 * o0,
                       shift.ctypes.data + 4 * o0, other_at + at, positions, mode, lo, hi, act_consts.ctypes.data)


@njit(cache=True, nogil=True, parallel=True)
def pointwise_lanes_blocks(x, wp, firsts, widths, y, lanes, chunk, scale, shift, other, has_tail, has_affine, has_add,
                           relu, clamp, lo, hi, act, act_consts, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            pointwise_lanes(x, wp, firsts, widths, y, lanes, chunk, scale, shift, other, has_tail, has_affine, has_add,
                            relu, clamp, lo, hi, act, act_consts, start, stop)


# --- pooling -----------------------------------------------------------------------------------

@njit(cache=True)
def _valid_range(out_size, in_size, stride, offset):
    """Output indices o with 0 <= o*stride + offset < in_size, as [lo, hi)."""
    lo = 0 if offset >= 0 else (-offset + stride - 1) // stride
    last = in_size - 1 - offset
    hi = last // stride + 1 if last >= 0 else 0
    if hi > out_size:
        hi = out_size
    return lo, hi


@njit(cache=True, nogil=True, inline="always")
def window_rows_max(rowmax, src, first, kh, dh, init):
    """rowmax = the max of ``init`` and src's rows first, first + dh, ... (kh rows; those outside the
    plane skipped), along the whole width (contiguous: it vectorizes)."""
    height, width = src.shape
    rowmax[:] = init
    for i in range(kh):
        h = first + i * dh
        if h < 0 or h >= height:
            continue
        taps = src[h]
        for k in range(width):
            rowmax[k] = np.maximum(rowmax[k], taps[k])


@njit(cache=True, nogil=True)
def max_pool_nchw(x, out, kh, kw, sh, sw, dh, dw, pt, pl, init, start, stop):
    """Per output row: the max over its window's input rows along the whole width (contiguous, so it
    vectorizes) into a row padded with ``init`` on both sides, then the max over each window's
    columns of that row (loops of their own for strides 1 and 2, which LLVM vectorizes).
    np.maximum (NaN-propagating) vectorizes; the max() builtin runs ~5x slower."""
    n_batch, channels, height, width = x.shape
    out_h, out_w = out.shape[2], out.shape[3]
    padded = max(pl + width, (out_w - 1) * sw + (kw - 1) * dw + 1)
    rowpad = np.empty(padded, x.dtype)
    rowpad[:] = init
    rowmax = rowpad[pl:pl + width]
    for plane in range(start, stop):
        n = plane // channels
        c = plane % channels
        res = out[n, c]
        src = x[n, c]
        for oh in range(out_h):
            window_rows_max(rowmax, src, oh * sh - pt, kh, dh, init)
            dst = res[oh]
            dst[:] = init
            for j in range(kw):
                cols = rowpad[j * dw:]
                if sw == 1:
                    for ow in range(out_w):
                        dst[ow] = np.maximum(dst[ow], cols[ow])
                elif sw == 2:
                    for ow in range(out_w):
                        dst[ow] = np.maximum(dst[ow], cols[2 * ow])
                else:
                    for ow in range(out_w):
                        dst[ow] = np.maximum(dst[ow], cols[ow * sw])


@njit(cache=True, nogil=True)
def max_pool_nchw_s2(x, out, kh, kw, sh, dh, pt, pl, init, start, stop):
    """max_pool_nchw for float32 with column stride 2 and no column dilation: each row of window
    maxima over rows is split into its even and odd columns (_microkernel.depthwise_pad_s2), so the
    loops over a window's columns read consecutive floats (vectorized; the strided reads were not).
    The same maxima in the same order: the same bits."""
    n_batch, channels, height, width = x.shape
    out_h, out_w = out.shape[2], out.shape[3]
    half = out_w + (kw - 1) // 2 + 1  # floats of each column phase the windows read
    rowpad = np.empty(max(pl + width, 2 * half), np.float32)
    rowpad[:] = init
    rowmax = rowpad[pl:pl + width]
    phases = np.empty(2 * half, np.float32)
    even, odd = phases[:half], phases[half:]
    for plane in range(start, stop):
        n = plane // channels
        c = plane % channels
        res = out[n, c]
        src = x[n, c]
        for oh in range(out_h):
            window_rows_max(rowmax, src, oh * sh - pt, kh, dh, init)
            depthwise_pad_s2(rowpad.ctypes.data, 0, phases.ctypes.data, 0, 1, half, half)
            dst = res[oh]
            dst[:] = init
            for j in range(kw):
                cols = odd[j // 2:] if j % 2 else even[j // 2:]  # padded column j + 2 * ow
                for ow in range(out_w):
                    dst[ow] = np.maximum(dst[ow], cols[ow])


@njit(cache=True, nogil=True, parallel=True)
def max_pool_nchw_s2_blocks(x, out, kh, kw, sh, dh, pt, pl, init, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            max_pool_nchw_s2(x, out, kh, kw, sh, dh, pt, pl, init, start, stop)


@njit(cache=True, nogil=True, parallel=True)
def max_pool_nchw_blocks(x, out, kh, kw, sh, sw, dh, dw, pt, pl, init, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            max_pool_nchw(x, out, kh, kw, sh, sw, dh, dw, pt, pl, init, start, stop)


@njit(cache=True, nogil=True)
def sum_pool_nchw(x, out, kh, kw, sh, sw, dh, dw, pt, pl, start, stop):
    """Window sums over the valid (non-padding) taps; the caller divides by the counts."""
    n_batch, channels, height, width = x.shape
    out_h, out_w = out.shape[2], out.shape[3]
    for plane in range(start, stop):
        n = plane // channels
        c = plane % channels
        res = out[n, c]
        res[:, :] = 0
        src = x[n, c]
        for i in range(kh):
            oh_lo, oh_hi = _valid_range(out_h, height, sh, i * dh - pt)
            for j in range(kw):
                off = j * dw - pl
                ow_lo, ow_hi = _valid_range(out_w, width, sw, off)
                if ow_lo >= ow_hi:
                    continue
                first = ow_lo * sw + off
                last = (ow_hi - 1) * sw + off + 1
                for oh in range(oh_lo, oh_hi):
                    taps = src[oh * sh - pt + i * dh, first:last:sw]
                    dst = res[oh, ow_lo:ow_hi]
                    for k in range(dst.size):
                        dst[k] += taps[k]

@njit(cache=True, nogil=True, parallel=True)
def sum_pool_nchw_blocks(x, out, kh, kw, sh, sw, dh, dw, pt, pl, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            sum_pool_nchw(x, out, kh, kw, sh, sw, dh, dw, pt, pl, start, stop)


@njit(cache=True, nogil=True)
def adaptive_pool_nchw(x, out, is_max, start, stop):
    """PyTorch/TVM adaptive windows: [floor(o*H/OH), ceil((o+1)*H/OH))."""
    n_batch, channels, height, width = x.shape
    out_h, out_w = out.shape[2], out.shape[3]
    zero = out.dtype.type(0)
    for plane in range(start, stop):
        n = plane // channels
        c = plane % channels
        src = x[n, c]
        for oh in range(out_h):
            h0 = (oh * height) // out_h
            h1 = ((oh + 1) * height + out_h - 1) // out_h
            for ow in range(out_w):
                w0 = (ow * width) // out_w
                w1 = ((ow + 1) * width + out_w - 1) // out_w
                if is_max:  # np.maximum(running, tap): NaN propagates, the first of equal values stays
                    acc = src[h0, w0]
                    for h in range(h0, h1):
                        for w in range(w0, w1):
                            acc = np.maximum(acc, src[h, w])
                    out[n, c, oh, ow] = acc
                else:  # from +0.0, taps in row-major order, divided in the working dtype
                    total = zero
                    for h in range(h0, h1):
                        for w in range(w0, w1):
                            total += src[h, w]
                    out[n, c, oh, ow] = total / out.dtype.type((h1 - h0) * (w1 - w0))


# --- resize ------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def interp_rows(x, idx, wts, out, start, stop):
    """out[p, o, :] = sum_t wts[o, t] * x[p, idx[o, t], :]   (x: planes x H x W)."""
    n_planes, out_h, width = out.shape
    taps = idx.shape[1]
    for p in range(start, stop):
        for o in range(out_h):
            dst = out[p, o]
            dst[:] = 0
            for t in range(taps):
                wv = wts[o, t]
                src = x[p, idx[o, t]]
                for k in range(width):
                    dst[k] += wv * src[k]


@njit(cache=True, nogil=True)
def interp_cols(x, idx, wts, out, start, stop):
    """out[p, h, o] = sum_t wts[o, t] * x[p, h, idx[o, t]]."""
    n_planes, height, out_w = out.shape
    taps = idx.shape[1]
    for p in range(start, stop):
        for h in range(height):
            src = x[p, h]
            dst = out[p, h]
            for o in range(out_w):
                acc = wts[o, 0] * src[idx[o, 0]]
                for t in range(1, taps):
                    acc += wts[o, t] * src[idx[o, t]]
                dst[o] = acc


# --- element-wise ------------------------------------------------------------------------------
# numpy's maximum (NaN-propagating) and broadcast multiplies run 2-4x below memory speed; these
# single passes vectorize.

@njit(cache=True, nogil=True)
def relu_flat(x, out, zero, start, stop):
    """``zero`` has the array's dtype, so the select stays in that type; indexing local slices
    from 0 (not the arrays from ``start``) is what lets LLVM vectorize the loop."""
    src = x[start:stop]
    dst = out[start:stop]
    for i in range(src.size):
        v = src[i]
        dst[i] = zero if v <= zero else v  # np.maximum(v, 0): NaN stays NaN, -0.0 becomes +0.0

@njit(cache=True, nogil=True, parallel=True)
def relu_flat_blocks(x, out, zero, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            relu_flat(x, out, zero, start, stop)


@njit(cache=True, nogil=True)
def relu_flat_inplace(x, zero, start, stop):
    """relu_flat with out=x, through a small stack of results: written straight back, LLVM turns the
    select into a store only of the negatives, which does not vectorize (5x slower; so is
    relu_flat with overlapping input and output)."""
    buf = x[start:stop]
    tmp = np.empty(512, x.dtype)
    for first in range(0, buf.size, 512):
        chunk = buf[first:first + 512]
        for i in range(chunk.size):
            v = chunk[i]
            tmp[i] = zero if v <= zero else v
        for i in range(chunk.size):
            chunk[i] = tmp[i]

@njit(cache=True, nogil=True, parallel=True)
def relu_flat_inplace_blocks(x, zero, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            relu_flat_inplace(x, zero, start, stop)


@njit(cache=True, nogil=True)
def channel_affine_inplace(x, scale, shift, start, stop):
    """channel_affine with out=x (see relu_flat_inplace): the same operations."""
    channels = x.shape[1]
    for row in range(start, stop):
        n = row // channels
        c = row % channels
        s = scale[c]
        t = shift[c]
        buf = x[n, c]
        for i in range(buf.shape[0]):
            buf[i] = buf[i] * s + t

@njit(cache=True, nogil=True, parallel=True)
def channel_affine_inplace_blocks(x, scale, shift, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            channel_affine_inplace(x, scale, shift, start, stop)


@njit(cache=True, nogil=True)
def channel_affine(x, scale, shift, out, start, stop):
    """out[n, c, :] = x[n, c, :] * scale[c] + shift[c] for the (n, c) rows in [start, stop)."""
    channels = x.shape[1]
    for row in range(start, stop):
        n = row // channels
        c = row % channels
        s = scale[c]
        t = shift[c]
        src = x[n, c]
        dst = out[n, c]
        for i in range(src.shape[0]):
            dst[i] = src[i] * s + t

@njit(cache=True, nogil=True, parallel=True)
def channel_affine_blocks(x, scale, shift, out, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            channel_affine(x, scale, shift, out, start, stop)


@njit(cache=True, nogil=True, inline="always")
def store_mode(has_tail, has_affine, has_add, relu, clamp, act):
    """_microkernel.store_rows' mode for a conv tail's flags (clip before relu, as tail_row decides) and
    its activation (ACT_NONE, ACT_HARD_SWISH, ACT_SWISH); 0 (a copy) without a tail."""
    if not has_tail:
        return 0
    mode = STORE_HARD_SWISH if act == ACT_HARD_SWISH else STORE_SWISH if act == ACT_SWISH else 0
    if has_affine:
        mode += STORE_AFFINE
    if has_add:
        mode += STORE_ADD
    if clamp:
        mode += STORE_CLIP
    elif relu:
        mode += STORE_RELU
    return mode


@njit(cache=True, nogil=True, error_model="numpy")  # numpy's: the swish's divide vectorizes (no zero check)
def tail_row(buf, oth, s, t, tmp, has_affine, has_add, relu, clamp, lo, hi, act, act_consts):
    """One row of conv_tail: buf = act(buf * s + t + oth), each step only when asked (see conv_tail).
    One loop per combination: each stores every element, so that LLVM vectorizes it. Then ``act``
    (ACT_SWISH, ACT_HARD_SWISH; ACT_NONE: nothing) on the row while it is in cache, with the
    operations of _exp.swish_flat / hard_swish_flat (act_consts: hard-swish's a, b, lo, hi)."""
    zero = buf.dtype.type(0)
    n = buf.shape[0]
    if clamp:
        if has_affine and has_add:
            for i in range(n):
                v = buf[i] * s + t + oth[i]
                v = lo if v < lo else v
                buf[i] = hi if v > hi else v
        elif has_affine:
            for i in range(n):
                v = buf[i] * s + t
                v = lo if v < lo else v
                buf[i] = hi if v > hi else v
        elif has_add:
            for i in range(n):
                v = buf[i] + oth[i]
                v = lo if v < lo else v
                buf[i] = hi if v > hi else v
        else:  # clip alone (a chain of one stage: _prepared._pointwise_with_tail)
            for i in range(n):
                v = buf[i]
                v = lo if v < lo else v
                buf[i] = hi if v > hi else v
    elif has_affine and has_add and relu:
        for i in range(n):
            v = buf[i] * s + t + oth[i]
            buf[i] = zero if v <= zero else v
    elif has_affine and has_add:
        for i in range(n):
            buf[i] = buf[i] * s + t + oth[i]
    elif has_affine and relu:
        for i in range(n):
            v = buf[i] * s + t
            buf[i] = zero if v <= zero else v
    elif has_affine:
        for i in range(n):
            buf[i] = buf[i] * s + t
    elif has_add and relu:
        for i in range(n):
            v = buf[i] + oth[i]
            buf[i] = zero if v <= zero else v
    elif has_add:
        for i in range(n):
            buf[i] = buf[i] + oth[i]
    elif relu:  # through tmp: see relu_flat_inplace
        for i in range(n):
            v = buf[i]
            tmp[i] = zero if v <= zero else v
        for i in range(n):
            buf[i] = tmp[i]
    if act == ACT_SWISH:
        for i in range(n):
            buf[i] = swish_f32(buf[i])
    elif act == ACT_HARD_SWISH:
        a, b, act_lo, act_hi = act_consts[0], act_consts[1], act_consts[2], act_consts[3]
        for i in range(n):
            v = buf[i]
            buf[i] = v * hard_sigmoid_value(v, a, b, act_lo, act_hi)


@njit(cache=True, nogil=True)
def conv_tail(x, channels, scale, shift, other, has_affine, has_add, relu, clamp, lo, hi, start, stop):
    """x[r] = act(x[r] * scale[c] + shift[c] + other[r]) for the rows r = (n, c) in [start, stop),
    each step only when asked, act the relu select or (clamp) np.clip's ``lo if v < lo``, then
    ``hi if v > hi``, with the operations (and roundings) of the separate ops (_tail.py)."""
    zero = x.dtype.type(0)
    tmp = np.empty(x.shape[1], x.dtype)
    for row in range(start, stop):
        c = row % channels
        s = scale[c] if has_affine else zero
        t = shift[c] if has_affine else zero
        tail_row(x[row], other[row], s, t, tmp, has_affine, has_add, relu, clamp, lo, hi, ACT_NONE, scale)


@njit(cache=True, nogil=True, parallel=True)
def conv_tail_blocks(x, channels, scale, shift, other, has_affine, has_add, relu, clamp, lo, hi, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            conv_tail(x, channels, scale, shift, other, has_affine, has_add, relu, clamp, lo, hi, start, stop)


@njit(cache=True, nogil=True)
def conv_tail_stored(x, channels, scale, shift, other, has_affine, has_add, relu, clamp, lo, hi, start, stop):
    """conv_tail for float32 rows (each contiguous, x's and other's rows evenly spaced): the rows of
    one image at a time through _microkernel.store_rows in place (tail_row's bits). One thread, bias
    + clip on 960 rows of 49 floats: 72 -> ~10 us (a call and two slices per row saved)."""
    width = x.shape[1]
    step, other_step = x.strides[0] // 4, other.strides[0] // 4
    mode = store_mode(True, has_affine, has_add, relu, clamp, ACT_NONE)
    row = start
    while row < stop:
        c = row % channels
        count = min(stop - row, channels - c)
        at = x.ctypes.data + 4 * row * step
        affine = 4 * c if has_affine else 0
        store_rows(at, step, at, step, count, width, scale.ctypes.data + affine, shift.ctypes.data + affine,
                   other.ctypes.data + 4 * row * other_step, other_step, mode, lo, hi, scale.ctypes.data)
        row += count


@njit(cache=True, nogil=True, parallel=True)
def conv_tail_stored_blocks(x, channels, scale, shift, other, has_affine, has_add, relu, clamp, lo, hi, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            conv_tail_stored(x, channels, scale, shift, other, has_affine, has_add, relu, clamp, lo, hi, start, stop)


# --- products with their conv tail (see _parallel.product_tail_plan) --------------------------------

@njit(cache=True, nogil=True)
def _gemm_tail_block(a, b, c, i, step, total, by_rows, scale, shift, other, has_affine, has_add, relu, clamp, lo,
                     hi, act, act_consts):
    """Block i of _blas.gemm_blocks' product c = a @ b, then conv_tail's operations on that block of c
    (rows of c are channels; scale and shift have one entry per row, used or not) while it is in
    the core's cache: the same product and the same element operations."""
    start = i * step
    stop = min(total, start + step)
    if start >= stop:
        return
    zero = c.dtype.type(0)
    if by_rows:
        gemm_into(a[start:stop], b, c[start:stop])
        tmp = np.empty(c.shape[1], c.dtype)
        for row in range(start, stop):
            tail_row(c[row], other[row], scale[row] if has_affine else zero, shift[row] if has_affine else zero, tmp,
                     has_affine, has_add, relu, clamp, lo, hi, act, act_consts)
    else:
        gemm_into(a, b[:, start:stop], c[:, start:stop])
        tmp = np.empty(stop - start, c.dtype)
        for row in range(c.shape[0]):  # a row's part of a C-contiguous array is contiguous: vector loops
            tail_row(c[row][start:stop], other[row][start:stop], scale[row] if has_affine else zero,
                     shift[row] if has_affine else zero, tmp, has_affine, has_add, relu, clamp, lo, hi, act, act_consts)


@njit(cache=True, nogil=True)
def _gemm_stored_tail_block(a, b, c, i, step, total, by_rows, scale, shift, other, has_affine, has_add, relu, clamp,
                            lo, hi, act, act_consts):
    """_gemm_tail_block for float32 with C-contiguous c and other: the block's tail by store_rows in
    place (tail_row's bits). At two threads, with bias + clip: 960x160 @ 160x49 75 -> 61 us, 144x24 @
    24x3136 114 -> 84 us (a call and two slices per row saved)."""
    start = i * step
    stop = min(total, start + step)
    if start >= stop:
        return
    cols = c.shape[1]
    if by_rows:
        gemm_into(a[start:stop], b, c[start:stop])
        first, rows, count, row0 = start * cols, stop - start, cols, start
    else:
        gemm_into(a, b[:, start:stop], c[:, start:stop])
        first, rows, count, row0 = start, c.shape[0], stop - start, 0
    at = 4 * first
    store_rows(c.ctypes.data + at, cols, c.ctypes.data + at, cols, rows, count, scale.ctypes.data + 4 * row0,
               shift.ctypes.data + 4 * row0, other.ctypes.data + at, cols,
               store_mode(True, has_affine, has_add, relu, clamp, act), np.float32(lo), np.float32(hi),
               act_consts.ctypes.data)


@njit(cache=True, nogil=True, parallel=True)
def gemm_stored_tail_blocks(a, b, c, blocks, by_rows, align, scale, shift, other, has_affine, has_add, relu, clamp, lo,
                            hi, act, act_consts):
    """gemm_tail_blocks with _gemm_stored_tail_block's blocks (float32, the microkernel available)."""
    step, total = _block_step(a, b, blocks, by_rows, align)
    for i in prange(blocks):
        _gemm_stored_tail_block(a, b, c, i, step, total, by_rows, scale, shift, other, has_affine, has_add, relu, clamp,
                                lo, hi, act, act_consts)


@njit(cache=True, nogil=True, parallel=True)
def gemm_tail_blocks(a, b, c, blocks, by_rows, align, scale, shift, other, has_affine, has_add, relu, clamp, lo, hi,
                     act, act_consts):
    """_blas.gemm_blocks' blocks, each followed by its part of the tail, one numba thread each."""
    step, total = _block_step(a, b, blocks, by_rows, align)
    for i in prange(blocks):
        _gemm_tail_block(a, b, c, i, step, total, by_rows, scale, shift, other, has_affine, has_add, relu, clamp, lo,
                         hi, act, act_consts)


# --- activation patterns (see _activations.py) ------------------------------------------------

@njit(cache=True, nogil=True, inline="always")
def hard_sigmoid_value(v, a, b, lo, hi):
    """clip(v * a + b, lo, hi) with the reference ops' roundings and np.clip's compares (NaN and -0 kept)."""
    t = v * a
    t = t + b
    t = lo if t < lo else t
    return hi if t > hi else t


@njit(cache=True, nogil=True)
def hard_sigmoid_flat(x, out, a, b, lo, hi, start, stop):
    """out = clip(x * a + b, lo, hi) with the reference ops' roundings and np.clip's compares.
    The loop runs over slices from index 0 (so that LLVM vectorizes it: 8x on 200k floats)."""
    src = x[start:stop]
    dst = out[start:stop]
    for i in range(src.size):
        dst[i] = hard_sigmoid_value(src[i], a, b, lo, hi)


@njit(cache=True, nogil=True, parallel=True)
def hard_sigmoid_flat_blocks(x, out, a, b, lo, hi, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            hard_sigmoid_flat(x, out, a, b, lo, hi, start, stop)


@njit(cache=True, nogil=True)
def hard_swish_flat(x, out, a, b, lo, hi, start, stop):
    """out = x * clip(x * a + b, lo, hi), as hard_sigmoid_flat then the multiply."""
    src = x[start:stop]
    dst = out[start:stop]
    for i in range(src.size):
        v = src[i]
        dst[i] = v * hard_sigmoid_value(v, a, b, lo, hi)


@njit(cache=True, nogil=True, parallel=True)
def hard_swish_flat_blocks(x, out, a, b, lo, hi, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            hard_swish_flat(x, out, a, b, lo, hi, start, stop)


# --- Winograd transforms (see _winograd.py) ----------------------------------------------------
# Each transform works on one row of tiles of one plane, tiles [tx0, tx1) of tile row ty, so the
# plane-wise passes (whole transformed arrays, products by BLAS) and the tile-block passes (16
# tiles at a time, products by _microkernel) share it. ``col`` is the column of tile tx0 in v/m.

@njit(cache=True, nogil=True)
def winograd_input_row(xp, n, c, ty, tx0, tx1, v, vc, col, t):
    """F(2x2, 3x3): v[(a, b), vc, col + tx - tx0] = (B^T d B)[a, b] of the 4x4 tile
    d = xp[n, c, 2ty:2ty+4, 2tx:2tx+4] (xp zero-padded), B^T = [[1, 0, -1, 0], [0, 1, 1, 0],
    [0, -1, 1, 0], [0, 1, 0, -1]]; t is a (4, width) scratch."""
    r0 = xp[n, c, 2 * ty]
    r1 = xp[n, c, 2 * ty + 1]
    r2 = xp[n, c, 2 * ty + 2]
    r3 = xp[n, c, 2 * ty + 3]
    t0, t1, t2, t3 = t[0], t[1], t[2], t[3]
    for k in range(2 * tx0, 2 * tx1 + 2):  # B^T over the rows, the whole row segment at once
        t0[k] = r0[k] - r2[k]
        t1[k] = r1[k] + r2[k]
        t2[k] = r2[k] - r1[k]
        t3[k] = r1[k] - r3[k]
    count = tx1 - tx0
    for a in range(4):
        ta = t[a]
        o0 = v[4 * a, vc, col:col + count]
        o1 = v[4 * a + 1, vc, col:col + count]
        o2 = v[4 * a + 2, vc, col:col + count]
        o3 = v[4 * a + 3, vc, col:col + count]
        for i in range(count):  # B over the columns of each tile
            k = 2 * (tx0 + i)
            o0[i] = ta[k] - ta[k + 2]
            o1[i] = ta[k + 1] + ta[k + 2]
            o2[i] = ta[k + 2] - ta[k + 1]
            o3[i] = ta[k + 1] - ta[k + 3]


@njit(cache=True, nogil=True, inline="always")
def _edge_pairs(x, n, c, source, base, even, odd, r, first, last):
    """even/odd[r, j] for pairs j in [first, last) at a plane edge: plane row ``source``'s columns
    base + 2j and base + 2j + 1, zero outside the plane."""
    width = x.shape[3]
    zero = np.float32(0)
    for j in range(first, last):
        s0 = base + 2 * j
        even[r, j] = x[n, c, source, s0] if 0 <= s0 < width else zero
        odd[r, j] = x[n, c, source, s0 + 1] if 0 <= s0 + 1 < width else zero


@njit(cache=True, nogil=True)
def winograd_input_segment(x, n, first_c, last_c, row, col, pt, pl, count, v, vcol, even, odd):
    """F(2x2, 3x3) input transform of ``count`` consecutive tiles of one tile row in the planes
    x[n, first_c:last_c], zero-padded by pt rows on top and pl columns on the left: the tile at
    (row, col + 2i) of plane c goes to v[:, c, vcol + i]. The same operations in the same order as
    fill_patch then winograd_input_row (the same bits), but the patch's even and odd columns are
    kept apart (even[r, j] = patch[r, 2j], odd[r, j] = patch[r, 2j + 1]), so the transform over a tile's
    columns reads both at unit stride, and it indexes the arrays directly and loops over the
    channels itself (no views, one call per segment: ~30 array views per channel cost more than
    the arithmetic of its 16 tiles). even, odd: (4, >= count + 1) scratch."""
    height, width = x.shape[2], x.shape[3]
    half = count + 1
    zero = np.float32(0)
    # patch column 2j is plane column col + 2j - pl: both columns of pair j inside the plane for j in [lo, hi)
    lo = min(half, max(0, (pl - col + 1) // 2))
    hi = max(lo, min(half, (width + pl - col) // 2))
    base = col - pl
    for c in range(first_c, last_c):
        for r in range(4):
            source = row + r - pt
            if source < 0 or source >= height:
                for j in range(half):
                    even[r, j] = zero
                    odd[r, j] = zero
                continue
            _edge_pairs(x, n, c, source, base, even, odd, r, 0, lo)
            for j in range(lo, hi):
                even[r, j] = x[n, c, source, base + 2 * j]
                odd[r, j] = x[n, c, source, base + 2 * j + 1]
            _edge_pairs(x, n, c, source, base, even, odd, r, hi, half)
        for j in range(half):  # B^T over the rows, in place
            a0, a1, a2, a3 = even[0, j], even[1, j], even[2, j], even[3, j]
            even[0, j] = a0 - a2
            even[1, j] = a1 + a2
            even[2, j] = a2 - a1
            even[3, j] = a1 - a3
            a0, a1, a2, a3 = odd[0, j], odd[1, j], odd[2, j], odd[3, j]
            odd[0, j] = a0 - a2
            odd[1, j] = a1 + a2
            odd[2, j] = a2 - a1
            odd[3, j] = a1 - a3
        for a in range(4):
            p = 4 * a
            for i in range(count):  # B over the columns of each tile: patch columns 2i .. 2i + 3
                v[p, c, vcol + i] = even[a, i] - even[a, i + 1]
                v[p + 1, c, vcol + i] = odd[a, i] + even[a, i + 1]
                v[p + 2, c, vcol + i] = even[a, i + 1] - odd[a, i]
                v[p + 3, c, vcol + i] = odd[a, i] - odd[a, i + 1]


@njit(cache=True, nogil=True)
def winograd_output_row(m, y, n, o, ty, tx0, tx1, col):
    """F(2x2, 3x3): y[n, o, 2ty:2ty+2, 2tx:2tx+2] = A^T M A of the 16 products m[:, o, col + tx - tx0],
    A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]."""
    count = tx1 - tx0
    top = y[n, o, 2 * ty]
    bottom = y[n, o, 2 * ty + 1]
    # contiguous slices (one per product) so that the loop over tiles vectorizes
    m0 = m[0, o, col:col + count]
    m1 = m[1, o, col:col + count]
    m2 = m[2, o, col:col + count]
    m3 = m[3, o, col:col + count]
    m4 = m[4, o, col:col + count]
    m5 = m[5, o, col:col + count]
    m6 = m[6, o, col:col + count]
    m7 = m[7, o, col:col + count]
    m8 = m[8, o, col:col + count]
    m9 = m[9, o, col:col + count]
    m10 = m[10, o, col:col + count]
    m11 = m[11, o, col:col + count]
    m12 = m[12, o, col:col + count]
    m13 = m[13, o, col:col + count]
    m14 = m[14, o, col:col + count]
    m15 = m[15, o, col:col + count]
    for i in range(count):
        p00 = m0[i] + m4[i] + m8[i]
        p01 = m1[i] + m5[i] + m9[i]
        p02 = m2[i] + m6[i] + m10[i]
        p03 = m3[i] + m7[i] + m11[i]
        p10 = m4[i] - m8[i] - m12[i]
        p11 = m5[i] - m9[i] - m13[i]
        p12 = m6[i] - m10[i] - m14[i]
        p13 = m7[i] - m11[i] - m15[i]
        k = 2 * (tx0 + i)
        top[k] = p00 + p01 + p02
        top[k + 1] = p01 - p02 - p03
        bottom[k] = p10 + p11 + p12
        bottom[k + 1] = p11 - p12 - p13


@njit(cache=True, nogil=True)
def winograd_output_segment(m, y, n, first_out, last_out, ty, tx0, tx1, col):
    """winograd_output_row for the output channels [first_out, last_out) in one call, indexing m and
    y directly (the row form makes 18 array views per channel): the same operations in the same
    order, so the same bits."""
    count = tx1 - tx0
    top_row = 2 * ty
    for o in range(first_out, last_out):
        for i in range(count):
            c = col + i
            p00 = m[0, o, c] + m[4, o, c] + m[8, o, c]
            p01 = m[1, o, c] + m[5, o, c] + m[9, o, c]
            p02 = m[2, o, c] + m[6, o, c] + m[10, o, c]
            p03 = m[3, o, c] + m[7, o, c] + m[11, o, c]
            p10 = m[4, o, c] - m[8, o, c] - m[12, o, c]
            p11 = m[5, o, c] - m[9, o, c] - m[13, o, c]
            p12 = m[6, o, c] - m[10, o, c] - m[14, o, c]
            p13 = m[7, o, c] - m[11, o, c] - m[15, o, c]
            k = 2 * (tx0 + i)
            y[n, o, top_row, k] = p00 + p01 + p02
            y[n, o, top_row, k + 1] = p01 - p02 - p03
            y[n, o, top_row + 1, k] = p10 + p11 + p12
            y[n, o, top_row + 1, k + 1] = p11 - p12 - p13


@njit(cache=True, nogil=True)
def winograd43_input_row(xp, n, c, ty, tx0, tx1, v, vc, col, t, consts):
    """F(4x4, 3x3): v[(a, b), vc, col + tx - tx0] = (B^T d B)[a, b] of the 6x6 tile
    d = xp[n, c, 4ty:4ty+6, 4tx:4tx+6], B^T = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0],
    [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]];
    t is a (6, width) scratch, consts the multipliers 2, 4, 5 in the working dtype."""
    two, four, five = consts[0], consts[1], consts[2]
    r0 = xp[n, c, 4 * ty]
    r1 = xp[n, c, 4 * ty + 1]
    r2 = xp[n, c, 4 * ty + 2]
    r3 = xp[n, c, 4 * ty + 3]
    r4 = xp[n, c, 4 * ty + 4]
    r5 = xp[n, c, 4 * ty + 5]
    t0, t1, t2, t3, t4, t5 = t[0], t[1], t[2], t[3], t[4], t[5]
    for k in range(4 * tx0, 4 * tx1 + 2):  # B^T over the rows, the whole row segment at once
        p = r4[k] - r2[k]
        q = r3[k] - r1[k]
        t0[k] = four * r0[k] - five * r2[k] + r4[k]
        t1[k] = r3[k] + r4[k] - four * (r1[k] + r2[k])
        t2[k] = r4[k] - r3[k] + four * (r1[k] - r2[k])
        t3[k] = p + two * q
        t4[k] = p - two * q
        t5[k] = four * r1[k] - five * r3[k] + r5[k]
    count = tx1 - tx0
    for a in range(6):
        ta = t[a]
        o0 = v[6 * a, vc, col:col + count]
        o1 = v[6 * a + 1, vc, col:col + count]
        o2 = v[6 * a + 2, vc, col:col + count]
        o3 = v[6 * a + 3, vc, col:col + count]
        o4 = v[6 * a + 4, vc, col:col + count]
        o5 = v[6 * a + 5, vc, col:col + count]
        for i in range(count):  # B over the columns of each tile
            k = 4 * (tx0 + i)
            d0, d1, d2, d3, d4, d5 = ta[k], ta[k + 1], ta[k + 2], ta[k + 3], ta[k + 4], ta[k + 5]
            p = d4 - d2
            q = d3 - d1
            o0[i] = four * d0 - five * d2 + d4
            o1[i] = d3 + d4 - four * (d1 + d2)
            o2[i] = d4 - d3 + four * (d1 - d2)
            o3[i] = p + two * q
            o4[i] = p - two * q
            o5[i] = four * d1 - five * d3 + d5


@njit(cache=True, nogil=True)
def winograd43_output_row(m, y, n, o, ty, tx0, tx1, col, s, consts):
    """F(4x4, 3x3): y[n, o, 4ty:4ty+4, 4tx:4tx+4] = A^T M A of the 36 products m[:, o, col + tx - tx0],
    A^T = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]];
    s is a (4, 6, tiles) scratch, consts the multipliers 2, 4, 5, 8 in the working dtype."""
    two, four, eight = consts[0], consts[1], consts[3]
    count = tx1 - tx0
    for b in range(6):  # A^T over the tile rows, for each tile column b
        m0 = m[b, o, col:col + count]
        m1 = m[6 + b, o, col:col + count]
        m2 = m[12 + b, o, col:col + count]
        m3 = m[18 + b, o, col:col + count]
        m4 = m[24 + b, o, col:col + count]
        m5 = m[30 + b, o, col:col + count]
        s0, s1, s2, s3 = s[0, b], s[1, b], s[2, b], s[3, b]
        for i in range(count):
            plus12 = m1[i] + m2[i]
            minus12 = m1[i] - m2[i]
            plus34 = m3[i] + m4[i]
            minus34 = m3[i] - m4[i]
            s0[i] = m0[i] + plus12 + plus34
            s1[i] = minus12 + two * minus34
            s2[i] = plus12 + four * plus34
            s3[i] = minus12 + eight * minus34 + m5[i]
    for r in range(4):  # A over the tile columns
        row = y[n, o, 4 * ty + r]
        e0, e1, e2, e3, e4, e5 = s[r, 0], s[r, 1], s[r, 2], s[r, 3], s[r, 4], s[r, 5]
        for i in range(count):
            plus12 = e1[i] + e2[i]
            minus12 = e1[i] - e2[i]
            plus34 = e3[i] + e4[i]
            minus34 = e3[i] - e4[i]
            k = 4 * (tx0 + i)
            row[k] = e0[i] + plus12 + plus34
            row[k + 1] = minus12 + two * minus34
            row[k + 2] = plus12 + four * plus34
            row[k + 3] = minus12 + eight * minus34 + e5[i]


# Plane-wise passes: all tiles of the (n, c) input planes / (n, o) output planes in [start, stop).
# v/m hold every tile: v[(a, b), c, (n, ty, tx)].

@njit(cache=True, nogil=True)
def winograd_input(xp, v, th, tw, start, stop):
    channels = xp.shape[1]
    t = np.empty((4, xp.shape[3]), xp.dtype)
    for plane in range(start, stop):
        n = plane // channels
        c = plane % channels
        for ty in range(th):
            winograd_input_row(xp, n, c, ty, 0, tw, v, c, (n * th + ty) * tw, t)


@njit(cache=True, nogil=True)
def winograd_output(m, y, th, tw, start, stop):
    outs = m.shape[1]
    for plane in range(start, stop):
        n = plane // outs
        o = plane % outs
        for ty in range(th):
            winograd_output_row(m, y, n, o, ty, 0, tw, (n * th + ty) * tw)


@njit(cache=True, nogil=True)
def winograd43_input(xp, v, th, tw, consts, start, stop):
    channels = xp.shape[1]
    t = np.empty((6, xp.shape[3]), xp.dtype)
    for plane in range(start, stop):
        n = plane // channels
        c = plane % channels
        for ty in range(th):
            winograd43_input_row(xp, n, c, ty, 0, tw, v, c, (n * th + ty) * tw, t, consts)


@njit(cache=True, nogil=True)
def winograd43_output(m, y, th, tw, consts, start, stop):
    outs = m.shape[1]
    s = np.empty((4, 6, tw), m.dtype)
    for plane in range(start, stop):
        n = plane // outs
        o = plane % outs
        for ty in range(th):
            winograd43_output_row(m, y, n, o, ty, 0, tw, (n * th + ty) * tw, s, consts)


@njit(cache=True, nogil=True, parallel=True)
def winograd_input_blocks(xp, v, th, tw, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            winograd_input(xp, v, th, tw, start, stop)


@njit(cache=True, nogil=True, parallel=True)
def winograd_output_blocks(m, y, th, tw, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            winograd_output(m, y, th, tw, start, stop)


@njit(cache=True, nogil=True, parallel=True)
def winograd43_input_blocks(xp, v, th, tw, consts, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            winograd43_input(xp, v, th, tw, consts, start, stop)


@njit(cache=True, nogil=True, parallel=True)
def winograd43_output_blocks(m, y, th, tw, consts, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            winograd43_output(m, y, th, tw, consts, start, stop)


# Tile-block passes: blocks of tiles go through the input transform, the products (_microkernel,
# weights prepacked in panels of _microkernel.ROWS output channels) and the output transform while
# their transformed values (v, m: positions x channels x block width) stay in the core's caches. A block
# is ``width`` tiles (a multiple of the microkernel's 16 columns) of the tiles (n, ty, tx) in
# order; a unit of work is a block's output channels or a part of them (tile_unit), and the
# loops take units [start, stop). y is the output padded to whole tiles.

@njit(cache=True, nogil=True)
def tile_segment(tile, last, th, tw):
    """The tiles from ``tile`` (before ``last``) that share its image and tile row: (n, ty, tx0, tx1)."""
    n = tile // (th * tw)
    rest = tile % (th * tw)
    ty = rest // tw
    tx0 = rest % tw
    return n, ty, tx0, min(tw, tx0 + last - tile)


@njit(cache=True, nogil=True)
def tile_block_buffers(positions, channels, rows, width):
    """v (positions, channels, width) and m (positions, rows, width) for one block of tiles. Each
    position's matrix is one row longer than needed: the transforms write all positions of a
    tile at once, and matrices a multiple of 4 KiB apart would fall on the same L1 cache sets.
    v starts zeroed: the columns after a last, partial block are multiplied too (then dropped)."""
    v = np.zeros((positions, channels + 1, width), np.float32)[:, :channels]
    m = np.empty((positions, rows + 1, width), np.float32)[:, :rows]
    return v, m


#: Channels per partial sum of the Winograd products: each output sums its channels in chunks of
#: this many (one ordered FMA chain each), then adds the chunk sums in order. A single chain over
#: 2048 channels (FCN's head) made the whole model 1.8x onnxruntime's error against float64
#: (F(2x2, 3x3)); onnxruntime's own convolutions sum per input channel block the same way.
CHANNEL_CHUNK = 32


@njit(cache=True, nogil=True)
def winograd_block_products(up, v, m, columns, first_panel, last_panel):
    """m[p, :, :columns] = U[p] @ v[p, :, :columns] for each tile position p, for the output channels
    of panels [first_panel, last_panel); up[p, q] is the (C, R) panel of output channels Rq..Rq+R-1
    (R = _microkernel.ROWS). Each panel is read once per block, for all its columns; sums run in
    chunks of CHANNEL_CHUNK."""
    positions, channels, rows = up.shape[0], up.shape[2], up.shape[3]
    width = v.shape[2]
    for p in range(positions):
        b = v[p].ctypes.data
        for q in range(first_panel, last_panel):
            a = up[p, q].ctypes.data
            c = m[p, rows * q].ctypes.data
            for j in range(0, columns, COLUMNS):
                panel_product(a, b + 4 * j, width, c + 4 * j, width, min(channels, CHANNEL_CHUNK))
                for k0 in range(CHANNEL_CHUNK, channels, CHANNEL_CHUNK):
                    panel_product_add(a + 4 * rows * k0, b + 4 * (k0 * width + j), width, c + 4 * j, width,
                                      min(channels - k0, CHANNEL_CHUNK))


@njit(cache=True, nogil=True)
def winograd_chunked_products(u, v, m, chunk, start, stop):
    """m[p] = u[p] @ v[p] for the tile positions [start, stop) (whole transformed arrays), summed in
    two levels like the tile blocks: one OpenBLAS product per ``chunk`` channels, the chunk sums
    added in order (see _winograd.BLAS_CHANNEL_CHUNK). A single call over all channels chains 256
    of them on this machine's OpenBLAS: 2x the RMS error against float64 on 512-2048 channels."""
    channels = u.shape[2]
    part = np.empty((m.shape[1], m.shape[2]), m.dtype)
    for p in range(start, stop):
        total = m[p]
        gemm_into(u[p, :, :chunk], v[p, :chunk], total)
        for k0 in range(chunk, channels, chunk):
            k1 = min(channels, k0 + chunk)
            gemm_into(u[p, :, k0:k1], v[p, k0:k1], part)
            for i in range(total.shape[0]):
                row = total[i]
                add = part[i]
                for j in range(row.shape[0]):
                    row[j] += add[j]


@njit(cache=True, nogil=True, parallel=True)
def winograd_chunked_products_blocks(u, v, m, chunk, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            winograd_chunked_products(u, v, m, chunk, start, stop)


@njit(cache=True, nogil=True)
def tile_unit(unit, splits, panels, rows, outs):
    """Block and output channels of a unit of work: unit = block * splits + part, and part
    ``part`` of ``splits`` near-equal ranges of the output channel panels (of ``rows`` channels)."""
    block = unit // splits
    first_panel, last_panel = block_range(panels, splits, unit % splits)
    return block, first_panel, last_panel, rows * first_panel, min(outs, rows * last_panel)


@njit(cache=True, nogil=True)
def fill_patch(x, n, c, row, col, pt, pl, patch, cols):
    """patch[0, 0, :, :cols] = rows row.. and columns col.. of the plane x[n, c] zero-padded by pt
    rows on top and pl columns on the left (and zeros past its bottom and right edges): a tile
    row segment's input, so the input transforms need no padded copy of the whole input."""
    height, width = x.shape[2], x.shape[3]
    first = min(cols, max(0, pl - col))
    last = max(first, min(cols, width + pl - col))
    for i in range(patch.shape[2]):
        out = patch[0, 0, i, :cols]
        source = row + i - pt
        if source < 0 or source >= height:
            padded_row(out, x[n, c, 0], 0, 0, 1, 0)
        else:
            padded_row(out, x[n, c, source], first, last, 1, col - pl)


@njit(cache=True, nogil=True)
def winograd_tiles(x, up, y, th, tw, edge, consts, pt, pl, width, splits, start, stop):
    """F(edge x edge, 3x3), edge 2 or 4, of x (NCHW, padded by pt/pl on top/left) for the units
    [start, stop) of blocks of ``width`` tiles, each block's output channels in ``splits`` parts
    (float32); consts: the F(4x4, 3x3) transforms' multipliers."""
    channels = x.shape[1]
    tiles = x.shape[0] * th * tw
    side = edge + 2
    v, m = tile_block_buffers(side * side, channels, up.shape[1] * up.shape[3], width)
    span = edge * min(width, tw) + 2
    t = np.empty((side, span), np.float32)
    patch = np.empty((1, 1, side, span), np.float32)
    s = np.empty((4, 6, min(width, tw)), np.float32)
    even = np.empty((4, min(width, tw) + 1), np.float32)
    odd = np.empty((4, min(width, tw) + 1), np.float32)
    done = -1  # the block whose input transform v holds
    for unit in range(start, stop):
        block, first_panel, last_panel, first_out, last_out = tile_unit(unit, splits, up.shape[1], up.shape[3],
                                                                        y.shape[1])
        first = block * width
        last = min(tiles, first + width)
        tile = first
        while tile < last and block != done:
            n, ty, tx0, tx1 = tile_segment(tile, last, th, tw)
            if edge == 2:
                winograd_input_segment(x, n, 0, channels, 2 * ty, 2 * tx0, pt, pl, tx1 - tx0, v, tile - first,
                                       even, odd)
            else:
                for c in range(channels):
                    fill_patch(x, n, c, edge * ty, edge * tx0, pt, pl, patch, edge * (tx1 - tx0) + 2)
                    winograd43_input_row(patch, 0, 0, 0, 0, tx1 - tx0, v, c, tile - first, t, consts)
            tile += tx1 - tx0
        done = block
        winograd_block_products(up, v, m, last - first, first_panel, last_panel)
        tile = first
        while tile < last:
            n, ty, tx0, tx1 = tile_segment(tile, last, th, tw)
            if edge == 2:
                winograd_output_segment(m, y, n, first_out, last_out, ty, tx0, tx1, tile - first)
            else:
                for o in range(first_out, last_out):
                    winograd43_output_row(m, y, n, o, ty, tx0, tx1, tile - first, s, consts)
            tile += tx1 - tx0


@njit(cache=True, nogil=True, parallel=True)
def winograd_tiles_blocks(x, up, y, th, tw, edge, consts, pt, pl, width, splits, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            winograd_tiles(x, up, y, th, tw, edge, consts, pt, pl, width, splits, start, stop)
