"""TI's documented ONNX operator constraints in the ORT flow (``ort_constraints.py``): for each
constraint of TI's supported-operator table, a small ONNX model on each side of it; a refused
node's reason quotes the constraint."""

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
from tidlx.backends.tidl.ort_flow import attach_onnx_nodes, onnx_nodes
from tidlx.frontends.onnx import from_onnx

X = [1, 8, 16, 16]
N = helper.make_node


def floats(name, value):
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def ints(name, value):
    return numpy_helper.from_array(np.asarray(value, np.int64), name)


def verdict(nodes, shape=X, inits=(), opset=17, surgery=0, name="t"):
    """The ORT-flow verdict of the node named ``name`` after a Relu of the input 'x' (named 'r')."""
    graph = helper.make_graph([N("Relu", ["x"], ["r"], name="pre")] + nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)],
                              initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, report = tidlx.partition(attach_onnx_nodes(from_onnx(model), model),
                                    {"flow": "ort", "model_surgery": surgery})
    (index,) = [n.index for n in onnx_nodes(model) if n.name == name]
    return report.ort.verdicts[index]


def resize(scales, **attrs):
    return [N("Resize", ["r", "", "sc"], ["y"], name="t", **attrs)], [floats("sc", scales)]


def conv(pads, shape):
    return [N("Conv", ["r", "w"], ["y"], name="t", kernel_shape=[3, 3], pads=pads)], \
        [floats("w", np.ones((8, 8, 3, 3)))], shape


def gemm(**attrs):
    w = floats("w", np.ones((10, 8 * 16 * 16)))
    return [N("Flatten", ["r"], ["f"], name="flat"), N("Gemm", ["f", "w"], ["y"], name="t", transB=1, **attrs)], [w]


def slice_(inputs, data_shape=X, axes=(3,)):
    inits = [ints("s", [0] * len(axes)), ints("e", [4] * len(axes)), ints("a", list(axes))]
    return [N("Slice", ["r"] + inputs, ["y"], name="t")], inits[:len(inputs)], data_shape


#: (case, nodes, initializers, input shape, the constraint quoted, or None for a node TIDL takes).
CASES = [
    ("conv pads within the width", *conv([1, 1, 1, 1], X), None),
    # TI's code checks padding beyond the input width on AM62A and AM67A only (target_device, devices.py)
    ("conv pads beyond the width", *conv([0, 4, 0, 4], [1, 8, 8, 3]), None),
    ("gemm default", *gemm(), X, None),
    ("gemm alpha", *gemm(alpha=0.5), X, "Only supported Gemm params are transA = 0, alpha = 1.0 and beta = 1.0"),
    ("gemm beta", [N("Flatten", ["r"], ["f"], name="flat"),
                   N("Gemm", ["f", "w", "b"], ["y"], name="t", transB=1, beta=2.0)],
     [floats("w", np.ones((10, 2048))), floats("b", np.ones(10))], X,
     "Only supported Gemm params are transA = 0, alpha = 1.0 and beta = 1.0"),
    ("sub channel vector", [N("Sub", ["r", "k"], ["y"], name="t")], [floats("k", np.ones((8, 1, 1)))], X, None),
    ("sub width vector", [N("Sub", ["r", "k"], ["y"], name="t")], [floats("k", np.ones(16))], X, None),
    ("sub number", [N("Sub", ["r", "k"], ["y"], name="t")], [floats("k", 2.0)], X, None),
    ("sub plane", [N("Sub", ["r", "k"], ["y"], name="t")], [floats("k", np.ones((16, 16)))], X,
     "Constant tensor in Sub layer must be a number or 1D vector"),
    ("sub height vector", [N("Sub", ["r", "k"], ["y"], name="t")], [floats("k", np.ones((16, 1)))], X,
     "1D vector dimension should match with channel or width dimension"),
    ("slice with axes", *slice_(["s", "e", "a"]), None),
    ("slice without axes", *slice_(["s", "e"], axes=(0, 1, 2, 3)), "Must have 4 inputs into the operator"),
    ("slice of 5-D", *slice_(["s", "e", "a"], [1, 2, 8, 16, 16], axes=(4,)), "(Must be <=4 dimensions)"),
    ("resize nearest asymmetric floor", *resize([1, 1, 2, 2], mode="nearest", coordinate_transformation_mode=
                                                "asymmetric", nearest_mode="floor"), X, None),
    ("resize nearest asymmetric round", *resize([1, 1, 2, 2], mode="nearest", coordinate_transformation_mode=
                                                "asymmetric", nearest_mode="round_prefer_floor"), X,
     "Only 'floor' nearest mode is supported when coordinate_transformation_mode is 'asymmetric'"),
    ("resize nearest half_pixel ceil", *resize([1, 1, 2, 2], mode="nearest", coordinate_transformation_mode=
                                               "half_pixel", nearest_mode="round_prefer_ceil"), X, None),
    ("resize nearest half_pixel default", *resize([1, 1, 2, 2], mode="nearest"), X,
     "Only 'round_prefer_ceil' nearest mode is supported when coordinate_transformation_mode is 'half_pixel'"),
    ("resize nearest align_corners", *resize([1, 1, 2, 2], mode="nearest", coordinate_transformation_mode=
                                             "align_corners", nearest_mode="floor"), X,
     "Only 'half_pixel', 'pytorch_half_pixel' and 'asymmetric' coordinate_transformation_mode is supported"),
    ("resize linear half_pixel", *resize([1, 1, 2, 2], mode="linear"), X, None),
    ("resize linear exclude_outside", *resize([1, 1, 2, 2], mode="linear", exclude_outside=1), X,
     "Only default exclude_outside = 0 is supported"),
    ("reducemax keepdims", [N("ReduceMax", ["r"], ["y"], name="t", axes=[2], keepdims=1)], [], X, None),
    ("reducemax no keepdims", [N("ReduceMax", ["r"], ["y"], name="t", axes=[2], keepdims=0)], [], X,
     "Only keepdims = 1 is supported"),
    ("clip relu6", [N("Clip", ["r", "lo", "hi"], ["y"], name="t")], [floats("lo", 0), floats("hi", 6)], X, None),
    ("clip above zero", [N("Clip", ["r", "lo", "hi"], ["y"], name="t")], [floats("lo", 1), floats("hi", 6)], X,
     "Only min <= 0 and max > 0 is supported"),
    ("clip below zero", [N("Clip", ["r", "lo", "hi"], ["y"], name="t")], [floats("lo", -2), floats("hi", -1)], X,
     "Only min <= 0 and max > 0 is supported"),
    ("gather channels", [N("Gather", ["r", "i"], ["y"], name="t", axis=1)], [ints("i", [0, 2])], X, None),
    ("gather contiguous widths", [N("Gather", ["r", "i"], ["y"], name="t", axis=3)], [ints("i", [2, 3])], X, None),
    ("gather scattered widths", [N("Gather", ["r", "i"], ["y"], name="t", axis=3)], [ints("i", [0, 2])], X,
     "Input shape of dimension higher than axis should be 1"),
    ("reshape", [N("Reshape", ["r", "s"], ["y"], name="t")], [ints("s", [1, 8, 256])], X, None),
    ("reshape allowzero", [N("Reshape", ["r", "s"], ["y"], name="t", allowzero=1)], [ints("s", [1, 8, 256])], X,
     "allowzero is not supported"),
    ("argmax", [N("ArgMax", ["r"], ["y"], name="t", axis=1)], [], X, None),
    ("argmax last index", [N("ArgMax", ["r"], ["y"], name="t", axis=1, select_last_index=1)], [], X,
     "Only select_last_index = 0 (default) is supported"),
    ("squeeze of 3-D", [N("Squeeze", ["r", "a"], ["y"], name="t")], [ints("a", [2])], [1, 8, 1], None),
]


@pytest.mark.parametrize("case,nodes,inits,shape,constraint", CASES, ids=[c[0] for c in CASES])
def test_documented_constraint(case, nodes, inits, shape, constraint):
    v = verdict(nodes, shape, inits)
    if constraint is None:
        assert v.state == "tidl", v.reason
    else:
        assert v.state == "host" and constraint in v.reason and "supported_ops_rts_versions.md" in v.reason


@pytest.mark.parametrize("op,layer", [("Neg", "TIDL_NegLayer"), ("Sqrt", "TIDL_SqrtLayer"),
                                      ("SpaceToDepth", "TIDL_SpaceToDepthLayer")])
def test_a_documented_layer_tidlx_does_not_model_stays_on_the_host_and_says_so(op, layer):
    attrs = {"blocksize": 2} if op == "SpaceToDepth" else {}
    v = verdict([N(op, ["r"], ["y"], name="t", **attrs)])
    assert v.state == "host" and f"runs {op} as {layer}" in v.reason and "no TIDL layer model" in v.reason


def test_the_surgery_hint_stays_after_the_documented_layer():
    v = verdict([N("Neg", ["r"], ["y"], name="t")])
    assert v.reason.endswith("TI model optimizer rule convert_neg_to_mul moves it to TIDL (on by default in the "
                             "ORT flow; model_surgery=1)")
    assert verdict([N("Neg", ["r"], ["y"], name="t")], surgery=1).state == "tidl"


def test_a_refused_layer_takes_its_fused_activation_with_it():
    nodes, inits = gemm(alpha=0.5)
    nodes = nodes + [N("Relu", ["y"], ["z"], name="act")]
    assert verdict(nodes, X, inits).state == "host"
    act = verdict(nodes, X, inits, name="act")
    assert act.state == "host" and "Only supported Gemm params" in act.reason
    nodes, inits = gemm()
    assert verdict(nodes + [N("Relu", ["y"], ["z"], name="act")], X, inits, name="act").state == "tidl"
