"""Outlining: each region becomes a global function called from the rebuilt ``@main``.

Region N becomes ``@<prefix>N`` with attributes ``Compiler``, ``Primitive=1``, ``Inline=1``
and ``global_symbol``, parameters ``<compiler>_N_i<k>`` (one per input tensor, tuples
flattened) and a body returning its one output tensor or a Tuple of them; ``@main`` calls it
and projects ``.k`` for each output. Calls keep their attributes and layer names; constants
are embedded in the subgraph that uses them; tuples and projections are rebuilt in whichever
function reads them.

With ``composite_name``, each atom of a region (a composite group, or a single call) for which
it returns a name becomes, inside the subgraph, a function with ``Composite=<name>`` and
``PartitionedFromPattern`` attributes called in place, as TVM's MergeComposite writes them::

    %1 = fn (%FunctionVar_0_0: ..., PartitionedFromPattern="nn.conv2d_nn.relu_", Composite="tidl.conv2d_act") {
      %0 = nn.conv2d(%FunctionVar_0_0, meta[relay.Constant][0], ...);
      nn.relu(%0)
    };
    %1(%tidl_0_i0)

A composite's parameters ``FunctionVar_<k>_<j>`` (k: the composite's number in its subgraph)
are the leaf tensors it reads from outside, as for a subgraph (a tuple it reads, such as a
concatenate's, is rebuilt inside it from tensor parameters); its constants are embedded; it
returns the one tensor used outside it or a Tuple of them. The projections of such a tuple
(a split's ``.1`` read by the next layer) are the only glue left between composites, in the
subgraph's body; projections internal to a group (``%bn.0``) stay inside it.
"""

from __future__ import annotations

import heapq
import operator
from typing import Callable, Dict, List, Optional, Sequence, Tuple as PyTuple

from ..errors import TidlxError, TidlxInternalError
from ..expr import Call, Expr, Function, Tuple, TupleGetItem, Var
from ..module import IRModule
from ..traversal import carry_type, post_order
from ..type_infer import infer_expr_type
from ..types import TupleType, Type
from .graph import PartitionError, PartitionGraph, Ref, peel, type_at


def _assemble(ty: Type, key, path: PyTuple[int, ...], leaf: Callable[[Ref], Expr]) -> Expr:
    """The value at ``(key, path)`` built from its leaf tensors: the leaf itself, or nested Tuples."""
    if not isinstance(ty, TupleType):
        return leaf((key, path))
    # Iterative post-order over the tuple type: children first, then the Tuple.
    built: Dict[PyTuple[int, ...], Expr] = {}
    stack = [(path, ty, False)]
    while stack:
        p, t, ready = stack.pop()
        if not isinstance(t, TupleType):
            built[p] = leaf((key, p))
        elif ready:
            built[p] = Tuple([built[p + (i,)] for i in range(len(t.fields))])
        else:
            stack.append((p, t, True))
            for i, f in enumerate(t.fields):
                stack.append((p + (i,), f, False))
    return built[path]


def _projection(base: Expr, index: int) -> TupleGetItem:
    """``base.index``, typed when ``base`` is (field ``index`` of its tuple type, as inference
    would say), so that the calls rebuilt on top of it keep their types (carry_type)."""
    out = TupleGetItem(base, index)
    t = base._checked_type
    if isinstance(t, TupleType) and 0 <= index < len(t.fields):
        out._set_checked_type(t.fields[index])
    return out


class _Context:
    """One function being built (``@main`` or a subgraph): rebuilt nodes by original id, and
    ``external(base, path)`` giving the expression of a value produced elsewhere (or None)."""

    def __init__(self, external: Callable[[Expr, PyTuple[int, ...]], Optional[Expr]]):
        self.memo: Dict[int, Expr] = {}
        self.projections: Dict[PyTuple[object, PyTuple[int, ...]], Expr] = {}
        self.external = external

    def project(self, key, base: Expr, path: PyTuple[int, ...]) -> Expr:
        """``base.path`` built once per function (shared by readers and outputs)."""
        expr = base
        for depth in range(1, len(path) + 1):
            k = (key, path[:depth])
            nxt = self.projections.get(k)
            if nxt is None:
                nxt = self.projections[k] = _projection(expr, path[depth - 1])
            expr = nxt
        return expr

    def translate(self, root: Expr) -> Expr:
        memo = self.memo
        done = memo.get(id(root))
        if done is not None:  # most arguments: a value already built in this function
            return done
        stack = [(root, False)]
        while stack:
            x, ready = stack.pop()
            if id(x) in memo:
                continue
            if isinstance(x, TupleGetItem):
                base, path = peel(x)
                if isinstance(base, (Call, Var)):
                    ext = self.external(base, path)
                    if ext is not None:
                        memo[id(x)] = ext
                        continue
                    if id(base) in memo and not isinstance(memo[id(base)], Tuple):
                        memo[id(x)] = self.project(id(base), memo[id(base)], path)
                        continue
                if not ready:
                    stack.append((x, True))
                    stack.append((x.tuple_value, False))
                    continue
                inner = memo[id(x.tuple_value)]
                memo[id(x)] = x if inner is x.tuple_value else carry_type(TupleGetItem(inner, x.index), x)
            elif isinstance(x, Tuple):
                if not ready:
                    stack.append((x, True))
                    stack.extend((f, False) for f in reversed(x.fields))
                    continue
                fields = [memo[id(f)] for f in x.fields]
                same = all(map(operator.is_, fields, x.fields))
                memo[id(x)] = x if same else carry_type(Tuple(fields), x)
            elif isinstance(x, (Call, Var)):
                ext = self.external(x, ())
                if ext is None:
                    raise PartitionError(f"internal error: {type(x).__name__} used before it was built "
                                         f"while outlining")
                memo[id(x)] = ext
            else:
                memo[id(x)] = x  # constants, globals, ops: shared as they are
        return memo[id(root)]


def unit_order(graph: PartitionGraph, region_of: Sequence[int]) -> List[PyTuple[str, int]]:
    """Host calls and regions in a topological order (Kahn; ties by first call, so it is
    deterministic): ``("host", call)`` or ``("region", number)``. Raises if the regions make
    the graph cyclic, which no strategy may do."""
    # Units as ints (a host call c is c, region r is n + r), so the loops are over lists.
    n = len(graph.calls)
    unit_of = [c if r < 0 else n + r for c, r in enumerate(region_of)]
    num_units = n + (max(region_of) + 1 if n and max(region_of) >= 0 else 0)
    first = [-1] * num_units
    succ: List[Optional[set]] = [None] * num_units
    indegree = [0] * num_units
    units = []  # in order of first call
    for c in range(n):
        u = unit_of[c]
        if first[u] < 0:
            first[u] = c
            succ[u] = set()
            units.append(u)
    deps = graph.deps
    for c in range(n):
        u = unit_of[c]
        for d in deps[c]:
            du = unit_of[d]
            if du != u and u not in succ[du]:
                succ[du].add(u)
                indegree[u] += 1
    ready = [(first[u], u) for u in units if indegree[u] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, u = heapq.heappop(ready)
        order.append(u)
        for s in succ[u]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(ready, (first[s], s))
    if len(order) != len(units):
        raise PartitionError("internal error: the regions make the graph cyclic")
    return [("host", u) if u < n else ("region", u - n) for u in order]


#: ``composite_name(calls)``: the Composite attribute for an atom's calls (in post order), or
#: None to leave them inline in the subgraph.
CompositeNamer = Callable[[Sequence[Call]], Optional[str]]


def _pattern_text(body: Expr) -> str:
    """TVM's ``PartitionedFromPattern``: the ops (and projections) of a composite body in post
    order, each followed by ``_`` (``nn.batch_norm_TupleGetItem0_``)."""
    parts = []
    for node in post_order(body, enter_functions=False):
        if isinstance(node, Call):
            parts.append(f"{node.op_name}_")
        elif isinstance(node, TupleGetItem):
            parts.append(f"TupleGetItem{node.index}_")
    return "".join(parts)


def _build_body(graph: PartitionGraph, members: Sequence[int], outputs: Sequence[Ref], ctx: "_Context",
                built_elsewhere: Optional[Dict[Ref, Expr]] = None) -> PyTuple[Expr, Type]:
    """Translates the member calls (in order) into ``ctx``; returns the body returning
    ``outputs`` (one tensor, or a Tuple of them) and its type. ``built_elsewhere`` holds
    outputs already built (by Composite calls)."""
    calls = graph.calls
    for c in members:
        call = calls[c]
        if id(call) not in ctx.memo:
            ctx.memo[id(call)] = carry_type(Call(call.op, [ctx.translate(a) for a in call.args], call.attrs,
                                                 call.layer), call)
    results = []
    for ref in outputs:
        if built_elsewhere is not None and ref in built_elsewhere:
            results.append(built_elsewhere[ref])
            continue
        producer, path = ref
        base = calls[producer]
        built = ctx.memo[id(base)]
        results.append(ctx.project(id(base), built, path) if path else built)
    out_types = [graph.ref_type[r] for r in outputs]
    if len(results) == 1:
        return results[0], out_types[0]
    return Tuple(results), TupleType(tuple(out_types))


def _composite(graph: PartitionGraph, atom: Sequence[int], number: int, name: str) -> PyTuple[Function, List[Ref],
                                                                                             List[Ref]]:
    """The Composite function of one atom: ``(function, input refs, output refs)``."""
    inputs, outputs = graph.region_io(atom)
    if not outputs:
        raise PartitionError(f"internal error: composite {name} of {graph.describe(atom[0])} has no output")
    params = {ref: Var(f"FunctionVar_{number}_{j}", graph.ref_type[ref]) for j, ref in enumerate(inputs)}
    inside = set(atom)

    def external(base: Expr, path: PyTuple[int, ...]) -> Optional[Expr]:
        if isinstance(base, Call) and graph.index[id(base)] in inside:
            return None
        key = base if isinstance(base, Var) else graph.index[id(base)]
        return _assemble(type_at(base.checked_type, path), key, path, params.__getitem__)

    body, ret_type = _build_body(graph, atom, outputs, _Context(external))
    fn = Function([params[r] for r in inputs], body, ret_type,
                  {"PartitionedFromPattern": _pattern_text(body), "Composite": name})
    return fn, inputs, outputs


def outline(graph: PartitionGraph, regions: Sequence[Sequence[int]], names: Sequence[str], compiler: str,
            region_io: Sequence[PyTuple[List[Ref], List[Ref]]],
            composite_name: Optional[CompositeNamer] = None) -> PyTuple[IRModule, Dict[int, Function]]:
    """The partitioned module: ``regions[k]`` becomes ``@names[k]`` with parameters
    ``<compiler>_k_i<j>`` for the inputs ``region_io[k][0]`` and results ``region_io[k][1]``;
    atoms that ``composite_name`` names become Composite functions inside their subgraph.

    Returns the module and, for every call put in a Composite function, that function (by the
    ``id`` of the original call)."""
    func = graph.func
    calls = graph.calls
    region_of = [-1] * len(calls)
    for k, region in enumerate(regions):
        for c in region:
            region_of[c] = k
    host_values: Dict[Ref, Expr] = {}   # region outputs as @main sees them
    composite_of: Dict[int, Function] = {}

    def host_external(base: Expr, path: PyTuple[int, ...]) -> Optional[Expr]:
        if isinstance(base, Call) and region_of[graph.index[id(base)]] >= 0:
            key = graph.index[id(base)]
            return _assemble(type_at(base.checked_type, path), key, path, host_values.__getitem__)
        return None

    host = _Context(host_external)
    for p in func.params:
        host.memo[id(p)] = p

    def host_leaf(ref: Ref) -> Expr:
        """An input tensor of a subgraph as @main has it."""
        if ref in host_values:
            return host_values[ref]
        producer, path = ref
        base = producer if isinstance(producer, Var) else calls[producer]
        built = host.memo[id(base)]
        return host.project(id(base), built, path) if path else built

    module = graph.module.copy()   # other functions and their GlobalVars stay as they are
    entry_name = next(name for name, fn in graph.module.items() if fn is func)
    new_functions: Dict[str, Function] = {}
    for kind, u in unit_order(graph, region_of):
        if kind == "host":
            call = calls[u]
            op = call.op
            args = [host.translate(a) for a in call.args]
            same = all(map(operator.is_, args, call.args))
            host.memo[id(call)] = call if same else carry_type(Call(op, args, call.attrs, call.layer), call)
            continue
        name = names[u]
        inputs, outputs = region_io[u]
        params: Dict[Ref, Var] = {}
        for k, ref in enumerate(inputs):
            params[ref] = Var(f"{compiler}_{u}_i{k}", graph.ref_type[ref])
        members = set(regions[u])
        composite_values: Dict[Ref, Expr] = {}   # outputs of the Composite calls, as the subgraph has them

        def region_external(base: Expr, path: PyTuple[int, ...], members=members, params=params,
                            composite_values=composite_values):
            if isinstance(base, Var):
                return _assemble(type_at(base.checked_type, path), base, path, params.__getitem__)
            c = graph.index[id(base)]
            if c in members:
                if id(base) in composite_of:
                    return _assemble(type_at(base.checked_type, path), c, path, composite_values.__getitem__)
                return None
            return _assemble(type_at(base.checked_type, path), c, path, params.__getitem__)

        ctx = _Context(region_external)
        if composite_name is not None:
            _outline_composites(graph, regions[u], ctx, params, composite_values, composite_name, composite_of)
        inline = [c for c in regions[u] if id(calls[c]) not in composite_of]
        body, ret_type = _build_body(graph, inline, outputs, ctx, composite_values)
        fn = Function([params[r] for r in inputs], body, ret_type,
                      {"Compiler": compiler, "Primitive": 1, "Inline": 1, "global_symbol": name})
        new_functions[name] = fn
        gv = module.get_global_var(name)
        site = Call(gv, [host_leaf(r) for r in inputs])
        # Typed now (by inference, against the new function alone), so that the host calls
        # rebuilt after it keep their types (carry_type) and the module is not typed again whole.
        try:
            infer_expr_type(site, IRModule({name: fn}))
        except TidlxError as exc:
            raise TidlxInternalError(f"partitioning built an ill-typed call of @{name}: {exc}") from None
        if len(outputs) == 1:
            host_values[outputs[0]] = site
        else:
            for k, ref in enumerate(outputs):
                host_values[ref] = TupleGetItem(site, k)
                infer_expr_type(host_values[ref])
    body = host.translate(func.body)
    entry = module[entry_name] = Function(func.params, body, func.ret_type, func.attrs)
    if body.has_type:  # the body was typed as it was built: the function's type is all that is left
        infer_expr_type(entry, module, entry_name, entry)
    for name in names:
        module[name] = new_functions[name]
    return module, composite_of


def _outline_composites(graph: PartitionGraph, region: Sequence[int], ctx: _Context, params: Dict[Ref, Var],
                        composite_values: Dict[Ref, Expr], composite_name: CompositeNamer,
                        composite_of: Dict[int, Function]) -> None:
    """Writes the named atoms of a region as Composite calls into the subgraph being built
    (``ctx``), atoms in topological order; unnamed atoms are translated inline."""
    calls = graph.calls
    members = set(region)

    def leaf(ref: Ref) -> Expr:
        """An input tensor of a composite as the subgraph has it."""
        producer, path = ref
        if not isinstance(producer, int) or producer not in members:
            return params[ref]
        if ref in composite_values:
            return composite_values[ref]
        base = calls[producer]
        built = ctx.memo[id(base)]
        return ctx.project(id(base), built, path) if path else built

    atoms = sorted({graph.atom_of[c] for c in region}, key=graph.atom_pos.__getitem__)
    number = 0
    for a in atoms:
        atom = graph.atoms[a]
        name = composite_name([calls[c] for c in atom])
        if name is not None and (not isinstance(name, str) or not name):
            raise PartitionError(f"composite_name returned {name!r} for {graph.describe(atom[0])}; expected None "
                                 f"or a non-empty Composite name")
        if name is None:
            for c in atom:
                call = calls[c]
                ctx.memo[id(call)] = carry_type(Call(call.op, [ctx.translate(x) for x in call.args], call.attrs,
                                                     call.layer), call)
            continue
        fn, inputs, outputs = _composite(graph, atom, number, name)
        number += 1
        site = Call(fn, [leaf(r) for r in inputs])
        if len(outputs) == 1:
            composite_values[outputs[0]] = site
        else:
            for k, ref in enumerate(outputs):
                composite_values[ref] = TupleGetItem(site, k)
        for c in atom:
            composite_of[id(calls[c])] = fn


__all__ = ["outline", "unit_order", "CompositeNamer"]
