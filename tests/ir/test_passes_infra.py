"""Pass infrastructure: named passes, Sequential, PassContext options and their errors."""

import pytest

import tidlx.ir as ir
from tidlx.ir import TidlxError
from tidlx.ir.expr import Function, Var
from tidlx.ir.passes import PASSES, inference_pipeline
from tidlx.ir.transform import (FunctionPass, PassContext, PassError, Sequential, config_options, function_pass,
                                module_pass, registered_passes)
from tidlx.ir.types import TensorType


def tiny_module():
    x = Var("x", TensorType((2,), "float32"))
    return ir.IRModule.from_expr(Function([x], ir.call("nn.relu", x)))


def renaming_pass(name, opt_level=0, log=None):
    @module_pass(name, opt_level=opt_level)
    def fn(mod, ctx):
        if log is not None:
            log.append(name)
        out = mod.copy()
        main = mod.main
        out["main"] = Function(main.params, ir.call("sigmoid", main.body), main.ret_type, main.attrs)
        return out
    return fn


def test_passes_are_listed_by_name():
    assert set(PASSES) == {"FoldConstant", "DeadCodeElimination", "SimplifyInference", "FoldBatchNormIntoConv",
                           "FoldBatchNormIntoDense", "RemoveIdentityOps", "ConvertMaxMinToClip",
                           "SplitAsymmetricStrideConv", "MergePadIntoConv"}
    for name, p in PASSES.items():
        assert p.name == name and registered_passes()[name] is p


def test_module_pass_returns_a_new_module():
    p = renaming_pass("TestWrapSigmoid")
    mod = tiny_module()
    out = p(mod)
    assert out is not mod and out.main.body.op_name == "sigmoid"
    assert mod.main.body.op_name == "nn.relu"


def test_sequential_runs_in_order_and_gates_on_opt_level():
    log = []
    low, high = renaming_pass("TestLow", 1, log), renaming_pass("TestHigh", 3, log)
    seq = Sequential([low, high])
    with PassContext(opt_level=2) as ctx:
        out = seq(tiny_module())
    assert log == ["TestLow"] and ("TestHigh", "opt_level") in ctx.history
    assert out.main.body.op_name == "sigmoid" and out.main.body.args[0].op_name == "nn.relu"
    with PassContext(opt_level=2, required_passes=["TestHigh"]):
        seq(tiny_module())
    assert log == ["TestLow", "TestLow", "TestHigh"]
    # calling a pass directly runs it whatever the opt_level
    with PassContext(opt_level=0):
        high(tiny_module())
    assert log[-1] == "TestHigh"


def test_disabled_pass_is_skipped_by_name_everywhere():
    log = []
    p = renaming_pass("TestDisableMe", 0, log)
    mod = tiny_module()
    with PassContext(disabled_passes=["TestDisableMe"]) as ctx:
        out = Sequential([p])(mod)
        direct = p(mod)
    assert log == [] and ctx.history.count(("TestDisableMe", "disabled")) == 2
    ir.assert_structural_equal(out, mod)
    ir.assert_structural_equal(direct, mod)
    assert out is not mod
    # a named pipeline can be disabled as a whole
    named = Sequential([p], name="TestPipeline")
    with PassContext(disabled_passes="TestPipeline"):
        named(mod)
    assert log == []


def test_unknown_pass_name_suggests_the_closest():
    with pytest.raises(PassError, match="unknown pass 'FoldBatchNormIntoDens'.*did you mean FoldBatchNormIntoDense"):
        PassContext(disabled_passes=["FoldBatchNormIntoDens"])
    with pytest.raises(PassError, match="unknown pass"):
        PassContext(required_passes=["NoSuchPassAtAll"])
    assert issubclass(PassError, TidlxError)


def test_bad_options_are_errors():
    with pytest.raises(PassError, match="opt_level"):
        PassContext(opt_level=7)
    with pytest.raises(PassError, match="did you mean FoldConstant.max_growth"):
        PassContext(config={"FoldConstant.max_grwoth": 2.0})
    with pytest.raises(PassError, match="must be bool"):
        PassContext(config={"FoldConstant.fold_qnn": "yes"})
    with pytest.raises(PassError, match="both disabled and required"):
        PassContext(disabled_passes=["FoldConstant"], required_passes=["FoldConstant"])
    with pytest.raises(PassError, match="not a pass"):
        Sequential([PASSES["FoldConstant"], "DeadCodeElimination"])
    with pytest.raises(PassError, match="takes an IRModule"):
        PASSES["FoldConstant"](tiny_module().main)
    assert "FoldConstant.max_growth" in config_options()


def test_contexts_nest():
    outer = PassContext(opt_level=1)
    inner = PassContext(opt_level=3)
    default = PassContext.current()
    with outer:
        assert PassContext.current() is outer
        with inner:
            assert PassContext.current() is inner
        assert PassContext.current() is outer
    assert PassContext.current() is default and default.opt_level == 2


def test_verify_each_pass_names_the_pass_that_broke_the_module():
    @module_pass("TestBreaker")
    def breaker(mod, ctx):
        out = mod.copy()
        stray = Var("stray", TensorType((2,), "float32"))
        out["main"] = Function(mod.main.params, ir.call("add", mod.main.body, stray))
        return out

    breaker(tiny_module())  # unchecked by default
    with PassContext(config={"verify_each_pass": True}):
        with pytest.raises(PassError, match="after pass TestBreaker.*stray"):
            Sequential([PASSES["FoldConstant"], breaker])(tiny_module())


def test_function_pass_skips_external_functions():
    seen = []

    @function_pass("TestVisitFunctions")
    def visit(func, mod, ctx):
        seen.append(func)
        return func

    assert isinstance(visit, FunctionPass)
    x = Var("x", TensorType((2,), "float32"))
    ext = Function([x], ir.call("nn.relu", x), attrs={"Compiler": "tidl"})
    mod = tiny_module()
    mod["tidl_0"] = ext
    visit(mod)
    assert seen == [mod.main]


def test_pipeline_is_a_sequential_of_registered_passes():
    pipe = inference_pipeline()
    assert all(p.name in PASSES for p in pipe.passes)
    mod = tiny_module()
    ir.assert_structural_equal(pipe(mod), mod)
    assert len(pipe.passes) >= 5
