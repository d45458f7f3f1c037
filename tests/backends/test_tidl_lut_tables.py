"""TI's table activations (docs/numerics.md §8.10.2): TI's float32 exponential, the 8-bit tables of TIDL
10.x/11.x's import for sigmoid, tanh, GELU, ELU and hard sigmoid, AM62A's piecewise-linear sigmoid, and
a sigmoid head quantized and run end to end. Expected entries are worked by hand from TI's formulas."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import tidlx
from tidlx.backends.tidl import numerics as nx
from tidlx.backends.tidl.options import TidlOptions

F = np.float32


def test_exp_taylor_is_tis_polynomial_step_by_step():
    # x = 1: y = x / ln 2 = 1.4426950 (float32), n = 1, r = (y - 1) ln 2; 2^r by the 4th-order
    # polynomial with TI's rounded 1/6 and 1/24, then times 2^1
    y = F(F(1.44269504090) * F(1.0))
    r = F(F(y - F(1.0)) * F(0.693147180559945))
    p = F(F(F(1.0) + r) + F(F(r * r) * F(0.5)))
    p = F(p + F(F(F(r * r) * r) * F(0.1666667)))
    p = F(p + F(F(F(r * r) * F(r * r)) * F(0.0416667)))
    want = F(p * F(2.0))
    got = nx.exp_taylor(F(1.0))
    assert got.dtype == np.float32 and got == want
    assert got != F(math.e) and abs(float(got) - math.e) < 1e-4      # an approximation of e
    assert nx.exp_taylor(F(0.0)) == F(1.0)
    # n = trunc(y) toward zero: x = -1 gives n = -1, r < 0
    assert abs(float(nx.exp_taylor(F(-1.0))) - math.exp(-1.0)) < 5e-5
    # beyond n = 14 FLT_MAX, below n = -16 zero
    assert nx.exp_taylor(F(11.0)) == np.finfo(np.float32).max and nx.exp_taylor(F(-12.0)) == F(0.0)


def test_sigmoid_table_entries_by_hand():
    # int8 input at scale 16, uint8 output at scale 256
    t = nx.ti_activation_table("Sigmoid", 16.0, True, 256.0, False)
    at = {q: int(t[q + 128]) for q in (-128, -16, 0, 16, 127)}
    # q = -16: x = -1, exp_taylor(1) = 2.7182341, 1 / 3.7182341 = 0.268944, x 256 = 68.85 -> round 69
    # (a truncating cast would give 68); q = 16: 0.731059 x 256 = 187.15 -> 187; q = 127: 255.9 -> 255
    assert at == {-128: 0, -16: 69, 0: 128, 16: 187, 127: 255}


def test_tanh_gelu_elu_hard_sigmoid_entries_by_hand():
    tanh = nx.ti_activation_table("Tanh", 16.0, True, 128.0, True)
    # tanh(0.5) x 128 = 59.15 -> 59, symmetric (halves away from zero); tanh(+-8) saturates
    assert [int(tanh[q + 128]) for q in (-128, -8, 0, 8, 127)] == [-128, -59, 0, 59, 127]
    gelu = nx.ti_activation_table("GELU", 16.0, True, 64.0, True)
    # GELU(1) = 0.5 (1 + erf(1 / sqrt 2)) = 0.841345, x 64 = 53.85 -> 54; GELU(-1) = -0.158655 -> -10.15 -> -10
    assert int(gelu[128 + 16]) == 54 and int(gelu[128 - 16]) == -10
    elu = nx.ti_activation_table("ELU", 16.0, True, 16.0, True, alpha=1.0)
    # ELU(-1) = exp(-1) - 1 = -0.632121, x 16 = -10.11 -> -10; ELU(2.5) = 2.5 -> 40
    assert int(elu[128 - 16]) == -10 and int(elu[128 + 40]) == 40
    hs = nx.ti_activation_table("HardSigmoid", 16.0, True, 128.0, True, alpha=0.2, beta=0.5)
    # clip(0.2 x + 0.5, 0, 1) x 128: x = 0 -> 64, x = 1 -> 89.6 -> 90, x = 2.5 -> 128 -> 127, x = -2.5 -> 0
    assert [int(hs[128 + q]) for q in (0, 16, 40, -40)] == [64, 90, 127, 0]
    # an unsigned input covers 0..255
    assert nx.ti_activation_table("Sigmoid", 32.0, False, 256.0, False)[0] == 128


def test_pla_sigmoid_by_hand():
    # input scale 16 (> 1): offsets 128, 108, 80, 64 kept, times 16; thresholds 1280, 608, 256; the
    # accumulator's scale 128 x 16 = 2048, roundBits 3 -> scale 256
    # q = 0: 64 x 16 = 1024 -> 128; q = 16 (x = 1): 16 x 16 + 80 x 16 = 1536 -> 192 (0.125 + 0.625 = 0.75);
    # q = -16: 2048 - 1536 = 512 -> 64; q = 127: segment 0, 2048 -> 256 -> 255; q = -128: 0
    assert nx.pla_sigmoid([0, 16, -16, 127, -128], 16.0, 3).tolist() == [128, 192, 64, 255, 0]
    # input scale 0.5 (<= 1): offsets 64, 54, 40, 32, factor 1; thresholds 40, 19, 8; q = 1 (x = 2):
    # 16 >= 8 -> segment 2: 16 + 40 = 56 (56 / 64 = 0.875); q = 3 (x = 6): 48 >= 40 -> 64 (1.0)
    assert nx.pla_sigmoid([1, 3, 0], 0.5, 0).tolist() == [56, 64, 32]
    assert nx.pla_sigmoid_table(16.0, False, 3).shape == (256,)


def test_version_and_device_choice():
    assert nx.uses_ti_tables("11.00", 8, 8) and nx.uses_ti_tables("10.01", 8, 8)
    assert not nx.uses_ti_tables("08.06", 8, 8) and not nx.uses_ti_tables("11.00", 16, 16)
    assert nx.table_device(None) == "lut" and nx.table_device("TDA4VM") == "lut"
    assert nx.table_device("AM62A") == "pla"


HEAD = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3, 8, 8), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
  %1 = nn.bias_add(%0, meta[relay.Constant][1]);
  sigmoid(%1)
}
'''


def _head_model(relu: bool = False):
    r = np.random.default_rng(3)
    text = HEAD.replace("  sigmoid(%1)", "  %2 = nn.relu(%1);\n  sigmoid(%2)") if relu else HEAD
    return tidlx.parse_relay(text, params=[(r.standard_normal((4, 3, 3, 3)) * 0.5).astype(np.float32),
                                           (r.standard_normal(4) * 0.2).astype(np.float32)])


def _quantize(mod, calib, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tidlx.quantize(mod, {"tensor_bits": 8, "advanced_options:calibration_iterations": 1, **options},
                              calib=calib)


@pytest.mark.parametrize("relu", [False, True])
def test_sigmoid_head_end_to_end(relu):
    """A conv (+ ReLU) + sigmoid head quantized and run: the sigmoid layer is TI's (a table over its
    input's values, int8 or uint8; output scale 128 x input scale over a power of 2), and the model is
    close to float."""
    mod = _head_model(relu)
    calib = {"x": np.random.default_rng(1).standard_normal((6, 3, 8, 8)).astype(np.float32)}
    q = _quantize(mod, calib)
    sub = q.subgraphs["tidl_0"]
    layer = [lay for lay in sub.compute_layers() if lay.type == "Sigmoid"][0]
    x_t, y_t = sub.tensors[layer.inputs[0]], sub.tensors[layer.outputs[0]]
    assert layer.table_on_input and layer.round_bits == 0 and not y_t.signed and x_t.signed != relu
    assert math.frexp(128 * x_t.scale / y_t.scale)[0] == 0.5
    # TI's table: entry q = round(sigmoid(float32(q) / float32(Sx)) x Sy), halves away from zero (at these
    # scales TI's approximate exponential changes no entry against the exact one)
    lo = -128 if x_t.signed else 0
    table = np.array([min(255, math.floor(float(np.float32(y_t.scale)) / (1.0 + math.exp(
        -float(np.float32(q) / np.float32(x_t.scale)))) + 0.5)) for q in range(lo, lo + 256)])
    assert np.array_equal(layer.activation_table, table)
    seen = {}
    x = {"x": np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    out = q.run(x, fixed_observers=[lambda o: seen.setdefault(o.layer.name, o)])
    obs = seen[layer.name]
    assert np.array_equal(obs.outputs[0], table[obs.inputs[0].astype(np.int64) - lo].astype(np.uint8))
    reference = tidlx.emulate(mod, x, kernels="reference")[0]
    got = np.asarray(out[0] if isinstance(out, (list, tuple)) else out, np.float64)
    assert np.abs(got - reference).max() < 0.05


def test_version_08_06_keeps_tidlx_tables():
    """tidl_version "08.06": the sigmoid keeps tidlx's own table (fixed output scale 2^bits)."""
    q = _quantize(_head_model(), {"x": np.random.default_rng(1).standard_normal((6, 3, 8, 8)).astype(np.float32)},
                  tidl_version="08.06")
    sub = q.subgraphs["tidl_0"]
    layer = [lay for lay in sub.compute_layers() if lay.type == "Sigmoid"][0]
    assert not layer.table_on_input and sub.tensors[layer.outputs[0]].scale == 256.0


ACTIVATIONS = {
    "HardSigmoid": '''  %2 = multiply(%1, 0.2f);
  %3 = add(%2, 0.5f);
  clip(%3, a_min=0f, a_max=1f)''',
    "GELU": '''  %2 = multiply(%1, 0.707107f);
  %3 = erf(%2);
  %4 = add(%3, 1f);
  %5 = multiply(%1, 0.5f);
  multiply(%5, %4)''',
    "ELU": '''  %2 = exp(%1);
  %3 = subtract(1f, %2);
  %4 = nn.relu(%3);
  %5 = multiply(%4, -0.7f);
  %6 = nn.relu(%1);
  add(%5, %6)''',
}


def _independent_entry(kind, x, out_scale):
    """Entry of TI's table by the rules, in float64 with the exact exponential."""
    if kind == "HardSigmoid":
        y = min(max(round(0.2 * 2 ** 24) / 2 ** 24 * x + 0.5, 0.0), 1.0)
    elif kind == "GELU":
        y = 0.5 * x * (1.0 + math.erf(x * 0.70710678118))
    else:
        y = x if x >= 0 else round(0.7 * 2 ** 24) / 2 ** 24 * (math.exp(x) - 1.0)
    v = y * float(np.float32(out_scale))
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


@pytest.mark.parametrize("kind", sorted(ACTIVATIONS))
def test_activation_batch_norm_is_tis_table_end_to_end(kind):
    """A GELU, ELU or hard sigmoid after a conv: TI's activation BatchNorm layer, its table over the input's
    values (§8.10.2), run in fixed point and close to float."""
    text = HEAD.replace("  sigmoid(%1)", ACTIVATIONS[kind])
    r = np.random.default_rng(4)
    mod = tidlx.parse_relay(text, params=[(r.standard_normal((4, 3, 3, 3)) * 0.5).astype(np.float32),
                                          (r.standard_normal(4) * 0.2).astype(np.float32)])
    q = _quantize(mod, {"x": np.random.default_rng(1).standard_normal((6, 3, 8, 8)).astype(np.float32)})
    sub = q.subgraphs["tidl_0"]
    layer = [lay for lay in sub.compute_layers() if lay.activation == kind.lower()][0]
    assert layer.type == "BatchNorm" and layer.table_on_input and layer.round_bits == 0
    x_t, y_t = sub.tensors[layer.inputs[0]], sub.tensors[layer.outputs[0]]
    assert y_t.signed
    lo = -128 if x_t.signed else 0
    want = [min(127, max(-128, _independent_entry(kind, float(np.float32(q) / np.float32(x_t.scale)), y_t.scale)))
            for q in range(lo, lo + 256)]
    assert layer.activation_table.tolist() == want
    x = {"x": np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    seen = {}
    out = q.run(x, fixed_observers=[lambda o: seen.setdefault(o.layer.name, o)])
    obs = seen[layer.name]
    assert np.array_equal(obs.outputs[0], np.array(want)[obs.inputs[0].astype(np.int64) - lo].astype(np.int8))
    reference = tidlx.emulate(mod, x, kernels="reference")[0]
    got = np.asarray(out[0] if isinstance(out, (list, tuple)) else out, np.float64)
    assert np.abs(got - reference).max() < 0.1 * max(1.0, float(np.abs(reference).max()))


def test_tables_travel_through_the_artifacts():
    """The table layers (a standalone sigmoid, an activation batch norm) written to TIDL's network file,
    read back (with its checks) and run: the same records, the same integers."""
    from tidlx.backends.tidl.artifacts import NetworkInfo, encode_network
    from tidlx.emulator.fixed.artifact_reader import read_network
    from tidlx.emulator.fixed.layers import run_subgraph

    x = [np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)]
    for text in (HEAD.replace("  sigmoid(%1)", "  %2 = nn.relu(%1);\n  sigmoid(%2)"),
                 HEAD.replace("  sigmoid(%1)", ACTIVATIONS["GELU"])):
        r = np.random.default_rng(4)
        mod = tidlx.parse_relay(text, params=[(r.standard_normal((4, 3, 3, 3)) * 0.5).astype(np.float32),
                                              (r.standard_normal(4) * 0.2).astype(np.float32)])
        sub = _quantize(mod, {"x": np.random.default_rng(1).standard_normal((6, 3, 8, 8)).astype(np.float32)}
                        ).subgraphs["tidl_0"]
        back = read_network(encode_network(sub, NetworkInfo(7, 0, 1)), "net.bin").subgraph
        tables = [(a, b) for a, b in zip(sub.layers, back.layers) if a.table_on_input]
        assert len(tables) == 1 and tables[0][1].table_on_input
        assert np.array_equal(tables[0][0].activation_table, tables[0][1].activation_table)
        for got, want in zip(run_subgraph(back, x), run_subgraph(sub, x)):
            assert np.array_equal(got, want)


def test_fast_kernels_give_the_reference_bits_with_tables():
    from tidlx.emulator.fixed.kernel_set import fixed_point_kernel_set, run_fixed

    text = HEAD.replace("  sigmoid(%1)", '''  %2 = sigmoid(%1);
  %3 = nn.conv2d(%2, meta[relay.Constant][2], channels=4, kernel_size=[1, 1]);
  %4 = exp(%3);
  %5 = subtract(1f, %4);
  %6 = nn.relu(%5);
  %7 = multiply(%6, -0.7f);
  %8 = nn.relu(%3);
  add(%7, %8)''')
    r = np.random.default_rng(5)
    mod = tidlx.parse_relay(text, params=[(r.standard_normal((4, 3, 3, 3)) * 0.5).astype(np.float32),
                                          (r.standard_normal(4) * 0.2).astype(np.float32),
                                          (r.standard_normal((4, 4, 1, 1)) * 0.8).astype(np.float32)])
    q = _quantize(mod, {"x": np.random.default_rng(1).standard_normal((6, 3, 8, 8)).astype(np.float32)})
    assert sum(layer.table_on_input for layer in q.subgraphs["tidl_0"].layers) == 2
    x = {"x": np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    reference = run_fixed(q.module, x, fixed_point_kernel_set(q.subgraphs, "fast", "reference"))
    for a, b in zip(reference, q.run(x)):
        assert np.array_equal(a, b)


def test_am62a_sigmoid_is_the_piecewise_linear_one():
    """With a target device of AM62A, the sigmoid layer's table is TI's four-segment integers; a tanh there
    is refused by name. (Style 0 given: AM62A's own default, style 4, has no rule for sigmoid yet.)"""
    am62a = {"target_device": "am62a", "advanced_options:quantization_scale_type": 0}
    q = _quantize(_head_model(), {"x": np.random.default_rng(1).standard_normal((6, 3, 8, 8)).astype(np.float32)},
                  **am62a)
    sub = q.subgraphs["tidl_0"]
    layer = [lay for lay in sub.compute_layers() if lay.type == "Sigmoid"][0]
    x_t, y_t = sub.tensors[layer.inputs[0]], sub.tensors[layer.outputs[0]]
    rb = round(math.log2(128 * x_t.scale / y_t.scale))
    assert np.array_equal(layer.activation_table, nx.pla_sigmoid_table(x_t.scale, x_t.signed, rb))
    with pytest.raises(tidlx.TidlxError, match="Tanh activation on AM62A"):
        _quantize(tidlx.parse_relay(HEAD.replace("sigmoid(%1)", "tanh(%1)"), params=[
            np.ones((4, 3, 3, 3), np.float32), np.zeros(4, np.float32)]), {"x": np.ones((2, 3, 8, 8), np.float32)},
            **am62a)
