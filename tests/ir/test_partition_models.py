"""The partitioner on a ResNet-50-shaped graph and a synthetic DAG (the benchmark's builders)."""

from __future__ import annotations

import importlib.util
import os

import pytest

from tidlx.ir import verify
from tidlx.ir.analysis import macs
from tidlx.ir.partition import PartitionLimits, partition

_BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "bench_partition.py")
_spec = importlib.util.spec_from_file_location("bench_partition", _BENCH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.fixture(scope="module")
def resnet50():
    mod = bench.resnet50()
    mod.infer_types()
    return mod


def test_resnet50_macs_match_the_published_figure(resnet50):
    # torchvision lists 4.09 G for ResNet-50 (convolutions and the classifier).
    result = partition(resnet50, lambda c: None, check=False)
    heavy = sum(macs(c) for r in result.regions for c in r.calls if c.op_name in ("nn.conv2d", "nn.dense"))
    assert abs(heavy / 4.09e9 - 1) < 0.005


@pytest.mark.parametrize("strategy", ["greedy", "max-offload", "min-transfer"])
def test_resnet50_splits_around_the_host_pool_like_tvm(resnet50, strategy):
    # As in TVM's partitioned ResNet-18 (relay-samples/10): everything up to the global pool
    # in one subgraph, the classifier in a second.
    result = partition(resnet50, bench.resnet_oracle, strategy=strategy)
    assert [r.name for r in result.regions] == ["tidl_0", "tidl_1"]
    first, second = result.regions
    assert first.layers[0] == "conv1" and first.num_nodes == 172 and len(first.outputs) == 1
    assert second.layers == ("fc",) and second.num_nodes == 2
    assert [h.call.op_name for h in result.host_calls] == ["nn.global_avg_pool2d", "nn.batch_flatten"]
    assert result.offloaded_macs > 0.99 * result.total_macs


def test_resnet50_with_few_nodes_per_subgraph(resnet50):
    limits = PartitionLimits(max_num_subgraphs=4, max_num_subgraph_nodes=48)
    greedy = partition(resnet50, bench.resnet_oracle, limits=limits)
    best = partition(resnet50, bench.resnet_oracle, limits=limits, strategy="max-offload")
    assert len(greedy.regions) == 4 and all(r.num_nodes <= 48 for r in greedy.regions)
    assert best.offloaded_macs >= greedy.offloaded_macs


def test_synthetic_dag_partitions_and_verifies():
    mod = bench.synthetic_dag(1500, seed=3)
    for strategy in ("greedy", "max-offload", "min-transfer"):
        result = partition(mod, bench.mask_oracle(0.8), strategy=strategy)
        verify(result.module)
        assert len(result.regions) <= 16
        assert all(r.num_io <= 32 and r.num_nodes <= 864 for r in result.regions)
