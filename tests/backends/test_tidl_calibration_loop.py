"""TI's calibration loop (backends/tidl/calibration_loop.py, docs/numerics.md §9): the per-frame histogram,
the running mean across frames, and the fixed-point iterations that re-quantize the whole network, checked
against computations written here from the rules."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tidlx
from tidlx.backends.tidl import build_networks
from tidlx.backends.tidl.calibration import (CalibrationResult, calibrate, layer_of_tensor, running_range,
                                            tensor_range)
from tidlx.backends.tidl.calibration_loop import (FLOW_ATTR, calibration_iterations, frame_histogram_range,
                                                  histogram_shrink_count, quantize_iteratively)
from tidlx.backends.tidl.flow import resolve_options
from tidlx.backends.tidl.quantize import _quantize_subgraph, quantize_model
from tidlx.emulator.fixed.kernel_set import fixed_point_kernel_set, run_fixed


# -- the per-frame histogram (TI: TIDL_TensorMinMaxHistStats) -----------------------------------------------

def histogram_ends(q, scale):
    """The rule written out element by element: real values q / scale (float32); 1024 bins over the frame's
    [min, max]; bin (int)(norm + 0.5); from each end the first bin whose running count is >= the drop count
    (the low end only when the min is negative); the end at the bin's position, back to an integer by
    truncation."""
    q = np.asarray(q).ravel()
    s = np.float32(scale)
    lo, hi = np.float32(q.min()) / s, np.float32(q.max()) / s
    if hi - lo == 0:
        return int(q.min()), int(q.max())
    hist = np.zeros(1024, np.int64)
    for value in q:
        norm = (np.float32(value) / s - lo) / (hi - lo) * np.float32(1023.0)
        hist[min(int(float(norm) + 0.5), 1023)] += 1
    drop = int((float(np.float32(0.01)) / 100.0) * float(np.float32(q.size)))
    low = 0
    if q.min() < 0:
        count = 0
        for i in range(1024):
            count += hist[i]
            if count >= drop:
                low = i
                break
    count, high = 0, 1023
    for i in range(1023, -1, -1):
        count += hist[i]
        if count >= drop:
            high = i
            break
    end_lo = max(lo + (np.float32(low) / np.float32(1023.0)) * (hi - lo), lo)
    end_hi = min(lo + (np.float32(high) / np.float32(1023.0)) * (hi - lo), hi)
    return int(np.float32(end_lo * s)), int(np.float32(end_hi * s))


def test_drop_count_follows_ti_float32_percentile():
    # 0.01f is just under 0.01: 10000 values drop none, 20000 one, 30000 two
    assert [histogram_shrink_count(n) for n in (9999, 10000, 20000, 30000, 100000, 100001)] == [0, 0, 1, 2, 9, 10]


def test_histogram_end_by_hand():
    # 29997 values of 10 and one each of 200, 250, 255 at scale 2: two dropped from the top. 255 is in bin
    # 1023, 250 in bin (125 - 5) / 122.5 * 1023 = 1002.1 -> 1002, where the count reaches 2; its position
    # 5 + 1002 / 1023 * 122.5 = 124.985 real = 249.97 -> 249. The min (>= 0) is kept.
    q = np.full(30000, 10, np.int64)
    q[[7, 700, 7000]] = [200, 250, 255]
    assert frame_histogram_range(q.astype(np.uint8), 2.0) == (10, 249)


@pytest.mark.parametrize("seed", range(6))
def test_histogram_matches_the_rule_element_by_element(seed):
    rng = np.random.default_rng(seed)
    signed = seed % 2 == 0
    n = [20000, 30000, 45000][seed % 3]
    q = np.clip(np.round(rng.standard_normal(n) * 20 + (0 if signed else 40)), -128 if signed else 0, 127)
    q[rng.integers(0, n, 4)] = [127, -128 if signed else 0, 120, -120 if signed else 1]
    dtype = np.int8 if signed else np.uint8
    scale = float(rng.uniform(0.3, 40.0))
    assert frame_histogram_range(q.astype(dtype), scale) == histogram_ends(q.astype(dtype), scale)


def test_histogram_of_a_constant_or_small_frame_is_its_min_max():
    assert frame_histogram_range(np.full(50000, -3, np.int8), 4.0) == (-3, -3)
    q = np.arange(-100, 100, dtype=np.int16)           # 200 values: nothing dropped ...
    lo, hi = frame_histogram_range(q, 3.7)
    assert (lo, hi) == histogram_ends(q, 3.7)
    assert hi in (98, 99) and lo in (-100, -99)        # ... but the float32 round trip may truncate a step


# -- the running mean across frames (TI: TIDL_UpdateTensorRangeStats) ----------------------------------------

def test_running_mean_of_per_frame_min_max():
    frames = [(-1.0, 3.0), (-3.0, 5.0), (-2.0, 1.0)]
    r = None
    for k, f in enumerate(frames):
        r = running_range(r, f, k)
    # by hand in float32: m1 = (-1 + -3) / 2 = -2, 4; m2 = m1 * 2/3 + f * 1/3
    third = np.float32(1.0) / np.float32(3.0)
    lo = np.float32(-2.0) * (np.float32(1.0) - third) + np.float32(-2.0) * third
    hi = np.float32(4.0) * (np.float32(1.0) - third) + np.float32(1.0) * third
    assert r == (float(lo), float(hi))
    assert running_range(r, (7.0, 8.0), 0) == (7.0, 8.0)            # a new run's first frame replaces
    r = None
    for k, f in enumerate(frames):
        r = running_range(r, f, k, no_outlier=True)
    assert r == (-3.0, 5.0)                                          # NoOutlier: running min / max


# -- the loop ------------------------------------------------------------------------------------------------

CHAIN = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3, 10, 10), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=6, kernel_size=[3, 3]);
  %1 = nn.bias_add(%0, meta[relay.Constant][1]);
  %2 = nn.relu(%1);
  %3 = nn.conv2d(%2, meta[relay.Constant][2], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
  nn.bias_add(%3, meta[relay.Constant][3])
}
'''


def chain_model():
    r = np.random.default_rng(3)
    shapes = ((6, 3, 3, 3), (6,), (4, 6, 3, 3), (4,))
    params = [(r.standard_normal(s) * 0.4).astype(np.float32) for s in shapes]
    params[1] += 0.3
    return tidlx.parse_relay(CHAIN, params=params)


def step_by_step(partitioned, opts, float_pass, frames, iterations, inner_products=True):
    """The loop written from the rules, with tidlx's one-shot quantizer and the reference fixed-point kernels:
    quantize from the current ranges and biases; run every frame; per layer output the per-frame histogram
    ends (histogram_ends) as real values, their running mean over the frames; the per-channel means of the
    biased layers; bias += (float mean - fixed mean) * factor, the factor 0.05 (float32) divided by 10 in the
    first and last iterations // 10; next iteration. Then the final quantization."""
    (net,) = build_networks(partitioned)
    owners = layer_of_tensor((net,))
    ranges = {tid: (r.raw_min, r.raw_max) for tid, r in float_pass[net.name].tensors.items()}
    float_means = {tid: np.array(r.channel_mean, np.float32) for tid, r in float_pass[net.name].tensors.items()
                   if r.channel_mean is not None}
    biases = {}

    def quantized():
        # §6.2's layer rules (x 1.25 on an inner product's max) on the collected ranges
        tensors = {tid: tensor_range(owners.get((net.name, tid)), lo, hi, "histogram", len(frames), (lo, hi), None)
                   for tid, (lo, hi) in ranges.items()}
        result = CalibrationResult(net.name, tensors, 1, "histogram", len(frames), net, None)
        return _quantize_subgraph(net, result, opts, False, dict(biases))

    sub, floats = quantized()
    for it in range(iterations):
        seen, sums = {}, {}

        def observe(o):
            for tid, value in zip(o.layer.outputs, o.outputs):
                t = sub.tensors[tid]
                lo_q, hi_q = histogram_ends(value, t.scale)
                seen.setdefault(tid, []).append((np.float32(lo_q) / np.float32(t.scale),
                                                 np.float32(hi_q) / np.float32(t.scale)))
            if o.layer.index in floats and (inner_products or o.layer.type != "InnerProduct"):
                scale = np.float32(sub.tensors[o.layer.outputs[0]].scale)
                if o.layer.type == "InnerProduct":   # [1, rows, columns]: a float32 sum down each column
                    v = np.asarray(o.outputs[0])[0]
                    total = np.zeros(v.shape[-1], np.float32)
                    for row in v:
                        total = total + row.astype(np.float32)
                    means = (total / np.float32(v.shape[0])) / scale
                else:
                    v = np.asarray(o.outputs[0], np.float64)[0]
                    means = (v.reshape(v.shape[0], -1).sum(axis=1).astype(np.float32) / np.float32(v[0].size)) \
                        / scale
                sums.setdefault(o.layer.index, []).append(means)

        ks = fixed_point_kernel_set({net.name: sub}, "reference", fixed="reference")
        for k in range(len(frames)):
            run_fixed(partitioned, {"x": frames[k:k + 1]}, ks, fixed_observers=[observe])
        for tid, per_frame in seen.items():
            lo = hi = None
            for k, (a, b) in enumerate(per_frame):   # the running mean, frame 0 replacing
                if k == 0:
                    lo, hi = a, b
                else:
                    beta = np.float32(1.0) / np.float32(k + 1)
                    lo = lo * (np.float32(1.0) - beta) + a * beta
                    hi = hi * (np.float32(1.0) - beta) + b * beta
            if sub.layers[net.tensors[tid].producer].type != "Data":
                ranges[tid] = (float(lo), float(hi))
            else:                                   # the input data convert: min/max over the frames
                ranges[tid] = (float(min(a for a, _ in per_frame)), float(max(b for _, b in per_frame)))
        factor = np.float32(0.05)
        if iterations // 10 and (it < iterations // 10 or it >= iterations - iterations // 10):
            factor = factor / np.float32(10.0)
        for index, per_frame in sums.items():
            mean = per_frame[0]
            for k, m in enumerate(per_frame[1:], start=1):
                u = np.float32(1.0 / (k + 1.0))
                if sub.layers[index].type == "InnerProduct":   # the kept part in double
                    mean = (mean.astype(np.float64) * (1.0 - float(u)) + (m * u).astype(np.float64)).astype(np.float32)
                else:
                    mean = mean * (np.float32(1.0) - u) + m * u
            out = sub.layers[index].outputs[0]
            biases[index] = (np.asarray(floats[index]).astype(np.float32)
                             + (float_means[out][:len(mean)] - mean) * factor).astype(np.float64)
        sub, floats = quantized()
    return sub, ranges


def assert_same_subgraph(got, want):
    assert [t.scale for t in got.tensors] == [t.scale for t in want.tensors]
    assert [t.signed for t in got.tensors] == [t.signed for t in want.tensors]
    for a, b in zip(got.layers, want.layers):
        assert a.round_bits == b.round_bits, a.name
        for field in ("weights", "bias_a", "bias_b"):
            x, y = getattr(a, field), getattr(b, field)
            assert (x is None and y is None) or np.array_equal(x, y), (a.name, field)


@pytest.mark.parametrize("iterations", [1, 3, 10])
def test_loop_matches_the_rules_step_by_step(iterations):
    mod = chain_model()
    partitioned, _ = tidlx.partition(mod)
    frames = np.random.default_rng(9).standard_normal((3, 3, 10, 10)).astype(np.float32)
    opts = resolve_options({"advanced_options:calibration_frames": 3,
                            "advanced_options:calibration_iterations": iterations})[0]
    float_pass = calibrate(partitioned, opts, {"x": frames})
    model = quantize_model(partitioned, opts, float_pass)
    want, ranges = step_by_step(partitioned, opts, float_pass, frames, iterations)
    assert_same_subgraph(model.subgraphs["tidl_0"], want)
    final = model.calibration["tidl_0"].tensors
    assert {tid: (final[tid].raw_min, final[tid].raw_max) for tid in ranges} == ranges
    assert len(model.bias_calibration_errors) == iterations
    # the loop changed something the float pass alone would not give
    (net,) = build_networks(partitioned)
    first, _ = _quantize_subgraph(net, float_pass["tidl_0"], opts, False)
    assert any(not np.array_equal(a.bias_a, b.bias_a) or a.round_bits != b.round_bits
               for a, b in zip(first.layers, model.subgraphs["tidl_0"].layers) if a.bias_a is not None)


DENSE = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 5, 16), float32]) {
  %0 = nn.dense(%x, meta[relay.Constant][0], units=8);
  %1 = nn.bias_add(%0, meta[relay.Constant][1], axis=-1);
  %2 = nn.relu(%1);
  %3 = nn.dense(%2, meta[relay.Constant][2], units=4);
  nn.bias_add(%3, meta[relay.Constant][3], axis=-1)
}
'''


@pytest.mark.parametrize("version, flow", [("11.00", "ort"), ("08.06", "ort"), ("11.00", "tvm")])
def test_inner_products_move_their_biases_by_column_means(version, flow):
    """TIDL 10.x/11.x bias calibration also moves an inner product's bias (its constant the second operand,
    TI's ONNX import), by the means down each output column; 08.06 leaves it, and so does the TVM flow (TI's
    relay import gives nn.dense no constant index)."""
    r = np.random.default_rng(3)
    params = [(r.standard_normal(s) * 0.4).astype(np.float32) for s in ((8, 16), (8,), (4, 8), (4,))]
    params[1] += 0.3
    partitioned, _ = tidlx.partition(tidlx.parse_relay(DENSE, params=params))
    if flow == "ort":
        partitioned.attrs[FLOW_ATTR] = "ort"
    frames = r.standard_normal((3, 5, 16)).astype(np.float32)
    opts = resolve_options({"advanced_options:calibration_frames": 3, "advanced_options:calibration_iterations": 3,
                            "tidl_version": version})[0]
    float_pass = calibrate(partitioned, opts, {"x": frames})
    model = quantize_model(partitioned, opts, float_pass)
    calibrated = version == "11.00" and flow == "ort"
    want, _ = step_by_step(partitioned, opts, float_pass, frames, 3, calibrated)
    assert_same_subgraph(model.subgraphs["tidl_0"], want)
    (net,) = build_networks(partitioned)
    assert len(model.bias_calibration_errors) == (3 if calibrated else 0)
    if calibrated:
        first, floats = _quantize_subgraph(net, float_pass["tidl_0"], opts, False)
        assert not all(np.array_equal(model.float_biases[("tidl_0", i)], floats[i]) for i in (1, 2))


def test_accuracy_level_0_runs_one_iteration_and_progress_counts_frames():
    mod = chain_model()
    partitioned, _ = tidlx.partition(mod)
    frames = {"x": np.random.default_rng(2).standard_normal((2, 3, 10, 10)).astype(np.float32)}
    level0 = resolve_options({"accuracy_level": 0, "advanced_options:calibration_frames": 2})[0]
    level1 = resolve_options({"advanced_options:calibration_frames": 2,
                              "advanced_options:calibration_iterations": 4})[0]
    assert calibration_iterations(level0) == 1 and calibration_iterations(level1) == 4
    for opts, total in ((level0, 2), (level1, 8)):
        seen = []
        results = calibrate(partitioned, opts, frames)
        with_bar = quantize_iteratively(partitioned, opts, results, progress=lambda d, t: seen.append((d, t)))
        assert seen == [(k, total) for k in range(1, total + 1)]
        plain = quantize_model(partitioned, opts, results)      # the progress callback changes nothing
        assert_same_subgraph(with_bar.subgraphs["tidl_0"], plain.subgraphs["tidl_0"])
    # level 0: min/max ranges, no bias calibration
    assert quantize_model(partitioned, level0, calibrate(partitioned, level0, frames)).bias_calibration_errors == ()


def _onnx_conv(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = (np.random.default_rng(5).standard_normal((4, 3, 3, 3)) * 0.4).astype(np.float32)
    graph = helper.make_graph([helper.make_node("Conv", ["x", "W"], ["y"], name="conv", pads=[1, 1, 1, 1])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [numpy_helper.from_array(w, "W")])
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return tidlx.load(str(path))


def test_the_ort_flow_runs_the_option_count_at_accuracy_level_0(tmp_path):
    """TI's ONNX Runtime import passes calibration_iterations (50 unless given) at every accuracy_level;
    only an unset count becomes 1 at options 0/64 (TIDL_runIterativeCalibration), as in the TVM flow."""
    mod = _onnx_conv(tmp_path)
    frames = {"x": np.random.default_rng(6).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    level0 = resolve_options({"accuracy_level": 0, "advanced_options:calibration_frames": 2,
                              "advanced_options:calibration_iterations": 3})[0]
    assert calibration_iterations(level0) == 1 and calibration_iterations(level0, "ort") == 3
    assert calibration_iterations(resolve_options({"accuracy_level": 0})[0], "ort") == 50
    for flow, total in (("tvm", 2), ("ort", 6)):
        partitioned, _ = tidlx.partition(mod, {"flow": flow})
        seen = []
        quantize_iteratively(partitioned, level0, calibrate(partitioned, level0, frames),
                             progress=lambda d, t: seen.append((d, t)))
        assert seen[-1] == (total, total), flow


def test_final_ranges_come_from_the_fixed_point_iterations():
    mod = chain_model()
    partitioned, _ = tidlx.partition(mod)
    frames = {"x": np.random.default_rng(4).standard_normal((3, 3, 10, 10)).astype(np.float32)}
    opts = resolve_options({"advanced_options:calibration_frames": 3,
                            "advanced_options:calibration_iterations": 2})[0]
    results = calibrate(partitioned, opts, frames)
    model = quantize_model(partitioned, opts, results)
    final = model.calibration["tidl_0"]
    assert final.method == "histogram"
    outputs = [layer.outputs[0] for layer in model.subgraphs["tidl_0"].compute_layers()]
    assert all(final.tensors[t].method == "histogram" for t in outputs)
    assert any(final.tensors[t].max != results["tidl_0"].tensors[t].max for t in outputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = quantize_model(partitioned, opts, calibrate(partitioned, opts, frames))
    assert_same_subgraph(again.subgraphs["tidl_0"], model.subgraphs["tidl_0"])   # deterministic
