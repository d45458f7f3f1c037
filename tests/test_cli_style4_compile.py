"""A ResNet-18 (benchmarks' model set, 32x32) compiled for AM68A takes TI's tools' style 4 there
(quantization style 6 in its network record), runs from its folder, and its level-4 traces read back as
(q - zero point) / scale; an ONNX model with an average pool, a batch norm and a ConvTranspose compiles in
style 4 and compares next to style 0."""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

from tidlx.cli import main

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "benchmarks"))
import model_set  # noqa: E402


def test_am68a_compiles_style_4_and_traces_its_zero_points(tmp_path, capsys):
    model = model_set.resnet18(image=32)
    (tmp_path / "r18.onnx").write_bytes(model.SerializeToString())
    name = model.graph.input[0].name
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "c.npz", **{name: rng.standard_normal((4, 3, 32, 32), dtype=np.float32)})
    np.savez(tmp_path / "x.npz", **{name: rng.standard_normal((1, 3, 32, 32), dtype=np.float32)})
    out = tmp_path / "out"
    assert main(["compile", str(tmp_path / "r18.onnx"), "--calib", str(tmp_path / "c.npz"), "-o", "target_device=AM68A",
                 "-o", "advanced_options:calibration_iterations=1", "-o", "advanced_options:calibration_frames=4",
                 "--out", str(out)]) == 0
    assert main(["inspect", str(out)]) == 0
    assert "quantization style 6" in capsys.readouterr().out
    traces = tmp_path / "tr"
    assert main(["run", str(out), "--input", str(tmp_path / "x.npz"), "--debug-level", "4", "--trace-dir",
                 str(traces)]) == 0
    info = next(traces.glob("*tensor_info.txt")).read_text(encoding="utf-8").splitlines()[1:]
    facts = {int(d): (int(e), float(s), int(z)) for d, e, s, z in (line.split() for line in info)}
    assert any(z != 0 for _, _, z in facts.values())
    data_id, (etype, scale, zp) = next((d, f) for d, f in facts.items() if f[2] != 0)
    y = next(traces.glob(f"tidl_trace_subgraph_0_{data_id:04d}_*.y"))
    q = np.fromfile(y, np.int8 if etype == 1 else np.uint8).astype(np.float64)
    real = np.fromfile(str(y)[:-2] + "_float.bin", "<f4")
    assert np.array_equal(real, ((q - zp) / scale).astype(np.float32))


def _pool_bn_deconv_model():
    """Two convolutions summed, a batch norm on the sum (TIDL keeps it a BatchNorm layer: nothing to fold it
    into) with ReLU, a padded 3x3 average pool counting its padding, a 2x2 stride-2 ConvTranspose."""
    from onnx import TensorProto, helper, numpy_helper
    r = np.random.default_rng(0)

    def init(name, shape, k=0.3, positive=False):
        a = (r.standard_normal(shape) * k).astype(np.float32)
        return numpy_helper.from_array(np.abs(a) + 0.5 if positive else a, name)

    inits = [init("w1", (8, 3, 3, 3)), init("b1", (8,), 0.1), init("w2", (8, 3, 3, 3)), init("b2", (8,), 0.1),
             init("g", (8,), positive=True), init("be", (8,), 0.2), init("m", (8,), 0.2), init("v", (8,), positive=True),
             init("wd", (8, 4, 2, 2), 0.4), init("bd", (4,), 0.1), init("w3", (2, 4, 3, 3)), init("b3", (2,), 0.1)]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c1", "c2"], ["a"]),
             helper.make_node("BatchNormalization", ["a", "g", "be", "m", "v"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["r"]),
             helper.make_node("AveragePool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                              count_include_pad=1),
             helper.make_node("ConvTranspose", ["p", "wd", "bd"], ["d"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["d", "w3", "b3"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "pool_bn_deconv", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                       [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 16, 16])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_average_pool_batch_norm_and_deconvolution_compile_in_style_4(tmp_path, capsys):
    """docs/numerics.md §12.13: the three layers compile in style 4 (quantization style 6 in the network
    record, TI's symmetric layers, zero point 0 on what they read) and the model follows its float run as
    closely as in style 0 (both figures printed)."""
    (tmp_path / "m.onnx").write_bytes(_pool_bn_deconv_model().SerializeToString())
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "c.npz", x=rng.standard_normal((4, 3, 16, 16), dtype=np.float32))
    np.savez(tmp_path / "h.npz", x=rng.standard_normal((2, 3, 16, 16), dtype=np.float32))
    calib = ["-o", "advanced_options:calibration_frames=4", "-o", "advanced_options:calibration_iterations=2"]
    out = tmp_path / "out"
    assert main(["compile", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "c.npz"), "-o",
                 "advanced_options:quantization_scale_type=4", *calib, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["inspect", str(out)]) == 0
    listing = capsys.readouterr().out
    assert "quantization style 6" in listing
    assert all(kind in listing for kind in ("BatchNorm+relu", "Pool", "Deconv"))
    figures = {}
    for style in (0, 4):
        assert main(["compare", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "c.npz"), "--input",
                     str(tmp_path / "h.npz"), "--frames", "2", "-o",
                     f"advanced_options:quantization_scale_type={style}", *calib, "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert {entry["tidl_type"] for entry in data["layers"]} >= {"BatchNorm", "Pool", "Deconv"}
        figures[style] = data["outputs"][0]["sqnr_db"]
    print(f"pool / batch norm / deconvolution model, 2 held-out frames: quantization_scale_type 0 "
          f"{figures[0]:.1f} dB, 4 {figures[4]:.1f} dB")
    assert figures[0] > 20.0 and figures[4] > 20.0 and figures[4] > figures[0] - 3.0
