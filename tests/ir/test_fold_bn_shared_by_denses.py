"""FoldBatchNormIntoDense with a batch norm that feeds several denses (BEVDet's camera-aware DepthNet:
``bn`` -> ``context_mlp.fc1`` and ``depth_mlp.fc1``): folded into each, or left alone when any user is
something else."""

import numpy as np
import pytest

import tidlx.emulator as emulator
import tidlx.ir as ir
from tidlx.ir.expr import Function, TupleGetItem, Var
from tidlx.ir.passes import FoldBatchNormIntoDense, SimplifyInference
from tidlx.ir.types import TensorType

RNG = np.random.default_rng(5)
FEATURES, HIDDEN, CAMERAS = 27, 8, 6


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def bn_arrays():
    return (RNG.uniform(0.5, 1.5, FEATURES).astype("float32"), rand(FEATURES), rand(FEATURES),
            RNG.uniform(0.2, 2.0, FEATURES).astype("float32"))


def ops_of(mod):
    return [c.op_name for c in ir.traversal.calls(mod.main.body)]


def camera_mlps(second_user="dense", simplified=False):
    """x (N, 27) -> bn -> fc1 of two MLPs (dense + bias_add + relu), or a relu as the second user."""
    x = Var("x", TensorType((CAMERAS, FEATURES), "float32"))
    arrays = bn_arrays()
    bn = TupleGetItem(ir.call("nn.batch_norm", x, *map(ir.const, arrays), axis=1, layer="bn"), 0)
    outputs = []
    for name in ("context_mlp.fc1", "depth_mlp.fc1"):
        if name == "depth_mlp.fc1" and second_user == "relu":
            outputs.append(ir.call("nn.relu", bn, layer="other"))
            continue
        dense = ir.call("nn.dense", bn, ir.const(rand(HIDDEN, FEATURES)), units=HIDDEN, layer=name)
        outputs.append(ir.call("nn.relu", ir.call("nn.bias_add", dense, ir.const(rand(HIDDEN)), axis=-1,
                                                  layer=name)))
    mod = ir.IRModule.from_expr(Function([x], ir.Tuple(outputs)))
    return (SimplifyInference(mod) if simplified else mod), arrays


@pytest.mark.parametrize("simplified", [False, True])
def test_batch_norm_feeding_two_denses_folds_into_each(simplified):
    before, arrays = camera_mlps(simplified=simplified)
    after = FoldBatchNormIntoDense(before)
    ops = ops_of(after)
    assert "nn.batch_norm" not in ops and "multiply" not in ops
    assert ops.count("nn.dense") == 2 and ops.count("nn.bias_add") == 2
    gamma, beta, mean, var = (a.astype(np.float64) for a in arrays)
    scale = gamma / np.sqrt(var + 1e-5)
    for field, original in zip(after.main.body.fields, before.main.body.fields):
        new_dense, old_dense = field.args[0].args[0], original.args[0].args[0]
        assert new_dense.args[0] is after.main.params[0]  # reads the raw features
        np.testing.assert_allclose(new_dense.args[1].data, old_dense.args[1].data * scale[None, :], rtol=1e-6)
    inputs = {"x": rand(CAMERAS, FEATURES)}
    for got, want in zip(emulator.run(after, inputs), emulator.run(before, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_batch_norm_with_a_user_that_is_not_a_dense_stays():
    before, _ = camera_mlps(second_user="relu")
    ir.assert_structural_equal(FoldBatchNormIntoDense(before), before)
