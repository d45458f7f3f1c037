"""The partition graph's quick leaf refs (plain tensors, constants, a field of a call's tuple)
are the general walk's, on every call of models that have all of them."""

import sys
from pathlib import Path

from tidlx.ir.partition.graph import PartitionGraph

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_partition import resnet50, resnet_bn_stack, synthetic_dag  # noqa: E402


def test_quick_refs_are_the_general_walks():
    quick = slow_only = 0
    projections = 0
    for mod in (resnet_bn_stack(140), synthetic_dag(800, seed=5), resnet50()):
        mod.infer_types()
        graph = PartitionGraph.build(mod, lambda c: None)
        for call in graph.calls:
            refs = graph._plain_refs(call.args)
            if refs is None:
                slow_only += 1
                continue
            quick += 1
            projections += sum(1 for _, path in refs if path)
            assert (refs, None) == graph._leaf_refs(call.args), call
    assert quick > 1000 and projections > 30 and slow_only > 10  # all three paths are exercised
