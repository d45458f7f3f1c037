"""Sizes are checked from types before anything is allocated: a 149 GiB broadcast_to
failed with a raw MemoryError, a 10 GB ConstantOfShape folded at import took 44 s and 20 GB,
dimensions beyond int64 and negative dimensions were accepted."""


import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
from tidlx.frontends.onnx import OnnxImportError, OnnxTensorTooLargeError, from_onnx
from tidlx.ir import TensorTooLargeError, TensorType, TidlxError, TidlxTypeError
from tidlx.ir.types import DEFAULT_MAX_TENSOR_BYTES, MAX_TENSOR_BYTES_ENV, max_tensor_bytes, parse_bytes, tensor_budget

BROADCAST_149G = """#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3), float32]) {
  broadcast_to(%x, shape=[40000, 1000, 1000, 3])
}
"""


def test_a_149_gib_broadcast_is_refused_from_its_type(monkeypatch):
    monkeypatch.delenv(MAX_TENSOR_BYTES_ENV, raising=False)
    with pytest.raises(TidlxError, match=r"broadcast_to: Tensor\[\(40000, 1000, 1000, 3\), float32\] would need "
                                         r"480000000000 bytes \(447.0 GiB\), more than the tensor budget of "
                                         r"4294967296 bytes .*TIDLX_MAX_TENSOR_BYTES="):
        tidlx.parse_relay(BROADCAST_149G)


def test_the_budget_can_be_raised_by_environment_and_in_code(monkeypatch):
    monkeypatch.setenv(MAX_TENSOR_BYTES_ENV, "500G")
    mod = tidlx.parse_relay(BROADCAST_149G)  # typed only: nothing is allocated
    assert mod["main"].body.checked_type.nbytes == 480_000_000_000
    monkeypatch.setenv(MAX_TENSOR_BYTES_ENV, "1M")
    with pytest.raises(TidlxError, match=r"more than the tensor budget of 1048576 bytes \(1.0 MiB\)"):
        tidlx.parse_relay(BROADCAST_149G)
    with tensor_budget("1T"):
        assert max_tensor_bytes() == 2 ** 40
        tidlx.parse_relay(BROADCAST_149G)
    assert max_tensor_bytes() == 2 ** 20


def test_budget_values(monkeypatch):
    monkeypatch.delenv(MAX_TENSOR_BYTES_ENV, raising=False)
    assert max_tensor_bytes() == DEFAULT_MAX_TENSOR_BYTES == 4 * 2 ** 30
    assert parse_bytes("8G") == parse_bytes("8GiB") == 8 * 2 ** 30 and parse_bytes("500MB") == 500 * 10 ** 6
    assert parse_bytes("4294967296") == 2 ** 32
    for bad in ("", "-1", "lots", "0", "nan", "1e99T"):
        with pytest.raises(TidlxError, match="is not a size in bytes"):
            parse_bytes(bad)
    monkeypatch.setenv(MAX_TENSOR_BYTES_ENV, "huge")
    with pytest.raises(TidlxError, match="TIDLX_MAX_TENSOR_BYTES='huge' is not a size"):
        tidlx.parse_relay(BROADCAST_149G)


def test_dimensions_beyond_int64_and_negative_are_refused():
    with pytest.raises(TidlxTypeError, match="beyond int64"):
        TensorType((18446744073709551617,))
    with pytest.raises(TidlxTypeError, match="cannot be negative"):
        TensorType((1, -3, 8, 8))
    text = '#[version = "0.0.5"]\ndef @main(%x: Tensor[(18446744073709551617), float32]) { nn.relu(%x) }\n'
    with pytest.raises(TidlxError, match=r":2:.*dimension 0 of shape \(18446744073709551617\) is .*beyond int64"):
        tidlx.parse_relay(text)
    text = '#[version = "0.0.5"]\ndef @main(%x: Tensor[(1, -3, 8, 8), float32]) { nn.relu(%x) }\n'
    with pytest.raises(TidlxError, match=r":2:26: negative dimension -3"):
        tidlx.parse_relay(text)


def _model(nodes, inits, shape, opset=17):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def test_onnx_constant_of_shape_of_10_gb_is_refused_before_folding(monkeypatch):
    monkeypatch.delenv(MAX_TENSOR_BYTES_ENV, raising=False)
    shape = numpy_helper.from_array(np.array([10, 1000, 1000, 250], np.int64), "s")
    model = _model([helper.make_node("ConstantOfShape", ["s"], ["c"], name="big_const"),
                    helper.make_node("Add", ["x", "c"], ["y"], name="add")], [shape], [1])
    with pytest.raises(OnnxTensorTooLargeError, match=r"node 'big_const' \(ConstantOfShape\) output 'c', evaluated "
                                                      r"at import time: Tensor\[\(10, 1000, 1000, 250\), float32\] "
                                                      r"would need 10000000000 bytes"):
        from_onnx(model)


def test_onnx_expand_names_the_node(monkeypatch):
    monkeypatch.delenv(MAX_TENSOR_BYTES_ENV, raising=False)
    shape = numpy_helper.from_array(np.array([40000, 1000, 1000, 1], np.int64), "s")
    model = _model([helper.make_node("Expand", ["x", "s"], ["y"], name="/head/Expand")], [shape], [1, 3])
    with pytest.raises(OnnxTensorTooLargeError, match=r"node '/head/Expand' \(Expand\): cannot build broadcast_to: "
                                                      r".*480000000000 bytes"):
        from_onnx(model)


def test_onnx_negative_input_dimension_and_huge_batch_are_refused():
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [], [1, -3, 8, 8])
    with pytest.raises(OnnxImportError, match=r"input 'x': dimension 1 is -3 \(shape \[1, -3, 8, 8\]\); dimensions "
                                              r"cannot be negative"):
        from_onnx(model)
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [], ["N", 3])
    with pytest.raises(OnnxImportError, match=r"batch must be a positive int \(at most 9223372036854775807"):
        from_onnx(model, batch=99999999999999999999)
    with pytest.raises(OnnxImportError, match=r"shapes\['x'\] must be a list of non-negative ints"):
        from_onnx(model, shapes={"x": [2 ** 64, 3]})


def test_the_python_api_raises_the_budget_error_naming_the_call(monkeypatch):
    monkeypatch.delenv(MAX_TENSOR_BYTES_ENV, raising=False)
    from tidlx.ir import Var, call

    big = call("broadcast_to", Var("x", TensorType((1, 3))), shape=(40000, 1000, 1000, 3))
    with pytest.raises(TensorTooLargeError, match=r"broadcast_to: Tensor\[\(40000, 1000, 1000, 3\), float32\] would "
                                                  r"need 480000000000 bytes"):
        big.checked_type
