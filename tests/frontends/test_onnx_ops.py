"""Per-op ONNX import checks: one small model per op form, run by onnxruntime and by tidlx
(``from_onnx`` + the float emulator) on the same random inputs. Weights are initializers, as in
exported models; shape operands (axes, pads, scales, ...) are initializers too. Several ops are
checked at an old (11) and a new (17+) opset, where their attributes moved to inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx.emulator
from tidlx.frontends.onnx import from_onnx

_RNG = np.random.default_rng(7)


def reference_session(model):
    """onnxruntime without graph optimizations (its fusions round differently)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def rnd(*shape, dtype=np.float32, low=-1.0, high=1.0):
    return _RNG.uniform(low, high, size=shape).astype(dtype)


def ints(*values, dtype=np.int64):
    return np.array(values, dtype=dtype)


@dataclass
class Case:
    id: str
    op: str
    inputs: List[str]                      # node inputs in order ('' = absent)
    feeds: Dict[str, np.ndarray]           # runtime inputs
    inits: Dict[str, np.ndarray] = field(default_factory=dict)
    attrs: Dict = field(default_factory=dict)
    opset: int = 17
    outputs: int = 1
    atol: float = 1e-5

    def __post_init__(self):
        self.feeds = {k: np.asarray(v) for k, v in self.feeds.items()}
        self.inits = {k: np.asarray(v) for k, v in self.inits.items()}


def build_model(case: Case) -> onnx.ModelProto:
    outs = [f"y{i}" for i in range(case.outputs)]
    node = helper.make_node(case.op, case.inputs, outs, name=f"{case.op.lower()}_node", **case.attrs)
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for n, a in case.feeds.items()]
    inits = [numpy_helper.from_array(a, n) for n, a in case.inits.items()]
    graph = helper.make_graph([node], case.id, inputs, [helper.make_value_info(o, onnx.TypeProto()) for o in outs],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(model)
    del model.graph.output[:]
    model.graph.output.extend(inferred.graph.output)
    return model


def q(values, dtype):
    return np.array(values, dtype=dtype)


X4 = {"x": rnd(2, 3, 8, 8)}
CASES = [
    # --- convolutions
    Case("conv_pad_stride_bias", "Conv", ["x", "W", "B"], X4, {"W": rnd(4, 3, 3, 3), "B": rnd(4)},
         dict(pads=[1, 1, 1, 1], strides=[2, 2])),
    Case("conv_depthwise_dilated", "Conv", ["x", "W"], X4, {"W": rnd(3, 1, 3, 3)},
         dict(group=3, dilations=[2, 2], pads=[2, 2, 2, 2])),
    Case("conv_same_upper_asym", "Conv", ["x", "W"], {"x": rnd(1, 3, 7, 6)}, {"W": rnd(2, 3, 2, 3)},
         dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    Case("conv_same_lower", "Conv", ["x", "W"], {"x": rnd(1, 3, 7, 6)}, {"W": rnd(2, 3, 2, 2)},
         dict(auto_pad="SAME_LOWER")),
    Case("conv_1d", "Conv", ["x", "W", "B"], {"x": rnd(2, 3, 10)}, {"W": rnd(5, 3, 3), "B": rnd(5)},
         dict(pads=[1, 2], strides=[2])),
    Case("conv_transpose_s2", "ConvTranspose", ["x", "W", "B"], {"x": rnd(1, 4, 5, 5)},
         {"W": rnd(4, 2, 4, 4), "B": rnd(2)}, dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    Case("conv_transpose_output_padding_group", "ConvTranspose", ["x", "W"], {"x": rnd(1, 4, 3, 3)},
         {"W": rnd(4, 1, 3, 3)}, dict(strides=[2, 2], output_padding=[1, 1], group=2)),
    Case("conv_transpose_output_shape", "ConvTranspose", ["x", "W"], {"x": rnd(1, 2, 3, 3)},
         {"W": rnd(2, 3, 3, 3)}, dict(strides=[2, 2], output_shape=[6, 6])),
    # --- normalization, activations
    Case("batch_norm", "BatchNormalization", ["x", "s", "b", "m", "v"], X4,
         {"s": rnd(3), "b": rnd(3), "m": rnd(3), "v": rnd(3, low=0.5, high=2.0)}, dict(epsilon=1e-3)),
    Case("layer_norm_last", "LayerNormalization", ["x", "s", "b"], {"x": rnd(2, 5, 8)}, {"s": rnd(8), "b": rnd(8)},
         dict(axis=-1, epsilon=1e-5)),
    Case("layer_norm_two_axes", "LayerNormalization", ["x", "s"], {"x": rnd(2, 5, 8)}, {"s": rnd(5, 8)},
         dict(axis=1)),
    Case("relu", "Relu", ["x"], X4),
    Case("leaky_relu", "LeakyRelu", ["x"], X4, attrs=dict(alpha=0.2)),
    Case("prelu_channel", "PRelu", ["x", "slope"], X4, {"slope": rnd(3, 1, 1)}),
    Case("prelu_general", "PRelu", ["x", "slope"], X4, {"slope": rnd(8)}),
    Case("sigmoid", "Sigmoid", ["x"], X4),
    Case("tanh", "Tanh", ["x"], X4),
    Case("hard_sigmoid", "HardSigmoid", ["x"], {"x": rnd(2, 10, low=-5, high=5)}, attrs=dict(alpha=0.3, beta=0.4)),
    Case("hard_swish", "HardSwish", ["x"], {"x": rnd(2, 10, low=-5, high=5)}),
    Case("erf", "Erf", ["x"], X4),
    Case("gelu", "Gelu", ["x"], {"x": rnd(3, 7, low=-3, high=3)}, opset=20),
    Case("gelu_tanh", "Gelu", ["x"], {"x": rnd(3, 7, low=-3, high=3)}, attrs=dict(approximate="tanh"), opset=20),
    Case("clip_opset11_inputs", "Clip", ["x", "lo", "hi"], X4, {"lo": np.float32(-0.3), "hi": np.float32(0.5)},
         opset=11),
    Case("clip_opset17_max_only", "Clip", ["x", "", "hi"], X4, {"hi": np.float32(0.25)}),
    Case("clip_runtime_bounds", "Clip", ["x", "lo", "hi"], {"x": rnd(4, 4), "lo": np.float32(-0.2),
                                                           "hi": np.float32(0.3)}),
    Case("softmax_opset11_axis1", "Softmax", ["x"], X4, attrs=dict(axis=1), opset=11),
    Case("softmax_opset13_axis1", "Softmax", ["x"], X4, attrs=dict(axis=1), opset=13),
    Case("softmax_default", "Softmax", ["x"], X4),
    # --- pools
    Case("maxpool_ceil", "MaxPool", ["x"], {"x": rnd(1, 2, 7, 7)}, attrs=dict(kernel_shape=[3, 3], strides=[2, 2],
                                                                         ceil_mode=1)),
    Case("maxpool_same_upper", "MaxPool", ["x"], {"x": rnd(1, 2, 7, 7)},
         attrs=dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
    Case("maxpool_dilated_pads", "MaxPool", ["x"], X4,
         attrs=dict(kernel_shape=[2, 2], dilations=[2, 2], pads=[1, 1, 1, 1])),
    Case("avgpool_count_pad", "AveragePool", ["x"], X4,
         attrs=dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)),
    Case("avgpool_exclude_pad", "AveragePool", ["x"], X4,
         attrs=dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])),
    Case("avgpool_1d", "AveragePool", ["x"], {"x": rnd(1, 3, 9)}, attrs=dict(kernel_shape=[3], strides=[2])),
    Case("global_avg_pool", "GlobalAveragePool", ["x"], X4),
    Case("global_max_pool", "GlobalMaxPool", ["x"], X4),
    # --- dense
    Case("gemm_transB_bias", "Gemm", ["a", "B", "C"], {"a": rnd(3, 6)}, {"B": rnd(4, 6), "C": rnd(4)},
         dict(transB=1)),
    Case("gemm_alpha_beta_transA", "Gemm", ["a", "B", "C"], {"a": rnd(6, 3)}, {"B": rnd(6, 4), "C": rnd(3, 4)},
         dict(transA=1, alpha=0.5, beta=2.0)),
    Case("matmul_2d_const", "MatMul", ["a", "B"], {"a": rnd(3, 6)}, {"B": rnd(6, 5)}),
    Case("matmul_3d_2d", "MatMul", ["a", "B"], {"a": rnd(2, 3, 6)}, {"B": rnd(6, 5)}),
    Case("matmul_batched_broadcast", "MatMul", ["a", "b"], {"a": rnd(2, 1, 3, 4), "b": rnd(3, 4, 5)}),
    Case("matmul_vector", "MatMul", ["a", "b"], {"a": rnd(4), "b": rnd(2, 4, 3)}),
    # --- element-wise
    Case("add_broadcast", "Add", ["x", "c"], X4, {"c": rnd(3, 1, 1)}),
    Case("sub", "Sub", ["x", "y"], {"x": rnd(2, 3), "y": rnd(2, 3)}),
    Case("mul_int", "Mul", ["x", "y"], {"x": ints(1, 2, 3, dtype=np.int32), "y": ints(4, 5, 6, dtype=np.int32)}),
    Case("div", "Div", ["x", "y"], {"x": rnd(2, 3), "y": rnd(2, 3, low=0.5, high=2)}),
    Case("max_three", "Max", ["a", "b", "c"], {"a": rnd(2, 3), "b": rnd(3), "c": rnd(2, 1)}),
    Case("min_two", "Min", ["a", "b"], {"a": rnd(2, 3), "b": rnd(2, 3)}),
    Case("pow_int_exponent", "Pow", ["x", "e"], {"x": rnd(2, 3, low=0.5, high=2)}, {"e": ints(2, dtype=np.int64)}),
    Case("sqrt", "Sqrt", ["x"], {"x": rnd(2, 3, low=0.1, high=4)}),
    Case("exp", "Exp", ["x"], X4),
    Case("log", "Log", ["x"], {"x": rnd(2, 3, low=0.1, high=4)}),
    Case("neg", "Neg", ["x"], X4),
    Case("abs", "Abs", ["x"], X4),
    Case("where", "Where", ["c", "x", "y"], {"c": rnd(2, 3) > 0, "x": rnd(2, 3), "y": rnd(3)}),
    Case("cast_to_int32", "Cast", ["x"], {"x": rnd(2, 3, low=-9, high=9)}, attrs=dict(to=TensorProto.INT32)),
    Case("identity", "Identity", ["x"], X4),
    Case("dropout_inference", "Dropout", ["x"], X4),
    # --- shape ops
    Case("reshape_zero_minus_one", "Reshape", ["x", "s"], X4, {"s": ints(0, -1, 4)}),
    Case("flatten_axis2", "Flatten", ["x"], X4, attrs=dict(axis=2)),
    Case("flatten_default", "Flatten", ["x"], X4),
    Case("transpose", "Transpose", ["x"], X4, attrs=dict(perm=[0, 2, 3, 1])),
    Case("squeeze_opset11_attr", "Squeeze", ["x"], {"x": rnd(1, 3, 1, 4)}, attrs=dict(axes=[0, 2]), opset=11),
    Case("squeeze_opset17_input", "Squeeze", ["x", "axes"], {"x": rnd(1, 3, 1, 4)}, {"axes": ints(-2)}),
    Case("squeeze_all", "Squeeze", ["x"], {"x": rnd(1, 3, 1, 4)}),
    Case("unsqueeze_opset11_attr", "Unsqueeze", ["x"], {"x": rnd(3, 4)}, attrs=dict(axes=[0, 3]), opset=11),
    Case("unsqueeze_opset13_input", "Unsqueeze", ["x", "axes"], {"x": rnd(3, 4)}, {"axes": ints(1, 2)}),
    Case("concat", "Concat", ["a", "b", "c"], {"a": rnd(2, 1, 3), "b": rnd(2, 4, 3)}, {"c": rnd(2, 2, 3)},
         dict(axis=1)),
    Case("split_opset11_attr", "Split", ["x"], {"x": rnd(2, 7)}, attrs=dict(axis=1, split=[2, 5]), opset=11,
         outputs=2),
    Case("split_opset13_input", "Split", ["x", "s"], {"x": rnd(6, 2)}, {"s": ints(1, 2, 3)}, opset=13, outputs=3),
    Case("split_opset18_num_outputs", "Split", ["x"], {"x": rnd(2, 7)}, attrs=dict(axis=1, num_outputs=3),
         opset=18, outputs=3),
    Case("split_equal", "Split", ["x"], {"x": rnd(2, 6)}, attrs=dict(axis=-1), outputs=2),
    Case("slice_opset11_negative", "Slice", ["x", "st", "en", "ax"], X4,
         {"st": ints(-3, 1), "en": ints(1000, -1), "ax": ints(3, 2)}, opset=11),
    Case("slice_opset17_steps", "Slice", ["x", "st", "en", "ax", "sp"], X4,
         {"st": ints(0, -1), "en": ints(8, -1000), "ax": ints(2, 3), "sp": ints(3, -2)}),
    Case("gather_const_negative", "Gather", ["x", "i"], X4, {"i": ints(-1, 0, 2)}, dict(axis=3)),
    Case("gather_runtime_scalar", "Gather", ["x", "i"], {"x": rnd(5, 3), "i": ints(-2)[0]}),
    Case("expand", "Expand", ["x", "s"], {"x": rnd(3, 1)}, {"s": ints(2, 1, 4)}),
    Case("tile", "Tile", ["x", "r"], {"x": rnd(2, 3)}, {"r": ints(2, 3)}),
    Case("depth_to_space_dcr", "DepthToSpace", ["x"], {"x": rnd(1, 8, 2, 3)}, attrs=dict(blocksize=2)),
    Case("depth_to_space_crd", "DepthToSpace", ["x"], {"x": rnd(1, 8, 2, 3)}, attrs=dict(blocksize=2, mode="CRD")),
    Case("space_to_depth", "SpaceToDepth", ["x"], {"x": rnd(1, 2, 4, 6)}, attrs=dict(blocksize=2)),
    Case("scatter_nd", "ScatterND", ["x", "i", "u"], {"x": rnd(4, 3), "u": rnd(2, 3)}, {"i": ints(3, 1).reshape(2, 1)}),
    Case("scatter_nd_add", "ScatterND", ["x", "i", "u"], {"x": rnd(4, 3), "u": rnd(2)},
         {"i": ints(0, 1, 2, 2).reshape(2, 2)}, dict(reduction="add")),
    Case("constant_of_shape", "ConstantOfShape", ["s"], {}, {"s": ints(2, 3)},
         dict(value=numpy_helper.from_array(np.array([7], dtype=np.int32)))),
    # --- pads
    Case("pad_opset11_constant", "Pad", ["x", "p", "v"], X4, {"p": ints(0, 0, 1, 2, 0, 0, 2, 1),
                                                              "v": np.float32(0.5)}, opset=11),
    Case("pad_opset18_axes", "Pad", ["x", "p", "", "ax"], X4, {"p": ints(1, 0, 2, 3), "ax": ints(-1, 2)},
         opset=18),
    Case("pad_reflect", "Pad", ["x", "p"], X4, {"p": ints(0, 0, 2, 1, 0, 0, 1, 2)}, dict(mode="reflect")),
    Case("pad_edge", "Pad", ["x", "p"], X4, {"p": ints(0, 0, 2, 1, 0, 0, 1, 2)}, dict(mode="edge")),
    Case("pad_negative_crop", "Pad", ["x", "p"], X4, {"p": ints(0, 0, -1, 2, 0, 0, 1, -2)}),
    Case("pad_wrap", "Pad", ["x", "p"], X4, {"p": ints(0, 0, 2, 1, 0, 0, 1, 3)}, dict(mode="wrap"), opset=19),
    # --- resize
    Case("resize_opset11_nearest_scales", "Resize", ["x", "roi", "sc"], {"x": rnd(1, 2, 3, 4)},
         {"roi": np.zeros(0, np.float32), "sc": np.array([1, 1, 2, 2], np.float32)}, opset=11),
    Case("resize_opset11_linear_align_corners", "Resize", ["x", "roi", "sc", "sz"], {"x": rnd(1, 2, 3, 4)},
         {"roi": np.zeros(0, np.float32), "sc": np.zeros(0, np.float32), "sz": ints(1, 2, 5, 7)},
         dict(mode="linear", coordinate_transformation_mode="align_corners"), opset=11),
    Case("resize_opset18_linear_half_pixel", "Resize", ["x", "", "sc"], {"x": rnd(1, 2, 3, 4)},
         {"sc": np.array([1, 1, 2, 2], np.float32)}, dict(mode="linear"), opset=18),
    Case("resize_opset19_cubic_sizes_axes", "Resize", ["x", "", "", "sz"], {"x": rnd(1, 2, 4, 4)},
         {"sz": ints(8, 6)}, dict(mode="cubic", axes=[2, 3]), opset=19),
    Case("resize_nearest_ceil_asymmetric", "Resize", ["x", "", "sc"], {"x": rnd(1, 1, 3, 3)},
         {"sc": np.array([1, 1, 3, 2], np.float32)},
         dict(coordinate_transformation_mode="asymmetric", nearest_mode="ceil")),
    Case("upsample_opset9_nearest", "Upsample", ["x", "sc"], {"x": rnd(1, 2, 3, 3)},
         {"sc": np.array([1, 1, 2, 3], np.float32)}, opset=9),
    # --- reductions
    Case("reduce_mean_opset11_attr", "ReduceMean", ["x"], X4, attrs=dict(axes=[2, 3]), opset=11),
    Case("reduce_mean_opset18_input", "ReduceMean", ["x", "ax"], X4, {"ax": ints(-1)}, dict(keepdims=0), opset=18),
    Case("reduce_sum_opset13_input", "ReduceSum", ["x", "ax"], X4, {"ax": ints(1)}, opset=13),
    Case("reduce_sum_all", "ReduceSum", ["x"], X4, attrs=dict(keepdims=0)),
    Case("reduce_max", "ReduceMax", ["x"], X4, attrs=dict(axes=[1]), opset=13),
    Case("reduce_min", "ReduceMin", ["x", "ax"], X4, {"ax": ints(0, 2)}, opset=18),
    Case("argmax", "ArgMax", ["x"], X4, attrs=dict(axis=1, keepdims=0)),
    Case("argmax_last_index", "ArgMax", ["x"], {"x": ints(1, 3, 3, 2, dtype=np.float32).reshape(1, 4)},
         attrs=dict(axis=-1, select_last_index=1)),
    # --- beyond the required set
    Case("lrn", "LRN", ["x"], X4, attrs=dict(size=3, alpha=1e-3, beta=0.75, bias=2.0)),
    Case("instance_norm", "InstanceNormalization", ["x", "s", "b"], X4, {"s": rnd(3), "b": rnd(3)}),
    Case("log_softmax", "LogSoftmax", ["x"], X4, attrs=dict(axis=1)),
    Case("reciprocal", "Reciprocal", ["x"], {"x": rnd(2, 3, low=0.5, high=2)}),
    Case("floor", "Floor", ["x"], X4),
    Case("equal_int", "Equal", ["a", "b"], {"a": ints(1, 2, 3), "b": ints(1, 0, 3)}),
    Case("sum_three", "Sum", ["a", "b", "c"], {"a": rnd(2, 3), "b": rnd(3), "c": rnd(2, 3)}),
    Case("mean_two", "Mean", ["a", "b"], {"a": rnd(2, 3), "b": rnd(2, 3)}),
    Case("reduce_prod", "ReduceProd", ["x"], X4, attrs=dict(axes=[3]), opset=13),
    Case("argmin", "ArgMin", ["x"], X4, attrs=dict(axis=2)),
    Case("cast_like", "CastLike", ["x", "t"], {"x": rnd(2, 3, low=-9, high=9), "t": ints(1, dtype=np.int32)}),
    # --- quantization
    Case("quantize_uint8", "QuantizeLinear", ["x", "s", "z"], X4, {"s": np.float32(0.02), "z": np.uint8(128)},
         atol=1),
    Case("quantize_per_channel_int8", "QuantizeLinear", ["x", "s", "z"], X4,
         {"s": np.array([0.01, 0.02, 0.03], np.float32), "z": np.array([0, 1, -1], np.int8)}, dict(axis=1), atol=1),
    Case("dequantize_per_channel", "DequantizeLinear", ["x", "s", "z"],
         {"x": _RNG.integers(-128, 127, size=(2, 3, 4)).astype(np.int8)},
         {"s": np.array([0.1, 0.2, 0.3], np.float32), "z": np.array([1, 0, -2], np.int8)}, dict(axis=1)),
    Case("qlinear_conv", "QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
         {"x": _RNG.integers(0, 255, size=(1, 3, 6, 6)).astype(np.uint8)},
         {"xs": np.float32(0.02), "xz": np.uint8(120), "w": _RNG.integers(-60, 60, size=(4, 3, 3, 3)).astype(np.int8),
          "ws": np.array([0.01, 0.02, 0.015, 0.03], np.float32), "wz": np.zeros(4, np.int8), "ys": np.float32(0.1),
          "yz": np.uint8(100), "b": _RNG.integers(-500, 500, size=4).astype(np.int32)}, dict(pads=[1, 1, 1, 1]),
         atol=1),
    Case("qlinear_matmul_2d", "QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
         {"a": _RNG.integers(0, 255, size=(3, 8)).astype(np.uint8)},
         {"as": np.float32(0.05), "az": np.uint8(128), "b": _RNG.integers(0, 255, size=(8, 5)).astype(np.uint8),
          "bs": np.float32(0.02), "bz": np.uint8(120), "ys": np.float32(0.2), "yz": np.uint8(110)}, atol=1),
    Case("qlinear_matmul_batched", "QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
         {"a": _RNG.integers(0, 255, size=(2, 3, 8)).astype(np.uint8),
          "b": _RNG.integers(0, 255, size=(2, 8, 5)).astype(np.uint8)},
         {"as": np.float32(0.05), "az": np.uint8(128), "bs": np.float32(0.02), "bz": np.uint8(120),
          "ys": np.float32(0.2), "yz": np.uint8(110)}, atol=1),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_op_matches_onnxruntime(case: Case):
    model = build_model(case)
    session = reference_session(model)
    expected = session.run(None, dict(case.feeds))
    mod = from_onnx(model)
    got = tidlx.emulator.run(mod, dict(case.feeds))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        assert g.shape == e.shape, (g.shape, e.shape)
        if np.issubdtype(e.dtype, np.floating):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=case.atol)
        else:
            np.testing.assert_allclose(g.astype(np.int64), e.astype(np.int64), rtol=0, atol=case.atol)


def test_cases_cover_the_required_ops():
    required = {
        "Conv", "ConvTranspose", "BatchNormalization", "Relu", "LeakyRelu", "PRelu", "Clip", "Sigmoid", "Tanh",
        "HardSigmoid", "HardSwish", "Erf", "Gelu", "Softmax", "MaxPool", "AveragePool", "GlobalAveragePool",
        "GlobalMaxPool", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Sqrt", "Exp", "Log",
        "Neg", "Abs", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice",
        "Gather", "Resize", "Upsample", "Pad", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ArgMax",
        "Cast", "Identity", "Dropout", "ConstantOfShape", "Expand", "Tile", "DepthToSpace", "SpaceToDepth",
        "LayerNormalization", "ScatterND", "Where", "QuantizeLinear", "DequantizeLinear", "QLinearConv",
        "QLinearMatMul",
    }
    assert required <= {c.op for c in CASES}
