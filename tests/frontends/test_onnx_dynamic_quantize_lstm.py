"""onnxruntime's contrib op com.microsoft.DynamicQuantizeLSTM: one-node models built with
onnx.helper import as nn.dynamic_quantize_lstm, emulate as onnxruntime's CPU kernel computes them
(within float rounding: 1e-5 of the largest |value|, where one step of the dynamic quantization is
~1e-3), refuse the forms onnxruntime refuses or tidlx does not compute by name, and ``tidlx
partition`` keeps them on the host saying why."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
from tidlx.cli import main
from tidlx.frontends.onnx import UnsupportedAttributeError, from_onnx
from tidlx.ir.traversal import calls

RNG = np.random.default_rng(4099)

REASON = "runs on the host (Arm): dynamically quantized LSTM (onnxruntime contrib op), TIDL has no LSTM layer"

#: max |tidlx - onnxruntime| / max |onnxruntime|
TOLERANCE = 1e-5


def lstm_model(direction="forward", seq=6, batch=1, size=5, hidden=8, per_column=False, dtype=np.int8,
               initial=True, bias=True, seq_lens=False, outputs=("Y", "Y_h", "Y_c"), **attrs):
    """A DynamicQuantizeLSTM node (weights quantized as onnxruntime's quantize_dynamic writes them:
    int8 with zero points 0, or uint8 with one zero point per direction) and its feeds."""
    dirs = 2 if direction == "bidirectional" else 1
    scale_shape = (dirs, 4 * hidden) if per_column else (dirs,)
    if dtype == np.int8:
        # |w| <= 64: no u8 x s8 pair sum saturates int16 in onnxruntime's AVX2 kernel
        w, r = (RNG.integers(-64, 65, shape).astype(np.int8) for shape in ((dirs, size, 4 * hidden),
                                                                          (dirs, hidden, 4 * hidden)))
        w_zp, r_zp = np.zeros(scale_shape, np.int8), np.zeros(scale_shape, np.int8)
    else:
        w, r = (RNG.integers(0, 256, shape).astype(np.uint8) for shape in ((dirs, size, 4 * hidden),
                                                                          (dirs, hidden, 4 * hidden)))
        zps = RNG.integers(100, 156, (dirs,) + (1,) * (len(scale_shape) - 1))
        w_zp, r_zp = np.broadcast_to(zps, scale_shape).astype(np.uint8), np.broadcast_to(zps + 1, scale_shape).astype(
            np.uint8)
    inits = {"W": w, "R": r, "W_scale": RNG.uniform(0.005, 0.02, scale_shape).astype(np.float32), "W_zp": w_zp,
             "R_scale": RNG.uniform(0.005, 0.02, scale_shape).astype(np.float32), "R_zp": r_zp}
    if bias:
        inits["B"] = (RNG.standard_normal((dirs, 8 * hidden)) * 0.3).astype(np.float32)
    if seq_lens:
        inits["lens"] = np.full(batch, seq, np.int32)
    feeds = {"X": RNG.standard_normal((seq, batch, size)).astype(np.float32)}
    if initial:
        feeds.update(h0=(RNG.standard_normal((dirs, batch, hidden)) * 0.5).astype(np.float32),
                     c0=(RNG.standard_normal((dirs, batch, hidden)) * 0.5).astype(np.float32))
    inputs = ["X", "W", "R", "B" if bias else "", "lens" if seq_lens else "", "h0" if initial else "",
              "c0" if initial else "", "", "W_scale", "W_zp", "R_scale", "R_zp"]
    node = helper.make_node("DynamicQuantizeLSTM", inputs, list(outputs), name="dqlstm", domain="com.microsoft",
                            direction=direction, hidden_size=hidden, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
                                            for n, a in feeds.items()],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o],
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model, feeds


def onnxruntime_outputs(model, feeds):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    # onnxruntime quantizes the hidden state per thread's rows of the batch; nn.dynamic_quantize_lstm
    # is its one-thread result (the same for any thread count when batch is 1)
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def relative_error(got, expected) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - expected))) / max(float(np.max(np.abs(expected))), 1e-30)


def check(model, feeds, tmp_path):
    """tidlx.load + tidlx.emulate (both kernel sets) against onnxruntime; returns the module."""
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    expected = onnxruntime_outputs(model, feeds)
    mod = tidlx.load(str(path))
    for kernels in ("reference", "fast"):
        got = tidlx.emulate(mod, feeds, kernels=kernels)
        assert len(got) == len(expected)
        for k, (g, e) in enumerate(zip(got, expected)):
            assert g.shape == e.shape and g.dtype == e.dtype, (kernels, k, g.shape, g.dtype, e.shape, e.dtype)
            err = relative_error(g, e)
            assert err <= TOLERANCE, f"{kernels} output {k}: relative error {err:.2e}"
    return mod


def op_names(mod):
    return sorted({c.op.name for c in calls(mod["main"])})


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("per_column", [False, True], ids=["per-tensor", "per-column"])
@pytest.mark.parametrize("initial", [True, False], ids=["initial", "no-initial"])
def test_matches_onnxruntime(direction, per_column, initial, tmp_path):
    model, feeds = lstm_model(direction, per_column=per_column, initial=initial)
    mod = check(model, feeds, tmp_path)
    assert op_names(mod) == ["nn.dynamic_quantize_lstm"]


@pytest.mark.parametrize("case", [
    dict(direction="bidirectional", dtype=np.uint8),
    dict(direction="forward", dtype=np.uint8, per_column=True, bias=False),
    dict(direction="bidirectional", seq=4, batch=3, size=4, hidden=6, per_column=True),
    dict(direction="reverse", seq=7, clip=0.6, seq_lens=True, outputs=("", "Y_h")),
    dict(direction="bidirectional", seq=12, size=40, hidden=96, per_column=True),
], ids=["uint8-weights", "uint8-per-column-no-bias", "batch-3", "clip-seq-lens-one-output", "wide"])
def test_other_forms_match_onnxruntime(case, tmp_path):
    model, feeds = lstm_model(**case)
    check(model, feeds, tmp_path)


def test_halfway_inputs_round_to_even(tmp_path):
    # X in [0, 255/64] in steps of 1/128: the scale is 1/64 and every odd step is halfway between
    # two uint8 values, which onnxruntime rounds to the even one
    model, feeds = lstm_model("bidirectional", seq=5, size=6, hidden=8)
    x = RNG.integers(0, 511, feeds["X"].shape).astype(np.float32) / 128
    x.flat[0], x.flat[1] = 0.0, 255 / 64
    feeds["X"] = x
    check(model, feeds, tmp_path)


def test_the_tolerance_tells_quantized_from_float_arithmetic():
    # the same LSTM in float with the dequantized weights (ONNX's LSTM, nn.lstm's layout) is far
    # from onnxruntime's quantized result: the tolerance above would catch float arithmetic
    model, feeds = lstm_model("bidirectional", seq=8, size=16, hidden=16)
    expected = onnxruntime_outputs(model, feeds)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    w = (inits["W"].astype(np.float32) * inits["W_scale"][:, None, None]).transpose(0, 2, 1)
    r = (inits["R"].astype(np.float32) * inits["R_scale"][:, None, None]).transpose(0, 2, 1)
    node = helper.make_node("LSTM", ["X", "W", "R", "B", "", "h0", "c0"], ["Y", "Y_h", "Y_c"],
                            direction="bidirectional", hidden_size=16)
    graph = helper.make_graph([node], "f", [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
                                            for n, a in feeds.items()],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("Y", "Y_h", "Y_c")],
                              [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"),
                               numpy_helper.from_array(inits["B"], "B")])
    float_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    float_model.ir_version = 8
    got = tidlx.emulate(from_onnx(float_model), feeds, kernels="reference")
    assert relative_error(got[0], expected[0]) > 100 * TOLERANCE


def test_forms_it_does_not_compute_are_refused_by_name():
    model, _ = lstm_model(per_column=True)
    zp = numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == "W_zp")).copy()
    zp[0, 3] = 2
    next(i for i in model.graph.initializer if i.name == "W_zp").CopyFrom(numpy_helper.from_array(zp, "W_zp"))
    with pytest.raises(UnsupportedAttributeError, match=r"node 'dqlstm' \(com.microsoft.DynamicQuantizeLSTM\): "
                                                        r"W_zero_point .* int8 weights with zero points 0"):
        from_onnx(model)
    model, _ = lstm_model(per_column=True, dtype=np.uint8)
    zp = numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == "R_zp")).copy()
    zp[0, 5] += 1
    next(i for i in model.graph.initializer if i.name == "R_zp").CopyFrom(numpy_helper.from_array(zp, "R_zp"))
    with pytest.raises(UnsupportedAttributeError, match=r"R_zero_point is not supported: .*one zero point per "
                                                        r"direction"):
        from_onnx(model)
    model, _ = lstm_model(batch=2, seq_lens=True)
    next(i for i in model.graph.initializer if i.name == "lens").CopyFrom(
        numpy_helper.from_array(np.array([6, 3], np.int32), "lens"))
    with pytest.raises(UnsupportedAttributeError, match=r"sequence_lens \[6, 3\] is not supported"):
        from_onnx(model)
    model, _ = lstm_model(activations=["Sigmoid", "Relu", "Tanh"])
    with pytest.raises(UnsupportedAttributeError, match="activations"):
        from_onnx(model)
    model, _ = lstm_model(input_forget=1)
    with pytest.raises(UnsupportedAttributeError, match="input_forget"):
        from_onnx(model)


def test_macs_count_the_gate_products():
    from tidlx.ir.analysis import macs

    model, _ = lstm_model("bidirectional", seq=6, batch=1, size=5, hidden=8)
    (call_,) = [c for c in calls(from_onnx(model)["main"]) if c.op.name == "nn.dynamic_quantize_lstm"]
    assert macs(call_) == 6 * 2 * 1 * 32 * (5 + 8)


def test_partition_keeps_it_on_the_host_with_the_reason(capsys, tmp_path):
    model, _ = lstm_model()
    path = tmp_path / "partition.onnx"
    onnx.save(model, str(path))
    assert main(["partition", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["totals"]["num_subgraphs"] == 0
    assert [(h["op"], h["layer"], h["kind"]) for h in data["host_ops"]] == \
        [("nn.dynamic_quantize_lstm", "dqlstm", "rule")]
    assert data["host_ops"][0]["reason"] == f"nn.dynamic_quantize_lstm 'dqlstm': {REASON}"
