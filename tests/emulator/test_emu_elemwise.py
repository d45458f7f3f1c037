"""Element-wise kernels against onnxruntime (float and integer semantics)."""

import numpy as np
import pytest

from emu_helpers import assert_close, ort_node, rand, run_kernel

UNARY = [  # (relay op, ONNX op, input range)
    ("nn.relu", "Relu", (-3, 3)), ("sigmoid", "Sigmoid", (-90, 90)), ("tanh", "Tanh", (-5, 5)),
    ("exp", "Exp", (-10, 10)), ("log", "Log", (0.01, 10)), ("sqrt", "Sqrt", (0, 10)),
    ("erf", "Erf", (-3, 3)), ("negative", "Neg", (-3, 3)), ("abs", "Abs", (-3, 3)),
    ("floor", "Floor", (-3, 3)), ("ceil", "Ceil", (-3, 3)), ("sign", "Sign", (-3, 3)),
    ("sin", "Sin", (-3, 3)), ("cos", "Cos", (-3, 3)),
]


@pytest.mark.parametrize("relay,onnx_op,bounds", UNARY)
def test_unary_matches_onnxruntime(relay, onnx_op, bounds):
    rng = np.random.default_rng(len(relay))
    x = rand(rng, (3, 70), low=bounds[0], high=bounds[1])
    assert_close(run_kernel(relay, [x]), ort_node(onnx_op, {"x": x})[0], rtol=2e-6, atol=1e-6)


def test_round_is_half_to_even_like_onnx():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4, 2.6], np.float32)
    np.testing.assert_array_equal(run_kernel("round", [x]), ort_node("Round", {"x": x})[0])


def test_rsqrt_trunc_copy_like_ops():
    x = np.array([[0.25, 4.0, -1.7, 2.2]], np.float32)
    assert_close(run_kernel("rsqrt", [np.abs(x)]), 1 / np.sqrt(np.abs(x)))
    np.testing.assert_array_equal(run_kernel("trunc", [x]), np.trunc(x))
    np.testing.assert_array_equal(run_kernel("copy", [x]), x)
    np.testing.assert_array_equal(run_kernel("zeros_like", [x]), np.zeros_like(x))
    np.testing.assert_array_equal(run_kernel("ones_like", [x]), np.ones_like(x))


BINARY = [("add", "Add"), ("subtract", "Sub"), ("multiply", "Mul"), ("divide", "Div"), ("maximum", "Max"),
          ("minimum", "Min"), ("power", "Pow"), ("equal", "Equal"), ("less", "Less"),
          ("less_equal", "LessOrEqual"), ("greater", "Greater"), ("greater_equal", "GreaterOrEqual")]


@pytest.mark.parametrize("relay,onnx_op", BINARY)
def test_broadcasting_binary_matches_onnxruntime(relay, onnx_op):
    rng = np.random.default_rng(3)
    a = rand(rng, (2, 3, 4), low=0.5, high=3)
    b = rand(rng, (3, 1), low=0.5, high=3)
    b[0, 0] = a[0, 0, 0]  # an equal pair for the comparisons
    assert_close(run_kernel(relay, [a, b]), ort_node(onnx_op, {"a": a, "b": b}, opset=13)[0], rtol=1e-6)


def test_integer_division_and_modulo_follow_relay():
    a = np.array([7, -7, 7, -7, 0, 5], np.int32)
    b = np.array([2, 2, -2, -2, 3, 5], np.int32)
    # divide truncates (ONNX Div on integers), floor_divide floors
    np.testing.assert_array_equal(run_kernel("divide", [a, b]), ort_node("Div", {"a": a, "b": b})[0])
    np.testing.assert_array_equal(run_kernel("floor_divide", [a, b]), np.floor_divide(a, b))
    # mod is C fmod (ONNX Mod fmod=1), floor_mod takes the divisor's sign (ONNX Mod fmod=0)
    np.testing.assert_array_equal(run_kernel("mod", [a, b]), ort_node("Mod", {"a": a, "b": b}, dict(fmod=1))[0])
    np.testing.assert_array_equal(run_kernel("floor_mod", [a, b]), ort_node("Mod", {"a": a, "b": b})[0])
    fa, fb = a.astype(np.float32), b.astype(np.float32)
    # (onnxruntime only takes fmod=1 for floats)
    np.testing.assert_array_equal(run_kernel("mod", [fa, fb]), ort_node("Mod", {"a": fa, "b": fb}, dict(fmod=1))[0])
    np.testing.assert_array_equal(run_kernel("floor_mod", [fa, fb]), np.mod(fa, fb))
    assert run_kernel("floor_divide", [fa, fb]).dtype == np.float32


def test_logical_ops_and_where():
    rng = np.random.default_rng(4)
    p = rng.random((3, 4)) > 0.5
    q = rng.random((1, 4)) > 0.5
    for relay, onnx_op in (("logical_and", "And"), ("logical_or", "Or"), ("logical_xor", "Xor")):
        np.testing.assert_array_equal(run_kernel(relay, [p, q]), ort_node(onnx_op, {"p": p, "q": q})[0])
    np.testing.assert_array_equal(run_kernel("logical_not", [p]), ~p)
    x, y = rand(rng, (3, 4)), rand(rng, (4,))
    np.testing.assert_array_equal(run_kernel("where", [p, x, y]), ort_node("Where", {"c": p, "x": x, "y": y})[0])


def test_leaky_relu_prelu_clip():
    rng = np.random.default_rng(5)
    x = rand(rng, (2, 3, 4, 4), low=-2, high=2)
    assert_close(run_kernel("nn.leaky_relu", [x], alpha=0.1),
                 ort_node("LeakyRelu", {"x": x}, dict(alpha=0.1))[0], rtol=0, atol=0)
    slope = rand(rng, (3,))
    assert_close(run_kernel("nn.prelu", [x, slope], axis=1),
                 ort_node("PRelu", {"x": x, "s": slope.reshape(3, 1, 1)})[0], rtol=0, atol=0)
    lo, hi = np.array(-0.5, np.float32), np.array(0.75, np.float32)
    assert_close(run_kernel("clip", [x], a_min=-0.5, a_max=0.75),
                 ort_node("Clip", {"x": x, "lo": lo, "hi": hi})[0], rtol=0, atol=0)
    q = np.array([-128, -3, 0, 5, 127], np.int8)
    got = run_kernel("clip", [q], a_min=-4.5, a_max=100.0)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, [-4, -3, 0, 5, 100])


def test_cast_truncates_like_onnxruntime():
    x = np.array([-2.7, -0.5, 0.5, 2.7, 100.2], np.float32)
    from onnx import TensorProto
    for dtype, proto in (("int32", TensorProto.INT32), ("int8", TensorProto.INT8)):
        np.testing.assert_array_equal(run_kernel("cast", [x], dtype=dtype),
                                      ort_node("Cast", {"x": x}, dict(to=proto))[0])
    np.testing.assert_array_equal(run_kernel("cast", [x], dtype="bool"), x != 0)


def test_fast_sigmoid_within_its_tolerance_of_the_reference_and_onnxruntime():
    """The fast set's float32 sigmoid (emulator/fast/_exp.py) is not numpy's bits: it declares a
    tolerance, and keeps it against the reference kernel and onnxruntime over [-100, 95] (the
    exact value's range of float32 outputs, numpy's overflow to 0 included)."""
    from tidlx.emulator.registry import FAST, get_kernel
    from tidlx.ir import get_op

    tolerance = get_op("sigmoid").get_attr(FAST).tolerance
    assert tolerance is not None and tolerance <= 1e-6
    x = np.linspace(-100, 95, 300_006, dtype=np.float32).reshape(1, 7, -1)
    fast = run_kernel("sigmoid", [x])
    attrs = get_op("sigmoid").make_attrs({})
    reference = get_kernel("sigmoid", "reference")([x], attrs, None)
    for other in (reference, ort_node("Sigmoid", {"x": x})[0]):  # (onnxruntime gives 0 from x = -18 down)
        assert fast.dtype == other.dtype == np.float32
        assert np.max(np.abs(fast.astype(np.float64) - other)) <= tolerance * np.max(np.abs(other))
    small = (reference >= np.finfo(np.float32).tiny) & (reference < 1e-30)  # relative where tiny (normal) too
    assert small.any()
    assert np.max(np.abs(fast[small] - reference[small]) / reference[small]) <= tolerance
    assert np.array_equal(fast == 0, reference == 0)
    assert fast.tobytes() != reference.tobytes()  # it really is the fast kernel
    # a non-contiguous view gives the bits of its contiguous copy
    view = x.transpose(2, 1, 0)[::3]
    assert run_kernel("sigmoid", [view]).tobytes() == run_kernel("sigmoid", [np.ascontiguousarray(view)]).tobytes()


def _nan(bits):
    return np.array([bits], np.uint32).view(np.float32)[0]


@pytest.mark.parametrize("shape,factor_shape", [
    ((1, 144, 56, 56), (1, 144, 1, 1)), ((1, 1152, 7, 7), (1, 1152, 1, 1)), ((1, 96, 112, 112), (96, 1, 1)),
    ((2, 40, 9, 9), (2, 40, 1, 1)), ((3, 4, 5, 6, 70), (3, 4, 1, 1, 1)), ((1, 50, 700), (1, 50, 1)),
    ((2, 40, 9, 9), (1, 40, 1, 1)),  # broadcast along the batch too: the reference's loop
    ((1, 64, 8, 8), (1, 64, 8, 1)), ((1, 640, 8, 8), (1, 1, 1, 1))])
def test_plane_scale_multiply_gives_numpy_bits(shape, factor_shape):
    """The fast multiply's squeeze-excite path (numba, planes times a factor each): numpy's bits in
    both operand orders, with NaN / inf / signed zero operands, for 1 and 2 threads."""
    from tidlx.emulator import EmulatorConfig, run
    from tidlx.ir import Function, IRModule, TensorType, Var, call

    rng = np.random.default_rng(len(shape))
    x = rng.normal(0, 3, shape).astype(np.float32)
    factors = rng.normal(0, 1, factor_shape).astype(np.float32)
    x.reshape(-1)[:8] = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, _nan(0x7F800001), _nan(0xFFC01234)]
    factors.reshape(-1)[:1] = 0.0  # inf * 0: the default NaN
    for a, b in ((x, factors), (factors, x)):
        with np.errstate(invalid="ignore"):  # inf * 0 (the reference's numpy warns)
            want = np.multiply(a, b).tobytes()
            assert run_kernel("multiply", [a, b]).tobytes() == want
            va, vb = Var("a", TensorType(a.shape, "float32")), Var("b", TensorType(b.shape, "float32"))
            mod = IRModule({"main": Function([va, vb], call("multiply", va, vb))})
            for config in (EmulatorConfig(threads=1), EmulatorConfig(threads=2, adapt=False),
                           EmulatorConfig(parallel="pool")):
                assert run(mod, {"a": a, "b": b}, config=config)[0].tobytes() == want


def test_plane_scale_multiply_takes_numba_blocks_and_leaves_nan_factors_to_numpy(monkeypatch):
    from tidlx.emulator import EmulatorConfig
    from tidlx.emulator.fast import _exp, _parallel

    calls = []
    for name in ("scale_planes", "scale_planes_blocks"):
        loop = getattr(_exp, name)
        monkeypatch.setattr(_exp, name, lambda *a, _l=loop, _n=name: (calls.append((_n,) + a[-2:]), _l(*a)))
    rng = np.random.default_rng(9)
    x = rng.normal(0, 3, (1, 144, 56, 56)).astype(np.float32)
    factors = rng.normal(0, 1, (1, 144, 1, 1)).astype(np.float32)
    with _parallel.run_context(EmulatorConfig(threads=2, adapt=False)):
        got = run_kernel("multiply", [x, factors])
        small = run_kernel("multiply", [x[:, :16, :16, :16], factors[:, :16]])
        two = _parallel.numba_threads() > 1
    assert got.tobytes() == (x * factors).tobytes() and small.tobytes() == (x[:, :16, :16, :16] * factors[:, :16]).tobytes()
    assert calls == ([("scale_planes_blocks", 144, 2)] if two else [("scale_planes", 0, 144)]) + [("scale_planes", 0, 16)]
    # two NaN operands: numpy's result depends on its loop (x's NaN or the factor's), so NaN factors are its
    calls.clear()
    factors.reshape(-1)[3] = _nan(0xFFC00002)
    x[0, 3, 0, 0] = _nan(0x7FC00001)
    with np.errstate(invalid="ignore"):
        assert run_kernel("multiply", [x, factors]).tobytes() == np.multiply(x, factors).tobytes()
        assert run_kernel("multiply", [factors, x]).tobytes() == np.multiply(factors, x).tobytes()
    assert calls == []


def test_plane_scale_multiply_float64_and_mixed_dtypes():
    rng = np.random.default_rng(11)
    x = rng.normal(0, 3, (1, 48, 14, 14))
    factors = rng.normal(0, 1, (1, 48, 1, 1))
    x.reshape(-1)[:3] = [np.nan, np.inf, -0.0]
    assert run_kernel("multiply", [x, factors]).tobytes() == np.multiply(x, factors).tobytes()
    got = run_kernel("multiply", [factors.astype(np.float32), x.astype(np.float32)])
    assert got.tobytes() == np.multiply(factors.astype(np.float32), x.astype(np.float32)).tobytes()
