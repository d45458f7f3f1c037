"""The fast fixed-point kernels (emulator/fixed/fast_kernels.py) against the plain ones (layers.py), bit for
bit: random Conv and InnerProduct layers drawn by hypothesis (shapes, groups, depthwise, strides, dilations,
pads, 8/16-bit inputs, weights and outputs, signed or not, per-channel roundBits, values at the saturation
edges, int32 accumulators past their limits so they wrap), on the VNNI microkernel and on the int32 numba
loops without it; then whole quantized models with 1 and 2 threads."""

from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import tidlx
from tidlx.emulator import EmulatorConfig
from tidlx.emulator.fixed import _vnni, fast_kernels
from tidlx.emulator.fixed.arith import FixedPointError
from tidlx.emulator.fixed.kernel_set import fixed_layer_kernels, fixed_point_kernel_set, run_fixed
from tidlx.emulator.fixed.layers import KERNELS
from tidlx.emulator.fixed.network import QuantizedLayer, QuantizedTensor

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CASES: Counter = Counter()


@pytest.fixture(scope="module", autouse=True)
def report_cases(request):
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and CASES:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\nfast vs reference fixed-point kernels: {sum(CASES.values())} hypothesis "
                                f"cases compared ({', '.join(f'{k} {v}' for k, v in sorted(CASES.items()))})")


def _dtype(bits, signed):
    return np.dtype(("int" if signed else "uint") + str(bits))


def _bounds(bits, signed):
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


@st.composite
def int_array(draw, shape, bits, signed):
    """Random integers of a type; often all at one end (the largest sums) or at mixed ends."""
    lo, hi = _bounds(bits, signed)
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    mode = draw(st.sampled_from(["uniform", "edges", "high", "low", "small"]))
    if mode == "uniform":
        v = rng.integers(lo, hi + 1, shape)
    elif mode == "edges":
        v = rng.choice(np.array(sorted({lo, lo + 1, 0, 1, hi - 1, hi})), shape)
    elif mode == "high":
        v = np.full(shape, hi)
    elif mode == "low":
        v = np.full(shape, lo)
    else:
        v = rng.integers(max(lo, -3), min(hi, 3) + 1, shape)
    return v.astype(_dtype(bits, signed))


@st.composite
def bias_parts(draw, channels, weight_bits):
    """biasA x biasB per channel, sometimes near the int32 ends so that the accumulator wraps."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    kind = draw(st.sampled_from(["split", "near-limit", "zero"]))
    if kind == "zero":
        return np.zeros(channels, np.int64), np.ones(channels, np.int64)
    if kind == "near-limit" and weight_bits == 8:
        a = np.where(rng.random(channels) < 0.5, rng.integers(2 ** 31 - 2 ** 17, 2 ** 31, channels),
                     rng.integers(-2 ** 31, -2 ** 31 + 2 ** 17, channels))
        return a.astype(np.int64), np.ones(channels, np.int64)
    a_lim = 1 << (2 * weight_bits - 1)
    return (rng.integers(-a_lim, a_lim, channels).astype(np.int64),
            rng.integers(1, 256 if weight_bits == 8 else 65536, channels).astype(np.int64))


@st.composite
def output_side(draw, channels, weight_bits):
    """(output type, bounds, roundBits): a scalar or one per channel, around where real layers sit."""
    bits, signed = draw(st.sampled_from([8, 16])), draw(st.booleans())
    lo, hi = _bounds(bits, signed)
    bounds = None
    if draw(st.booleans()):
        a, b = sorted((draw(st.integers(lo, hi)), draw(st.integers(lo, hi))))
        bounds = (a, b)
    top = 40 if weight_bits == 16 else 30
    if draw(st.booleans()):
        rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
        rb = rng.integers(0, top + 1, channels).astype(np.int64)
    else:   # and shifts past the accumulator's width (every value rounds to 0 or -1)
        rb = draw(st.one_of(st.integers(0, top), st.sampled_from([31, 32, 47, 62])))
    return bits, signed, bounds, rb


def _layer(kind, weights, bias, rb, bounds, attrs=None):
    return QuantizedLayer(0, "drawn", kind, 1 if kind == "Conv" else 6, (0,), (1,), attrs=attrs or {},
                          weights=weights, weight_bits=weights.dtype.itemsize * 8, bias_a=bias[0], bias_b=bias[1],
                          round_bits=rb, bounds=bounds)


@st.composite
def conv_case(draw):
    depthwise = draw(st.integers(0, 3)) == 0
    groups = draw(st.integers(1, 4))
    if depthwise:
        cg, og = 1, draw(st.integers(1, 2))
    else:
        cg = draw(st.sampled_from([1, 2, 3, 4, 5, 8, 12, 17]))
        og = draw(st.integers(1, 20))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    pads = tuple(draw(st.integers(0, 3)) for _ in range(4))
    h = draw(st.integers(max(1, dh * (kh - 1) + 1 - pads[0] - pads[2]), 20))
    w = draw(st.integers(max(1, dw * (kw - 1) + 1 - pads[1] - pads[3]), 40))
    n = draw(st.integers(1, 2))
    in_bits, in_signed = draw(st.sampled_from([8, 8, 8, 16])), draw(st.booleans())
    weight_bits = 16 if in_bits == 16 and draw(st.booleans()) else draw(st.sampled_from([8, 8, 8, 16]))
    c, o = cg * groups, og * groups
    x = draw(int_array((n, c, h, w), in_bits, in_signed))
    weights = draw(int_array((o, cg, kh, kw), weight_bits, True))
    bias = draw(bias_parts(o, weight_bits))
    out_bits, out_signed, bounds, rb = draw(output_side(o, weight_bits))
    attrs = dict(strides=(sh, sw), dilations=(dh, dw), pads=pads, groups=groups)
    layer = _layer("Conv", weights, bias, rb, bounds, attrs)
    oh = (h + pads[0] + pads[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pads[1] + pads[3] - dw * (kw - 1) - 1) // sw + 1
    tensors = (QuantizedTensor(0, "x", x.shape, in_bits, in_signed, 1.0),
               QuantizedTensor(1, "y", (n, o, oh, ow), out_bits, out_signed, 1.0))
    return layer, x, tensors


def _no_fallback(monkeypatch):
    """The drawn layers are all ones the fast path takes: a hand-off to the plain kernel fails the test."""
    def refuse(layer, xs, tensors):
        raise AssertionError(f"the fast kernel handed {layer.describe()} to the plain kernel")
    monkeypatch.setattr(fast_kernels, "_reference", refuse)


def _same(got, expected):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if not np.array_equal(got, expected):
        bad = np.argwhere(got != expected)
        raise AssertionError(f"{len(bad)} values differ, first at {tuple(bad[0])}: {got[tuple(bad[0])]} "
                             f"!= {expected[tuple(bad[0])]}")


@settings(max_examples=250, **SETTINGS)
@given(conv_case())
def test_fast_convolution_is_the_reference(case):
    layer, x, tensors = case
    expected = KERNELS["Conv"](layer, [x], tensors)[0]
    with pytest.MonkeyPatch.context() as mp:
        _no_fallback(mp)
        for vnni in (True, False):
            _same(fast_kernels.fast_conv_kernel(layer, [x], tensors, vnni=vnni)[0], expected)
    CASES[f"conv {layer.weights.dtype.itemsize * 8}-bit weights"] += 1


@st.composite
def inner_product_case(draw):
    n, k, m = draw(st.integers(1, 3)), draw(st.integers(1, 700)), draw(st.integers(1, 40))
    in_bits, in_signed = draw(st.sampled_from([8, 16])), draw(st.booleans())
    weight_bits = draw(st.sampled_from([8, 16]))
    x = draw(int_array((n, k), in_bits, in_signed))
    weights = draw(int_array((m, k), weight_bits, True))
    bias = draw(bias_parts(m, weight_bits))
    out_bits, out_signed, bounds, rb = draw(output_side(m, weight_bits))
    tensors = (QuantizedTensor(0, "x", x.shape, in_bits, in_signed, 1.0),
               QuantizedTensor(1, "y", (n, m), out_bits, out_signed, 1.0))
    return _layer("InnerProduct", weights, bias, rb, bounds), x, tensors


@settings(max_examples=150, **SETTINGS)
@given(inner_product_case())
def test_fast_inner_product_is_the_reference(case):
    layer, x, tensors = case
    expected = KERNELS["InnerProduct"](layer, [x], tensors)[0]
    with pytest.MonkeyPatch.context() as mp:
        _no_fallback(mp)
        _same(fast_kernels.fast_inner_product_kernel(layer, [x], tensors)[0], expected)
    CASES["inner product"] += 1


@st.composite
def eltwise_case(draw):
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 6)), draw(st.integers(1, 9)), draw(st.integers(1, 9)))
    types = [(draw(st.sampled_from([8, 16])), draw(st.booleans())) for _ in range(2)]
    xs = [draw(int_array(shape, bits, signed)) for bits, signed in types]
    # multipliers as §6.5 makes them, and large ones so that the int32 sum wraps
    multipliers = tuple(draw(st.one_of(st.integers(0, 255), st.integers(-2 ** 20, 2 ** 20))) for _ in range(2))
    out_bits, out_signed, bounds, _ = draw(output_side(1, 8))
    rb = draw(st.integers(0, 40))
    layer = QuantizedLayer(0, "sum", "EltWise", 2, (0, 1), (2,), attrs={"eltwise_type": "Sum"}, round_bits=rb,
                           multipliers=multipliers, bounds=bounds)
    tensors = (QuantizedTensor(0, "a", shape, *types[0], 1.0), QuantizedTensor(1, "b", shape, *types[1], 1.0),
               QuantizedTensor(2, "y", shape, out_bits, out_signed, 1.0))
    return layer, xs, tensors


@settings(max_examples=80, **SETTINGS)
@given(eltwise_case())
def test_fast_eltwise_sum_is_the_reference(case):
    layer, xs, tensors = case
    expected = KERNELS["EltWise"](layer, xs, tensors)[0]
    with pytest.MonkeyPatch.context() as mp:
        _no_fallback(mp)
        _same(fast_kernels.fast_eltwise_kernel(layer, xs, tensors)[0], expected)
    CASES["element-wise sum"] += 1


@st.composite
def product_case(draw):
    """Two 8/16-bit inputs of ranks 1-6 that broadcast (axes of 1, missing leading axes), as BEVDet's depth x
    context product does."""
    rank = draw(st.integers(1, 6))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(rank))
    shapes = []
    for _ in range(2):
        own = tuple(1 if draw(st.integers(0, 2)) == 0 else d for d in shape)
        shapes.append(own[draw(st.integers(0, rank - 1)):])
    types = [(draw(st.sampled_from([8, 16])), draw(st.booleans())) for _ in range(2)]
    xs = [draw(int_array(sh, bits, signed)) for sh, (bits, signed) in zip(shapes, types)]
    out_shape = np.broadcast_shapes(*shapes)
    out_bits, out_signed, bounds, _ = draw(output_side(1, 8))
    rb = draw(st.one_of(st.integers(0, 40), st.sampled_from([62])))
    layer = QuantizedLayer(0, "product", "EltWise", 2, (0, 1), (2,), attrs={"eltwise_type": "Prod"}, round_bits=rb,
                           bounds=bounds)
    tensors = (QuantizedTensor(0, "a", shapes[0], *types[0], 1.0), QuantizedTensor(1, "b", shapes[1], *types[1], 1.0),
               QuantizedTensor(2, "y", out_shape, out_bits, out_signed, 1.0))
    return layer, xs, tensors


@settings(max_examples=60, **SETTINGS)
@given(product_case())
def test_fast_eltwise_product_is_the_reference(case):
    layer, xs, tensors = case
    expected = KERNELS["EltWise"](layer, xs, tensors)[0]
    with pytest.MonkeyPatch.context() as mp:
        _no_fallback(mp)
        _same(fast_kernels.fast_eltwise_kernel(layer, xs, tensors)[0], expected)
    CASES["element-wise product"] += 1


@st.composite
def max_pool_case(draw):
    kh, kw, sh, sw = (draw(st.integers(1, 4)) for _ in range(4))
    pads = (draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)), draw(st.integers(0, kh - 1)),
            draw(st.integers(0, kw - 1)))
    ceil_mode = draw(st.booleans())
    h = draw(st.integers(max(1, kh - pads[0] - pads[2]), 15))
    w = draw(st.integers(max(1, kw - pads[1] - pads[3]), 15))
    bits, signed = draw(st.sampled_from([8, 16])), draw(st.booleans())
    x = draw(int_array((draw(st.integers(1, 2)), draw(st.integers(1, 5)), h, w), bits, signed))
    from tidlx.emulator.fixed import arith
    expected = arith.max_pool(x, (kh, kw), (sh, sw), pads, ceil_mode=ceil_mode)
    layer = QuantizedLayer(0, "pool", "Pool", 8, (0,), (1,), attrs=dict(pool_type="Max", kernel=(kh, kw),
                           strides=(sh, sw), pads=pads, ceil_mode=ceil_mode, global_pool=False))
    tensors = (QuantizedTensor(0, "x", x.shape, bits, signed, 1.0),
               QuantizedTensor(1, "y", expected.shape, bits, signed, 1.0))
    return layer, x, tensors, expected


@settings(max_examples=150, **SETTINGS)
@given(max_pool_case())
def test_fast_max_pool_is_the_reference(case):
    layer, x, tensors, expected = case
    _same(KERNELS["Pool"](layer, [x], tensors)[0], expected)
    _same(fast_kernels.fast_pool_kernel(layer, [x], tensors)[0], expected)
    CASES["max pool"] += 1


@settings(max_examples=100, **SETTINGS)
@given(st.data())
def test_fast_saturation_is_the_reference(data):
    in_bits, in_signed = data.draw(st.sampled_from([8, 16])), data.draw(st.booleans())
    out_bits, out_signed = data.draw(st.sampled_from([8, 16])), data.draw(st.booleans())
    x = data.draw(int_array((1, 3, 4, 5), in_bits, in_signed))
    lo, hi = _bounds(out_bits, out_signed)
    bounds = tuple(sorted((data.draw(st.integers(lo, hi)), data.draw(st.integers(lo, hi)))))
    layer = QuantizedLayer(0, "relu", "ReLU", 14, (0,), (1,), bounds=bounds)
    tensors = (QuantizedTensor(0, "x", x.shape, in_bits, in_signed, 1.0),
               QuantizedTensor(1, "y", x.shape, out_bits, out_signed, 1.0))
    expected = KERNELS["ReLU"](layer, [x], tensors)[0]
    _same(fast_kernels.fast_saturate_kernel(layer, [x], tensors)[0], expected)
    CASES["saturation"] += 1


def test_wrapping_accumulator_on_the_microkernel():
    """A sum far past int32 (64 channels x 3x3 of 255 x -128, from a bias at the negative end) on the VNNI
    path wraps exactly as the reference; signed and unsigned inputs (the +128 compensation)."""
    for in_dtype in (np.uint8, np.int8):
        lo, hi = _bounds(8, in_dtype == np.int8)
        x = np.full((1, 64, 6, 6), lo if in_dtype == np.int8 else hi, in_dtype)
        w = np.full((16, 64, 3, 3), -128, np.int8)
        bias = (np.full(16, -2 ** 31 + 5, np.int64), np.ones(16, np.int64))
        layer = _layer("Conv", w, bias, np.arange(16) + 17, None,
                       dict(strides=(1, 1), dilations=(1, 1), pads=(1, 1, 1, 1), groups=1))
        tensors = (QuantizedTensor(0, "x", x.shape, 8, in_dtype == np.int8, 1.0),
                   QuantizedTensor(1, "y", (1, 16, 6, 6), 16, True, 1.0))
        expected = KERNELS["Conv"](layer, [x], tensors)[0]
        assert len(np.unique(expected)) > 2          # the wrap makes values inside the range, not only clips
        for vnni in (True, False):
            _same(fast_kernels.fast_conv_kernel(layer, [x], tensors, vnni=vnni)[0], expected)


def test_vnni_is_used_where_the_cpu_has_it():
    try:
        with open("/proc/cpuinfo") as f:
            has = "avx512_vnni" in f.read()
    except OSError:
        pytest.skip("no /proc/cpuinfo")
    assert _vnni.AVAILABLE == has


def test_what_the_fast_path_does_not_take_gets_the_plain_kernels_error():
    """A roundBits the rules refuse: the fast kernel hands the layer over, and the error is the rule's."""
    x = np.zeros((1, 4, 5, 5), np.uint8)
    w = np.ones((4, 4, 3, 3), np.int8)
    layer = _layer("Conv", w, (np.zeros(4, np.int64), np.ones(4, np.int64)), 70, None,
                   dict(strides=(1, 1), dilations=(1, 1), pads=(1, 1, 1, 1), groups=1))
    tensors = (QuantizedTensor(0, "x", x.shape, 8, False, 1.0), QuantizedTensor(1, "y", (1, 4, 5, 5), 8, False, 1.0))
    with pytest.raises(FixedPointError) as plain:
        KERNELS["Conv"](layer, [x], tensors)
    with pytest.raises(FixedPointError) as fast:
        fast_kernels.fast_conv_kernel(layer, [x], tensors)
    assert str(fast.value) == str(plain.value)


def test_kernel_tables():
    assert fixed_layer_kernels("reference") == KERNELS
    fast = fixed_layer_kernels("fast")
    assert fast["Conv"] is fast_kernels.fast_conv_kernel and set(fast) == set(KERNELS)
    assert fast["InnerProduct"] is fast_kernels.fast_inner_product_kernel and fast["Pool"] is fast_kernels.fast_pool_kernel
    with pytest.raises(FixedPointError, match="fixed must be"):
        fixed_layer_kernels("quick")


# ---- whole models ---------------------------------------------------------------------------

MODEL = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3, 20, 20), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], strides=[2, 2], padding=[1, 1, 1, 1], channels=16, kernel_size=[3, 3]);
  %1 = nn.bias_add(%0, meta[relay.Constant][1]);
  %2 = nn.relu(%1);
  %3 = nn.conv2d(%2, meta[relay.Constant][2], padding=[1, 1, 1, 1], groups=16, channels=16, kernel_size=[3, 3]);
  %4 = nn.relu(%3);
  %5 = nn.conv2d(%4, meta[relay.Constant][3], padding=[0, 0, 0, 0], channels=24, kernel_size=[1, 1]);
  %6 = nn.conv2d(%5, meta[relay.Constant][4], padding=[2, 2, 2, 2], dilation=[2, 2], groups=2, channels=24, kernel_size=[3, 3]);
  %7 = add(%6, %5);
  %8 = nn.global_avg_pool2d(%7);
  %9 = nn.batch_flatten(%8);
  %10 = nn.dense(%9, meta[relay.Constant][5], units=10);
  nn.bias_add(%10, meta[relay.Constant][6])
}
'''


@pytest.fixture(scope="module")
def models():
    r = np.random.default_rng(3)
    f = lambda *s: r.standard_normal(s).astype(np.float32)  # noqa: E731
    params = [f(16, 3, 3, 3) * 0.4, f(16) * 0.1, f(16, 1, 3, 3) * 0.4, f(24, 16, 1, 1) * 0.3,
              f(24, 12, 3, 3) * 0.2, f(10, 24) * 0.5, f(10) * 0.1]
    mod = tidlx.parse_relay(MODEL, params=params)
    calib = {"x": r.standard_normal((4, 3, 20, 20)).astype(np.float32)}
    inputs = {"x": r.standard_normal((1, 3, 20, 20)).astype(np.float32) * 1.5}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # fewer frames than calibration_frames
        quantized = {bits: tidlx.quantize(mod, {"tensor_bits": bits}, calib=calib) for bits in (8, 16)}
    return quantized, inputs


@pytest.mark.parametrize("bits", [8, 16])
def test_whole_model_fast_equals_reference(models, bits):
    quantized, inputs = models
    q = quantized[bits]
    layer_types = [layer.type for layer in q.subgraphs["tidl_0"].compute_layers()]
    assert layer_types.count("Conv") == 4 and "InnerProduct" in layer_types
    reference = run_fixed(q.module, inputs, fixed_point_kernel_set(q.subgraphs, "fast", "reference"))
    no_vnni = fixed_point_kernel_set(q.subgraphs, "fast", {**KERNELS, **fast_kernels.fast_overrides(vnni=False)})
    for threads in (1, 2):
        config = EmulatorConfig(threads=threads)
        fast = q.run(inputs, config=config)     # QuantizedModel.run: the default fixed="fast"
        fallback = run_fixed(q.module, inputs, no_vnni, config=config)
        for a, b, c in zip(reference, fast, fallback):
            assert a.dtype == np.float32 and np.array_equal(a, b) and np.array_equal(a, c)
    assert len(np.unique(reference[0])) > 5       # not a saturated, constant output
