"""Partitioning in a given order of units, the way TIDL's ONNX Runtime import groups ONNX nodes.

A *unit* is the set of calls that share an integer key; the keys give the order. For an ONNX
model a unit is the calls one node imported to, keyed by the node's index in the graph's node
list. The partition:

1. Runs: the units are taken in key order and every maximal run of consecutive supported
   units is a group (a unit is supported when all its calls are, composite groups included).
2. Merges: group j joins group i when j reads at least one tensor and every tensor j reads
   (parameters of the function and outputs of calls; constants do not count) is written by
   i or by j itself. Pairs are searched i first, then j, both in list order; j's units are
   appended to i's, j leaves the list, and the search starts again, until no pair merges.
3. Only the first ``max_num_subgraphs`` groups of the list stay; the others go back to the
   host whole.

    from tidlx.ir.partition.node_order import partition_in_order

    ordered = partition_in_order(mod, oracle, lambda call: node_index[call.layer], max_num_subgraphs=16)
    ordered.grouping.kept       # unit keys per subgraph, in list order
    ordered.cycles              # groups whose outputs reach the host and come back into them
    ordered.result              # a PartitionResult (None when a group is cyclic)

Unlike ``partition``, nothing here refuses a cycle. When the order is not a topological order
of the units, a run (or a merge) can hold calls whose outputs go through calls outside the
group and come back into it; ``cycles`` names each such group with one path, and there is no
partitioned module then: the caller shows another partition (``partition`` with a strategy).
The subgraphs that are made are numbered in list order (``@tidl_0`` is the first group).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple as PyTuple, Union

from ..expr import Call, Function
from ..module import IRModule
from .gcpause import gc_paused
from .graph import PartitionError, PartitionGraph, SupportOracle
from .outline import CompositeNamer
from .partitioner import PartitionResult, _as_module, _check_outcome, _outline_regions, _result
from .regions import PartitionLimits

#: The name a PartitionResult of this module carries as its strategy.
STRATEGY = "node-order"


@dataclass(frozen=True)
class UnitGroups:
    """The grouping of units: the contiguous runs, the groups after the merges (units in the
    order the merges appended them), each merge as (first unit of i, first unit of j), and the
    count limit (None: all groups stay)."""

    runs: PyTuple[PyTuple[int, ...], ...]
    groups: PyTuple[PyTuple[int, ...], ...]
    merges: PyTuple[PyTuple[int, int], ...]
    max_num: Optional[int]

    @property
    def kept(self) -> PyTuple[PyTuple[int, ...], ...]:
        return self.groups if self.max_num is None else self.groups[:self.max_num]

    @property
    def dropped(self) -> PyTuple[PyTuple[int, ...], ...]:
        return () if self.max_num is None else self.groups[self.max_num:]


def group_units(order: Sequence[int], supported: Mapping[int, bool], reads: Mapping[int, Iterable],
                writes: Mapping[int, Iterable], max_num: Optional[int] = None) -> UnitGroups:
    """Runs, merges and the count limit (steps 1-3 of the module docstring) on units given by
    key: ``order`` lists every unit, ``reads[u]`` the tensors unit u reads from outside itself
    (constants excluded), ``writes[u]`` the tensors it writes (any hashable names)."""
    runs: List[List[int]] = []
    current: List[int] = []
    for u in order:
        if supported[u]:
            current.append(u)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    groups = [list(r) for r in runs]
    merges: List[PyTuple[int, int]] = []
    while len(groups) > 1:
        pair = _first_merge(groups, reads, writes)
        if pair is None:
            break
        i, j = pair
        merges.append((groups[i][0], groups[j][0]))
        groups[i].extend(groups[j])
        del groups[j]
    return UnitGroups(tuple(tuple(r) for r in runs), tuple(tuple(g) for g in groups), tuple(merges), max_num)


def _first_merge(groups: List[List[int]], reads, writes) -> Optional[PyTuple[int, int]]:
    """The first pair (i, j) in (i, j) order such that group j may join group i."""
    writer: Dict[object, int] = {}
    written: List[set] = []
    for g, units in enumerate(groups):
        out = set()
        for u in units:
            out.update(writes[u])
        for t in out:
            writer[t] = g
        written.append(out)
    best: Optional[PyTuple[int, int]] = None
    for j, units in enumerate(groups):
        read = set()
        for u in units:
            read.update(reads[u])
        if not read:
            continue
        outside = read - written[j]
        if not outside:
            i = 0 if j != 0 else 1          # every tensor it reads is its own: any group takes it
        else:
            owners = {writer.get(t) for t in outside}
            if len(owners) != 1:
                continue
            i = owners.pop()
            if i is None or i == j:
                continue
        if best is None or (i, j) < best:
            best = (i, j)
    return best


@dataclass(frozen=True)
class Cycle:
    """A cyclic group: the output of call ``exit_call`` of kept group ``group`` goes through the
    calls ``path`` (none of them in the group) and comes back into its call ``entry_call``."""

    group: int
    exit_call: int
    path: PyTuple[int, ...]
    entry_call: int


@dataclass
class OrderedPartition:
    """What ``partition_in_order`` found. ``unit_of`` per call index (None: in no unit),
    ``unit_calls`` per unit, ``regions`` the call indices of each kept group (sorted),
    ``reasons`` why each supported call left on the host stays there, ``result`` the
    partition (None when ``cycles`` is not empty)."""

    graph: PartitionGraph
    unit_of: List[Optional[int]]
    unit_calls: Dict[int, List[int]]
    unit_supported: Dict[int, bool]
    grouping: UnitGroups
    regions: List[List[int]]
    cycles: PyTuple[Cycle, ...]
    reasons: Dict[int, str]
    result: Optional[PartitionResult]

    @property
    def units(self) -> List[int]:
        return sorted(self.unit_calls)

    def unit_reason(self, u: int) -> Optional[str]:
        """Why unit ``u`` is not supported: the reason of its first refused call (None if supported)."""
        if self.unit_supported.get(u, False):
            return None
        g = self.graph
        for c in self.unit_calls[u]:
            if not g.supported(c):
                return g.oracle_reason[c] or g.group_reason.get(c) or f"{g.describe(c)} is not supported"
        return None


def partition_in_order(func_or_mod: Union[IRModule, Function], supported: SupportOracle,
                       unit_of: Callable[[Call], Optional[int]], *, groups: Iterable[Sequence[Call]] = (),
                       max_num_subgraphs: Optional[int] = 16, compiler: str = "tidl",
                       name_prefix: Optional[str] = None, entry: str = "main", check: bool = True,
                       composite_name: Optional[CompositeNamer] = None,
                       unit_name: Optional[Callable[[int], str]] = None, unit_kind: str = "unit") -> OrderedPartition:
    """Partitions ``@entry`` by the grouping of the module docstring.

    ``supported`` is the support oracle as for ``partition``; ``unit_of(call)`` the call's unit
    key (an int) or None; ``groups`` composite groups (a group whose calls the grouping puts in
    different subgraphs, or partly on the host, is not kept as a group: its calls become layers
    of their own). ``unit_name(key)`` names a unit in reasons (default ``unit <key>``),
    ``unit_kind`` says what the units are (``ONNX node``). Subgraphs are ``<prefix><k>`` in list
    order."""
    if max_num_subgraphs is not None and (isinstance(max_num_subgraphs, bool) or not isinstance(max_num_subgraphs, int)
                                          or max_num_subgraphs < 0):
        raise PartitionError(f"max_num_subgraphs must be an integer >= 0 or None, got {max_num_subgraphs!r}")
    if not isinstance(compiler, str) or not compiler.isidentifier():
        raise PartitionError(f"compiler name must be an identifier, got {compiler!r}")
    prefix = f"{compiler}_" if name_prefix is None else name_prefix
    if not isinstance(prefix, str) or not (prefix + "0").isidentifier():
        raise PartitionError(f"name_prefix must make identifiers, got {name_prefix!r}")
    name_of = unit_name if unit_name is not None else (lambda u: f"{unit_kind} {u}")
    mod = _as_module(func_or_mod, entry)
    groups = [list(g) for g in groups]
    with gc_paused():
        graph = PartitionGraph.build(mod, supported, groups, entry)
        units = _units(graph, unit_of)
        unit_calls: Dict[int, List[int]] = {}
        for c, u in enumerate(units):
            if u is not None:
                unit_calls.setdefault(u, []).append(c)
        order = sorted(unit_calls)
        unit_supported = {u: all(graph.supported(c) for c in unit_calls[u]) for u in order}
        reads, writes = _unit_io(graph, unit_calls)
        grouping = group_units(order, unit_supported, reads, writes, max_num_subgraphs)
        regions = [sorted(c for u in g for c in unit_calls[u]) for g in grouping.kept]
        graph = _without_split_groups(graph, mod, supported, groups, regions, entry)
        cycles = tuple(_find_cycles(graph, regions))
        reasons = _host_reasons(graph, units, unit_calls, unit_supported, grouping, name_of, unit_kind)
        limits = PartitionLimits(max_num_subgraphs=max_num_subgraphs, max_num_subgraph_nodes=None,
                                 max_subgraph_io=None, min_subgraph_macs=0)
        result = None
        if not cycles:
            _check_outcome(graph, regions, STRATEGY)
            names, region_io, new_mod, composite_of = _outline_regions(mod, graph, regions, prefix, compiler,
                                                                       composite_name, check)
            result = _result(graph, regions, names, region_io, reasons, new_mod, STRATEGY, limits, compiler,
                             composite_of)
    return OrderedPartition(graph, units, unit_calls, unit_supported, grouping, regions, cycles, reasons, result)


def _units(graph: PartitionGraph, unit_of) -> List[Optional[int]]:
    units: List[Optional[int]] = []
    for call in graph.calls:
        u = unit_of(call)
        if u is not None and (isinstance(u, bool) or not isinstance(u, int)):
            raise PartitionError(f"unit_of({graph.describe(len(units))}) returned {u!r}; expected an int or None")
        units.append(u)
    return units


def _unit_io(graph: PartitionGraph, unit_calls: Mapping[int, List[int]]):
    """Per unit: the tensors it reads from outside itself, and the tensors it writes."""
    reads: Dict[int, set] = {}
    writes: Dict[int, set] = {}
    for u, calls in unit_calls.items():
        own = set(calls)
        r, w = set(), set()
        for c in calls:
            for ref in graph.in_refs[c]:
                p = ref[0]
                if not (isinstance(p, int) and p in own):
                    r.add(ref)
            w.update(graph.out_refs[c])
        reads[u], writes[u] = r, w
    return reads, writes


def _without_split_groups(graph: PartitionGraph, mod, supported, groups, regions, entry) -> PartitionGraph:
    """The graph again without the composite groups the regions split (the calls of such a
    group are in different regions, or some on the host); the same graph when none is split."""
    if not groups:
        return graph
    region_of = [-1] * len(graph.calls)
    for k, region in enumerate(regions):
        for c in region:
            region_of[c] = k
    split = [a for a in graph.atoms if len(a) > 1 and len({region_of[c] for c in a}) > 1]
    if not split:
        return graph
    keep = [g for g in groups if len({region_of[graph.index[id(c)]] for c in g}) <= 1]
    return PartitionGraph.build(mod, supported, keep, entry)


def _find_cycles(graph: PartitionGraph, regions: Sequence[Sequence[int]]) -> List[Cycle]:
    """Per region, the first path found that leaves it and comes back into it."""
    found = []
    users = graph.users
    for k, region in enumerate(regions):
        members = set(region)
        came_from: Dict[int, PyTuple[Optional[int], int]] = {}   # outside call -> (previous outside call, exit)
        frontier: List[int] = []
        for c in region:
            for u in users[c]:
                if u not in members and u not in came_from:
                    came_from[u] = (None, c)
                    frontier.append(u)
        hit = None
        while frontier and hit is None:
            nxt = []
            for x in frontier:
                for y in users[x]:
                    if y in members:
                        hit = (x, y)
                        break
                    if y not in came_from:
                        came_from[y] = (x, came_from[x][1])
                        nxt.append(y)
                if hit is not None:
                    break
            frontier = nxt
        if hit is None:
            continue
        last, entry_call = hit
        path = [last]
        while came_from[path[-1]][0] is not None:
            path.append(came_from[path[-1]][0])
        path.reverse()
        found.append(Cycle(k, came_from[last][1], tuple(path), entry_call))
    return found


def _host_reasons(graph: PartitionGraph, units, unit_calls, unit_supported, grouping: UnitGroups, name_of,
                  unit_kind: str) -> Dict[int, str]:
    """Why each supported call the grouping leaves on the host stays there."""
    reasons: Dict[int, str] = dict(graph.group_reason)
    for u, calls in unit_calls.items():
        if unit_supported[u]:
            continue
        bad = next(c for c in calls if not graph.supported(c))
        why = graph.oracle_reason[bad] or graph.group_reason.get(bad) or f"{graph.describe(bad)} is not supported"
        for c in calls:
            if graph.supported(c) and c not in reasons:
                reasons[c] = f"its {name_of(u)} stays on the host: {why}"
    limit = grouping.max_num
    for k, group in enumerate(grouping.dropped, start=len(grouping.kept)):
        for u in group:
            for c in unit_calls[u]:
                reasons.setdefault(c, f"pruned by max_num_subgraphs={limit}: only the first {limit} subgraphs in "
                                      f"{unit_kind} order are kept, and this one is subgraph {k} (from "
                                      f"{name_of(group[0])})")
    for c, u in enumerate(units):
        if u is None and graph.supported(c):
            reasons.setdefault(c, f"it belongs to no {unit_kind}, so the {unit_kind} grouping leaves it on the host")
    return reasons


__all__ = ["partition_in_order", "group_units", "UnitGroups", "OrderedPartition", "Cycle", "STRATEGY"]
