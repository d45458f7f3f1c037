"""MACs and bytes per call (tidlx.ir.analysis), checked against hand-computed figures."""

from __future__ import annotations

import numpy as np
import pytest

from tidlx.ir import Function, IRModule, TensorType, TidlxError, Tuple, Var, call, const
from tidlx.ir.analysis import call_cost, describe_macs, function_macs, macs, tensor_bytes
from tidlx.ir.expr import Call
from tidlx.ir.types import TupleType


def t(*shape, dtype="float32"):
    return Var("x", TensorType(shape, dtype))


def w(*shape):
    return const(np.zeros(shape, "float32"))


def test_conv2d_counts_every_weight_tap_per_output():
    c = call("nn.conv2d", t(1, 3, 224, 224), w(64, 3, 7, 7), strides=(2, 2), padding=(3, 3, 3, 3))
    assert macs(c) == 64 * 112 * 112 * 3 * 7 * 7 == 118_013_952


def test_depthwise_and_nhwc_convolutions():
    dw = call("nn.conv2d", t(1, 32, 56, 56), w(32, 1, 3, 3), padding=(1, 1), groups=32)
    assert macs(dw) == 32 * 56 * 56 * 9
    nhwc = call("nn.conv2d", t(1, 56, 56, 32), w(3, 3, 32, 64), padding=(1, 1), data_layout="NHWC",
                kernel_layout="HWIO")
    assert macs(nhwc) == 56 * 56 * 64 * 32 * 9


def test_conv2d_transpose_counts_per_input_element():
    c = call("nn.conv2d_transpose", t(1, 16, 8, 8), w(16, 8, 3, 3), strides=(2, 2), padding=(1, 1),
             output_padding=(1, 1))
    assert c.checked_type.shape == (1, 8, 16, 16)
    assert macs(c) == 16 * 8 * 8 * 8 * 3 * 3


def test_dense_and_matmuls():
    assert macs(call("nn.dense", t(1, 2048), w(1000, 2048))) == 2_048_000
    assert macs(call("nn.matmul", t(4, 8), w(8, 16))) == 4 * 16 * 8
    assert macs(call("nn.matmul", t(8, 4), w(8, 16), transpose_a=True)) == 4 * 16 * 8
    bmm = call("nn.batch_matmul", t(2, 4, 8), Var("y", TensorType((2, 16, 8))))
    assert macs(bmm) == 2 * 4 * 16 * 8


def test_pools_count_their_window_or_their_input():
    x = t(1, 64, 112, 112)
    assert macs(call("nn.max_pool2d", x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))) == 64 * 56 * 56 * 9
    assert macs(call("nn.avg_pool2d", x, pool_size=(2, 2), strides=(2, 2))) == 64 * 56 * 56 * 4
    assert macs(call("nn.global_avg_pool2d", x)) == 64 * 112 * 112


def test_elementwise_normalization_and_reductions():
    x = t(1, 8, 4, 4)
    assert macs(call("nn.relu", x)) == 128
    assert macs(call("add", x, Var("b", TensorType((8, 1, 1))))) == 128
    assert macs(call("nn.bias_add", x, w(8))) == 128
    vec = w(8)
    assert macs(call("nn.batch_norm", x, vec, vec, vec, vec)) == 128
    assert macs(call("nn.softmax", x)) == 128
    assert macs(call("sum", x, axis=(1,))) == 128


def test_data_movement_is_free():
    x = t(1, 8, 4, 4)
    assert macs(call("reshape", x, newshape=(1, 128))) == 0
    assert macs(call("transpose", x, axes=(0, 2, 3, 1))) == 0
    assert macs(call("concatenate", Tuple([x, x]), axis=1)) == 0
    assert macs(call("split", x, indices_or_sections=2, axis=1)) == 0
    assert macs(call("nn.batch_flatten", x)) == 0


def test_resizes_count_interpolation_taps():
    x = t(1, 8, 4, 4)
    assert macs(call("nn.upsampling", x, scale_h=2.0, scale_w=2.0)) == 0
    assert macs(call("nn.upsampling", x, scale_h=2.0, scale_w=2.0, method="bilinear")) == 4 * 8 * 8 * 8
    assert macs(call("image.resize2d", x, size=(8, 8), method="nearest_neighbor")) == 0
    assert macs(call("image.resize2d", x, size=(8, 8), method="linear")) == 4 * 8 * 8 * 8


def test_tensor_bytes_of_tensors_and_tuples():
    assert tensor_bytes(TensorType((2, 3), "float16")) == 12
    assert tensor_bytes(TensorType((5,), "bool")) == 5
    assert tensor_bytes(TupleType((TensorType((2,), "int8"), TupleType((TensorType((2,), "float32"),))))) == 10


def test_call_cost_separates_weights_from_activations():
    c = call("nn.dense", t(1, 16), w(4, 16))
    cost = call_cost(c)
    assert (cost.macs, cost.input_bytes, cost.weight_bytes, cost.output_bytes) == (64, 64, 256, 16)


def test_calls_of_functions_and_globals():
    y = Var("y", TensorType((1, 16)))
    helper = Function([y], call("nn.relu", call("nn.dense", y, w(4, 16))))
    mod = IRModule({"helper": helper})
    site = Call(mod.get_global_var("helper"), [t(1, 16)])
    assert function_macs(helper) == 64 + 4
    assert macs(site, mod) == 68
    with pytest.raises(TidlxError, match="need the module that defines it"):
        macs(site)
    with pytest.raises(TidlxError, match="takes a Call"):
        macs(t(1, 2))


def test_describe_macs():
    assert describe_macs(4_089_000_000) == "4.09 GMAC"
    assert describe_macs(12) == "12 MAC"
