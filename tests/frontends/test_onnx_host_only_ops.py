"""LSTM and the dynamically quantized ops (ConvInteger, MatMulInteger, DynamicQuantizeLinear):
one-node models built with onnx.helper import as ops of their own (nn.lstm, nn.conv2d_integer,
nn.matmul_integer, dynamic_quantize_linear), emulate as onnxruntime runs them (LSTM to 1e-5
relative, the integer ops exactly), and ``tidlx partition`` keeps them on the host saying where
they run and why."""

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
from tidlx.ir import TidlxError
from tidlx.ir.traversal import calls

RNG = np.random.default_rng(2027)

LSTM_REASON = "runs on the host (Arm): TIDL has no LSTM layer"
DYNAMIC_REASON = "dynamically quantized ops run on the host: TIDL quantizes at import, not at run time"


def info(name, array_or_elem, shape=None):
    if isinstance(array_or_elem, np.ndarray):
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array_or_elem.dtype),
                                             array_or_elem.shape)
    return helper.make_tensor_value_info(name, array_or_elem, shape)


#: the element types of each op's outputs
OUTPUT_TYPES = {"LSTM": (TensorProto.FLOAT,) * 3, "ConvInteger": (TensorProto.INT32,),
                "MatMulInteger": (TensorProto.INT32,),
                "DynamicQuantizeLinear": (TensorProto.UINT8, TensorProto.FLOAT, TensorProto.UINT8)}


def one_node(op_type, inputs, outputs, feeds, inits=None, **attrs):
    """A model of one node: ``feeds`` (name -> array) are graph inputs, ``inits`` initializers;
    ``inputs`` are the node's inputs in order ('' for an absent one)."""
    node = helper.make_node(op_type, inputs, outputs, name=f"{op_type.lower()}_node", **attrs)
    graph = helper.make_graph([node], "g", [info(n, a) for n, a in feeds.items()],
                              [helper.make_tensor_value_info(o, t, None)
                               for o, t in zip(outputs, OUTPUT_TYPES[op_type]) if o],
                              [numpy_helper.from_array(a, n) for n, a in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def onnxruntime_outputs(model, feeds):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def check(model, feeds, tmp_path, rtol=None):
    """tidlx.load + tidlx.emulate (both kernel sets) against onnxruntime: within ``rtol`` of the
    largest |value| for floats, exactly otherwise; returns the module."""
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    expected = onnxruntime_outputs(model, feeds)
    mod = tidlx.load(str(path))
    for kernels in ("reference", "fast"):
        got = tidlx.emulate(mod, feeds, kernels=kernels)
        assert len(got) == len(expected)
        for k, (g, e) in enumerate(zip(got, expected)):
            assert g.shape == e.shape and g.dtype == e.dtype, (kernels, k, g.shape, g.dtype, e.shape, e.dtype)
            if rtol is None:
                np.testing.assert_array_equal(g, e, err_msg=f"{kernels} output {k}")
            else:
                scale = max(float(np.max(np.abs(e))), 1e-30)
                err = float(np.max(np.abs(g.astype(np.float64) - e))) / scale
                assert err <= rtol, f"{kernels} output {k}: relative error {err:.2e}"
    return mod


def op_names(mod):
    return sorted({c.op.name for c in calls(mod["main"])})


def partition_json(capsys, model, tmp_path):
    path = tmp_path / "partition.onnx"
    onnx.save(model, str(path))
    assert main(["partition", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def host_reasons(data):
    return {h["op"]: h["reason"] for h in data["host_ops"]}


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# --- LSTM ----------------------------------------------------------------------------------------

def lstm_model(direction="forward", seq=5, batch=2, size=3, hidden=4, bias=True, initial=True, seq_lens=False,
               outputs=("Y", "Y_h", "Y_c"), **attrs):
    dirs = 2 if direction == "bidirectional" else 1
    inits = {"W": f32(dirs, 4 * hidden, size), "R": f32(dirs, 4 * hidden, hidden)}
    if bias:
        inits["B"] = f32(dirs, 8 * hidden)
    if seq_lens:
        inits["lens"] = np.full(batch, seq, np.int32)
    feeds = {"X": f32(seq, batch, size)}
    if initial:
        feeds.update(h0=f32(dirs, batch, hidden), c0=f32(dirs, batch, hidden))
    inputs = ["X", "W", "R", "B" if bias else "", "lens" if seq_lens else "", "h0" if initial else "",
              "c0" if initial else ""]
    while inputs[-1] == "":
        inputs.pop()
    model = one_node("LSTM", inputs, list(outputs), feeds, inits, hidden_size=hidden, direction=direction, **attrs)
    return model, feeds


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("bias, initial", [(True, True), (False, False), (True, False)],
                         ids=["B+initial", "no-B-no-initial", "B-only"])
def test_lstm_matches_onnxruntime(direction, bias, initial, tmp_path):
    model, feeds = lstm_model(direction, bias=bias, initial=initial)
    mod = check(model, feeds, tmp_path, rtol=1e-5)
    assert op_names(mod) == ["nn.lstm"]


def test_lstm_with_full_length_sequence_lens_clip_and_one_output(tmp_path):
    model, feeds = lstm_model("bidirectional", seq=7, batch=3, size=5, hidden=6, seq_lens=True, clip=0.8,
                              outputs=("", "Y_h"))
    check(model, feeds, tmp_path, rtol=1e-5)


def test_lstm_forms_it_does_not_compute_are_refused_by_name():
    model, _ = lstm_model(layout=1)
    with pytest.raises(UnsupportedAttributeError, match=r"node 'lstm_node' \(LSTM\): attribute layout=1"):
        from_onnx(model)
    model, _ = lstm_model(seq_lens=True)
    model.graph.initializer[-1].CopyFrom(numpy_helper.from_array(np.array([5, 3], np.int32), "lens"))
    with pytest.raises(UnsupportedAttributeError, match=r"sequence_lens \[5, 3\] is not supported: only full-length"):
        from_onnx(model)
    model, _ = lstm_model(activations=["Sigmoid", "Relu", "Tanh"])
    with pytest.raises(UnsupportedAttributeError, match="activations"):
        from_onnx(model)


def test_lstm_stays_on_the_host_and_a_conv_before_it_goes_to_tidl(capsys, tmp_path):
    # Conv -> Relu -> Squeeze (1, 4, 1, 6) -> (4, 6) -> Unsqueeze to (4, 1, 6) -> LSTM over 4 steps
    hidden = 5
    nodes = [helper.make_node("Conv", ["x", "cw"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "shape"], ["seq"], name="to_seq"),
             helper.make_node("LSTM", ["seq", "W", "R", "B"], ["", "h"], name="lstm", hidden_size=hidden)]
    inits = [numpy_helper.from_array(f32(4, 3, 3, 3), "cw"),
             numpy_helper.from_array(np.array([4, 1, 6], np.int64), "shape"),
             numpy_helper.from_array(f32(1, 4 * hidden, 6), "W"), numpy_helper.from_array(f32(1, 4 * hidden, hidden), "R"),
             numpy_helper.from_array(f32(1, 8 * hidden), "B")]
    graph = helper.make_graph(nodes, "conv_lstm", [info("x", TensorProto.FLOAT, [1, 3, 1, 6])],
                              [info("h", TensorProto.FLOAT, [1, 1, hidden])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    feeds = {"x": f32(1, 3, 1, 6)}
    check(model, feeds, tmp_path, rtol=1e-5)
    data = partition_json(capsys, model, tmp_path)
    assert data["totals"]["num_subgraphs"] == 1  # the conv and its relu
    assert host_reasons(data)["nn.lstm"] == f"nn.lstm 'lstm': {LSTM_REASON}"


def test_one_node_lstm_partitions_to_the_host(capsys, tmp_path):
    model, _ = lstm_model()
    data = partition_json(capsys, model, tmp_path)
    assert data["totals"]["num_subgraphs"] == 0
    assert [(h["op"], h["layer"], h["kind"], h["layer_type"]) for h in data["host_ops"]] == \
        [("nn.lstm", "lstm_node", "rule", "LSTM")]
    assert LSTM_REASON in data["host_ops"][0]["reason"]


# --- ConvInteger, MatMulInteger, DynamicQuantizeLinear ------------------------------------------------

def u8(*shape):
    return RNG.integers(0, 256, shape).astype(np.uint8)


def i8(*shape):
    return RNG.integers(-128, 128, shape).astype(np.int8)


CONV_INTEGER_CASES = {
    "u8-u8-scalar-zps-pads": dict(x=u8(1, 3, 7, 6), w=u8(4, 3, 3, 3), xz=np.array(7, np.uint8),
                                  wz=np.array(131, np.uint8), attrs=dict(pads=[1, 1, 1, 1])),
    "strides-dilations-group": dict(x=u8(2, 4, 9, 8), w=u8(6, 2, 3, 2), xz=np.array(128, np.uint8),
                                    wz=np.array(3, np.uint8), attrs=dict(strides=[2, 1], dilations=[1, 2], group=2,
                                                                         pads=[0, 1, 2, 0])),
    "no-zero-points": dict(x=u8(1, 2, 5, 5), w=u8(3, 2, 2, 2), xz=None, wz=None, attrs={}),
    "1-d-same-upper": dict(x=u8(1, 3, 10), w=u8(2, 3, 4), xz=np.array(90, np.uint8), wz=np.array(12, np.uint8),
                           attrs=dict(auto_pad="SAME_UPPER")),
}


@pytest.mark.parametrize("case", list(CONV_INTEGER_CASES))
def test_conv_integer_is_exact(case, tmp_path):
    c = CONV_INTEGER_CASES[case]
    inits = {"w": c["w"]}
    inputs = ["x", "w"]
    if c["xz"] is not None:
        inits.update(xz=c["xz"], wz=c["wz"])
        inputs += ["xz", "wz"]
    model = one_node("ConvInteger", inputs, ["y"], {"x": c["x"]}, inits, **c["attrs"])
    mod = check(model, {"x": c["x"]}, tmp_path)
    assert "nn.conv2d_integer" in op_names(mod)


MATMUL_INTEGER_CASES = {
    "u8-i8-per-column": (u8(3, 5), i8(5, 4), np.array(9, np.uint8), i8(4)),
    "u8-u8-batched": (u8(2, 3, 5), u8(5, 6), np.array(128, np.uint8), np.array(77, np.uint8)),
    "i8-i8-broadcast-batch": (i8(2, 1, 3, 4), i8(3, 4, 2), np.array(-3, np.int8), np.array(5, np.int8)),
    "no-zero-points": (u8(4, 6), u8(6, 3), None, None),
    "vector-times-matrix": (u8(5), i8(5, 3), np.array(1, np.uint8), np.array(2, np.int8)),
}


@pytest.mark.parametrize("case", list(MATMUL_INTEGER_CASES))
def test_matmul_integer_is_exact(case, tmp_path):
    a, b, az, bz = MATMUL_INTEGER_CASES[case]
    inits = {"b": b}
    inputs = ["a", "b"]
    if az is not None:
        inits.update(az=az, bz=bz)
        inputs += ["az", "bz"]
    model = one_node("MatMulInteger", inputs, ["y"], {"a": a}, inits)
    mod = check(model, {"a": a}, tmp_path)
    assert op_names(mod) == ["nn.matmul_integer"]


@pytest.mark.parametrize("data", [
    RNG.standard_normal((3, 7)).astype(np.float32) * 3,
    RNG.uniform(0.1, 5.0, (2, 3, 4)).astype(np.float32),
    -RNG.uniform(0.1, 5.0, (11,)).astype(np.float32),
    np.zeros((2, 2), np.float32),
    np.array([[-1.0, 0.0, 1.0, 254.0 / 255, 0.5]], np.float32),
], ids=["mixed", "positive", "negative", "zeros", "halfway"])
def test_dynamic_quantize_linear_is_exact(data, tmp_path):
    model = one_node("DynamicQuantizeLinear", ["x"], ["y", "y_scale", "y_zero_point"], {"x": data})
    mod = check(model, {"x": data}, tmp_path)
    assert op_names(mod) == ["dynamic_quantize_linear"]


def dynamic_matmul_model():
    """A dynamically quantized linear layer as onnxruntime's quantize_dynamic writes it with
    per-channel weights: DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul by both scales."""
    w_scale = RNG.uniform(0.01, 0.03, 4).astype(np.float32)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"], name="dql"),
             helper.make_node("MatMulInteger", ["xq", "wq", "xz", "wz"], ["acc"], name="mmi"),
             helper.make_node("Cast", ["acc"], ["accf"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["xs", "ws"], ["scale"], name="scale"),
             helper.make_node("Mul", ["accf", "scale"], ["y"], name="rescale")]
    inits = [numpy_helper.from_array(i8(8, 4), "wq"), numpy_helper.from_array(i8(4), "wz"),
             numpy_helper.from_array(w_scale, "ws")]
    graph = helper.make_graph(nodes, "dynamic_matmul", [info("x", TensorProto.FLOAT, [3, 8])],
                              [info("y", TensorProto.FLOAT, [3, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_dynamically_quantized_layer_matches_onnxruntime(tmp_path):
    model = dynamic_matmul_model()
    mod = check(model, {"x": f32(3, 8)}, tmp_path, rtol=1e-6)
    assert {"dynamic_quantize_linear", "nn.matmul_integer"} <= set(op_names(mod))


@pytest.mark.parametrize("op_type", ["ConvInteger", "MatMulInteger", "DynamicQuantizeLinear"])
def test_one_node_dynamic_quantized_op_partitions_to_the_host(op_type, capsys, tmp_path):
    if op_type == "ConvInteger":
        model = one_node(op_type, ["x", "w"], ["y"], {"x": u8(1, 3, 6, 6)}, {"w": u8(4, 3, 3, 3)})
        op = "nn.conv2d_integer"
    elif op_type == "MatMulInteger":
        model = one_node(op_type, ["a", "b"], ["y"], {"a": u8(1, 6)}, {"b": i8(6, 3)})
        op = "nn.matmul_integer"
    else:
        model = one_node(op_type, ["x"], ["y", "s", "z"], {"x": f32(1, 3, 4, 4)})
        op = "dynamic_quantize_linear"
    data = partition_json(capsys, model, tmp_path)
    assert data["totals"]["num_subgraphs"] == 0
    hosted = [h for h in data["host_ops"] if h["op"] == op]
    assert [(h["layer"], h["kind"], h["layer_type"]) for h in hosted] == [(f"{op_type.lower()}_node", "rule", op_type)]
    assert hosted[0]["reason"] == f"{op} '{op_type.lower()}_node': {DYNAMIC_REASON} (import the float model and let " \
                                  f"TIDL calibrate it)"


def test_dynamic_quantized_layer_partition_report(capsys, tmp_path):
    data = partition_json(capsys, dynamic_matmul_model(), tmp_path)
    reasons = host_reasons(data)
    assert DYNAMIC_REASON in reasons["dynamic_quantize_linear"] and DYNAMIC_REASON in reasons["nn.matmul_integer"]


def test_bad_integer_operands_are_refused_by_name():
    model = one_node("MatMulInteger", ["a", "b", "az"], ["y"], {"a": u8(3, 4)}, {"b": i8(4, 2),
                                                                                 "az": np.array(3, np.int8)})
    with pytest.raises(TidlxError, match=r"node 'matmulinteger_node' \(MatMulInteger\).*a_zero_point must have the "
                                         r"dtype of its tensor \(uint8\)"):
        from_onnx(model)
