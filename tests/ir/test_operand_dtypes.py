"""Operand dtypes of convolutions and matrix products are checked as TVM's relations do:
a float32 input with an int8 weight used to type-check and emulate to zeros."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
from tidlx.frontends.onnx import OnnxImportError, from_onnx
from tidlx.ir import TensorType, TidlxTypeError, Var, call, const


def var(shape, dtype="float32", name="x"):
    return Var(name, TensorType(shape, dtype))


CASES = [
    ("nn.conv2d", (1, 3, 8, 8), (4, 3, 3, 3), {}),
    ("nn.conv2d_transpose", (1, 3, 8, 8), (3, 4, 3, 3), {}),
    ("nn.dense", (2, 8), (4, 8), {}),
    ("nn.matmul", (2, 8), (8, 4), {}),
    ("nn.batch_matmul", (1, 2, 8), (1, 4, 8), {}),
]


@pytest.mark.parametrize("name,dshape,wshape,attrs", CASES, ids=[c[0] for c in CASES])
def test_float_data_with_int_weight_is_refused(name, dshape, wshape, attrs):
    weight = const(np.ones(wshape, np.int8))
    with pytest.raises(TidlxTypeError, match=r"dtype float32 but (weight|tensor_b) has int8"):
        call(name, var(dshape), weight, **attrs).checked_type
    with pytest.raises(TidlxTypeError, match=r"dtype float16 but (weight|tensor_b) has float32"):
        call(name, var(dshape, "float16"), const(np.ones(wshape, np.float32)), **attrs).checked_type


@pytest.mark.parametrize("name,dshape,wshape,attrs", CASES, ids=[c[0] for c in CASES])
def test_same_dtype_and_integer_mixes_are_accepted(name, dshape, wshape, attrs):
    assert call(name, var(dshape), const(np.ones(wshape, np.float32)), **attrs).checked_type.dtype == "float32"
    # uint8 data with int8 weights is what quantized kernels take (accumulating in out_dtype)
    t = call(name, var(dshape, "uint8"), const(np.ones(wshape, np.int8)), out_dtype="int32", **attrs).checked_type
    assert t.dtype == "int32"


def test_int_data_with_float_weight_is_refused():
    with pytest.raises(TidlxTypeError, match="dtype int8 but weight has float32"):
        call("nn.dense", var((2, 8), "int8"), const(np.ones((4, 8), np.float32))).checked_type


@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "less"])
def test_binary_elementwise_needs_one_dtype(name):
    with pytest.raises(TidlxTypeError, match="different dtypes"):
        call(name, var((2, 3)), var((2, 3), "int8", "y")).checked_type


def test_relay_text_conv_with_int8_weight_is_a_type_error():
    text = """#[version = "0.0.5"]
def @main(%data: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), int8]) {
  nn.conv2d(%data, %w, padding=[1, 1, 1, 1])
}
"""
    with pytest.raises(tidlx.ir.TidlxError, match="nn.conv2d.*data has dtype float32 but weight has int8"):
        tidlx.parse_relay(text)


def test_onnx_conv_with_int8_weight_names_the_node():
    w = numpy_helper.from_array(np.ones((2, 3, 3, 3), np.int8), "W")
    nodes = [helper.make_node("Conv", ["x", "W"], ["y"], name="stem/conv")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with pytest.raises(OnnxImportError, match=r"stem/conv.*float32 but weight has int8"):
        from_onnx(model)
