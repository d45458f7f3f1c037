"""``partition``: the entry point, and the result it returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple as PyTuple, Union

from ..analysis import describe_bytes, describe_macs
from ..expr import Call, Function
from ..module import IRModule
from ..type_infer import describe_call
from ..types import TensorType
from .gcpause import gc_paused
from .graph import PartitionError, PartitionGraph, Ref, SupportOracle
from .outline import CompositeNamer, outline
from .regions import PartitionLimits, apply_limits
from .strategies import CostModel, get_strategy


@dataclass(frozen=True)
class Boundary:
    """One tensor crossing a subgraph boundary.

    ``name`` is the subgraph parameter (``tidl_0_i1``) for an input, ``<function>.<k>`` (or
    the function name when it has one output) for an output. ``producer`` is the original
    call computing it (None for a parameter of ``@main``, then ``source`` names it) and
    ``path`` the projection into that call's tuple value, e.g. (0,) for ``%bn.0``.
    """

    name: str
    type: TensorType
    nbytes: int
    source: str
    producer: Optional[Call]
    path: PyTuple[int, ...]


@dataclass(frozen=True)
class Region:
    """One subgraph: the function ``name`` of the partitioned module, and the original calls
    it holds (in topological order)."""

    name: str
    index: int
    calls: PyTuple[Call, ...]
    macs: int
    inputs: PyTuple[Boundary, ...]
    outputs: PyTuple[Boundary, ...]

    @property
    def layers(self) -> PyTuple[str, ...]:
        """Layer names of the calls, each once, in order (calls without one are skipped)."""
        seen, out = set(), []
        for c in self.calls:
            if c.layer is not None and c.layer not in seen:
                seen.add(c.layer)
                out.append(c.layer)
        return tuple(out)

    @property
    def num_nodes(self) -> int:
        return len(self.calls)

    @property
    def num_io(self) -> int:
        return len(self.inputs) + len(self.outputs)

    @property
    def io_bytes(self) -> int:
        return sum(b.nbytes for b in self.inputs) + sum(b.nbytes for b in self.outputs)


@dataclass(frozen=True)
class HostCall:
    """A call left on the host. ``supported`` is True when the oracle accepted it and the
    partitioner kept it back (``reason`` then says why: a limit, its group, the cost model)."""

    call: Call
    reason: str
    supported: bool
    macs: int

    @property
    def op_name(self) -> Optional[str]:
        return self.call.op_name

    @property
    def layer(self) -> Optional[str]:
        return self.call.layer


@dataclass(frozen=True)
class PartitionResult:
    module: IRModule
    regions: PyTuple[Region, ...]
    host_calls: PyTuple[HostCall, ...]
    strategy: str
    limits: PartitionLimits
    compiler: str
    _region_by_call: Dict[int, Region] = field(repr=False, compare=False, default_factory=dict)
    _host_by_call: Dict[int, HostCall] = field(repr=False, compare=False, default_factory=dict)
    _composite_by_call: Dict[int, Function] = field(repr=False, compare=False, default_factory=dict)

    def composite_of(self, call: Call) -> Optional[Function]:
        """The Composite function (inside its subgraph) that holds an original call, or None
        (host calls, and offloaded calls left inline)."""
        return self._composite_by_call.get(id(call))

    def region_of(self, call: Call) -> Optional[Region]:
        """The region holding an original call, or None if it stays on the host."""
        return self._region_by_call.get(id(call))

    def host_reason(self, call: Call) -> Optional[str]:
        """Why an original call stays on the host (None if it is offloaded)."""
        host = self._host_by_call.get(id(call))
        return host.reason if host else None

    @property
    def num_subgraphs(self) -> int:
        return len(self.regions)

    @property
    def offloaded_macs(self) -> int:
        return sum(r.macs for r in self.regions)

    @property
    def host_macs(self) -> int:
        return sum(h.macs for h in self.host_calls)

    @property
    def total_macs(self) -> int:
        return self.offloaded_macs + self.host_macs

    @property
    def transfer_bytes(self) -> int:
        """Bytes crossing all subgraph boundaries per inference."""
        return sum(r.io_bytes for r in self.regions)

    def estimated_seconds(self, cost: Optional[CostModel] = None) -> float:
        """The CostModel's estimate of one inference with this partition."""
        cost = cost or CostModel()
        return (sum(cost.subgraph_seconds(r.io_bytes, r.macs) for r in self.regions)
                + cost.host_seconds(self.host_macs))

    def summary(self) -> str:
        """A short text report: one line per subgraph, then the host calls and their reasons."""
        total = self.total_macs or 1
        lines = [f"{self.num_subgraphs} subgraph(s) ({self.strategy}), "
                 f"{describe_macs(self.offloaded_macs)} of {describe_macs(self.total_macs)} "
                 f"({100.0 * self.offloaded_macs / total:.1f}%) offloaded, "
                 f"{describe_bytes(self.transfer_bytes)} across boundaries"]
        for r in self.regions:
            lines.append(f"  @{r.name}: {r.num_nodes} nodes, {describe_macs(r.macs)}, "
                         f"{len(r.inputs)} in / {len(r.outputs)} out ({describe_bytes(r.io_bytes)})")
        for h in self.host_calls:
            lines.append(f"  host: {describe_call(h.call)}: {h.reason}")
        return "\n".join(lines)


def _as_module(func_or_mod: Union[IRModule, Function], entry: str) -> IRModule:
    if isinstance(func_or_mod, IRModule):
        return func_or_mod
    if isinstance(func_or_mod, Function):
        return IRModule({entry: func_or_mod})
    raise PartitionError(f"partition() takes an IRModule or a Function, got {type(func_or_mod).__name__}")


def partition(func_or_mod: Union[IRModule, Function], supported: SupportOracle, *,
              groups: Iterable[Sequence[Call]] = (), strategy: str = "greedy",
              limits: Optional[PartitionLimits] = None, cost_model: Optional[CostModel] = None,
              compiler: str = "tidl", name_prefix: Optional[str] = None, entry: str = "main",
              check: bool = True, composite_name: Optional[CompositeNamer] = None) -> PartitionResult:
    """Splits ``@entry`` into subgraphs for ``compiler`` and the host.

    ``supported(call)`` returns None when the target takes an op call, else the reason it
    does not. ``groups`` lists calls that must share a subgraph or all stay on the host
    (composite patterns such as conv2d + bias_add + relu); they must be convex. ``strategy``
    names a registered strategy (``greedy``, ``max-offload``, ``min-transfer``). Subgraphs
    are named ``<name_prefix><N>`` (default ``<compiler>_``), numbered in topological order
    of their first call; their parameters are ``<compiler>_<N>_i<k>``. With ``check`` the
    partitioned module is verified. With ``composite_name(calls) -> name | None``, each
    offloaded group (or single call) it names becomes a function with ``Composite=<name>``
    called in place inside its subgraph, as TVM's MergeComposite writes them.
    """
    if not isinstance(compiler, str) or not compiler.isidentifier():
        raise PartitionError(f"compiler name must be an identifier, got {compiler!r}")
    prefix = f"{compiler}_" if name_prefix is None else name_prefix
    if not isinstance(prefix, str) or not (prefix + "0").isidentifier():
        raise PartitionError(f"name_prefix must make identifiers, got {name_prefix!r}")
    limits = PartitionLimits() if limits is None else limits
    if not isinstance(limits, PartitionLimits):
        raise PartitionError(f"limits must be a PartitionLimits, got {type(limits).__name__}")
    cost = CostModel() if cost_model is None else cost_model
    if not isinstance(cost, CostModel):
        raise PartitionError(f"cost_model must be a CostModel, got {type(cost).__name__}")
    run_strategy = get_strategy(strategy)
    mod = _as_module(func_or_mod, entry)
    with gc_paused():
        return _partition(mod, supported, groups, strategy, run_strategy, limits, cost, compiler, prefix, entry,
                          check, composite_name)


def _partition(mod, supported, groups, strategy, run_strategy, limits, cost, compiler, prefix, entry,
               check, composite_name) -> PartitionResult:
    graph = PartitionGraph.build(mod, supported, groups, entry)

    outcome = run_strategy(graph, limits, cost)
    reasons: Dict[int, str] = dict(graph.group_reason)
    reasons.update(outcome.reasons)
    _check_outcome(graph, outcome.regions, strategy)
    regions = apply_limits(graph, [sorted(r) for r in outcome.regions if r], limits, reasons)
    regions.sort(key=lambda r: r[0])
    names, region_io, new_mod, composite_of = _outline_regions(mod, graph, regions, prefix, compiler, composite_name,
                                                               check)
    return _result(graph, regions, names, region_io, reasons, new_mod, strategy, limits, compiler, composite_of)


def _outline_regions(mod, graph, regions, prefix, compiler, composite_name, check):
    """Each region outlined as a ``{prefix}{k}`` function (a name the module holds already is an error):
    ``(names, region_io, new module, composite_of)``; ``check`` verifies the new module."""
    names = [f"{prefix}{k}" for k in range(len(regions))]
    for name in names:
        if name in mod:
            raise PartitionError(f"the module already has a function @{name}; pass another name_prefix")
    region_io = [graph.region_io(r) for r in regions]
    new_mod, composite_of = outline(graph, regions, names, compiler, region_io, composite_name)
    if check:
        from ..verify import verify

        verify(new_mod)
    return names, region_io, new_mod, composite_of


def _check_outcome(graph: PartitionGraph, regions: List[List[int]], strategy: str) -> None:
    """Every region holds whole atoms of supported calls, and no call is in two regions."""
    seen = set()
    for region in regions:
        for c in region:
            if c in seen:
                raise PartitionError(f"strategy '{strategy}' put {graph.describe(c)} in two regions")
            seen.add(c)
            if not graph.supported(c):
                raise PartitionError(f"strategy '{strategy}' offloaded {graph.describe(c)}, which is not supported")
        atoms = {graph.atom_of[c] for c in region}
        if sum(len(graph.atoms[a]) for a in atoms) != len(region):
            raise PartitionError(f"strategy '{strategy}' split a composite group")


def _boundary(graph: PartitionGraph, ref: Ref, name: str) -> Boundary:
    producer, path = ref
    call = graph.calls[producer] if isinstance(producer, int) else None
    return Boundary(name, graph.ref_type[ref], graph.ref_bytes[ref], graph.describe_ref(ref), call, path)


def _result(graph, regions, names, region_io, reasons, new_mod, strategy, limits, compiler,
            composite_of) -> PartitionResult:
    out_regions = []
    in_region = set()
    for k, (region, name, (inputs, outputs)) in enumerate(zip(regions, names, region_io)):
        in_region.update(region)
        ins = tuple(_boundary(graph, ref, f"{compiler}_{k}_i{j}") for j, ref in enumerate(inputs))
        outs = tuple(_boundary(graph, ref, name if len(outputs) == 1 else f"{name}.{j}")
                     for j, ref in enumerate(outputs))
        out_regions.append(Region(name, k, tuple(graph.calls[c] for c in region),
                                  sum(graph.macs[c] for c in region), ins, outs))
    host = []
    for c, call in enumerate(graph.calls):
        if c in in_region:
            continue
        oracle = graph.oracle_reason[c]
        if oracle is not None:
            host.append(HostCall(call, oracle, False, graph.macs[c]))
            continue
        why = reasons.get(c)
        if why is None:
            raise PartitionError(f"strategy '{strategy}' left the supported {graph.describe(c)} on the host "
                                 f"without a reason")
        host.append(HostCall(call, why, True, graph.macs[c]))
    by_call = {id(c): r for r in out_regions for c in r.calls}
    host_by_call = {id(h.call): h for h in host}
    return PartitionResult(new_mod, tuple(out_regions), tuple(host), strategy, limits, compiler,
                           by_call, host_by_call, composite_of)


__all__ = ["partition", "PartitionResult", "Region", "HostCall", "Boundary"]
