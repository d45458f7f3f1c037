"""The continuation-passing matcher (``Pattern._first``, what ``match`` and the rewriter run) finds
the same first match as the generators of ``Pattern._iter``, for every pattern of the TIDL
composite table and the preparation passes on every node of models that exercise them, and it
backtracks the same way: into later alternatives when a later argument or the caller refuses."""

from __future__ import annotations

import numpy as np

from tidlx.ir import Function, IRModule, TensorType, Var, call, const
from tidlx.ir.pattern import _found, is_constant, is_op, wildcard
from tidlx.ir.rewrite import RewriteTable

from test_pattern_quick_reject import _nodes, _patterns


def _first_by_generators(pattern, node):
    for env in pattern._iter(node, {}):
        return env
    return None


def test_first_match_is_the_generators_first_match():
    patterns, nodes = _patterns(), _nodes()
    matched = 0
    for p in patterns:
        for n in nodes:
            want = _first_by_generators(p, n)
            got = p._first(n, {}, _found)
            if want is None:
                assert got is None, f"{p!r} matched {n!r} only without generators"
                continue
            matched += 1
            assert got is not None, f"{p!r} did not match {n!r}"
            assert got.keys() == want.keys() and all(got[k] is want[k] for k in want), p
    assert matched > 100  # the models do exercise the patterns


def _two_adds():
    x = Var("x", TensorType((1, 4)))
    a = call("nn.relu", x)
    b = call("sigmoid", x)
    return x, a, b, call("add", a, b)


def test_a_shared_capture_backtracks_into_the_next_alternative():
    x, a, b, root = _two_adds()
    v = wildcard()
    # The first alternative binds v to relu's input, then sigmoid's input must be the same node
    # (it is: %x); with v bound to relu itself, the commuted order is tried and fails.
    pattern = is_op("add")(is_op("nn.relu", "tanh")(v), is_op("sigmoid")(v)).commutative()
    m = pattern.match(root)
    assert m is not None and m[v] is x
    swapped = is_op("add")(is_op("sigmoid")(v), is_op("nn.relu")(v)).commutative()
    assert swapped.match(root)[v] is x  # found by the second alternative only


def test_a_rule_that_declines_gets_the_next_way_of_matching():
    x, a, b, root = _two_adds()
    mod = IRModule({"main": Function([x], root)})
    mod.infer_types()
    seen = []

    def take_the_second(m):
        seen.append(m["first"])
        return None if len(seen) == 1 else m["first"]  # decline the first way, take the second

    either = wildcard().named("first")
    table = RewriteTable([("either", is_op("add")(either, wildcard()).commutative(), take_the_second)])
    out = table.rewrite(mod)
    assert seen == [a, b]
    assert out["main"].body.op_name == "sigmoid"


def test_constraints_and_names_refuse_inside_the_continuation():
    x = Var("x", TensorType((1, 4)))
    y = call("add", call("nn.relu", x), const(np.zeros((1, 4), "float32")))
    zero = is_constant().where(lambda c: not c.data.any())
    assert is_op("add")(wildcard(), zero).match(y) is not None
    assert is_op("add")(wildcard(), is_constant().where(lambda c: c.data.any())).match(y) is None
    same = wildcard().named("v")
    assert is_op("add")(same, wildcard().named("v")).match(y) is None  # two captures "v", two nodes
