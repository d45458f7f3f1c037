"""The import-side rules (backends/tidl/numerics.py) against the oracle, bit for bit, and TI's
published worked numbers (TIDL-NUMERICS.md, "Scales and styles": TI's resnet18 example)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import oracle
from fixed_cases import count
from tidlx.backends.tidl import numerics as nx
from tidlx.emulator.fixed import FixedPointError, arith

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# scales: any magnitude, and exact powers of 2 (where the power-of-2 edges of §6.3 sit)
scales = st.one_of(st.floats(1e-3, 1e5), st.integers(-10, 16).map(lambda e: 2.0 ** e))
# ... and values within float32 rounding of a power of 2 (float32 rounds them onto it, float64 does not)
near_powers = st.tuples(st.integers(-8, 10), st.sampled_from([2.0 ** -30, 2.0 ** -25, -2.0 ** -26, 2.0 ** -23])) \
    .map(lambda t: 2.0 ** t[0] * (1 + t[1]))
ranges = st.one_of(st.floats(0, 1e3), st.integers(-8, 10).map(lambda e: 2.0 ** e), st.just(0.0), near_powers)


@settings(max_examples=400, **SETTINGS)
@given(scales, ranges, ranges, st.sampled_from([8, 16]), st.booleans())
def test_round_bits_and_tensor_scale_match_oracle(acc_scale, a, b, bits, signed):
    count("round_bits")
    lo, hi = (-a, b) if signed else (0.0, b)
    rb = nx.round_bits(acc_scale, lo, hi, bits, signed)
    assert rb == oracle.round_bits(acc_scale, lo, hi, bits, signed)
    assert nx.tensor_scale(acc_scale, rb) == oracle.tensor_scale(acc_scale, rb)


@settings(max_examples=300, **SETTINGS)
@given(st.floats(-1e3, 0), st.floats(0, 1e3), st.booleans(), st.sampled_from([1.0, 1.5]))
def test_output_range_matches_oracle(lo, hi, widen, expansion):
    count("output_range")
    assert nx.output_range(lo, hi, widen=widen, expansion=expansion) == oracle.output_range(lo, hi, widen, expansion)


def test_inner_product_range_expands_the_max_only():
    """docs/numerics.md §6.2's example: logits [-12, 8] at accScale 10: TI expands the max only,
    m = max(120, 100) = 120 -> roundBits 0 (signed 8 bit); expanding both ends (m = 150) gave 1."""
    lo, hi = nx.output_range(-12.0, 8.0, widen=True)
    assert (lo, hi) == (-12.0, 10.0)
    assert nx.round_bits(10.0, lo, hi, 8, signed=True) == 0
    assert nx.round_bits(10.0, -15.0, 10.0, 8, signed=True) == 1     # the old both-ends range


@settings(max_examples=300, **SETTINGS)
@given(st.data())
def test_weight_scale_and_quantization_match_oracle(data):
    count("weight_quantization")
    bits, p2 = data.draw(st.sampled_from([8, 16])), data.draw(st.booleans())
    shape = (data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3)), 1, data.draw(st.integers(1, 3)))
    size = int(np.prod(shape))
    values = data.draw(st.lists(st.one_of(st.floats(-4, 4, width=32), st.sampled_from([0.0, 1e-16, -0.5])),
                                min_size=size, max_size=size))
    w = np.array(values, np.float32).reshape(shape)
    abs_max = nx.weight_abs_max(w)
    assert abs_max == max(abs(float(v)) for v in w.ravel())
    limited = nx.limit_weight_range_median(w, abs_max, bits)
    assert limited == oracle.limit_weight_range_median(w, abs_max, bits)
    scale = nx.weight_scale(limited, bits, p2)
    assert scale == oracle.weight_scale(limited, bits, p2)
    np.testing.assert_array_equal(nx.quantize_weights(w, scale, bits), oracle.quantize_weights(w, scale, bits))
    # ties: w x scale = k + 1/2 exactly, at a power-of-2 scale
    tie_scale = 2.0 ** data.draw(st.integers(0, 12))
    ks = data.draw(st.lists(st.integers(-2 ** (bits - 1) - 2, 2 ** (bits - 1) + 1), min_size=1, max_size=8))
    tied = np.array([(k + 0.5) / tie_scale for k in ks])
    np.testing.assert_array_equal(nx.quantize_weights(tied, tie_scale, bits),
                                  oracle.quantize_weights(tied, tie_scale, bits))
    per_channel = nx.depthwise_weight_scales(w, bits, p2)     # §4.5: one scale per output channel
    want = [oracle.weight_scale(max(abs(float(v)) for v in w[c].ravel()), bits, p2) for c in range(shape[0])]
    assert per_channel.tolist() == want
    np.testing.assert_array_equal(nx.quantize_weights(w, per_channel.reshape(-1, 1, 1, 1), bits),
                                  oracle.quantize_weights(w, per_channel.reshape(-1, 1, 1, 1), bits))


@settings(max_examples=300, **SETTINGS)
@given(st.data())
def test_bias_rules_match_oracle(data):
    count("bias")
    weight_bits, input_bits = data.draw(st.sampled_from([8, 16])), data.draw(st.sampled_from([8, 16]))
    input_signed, p2 = data.draw(st.booleans()), data.draw(st.booleans())
    channels = data.draw(st.integers(1, 6))
    b = np.array(data.draw(st.lists(st.floats(-100, 100, width=32), min_size=channels, max_size=channels)), np.float32)
    abs_max = float(np.abs(b.astype(np.float64)).max())
    bscale = nx.bias_scale(abs_max, weight_bits, p2)
    assert bscale == oracle.bias_scale(abs_max, weight_bits, p2)
    bq = nx.quantize_bias(b, bscale, weight_bits)
    np.testing.assert_array_equal(bq, oracle.quantize_bias(b, bscale, weight_bits))
    # inScaleFactor over the split's three cases: below 1, up to biasBMax, above it
    isf = np.array(data.draw(st.lists(st.one_of(st.floats(0, 1), st.floats(1, 300), st.floats(255, 1e5),
                                                st.sampled_from([1.0, 127.0, 255.0, 65535.0])),
                                      min_size=channels, max_size=channels)))
    got_a, got_b = nx.split_bias(bq, isf, weight_bits, input_bits, input_signed)
    want_a, want_b = oracle.split_bias(bq, isf, weight_bits, input_bits, input_signed)
    assert got_a.tolist() == want_a and got_b.tolist() == want_b
    ws, in_scale = data.draw(scales), data.draw(scales)
    assert nx.clip_weight_scale_for_bias(ws, in_scale, abs_max, weight_bits, input_signed, p2) == \
        oracle.clip_weight_scale_for_bias(ws, in_scale, abs_max, weight_bits, input_signed, p2)


def test_bias_at_the_weights_width():
    """docs/numerics.md §5.4's example: b = 1.234, absMax(b) = 2, weightScale 256, inScale 32, unsigned
    input: biasScale 128/2 = 64, b_q 79, isf 128 -> biasA 79, biasB 128, 10112 in the accumulator; with
    roundBits 7 and a bias-free accumulator of 66 the output is 80."""
    bscale = nx.bias_scale(2.0, 8)
    assert bscale == 64.0
    bq = nx.quantize_bias(np.array([1.234]), bscale, 8)
    assert bq.tolist() == [79]
    isf = nx.in_scale_factor(256.0, 32.0, bscale)
    assert isf.tolist() == 128.0
    bias_a, bias_b = nx.split_bias(bq, np.array([isf]), 8, 8, False)
    assert (bias_a.tolist(), bias_b.tolist()) == ([79], [128])
    acc = arith.bias_multiply(bias_a, bias_b, 32)
    assert acc.tolist() == [10112]
    assert arith.round_sat(66 + acc, 7, 0, 255).tolist() == [80]
    # int8 for 8-bit weights: the largest |b| lands on 128 and saturates; int16 for 16-bit weights
    assert nx.quantize_bias(np.array([2.0, -2.0]), bscale, 8).tolist() == [127, -128]
    assert nx.bias_scale(2.0, 16) == 16384.0 and nx.bias_scale(3.0, 8, power_of_2=True) == 32.0
    assert nx.quantize_bias(np.array([2.0, -2.0]), 16384.0, 16).tolist() == [32767, -32768]
    # isf > biasBMax: biasA clamped to [-128, 127] (127 x 1000 / 255 = 498 before the clamp)
    bias_a, bias_b = nx.split_bias(np.array([127, -128, 3]), np.array([1000.0] * 3), 8, 8, False)
    assert (bias_a.tolist(), bias_b.tolist()) == ([127, -128, 11], [255, 255, 255])
    bias_a, bias_b = nx.split_bias(np.array([32767]), np.array([70000.0]), 16, 16, False)
    assert (bias_a.tolist(), bias_b.tolist()) == ([32767], [65535])


@settings(max_examples=300, **SETTINGS)
@given(st.lists(scales, min_size=2, max_size=3), ranges, st.sampled_from([8, 16]), st.booleans(),
       st.sampled_from(["sum", "concat"]), st.one_of(st.none(), st.floats(0.1, 20)), st.booleans())
def test_sum_concat_round_bits_and_multipliers_match_oracle(in_scales, top, out_bits, signed, kind, clip_max,
                                                            bias_range):
    count("eltwise_multipliers")
    acc = (nx.acc_scale_eltwise_sum if kind == "sum" else nx.acc_scale_concat)(in_scales, out_bits)
    q = {("sum", 8): 6, ("sum", 16): 14, ("concat", 8): 7, ("concat", 16): 15}[kind, out_bits]
    assert acc == min(in_scales) * 2 ** q
    if clip_max is not None:                   # a ReLU6/Clip output: unsigned, the clip's range
        signed, top = False, clip_max
    rb0 = nx.round_bits(acc, -top if signed else 0.0, top, out_bits, signed)
    clip_scale = None if clip_max is None else nx.clip_forced_scale(clip_max, out_bits)
    assert clip_scale == (None if clip_max is None else float(np.float32(2 ** out_bits) / np.float32(clip_max)))
    rb, out_scale = nx.merging_round_bits(rb0, acc, clip_scale, bias_range)
    assert (rb, out_scale) == oracle.merging_round_bits(rb0, acc, clip_scale, bias_range)
    if clip_scale is None or bias_range or rb0 == 0:    # §6.5: roundBits as §6.3 gave it
        assert (rb, out_scale) == (rb0, nx.tensor_scale(acc, rb0))
    else:                                               # lowered, at the forced scale
        assert out_scale == clip_scale and rb <= rb0 and (rb == 0 or 2 ** rb * clip_scale < acc)
    multipliers = nx.eltwise_multipliers(out_scale, rb, in_scales)
    assert multipliers == oracle.eltwise_multipliers(out_scale, rb, in_scales)
    assert all(m <= 2 ** q for m in multipliers)


def test_sum_keeps_round_bits_without_a_forced_scale():
    """docs/numerics.md §6.5's example: in-scales 10 and 13, an 8-bit signed sum of range [-20, 30]:
    accScale 640, roundBits 8 kept (TI lowers only for a ReLU6/Clip output), tensorScale 2.5,
    multipliers (64, 49); x1 = 100, x2 = -77 give 10 (lowering to 7 gave 11)."""
    acc = nx.acc_scale_eltwise_sum([10.0, 13.0], 8)
    assert acc == 640.0
    rb0 = nx.round_bits(acc, -20.0, 30.0, 8, signed=True)
    rb, out_scale = nx.merging_round_bits(rb0, acc)
    assert (rb0, rb, out_scale) == (8, 8, 2.5)
    multipliers = nx.eltwise_multipliers(out_scale, rb, [10.0, 13.0])
    assert multipliers == (64, 49)
    out = arith.eltwise_sum([np.array([100], np.int8), np.array([-77], np.int8)], multipliers, rb,
                            arith.FixedType(8, True))
    assert out.tolist() == [10]
    # a ReLU6 output (scale 256/6 in float32) is lowered: 2^rb x 256/6 < 640 -> roundBits 3
    assert nx.merging_round_bits(nx.round_bits(acc, 0.0, 6.0, 8, False), acc, nx.clip_forced_scale(6.0, 8)) == \
        (3, float(np.float32(256 / 6)))
    # ... and not with calibration bit BiasRange 64
    assert nx.merging_round_bits(4, acc, 256 / 6, bias_range=True) == (4, 40.0)


@settings(max_examples=300, **SETTINGS)
@given(st.integers(0, 20), scales, st.lists(st.tuples(scales, st.one_of(scales, st.just(0.0)), st.booleans()),
                                            max_size=3), st.sampled_from([8, 16]), st.booleans())
def test_bias_saturation_guard_matches_oracle(rb, ts, consumers, cbits, signed):
    count("bias_saturation_guard")
    ratios = [nx.consumer_weight_to_bias_scale(ws, bs, pc) for ws, bs, pc in consumers]
    assert ratios == [oracle.consumer_weight_to_bias_scale(ws, bs, pc) for ws, bs, pc in consumers]
    ratio = nx.max_weight_to_bias_scale(ratios)
    assert ratio == oracle.max_weight_to_bias_scale(ratios) and ratio >= 1 / 256
    for r in (ratio, nx.GUARD_CLIP_RATIO):
        assert nx.bias_saturation_guard(rb, ts, r, cbits, signed) == \
            oracle.bias_saturation_guard(rb, ts, r, cbits, signed)


def test_bias_saturation_guard_with_ti_ratio():
    """docs/numerics.md §6.6's example: a consumer conv with weightScale 1024 and absMax(bias) 4 (TI's
    biasScale 32, ratio 32) reads an unsigned tensor of tensorScale 16: 16 x 32 = 512 > 256, so the
    producer's roundBits goes up by 1 (tensorScale 8), and §4.4 then keeps the consumer's weight scale
    1024 (8192 / 8); at tensorScale 16 it would clip it to 512."""
    bs = nx.bias_scale(4.0, 8)
    ratio = nx.max_weight_to_bias_scale([nx.consumer_weight_to_bias_scale(1024.0, bs)])
    assert (bs, ratio) == (32.0, 32.0)
    rb = nx.bias_saturation_guard(5, 16.0, ratio, 8, False)
    assert rb == 6 and nx.tensor_scale(16.0 * 2 ** 5, rb) == 8.0
    assert nx.clip_weight_scale_for_bias(1024.0, 8.0, 4.0, 8, False) == (1024.0, False)
    assert nx.clip_weight_scale_for_bias(1024.0, 16.0, 4.0, 8, False) == (512.0, True)
    # signed output: E = 128; 16-bit consumers: E = 32768
    assert nx.bias_saturation_guard(5, 16.0, ratio, 8, True) == 6   # 512 -> 256 -> 128: n = 2, +1
    assert nx.bias_saturation_guard(5, 16.0, ratio, 16, False) == 5
    # without a bias, or per-channel depthwise: 1/256 (at most tensorScale 65536 unsigned passes)
    assert nx.consumer_weight_to_bias_scale(1024.0, 0.0) == 1 / 256
    assert nx.consumer_weight_to_bias_scale(1024.0, 32.0, per_channel=True) == 1 / 256 / 32
    assert nx.bias_saturation_guard(0, 65536.0, 1 / 256, 8, False) == 0
    assert nx.bias_saturation_guard(0, 131072.0, 1 / 256, 8, False) == 1
    # a ReLU6/Clip-forced output: TI's 0.0001
    assert nx.bias_saturation_guard(5, 16.0, nx.GUARD_CLIP_RATIO, 8, False) == 5


@settings(max_examples=300, **SETTINGS)
@given(st.lists(scales, min_size=1, max_size=6), scales, scales, st.floats(0.1, 20), st.sampled_from([8, 16]),
       st.booleans())
def test_per_channel_round_bits_and_clip_scale_match_oracle(w_scales, in_scale, out_scale, clip_max, out_bits,
                                                            symmetric):
    count("per_channel_and_clip")
    assert nx.depthwise_per_channel_round_bits(w_scales, in_scale, out_scale).tolist() == \
        oracle.depthwise_per_channel_round_bits(w_scales, in_scale, out_scale)
    got = nx.clip_output_scale(clip_max, out_bits, w_scales[0], in_scale, symmetric)
    assert got == oracle.clip_output_scale(clip_max, out_bits, w_scales[0], in_scale, symmetric)
    o, ws, rb = got           # accScale / tensorScale is 2^roundBits (float32 steps)
    assert math.isclose(ws * in_scale / o, 2.0 ** rb, rel_tol=1e-6)


def test_clip_forced_scale_below_one_and_symmetric():
    """§4.7 by hand. ReLU6, 8 bits: outScale 256 / 6 = 42.666668 (float32). Weight scale 10 at input scale
    1: ratio 0.234, the largest power of 2 below it 1/8, so the weight scale is 42.666668 / 8 = 5.3333335,
    roundBits 0 and tensorScale 5.3333335 (the type's top 255 is then 47.8, not 6). Weight scale 100:
    ratio 2.34, 2, weight scale 85.333336, roundBits 1, tensorScale 42.666668. A symmetric clip [-6, 6]
    at weight scale 100: outScale 128 / 6 = 21.333334, ratio 4.69, 4, weight scale 85.333336, roundBits 2,
    tensorScale 21.333334."""
    f = lambda v: float(np.float32(v))   # noqa: E731
    assert nx.clip_forced_scale(6.0, 8) == f(256 / 6) and nx.clip_forced_scale(6.0, 8, True) == f(128 / 6)
    assert nx.clip_output_scale(6.0, 8, 10.0, 1.0) == (f(f(256 / 6) / 8), f(f(256 / 6) / 8), 0)
    assert nx.clip_output_scale(6.0, 8, 100.0, 1.0) == (f(256 / 6), f(f(256 / 6) * 2), 1)
    assert nx.clip_output_scale(6.0, 8, 100.0, 1.0, True) == (f(128 / 6), f(f(128 / 6) * 4), 2)


# ---- TI's published worked numbers and fixed facts -------------------------------------------

def test_ti_resnet18_conv1():
    """conv1: weightScale 18562.62 x input scale 1.0 (raw uint8 image), output max 4.137 after its
    ReLU (unsigned 8 bit): roundBits 9, tensorScale 18562.62 / 512 = 36.255."""
    acc = nx.acc_scale_weighted(18562.62, 1.0)
    rb = nx.round_bits(acc, 0.0, 4.137, 8, signed=False)
    assert rb == 9
    assert nx.tensor_scale(acc, rb) == pytest.approx(36.255, abs=5e-4)
    assert nx.round_bits(acc, -4.137, 4.137, 8, signed=True) == 10    # a signed output needs one more bit


def test_ti_resnet18_final_dense():
    """The final dense: weightScale 178.96 x input 33.17, roundBits 11 -> tensorScale 2.8985 (int8);
    the calibrated max (x 1.25 for inner products) that gives roundBits 11 lies in (22.08, 44.16]."""
    acc = nx.acc_scale_weighted(178.96, 33.17)
    lo, hi = nx.output_range(-25.0, 25.0, widen=True)
    assert (lo, hi) == (-25.0, 31.25)
    rb = nx.round_bits(acc, lo, hi, 8, signed=True)
    assert rb == 11
    assert nx.tensor_scale(acc, rb) == pytest.approx(2.8985, abs=5e-5)


def test_ti_resnet18_global_average_pool():
    """Global average pool: Q = 12, roundBits 10, tensorScale 33.17 (uint8); its input scale is then
    33.17 x 2^10 / 2^12 = 8.2925."""
    q = nx.average_pool_q((7, 7), (1, 1), 8, global_pool=True)
    assert q == 12
    in_scale = 33.17 * 2 ** 10 / 2 ** q
    acc = nx.acc_scale_average_pool(in_scale, q)
    rb = nx.round_bits(acc, 0.0, 5.0 * 1.25, 8, signed=False)
    assert rb == 10
    assert nx.tensor_scale(acc, rb) == float(np.float32(33.17))     # TI's float32 tensorScale


@settings(max_examples=100, **SETTINGS)
@given(st.integers(0, 120))
def test_bias_calibration_factor_matches_oracle(n):
    count("bias_calibration_factor")
    from tidlx.backends.tidl.quantize import bias_calibration_factor
    assert [bias_calibration_factor(i, n) for i in range(n)] == \
        pytest.approx([oracle.bias_calibration_factor(i, n) for i in range(n)], rel=1e-15)


@settings(max_examples=60, **SETTINGS)
@given(st.sampled_from([0, 1, 9]), st.integers(0, 1), st.integers(0, 1), st.integers(0, 1), st.integers(0, 1))
def test_calibration_option_bits_match_oracle(level, act, weight, bias, channel):
    count("calibration_option_bits")
    from tidlx.backends.tidl.options import TidlOptions
    from tidlx.backends.tidl.quantize import calibration_option_bits
    options = TidlOptions(accuracy_level=level, activation_clipping=act, weight_clipping=weight,
                          bias_calibration=bias, channel_wise_quantization=channel)
    assert calibration_option_bits(options) == oracle.calibration_option_bits(level, act, weight, bias, channel)


def test_fixed_facts():
    assert nx.quantization_style(0) == nx.NP2_FIXED == 2 and nx.quantization_style(1) == nx.P2_DYNAMIC == 3
    assert nx.quantization_style(4) == nx.ASYM_NP2 == 6
    with pytest.raises(FixedPointError, match="TFLite"):
        nx.quantization_style(3)
    assert nx.layer_bit_widths("conv1", 8, ["conv1"], []) == (8, 16)
    assert nx.layer_bit_widths("conv1", 8, [], ["conv1"]) == (16, 8)
    assert nx.layer_bit_widths("conv2", 16) == (16, 16)
    assert nx.feature_map_is_signed(-0.1) and not nx.feature_map_is_signed(0.0)
    assert nx.weight_scale(0.5, 8) == 256.0 and nx.weight_scale(0.3, 8, power_of_2=True) == 256.0
    assert nx.weight_scale(1e-16, 8) == 0.0
    assert nx.quantize_weights(np.array([0.5, -0.5, 1.0, -1.0, 0.25]), 255.0, 8).tolist() == [127, -128, 127, -128, 64]
    assert nx.average_pool_q((2, 2), (2, 2), 8) == 8 and nx.average_pool_q((3, 3), (1, 1), 8) == 12
    assert nx.average_pool_q((3, 3), (2, 2), 16) == 12
    assert nx.acc_scale_data_convert() == 128.0 and nx.acc_scale_keeping(3.0) == (3.0, 0)
    assert nx.acc_scale_data_convert(1.0, 16) == 32768.0 and nx.acc_scale_data_convert(0.5, 8) == 64.0
    assert nx.acc_scale_eltwise_product([2.0, 3.0]) == 6.0 and nx.acc_scale_eltwise_max([2.0, 3.0], 8) == 128.0
    assert nx.tensor_scale(0.0, 3) == 2.0 ** -126
    assert nx.batch_norm_weight_scale_before_nonlinearity(8) == 128.0
    assert nx.bias_b_max(8, 8, True) == 127 and nx.bias_b_max(16, 8, True) == 255 and nx.bias_b_max(16, 16, True) == 65535
    # §6.3's power-of-2 edge: m = 2^8 (d = 2, signed) and m - 1 both give roundBits 1; one more needs 2
    assert nx.round_bits(1.0, -256.0, 0.0, 8, signed=True) == 1
    assert nx.round_bits(1.0, -256.5, 0.0, 8, signed=True) == 2
    with pytest.raises(FixedPointError, match="int32"):
        nx.eltwise_multipliers(1.0, 40, [1.0])


@settings(max_examples=300, **SETTINGS)
@given(st.lists(st.integers(-10, 16).map(lambda e: 2.0 ** e), min_size=1, max_size=6),
       st.integers(-10, 10).map(lambda e: 2.0 ** e), st.integers(0, 12))
def test_depthwise_per_channel_scales_match_oracle(w_scales, in_scale, rb0):
    """§8.1.1 with P2 scales (per-channel weights make the network P2Dynamic): an output scale from the
    largest weights' accScale leaves every channel's roundBits >= 0 and its accumulator exactly on the
    output scale after its shift."""
    count("per_channel_scales")
    out_scale = nx.tensor_scale(nx.acc_scale_weighted(min(w_scales), in_scale), rb0)
    rb = nx.depthwise_per_channel_round_bits(w_scales, in_scale, out_scale)
    assert rb.tolist() == oracle.depthwise_per_channel_round_bits(w_scales, in_scale, out_scale)
    for w, r in zip(w_scales, rb):
        assert r >= rb0 and w * in_scale / out_scale == 2.0 ** r


@settings(max_examples=200, **SETTINGS)
@given(st.integers(1, 6), st.integers(1, 12), st.sampled_from([8, 16]), st.booleans(), st.integers(0, 10 ** 6),
       st.sampled_from([0.0, 1e-3, 1.0, 40.0]))
def test_per_channel_layer_weight_scale_matches_oracle(channels, size, bits, weight_range, seed, spread):
    """§4.5: a per-channel layer's output accScale from the whole layer's P2 weight scale (TI's
    convParams.weightScale of TIDL_updateParamsRange), §4.3's limit with WeightRange, 1 for zero weights."""
    count("per_channel_layer_weight_scale")
    r = np.random.default_rng(seed)
    w = (r.standard_normal((channels, size)) * spread).astype(np.float32)
    if spread == 40.0:
        w[0, 0] = 900.0   # far above 16 x the median: the limit bites
    abs_max = nx.weight_abs_max(w)
    whole = nx.limit_weight_range_median(w, abs_max, bits) if weight_range else abs_max
    want = oracle.per_channel_layer_weight_scale(w, bits, weight_range)
    assert nx.per_channel_layer_weight_scale(whole, bits) == want


def test_per_channel_layer_weight_scale_by_hand():
    """§4.5: weights of absMax 3 (P2: 4) at 8 bit give 128 / 4 = 32 for the whole layer, whatever each
    channel's own scale; all-zero weights give 1."""
    assert nx.per_channel_layer_weight_scale(3.0, 8) == 32.0
    assert nx.per_channel_layer_weight_scale(0.0, 8) == 1.0


def test_depthwise_per_channel_round_bits_by_hand():
    """§8.1.1: weight scales 64, 256 and 48 at input scale 0.5, output scale 4: the float32 ratios 8, 32
    and 6 give roundBits 3, 5 and trunc(2.58) = 2; a ratio of 0.75 gives 0."""
    assert nx.depthwise_per_channel_round_bits([64.0, 256.0, 48.0, 6.0], 0.5, 4.0).tolist() == [3, 5, 2, 0]


# -- §9.5 bias calibration's means ----------------------------------------------------------------------

def _mean_values(shape, kind, seed):
    """Float values, small integers, and 16-bit integers whose sums pass 2^24 (where a float32 running sum
    rounds)."""
    r = np.random.default_rng(seed)
    if kind == "float":
        return (r.standard_normal(shape) * 10.0 ** r.integers(-2, 4)).astype(np.float32)
    if kind == "int8":
        return r.integers(-128, 128, shape).astype(np.int8)
    return r.integers(20000, 32768, shape).astype(np.int16)


mean_kinds = st.sampled_from(["float", "int8", "int16"])
mean_scales = st.sampled_from([1.0, 0.37, 64.0, 1000.5])


@settings(max_examples=150, **SETTINGS)
@given(st.lists(st.integers(1, 5), min_size=2, max_size=4), st.integers(1, 700), mean_kinds, mean_scales,
       st.integers(0, 10 ** 6))
def test_channel_means_match_oracle(lead, plane, kind, scale, seed):
    count("channel_means")
    from tidlx.backends.tidl.calibration import frame_channel_means
    values = _mean_values(tuple(lead[:2]) + (plane,), kind, seed)
    got = frame_channel_means(values, scale)
    want = np.array(oracle.channel_means(values, scale), np.float32)
    assert got.dtype == np.float32 and np.array_equal(got.view(np.int32), want.view(np.int32))


@settings(max_examples=150, **SETTINGS)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=5), st.integers(1, 600), mean_kinds, mean_scales,
       st.integers(0, 10 ** 6))
def test_column_means_match_oracle(dims, height, kind, scale, seed):
    count("column_means")
    from tidlx.backends.tidl.calibration import frame_column_means
    shape = tuple(dims[:-1]) + (height, dims[-1]) if len(dims) > 1 else (dims[0],)
    values = _mean_values(shape, kind, seed)
    got = frame_column_means(values, scale)
    want = np.array(oracle.column_means(values, scale), np.float32)
    assert got.dtype == np.float32 and np.array_equal(got.view(np.int32), want.view(np.int32))


@settings(max_examples=150, **SETTINGS)
@given(st.integers(1, 12), st.integers(1, 3), st.integers(1, 8), st.booleans(), st.integers(0, 10 ** 6))
def test_running_means_match_oracle(frames, rows, width, columns, seed):
    count("running_means")
    from tidlx.backends.tidl.calibration import running_channel_mean, running_column_mean
    r = np.random.default_rng(seed)
    per_frame = [(r.standard_normal((rows, width)) * 3.0).astype(np.float32) for _ in range(frames)]
    running = running_column_mean if columns else running_channel_mean
    got = None
    for k, rows_k in enumerate(per_frame):
        got = running(got, rows_k, k)
    want = np.array(oracle.running_means([list(map(list, f)) for f in per_frame], columns), np.float32)
    assert np.array_equal(got.view(np.int32), want.view(np.int32))


def test_channel_sums_are_float32_running_sums():
    """A case where the float32 running sum, float64's sum and numpy's pairwise float32 sum all differ:
    §9.5 takes the first."""
    from tidlx.backends.tidl.calibration import frame_channel_means
    values = np.full((1, 1, 3000), 0.1, np.float32)
    values[0, 0, 0] = 3.0e4
    running = oracle.channel_means(values, 1.0)[0][0]
    assert frame_channel_means(values)[0, 0] == running
    assert np.float32(values.astype(np.float64).sum() / 3000) != running
    assert np.float32(values.sum(dtype=np.float32) / np.float32(3000)) != running


@settings(max_examples=200, **SETTINGS)
@given(st.sampled_from([8, 16]), st.booleans(), st.floats(0.01, 500.0), st.floats(-8.0, 8.0), st.floats(0.0, 8.0),
       st.booleans())
def test_clip_activation_bounds_match_oracle(bits, signed, scale, c_lo, width, fused):
    """§8.10: a clip fused into its layer saturates to the output type only; a standalone Clip layer at its
    bounds on the output scale."""
    count("clip_activation_bounds")
    c_hi = c_lo + width
    got = nx.clip_activation_bounds(arith.FixedType(bits, signed), scale, c_lo, c_hi, fused)
    want = oracle.bounds(bits, signed) if fused else oracle.activation_bounds(bits, signed, "clip", scale, c_lo, c_hi)
    assert tuple(got) == tuple(want)


@settings(max_examples=60, **SETTINGS)
@given(st.sampled_from([8, 16]), st.booleans(), st.floats(0.05, 300.0), st.floats(0.05, 300.0),
       st.sampled_from([0.1, 0.01, 0.2, 0.3, -0.5, 1.7]))
def test_leaky_relu_table_matches_oracle(bits, in_signed, in_scale, out_scale, alpha):
    """§8.10.1: TIDL 10.x/11.x's leaky ReLU table over every input value, the float32 alpha in double."""
    count("leaky_relu_table")
    got = nx.leaky_relu_table(in_scale, bits, in_signed, out_scale, True, alpha)
    assert got.tolist() == oracle.leaky_relu_table(in_scale, bits, in_signed, out_scale, alpha)


def test_leaky_relu_table_by_hand():
    """§8.10.1: input scale 16, output scale 32, alpha 0.1: q = -5 is x = -0.3125, y = -0.03125 (float32
    alpha 0.1 as a double: a hair above), times 32 = -1.0000000149 -> -1; q = 7 -> 14; the table is
    signed 8-bit, lowest input first."""
    t = nx.leaky_relu_table(16.0, 8, True, 32.0, True, 0.1)
    assert t[-5 + 128] == -1 and t[7 + 128] == 14 and t[0] == -26 and len(t) == 256


@settings(max_examples=60, **SETTINGS)
@given(st.sampled_from([8, 16]), st.integers(1, 2000))
def test_softmax_fixed_output_scale_matches_oracle(bits, length):
    """§8.9: 8-bit 256; 16-bit 254 x the softmax axis length (TI's SOFTMAX_16_BIT_SCALE_LIM x dim)."""
    count("softmax_fixed_output_scale")
    assert nx.softmax_fixed_output_scale(bits, length) == oracle.softmax_fixed_output_scale(bits, length)


@settings(max_examples=60, **SETTINGS)
@given(st.lists(st.sampled_from([0.0, -0.0, 0.0, 1e-30, -2.5]), min_size=1, max_size=8))
def test_all_zero_constant_scale_matches_oracle(values):
    """§8.5: a constant of zeros (-0.0 included) is at tensorScale 1; any other value leaves the rule."""
    count("all_zero_constant_scale")
    arr = np.array(values, np.float32)
    assert nx.all_zero_constant_scale(arr) == oracle.all_zero_constant_scale(arr)


@settings(max_examples=60, **SETTINGS)
@given(scales, scales)
def test_scatter_add_common_scale_matches_oracle(data_scale, updates_scale):
    """§8.16: the one scale of an 'add' scatter's data and updates producers."""
    count("scatter_add_common_scale")
    assert nx.scatter_add_common_scale(data_scale, updates_scale) == \
        oracle.scatter_add_common_scale(data_scale, updates_scale)
