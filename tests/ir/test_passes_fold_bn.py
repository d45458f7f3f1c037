"""FoldBatchNormIntoConv and FoldBatchNormIntoDense (the BN + GEMM merge): structure, numerics,
the cases that must not fold, and disabling the dense merge by name."""

import numpy as np
import pytest

import tidlx.emulator as emulator
import tidlx.ir as ir
from tidlx.ir.expr import Function, TupleGetItem, Var
from tidlx.ir.passes import (FoldBatchNormIntoConv, FoldBatchNormIntoDense, SimplifyInference,
                             inference_pipeline)
from tidlx.ir.transform import PassContext, Sequential
from tidlx.ir.types import TensorType

RNG = np.random.default_rng(2)


def tvar(name, shape):
    return Var(name, TensorType(shape, "float32"))


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def bn_arrays(channels):
    return (RNG.uniform(0.5, 1.5, channels).astype("float32"), rand(channels), rand(channels),
            RNG.uniform(0.2, 2.0, channels).astype("float32"))


def scale_shift(gamma, beta, mean, var, eps=1e-5):
    s = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    return s, beta - mean * s


def batch_norm(x, arrays, layer=None, **attrs):
    return TupleGetItem(ir.call("nn.batch_norm", x, *map(ir.const, arrays), layer=layer, **attrs), 0)


def same_outputs(before, after, inputs, rtol=1e-4, atol=1e-4):
    for got, want in zip(emulator.run(after, inputs), emulator.run(before, inputs)):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def ops_of(mod):
    return [c.op_name for c in ir.traversal.calls(mod.main.body)]


# -- conv ------------------------------------------------------------------------------------

@pytest.mark.parametrize("bias_kind", [None, "bias_add", "add"])
def test_conv_batch_norm_folds_into_weights_and_bias(bias_kind):
    x = tvar("x", (1, 3, 6, 6))
    w, b, arrays = rand(4, 3, 3, 3), rand(4), bn_arrays(4)
    y = ir.call("nn.conv2d", x, ir.const(w), padding=(1, 1), channels=4, kernel_size=(3, 3), layer="conv1")
    if bias_kind == "bias_add":
        y = ir.call("nn.bias_add", y, ir.const(b), layer="conv1")
    elif bias_kind == "add":
        y = ir.call("add", ir.const(b.reshape(4, 1, 1)), y, layer="conv1_add")
    before = ir.IRModule.from_expr(Function([x], ir.call("nn.relu", batch_norm(y, arrays, "bn1"), layer="relu1")))
    out = FoldBatchNormIntoConv(before)

    s, t = scale_shift(*arrays)
    bias = (b if bias_kind else np.zeros(4)) * s + t
    x2 = tvar("x", (1, 3, 6, 6))
    conv = ir.call("nn.conv2d", x2, ir.const((w * s.reshape(4, 1, 1, 1)).astype("float32")), padding=(1, 1),
                   channels=4, kernel_size=(3, 3), layer="conv1")
    expected = ir.call("nn.relu", ir.call("nn.bias_add", conv, ir.const(bias.astype("float32")), layer="conv1"),
                       layer="relu1")
    ir.assert_structural_equal(out, ir.IRModule.from_expr(Function([x2], expected)), compare_layers=True)
    same_outputs(before, out, {"x": rand(1, 3, 6, 6)})


def test_conv_followed_by_simplified_batch_norm_folds_too():
    x = tvar("x", (1, 2, 5, 5))
    y = ir.call("nn.conv2d", x, ir.const(rand(3, 2, 3, 3)), layer="c")
    before = ir.IRModule.from_expr(Function([x], batch_norm(ir.call("nn.bias_add", y, ir.const(rand(3))),
                                                            bn_arrays(3), "bn")))
    simplified = SimplifyInference(before)
    assert ops_of(simplified)[-2:] == ["multiply", "add"]
    out = FoldBatchNormIntoConv(simplified)
    assert ops_of(out) == ["nn.conv2d", "nn.bias_add"]
    assert all(c.layer == "c" for c in ir.traversal.calls(out.main.body))
    same_outputs(before, out, {"x": rand(1, 2, 5, 5)})


def test_nhwc_hwio_and_depthwise_convs_fold():
    x = tvar("x", (1, 6, 6, 4))
    conv = ir.call("nn.conv2d", x, ir.const(rand(3, 3, 4, 8)), padding=(1, 1), data_layout="NHWC",
                   kernel_layout="HWIO")
    before = ir.IRModule.from_expr(Function([x], batch_norm(conv, bn_arrays(8), axis=3)))
    out = FoldBatchNormIntoConv(before)
    assert ops_of(out) == ["nn.conv2d", "nn.bias_add"] and out.main.body.attrs.axis == 3
    same_outputs(before, out, {"x": rand(1, 6, 6, 4)})

    xd = tvar("x", (1, 4, 6, 6))
    dw = ir.call("nn.conv2d", xd, ir.const(rand(4, 1, 3, 3)), padding=(1, 1), groups=4)
    before_dw = ir.IRModule.from_expr(Function([xd], batch_norm(dw, bn_arrays(4))))
    out_dw = FoldBatchNormIntoConv(before_dw)
    assert ops_of(out_dw) == ["nn.conv2d", "nn.bias_add"]
    same_outputs(before_dw, out_dw, {"x": rand(1, 4, 6, 6)})


def test_conv_cases_that_must_not_fold():
    x = tvar("x", (1, 3, 4, 4))
    w = ir.const(rand(4, 3, 1, 1))
    arrays = bn_arrays(4)

    def unchanged(body, params=(x,)):
        mod = ir.IRModule.from_expr(Function(list(params), body))
        ir.assert_structural_equal(FoldBatchNormIntoConv(mod), mod)

    conv = ir.call("nn.conv2d", x, w)
    # the conv's output has a second user
    unchanged(ir.Tuple([batch_norm(conv, arrays), conv]))
    # the BN normalizes another axis than the channels
    unchanged(batch_norm(ir.call("nn.conv2d", x, w), bn_arrays(4), axis=2))
    # the weights are not constant
    wv = tvar("w", (4, 3, 1, 1))
    unchanged(batch_norm(ir.call("nn.conv2d", x, wv), arrays), params=(x, wv))
    # the add before the BN is not per channel
    unchanged(batch_norm(ir.call("add", ir.call("nn.conv2d", x, w), ir.const(rand(4, 4))), arrays))
    # the BN parameters are not constant
    g = tvar("g", (4,))
    bn = ir.call("nn.batch_norm", ir.call("nn.conv2d", x, w), g, *map(ir.const, arrays[1:]))
    unchanged(TupleGetItem(bn, 0), params=(x, g))
    # another output of the BN is used
    bn2 = ir.call("nn.batch_norm", ir.call("nn.conv2d", x, w), *map(ir.const, arrays))
    unchanged(ir.Tuple([TupleGetItem(bn2, 0), TupleGetItem(bn2, 1)]))


# -- dense -----------------------------------------------------------------------------------

def test_batch_norm_after_dense_folds_into_it():
    x = tvar("x", (2, 5))
    w, b, arrays = rand(3, 5), rand(3), bn_arrays(3)
    d = ir.call("nn.bias_add", ir.call("nn.dense", x, ir.const(w), units=3, layer="gemm1"), ir.const(b),
                layer="gemm1")
    before = ir.IRModule.from_expr(Function([x], batch_norm(d, arrays, "bn")))
    out = FoldBatchNormIntoDense(before)
    s, t = scale_shift(*arrays)
    x2 = tvar("x", (2, 5))
    dense = ir.call("nn.dense", x2, ir.const((w * s[:, None]).astype("float32")), units=3, layer="gemm1")
    after = ir.call("nn.bias_add", dense, ir.const((b * s + t).astype("float32")), axis=1, layer="gemm1")
    ir.assert_structural_equal(out, ir.IRModule.from_expr(Function([x2], after)), compare_layers=True)
    same_outputs(before, out, {"x": rand(2, 5)})


@pytest.mark.parametrize("bias_kind", [None, "bias_add", "add"])
def test_batch_norm_before_dense_folds_into_the_next_one(bias_kind):
    # gemm -> relu -> BN -> gemm: the BN cannot go back through the relu, so it goes forward.
    x = tvar("x", (2, 6))
    h = ir.call("nn.relu", ir.call("nn.dense", x, ir.const(rand(5, 6)), layer="gemm1"))
    w2, b2, arrays = rand(4, 5), rand(4), bn_arrays(5)
    y = ir.call("nn.dense", batch_norm(h, arrays, "bn"), ir.const(w2), layer="gemm2")
    if bias_kind == "bias_add":
        y = ir.call("nn.bias_add", y, ir.const(b2), axis=-1, layer="gemm2")
    elif bias_kind == "add":
        y = ir.call("add", y, ir.const(b2), layer="gemm2")
    before = ir.IRModule.from_expr(Function([x], ir.call("sigmoid", y)))
    out = FoldBatchNormIntoDense(before)
    assert ops_of(out) == ["nn.dense", "nn.relu", "nn.dense", "nn.bias_add", "sigmoid"]
    s, t = scale_shift(*arrays)
    new_dense = out.main.body.args[0].args[0]
    np.testing.assert_allclose(new_dense.args[1].data, w2 * s[None, :], rtol=1e-6)
    bias = out.main.body.args[0].args[1].data
    np.testing.assert_allclose(bias, (b2 if bias_kind else 0) + w2.astype(np.float64) @ t, rtol=1e-5, atol=1e-6)
    assert new_dense.layer == "gemm2" and out.main.body.args[0].layer == "gemm2"
    same_outputs(before, out, {"x": rand(2, 6)})


def test_batch_norm_between_two_dense_goes_into_the_preceding_one():
    x = tvar("x", (1, 8))
    d1 = ir.call("nn.dense", x, ir.const(rand(6, 8)), layer="gemm1")
    d2 = ir.call("nn.dense", batch_norm(d1, bn_arrays(6), "bn"), ir.const(rand(2, 6)), layer="gemm2")
    before = ir.IRModule.from_expr(Function([x], d2))
    out = FoldBatchNormIntoDense(before)
    assert ops_of(out) == ["nn.dense", "nn.bias_add", "nn.dense"]
    first = out.main.body.args[0]
    assert first.layer == "gemm1" and first.args[0].layer == "gemm1"
    np.testing.assert_array_equal(out.main.body.args[1].data, d2.args[1].data)  # gemm2 untouched
    same_outputs(before, out, {"x": rand(1, 8)})


def test_simplified_batch_norm_between_dense_layers_folds():
    x = tvar("x", (3, 4))
    h = ir.call("nn.relu", ir.call("nn.dense", x, ir.const(rand(5, 4))))
    before = ir.IRModule.from_expr(Function([x], ir.call("nn.dense", batch_norm(h, bn_arrays(5)),
                                                         ir.const(rand(2, 5)))))
    simplified = SimplifyInference(before)
    assert "multiply" in ops_of(simplified)
    out = FoldBatchNormIntoDense(simplified)
    assert ops_of(out) == ["nn.dense", "nn.relu", "nn.dense", "nn.bias_add"]
    same_outputs(before, out, {"x": rand(3, 4)})


def test_dense_cases_that_must_not_fold():
    x = tvar("x", (2, 4))
    arrays = bn_arrays(4)

    def unchanged(body):
        mod = ir.IRModule.from_expr(Function([x], body))
        ir.assert_structural_equal(FoldBatchNormIntoDense(mod), mod)

    # BN on a non-feature axis of a 3-D dense input
    x3 = tvar("x3", (2, 4, 3))
    bn3 = batch_norm(x3, arrays, axis=1)
    mod3 = ir.IRModule.from_expr(Function([x3], ir.call("nn.dense", bn3, ir.const(rand(5, 3)))))
    ir.assert_structural_equal(FoldBatchNormIntoDense(mod3), mod3)
    # BN output used by the dense and returned too
    bn = batch_norm(ir.call("nn.relu", x), arrays)
    unchanged(ir.Tuple([ir.call("nn.dense", bn, ir.const(rand(3, 4))), bn]))
    # dense output used twice: cannot fold backward; nothing dense follows
    d = ir.call("nn.dense", x, ir.const(rand(4, 4)))
    unchanged(ir.Tuple([batch_norm(d, arrays), d]))


def test_bn_gemm_merge_can_be_disabled_by_name():
    x = tvar("x", (1, 8))
    d1 = ir.call("nn.dense", x, ir.const(rand(6, 8)), layer="Gemm_1")
    bn = batch_norm(ir.call("nn.relu", d1), bn_arrays(6), "BatchNormalization_2")
    d2 = ir.call("nn.dense", bn, ir.const(rand(2, 6)), layer="Gemm_3")
    mod = ir.IRModule.from_expr(Function([x], d2))
    assert "nn.batch_norm" not in ops_of(FoldBatchNormIntoDense(mod))

    with PassContext(disabled_passes=["FoldBatchNormIntoDense"]) as ctx:
        direct = FoldBatchNormIntoDense(mod)
        piped = Sequential([FoldBatchNormIntoConv, FoldBatchNormIntoDense])(mod)
    ir.assert_structural_equal(direct, mod)
    ir.assert_structural_equal(piped, mod)
    assert ("FoldBatchNormIntoDense", "disabled") in ctx.history
    assert ("FoldBatchNormIntoConv", "ran") in ctx.history

    # In the full pipeline the BN still becomes multiply/add, but stays out of the dense layers.
    with PassContext(disabled_passes="FoldBatchNormIntoDense"):
        pipelined = inference_pipeline()(mod)
    assert ops_of(pipelined) == ["nn.dense", "nn.relu", "multiply", "add", "nn.dense"]
    np.testing.assert_array_equal(pipelined.main.body.args[1].data, d2.args[1].data)
    folded = inference_pipeline()(mod)
    assert ops_of(folded) == ["nn.dense", "nn.relu", "nn.dense", "nn.bias_add"]
    inputs = {"x": rand(1, 8)}
    same_outputs(mod, pipelined, inputs)
    same_outputs(mod, folded, inputs)


def test_inference_pipeline_on_a_small_cnn():
    x = tvar("x", (1, 3, 8, 8))
    y = ir.call("nn.conv2d", x, ir.const(rand(4, 3, 3, 3)), padding=(1, 1), layer="conv")
    y = ir.call("nn.relu", batch_norm(y, bn_arrays(4), "bn"), layer="relu")
    y = ir.call("nn.batch_flatten", TupleGetItem(ir.call("nn.dropout", y), 0))
    y = ir.call("nn.dense", y, ir.const(rand(10, 256)), layer="fc")
    y = batch_norm(y, bn_arrays(10), "bn_fc")
    before = ir.IRModule.from_expr(Function([x], y))
    out = inference_pipeline()(before)
    assert ops_of(out) == ["nn.conv2d", "nn.bias_add", "nn.relu", "nn.batch_flatten", "nn.dense", "nn.bias_add"]
    ir.verify(out)
    same_outputs(before, out, {"x": rand(1, 3, 8, 8)})
