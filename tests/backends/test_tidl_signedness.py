"""§3 signedness by the layer's structure, as TI's import types each output: a weighted layer is signed
unless ReLU, ReLU6 or a Clip at >= 0 follows it, element-wise and concat layers follow their inputs,
pooling and data movement their input; a float input is signed in the ONNX Runtime flow."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tidlx
from tidlx.backends.tidl import numerics as nx
from tidlx.backends.tidl.calibration import calibrate
from tidlx.backends.tidl.flow import resolve_options
from tidlx.backends.tidl.quantize import quantize_model
from tidlx.emulator.fixed.arith import FixedPointError

def _positive_model(tmp_path):
    """Every weight and bias positive, so with inputs >= 0 each calibrated range starts at >= 0: a conv
    without and one with ReLU, a sum of two unsigned tensors and of a signed and an unsigned one, a concat,
    a max pool and two average pools."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    r = np.random.default_rng(5)
    w1, b1, w2 = ((r.random(s) + 0.1).astype(np.float32) for s in ((3, 2, 3, 3), (3,), (3, 2, 3, 3)))
    pool = dict(kernel_shape=[2, 2], strides=[2, 2])
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "W2"], ["conv2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["conv2"], ["conv_relu"], name="conv_relu"),
             helper.make_node("Add", ["conv_relu", "conv_relu"], ["sum_unsigned"], name="sum_unsigned"),
             helper.make_node("Add", ["conv", "conv_relu"], ["sum_mixed"], name="sum_mixed"),
             helper.make_node("Concat", ["conv_relu", "sum_unsigned"], ["concat"], name="concat", axis=1),
             helper.make_node("MaxPool", ["conv_relu"], ["max_pool"], name="max_pool", **pool),
             helper.make_node("AveragePool", ["conv"], ["avg_signed"], name="avg_signed", **pool),
             helper.make_node("AveragePool", ["conv_relu"], ["avg_unsigned"], name="avg_unsigned", **pool)]
    outs = {"conv": [1, 3, 6, 6], "sum_mixed": [1, 3, 6, 6], "concat": [1, 6, 6, 6], "max_pool": [1, 3, 3, 3],
            "avg_signed": [1, 3, 3, 3], "avg_unsigned": [1, 3, 3, 3]}
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outs.items()],
                              [numpy_helper.from_array(a, n) for a, n in ((w1, "W1"), (b1, "B1"), (w2, "W2"))])
    path = tmp_path / "positive.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return tidlx.load(str(path))


def _quantized(mod, flow, frames):
    partitioned, _ = tidlx.partition(mod, {"flow": flow})
    opts = resolve_options({"accuracy_level": 0, "advanced_options:calibration_frames": len(frames),
                            "advanced_options:calibration_iterations": 1})[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = quantize_model(partitioned, opts, calibrate(partitioned, opts, {"x": frames}))
    (sub,) = model.subgraphs.values()
    return sub, model


def _positive_frames(top=3.7):
    frames = np.random.default_rng(4).uniform(0.0, top, (3, 2, 6, 6)).astype(np.float32)
    frames[0, 0, 0, 0], frames[1, 1, 2, 3] = 0.0, top      # the float pass's range is [0, top]
    return frames


def _outputs_by_name(sub, model):
    """{layer name: (its quantized output tensor, its final calibrated range)} of the compute layers."""
    ranges = model.calibration[sub.name].tensors
    return {la.name: (sub.tensors[la.outputs[0]], ranges[la.outputs[0]], la) for la in sub.compute_layers()}


@pytest.mark.parametrize("flow", ["ort", "tvm"])
def test_a_float_input_of_range_0_to_3_7(flow, tmp_path):
    """TI's ONNX Runtime import makes a float input signed whatever its range (TIDL_onnxRtImportInit): a
    [0, 3.7] input is int8 at scale 32 (127 / 3.7 = 34.3, a power of 2 below it); TI's TVM flow types it by
    the calibration data (tidl.py's tensor_quant_flatten): uint8 at scale 64 (255 / 3.7 = 68.9)."""
    sub, model = _quantized(_positive_model(tmp_path), flow, _positive_frames())
    x = sub.tensors[sub.inputs[0]]
    rng = model.calibration[sub.name].tensors[sub.inputs[0]]   # the fixed-point pass's: 3.7 within a step
    assert rng.min == 0.0 and abs(rng.max - 3.7) <= 1 / x.scale
    assert (x.bits, x.signed, x.scale) == ((8, True, 32.0) if flow == "ort" else (8, False, 64.0))


@pytest.mark.parametrize("flow", ["ort", "tvm"])
def test_a_conv_without_relu_is_signed_whatever_its_range(flow, tmp_path):
    """Every output of POSITIVE has a range that starts at >= 0; TI's types follow the layers: the conv
    without ReLU signed, with ReLU unsigned; a sum of two unsigned tensors unsigned, of a signed and an
    unsigned one signed; a concat of unsigned inputs unsigned; pools their input's type."""
    sub, model = _quantized(_positive_model(tmp_path), flow, _positive_frames())
    found = _outputs_by_name(sub, model)
    assert all(rng.min >= 0 for _, rng, _ in found.values())
    signed = {name: t.signed for name, (t, _, _) in found.items()}
    assert signed == {"conv": True, "conv2": False, "sum_unsigned": False, "sum_mixed": True, "concat": False,
                      "max_pool": False, "avg_signed": True, "avg_unsigned": False}
    # the signed conv's roundBits leave one bit for the sign (§6.3 with nb = bits - 1)
    t, rng, layer = found["conv"]
    assert layer.round_bits == nx.round_bits(layer.acc_scale, rng.min, rng.max, 8, True) \
        == nx.round_bits(layer.acc_scale, rng.min, rng.max, 8, False) + 1


CLIPS = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 2, 6, 6), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=3, kernel_size=[3, 3]);
  %1 = nn.relu(%0);
  %2 = clip(%1, a_min=-1f, a_max=5f);
  %3 = nn.max_pool2d(%1, pool_size=[2, 2], strides=[2, 2]);
  %4 = clip(%3, a_min=-1f, a_max=5f);
  (%2, %4)
}
'''


def test_a_clip_layer_below_zero_is_signed():
    """A Clip layer whose min is below 0 gives a signed output even when its input is a ReLU's (TI's clip
    reshape: unsigned only for clipMin >= 0)."""
    r = np.random.default_rng(6)
    params = [(r.standard_normal((3, 2, 3, 3)) * 0.4).astype(np.float32)]
    sub, _ = _quantized(tidlx.parse_relay(CLIPS, params=params), "tvm",
                        r.standard_normal((3, 2, 6, 6)).astype(np.float32))
    clips = [sub.tensors[la.outputs[0]] for la in sub.compute_layers() if la.type == "ReLU"]
    assert clips and all(t.signed for t in clips)


@pytest.mark.parametrize("kind, activation, clip_min, inputs, signed", [
    ("weighted", "none", None, (), True),
    ("weighted", "ReLU", None, (), False),
    ("weighted", "ReLU6", None, (), False),
    ("weighted", "Clip", 0.0, (), False),
    ("weighted", "Clip", -1.0, (), True),
    ("weighted", "PReLU", None, (), True),
    ("merging", "none", None, (False, False), False),
    ("merging", "none", None, (False, True), True),
    ("merging", "ReLU", None, (True, True), False),
    ("merging", "Clip", 0.5, (True,), False),
    ("following", "none", None, (True,), True),
    ("following", "none", None, (False, True), False),
    ("activation", "ReLU", None, (), False),
    ("activation", "Clip", None, (), True),
    ("activation", "Clip", -0.5, (), True),
    ("activation", "Clip", 0.0, (), False),
])
def test_layer_output_is_signed(kind, activation, clip_min, inputs, signed):
    assert nx.layer_output_is_signed(kind, activation, clip_min, inputs) is signed


def test_signedness_rules_refuse_what_they_do_not_know():
    with pytest.raises(FixedPointError):
        nx.layer_output_is_signed("following")
    with pytest.raises(FixedPointError):
        nx.layer_output_is_signed("softmax")
    assert nx.float_input_is_signed("ort", 0.0) and not nx.float_input_is_signed("tvm", 0.0)
    assert nx.float_input_is_signed("tvm", -0.1)
