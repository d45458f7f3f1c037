"""DeadCodeElimination: unused lets, single-use inlining, unreachable globals, long let chains."""

import numpy as np

import tidlx.ir as ir
from tidlx.ir.expr import Call, Function, Let, Var
from tidlx.ir.passes import DeadCodeElimination
from tidlx.ir.transform import PassContext
from tidlx.ir.types import TensorType


def tvar(name, shape=(2, 3)):
    return Var(name, TensorType(shape, "float32"))


def test_drops_unused_let():
    x, dead = tvar("x"), tvar("dead")
    before = ir.IRModule({"main": Function([x], Let(dead, ir.call("exp", x), ir.call("nn.relu", x)))})
    x2 = tvar("x")
    after = ir.IRModule({"main": Function([x2], ir.call("nn.relu", x2))})
    ir.assert_structural_equal(DeadCodeElimination(before), after)


def test_unused_lets_whose_values_use_each_other_all_go():
    x, a, b = tvar("x"), tvar("a"), tvar("b")
    body = Let(a, ir.call("exp", x), Let(b, ir.call("nn.relu", a), ir.call("sigmoid", x)))
    out = DeadCodeElimination(ir.IRModule({"main": Function([x], body)}))
    x2 = tvar("x")
    ir.assert_structural_equal(out, ir.IRModule({"main": Function([x2], ir.call("sigmoid", x2))}))


def test_inlines_single_use_let_unless_disabled():
    x, a = tvar("x"), tvar("a")
    before = ir.IRModule({"main": Function([x], Let(a, ir.call("exp", x), ir.call("nn.relu", a)))})
    x2 = tvar("x")
    inlined = ir.IRModule({"main": Function([x2], ir.call("nn.relu", ir.call("exp", x2)))})
    ir.assert_structural_equal(DeadCodeElimination(before), inlined)
    with PassContext(config={"DeadCodeElimination.inline_once": False}):
        ir.assert_structural_equal(DeadCodeElimination(before), before)


def test_keeps_let_used_twice_and_let_used_inside_a_closure():
    x, a = tvar("x"), tvar("a")
    twice = ir.IRModule({"main": Function([x], Let(a, ir.call("exp", x), ir.call("add", a, a)))})
    ir.assert_structural_equal(DeadCodeElimination(twice), twice)
    y, b, p = tvar("y"), tvar("b"), tvar("p")
    closure = Function([p], ir.call("add", p, b))
    in_closure = ir.IRModule({"main": Function([y], Let(b, ir.call("exp", y), Call(closure, [y])))})
    ir.assert_structural_equal(DeadCodeElimination(in_closure), in_closure)


def test_removes_globals_unreachable_from_main():
    def unary(op):
        p = tvar("p")
        return Function([p], ir.call(op, p))

    mod = ir.IRModule({"g": unary("exp"), "unused": unary("tanh")})
    f_p = tvar("p")
    mod["f"] = Function([f_p], Call(mod.get_global_var("g"), [f_p]))
    x = tvar("x")
    mod["main"] = Function([x], Call(mod.get_global_var("f"), [x]))
    out = DeadCodeElimination(mod)
    assert sorted(out) == ["f", "g", "main"]
    assert "unused" in mod  # input untouched
    ir.verify(out)
    # without @main nothing is known to be unreachable
    no_main = ir.IRModule({"a": unary("exp"), "b": unary("tanh")})
    assert sorted(DeadCodeElimination(no_main)) == ["a", "b"]


def test_external_functions_are_left_alone():
    p, dead = tvar("p"), tvar("dead")
    tidl = Function([p], Let(dead, ir.call("exp", p), p), attrs={"Compiler": "tidl"})
    mod = ir.IRModule({"tidl_0": tidl})
    x = tvar("x")
    mod["main"] = Function([x], Call(mod.get_global_var("tidl_0"), [x]))
    assert DeadCodeElimination(mod)["tidl_0"] is tidl


def test_ten_thousand_let_chain():
    x = tvar("x")
    names = [tvar(f"v{i}") for i in range(10000)]
    # v0 = relu(x); v_i = relu(v_{i-1}); plus a dead let every 2nd step; result v_last
    body = names[-1]
    for i in reversed(range(10000)):
        value = ir.call("nn.relu", x if i == 0 else names[i - 1])
        body = Let(names[i], value, body)
        if i % 2:
            body = Let(tvar(f"dead{i}"), ir.call("exp", x), body)
    out = DeadCodeElimination(ir.IRModule({"main": Function([x], body)}))
    node, depth = out.main.body, 0
    while isinstance(node, Call):
        assert node.op_name == "nn.relu"
        node, depth = node.args[0], depth + 1
    assert depth == 10000 and node is out.main.params[0]
    data = np.arange(6, dtype="float32").reshape(2, 3) - 3
    import tidlx.emulator as emulator
    np.testing.assert_array_equal(emulator.run(out, {"x": data})[0], np.maximum(data, 0))
