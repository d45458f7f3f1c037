"""A DAG whose nodes are contracted into groups, refusing every contraction that makes a cycle.

Merging two groups A and B of a DAG creates a cycle exactly when some path leaves A and
reaches B (or the reverse) through a node outside both. The check keeps a topological
order of the groups (positions, as in Pearce and Kelly's dynamic topological sort) so that
only the groups positioned *between* A and B are searched: nothing before A can be reached
from A, and nothing after B can reach B. After a merge the nodes of that window are
reordered (those reaching B first, then the merged group, then those reached from A), which
keeps the order valid without touching anything outside the window.

An O(degree) fast path covers the common merges (a node joining the region of its
producer): no other producer of B lies after A, or no other consumer of A lies before B.
Adjacency is kept between current groups only (a merge relabels the neighbours of the group
with fewer of them), so searches need no union-find lookups. Everything is iterative; node
ids are the integers 0..n-1.
"""

from __future__ import annotations

import heapq
from typing import Iterable, List, Optional, Sequence, Tuple as PyTuple


class CycleError(Exception):
    """The initial groups already form a cycle; ``groups`` lists the roots still unplaced."""

    def __init__(self, groups: List[int]):
        super().__init__(f"{len(groups)} groups lie on a cycle")
        self.groups = groups


class QuotientDag:
    """Groups (union-find) of the nodes of a DAG, with a topological order of the groups.

    ``succ[u]`` lists the successors of node ``u``. ``groups`` are contracted up front
    (raising ``CycleError`` if that already makes a cycle). ``weights`` (default 1 per
    node) are summed per group, for size limits on merges.
    """

    def __init__(self, num_nodes: int, succ: Sequence[Iterable[int]], groups: Iterable[Sequence[int]] = (),
                 weights: Optional[Sequence[int]] = None):
        n = num_nodes
        self.parent = list(range(n))
        for group in groups:
            group = list(group)
            for other in group[1:]:
                self._union_roots(self.find(group[0]), self.find(other))
        find = self.find
        self.members: List[Optional[List[int]]] = [None] * n
        self.weight = [0] * n
        for u in range(n):
            r = find(u)
            if self.members[r] is None:
                self.members[r] = []
            self.members[r].append(u)
            self.weight[r] += 1 if weights is None else weights[u]
        self.succ: List[Optional[set]] = [None] * n
        self.pred: List[Optional[set]] = [None] * n
        for r in range(n):
            if self.members[r] is not None:
                self.succ[r] = set()
                self.pred[r] = set()
        for u in range(n):
            ru = find(u)
            for v in succ[u]:
                rv = find(v)
                if ru != rv:
                    self.succ[ru].add(rv)
                    self.pred[rv].add(ru)
        # Kahn's algorithm; ties broken by the group's first node, so the order is deterministic.
        self.pos = [-1] * n
        indegree = {r: len(self.pred[r]) for r in range(n) if self.members[r] is not None}
        ready = [(self.members[r][0], r) for r, d in indegree.items() if d == 0]
        heapq.heapify(ready)
        placed = 0
        while ready:
            _, r = heapq.heappop(ready)
            self.pos[r] = placed
            placed += 1
            for s in self.succ[r]:
                indegree[s] -= 1
                if indegree[s] == 0:
                    heapq.heappush(ready, (self.members[s][0], s))
        if placed != len(indegree):
            raise CycleError(sorted(r for r, d in indegree.items() if self.pos[r] < 0))
        self.version = [0] * n

    def copy(self) -> "QuotientDag":
        """An independent copy (merging in one leaves the other as it is)."""
        out = QuotientDag.__new__(QuotientDag)
        out.parent = list(self.parent)
        out.members = [None if m is None else list(m) for m in self.members]
        out.weight = list(self.weight)
        out.succ = [None if x is None else set(x) for x in self.succ]
        out.pred = [None if x is None else set(x) for x in self.pred]
        out.pos = list(self.pos)
        out.version = list(self.version)
        return out

    # --- union-find -------------------------------------------------------------------------

    def find(self, x: int) -> int:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def _union_roots(self, a: int, b: int) -> int:
        if a != b:
            self.parent[b] = a
        return a

    def group(self, x: int) -> List[int]:
        """The nodes grouped with ``x`` (in no particular order)."""
        return self.members[self.find(x)]

    def roots(self) -> List[int]:
        """The current groups' roots in topological order."""
        return sorted((r for r in range(len(self.parent)) if self.parent[r] == r), key=self.pos.__getitem__)

    def position(self, x: int) -> int:
        return self.pos[self.find(x)]

    # --- reachability -----------------------------------------------------------------------

    def _window_search(self, a: int, b: int) -> Optional[PyTuple[List[int], List[int]]]:
        """The groups positioned between ``a`` and ``b`` that ``a`` reaches (F) and that reach
        ``b`` (B), the direct edge a->b aside; None if some path a -> x -> ... -> b exists
        (merging would close a cycle).

        Both searches advance in turn, and a node seen by both proves a path, so a refusal
        usually costs little whichever side the path is near. Once one side is exhausted
        the other is completed (the reorder needs both)."""
        pos, succ, pred = self.pos, self.succ, self.pred
        lo, hi = pos[a], pos[b]
        fseen = {a}
        bseen = {b}
        fstack = [w for w in succ[a] if w != b and pos[w] < hi]
        bstack = [w for w in pred[b] if w != a and pos[w] > lo]
        fseen.update(fstack)
        for w in bstack:
            if w in fseen:
                return None
            bseen.add(w)
        after_a: List[int] = []
        before_b: List[int] = []
        while fstack or bstack:
            if fstack:
                w = fstack.pop()
                after_a.append(w)
                for x in succ[w]:
                    if x in bseen:
                        return None
                    if x not in fseen and pos[x] < hi:
                        fseen.add(x)
                        fstack.append(x)
            if bstack:
                w = bstack.pop()
                before_b.append(w)
                for x in pred[w]:
                    if x in fseen:
                        return None
                    if x not in bseen and pos[x] > lo:
                        bseen.add(x)
                        bstack.append(x)
        return after_a, before_b

    def reaches(self, x: int, y: int) -> bool:
        """Whether some path leads from the group of ``x`` to the group of ``y`` (x's own group
        reaches itself)."""
        a, b = self.find(x), self.find(y)
        if a == b:
            return True
        if self.pos[a] > self.pos[b]:
            return False
        return b in self.succ[a] or self._window_search(a, b) is None

    def _only_edge_into(self, b: int, a: int) -> bool:
        """No producer of ``b`` other than ``a`` is positioned after ``a``."""
        pos = self.pos
        lo = pos[a]
        return all(w == a or pos[w] < lo for w in self.pred[b])

    def _only_edge_out_of(self, a: int, b: int) -> bool:
        """No consumer of ``a`` other than ``b`` is positioned before ``b``."""
        pos = self.pos
        hi = pos[b]
        return all(w == b or pos[w] > hi for w in self.succ[a])

    # --- contraction ------------------------------------------------------------------------

    def can_merge(self, x: int, y: int) -> bool:
        """Whether the groups of ``x`` and ``y`` can be merged without creating a cycle."""
        a, b = self.find(x), self.find(y)
        if a == b:
            return True
        if self.pos[a] > self.pos[b]:
            a, b = b, a
        if self._only_edge_into(b, a) or self._only_edge_out_of(a, b):
            return True
        return self._window_search(a, b) is not None

    def try_merge(self, x: int, y: int, max_weight: Optional[int] = None) -> bool:
        """Merges the groups of ``x`` and ``y`` unless that creates a cycle or the merged
        weight would exceed ``max_weight``; returns whether they are (now) one group."""
        a, b = self.find(x), self.find(y)
        if a == b:
            return True
        if max_weight is not None and self.weight[a] + self.weight[b] > max_weight:
            return False
        pos = self.pos
        if pos[a] > pos[b]:
            a, b = b, a
        # One O(degree) fast path, on the side with the smaller degree (big regions have many).
        if len(self.pred[b]) <= len(self.succ[a]):
            if self._only_edge_into(b, a):
                self._contract(a, b, pos[a])
                return True
        elif self._only_edge_out_of(a, b):
            self._contract(a, b, pos[b])
            return True
        found = self._window_search(a, b)
        if found is None:
            return False
        after_a, before_b = found
        slots = sorted([pos[w] for w in before_b] + [pos[w] for w in after_a] + [pos[a], pos[b]])
        before_b.sort(key=pos.__getitem__)
        after_a.sort(key=pos.__getitem__)
        k = 0
        for w in before_b:
            pos[w] = slots[k]
            k += 1
        merged_pos = slots[k]
        k += 1
        for w in after_a:
            pos[w] = slots[k]
            k += 1
        self._contract(a, b, merged_pos)
        return True

    def _contract(self, a: int, b: int, new_pos: int) -> int:
        succ, pred = self.succ, self.pred
        # Keep adjacency sets in terms of roots: relabel the group with fewer neighbours.
        if len(succ[a]) + len(pred[a]) < len(succ[b]) + len(pred[b]):
            a, b = b, a
        for w in succ[b]:
            if w != a:
                pw = pred[w]
                pw.discard(b)
                pw.add(a)
        for w in pred[b]:
            if w != a:
                sw = succ[w]
                sw.discard(b)
                sw.add(a)
        succ[a] |= succ[b]
        pred[a] |= pred[b]
        for adj in (succ[a], pred[a]):
            adj.discard(a)
            adj.discard(b)
        succ[b] = pred[b] = None
        self.parent[b] = a
        big, small = self.members[a], self.members[b]
        if len(big) < len(small):
            big, small = small, big
        big.extend(small)
        self.members[a] = big
        self.members[b] = None
        self.weight[a] += self.weight[b]
        self.pos[a] = new_pos
        self.pos[b] = -1
        self.version[a] += 1
        return a


__all__ = ["QuotientDag", "CycleError"]
