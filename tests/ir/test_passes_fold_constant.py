"""FoldConstant: before/after pairs, what is deliberately not folded, and numerics."""

import numpy as np
import pytest

import tidlx.emulator as emulator
import tidlx.ir as ir
from tidlx.ir.passes import fold_constant
from tidlx.ir.expr import Function, Tuple, TupleGetItem, Var
from tidlx.ir.passes import FoldConstant
from tidlx.ir.transform import PassContext, PassError
from tidlx.ir.types import TensorType

RNG = np.random.default_rng(0)


def tvar(name, shape, dtype="float32"):
    return Var(name, TensorType(shape, dtype))


def module(params, body, **functions):
    return ir.IRModule({"main": Function(params, body), **functions})


@pytest.fixture
def use_evaluator():
    """Registers a constant evaluator for one test: ``use_evaluator(fn)``; the emulator's is restored after."""
    previous = []

    def use(fn):
        previous.append(fold_constant.register_constant_evaluator(fn))

    yield use
    if previous:
        fold_constant.register_constant_evaluator(previous[0])


def emulator_evaluator(call, arrays):
    return emulator._evaluate_constant(call, arrays)


def test_folds_nested_constant_arithmetic():
    a = RNG.standard_normal((4,)).astype("float32")
    b = RNG.standard_normal((4,)).astype("float32")
    c = RNG.standard_normal((4,)).astype("float32")
    x = tvar("x", (2, 4))
    before = module([x], ir.call("add", x, ir.call("add", ir.const(a), ir.call("multiply", ir.const(b), ir.const(c)))))
    x2 = tvar("x", (2, 4))
    after = module([x2], ir.call("add", x2, ir.const(a + b * c)))
    out = FoldConstant(before)
    ir.assert_structural_equal(out, after)
    # the input module is untouched
    assert before.main.body.args[1].op_name == "add"


def test_folds_unary_chain_and_keeps_dtype():
    x = tvar("x", (3,), "float16")
    c = np.array([1.0, 4.0, 9.0], "float16")
    before = module([x], ir.call("multiply", x, ir.call("sqrt", ir.call("nn.relu", ir.const(c)))))
    out = FoldConstant(before)
    folded = out.main.body.args[1]
    assert isinstance(folded, ir.Constant) and folded.data.dtype == np.float16
    np.testing.assert_array_equal(folded.data, np.sqrt(c))


def test_folds_tuple_outputs_and_projections():
    x = tvar("x", (1, 3))
    data = RNG.standard_normal((1, 3)).astype("float32")
    params = [ir.const(v) for v in (np.ones(3, "float32"), np.zeros(3, "float32"),
                                    np.zeros(3, "float32"), np.ones(3, "float32"))]
    bn = ir.call("nn.batch_norm", ir.const(data), *params)
    before = module([x], ir.call("add", x, TupleGetItem(bn, 0)))
    out = FoldConstant(before)
    folded = out.main.body.args[1]
    assert isinstance(folded, ir.Constant)
    np.testing.assert_allclose(folded.data, data / np.sqrt(1 + 1e-5), rtol=1e-6)
    # a projection of a tuple expression is its field, constant or not
    y = tvar("y", (1, 3))
    before2 = module([x, y], TupleGetItem(Tuple([x, y]), 1))
    assert FoldConstant(before2).main.body is FoldConstant(before2).main.params[1]


def test_leaves_variables_and_unknown_kernels_alone(use_evaluator):
    x = tvar("x", (4,))
    before = module([x], ir.call("add", ir.call("exp", ir.const(np.ones(4, "float32"))), x))
    assert isinstance(FoldConstant(before).main.body.args[0], ir.Constant)
    # an evaluator without a kernel for exp (None) leaves the call
    use_evaluator(lambda call, arrays: None if call.op.name == "exp" else emulator_evaluator(call, arrays))
    ir.assert_structural_equal(FoldConstant(before), before)


def test_kernel_refusal_leaves_call_and_kernel_bug_is_named(use_evaluator):
    x = tvar("x", (4,))
    before = module([x], ir.call("add", ir.call("exp", ir.const(np.ones(4, "float32")), layer="Exp_3"), x))

    def refusing(call, arrays):
        if call.op.name == "exp":
            raise ir.TidlxError("exp: unsupported here")
        return emulator_evaluator(call, arrays)

    use_evaluator(refusing)
    ir.assert_structural_equal(FoldConstant(before), before)

    def buggy(call, arrays):
        raise ValueError("boom")

    use_evaluator(buggy)
    with pytest.raises(PassError, match=r"exp 'Exp_3'.*boom"):
        FoldConstant(before)


def test_without_an_evaluator_the_pass_names_the_package_to_import(use_evaluator):
    x = tvar("x", (4,))
    before = module([x], ir.call("add", ir.call("exp", ir.const(np.ones(4, "float32"))), x))
    use_evaluator(None)
    with pytest.raises(fold_constant.NoConstantEvaluatorError, match="import tidlx.emulator"):
        FoldConstant(before)


def test_the_emulator_evaluates_with_its_reference_kernels():
    """Importing tidlx.emulator registers its reference kernel set as FoldConstant's evaluator."""
    assert fold_constant.constant_evaluator() is emulator._evaluate_constant
    w = RNG.standard_normal((8, 4, 3, 3)).astype("float32")
    d = RNG.standard_normal((1, 4, 9, 9)).astype("float32")
    folded = FoldConstant(module([], ir.call("nn.conv2d", ir.const(d), ir.const(w), padding=(1, 1)))).main.body
    x = tvar("x", (1, 4, 9, 9))
    (want,) = emulator.run(module([x], ir.call("nn.conv2d", x, ir.const(w), padding=(1, 1))), {"x": d},
                           kernels="reference")
    assert folded.data.tobytes() == want.tobytes()


def test_does_not_blow_up_small_constants_into_big_ones():
    x = tvar("x", (64, 64, 64))
    big = ir.call("broadcast_to", ir.const(np.float32(2.0)), shape=(64, 64, 64))  # 1 MiB from 4 bytes
    before = module([x], ir.call("add", x, big))
    ir.assert_structural_equal(FoldConstant(before), before)
    y = tvar("y", (4, 4))
    small = module([y], ir.call("add", y, ir.call("broadcast_to", ir.const(np.float32(2.0)), shape=(4, 4))))
    assert isinstance(FoldConstant(small).main.body.args[1], ir.Constant)
    # the limit is a PassContext option
    with PassContext(config={"FoldConstant.max_growth": 1e9}):
        folded = FoldConstant(before).main.body.args[1]
    assert isinstance(folded, ir.Constant) and folded.data.shape == (64, 64, 64)


def test_never_folds_calls_of_tidl_functions_nor_inside_them():
    p = tvar("p", (4,))
    inner_const = ir.call("exp", ir.const(np.zeros(4, "float32")))
    tidl = Function([p], ir.call("add", p, inner_const), attrs={"Compiler": "tidl", "global_symbol": "tidl_0"})
    c = ir.const(np.ones(4, "float32"))
    mod = ir.IRModule({"tidl_0": tidl})
    gv = mod.get_global_var("tidl_0")
    x = tvar("x", (4,))
    local = Function([tvar("q", (4,))], ir.call("nn.relu", ir.const(np.ones(4, "float32"))),
                     attrs={"Composite": "tidl.relu"})
    mod["main"] = Function([x], ir.call("add", ir.Call(gv, [c]), ir.Call(local, [c])))
    out = FoldConstant(mod)
    assert out["tidl_0"] is tidl
    call_tidl, call_local = out.main.body.args
    assert isinstance(call_tidl, ir.Call) and call_tidl.op is gv
    assert call_local.op is local  # the composite function's body is not folded either


def test_qnn_ops_are_not_folded_by_default(use_evaluator):
    # A stand-in evaluator, so the policy is tested whether or not the emulator has QNN kernels.
    def fake_evaluator(call, arrays):
        assert call.op.name == "qnn.quantize"
        return np.round(arrays[0] / arrays[1]).astype("int8")

    use_evaluator(fake_evaluator)
    x = tvar("x", (4,), "int8")
    q = ir.call("qnn.quantize", ir.const(np.ones(4, "float32")), ir.const(np.float32(0.1)),
                ir.const(np.int32(0)), out_dtype="int8")
    before = module([x], ir.call("add", x, q))
    ir.assert_structural_equal(FoldConstant(before), before)
    with PassContext(config={"FoldConstant.fold_qnn": True}):
        folded = FoldConstant(before).main.body.args[1]
    assert isinstance(folded, ir.Constant)
    np.testing.assert_array_equal(folded.data, np.full(4, 10, "int8"))


def test_folding_keeps_results_numerically():
    x = tvar("x", (1, 3, 8, 8))
    w = RNG.standard_normal((4, 3, 3, 3)).astype("float32")
    scale = RNG.standard_normal((4, 1, 1)).astype("float32")
    w_expr = ir.call("multiply", ir.const(w), ir.call("expand_dims", ir.const(scale.reshape(4)), axis=1,
                                                      num_newaxis=3))
    conv = ir.call("nn.conv2d", x, w_expr, padding=(1, 1))
    before = module([x], ir.call("nn.relu", ir.call("add", conv, ir.call("exp", ir.const(scale)))))
    out = FoldConstant(before)
    assert isinstance(out.main.body.args[0].args[0].args[1], ir.Constant)
    data = RNG.standard_normal((1, 3, 8, 8)).astype("float32")
    np.testing.assert_allclose(emulator.run(out, {"x": data})[0], emulator.run(before, {"x": data})[0],
                               rtol=1e-5, atol=1e-5)
