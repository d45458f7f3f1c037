"""TopK (docs/numerics.md §8.15) and ScatterElements (§8.16) in fixed point: the rules on hand-worked
integers, against the oracle, and through quantization: small models, TI's BEVDet export in both flows,
its compiled folder."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from onnx import TensorProto, helper, numpy_helper

import oracle
import tidlx
from fixed_cases import count
from tidlx.backends.tidl import numerics as nx
from tidlx.emulator.fixed import arith

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=60)


# -- §8.15 TopK by hand -------------------------------------------------------------------------------

def test_topk_keeps_equal_values_in_input_order():
    values, indices = arith.topk(np.array([[3, 5, 5, 1, 0, 7]], np.uint8), 5, 1)
    assert values.tolist() == [[7, 5, 5, 3, 1]] and indices.tolist() == [[5, 1, 2, 0, 3]]
    assert values.dtype == np.uint8 and indices.dtype == np.int32


def test_topk_never_takes_the_start_value_when_its_index_is_not_negative():
    # uint8, largest: slots start as (0, 0); the zeros of the input are never taken
    values, indices = arith.topk(np.array([0, 2, 0], np.uint8), 3, 0)
    assert values.tolist() == [2, 0, 0] and indices.tolist() == [1, 0, 0]
    # int8, largest: slots start as (-128, 0x80808080 < 0): -128 is taken like any value
    values, indices = arith.topk(np.array([-128, 4, -128], np.int8), 3, 0)
    assert values.tolist() == [4, -128, -128] and indices.tolist() == [1, 0, 2]
    # int8, smallest: slots start as (127, 0x7F7F7F7F): 127 is never taken
    values, indices = arith.topk(np.array([127, -3], np.int8), 2, 0, largest=False)
    assert values.tolist() == [-3, 127] and indices.tolist() == [1, 0x7F7F7F7F]


def test_topk_start_values():
    assert arith.topk_fill(np.int8, True) == (-128, -0x7F7F7F80)
    assert arith.topk_fill(np.int16, False) == (32767, 0x7FFF7FFF)
    assert arith.topk_fill(np.uint16, False) == (65535, -1)


@settings(**SETTINGS)
@given(st.sampled_from([(8, True), (8, False), (16, True), (16, False)]), st.booleans(), st.integers(1, 9),
       st.integers(0, 2**32 - 1))
def test_topk_against_the_oracle(kind, largest, n, seed):
    bits, signed = kind
    lo, hi = oracle.bounds(bits, signed)
    rng = np.random.default_rng(seed)
    pool = np.array([lo, hi, 0, 1, lo + 1, hi - 1] + list(rng.integers(lo, hi + 1, 4)))
    x = rng.choice(pool, size=(3, n)).astype(oracle.dtype(bits, signed))
    k = int(rng.integers(1, n + 1))
    values, indices = arith.topk(x, k, 1, largest)
    count("topk")
    for row in range(3):
        want_v, want_i = oracle.topk_line(x[row], k, bits, signed, largest)
        assert values[row].tolist() == want_v and indices[row].tolist() == want_i


# -- §8.16 ScatterElements by hand ----------------------------------------------------------------------

def test_mma_scale_and_shift_by_hand():
    assert arith.mma_scale_and_shift(0.635) == (163, 8)      # 163 / 256 = 0.6367
    assert arith.mma_scale_and_shift(1.0) == (128, 7)
    assert arith.mma_scale_and_shift(200.0) == (200, 0)
    with pytest.raises(arith.FixedPointError, match="beyond TIDL's 8-bit multiplier"):
        arith.mma_scale_and_shift(300.0)


def test_the_scatter_output_scale_by_hand():
    from tidlx.backends.tidl import numerics as nx

    assert nx.symmetric_range_scale(-20.0, 20.0, 8, True) == float(np.float32(127) / np.float32(20))
    assert nx.symmetric_range_scale(0.0, 100.0, 8, False) == float(np.float32(255) / np.float32(100))
    assert nx.symmetric_range_scale(-128.0, 127.0, 8, True) == 1.0        # 127/128 < 1 inside the type: 1
    assert nx.symmetric_range_scale(-200.0, 100.0, 8, True) == float(np.float32(127) / np.float32(200))
    assert nx.symmetric_range_scale(0.0, 0.0, 16, True) == 32767000.0
    assert nx.symmetric_range_scale(2.0, 2.0, 16, False) == 65535 / 2


def test_scatter_add_accumulates_in_twice_the_width_then_requantizes():
    out = arith.scatter_elements(np.zeros(1, np.int8), np.array([[0, 0]], np.int32), np.array([100, 100], np.int8),
                                 "add", arith.FixedType(8, True), scale=163, shift=8)
    assert out.tolist() == [127]       # acc 200 (int16), 200 * 163 = 32600, >> 8 rounded = 127
    out = arith.scatter_elements(np.zeros(2, np.int8), np.array([[1, 1, 0]], np.int32), np.array([10, -3, 7], np.int8),
                                 "add", arith.FixedType(8, True), scale=128, shift=8)
    assert out.tolist() == [4, 4]      # row 1: 7 * 128 / 256 = 3.5 -> 4 (half up); row 0: 7 -> 4


def test_scatter_add_saturates_the_accumulator_after_every_update():
    # int16 updates accumulate in int32: 3 x 2^30 saturates at 2^31 - 1 on the second add, then -2^30 comes off
    upd = np.array([[16384] * 2, [16384] * 2, [-16384] * 2], np.int16)
    data = np.full((1, 2), 2**15 - 1, np.int16)
    out = arith.scatter_elements(data, np.array([[0, 0, 0]], np.int32), upd, "add", arith.FixedType(16, True),
                                 scale=1, shift=0)
    assert out.tolist() == [[32767, 32767]]   # 32767 + 16384 + 16384 - 16384 = 49151 -> int16's 32767
    # uint8 in uint16: 255 x 300 = 76500 saturates at 65535; then x 1 >> 8 = 256 -> saturates at 255
    upd = np.full((300,), 255, np.uint8)
    out = arith.scatter_elements(np.zeros(1, np.uint8), np.zeros((1, 300), np.int32), upd, "add",
                                 arith.FixedType(8, False), scale=1, shift=8)
    assert out.tolist() == [255]
    out = arith.scatter_elements(np.zeros(1, np.uint8), np.zeros((1, 300), np.int32), upd, "add",
                                 arith.FixedType(8, False), scale=1, shift=9)
    assert out.tolist() == [128]              # 65535 (saturated) >> 9 rounded: 127.998 -> 128


def test_scatter_none_max_min_and_indices_outside():
    data = np.array([5, 5, 5, 5], np.int8)
    idx = np.array([[0, 0, -1, 4, -5]], np.int32)     # 4 and -5 are outside: skipped; -1 is the last
    upd = np.array([7, 2, 9, 100, 100], np.int8)
    t = arith.FixedType(8, True)
    assert arith.scatter_elements(data, idx, upd, "none", t).tolist() == [2, 5, 5, 9]
    assert arith.scatter_elements(data, idx, upd, "max", t).tolist() == [7, 5, 5, 9]
    assert arith.scatter_elements(data, idx, upd, "min", t).tolist() == [2, 5, 5, 5]
    with pytest.raises(arith.FixedPointError, match="int32"):
        arith.scatter_elements(data, idx.astype(np.int64), upd, "add", t)


@settings(**SETTINGS)
@given(st.sampled_from([(8, True), (8, False), (16, True), (16, False)]),
       st.sampled_from(["none", "add", "max", "min"]), st.booleans(), st.integers(0, 2**32 - 1))
def test_scatter_against_the_oracle(kind, reduction, lines, seed):
    bits, signed = kind
    lo, hi = oracle.bounds(bits, signed)
    rng = np.random.default_rng(seed)
    shape = (4, 3) if lines else (3, 4)
    m = 1 if lines else 2
    # 'heavy': 300 adds at one place, past the 8-bit updates' 16-bit accumulator and back
    heavy = reduction == "add" and bits == 8 and rng.random() < 0.4
    n_points = 300 if heavy else int(rng.integers(1, 12))
    points = np.zeros((n_points, m), np.int64) if heavy else rng.integers(-5, 5, size=(n_points, m))
    upd_shape = (n_points, 3) if lines else (n_points,)
    pool = np.array([lo, hi, 0, lo + 1, hi - 1] + list(rng.integers(lo, hi + 1, 3)))
    updates = rng.choice(pool, size=upd_shape).astype(oracle.dtype(bits, signed))
    if heavy:
        up, down = (hi, lo) if signed and rng.random() < 0.5 or not signed else (lo, hi)
        updates[:270] = up
        updates[270:] = down if signed else 0
    data = rng.choice(pool, size=shape).astype(oracle.dtype(bits, signed))
    c, sh = oracle.mma_scale_shift(2.0 ** -9 if heavy else float(rng.uniform(0.01, 2.0)))
    cd, shd = oracle.mma_scale_shift(float(rng.uniform(0.5, 2.0)))
    got = arith.scatter_elements(data, points.T.astype(np.int32).copy(), updates, reduction,
                                 arith.FixedType(bits, signed), scale=c, shift=sh, data_scale=cd, data_shift=shd)
    want = oracle.scatter(data, [tuple(int(v) for v in p) for p in points], list(updates), reduction, bits, signed,
                          c, sh, cd, shd)
    count("scatter_elements")
    np.testing.assert_array_equal(got, want)


# -- through quantization ----------------------------------------------------------------------------------

def _model(nodes, inputs, outputs, inits=(), opset=18):
    graph = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _sqnr(ref, got):
    ref, got = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    return 10 * np.log10(np.sum(ref ** 2) / max(np.sum((ref - got) ** 2), 1e-30))


def _layer_types(qmodel):
    return {layer.type for sub in qmodel.subgraphs.values() for layer in sub.layers}


def test_a_topk_model_on_tidl_runs_in_fixed_point(tmp_path):
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.4).astype(np.float32), "w")
    k = numpy_helper.from_array(np.array([5], np.int64), "k")
    model = _model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                    helper.make_node("TopK", ["c", "k"], ["v", "i"], axis=-1)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, 6, 16))],
                   [helper.make_tensor_value_info("v", TensorProto.FLOAT, (1, 4, 6, 5)),
                    helper.make_tensor_value_info("i", TensorProto.INT64, (1, 4, 6, 5))], [w, k])
    path = str(tmp_path / "topk.onnx")
    onnx.save(model, path)
    mod = tidlx.load(path)
    frames = {"x": rng.standard_normal((4, 3, 6, 16)).astype(np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qmodel = tidlx.quantize(mod, {"accuracy_level": 0}, calib=frames)
    assert "TopK" in _layer_types(qmodel)
    frame = {"x": frames["x"][:1]}
    values, indices = qmodel.run(frame)
    ref_v, ref_i = tidlx.emulate(mod, frame)
    assert indices.dtype == np.int64 and _sqnr(ref_v, values) > 25
    # the layer's values are its input's integers at the places its indices name, largest first
    seen = {}
    qmodel.run(frame, fixed_observers=[lambda o: seen.setdefault(o.layer.type, o)])
    top = seen["TopK"]
    q_in, (q_values, q_indices) = top.inputs[0], top.outputs
    assert q_indices.dtype == np.int32 and q_values.dtype == q_in.dtype
    np.testing.assert_array_equal(np.take_along_axis(q_in, q_indices.astype(np.int64), axis=-1), q_values)
    assert np.all(np.diff(q_values.astype(np.int64), axis=-1) <= 0)
    np.testing.assert_array_equal(q_indices, indices)
    assert np.mean(indices == ref_i) > 0.8


def test_a_scatter_nd_add_model_on_tidl_runs_in_fixed_point(tmp_path):
    rng = np.random.default_rng(2)
    points, rows, width = 40, 6, 8
    idx = np.stack([np.zeros(points, np.int64), rng.integers(0, rows, points)], -1).reshape(1, points, 2)
    w = numpy_helper.from_array((rng.standard_normal((1, 1, 1, 1)) + 1.5).astype(np.float32), "w")
    model = _model([helper.make_node("Conv", ["u", "w"], ["uc"]),
                    helper.make_node("Squeeze", ["uc", "ax"], ["us"]),
                    helper.make_node("ScatterND", ["d", "i", "us"], ["o"], reduction="add")],
                   [helper.make_tensor_value_info("u", TensorProto.FLOAT, (1, 1, points, width)),
                    helper.make_tensor_value_info("d", TensorProto.FLOAT, (1, rows, width)),
                    helper.make_tensor_value_info("i", TensorProto.INT64, (1, points, 2))],
                   [helper.make_tensor_value_info("o", TensorProto.FLOAT, (1, rows, width))],
                   [w, numpy_helper.from_array(np.array([1], np.int64), "ax")])
    path = str(tmp_path / "scatter.onnx")
    onnx.save(model, path)
    mod = tidlx.load(path)
    frames = {"u": rng.standard_normal((3, 1, points, width)).astype(np.float32),
              "d": np.zeros((3, rows, width), np.float32), "i": np.concatenate([idx] * 3)}
    for flow in ({"flow": "ort"},):   # the TVM flow reads the indices' first axis as the batch: host
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            qmodel = tidlx.quantize(mod, {"accuracy_level": 0, "advanced_options:calibration_iterations": 1, **flow},
                                    calib=frames)
        assert "ScatterElements" in _layer_types(qmodel), flow
        frame = {name: v[:1] for name, v in frames.items()}
        got = qmodel.run(frame)[0]
        ref = tidlx.emulate(mod, frame)[0]
        # 21.8 dB: TI's ranges are the mean of the 3 frames' ranges, so this frame's extremes saturate
        assert _sqnr(ref, got) > 15, flow


# -- TI's BEVDet export -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bevdet_ti(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bevdet_ti")
    path = str(folder / "bevdet_ti.onnx")
    model = tidlx.models.bevdet_ti_export(backbone="resnet18", tiny=True, path=path)
    calib = str(folder / "calib.npz")
    np.savez(calib, **tidlx.models.bevdet_ti_inputs(model))
    return folder, path, calib


def _cli(*args):
    exe = os.path.join(os.path.dirname(sys.executable), "tidlx")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("flow", [["--flow", "ort"], ["-o", "max_batch_size=6"]])
def test_ti_bevdet_export_compares_compiles_and_runs_in_fixed_point(bevdet_ti, flow):
    folder, path, calib = bevdet_ti
    common = ["--calib", calib, "-o", "advanced_options:calibration_iterations=1", *flow]
    done = _cli("compare", path, *common, "--json")
    assert done.returncode == 0, done.stderr
    assert '"ScatterElements"' in done.stdout or "--flow" not in flow   # the TVM flow leaves the scatter on the host
    assert '"TopK"' in done.stdout
    out = str(folder / ("c_" + flow[-1].replace("=", "_")))
    done = _cli("compile", path, *common, "--out", out, "--force")
    assert done.returncode == 0, done.stderr
    done = _cli("run", out, "--input", calib, "--output", out + ".npz")
    assert done.returncode == 0, done.stderr
    result = np.load(out + ".npz")
    assert result["labels"].dtype == np.int64 and result["scores"].shape == (1, 64)


def test_a_scatter_nd_with_constant_zero_data_and_constant_indices(tmp_path):
    """TI's constraint form: a constant all-zero data; the indices an initializer too."""
    rng = np.random.default_rng(3)
    points, rows, width = 30, 5, 8
    idx = np.stack([np.zeros(points, np.int64), rng.integers(0, rows, points)], -1).reshape(1, points, 2)
    w = numpy_helper.from_array((rng.standard_normal((1, 1, 1, 1)) + 1.5).astype(np.float32), "w")
    inits = [w, numpy_helper.from_array(np.array([1], np.int64), "ax"),
             numpy_helper.from_array(np.zeros((1, rows, width), np.float32), "d"), numpy_helper.from_array(idx, "i")]
    model = _model([helper.make_node("Conv", ["u", "w"], ["uc"]),
                    helper.make_node("Squeeze", ["uc", "ax"], ["us"]),
                    helper.make_node("ScatterND", ["d", "i", "us"], ["o"], reduction="add")],
                   [helper.make_tensor_value_info("u", TensorProto.FLOAT, (1, 1, points, width))],
                   [helper.make_tensor_value_info("o", TensorProto.FLOAT, (1, rows, width))], inits)
    path = str(tmp_path / "scatter_const.onnx")
    onnx.save(model, path)
    mod = tidlx.load(path)
    frames = {"u": rng.standard_normal((3, 1, points, width)).astype(np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qmodel = tidlx.quantize(mod, {"accuracy_level": 0, "flow": "ort"}, calib=frames)
    scatter = [layer for sub in qmodel.subgraphs.values() for layer in sub.layers if layer.type == "ScatterElements"]
    assert len(scatter) == 1 and scatter[0].weights is not None and not scatter[0].weights.any()
    assert scatter[0].attrs["indices"].dtype == np.int32 and len(scatter[0].inputs) == 1
    frame = {"u": frames["u"][:1]}
    assert _sqnr(tidlx.emulate(mod, frame)[0], qmodel.run(frame)[0]) > 25


def test_an_index_input_outside_int32_is_an_error_naming_it(tmp_path):
    from tidlx.emulator.fixed.layers import run_subgraph

    test_a_scatter_nd_add_model_on_tidl_runs_in_fixed_point(tmp_path)
    mod = tidlx.load(str(tmp_path / "scatter.onnx"))
    rng = np.random.default_rng(5)
    frames = {"u": rng.standard_normal((2, 1, 40, 8)).astype(np.float32), "d": np.zeros((2, 6, 8), np.float32),
              "i": np.zeros((2, 40, 2), np.int64)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qmodel = tidlx.quantize(mod, {"accuracy_level": 0, "flow": "ort"}, calib=frames)
    sub = next(s for s in qmodel.subgraphs.values() if any(layer.type == "ScatterElements" for layer in s.layers))
    x = [np.zeros(sub.tensors[t].shape, np.int64) if sub.tensors[t].fixed_type == arith.INDEX_TYPE
         else np.zeros(sub.tensors[t].shape, np.float32) for t in sub.inputs]
    run_subgraph(sub, x)
    index = next(i for i, t in enumerate(sub.inputs) if sub.tensors[t].fixed_type == arith.INDEX_TYPE)
    x[index] = x[index] + 2**31
    with pytest.raises(arith.FixedPointError, match="index input .* outside int32"):
        run_subgraph(sub, x)


def test_topk_and_scatter_subgraphs_read_back_from_their_record_and_run_the_same(tmp_path):
    """The network record keeps the int32 index tensors, the constant data and indices, and the layers'
    parameters; the read subgraph runs to the same bits; a broken record is refused by name."""
    import dataclasses

    from tidlx.backends.tidl.artifacts import NetworkInfo, encode_network
    from tidlx.emulator.fixed.artifact_format import ArtifactError
    from tidlx.emulator.fixed.artifact_checks import check_subgraph
    from tidlx.emulator.fixed.artifact_reader import read_network
    from tidlx.emulator.fixed.layers import run_subgraph

    test_a_scatter_nd_with_constant_zero_data_and_constant_indices(tmp_path)
    rng = np.random.default_rng(4)
    models = []
    for name in ("topk.onnx", "scatter_const.onnx"):
        if name == "topk.onnx":
            test_a_topk_model_on_tidl_runs_in_fixed_point(tmp_path)
        mod = tidlx.load(str(tmp_path / name))
        shapes = {p.name_hint: tuple(int(d) for d in p.checked_type.shape) for p in mod["main"].params}
        frames = {n: rng.standard_normal((2,) + s[1:]).astype(np.float32) for n, s in shapes.items()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            models.append(tidlx.quantize(mod, {"accuracy_level": 0, "flow": "ort"}, calib=frames))
    seen = set()
    for qmodel in models:
        for sub in qmodel.subgraphs.values():
            read = read_network(encode_network(sub, NetworkInfo(0, 0, 1)), "net.bin").subgraph
            x = [rng.standard_normal(sub.tensors[t].shape).astype(np.float32) for t in sub.inputs]
            for a, b in zip(run_subgraph(sub, x), run_subgraph(read, x)):
                assert a.dtype == b.dtype and np.array_equal(a, b)
            seen |= {layer.type for layer in read.layers}
            for i, layer in enumerate(sub.layers):
                if layer.type in ("TopK", "ScatterElements"):
                    key = "k" if layer.type == "TopK" else "reduction"
                    broken = dict(layer.attrs, **{key: 0 if key == "k" else "mul"})
                    layers = list(sub.layers)
                    layers[i] = dataclasses.replace(layer, attrs=broken)
                    with pytest.raises(ArtifactError, match=f"'{key}'"):
                        check_subgraph(dataclasses.replace(sub, layers=tuple(layers)), "net.bin")
    assert {"TopK", "ScatterElements"} <= seen


def _scatter_add_model(tmp_path, slice_after):
    """data and updates from two convolutions of different weight sizes (so of different scales), an
    'add' ScatterND, and with ``slice_after`` a Slice of its output."""
    rng = np.random.default_rng(4)
    points, rows, width = 12, 6, 8
    idx = np.stack([np.zeros(points, np.int64), rng.integers(0, rows, points)], -1).reshape(1, points, 2)
    inits = [numpy_helper.from_array(np.array([[[[0.25]]]], np.float32), "wu"),
             numpy_helper.from_array(np.array([[[[3.0]]]], np.float32), "wd"),
             numpy_helper.from_array(np.array([1], np.int64), "ax")]
    nodes = [helper.make_node("Conv", ["u", "wu"], ["uc"]), helper.make_node("Squeeze", ["uc", "ax"], ["us"]),
             helper.make_node("Conv", ["d", "wd"], ["dc"]), helper.make_node("Squeeze", ["dc", "ax"], ["ds"]),
             helper.make_node("ScatterND", ["ds", "i", "us"], ["s" if slice_after else "o"], reduction="add")]
    out_rows = rows
    if slice_after:
        out_rows = rows - 1
        inits += [numpy_helper.from_array(np.array([0], np.int64), "st"),
                  numpy_helper.from_array(np.array([out_rows], np.int64), "en"),
                  numpy_helper.from_array(np.array([1], np.int64), "axs")]
        nodes.append(helper.make_node("Slice", ["s", "st", "en", "axs"], ["o"]))
    model = _model(nodes, [helper.make_tensor_value_info("u", TensorProto.FLOAT, (1, 1, points, width)),
                           helper.make_tensor_value_info("d", TensorProto.FLOAT, (1, 1, rows, width)),
                           helper.make_tensor_value_info("i", TensorProto.INT64, (1, points, 2))],
                   [helper.make_tensor_value_info("o", TensorProto.FLOAT, (1, out_rows, width))], inits)
    path = str(tmp_path / "scatter_add.onnx")
    onnx.save(model, path)
    frames = {"u": rng.standard_normal((3, 1, 1, points, width)).astype(np.float32),
              "d": rng.standard_normal((3, 1, 1, rows, width)).astype(np.float32),
              "i": np.stack([idx] * 3)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qmodel = tidlx.quantize(tidlx.load(path), {"accuracy_level": 0, "flow": "ort",
                                                   "advanced_options:calibration_iterations": 1}, calib=frames)
    (sub,) = qmodel.subgraphs.values()
    (scatter,) = [layer for layer in sub.layers if layer.type == "ScatterElements"]
    return qmodel, sub, scatter


def test_scatter_add_relabels_data_and_updates_at_their_smaller_scale(tmp_path):
    """§8.16: TI's import gives an 'add' scatter's data and updates producers the smaller of their two
    scales without requantizing them: the larger-scale producer keeps its roundBits, so its accScale over
    2^roundBits is no longer its tensor's scale; the scatter then needs no data multiplier."""
    _, sub, scatter = _scatter_add_model(tmp_path, False)
    data, updates = (sub.tensors[t] for t in (scatter.inputs[0], scatter.inputs[2]))
    assert data.scale == updates.scale and "data_scale" not in scatter.attrs
    producers = [layer for layer in sub.layers if layer.type == "Conv"]
    own = [layer.acc_scale / 2 ** layer.round_bits for layer in producers]
    assert min(own) == data.scale and max(own) > data.scale


def test_scatter_add_scale_comes_from_a_following_slice(tmp_path):
    """§8.16: a Slice reading the scatter's output gives the range its output scale comes from."""
    qmodel, sub, scatter = _scatter_add_model(tmp_path, True)
    rng = next(iter(qmodel.calibration.values())).tensors
    (slice_layer,) = [layer for layer in sub.layers if layer.type == "Slice"]
    want = nx.symmetric_range_scale(rng[slice_layer.outputs[0]].min, rng[slice_layer.outputs[0]].max, 8, True)
    own = nx.symmetric_range_scale(rng[scatter.outputs[0]].min, rng[scatter.outputs[0]].max, 8, True)
    assert sub.tensors[scatter.outputs[0]].scale == want and want != own
