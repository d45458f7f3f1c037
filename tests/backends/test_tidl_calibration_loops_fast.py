"""The calibration loop's fused loops (backends/tidl/_calibration_loops.py) give the plain rules' integers:
the weight quantization of numerics.quantize_weights (§4.2) and the value counts of np.bincount."""

from __future__ import annotations

import numpy as np
import pytest

import tidlx
from tidlx.backends.tidl import _calibration_loops as loops
from tidlx.backends.tidl import numerics as nx
from tidlx.backends.tidl import quantize as quantize_module
from tidlx.backends.tidl.calibration import calibrate
from tidlx.backends.tidl.calibration_loop import integer_counts
from tidlx.backends.tidl.flow import resolve_options
from tidlx.backends.tidl.quantize import quantize_model
from test_tidl_calibration_loop import CHAIN   # the two-convolution chain the loop tests use


def weights_with_ties(rng, scale):
    """Random weights plus values whose float32 product with the scale lands on x.5 and on the clamp ends."""
    w = rng.standard_normal(4000) * 0.3
    halves = (np.arange(-300, 300) + 0.5) / np.float32(scale)
    return np.concatenate([w, halves, [0.0, -0.0, 1e-9, -1e-9, 5.0, -5.0]]).astype(np.float64)


@pytest.mark.parametrize("bits", [8, 16])
@pytest.mark.parametrize("limited", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fused_weight_quantization_gives_the_rule_integers(bits, limited, seed):
    rng = np.random.default_rng(seed)
    scale = float(np.float32(rng.uniform(20.0, 400.0) if bits == 8 else rng.uniform(5e3, 9e4)))
    w = weights_with_ties(rng, scale).reshape(-1, 2, 1, 1)[: 2003]
    limit = float(np.float32(0.45)) if limited else None
    want = nx.quantize_weights(w, scale, bits, limit)
    got = loops.quantize_weights_f32(w.astype(np.float32), scale, bits, limit)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16])
def test_value_counts_are_bincounts(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(5)
    values = rng.integers(info.min, info.max + 1, size=(2, 3, 17, 9), dtype=np.int64).astype(dtype)
    values[0, 0, 0, :3] = (info.min, info.max, 0)
    counts, offset = integer_counts(values[:, :, ::2])          # a strided view, too
    flat = values[:, :, ::2].astype(np.int64).ravel()
    assert offset == info.min and np.array_equal(counts, np.bincount(flat - info.min))
    small = np.array([3, 3, 1], dtype)                          # the length follows the highest value
    assert np.array_equal(integer_counts(small)[0], np.bincount(small.astype(np.int64) - info.min))


def test_loop_with_the_fused_weights_gives_the_plain_loop_bytes(monkeypatch):
    """The loop twice: as it is (the fused weight pass whenever a layer's scale moves) and with every weight
    quantization by the plain rule; the quantized models hold the same bytes."""
    r = np.random.default_rng(3)
    shapes = ((6, 3, 3, 3), (6,), (4, 6, 3, 3), (4,))
    params = [(r.standard_normal(s) * 0.4).astype(np.float32) for s in shapes]
    params[1] += 40.0     # large biases: the §4.4 clip moves the weight scale with the input scale and bias
    params[3] -= 30.0
    partitioned, _ = tidlx.partition(tidlx.parse_relay(CHAIN, params=params))
    frames = {"x": np.random.default_rng(9).standard_normal((3, 3, 10, 10)).astype(np.float32)}
    opts = resolve_options({"advanced_options:calibration_frames": 3,
                            "advanced_options:calibration_iterations": 6})[0]
    float_pass = calibrate(partitioned, opts, frames)
    fused_calls = []
    fused = quantize_module.quantize_weights_f32
    monkeypatch.setattr(quantize_module, "quantize_weights_f32",
                        lambda *a: fused_calls.append(1) or fused(*a))
    got = quantize_model(partitioned, opts, float_pass)
    assert len(fused_calls) > 2, "the scales did not move: only the first quantization of each layer ran"
    monkeypatch.setattr(quantize_module, "quantize_weights_f32",
                        lambda w32, s, bits, limit: nx.quantize_weights(w32.astype(np.float64), s, bits, limit))
    want = quantize_model(partitioned, opts, float_pass)
    a, b = got.subgraphs["tidl_0"], want.subgraphs["tidl_0"]
    assert [t.scale for t in a.tensors] == [t.scale for t in b.tensors]
    for x, y in zip(a.layers, b.layers):
        assert x.round_bits == y.round_bits and x.weight_scale == y.weight_scale
        for field in ("weights", "bias_a", "bias_b"):
            u, v = getattr(x, field), getattr(y, field)
            assert (u is None and v is None) or (u.dtype == v.dtype and u.tobytes() == v.tobytes()), (x.name, field)
