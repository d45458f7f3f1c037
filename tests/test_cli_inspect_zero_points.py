"""``tidlx inspect`` of a style-4 folder (AM68A: quantization style 6) shows each output's zero point and each
layer's MMA multiplier and shift (docs/numerics.md §12); a symmetric folder's table and JSON keep their columns
and keys."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tidlx.cli import main
from tidlx.emulator.fixed.artifact_reader import read_network


def _model() -> onnx.ModelProto:
    """x -> Conv -> Relu -> Conv (no activation: signed, a non-zero zero point) -> + the first Conv's output
    -> GlobalAveragePool -> Flatten -> Gemm."""
    rng = np.random.default_rng(4)

    def const(name, shape, k):
        return numpy_helper.from_array((rng.standard_normal(shape) * k).astype(np.float32), name)

    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["s"], name="add"),
             helper.make_node("GlobalAveragePool", ["s"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], name="fc", transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
                              [const("w1", (6, 3, 3, 3), 0.4), const("b1", (6,), 0.3), const("w2", (6, 6, 3, 3), 0.3),
                               const("b2", (6,), 0.5), const("w3", (5, 6), 0.5), const("b3", (5,), 0.1)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    d = tmp_path_factory.mktemp("inspect_zp")
    onnx.save(_model(), str(d / "m.onnx"))
    np.savez(d / "c.npz", x=np.random.default_rng(1).standard_normal((4, 3, 8, 8)).astype(np.float32))
    out = {}
    for tag, device in (("asym", "AM68A"), ("sym", "TDA4VM")):
        out[tag] = d / tag
        assert main(["compile", str(d / "m.onnx"), "--calib", str(d / "c.npz"), "-o", f"target_device={device}",
                     "-o", "advanced_options:calibration_iterations=1", "--out", str(out[tag])]) == 0
    return out


def _network(folder):
    return read_network((folder / "tidl_subgraph0_net.bin").read_bytes(), "net.bin").subgraph


def test_a_style_4_table_shows_zero_points_and_mma_factors(folders, capsys):
    sub = _network(folders["asym"])
    assert sub.quantization_style == 6
    capsys.readouterr()
    assert main(["inspect", str(folders["asym"])]) == 0
    out = capsys.readouterr().out
    assert "zero point" in out and "MMA scale >> shift" in out
    rows = {line.split("│")[2].strip(): [c.strip() for c in line.split("│")[1:-1]]
            for line in out.splitlines() if line.startswith("│")}
    header = next(line for line in out.splitlines() if "zero point" in line)
    names = [c.strip() for c in header.split("┃")[1:-1]]
    zp_col, mma_col, rb_col = names.index("zero point"), names.index("MMA scale >> shift"), names.index("roundBits")
    seen_nonzero = False
    for layer in sub.layers:
        cells = rows[layer.name]
        want = " ".join(str(sub.tensors[t].zero_point) for t in layer.outputs)
        assert cells[zp_col] == want, layer.name
        seen_nonzero |= any(sub.tensors[t].zero_point != 0 for t in layer.outputs)
        if layer.type == "Conv":
            m, s = np.asarray(layer.mma_scale), np.asarray(layer.mma_shift)
            lo_hi = [f"{a.min()}..{a.max()}" if a.min() != a.max() else str(a.min()) for a in (m, s)]
            assert cells[mma_col] == f"{lo_hi[0]} >> {lo_hi[1]} per channel" and cells[rb_col] == ""
        if layer.type == "Pool" and layer.mma_scale is not None:
            assert cells[mma_col] == f"{int(layer.mma_scale)} >> {int(layer.mma_shift)}"
    assert seen_nonzero   # the test model has an asymmetric tensor
    assert main(["inspect", str(folders["asym"] / "tidl_subgraph0_net.bin"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for row, layer in zip(doc["layers"], sub.layers):
        assert [o["zero_point"] for o in row["outputs"]] == [sub.tensors[t].zero_point for t in layer.outputs]
        assert [i["zero_point"] for i in row["inputs"]] == [sub.tensors[t].zero_point for t in layer.inputs]
        if layer.mma_scale is None:
            assert row["mma_scale"] is None and row["mma_shift"] is None
        else:
            assert np.array_equal(np.asarray(row["mma_scale"]), np.asarray(layer.mma_scale))
            assert np.array_equal(np.asarray(row["mma_shift"]), np.asarray(layer.mma_shift))


def test_a_symmetric_table_and_json_keep_their_columns(folders, capsys):
    sub = _network(folders["sym"])
    assert sub.quantization_style != 6 and all(t.zero_point == 0 for t in sub.tensors)
    capsys.readouterr()
    assert main(["inspect", str(folders["sym"])]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "roundBits" in line)
    assert [c.strip() for c in header.split("┃")[1:-1]] == ["#", "layer", "type", "in", "out", "scale", "roundBits",
                                                            "MACs"]
    assert main(["inspect", str(folders["sym"]), "--json"]) == 0
    text = capsys.readouterr().out
    assert "zero_point" not in text and "mma_" not in text
