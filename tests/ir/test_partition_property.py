"""Property tests of the partitioner on random DAGs, random support masks and every strategy.

Each example checks: every call is in exactly one subgraph or on the host; unsupported calls
stay on the host with the oracle's reason, supported ones there have a reason of the
partitioner; composite groups stay together; the limits hold; the quotient graph (subgraphs
and host calls) is acyclic; the outlined module verifies; and it computes the same outputs as
the original in tidlx.emulator. A second property checks that greedy without limits is
maximal (any two subgraphs joined by an edge would close a cycle if merged), and a third
checks QuotientDag against brute-force reachability.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from tidlx import emulator
from tidlx.ir import Function, IRModule, TensorType, Tuple, TupleGetItem, Var, call, const, verify
from tidlx.ir.expr import Call
from tidlx.ir.partition import CostModel, PartitionLimits, QuotientDag, partition
from tidlx.ir.traversal import post_order

UNARY = ("nn.relu", "sigmoid", "tanh", "negative")
COLS = 4
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def random_dags(draw, max_ops: int = 16):
    """A random @main over (rows, 4) tensors: unary ops, add of two earlier values (broadcast
    rows), add of a constant, concatenate of 2-3 earlier values, split + projections,
    concatenate of a split tuple, batch_norm + projection; one or more outputs (maybe a tuple)."""
    inputs = [Var(f"in{i}", TensorType((draw(st.integers(1, 2)), COLS))) for i in range(draw(st.integers(1, 2)))]
    values = list(inputs)              # tensor values: (expr, rows)
    rows = [v.type_annotation.shape[0] for v in inputs]
    splits = []                        # split calls whose tuple may be used whole
    unary_pairs = []                   # (producer call, unary consumer) candidates for groups
    n_ops = draw(st.integers(1, max_ops))

    def pick(candidates=None):
        pool = range(len(values)) if candidates is None else candidates
        return draw(st.sampled_from(list(pool)))

    for _ in range(n_ops):
        kind = draw(st.sampled_from(["unary", "unary", "add", "add", "addconst", "concat", "split", "catsplit",
                                     "bn"]))
        i = pick()
        v, r = values[i], rows[i]
        if kind == "add":
            j = pick([k for k in range(len(values)) if rows[k] in (r, 1) or r == 1])
            values.append(call("add", v, values[j]))
            rows.append(max(r, rows[j]))
        elif kind == "addconst":
            values.append(call("add", v, const(np.full((1, COLS), 0.5, "float32"))))
            rows.append(r)
        elif kind == "concat":
            parts = [i] + [pick() for _ in range(draw(st.integers(1, 2)))]
            if sum(rows[k] for k in parts) > 6:
                kind = "unary"
            else:
                values.append(call("concatenate", Tuple([values[k] for k in parts]), axis=0))
                rows.append(sum(rows[k] for k in parts))
        elif kind == "split" and r >= 2:
            s = call("split", v, indices_or_sections=r, axis=0)
            splits.append((s, r))
            for k in range(r):
                if draw(st.booleans()) or k == 0:
                    values.append(TupleGetItem(s, k))
                    rows.append(1)
        elif kind == "catsplit" and splits:
            s, pieces = splits[draw(st.integers(0, len(splits) - 1))]
            values.append(call("concatenate", s, axis=0))
            rows.append(pieces)
        elif kind == "bn":
            vec = const(np.linspace(0.5, 1.5, COLS).astype("float32"))
            bn = call("nn.batch_norm", v, vec, vec, vec, vec, axis=1)
            values.append(TupleGetItem(bn, 0))
            rows.append(r)
        else:
            kind = "unary"
        if kind == "unary":
            u = call(draw(st.sampled_from(UNARY)), v)
            if isinstance(v, Call):
                unary_pairs.append((v, u))
            values.append(u)
            rows.append(r)
    outs = [values[-1]] + [values[pick()] for _ in range(draw(st.integers(0, 3)))]
    if splits and draw(st.integers(0, 4)) == 0:
        outs.append(splits[-1][0])     # a tuple-typed output
    body = outs[0] if len(outs) == 1 else Tuple(outs)
    mod = IRModule({"main": Function(inputs, body)})
    mod.infer_types()
    calls = [n for n in post_order(body) if isinstance(n, Call)]
    mask = draw(st.lists(st.sampled_from([True, True, True, False]), min_size=len(calls), max_size=len(calls)))
    live = {id(c) for c in calls}
    pairs = [(p, u) for p, u in unary_pairs if id(p) in live and id(u) in live]
    groups = [list(pair) for pair in pairs if draw(st.integers(0, 3)) == 0]
    # Groups must be disjoint for "stays together" to be checked simply; drop overlaps.
    used, disjoint = set(), []
    for g in groups:
        if not any(id(c) in used for c in g):
            disjoint.append(g)
            used.update(id(c) for c in g)
    return mod, calls, dict(zip((id(c) for c in calls), mask)), disjoint


def oracle_for(mask):
    return lambda c: None if mask[id(c)] else f"masked {c.op_name}"


def arg_producers(call_node: Call):
    """Calls feeding a call, through tuples and projections (as the outlined code reads them)."""
    out, stack = [], list(call_node.args)
    while stack:
        x = stack.pop()
        if isinstance(x, Call):
            out.append(x)
        elif isinstance(x, Tuple):
            stack.extend(x.fields)
        elif isinstance(x, TupleGetItem):
            stack.append(x.tuple_value)
    return out


def quotient_is_acyclic(calls, unit_of) -> bool:
    succ, indeg = {}, {}
    for c in calls:
        u = unit_of[id(c)]
        succ.setdefault(u, set())
        indeg.setdefault(u, 0)
    for c in calls:
        u = unit_of[id(c)]
        for p in arg_producers(c):
            pu = unit_of[id(p)]
            if pu != u and u not in succ[pu]:
                succ[pu].add(u)
                indeg[u] += 1
    ready = [u for u, d in indeg.items() if d == 0]
    seen = 0
    while ready:
        u = ready.pop()
        seen += 1
        for s in succ[u]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return seen == len(indeg)


def check_partition(mod, calls, mask, groups, limits, result):
    region_of = {}
    for r in result.regions:
        for c in r.calls:
            assert id(c) not in region_of, "a call is in two subgraphs"
            region_of[id(c)] = r.name
    host = {id(h.call): h for h in result.host_calls}
    for c in calls:
        assert (id(c) in region_of) != (id(c) in host), "every call is in exactly one subgraph or on the host"
        if not mask[id(c)]:
            assert host[id(c)].reason == f"masked {c.op_name}" and not host[id(c)].supported
        elif id(c) in host:
            assert host[id(c)].supported and host[id(c)].reason and "cycle" not in host[id(c)].reason
    assert len(region_of) + len(host) == len(calls)
    for g in groups:
        places = {region_of.get(id(c), "host") for c in g}
        assert len(places) == 1, "a composite group was split"
    if limits.max_num_subgraphs is not None:
        assert len(result.regions) <= limits.max_num_subgraphs
    for r in result.regions:
        if limits.max_num_subgraph_nodes is not None:
            assert r.num_nodes <= limits.max_num_subgraph_nodes
        if limits.max_subgraph_io is not None:
            assert r.num_io <= limits.max_subgraph_io
        assert r.macs >= limits.min_subgraph_macs
        fn = result.module[r.name]
        assert fn.attrs["Compiler"] == "tidl" and fn.attrs["global_symbol"] == r.name
        assert [p.name_hint for p in fn.params] == [b.name for b in r.inputs]
        assert all(p.name_hint.startswith(f"tidl_{r.index}_i") for p in fn.params)
    assert [r.name for r in result.regions] == [f"tidl_{k}" for k in range(len(result.regions))]
    unit_of = {id(c): region_of.get(id(c), id(c)) for c in calls}
    assert quotient_is_acyclic(calls, unit_of)
    verify(result.module)
    rng = np.random.default_rng(0)
    feeds = {p.name_hint: rng.standard_normal(p.type_annotation.shape).astype("float32") for p in mod["main"].params}
    want = emulator.run(mod, feeds)
    got = emulator.run(result.module, feeds)
    assert len(want) == len(got)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)


limit_choices = st.builds(
    PartitionLimits,
    max_num_subgraphs=st.sampled_from([None, None, None, 0, 1, 2, 3]),
    max_num_subgraph_nodes=st.sampled_from([None, None, 1, 2, 3, 5]),
    max_subgraph_io=st.sampled_from([None, None, 2, 3, 4, 32]),
    min_subgraph_macs=st.sampled_from([0, 0, 0, 1, 8]),
)
# Tiny graphs: with realistic figures min-transfer would keep everything on the host, so
# draw cost models whose trade-offs fall either way on 4-element tensors.
cost_choices = st.builds(
    CostModel,
    transfer_bytes_per_s=st.sampled_from([1e6, 1e8, 1e10]),
    launch_s=st.sampled_from([1e-9, 1e-7, 1e-5]),
    host_macs_per_s=st.sampled_from([1e5, 1e7, 1e9]),
    target_macs_per_s=st.just(1e12),
)


# The goal is >= 2000 random DAGs with random support masks: this test alone draws 2000.
@settings(max_examples=2000, **SETTINGS)
@given(case=random_dags(), strategy=st.sampled_from(["greedy", "max-offload", "min-transfer"]),
       limits=limit_choices, cost=cost_choices)
def test_partition_invariants(case, strategy, limits, cost):
    mod, calls, mask, groups = case
    result = partition(mod, oracle_for(mask), groups=groups, strategy=strategy, limits=limits, cost_model=cost)
    check_partition(mod, calls, mask, groups, limits, result)


@settings(max_examples=400, **SETTINGS)
@given(case=random_dags(max_ops=20))
def test_greedy_without_limits_is_maximal(case):
    """No two subgraphs joined by an edge could be merged: some path between them leaves
    both (merging would close a cycle). Brute force over the quotient graph."""
    mod, calls, mask, groups = case
    limits = PartitionLimits(None, None, None)
    result = partition(mod, oracle_for(mask), groups=groups, strategy="greedy", limits=limits)
    check_partition(mod, calls, mask, groups, limits, result)
    unit_of = {id(c): (r.name if r else id(c)) for c in calls for r in [result.region_of(c)]}
    succ = {}
    for c in calls:
        for p in arg_producers(c):
            if unit_of[id(p)] != unit_of[id(c)]:
                succ.setdefault(unit_of[id(p)], set()).add(unit_of[id(c)])
    names = {r.name for r in result.regions}
    for a in names:
        for b in succ.get(a, ()):
            if b not in names:
                continue
            # a -> b directly; merging is legal iff no path a -> x -> ... -> b with x outside {a, b}.
            stack = [x for x in succ.get(a, ()) if x != b]
            seen = set(stack)
            reached = False
            while stack:
                x = stack.pop()
                for y in succ.get(x, ()):
                    if y == b:
                        reached = True
                    elif y not in seen and y != a:
                        seen.add(y)
                        stack.append(y)
            assert reached, f"greedy left {a} and {b} apart although merging them is acyclic"


@st.composite
def dags_and_merges(draw):
    n = draw(st.integers(2, 24))
    succ = [sorted({j for j in draw(st.lists(st.integers(i + 1, n - 1), max_size=3))}) if i < n - 1 else []
            for i in range(n)]
    merges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))
    return n, succ, merges


def _brute_groups_reach(n, succ, group_of, ga, gb):
    """Whether group ga reaches gb through some group other than both (on the condensed graph)."""
    gsucc = {}
    for u in range(n):
        for v in succ[u]:
            if group_of[u] != group_of[v]:
                gsucc.setdefault(group_of[u], set()).add(group_of[v])
    stack = [g for g in gsucc.get(ga, ()) if g != gb]
    seen = set(stack)
    while stack:
        g = stack.pop()
        for h in gsucc.get(g, ()):
            if h == gb:
                return True
            if h not in seen and h != ga:
                seen.add(h)
                stack.append(h)
    return False


@settings(max_examples=300, **SETTINGS)
@given(case=dags_and_merges())
def test_quotient_dag_matches_brute_force(case):
    n, succ, merges = case
    q = QuotientDag(n, succ)
    for x, y in merges:
        group_of = [q.find(u) for u in range(n)]
        ga, gb = group_of[x], group_of[y]
        legal = ga == gb or not (_brute_groups_reach(n, succ, group_of, ga, gb)
                                 or _brute_groups_reach(n, succ, group_of, gb, ga))
        assert q.can_merge(x, y) == legal
        assert q.try_merge(x, y) == legal
        # Positions stay a topological order of the groups.
        for u in range(n):
            for v in succ[u]:
                ru, rv = q.find(u), q.find(v)
                assert ru == rv or q.pos[ru] < q.pos[rv]


@settings(max_examples=200, **SETTINGS)
@given(case=random_dags(max_ops=20))
def test_trim_bookkeeping_matches_recomputed_boundaries(case):
    """min-transfer's incremental boundary bytes equal a recomputation from scratch."""
    from tidlx.ir.partition.graph import PartitionGraph
    from tidlx.ir.partition.regions import _RegionState, grow

    mod, calls, mask, groups = case
    graph = PartitionGraph.build(mod, oracle_for(mask), groups)
    _, regions = grow(graph, None)

    def boundary_bytes(members):
        inputs, outputs = graph.region_io(members)
        return sum(graph.ref_bytes[r] for r in inputs + outputs)

    for region in regions:
        state = _RegionState(graph, region)
        for a in sorted(state.atoms):
            if len(state.atoms) == 1:
                break
            delta = state.delta_bytes_if_removed(a)
            rest = sorted(state.calls - set(graph.atoms[a]))
            producers_inside = any(isinstance(r[0], int) and r[0] in state.calls and r[0] not in graph.atoms[a]
                                   for c in graph.atoms[a] for r in graph.in_refs[c])
            readers_inside = any(u in rest for c in graph.atoms[a] for r in graph.out_refs[c]
                                 for u in graph.consumers[r])
            if producers_inside and readers_inside:
                assert delta is None
                continue
            assert delta == boundary_bytes(rest) - boundary_bytes(sorted(state.calls))
            state.remove(a)
