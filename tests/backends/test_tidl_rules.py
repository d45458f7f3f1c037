"""TIDL support rules, the batch limit, composite groups and host reasons."""

import warnings

import numpy as np
import pytest

import tidlx.ir as ir
from tidlx.backends.tidl import (HostReason, RuleContext, TidlOptions, check_call, explain, explain_function,
                                 find_composites, layer_type, rule_info, supported_ops)
from tidlx.backends.tidl.options import BATCH_ENV_VAR, OptionError
from tidlx.ir import TensorType, Var, const
from tidlx.ir.errors import TidlxWarning
from tidlx.ir.expr import Function, Tuple, TupleGetItem


def var(name, shape, dtype="float32"):
    return Var(name, TensorType(shape, dtype))


def ones(*shape):
    return const(np.ones(shape, "float32"))


def values(*shape):
    return const(np.arange(1, int(np.prod(shape)) + 1, dtype="float32").reshape(shape))


def check(call, ctx=None):
    return check_call(call, ctx or RuleContext.for_expr(call))


X4 = (1, 16, 32, 32)


def conv(x=None, kernel=3, stride=1, groups=1, out_channels=16, in_channels=16, layer="conv1", **attrs):
    x = var("x", (1, in_channels, 32, 32)) if x is None else x
    w = ones(out_channels, in_channels // groups, kernel, kernel)
    return ir.call("nn.conv2d", x, w, strides=(stride, stride), groups=groups, padding=(kernel // 2,) * 2,
                   layer=layer, **attrs)


# -- accepted forms: at least one per ruled op ----------------------------------------------------

def accepted_cases():
    x = var("x", X4)
    x2 = var("x2", X4)
    flat = var("f", (1, 64))
    cases = [
        conv(kernel=1), conv(kernel=3), conv(kernel=3, stride=2), conv(kernel=7, stride=2),
        conv(kernel=11, stride=4), conv(kernel=9, stride=1),
        conv(kernel=3, groups=16), conv(kernel=3, stride=2, groups=16), conv(kernel=5, stride=2, groups=16),
        conv(kernel=7, groups=16), conv(kernel=7, stride=2, groups=16), conv(kernel=3, dilation=(2, 2)),
        ir.call("nn.conv2d_transpose", x, ones(16, 8, 2, 2), strides=(2, 2)),
        ir.call("nn.conv2d_transpose", x, ones(16, 8, 4, 4), strides=(2, 2), padding=(1, 1)),
        ir.call("nn.dense", flat, ones(10, 64)),
        ir.call("nn.dense", var("a", (1, 8, 64)), var("b", (10, 64))),
        ir.call("nn.matmul", flat, ones(64, 10)),
        ir.call("nn.batch_matmul", var("a", (1, 8, 16)), var("b", (1, 4, 16))),
        ir.call("nn.bias_add", x, ones(16)),
        ir.call("nn.max_pool2d", x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1)),
        ir.call("nn.max_pool2d", x, pool_size=(2, 2), strides=(2, 2)),
        ir.call("nn.avg_pool2d", x, pool_size=(1, 1)),
        ir.call("nn.global_avg_pool2d", x), ir.call("nn.adaptive_avg_pool2d", x, output_size=(1, 1)),
        ir.call("nn.upsampling", x, scale_h=2.0, scale_w=2.0),
        ir.call("nn.upsampling", x, scale_h=4.0, scale_w=4.0),
        ir.call("add", x, x2), ir.call("add", x, values(16, 1, 1)), ir.call("multiply", x, const(2.0)),
        ir.call("add", x, var("row", (1, 1, 1, 32))), ir.call("divide", x, values(16, 1, 1)),
        ir.call("subtract", x, values(16, 1, 1)), ir.call("subtract", const(1.0), x),
        ir.call("maximum", x, const(-4.0)), ir.call("minimum", const(4.0), x),
        ir.call("nn.relu", x), ir.call("nn.leaky_relu", x, alpha=0.1), ir.call("sigmoid", x), ir.call("tanh", x),
        ir.call("clip", x, a_min=0.0, a_max=6.0), ir.call("nn.prelu", x, ones(16)),
        ir.call("cast", var("img", X4, "uint8"), dtype="float32"),
        TupleGetItem(ir.call("nn.batch_norm", x, ones(16), ones(16), ones(16), ones(16)), 0).tuple_value,
        ir.call("nn.layer_norm", x, ones(32), ones(32), axis=-1),
        ir.call("nn.softmax", x, axis=-1), ir.call("nn.softmax", x, axis=2), ir.call("nn.softmax", flat, axis=1),
        ir.call("concatenate", Tuple([x, x2]), axis=1), ir.call("concatenate", Tuple([x, x2]), axis=-1),
        ir.call("image.resize2d", x, size=(64, 64), method="nearest_neighbor"),
        ir.call("image.resize2d", x, size=(128, 128), method="linear"),
        ir.call("image.resize2d", x, size=(32, 32), method="linear"),
        ir.call("strided_slice", x, begin=(0, 0), end=(1, 8), strides=(1, 1)),
        ir.call("split", x, indices_or_sections=2, axis=1),
        ir.call("max", x, axis=(2,), keepdims=True), ir.call("min", x, axis=(-2,)),
        ir.call("argmax", x, axis=(1,), keepdims=True),
        ir.call("take", x, const(np.array([0, 2], "int32")), axis=1),
        ir.call("nn.pad", x, const(0.0), pad_width=((0, 0), (0, 0), (1, 1), (2, 2))),
        ir.call("nn.depth_to_space", x, block_size=2),
        ir.call("transpose", x, axes=(0, 2, 3, 1)),
        ir.call("nn.batch_flatten", x),
        ir.call("reshape", x, newshape=(1, 16, 1024)),
        ir.call("squeeze", var("s", (1, 16, 1, 32)), axis=(2,)),
        ir.call("expand_dims", var("e", (1, 16, 32)), axis=2),
        # BEVDet's voxel pooling as TI exports it: variable data, one index per point, rank-2 updates
        ir.call("scatter_nd", var("bev", (17, 8)), var("idx", (1, 40), "int64"), var("feat", (40, 8)), mode="add"),
        ir.call("scatter_nd", const(np.zeros((1, 4, 6), "float32")), var("i3", (3, 5), "int64"), var("u", (5,)),
                mode="max"),
        ir.call("topk", var("heat", (1, 10, 64)), k=5, dtype="int64"),
        ir.call("topk", x, k=4, axis=2),
    ]
    return cases


def test_accepted_forms_pass_and_cover_every_rule():
    covered = set()
    for call in accepted_cases():
        assert check(call) is None, (call.op_name, check(call))
        covered.add(call.op_name)
    rules = set(supported_ops())
    assert rules <= covered, f"ops with a rule but no accepted case: {sorted(rules - covered)}"


# -- rejected forms: each constraint with its reason -------------------------------------------

def rejected_cases():
    x = var("x", X4)
    x2 = var("x2", X4)
    flat = var("f", (1, 64))
    return [
        (conv(kernel=5, groups=16, layer="backbone.layer1.0.conv1"),
         "nn.conv2d 'backbone.layer1.0.conv1': depthwise 5x5 stride 1 is not supported "
         "(depthwise: 3x3 s1/s2, 5x5 s2, 7x7 s1/s2)"),
        (conv(kernel=3, stride=3, groups=16), "depthwise 3x3 stride 3 is not supported"),
        (ir.call("nn.conv2d", x, ones(16, 16, 3, 3), strides=(1, 2), layer="c"),
         "nn.conv2d 'c': strides 1x2 are not supported (TIDL needs the same stride in H and W)"),
        (conv(kernel=3, stride=4), "stride 4 with a 3x3 kernel is not supported (stride 4 only with an 11x11"),
        (conv(kernel=9, stride=2), "kernel 9x9 with stride 2 is not supported"),
        (conv(kernel=3, stride=3), "stride 3 is not supported"),
        (conv(kernel=3, stride=2, dilation=(2, 2)), "dilation 2x2 with stride 2 is not supported"),
        (ir.call("nn.conv2d", var("n", (1, 32, 32, 16)), ones(3, 3, 16, 16), data_layout="NHWC",
                 kernel_layout="HWIO"), "layout data=NHWC, kernel=HWIO, out=NHWC is not supported"),
        (ir.call("nn.conv2d", x, var("w", (16, 16, 3, 3))), "the weight is not a constant"),
        (ir.call("nn.conv2d_transpose", x, ones(16, 8, 3, 3), strides=(2, 2)),
         "kernel 3x3 is not supported (transposed convolutions: 2x2 or 4x4 kernels, stride 2)"),
        (ir.call("nn.conv2d_transpose", x, ones(16, 8, 2, 2)), "stride 1x1 is not supported"),
        (ir.call("nn.conv2d_transpose", x, ones(16, 4, 2, 2), strides=(2, 2), groups=2),
         "groups=2 is not supported"),
        (ir.call("nn.dense", var("d", (2, 3, 4, 64)), ones(10, 64)),
         "input of shape (2, 3, 4, 64) is not supported (inner products take up to 3-D inputs"),
        (ir.call("nn.dense", ir.call("transpose", var("a", (64, 1)), axes=(1, 0), layer="gemm"), ones(10, 64),
                 layer="gemm"), "nn.dense 'gemm': Gemm with transA=1 is not supported"),
        (ir.call("nn.dense", ir.call("multiply", flat, const(2.0), layer="g"), var("b", (10, 64)), layer="g"),
         "Gemm with alpha != 1 and a variable B is not supported"),
        (ir.call("nn.batch_matmul", var("a", (1, 8, 16)), var("b", (4, 4, 16))),
         "variable inputs with batches 1 and 4 broadcast over the batch"),
        (ir.call("nn.bias_add", x, ones(32), axis=3), "along axis 3 (width) is not supported"),
        (ir.call("nn.bias_add", x, var("b", (16,))), "the bias is not a constant"),
        (ir.call("nn.max_pool2d", x, pool_size=(5, 5)), "pool size 5x5 is not supported"),
        (ir.call("nn.avg_pool2d", x, pool_size=(3, 2)), "pool size 3x2 is not supported"),
        (ir.call("nn.max_pool2d", x, pool_size=(3, 3), strides=(3, 3)), "stride 3x3 is not supported"),
        (ir.call("nn.max_pool2d", x, pool_size=(2, 2), dilation=(2, 2)), "dilation 2x2 is not supported"),
        (ir.call("nn.max_pool2d", var("n", (1, 32, 32, 16)), pool_size=(2, 2), layout="NHWC"),
         "layout NHWC is not supported"),
        (ir.call("nn.global_avg_pool2d", var("g", (1, 8, 33, 32))),
         "a 33x32 plane (1056 values) is too large (global average pools: H*W <= 1024)"),
        (ir.call("nn.adaptive_avg_pool2d", x, output_size=(2, 2)), "output size 2x2 is not supported"),
        (ir.call("nn.adaptive_avg_pool2d", var("g", (1, 8, 64, 32)), output_size=(1, 1)),
         "a 64x32 plane (2048 values) is too large"),
        (ir.call("nn.upsampling", x, scale_h=2.0, scale_w=1.0), "scales 2x1 differ"),
        (ir.call("nn.upsampling", x, scale_h=3.0, scale_w=3.0), "scale 3 is not a power of 2"),
        (ir.call("nn.upsampling", x, scale_h=0.5, scale_w=0.5), "scales 0.5x0.5 downscale"),
        (ir.call("nn.upsampling", x, scale_h=2.0, scale_w=2.0, method="bicubic"), "method=bicubic is not supported"),
        (ir.call("nn.upsampling", x, scale_h=4.0, scale_w=4.0, method="bilinear"),
         "bilinear upsampling samples at pixel corners (align_corners) or asymmetric coordinates"),
        (ir.call("add", var("a", (6, 16, 8, 8)), var("b", (1, 16, 8, 8))),
         "input 1 of shape (1, 16, 8, 8) broadcasts over the batch (6)"),
        (ir.call("multiply", var("a", (6, 16, 8, 8)), var("b", (16, 8, 8))), "broadcasts over the batch (6)"),
        (ir.call("add", ones(4), ones(4)), "both inputs are constants"),
        (ir.call("add", ir.call("nn.dense", flat, ones(10, 64), layer="fc"), ones(3, 10), layer="fc"),
         "add 'fc': Gemm bias of shape (3, 10) is not supported (TIDL inner products take a bias of shape [N] = "
         "[10])"),
        (ir.call("add", ir.call("nn.dense", flat, ones(10, 64), layer="fc"), var("c", (1, 10)), layer="fc"),
         "Gemm with a variable C input is not supported"),
        (ir.call("subtract", x, x2, layer="sub"),
         "subtract 'sub': subtracting two variable tensors is not supported"),
        (ir.call("divide", x, x2, layer="div"),
         "divide 'div': dividing two variable tensors is not supported (TIDL has no element-wise divide layer"),
        (ir.call("divide", const(1.0), x), "dividing a constant by a tensor is not supported"),
        (ir.call("maximum", x, x2), "two variable inputs are not supported (only a single constant value"),
        (ir.call("minimum", x, values(16, 1, 1)), "a constant of shape (16, 1, 1) is not supported"),
        (ir.call("nn.prelu", x, var("alpha", (16,))), "a variable slope is not supported"),
        (ir.call("nn.prelu", x, ones(32), axis=3), "a slope along axis 3 (width) is not supported"),
        (ir.call("nn.batch_norm", x, var("g", (16,)), ones(16), ones(16), ones(16)), "gamma is not a constant"),
        (ir.call("nn.batch_norm", x, ones(32), ones(32), ones(32), ones(32), axis=3),
         "normalizing along axis 3 (width) is not supported (BatchNorm is per channel"),
        (ir.call("nn.layer_norm", x, ones(16), ones(16), axis=1),
         "normalizing along axis 1 (channel) is not supported (LayerNormalization: width axis only"),
        (ir.call("nn.softmax", var("depth", (6, 59, 16, 44)), axis=1, layer="depth_softmax"),
         "nn.softmax 'depth_softmax': softmax along axis 1 (channel) of shape (6, 59, 16, 44) is not supported "
         "(TIDL: width or height axis only"),
        (ir.call("nn.softmax", var("five", (1, 2, 3, 4, 5)), axis=1), "softmax along axis 1 (D2)"),
        (ir.call("concatenate", Tuple([x, x2]), axis=0), "concatenating along the batch axis is not supported"),
        (ir.call("concatenate", Tuple([var("a", (1, 2, 3, 4, 5)), var("b", (1, 2, 3, 4, 5))]), axis=1),
         "concatenating along axis 1 (D2) is not supported (Concat: axis -3, -2 or -1)"),
        (ir.call("image.resize2d", x, size=(64, 64), method="cubic"), "method=cubic is not supported"),
        (ir.call("image.resize2d", x, size=(64, 64), method="linear", coordinate_transformation_mode="align_corners"),
         "bilinear resize with coordinate_transformation_mode=align_corners is not supported"),
        (ir.call("image.resize2d", x, size=(16, 16)), "scales 0.5x0.5 (height x width, 32x32 -> 16x16) downscale"),
        (ir.call("image.resize2d", x, size=(64, 128)), "scales 2x4 (height x width, 32x32 -> 64x128) differ"),
        (ir.call("image.resize2d", x, size=(96, 96)), "scale 3x3 (height x width, 32x32 -> 96x96) is not a power"),
        (ir.call("image.resize2d", x, size=(48, 48)), "is not a power of 2"),
        (ir.call("strided_slice", var("b6", (6, 16, 8, 8)), begin=(0, 0), end=(6, 8)),
         "input batch 6 is not supported (Slice needs batch 1)"),
        (ir.call("strided_slice", x, begin=(0, 0), end=(1, 16), strides=(1, 2)),
         "stride 2 on axis 1 (channel) is not supported (Slice: stride 1)"),
        (ir.call("split", var("b2", (2, 16, 8, 8)), indices_or_sections=2, axis=1), "input batch 2"),
        (ir.call("split", var("r2", (1, 16)), indices_or_sections=1, axis=0),
         "splitting along the batch axis is not supported"),
        (ir.call("max", x, axis=(1,)), "reducing over axes 1 (C) is not supported (ReduceMax/ReduceMin: height"),
        (ir.call("min", x), "reducing over axes 0 (N), 1 (C), 2 (H), 3 (W) is not supported"),
        (ir.call("argmax", x, axis=(3,), keepdims=True), "argmax over axes 3 (W) is not supported"),
        (ir.call("argmax", x, axis=(1,), keepdims=False), "keepdims=False is not supported (ArgMax: keepdims=1)"),
        (ir.call("take", x, const(np.zeros((2, 2), "int32")), axis=1), "indices of shape (2, 2) are not supported"),
        (ir.call("take", x, const(np.array([1], "int32"))), "no axis"),
        (ir.call("take", ones(10, 4), ir.call("cast", var("i", (3,), "int32"), dtype="int32"), axis=0),
         "gathering from constant data is not supported"),
        (ir.call("nn.pad", x, const(0.0), pad_width=((0, 0), (1, 1), (0, 0), (0, 0))),
         "padding axis 1 (channel) by [1, 1] is not supported (Pad: height and width only)"),
        (ir.call("nn.pad", x, const(0.0), pad_width=((0, 0), (0, 0), (1, 1), (1, 1)), pad_mode="reflect"),
         "pad_mode=reflect is not supported"),
        (ir.call("nn.pad", x, const(1.0), pad_width=((0, 0), (0, 0), (1, 1), (1, 1))),
         "pad value 1.0 is not supported"),
        (ir.call("nn.depth_to_space", var("d", (1, 18, 4, 4)), block_size=3), "block_size=3 is not supported"),
        (ir.call("transpose", x, axes=(1, 0, 2, 3)), "axes=[1, 0, 2, 3] moves the batch axis"),
        (ir.call("nn.batch_flatten", var("b2", (2, 16, 4, 4))), "batch 2 is not supported (Flatten needs N=1)"),
        # TI's ScatterElements constraints for ScatterND
        (ir.call("scatter_nd", var("bev", (17, 8)), var("idx", (1, 40), "int64"), var("feat", (40, 8)), mode="mul"),
         "reduction 'mul' is not supported (ScatterND: none, add, max or min"),
        (ir.call("scatter_nd", var("d5", (2, 2, 3, 4, 5)), var("i5", (5, 7), "int64"), var("u5", (7,)), mode="add"),
         "has 5 non-singleton dims (ScatterND: at most 4)"),
        (ir.call("scatter_nd", var("d3", (1, 4, 6)), var("i3", (1, 5), "int64"), var("u3", (5, 4, 6)), mode="add"),
         "updates (5, 4, 6) have 5 channels (axis -3) with reduction 'add'"),
        (ir.call("scatter_nd", var("d3", (1, 4, 6)), var("i3", (1, 5), "int64"), var("u3", (5, 4, 6)), mode="update"),
         "writes a slice of rank 2 (ScatterND: indices' last dimension at least rank - 1 = 2"),
        (ir.call("scatter_nd", ones(4, 6), var("i2", (2, 5), "int64"), var("u2", (5,)), mode="add"),
         "constant data with non-zero values and reduction 'add'"),
        # TI's TopK constraints
        (ir.call("topk", var("heat", (1, 10, 64)), k=5, sorted=False), "sorted=0 is not supported (TopK"),
        (ir.call("topk", x, k=4, axis=1), "TopK along axis 1 (channel) is not supported (TopK: width or height"),
    ]


@pytest.mark.parametrize("call, expected", rejected_cases(),
                         ids=lambda v: v.op_name if isinstance(v, ir.Call) else None)
def test_rejected_forms_give_the_reason(call, expected):
    reason = check(call)
    assert reason is not None, f"{call.op_name} was accepted"
    assert expected in reason, reason
    assert reason.startswith(call.op_name), reason


def test_reason_names_the_layer_and_default_without_layer():
    c = conv(kernel=5, groups=16, layer=None)
    assert check(c).startswith("nn.conv2d: depthwise 5x5 stride 1")


# -- cast needs the graph ----------------------------------------------------------------------

def test_cast_only_at_graph_inputs_and_outputs():
    img = var("img", X4, "uint8")
    at_input = ir.call("cast", img, dtype="float32")
    middle = ir.call("cast", ir.call("nn.relu", at_input), dtype="float16", layer="mid")
    back = ir.call("cast", middle, dtype="float32")
    at_output = ir.call("cast", ir.call("nn.relu", back), dtype="int32")
    ctx = RuleContext.for_expr(at_output)
    assert check_call(at_input, ctx) is None
    assert check_call(at_output, ctx) is None
    assert check_call(middle, ctx) == ("cast 'mid': a cast to float16 inside the graph is not supported (TIDL casts "
                                       "only at the graph's inputs and outputs)")
    # a tuple result: each field is a graph output
    two = Tuple([ir.call("cast", ir.call("nn.relu", at_input), dtype="int8"), back])
    ctx2 = RuleContext.for_expr(two)
    assert check_call(two.fields[0], ctx2) is None
    assert check_call(back, ctx2) is None
    assert "inside the graph" in check_call(middle, ctx2)


# -- generic rules -----------------------------------------------------------------------------

def test_op_without_layer():
    x = var("x", X4)
    assert check(ir.call("erf", x, layer="e")) == "erf 'e': TIDL has no layer for erf"
    assert check(ir.call("nn.lrn", x)) == "nn.lrn: TIDL has no layer for nn.lrn"
    assert layer_type("nn.conv2d") == "Conv" and layer_type("erf") is None


def test_qnn_ops_are_out_of_scope():
    x = var("q", (1, 4), "int8")
    call = ir.call("qnn.dequantize", x, const(0.5), const(np.int32(0)))
    assert "pre-quantized (QNN) ops are out of scope" in check(call)


def test_dtype_rules():
    assert "input 0 has dtype float16; TIDL imports float32 graphs" in check(ir.call("nn.relu", var("h", X4, "float16")))
    reason = check(ir.call("nn.relu", var("i", X4, "int8")))
    assert "dtype int8; pre-quantized graphs are out of scope" in reason
    # integer indices and an integer argmax result are exempt
    assert rule_info("take").int_args == (1,) and rule_info("argmax").int_output


def test_rank_and_dynamic_shapes():
    seven = ir.call("reshape", var("x", (2, 3, 4, 5, 6)), newshape=(1, 2, 3, 2, 2, 5, 6))
    assert "the output has rank 7 (shape (1, 2, 3, 2, 2, 5, 6)); TIDL tensors have at most 6 dims" in check(seven)
    dynamic = ir.call("nn.relu", var("d", (-1, 16)))
    assert "input 0 has a dynamic shape (-1, 16); TIDL needs static shapes" in check(dynamic)


def test_type_rules_check_inputs_as_well_as_the_output():
    # the output alone passes: the common-case shortcut must still look at every input
    flat = ir.call("reshape", var("x", (1, 2, 3, 2, 2, 5, 6)), newshape=(1, 2, 6, 60))
    assert "input 0 has rank 7 (shape (1, 2, 3, 2, 2, 5, 6)); TIDL tensors have at most 6 dims" in check(flat)
    as_float = ir.call("cast", var("i", (1, 4), "int8"), dtype="float32")
    assert check(as_float) is None  # cast is exempt from the dtype rule
    summed = ir.call("add", var("f", (1, 4)), ir.call("cast", var("j", (1, 4), "int8"), dtype="float32"))
    assert check(summed) is None


def test_batch_counts_non_constant_inputs():
    from tidlx.backends.tidl.rules import call_batch

    merged = ir.call("reshape", var("x", (6, 16, 4)), newshape=(1, 96, 4))
    assert call_batch(merged) == 6
    scaled = ir.call("multiply", var("y", (1, 16)), const(np.ones((6, 16), "float32")))
    assert call_batch(scaled) == 6  # the output's batch; the constant input is not counted
    assert call_batch(ir.call("add", var("z", (1, 16)), const(np.ones((1, 16), "float32")))) == 1


# -- batch limit -------------------------------------------------------------------------------

def batch6_conv():
    return conv(x=var("imgs", (6, 16, 32, 32)), layer="backbone.conv1")


def test_batch_rejected_by_default(monkeypatch):
    monkeypatch.delenv(BATCH_ENV_VAR, raising=False)
    call = batch6_conv()
    reason = explain(call, RuleContext.for_expr(call), TidlOptions())
    assert reason == HostReason(
        "batch", "nn.conv2d 'backbone.conv1': batch 6 > TIDL_RELAY_MAX_BATCH_SIZE=1: set the environment variable "
                 "TIDL_RELAY_MAX_BATCH_SIZE=6 or the option max_batch_size=6")


def test_batch_allowed_by_environment_read_at_resolution(monkeypatch):
    monkeypatch.delenv(BATCH_ENV_VAR, raising=False)
    options = TidlOptions()
    call = batch6_conv()
    ctx = RuleContext.for_expr(call)
    monkeypatch.setenv(BATCH_ENV_VAR, "6")  # after the options were built: read when resolved
    assert explain(call, ctx, options) is None
    monkeypatch.setenv(BATCH_ENV_VAR, "4")
    assert "batch 6 > TIDL_RELAY_MAX_BATCH_SIZE=4" in explain(call, ctx, options).message
    monkeypatch.setenv(BATCH_ENV_VAR, "six")
    with pytest.raises(OptionError, match="TIDL_RELAY_MAX_BATCH_SIZE='six' is not allowed"):
        explain(call, ctx, options)


def test_batch_allowed_by_option_which_wins_over_environment(monkeypatch):
    monkeypatch.setenv(BATCH_ENV_VAR, "8")
    call = batch6_conv()
    ctx = RuleContext.for_expr(call)
    assert explain(call, ctx, TidlOptions(max_batch_size=6)) is None
    reason = explain(call, ctx, TidlOptions.from_dict({"max_batch_size": 2}))
    assert reason.kind == "batch"
    assert reason.message == "nn.conv2d 'backbone.conv1': batch 6 > max_batch_size=2: set the option max_batch_size=6"


def test_batch_specific_rules_hold_even_when_batch_is_allowed(monkeypatch):
    monkeypatch.setenv(BATCH_ENV_VAR, "6")
    b6 = var("b6", (6, 16, 4, 4))
    for call, expected in [
        (ir.call("nn.batch_flatten", b6), "Flatten needs N=1"),
        (ir.call("strided_slice", b6, begin=(0, 0), end=(6, 8)), "Slice needs batch 1"),
        (ir.call("concatenate", Tuple([b6, b6]), axis=0), "along the batch axis"),
        (ir.call("transpose", b6, axes=(1, 0, 2, 3)), "moves the batch axis"),
    ]:
        reason = explain(call, RuleContext.for_expr(call), TidlOptions())
        assert reason.kind == "rule" and expected in reason.message


def test_rank1_outputs_have_no_batch(monkeypatch):
    monkeypatch.delenv(BATCH_ENV_VAR, raising=False)
    call = ir.call("nn.relu", var("v", (59,)))
    assert explain(call, RuleContext.for_expr(call), TidlOptions()) is None


# -- composites --------------------------------------------------------------------------------

def conv_bn_relu_graph():
    x = var("x", (1, 3, 16, 16))
    c = ir.call("nn.conv2d", x, ones(8, 3, 3, 3), padding=(1, 1), layer="conv1")
    bn_call = ir.call("nn.batch_norm", c, ones(8), values(8), ones(8), ones(8), layer="bn1")
    bn = TupleGetItem(bn_call, 0)
    r = ir.call("nn.relu", bn, layer="relu1")
    pool = ir.call("nn.max_pool2d", r, pool_size=(2, 2), strides=(2, 2), layer="pool1")
    return Function([x], pool), (c, bn_call, bn, r), pool


def test_conv_bn_relu_is_one_conv_layer():
    fn, members, pool = conv_bn_relu_graph()
    groups = find_composites(fn)
    assert len(groups) == 1
    g = groups[0]
    assert g.layer_type == "Conv" and g.name == "conv2d_bn_act"
    assert g.members == members and g.root is members[-1] and g.anchor is members[0]
    assert g.calls == (members[0], members[1], members[3])
    assert "Conv composite conv2d_bn_act 'conv1' (nn.conv2d+nn.batch_norm+nn.relu)" in repr(g)


def conv_bias_relu(bias_kind="bias_add", bias_shape=(8, 1, 1)):
    x = var("x", (1, 3, 16, 16))
    c = ir.call("nn.conv2d", x, ones(8, 3, 3, 3), padding=(1, 1), layer="conv")
    if bias_kind == "bias_add":
        b = ir.call("nn.bias_add", c, values(8), layer="conv")
    else:
        b = ir.call("add", values(*bias_shape), c, layer="add")
    r = ir.call("clip", b, a_min=0.0, a_max=6.0, layer="relu6")
    return Function([x], r), (c, b, r)


@pytest.mark.parametrize("kind", ["bias_add", "add"])
def test_conv_bias_relu_is_one_conv_layer(kind):
    fn, members = conv_bias_relu(kind)
    (g,) = find_composites(fn)
    assert (g.name, g.layer_type, g.members) == ("conv2d_act", "Conv", members)


def test_add_of_a_non_channel_constant_is_not_a_bias():
    fn, (c, b, r) = conv_bias_relu("add", bias_shape=(1, 8, 16, 16))
    groups = find_composites(fn)
    assert all(c not in g.members for g in groups)


def test_dense_bias_and_dense_bias_relu():
    x = var("x", (1, 64))
    d = ir.call("nn.dense", x, ones(10, 64), layer="fc")
    b = ir.call("nn.bias_add", d, values(10), layer="fc")
    (g,) = find_composites(Function([x], b))
    assert (g.name, g.layer_type, g.members) == ("dense_bias", "InnerProduct", (d, b))
    d2 = ir.call("nn.dense", x, ones(10, 64), layer="fc")
    a2 = ir.call("add", d2, values(1, 10), layer="fc")
    r2 = ir.call("nn.relu", a2)
    (g2,) = find_composites(Function([x], r2))
    assert (g2.name, g2.layer_type, g2.members) == ("dense_relu", "InnerProduct", (d2, a2, r2))


def test_inner_value_used_outside_breaks_the_group():
    x = var("x", (1, 3, 16, 16))
    c = ir.call("nn.conv2d", x, ones(8, 3, 3, 3), padding=(1, 1))
    r = ir.call("nn.relu", c)
    both = ir.call("add", r, c)  # the conv's value is needed outside conv+relu
    groups = find_composites(Function([x], both))
    assert not any(c in g.members for g in groups)


def test_batch_norm_absorbs_hard_sigmoid_and_channelwise_ops_form_a_batchnorm():
    x = var("x", (1, 8, 4, 4))
    bn_call = ir.call("nn.batch_norm", x, ones(8), ones(8), ones(8), ones(8))
    bn = TupleGetItem(bn_call, 0)
    scaled = ir.call("multiply", bn, const(1.0 / 6.0))
    shifted = ir.call("add", scaled, const(0.5))
    hs = ir.call("clip", shifted, a_min=0.0, a_max=1.0)
    scale = ir.call("multiply", hs, values(8, 1, 1))
    shift = ir.call("add", scale, values(1, 8, 1, 1))
    act = ir.call("nn.leaky_relu", shift, alpha=0.1)
    groups = find_composites(Function([x], act))
    assert [(g.name, g.layer_type, g.members) for g in groups] == [
        ("batch_norm_act", "BatchNorm", (bn_call, bn, scaled, shifted, hs)),
        ("channelwise", "BatchNorm", (scale, shift, act)),
    ]


def gelu_graph(pytorch_form=False):
    x = var("x", (1, 8, 4, 4))
    if pytorch_form:
        inner = ir.call("erf", ir.call("divide", x, const(1.4142135)), layer="gelu")
        y = ir.call("multiply", ir.call("multiply", x, ir.call("add", inner, const(1.0))), const(0.5))
    else:
        inner = ir.call("erf", ir.call("multiply", x, const(0.70710677)), layer="gelu")
        y = ir.call("multiply", ir.call("multiply", x, const(0.5)), ir.call("add", inner, const(1.0)))
    return Function([x], y), inner, y


@pytest.mark.parametrize("pytorch_form", [False, True])
def test_gelu_is_a_composite_and_its_erf_goes_to_tidl(pytorch_form):
    fn, erf, out = gelu_graph(pytorch_form)
    (g,) = find_composites(fn)
    assert g.name == "gelu" and len(g.calls) == 5 and g.root is out and g.anchor is erf
    ctx = RuleContext.for_function(fn)
    assert explain(erf, ctx) is None
    lone = ir.call("erf", var("y", (1, 8, 4, 4)))
    assert explain(lone, RuleContext.for_expr(lone)).message == "erf: TIDL has no layer for erf"


def test_the_quick_composite_test_never_refuses_a_match():
    from tidlx.backends.tidl.composites import _branches, _may_take, composite_specs
    from tidlx.ir.traversal import post_order

    x = var("x", (1, 8, 4, 4))
    bn_call = ir.call("nn.batch_norm", ir.call("nn.bias_add", ir.call("nn.conv2d", x, ones(8, 8, 3, 3),
                                                                      padding=(1, 1)), values(8)),
                      ones(8), ones(8), ones(8), ones(8))
    hs = ir.call("clip", ir.call("add", const(0.5), ir.call("multiply", TupleGetItem(bn_call, 0), const(0.2))),
                 a_min=0.0, a_max=1.0)
    channel = ir.call("nn.relu", ir.call("add", ir.call("multiply", values(8, 1, 1), hs), values(8, 1, 1)))
    dense = ir.call("nn.relu", ir.call("add", ir.call("nn.dense", ir.call("reshape", channel, newshape=(1, 128)),
                                                      ones(4, 128)), values(4)))
    graphs = [gelu_graph(False)[0], gelu_graph(True)[0], Function([x], ir.call("add", channel, channel)),
              Function([x], dense), conv_bn_relu_graph()[0]]
    matched = 0
    for spec in composite_specs():
        branches = _branches(spec.pattern)
        for fn in graphs:
            for node in post_order(fn.body):
                if spec.pattern.match(node) is not None:
                    matched += branches is not None
                    assert branches is None or _may_take(branches, node), (spec.name, node)
    assert matched >= 8  # the graphs do exercise the patterns that have the quick test


def test_composites_on_a_long_chain():
    # deeper than Python's recursion limit: the matcher walks iteratively (speed: benchmarks/bench_partition.py)
    x = var("x", (1, 4, 8, 8))
    y = x
    w, b = ones(4, 4, 3, 3), values(4)
    for i in range(1500):
        y = ir.call("nn.relu", ir.call("nn.bias_add", ir.call("nn.conv2d", y, w, padding=(1, 1)), b))
    fn = Function([x], y)
    groups = find_composites(fn)
    assert len(groups) == 1500 and all(g.name == "conv2d_act" for g in groups)


# -- explain: user lists and composites ----------------------------------------------------------

def test_deny_list_op_sends_the_whole_composite_to_the_host():
    fn, (c, bn_call, bn, r), pool = conv_bn_relu_graph()
    ctx = RuleContext.for_function(fn)
    options = TidlOptions.from_dict({"deny_list": "nn.batch_norm"})
    reason = explain(c, ctx, options)
    assert reason.kind == "deny_list"
    assert reason.message == ("nn.conv2d 'conv1' is part of one TIDL Conv layer (conv2d_bn_act) with "
                              "nn.batch_norm 'bn1': nn.batch_norm is in the option deny_list")
    assert explain(r, ctx, options).kind == "deny_list"
    assert explain(pool, ctx, options) is None


def test_deny_list_layer_name_applies_to_the_composite():
    fn, (c, bn_call, bn, r), pool = conv_bn_relu_graph()
    ctx = RuleContext.for_function(fn)
    options = TidlOptions.from_dict({"deny_list:layer_name": "relu1"})
    assert explain(r, ctx, options) == HostReason(
        "deny_list:layer_name", "nn.relu 'relu1': layer 'relu1' is in the option deny_list:layer_name")
    reason = explain(c, ctx, options)
    assert reason.kind == "deny_list:layer_name" and "with nn.relu 'relu1'" in reason.message


def test_deny_list_layer_type_uses_the_onnx_op_types():
    fn, (c, bn_call, bn, r), pool = conv_bn_relu_graph()
    ctx = RuleContext.for_function(fn, layer_types={"conv1": "Conv", "bn1": "BatchNormalization",
                                                    "relu1": "Relu", "pool1": "MaxPool"})
    options = TidlOptions.from_dict({"deny_list:layer_type": "MaxPool"})
    assert explain(pool, ctx, options) == HostReason(
        "deny_list:layer_type", "nn.max_pool2d 'pool1': its ONNX op type MaxPool is in the option "
                                "deny_list:layer_type")
    assert explain(c, ctx, options) is None


def test_allow_list_admits_only_listed_layers():
    fn, (c, bn_call, bn, r), pool = conv_bn_relu_graph()
    ctx = RuleContext.for_function(fn)
    options = TidlOptions.from_dict({"allow_list:layer_name": "pool1, conv1"})
    assert explain(pool, ctx, options) is None
    reason = explain(c, ctx, options)
    assert reason.kind == "allow_list"
    assert "nn.batch_norm 'bn1': layer 'bn1' is not in the option allow_list:layer_name" in reason.message
    full = TidlOptions.from_dict({"allow_list:layer_name": "pool1,conv1,bn1,relu1"})
    assert explain(c, ctx, full) is None


def test_rule_failure_of_the_anchor_names_it_for_every_member():
    x = var("x", (1, 16, 32, 32))
    c = conv(x=x, kernel=5, groups=16, layer="dw")
    r = ir.call("nn.relu", c, layer="dw_relu")
    ctx = RuleContext.for_expr(r)
    reason = explain(r, ctx)
    assert reason.kind == "rule"
    assert reason.message.startswith("nn.relu 'dw_relu' is part of one TIDL Conv layer (conv2d_act) with "
                                     "nn.conv2d 'dw': depthwise 5x5 stride 1 is not supported")


def test_explain_function_reports_host_calls_and_warns_about_unknown_names(monkeypatch):
    monkeypatch.delenv(BATCH_ENV_VAR, raising=False)
    fn, (c, bn_call, bn, r), pool = conv_bn_relu_graph()
    options = TidlOptions.from_dict({"deny_list:layer_name": "pool1,no_such_layer", "deny_list:layer_type": "Conv"})
    with pytest.warns(TidlxWarning) as record:
        host = explain_function(fn, options)
    texts = [str(w.message) for w in record]
    assert any("'no_such_layer'" in t and "deny_list:layer_name" in t for t in texts)
    assert any("records no ONNX op types" in t for t in texts)
    assert list(host) == [pool] and host[pool].kind == "deny_list:layer_name"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert explain_function(fn, TidlOptions()) == {}


def test_tuple_results_get_the_same_type_and_batch_checks_as_tensors():
    from tidlx.backends.tidl.rules import call_batch, type_reason

    c = ones(8)
    half = ir.call("nn.batch_norm", var("h", (1, 8, 4, 4), "float16"), *(const(np.ones(8, "float16")) for _ in range(4)))
    assert "float16" in type_reason(half)  # the tuple result (and input) is not float32
    plain = ir.call("nn.batch_norm", var("f", (1, 8, 4, 4)), c, c, c, c)
    assert type_reason(plain) is None
    parts = ir.call("split", var("b4", (4, 16, 8, 8)), indices_or_sections=2, axis=1)
    assert call_batch(parts) == 4
    assert call_batch(ir.call("split", var("r", (2, 16)), indices_or_sections=2, axis=0)) == 2
