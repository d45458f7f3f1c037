"""TI's ONNX Runtime flow (OSRT, tidlx's option ``flow=ort``): which ONNX nodes TIDL takes, how
TIDL's import groups them into subgraphs, and the partition that follows.

    _, report = tidlx.partition(mod, {"flow": "ort"})
    report.ort.groups              # ONNX node indices per TIDL subgraph, as allowedNode.txt lists them
    report.ort.summary_line()      # "Final number of subgraphs created are : 2, - Offloaded Nodes - 7, ..."
    report.ort.allowed_nodes_text()

The steps (docs/ort-flow.md):

1. Options, graph preparation, composites and the support oracle are the TVM flow's
   (``flow.analyse``), with the ORT flow's differences: no batch limit unless ``max_batch_size``
   is given (TIDL_RELAY_MAX_BATCH_SIZE belongs to the TVM import), names in
   ``deny_list:layer_name`` / ``allow_list:layer_name`` may be a node's first output as well as
   the node, ``allow_list:layer_name`` does not combine with a deny list, and the ONNX-side
   checks of ``ort_rules.py``.
2. A node is supported when every call it imported to is (its composites included).
3. TI's grouping (``ir.partition.node_order``): contiguous runs of supported nodes in the node
   order of the ONNX file, TI's merge of subgraphs, the first ``max_num_subgraphs`` kept.
4. When that grouping is cyclic (a subgraph's output reaches the host and comes back into it,
   which ONNX Runtime refuses with "the graph is not acyclic"), a TidlxWarning says so and the
   partition is tidlx's partitioner's (``strategy``) over the same node verdicts.

Node indices are positions in the ONNX file's ``graph.node``. The module must carry that node
list (``attach_onnx_nodes``; ``tidlx partition`` and ``tidlx compile`` attach it from the file);
without it the nodes are numbered in tidlx's import order, with a warning. Nodes that import to
no op (constants folded at import, Identity, Dropout) and nodes removed as constants or
identities by graph preparation belong to no subgraph: ONNX Runtime's graph optimizations fold
or remove them before TIDL sees the graph. A Pad or BatchNormalization that preparation merges
into its neighbour is listed with that neighbour.
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ...ir.errors import TidlxError, TidlxWarning
from ...ir.expr import Call, TupleGetItem
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.partition import PartitionError, PartitionLimits, PartitionResult, gc_paused, partition
from ...ir.partition.graph import peel
from ...ir.partition.node_order import OrderedPartition, partition_in_order
from ...ir.traversal import post_order
from ...ir.type_infer import describe_call
from .explain import HostReason
from .options import BatchLimit, OptionError, TidlOptions

#: The module attribute holding the ONNX file's node list (``attach_onnx_nodes``): one tuple
#: ``(name, op_type, inputs, outputs, aliases)`` per node of ``graph.node``, in order.
ONNX_NODES_ATTR = "onnx_nodes"
#: Where tidlx.load records the ONNX file a module came from (tidlx/api.py sets it; read here lazily).
ONNX_SOURCE_ATTR = "onnx_source"

#: TI's words for the result of its grouping (TIDL's import prints this line).
SUMMARY_FORMAT = "Final number of subgraphs created are : {}, - Offloaded Nodes - {}, Total Nodes - {}"

#: The graph preparation passes whose removed layers ONNX Runtime removes as well (constants, identities).
_REMOVING_PASSES = ("FoldConstant", "RemoveIdentityOps")


# -- the ONNX node list ---------------------------------------------------------------------------

@dataclass(frozen=True)
class OnnxNode:
    """One node of the ONNX graph: its position in ``graph.node``, the layer name tidlx gives it
    (its ONNX name, or ``<OpType>_<index>`` when it has none), its op type (``domain.OpType``
    outside the default domain), its input and output tensor names, and the layer names of the
    nodes of its subgraphs (an If's branches, which the importer inlines)."""

    index: int
    name: str
    op_type: str
    inputs: Tuple[str, ...] = ()
    outputs: Tuple[str, ...] = ()
    aliases: Tuple[str, ...] = ()
    #: The node's scalar attributes (ints, floats, strings), sorted by name, for the documented
    #: constraints that read attributes the import folds away (Gemm's alpha, Reshape's allowzero).
    attributes: Tuple[Tuple[str, object], ...] = ()

    def attr(self, name: str, default=None):
        return dict(self.attributes).get(name, default)

    def describe(self) -> str:
        return f"node {self.index} '{self.name}' ({self.op_type})"


def _op_type(node) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def _branch_names(node, layer: str) -> List[str]:
    """The layer names the importer may give the nodes of an If's branches (own names, or
    ``<if layer>/<then|else>/<name>``), nested Ifs included."""
    import onnx

    out: List[str] = []
    for attr in node.attribute:
        if attr.type != onnx.AttributeProto.GRAPH or attr.name not in ("then_branch", "else_branch"):
            continue
        tag = attr.name.split("_")[0]
        for i, inner in enumerate(attr.g.node):
            own = inner.name if inner.name else f"{inner.op_type}_{i}"
            for name in ((own, f"{layer}/{tag}/{own}") if inner.name else (f"{layer}/{tag}/{own}",)):
                out.append(name)
                if inner.op_type == "If":
                    out.extend(_branch_names(inner, name))
    return out


def _scalar_attributes(node) -> Tuple[Tuple[str, object], ...]:
    import onnx

    out = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.INT:
            out.append((attr.name, int(attr.i)))
        elif attr.type == onnx.AttributeProto.FLOAT:
            out.append((attr.name, float(attr.f)))
        elif attr.type == onnx.AttributeProto.STRING:
            out.append((attr.name, attr.s.decode("utf-8", "replace")))
    return tuple(sorted(out))


def onnx_nodes(model) -> Tuple[OnnxNode, ...]:
    """The node list of an ONNX model (a path, serialized bytes or a ModelProto), in ``graph.node``
    order. Weights stored outside the file are not read."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        proto = model
    else:
        try:
            if isinstance(model, (bytes, bytearray)):
                proto = onnx.load_from_string(bytes(model))
            else:
                proto = onnx.load(os.fspath(model), load_external_data=False)
        except OSError as exc:
            raise TidlxError(f"{model}: cannot be read ({exc.strerror or exc})") from None
        except Exception as exc:
            raise TidlxError(f"{model if not isinstance(model, (bytes, bytearray)) else 'the model'}: not an ONNX "
                             f"model ({type(exc).__name__}: {exc})") from None
    nodes = []
    for i, node in enumerate(proto.graph.node):
        name = node.name if node.name else f"{node.op_type}_{i}"
        aliases = tuple(_branch_names(node, name)) if node.op_type == "If" else ()
        nodes.append(OnnxNode(i, name, _op_type(node), tuple(node.input), tuple(node.output), aliases,
                              _scalar_attributes(node)))
    return tuple(nodes)


def attach_onnx_nodes(mod: IRModule, model) -> IRModule:
    """Records the node list of ``model`` (the ONNX file ``mod`` was imported from: a path, bytes or
    a ModelProto) on ``mod`` for the ORT flow, which numbers nodes by it; returns ``mod``."""
    mod.attrs[ONNX_NODES_ATTR] = [(n.name, n.op_type, n.inputs, n.outputs, n.aliases, n.attributes)
                                  for n in onnx_nodes(model)]
    return mod


def node_table(mod: IRModule) -> Tuple[Tuple[OnnxNode, ...], bool]:
    """``(nodes, exact)``: the ONNX node list recorded on ``mod`` (exact), or else the layers of its
    import in import order (not exact: a TidlxWarning says so)."""
    recorded = mod.attrs.get(ONNX_NODES_ATTR)
    source = mod.attrs.get(ONNX_SOURCE_ATTR)
    if not recorded and isinstance(source, str) and os.path.isfile(source):   # tidlx.load of an ONNX file
        recorded = attach_onnx_nodes(mod, source).attrs[ONNX_NODES_ATTR]
    if recorded:
        nodes = []
        for i, entry in enumerate(recorded):
            name, op_type, inputs, outputs, aliases = entry[:5]
            attributes = tuple(tuple(a) for a in entry[5]) if len(entry) > 5 else ()
            nodes.append(OnnxNode(i, str(name), str(op_type), tuple(inputs), tuple(outputs), tuple(aliases),
                                  attributes))
        return tuple(nodes), True
    layer_types = mod.layer_types
    if not layer_types:
        raise TidlxError("flow=ort partitions the nodes of an ONNX model: this module records no ONNX nodes (it was "
                         "not imported from ONNX); use flow=tvm")
    warnings.warn("flow=ort: the module does not record its ONNX file's node order, so tidlx numbers the nodes in "
                  "its import order (a topological order, which may differ from the file's): node indices and the "
                  "grouping may differ from TI's; load the model with tidlx partition/compile, or call "
                  "tidlx.backends.tidl.ort_flow.attach_onnx_nodes(mod, 'model.onnx') first", TidlxWarning,
                  stacklevel=4)
    return tuple(OnnxNode(i, name, op_type) for i, (name, op_type) in enumerate(layer_types.items())), False


def _name_map(nodes: Sequence[OnnxNode]) -> Dict[str, int]:
    """Layer name -> node index (the node's own name first, then its subgraphs' names)."""
    out = {n.name: n.index for n in nodes}
    for n in nodes:
        for alias in n.aliases:
            out.setdefault(alias, n.index)
    return out


# -- verdicts per node ----------------------------------------------------------------------------

@dataclass(frozen=True)
class NodeVerdict:
    """Where one ONNX node goes: ``state`` is ``tidl`` (in TIDL subgraph ``subgraph``), ``host``
    (``reason`` says why) or ``removed`` (no op of its own once ONNX Runtime and graph preparation
    are done: ``reason`` says what happened). A node merged into a neighbour by preparation has
    its neighbour's state and ``merged_into`` its index."""

    index: int
    state: str
    subgraph: Optional[int] = None
    reason: Optional[str] = None
    merged_into: Optional[int] = None

    def to_dict(self) -> Dict[str, Any]:
        return {"index": self.index, "state": self.state, "subgraph": self.subgraph, "reason": self.reason,
                "merged_into": self.merged_into}


@dataclass
class OrtPartition:
    """The ORT flow's view by ONNX node. ``groups``: node indices per TIDL subgraph made (TI's
    order within each, as allowedNode.txt lists them), ``functions`` their ``@tidl_k``,
    ``inputs``/``outputs`` their boundary tensors by ONNX name. ``ti_groups``/``ti_verdicts``: TI's
    grouping (the same as ``groups``/``verdicts`` unless it is cyclic, then ``cycles`` says why
    and ``partitioner`` names the strategy that made ``groups``). ``exact``: the node order is the
    ONNX file's."""

    nodes: Tuple[OnnxNode, ...]
    exact: bool
    verdicts: Tuple[NodeVerdict, ...]
    groups: Tuple[Tuple[int, ...], ...]
    functions: Tuple[str, ...]
    inputs: Tuple[Tuple[str, ...], ...]
    outputs: Tuple[Tuple[str, ...], ...]
    ti_groups: Tuple[Tuple[int, ...], ...]
    ti_verdicts: Tuple[NodeVerdict, ...]
    preliminary: int
    merges: int
    dropped: int
    max_num_subgraphs: int
    cycles: Tuple[str, ...] = ()
    partitioner: Optional[str] = None

    @property
    def cyclic(self) -> bool:
        return bool(self.cycles)

    @property
    def total_nodes(self) -> int:
        return len(self.nodes)

    @property
    def offloaded_nodes(self) -> int:
        return sum(len(g) for g in self.groups)

    def summary_line(self, ti: bool = False) -> str:
        """TI's line for the grouping: of the partition made, or (``ti``) of TI's own grouping."""
        groups = self.ti_groups if ti else self.groups
        return SUMMARY_FORMAT.format(len(groups), sum(len(g) for g in groups), self.total_nodes)

    def allowed_nodes_text(self, ti: bool = False) -> str:
        """allowedNode.txt for the partition made (``ti``: for TI's grouping)."""
        from .allowed_nodes import format_allowed_nodes

        return format_allowed_nodes(self.ti_groups if ti else self.groups)

    def metadata_text(self) -> str:
        """onnxrtMetaData.txt for the partition made."""
        from .allowed_nodes import format_ort_metadata

        return format_ort_metadata(self.total_nodes, [f"subgraph_{k}" for k in range(len(self.groups))],
                                   self.inputs, self.outputs)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "flow": "ort", "node_order": "file" if self.exact else "import", "total_nodes": self.total_nodes,
            "offloaded_nodes": self.offloaded_nodes, "preliminary_subgraphs": self.preliminary,
            "merges": self.merges, "max_num_subgraphs": self.max_num_subgraphs,
            "dropped_subgraphs": self.dropped, "summary": self.summary_line(),
            "cycles": list(self.cycles), "partitioner": self.partitioner,
            "subgraphs": [{"index": k, "name": f"subgraph_{k}", "function": fn, "nodes": list(g),
                           "inputs": list(i), "outputs": list(o)}
                          for k, (g, fn, i, o) in enumerate(zip(self.groups, self.functions, self.inputs,
                                                                self.outputs))],
            "ti_subgraphs": [list(g) for g in self.ti_groups],
            "nodes": [dict(v.to_dict(), name=n.name, op_type=n.op_type) for n, v in zip(self.nodes, self.verdicts)],
        }

    def lines(self, verbose: bool = False) -> List[str]:
        """The ORT section of ``tidlx partition``: TI's counts, the subgraphs by node, any cycle."""
        from .allowed_nodes import node_ranges

        out = [f"TIDL's ONNX Runtime grouping: {self.preliminary} preliminary subgraph(s), {self.merges} merge(s)"
               + (f", {self.dropped} beyond max_num_subgraphs={self.max_num_subgraphs} left on the host"
                  if self.dropped else "")]
        if self.cyclic:
            out.append("  " + self.summary_line(ti=True) + "  (TI's grouping)")
            for message in self.cycles:
                out.append(f"  the graph is not acyclic: {message}")
            out.append(f"  tidlx's acyclic partition instead ({self.partitioner}):")
        out.append("  " + self.summary_line())
        for k, (group, fn) in enumerate(zip(self.groups, self.functions)):
            out.append(f"  subgraph_{k} (@{fn}): {len(group)} node(s): {node_ranges(group)}")
        if not self.exact:
            out.append("  (nodes numbered in tidlx's import order: the module does not record the file's node order)")
        if verbose:
            for n, v in zip(self.nodes, self.verdicts):
                where = f"subgraph_{v.subgraph}" if v.state == "tidl" else v.state
                why = f": {v.reason}" if v.reason else ""
                out.append(f"  {n.index:>5} {n.name} ({n.op_type}): {where}{why}")
        return out


# -- the flow ----------------------------------------------------------------------------------------

def _ort_options(opts: TidlOptions, nodes: Sequence[OnnxNode], names: Mapping[str, int]) -> TidlOptions:
    """The options as TI's ONNX Runtime import reads them: layer names may name a node's first output."""
    if opts.allow_layer_names and (opts.deny_layer_names or opts.deny_layer_types or opts.deny_list):
        given = [n for n, v in (("deny_list", opts.deny_list), ("deny_list:layer_type", opts.deny_layer_types),
                                ("deny_list:layer_name", opts.deny_layer_names)) if v]
        raise OptionError(f"flow=ort: TI's ONNX Runtime import takes allow_list:layer_name or the deny lists, not "
                          f"both (given: allow_list:layer_name and {', '.join(given)})")
    first_output = {}
    for n in nodes:
        if n.outputs and n.outputs[0]:
            first_output.setdefault(n.outputs[0], n.name)

    def to_layers(values: Tuple[str, ...]) -> Tuple[str, ...]:
        return tuple(dict.fromkeys(v if v in names else first_output.get(v, v) for v in values))

    deny, allow = to_layers(opts.deny_layer_names), to_layers(opts.allow_layer_names)
    if deny == opts.deny_layer_names and allow == opts.allow_layer_names:
        return opts
    return opts.replace(deny_layer_names=deny, allow_layer_names=allow)


def _apply_ort_rules(analysis, nodes: Sequence[OnnxNode], unit_of) -> Dict[Call, HostReason]:
    """The oracle's reasons with the ORT-side checks of ``ort_rules`` added (a list or batch reason
    of a call stands; a check's reason replaces a shared rule's)."""
    from .ort_rules import ORT_LAYER_OPS, ORT_RULES, ort_node_reason

    reasons = dict(analysis.reasons)
    by_node: Dict[int, List[Call]] = {}
    for call in analysis.ctx.calls():
        u = unit_of(call)
        if u is not None and (nodes[u].op_type in ORT_RULES or nodes[u].op_type in ORT_LAYER_OPS):
            by_node.setdefault(u, []).append(call)
    for u, calls in sorted(by_node.items()):
        layer_op = ORT_LAYER_OPS.get(nodes[u].op_type)
        if layer_op is not None:
            _follow_layer_call(reasons, [c for c in calls if c.op_name == layer_op],
                               [c for c in calls if c.op_name != layer_op], nodes[u])
        message = ort_node_reason(nodes[u].op_type, calls)
        if message is None or any(reasons.get(c) is not None and reasons[c].kind != "rule" for c in calls):
            continue
        _refuse_with_composites(analysis, reasons, calls, message)
    return reasons


def _refuse_with_composites(analysis, reasons: Dict[Call, HostReason], calls: Sequence[Call], message: str) -> None:
    """The node's calls go to the host with ``message``, and so do the other members of their TIDL
    layers (composites), which say whose layer they are part of."""
    from .rules import where

    for c in calls:
        reasons[c] = HostReason("rule", message)
        group = analysis.ctx.composite_of(c)
        for m in (group.calls if group is not None else ()):
            if m not in calls and (reasons.get(m) is None or reasons[m].kind == "rule"):
                reasons[m] = HostReason("rule", f"{where(m)} is part of one TIDL {group.layer_type} layer "
                                                f"({group.name}) with {message}")


def _follow_layer_call(reasons: Dict[Call, HostReason], layer: Sequence[Call], others: Sequence[Call],
                       node: OnnxNode) -> None:
    """The node's other calls take the verdict of its layer call (``ort_rules.ORT_LAYER_OPS``): no
    reason of their own when the layer is supported (a rule's reason on them, such as the int64
    dtype of the indices they move, is the IR's form, not TIDL's), else the layer's reason."""
    if not layer:
        return
    first = next((reasons[c] for c in layer if reasons.get(c) is not None), None)
    for c in others:
        own = reasons.get(c)
        if own is not None and own.kind != "rule":
            continue
        if first is None:
            reasons.pop(c, None)
        else:
            reasons[c] = HostReason(first.kind, f"{describe_call(c)} is part of {node.describe()} with "
                                                f"{first.message}")


def _apply_documented_constraints(analysis, nodes: Sequence[OnnxNode], unit_of) -> Dict[Call, HostReason]:
    """The reasons with TI's documented constraints of the ONNX import added (``ort_constraints``):
    a node they refuse goes to the host with the constraint named (its composite with it), and a
    node the shared rules refuse for want of a layer TI's import has says so."""
    from .ort_constraints import DOCUMENTED_CONSTRAINTS, UNMODELLED_LAYERS, documented_reason, unmodelled_reason

    reasons = dict(analysis.reasons)
    by_node: Dict[int, List[Call]] = {}
    for call in analysis.ctx.calls():
        u = unit_of(call)
        if u is not None and (nodes[u].op_type in DOCUMENTED_CONSTRAINTS or nodes[u].op_type in UNMODELLED_LAYERS):
            by_node.setdefault(u, []).append(call)
    for u, calls in sorted(by_node.items()):
        if any(reasons.get(c) is not None and reasons[c].kind != "rule" for c in calls):
            continue
        message = documented_reason(nodes[u], calls)
        if message is not None and not analysis.model_surgery:
            message = _with_surgery_hint(analysis, calls, message)
        refused = [reasons[c] for c in calls if reasons.get(c) is not None]
        if message is None and refused:
            old = refused[0].message
            message = unmodelled_reason(nodes[u], calls, old)
            if message is None:
                continue
            hint = old.find("; TI model optimizer rule")
            message += old[hint:] if hint >= 0 else ""
            for c in calls:
                if reasons.get(c) is not None:
                    reasons[c] = HostReason("rule", message)
            continue
        if message is None:
            continue
        _refuse_with_composites(analysis, reasons, calls, message)
    return reasons


def _with_surgery_hint(analysis, calls: Sequence[Call], message: str) -> str:
    """``message`` with the TI model optimizer rule that would move the node's calls to TIDL, as
    the shared rules' reasons get it when the surgery is off."""
    from .explain import with_surgery_hints
    from .flow import SURGERY_RULES

    rules = [rule for name, rule in SURGERY_RULES.items() if name not in analysis.disabled_passes]
    for c in calls:
        hinted = with_surgery_hints({c: HostReason("rule", message)}, rules)[c].message
        if hinted != message:
            return hinted
    return message


def _layer_calls(fn) -> Dict[str, List[Call]]:
    out: Dict[str, List[Call]] = {}
    for node in post_order(fn.body, enter_functions=False):
        if isinstance(node, Call) and isinstance(node.op, Op) and node.layer:
            out.setdefault(node.layer, []).append(node)
    return out


def _consumers(fn) -> Dict[str, List[str]]:
    """Layer -> the layers whose calls read its calls' values (in the module as imported)."""
    out: Dict[str, List[str]] = {}
    for node in post_order(fn.body, enter_functions=False):
        if not (isinstance(node, Call) and node.layer):
            continue
        for arg in node.args:
            base = peel(arg)[0] if isinstance(arg, TupleGetItem) else arg
            if isinstance(base, Call) and base.layer and base.layer != node.layer:
                users = out.setdefault(base.layer, [])
                if node.layer not in users:
                    users.append(node.layer)
    return out


def _absent_nodes(mod: IRModule, analysis, nodes: Sequence[OnnxNode], names: Mapping[str, int],
                  units: Mapping[int, List[Call]]) -> Tuple[Dict[int, str], Dict[int, Tuple[int, str]]]:
    """The nodes without calls after preparation: ``removed`` (node -> what happened) and
    ``merged`` (node -> (the node it merged into, how))."""
    imported = _layer_calls(mod["main"])
    changes = {t.layer: t for t in analysis.transformations}
    consumers = None
    removed: Dict[int, str] = {}
    merged: Dict[int, Tuple[int, str]] = {}
    for n in nodes:
        if n.index in units:
            continue
        if n.name not in imported:
            removed[n.index] = "no op after import (a constant computed at import, an identity, or a node of no value)"
            continue
        t = changes.get(n.name)
        if t is None or t.pass_name in _REMOVING_PASSES:
            removed[n.index] = t.message if t is not None else "removed by graph preparation"
            continue
        target = None
        if t.into:
            target = names.get(t.into.split(", ")[0])
        else:
            if consumers is None:
                consumers = _consumers(mod["main"])
            candidates = [names[c] for c in consumers.get(n.name, ()) if c in names and names[c] in units]
            target = min(candidates) if candidates else None
        if target is None or target not in units:
            removed[n.index] = t.message
        else:
            merged[n.index] = (target, f"merged into {nodes[target].describe()} by {t.pass_name}")
    return removed, merged


def _with_merged(groups: Sequence[Sequence[int]], merged: Mapping[int, Tuple[int, str]]) -> Tuple[Tuple[int, ...], ...]:
    """Each group with the nodes merged into its nodes, placed next to them (before a later node,
    after an earlier one)."""
    into: Dict[int, List[int]] = {}
    for node, (target, _) in sorted(merged.items()):
        into.setdefault(target, []).append(node)
    out = []
    for group in groups:
        listed: List[int] = []
        for u in group:
            extra = into.get(u, ())
            listed.extend(m for m in extra if m < u)
            listed.append(u)
            listed.extend(m for m in extra if m > u)
        out.append(tuple(listed))
    return tuple(out)


def _verdicts(nodes, groups, host_reason, removed, merged) -> Tuple[NodeVerdict, ...]:
    where = {n: k for k, g in enumerate(groups) for n in g}
    out = []
    for n in nodes:
        i = n.index
        if i in removed:
            out.append(NodeVerdict(i, "removed", reason=removed[i]))
        elif i in merged:
            target, how = merged[i]
            if target in where:
                out.append(NodeVerdict(i, "tidl", where[target], how, target))
            else:
                out.append(NodeVerdict(i, "host", None, f"{how}, which stays on the host", target))
        elif i in where:
            out.append(NodeVerdict(i, "tidl", where[i]))
        else:
            out.append(NodeVerdict(i, "host", reason=host_reason(i)))
    return tuple(out)


def _path_text(ordered: OrderedPartition, nodes: Sequence[OnnxNode], path: Sequence[int]) -> str:
    parts: List[str] = []
    seen = set()
    for c in path:
        u = ordered.unit_of[c]
        text = nodes[u].describe() if u is not None else describe_call(ordered.graph.calls[c])
        if u is not None and u in seen:
            continue
        if u is not None:
            seen.add(u)
        state = "on the host" if u is None or not any(u in g for g in ordered.grouping.kept) else \
            f"in subgraph {next(k for k, g in enumerate(ordered.grouping.kept) if u in g)}"
        parts.append(f"{text} ({state})" if len(path) > 1 else f"{text}, {state},")
    return ", ".join(parts) if len(parts) > 1 else parts[0]


def _cycle_messages(ordered: OrderedPartition, nodes: Sequence[OnnxNode], groups) -> Tuple[str, ...]:
    from .allowed_nodes import node_ranges

    out = []
    for cycle in ordered.cycles:
        exit_node = nodes[ordered.unit_of[cycle.exit_call]]
        entry_node = nodes[ordered.unit_of[cycle.entry_call]]
        out.append(f"subgraph {cycle.group} (nodes {node_ranges(groups[cycle.group])}): the output of "
                   f"{exit_node.describe()} goes through {_path_text(ordered, nodes, cycle.path)} and comes back "
                   f"into the subgraph at {entry_node.describe()}")
    return tuple(out)


def _tensor_names(region, nodes: Sequence[OnnxNode], unit_of) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """The ONNX names of a subgraph's input and output tensors."""
    def name(b) -> str:
        if b.producer is None:
            return b.source[1:] if b.source.startswith("%") else b.source
        u = unit_of(b.producer)
        if u is None:
            return b.producer.layer or b.source
        outs = nodes[u].outputs
        k = b.path[0] if b.path else 0
        return outs[k] if k < len(outs) and outs[k] else (outs[0] if outs else nodes[u].name)

    return tuple(name(b) for b in region.inputs), tuple(name(b) for b in region.outputs)


def run_ort_flow(mod: IRModule, options=None, strategy: str = "greedy"):
    """The ORT flow (the module docstring); returns a ``flow.FlowResult`` whose ``ort`` is the
    ``OrtPartition``."""
    from .flow import FlowResult, _check_module, analyse, composite_name, resolve_options

    with gc_paused():
        opts, disabled = resolve_options(options)
        mod = _check_module(mod)
        nodes, exact = node_table(mod)
        names = _name_map(nodes)
        if exact:
            foreign = [layer for layer in mod.layer_types if layer not in names]
            if foreign:
                raise TidlxError(f"flow=ort: the ONNX node list recorded on the module is not its model's: "
                                 f"{len(foreign)} layer(s) of the module are not nodes of it (e.g. "
                                 f"{', '.join(repr(x) for x in foreign[:3])})")
        opts = _ort_options(opts, nodes, names)
        limit = opts.batch_limit() if opts.max_batch_size is not None else BatchLimit(None, "ort")
        analysis = analyse(mod, options, batch_limit=limit, resolved=(opts, disabled))
        t0 = time.perf_counter()

        def unit_of(call: Call) -> Optional[int]:
            return names.get(call.layer) if call.layer is not None else None

        analysis = dataclasses.replace(analysis, reasons=_apply_ort_rules(analysis, nodes, unit_of))
        analysis = dataclasses.replace(analysis, reasons=_apply_documented_constraints(analysis, nodes, unit_of))
        composite_of = analysis.ctx.composite_of

        def namer(calls):
            group = composite_of(calls[0])
            whole = group is not None and len(calls) == len(group.calls)
            return composite_name(calls, group if whole else None)

        composites = [g.calls for g in analysis.groups]
        ordered = partition_in_order(analysis.prepared, analysis.oracle, unit_of, groups=composites,
                                     max_num_subgraphs=opts.max_num_subgraphs, compiler="tidl", composite_name=namer,
                                     unit_name=lambda u: nodes[u].describe(), unit_kind="ONNX node")
        units = {u: [ordered.graph.calls[c] for c in cs] for u, cs in ordered.unit_calls.items()}
        removed, merged = _absent_nodes(mod, analysis, nodes, names, units)
        ti_groups = _with_merged(ordered.grouping.kept, merged)

        def ti_reason(u: int) -> Optional[str]:
            if not ordered.unit_supported.get(u, False):
                return ordered.unit_reason(u) if u in ordered.unit_calls else "no call of it is left to partition"
            calls = ordered.unit_calls[u]
            return ordered.reasons.get(calls[0])

        ti_verdicts = _verdicts(nodes, ti_groups, ti_reason, removed, merged)
        cycles = _cycle_messages(ordered, nodes, ti_groups)
        partitioner = None
        label = "ort"
        if cycles:
            result = _acyclic_instead(analysis, ordered, opts, strategy, namer, cycles)
            partitioner = strategy
            label = f"ort, cyclic: {strategy}"
        else:
            result = ordered.result
        groups, verdicts = ti_groups, ti_verdicts
        if cycles:
            region_units = [sorted({ordered.unit_of[ordered.graph.index[id(c)]] for c in r.calls} - {None})
                            for r in result.regions]
            groups = _with_merged(region_units, merged)

            host_of = {id(h.call): h for h in result.host_calls}

            def made_reason(u: int) -> Optional[str]:
                if u not in units:
                    return "no call of it is left to partition"
                hosts = [host_of[id(c)] for c in units[u] if id(c) in host_of]
                first = next((h for h in hosts if not h.supported), hosts[0] if hosts else None)
                return first.reason if first is not None else None

            verdicts = _verdicts(nodes, groups, made_reason, removed, merged)
        io = [_tensor_names(r, nodes, unit_of) for r in result.regions]
        ort = OrtPartition(nodes, exact, verdicts, groups, tuple(r.name for r in result.regions),
                           tuple(i for i, _ in io), tuple(o for _, o in io), ti_groups, ti_verdicts,
                           len(ordered.grouping.runs), len(ordered.grouping.merges), len(ordered.grouping.dropped),
                           opts.max_num_subgraphs, cycles, partitioner)
    from .calibration_loop import FLOW_ATTR
    if result.module is not mod:   # the quantization follows TI's ONNX Runtime import (calibration iterations)
        result.module.attrs[FLOW_ATTR] = "ort"
    timings = dict(analysis.timings, partition=time.perf_counter() - t0)
    return FlowResult(analysis, result, label, timings, ort)


def _acyclic_instead(analysis, ordered: OrderedPartition, opts: TidlOptions, strategy: str, namer,
                     cycles: Sequence[str]) -> PartitionResult:
    """tidlx's partitioner over the ORT node verdicts, after a TidlxWarning naming the cycle."""
    warnings.warn(f"flow=ort: TI's grouping of the ONNX nodes is cyclic, so ONNX Runtime would stop with \"the "
                  f"graph is not acyclic\": {cycles[0]}; tidlx shows instead the acyclic partition of its partitioner "
                  f"({strategy})", TidlxWarning, stacklevel=5)
    graph = ordered.graph
    index = graph.index

    def oracle(call: Call) -> Optional[str]:
        c = index[id(call)]
        own = graph.oracle_reason[c]
        if own is not None:
            return own
        u = ordered.unit_of[c]
        if u is None:
            return "it belongs to no ONNX node"
        if not ordered.unit_supported[u]:
            return ordered.reasons.get(c) or ordered.unit_reason(u)
        return None

    composites = [g.calls for g in analysis.groups]
    node_groups = [[graph.calls[c] for c in cs] for cs in ordered.unit_calls.values() if len(cs) > 1]
    limits = PartitionLimits(max_num_subgraphs=opts.max_num_subgraphs, max_num_subgraph_nodes=None,
                             max_subgraph_io=None, min_subgraph_macs=0)
    try:
        return partition(analysis.prepared, oracle, groups=composites + node_groups, strategy=strategy,
                         limits=limits, compiler="tidl", composite_name=namer)
    except PartitionError:   # a node whose calls are not convex: its calls then group as they may
        return partition(analysis.prepared, oracle, groups=composites, strategy=strategy, limits=limits,
                         compiler="tidl", composite_name=namer)


__all__ = ["run_ort_flow", "OrtPartition", "NodeVerdict", "OnnxNode", "onnx_nodes", "attach_onnx_nodes",
           "node_table", "ONNX_NODES_ATTR", "SUMMARY_FORMAT"]
