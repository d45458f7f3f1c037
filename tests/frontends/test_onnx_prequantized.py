"""strip_qdq: the float model and ranges TIDL's prequantized import reads from a QDQ graph."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tidlx.frontends.onnx.prequantized import PrequantizedModelError, strip_qdq


def _pair(x, s, out, zp=0, dtype=np.int8, nodes=None, inits=None):
    inits += [numpy_helper.from_array(np.array(s, np.float32), f"{x}_s"),
              numpy_helper.from_array(np.array(zp, dtype), f"{x}_zp")]
    nodes += [helper.make_node("QuantizeLinear", [x, f"{x}_s", f"{x}_zp"], [f"{x}_q"], name=f"{x}_Q"),
              helper.make_node("DequantizeLinear", [f"{x}_q", f"{x}_s", f"{x}_zp"], [out], name=f"{x}_DQ")]


def _graph(act_zp=0):
    """x -> Q/DQ -> Conv (weights int8 per channel through DequantizeLinear) -> Relu -> Q/DQ -> MaxPool
    -> Q/DQ -> y."""
    nodes, inits = [], []
    _pair("x", 0.02, "xd", zp=act_zp, nodes=nodes, inits=inits)
    qw = np.arange(-8, 8, dtype=np.int8).reshape(2, 2, 2, 2)
    inits += [numpy_helper.from_array(qw, "w_q"), numpy_helper.from_array(np.array([0.5, 0.25], np.float32), "w_s"),
              numpy_helper.from_array(np.zeros(2, np.int8), "w_zp")]
    nodes += [helper.make_node("DequantizeLinear", ["w_q", "w_s", "w_zp"], ["w"], name="w_DQ", axis=0),
              helper.make_node("Conv", ["xd", "w"], ["c"], name="conv"),
              helper.make_node("Relu", ["c"], ["r"], name="relu")]
    _pair("r", 0.1, "rd", nodes=nodes, inits=inits)
    nodes.append(helper.make_node("MaxPool", ["rd"], ["p"], name="pool", kernel_shape=[2, 2]))
    _pair("p", 0.1, "y", nodes=nodes, inits=inits)
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 3])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def test_pairs_become_ranges_and_weights_float():
    model, ranges = strip_qdq(_graph())
    ops = [n.op_type for n in model.graph.node]
    assert ops == ["Conv", "Relu", "MaxPool"]
    # int8 [-128, 127] x scale; a ReLU's output and the MaxPool of it cannot be negative
    assert ranges["x"] == (np.float32(-128 * np.float32(0.02)), np.float32(127 * np.float32(0.02)))
    assert ranges["r"][0] == 0.0 and ranges["r"][1] == pytest.approx(12.7)
    assert ranges["y"][0] == 0.0 and ranges["y"][1] == pytest.approx(12.7)   # the output keeps its name
    assert [o.name for o in model.graph.output] == ["y"]
    assert model.graph.node[-1].output[0] == "y" and model.graph.node[0].input[0] == "x"
    w = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}["w"]
    expected = np.arange(-8, 8).reshape(2, 2, 2, 2) * np.array([0.5, 0.25]).reshape(2, 1, 1, 1)
    np.testing.assert_array_equal(w, expected.astype(np.float32))
    onnx.checker.check_model(model)


def test_an_activation_zero_point_names_the_node():
    with pytest.raises(PrequantizedModelError, match=r"node 'x_Q' \(QuantizeLinear\): zero point 5 is not 0"):
        strip_qdq(_graph(act_zp=5))


def test_collected_activation_zero_points_are_kept_in_the_range():
    """Given a dict, strip_qdq takes an asymmetric pair: its range holds the zero point, [(-128 - 5) s,
    (127 - 5) s] for int8, and the dict names the pair's node and zero point."""
    zero_points = {}
    _, ranges = strip_qdq(_graph(act_zp=5), zero_points)
    s = np.float32(0.02)
    assert ranges["x"] == (float(np.float32(-133 * s)), float(np.float32(122 * s)))
    assert zero_points == {"x": ("node 'x_Q' (QuantizeLinear)", 5)}
    zero_points = {}
    strip_qdq(_graph(), zero_points)
    assert zero_points == {}
