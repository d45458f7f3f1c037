"""§8.9 softmax with a fixed-point output (TI's integer kernel): the rule functions of
emulator/fixed/arith.py against the oracle written from docs/numerics.md, bit for bit, and the
document's worked examples by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import oracle
from fixed_cases import count
from tidlx.emulator.fixed import arith

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@settings(max_examples=150, **SETTINGS)
@given(st.data())
def test_softmax_fixed_matches_oracle(data):
    count("softmax_fixed")
    bits = data.draw(st.sampled_from([8, 16]))
    signed = data.draw(st.booleans())
    lo, hi = oracle.bounds(bits, signed)
    length = data.draw(st.sampled_from([1, 2, 3, 10, 16, 17, 64, 197, 300]))
    rows = data.draw(st.integers(1, 3))
    spread = data.draw(st.sampled_from([hi - lo, 40, 3]))          # rows far apart, close, near-uniform
    base = data.draw(st.integers(lo, hi - spread))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    q = rng.integers(base, base + spread, size=(rows, 2, length), endpoint=True).astype(oracle.dtype(bits, signed))
    in_scale = data.draw(st.one_of(st.floats(0.05, 400.0), st.sampled_from([1.0, 8.0, 32.0, 127.0, 4096.0])))
    out_scale = 256.0 if bits == 8 else 254.0 * length
    rule = data.draw(st.sampled_from(arith.SOFTMAX_EXP_RULES))
    axis = data.draw(st.sampled_from([-1, 0]))
    got = arith.softmax_fixed(q, in_scale, out_scale, arith.FixedType(bits, False), axis=axis, exp_rule=rule)
    want = np.moveaxis(oracle.softmax_fixed_last_axis(np.moveaxis(q, axis, -1), in_scale, out_scale, bits, rule),
                       -1, axis)
    assert got.dtype == oracle.dtype(bits, False)
    np.testing.assert_array_equal(got, want)


def test_c7x_reciprocal_matches_oracle_on_every_leading_byte():
    """Every top-8-bit pattern of the fraction, over exponents, with the lower bits set at random."""
    rng = np.random.default_rng(3)
    fractions = (np.arange(256, dtype=np.uint32) << 15) | rng.integers(0, 1 << 15, 256).astype(np.uint32)
    for exponent in (127, 135, 150, 158):
        v = ((np.uint32(exponent) << 23) | fractions).view(np.float32)
        got = arith.c7x_reciprocal(v)
        want = np.array([oracle.c7x_recip(x) for x in v], np.float32)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_worked_example_8bit():
    """docs/numerics.md §8.9, fixed-point output, 8 bit: uint8 (8, 0) at inScale 8, outScale 256."""
    q = np.array([[8, 0]], np.uint8)
    assert arith.softmax_exp_8bit(np.array([0, -8]), 8.0).tolist() == [255, 94]
    assert float(arith.c7x_reciprocal(np.float32(349))) == 376 * 2.0 ** -17
    scale, shift = arith.softmax_row_multiplier(np.array(349), 256.0)
    assert (int(scale), int(shift)) == (188, -8)
    assert arith.softmax_fixed(q, 8.0, 256.0, arith.FixedType(8, False)).tolist() == [[187, 69]]


def test_worked_example_16bit():
    """docs/numerics.md §8.9, 16 bit: int16 (8, 0) at inScale 8, outScale 508."""
    q = np.array([[8, 0]], np.int16)
    assert float(arith.exp_taylor(np.float32(-1.0))) == float(np.float32(0.36789024))
    assert arith.softmax_exp_16bit(np.array([0, -8]), 8.0).tolist() == [65535, 24110]
    scale, shift = arith.softmax_row_multiplier(np.array(65535 + 24110), 508.0)
    assert (int(scale), int(shift)) == (185, -15)
    assert arith.softmax_fixed(q, 8.0, 508.0, arith.FixedType(16, False)).tolist() == [[370, 136]]


def test_rounding_rules():
    """§8.9's two roundings: the 16-bit exponential's tie goes to the even integer, the 8-bit one's away
    from zero; the multiplier's scale is truncated."""
    assert arith.float_to_int_c7x(np.array([0.5, 1.5, 2.5, 24109.5], np.float32)).tolist() == [0, 2, 2, 24110]
    assert arith.round_half_away(np.array([0.5, 1.5, 2.5, 93.5])).tolist() == [1, 2, 3, 94]
    scale, shift = arith.float_to_scale_and_shift(np.float32(0.999))
    assert (int(scale), int(shift)) == (255, -8)             # 0.999 * 256 = 255.74, truncated
    scale, shift = arith.float_to_scale_and_shift(np.float32(300.0))
    assert (int(scale), int(shift)) == (150, 1)


def test_the_constants_that_decide_a_rounding():
    """Cases at a rounding edge: the 8-bit rule multiplies by 1 / float32(1/255) = 254.99998, not 255
    (exp(-1 / 14.948974609375) * 255 = 238.500003, * 254.99998 = 238.499989); exp_taylor's last term uses
    TI's 0.0416667, not 1/24 (X(-1.34375) = 0.26130316, * 65535 = 17124.5024, where 1/24 gives 17124.4995)."""
    assert arith.softmax_exp_8bit(np.array([0, -1]), 14.948974609375).tolist() == [255, 238]
    assert arith.softmax_exp_16bit(np.array([0, -43]), 32.0).tolist() == [65535, 17125]


def test_a_left_shift_and_the_saturation():
    """A multiplier of at least 128 (shift >= 0) shifts left; the output stops at the type's top."""
    assert arith.softmax_requantize(np.array([1, 255, 65535]), 200, 2, 65535).tolist() == [800, 65535, 65535]
    assert arith.softmax_requantize(np.array([255]), 255, -7, 255).tolist() == [255]     # 508.0 -> 255


def test_pairs_ti_does_not_build_are_refused():
    with pytest.raises(arith.FixedPointError, match="unsigned at the input's width"):
        arith.softmax_fixed(np.zeros((1, 4), np.int16), 8.0, 256.0, arith.FixedType(8, False))
    with pytest.raises(arith.FixedPointError, match="unsigned"):
        arith.softmax_fixed(np.zeros((1, 4), np.int8), 8.0, 256.0, arith.FixedType(8, True))
    with pytest.raises(arith.FixedPointError, match="exponential rule"):
        arith.softmax_fixed(np.zeros((1, 4), np.int8), 8.0, 256.0, arith.FixedType(8, False), exp_rule="exact")
