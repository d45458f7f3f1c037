"""docs/numerics.md §12 (style 4, asymmetric per-channel) written a second time from the text alone: plain
Python integers, loops and float32 scalars, no tidlx import."""

from __future__ import annotations

import math

import numpy as np

from oracle import bounds, wrap


def f32(v):
    return float(np.float32(v))


def half_away(v):
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


def round_sat(v, b, lo, hi):
    if b > 0:
        v = (v + (1 << (b - 1))) >> b
    return min(max(v, lo), hi)


# §12.1
def mma(r, wbits, above=False):
    """``above``: an inner product's search, values below the ratio left out."""
    r = f32(r)
    limit = 64 if wbits > 8 else 40
    best = None
    for m in range(1, 256):
        s = half_away(math.log(m / r) / math.log(2))
        s = min(max(s, 0), limit)
        a = f32(m / 2.0 ** s)
        if above and a < r:
            continue
        e = f32(abs(f32(r - a)))
        if best is None or e < best[2]:
            best = (m, s, e)
    return best


# §12.2
def scale_zp(lo, hi, n, signed):
    lo, hi = f32(lo), f32(hi)
    tlo, top = bounds(n, signed)
    if abs(f32(hi - lo)) < 1e-15:
        if hi != 0:
            return f32(top / abs(hi)), 0
        return f32(f32(top) * f32(1000.0)), 0
    rng = f32(hi - lo)
    if hi < 0 or lo > 0:
        rng = max(abs(lo), abs(hi))
    scale = f32(f32((1 << n) - 1) / f32(rng))

    def zp_of(s):
        return min(max(half_away(f32(f32(top) - f32(s * hi))), tlo), top)

    zp = zp_of(scale)
    if scale < 1 and hi <= top and lo >= tlo:
        scale = 1.0
        zp = zp_of(scale)
    return scale, zp


# §12.3 / §12.4 / §12.5
def _ratio(sy, sx, sw, wbits):
    rmin = f32(2.14e-8) if wbits <= 8 else f32(1e-14)
    r = f32(f32(sy) / f32(f32(sw) * f32(sx)))
    if r > 255:
        return 255.0, f32(f32(sy) / f32(255.0 * f32(sx)))
    if r < rmin:
        return rmin, f32(f32(sy) / f32(rmin * f32(sx)))
    return r, f32(sw)


def _quant(w, sw, wbits):
    lo, hi = bounds(wbits, True)
    return [min(max(half_away(float(np.float32(v) * np.float32(sw))), lo), hi) for v in w]


def _term(b, sx, sw, zx, sy, zy, wsum):
    sx, sw, sy = f32(sx), f32(sw), f32(sy)
    return b * sx * sw + zy * (sx * sw / sy) - zx * wsum


def term_bits(v):
    a = abs(v)
    k = max((k for k in range(64) if a >= 2.0 ** k - 1), default=-1)
    return k + 1


def _width(sw, sx, v):
    if f32(v) == 0:
        return 0
    p = f32(f32(f32(sw) * f32(sx)) * f32(v))
    if not math.isfinite(p):
        return 0
    n = math.ceil(float(np.log2(np.float32(abs(p)))))
    return n + 1 if p < 0 else n


def channel(w, b, sx, zx, sy, zy, wbits=8, out_range=None):
    """(wq, sw, m, s, bias) of §12.3-§12.5; ``out_range`` (lo, hi) for step 1's width check."""
    return _channel(w, b, sx, zx, sy, zy, wbits, out_range)[:5]


def channels(ws, bs, sx, zx, sy, zy, wbits=8, out_range=None, inner=False):
    """A layer's channels in order; ``inner``: an inner product's (§12.3, Inner products)."""
    out, missed = [], False
    for w, b in zip(ws, bs):
        *ch, miss = _channel(w, b, sx, zx, sy, zy, wbits, out_range, inner, missed)
        missed = missed or miss
        out.append(tuple(ch))
    return out


def _channel(w, b, sx, zx, sy, zy, wbits=8, out_range=None, inner=False, missed_before=False):
    w = [f32(v) for v in w]
    lo, hi = min(w), max(w)
    top = (1 << (wbits - 1)) - 1
    if abs(f32(hi - lo)) < 1e-15:   # every weight the same: top / |max|, or top x 1000 when it is 0
        sw = f32(top / abs(hi)) if hi != 0 else f32(top * 1000.0)
    else:
        sw = f32(f32(top) / f32(max(abs(lo), abs(hi))))
    if out_range is not None:
        limit = 30 if wbits <= 8 else 53
        widest = max(_width(sw, sx, out_range[0]), _width(sw, sx, out_range[1]))
        if widest > limit:
            sw = f32(f32(sw) / f32(2.0 ** (widest - limit)))
    r, sw = _ratio(sy, sx, sw, wbits)
    m, s, e = mma(r, wbits, inner)
    missed = f32(f32(e) / f32(r)) > f32(1e-3)
    if missed:
        a = f32(m / 2.0 ** s)
        ideal = f32(f32(sy) / f32(a * f32(sx)))
        if f32(abs(f32(ideal - sw)) / f32(sw)) < f32(0.02) or (inner and wbits == 16):
            sw = ideal
    wq = _quant(w, sw, wbits)
    most = 7 if wbits <= 8 else 15
    limit = 30 if wbits <= 8 else 53
    halvings = 0
    while term_bits(_term(b, sx, sw, zx, sy, zy, sum(wq))) > limit:
        halvings += 1
        sw = f32(sw / 2)
        if halvings > most:
            sw = 1.0
        wq = _quant(w, sw, wbits)
        if halvings > most:
            break
    if not (inner and (missed or missed_before)):
        r, sw = _ratio(sy, sx, sw, wbits)
        m, s, _ = mma(r, wbits, inner)
    t = _term(b, sx, sw, zx, sy, zy, sum(wq))
    acc_hi = (1 << 31) - 1 if wbits <= 8 else (1 << 63) - 1
    if abs(t) > acc_hi:
        sw = 1.0
        while f32(sy) / (sw * f32(sx)) > 255:
            sw *= 10
        sw = f32(sw)
        n = f32(sx) * sw / f32(sy)
        m, s, _ = mma(1 / n, wbits, inner)
        return [0] * len(w), sw, m, s, min(max(half_away(b * f32(sx) * sw + zy * n), -acc_hi - 1), acc_hi), missed
    return wq, sw, m, s, half_away(t), missed


# §12.6
def conv(x, w, bias, m, s, zx, lo, hi, stride, pad):
    """x[C][H][W] (one image), w[O][C][KH][KW], groups 1, symmetric pad; int32 accumulator."""
    c, h, wd = len(x), len(x[0]), len(x[0][0])
    o, kh, kw = len(w), len(w[0][0]), len(w[0][0][0])
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1

    def px(ci, y, xx):
        return x[ci][y][xx] if 0 <= y < h and 0 <= xx < wd else zx

    out = []
    for oc in range(o):
        plane = []
        for i in range(oh):
            row = []
            for j in range(ow):
                acc = bias[oc]
                for ci in range(c):
                    for a in range(kh):
                        for bb in range(kw):
                            acc += px(ci, i * stride - pad + a, j * stride - pad + bb) * w[oc][ci][a][bb]
                acc = ((acc + (1 << 31)) % (1 << 32)) - (1 << 31)
                row.append(round_sat(acc * m[oc], s[oc], lo, hi))
            plane.append(row)
        out.append(plane)
    return out


def relu_bounds(lo, hi, zp):
    return max(lo, min(zp, hi)), hi


# §12.7
def import_doubling(r, wbits=8):
    """§12.7 step 2: (c, sh)."""
    r, sh, limit = f32(r), 0, 64 if wbits > 8 else 40
    while True:
        r = f32(r * 2)
        if sh >= limit:
            break
        if r > 255:
            r = f32(r / 2)
            break
        sh += 1
    return half_away(r), sh


def _sum_numbers(sy, sxs, wbits=8):
    top = 32767 if wbits > 8 else 127
    rs = [f32(f32(sy) / f32(sx)) for sx in sxs]
    c, sh = import_doubling(f32(max(rs) / top), wbits)
    u = f32(c / 2.0 ** sh)
    return rs, tuple(half_away(min(f32(r / u), top)) for r in rs), c, sh, u


def sum_factors(sy, sxs, zy, zxs, wbits=8):
    """(M_i...), K, c, sh."""
    rs, ms, c, sh, u = _sum_numbers(sy, sxs, wbits)
    f = f32(zy)
    for z, r in zip(zxs, rs):
        f = f32(f - f32(z * r))
    return ms, half_away(f32(f * f32(1 / u))), c, sh


def eltwise_sum(inputs, ms, k, c, s, lo, hi, acc_bits=32):
    return [round_sat(wrap(sum(v * mm for v, mm in zip(vals, ms)) + k, acc_bits) * c, s, lo, hi)
            for vals in zip(*inputs)]


# §12.11
def product_factors(sy, sxs, zy, wbits=8):
    """c, sh, K."""
    r, b = f32(sy), f32(zy / f32(sy))
    for sx in sxs:
        r = f32(r * f32(1 / f32(sx)))
        b = f32(b * f32(sx))
    c, sh, _ = mma(r, wbits)
    return c, sh, half_away(b)


def eltwise_product(inputs, zs, k, c, s, lo, hi, acc_bits=32):
    out = []
    for vals in zip(*inputs):
        acc = 1
        for v, z in zip(vals, zs):
            acc = wrap(acc * (v - z), acc_bits)
        out.append(round_sat(wrap(acc + k, acc_bits) * c, s, lo, hi))
    return out


def max_factors(sy, sxs, zy, wbits=8):
    """(M_i...), K, c, sh."""
    _, ms, c, sh, u = _sum_numbers(sy, sxs, wbits)
    return ms, half_away(f32(zy * f32(1 / u))), c, sh


def eltwise_max(inputs, zs, ms, k, c, s, lo, hi, acc_bits=32):
    return [round_sat(wrap(max(m * (v - z) for v, z, m in zip(vals, zs, ms)) + k, acc_bits) * c, s, lo, hi)
            for vals in zip(*inputs)]


# §12.8
# §12.9
def convert_in(x, scale, zp, bits, signed):
    lo, hi = bounds(bits, signed)
    return min(max(half_away(f32(f32(f32(x) * f32(scale)) + f32(zp))), lo), hi)


# §12.8 concat
def concat_factors(sy, sx, zy, zx):
    r = f32(f32(sy) / f32(sx))
    m, s, _ = mma(r, 8)
    return m, s, math.trunc(f32(f32(zy * f32(f32(sx) / f32(sy))) - zx))


def concat_part(values, m, s, bias, lo, hi):
    return [round_sat((v + bias) * m, s, lo, hi) for v in values]


# §12.13 average pool, batch norm and deconvolution: the symmetric tensor they read
SYMMETRIC_READERS = ("BatchNorm", "Deconv", "AvgPool")
# §12.2: the layer kinds whose tensors may carry a zero point ("Sum": an element-wise sum), and the ones of
# them that pass it through
ZERO_POINT_KINDS = ("Conv", "InnerProduct", "SoftMax", "Concat", "Flatten", "Reshape", "Transpose", "Sum",
                    "LayerNorm")
PASS_THROUGH = ("Flatten", "Reshape", "Transpose")


def symmetric_scale(lo, hi, n, signed):
    """1.: zero point 0, top / max(|lo|, |hi|); below 1 for a range inside the type: 1; a range under
    1e-15: §12.2's scale."""
    lo, hi = f32(lo), f32(hi)
    tlo, top = bounds(n, signed)
    if abs(f32(hi - lo)) < 1e-15:
        return scale_zp(lo, hi, n, signed)[0]
    scale = f32(f32(top) / f32(max(abs(lo), abs(hi))))
    if scale < 1 and hi <= top and lo >= tlo:
        scale = 1.0
    return scale


def symmetric_tensors(layers):
    """§12.2: the tensors without a zero point. ``layers``: (kind, inputs, outputs), the data layers as
    "Data". A tensor is symmetric when the layer writing it (a subgraph input: a data layer) or a layer
    reading it is not of ZERO_POINT_KINDS, a pass-through reader counting by the readers of its output;
    a pass-through layer's output is symmetric when its input is."""
    writer = {t: kind for kind, _, outputs in layers for t in outputs}
    readers = {}
    for kind, inputs, outputs in layers:
        for t in inputs:
            readers.setdefault(t, []).append((kind, outputs))

    def read_symmetric(t):
        for kind, outputs in readers.get(t, ()):
            if kind not in ZERO_POINT_KINDS:
                return True
            if kind in PASS_THROUGH and any(read_symmetric(o) for o in outputs):
                return True
        return False

    found = {t for t in set(writer) | set(readers)
             if writer.get(t, "Data") not in ZERO_POINT_KINDS or read_symmetric(t)}
    changed = True
    while changed:
        changed = False
        for kind, inputs, outputs in layers:
            if kind in PASS_THROUGH and inputs[0] in found and not set(outputs) <= found:
                found |= set(outputs)
                changed = True
    return found


# ---- §12.12 softmax, tables, PReLU, layer norm ----------------------------------------------------------

def softmax_fixed_row(row, zx, in_scale, out_scale, bits, rule="double"):
    """The input's zero point does not enter (d = q - max(q)); TI's output zero point is 0."""
    import oracle
    del zx
    return oracle.softmax_fixed_row(list(row), in_scale, out_scale, bits, rule)


def table_zp(kind, sx, zx, in_signed, sy, zy, out_signed, alpha=1.0, beta=0.5, bits=8):
    """One entry per input value (8 or 16 bits), lowest first: x = float32(q - Zx) / float32(Sx), widened;
    y = f(x) (§8.10.2); round(y Sy + Zy) half away from zero, saturated to the output type."""
    import oracle
    lo, hi = bounds(bits, in_signed)
    olo, ohi = bounds(bits, out_signed)
    out = []
    for q in range(lo, hi + 1):
        x = f32(f32(q - zx) / f32(sx))
        out.append(min(max(half_away(oracle.ti_table_function(kind, x, alpha, beta) * f32(sy) + zy), olo), ohi))
    return out


def pla_sigmoid_zp(sx, zx, in_signed, rb):
    """AM62A's segments (§8.10.2) with a = |q - Zx| and q < Zx the negative side, unsigned, zero point 0."""
    s = f32(sx)
    if s > 1:
        factor = int(s) % 256
        offsets = [int(f32(f32(o) * s) / f32(factor)) % 256 for o in (128, 108, 80, 64)]
    else:
        factor = 1
        offsets = [int(f32(o) * s) % 256 for o in (128, 108, 80, 64)]
    limits = [int(f32(f32(t) * f32(16)) * s) for t in (5.0, 2.375, 1.0)]
    lo, hi = bounds(8, in_signed)
    out = []
    for q in range(lo, hi + 1):
        a = abs(q - zx)
        k = next((i for i, t in enumerate(limits) if 16 * a >= t), 3)
        v = (0, 4, 16, 32)[k] * a + offsets[k] * factor
        if q < zx:
            v = offsets[0] * factor - v
        out.append(round_sat(v, rb, 0, 255))
    return out


def leaky_table_zp(sx, zx, bits, in_signed, sy, zy, out_signed, slope):
    lo, hi = bounds(bits, in_signed)
    olo, ohi = bounds(bits, out_signed)
    out = []
    for q in range(lo, hi + 1):
        x = f32(f32(q - zx) / f32(sx))
        y = x if x >= 0 else x * f32(slope)
        out.append(min(max(half_away(y * f32(sy) + zy), olo), ohi))
    return out


def prelu_factors(sx, sy, slopes, wbits=8):
    r = f32(f32(sy) / f32(sx))
    pos = mma(r, wbits)[:2]
    neg = []
    for a in slopes:
        rc = f32(f32(abs(f32(a))) * r)
        if rc == 0:
            neg.append((0, 0))
            continue
        m, s, _ = mma(rc, wbits)
        neg.append((-m if a < 0 else m, s))
    return pos, neg


def prelu_value(q, zx, zy, pos, neg_c, lo, hi):
    d = q - zx
    m, s = pos if d >= 0 else neg_c
    v = d * m
    if s > 0:
        v = (v + (1 << (s - 1))) >> s
    return min(max(zy + v, lo), hi)


def fused_prelu_negative(sx, sw, sy, slope, wbits=8):
    """The negative pair of a PReLU ending a weighted layer: §12.1 for |slope| x float32(Sy / float32(Sx Sw))."""
    r = f32(f32(sy) / f32(f32(sx) * f32(sw)))
    rc = f32(f32(abs(f32(slope))) * r)
    if rc == 0:
        return 0, 0
    m, s, _ = mma(rc, wbits)
    return (-m if slope < 0 else m), s
