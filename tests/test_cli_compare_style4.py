"""``tidlx compare`` with quantization_scale_type 4 (docs/numerics.md §12) on a ResNet-18 (benchmarks'
model set, 32x32): layers dequantized with their zero points, the same frames as style 0."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import pytest

from tidlx.cli import main

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "benchmarks"))
import model_set  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare4")
    model = model_set.resnet18(image=32)
    (folder / "r18.onnx").write_bytes(model.SerializeToString())
    rng = np.random.default_rng(3)
    name = model.graph.input[0].name
    np.savez(folder / "calib.npz", **{name: rng.standard_normal((4, 3, 32, 32), dtype=np.float32)})
    np.savez(folder / "held.npz", **{name: rng.standard_normal((2, 3, 32, 32), dtype=np.float32)})
    return folder


def compare(capsys, files, style):
    code = main(["compare", str(files / "r18.onnx"), "--calib", str(files / "calib.npz"), "--input",
                 str(files / "held.npz"), "--frames", "2", "-o", f"advanced_options:quantization_scale_type={style}",
                 "-o", "advanced_options:calibration_frames=4", "-o", "advanced_options:calibration_iterations=2",
                 "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_style_4_compares_next_to_style_0(files, capsys):
    s0, s4 = compare(capsys, files, 0), compare(capsys, files, 4)
    out0, out4 = s0["outputs"][0]["sqnr_db"], s4["outputs"][0]["sqnr_db"]
    print(f"resnet18 32x32, 2 held-out frames: quantization_scale_type 0 {out0:.1f} dB, 4 {out4:.1f} dB")
    assert out0 > 20.0 and out4 > 20.0
    assert s4["inputs"] == s0["inputs"]
    # the output's own layer has the output's SQNR: every layer is read back as (q - zp) / scale (the output
    # through the float32 data convert, so to float32's precision)
    for data in (s0, s4):
        fed = data["outputs"][0]["fed_by"].split(":")[-1]
        layer = next(entry for entry in data["layers"] if entry["layer"] == fed)
        assert layer["sqnr_db"] == pytest.approx(data["outputs"][0]["sqnr_db"], rel=1e-6)
    assert min(entry["sqnr_db"] for entry in s4["layers"] if entry["sqnr_db"] is not None) > 15.0


def test_the_calibration_line_says_the_ranges_are_kept(files, capsys):
    data = compare(capsys, files, 4)
    assert data["calibration"].endswith("2 fixed-point iterations (the float pass's minmax ranges kept, biases)")


def test_a_style_4_asked_for_refuses_a_layer_without_a_rule_and_warns_of_no_device(tmp_path, capsys):
    """An explicit quantization_scale_type 4 keeps style 4 (the device fallback's warning is not printed)
    and names the layer it has no rule for (a constant minus a tensor, docs/numerics.md §12.11)."""
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Sub", ["c", "a"], ["y"])]
    inits = [numpy_helper.from_array(rng.standard_normal((2, 2, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(np.full((1, 2, 4, 4), 2, np.float32), "c")]
    graph = helper.make_graph(nodes, "c_minus_x", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    save(model, str(tmp_path / "c_minus_x.onnx"))
    np.savez(tmp_path / "calib.npz", x=rng.standard_normal((2, 2, 4, 4)).astype(np.float32))
    code = main(["compare", str(tmp_path / "c_minus_x.onnx"), "--calib", str(tmp_path / "calib.npz"), "-o",
                 "advanced_options:quantization_scale_type=4", "-o", "advanced_options:calibration_iterations=1"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "layer 'Sub_1' (EltWise): quantization_scale_type 4" in err and "has no style-4 rule" in err
    assert "uses TIDL's default quantization_scale_type 0" not in err
