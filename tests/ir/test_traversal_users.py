"""``users``: every node's users in post order, the same computed from a walk the caller has."""

import sys
from pathlib import Path

import numpy as np

from tidlx.ir import Call, Function, TensorType, Tuple, TupleGetItem, Var, call, const
from tidlx.ir.traversal import children, post_order, users

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_partition import resnet_bn_stack, synthetic_dag  # noqa: E402


def _reference(root):
    out = {}
    for node in post_order(root):
        out.setdefault(node, [])
        for child in children(node):
            out.setdefault(child, []).append(node)
    return out


def _same(a, b):
    assert list(a) == list(b)
    for node in a:
        assert len(a[node]) == len(b[node]) and all(x is y for x, y in zip(a[node], b[node]))


def test_users_match_the_definition_on_calls_tuples_projections_and_functions():
    x = Var("x", TensorType((1, 4)))
    fn_param = Var("p", TensorType((1, 4)))
    inner = Function([fn_param], call("nn.relu", fn_param))
    twice = call("add", x, x)                       # one tensor read twice
    pair = Tuple([twice, call("sigmoid", x)])
    body = Tuple([Call(inner, [TupleGetItem(pair, 0)]), TupleGetItem(pair, 1), const(np.ones((1, 4), "float32"))])
    _same(users(body), _reference(body))
    assert users(body)[x] == [twice, twice, pair.fields[1]]
    for mod in (resnet_bn_stack(70), synthetic_dag(300, seed=2)):
        mod.infer_types()
        root = mod["main"].body
        _same(users(root), _reference(root))
        _same(users(root, post_order(root, enter_functions=False)), _reference(root))  # no nested fns here
