"""SimplifyInference: batch_norm -> multiply/add (constant and variable parameters), dropout."""

import numpy as np
import pytest

import tidlx.emulator as emulator
import tidlx.ir as ir
from tidlx.ir.expr import Function, TupleGetItem, Var
from tidlx.ir.passes import FoldConstant, SimplifyInference
from tidlx.ir.transform import Sequential
from tidlx.ir.types import TensorType

RNG = np.random.default_rng(1)


def tvar(name, shape, dtype="float32"):
    return Var(name, TensorType(shape, dtype))


def bn_arrays(channels):
    gamma = RNG.uniform(0.5, 1.5, channels).astype("float32")
    beta = RNG.standard_normal(channels).astype("float32")
    mean = RNG.standard_normal(channels).astype("float32")
    var = RNG.uniform(0.2, 2.0, channels).astype("float32")
    return gamma, beta, mean, var


def expected_scale_shift(gamma, beta, mean, var, eps=1e-5, center=True, scale=True):
    s = (gamma.astype(np.float64) if scale else 1.0) / np.sqrt(var.astype(np.float64) + eps)
    t = -mean.astype(np.float64) * s + (beta.astype(np.float64) if center else 0.0)
    return s.astype("float32"), t.astype("float32")


@pytest.mark.parametrize("center,scale", [(True, True), (False, True), (True, False), (False, False)])
def test_batch_norm_with_constants_becomes_multiply_add(center, scale):
    arrays = bn_arrays(4)
    x = tvar("x", (1, 4, 5, 5))
    bn = ir.call("nn.batch_norm", x, *map(ir.const, arrays), center=center, scale=scale, layer="bn1")
    before = ir.IRModule.from_expr(Function([x], ir.call("nn.relu", TupleGetItem(bn, 0), layer="relu1")))
    s, t = expected_scale_shift(*arrays, center=center, scale=scale)
    x2 = tvar("x", (1, 4, 5, 5))
    affine = ir.call("add", ir.call("multiply", x2, ir.const(s.reshape(4, 1, 1)), layer="bn1"),
                     ir.const(t.reshape(4, 1, 1)), layer="bn1")
    after = ir.IRModule.from_expr(Function([x2], ir.call("nn.relu", affine, layer="relu1")))
    out = SimplifyInference(before)
    ir.assert_structural_equal(out, after, compare_layers=True)
    data = RNG.standard_normal((1, 4, 5, 5)).astype("float32")
    np.testing.assert_allclose(emulator.run(out, {"x": data})[0], emulator.run(before, {"x": data})[0],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,axis,const_shape", [((2, 6), 1, (6,)), ((1, 5, 5, 6), 3, (6,)),
                                                     ((1, 5, 5, 6), -1, (6,)), ((2, 6, 3), 1, (6, 1))])
def test_batch_norm_axis_shapes_the_constants(shape, axis, const_shape):
    arrays = bn_arrays(6)
    x = tvar("x", shape)
    bn = ir.call("nn.batch_norm", x, *map(ir.const, arrays), axis=axis, epsilon=1e-3)
    out = SimplifyInference(ir.IRModule.from_expr(Function([x], TupleGetItem(bn, 0))))
    body = out.main.body
    assert body.op_name == "add" and body.args[0].op_name == "multiply"
    assert body.args[0].args[1].data.shape == const_shape
    assert body.args[1].data.shape == const_shape
    data = RNG.standard_normal(shape).astype("float32")
    before = ir.IRModule.from_expr(Function([x], TupleGetItem(bn, 0)))
    np.testing.assert_allclose(emulator.run(out, {"x": data})[0], emulator.run(before, {"x": data})[0],
                               rtol=1e-5, atol=1e-5)


def test_batch_norm_with_variable_parameters_builds_ops_then_folds():
    x = tvar("x", (1, 3, 4, 4))
    gamma, beta, mean, var = (tvar(n, (3,)) for n in ("gamma", "beta", "mean", "var"))
    bn = ir.call("nn.batch_norm", x, gamma, beta, mean, var, layer="bn")
    before = ir.IRModule.from_expr(Function([x, gamma, beta, mean, var], TupleGetItem(bn, 0)))
    out = SimplifyInference(before)
    ops = {c.op_name for c in ir.traversal.calls(out.main.body)}
    assert "nn.batch_norm" not in ops and {"sqrt", "expand_dims", "multiply", "add"} <= ops
    assert all(c.layer == "bn" for c in ir.traversal.calls(out.main.body))
    arrays = bn_arrays(3)
    inputs = {"x": RNG.standard_normal((1, 3, 4, 4)).astype("float32"),
              **dict(zip(("gamma", "beta", "mean", "var"), arrays))}
    np.testing.assert_allclose(emulator.run(out, inputs)[0], emulator.run(before, inputs)[0], rtol=1e-5, atol=1e-5)


def test_variable_parameters_fold_to_the_constant_form_when_bound():
    arrays = bn_arrays(3)
    x = tvar("x", (1, 3, 2, 2))
    # constants reach batch_norm only through ops, so SimplifyInference builds the op form
    params = [ir.call("copy", ir.const(a)) for a in arrays]
    bn = ir.call("nn.batch_norm", x, *params)
    mod = ir.IRModule.from_expr(Function([x], TupleGetItem(bn, 0)))
    out = Sequential([SimplifyInference, FoldConstant])(mod)
    body = out.main.body
    assert body.op_name == "add" and isinstance(body.args[1], ir.Constant)
    assert isinstance(body.args[0].args[1], ir.Constant) and body.args[0].args[1].data.shape == (3, 1, 1)
    s, t = expected_scale_shift(*arrays)
    np.testing.assert_allclose(body.args[0].args[1].data.reshape(3), s, rtol=1e-6)
    np.testing.assert_allclose(body.args[1].data.reshape(3), t, rtol=1e-5, atol=1e-6)


def test_dropout_is_dropped_and_layer_norm_kept():
    x = tvar("x", (2, 8))
    drop = TupleGetItem(ir.call("nn.dropout", x, rate=0.3), 0)
    ln = ir.call("nn.layer_norm", drop, ir.const(np.ones(8, "float32")), ir.const(np.zeros(8, "float32")))
    before = ir.IRModule.from_expr(Function([x], ln))
    x2 = tvar("x", (2, 8))
    after = ir.IRModule.from_expr(Function([x2], ir.call("nn.layer_norm", x2, ir.const(np.ones(8, "float32")),
                                                         ir.const(np.zeros(8, "float32")))))
    ir.assert_structural_equal(SimplifyInference(before), after)


def test_other_batch_norm_outputs_stay_wired():
    arrays = bn_arrays(2)
    x = tvar("x", (1, 2))
    bn = ir.call("nn.batch_norm", x, *map(ir.const, arrays))
    before = ir.IRModule.from_expr(Function([x], ir.Tuple([TupleGetItem(bn, 0), TupleGetItem(bn, 1)])))
    out = SimplifyInference(before)
    first, second = out.main.body.fields
    assert first.op_name == "add"
    assert isinstance(second, TupleGetItem) and second.tuple_value.op_name == "nn.batch_norm"
    ir.verify(out)
