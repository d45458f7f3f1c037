"""The float interpreter: functions, closures, let, tuples, freeing, errors and input checks."""

import numpy as np
import pytest

from tidlx.emulator import EmulatorError, EmulatorInputError, RunStats, emulate, run
from tidlx.emulator import registry
from tidlx.emulator.interpreter import compiled_plan_count
from tidlx.ir import (Call, Function, FuncType, IRModule, Let, TensorType, Tuple, TupleGetItem, Var, call, const,
                      list_ops)
from tidlx.ir.errors import TidlxError

T4 = TensorType((2, 3), "float32")


def x_input(seed=0, shape=(2, 3)):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def test_every_registered_op_has_a_kernel():
    missing = [name for name in list_ops() if not registry.has_kernel(name, "reference")]
    assert missing == []
    assert [name for name in list_ops() if not registry.has_kernel(name)] == []  # the fast set overlays it


def test_straight_line_graph_matches_numpy():
    x = Var("x", T4)
    w = const(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = call("nn.relu", call("add", call("multiply", x, w), const(np.float32(-1.0))))
    mod = IRModule({"main": Function([x], y)})
    a = x_input()
    (out,) = run(mod, {"x": a})
    expected = np.maximum(a * np.arange(6, dtype=np.float32).reshape(2, 3) - np.float32(1), 0)
    np.testing.assert_array_equal(out, expected)
    assert emulate is run


def test_calls_into_other_global_functions_including_tidl_subgraphs():
    p = Var("p", T4)
    tidl = Function([p], call("tanh", call("multiply", p, p)), attrs={"Compiler": "tidl", "Primitive": 1,
                                                                      "global_symbol": "tidl_0"})
    q = Var("q", T4)
    helper = Function([q], call("negative", q))
    mod = IRModule({"tidl_0": tidl, "helper": helper})
    x = Var("x", T4)
    inner = Call(mod.get_global_var("tidl_0"), [x])
    mod["main"] = Function([x], call("add", Call(mod.get_global_var("helper"), [inner]), x))
    a = x_input(1)
    (out,) = run(mod, {"x": a})
    np.testing.assert_allclose(out, -np.tanh(a * a) + a, rtol=1e-6)
    # another entry point of the same module
    (sub,) = run(mod, {"p": a}, entry="tidl_0")
    np.testing.assert_allclose(sub, np.tanh(a * a), rtol=1e-6)


def test_closures_capture_let_values_and_are_called_twice():
    x, a, b, y = Var("x", T4), Var("a", T4), Var("b", T4), Var("y", T4)
    scale = Var("scale")
    f = Var("f")
    closure = Function([y], call("multiply", scale, y))
    body = Let(scale, call("add", x, const(np.float32(1.0))),
               Let(f, closure, Tuple([Call(f, [a]), Call(f, [b])])))
    mod = IRModule({"main": Function([x, a, b], body)})
    xa, aa, ba = x_input(1), x_input(2), x_input(3)
    out = run(mod, {"x": xa, "a": aa, "b": ba})
    assert len(out) == 2
    np.testing.assert_allclose(out[0], (xa + 1) * aa, rtol=1e-6)
    np.testing.assert_allclose(out[1], (xa + 1) * ba, rtol=1e-6)


def test_function_values_passed_to_globals_and_global_references():
    g, v = Var("g", FuncType((T4,), T4)), Var("v", T4)
    apply_twice = Function([g, v], Call(g, [Call(g, [v])]))
    d = Var("d", T4)
    double = Function([d], call("add", d, d))
    mod = IRModule({"apply_twice": apply_twice, "double": double})
    x = Var("x", T4)
    k = Var("k", T4)
    shift = Function([k], call("subtract", k, x))  # a closure over the entry's parameter
    h = Var("h")
    body = Let(h, mod.get_global_var("double"),
               Tuple([Call(mod.get_global_var("apply_twice"), [h, x]),
                      Call(mod.get_global_var("apply_twice"), [shift, x])]))
    mod["main"] = Function([x], body)
    a = x_input(4)
    quad, minus = run(mod, {"x": a})
    np.testing.assert_allclose(quad, 4 * a, rtol=1e-6)
    np.testing.assert_allclose(minus, -a, rtol=1e-6, atol=1e-7)


def test_tuples_projections_and_nested_outputs_flatten():
    x = Var("x", TensorType((2, 6), "float32"))
    parts = call("split", x, indices_or_sections=3, axis=1)
    first = TupleGetItem(parts, 0)
    last = TupleGetItem(parts, 2)
    body = Tuple([call("add", first, last), Tuple([TupleGetItem(parts, 1), x])])
    mod = IRModule({"main": Function([x], body)})
    a = x_input(5, (2, 6))
    out = run(mod, {"x": a})
    assert [o.shape for o in out] == [(2, 2), (2, 2), (2, 6)]
    np.testing.assert_allclose(out[0], a[:, :2] + a[:, 4:])
    np.testing.assert_array_equal(out[1], a[:, 2:4])
    np.testing.assert_array_equal(out[2], a)


def test_batch_norm_tuple_result_projection():
    x = Var("x", TensorType((1, 2, 3, 3), "float32"))
    vec = lambda v: const(np.array(v, np.float32))  # noqa: E731
    bn = call("nn.batch_norm", x, vec([1, 2]), vec([0, 1]), vec([0, 0]), vec([1, 1]), epsilon=0.0)
    mod = IRModule({"main": Function([x], TupleGetItem(bn, 0))})
    a = x_input(6, (1, 2, 3, 3))
    (out,) = run(mod, {"x": a})
    np.testing.assert_allclose(out, a * np.array([1, 2]).reshape(1, 2, 1, 1) + np.array([0, 1]).reshape(1, 2, 1, 1),
                               rtol=1e-6)


def test_long_chain_frees_values_and_does_not_recurse():
    x = Var("x", T4)
    y = x
    for i in range(10000):
        y = call("add", y, const(np.float32(1.0))) if i % 2 else call("nn.relu", y)
    mod = IRModule({"main": Function([x], y)})
    stats = RunStats()
    (out,) = run(mod, {"x": x_input(7)}, stats=stats)
    np.testing.assert_allclose(out, np.maximum(x_input(7), 0) + 5000, rtol=1e-6)
    assert stats.steps == 10000
    assert stats.peak_live_values <= 2


def test_long_let_chain_frees_values():
    x = Var("x", T4)
    vars_ = [Var(f"v{i}") for i in range(3000)]
    body = vars_[-1]
    for i in reversed(range(3000)):
        prev = x if i == 0 else vars_[i - 1]
        body = Let(vars_[i], call("add", prev, const(np.float32(0.5))), body)
    mod = IRModule({"main": Function([x], body)})
    stats = RunStats()
    (out,) = run(mod, {"x": x_input(8)}, stats=stats)
    np.testing.assert_allclose(out, x_input(8) + 1500, rtol=1e-5)
    assert stats.peak_live_values <= 2


def test_diamond_keeps_only_values_still_needed():
    x = Var("x", T4)
    a = call("nn.relu", x)
    branches = [call("multiply", a, const(np.float32(i))) for i in range(1, 6)]
    total = branches[0]
    for b in branches[1:]:
        total = call("add", total, b)
    mod = IRModule({"main": Function([x], total)})
    stats = RunStats()
    (out,) = run(mod, {"x": x_input(9)}, stats=stats)
    np.testing.assert_allclose(out, np.maximum(x_input(9), 0) * 15, rtol=1e-6)
    # relu result + at most the running sum and the branch just computed
    assert stats.peak_live_values <= 7


def test_plans_are_cached_and_rebuilt_when_a_function_changes():
    x = Var("x", T4)
    mod = IRModule({"main": Function([x], call("negative", x))})
    a = x_input(10)
    run(mod, {"x": a})
    run(mod, {"x": a})
    assert compiled_plan_count(mod) == 1
    mod["main"] = Function([x], call("abs", x))
    (out,) = run(mod, {"x": a})
    np.testing.assert_array_equal(out, np.abs(a))
    # a copy shares its functions, and so their plans
    from tidlx.emulator.interpreter import plan_of
    copy = mod.copy()
    assert plan_of(copy, "main") is plan_of(mod, "main")


def test_outputs_of_constants_are_writable_copies():
    x = Var("x", T4)
    c = const(np.ones((2, 3), np.float32))
    mod = IRModule({"main": Function([x], Tuple([c, call("reshape", c, newshape=(3, 2))]))})
    outs = run(mod, {"x": x_input()})
    for o in outs:
        o[...] = 0  # must not raise or touch the constant
    assert (c.data == 1).all()


# --- errors ------------------------------------------------------------------------------------

def test_kernel_error_names_binding_op_and_layer():
    x = Var("x", TensorType((4,), "float32"))
    i = Var("i", TensorType((2,), "int64"))
    first = call("nn.relu", x, layer="act")
    taken = call("take", first, i, axis=0, mode="fast", layer="gather_7")
    mod = IRModule({"main": Function([x, i], call("exp", taken))})
    with pytest.raises(EmulatorError) as err:
        run(mod, {"x": np.ones(4, np.float32), "i": np.array([0, 9], np.int64)})
    msg = str(err.value)
    assert "@main" in msg and "%1" in msg and "take" in msg and "'gather_7'" in msg and "out of range" in msg


def test_raw_python_errors_in_kernels_become_tidlx_errors():
    x = Var("x", TensorType((3,), "int32"))
    mod = IRModule({"main": Function([x], call("power", x, const(np.array(-1, np.int32)), layer="pow_1"))})
    with pytest.raises(TidlxError) as err:
        run(mod, {"x": np.array([1, 2, 3], np.int32)})
    assert "power 'pow_1'" in str(err.value) and "ValueError" in str(err.value)


def test_errors_in_called_functions_name_the_call_site():
    p = Var("p", TensorType((2,), "int64"))
    d = Var("d", TensorType((3,), "float32"))
    sub = Function([d, p], call("take", d, p, mode="fast", layer="inner_take"), attrs={"Compiler": "tidl"})
    mod = IRModule({"tidl_0": sub})
    x = Var("x", TensorType((3,), "float32"))
    i = Var("i", TensorType((2,), "int64"))
    mod["main"] = Function([x, i], call("nn.relu", Call(mod.get_global_var("tidl_0"), [call("abs", x), i])))
    with pytest.raises(EmulatorError) as err:
        run(mod, {"x": np.ones(3, np.float32), "i": np.array([5, 0], np.int64)})
    msg = str(err.value)
    assert "@tidl_0" in msg and "inner_take" in msg and "called from @main, binding %1" in msg


def test_wrong_kernel_result_is_reported():
    class BrokenRelu(registry.KernelSet):
        def lookup(self, op):
            if op.name == "nn.relu":
                return registry.Kernel(lambda args, attrs, t: args[0].astype(np.float64))
            return super().lookup(op)

    x = Var("x", T4)
    mod = IRModule({"main": Function([x], call("nn.relu", x, layer="r"))})
    with pytest.raises(EmulatorError, match="kernel returned float64"):
        run(mod, {"x": x_input()}, kernels=BrokenRelu("broken-relu", (registry.REFERENCE,)))


def _two_input_module():
    x, y = Var("x", T4), Var("y", TensorType((3,), "int32"))
    return IRModule({"main": Function([x, y], call("add", x, call("cast", y, dtype="float32")))})


def test_input_validation_messages():
    mod = _two_input_module()
    good = {"x": x_input(), "y": np.arange(3, dtype=np.int32)}
    (out,) = run(mod, good)
    assert out.shape == (2, 3)
    with pytest.raises(EmulatorInputError, match="missing input 'y'"):
        run(mod, {"x": good["x"]})
    with pytest.raises(EmulatorInputError, match="unknown input 'z'"):
        run(mod, dict(good, z=good["x"]))
    with pytest.raises(EmulatorInputError, match=r"input 'x' of @main has shape \(3, 2\), expected \(2, 3\)"):
        run(mod, dict(good, x=good["x"].reshape(3, 2)))
    with pytest.raises(EmulatorInputError, match="input 'y' of @main has dtype int64, expected int32"):
        run(mod, dict(good, y=np.arange(3)))
    with pytest.raises(EmulatorInputError, match="dict of name"):
        run(mod, [good["x"], good["y"]])
    # plain Python values are converted to the parameter's dtype
    (out2,) = run(mod, {"x": good["x"].tolist(), "y": [0, 1, 2]})
    np.testing.assert_array_equal(out2, out)


def test_unknown_entry_and_non_module():
    mod = _two_input_module()
    with pytest.raises(EmulatorError, match="no function @nope"):
        run(mod, {}, entry="nope")
    with pytest.raises(EmulatorError, match="takes an IRModule"):
        run("not a module", {})


def test_function_without_module_is_accepted():
    x = Var("x", T4)
    (out,) = run(Function([x], call("sigmoid", x)), {"x": np.zeros((2, 3), np.float32)})
    np.testing.assert_array_equal(out, np.full((2, 3), 0.5, np.float32))
