"""Style 4 (docs/numerics.md §12): tidlx's import rules (backends/tidl/asymmetric.py) and runtime rules
(emulator/fixed/arith_asym.py) against oracle_asym.py, written from the text alone, on random cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import oracle_asym as oa
from fixed_cases import count
from tidlx.backends.tidl import asymmetric as asym
from tidlx.emulator.fixed import arith_asym as ra
from tidlx.emulator.fixed.arith import FixedPointError, FixedType

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

ratios = st.one_of(st.floats(1e-9, 255.0), st.floats(1e-4, 4.0),
                   st.integers(-30, 7).map(lambda e: 2.0 ** e))
finite = dict(allow_nan=False, allow_infinity=False)


@settings(max_examples=300, **SETTINGS)
@given(ratios, st.sampled_from([8, 16]))
def test_mma_search(r, wbits):
    count("§12.1 MMA search")
    got = asym.mma_search(r, wbits)
    m, s, e = oa.mma(r, wbits)
    assert (got.scale, got.shift) == (m, s)
    assert got.error == e
    assert 1 <= got.scale <= 255 and 0 <= got.shift <= (40 if wbits == 8 else 64)


@settings(max_examples=300, **SETTINGS)
@given(ratios, st.sampled_from([8, 16]))
def test_mma_search_from_above(r, wbits):
    count("§12.1 search from above")
    got = asym.mma_search_from_above(r, wbits)
    m, s, e = oa.mma(r, wbits, above=True)
    assert (got.scale, got.shift, got.error) == (m, s, e)
    assert np.float32(got.scale / 2.0 ** got.shift) >= np.float32(r)


def test_mma_search_examples():
    # an exact power of 2 is found exactly; 1/3 is best as 171/2^9 (error 1/1536)
    assert (asym.mma_search(0.25).scale / 2 ** asym.mma_search(0.25).shift) == 0.25
    f = asym.mma_search(1 / 3)
    assert (f.scale, f.shift) == (171, 9)
    # the shift is capped at 40 for 8-bit weights, 64 for 16-bit
    assert asym.mma_search(1e-20, 8).shift == 40 and asym.mma_search(1e-20, 16).shift == 64
    with pytest.raises(FixedPointError):
        asym.mma_search(0.0)


ranges = st.tuples(st.floats(-300, 300, **finite), st.floats(-300, 300, **finite)).map(sorted)


@pytest.mark.parametrize("rule, ours, oracles", [
    ("§12.2 scale and zero point", asym.activation_scale_and_zero_point, oa.scale_zp),
    ("§12.13 symmetric scale", asym.symmetric_scale, oa.symmetric_scale)])
@settings(max_examples=350, **SETTINGS)
@given(ranges, st.sampled_from([8, 16]), st.booleans())
def test_activation_scale_and_zero_point(rule, ours, oracles, rng, bits, signed):
    count(rule)
    lo, hi = rng
    if not signed:
        lo = max(lo, 0.0)
        hi = max(hi, lo)
    assert ours(lo, hi, bits, signed) == oracles(lo, hi, bits, signed)


def test_activation_scale_and_zero_point_examples():
    # [-1, 3] signed 8 bit: 255/4 = 63.75, zp = round(127 - 191.25) = -64; 0.0 maps to -64
    assert asym.activation_scale_and_zero_point(-1.0, 3.0, 8, True) == (63.75, -64)
    # [0, 10] unsigned: zp 0
    assert asym.activation_scale_and_zero_point(0.0, 10.0, 8, False) == (25.5, 0)
    # a raw image range [0, 255] takes scale 1
    assert asym.activation_scale_and_zero_point(0.0, 255.0, 8, False) == (1.0, 0)


weights = st.lists(st.floats(-4, 4, **finite, width=32), min_size=1, max_size=24)


@settings(max_examples=300, **SETTINGS)
@given(weights, st.floats(-50, 50, **finite), st.floats(0.5, 300), st.integers(-128, 127),
       st.floats(0.05, 300), st.integers(-128, 127), st.sampled_from([8, 16]))
def test_quantize_channel(w, b, sx, zx, sy, zy, wbits):
    count("§12.3-§12.5 channel")
    got = asym.quantize_channel(np.array(w, np.float32), b, sx, zx, sy, zy, wbits)
    wq, sw, m, s, bias = oa.channel(w, b, sx, zx, sy, zy, wbits)
    assert got.weights.tolist() == wq
    assert (got.weight_scale, got.mma_scale, got.mma_shift, got.bias) == (sw, m, s, bias)


@settings(max_examples=100, **SETTINGS)
@given(st.sampled_from([0.0, 1 / 27, -0.2, 3.5, 1e-3]), st.integers(1, 12), st.floats(-5, 5, **finite),
       st.floats(0.5, 300), st.integers(-128, 127), st.floats(0.05, 300), st.integers(-128, 127),
       st.sampled_from([8, 16]))
def test_constant_channel(c, n, b, sx, zx, sy, zy, wbits):
    count("§12.3 constant channel")
    w = np.full(n, c, np.float32)
    got = asym.quantize_channel(w, b, sx, zx, sy, zy, wbits)
    wq, sw, m, s, bias = oa.channel(w.tolist(), b, sx, zx, sy, zy, wbits)
    assert got.weights.tolist() == wq
    assert (got.weight_scale, got.mma_scale, got.mma_shift, got.bias) == (sw, m, s, bias)


def test_box_filter_keeps_its_weights():
    """§12.3: a channel whose weights are all the same takes the narrow-range scale top / |c|: a 3x3x3
    box filter of 1/27 quantizes to 127 everywhere (scale 127 x 27), not to 0 at scale 1."""
    w = np.full((3, 3, 3), 1 / 27, np.float32)
    assert asym.channel_weight_scale(w, 8) == float(np.float32(127 / np.float32(1 / 27)))
    assert asym.channel_weight_scale(np.zeros(5, np.float32), 8) == 127000.0
    assert asym.channel_weight_scale(np.full(5, -0.5, np.float32), 16) == 65534.0
    ch = asym.quantize_channel(w, 0.0, 30.0, -5, 50.0, 0, 8)
    assert (ch.weights == 127).all()
    # the channel's real output for an input of ones (q = 30 + zp): 27 x 1/27 = 1.0 -> 50 at sy = 50
    acc = int(ch.weights.astype(np.int64).sum()) * 25 + ch.bias
    assert abs(acc * ch.mma_scale / 2 ** ch.mma_shift - 50.0) < 0.5


out_ranges = st.tuples(st.floats(-1e5, 1e5, **finite), st.floats(-1e5, 1e5, **finite)).map(sorted)


@settings(max_examples=300, **SETTINGS)
@given(st.lists(st.floats(-0.0078125, 0.0078125, **finite, width=32), min_size=1, max_size=12), st.floats(-5, 5, **finite),
       st.floats(0.5, 3e4), st.integers(-128, 127), st.floats(0.05, 300), st.integers(-128, 127), out_ranges,
       st.sampled_from([8, 16]))
def test_quantize_channel_with_the_width_check(w, b, sx, zx, sy, zy, out_range, wbits):
    count("§12.3 width check")
    got = asym.quantize_channel(np.array(w, np.float32), b, sx, zx, sy, zy, wbits, tuple(out_range))
    wq, sw, m, s, bias = oa.channel(w, b, sx, zx, sy, zy, wbits, tuple(out_range))
    assert got.weights.tolist() == wq
    assert (got.weight_scale, got.mma_scale, got.mma_shift, got.bias) == (sw, m, s, bias)


def test_width_check_example():
    """§12.3: sw = 127 / 0.001, sx = 1000, output max 20: 2.54e9 needs 32 bits, two more than 30, so the
    weight scale is divided by 4; a negative end takes a sign bit more (33 bits: divided by 8)."""
    sw = float(np.float32(127 / np.float32(0.001)))
    assert asym.product_width_weight_scale(sw, 1000.0, 0.0, 20.0, 8) == float(np.float32(sw / 4))
    assert asym.product_width_weight_scale(sw, 1000.0, -20.0, 0.0, 8) == float(np.float32(sw / 8))
    assert asym.product_width_weight_scale(sw, 1000.0, 0.0, 8.0, 8) == sw          # 1.016e9: 30 bits
    assert asym.product_width_weight_scale(sw, 1000.0, 0.0, 20.0, 16) == sw         # 53 bits at 16
    w = np.array([0.001, -0.0005], np.float32)
    ch = asym.quantize_channel(w, 0.0, 1000.0, 0, 255 / 20, 0, 8, (0.0, 20.0))
    assert ch.weight_scale == pytest.approx(sw / 4, rel=0.02) and ch.weights.tolist() == [32, -16]
    assert asym.quantize_channel(w, 0.0, 1000.0, 0, 255 / 20, 0, 8).weights[0] == 127   # no range: no check


@settings(max_examples=200, **SETTINGS)
@given(st.lists(weights, min_size=1, max_size=5), st.data(), st.floats(0.5, 300), st.integers(-128, 127),
       st.floats(0.05, 300), st.integers(-128, 127), st.sampled_from([8, 16]), st.booleans())
def test_quantize_channels(ws, data, sx, zx, sy, zy, wbits, inner):
    count("§12.3 inner-product channels" if inner else "§12.3 convolution channels")
    bs = data.draw(st.lists(st.floats(-50, 50, **finite), min_size=len(ws), max_size=len(ws)))
    n = min(len(w) for w in ws)
    ws = [w[:n] for w in ws]
    got = asym.quantize_channels(np.array(ws, np.float32), bs, sx, zx, sy, zy, wbits, None, inner)
    want = oa.channels(ws, bs, sx, zx, sy, zy, wbits, None, inner)
    assert [(g.weights.tolist(), g.weight_scale, g.mma_scale, g.mma_shift, g.bias) for g in got] == \
        [(list(wq), sw, m, s, b) for wq, sw, m, s, b in want]


def test_inner_product_channels_differ_from_a_convolutions():
    """§12.3, Inner products: ratio 0.7 (sy = 0.7, sx = 1, sw = 127 / 127): the convolution's search takes
    179 / 2^8 = 0.69922, below the ratio, an inner product's 45 / 2^6 = 0.703125, above it. Both miss by more
    than 0.1% and move the weight scale to make it exact; the convolution searches again, the inner product
    keeps its first pair."""
    w = np.array([[127.0, -3.0]], np.float32)
    conv = asym.quantize_channels(w, [0.0], 1.0, 0, 0.7, 0, 8)[0]
    ip = asym.quantize_channels(w, [0.0], 1.0, 0, 0.7, 0, 8, inner_product=True)[0]
    assert (conv.mma_scale, conv.mma_shift) == (179, 8) and conv.weight_scale > 1.0
    assert (ip.mma_scale, ip.mma_shift) == (45, 6) and ip.weight_scale < 1.0
    assert ip.missed and conv.missed


def test_bias_term_width_limits_the_weight_scale():
    """A bias far above the accumulator range halves the weight scale until the bias term fits 30 bits."""
    w = np.array([1.0, -1.0, 0.5], np.float32)
    big = asym.quantize_channel(w, 3.0e7, 1.0, 0, 1.0, 0, 8)
    assert asym.bias_term_bits(big.bias) <= asym.MAX_BIAS_TERM_BITS_8
    assert big.weight_scale < 127.0
    small = asym.quantize_channel(w, 0.5, 1.0, 0, 1.0, 0, 8)
    assert small.weight_scale == pytest.approx(127.0, rel=0.02)


@settings(max_examples=200, **SETTINGS)
@given(st.floats(-1e19, 1e19, **finite))
def test_bias_term_bits(v):
    count("§12.4 bias bits")
    assert asym.bias_term_bits(v) == oa.term_bits(v)


@st.composite
def conv_case(draw):
    c, o = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    h, w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    k = draw(st.integers(1, 3))
    pad = draw(st.integers(0, k - 1))
    if h + 2 * pad < k or w + 2 * pad < k:
        pad = k
    stride = draw(st.integers(1, 2))
    in_signed = draw(st.booleans())
    xlo, xhi = (-128, 127) if in_signed else (0, 255)
    x = np.array(draw(st.lists(st.integers(xlo, xhi), min_size=c * h * w, max_size=c * h * w)),
                 np.int8 if in_signed else np.uint8).reshape(1, c, h, w)
    wq = np.array(draw(st.lists(st.integers(-128, 127), min_size=o * c * k * k, max_size=o * c * k * k)),
                  np.int8).reshape(o, c, k, k)
    bias = np.array(draw(st.lists(st.integers(-2 ** 31, 2 ** 31 - 1), min_size=o, max_size=o)), np.int64)
    m = np.array(draw(st.lists(st.integers(1, 255), min_size=o, max_size=o)))
    s = np.array(draw(st.lists(st.integers(0, 40), min_size=o, max_size=o)))
    zx = draw(st.integers(xlo, xhi))
    out_signed = draw(st.booleans())
    zy = draw(st.integers(-128, 127) if out_signed else st.integers(0, 255))
    relu = draw(st.booleans())
    return x, wq, bias, m, s, zx, out_signed, zy, relu, stride, pad


@settings(max_examples=200, **SETTINGS)
@given(conv_case())
def test_convolution_mma(case):
    count("§12.6 convolution")
    x, wq, bias, m, s, zx, out_signed, zy, relu, stride, pad = case
    out = FixedType(8, out_signed)
    lo, hi = ra.activation_bounds_zp(out, zy, 1.0, "ReLU" if relu else "none")
    got = ra.convolution_mma(x, wq, bias, m, s, out, zero_point=zx, strides=stride, pads=pad, bounds=(lo, hi))
    want = oa.conv(x[0].tolist(), wq.tolist(), bias.tolist(), m.tolist(), s.tolist(), zx,
                   *(oa.relu_bounds(*out.bounds, zy) if relu else out.bounds), stride, pad)
    assert got[0].tolist() == want


def test_zero_point_padding_cancels_in_the_bias():
    """A constant input equal to its zero point is real 0 everywhere, padding included: the output is
    the bias alone, at every pixel (border pixels too)."""
    x = np.full((1, 2, 4, 4), 37, np.uint8)
    w = np.arange(-9, 9, dtype=np.int8).reshape(1, 2, 3, 3)
    bias = np.array([100 - 37 * int(w.astype(np.int64).sum())])
    y = ra.convolution_mma(x, w, bias, [128], [7], FixedType(8, True), zero_point=37, pads=1)
    assert np.all(y == 100)


@settings(max_examples=200, **SETTINGS)
@given(st.integers(-2 ** 35, 2 ** 35), st.integers(1, 255), st.integers(0, 40), st.booleans())
def test_mma_requantize_mask_keeps_saturated_values(acc, m, s, signed):
    count("§12.6 requantize")
    lo, hi = (-128, 127) if signed else (0, 255)
    got = int(ra.mma_requantize(np.array([acc]), m, s, lo, hi)[0])
    assert got == oa.round_sat(acc * m, s, lo, hi)


scales = st.one_of(st.floats(0.5, 100), st.floats(0.01, 1000))
signed_or_not = st.sampled_from([(8, True), (8, False), (16, True)])


@st.composite
def merging_case(draw):
    """Two or three tensors of 8- or 16-bit types with their scales and zero points, and the output's."""
    n = draw(st.integers(2, 3))
    size = draw(st.integers(1, 12))
    arrays, sxs, zxs = [], [], []
    for _ in range(n):
        bits, signed = draw(signed_or_not)
        lo, hi = oa.bounds(bits, signed)
        vals = draw(st.lists(st.integers(lo, hi), min_size=size, max_size=size))
        arrays.append(np.array(vals, FixedType(bits, signed).dtype))
        sxs.append(draw(scales))
        zxs.append(draw(st.integers(lo, hi) if bits == 8 else st.integers(-300, 300)))
    return arrays, sxs, zxs, draw(scales), draw(st.integers(0, 255))


def _acc_bits(arrays):
    return 64 if any(a.dtype.itemsize > 1 for a in arrays) else 32


@settings(max_examples=300, **SETTINGS)
@given(merging_case())
def test_eltwise_sum(case):
    count("§12.7 sum")
    arrays, sxs, zxs, sy, zy = case
    try:
        ms, k, c, s = asym.sum_factors(sy, sxs, zy, zxs)
    except FixedPointError:
        assert oa.import_doubling(oa.f32(max(oa.f32(oa.f32(sy) / oa.f32(sx)) for sx in sxs) / 127))[0] > 255
        return
    assert (tuple(ms), k, c, s) == oa.sum_factors(sy, sxs, zy, zxs)
    got = ra.eltwise_sum_mma(arrays, ms, k, c, s, FixedType(8, False))
    assert got.tolist() == oa.eltwise_sum([a.tolist() for a in arrays], ms, k, c, s, 0, 255, _acc_bits(arrays))


def test_eltwise_sum_examples():
    """§12.7 by hand: sy/sa = 2 and sy/sb = 0.5 give u = 2/127 as c / 2^sh = 129 / 2^13, and b's multiplier
    round(0.5 / u) = round(31.75) = 32; an input below half a step of the other's gets 0."""
    ms, k, c, s = asym.sum_factors(2.0, [1.0, 4.0], 0, [0, 0])
    assert (c, s) == (129, 13) and ms == (127, 32) and k == 0   # 2/127 x 2^13 = 129.01
    assert asym.sum_factors(1.0, [1.0, 1.0, 1.0], 0, [0, 0, 0])[0] == (127, 127, 127)
    assert asym.sum_factors(1.0, [1.0, 500.0], 0, [0, 0])[0] == (127, 0)
    # the zero points: F = zy - (za ra + zb rb) = 10 - (4 x 2 + 8 x 0.5) = -2, K = round(-2 / u) = -127
    assert asym.sum_factors(2.0, [1.0, 4.0], 10, [4, 8])[1] == round(-2 * 8192 / 129)
    with pytest.raises(FixedPointError, match="two or more inputs"):
        asym.sum_factors(1.0, [1.0], 0, [0])


@settings(max_examples=300, **SETTINGS)
@given(merging_case(), st.floats(0.001, 100))
def test_eltwise_product(case, sy):
    count("§12.11 product")
    arrays, sxs, zxs, _, zy = case
    c, s, k = asym.product_factors(sy, sxs, zy)
    assert (c, s, k) == oa.product_factors(sy, sxs, zy)
    got = ra.eltwise_product_mma(arrays, zxs, k, c, s, FixedType(8, False))
    assert got.tolist() == oa.eltwise_product([a.tolist() for a in arrays], zxs, k, c, s, 0, 255, _acc_bits(arrays))


def test_eltwise_product_ratio_multiplies_by_each_inverse_scale():
    """§12.11: the ratio is sy x float32(1/sa) x float32(1/sb) in float32 steps, not sy / (sa sb): for these
    scales the two differ by one float32 step and §12.1's search then picks another multiplier."""
    sy, sa, sb = 236.3910675048828, 111.10105895996094, 88.2542724609375
    assert asym.product_factors(sy, [sa, sb], 0)[:2] == oa.product_factors(sy, [sa, sb], 0)[:2] == (99, 12)
    f = np.float32
    assert asym.mma_search(float(f(f(sy) / f(f(sa) * f(sb))))).scale == 197


def test_eltwise_product_broadcasts_and_removes_the_zero_points():
    """§12.11: a (1, 3, 1) times a (1, 1, 4) tensor is (1, 3, 4); each output is the product of its two
    real values requantized (within one step); a 16-bit input takes the 64-bit accumulator."""
    sa, za, sb, zb, sy, zy = 20.0, 5, 10.0, -3, 4.0, 7
    a = np.array([[[40], [-60], [100]]], np.int8)
    b = np.array([[[-20, 0, 50, 120]]], np.int8)
    c, s, k = asym.product_factors(sy, [sa, sb], zy)
    got = ra.eltwise_product_mma([a, b], [za, zb], k, c, s, FixedType(8, True))
    assert got.shape == (1, 3, 4)
    real = ((a.astype(float) - za) / sa) * ((b.astype(float) - zb) / sb)
    assert np.abs(got - np.clip(np.round(real * sy + zy), -128, 127)).max() <= 1
    flat = [np.broadcast_to(v, (1, 3, 4)).ravel().tolist() for v in (a, b)]
    assert got.ravel().tolist() == oa.eltwise_product(flat, [za, zb], k, c, s, -128, 127)
    wide = ra.eltwise_product_mma([a.astype(np.int16) * 200, b], [0, zb], k, c, s, FixedType(16, True))
    assert wide.ravel().tolist() == oa.eltwise_product([[v * 200 for v in flat[0]], flat[1]], [0, zb], k, c, s,
                                                       -32768, 32767, acc_bits=64)
    with pytest.raises(FixedPointError, match="do not broadcast"):
        ra.eltwise_product_mma([a, np.zeros((1, 2, 4), np.int8)], [0, 0], k, c, s, FixedType(8, True))


@settings(max_examples=300, **SETTINGS)
@given(merging_case())
def test_eltwise_max(case):
    count("§12.11 max")
    arrays, sxs, zxs, sy, zy = case
    try:
        ms, k, c, s = asym.max_factors(sy, sxs, zy)
    except FixedPointError:
        return
    assert (tuple(ms), k, c, s) == oa.max_factors(sy, sxs, zy)
    got = ra.eltwise_max_mma(arrays, zxs, ms, k, c, s, FixedType(8, False))
    assert got.tolist() == oa.eltwise_max([a.tolist() for a in arrays], zxs, ms, k, c, s, 0, 255, _acc_bits(arrays))


@settings(max_examples=200, **SETTINGS)
@given(st.lists(st.floats(-1000, 1000, **finite, width=32), min_size=1, max_size=16), st.floats(0.01, 100),
       st.integers(-128, 127))
def test_data_convert_in(xs, scale, zp):
    count("§12.9 data convert")
    got = ra.data_convert_to_fixed_zp(np.array(xs, np.float32), scale, zp, FixedType(8, True))
    assert got.tolist() == [oa.convert_in(v, scale, zp, 8, True) for v in xs]


def test_requantized_channel_reproduces_the_real_value():
    """End to end on one channel: float conv output vs the style-4 integers read back, within one step."""
    rng = np.random.default_rng(4)
    w = rng.normal(0, 0.3, (1, 3, 3, 3)).astype(np.float32)
    b = 0.7
    xf = rng.uniform(-1, 2, (1, 3, 5, 5)).astype(np.float32)
    sx, zx = asym.activation_scale_and_zero_point(-1, 2, 8, True)
    ref = np.einsum("chw,ochw->o", np.pad(xf[0], ((0, 0), (1, 1), (1, 1)))[:, 1:4, 1:4], w) + b
    sy, zy = asym.activation_scale_and_zero_point(-4, 4, 8, True)
    ch = asym.quantize_channel(w[0], b, sx, zx, sy, zy, 8)
    xq = ra.data_convert_to_fixed_zp(xf, sx, zx, FixedType(8, True))
    y = ra.convolution_mma(xq, ch.weights[None], [ch.bias], [ch.mma_scale], [ch.mma_shift], FixedType(8, True),
                           zero_point=zx, pads=1)
    back = (int(y[0, 0, 1, 1]) - zy) / sy
    assert math.isclose(back, float(ref[0]), abs_tol=3 / sy)


@pytest.mark.parametrize("b,sx,zx,sy,zy,wbits", [(1e9, 10.0, 3, 2.0, -5, 8), (-4e9, 3.0, 0, 0.5, 7, 8),
                                                 (5e9, 100.0, 12, 1.0, 0, 8)])
def test_bias_beyond_its_container_makes_a_constant_channel(b, sx, zx, sy, zy, wbits):
    count("§12.5 bias-only channel")
    w = np.array([0.5, -0.25, 0.125, 1.0], np.float32)
    got = asym.quantize_channel(w, b, sx, zx, sy, zy, wbits)
    want = oa.channel(w.tolist(), b, sx, zx, sy, zy, wbits)
    assert got.zeroed and not got.weights.any()
    assert (got.weights.tolist(), got.weight_scale, got.mma_scale, got.mma_shift, got.bias) == want


def test_weight_scale_moves_to_make_the_multiplier_exact():
    """§12.3 step 3: ratio 1/4 is exact (kept); ratio 0.7 = 179/2^8 is 0.112% off (over 0.1%), so the weight
    scale moves by that much to make 179/2^8 exact."""
    kept = asym.quantize_channel(np.array([1.0, -0.5], np.float32), 0.0, 1.0, 0, 127.0 / 4, 0)
    assert kept.weight_scale == 127.0
    moved = asym.quantize_channel(np.array([1.0, -0.5], np.float32), 0.0, 1.0, 0, 127.0 * 0.7, 0)
    assert (moved.mma_scale, moved.mma_shift) == (179, 8)
    assert moved.weight_scale == pytest.approx(127.0 * 0.7 / (179 / 256), rel=1e-6)


def test_the_eighth_halving_sets_the_weight_scale_to_one():
    """§12.4: a bias term that would fit after the 8th halving of an 8-bit channel's scale (127/256) gets
    sw = 1 there instead, and stops."""
    w = np.array([0.5, -0.25, 0.125, 1.0], np.float32)
    got = asym.quantize_channel(w, 1.5e8, 10.0, 0, 2.0, 0, 8)
    assert got.weight_scale == 1.0 and not got.zeroed
    want = oa.channel(w.tolist(), 1.5e8, 10.0, 0, 2.0, 0, 8)
    assert (got.weights.tolist(), got.weight_scale, got.mma_scale, got.mma_shift, got.bias) == want


@settings(max_examples=100, **SETTINGS)
@given(st.integers(1, 40), st.sampled_from([(np.int8, 127), (np.int16, 32767), (np.int64, 2 ** 28)]), st.data())
def test_exact_matmul_is_the_integer_product(k, kind, data):
    """The float64 route of the style-4 kernels gives int64's product (its bound test picks int64 when a
    partial sum could pass 2^53)."""
    count("§12.6 exact matmul")
    dtype, top = kind
    vals = st.integers(-top - 1, top)
    a = np.array(data.draw(st.lists(vals, min_size=3 * k, max_size=3 * k)), dtype).reshape(3, k)
    b = np.array(data.draw(st.lists(vals, min_size=k * 2, max_size=k * 2)), dtype).reshape(k, 2)
    want = [[sum(int(a[i, j]) * int(b[j, c]) for j in range(k)) for c in range(2)] for i in range(3)]
    got = ra.exact_matmul(a, b)
    assert got.dtype == np.int64 and got.tolist() == want


@settings(max_examples=200, **SETTINGS)
@given(st.floats(0.05, 300), st.integers(-128, 127), st.floats(0.05, 300), st.integers(0, 255),
       st.lists(st.integers(-128, 127), min_size=1, max_size=12), st.lists(st.integers(0, 255), min_size=1, max_size=12))
def test_concat(sx, zx, sy, zy, a, b):
    count("§12.8 concat")
    if oa.f32(oa.f32(sy) / oa.f32(sx)) > 255:
        with pytest.raises(FixedPointError, match="more than 255 times"):
            asym.concat_factors(sy, sx, zy, zx)
        return
    fa = asym.concat_factors(sy, sx, zy, zx)
    fb = asym.concat_factors(sy, 2.0 * sx, zy, 0)
    assert fa == oa.concat_factors(sy, sx, zy, zx) and fb == oa.concat_factors(sy, 2.0 * sx, zy, 0)
    xa, xb = np.array(a, np.int8)[None], np.array(b, np.uint8)[None]
    got = ra.concat_mma([xa, xb], [fa[0], fb[0]], [fa[1], fb[1]], [fa[2], fb[2]], FixedType(8, False), axis=1)
    assert got[0].tolist() == oa.concat_part(a, *fa, 0, 255) + oa.concat_part(b, *fb, 0, 255)


def test_mma_search_matches_the_plain_rule():
    """The vectorized search gives the one-multiplier-at-a-time rule's answers, ties and clamps included."""
    rng = np.random.default_rng(5)
    ratios = list(10.0 ** rng.uniform(-12, 2.5, 4000))
    # ratios at a rounding tie of log2(m / r) (m / r = 2^(k + 1/2)), and exact powers of two
    ratios += [m / 2.0 ** (k + 0.5) for m in (1, 3, 77, 181, 255) for k in (-1, 0, 3, 17, 39)]
    ratios += [2.0 ** -k for k in range(-7, 70)] + [255.0, 300.0, 1e-30]
    for wbits in (8, 16):
        for r in ratios:
            assert asym.mma_search(r, wbits) == asym.mma_search_plain(r, wbits), (r, wbits)


def test_symmetric_scale_examples():
    # §12.13's example: [-3.1, 5.2] signed 8 bit read by a batch norm: 127 / 5.2 in float32, zero point 0
    assert asym.symmetric_scale(-3.1, 5.2, 8, True) == float(np.float32(127) / np.float32(5.2))
    # unsigned: 255 (65535) over the top; a range inside the type keeps scale 1
    assert asym.symmetric_scale(0.0, 5.0, 8, False) == 51.0
    assert asym.symmetric_scale(0.0, 100.0, 16, False) == float(np.float32(655.35))
    assert asym.symmetric_scale(-128.0, 50.0, 8, True) == 1.0      # 127/128 < 1, the range fits int8
    assert asym.symmetric_scale(-100.0, 300.0, 8, True) == float(np.float32(127) / np.float32(300))
    assert asym.symmetric_scale(-100.0, 30.0, 8, True) == float(np.float32(1.27))


def test_symmetric_tensors_follow_the_zero_point_layers():
    """§12.2's list: a data layer's tensors, a max pool's, and a sum's that a transpose passes to a max pool
    are symmetric; a convolution's read through a reshape by a convolution is not."""
    layers = [("Data", (), (0,)), ("Conv", (0,), (1,)), ("Reshape", (1,), (2,)), ("Conv", (2,), (3,)),
              ("Conv", (3,), (4,)), ("Sum", (4, 3), (5,)), ("Transpose", (5,), (6,)), ("MaxPool", (6,), (7,)),
              ("Conv", (7,), (8,)), ("Data", (8,), ())]
    assert oa.symmetric_tensors(layers) == {0, 5, 6, 7, 8}


# ---- §12.12 softmax, tables, PReLU, layer norm ----------------------------------------------------------

from tidlx.emulator.fixed import arith as fa  # noqa: E402

kinds = st.sampled_from(["Sigmoid", "Tanh", "GELU", "ELU", "HardSigmoid"])
scales = st.floats(0.05, 300.0, **finite)


@settings(max_examples=60, **SETTINGS)
@given(st.lists(st.integers(0, 200), min_size=1, max_size=20), st.integers(0, 55), st.floats(0.5, 64.0),
       st.sampled_from(["double", "taylor"]))
def test_softmax_reads_only_differences(row, shift, in_scale, rule):
    """The fixed-point softmax of a row and of the row shifted by a common zero point are one output, the
    oracle's (§8.9's integers, zero point 0)."""
    count("§12.12 softmax")
    q = np.array([row], np.uint8)
    moved = np.array([[v + shift for v in row]], np.uint8)
    expected = oa.softmax_fixed_row(row, 0, in_scale, 256.0, 8, rule)
    for x in (q, moved):
        got = fa.softmax_fixed(x, in_scale, 256.0, FixedType(8, False), exp_rule=rule)
        assert got.reshape(-1).tolist() == expected
    if len(row) <= 16:   # no pad lanes (11.x): the float output does not see the zero point either
        signed = np.array([[v - 100 for v in row]], np.int8)
        assert fa.softmax(signed, in_scale).tolist() == fa.softmax((signed + 7).astype(np.int8), in_scale).tolist()


@settings(max_examples=60, **SETTINGS)
@given(kinds, scales, st.integers(-128, 255), st.booleans(), scales, st.integers(-128, 255), st.booleans(),
       st.floats(0.05, 2.0), st.floats(-1.0, 1.0))
def test_activation_table_with_zero_points(kind, sx, zx, in_signed, sy, zy, out_signed, alpha, beta):
    count("§12.12 table")
    lo, hi = (-128, 127) if in_signed else (0, 255)
    zx = min(max(zx, lo), hi)
    olo, ohi = (-128, 127) if out_signed else (0, 255)
    zy = min(max(zy, olo), ohi)
    got = asym.activation_table_zp(kind, sx, zx, in_signed, sy, zy, out_signed, alpha, beta)
    assert got.tolist() == oa.table_zp(kind, sx, zx, in_signed, sy, zy, out_signed, alpha, beta)


def test_sigmoid_table_example():
    """§12.12's example: int8 at scale 16, zero point -10; the output [0, 1] at scale 255, zero point 0."""
    table = asym.activation_table_zp("Sigmoid", 16.0, -10, True, 255.0, 0, False)
    assert (table[-10 + 128], table[6 + 128], table[-26 + 128]) == (128, 186, 69)
    assert table.tolist() == oa.table_zp("Sigmoid", 16.0, -10, True, 255.0, 0, False)


@settings(max_examples=60, **SETTINGS)
@given(st.floats(0.3, 60.0), st.integers(-128, 255), st.booleans(), st.integers(0, 12))
def test_pla_sigmoid_with_zero_point(sx, zx, signed, rb):
    count("§12.12 AM62A sigmoid")
    lo, hi = (-128, 127) if signed else (0, 255)
    zx = min(max(zx, lo), hi)
    assert asym.pla_sigmoid_table_zp(sx, zx, signed, rb).tolist() == oa.pla_sigmoid_zp(sx, zx, signed, rb)


def test_pla_sigmoid_output_scale():
    import oracle
    for sx, top in ((16.0, 1.0), (10.0, 0.9), (3.0, 0.5)):
        rb, scale = asym.pla_sigmoid_output(sx, top, 8)
        acc = 128 * sx
        assert rb == oracle.round_bits(acc, 0.0, top, 8, False)
        assert scale == oracle.tensor_scale(acc, rb)


@settings(max_examples=40, **SETTINGS)
@given(scales, st.integers(-200, 255), st.sampled_from([8, 16]), st.booleans(), scales, st.integers(-200, 255),
       st.booleans(), st.floats(0.0, 0.9))
def test_leaky_relu_table_with_zero_points(sx, zx, bits, in_signed, sy, zy, out_signed, slope):
    count("§12.12 leaky ReLU table")
    lo, hi = oa.bounds(bits, in_signed)
    zx = min(max(zx, lo), hi)
    olo, ohi = oa.bounds(bits, out_signed)
    zy = min(max(zy, olo), ohi)
    got = asym.leaky_relu_table_zp(sx, zx, bits, in_signed, sy, zy, out_signed, slope)
    assert got.tolist() == oa.leaky_table_zp(sx, zx, bits, in_signed, sy, zy, out_signed, slope)


@settings(max_examples=60, **SETTINGS)
@given(st.floats(0.5, 60.0), st.integers(-128, 127), st.floats(0.5, 60.0), st.integers(-128, 127),
       st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=4), st.data())
def test_prelu(sx, zx, sy, zy, slopes, data):
    count("§12.12 PReLU")
    pos, neg = asym.prelu_factors(sy, sx, slopes)
    opos, oneg = oa.prelu_factors(sx, sy, slopes)
    assert (pos.scale, pos.shift) == tuple(opos) and [tuple(v) for v in neg] == oneg
    c = len(slopes)
    q = np.array(data.draw(st.lists(st.integers(-128, 127), min_size=2 * c, max_size=2 * c)), np.int8).reshape(1, c, 2)
    got = ra.prelu_mma(q, zx, pos.scale, pos.shift, [m for m, _ in neg], [s for _, s in neg], zy, FixedType(8, True))
    expected = [[oa.prelu_value(int(v), zx, zy, opos, oneg[ch], -128, 127) for v in q[0, ch]] for ch in range(c)]
    assert got[0].tolist() == expected


def test_prelu_example():
    """§12.12's example: Sx 10, Zx 5, Sy 20, Zy -3, slope 0.25."""
    pos, neg = asym.prelu_factors(20.0, 10.0, [0.25])
    assert (pos.scale, pos.shift) == (2, 0) and neg == ((1, 1),)
    q = np.array([[[25, -15, -14]]], np.int8)
    assert ra.prelu_mma(q, 5, 2, 0, [1], [1], -3, FixedType(8, True)).tolist() == [[[37, -13, -12]]]


@settings(max_examples=40, **SETTINGS)
@given(st.lists(st.integers(-60, 60), min_size=2, max_size=24), st.integers(-60, 60), st.floats(0.5, 50.0))
def test_layer_norm_reads_only_differences(row, shift, in_scale):
    """§12.12: W q - S1 and W S2 - S1^2 are the same for a row shifted by a common zero point."""
    count("§12.12 layer norm")
    q = np.array([row], np.int8)
    moved = np.array([[v + shift for v in row]], np.int8)
    out = FixedType(8, True)
    assert np.array_equal(fa.layer_norm_core(q, in_scale, 16.0, 1e-5, out),
                          fa.layer_norm_core(moved, in_scale, 16.0, 1e-5, out))


@settings(max_examples=60, **SETTINGS)
@given(st.floats(0.5, 60.0), st.floats(1.0, 500.0), st.floats(0.5, 60.0), st.integers(-128, 127),
       st.floats(-1.0, 1.0), st.lists(st.integers(-(2 ** 20), 2 ** 20), min_size=1, max_size=6))
def test_prelu_ending_a_weighted_layer(sx, sw, sy, zy, slope, accs):
    """§12.12: the accumulator (zero point 0 in its bias) through the channel's positive pair (§12.3's) or its
    negative pair, the output's zero point added."""
    count("§12.12 fused PReLU")
    r = float(np.float32(np.float32(sy) / np.float32(np.float32(sx) * np.float32(sw))))
    pm, ps, _ = oa.mma(r, 8)
    nm, ns = oa.fused_prelu_negative(sx, sw, sy, slope)
    got_neg = asym.prelu_factors(sy, float(np.float32(np.float32(sx) * np.float32(sw))), [slope])[1][0]
    assert got_neg == (nm, ns)
    acc = np.array(accs, np.int64).reshape(1, 1, -1)
    got = ra.prelu_requantize(acc, [pm], [ps], [nm], [ns], zy, FixedType(8, True))
    assert got.reshape(-1).tolist() == [oa.prelu_value(a, 0, zy, (pm, ps), (nm, ns), -128, 127) for a in accs]


@settings(max_examples=4, **SETTINGS)
@given(kinds, st.floats(1.0, 3000.0), st.integers(-30000, 30000), st.booleans(), st.floats(1.0, 30000.0),
       st.integers(-30000, 30000), st.floats(0.05, 2.0))
def test_16_bit_activation_table_with_zero_points(kind, sx, zx, out_signed, sy, zy, alpha):
    """§12.12, tidlx's choice at 16 bits: the same rule over the 65536 input values."""
    count("§12.12 16-bit table")
    zy = zy if out_signed else abs(zy)
    got = asym.activation_table_zp(kind, sx, zx, True, sy, zy, out_signed, alpha, 0.5, bits=16)
    assert got.size == 65536
    assert got.tolist() == oa.table_zp(kind, sx, zx, True, sy, zy, out_signed, alpha, 0.5, bits=16)
