"""An independent implementation of docs/numerics.md, for comparison with tidlx's rule functions.

Written from the document alone, in plain Python integers and loops (numpy only holds arrays, and its
float32 scalars give §8.9's single-precision operations). It imports nothing of tidlx. Where the
document gives two equal forms, this file takes the other one: roundSat adds 2^(b-1) to an unbounded
Python integer, powers of 2 are found by doubling exact Fractions, the int32 wrap is a modulo, the
global pool's multiplier is computed from the float formula.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np

# ---- §1, §7 ---------------------------------------------------------------------------------


def bounds(bits, signed):
    return (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)


def dtype(bits, signed):
    return np.dtype(("int" if signed else "uint") + str(bits))


def wrap(v, bits):
    """§7.2: two's complement wrap of an exact integer to ``bits``."""
    m = 2 ** bits
    v %= m
    return v - m if v >= m // 2 else v


def clamp(v, lo, hi):
    return lo if v < lo else hi if v > hi else v


def round_sat(v, b, lo, hi):
    """§7.1 in its first form: add 2^(b-1), shift right by b (Python's >> floors)."""
    if b > 0:
        v = (v + (1 << (b - 1))) >> b
    return clamp(v, lo, hi)


def requantize(acc, rb, weight_bits, out_bits, out_signed, lo, hi):
    """§7.1, or §7.4 for 16-bit weights with an 8-bit output."""
    if weight_bits == 16 and out_bits == 8:
        lo16, hi16 = bounds(16, out_signed)
        t = round_sat(acc, rb - 8, lo16, hi16) if rb >= 8 else clamp(acc * 2 ** (8 - rb), lo16, hi16)
        return clamp(t >> 8, lo, hi)
    return round_sat(acc, rb, lo, hi)


def acc_bits_for_weights(weight_bits):
    return 32 if weight_bits == 8 else 64


def _rb(round_bits, o):
    return round_bits[o] if isinstance(round_bits, (list, tuple)) else round_bits


# ---- §8.1-8.4 -------------------------------------------------------------------------------


def convolution(x, w, bias_a, bias_b, round_bits, weight_bits, out_bits, out_signed, lo, hi, strides, pads,
                dilations, groups):
    x, w = x.tolist(), w.tolist()
    n_, c_ = len(x), len(x[0])
    h, wd = len(x[0][0]), len(x[0][0][0])
    o_, cg, kh, kw = len(w), len(w[0]), len(w[0][0]), len(w[0][0][0])
    sh, sw = strides
    dh, dw = dilations
    pt, pl, pb, pr = pads
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    og = o_ // groups
    out = np.zeros((n_, o_, oh, ow), np.int64)
    for n in range(n_):
        for o in range(o_):
            k = o // og
            for y in range(oh):
                for xx in range(ow):
                    acc = int(bias_a[o]) * int(bias_b[o])
                    for c in range(cg):
                        for i in range(kh):
                            for j in range(kw):
                                yy, xs = y * sh + i * dh - pt, xx * sw + j * dw - pl
                                if 0 <= yy < h and 0 <= xs < wd:   # outside: the zero point 0
                                    acc += x[n][k * cg + c][yy][xs] * w[o][c][i][j]
                    acc = wrap(acc, acc_bits_for_weights(weight_bits))
                    out[n, o, y, xx] = requantize(acc, _rb(round_bits, o), weight_bits, out_bits, out_signed, lo, hi)
    return out


def deconvolution(x, w, bias_a, bias_b, round_bits, weight_bits, out_bits, out_signed, lo, hi, strides, pads,
                  dilations, groups):
    x, w = x.tolist(), w.tolist()
    n_, c_, h, wd = len(x), len(x[0]), len(x[0][0]), len(x[0][0][0])
    og, kh, kw = len(w[0]), len(w[0][0]), len(w[0][0][0])
    sh, sw = strides
    dh, dw = dilations
    pt, pl, pb, pr = pads
    cg = c_ // groups
    oh = (h - 1) * sh - pt - pb + dh * (kh - 1) + 1
    ow = (wd - 1) * sw - pl - pr + dw * (kw - 1) + 1
    o_ = og * groups
    acc = [[[[int(bias_a[o]) * int(bias_b[o]) for _ in range(ow)] for _ in range(oh)] for o in range(o_)]
           for _ in range(n_)]
    for n in range(n_):
        for c in range(c_):
            k = c // cg
            for iy in range(h):
                for ix in range(wd):
                    for o in range(og):
                        for i in range(kh):
                            for j in range(kw):
                                y, xx = iy * sh - pt + i * dh, ix * sw - pl + j * dw
                                if 0 <= y < oh and 0 <= xx < ow:
                                    acc[n][k * og + o][y][xx] += x[n][c][iy][ix] * w[c][o][i][j]
    out = np.zeros((n_, o_, oh, ow), np.int64)
    for n in range(n_):
        for o in range(o_):
            for y in range(oh):
                for xx in range(ow):
                    a = wrap(acc[n][o][y][xx], acc_bits_for_weights(weight_bits))
                    out[n, o, y, xx] = requantize(a, _rb(round_bits, o), weight_bits, out_bits, out_signed, lo, hi)
    return out


def inner_product(x, w, bias_a, bias_b, round_bits, weight_bits, out_bits, out_signed, lo, hi):
    x, w = x.tolist(), w.tolist()
    out = np.zeros((len(x), len(w)), np.int64)
    for n, row in enumerate(x):
        for m, wrow in enumerate(w):
            acc = int(bias_a[m]) * int(bias_b[m]) + sum(a * b for a, b in zip(row, wrow))
            acc = wrap(acc, acc_bits_for_weights(weight_bits))
            out[n, m] = requantize(acc, _rb(round_bits, m), weight_bits, out_bits, out_signed, lo, hi)
    return out


def batch_norm(x, w, bias_a, bias_b, round_bits, weight_bits, out_bits, out_signed, lo, hi, slopes=None):
    """§8.4; with ``slopes`` = (factors, shift) a PReLU's slopes act on the accumulator first (§8.10.1)."""
    out = np.zeros(x.shape, np.int64)
    for idx in np.ndindex(*x.shape):
        c = idx[1]
        acc = wrap(int(bias_a[c]) * int(bias_b[c]) + int(x[idx]) * int(w[c]), acc_bits_for_weights(weight_bits))
        if slopes is not None:
            factors, shift = slopes
            acc = prelu_accumulator(acc, int(factors[c] if len(factors) > 1 else factors[0]), shift)
        out[idx] = requantize(acc, _rb(round_bits, c), weight_bits, out_bits, out_signed, lo, hi)
    return out


# ---- §8.5-8.7 -------------------------------------------------------------------------------


def eltwise(kind, inputs, multipliers, round_bits, lo, hi, input_bits):
    arrays = np.broadcast_arrays(*inputs)
    out = np.zeros(arrays[0].shape, np.int64)
    for idx in np.ndindex(*out.shape):
        values = [int(a[idx]) for a in arrays]
        if kind == "sum":
            acc = wrap(sum(wrap(v * s, 32) for v, s in zip(values, multipliers)), 32)
        elif kind == "max":
            acc = max(wrap(v * s, 32) for v, s in zip(values, multipliers))
        else:
            width = 64 if max(input_bits) > 8 else 32
            acc = values[0]
            for v in values[1:]:
                acc = wrap(acc * v, width)
        out[idx] = round_sat(acc, round_bits, lo, hi)
    return out


def _windows(d, k, s, p0, p1, ceil_mode):
    span = d + p0 + p1 - k
    count = (math.ceil(span / s) if ceil_mode else span // s) + 1
    if ceil_mode and (count - 1) * s >= d + p0:
        count -= 1
    return [(i * s, min(i * s + k, d + p0)) for i in range(count)]   # padded coordinates


def max_pool(x, kernel, strides, pads, ceil_mode):
    (kh, kw), (sh, sw), (pt, pl, pb, pr) = kernel, strides, pads
    n_, c_, h, wd = x.shape
    rows, cols = _windows(h, kh, sh, pt, pb, ceil_mode), _windows(wd, kw, sw, pl, pr, ceil_mode)
    out = np.zeros((n_, c_, len(rows), len(cols)), np.int64)
    for n in range(n_):
        for c in range(c_):
            for oy, (y0, _) in enumerate(rows):
                for ox, (x0, _) in enumerate(cols):
                    # every pixel of the unclipped window that is a real pixel
                    real = [int(x[n, c, y - pt, xx - pl]) for y in range(y0, y0 + kh) for xx in range(x0, x0 + kw)
                            if 0 <= y - pt < h and 0 <= xx - pl < wd]
                    out[n, c, oy, ox] = max(real)
    return out


def average_pool(x, kernel, strides, pads, q, round_bits, out_bits, lo, hi, ceil_mode):
    (kh, kw), (sh, sw), (pt, pl, pb, pr) = kernel, strides, pads
    n_, c_, h, wd = x.shape
    rows, cols = _windows(h, kh, sh, pt, pb, ceil_mode), _windows(wd, kw, sw, pl, pr, ceil_mode)
    out = np.zeros((n_, c_, len(rows), len(cols)), np.int64)
    for n in range(n_):
        for c in range(c_):
            for oy, (y0, y1) in enumerate(rows):
                for ox, (x0, x1) in enumerate(cols):
                    total = sum(int(x[n, c, y - pt, xx - pl]) for y in range(y0, y1) for xx in range(x0, x1)
                                if 0 <= y - pt and 0 <= xx - pl)
                    size = (y1 - y0) * (x1 - x0)
                    acc = wrap(total * (2 ** q // size), 32 if out_bits == 8 else 64)
                    out[n, c, oy, ox] = round_sat(acc, round_bits, lo, hi)
    return out


def global_average_pool(x, q, round_bits, out_bits, lo, hi):
    n_, c_, h, wd = x.shape
    s = int(2 ** q / (h * wd) + 0.5)     # the facts' float form; §8.6 says it equals the integer form
    out = np.zeros((n_, c_, 1, 1), np.int64)
    for n in range(n_):
        for c in range(c_):
            acc = wrap(sum(int(v) for v in x[n, c].ravel()) * s, 32 if out_bits == 8 else 64)
            out[n, c, 0, 0] = round_sat(acc, round_bits, lo, hi)
    return out


def concat(inputs, multipliers, round_bits, lo, hi, axis):
    parts = []
    for a, s in zip(inputs, multipliers):
        part = np.zeros(a.shape, np.int64)
        for idx in np.ndindex(*a.shape):
            part[idx] = round_sat(wrap(int(a[idx]) * s, 32), round_bits, lo, hi)
        parts.append(part)
    return np.concatenate(parts, axis=axis)


# ---- §8.8-8.12 ------------------------------------------------------------------------------


def _position(i, r):
    """§8.8: pos = max((i + 0.5)/r - 0.5, 0) as an exact Fraction."""
    return max(Fraction(2 * i + 1, 2 * r) - Fraction(1, 2), Fraction(0))


def resize_nearest(x, rh, rw):
    n_, c_, h, wd = x.shape
    out = np.zeros((n_, c_, h * rh, wd * rw), np.int64)
    for y in range(h * rh):
        sy = min(math.trunc(_position(y, rh) + Fraction(1, 2)), h - 1)
        for xx in range(wd * rw):
            sx = min(math.trunc(_position(xx, rw) + Fraction(1, 2)), wd - 1)
            out[:, :, y, xx] = x[:, :, sy, sx]
    return out


def resize_bilinear(x, rh, rw):
    n_, c_, h, wd = x.shape
    out = np.zeros((n_, c_, h * rh, wd * rw), np.int64)
    integer = rh == rw and rh in (2, 4)
    b = {2: 2, 4: 3}.get(rh)
    for y in range(h * rh):
        py = _position(y, rh)
        y0 = min(math.floor(py), h - 1)
        y1 = min(math.floor(py) + 1, h - 1)
        fy = py - math.floor(py)
        for xx in range(wd * rw):
            px = _position(xx, rw)
            x0 = min(math.floor(px), wd - 1)
            x1 = min(math.floor(px) + 1, wd - 1)
            fx = px - math.floor(px)
            for n in range(n_):
                for c in range(c_):
                    A, B = int(x[n, c, y0, x0]), int(x[n, c, y0, x1])
                    C, D = int(x[n, c, y1, x0]), int(x[n, c, y1, x1])
                    if integer:
                        ly, lx = int(fy * 2 ** b), int(fx * 2 ** b)   # exact: positions step by 2^-b
                        one = 2 ** b
                        v = ((one - ly) * ((one - lx) * A + lx * B) + ly * ((one - lx) * C + lx * D)) >> (2 * b)
                    else:
                        # float64, as the document orders it: the fraction's numerator over 2r
                        ly = float(fy * 2 * rh) / (2.0 * rh)
                        lx = float(fx * 2 * rw) / (2.0 * rw)
                        v = math.trunc((1.0 - ly) * ((1.0 - lx) * A + lx * B) + ly * ((1.0 - lx) * C + lx * D))
                    out[n, c, y, xx] = v
    return out


def _softmax_exp(d, inv):
    """§8.9 steps 1-4 for one integer difference d <= 0, one float32 operation at a time."""
    f32 = np.float32
    ln2 = f32(0.693147180559945)
    x = f32(f32(d) * inv)
    t = f32(x * f32(f32(1) / ln2))
    n = math.trunc(float(t))
    f = f32(f32(t - f32(n)) * ln2)
    f2 = f32(f * f)
    f3 = f32(f2 * f)
    f4 = f32(f2 * f2)
    p = f32(float(f32(f32(1) + f)) + float(f2) * 0.5)
    sixth = f32(f32(1) / f32(6))
    p = f32(p + f32(f3 * sixth))
    p = f32(p + f32(f4 * f32(0.25 * float(sixth))))
    return f32(p * f32(2.0 ** n)) if n >= -16 else f32(0.0)


def softmax_last_axis(q, in_scale, lanes=16, narrow_row_pads=False):
    """§8.9 on the last axis: pad lanes (the type's lowest value) fill the last vector of a row when
    the row is at least ``lanes`` wide, or always with ``narrow_row_pads``."""
    f32 = np.float32
    q = np.asarray(q)
    type_lo = int(np.iinfo(q.dtype).min)
    inv = f32(f32(1) / f32(in_scale))
    out = np.zeros(q.shape, np.float32)
    for idx in np.ndindex(*q.shape[:-1]):
        row = [int(v) for v in q[idx]]
        top = max(row)
        es = [_softmax_exp(v - top, inv) for v in row]
        width = len(row)
        values = list(es)
        if (width >= lanes or narrow_row_pads) and width % lanes:
            values += [_softmax_exp(type_lo - top, inv)] * (lanes - width % lanes)
        lane_sums = [f32(0.0)] * lanes
        for k, e in enumerate(values):
            lane_sums[k % lanes] = f32(lane_sums[k % lanes] + e)
        total = f32(0.0)
        for s in lane_sums:
            total = f32(total + s)
        inverse = f32(f32(1) / total)
        for k, e in enumerate(es):
            out[idx + (k,)] = f32(e * inverse)
    return out


def activation_bounds(bits, signed, activation, tensor_scale=None, clip_min=None, clip_max=None):
    lo, hi = bounds(bits, signed)
    if activation == "none":
        return lo, hi
    if activation == "relu":
        return max(lo, 0), hi
    if activation == "relu6":
        clip_min, clip_max = 0.0, 6.0
    qlo = math.floor(clip_min * tensor_scale + 0.5)
    qhi = math.floor(clip_max * tensor_scale + 0.5)
    return max(lo, min(qlo, hi)), min(hi, max(qhi, lo))


def _f32(v):
    return float(np.float32(v))


def data_convert_to_fixed(x, tensor_scale, bits, signed):
    """§8.12: float32 product, +-0.5 in double rounded to float32, saturate, truncate toward zero."""
    lo, hi = bounds(bits, signed)
    s = _f32(tensor_scale)
    out = []
    for v in np.ravel(x):
        val = _f32(_f32(v) * s)
        t = _f32(val + 0.5) if val > 0 else _f32(val - 0.5)
        t = clamp(t, lo, hi)
        out.append(int(t))                          # int() truncates toward zero
    return np.array(out, np.int64).reshape(np.shape(x))


def data_convert_to_float(q, tensor_scale):
    """§8.12: q times the float32 reciprocal of the float32 tensorScale, the product in float32."""
    r = np.float32(1) / np.float32(tensor_scale)
    return np.array([np.float32(int(v)) * r for v in np.ravel(q)], np.float32).reshape(np.shape(q))


# ---- import side: §4-§6, §8.1.1 ---------------------------------------------------------------


def _power_at_least(a):
    """Smallest power of 2 >= a > 0, by doubling or halving an exact Fraction."""
    a, p = Fraction(a), Fraction(1)
    while p < a:
        p *= 2
    while p / 2 >= a:
        p /= 2
    return p


def _power_at_most(a):
    a, p = Fraction(a), Fraction(1)
    while p > a:
        p /= 2
    while p * 2 <= a:
        p *= 2
    return p


def ceil_log2_double(a):
    """§1.4: ceil(log(a) / log(2)) with both logs in double."""
    return math.ceil(math.log(a) / math.log(2.0))


def weight_scale(abs_max, bits, p2):
    """§4.1: absMax as float32; 0 below 1e-15; P2: 2^ceil_log2_double(absMax); 2^(bits-1) / absMax divided
    in double, then rounded to float32."""
    a = np.float32(abs_max)
    if not a >= 1e-15:
        return 0.0
    if p2:
        a = np.float32(2.0 ** ceil_log2_double(float(a)))
    return float(np.float32(2.0 ** (bits - 1) / float(a)))


def quantize_weights(w, scale, bits, limit=None):
    """§4.2: each weight as float32 (clipped to [-limit, limit]), the product with the float32 scale
    in float32, +0.5 when the weight is > 0 else -0.5 in double, truncated, saturated."""
    lo, hi = bounds(bits, True)
    flat_scale = np.broadcast_to(np.asarray(scale, np.float64), np.shape(w))
    out = np.zeros(np.shape(w), np.int64)
    for idx in np.ndindex(*np.shape(w)):
        v = np.float32(w[idx])
        if limit is not None:
            v = max(min(v, np.float32(limit)), -np.float32(limit))
        prod = float(np.float32(v * np.float32(flat_scale[idx])))
        out[idx] = clamp(math.trunc(prod + 0.5 if v > 0 else prod - 0.5), lo, hi)
    return out


def limit_weight_range_median(w, abs_max, bits):
    """§4.3: med = the sorted float32 |w| at index n // 2 + 1 (n - 1 for n <= 2); limit = med * 16 in
    float32; when absMax > 2^(bits-1)/8 - 1 and absMax > limit: c = 2^ceil_log2_double(min(absMax,
    limit)) - 1 and absMax = min(absMax, c), unless c <= 0."""
    mags = sorted(abs(np.float32(v)) for v in np.ravel(w))
    med = mags[min(len(mags) // 2 + 1, len(mags) - 1)]
    limit = np.float32(med * np.float32(16))
    a = np.float32(abs_max)
    if a > 2 ** (bits - 1) / 8 - 1 and a > limit:
        reach = min(a, limit)
        if reach > 0:
            c = np.float32(2.0 ** ceil_log2_double(float(reach))) - np.float32(1)
            if c > 0:
                return float(min(a, c))
    return float(abs_max)


def bias_scale(bias_abs_max, weight_bits, p2):
    """§5.1: the weights' scale rule at the weights' width, on the bias's absMax."""
    return weight_scale(bias_abs_max, weight_bits, p2)


def quantize_bias(b, scale, weight_bits):
    """§5.2: as weights, at the weights' width."""
    return quantize_weights(b, scale, weight_bits)


def split_bias(bias_q, isf, weight_bits, input_bits, input_signed):
    if weight_bits == 8:
        b_max = 127 if input_signed else 255
    else:
        b_max = 255 if (input_signed and input_bits == 8) else 65535
    lo, hi = bounds(weight_bits, True)
    a_out, b_out = [], []
    for b, f in zip(bias_q, isf):
        b, f = int(b), np.float32(f)
        if f > b_max:
            t = math.trunc(float(np.float32(b) * f))
            a = abs(t) // b_max * (1 if t >= 0 else -1)   # C division truncates
            a_out.append(clamp(a, lo, hi))
            b_out.append(b_max)
        elif f > 1:
            a_out.append(clamp(b, lo, hi))
            b_out.append(math.trunc(float(f)))
        else:
            a_out.append(clamp(math.trunc(float(np.float32(b) * f)), lo, hi))
            b_out.append(1)
    return a_out, b_out


def in_scale_factor(ws, in_scale, bias_scale):
    """§5.3: float32 product weightScale x inScale, then the float32 quotient by biasScale."""
    f32 = np.float32
    if bias_scale == 0:
        return 0.0
    return float((f32(ws) * f32(in_scale)) / f32(bias_scale))


def clip_weight_scale_for_bias(ws, in_scale, bias_abs_max, weight_bits, input_signed, p2):
    """§4.4: maxBiasScale and maxWeightScale each a float32 quotient, compared with the float32 weight
    scale."""
    f32 = np.float32
    if bias_abs_max < 1e-15:
        return ws, False
    max_bias = f32(2 ** (2 * weight_bits - (1 if input_signed else 0) - 1)) / f32(bias_abs_max)
    max_ws = float(max_bias / f32(in_scale))
    if float(f32(ws)) <= max_ws:
        return ws, False
    return (float(_power_at_most(max_ws)) if p2 else max_ws), True


def output_range(range_min, range_max, widen, expansion=1.0):
    """§6.2 for a calibrated range: both ends x quantRangeExpansionFactor; an inner product or global
    average pool (``widen``) also has its max, and only its max, x 1.25."""
    lo = range_min * expansion
    hi = range_max * expansion
    if widen:
        hi = hi * 1.25
    return lo, hi


def round_bits(acc_scale, range_min, range_max, bits, signed):
    """§6.3 in float32, with ceil_log2_double where the rule takes a power of 2."""
    f = np.float32
    a = f(acc_scale)
    m = max(abs(f(range_min) * a), abs(f(range_max) * a))
    nb = bits - 1 if signed else bits
    if signed and m > 0 and float(m) == 2.0 ** ceil_log2_double(float(m)):
        m = f(m - f(1))
    d = f(m / f(2 ** nb))
    if not d >= 1:
        return 0
    p = 2.0 ** ceil_log2_double(float(d))
    if p >= float(f(2) * d):
        p = p / 2
    return ceil_log2_double(p)


def tensor_scale(acc_scale, rb):
    s = float(np.float32(acc_scale) / np.float32(2 ** rb))
    return s if s != 0 else 2.0 ** -126


def lower_round_bits(rb, out_scale, acc_scale):
    while rb > 0 and 2 ** rb * out_scale >= acc_scale:
        rb -= 1
    return rb


def merging_round_bits(rb, acc_scale, clip_scale, bias_range):
    """§6.5: lowered (and tensorScale = the forced scale) only with a forced scale, BiasRange off and
    roundBits above 0; otherwise §6.3's roundBits and §6.4's tensorScale."""
    if clip_scale is not None and not bias_range and rb > 0:
        return lower_round_bits(rb, clip_scale, acc_scale), clip_scale
    return rb, tensor_scale(acc_scale, rb)


def eltwise_multipliers(out_scale, rb, in_scales):
    return tuple(math.trunc(out_scale * 2 ** rb / s) for s in in_scales)


def consumer_weight_to_bias_scale(ws, bs, per_channel):
    """§6.6: weightScale / biasScale; 1/256 without a bias; 1/256 in place of a per-channel depthwise
    consumer's weight scale."""
    if bs == 0:
        return 1 / 256
    return (1 / 256 if per_channel else ws) / bs


def max_weight_to_bias_scale(ratios):
    return max([1 / 256] + list(ratios))


def bias_saturation_guard(rb, ts, ratio, consumer_weight_bits, output_signed):
    e = (256 if consumer_weight_bits == 8 else 32768) / (2 if output_signed else 1)
    t, n = ts, 0
    while t * ratio > e:
        t /= 2
        n += 1
    return rb + (n + 1) // 2


def calibration_option_bits(level, activation_clipping=1, weight_clipping=1, bias_calibration=1, channel_wise=0):
    """§9: accuracy_level 0 -> BiasRange 64, 1 -> 7, 9 -> ActRange 1, WeightRange 2, BiasCalib 4,
    PerChannelWeight 8 from the advanced options."""
    if level == 0:
        return 64
    if level == 1:
        return 1 + 2 + 4
    return activation_clipping * 1 + weight_clipping * 2 + bias_calibration * 4 + channel_wise * 8


def bias_calibration_factor(i, n):
    """§9.5: 0.05f, divided by 10 in float32 in the first and the last n // 10 iterations."""
    edge = n // 10
    f = np.float32(0.05)
    return float(f / np.float32(10.0)) if edge > 0 and (i < edge or i >= n - edge) else float(f)


def depthwise_per_channel_round_bits(weight_scales, in_scale, out_scale):
    """§8.1.1: the float32 ratio float32(w inScale) / outScale; below 1 (where the truncated log2 is 0 or
    negative) 0, else the exact trunc(log2 ratio) by doubling."""
    result = []
    for w in weight_scales:
        ratio = Fraction(float(np.float32(np.float32(np.float32(w) * np.float32(in_scale)) / np.float32(out_scale))))
        k = 0
        if ratio >= 1:
            while 2 ** (k + 1) <= ratio:
                k += 1
        result.append(k)
    return result


def clip_output_scale(clip_max, out_bits, ws, in_scale, symmetric=False):
    """§4.7 in float32 steps: outScale, accScale, the ratio; the largest power of 2 <= the ratio (an
    exact Fraction, below 1 too); the forced accScale and weight scale; roundBits max(k, 0) and the
    tensorScale accScale' / 2^roundBits."""
    f32 = np.float32
    out = f32(2 ** (out_bits - 1 if symmetric else out_bits)) / f32(clip_max)
    acc = f32(in_scale) * f32(ws)
    p = _power_at_most(float(acc / out))
    forced = out * f32(float(p))
    weight = float(forced / f32(in_scale))
    k = p.numerator.bit_length() - 1 if p >= 1 else -(p.denominator.bit_length() - 1)
    rb = max(k, 0)
    return float(forced) / 2 ** rb, weight, rb


# ---- §8.10.1-2, §8.11 (depth-to-space) -------------------------------------------------------


def prelu_accumulator(acc, factor, shift):
    """§8.10.1: a negative accumulator, read as int32, times the factor, floored by 2^shift (Python's >>
    on an unbounded integer), wrapped to int32; a value >= 0 unchanged."""
    if acc >= 0:
        return acc
    return wrap((wrap(acc, 32) * factor) >> shift, 32)


def prelu_slope_scale(slopes, weight_bits, p2):
    """§8.10.1: float32 2^(bits-1) / max|slope| (the max rounded up to a power of 2 with P2); 1 when every
    slope is below 1e-15 in magnitude."""
    a = max(abs(np.float32(v)) for v in slopes)
    if float(a) < 1e-15:
        return 1.0
    if p2:
        a = np.float32(_power_at_least(float(a)))
    return float(np.float32(2 ** (weight_bits - 1) / float(a)))


def quantize_prelu_slopes(slopes, slope_scale, weight_bits):
    """§8.10.1: the float32 product, 0.5 added away from zero in double, truncated, clamped to the weights'
    signed type."""
    lo, hi = bounds(weight_bits, True)
    out = []
    for v in slopes:
        p = float(np.float32(v) * np.float32(slope_scale))
        out.append(clamp(math.trunc(p + 0.5 if np.float32(v) > 0 else p - 0.5), lo, hi))
    return out


def prelu_slope_factors(slopes_q, slope_scale, weight_bits):
    """§8.10.1: f = float32(q 256) / float32 slopeScale in float32; (trunc f, 8) for 8-bit weights,
    (trunc float32(f 256), 16) for 16-bit."""
    out = []
    for q in slopes_q:
        f = np.float32(q * 256) / np.float32(slope_scale)
        out.append(math.trunc(float(f if weight_bits == 8 else f * np.float32(256))))
    return out, (8 if weight_bits == 8 else 16)


def table_pre_range(kind, range_min, range_max, bits):
    limit = {("Sigmoid", 8): 8.0, ("Sigmoid", 16): 16.0, ("Tanh", 8): 4.0, ("Tanh", 16): 8.0}[(kind, bits)]
    ends = []
    for y in (range_min, range_max):
        top = 1.0
        bottom = 0.0 if kind == "Sigmoid" else -1.0
        if y <= bottom:
            v = -limit
        elif y >= top:
            v = limit
        else:
            v = math.log(y / (1.0 - y)) if kind == "Sigmoid" else math.atanh(y)
        ends.append(min(max(v, -limit), limit))
    return tuple(ends)


def _gelu(x):
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def unbounded_table_pre_range(kind, range_min, range_max, bits, alpha=1.0):
    """§8.10.2 for GELU and ELU: the lower end -L at most, the upper end the inverse of the maximum."""
    limit = {("GELU", 8): 4.0, ("GELU", 16): 8.0, ("ELU", 8): 8.0, ("ELU", 16): 16.0}[(kind, bits)]
    if kind == "ELU":
        def inverse(y):
            if y >= 0:
                return y
            return -limit if y <= -alpha else math.log1p(y / alpha)
        return max(-limit, inverse(range_min)), max(-limit, inverse(range_max))
    # GELU: bisection on the increasing branch, from its turn at -0.7517915246
    turn = -0.7517915246
    lo, hi = turn, max(1.0, 2.0 * range_max)
    if range_max <= _gelu(turn):
        top = turn
    else:
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _gelu(mid) < range_max else (lo, mid)
        top = hi
    return -limit, max(-limit, top)


def activation_table(kind, pre_scale, bits, out_scale, out_signed, alpha=1.0):
    plo, phi = bounds(bits, True)
    olo, ohi = bounds(bits, out_signed)
    table = []
    for p in range(plo, phi + 1):
        x = p / pre_scale
        if kind == "Sigmoid":
            y = 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))
        elif kind == "Tanh":
            y = math.tanh(x)
        elif kind == "GELU":
            y = _gelu(x)
        else:
            y = x if x >= 0 else alpha * math.expm1(x)
        table.append(clamp(math.floor(y * out_scale + 0.5), olo, ohi))
    return table



# ---- §8.10.2 TI's tables (TIDL 10.x/11.x, 8-bit) ----------------------------------------------------

F32 = np.float32


def ti_exp(x):
    """TI's float32 exponential: n = trunc(x / ln 2), a 4th-order polynomial of the remainder, times 2^n
    (math.ldexp: 2^n is exact), 0 below n = -16, FLT_MAX above n = 14."""
    y = F32(F32(1.44269504090) * F32(x))
    n = int(y)                                   # C's cast: toward zero
    r = F32(F32(y - F32(n)) * F32(0.693147180559945))
    r2 = F32(r * r)
    poly = F32(F32(F32(1.0) + r) + F32(r2 * F32(0.5)))
    poly = F32(poly + F32(F32(r2 * r) * F32(0.1666667)))
    poly = F32(poly + F32(F32(r2 * r2) * F32(0.0416667)))
    if n < -16:
        return 0.0
    if n > 14:
        return float(np.finfo(np.float32).max)
    return float(F32(math.ldexp(float(poly), n)))


def ti_table_function(kind, x, alpha=1.0, beta=0.5):
    def param(v):          # units of 2^-24, half away from zero
        q = abs(Fraction(v) * 2 ** 24)
        q = math.floor(q + Fraction(1, 2))
        return (q if v >= 0 else -q) / 2 ** 24

    if kind == "Sigmoid":
        d = ti_exp(float(F32(-x))) + 1.0
        r = 1.0 / d
        return 1.0 * (r * (2.0 - d * r))
    if kind == "Tanh":
        return math.tanh(x)
    if kind == "GELU":
        return 0.5 * x * (1.0 + math.erf(x * 0.70710678118))
    if kind == "ELU":
        return x if x >= 0 else param(alpha) * (math.exp(x) - 1.0)
    return clamp(param(alpha) * x + param(beta), 0.0, 1.0)


def ti_activation_table(kind, in_scale, in_signed, out_scale, out_signed, alpha=1.0, beta=0.5):
    lo, hi = bounds(8, in_signed)
    olo, ohi = bounds(8, out_signed)
    table = []
    for q in range(lo, hi + 1):
        x = float(F32(F32(q) / F32(in_scale)))
        v = ti_table_function(kind, x, alpha, beta) * float(F32(out_scale))
        r = math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)
        table.append(clamp(r, olo, ohi))
    return table


def pla_sigmoid_table(in_scale, in_signed, rb):
    """AM62A's four segments, per input value q: slopes 0, 4, 16, 32 and offsets 128, 108, 80, 64 (units of
    2^-7), the offsets times the input scale split into an 8-bit part and an integer factor."""
    s = F32(in_scale)
    if s > 1:
        factor = int(s) % 256
        offsets = [int(F32(F32(o) * s) / F32(factor)) % 256 for o in (128, 108, 80, 64)]
    else:
        factor = 1
        offsets = [int(F32(o) * s) % 256 for o in (128, 108, 80, 64)]
    limits = [int(F32(F32(t) * F32(16)) * s) for t in (5.0, 2.375, 1.0)]
    lo, hi = bounds(8, in_signed)
    table = []
    for q in range(lo, hi + 1):
        a = abs(q)
        k = next((i for i, t in enumerate(limits) if 16 * a >= t), 3)
        v = (0, 4, 16, 32)[k] * a + offsets[k] * factor
        if q < 0:
            v = offsets[0] * factor - v
        table.append(clamp(round_sat(v, rb, -(2 ** 62), 2 ** 62), 0, 255))
    return table

def lookup(pre, table, pre_lo):
    return np.array([table[int(p) - pre_lo] for p in pre.reshape(-1)], np.int64).reshape(pre.shape)


def depth_to_space(x, b, mode):
    n_, c_, h, w = x.shape
    cp = c_ // (b * b)
    out = np.zeros((n_, cp, h * b, w * b), np.int64)
    for n in range(n_):
        for c in range(cp):
            for y in range(h * b):
                for xx in range(w * b):
                    i, j = y % b, xx % b
                    src = (i * b + j) * cp + c if mode == "DCR" else c * b * b + i * b + j
                    out[n, c, y, xx] = x[n, src, y // b, xx // b]
    return out


def per_channel_layer_weight_scale(w, bits, weight_range):
    """§4.5: a per-channel layer's output accScale takes the whole layer's §4.1 P2 weight scale: absMax over
    every weight, §4.3's limit when WeightRange is on; no bias clip, no forcing; 1 where absMax < 1e-15."""
    a = max(abs(float(v)) for v in np.ravel(w))
    if weight_range:
        a = limit_weight_range_median(w, a, bits)
    s = weight_scale(a, bits, True)
    return s if s > 0 else 1.0


# -- §8.15 TopK: the slot insertion, as the text words it ------------------------------------------

def topk_start(bits, signed, largest):
    lo, hi = bounds(bits, signed)
    v0 = lo if largest else hi
    raw = (v0 & ((1 << bits) - 1)).to_bytes(bits // 8, "little") * (32 // bits)
    return v0, int.from_bytes(raw, "little", signed=True)


def topk_line(line, k, bits, signed, largest):
    v0, i0 = topk_start(bits, signed, largest)
    vals, idxs = [v0] * k, [i0] * k
    for j, x in enumerate(int(v) for v in line):
        for s in range(k):
            beats = x > vals[s] if largest else x < vals[s]
            if beats or (x == vals[s] and idxs[s] < 0):
                vals[s + 1:], idxs[s + 1:] = vals[s:k - 1], idxs[s:k - 1]
                vals[s], idxs[s] = x, j
                break
    return vals, idxs


# -- §8.16 ScatterElements ---------------------------------------------------------------------------

def mma_scale_shift(r):
    r, sh = _f32(r), 0
    while True:
        r = _f32(r * 2)
        if sh >= 40:
            break
        if r > 255:
            r = _f32(r / 2)
            break
        sh += 1
    return math.floor(float(r) + 0.5), sh


def scatter(data, points, updates, reduction, bits, signed, c=1, sh=0, cd=1, shd=0):
    """data: a numpy int array; points: list of coordinate tuples; updates: one array per point."""
    alo, ahi = bounds(2 * bits, signed) if reduction == "add" else bounds(bits, signed)
    acc = {pos: round_sat(int(v) * cd, shd, alo, ahi) for pos, v in np.ndenumerate(data)}
    for point, upd in zip(points, updates):
        if any(p >= d or p < -d for p, d in zip(point, data.shape)):
            continue
        point = tuple(p + d if p < 0 else p for p, d in zip(point, data.shape))
        for rest, u in np.ndenumerate(np.asarray(upd)):
            pos, u = point + rest, int(u)
            if reduction == "add":
                acc[pos] = clamp(acc[pos] + u, alo, ahi)
            elif reduction == "max":
                acc[pos] = max(acc[pos], u)
            elif reduction == "min":
                acc[pos] = min(acc[pos], u)
            else:
                acc[pos] = u
    lo, hi = bounds(bits, signed)
    out = np.zeros(data.shape, dtype(bits, signed))
    for pos, v in acc.items():
        out[pos] = round_sat(v * c, sh, lo, hi) if reduction == "add" else clamp(v, lo, hi)
    return out


# ---- §9.5 bias calibration's means ---------------------------------------------------------------


def _f32_sum(values):
    """§9.5: each value as float32, added in element order to a float32 sum."""
    total = np.float32(0.0)
    for x in values:
        total = np.float32(total + np.float32(x))
    return total


def channel_means(values, scale):
    """§9.5: per batch item (axis 0) and channel (axis 1): the float32 sum in element order, divided by the
    element count, then by the scale, in float32. One list per batch item."""
    out = []
    for item in np.asarray(values):
        row = []
        for channel in item:
            flat = list(np.asarray(channel).reshape(-1))
            row.append(np.float32(np.float32(_f32_sum(flat) / np.float32(len(flat))) / np.float32(scale)))
        out.append(row)
    return out


def column_means(values, scale):
    """§9.5, an inner product whose constant is its second operand: dimensions right-aligned (width the
    last axis, height the one before or 1, channels the third from the end or 1, every leading index a
    row); per row, channel c and column w the float32 sum over the height / height / scale, at c*width+w."""
    v = np.asarray(values)
    width = v.shape[-1]
    height = v.shape[-2] if v.ndim >= 2 else 1
    channels = v.shape[-3] if v.ndim >= 3 else 1
    blocks = v.reshape(-1, channels, height, width)
    out = []
    for block in blocks:
        row = [None] * (channels * width)
        for c in range(channels):
            for w in range(width):
                column = [block[c, h, w] for h in range(height)]
                row[c * width + w] = np.float32(np.float32(_f32_sum(column) / np.float32(height))
                                                / np.float32(scale))
        out.append(row)
    return out


def running_means(frames, columns):
    """§9.5 across frames: ``frames[k]`` the rows of frame k; u = float32(1 / (k + 1)); frame 0 starts from
    zeros; each row in turn: channels old*(1 - u) + cur*u in float32; an inner product's columns with the
    kept part old*(1.0 - u) and the sum in double, cur*u in float32, rounded to float32."""
    old = None
    for k, rows in enumerate(frames):
        u = np.float32(1.0 / (k + 1.0))
        if k == 0:
            old = [np.float32(0.0)] * len(rows[0])
        for row in rows:
            if columns:
                old = [np.float32(float(o) * (1.0 - float(u)) + float(np.float32(r * u))) for o, r in zip(old, row)]
            else:
                old = [np.float32(o * (np.float32(1.0) - u) + r * u) for o, r in zip(old, row)]
    return old


def calibrated_bias(bias, mean_float, mean_fixed, factor):
    """§9.5: bias[j] += (meanFloat[j] - meanFixed[j]) * f in float32, element j of the layer's means."""
    return [np.float32(np.float32(b) + np.float32((np.float32(mf) - np.float32(mq)) * np.float32(factor)))
            for b, mf, mq in zip(bias, mean_float, mean_fixed)]


def leaky_relu_table(in_scale, bits, in_signed, out_scale, alpha):
    """§8.10.1 TIDL 10.x/11.x's leaky ReLU table, per input value q of the type: x = float32(q / inScale) as
    a double; y = x for x >= 0, else x times the float32 alpha; round(y * outScale) in double, halves away
    from zero, saturated to the signed output type of the same width."""
    lo, hi = bounds(bits, in_signed)
    olo, ohi = bounds(bits, True)
    a = float(np.float32(alpha))
    s = float(np.float32(out_scale))
    table = []
    for q in range(lo, hi + 1):
        x = float(np.float32(np.float32(q) / np.float32(in_scale)))
        v = (x if x >= 0 else x * a) * s
        r = math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)
        table.append(clamp(r, olo, ohi))
    return table


def softmax_fixed_output_scale(bits, axis_length):
    """§8.9: a fixed-point softmax output's tensorScale: 256 at 8 bit, 254 per element of the axis at 16."""
    return 256.0 if bits == 8 else 254.0 * axis_length


def all_zero_constant_scale(values):
    """§8.5: a constant of zeros is at tensorScale 1; None for any other constant."""
    return 1.0 if len(np.ravel(values)) and all(float(v) == 0.0 for v in np.ravel(values)) else None


def scatter_add_common_scale(data_scale, updates_scale):
    """§8.16: an 'add' scatter's data and updates both take the smaller of their two scales."""
    return data_scale if data_scale < updates_scale else updates_scale


# ---- §8.9 fixed-point softmax output (TI's integer kernel) ------------------------------------------


def softmax_x(x):
    """§8.9 step 2's X: TI's runtime float32 exponential, step by step on float32 scalars."""
    y = F32(F32(1.44269504090) * F32(x))
    n = int(y)                                   # trunc
    s = F32(F32(y - F32(n)) * F32(0.693147180559945))
    s2 = F32(s * s)
    p = F32(F32(F32(1) + s) + F32(s2 * F32(0.5)))
    p = F32(p + F32(F32(s2 * s) * F32(0.1666667)))
    p = F32(p + F32(F32(s2 * s2) * F32(0.0416667)))
    return F32(math.ldexp(float(p), n)) if n >= -16 else F32(0)


def _round_away(v):
    """C's round of a double, exactly: a tie away from zero."""
    f = Fraction(v)
    r = math.floor(abs(f) + Fraction(1, 2))
    return r if f >= 0 else -r


def softmax_exponential(d, in_scale, in_bits, rule):
    """§8.9 step 2 for one value, d = q - max(q)."""
    if in_bits == 16:
        r = F32(F32(1) / F32(in_scale))
        v = F32(softmax_x(F32(F32(d) * r)) * F32(65535))
        return round(float(v))                   # Python's round: a tie to the even integer
    if rule == "double":
        return _round_away(math.exp(float(d) / float(F32(in_scale))) * (1.0 / float(F32(1 / 255))))
    r = F32(F32(1) / F32(in_scale))
    return _round_away(float(F32(softmax_x(F32(F32(d) * r)) * F32(255))))


def c7x_recip(v):
    """§8.9 step 4's R: from v's biased exponent E and top 8 fraction bits i."""
    raw = struct.unpack("<I", struct.pack("<f", float(v)))[0]
    e, i = (raw >> 23) & 0xFF, (raw >> 15) & 0xFF
    if i == 0:
        return F32(math.ldexp(1.0, 127 - e))
    return F32(math.ldexp(_round_away(Fraction(2 ** 17, 256 + i)), 118 - e))


def scale_and_shift(m):
    """§8.9 step 5: m = f 2^k, 0.5 <= f < 1; scale = floor(256 f), shift = k - 8."""
    f, k = math.frexp(float(m))
    return math.floor(f * 256), k - 8


def softmax_fixed_row(row, in_scale, out_scale, bits, rule="double"):
    """§8.9 steps 1-6 for one row of integers; the output integers."""
    top = max(row)
    es = [softmax_exponential(v - top, in_scale, bits, rule) for v in row]
    total = F32(sum(es) % 2 ** 32)
    m = F32(c7x_recip(total) * F32(out_scale))
    scale, shift = scale_and_shift(m)
    out = []
    for e in es:
        o = e * scale
        o = (o << shift) % 2 ** 32 if shift >= 0 else (o + 2 ** (-shift - 1)) >> -shift
        out.append(min(o, 2 ** bits - 1))
    return out


def softmax_fixed_last_axis(q, in_scale, out_scale, bits, rule="double"):
    rows = np.asarray(q).reshape(-1, np.asarray(q).shape[-1])
    out = [softmax_fixed_row([int(v) for v in row], in_scale, out_scale, bits, rule) for row in rows]
    return np.array(out, dtype=dtype(bits, False)).reshape(np.asarray(q).shape)
