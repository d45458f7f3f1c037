"""The quick structural test of patterns (``Pattern._may_match``) never refuses a node the full
match accepts: every pattern of the TIDL composite table and of the preparation passes' rewrite
tables, on every node of models that exercise them, matches the same with and without it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tidlx.backends.tidl.composites import composite_specs
from tidlx.ir import pattern as pattern_module
from tidlx.ir.passes.fold_bn_dense import FOLD_BN_INTO_DENSE
from tidlx.ir.passes.fold_constant import fold_constant_table
from tidlx.ir.pattern import Pattern, is_op, is_tuple, is_tuple_get_item, wildcard
from tidlx.ir.traversal import post_order

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_partition import resnet50, resnet_bn_stack, synthetic_dag  # noqa: E402


def _patterns():
    out = [spec.pattern for spec in composite_specs()]
    out += [rule.pattern for rule in FOLD_BN_INTO_DENSE.rules]
    import tidlx.emulator  # noqa: F401  (FoldConstant's evaluator)
    out += [rule.pattern for rule in fold_constant_table().rules]
    x = wildcard()
    out += [is_op("add")(x, x), is_tuple_get_item(is_op("nn.batch_norm")(wildcard(), wildcard(), wildcard(),
                                                                          wildcard(), wildcard()), 0),
            is_tuple([wildcard(), is_op("nn.relu")]), is_op("add")(wildcard(), wildcard()).commutative()]
    return out


def _nodes():
    nodes = []
    for mod in (resnet50(), resnet_bn_stack(300), synthetic_dag(600, seed=3)):
        mod.infer_types()
        nodes += post_order(mod["main"].body, enter_functions=False)
    return nodes


def _all_pattern_classes():
    seen, todo = [], [Pattern]
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo += cls.__subclasses__()
    return seen


def _full_matches(patterns, nodes):
    return [[p.match(n) is not None for n in nodes] for p in patterns]


def test_quick_reject_never_refuses_a_match(monkeypatch):
    patterns, nodes = _patterns(), _nodes()
    with_quick = _full_matches(patterns, nodes)
    assert any(any(row) for row in with_quick)  # the models do exercise the patterns
    for cls in _all_pattern_classes():
        monkeypatch.setattr(cls, "_may_match", lambda self, expr: True, raising=False)
    without_quick = _full_matches(patterns, nodes)
    for p, a, b in zip(patterns, with_quick, without_quick):
        assert a == b, f"quick reject changed the matches of {p!r}"


def test_a_subclass_that_matches_its_own_way_gets_no_quick_test():
    class EveryCall(pattern_module.CallPattern):
        def _match_node(self, expr, env):
            yield env

    p = EveryCall(is_op("nn.relu"), [wildcard()])
    assert p._may_match(object()) is True


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
