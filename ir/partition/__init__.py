"""Graph partitioning: which calls of ``@main`` go to an accelerator, in which subgraphs.

Modelled on TVM's AnnotateTarget -> MergeCompilerRegions -> PartitionGraph and torch.fx's
CapabilityBasedPartitioner: a support oracle marks calls, regions grow along edges, and any
merge that would create a cycle is refused. Target rules (TIDL's, in backends/tidl) come in
as the oracle, composite groups and limits::

    from tidlx.ir.partition import partition, PartitionLimits

    result = partition(mod, lambda call: "no softmax" if call.op_name == "nn.softmax" else None,
                       strategy="max-offload", limits=PartitionLimits(max_num_subgraphs=4))
    result.module            # @main calling @tidl_0, @tidl_1, ... (Compiler="tidl")
    result.regions[0].layers # layer names offloaded to @tidl_0
    result.host_calls        # what stays on the host, and why

The oracle is called once per op call of ``@main``, in post order, after type inference (so
``call.checked_type`` and the arguments' types are available); it returns None when the
target takes the call and otherwise a non-empty reason, which is reported verbatim. Calls of
global functions or closures stay on the host. Groups are sequences of calls that share a
subgraph or all stay on the host (e.g. conv2d + bias_add + relu); they must be convex.

Rules that keep a supported call on the host, each reported with its reason:
its composite group has an unsupported member; its subgraph exceeds
``max_num_subgraph_nodes`` or ``max_subgraph_io``; its subgraph has fewer than
``min_subgraph_macs`` MACs (default 0: off); its subgraph is not among the
``max_num_subgraphs`` with the most MACs; and, for ``min-transfer`` only, the cost model
says the host is cheaper. A cycle is never a reason: calls a merge would make cyclic go to
another subgraph instead.
"""

from .gcpause import gc_paused
from .graph import PartitionError, PartitionGraph, SupportOracle
from .partitioner import Boundary, HostCall, PartitionResult, Region, partition
from .quotient import CycleError, QuotientDag
from .regions import PartitionLimits, StrategyOutcome
from .strategies import CostModel, get_strategy, list_strategies, register_strategy

__all__ = ["partition", "PartitionResult", "Region", "HostCall", "Boundary", "PartitionLimits", "CostModel",
           "PartitionError", "PartitionGraph", "SupportOracle", "StrategyOutcome", "register_strategy",
           "get_strategy", "list_strategies", "QuotientDag", "CycleError", "gc_paused"]
