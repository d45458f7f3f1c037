"""The runtime rules (emulator/fixed/arith.py) against the oracle (oracle.py), bit for bit, on random
layers drawn by hypothesis: shapes, groups, strides, dilations, pads, roundBits, bit widths,
signedness, values at the saturation edges and accumulators near their limits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import oracle
from fixed_cases import count
from tidlx.backends.tidl import numerics as nx
from tidlx.emulator import fixed as fx

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

types = st.tuples(st.sampled_from([8, 16]), st.booleans())


def edge_values(bits, signed):
    """Integers of a type, often at its ends."""
    lo, hi = oracle.bounds(bits, signed)
    return st.one_of(st.integers(lo, hi), st.sampled_from(sorted({lo, lo + 1, 0, 1, hi - 1, hi})))


@st.composite
def int_array(draw, shape, bits, signed):
    size = int(np.prod(shape))
    values = draw(st.lists(edge_values(bits, signed), min_size=size, max_size=size))
    return np.array(values, dtype=oracle.dtype(bits, signed)).reshape(shape)


@st.composite
def out_type_and_bounds(draw):
    """An output type, and activation bounds inside it (sometimes the whole type)."""
    bits, signed = draw(types)
    lo, hi = oracle.bounds(bits, signed)
    if draw(st.booleans()):
        a, b = sorted((draw(st.integers(lo, hi)), draw(st.integers(lo, hi))))
        return fx.FixedType(bits, signed), (a, b)
    return fx.FixedType(bits, signed), None


@st.composite
def bias_parts(draw, channels, weight_bits):
    """biasA x biasB per channel: from the split's ranges, or biasA near the int32 ends (biasB 1) so that
    an 8-bit-weight accumulator wraps."""
    if weight_bits == 8 and draw(st.booleans()):
        near = st.one_of(st.integers(2 ** 31 - 2 ** 16, 2 ** 31 - 1), st.integers(-2 ** 31, -2 ** 31 + 2 ** 16))
        return (np.array(draw(st.lists(near, min_size=channels, max_size=channels)), np.int64),
                np.ones(channels, np.int64))
    a_lo, a_hi = oracle.bounds(2 * weight_bits, True)
    b_max = 255 if weight_bits == 8 else 65535
    a = draw(st.lists(st.one_of(st.integers(a_lo, a_hi), st.sampled_from([a_lo, a_hi, 0])),
                      min_size=channels, max_size=channels))
    b = draw(st.lists(st.integers(1, b_max), min_size=channels, max_size=channels))
    return np.array(a, np.int64), np.array(b, np.int64)


@st.composite
def round_bits_for(draw, channels, weight_bits):
    top = 31 if weight_bits == 8 else 48
    if draw(st.booleans()):
        return draw(st.lists(st.integers(0, top), min_size=channels, max_size=channels))
    return draw(st.integers(0, top))


def assert_same(got, want, ftype=None):
    assert got.shape == want.shape
    if ftype is not None:
        assert got.dtype == ftype.dtype
    np.testing.assert_array_equal(got.astype(np.int64), want)


@st.composite
def conv_cases(draw):
    groups = draw(st.integers(1, 3))
    cg, og = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    if h + pads[0] + pads[2] < dilations[0] * (kh - 1) + 1:
        kh = 1
    if w + pads[1] + pads[3] < dilations[1] * (kw - 1) + 1:
        kw = 1
    in_bits, in_signed = draw(types)
    weight_bits = draw(st.sampled_from([8, 16]))
    x = draw(int_array((n, groups * cg, h, w), in_bits, in_signed))
    wt = draw(int_array((groups * og, cg, kh, kw), weight_bits, True))
    bias_a, bias_b = draw(bias_parts(groups * og, weight_bits))
    rb = draw(round_bits_for(groups * og, weight_bits))
    out, bounds = draw(out_type_and_bounds())
    return dict(x=x, w=wt, bias_a=bias_a, bias_b=bias_b, rb=rb, out=out, bounds=bounds, strides=strides,
                pads=pads, dilations=dilations, groups=groups, weight_bits=weight_bits)


def _lo_hi(case):
    return case["bounds"] or case["out"].bounds


@settings(max_examples=250, **SETTINGS)
@given(conv_cases())
def test_convolution_matches_oracle(case):
    count("convolution")
    got = fx.convolution(case["x"], case["w"], case["bias_a"], case["bias_b"], case["rb"], case["out"],
                         strides=case["strides"], pads=case["pads"], dilations=case["dilations"],
                         groups=case["groups"], bounds=case["bounds"])
    want = oracle.convolution(case["x"], case["w"], case["bias_a"], case["bias_b"], case["rb"], case["weight_bits"],
                              case["out"].bits, case["out"].signed, *_lo_hi(case), case["strides"], case["pads"],
                              case["dilations"], case["groups"])
    assert_same(got, want, case["out"])


@settings(max_examples=120, **SETTINGS)
@given(st.data())
def test_deconvolution_matches_oracle(data):
    count("deconvolution")
    groups, cg, og = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3)), data.draw(st.integers(1, 2))
    h, w = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    kh, kw = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    strides = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    dilations = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2)))
    full_h, full_w = (h - 1) * strides[0] + dilations[0] * (kh - 1) + 1, (w - 1) * strides[1] + dilations[1] * (kw - 1) + 1
    pt, pb = data.draw(st.integers(0, (full_h - 1) // 2)), data.draw(st.integers(0, (full_h - 1) // 2))
    pl, pr = data.draw(st.integers(0, (full_w - 1) // 2)), data.draw(st.integers(0, (full_w - 1) // 2))
    in_bits, in_signed = data.draw(types)
    weight_bits = data.draw(st.sampled_from([8, 16]))
    x = data.draw(int_array((1, groups * cg, h, w), in_bits, in_signed))
    wt = data.draw(int_array((groups * cg, og, kh, kw), weight_bits, True))
    bias_a, bias_b = data.draw(bias_parts(groups * og, weight_bits))
    rb = data.draw(round_bits_for(groups * og, weight_bits))
    out, bounds = data.draw(out_type_and_bounds())
    pads = (pt, pl, pb, pr)
    got = fx.deconvolution(x, wt, bias_a, bias_b, rb, out, strides=strides, pads=pads, dilations=dilations,
                           groups=groups, bounds=bounds)
    want = oracle.deconvolution(x, wt, bias_a, bias_b, rb, weight_bits, out.bits, out.signed,
                                *(bounds or out.bounds), strides, pads, dilations, groups)
    assert_same(got, want, out)


@settings(max_examples=150, **SETTINGS)
@given(st.data())
def test_inner_product_matches_oracle(data):
    count("inner_product")
    n, k, m = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 40)), data.draw(st.integers(1, 5))
    in_bits, in_signed = data.draw(types)
    weight_bits = data.draw(st.sampled_from([8, 16]))
    x = data.draw(int_array((n, k), in_bits, in_signed))
    wt = data.draw(int_array((m, k), weight_bits, True))
    bias_a, bias_b = data.draw(bias_parts(m, weight_bits))
    rb = data.draw(round_bits_for(m, weight_bits))
    out, bounds = data.draw(out_type_and_bounds())
    got = fx.inner_product(x, wt, bias_a, bias_b, rb, out, bounds=bounds)
    want = oracle.inner_product(x, wt, bias_a, bias_b, rb, weight_bits, out.bits, out.signed, *(bounds or out.bounds))
    assert_same(got, want, out)


@settings(max_examples=150, **SETTINGS)
@given(st.data())
def test_batch_norm_matches_oracle(data):
    count("batch_norm")
    c = data.draw(st.integers(1, 4))
    shape = (data.draw(st.integers(1, 2)), c, data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4)))
    in_bits, in_signed = data.draw(types)
    weight_bits = data.draw(st.sampled_from([8, 16]))
    x = data.draw(int_array(shape, in_bits, in_signed))
    wt = data.draw(int_array((c,), weight_bits, True))
    bias_a, bias_b = data.draw(bias_parts(c, weight_bits))
    rb = data.draw(round_bits_for(c, weight_bits))
    out, bounds = data.draw(out_type_and_bounds())
    got = fx.batch_norm(x, wt, bias_a, bias_b, rb, out, bounds=bounds)
    want = oracle.batch_norm(x, wt, bias_a, bias_b, rb, weight_bits, out.bits, out.signed, *(bounds or out.bounds))
    assert_same(got, want, out)


@settings(max_examples=300, **SETTINGS)
@given(st.data())
def test_requantize_16bit_to_8bit_matches_oracle(data):
    count("requantize_16bit_to_8bit")
    signed = data.draw(st.booleans())
    acc = np.array(data.draw(st.lists(st.integers(-2 ** 47, 2 ** 47), min_size=1, max_size=20)), np.int64)
    rb = data.draw(st.integers(0, 40))
    lo, hi = oracle.bounds(8, signed)
    got = fx.requantize_16bit_to_8bit(acc, rb, signed, lo, hi)
    want = np.array([oracle.requantize(int(a), rb, 16, 8, signed, lo, hi) for a in acc], np.int64)
    assert_same(got, want)


@settings(max_examples=300, **SETTINGS)
@given(st.data())
def test_round_sat_matches_oracle(data):
    count("round_sat")
    values = data.draw(st.lists(st.one_of(st.integers(-2 ** 63, 2 ** 63 - 1),
                                          st.sampled_from([-2 ** 63, 2 ** 63 - 1, -1, 0, 1])), min_size=1, max_size=20))
    b = data.draw(st.integers(0, 62))
    lo, hi = sorted((data.draw(st.integers(-2 ** 40, 2 ** 40)), data.draw(st.integers(-2 ** 40, 2 ** 40))))
    got = fx.round_sat(np.array(values, np.int64), b, lo, hi)
    assert_same(got, np.array([oracle.round_sat(v, b, lo, hi) for v in values], np.int64))


@st.composite
def eltwise_cases(draw):
    c, h, w = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 4))
    k = draw(st.integers(2, 3))
    inputs, input_bits = [], []
    for j in range(k):
        bits, signed = draw(types)
        shape = (1, c, h, w) if j == 0 or draw(st.booleans()) else (1, c, 1, 1)   # a per-channel broadcast
        inputs.append(draw(int_array(shape, bits, signed)))
        input_bits.append(bits)
    # multipliers as §6.5 makes them (< 2^Q), or large enough to drive int32 to its ends
    multipliers = [draw(st.one_of(st.integers(0, 2 ** 14), st.integers(2 ** 20, 2 ** 31 - 1))) for _ in range(k)]
    rb = draw(st.integers(0, 31))
    out, bounds = draw(out_type_and_bounds())
    return inputs, input_bits, multipliers, rb, out, bounds


@settings(max_examples=200, **SETTINGS)
@given(eltwise_cases(), st.sampled_from(["sum", "max", "product"]))
def test_eltwise_matches_oracle(case, kind):
    count(f"eltwise_{kind}")
    inputs, input_bits, multipliers, rb, out, bounds = case
    if kind == "sum":
        got = fx.eltwise_sum(inputs, multipliers, rb, out, bounds=bounds)
    elif kind == "max":
        got = fx.eltwise_max(inputs, multipliers, rb, out, bounds=bounds)
    else:
        got = fx.eltwise_product(inputs, rb, out, bounds=bounds)
    want = oracle.eltwise(kind, inputs, multipliers, rb, *(bounds or out.bounds), input_bits)
    assert_same(got, want, out)


@st.composite
def pool_cases(draw):
    h, w = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pads = (draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)),
            draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)))
    if h + pads[0] + pads[2] < kh:
        kh, pads = 1, (0, pads[1], 0, pads[3])
    if w + pads[1] + pads[3] < kw:
        kw, pads = 1, (pads[0], 0, pads[2], 0)
    bits, signed = draw(types)
    x = draw(int_array((draw(st.integers(1, 2)), draw(st.integers(1, 2)), h, w), bits, signed))
    return x, (kh, kw), (sh, sw), pads, draw(st.booleans())


@settings(max_examples=200, **SETTINGS)
@given(pool_cases())
def test_max_pool_matches_oracle(case):
    count("max_pool")
    x, kernel, strides, pads, ceil_mode = case
    got = fx.max_pool(x, kernel, strides, pads, ceil_mode=ceil_mode)
    assert got.dtype == x.dtype
    assert_same(got, oracle.max_pool(x, kernel, strides, pads, ceil_mode))


@settings(max_examples=200, **SETTINGS)
@given(pool_cases(), st.sampled_from([8, 12]), st.integers(0, 20), out_type_and_bounds())
def test_average_pool_matches_oracle(case, q, rb, out_and_bounds):
    count("average_pool")
    x, kernel, strides, pads, ceil_mode = case
    out, bounds = out_and_bounds
    got = fx.average_pool(x, kernel, strides, pads, q, rb, out, ceil_mode=ceil_mode, bounds=bounds)
    want = oracle.average_pool(x, kernel, strides, pads, q, rb, out.bits, *(bounds or out.bounds), ceil_mode)
    assert_same(got, want, out)


@settings(max_examples=150, **SETTINGS)
@given(st.data())
def test_global_average_pool_matches_oracle(data):
    count("global_average_pool")
    bits, signed = data.draw(types)
    shape = (1, data.draw(st.integers(1, 3)), data.draw(st.integers(1, 12)), data.draw(st.integers(1, 12)))
    x = data.draw(int_array(shape, bits, signed))
    q, rb = data.draw(st.sampled_from([8, 12])), data.draw(st.integers(0, 24))
    out, bounds = data.draw(out_type_and_bounds())
    got = fx.global_average_pool(x, q, rb, out, bounds=bounds)
    assert_same(got, oracle.global_average_pool(x, q, rb, out.bits, *(bounds or out.bounds)), out)


@settings(max_examples=150, **SETTINGS)
@given(st.data())
def test_concat_matches_oracle(data):
    count("concat")
    axis = data.draw(st.sampled_from([1, 2, 3]))
    base = [1, data.draw(st.integers(1, 3)), data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))]
    inputs = []
    for _ in range(data.draw(st.integers(1, 3))):
        shape = list(base)
        shape[axis] = data.draw(st.integers(1, 3))
        inputs.append(data.draw(int_array(tuple(shape), *data.draw(types))))
    multipliers = [data.draw(st.one_of(st.integers(0, 2 ** 15), st.integers(2 ** 20, 2 ** 31 - 1))) for _ in inputs]
    rb = data.draw(st.integers(0, 31))
    out, bounds = data.draw(out_type_and_bounds())
    got = fx.concat(inputs, multipliers, rb, out, axis=axis, bounds=bounds)
    assert_same(got, oracle.concat(inputs, multipliers, rb, *(bounds or out.bounds), axis), out)


@settings(max_examples=200, **SETTINGS)
@given(st.data())
def test_resize_matches_oracle(data):
    count("resize")
    bits, signed = data.draw(types)
    x = data.draw(int_array((1, data.draw(st.integers(1, 2)), data.draw(st.integers(1, 4)),
                             data.draw(st.integers(1, 4))), bits, signed))
    if data.draw(st.booleans()):
        rh = rw = data.draw(st.sampled_from([2, 4]))     # the integer-weight path
    else:
        rh, rw = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    got_n, got_b = fx.resize_nearest(x, rh, rw), fx.resize_bilinear(x, rh, rw)
    assert got_n.dtype == got_b.dtype == x.dtype
    assert_same(got_n, oracle.resize_nearest(x, rh, rw))
    assert_same(got_b, oracle.resize_bilinear(x, rh, rw))


@settings(max_examples=150, **SETTINGS)
@given(st.data())
def test_softmax_matches_oracle(data):
    count("softmax")
    bits, signed = data.draw(types)
    length = data.draw(st.integers(1, 40))
    rows = data.draw(st.integers(1, 3))
    q = data.draw(int_array((rows, 2, length), bits, signed))
    in_scale = data.draw(st.one_of(st.floats(0.01, 300.0), st.sampled_from([1.0, 0.5, 32.0, 127.0])))
    axis = data.draw(st.sampled_from([-1, 0]))
    narrow = data.draw(st.booleans())     # 08.06's pad lanes for rows narrower than the lanes
    lanes = data.draw(st.sampled_from([16, 8]))     # a 512-bit or a 256-bit C7x vector of float32
    got = fx.softmax(q, in_scale, axis=axis, narrow_row_pads=narrow, lanes=lanes)
    want = np.moveaxis(oracle.softmax_last_axis(np.moveaxis(q, axis, -1), in_scale, lanes=lanes,
                                                narrow_row_pads=narrow), -1, axis)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))    # the same float bits


@settings(max_examples=200, **SETTINGS)
@given(st.data())
def test_activation_bounds_and_data_convert_match_oracle(data):
    count("activation_and_data_convert")
    bits, signed = data.draw(types)
    out = fx.FixedType(bits, signed)
    scale = data.draw(st.one_of(st.floats(1e-3, 1e4), st.integers(-4, 8).map(lambda e: 2.0 ** e),
                                st.sampled_from([36.255])))
    activation = data.draw(st.sampled_from(["none", "relu", "relu6", "clip"]))
    lo_c, hi_c = sorted((data.draw(st.floats(-50, 50)), data.draw(st.floats(-50, 50))))
    assert fx.activation_bounds(out, activation, scale, lo_c, hi_c) == \
        oracle.activation_bounds(bits, signed, activation, scale, lo_c, hi_c)
    ties = st.integers(-300, 300).map(lambda k: (k + 0.5) / scale)     # x * scale = k + 1/2 (exact for 2^e)
    # just inside a half: float32 rounds (k + 1/2 - ulp) + 1/2 up when the ulp is below that of the sum
    near = st.integers(-300, 300).map(lambda k: float(np.nextafter(np.float32(k + 0.5), np.float32(0))) / scale)
    x = np.array(data.draw(st.lists(st.one_of(st.floats(-1e6, 1e6, width=32), ties, near),
                                    min_size=1, max_size=16)), np.float32)
    q = fx.data_convert_to_fixed(x, scale, out)
    assert_same(q, oracle.data_convert_to_fixed(x, scale, bits, signed), out)
    back = fx.data_convert_to_float(q, scale)
    np.testing.assert_array_equal(back.view(np.int32), oracle.data_convert_to_float(q, scale).view(np.int32))


# ---- a few fixed points the random cases may not reach, and the errors ---------------------------

def test_round_sat_rounds_half_toward_plus_infinity():
    assert fx.round_sat(np.array([2, 6, -2, -6, 3, -3]), 2, -100, 100).tolist() == [1, 2, 0, -1, 1, -1]
    with pytest.raises(fx.FixedPointError, match=r"\[0, 62\]"):
        fx.round_sat(np.array([1]), -1, 0, 1)


def test_data_convert_rounds_as_ti():
    """§8.12's worked examples: half away from zero, the float32 sum, the float32 reciprocal."""
    s8 = fx.FixedType(8, True)
    assert fx.data_convert_to_fixed(np.array([-2.5, 2.5, -0.5, 0.5, 0.0, -1e9, 1e9], np.float32), 1.0,
                                    s8).tolist() == [-3, 3, -1, 1, 0, -128, 127]
    below_half = np.nextafter(np.float32(0.5), np.float32(0))          # 0.5 - 2^-25
    assert fx.data_convert_to_fixed(np.array([below_half, -below_half]), 1.0, s8).tolist() == [1, -1]
    # the product is rounded to float32 first: float32(0.35) * 10 is 3.4999999403953552 exactly, 3.5 in float32
    assert fx.data_convert_to_fixed(np.array([0.35], np.float32), 10.0, s8).tolist() == [4]
    back = fx.data_convert_to_float(np.array([9], np.int8), 10.0)
    assert back.dtype == np.float32 and back.view(np.int32).item() == 0x3F666667   # 9 * float32(0.1)


def test_int32_accumulator_wraps():
    x = np.full((1, 1, 1, 1), 127, np.int8)
    w = np.full((1, 1, 1, 1), 127, np.int8)
    got = fx.convolution(x, w, np.array([2 ** 31 - 1]), np.array([1]), 0, fx.FixedType(16, True))
    assert got.item() == -32768      # 2^31 - 1 + 16129 wraps negative, then saturates
    w16 = w.astype(np.int16)
    assert fx.convolution(x, w16, np.array([2 ** 31 - 1]), np.array([1]), 0, fx.FixedType(16, True)).item() == 32767


def test_resize_integer_weights_truncate():
    x = np.array([[[[0, 1]]]], np.uint8)
    # ratio 2: positions 0, 0.25, 0.75, 1.25 -> weights in quarters; 1/4 and 3/4 truncate to 0
    assert fx.resize_bilinear(x, 2, 2)[0, 0, 0].tolist() == [0, 0, 0, 1]


def test_bad_inputs_are_named():
    with pytest.raises(fx.FixedPointError, match="uint8, int8, uint16 or int16"):
        fx.max_pool(np.zeros((1, 1, 2, 2), np.float32), 2, 2)
    with pytest.raises(fx.FixedPointError, match="groups"):
        fx.convolution(np.zeros((1, 3, 4, 4), np.uint8), np.zeros((4, 1, 1, 1), np.int8), 0, 1, 0,
                       fx.FixedType(8, True), groups=2)
    with pytest.raises(fx.FixedPointError, match="smaller than the kernel"):
        fx.average_pool(np.zeros((1, 1, 4, 4), np.uint8), 2, 2, (2, 0, 0, 0), 12, 0, fx.FixedType(8, False))
    with pytest.raises(fx.FixedPointError, match="integer upscales"):
        fx.resize_nearest(np.zeros((1, 1, 2, 2), np.uint8), 1.5, 2)
    with pytest.raises(fx.FixedPointError, match="NaN"):
        fx.data_convert_to_fixed(np.array([np.nan], np.float32), 1.0, fx.FixedType(8, True))
    with pytest.raises(fx.FixedPointError, match="not inside"):
        fx.eltwise_sum([np.zeros(2, np.uint8)] * 2, [1, 1], 0, fx.FixedType(8, False), bounds=(-1, 3))


# ---- §8.10.1-2 the non-saturating activations, §8.11 depth-to-space -----------------------------

@settings(max_examples=200, **SETTINGS)
@given(st.data())
def test_prelu_matches_oracle(data):
    """§8.10.1 end to end: the slopes' scale, integers and factors of the import side, then a batch norm
    whose negative accumulators take the slopes before its one roundSat."""
    count("prelu")
    weight_bits = data.draw(st.sampled_from([8, 16]))
    p2 = data.draw(st.booleans())
    c = data.draw(st.integers(1, 3))
    slope_value = st.one_of(st.floats(-2, 2, width=32), st.sampled_from([0.1, 0.25, 1.0, 0.0, -0.3, 1e-20]))
    slopes_f = data.draw(st.lists(slope_value, min_size=1, max_size=1)) if data.draw(st.booleans()) else \
        data.draw(st.lists(slope_value, min_size=c, max_size=c))
    scale = nx.prelu_slope_scale(slopes_f, weight_bits, p2)
    assert scale == oracle.prelu_slope_scale(slopes_f, weight_bits, p2)
    slopes_q = nx.quantize_prelu_slopes(slopes_f, scale, weight_bits)
    assert slopes_q.tolist() == oracle.quantize_prelu_slopes(slopes_f, scale, weight_bits)
    factors, shift = nx.prelu_slope_factors(slopes_q, scale, weight_bits)
    assert (factors.tolist(), shift) == oracle.prelu_slope_factors(slopes_q.tolist(), scale, weight_bits)
    in_bits, in_signed = data.draw(types)
    x = data.draw(int_array((1, c, data.draw(st.integers(1, 3)), 2), in_bits, in_signed))
    wt = data.draw(int_array((c,), weight_bits, True))
    bias_a, bias_b = data.draw(bias_parts(c, weight_bits))
    rb = data.draw(round_bits_for(c, weight_bits))
    out, bounds = data.draw(out_type_and_bounds())
    got = fx.batch_norm(x, wt, bias_a, bias_b, rb, out, bounds=bounds, negative_slopes=(factors, shift))
    want = oracle.batch_norm(x, wt, bias_a, bias_b, rb, weight_bits, out.bits, out.signed, *(bounds or out.bounds),
                             slopes=(factors.tolist(), shift))
    assert_same(got, want, out)


def test_prelu_worked_example():
    """§8.10.1's example by hand: slope 0.1 in 8-bit weights has slopeScale 128 / 0.1 = 1280, quantizes to
    127 (0.1 x 1280 = 128, clamped), factor (int)(127 x 256 / 1280) = (int) 25.4 = 25; an accumulator of
    -1000 becomes floor(-25000 / 256) = -98, and roundSat by roundBits 2 gives (-98 + 2) >> 2 = -24. With
    16-bit weights: slopeScale 327680, slope 32767, factor (int)(25.5992... x 256) = 6553, shift 16.
    Output range [-2, 6] at accScale 64: m = 384, d = 3, roundBits 2, tensorScale 16."""
    assert nx.prelu_slope_scale([0.1], 8) == 1280.0
    q = nx.quantize_prelu_slopes([0.1], 1280.0, 8)
    assert q.tolist() == [127]
    factors, shift = nx.prelu_slope_factors(q, 1280.0, 8)
    assert (factors.tolist(), shift) == ([25], 8)
    assert fx.prelu(np.array([[-1000, 1000]]), factors, shift).tolist() == [[-98, 1000]]
    got = fx.batch_norm(np.array([[-10]], np.int8), np.array([100], np.int8), 0, 1, 2, fx.FixedType(8, True),
                        negative_slopes=(factors, shift))
    assert got.tolist() == [[-24]]
    q16 = nx.quantize_prelu_slopes([0.1], nx.prelu_slope_scale([0.1], 16), 16)
    assert q16.tolist() == [32767]
    f16, s16 = nx.prelu_slope_factors(q16, 327680.0, 16)
    assert (f16.tolist(), s16) == ([6553], 16)
    assert nx.round_bits(64.0, -2.0, 6.0, 8, True) == 2 and nx.tensor_scale(64.0, 2) == 16.0
    # the factor is a float32 quotient: 127 x 256 / 146.45045 is 221.9999... exactly, 222.0 in float32
    scale = nx.prelu_slope_scale([0.06613047420978546, 0.8740156888961792], 8)
    assert scale == float(np.float32(128 / np.float32(0.8740156888961792)))
    assert nx.prelu_slope_factors(np.array([127]), scale, 8)[0].tolist() == [222]


@settings(max_examples=60, **SETTINGS)
@given(st.data())
def test_activation_tables_match_oracle(data):
    """The import side's table (§8.10.2) and the runtime's lookup, against the oracle's."""
    count("activation_table")
    kind = data.draw(st.sampled_from(["Sigmoid", "Tanh"]))
    bits = data.draw(st.sampled_from([8, 8, 8, 16]))
    y_lo, y_hi = sorted((data.draw(st.floats(-1.2, 1.2)), data.draw(st.floats(-1.2, 1.2))))
    assert nx.table_pre_range(kind, y_lo, y_hi, bits) == oracle.table_pre_range(kind, y_lo, y_hi, bits)
    pre_scale = data.draw(st.one_of(st.floats(0.5, 5000.0), st.integers(0, 12).map(lambda e: 2.0 ** e)))
    out_scale, signed = nx.table_output_scale(kind, bits)
    table = nx.activation_table(kind, pre_scale, bits, out_scale, bits, signed)
    want = oracle.activation_table(kind, pre_scale, bits, out_scale, signed)
    assert table.tolist() == want
    out = fx.FixedType(bits, signed)
    pre = data.draw(int_array((1, 2, 3), bits, True))
    assert_same(fx.lookup_activation(pre, table, out), oracle.lookup(pre, want, oracle.bounds(bits, True)[0]), out)


@settings(max_examples=60, **SETTINGS)
@given(st.data())
def test_depth_to_space_matches_oracle(data):
    count("depth_to_space")
    bits, signed = data.draw(types)
    b = data.draw(st.sampled_from([1, 2, 3]))
    x = data.draw(int_array((1, b * b * data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3)),
                             data.draw(st.integers(1, 3))), bits, signed))
    mode = data.draw(st.sampled_from(["DCR", "CRD"]))
    got = fx.depth_to_space(x, b, mode)
    assert got.dtype == x.dtype
    assert_same(got, oracle.depth_to_space(x, b, mode))


@settings(max_examples=40, **SETTINGS)
@given(st.data())
def test_gelu_and_elu_tables_match_oracle(data):
    """GELU's and ELU's pre-activation range, output scale and table (§8.10.2), against the oracle's."""
    count("activation_table")
    kind = data.draw(st.sampled_from(["GELU", "ELU"]))
    bits = data.draw(st.sampled_from([8, 8, 8, 16]))
    alpha = data.draw(st.sampled_from([1.0, 0.5, 1.7]))
    y_lo, y_hi = sorted((data.draw(st.floats(-2.0, 0.5)), data.draw(st.floats(-0.1, 40.0))))
    pre = nx.table_pre_range(kind, y_lo, y_hi, bits, alpha)
    assert pre == oracle.unbounded_table_pre_range(kind, y_lo, y_hi, bits, alpha)
    acc_scale = data.draw(st.floats(1.0, 5000.0))
    pre_scale = nx.tensor_scale(acc_scale, nx.round_bits(acc_scale, *pre, bits, True))
    out_scale, signed = nx.table_output_scale_of_range(pre_scale, y_lo, y_hi, bits)
    assert signed == (y_lo < 0)
    want_rb = oracle.round_bits(pre_scale, y_lo, y_hi, bits, signed)
    assert out_scale == oracle.tensor_scale(pre_scale, want_rb)
    table = nx.activation_table(kind, pre_scale, bits, out_scale, bits, signed, alpha)
    assert table.tolist() == oracle.activation_table(kind, pre_scale, bits, out_scale, signed, alpha)


def test_gelu_and_elu_tables_follow_the_functions():
    """At 8 bit, pre-activation scale 16: GELU(0) = 0, GELU(x) ~ x for large x, GELU's minimum near
    -0.17; ELU(x) = x above 0 and saturates at -alpha."""
    gelu = nx.activation_table("GELU", 16.0, 8, 16.0, 8, True)
    assert gelu[128] == 0 and gelu[-1] == 127 and gelu.min() == round(-0.16997 * 16)
    elu = nx.activation_table("ELU", 16.0, 8, 16.0, 8, True, alpha=0.5)
    assert elu[128:].tolist() == list(range(128)) and elu[0] == -8
    assert nx.table_pre_range("GELU", -0.17, 3.0, 8)[1] == pytest.approx(3.0, abs=0.02)
    assert nx.table_pre_range("ELU", -0.5, 3.0, 8, alpha=0.5) == (-8.0, 3.0)


def test_sigmoid_table_saturates_and_is_monotonic():
    out_scale, signed = nx.table_output_scale("Sigmoid", 8)
    table = nx.activation_table("Sigmoid", 16.0, 8, out_scale, 8, signed)
    assert table[0] == 0 and table[-1] == 255 and table[128] == 128   # sigmoid(0) * 256 = 128
    assert (np.diff(table) >= 0).all()
    with pytest.raises(fx.FixedPointError, match="256 entries"):
        fx.lookup_activation(np.zeros(2, np.int8), table[:10], fx.FixedType(8, False))


@settings(max_examples=60, **SETTINGS)
@given(st.data())
def test_ti_tables_match_oracle(data):
    """TI's 8-bit tables (§8.10.2, TIDL 10.x/11.x import) against the oracle's, and the runtime's lookup
    by the input's own values."""
    count("activation_table")
    kind = data.draw(st.sampled_from(["Sigmoid", "Tanh", "GELU", "ELU", "HardSigmoid"]))
    in_signed, out_signed = data.draw(st.booleans()), data.draw(st.booleans())
    in_scale = data.draw(st.one_of(st.floats(0.5, 300.0), st.integers(0, 8).map(lambda e: 2.0 ** e)))
    out_scale = data.draw(st.one_of(st.floats(20.0, 600.0), st.integers(5, 9).map(lambda e: 2.0 ** e)))
    alpha, beta = data.draw(st.floats(0.05, 2.0)), data.draw(st.floats(0.0, 1.0))
    table = nx.ti_activation_table(kind, in_scale, in_signed, out_scale, out_signed, alpha, beta)
    want = oracle.ti_activation_table(kind, in_scale, in_signed, out_scale, out_signed, alpha, beta)
    assert table.tolist() == want
    x = data.draw(int_array((1, 2, 3), 8, in_signed))
    out = fx.FixedType(8, out_signed)
    lo = oracle.bounds(8, in_signed)[0]
    assert_same(fx.lookup_activation(x, table, out), oracle.lookup(x, want, lo), out)


@settings(max_examples=40, **SETTINGS)
@given(st.data())
def test_pla_sigmoid_matches_oracle(data):
    """AM62A's piecewise-linear 8-bit sigmoid (§8.10.2) against the oracle's."""
    count("activation_table")
    in_signed = data.draw(st.booleans())
    in_scale = data.draw(st.one_of(st.floats(0.25, 200.0), st.integers(0, 7).map(lambda e: 2.0 ** e)))
    rb = data.draw(st.integers(0, 12))
    assert nx.pla_sigmoid_table(in_scale, in_signed, rb).tolist() == oracle.pla_sigmoid_table(in_scale, in_signed, rb)
