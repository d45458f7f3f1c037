"""Outlining types what it builds (the host calls rebuilt after a subgraph, the projections of
batch norms on the host, the subgraphs and their Composite functions, @main itself) with the
types inference would give, so that verifying the partitioned module types nothing again."""

from __future__ import annotations

import sys
from pathlib import Path

import tidlx.ir as ir
from tidlx.ir.partition import PartitionLimits, partition
from tidlx.ir.traversal import post_order

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_partition import resnet_bn_stack  # noqa: E402


def _untyped(mod):
    return [(name, node) for name, fn in mod.items() for node in post_order(fn) if not node.has_type]


def test_every_node_of_the_partitioned_module_is_typed_when_outlining_ends():
    mod = resnet_bn_stack(140)   # 20 blocks
    mod.infer_types()
    groups = []
    for node in post_order(mod["main"].body):
        if isinstance(node, ir.Call) and node.op_name == "nn.batch_norm":
            groups.append([node.args[0], node])  # conv + bn, as a composite
    # Two small subgraphs: most blocks stay on the host, downstream of the subgraphs' outputs.
    result = partition(mod, lambda c: None, groups=groups, limits=PartitionLimits(2, 12, 32),
                       composite_name=lambda calls: "test." + calls[0].op_name, check=False)
    assert result.num_subgraphs == 2 and len(result.host_calls) > 100
    assert _untyped(result.module) == []
    # and they are the types inference gives: each call's from its op's type relation, each
    # projection's from its tuple
    checked = 0
    for _, fn in result.module.items():
        for node in post_order(fn):
            if isinstance(node, ir.Call) and isinstance(node.op, ir.Op):
                want = node.op.type_rel([a.checked_type for a in node.args], node.attrs)
            elif isinstance(node, ir.TupleGetItem):
                want = node.tuple_value.checked_type.fields[node.index]
            else:
                continue
            assert node.checked_type == want, node
            checked += 1
    assert checked > 150
    ir.verify(result.module)
