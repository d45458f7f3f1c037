"""Partitioning strategies, registered by name.

A strategy takes the ``PartitionGraph``, the limits and a cost model and returns regions plus
a reason for every supported call it leaves on the host. The driver then applies TI's final
limits (``apply_limits``) whatever the strategy did, so every strategy's output obeys them.

* ``greedy`` — TVM's AnnotateTarget -> MergeCompilerRegions: merge supported neighbours
  whenever no cycle results. Regions over the I/O limit are returned to the host whole, as TI
  does; beyond ``max_num_subgraphs`` the smallest are pruned.
* ``max-offload`` — most MACs on the target within the limits: greedy, then regions over the
  I/O limit are cut into topologically contiguous pieces instead of being dropped, and while
  there are too many regions the smallest is merged into a nearby one (also one it shares no
  edge with) when the union is acyclic and within the limits.
* ``min-transfer`` — lowest estimated time under ``CostModel``: bytes crossing subgraph
  boundaries, a launch cost per subgraph, MACs on the host or target. Starts like
  max-offload, then moves boundary ops to the host when that saves more transfer than it
  costs compute, and returns subgraphs that do not pay for their transfer and launch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List

from ..errors import closest
from .graph import PartitionError, PartitionGraph
from .regions import (PartitionLimits, StrategyOutcome, grow, merge_to_fit, split_over_limits,
                      trim_boundary)


@dataclass(frozen=True)
class CostModel:
    """Rough time model of a host + accelerator system (defaults: an Arm A72 host and a
    C7x/MMA target on a TDA4-class chip; they are estimates, pass your own figures).

    A subgraph costs ``launch_s`` plus its boundary bytes at ``transfer_bytes_per_s`` plus its
    MACs at ``target_macs_per_s``; a call on the host costs its MACs at ``host_macs_per_s``.
    """

    transfer_bytes_per_s: float = 2e9
    launch_s: float = 100e-6
    host_macs_per_s: float = 10e9
    target_macs_per_s: float = 1e12

    def __post_init__(self):
        for name in ("transfer_bytes_per_s", "launch_s", "host_macs_per_s", "target_macs_per_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
                    or value != value or value == float("inf"):
                raise PartitionError(f"cost model {name} must be a positive finite number, got {value!r}")

    def subgraph_seconds(self, io_bytes: int, macs: int) -> float:
        return self.launch_s + io_bytes / self.transfer_bytes_per_s + macs / self.target_macs_per_s

    def host_seconds(self, macs: int) -> float:
        return macs / self.host_macs_per_s


Strategy = Callable[[PartitionGraph, PartitionLimits, CostModel], StrategyOutcome]
_STRATEGIES: Dict[str, Strategy] = {}
_DESCRIPTIONS: Dict[str, str] = {}


def register_strategy(name: str, description: str = ""):
    """Decorator: ``@register_strategy("my-strategy")`` makes it selectable by name."""
    def register(fn: Strategy) -> Strategy:
        if name in _STRATEGIES:
            raise ValueError(f"partition strategy '{name}' is registered twice")
        _STRATEGIES[name] = fn
        _DESCRIPTIONS[name] = description or (fn.__doc__ or "").strip().split("\n")[0]
        return fn
    return register


def get_strategy(name: str) -> Strategy:
    if not isinstance(name, str):
        raise TypeError(f"a partition strategy is named by a str ({', '.join(sorted(_STRATEGIES))}), got "
                        f"{type(name).__name__}")
    fn = _STRATEGIES.get(name)
    if fn is None:
        hint = closest(name, _STRATEGIES)
        raise PartitionError(f"unknown partition strategy '{name}'"
                             + (f"; did you mean {', '.join(hint)}?" if hint else "")
                             + f" (known: {', '.join(sorted(_STRATEGIES))})")
    return fn


def list_strategies() -> Dict[str, str]:
    """Strategy names and one-line descriptions."""
    return dict(sorted(_DESCRIPTIONS.items()))


@register_strategy("greedy")
def greedy(graph: PartitionGraph, limits: PartitionLimits, cost: CostModel) -> StrategyOutcome:
    """TVM's MergeCompilerRegions: merge supported neighbours whenever no cycle results."""
    _, regions = grow(graph, limits.max_num_subgraph_nodes)
    return StrategyOutcome(regions, {})


@register_strategy("max-offload")
def max_offload(graph: PartitionGraph, limits: PartitionLimits, cost: CostModel) -> StrategyOutcome:
    """Most MACs on the target: split regions over the I/O limit, merge regions to fit the count."""
    _, regions = grow(graph, limits.max_num_subgraph_nodes)
    regions = split_over_limits(graph, regions, limits.max_subgraph_io, limits.max_num_subgraph_nodes)
    regions = merge_to_fit(graph, regions, limits)
    return StrategyOutcome(regions, {})


@register_strategy("min-transfer")
def min_transfer(graph: PartitionGraph, limits: PartitionLimits, cost: CostModel) -> StrategyOutcome:
    """Lowest estimated time: boundary bytes + launches + MACs, under the CostModel."""
    _, regions = grow(graph, limits.max_num_subgraph_nodes)
    regions = split_over_limits(graph, regions, limits.max_subgraph_io, limits.max_num_subgraph_nodes)

    def gain_of_moving(delta_bytes: int, macs: int) -> float:
        # Seconds saved by running the atom on the host instead of in the subgraph.
        saved_transfer = -delta_bytes / cost.transfer_bytes_per_s
        extra_compute = cost.host_seconds(macs) - macs / cost.target_macs_per_s
        return saved_transfer - extra_compute

    regions, moved = trim_boundary(graph, regions, gain_of_moving)
    reasons: Dict[int, str] = {}
    for c, saved in moved.items():
        reasons[c] = (f"min-transfer: running it on the host saves {saved} B of subgraph boundary traffic, "
                      f"more than its {graph.macs[c]} MACs cost there")
    kept: List[List[int]] = []
    for region in regions:
        inputs, outputs = graph.region_io(region)
        io_bytes = sum(graph.ref_bytes[r] for r in inputs + outputs)
        region_macs = sum(graph.macs[c] for c in region)
        on_target = cost.subgraph_seconds(io_bytes, region_macs)
        on_host = cost.host_seconds(region_macs)
        if on_target < on_host:
            kept.append(region)
            continue
        why = (f"min-transfer: its subgraph would not pay off ({io_bytes} B across the boundary and a launch "
               f"take {on_target * 1e6:.1f} us, its {region_macs} MACs take {on_host * 1e6:.1f} us on the host)")
        for c in region:
            reasons[c] = why
    kept = merge_to_fit(graph, kept, limits)
    return StrategyOutcome(kept, reasons)


__all__ = ["CostModel", "Strategy", "register_strategy", "get_strategy", "list_strategies",
           "greedy", "max_offload", "min_transfer"]
