"""ONNX import behaviour: shape-subgraph folding and batch/shape overrides, layer names, names,
outputs, constants, the IR structure of key ops, and deep graphs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx.emulator
from tidlx.frontends.onnx import from_onnx, load_onnx, supported_ops
from tidlx.ir import Call, Constant, Tuple, TupleGetItem
from tidlx.ir.traversal import post_order

RNG = np.random.default_rng(3)


def reference_session(model):
    """onnxruntime without graph optimizations (its fusions, e.g. of dequantize + matmul, round differently)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def make_model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def tensor(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def calls_of(mod):
    return [n for n in post_order(mod["main"].body) if isinstance(n, Call)]


def op_names(mod):
    return [c.op.name for c in calls_of(mod)]


def run_both(model, feeds, **import_kwargs):
    expected = reference_session(model).run(None, feeds)
    got = tidlx.emulator.run(from_onnx(model, **import_kwargs), feeds)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
    return got


def shape_subgraph_model(opset=17):
    """Conv, then Reshape to [batch, -1] with the batch read by Shape -> Gather -> Unsqueeze -> Concat."""
    # Unsqueeze takes its axes as an attribute before opset 13 and as an input since.
    unsqueeze = (helper.make_node("Unsqueeze", ["n"], ["n1"], name="unsqueeze", axes=[0]) if opset < 13 else
                 helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="unsqueeze"))
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"], name="backbone/conv", pads=[1, 1, 1, 1]),
        helper.make_node("Shape", ["c"], ["c_shape"], name="shape"),
        helper.make_node("Gather", ["c_shape", "zero"], ["n"], name="take_batch", axis=0),
        unsqueeze,
        helper.make_node("Concat", ["n1", "minus_one"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["c", "target"], ["flat"], name="flatten"),
        helper.make_node("Relu", ["flat"], ["y"], name="relu"),
    ]
    inits = [init("W", RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)), init("zero", np.int64(0)),
             init("axes0", np.array([0], np.int64)), init("minus_one", np.array([-1], np.int64))]
    return make_model(nodes, [tensor("x", ["N", 3, 5, 5])], [tensor("y", ["N", "F"])], inits, opset=opset)


# --- shape folding and overrides --------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 17])
def test_batch_override_folds_shape_subgraph(opset):
    model = shape_subgraph_model(opset)
    mod = from_onnx(model, batch=6)
    assert mod["main"].params[0].checked_type.shape == (6, 3, 5, 5)
    assert op_names(mod) == ["nn.conv2d", "reshape", "nn.relu"]  # Shape/Gather/Concat folded away
    reshape = [c for c in calls_of(mod) if c.op.name == "reshape"][0]
    assert tuple(reshape.attrs.newshape) == (6, 100)
    assert mod["main"].body.checked_type.shape == (6, 100)
    run_both(model, {"x": RNG.standard_normal((6, 3, 5, 5)).astype(np.float32)}, batch=6)


def test_shapes_override_follows_into_reshape():
    model = shape_subgraph_model()
    mod = from_onnx(model, shapes={"x": [2, 3, 5, 5]})
    assert mod["main"].body.checked_type.shape == (2, 100)


def test_batch_overrides_a_static_batch_dim():
    model = shape_subgraph_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    assert from_onnx(model)["main"].body.checked_type.shape == (1, 100)
    assert from_onnx(model, batch=6)["main"].body.checked_type.shape == (6, 100)


def test_ops_only_in_shape_computations_need_no_converter():
    # Range and ReduceProd have no converter; computed from shapes they fold to constants.
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("ReduceProd", ["s"], ["count"], name="count", keepdims=0),
        helper.make_node("Range", ["zero", "count", "one"], ["r"], name="range"),
        helper.make_node("Cast", ["r"], ["rf"], name="to_float", to=TensorProto.FLOAT),
        helper.make_node("Reshape", ["rf", "s"], ["ramp"], name="ramp"),
        helper.make_node("Add", ["x", "ramp"], ["y"], name="add"),
    ]
    inits = [init("zero", np.int64(0)), init("one", np.int64(1))]
    model = make_model(nodes, [tensor("x", ["N", 3])], [tensor("y", ["N", 3])], inits)
    mod = from_onnx(model, batch=2)
    assert op_names(mod) == ["add"]
    np.testing.assert_array_equal(mod["main"].body.args[1].data, np.arange(6, dtype=np.float32).reshape(2, 3))
    run_both(model, {"x": np.ones((2, 3), np.float32)}, batch=2)


def test_input_with_initializer_is_constant_unless_overridden():
    nodes = [helper.make_node("Add", ["x", "bias"], ["y"], name="add")]
    model = make_model(nodes, [tensor("x", [2]), tensor("bias", [2])], [tensor("y", [2])],
                       [init("bias", np.array([1, 2], np.float32))])
    mod = from_onnx(model)
    assert [p.name_hint for p in mod["main"].params] == ["x"]
    assert isinstance(mod["main"].body.args[1], Constant)
    mod = from_onnx(model, shapes={"bias": [2]})
    assert [p.name_hint for p in mod["main"].params] == ["x", "bias"]


def test_quantized_weights_are_not_folded():
    nodes = [
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], name="dq_w"),
        helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
    ]
    inits = [init("wq", RNG.integers(-100, 100, (4, 3)).astype(np.int8)), init("ws", np.float32(0.05)),
             init("wz", np.int8(0))]
    model = make_model(nodes, [tensor("x", [2, 4])], [tensor("y", [2, 3])], inits)
    mod = from_onnx(model)
    assert "qnn.dequantize" in op_names(mod)
    run_both(model, {"x": RNG.standard_normal((2, 4)).astype(np.float32)})


# --- names ------------------------------------------------------------------------------------

def test_every_call_carries_its_node_name():
    nodes = [
        helper.make_node("Gemm", ["x", "B", "C"], ["g"], name="head/fc", alpha=0.5, transB=0),
        helper.make_node("HardSwish", ["g"], ["h"], name="head/hswish"),
        helper.make_node("Relu", ["h"], ["r"]),  # unnamed: gets Relu_2
        helper.make_node("BatchNormalization", ["r4", "s", "b", "m", "v"], ["bn"], name="bn"),
        helper.make_node("Reshape", ["r", "shape4"], ["r4"], name="to4d"),
    ]
    inits = [init("B", RNG.standard_normal((6, 4)).astype(np.float32)), init("C", np.zeros(4, np.float32)),
             init("shape4", np.array([2, 4, 1, 1], np.int64))] + [
        init(n, np.ones(4, np.float32)) for n in ("s", "b", "m", "v")]
    model = make_model(nodes, [tensor("x", [2, 6])], [tensor("bn", [2, 4, 1, 1])], inits)
    mod = from_onnx(model)
    layers = {}
    for c in calls_of(mod):
        layers.setdefault(c.layer, []).append(c.op.name)
    assert layers["head/fc"] == ["nn.dense", "nn.bias_add"]  # alpha folded into the constant weight
    assert layers["head/hswish"] == ["multiply", "add", "clip", "multiply"]
    assert layers["Relu_2"] == ["nn.relu"]
    assert layers["to4d"] == ["reshape"]
    assert layers["bn"] == ["nn.batch_norm"]
    assert isinstance(mod["main"].body, TupleGetItem) and mod["main"].body.index == 0


def test_input_names_with_punctuation_are_kept():
    name = "encoder.layer/0:input"
    model = make_model([helper.make_node("Relu", [name], ["out.0"], name="relu")], [tensor(name, [2])],
                       [tensor("out.0", [2])])
    mod = from_onnx(model)
    assert [p.name_hint for p in mod["main"].params] == [name]
    out = tidlx.emulator.run(mod, {name: np.array([-1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(out[0], [0.0, 2.0])


def test_several_outputs_become_a_tuple():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"), helper.make_node("Neg", ["x"], ["b"], name="n")]
    model = make_model(nodes, [tensor("x", [3])], [tensor("a", [3]), tensor("b", [3])])
    mod = from_onnx(model)
    assert isinstance(mod["main"].body, Tuple) and len(mod["main"].body.fields) == 2
    one = make_model(nodes[:1], [tensor("x", [3])], [tensor("a", [3])])
    assert isinstance(from_onnx(one)["main"].body, Call)


# --- structure --------------------------------------------------------------------------------

def test_conv_gemm_qlinearconv_structure():
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv"),
        helper.make_node("Flatten", ["c"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "G", "Gb"], ["y"], name="fc", transB=1),
    ]
    inits = [init("W", RNG.standard_normal((2, 3, 3, 3)).astype(np.float32)), init("B", np.ones(2, np.float32)),
             init("G", RNG.standard_normal((5, 2 * 4 * 4)).astype(np.float32)), init("Gb", np.ones(5, np.float32))]
    model = make_model(nodes, [tensor("x", [1, 3, 6, 6])], [tensor("y", [1, 5])], inits)
    mod = from_onnx(model)
    assert op_names(mod) == ["nn.conv2d", "nn.bias_add", "nn.batch_flatten", "nn.dense", "nn.bias_add"]
    dense = [c for c in calls_of(mod) if c.op.name == "nn.dense"][0]
    assert isinstance(dense.args[1], Constant) and dense.args[1].data.shape == (5, 32)
    run_both(model, {"x": RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)})

    qnodes = [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                               name="qconv")]
    qinits = [init("xs", np.float32(0.1)), init("xz", np.uint8(128)),
              init("w", RNG.integers(-50, 50, (2, 3, 1, 1)).astype(np.int8)), init("ws", np.float32(0.01)),
              init("wz", np.int8(0)), init("ys", np.float32(0.2)), init("yz", np.uint8(128)),
              init("b", np.array([10, -10], np.int32))]
    qmod = from_onnx(make_model(qnodes, [tensor("x", [1, 3, 4, 4], TensorProto.UINT8)],
                                [tensor("y", [1, 2, 4, 4], TensorProto.UINT8)], qinits))
    assert op_names(qmod) == ["qnn.conv2d", "nn.bias_add", "qnn.requantize"]
    assert all(c.layer == "qconv" for c in calls_of(qmod))


def test_nodes_out_of_order_and_load_paths(tmp_path):
    nodes = [helper.make_node("Neg", ["a"], ["y"], name="second"), helper.make_node("Relu", ["x"], ["a"], name="first")]
    model = make_model(nodes, [tensor("x", [2])], [tensor("y", [2])])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    for mod in (from_onnx(model), from_onnx(str(path)), from_onnx(path), from_onnx(model.SerializeToString()),
                load_onnx(str(path))):
        assert op_names(mod) == ["nn.relu", "negative"]


def test_supported_ops_lists_the_required_ones():
    assert {"Conv", "Resize", "QLinearConv", "Constant", "ScatterND", "Upsample"} <= set(supported_ops())


def test_deep_chain_imports_without_recursion():
    depth = 10_000
    nodes = [helper.make_node("Add", [f"t{i}", "one"], [f"t{i + 1}"], name=f"add{i}") for i in range(depth)]
    model = make_model(nodes, [tensor("t0", [1])], [tensor(f"t{depth}", [1])], [init("one", np.ones(1, np.float32))])
    mod = from_onnx(model)
    assert len(calls_of(mod)) == depth
    out = tidlx.emulator.run(mod, {"t0": np.zeros(1, np.float32)})
    assert out[0][0] == depth


def test_constant_node_and_opset_override():
    value = numpy_helper.from_array(np.array([1.5, -2.0], np.float32))
    nodes = [helper.make_node("Constant", [], ["c"], name="const", value=value),
             helper.make_node("Mul", ["x", "c"], ["y"], name="mul")]
    model = make_model(nodes, [tensor("x", [2])], [tensor("y", [2])], opset=13)
    mod = from_onnx(model, opset=17)
    assert op_names(mod) == ["multiply"] and isinstance(mod["main"].body.args[1], Constant)
    run_both(model, {"x": np.array([2.0, 3.0], np.float32)})


LIGHT_MODELS = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


@pytest.mark.parametrize("name", ["resnet50", "inception_v1"])
def test_whole_models_shipped_with_onnx(name):
    """The weight-stripped model-zoo networks onnx ships (opset 9, weights from ConstantOfShape)."""
    model = onnx.load(str(LIGHT_MODELS / f"light_{name}.onnx"))
    mod = from_onnx(model)
    params = mod["main"].params
    assert len(params) == 1, [p.name_hint for p in params]  # every weight became a constant
    x = RNG.uniform(0, 1, params[0].checked_type.shape).astype(np.float32)
    run_both(model, {params[0].name_hint: x})
