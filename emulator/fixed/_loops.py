"""numba loops of the fast fixed-point kernels (fast_kernels.py): input packing for the VNNI tile
kernel, the tile drivers, the int32/int64 direct convolution and the requantization.

Every loop computes docs/numerics.md's integers exactly: 8-bit-weight accumulators are int32 stored
into int32 arrays (numba adds in int64 and the store truncates, which is the wrap modulo 2^32 of
§7.2), 16-bit ones int64. Each loop works on a block ``[start, stop)`` of independent work items
(fast_kernels.py runs the blocks on the emulator's thread pool), so the bits do not depend on the
thread count. The loops release the GIL. Compiled on first use and cached on disk (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ._vnni import PIXELS, ROWS, vnni_tile


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
    """xb[n, g, q, py, px, ys, xs] (uint32 words) = the bytes of x[n, g*cg + 4q + lane, ys*sh + py - pt,
    xs*sw + px - pl] for lanes 0..3, each xor ``shift`` (128 for int8: the +128 that makes it unsigned),
    ``shift`` itself in the padding (the zero point 0, shifted). For the items (n, g, q) in [start, stop);
    lanes past cg are 0 (their weights are 0)."""
    height, width = x.shape[2], x.shape[3]
    phases = sh * sw
    plane = hs * ws
    pad = np.uint32(shift)
    pad_word = pad | (pad << 8) | (pad << 16) | (pad << 24)
    absent = np.full(width, shift, np.uint8)   # xor shift = 0
    for item in range(start, stop):
        q = item % c4
        g = (item // c4) % groups
        n = item // (c4 * groups)
        lanes = min(4, cg - 4 * q)
        c0 = g * cg + 4 * q
        base = item * phases * plane
        for py in range(sh):
            for px in range(sw):
                dst = base + (py * sw + px) * plane
                # the columns xs whose source column xs*sw + px - pl lies inside the image
                first = max(0, (pl - px + sw - 1) // sw)
                last = min(ws, (width - 1 + pl - px) // sw + 1) if width - 1 + pl - px >= 0 else 0
                if last < first:
                    last = first
                for ys in range(hs):
                    y = ys * sh + py - pt
                    row = dst + ys * ws
                    if y < 0 or y >= height:
                        for xs in range(ws):
                            xb[row + xs] = pad_word
                        continue
                    for xs in range(first):
                        xb[row + xs] = pad_word
                    for xs in range(last, ws):
                        xb[row + xs] = pad_word
                    r0 = x[n, c0, y]
                    r1 = x[n, c0 + 1, y] if lanes > 1 else absent
                    r2 = x[n, c0 + 2, y] if lanes > 2 else absent
                    r3 = x[n, c0 + 3, y] if lanes > 3 else absent
                    for xs in range(first, last):
                        xc = xs * sw + px - pl
                        xb[row + xs] = ((np.uint32(r0[xc]) ^ pad) | ((np.uint32(r1[xc]) ^ pad) << 8)
                                        | ((np.uint32(r2[xc]) ^ pad) << 16) | ((np.uint32(r3[xc]) ^ pad) << 24))



@njit(cache=True, nogil=True)
def requantize_plane(src, outf, at, oh, ow, ws, shift, lo, hi):
    """outf[at + oy*ow + ox] = roundSat(src[oy*ws + ox]) for ox < ow: one output plane from a flat
    int32 plane ``ws`` columns wide (the columns past ow are dropped)."""
    half = shift - 1 if shift > 0 else 0
    for oy in range(oh):
        # row slices: indices known >= 0, so LLVM vectorizes the loops
        row = src[oy * ws:oy * ws + ow]
        dst = outf[at + oy * ow:at + oy * ow + ow]
        if shift > 0:
            for ox in range(ow):
                v = np.int64(row[ox])
                dst[ox] = min(max((v >> shift) + ((v >> half) & 1), lo), hi)
        else:
            for ox in range(ow):
                dst[ox] = min(max(np.int64(row[ox]), lo), hi)


@njit(cache=True, nogil=True)
def conv_vnni(xb, wp, offsets, base, rb, out, scratch, groups, image_bytes, ws, lo, hi, start, stop):
    """out[n, o] for the work items [start, stop): item = (n*groups + g)*panels + panel, the ROWS output
    channels ``panel`` of group ``g``, all flat output pixels p = oy*ws + ox in tiles of PIXELS (the
    columns past the output width are computed and dropped). ``base[g, panel]`` holds the panel's
    biases minus the +128 compensation (int32), where the tile's sums start; they wrap modulo 2^32
    (§7.2). The tiles go to ``scratch`` (ROWS planes, in L2; one per block of items, allocated by the
    caller, reused), then each plane is requantized."""
    n_out, oh, ow = out.shape[1], out.shape[2], out.shape[3]
    panels, steps = wp.shape[1], wp.shape[2]
    og = n_out // groups
    blocks = (oh * ws + PIXELS - 1) // PIXELS
    width = blocks * PIXELS
    outf = out.reshape(-1)
    x0 = xb.ctypes.data
    off = offsets.ctypes.data
    for item in range(start, stop):
        panel = item % panels
        g = (item // panels) % groups
        n = item // (panels * groups)
        image = x0 + (n * groups + g) * image_bytes
        w_addr = wp[g, panel].ctypes.data
        b_addr = base[g, panel].ctypes.data
        c0 = scratch.ctypes.data
        for b in range(blocks):
            vnni_tile(w_addr, image + 4 * b * PIXELS, off, steps, b_addr, c0 + 4 * b * PIXELS, width)
        for i in range(min(ROWS, og - panel * ROWS)):
            o = g * og + panel * ROWS + i
            requantize_plane(scratch[i], outf, (n * n_out + o) * oh * ow, oh, ow, ws, rb[o], lo, hi)



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



# --- element-wise sum and max pool ------------------------------------------------------------

@njit(cache=True, nogil=True)
def eltwise_sum2(a, b, sa, sb, shift, lo, hi, out, start, stop):
    """out[k] = roundSat(wrap32(a[k] sa + b[k] sb), shift) for flat k in [start, stop) (§8.5; the exact
    int64 sum wrapped once equals wrapping each product and the sum)."""
    half = shift - 1 if shift > 0 else 0
    av = a[start:stop]
    bv = b[start:stop]
    dst = out[start:stop]
    for k in range(stop - start):
        v = np.int64(av[k]) * sa + np.int64(bv[k]) * sb
        v = ((v + 2147483648) & 0xFFFFFFFF) - 2147483648
        if shift > 0:
            v = (v >> shift) + ((v >> half) & 1)
        dst[k] = min(max(v, lo), hi)



@njit(cache=True, nogil=True)
def eltwise_prod2_rows(a, b, shift, wrap32, lo, hi, out, start, stop):
    """out = roundSat(wrap(a b), shift) on 6-D views of one shape (a and b broadcast, zero strides
    allowed), for the rows [start, stop) of all axes but the last, flattened in C order (§8.5)."""
    s1, s2, s3, s4 = out.shape[1], out.shape[2], out.shape[3], out.shape[4]
    half = shift - 1 if shift > 0 else 0
    for r in range(start, stop):
        t = r
        i4 = t % s4
        t //= s4
        i3 = t % s3
        t //= s3
        i2 = t % s2
        t //= s2
        i1 = t % s1
        i0 = t // s1
        ar = a[i0, i1, i2, i3, i4]
        br = b[i0, i1, i2, i3, i4]
        dst = out[i0, i1, i2, i3, i4]
        for k in range(dst.shape[0]):
            v = np.int64(ar[k]) * np.int64(br[k])
            if wrap32:
                v = ((v + 2147483648) & 0xFFFFFFFF) - 2147483648
            if shift > 0:
                v = (v >> shift) + ((v >> half) & 1)
            dst[k] = min(max(v, lo), hi)


@njit(cache=True, nogil=True)
def max_pool_planes(x, out, kh, kw, sh, sw, pt, pl, start, stop):
    """out[n, c] = the largest in-image pixel of each window (padding takes no part, §8.6) for the
    planes (n, c) in [start, stop); every window holds an image pixel (pads < kernel)."""
    channels, height, width = x.shape[1], x.shape[2], x.shape[3]
    oh, ow = out.shape[2], out.shape[3]
    for plane in range(start, stop):
        n = plane // channels
        c = plane % channels
        src = x[n, c]
        dst = out[n, c]
        for y in range(oh):
            y0 = max(0, y * sh - pt)
            y1 = min(height, y * sh - pt + kh)
            row = dst[y]
            for q in range(ow):
                x0 = max(0, q * sw - pl)
                x1 = min(width, q * sw - pl + kw)
                m = src[y0, x0]
                for yy in range(y0, y1):
                    line = src[yy]
                    for xx in range(x0, x1):
                        if line[xx] > m:
                            m = line[xx]
                row[q] = m

