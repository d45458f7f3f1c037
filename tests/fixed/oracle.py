"""An independent implementation of docs/numerics.md, for comparison with tidlx's rule functions.

Written from the document alone, in plain Python integers and loops (numpy only holds arrays, and its
float32 scalars give §8.9's single-precision operations). It imports nothing of tidlx. Where the
document gives two equal forms, this file takes the other one: roundSat adds 2^(b-1) to an unbounded
Python integer, powers of 2 are found by doubling exact Fractions, the int32 wrap is a modulo, the
global pool's multiplier is computed from the float formula.
"""

from __future__ import annotations

import math
from fractions import Fraction
from statistics import median

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


def batch_norm(x, w, bias_a, bias_b, round_bits, weight_bits, out_bits, out_signed, lo, hi):
    out = np.zeros(x.shape, np.int64)
    for idx in np.ndindex(*x.shape):
        c = idx[1]
        acc = wrap(int(bias_a[c]) * int(bias_b[c]) + int(x[idx]) * int(w[c]), acc_bits_for_weights(weight_bits))
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


def softmax_last_axis(q, in_scale, lanes=16):
    """§8.9 on the last axis, one float32 scalar operation at a time."""
    f32 = np.float32
    q = np.asarray(q)
    out = np.zeros(q.shape, np.float32)
    for idx in np.ndindex(*q.shape[:-1]):
        row = [int(v) for v in q[idx]]
        top = max(row)
        es = []
        for v in row:
            x = f32(v - top) / f32(in_scale)
            t = x * f32(1.4426950408889634)
            n = math.trunc(float(t))
            f = (t - f32(n)) * f32(0.6931471805599453)
            p = f32(1.0) + f * (f32(1.0) + f * (f32(0.5) + f * (f32(1.0 / 6.0) + f * f32(1.0 / 24.0))))
            es.append(f32(p * f32(2.0 ** n)) if n >= -16 else f32(0.0))
        lane_sums = [f32(0.0)] * lanes
        for k, e in enumerate(es):
            lane_sums[k % lanes] = f32(lane_sums[k % lanes] + e)
        total = f32(0.0)
        for s in lane_sums:
            total = f32(total + s)
        for k, e in enumerate(es):
            out[idx + (k,)] = f32(e / total)
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


def _is_power_of_2(a):
    f = Fraction(a)
    return f > 0 and f == _power_at_least(f)


def weight_scale(abs_max, bits, p2):
    if abs_max < 1e-15:
        return 0.0
    if p2:
        abs_max = float(_power_at_least(abs_max))
    return 2 ** (bits - 1) / abs_max


def quantize_weights(w, scale, bits):
    lo, hi = bounds(bits, True)
    flat_scale = np.broadcast_to(np.asarray(scale, np.float64), np.shape(w))
    out = np.zeros(np.shape(w), np.int64)
    for idx in np.ndindex(*np.shape(w)):
        v = float(w[idx])
        sign = (v > 0) - (v < 0)
        out[idx] = clamp(math.trunc(v * float(flat_scale[idx]) + 0.5 * sign), lo, hi)
    return out


def limit_weight_range_median(w, abs_max, bits):
    limit = 16.0 * median(abs(float(v)) for v in np.ravel(w))
    if abs_max > 2 ** (bits - 1) / 8 - 1 and abs_max > limit:
        return min(abs_max, limit)
    return abs_max


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
        b, f = int(b), float(f)
        if f > b_max:
            t = math.trunc(b * f)
            a = abs(t) // b_max * (1 if t >= 0 else -1)   # C division truncates
            a_out.append(clamp(a, lo, hi))
            b_out.append(b_max)
        elif f > 1:
            a_out.append(clamp(b, lo, hi))
            b_out.append(math.trunc(f))
        else:
            a_out.append(clamp(math.trunc(b * f), lo, hi))
            b_out.append(1)
    return a_out, b_out


def clip_weight_scale_for_bias(ws, in_scale, bias_abs_max, weight_bits, input_signed, p2):
    if bias_abs_max < 1e-15:
        return ws, False
    max_ws = 2.0 ** (2 * weight_bits - (1 if input_signed else 0) - 1) / bias_abs_max / in_scale
    if ws <= max_ws:
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
    m = max(abs(range_min * acc_scale), abs(range_max * acc_scale))
    nb = bits - 1 if signed else bits
    if signed and _is_power_of_2(m):
        m -= 1
    d = Fraction(m) / 2 ** nb
    if d < 1:
        return 0
    p = _power_at_least(d)
    if p >= 2 * d:
        p /= 2
    return p.numerator.bit_length() - 1


def tensor_scale(acc_scale, rb):
    s = acc_scale / 2 ** rb
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
    result = []
    for w in weight_scales:
        ratio = Fraction(float(w) * in_scale / out_scale)
        k = 0
        if ratio >= 1:
            while 2 ** (k + 1) <= ratio:    # trunc(log2 ratio) for ratio >= 1
                k += 1
        result.append(k)
    return result


def clip_output_scale(clip_max, out_bits, ws, in_scale):
    out_scale = 2 ** out_bits / clip_max
    ratio = ws * in_scale / out_scale
    if not ratio >= 1:
        return None
    p = _power_at_most(ratio)
    return out_scale, out_scale * float(p) / in_scale, p.numerator.bit_length() - 1


# ---- §8.10.1-2, §8.11 (depth-to-space) -------------------------------------------------------


def prelu(pre, slopes, lo, hi):
    """§8.10.1 on a pre-activation N x C x ... array; ``slopes`` one integer or one per channel."""
    flat = pre.astype(np.int64)
    out = np.zeros(flat.shape, np.int64)
    for index in np.ndindex(*flat.shape):
        p = int(flat[index])
        s = int(slopes[index[1]]) if len(slopes) > 1 else int(slopes[0])
        out[index] = clamp(p if p >= 0 else round_sat(p * s, 15, -(2 ** 63), 2 ** 63), lo, hi)
    return out


def quantize_prelu_slopes(slopes):
    out = []
    for s in slopes:
        v = Fraction(float(s)) * 2 ** 15
        q = math.floor(v + Fraction(1, 2)) if v >= 0 else -math.floor(-v + Fraction(1, 2))
        out.append(clamp(q, -(2 ** 31), 2 ** 31 - 1))
    return out


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


def depthwise_per_channel_scales(weight_scales, in_scale, tensor_scale):
    """§4.5/§8.1.1's choice: outScale = min(tensorScale, min ws x inScale), roundBits by §8.1.1, each
    channel's weight scale lowered to outScale 2^rb / inScale."""
    out_scale = min(tensor_scale, min(float(w) * in_scale for w in weight_scales))
    rb = depthwise_per_channel_round_bits(weight_scales, in_scale, out_scale)
    lowered = [min(out_scale * 2.0 ** r / in_scale, float(w)) for r, w in zip(rb, weight_scales)]
    return out_scale, lowered, rb
