"""QNN kernels: Relay's integer semantics, checked against onnxruntime's QuantizeLinear,
DequantizeLinear, ConvInteger and MatMulInteger and against exact rational arithmetic."""

import math
from fractions import Fraction

import numpy as np
import pytest

from emu_helpers import ort_node, run_kernel
from tidlx.emulator.reference.op_qnn import fixed_point_multiplier

f32 = np.float32
i32 = np.int32


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_quantize_matches_quantize_linear(dtype):
    rng = np.random.default_rng(0)
    x = rng.uniform(-3, 3, (2, 3, 4)).astype(f32)
    x[0, 0, :4] = [0.25, 0.75, -0.25, 1.25]  # halves: round to even
    zp = np.array(3 if dtype == "int8" else 128, dtype)
    ref = ort_node("QuantizeLinear", {"x": x, "s": np.array(0.02, f32), "z": zp})[0]
    got = run_kernel("qnn.quantize", [x, f32(0.02), np.array(int(zp), i32)], out_dtype=dtype)
    np.testing.assert_array_equal(got, ref)
    half = run_kernel("qnn.quantize", [x[0, 0, :4], f32(0.5), np.array(0, i32)], out_dtype=dtype)
    if dtype == "int8":
        np.testing.assert_array_equal(half, [0, 2, 0, 2])


def test_per_channel_quantize_and_dequantize():
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, (2, 3, 4)).astype(f32)
    scale = np.array([0.01, 0.02, 0.05], f32)
    zp8 = np.array([0, -5, 7], np.int8)
    ref_q = ort_node("QuantizeLinear", {"x": x, "s": scale, "z": zp8}, dict(axis=1))[0]
    q = run_kernel("qnn.quantize", [x, scale, zp8.astype(i32)], axis=1, out_dtype="int8")
    np.testing.assert_array_equal(q, ref_q)
    ref_d = ort_node("DequantizeLinear", {"q": q, "s": scale, "z": zp8}, dict(axis=1))[0]
    d = run_kernel("qnn.dequantize", [q, scale, zp8.astype(i32)], axis=1)
    np.testing.assert_array_equal(d, ref_d)


def exact_requantize(x, in_scale, out_scale, rounding):
    """The rational value TVM's fixed-point multiply rounds: x * significand * 2^(exponent - 31)."""
    sig, exp = fixed_point_multiplier(np.float64(in_scale) / np.float64(out_scale))
    m = Fraction(int(sig)) * Fraction(2) ** (int(exp) - 31)
    out = []
    for v in x.reshape(-1).tolist():
        exact = m * v
        if rounding == "TONEAREST":
            r = math.floor(abs(exact) + Fraction(1, 2)) * (1 if exact >= 0 else -1)
        else:
            r = math.floor(exact + Fraction(1, 2))
        out.append(r)
    return np.array(out).reshape(x.shape)


@pytest.mark.parametrize("rounding", ["None", "UPWARD", "TONEAREST"])
@pytest.mark.parametrize("in_scale,out_scale", [(0.5, 1.0), (0.0123, 0.37), (3.7, 0.11), (1e-6, 0.5)])
def test_requantize_fixed_point_matches_exact_arithmetic(rounding, in_scale, out_scale):
    rng = np.random.default_rng(2)
    x = rng.integers(-20000, 20000, (64,)).astype(i32)
    x[:4] = [5, -5, 3, -3]
    got = run_kernel("qnn.requantize", [x, f32(in_scale), i32(0), f32(out_scale), i32(0)],
                     rounding=rounding, out_dtype="int32")
    ref = exact_requantize(x, f32(in_scale), f32(out_scale), rounding)
    np.testing.assert_array_equal(got, ref)
    # and within one unit of the float answer
    assert np.abs(got - np.round(x * (np.float64(f32(in_scale)) / np.float64(f32(out_scale))))).max() <= 1


def test_requantize_rounding_of_halves():
    x = np.array([5, -5, 3, -3], i32)
    up = run_kernel("qnn.requantize", [x, f32(0.5), i32(0), f32(1.0), i32(0)], out_dtype="int32")
    near = run_kernel("qnn.requantize", [x, f32(0.5), i32(0), f32(1.0), i32(0)], rounding="TONEAREST",
                      out_dtype="int32")
    np.testing.assert_array_equal(up, [3, -2, 2, -1])      # halves go up
    np.testing.assert_array_equal(near, [3, -3, 2, -2])    # halves go away from zero


def test_requantize_zero_points_saturation_and_per_channel():
    x = np.array([[100, -100, 2000], [7, 8, 9]], i32)
    got = run_kernel("qnn.requantize", [x, f32(0.5), i32(10), f32(0.25), i32(-3)], out_dtype="int8")
    np.testing.assert_array_equal(got, np.clip((x - 10) * 2 - 3, -128, 127))
    scales = np.array([0.5, 1.0, 2.0], f32)
    got = run_kernel("qnn.requantize", [x, scales, np.zeros(3, i32), f32(1.0), i32(0)], axis=1,
                     out_dtype="int32")
    np.testing.assert_array_equal(got, [[50, -100, 4000], [4, 8, 18]])
    fp = run_kernel("qnn.requantize", [x, f32(0.5), i32(0), f32(1.0), i32(0)], compute_dtype="float32",
                    out_dtype="int32")
    np.testing.assert_array_equal(fp, np.rint(x * 0.5))  # float compute rounds half to even


def test_qnn_conv2d_matches_conv_integer():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (1, 3, 7, 6)).astype(np.uint8)
    w = rng.integers(0, 256, (4, 3, 3, 3)).astype(np.uint8)
    x_zp, w_zp = np.uint8(120), np.uint8(131)
    ref = ort_node("ConvInteger", {"x": x, "w": w, "xz": np.array(x_zp), "wz": np.array(w_zp)},
                   dict(pads=[1, 2, 0, 1], strides=[1, 2]))[0]
    got = run_kernel("qnn.conv2d", [x, w, i32(x_zp), i32(w_zp), f32(0.1), f32(0.2)],
                     padding=(1, 2, 0, 1), strides=(1, 2), kernel_size=(3, 3), channels=4)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, ref)


def test_qnn_conv2d_per_channel_kernel_zero_point_depthwise():
    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, (1, 4, 5, 5)).astype(np.int8)
    w = rng.integers(-128, 128, (4, 1, 3, 3)).astype(np.int8)
    w_zp = np.array([0, 1, -2, 3], i32)
    got = run_kernel("qnn.conv2d", [x, w, i32(-3), w_zp, f32(0.1), np.full(4, 0.2, f32)], padding=(1, 1),
                     groups=4)
    xs = np.pad(x.astype(np.int64) + 3, ((0, 0), (0, 0), (1, 1), (1, 1)))  # padding is the zero point
    ws = w.astype(np.int64) - w_zp.reshape(4, 1, 1, 1)
    ref = np.zeros((1, 4, 5, 5), np.int64)
    for c in range(4):
        for i in range(3):
            for j in range(3):
                ref[0, c] += xs[0, c, i:i + 5, j:j + 5] * ws[c, 0, i, j]
    np.testing.assert_array_equal(got, ref)


def test_qnn_dense_matches_matmul_integer():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (3, 16)).astype(np.uint8)
    w = rng.integers(0, 256, (5, 16)).astype(np.uint8)
    w_zp = rng.integers(0, 256, (5,)).astype(np.uint8)
    ref = ort_node("MatMulInteger", {"a": x, "b": w.T.copy(), "az": np.array(17, np.uint8), "bz": w_zp})[0]
    got = run_kernel("qnn.dense", [x, w, i32(17), w_zp.astype(i32), f32(0.1), np.full(5, 0.3, f32)])
    np.testing.assert_array_equal(got, ref)


def _requantized(q, zp, scale, out_scale, out_zp):
    """One input moved to the output's quantization, rounding halves up (TVM's default)."""
    return np.floor((q.astype(np.float64) - zp) * (np.float64(scale) / np.float64(out_scale)) + 0.5) + out_zp


@pytest.mark.parametrize("relay", ["qnn.add", "qnn.subtract"])
def test_qnn_add_subtract_follow_the_canonical_form(relay):
    # Q_c = Q_a' +- Q_b' -+ zp_c, each input requantized to the output parameters first.
    rng = np.random.default_rng(6)
    a = rng.integers(-128, 128, (4, 8)).astype(np.int8)
    b = rng.integers(-128, 128, (8,)).astype(np.int8)
    sa, za, sb, zb, so, zo = f32(0.05), 3, f32(0.08), -4, f32(0.1), 2
    got = run_kernel(relay, [a, b, sa, i32(za), sb, i32(zb), so, i32(zo)])
    assert got.dtype == np.int8
    qa, qb = _requantized(a, za, sa, so, zo), _requantized(b, zb, sb, so, zo)
    ref = qa + qb - zo if relay == "qnn.add" else qa - qb + zo
    np.testing.assert_array_equal(got, np.clip(ref, -128, 127))
    # which is within one unit of the float result
    fa, fb = (a - np.float64(za)) * sa, (b - np.float64(zb)) * sb
    exact = (fa + fb if relay == "qnn.add" else fa - fb) / so + zo
    assert np.abs(got - np.clip(np.round(exact), -128, 127)).max() <= 1


def test_qnn_mul_requantizes_the_integer_product():
    rng = np.random.default_rng(7)
    a = rng.integers(-128, 128, (4, 8)).astype(np.int8)
    b = rng.integers(-128, 128, (8,)).astype(np.int8)
    sa, za, sb, zb, so, zo = f32(0.05), 3, f32(0.08), -4, f32(0.2), 2
    got = run_kernel("qnn.mul", [a, b, sa, i32(za), sb, i32(zb), so, i32(zo)])
    product = (a.astype(np.int64) - za) * (b.astype(np.int64) - zb)
    ref = np.floor(product * (np.float64(f32(sa * sb)) / np.float64(so)) + 0.5) + zo
    np.testing.assert_array_equal(got, np.clip(ref, -128, 127))


def test_qnn_add_with_identical_params_is_exact_integer_add():
    a = np.array([10, 20, 100], np.int8)
    b = np.array([1, 2, 100], np.int8)
    got = run_kernel("qnn.add", [a, b, f32(0.1), i32(5), f32(0.1), i32(5), f32(0.1), i32(5)])
    np.testing.assert_array_equal(got, [6, 17, 127])  # a + b - zp, saturated


def test_qnn_concatenate_requantizes_differing_inputs():
    a = np.array([[10, -10]], np.int8)
    b = np.array([[10, -10]], np.int8)
    got = run_kernel("qnn.concatenate", [(a, b), (f32(0.1), f32(0.2)), (i32(0), i32(0)), f32(0.1), i32(0)],
                     axis=1)
    np.testing.assert_array_equal(got, [[10, -10, 20, -20]])
