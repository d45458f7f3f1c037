"""numba loops of the fast fixed-point kernels (fast_kernels.py): input packing for the VNNI tile
kernel, the tile drivers, the int32/int64 direct convolution and the requantization.

Every loop computes docs/numerics.md's integers exactly: 8-bit-weight accumulators are int32 stored
into int32 arrays (numba adds in int64 and the store truncates, which is the wrap modulo 2^32 of
§7.2), 16-bit ones int64. Each loop works on a block ``[start, stop)`` of independent work items and
has a ``*_blocks`` driver running ``blocks`` blocks in one numba parallel region (see
emulator/fast/_parallel.run_blocks), so the bits do not depend on the thread count. Compiled on first
use and cached on disk (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ._vnni import PIXELS, ROWS, vnni_tile


@njit(cache=True, nogil=True)
def block_range(count, blocks, i):
    step = (count + blocks - 1) // blocks
    start = min(count, i * step)
    return start, min(count, start + step)


@njit(cache=True, nogil=True, inline="always")
def requantize(v, b, lo, hi, wrap32, two_step, lo16, hi16):
    """One accumulator value to its output (§7.1 roundSat, §7.2 wrap, §7.4 16-bit to 8-bit)."""
    if wrap32:
        v = ((v + 2147483648) & 0xFFFFFFFF) - 2147483648
    if two_step:
        if b >= 8:
            s = b - 8
            if s > 0:
                v = (v >> s) + ((v >> (s - 1)) & 1)
        else:
            if v > 131072:
                v = 131072
            elif v < -131072:
                v = -131072
            v = v << (8 - b)
        if v < lo16:
            v = lo16
        elif v > hi16:
            v = hi16
        v = v >> 8
    elif b > 0:
        v = (v >> b) + ((v >> (b - 1)) & 1)
    if v < lo:
        v = lo
    elif v > hi:
        v = hi
    return v


# --- VNNI: packing and tiles -------------------------------------------------------------------

@njit(cache=True, nogil=True)
def pack_vnni_input(x, xb, groups, cg, c4, sh, sw, pt, pl, hs, ws, shift, start, stop):
    """xb[n, g, c4, py, px, ys, xs, lane] = byte of x[n, g*cg + 4*c4 + lane, ys*sh + py - pt, xs*sw + px - pl]
    xor ``shift`` (128 for int8: the +128 that makes it unsigned), ``shift`` itself in the padding
    (the zero point 0, shifted). For the planes (n, c) in [start, stop); channel lanes past cg stay as
    they are (their weights are 0)."""
    n_channels, height, width = x.shape[1], x.shape[2], x.shape[3]
    phases = sh * sw
    plane = hs * ws * 4
    pad = np.uint8(shift)
    for item in range(start, stop):
        n = item // n_channels
        c = item % n_channels
        g = c // cg
        cc = c % cg
        base = (((n * groups + g) * c4 + cc // 4) * phases) * plane + cc % 4
        for py in range(sh):
            for px in range(sw):
                dst = base + (py * sw + px) * plane
                for ys in range(hs):
                    y = ys * sh + py - pt
                    row = dst + ys * ws * 4
                    if y < 0 or y >= height:
                        for xs in range(ws):
                            xb[row + 4 * xs] = pad
                        continue
                    src = x[n, c, y]
                    for xs in range(ws):
                        xc = xs * sw + px - pl
                        if xc >= 0 and xc < width:
                            xb[row + 4 * xs] = src[xc] ^ pad
                        else:
                            xb[row + 4 * xs] = pad


@njit(cache=True, nogil=True, parallel=True)
def pack_vnni_input_blocks(x, xb, groups, cg, c4, sh, sw, pt, pl, hs, ws, shift, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            pack_vnni_input(x, xb, groups, cg, c4, sh, sw, pt, pl, hs, ws, shift, start, stop)


@njit(cache=True, nogil=True)
def conv_vnni(xb, wp, offsets, base, rb, out, groups, image_bytes, ws, lo, hi, start, stop):
    """out[n, o, oy, ox] for the work items [start, stop): item = ((n*groups + g)*panels + panel)*blocks + b,
    the tile of output channels ``panel`` of group ``g`` and flat output pixels b*PIXELS.. (pixel p is
    (p // ws, p % ws); columns past the output width are computed and dropped). ``base[o]`` is the
    bias minus the +128 compensation, int32; the sum wraps modulo 2^32 (§7.2)."""
    n_out, oh, ow = out.shape[1], out.shape[2], out.shape[3]
    panels, steps = wp.shape[1], wp.shape[2]
    og = n_out // groups
    flat = oh * ws
    blocks = (flat + PIXELS - 1) // PIXELS
    tile = np.empty((ROWS, PIXELS), np.int32)
    x0 = xb.ctypes.data
    off = offsets.ctypes.data
    for item in range(start, stop):
        b = item % blocks
        rest = item // blocks
        panel = rest % panels
        rest = rest // panels
        g = rest % groups
        n = rest // groups
        p0 = b * PIXELS
        vnni_tile(wp[g, panel].ctypes.data, x0 + (n * groups + g) * image_bytes + 4 * p0, off, steps,
                  tile.ctypes.data, PIXELS)
        end = min(p0 + PIXELS, flat)
        for i in range(ROWS):
            oc = panel * ROWS + i
            if oc >= og:
                break
            o = g * og + oc
            bias = np.int64(base[o])
            shift = rb[o]
            half = shift - 1 if shift > 0 else 0
            dst = out[n, o]
            # the tile's pixels, one output row segment at a time (no division per pixel)
            p = p0
            oy = p0 // ws
            ox0 = p0 - oy * ws
            while p < end:
                seg = min(end - p, ws - ox0)
                valid = min(seg, ow - ox0)
                row = dst[oy]
                j0 = p - p0
                if shift > 0:
                    for t in range(valid):
                        v = np.int64(tile[i, j0 + t]) + bias
                        v = ((v + 2147483648) & 0xFFFFFFFF) - 2147483648
                        v = (v >> shift) + ((v >> half) & 1)
                        row[ox0 + t] = min(max(v, lo), hi)
                else:
                    for t in range(valid):
                        v = np.int64(tile[i, j0 + t]) + bias
                        v = ((v + 2147483648) & 0xFFFFFFFF) - 2147483648
                        row[ox0 + t] = min(max(v, lo), hi)
                p += seg
                oy += 1
                ox0 = 0


@njit(cache=True, nogil=True, parallel=True)
def conv_vnni_blocks(xb, wp, offsets, base, rb, out, groups, image_bytes, ws, lo, hi, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            conv_vnni(xb, wp, offsets, base, rb, out, groups, image_bytes, ws, lo, hi, start, stop)


# --- direct convolution: int32 (8-bit weights) or int64 (16-bit) accumulators ------------------

@njit(cache=True, nogil=True)
def conv_direct(x, w, bias, rb, out, acc, sh, sw, dh, dw, pt, pl, groups, lo, hi, wrap32, two_step, lo16, hi16,
                start, stop):
    """out[n, o] for the planes (n, o) in [start, stop): the §8.1 sum tap by tap into ``acc`` (one
    plane: int32 wraps as it is stored, int64 is exact), from ``bias[o]``, then the requantization."""
    n_in, height, width = x.shape[1], x.shape[2], x.shape[3]
    n_out, oh, ow = out.shape[1], out.shape[2], out.shape[3]
    cg, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    og = n_out // groups
    for plane in range(start, stop):
        n = plane // n_out
        o = plane % n_out
        g = o // og
        for k in range(oh * ow):
            acc[k] = bias[o]
        for c in range(cg):
            src = x[n, g * cg + c]
            for i in range(kh):
                for j in range(kw):
                    wv = w[o, c, i, j]
                    if wv == 0:
                        continue
                    off = j * dw - pl
                    first = 0 if off >= 0 else (-off + sw - 1) // sw
                    last = (width - 1 - off) // sw + 1 if width - 1 - off >= 0 else 0
                    if last > ow:
                        last = ow
                    if first >= last:
                        continue
                    for y in range(oh):
                        h = y * sh - pt + i * dh
                        if h < 0 or h >= height:
                            continue
                        row = src[h]
                        a0 = y * ow
                        for q in range(first, last):
                            acc[a0 + q] += row[q * sw + off] * wv
        dst = out[n, o]
        shift = rb[o]
        for y in range(oh):
            for q in range(ow):
                dst[y, q] = requantize(np.int64(acc[y * ow + q]), shift, lo, hi, wrap32, two_step, lo16, hi16)


@njit(cache=True, nogil=True)
def conv_direct_planes(x, w, bias, rb, out, sh, sw, dh, dw, pt, pl, groups, lo, hi, wrap32, two_step, lo16, hi16,
                       acc_proto, start, stop):
    acc = np.empty(out.shape[2] * out.shape[3], acc_proto.dtype)
    conv_direct(x, w, bias, rb, out, acc, sh, sw, dh, dw, pt, pl, groups, lo, hi, wrap32, two_step, lo16, hi16,
                start, stop)


@njit(cache=True, nogil=True, parallel=True)
def conv_direct_blocks(x, w, bias, rb, out, sh, sw, dh, dw, pt, pl, groups, lo, hi, wrap32, two_step, lo16, hi16,
                       acc_proto, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            conv_direct_planes(x, w, bias, rb, out, sh, sw, dh, dw, pt, pl, groups, lo, hi, wrap32, two_step,
                               lo16, hi16, acc_proto, start, stop)


# --- requantization of exact int64 accumulators (BLAS path) -------------------------------------

@njit(cache=True, nogil=True)
def requantize_rows(acc, bias, rb, out, lo, hi, wrap32, two_step, lo16, hi16, start, stop):
    """out[r, k] from the exact sums acc[r, k] (float64 holding integers) + bias[r % len(bias)] for
    rows r in [start, stop) (a row is one (n, channel) pair)."""
    channels = bias.shape[0]
    for r in range(start, stop):
        ch = r % channels
        b = bias[ch]
        shift = rb[ch]
        for k in range(acc.shape[1]):
            out[r, k] = requantize(np.int64(acc[r, k]) + b, shift, lo, hi, wrap32, two_step, lo16, hi16)


@njit(cache=True, nogil=True, parallel=True)
def requantize_rows_blocks(acc, bias, rb, out, lo, hi, wrap32, two_step, lo16, hi16, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            requantize_rows(acc, bias, rb, out, lo, hi, wrap32, two_step, lo16, hi16, start, stop)
