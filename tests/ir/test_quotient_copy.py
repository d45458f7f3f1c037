"""PartitionGraph.quotient() hands out copies of the DAG its atoms were checked on: each the
same as one built afresh, and merging in one leaves the graph's and the others as they were."""

import sys
from pathlib import Path

from tidlx.backends.tidl.flow import analyse
from tidlx.ir.partition.graph import PartitionGraph
from tidlx.ir.partition.quotient import QuotientDag

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_partition import resnet_bn_stack  # noqa: E402


def _state(q):
    n = len(q.parent)
    roots = [q.find(x) for x in range(n)]
    return (roots, [q.pos[r] for r in roots], [sorted(q.members[r]) for r in roots], [q.weight[r] for r in roots],
            [sorted(q.find(s) for s in q.succ[r]) for r in roots], [sorted(q.find(p) for p in q.pred[r]) for r in roots])


def test_quotient_copies_equal_a_fresh_dag_and_are_independent():
    analysis = analyse(resnet_bn_stack(140))
    graph = PartitionGraph.build(analysis.prepared, analysis.oracle, [g.calls for g in analysis.groups])
    fresh = QuotientDag(len(graph.calls), graph.users, [m for m in graph.atoms if len(m) > 1])
    a, b = graph.quotient(), graph.quotient()
    assert _state(a) == _state(fresh) == _state(b)
    merged = 0
    for c in range(len(graph.calls)):
        for d in graph.deps[c]:
            if a.try_merge(a.find(d), a.find(c), None):
                merged += 1
    assert merged > 10
    assert _state(b) == _state(fresh) == _state(graph.quotient())
    assert _state(a) != _state(fresh)
