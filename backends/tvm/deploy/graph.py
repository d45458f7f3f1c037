"""The host graph of a partitioned model as a flat, static call sequence (``deploy_graph.json``).

``host_graph(mod)`` lowers a tidlx module with ``to_relax`` (TIDL subgraphs as
``call_dps_packed``), runs a fixed Relax pipeline (``PIPELINE``: legalize every op to a TIR
PrimFunc, fuse, fold constants, drop dead code, name the PrimFuncs) and reads ``main`` into a
``DeployGraph``:

* ``tensors``: every tensor value, with its static shape and dtype and its kind: ``input`` (a
  parameter of ``main``), ``param`` (a constant, named ``p0``, ``p1``, ... in first-use order)
  or ``value`` (written by a node, kept in a storage slot);
* ``nodes``: in execution order, each a ``kernel`` (a ``call_tir`` of a PrimFunc, called through
  its TVM-FFI symbol ``__tvm_ffi_<name>``) or a ``tidl`` subgraph call (``tidl_subgraph_<N>_process``
  as TI's Relax prototype names it, TIDL-NOTES.md "TI's TVM fork"), with input and output tensor ids;
* ``storages``: the static buffers the values live in; a storage is reused once every reader of
  its last value has run (best fit by size, so plans are deterministic);
* ``heads``: the tensor ids of ``main``'s outputs, flattened.

The PrimFuncs go into one TIR module (``tir_module``) that ``deploy`` builds for the target.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from ....ir.errors import TidlxInternalError
from ....ir.module import IRModule
from ..convert import SUBGRAPH_FUNC_PREFIX, to_relax
from ..errors import TvmBackendError, require_tvm

#: the schema name and version written into deploy_graph.json
GRAPH_FORMAT = "tidlx-deploy-graph"
GRAPH_VERSION = 1
#: storage sizes are rounded up to this (the kernels' buffers are 64-byte aligned, as TVM assumes)
STORAGE_ALIGN = 64


def pipeline():
    """The fixed Relax pipeline run before the graph is read (documented in docs/tvm.md)."""
    tvm = require_tvm()
    from tvm import relax

    return tvm.transform.Sequential([
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
        relax.transform.DeadCodeElimination(),
        relax.transform.AttachGlobalSymbol(),
    ])


@dataclass
class Tensor:
    id: int
    shape: tuple
    dtype: str
    kind: str                      # "input" | "param" | "value"
    name: Optional[str] = None     # the input's or the param's name
    storage: Optional[int] = None  # the storage slot of a "value"

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass
class Node:
    kind: str                      # "kernel" | "tidl"
    name: str                      # the PrimFunc's or the TIDL subgraph's name
    symbol: str                    # the C function the driver calls
    inputs: List[int]
    outputs: List[int]
    index: Optional[int] = None    # a TIDL subgraph's number N


@dataclass
class DeployGraph:
    tensors: List[Tensor] = field(default_factory=list)
    nodes: List[Node] = field(default_factory=list)
    storages: List[int] = field(default_factory=list)   # bytes per storage id
    inputs: List[int] = field(default_factory=list)
    heads: List[int] = field(default_factory=list)
    params: Dict[str, np.ndarray] = field(default_factory=dict)
    tir_module: object = None
    relax_module: object = None

    @property
    def kernels(self) -> List[str]:
        return sorted({n.name for n in self.nodes if n.kind == "kernel"})

    @property
    def subgraphs(self) -> List[Node]:
        return [n for n in self.nodes if n.kind == "tidl"]

    def to_json(self, target_name: str, target: dict, library: str) -> str:
        """deploy_graph.json: the schema in docs/tvm.md; sorted keys, so the same graph gives the same bytes."""
        doc = {
            "format": GRAPH_FORMAT,
            "version": GRAPH_VERSION,
            "target": target_name,
            "tvm_target": target,
            "library": library,
            "tensors": [{"id": t.id, "shape": list(t.shape), "dtype": t.dtype, "kind": t.kind, "bytes": t.nbytes,
                         **({"name": t.name} if t.name is not None else {}),
                         **({"storage": t.storage} if t.storage is not None else {})} for t in self.tensors],
            "storages": [{"id": i, "bytes": b} for i, b in enumerate(self.storages)],
            "nodes": [{"kind": n.kind, "name": n.name, "symbol": n.symbol, "inputs": n.inputs, "outputs": n.outputs,
                       **({"subgraph": n.index} if n.index is not None else {})} for n in self.nodes],
            "inputs": self.inputs,
            "heads": self.heads,
            "params": {t.name: t.id for t in self.tensors if t.kind == "param"},
        }
        return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def subgraph_numbers(names: List[str]) -> Dict[str, int]:
    """N of ``tidl_subgraph_<N>_process`` per subgraph name (in first-call order): the number of a
    name ``tidl_<N>`` (the partitioner's), else the lowest number no other subgraph has."""
    numbers = {}
    for name in names:
        match = re.fullmatch(r"tidl_(\d+)", name)
        if match:
            numbers[name] = int(match.group(1))
    taken = set(numbers.values())
    free = (n for n in range(len(names) + len(taken) + 1) if n not in taken)
    for name in names:
        if name not in numbers:
            numbers[name] = next(free)
    return numbers


class _Reader:
    """Reads the bindings of the legalized ``main`` into tensors and nodes."""

    def __init__(self, relax_mod):
        import tvm
        from tvm import relax

        self.tvm = tvm
        self.relax = relax
        self.mod = relax_mod
        self.graph = DeployGraph(relax_module=relax_mod)
        self.values: Dict[object, object] = {}     # relax Var -> tensor id or (nested) list of ids
        self.constants: Dict[object, int] = {}     # relax Constant -> tensor id
        self.call_tir = tvm.ir.Op.get("relax.call_tir")
        self.call_dps = tvm.ir.Op.get("relax.call_dps_packed")
        self.primfuncs: Dict[str, object] = {}

    def tensor(self, sinfo, kind: str, where: str, name=None) -> int:
        relax = self.relax
        if not isinstance(sinfo, relax.TensorType) or sinfo.shape is None:
            raise TidlxInternalError(f"deploy: {where} is not a tensor of static shape ({sinfo})")
        try:
            shape = tuple(int(d) for d in sinfo.shape.values)
        except (TypeError, AttributeError):
            raise TidlxInternalError(f"deploy: {where} has a symbolic shape {sinfo.shape}") from None
        t = Tensor(len(self.graph.tensors), shape, str(sinfo.dtype), kind, name)
        self.graph.tensors.append(t)
        return t.id

    def outputs_of(self, sinfo, where: str):
        if isinstance(sinfo, self.relax.TupleType):
            return [self.outputs_of(f, where) for f in sinfo.fields]
        return self.tensor(sinfo, "value", where)

    def operand(self, expr, where: str):
        relax = self.relax
        if isinstance(expr, self.tvm.ir.Constant):
            if expr not in self.constants:
                name = f"p{len(self.graph.params)}"
                tid = self.tensor(expr.ty, "param", f"{where}: a constant", name)
                self.graph.params[name] = expr.value.numpy()
                self.constants[expr] = tid
            return self.constants[expr]
        if isinstance(expr, relax.Var):
            if expr not in self.values:
                raise TidlxInternalError(f"deploy: {where} uses %{expr.name} before it is bound")
            return self.values[expr]
        if isinstance(expr, relax.Tuple):
            return [self.operand(f, where) for f in expr.fields]
        raise TidlxInternalError(f"deploy: {where}: an operand of kind {type(expr).__name__} is not read")

    @staticmethod
    def flat(value) -> List[int]:
        if isinstance(value, list):
            return [i for v in value for i in _Reader.flat(v)]
        return [value]

    def binding(self, var, value):
        relax = self.relax
        where = f"binding %{var.name}"
        if isinstance(value, relax.Call) and value.op.same_as(self.call_tir):
            if len(value.args) > 2:
                raise TidlxInternalError(f"deploy: {where}: call_tir with symbolic shape arguments")
            gv = value.args[0]
            func = self.mod[gv]
            name = str(func.attrs["global_symbol"]) if func.attrs and "global_symbol" in func.attrs else gv.name_hint
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise TidlxInternalError(f"deploy: {where}: kernel name {name!r} is not a C identifier")
            self.primfuncs[name] = (gv, func)
            inputs = self.flat(self.operand(value.args[1], where))
            outputs = self.outputs_of(value.ty_args[0], where)
            self.graph.nodes.append(Node("kernel", name, f"__tvm_ffi_{name}", inputs, self.flat(outputs)))
            self.values[var] = outputs
        elif isinstance(value, relax.Call) and value.op.same_as(self.call_dps):
            symbol = str(value.args[0].global_symbol)
            if not symbol.startswith(SUBGRAPH_FUNC_PREFIX):
                raise TidlxInternalError(f"deploy: {where}: an external call of {symbol}, not a TIDL subgraph")
            name = symbol[len(SUBGRAPH_FUNC_PREFIX):]
            inputs = self.flat(self.operand(value.args[1], where))
            outputs = self.outputs_of(value.ty_args[0], where)
            self.graph.nodes.append(Node("tidl", name, "", inputs, self.flat(outputs)))  # numbered in read()
            self.values[var] = outputs
        elif isinstance(value, relax.TupleGetItem):
            tup = self.operand(value.tuple_value, where)
            if not isinstance(tup, list) or not 0 <= value.index < len(tup):
                raise TidlxInternalError(f"deploy: {where}: field {value.index} of a non-tuple")
            self.values[var] = tup[value.index]
        elif isinstance(value, (relax.Var, relax.Tuple, self.tvm.ir.Constant)):
            self.values[var] = self.operand(value, where)
        else:
            op = getattr(getattr(value, "op", None), "name", type(value).__name__)
            raise TidlxInternalError(f"deploy: {where}: {op} is left after legalization (only call_tir kernels "
                                     f"and TIDL subgraph calls are deployed)")

    def read(self):
        relax = self.relax
        main = self.mod["main"]
        for p in main.params:
            tid = self.tensor(p.ty, "input", f"input %{p.name}", p.name)
            self.values[p] = tid
            self.graph.inputs.append(tid)
        body = main.body
        if not isinstance(body, relax.SeqExpr):
            raise TidlxInternalError("deploy: main's body is not a sequence of bindings")
        for block in body.blocks:
            for b in block.bindings:
                if not isinstance(b, relax.VarBinding):
                    raise TidlxInternalError(f"deploy: binding %{b.var.name} is a match cast (static shapes only)")
                self.binding(b.var, b.value)
        self.graph.heads = self.flat(self.operand(body.body, "main's result"))
        names = list(dict.fromkeys(n.name for n in self.graph.nodes if n.kind == "tidl"))
        numbers = subgraph_numbers(names)
        for node in self.graph.subgraphs:
            node.index = numbers[node.name]
            node.symbol = f"tidl_subgraph_{node.index}_process"
        return self.graph


def plan_storage(graph: DeployGraph) -> None:
    """Gives every ``value`` tensor a storage slot; a slot is free again after the last reader of its
    value (heads are never freed). Best fit by size, ties to the lowest id: deterministic."""
    last_use: Dict[int, int] = {}
    for i, node in enumerate(graph.nodes):
        for t in node.inputs:
            last_use[t] = i
    heads = set(graph.heads)
    free: List[int] = []
    for i, node in enumerate(graph.nodes):
        for t in node.outputs:
            need = -(-graph.tensors[t].nbytes // STORAGE_ALIGN) * STORAGE_ALIGN or STORAGE_ALIGN
            fits = [s for s in free if graph.storages[s] >= need]
            if fits:
                sid = min(fits, key=lambda s: (graph.storages[s], s))
                free.remove(sid)
            else:
                sid = len(graph.storages)
                graph.storages.append(need)
            graph.tensors[t].storage = sid
        done = {t for t in node.inputs + node.outputs if last_use.get(t, -1) <= i and t not in heads}
        for t in sorted(done):
            tensor = graph.tensors[t]
            if tensor.kind == "value" and tensor.storage is not None and tensor.storage not in free:
                free.append(tensor.storage)


def host_graph(mod: IRModule, tidl: str = "external") -> DeployGraph:
    """The ``DeployGraph`` of ``mod`` (partitioned or not; TIDL subgraphs become ``tidl`` nodes, or with
    ``tidl="inline"`` host kernels like the rest)."""
    tvm = require_tvm()
    if not isinstance(mod, IRModule):
        raise TvmBackendError(f"deploy takes a tidlx IRModule or a QuantizedModel, got {type(mod).__name__}")
    relax_mod = to_relax(mod, tidl=tidl)
    try:
        legal = pipeline()(relax_mod)
    except Exception as exc:
        raise TidlxInternalError(f"deploy: TVM's Relax pipeline failed: {type(exc).__name__}: {exc}") from exc
    reader = _Reader(legal)
    graph = reader.read()
    graph.tir_module = tvm.IRModule({name: func for name, (_, func) in sorted(reader.primfuncs.items())})
    plan_storage(graph)
    return graph


__all__ = ["DeployGraph", "Tensor", "Node", "host_graph", "plan_storage", "pipeline", "subgraph_numbers",
           "GRAPH_FORMAT", "GRAPH_VERSION", "STORAGE_ALIGN"]
