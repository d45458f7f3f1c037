"""TI's import arithmetic and the rules that differ between TIDL releases (docs/numerics.md §1.3, §4.1-§4.4,
§5.3-§5.4, §6.1, §6.3, §6.4, §8.9, "Versions"), each on a hand-worked example: float32 where TI's import holds float32,
its double ``ceil(log / log)``, the median's rank, and the 08.06 / 11.x switches."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tidlx.backends.tidl import numerics as nx
from tidlx.emulator.fixed import arith

F32 = np.float32


# ---- §6.3 roundBits and §6.4 tensorScale in float32 ------------------------------------------------

def test_round_bits_reads_m_in_float32_at_a_power_of_2():
    """m = 128 (1 + 2^-30) is 128 in float32: a signed output takes m - 1 = 127 -> roundBits 0 (float64
    kept m > 128 and gave 1)."""
    assert nx.round_bits(1.0, -1.0, 128.0 * (1 + 2.0 ** -30), 8, signed=True) == 0
    # the product rounds too: 3 x float32(128/3) = 128.0000038 exactly, 128 in float32
    assert nx.round_bits(3.0, -1.0, float(F32(128 / 3)), 8, signed=True) == 0
    # one float32 step above 128 stays above: d = 1.0000001 -> p = 2 -> roundBits 1
    assert nx.round_bits(1.0, -1.0, 128.0 + 2.0 ** -16, 8, signed=True) == 1
    # unsigned: no m - 1; 256 exactly is d = 1 -> p = 1 -> roundBits 0, one step above -> 1
    assert nx.round_bits(1.0, 0.0, 256.0, 8, signed=False) == 0
    assert nx.round_bits(1.0, 0.0, 256.0 + 2.0 ** -15, 8, signed=False) == 1


def test_round_bits_takes_tis_double_ceil_log_at_2_to_the_29():
    """TI's ceil(log(x) / log(2)) is 30 for x = 2^29 (the quotient of two rounded logs), so a signed m of
    2^29 is not seen as a power of 2 (no m - 1), d = 2^22 and p = 2^22 -> roundBits 22 exactly; the
    roundBits' own log then reads 22."""
    assert nx.ti_ceil_log2(2.0 ** 29) == 30 and nx.ti_ceil_log2(2.0 ** 28) == 28
    assert nx.round_bits(1.0, 0.0, 2.0 ** 29, 8, signed=True) == 22
    assert nx.round_bits(1.0, 0.0, 2.0 ** 28, 8, signed=True) == 21


def test_tensor_scale_is_the_float32_quotient():
    assert nx.tensor_scale(10.0 / 3.0, 0) == float(F32(10.0 / 3.0)) != 10.0 / 3.0
    assert nx.tensor_scale(1000.0 / 3.0, 3) == float(F32(F32(1000.0 / 3.0) / F32(8)))
    assert nx.tensor_scale(0.0, 4) == nx.FLT_MIN


# ---- §4.1 weight scale, §4.2 weight quantization ------------------------------------------------

def test_weight_scale_is_float32():
    """128 / 3 divided in double, stored in float32: 42.66666793823242."""
    assert nx.weight_scale(3.0, 8) == 42.66666793823242
    assert nx.bias_scale(3.0, 8) == 42.66666793823242
    assert nx.weight_scale(1e-16, 8) == 0.0


def test_p2_weight_scale_takes_tis_ceil_log():
    """P2: absMax = 2^ceil(log(absMax) / log 2): 3 -> 4 (scale 32); 2^29 -> 2^30 in TI's double logs."""
    assert nx.weight_scale(3.0, 8, power_of_2=True) == 32.0
    assert nx.weight_scale(2.0 ** 29, 8, power_of_2=True) == 128.0 / 2.0 ** 30
    assert nx.weight_scale(2.0 ** 28, 8, power_of_2=True) == 128.0 / 2.0 ** 28


def test_weight_quantization_rounds_the_float32_product():
    """w = 0.0585937462747097 at scale float32(128/3): the float64 product is 2.4999999156 (-> 2), the
    float32 product is exactly 2.5, + 0.5 -> 3 (TI's ``pData * quantPrec + 0.5``)."""
    s = nx.weight_scale(3.0, 8)
    w = np.array([0.0585937462747097, -0.0585937462747097], np.float32)
    assert float(w[0]) * s < 2.5
    assert nx.quantize_weights(w, s, 8).tolist() == [3, -3]
    assert nx.quantize_bias(w, s, 8).tolist() == [3, -3]


# ---- §4.4 the bias clip, §5.3 inScaleFactor, §5.4 the split: float32 ---------------------------

def test_bias_clip_of_the_weight_scale_is_float32():
    """8-bit weights, unsigned input, absMax(bias) 3, inScale 3: maxBiasScale = float32(32768 / 3) =
    10922.6669921875, maxWeightScale = float32(10922.6669921875 / 3) = 3640.888916015625, above the
    float64 quotient 32768 / 9 = 3640.8888888888887. A weight scale of exactly 3640.888916015625 is not
    clipped (float64 would clip it); 3641 is clipped to the float32 limit."""
    limit = 3640.888916015625
    assert 32768.0 / 9.0 < limit
    assert nx.clip_weight_scale_for_bias(limit, 3.0, 3.0, 8, False) == (limit, False)
    assert nx.clip_weight_scale_for_bias(3641.0, 3.0, 3.0, 8, False) == (limit, True)
    # a signed input halves the numerator: 16384 / 3 / 3 -> float32 1820.4444580078125
    assert nx.clip_weight_scale_for_bias(2000.0, 3.0, 3.0, 8, True) == (1820.4444580078125, True)


def test_in_scale_factor_is_float32():
    """weightScale 10, inScale 1, biasScale float32(10 / 7) = 1.4285714626312256: the float64 quotient is
    6.99999983... (biasB 6), the float32 quotient is exactly 7.0 (biasB 7), as TI's runtime computes the
    float32 ``inScaleFactor`` it hands to ``TIDL_conv2dBiasSplit``."""
    bias_scale = float(F32(10.0 / 7.0))
    assert 10.0 / bias_scale < 7.0
    isf = nx.in_scale_factor(10.0, 1.0, bias_scale)
    assert isf.tolist() == 7.0
    bias_a, bias_b = nx.split_bias(np.array([5]), np.array([isf]), 8, 8, False)
    assert (bias_a.tolist(), bias_b.tolist()) == ([5], [7])
    # the product weightScale x inScale rounds first: float32(3 x float32(0.1)) = 0.3 in float32
    assert nx.in_scale_factor(3.0, float(F32(0.1)), 1.0).tolist() == float(F32(F32(3.0) * F32(0.1)))


def test_bias_split_product_is_float32():
    """isf = float32(0.7) = 0.699999988079071 (isf <= 1: biasA = (int)(b isf)): for b = 10 the float64
    product 6.99999988 truncates to 6, the float32 product is 7.0 (C's int x float)."""
    isf = float(F32(0.7))
    assert 10 * isf < 7.0
    bias_a, bias_b = nx.split_bias(np.array([10, -10]), np.array([isf, isf]), 8, 8, False)
    assert (bias_a.tolist(), bias_b.tolist()) == ([7, -7], [1, 1])


def test_weight_quantization_clips_to_the_limited_range():
    """With §4.3's absMax 31 at scale 128/31: 40 is first clipped to 31 -> 128 -> saturates to 127."""
    s = nx.weight_scale(31.0, 8)
    w = np.array([40.0, -40.0, 31.5, 1.0])
    assert nx.quantize_weights(w, s, 8, limit=31.0).tolist() == [127, -128, 127, 4]
    # the clip acts before the product: at a scale of 1, 40 becomes 31, not 40
    assert nx.quantize_weights(w, 1.0, 8, limit=31.0).tolist() == [31, -31, 31, 1]


# ---- §4.3 the median range limit -----------------------------------------------------------------------

def test_median_rank_is_n_over_2_plus_1():
    """TI's ``TIDL_findKthSmallest(|w|, n, n/2 + 1)``: 0-based sorted index n // 2 + 1."""
    assert [nx.weight_median_rank(n) for n in (1, 2, 3, 4, 5, 10, 11)] == [0, 1, 2, 3, 3, 6, 6]


def test_median_limit_hand_worked():
    """|w| sorted [0.5, 1, 1, 2, 40]: TI's median is index 3 (2, numpy's is 1); 16 x 2 = 32 < 40 and
    40 > 15, so the clamp is 2^ceil(log2 32) - 1 = 31: absMax 31 (the numpy median's 16 x 1 gave 16)."""
    w = np.array([1.0, -0.5, 40.0, 2.0, -1.0])
    assert nx.limit_weight_range_median(w, 40.0, 8) == 31.0
    # 16 med = 33, just above a power of 2: the clamp is 2^6 - 1 = 63, above absMax 40, which stays
    w2 = np.array([1.0, -0.5, 40.0, 2.0625, -1.0])
    assert nx.limit_weight_range_median(w2, 40.0, 8) == 40.0
    # absMax not above 2^(bits-1)/8 - 1 = 15: no limit
    w3 = np.array([0.01, 0.01, 0.01, 15.0])
    assert nx.limit_weight_range_median(w3, 15.0, 8) == 15.0
    # 16-bit weights: the threshold is 2^15/8 - 1 = 4095
    assert nx.limit_weight_range_median(w, 40.0, 16) == 40.0


def test_median_limit_left_alone_when_tis_clamp_would_go_negative():
    """More than half of |w| zero: 16 med = 0 and TI's clamp 2^ceil(log2 0) - 1 = -1 inverts the range;
    tidlx's choice keeps the weights' own absMax."""
    w = np.array([0.0, 0.0, 0.0, 0.0, 20.0])
    assert nx.limit_weight_range_median(w, 20.0, 8) == 20.0


# ---- §6.1 release-dependent accScales ------------------------------------------------------------------

def test_data_convert_q_by_release():
    """A float input to 16 bit, signed range [-2.5, 2.5]: 11.x takes round(log2(32767 / 2.5)) =
    round(13.68) = 14; 08.06 keeps TI's 2^7. 8 bit: 7 in both."""
    assert nx.data_convert_input_q(16, True, -2.5, 2.5, "11.00") == 14
    assert nx.data_convert_input_q(16, True, -2.5, 2.5, "10.01") == 14
    assert nx.data_convert_input_q(16, True, -2.5, 2.5, "08.06") == 7
    assert nx.data_convert_input_q(8, True, -2.5, 2.5, "11.00") == 7
    # unsigned [0, 3.7]: 65535 / 3.7 = 17712 -> log2 14.11 -> 14
    assert nx.data_convert_input_q(16, False, 0.0, 3.7, "11.00") == 14
    # a range wider than the type: the scale is below 1 and stays (log2 < 0 -> 0, tidlx's choice)
    assert nx.data_convert_input_q(16, True, -1e6, 1e6, "11.00") == 0
    # the range filling the type exactly: scale 1, Q 0
    assert nx.data_convert_input_q(16, True, -30000.0, 32767.0, "11.00") == 0


def test_min_in_scale_skips_all_zero_inputs_in_11x_only():
    scales, zero = (0.5, 2.0, 4.0), (True, False, False)
    assert nx.in_scales_for_min(scales, zero, "11.00") == (2.0, 4.0)
    assert nx.in_scales_for_min(scales, zero, "10.01") == (2.0, 4.0)
    assert nx.in_scales_for_min(scales, zero, "08.06") == scales
    assert nx.in_scales_for_min(scales, (True, True, True), "11.00") == scales   # every input zero: all
    assert nx.acc_scale_eltwise_sum(nx.in_scales_for_min(scales, zero, "11.00"), 8) == 128.0
    assert nx.acc_scale_eltwise_sum(nx.in_scales_for_min(scales, zero, "08.06"), 8) == 32.0


# ---- §8.9 softmax ---------------------------------------------------------------------------------------

def test_softmax_pad_lanes_by_release():
    assert [arith.softmax_pad_lanes(w) for w in (3, 15, 16, 17, 20, 32)] == [0, 0, 0, 15, 12, 0]
    assert [arith.softmax_pad_lanes(w, narrow_row_pads=True) for w in (3, 15, 16, 17)] == [13, 1, 0, 15]


def test_softmax_narrow_row_hand_worked():
    """Three equal int8 values at inScale 100: each exp term is 1 (t = 0, p = 1). 11.x: no pads, total 3,
    out = 1 x float32(1/3). 08.06: 13 pad lanes at -128 add to the total, each TI's exp of -1.28:
    t = -1.28 / ln 2 = -1.8466, n = -1, f = (t + 1) ln 2 = -0.5869, p(f) / 2 = 0.27830 (exp(-1.28) =
    0.27804): out = 1 / (3 + 13 x 0.27830) = 0.15110."""
    q = np.zeros((1, 3), np.int8)
    new = arith.softmax(q, 100.0)
    assert new.tolist() == [[float(F32(1) / F32(3))] * 3]
    old = arith.softmax(q, 100.0, narrow_row_pads=True)
    t = -1.28 / math.log(2)
    f = (t + 1) * math.log(2)
    pad = (1 + f + f * f / 2 + f ** 3 / 6 + f ** 4 / 24) / 2
    assert pad == pytest.approx(0.27830, abs=1e-5)
    assert old[0, 0] == pytest.approx(1 / (3 + 13 * pad), rel=1e-5)
    # a row of 20: both releases pad 12 lanes, so both give the same bits
    q20 = np.arange(20, dtype=np.int8).reshape(1, 20)
    assert np.array_equal(arith.softmax(q20, 100.0).view(np.int32),
                          arith.softmax(q20, 100.0, narrow_row_pads=True).view(np.int32))
    pads = 12 * math.exp((-128 - 19) / 100.0)
    want = 1.0 / (sum(math.exp((k - 19) / 100.0) for k in range(20)) + pads)
    assert arith.softmax(q20, 100.0)[0, 19] == pytest.approx(want, rel=1e-3)     # TI's exp: ~1e-4 off


def test_softmax_exp_polynomial_hand_worked():
    """d = -1 at inScale 2: x = -0.5, t = -0.7213475, n = 0, f = t ln 2 = -0.5; p = 1 - 0.5 + 0.125 -
    0.0208333 + 0.0026042 = 0.6067708 (exp(-0.5) = 0.6065307)."""
    e = arith.softmax_exp(np.array([-1]), F32(0.5))
    assert e.dtype == np.float32
    assert float(e[0]) == pytest.approx(1 - 0.5 + 0.125 - 0.5 ** 3 / 6 + 0.5 ** 4 / 24, rel=1e-6)
    # n < -16: 0
    assert arith.softmax_exp(np.array([-1000]), F32(1.0)).tolist() == [0.0]
