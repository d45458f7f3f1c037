"""The dataflow graph a partitioner works on: the calls of ``@main`` and the tensors between them.

Calls are the units of placement. Tuples and projections are plumbing: they are dissolved
into the *leaf tensors* that flow from a producing call (or a parameter of ``@main``) to a
consuming call, and rebuilt wherever they are needed when subgraphs are outlined. So a
projection ``%bn.0`` of an offloaded ``nn.batch_norm`` leaves its subgraph as one tensor,
and the tuple fed to an offloaded ``concatenate`` is rebuilt inside that subgraph.

A leaf tensor is named by a *ref*: ``(producer, path)`` where ``producer`` is a call index
(an int) or a parameter ``Var`` of ``@main``, and ``path`` the projection indices into the
producer's (tuple) value. Constants are not refs: a subgraph that uses one embeds it.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple as PyTuple, Union

from ..analysis import macs as call_macs
from ..errors import TidlxError
from ..expr import Call, Constant, Expr, Function, GlobalVar, Let, Tuple, TupleGetItem, Var
from ..module import IRModule
from ..op import Op
from ..traversal import post_order
from ..type_infer import describe_call
from ..types import TensorType, TupleType, Type
from .quotient import CycleError, QuotientDag

Ref = PyTuple[Union[int, Var], PyTuple[int, ...]]
#: The support oracle: None when the target takes the call, else the reason it does not.
SupportOracle = Callable[[Call], Optional[str]]


class PartitionError(TidlxError):
    """Partitioning failed: bad options, a malformed composite group, or a graph it cannot take."""


def peel(expr: Expr) -> PyTuple[Expr, PyTuple[int, ...]]:
    """``%x.0.1`` -> (``%x``, (0, 1)): the base under a chain of projections and the path."""
    path: List[int] = []
    while isinstance(expr, TupleGetItem):
        path.append(expr.index)
        expr = expr.tuple_value
    path.reverse()
    return expr, tuple(path)


def type_at(ty: Type, path: Sequence[int]) -> Type:
    for i in path:
        ty = ty.fields[i]
    return ty


def leaf_types(ty: Type) -> List[PyTuple[PyTuple[int, ...], Type]]:
    """The (path, type) of every non-tuple leaf of ``ty``, left to right."""
    out = []
    stack = [((), ty)]
    while stack:
        path, t = stack.pop()
        if isinstance(t, TupleType):
            for i in range(len(t.fields) - 1, -1, -1):
                stack.append((path + (i,), t.fields[i]))
        else:
            out.append((path, t))
    return out


def describe_producer(producer, path: Sequence[int], calls: Sequence[Call]) -> str:
    """``%input``, ``nn.conv2d 'conv1'`` or ``split 's'.1`` — how reports name a tensor."""
    base = f"%{producer.name_hint}" if isinstance(producer, Var) else describe_call(calls[producer])
    return base + "".join(f".{i}" for i in path)


class PartitionGraph:
    """The calls of a typed ``@main``, the leaf tensors between them, support and MACs.

    ``groups`` are composite groups (calls that go to one subgraph together or all stay on
    the host). Build with ``PartitionGraph.build``; strategies read it and never change it.
    """

    def __init__(self):
        self.module: IRModule = None
        self.func: Function = None
        self.calls: List[Call] = []
        self.index: Dict[int, int] = {}
        self.deps: List[List[int]] = []        # producer calls of each call (distinct, arg order)
        self.users: List[List[int]] = []       # consumer calls of each call (distinct, post order)
        self.in_refs: List[List[Ref]] = []     # leaf tensors each call reads (distinct, arg order)
        self.out_refs: List[List[Ref]] = []    # leaf tensors of each call that something reads
        self.consumers: Dict[Ref, List[int]] = {}
        self.escapes: Set[Ref] = set()          # leaf tensors returned by @main
        self.ref_type: Dict[Ref, TensorType] = {}
        self.ref_bytes: Dict[Ref, int] = {}
        self.macs: List[int] = []
        self.oracle_reason: List[Optional[str]] = []   # None: the target takes the call
        self.atoms: List[List[int]] = []        # composite groups and single calls, in post order
        self.atom_of: List[int] = []
        self.atom_pos: List[int] = []           # a topological position per atom
        self.atom_supported: List[bool] = []
        self.group_reason: Dict[int, str] = {}  # supported calls held back by their group
        self._atom_dag: Optional[QuotientDag] = None   # the atoms contracted (built with them)

    # --- construction -----------------------------------------------------------------------

    @classmethod
    def build(cls, mod: IRModule, supported: SupportOracle, groups: Iterable[Iterable[Call]] = (),
              entry: str = "main") -> "PartitionGraph":
        if not callable(supported):
            raise PartitionError(f"the support oracle must be a function Call -> Optional[str], "
                                 f"got {type(supported).__name__}")
        if entry not in mod:
            raise PartitionError(f"the module has no @{entry} to partition")
        if not all(fn.body.has_type for _, fn in mod.items()):
            mod.infer_types()   # types are cached on the nodes; typed modules skip the walk
        g = cls()
        g.module = mod
        g.func = func = mod[entry]
        nodes = post_order(func.body, enter_functions=False)
        g.calls = []
        for node in nodes:
            kind = type(node)
            if kind is Call:
                g.calls.append(node)
            elif isinstance(node, Let):
                raise PartitionError(f"@{entry} binds %{node.var.name_hint} with let; partitioning needs a "
                                     f"dataflow graph (no let)")
            elif isinstance(node, Function):
                raise PartitionError(f"@{entry} contains a nested fn (closure); partitioning needs a dataflow "
                                     f"graph of op calls (pass composite patterns as groups instead)")
            elif isinstance(node, Call):
                g.calls.append(node)
        g.index = {id(c): i for i, c in enumerate(g.calls)}
        n = len(g.calls)
        g.deps = [[] for _ in range(n)]
        g.users = [[] for _ in range(n)]
        g.in_refs = [[] for _ in range(n)]
        opaque_arg: Dict[int, str] = {}
        for i, c in enumerate(g.calls):
            refs = g._plain_refs(c.args)
            if refs is None:
                refs, opaque = g._leaf_refs(c.args)
                if opaque:
                    opaque_arg[i] = opaque
            g.in_refs[i] = refs
            seen = set()
            for producer, _ in refs:
                if isinstance(producer, int) and producer not in seen:
                    seen.add(producer)
                    g.deps[i].append(producer)
                    g.users[producer].append(i)
            for ref in refs:
                g.consumers.setdefault(ref, []).append(i)
        result_refs, _ = g._leaf_refs((func.body,))
        g.escapes = set(result_refs)
        for ref in result_refs:
            g.consumers.setdefault(ref, [])
        g.out_refs = [[] for _ in range(n)]
        for ref in g.consumers:
            if isinstance(ref[0], int):
                g.out_refs[ref[0]].append(ref)
        for refs in g.out_refs:
            refs.sort(key=lambda r: r[1])
        from ..analysis import tensor_bytes

        bytes_of: Dict[Type, int] = {}  # by type: the leaf tensors of a model have few distinct types
        for ref, t in g.ref_type.items():
            size = bytes_of.get(t)
            if size is None:
                size = bytes_of[t] = tensor_bytes(t)
            g.ref_bytes[ref] = size
        g.macs = [call_macs(c, mod) for c in g.calls]
        g.oracle_reason = [g._ask(supported, i, opaque_arg.get(i)) for i in range(n)]
        g._build_atoms(groups)
        return g

    def _plain_refs(self, args: Sequence[Expr]) -> Optional[List[Ref]]:
        """``_leaf_refs(args)`` when every argument is a constant, a call or variable with a
        tensor type, or a tensor field of a call's tuple (most calls of a model); None otherwise
        (then ``_leaf_refs`` works it out)."""
        refs: List[Ref] = []
        for x in args:
            kind = type(x)
            if kind is Constant:
                continue
            if kind is TupleGetItem:  # a field of a call's tuple (a batch norm's .0)
                base = x.tuple_value
                if type(base) is not Call or base._checked_type.__class__ is not TupleType:
                    return None
                t = base._checked_type.fields[x.index]
                if t.__class__ is not TensorType:
                    return None
                ref = (self.index[id(base)], (x.index,))
            else:
                t = x._checked_type
                if t.__class__ is not TensorType:
                    return None
                if kind is Call:
                    ref = (self.index[id(x)], ())
                elif kind is Var:
                    ref = (x, ())
                else:
                    return None
            if ref not in self.ref_type:
                self.ref_type[ref] = t
            if ref not in refs:
                refs.append(ref)
        return refs

    def _leaf_refs(self, exprs: Sequence[Expr]) -> PyTuple[List[Ref], Optional[str]]:
        """The distinct leaf tensors read through ``exprs``, left to right; and what makes them
        unusable in a subgraph, if anything (a function or global passed as a value)."""
        refs: List[Ref] = []
        seen = set()
        opaque = None
        stack = list(reversed(exprs))
        while stack:
            x = stack.pop()
            path: PyTuple[int, ...] = ()
            if isinstance(x, TupleGetItem):
                x, path = peel(x)
                if isinstance(x, Tuple):
                    # A projection of a literal tuple reads the tuple (rebuilt as a whole).
                    stack.append(x)
                    continue
            if isinstance(x, Tuple):
                stack.extend(reversed(x.fields))
                continue
            if isinstance(x, Constant):
                continue
            if isinstance(x, Call):
                producer = self.index[id(x)]
            elif isinstance(x, Var):
                producer = x
            else:
                opaque = f"takes a {type(x).__name__} as a value"
                continue
            for leaf_path, leaf_t in leaf_types(type_at(x.checked_type, path)):
                if not isinstance(leaf_t, TensorType):
                    opaque = f"takes a value of type {leaf_t}, not a tensor"
                    continue
                ref = (producer, path + leaf_path)
                if ref not in seen:
                    seen.add(ref)
                    refs.append(ref)
                    self.ref_type[ref] = leaf_t
        return refs, opaque

    def _ask(self, supported: SupportOracle, i: int, opaque: Optional[str]) -> Optional[str]:
        call = self.calls[i]
        if isinstance(call.op, GlobalVar):
            return f"calls the global function @{call.op.name_hint}, not an op"
        if not isinstance(call.op, Op):
            return "calls a function value, not an op"
        if opaque:
            return opaque
        reason = supported(call)
        if reason is None:
            return None
        if not isinstance(reason, str) or not reason:
            raise PartitionError(f"the support oracle returned {reason!r} for {describe_call(call)}; expected "
                                 f"None (supported) or a non-empty reason string")
        return reason

    def _build_atoms(self, groups: Iterable[Iterable[Call]]) -> None:
        n = len(self.calls)
        parent = list(range(n))

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        listed = []
        for k, group in enumerate(groups):
            members = []
            for call in group:
                i = self.index.get(id(call))
                if i is None:
                    what = describe_call(call) if isinstance(call, Call) else type(call).__name__
                    raise PartitionError(f"composite group {k} lists {what}, which is not a call of @main")
                members.append(i)
            listed.append(members)
            for i in members[1:]:
                ra, rb = find(members[0]), find(i)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
        by_root: Dict[int, List[int]] = {}
        for i in range(n):
            by_root.setdefault(find(i), []).append(i)
        self.atoms = list(by_root.values())   # ordered by first member: roots are group minima
        self.atom_of = [0] * n
        for a, members in enumerate(self.atoms):
            for i in members:
                self.atom_of[i] = a
        try:
            q = QuotientDag(n, self.users, [m for m in self.atoms if len(m) > 1])
        except CycleError as exc:
            bad = [m for m in self.atoms if find(m[0]) in {find(r) for r in exc.groups} and len(m) > 1]
            names = ", ".join(describe_call(self.calls[i]) for i in (bad[0] if bad else exc.groups)[:6])
            raise PartitionError(f"composite group [{names}] is not convex: a path leaves it and comes back, "
                                 f"so no subgraph can hold it") from None
        self._atom_dag = q  # kept unmerged: quotient() hands out copies
        self.atom_pos = [q.position(m[0]) for m in self.atoms]
        self.atom_supported = []
        for members in self.atoms:
            blocked = [i for i in members if self.oracle_reason[i] is not None]
            self.atom_supported.append(not blocked)
            if blocked:
                first = blocked[0]
                for i in members:
                    if self.oracle_reason[i] is None:
                        self.group_reason[i] = (f"its composite group stays on the host with "
                                                f"{describe_call(self.calls[first])}: {self.oracle_reason[first]}")

    # --- queries ----------------------------------------------------------------------------

    def quotient(self, regions: Iterable[Sequence[int]] = ()) -> QuotientDag:
        """A fresh QuotientDag over the calls with every atom (and the given regions) contracted."""
        regions = list(regions)
        if not regions:
            return self._atom_dag.copy()  # the same DAG as built afresh from the atoms
        groups = [m for m in self.atoms if len(m) > 1]
        groups.extend(regions)
        return QuotientDag(len(self.calls), self.users, groups)

    def supported(self, i: int) -> bool:
        """Whether call ``i`` may go to the target (the oracle and its composite group agree)."""
        return self.atom_supported[self.atom_of[i]]

    def describe(self, i: int) -> str:
        return describe_call(self.calls[i])

    def describe_ref(self, ref: Ref) -> str:
        return describe_producer(ref[0], ref[1], self.calls)

    def region_io(self, members: Iterable[int]) -> PyTuple[List[Ref], List[Ref]]:
        """The leaf tensors entering and leaving a set of calls, in a deterministic order:
        inputs by first use, outputs by producer then path."""
        members = sorted(members)
        inside = set(members)
        inputs: List[Ref] = []
        seen = set()
        outputs: List[Ref] = []
        for c in members:
            for ref in self.in_refs[c]:
                p = ref[0]
                if (not isinstance(p, int) or p not in inside) and ref not in seen:
                    seen.add(ref)
                    inputs.append(ref)
            for ref in self.out_refs[c]:
                if ref in self.escapes or any(u not in inside for u in self.consumers[ref]):
                    outputs.append(ref)
        return inputs, outputs


__all__ = ["PartitionGraph", "PartitionError", "SupportOracle", "Ref", "peel", "type_at", "leaf_types",
           "describe_producer"]
