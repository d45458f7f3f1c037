"""verify reports an unbound variable before anything else in a function, then the first
other problem in post order (a variable bound twice, a call with the wrong arity or
attributes, a call of an undefined global)."""

import pytest

from tidlx.ir import Call, Function, GlobalVar, IRModule, TensorType, Var, VerifyError, call, verify
from tidlx.ir.expr import Let


def _x():
    return Var("x", TensorType((1, 4)))


def _message(mod):
    with pytest.raises(VerifyError) as info:
        verify(mod)
    return str(info.value)


def test_an_unbound_variable_comes_first():
    x, y = _x(), Var("y", TensorType((1, 4)))
    bad_arity = Call(call("nn.relu", x).op, [x, x])
    mod = IRModule({"main": Function([x], call("add", bad_arity, y))})
    assert "variable(s) %y are used but never bound" in _message(mod)


def test_the_first_problem_in_post_order_is_reported():
    x = _x()
    relu = call("nn.relu", x).op
    v = Var("v", TensorType((1, 4)))
    twice = Let(v, call("nn.relu", x), Let(v, call("nn.relu", v), v))
    bad_after = Call(relu, [twice, x])  # post order: the lets (%v bound twice), then this bad call
    assert "variable %v is bound twice" in _message(IRModule({"main": Function([x], bad_after)}))
    w = Var("w", TensorType((1, 4)))
    bad_first = Let(w, Call(relu, [x, x]), Let(w, call("nn.relu", x), w))  # the bad call comes first
    assert "takes 1 inputs, got 2" in _message(IRModule({"main": Function([x], bad_first)}))
    missing = Call(GlobalVar("nowhere"), [x])
    assert "calls @nowhere, which is not defined" in _message(IRModule({"main": Function([x], missing)}))
