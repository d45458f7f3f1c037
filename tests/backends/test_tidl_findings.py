"""``tidlx compare``'s findings: the causes of error it names at their layers, worst layer first."""

from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
from tidlx.backends.tidl.findings import findings

RNG = np.random.default_rng(0)


def _load(tmp_path, nodes, inits, shape):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return tidlx.load(path)


def _compare(mod, calib, inputs, bits=8):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qmodel = tidlx.quantize(mod, {"tensor_bits": bits, "accuracy_level": 0}, calib={"x": calib})
        return qmodel, tidlx.compare(qmodel, inputs={"x": inputs})


def _kinds(result):
    return [(f.kind, f.layer) for f in result.findings]


def test_a_global_average_pool_of_a_large_map_names_its_multiplier(tmp_path):
    w = (RNG.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    mod = _load(tmp_path, [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1], name="conv"),
                           helper.make_node("Relu", ["c"], ["r"], name="relu"),
                           helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
                           helper.make_node("Conv", ["g", "V"], ["y"], name="fc")],
                {"W": w, "V": (RNG.standard_normal((2, 4, 1, 1)) * 0.3).astype(np.float32)}, (1, 3, 30, 30))
    frames = RNG.standard_normal((2, 3, 30, 30)).astype(np.float32)
    qmodel, result = _compare(mod, frames, frames[:1], bits=16)
    (found,) = [f for f in result.findings if f.kind == "global-average-pool multiplier"]
    assert found.layer == "gap"
    layer = next(layer for sub in qmodel.subgraphs.values() for layer in sub.layers if layer.name == "gap")
    q = layer.attrs["q"]
    multiplier = round(2 ** q / 900)
    assert f"round(2^{q} / 900) = {multiplier}" in found.message
    assert f"{multiplier * 900 / 2 ** q:.3f}" in found.message


def test_a_channel_of_small_weights_is_named(tmp_path):
    w = (RNG.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    w[2] *= 0.001
    mod = _load(tmp_path, [helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1], name="conv")], {"W": w},
                (1, 3, 8, 8))
    frames = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    _, result = _compare(mod, frames, frames[:1])
    (found,) = [f for f in result.findings if f.kind == "per-channel weight range"]
    assert found.layer == "conv" and "1 of them keep fewer than 4 of the 8 bits" in found.message


def test_frames_beyond_the_calibrated_range_are_named_and_ordered_worst_first(tmp_path):
    w = (RNG.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    mod = _load(tmp_path, [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1], name="conv"),
                           helper.make_node("Relu", ["c"], ["y"], name="relu")], {"W": w}, (1, 3, 8, 8))
    calib = (RNG.standard_normal((4, 3, 8, 8)) * 0.1).astype(np.float32)
    held_out = (RNG.standard_normal((1, 3, 8, 8)) * 3.0).astype(np.float32)
    _, result = _compare(mod, calib, held_out)
    saturation = [f for f in result.findings if f.kind == "saturation"]
    assert saturation and "the calibrated range ends at" in saturation[0].message
    assert [f.sqnr_db for f in result.findings] == sorted(f.sqnr_db for f in result.findings)
    data = json.loads(result.to_json())
    assert data["findings"][0]["kind"] == result.findings[0].kind


def test_a_model_without_such_causes_has_no_findings(tmp_path):
    w = (RNG.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    mod = _load(tmp_path, [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1], name="conv"),
                           helper.make_node("Relu", ["c"], ["y"], name="relu")], {"W": w}, (1, 3, 8, 8))
    frames = RNG.standard_normal((4, 3, 8, 8)).astype(np.float32)
    _, result = _compare(mod, frames, frames[:1])
    assert result.findings == ()


def test_the_cli_prints_the_findings(tmp_path, capsys):
    from tidlx.cli import main

    w = (RNG.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    w[1] *= 0.001
    _load(tmp_path, [helper.make_node("Conv", ["x", "W"], ["y"], pads=[1, 1, 1, 1], name="conv")], {"W": w},
          (1, 3, 8, 8))
    np.savez(tmp_path / "calib.npz", x=RNG.standard_normal((2, 3, 8, 8)).astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["compare", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "calib.npz"),
                     "-o", "accuracy_level=0"]) == 0
    out = capsys.readouterr().out
    assert "findings (1 of 1, worst layer first):" in out and "per-channel weight range" in out


def test_findings_of_no_layers_is_empty():
    assert findings(None, (), {}) == ()
