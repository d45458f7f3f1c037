"""Building blocks of the strategies: grow regions, split, merge and trim them, apply limits.

A region is a list of call indices (sorted). Every step keeps the quotient graph (regions
and host calls) acyclic:

* ``grow`` merges only through ``QuotientDag.try_merge``, which refuses cycles;
* ``split_over_limits`` cuts a region into pieces that are contiguous in a topological
  order, and no path can go from a later piece back to an earlier one;
* ``trim_boundary`` only moves a region's *source* or *sink* atoms to the host; a path from
  the rest of the region back into such an atom would already have been a cycle;
* returning a whole region to the host never creates a cycle.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple as PyTuple

from .graph import PartitionError, PartitionGraph, Ref
from .quotient import QuotientDag


@dataclass(frozen=True)
class PartitionLimits:
    """What the target accepts per model and per subgraph; ``None`` means no limit.

    Defaults are TIDL's: ``max_num_subgraphs=16``, ``max_num_subgraph_nodes=864`` (op
    calls per subgraph) and at most 32 inputs+outputs per subgraph. ``min_subgraph_macs``
    returns subgraphs with fewer MACs to the host (0: keep all, as TVM and TI do; 1 drops
    subgraphs of pure data movement, which are not worth a launch).
    """

    max_num_subgraphs: Optional[int] = 16
    max_num_subgraph_nodes: Optional[int] = 864
    max_subgraph_io: Optional[int] = 32
    min_subgraph_macs: int = 0

    def __post_init__(self):
        for name, low in (("max_num_subgraphs", 0), ("max_num_subgraph_nodes", 1), ("max_subgraph_io", 1)):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
                raise PartitionError(f"partition limit {name} must be an integer >= {low} or None, got {value!r}")
        m = self.min_subgraph_macs
        if isinstance(m, bool) or not isinstance(m, int) or m < 0:
            raise PartitionError(f"partition limit min_subgraph_macs must be an integer >= 0, got {m!r}")


@dataclass
class StrategyOutcome:
    """What a strategy decides: regions (lists of call indices) and, for every supported call
    it leaves on the host, why."""

    regions: List[List[int]]
    reasons: Dict[int, str]


# --- growing ----------------------------------------------------------------------------------

def grow(graph: PartitionGraph, max_nodes: Optional[int]) -> PyTuple[QuotientDag, List[List[int]]]:
    """TVM's MergeCompilerRegions: every supported atom joins the regions of its supported
    producers whenever no cycle results (and the region stays within ``max_nodes`` calls),
    visiting atoms in topological order; then edges between different regions are retried
    until nothing merges, so no two regions joined by an edge could still be merged."""
    q = graph.quotient()
    supported = graph.supported
    failed: Dict[PyTuple[int, int], PyTuple[int, int]] = {}

    def attempt(x: int, y: int) -> bool:
        a, b = q.find(x), q.find(y)
        if a == b:
            return False
        key = (a, b) if a < b else (b, a)
        versions = (q.version[key[0]], q.version[key[1]])
        if failed.get(key) == versions:
            return False  # refused before and neither side changed since
        if q.try_merge(a, b, max_nodes):
            return True
        failed[key] = versions
        return False

    order = sorted(range(len(graph.atoms)), key=graph.atom_pos.__getitem__)
    for a in order:
        if not graph.atom_supported[a]:
            continue
        members = graph.atoms[a]
        for c in members:
            for d in graph.deps[c]:
                if supported(d):
                    attempt(d, members[0])
    changed = True
    while changed:
        changed = False
        for c in range(len(graph.calls)):
            if not supported(c):
                continue
            for d in graph.deps[c]:
                if supported(d) and attempt(d, c):
                    changed = True
    return q, _regions_of(graph, q)


def _regions_of(graph: PartitionGraph, q: QuotientDag) -> List[List[int]]:
    by_root: Dict[int, List[int]] = {}
    for c in range(len(graph.calls)):
        if graph.supported(c):
            by_root.setdefault(q.find(c), []).append(c)
    return list(by_root.values())


# --- splitting --------------------------------------------------------------------------------

class _GrowingIO:
    """Inputs+outputs of a set of calls that grows in topological order, updated per call."""

    def __init__(self, graph: PartitionGraph):
        self.graph = graph
        self.members: Set[int] = set()
        self.reads: Dict[Ref, int] = {}
        self.open_users: Dict[Ref, int] = {}
        self.count = 0

    def add(self, c: int) -> None:
        g = self.graph
        self.members.add(c)
        for ref in g.in_refs[c]:
            p = ref[0]
            if isinstance(p, int) and p in self.members:
                self.open_users[ref] -= 1
                if self.open_users[ref] == 0 and ref not in g.escapes:
                    self.count -= 1
            else:
                self.reads[ref] = self.reads.get(ref, 0) + 1
                if self.reads[ref] == 1:
                    self.count += 1
        for ref in g.out_refs[c]:
            self.open_users[ref] = len(g.consumers[ref])
            self.count += 1


def split_over_limits(graph: PartitionGraph, regions: List[List[int]], max_io: Optional[int],
                      max_nodes: Optional[int]) -> List[List[int]]:
    """Cuts every region over ``max_io`` inputs+outputs (or ``max_nodes`` calls) into pieces
    contiguous in topological order, each as long as the limits allow. A single atom over
    the limits stays a piece of its own (the final limits return it to the host)."""
    out = []
    for region in regions:
        if ((max_io is None or len(_io_refs(graph, region)) <= max_io)
                and (max_nodes is None or len(region) <= max_nodes)):
            out.append(region)
            continue
        atoms = sorted({graph.atom_of[c] for c in region}, key=graph.atom_pos.__getitem__)
        start = 0
        while start < len(atoms):
            io = _GrowingIO(graph)
            best_end = start + 1
            nodes = 0
            end = start
            # I/O is not monotone in the prefix length, so look a little past the last fit.
            while end < len(atoms) and end - best_end <= 64 + (best_end - start):
                size = len(graph.atoms[atoms[end]])
                if max_nodes is not None and nodes + size > max_nodes and end > start:
                    break
                for c in graph.atoms[atoms[end]]:
                    io.add(c)
                nodes += size
                end += 1
                if max_io is None or io.count <= max_io:
                    best_end = end
            out.append(sorted(c for a in atoms[start:best_end] for c in graph.atoms[a]))
            start = best_end
    return out


def _io_refs(graph: PartitionGraph, region: Sequence[int]) -> List[Ref]:
    inputs, outputs = graph.region_io(region)
    return inputs + outputs


# --- merging to fit the count -------------------------------------------------------------------

def merge_to_fit(graph: PartitionGraph, regions: List[List[int]], limits: PartitionLimits,
                 tries_per_region: int = 16) -> List[List[int]]:
    """While more regions exist than ``max_num_subgraphs`` allows (or some are under
    ``min_subgraph_macs``), merges the region with the fewest MACs into another one when the
    union is acyclic and within the node and I/O limits. Partners are tried in this order:
    regions reading the same tensors (the union reads them once), then the nearest by
    topological position of the first call; at most ``tries_per_region``. A region no partner
    takes is left as it is (the final limits prune it), so this never loses MACs compared
    with pruning directly. After ``4 * tries_per_region`` regions in a row found no partner
    the search stops (it bounds the time on graphs where little can merge)."""
    max_num, min_macs = limits.max_num_subgraphs, limits.min_subgraph_macs
    max_nodes, max_io = limits.max_num_subgraph_nodes, limits.max_subgraph_io
    if not regions or ((max_num is None or len(regions) <= max_num)
                       and all(sum(graph.macs[c] for c in r) >= min_macs for r in regions)):
        return regions
    q = graph.quotient(regions)
    # owner[c]: the region (root) holding call c, -1 on the host; relabelled small into large.
    owner = [-1] * len(graph.calls)
    members: Dict[int, List[int]] = {}
    for reg in regions:
        r = q.find(reg[0])
        members[r] = list(reg)
        for c in reg:
            owner[c] = r
    macs = {r: sum(graph.macs[c] for c in reg) for r, reg in members.items()}
    first = {r: min(reg) for r, reg in members.items()}
    io = {r: graph.region_io(reg) for r, reg in members.items()}
    live = sorted((first[r], r) for r in members)   # by first call, for "nearest" partners
    heap = [(macs[r], -first[r], r, q.version[r]) for r in members]
    heapq.heapify(heap)
    count = len(members)
    failures_in_a_row = 0
    while heap:
        if failures_in_a_row >= 4 * tries_per_region:
            break  # the smallest regions find no partner; larger ones are unlikelier still
        m, _, a, version = heapq.heappop(heap)
        if a not in members or q.version[a] != version:
            continue  # stale entry of a region merged since
        if (max_num is None or count <= max_num) and m >= min_macs:
            break
        k = bisect.bisect_left(live, (first[a], a))
        partner = None
        for b in _partners(graph, owner, io[a][0], a, live, k, tries_per_region):
            if max_nodes is not None and len(members[a]) + len(members[b]) > max_nodes:
                continue
            union_io = _union_io(graph, owner, io[a], io[b], a, b, max_io)
            if union_io is None:
                continue
            if q.try_merge(a, b):
                partner = (b, union_io)
                break
        live.pop(k)
        count -= 1  # merged away, or given up (the final limits return it to the host)
        if partner is None:
            failures_in_a_row += 1
            continue
        failures_in_a_row = 0
        b, union_io = partner
        live.remove((first[b], b))
        keep = q.find(a)   # labels follow the quotient's roots
        gone = b if keep == a else a
        for c in members[gone]:
            owner[c] = keep
        members[keep].extend(members.pop(gone))
        macs[keep] = macs[a] + macs[b]
        first[keep] = min(first[a], first[b])
        io[keep] = union_io
        del macs[gone], first[gone], io[gone]
        bisect.insort(live, (first[keep], keep))
        heapq.heappush(heap, (macs[keep], -first[keep], keep, q.version[keep]))
    return [sorted(reg) for reg in members.values()]


def _partners(graph: PartitionGraph, owner: List[int], inputs: List[Ref], a: int,
              live: List[PyTuple[int, int]], k: int, limit: int):
    """Candidate partners of region ``a``: co-readers of its inputs, then nearest neighbours."""
    given = set()
    for ref in inputs:
        for u in graph.consumers[ref]:
            b = owner[u]
            if b >= 0 and b != a and b not in given:
                given.add(b)
                yield b
                if len(given) >= limit:
                    return
    lo, hi = k - 1, k + 1
    while len(given) < limit and (lo >= 0 or hi < len(live)):
        take_lo = hi >= len(live) or (lo >= 0 and live[k][0] - live[lo][0] <= live[hi][0] - live[k][0])
        if take_lo:
            b = live[lo][1]
            lo -= 1
        else:
            b = live[hi][1]
            hi += 1
        if b not in given:
            given.add(b)
            yield b


def _union_io(graph: PartitionGraph, owner: List[int], io_a, io_b, a: int, b: int,
              max_io: Optional[int]):
    """Inputs and outputs of the union of regions a and b; None once over ``max_io``."""
    both = (a, b)
    limit = float("inf") if max_io is None else max_io
    inputs, seen = [], set()
    for ref in io_a[0] + io_b[0]:
        p = ref[0]
        if ref not in seen and not (isinstance(p, int) and owner[p] in both):
            seen.add(ref)
            inputs.append(ref)
            if len(inputs) > limit:
                return None
    outputs = []
    escapes, consumers = graph.escapes, graph.consumers
    for ref in io_a[1] + io_b[1]:
        if ref in escapes or any(owner[u] not in both for u in consumers[ref]):
            outputs.append(ref)
            if len(inputs) + len(outputs) > limit:
                return None
    return inputs, outputs


# --- trimming (cost-driven) -------------------------------------------------------------------

def trim_boundary(graph: PartitionGraph, regions: List[List[int]],
                  gain_of_moving: Callable[[int, int], float]) -> PyTuple[List[List[int]], Dict[int, int]]:
    """Moves source or sink atoms of each region to the host while that lowers the cost.

    ``gain_of_moving(delta_bytes, macs)`` says how much moving an atom with ``macs`` MACs to
    the host saves when the region's boundary traffic changes by ``delta_bytes``; positive
    means move. Returns the trimmed regions and, per moved call, the boundary bytes its
    move saved (for the host reason)."""
    moved: Dict[int, int] = {}
    out = []
    for region in regions:
        state = _RegionState(graph, region)
        atoms = sorted({graph.atom_of[c] for c in region}, key=graph.atom_pos.__getitem__)
        work = list(atoms)
        queued = set(atoms)
        while work:
            a = work.pop()
            queued.discard(a)
            if a not in state.atoms or len(state.atoms) == 1:
                continue  # a region's last atom: whether the region pays off is decided whole
            delta = state.delta_bytes_if_removed(a)
            if delta is None:
                continue  # neither a source nor a sink of the region
            atom_macs = sum(graph.macs[c] for c in graph.atoms[a])
            if gain_of_moving(delta, atom_macs) <= 0:
                continue
            for c in graph.atoms[a]:
                moved[c] = -delta
            for n in state.remove(a):
                if n not in queued:
                    queued.add(n)
                    work.append(n)
        if state.calls:
            out.append(sorted(state.calls))
    return out, moved


class _RegionState:
    """A region's boundary counts, updated as atoms leave it."""

    def __init__(self, graph: PartitionGraph, region: Sequence[int]):
        self.g = graph
        self.calls: Set[int] = set(region)
        self.atoms: Set[int] = {graph.atom_of[c] for c in region}
        self.reads: Dict[Ref, int] = {}         # outside tensors: number of member readers
        self.inside_users: Dict[Ref, int] = {}  # member tensors: number of member readers
        for c in region:
            for ref in graph.in_refs[c]:
                p = ref[0]
                if isinstance(p, int) and p in self.calls:
                    self.inside_users[ref] = self.inside_users.get(ref, 0) + 1
                else:
                    self.reads[ref] = self.reads.get(ref, 0) + 1

    def _is_output(self, ref: Ref, inside: int) -> bool:
        return ref in self.g.escapes or len(self.g.consumers[ref]) > inside

    def delta_bytes_if_removed(self, a: int) -> Optional[int]:
        """Change of boundary bytes if atom ``a`` left; None unless ``a`` is a source or sink."""
        g = self.g
        members = g.atoms[a]
        own = set(members)
        reads_from_rest: Dict[Ref, int] = {}   # tensors of the rest of the region read by the atom
        reads_outside: Dict[Ref, int] = {}
        for c in members:
            for ref in g.in_refs[c]:
                p = ref[0]
                if isinstance(p, int) and p in own:
                    continue
                if isinstance(p, int) and p in self.calls:
                    reads_from_rest[ref] = reads_from_rest.get(ref, 0) + 1
                else:
                    reads_outside[ref] = reads_outside.get(ref, 0) + 1
        produced_for_rest: Dict[Ref, int] = {}
        for c in members:
            for ref in g.out_refs[c]:
                k = sum(1 for u in g.consumers[ref] if u in self.calls and u not in own)
                if k:
                    produced_for_rest[ref] = k
        if reads_from_rest and produced_for_rest:
            return None
        delta = 0
        for ref, k in reads_outside.items():
            if self.reads[ref] == k:
                delta -= g.ref_bytes[ref]
        for ref in reads_from_rest:
            if not self._is_output(ref, self.inside_users[ref]):
                delta += g.ref_bytes[ref]        # becomes an output of the region
        for c in members:
            for ref in g.out_refs[c]:
                inside = self.inside_users.get(ref, 0)
                if self._is_output(ref, inside):
                    delta -= g.ref_bytes[ref]    # no longer produced by the region
                if produced_for_rest.get(ref):
                    delta += g.ref_bytes[ref]    # the rest of the region now reads it from the host
        return delta

    def remove(self, a: int) -> List[int]:
        """Removes atom ``a``; returns the atoms of the region next to it (new boundary candidates)."""
        g = self.g
        members = g.atoms[a]
        own = set(members)
        neighbours = set()
        for c in members:
            for ref in g.in_refs[c]:
                p = ref[0]
                if isinstance(p, int) and p in own:
                    continue
                if isinstance(p, int) and p in self.calls:
                    self.inside_users[ref] -= 1
                    neighbours.add(g.atom_of[p])
                else:
                    self.reads[ref] -= 1
                    if self.reads[ref] == 0:
                        del self.reads[ref]
        for c in members:
            for ref in g.out_refs[c]:
                readers = [u for u in g.consumers[ref] if u in self.calls and u not in own]
                self.inside_users.pop(ref, None)
                if readers:
                    self.reads[ref] = len(readers)
                for u in readers:
                    neighbours.add(g.atom_of[u])
        self.calls -= own
        self.atoms.discard(a)
        neighbours.discard(a)
        return sorted(neighbours)


# --- final limits ------------------------------------------------------------------------------

def apply_limits(graph: PartitionGraph, regions: List[List[int]], limits: PartitionLimits,
                 reasons: Dict[int, str]) -> List[List[int]]:
    """TI's rules after partitioning, in TI's order: subgraphs over the node or I/O limits go
    back to the host, then those under ``min_subgraph_macs``, then all but the
    ``max_num_subgraphs`` with the most MACs (ties: the earlier one stays). ``reasons`` gets
    the reason of every call returned."""
    kept = []
    for region in regions:
        n_io = len(_io_refs(graph, region))
        if limits.max_num_subgraph_nodes is not None and len(region) > limits.max_num_subgraph_nodes:
            why = (f"its subgraph has {len(region)} nodes > max_num_subgraph_nodes "
                   f"{limits.max_num_subgraph_nodes}")
        elif limits.max_subgraph_io is not None and n_io > limits.max_subgraph_io:
            why = f"its subgraph has {n_io} inputs/outputs > {limits.max_subgraph_io} (max_subgraph_io)"
        else:
            region_macs = sum(graph.macs[c] for c in region)
            if region_macs < limits.min_subgraph_macs:
                why = (f"its subgraph has {region_macs} MACs < min_subgraph_macs {limits.min_subgraph_macs}: "
                       f"a subgraph without enough compute is not worth a launch")
            else:
                kept.append((region_macs, region))
                continue
        for c in region:
            reasons[c] = why
    kept.sort(key=lambda mr: (-mr[0], mr[1][0]))
    limit = limits.max_num_subgraphs
    if limit is not None and len(kept) > limit:
        smallest_kept = kept[limit - 1][0] if limit else None
        for region_macs, region in kept[limit:]:
            why = (f"pruned by max_num_subgraphs={limit}: its subgraph has {region_macs} MACs"
                   + (f", the {limit} kept have >= {smallest_kept}" if limit else ""))
            for c in region:
                reasons[c] = why
        kept = kept[:limit]
    return [region for _, region in kept]


__all__ = ["PartitionLimits", "StrategyOutcome", "grow", "split_over_limits", "merge_to_fit",
           "trim_boundary", "apply_limits"]
