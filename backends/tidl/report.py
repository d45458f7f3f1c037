"""What the TIDL partition did and why: ``PartitionReport`` (table, JSON, SVG) and
``StrategyComparison``.

    mod, report = tidlx.partition(model, {"deny_list": "nn.batch_norm"})
    report.verdict()              # "exports: yes — 2 TIDL subgraphs, 100% of MACs on TIDL, 3 ops on the host"
    print(report)                 # the verdict, then tables: subgraphs, boundary tensors, host ops, preparation
    report.render_text(verbose=True)   # the same, one host-op row per op instead of one per reason
    report.to_json()              # {"verdict": ..., "subgraphs": [...], "host_ops": [...], "host_groups": [...], ...}
    report.svg()                  # the graph coloured by target (TIDL subgraph N / host)

The table groups the host ops by reason (``report.host_groups()``): one row per kind and
reason, the reason without the op and layer it starts with, the ops and layers it holds back
under it; so 186 ops refused for batch 6 are one row. Every name from the model (layers,
tensors, the model's file name) is shown as it is, never read as rich markup, with control
characters escaped (``ir/text.py``); the SVG escapes them for XML.

Per subgraph: its ops, layer names, MACs, the tensors entering and leaving it with their
bytes, and its TIDL layers as the layer model (``layers.py``) has them: ``report.networks``
holds one ``TidlNetwork`` per subgraph, which the table's layer counts and types, the JSON's
``tidl_layers`` and the SVG's boxes are read from. Per op left on the host, a ``kind`` and a message saying why:

| kind                         | why                                                            |
|------------------------------|----------------------------------------------------------------|
| rule                         | a TIDL support rule (op, attributes, shapes, types)            |
| deny_list                    | its Relay op is in the option ``deny_list``                    |
| deny_list:layer_type         | its ONNX op type is in ``deny_list:layer_type``                |
| deny_list:layer_name         | its layer is in ``deny_list:layer_name``                       |
| allow_list                   | ``allow_list:layer_name`` is set and does not list it          |
| batch                        | batch > TIDL_RELAY_MAX_BATCH_SIZE / ``max_batch_size``         |
| composite                    | supported, but its composite group stays on the host           |
| limit:max_num_subgraphs      | its subgraph was pruned (only the N with the most MACs stay)   |
| limit:max_subgraph_io        | its subgraph had more inputs + outputs than allowed            |
| limit:max_num_subgraph_nodes | its subgraph had more nodes than allowed                       |
| limit:min_subgraph_macs      | its subgraph had fewer MACs than ``min_subgraph_macs`` (1: TI's |
|                              | min_mac_threshold; a subgraph of pure data movement)           |
| cost_model                   | the min-transfer strategy found the host cheaper               |
| strategy                     | another decision of the partitioning strategy (see the reason) |

A member of a composite (TIDL runs conv + BN + ReLU as one layer) that goes to the host
because another member is refused keeps that member's kind; ``composite`` names its group.

Graph preparation is reported as ``transformations``: each layer a pass removed or rewrote.
The BN + dense merge (FoldBatchNormIntoDense) in particular is reported as "batch norm 'bn'
merged into nn.dense 'fc1'", an explained transformation and not a failure: TIDL-NOTES record
that this merge once broke a user's TIDL import, not why, and the merged dense + bias is an
InnerProduct layer that TIDL's Gemm constraints accept (transA=0, alpha=beta=1, bias [N]).
The report says how to keep the BN a layer of its own: ``deny_list=nn.batch_norm`` (the BN
runs on the host) or ``disabled_passes=FoldBatchNormIntoDense`` (it stays a TIDL BatchNorm
layer).

Output is deterministic: the same model and options give the same table, JSON and SVG bytes
(timings are kept in ``report.timings`` and appear in none of them).
"""

from __future__ import annotations

import io
import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...ir.analysis import describe_bytes, describe_macs, macs as call_macs
from ...ir.expr import Call, Constant, Tuple as TupleExpr, TupleGetItem
from ...ir.op import Op
from ...ir.text import printable
from ...ir.traversal import children, post_order
from ...ir.types import TensorType
from .layers import TidlNetwork, build_networks
from .options import TidlOptions

#: Every host-op kind the report uses (see the module docstring).
REPORT_KINDS = ("rule", "deny_list", "deny_list:layer_type", "deny_list:layer_name", "allow_list", "batch",
                "composite", "limit:max_num_subgraphs", "limit:max_subgraph_io", "limit:max_num_subgraph_nodes",
                "limit:min_subgraph_macs", "cost_model", "strategy")

JSON_SCHEMA_VERSION = 1
#: A feature map of more than this many elements per frame is "large" for TIDL's batch processing
#: (tidlx's choice: TI publishes no limit; edgeai-tidl-tools#42 saw 224 x 224 x 8 = 401,408 refused
#: and 16 x 16 x 8 = 2,048 accepted; 2**16 lies between them).
LARGE_FEATURE_MAP_ELEMENTS = 1 << 16
LARGE_FEATURE_MAP_ADVICE = (f"TIDL may refuse batch processing of a large feature map (\"Batch processing is not "
                            f"supported with large feature map case\", edgeai-tidl-tools#42; tidlx flags more than "
                            f"{LARGE_FEATURE_MAP_ELEMENTS:,} elements per frame); if it does, split the batch into "
                            f"parallel branches (TI's optimizer rule split_batch_dim_to_parallel_input_branches) or "
                            f"run the frames one at a time")


@dataclass(frozen=True)
class TensorInfo:
    """A tensor crossing a subgraph boundary."""

    name: str
    source: str
    shape: Tuple[int, ...]
    dtype: str
    nbytes: int

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "source": self.source, "shape": list(self.shape), "dtype": self.dtype,
                "bytes": self.nbytes}


@dataclass(frozen=True)
class SubgraphInfo:
    name: str
    index: int
    ops: Dict[str, int]            # Relay op -> count, in order of first appearance
    layers: Tuple[str, ...]
    num_nodes: int
    num_tidl_layers: int           # the layer model's compute layers (a composite is one)
    macs: int
    inputs: Tuple[TensorInfo, ...]
    outputs: Tuple[TensorInfo, ...]
    layer_types: Dict[str, int] = field(default_factory=dict)   # TIDL layer type -> count, first appearance
    tidl_layers: Tuple[Dict[str, Any], ...] = ()                # per layer: name, type, type_id, composite, activation

    @property
    def io_bytes(self) -> int:
        return sum(t.nbytes for t in self.inputs) + sum(t.nbytes for t in self.outputs)

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "layers": list(self.layers), "macs": self.macs, "num_nodes": self.num_nodes,
                "num_tidl_layers": self.num_tidl_layers, "ops": dict(self.ops),
                "layer_types": dict(self.layer_types), "tidl_layers": [dict(x) for x in self.tidl_layers],
                "inputs": [t.to_dict() for t in self.inputs], "outputs": [t.to_dict() for t in self.outputs],
                "io_bytes": self.io_bytes}


@dataclass(frozen=True)
class HostOp:
    """An op call left on the host, and why."""

    layer: Optional[str]
    op: str
    kind: str
    reason: str
    macs: int
    layer_type: Optional[str]
    composite: Optional[str]
    supported: bool     # TIDL's rules accept it; the partitioner held it back

    def to_dict(self) -> Dict[str, Any]:
        return {"layer": self.layer, "op": self.op, "kind": self.kind, "reason": self.reason, "macs": self.macs,
                "layer_type": self.layer_type, "composite": self.composite, "supported": self.supported}


def held_back_kind(reason: str) -> str:
    """The kind of a reason the partitioner gives for a supported call it kept on the host."""
    if reason.startswith("its composite group stays on the host"):
        return "composite"
    if reason.startswith("pruned by max_num_subgraphs"):
        return "limit:max_num_subgraphs"
    if "(max_subgraph_io)" in reason:
        return "limit:max_subgraph_io"
    if "> max_num_subgraph_nodes" in reason:
        return "limit:max_num_subgraph_nodes"
    if "min_subgraph_macs" in reason:
        return "limit:min_subgraph_macs"
    if reason.startswith("min-transfer:"):
        return "cost_model"
    raise ValueError(f"unclassified partitioner reason: {reason!r}")


@dataclass(frozen=True)
class HostGroup:
    """Host ops that one reason keeps on the host (``PartitionReport.host_groups``)."""

    kind: str
    reason: str                    # without the op and layer it names first
    ops: Tuple[HostOp, ...]

    @property
    def macs(self) -> int:
        return sum(h.macs for h in self.ops)

    @property
    def layers(self) -> List[str]:
        """The layer names, each once, in model order."""
        return list(dict.fromkeys(h.layer for h in self.ops if h.layer))

    def describe_ops(self, max_types: int = 2) -> str:
        """``186: nn.conv2d x57, nn.batch_norm x53, +8 op types``."""
        counts = Counter(h.op for h in self.ops)
        if len(self.ops) == 1:
            return self.ops[0].op
        shown = [f"{op} x{n}" if n > 1 else op for op, n in counts.most_common(max_types)]
        more = len(counts) - len(shown)
        return f"{len(self.ops)}: " + ", ".join(shown) + (f", +{_count(more, 'op type')}" if more > 0 else "")

    def shown_layers(self, max_layers: int = 3) -> List[str]:
        """The first ``max_layers`` layer names whole (a user copies them into
        ``deny_list:layer_name``), then how many more."""
        layers = self.layers
        more = len(layers) - max_layers
        return layers[:max_layers] + ([f"... and {more} more"] if more > 0 else [])

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "reason": self.reason, "num_ops": len(self.ops), "macs": self.macs,
                "layers": self.layers}


def general_reason(host: HostOp) -> str:
    """A host op's reason without the op and layer it starts with, so that ops refused for one
    reason share it: ``nn.conv2d 'conv1': batch 6 > ...`` -> ``batch 6 > ...``. A member of a
    composite that stays on the host because of another member (``nn.relu 'r' is part of one
    TIDL Convolution layer (...) with nn.conv2d 'c': ...``, ``its composite group stays on the
    host with ...``) gets that member's reason."""
    reason = host.reason
    own = f"{host.op} '{host.layer}'" if host.layer else host.op
    if reason.startswith(own + ": "):
        return reason[len(own) + 2:]
    if reason.startswith(own + " is part of one TIDL "):
        cut = reason.find(") with ", len(own))
        if cut < 0:
            return reason
        rest = reason[cut + len(") with "):]
    elif reason.startswith(_GROUP_HELD_BACK):
        rest = reason[len(_GROUP_HELD_BACK):]
    else:
        return reason
    while True:  # the member named first (once by the partitioner, once by its own reason)
        call = _LEADING_CALL.match(rest)
        if call is None:
            return rest
        rest = rest[call.end():]


_GROUP_HELD_BACK = "its composite group stays on the host with "
#: ``nn.conv2d 'layer': `` at the start of a reason (a layer name ends at the first ``': ``).
_LEADING_CALL = re.compile(r"[\w.]+(?: '(?:[^']|'(?!: ))*')?: ")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _share(part: int, whole: int) -> str:
    """``100%``, ``99.6%``, ``<0.1%``: a share that is not all is never shown as 100%, one that
    is not nothing never as 0%; of nothing, 0%."""
    if part <= 0 or whole <= 0:
        return "0%"
    if part >= whole:
        return "100%"
    value = 100.0 * part / whole
    text = f"{value:.1f}"
    if text == "100.0":
        text = "99.9"
    elif text == "0.0":
        return "<0.1%"
    return text.rstrip("0").rstrip(".") + "%"


def _text(value):
    """A rich ``Text`` of ``value``: rich never reads it as markup; control characters escaped."""
    from rich.text import Text

    return Text(printable(value))


def _add_row(table, *cells) -> None:
    from rich.text import Text

    table.add_row(*(c if isinstance(c, Text) else _text(c) for c in cells))


#: Console width for output that is not a terminal: wide enough that rich wraps no line.
NO_WRAP_WIDTH = 100_000


def render_plain(renderable, width: Optional[int] = None) -> str:
    """``renderable`` as plain text (no colour), ``width`` wide (None: no line is wrapped)."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, width=width or NO_WRAP_WIDTH, color_system=None, highlight=False, emoji=False,
                      force_terminal=False, legacy_windows=False)
    console.print(renderable)
    return buf.getvalue()


def _layer_summary(layer) -> Dict[str, Any]:
    return {"name": layer.name, "type": layer.type, "type_id": layer.type_id, "composite": layer.composite,
            "activation": layer.activation.type}


def short_layer_name(layer: Optional[str], layer_type: Optional[str] = None) -> str:
    """``/img_backbone/layer1/layer1.0/conv1/Conv`` -> ``layer1.0/conv1``: the tail of a
    layer name (its last two scopes, without the trailing ONNX op type)."""
    if not layer:
        return ""
    parts = [p for p in layer.split("/") if p]
    if len(parts) > 1 and (parts[-1] == layer_type or parts[-1].split("_")[0] == layer_type):
        parts = parts[:-1]
    return "/".join(parts[-2:]) if parts else layer


def _tensor_info(b) -> TensorInfo:
    t = b.type
    return TensorInfo(b.name, b.source, tuple(int(d) for d in t.shape), t.dtype, int(b.nbytes))


def _pct(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


class PartitionReport:
    """The partition of one model for TIDL: subgraphs, host ops and their reasons, the graph
    preparation, totals. Build with ``PartitionReport.from_flow`` (``tidlx.partition`` does)."""

    def __init__(self, *, model: Optional[str], strategy: str, options: TidlOptions, disabled_passes,
                 batch: int, batch_limit, subgraphs, host_ops, transformations, passes, total_macs: int,
                 flow=None, networks: Sequence[TidlNetwork] = ()):
        self.model = model
        self.strategy = strategy
        self.options = options
        self.disabled_passes = tuple(disabled_passes)
        self.batch = batch
        self.batch_limit = batch_limit
        self.subgraphs: Tuple[SubgraphInfo, ...] = tuple(subgraphs)
        self.host_ops: Tuple[HostOp, ...] = tuple(host_ops)
        self.transformations = tuple(transformations)
        self.passes = tuple(passes)
        self.total_macs = total_macs
        #: The TIDL layer model of each subgraph, in subgraph order.
        self.networks: Tuple[TidlNetwork, ...] = tuple(networks)
        #: Seconds per flow step (not part of the table, JSON or SVG, which are deterministic).
        self.timings: Dict[str, float] = dict(flow.timings) if flow is not None else {}
        self._flow = flow

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def from_flow(cls, flow, model_name: Optional[str] = None) -> "PartitionReport":
        analysis, result = flow.analysis, flow.partition
        layer_types = analysis.prepared.layer_types
        group_of = analysis.ctx.composite_of
        started = time.perf_counter()
        networks = {n.name: n for n in build_networks(result.module)}
        layers_seconds = time.perf_counter() - started
        subgraphs = []
        for region in result.regions:
            ops: Dict[str, int] = {}
            for c in region.calls:
                ops[c.op_name] = ops.get(c.op_name, 0) + 1
            net = networks[region.name]
            layers = net.compute_layers()
            subgraphs.append(SubgraphInfo(region.name, region.index, ops, region.layers, region.num_nodes,
                                          len(layers), region.macs, tuple(_tensor_info(b) for b in region.inputs),
                                          tuple(_tensor_info(b) for b in region.outputs), net.layer_type_counts(),
                                          tuple(_layer_summary(x) for x in layers)))
        host_ops = []
        for h in result.host_calls:
            call = h.call
            g = group_of(call)
            if h.supported:
                try:
                    kind = held_back_kind(h.reason)
                except ValueError:  # a reason this report does not know yet: still reported
                    kind = "strategy"
            else:
                oracle = analysis.reasons.get(call)
                kind = oracle.kind if oracle is not None else "rule"  # not an op call: no layer for it
            host_ops.append(HostOp(call.layer, call.op_name or "call", kind, h.reason, h.macs,
                                   layer_types.get(call.layer) if call.layer else None,
                                   g.name if g is not None else None, h.supported))
        report = cls(model=model_name, strategy=flow.strategy, options=analysis.options,
                     disabled_passes=analysis.disabled_passes, batch=analysis.batch,
                     batch_limit=analysis.batch_limit, subgraphs=subgraphs, host_ops=host_ops,
                     transformations=analysis.transformations, passes=analysis.passes,
                     total_macs=result.total_macs, flow=flow, networks=tuple(networks.values()))
        report.timings["layers"] = layers_seconds  # the layer model (layers.py), part of "report"
        return report

    # -- the partitioned and the prepared module ----------------------------------------------------
    @property
    def module(self):
        """The partitioned module (also the first value ``tidlx.partition`` returns)."""
        return self._flow.partition.module if self._flow is not None else None

    @property
    def prepared_module(self):
        """The module after graph preparation: what was partitioned (emulates like ``module``)."""
        return self._flow.prepared if self._flow is not None else None

    @property
    def result(self):
        """The ``tidlx.ir.partition.PartitionResult``."""
        return self._flow.partition if self._flow is not None else None

    def _layer_type(self, layer: Optional[str]) -> Optional[str]:
        module = self.prepared_module
        return module.layer_types.get(layer) if module is not None and layer else None

    # -- totals ---------------------------------------------------------------------------------
    @property
    def num_subgraphs(self) -> int:
        return len(self.subgraphs)

    @property
    def tidl_macs(self) -> int:
        return sum(s.macs for s in self.subgraphs)

    @property
    def host_macs(self) -> int:
        return self.total_macs - self.tidl_macs

    @property
    def tidl_macs_percent(self) -> float:
        return _pct(self.tidl_macs, self.total_macs)

    @property
    def boundary_bytes(self) -> int:
        return sum(s.io_bytes for s in self.subgraphs)

    def host_kinds(self) -> Dict[str, int]:
        """Host ops per kind, in REPORT_KINDS order."""
        counts = Counter(h.kind for h in self.host_ops)
        return {k: counts[k] for k in REPORT_KINDS if counts[k]}

    def host_layers(self) -> List[str]:
        """Layer names of the host ops, each once, in order."""
        seen: Dict[str, None] = {}
        for h in self.host_ops:
            if h.layer:
                seen.setdefault(h.layer, None)
        return list(seen)

    def tidl_layers(self) -> List[str]:
        return [layer for s in self.subgraphs for layer in s.layers]

    def totals(self) -> Dict[str, Any]:
        return {"exports": self.exports, "num_subgraphs": self.num_subgraphs, "macs": self.total_macs,
                "tidl_macs": self.tidl_macs, "host_macs": self.host_macs, "tidl_macs_percent": self.tidl_macs_percent,
                "boundary_bytes": self.boundary_bytes, "num_host_ops": len(self.host_ops),
                "host_ops_by_kind": self.host_kinds()}

    # -- JSON -------------------------------------------------------------------------------------
    def _changed_options(self) -> Dict[str, Any]:
        default = TidlOptions().as_dict()
        return {k: v for k, v in self.options.as_dict().items() if v != default[k]}

    def to_dict(self) -> Dict[str, Any]:
        return {
            "schema": JSON_SCHEMA_VERSION,
            "model": self.model,
            "verdict": self.verdict(),
            "strategy": self.strategy,
            "options": self._changed_options(),
            "device": self.device(),
            "disabled_passes": list(self.disabled_passes),
            "batch": {"model": self.batch, "limit": self.batch_limit.value,
                      "limit_from": self.batch_limit.describe()},
            "totals": self.totals(),
            "subgraphs": [s.to_dict() for s in self.subgraphs],
            "host_ops": [h.to_dict() for h in self.host_ops],
            "host_groups": [g.to_dict() for g in self.host_groups()],
            "warnings": self.batch_warnings(),
            "transformations": [{"pass": t.pass_name, "layer": t.layer, "layer_type": t.layer_type,
                                 "change": t.change, "ops_before": list(t.ops_before),
                                 "ops_after": list(t.ops_after), "into": t.into, "message": t.message,
                                 "rule": t.rule}
                                for t in self.transformations],
            "preparation": [{"pass": p.name, "status": p.status, "changes": p.changes} for p in self.passes],
        }

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False) + "\n"

    def device(self) -> Dict[str, Any]:
        """Whose rules applied: the option target_device (None: TIDL's defaults), the line the report prints
        (``devices.rules_line``) and the warning about TI's default quantization style on that device."""
        from .devices import rules_line

        target = getattr(self.options, "target_device", None)
        return {"target_device": target, "rules": rules_line(target), "warning": self.options.device_warning()}

    # -- table ------------------------------------------------------------------------------------
    def headline(self) -> str:
        name = f"{self.model}: " if self.model else ""
        return (f"{name}{self.num_subgraphs} TIDL subgraph(s) ({self.strategy}), "
                f"{describe_macs(self.tidl_macs)} of {describe_macs(self.total_macs)} on TIDL "
                f"({_share(self.tidl_macs, self.total_macs)}), {describe_bytes(self.boundary_bytes)} across subgraph "
                f"boundaries, {len(self.host_ops)} op(s) on the host; batch {self.batch}, limit "
                f"{self.batch_limit.describe()}")

    @property
    def exports(self) -> bool:
        """Whether anything runs on TIDL: at least one subgraph."""
        return bool(self.subgraphs)

    def verdict(self) -> str:
        """The answer in one line: ``exports: yes — 2 TIDL subgraphs, 100% of MACs on TIDL, 3 ops
        on the host`` (or ``exports: no — ...`` with the kinds of host op that keep it off TIDL)."""
        host = _count(len(self.host_ops), "op")
        if self.exports:
            share = (f"{_share(self.tidl_macs, self.total_macs)} of MACs on TIDL" if self.total_macs
                     else "no MACs in the model")
            return (f"exports: yes \u2014 {_count(self.num_subgraphs, 'TIDL subgraph')}, {share}, "
                    f"{host} on the host")
        if not self.host_ops:
            return "exports: no \u2014 the model has no op for TIDL to run"
        kinds = ", ".join(f"{k} {n}" for k, n in self.host_kinds().items())
        return f"exports: no \u2014 no TIDL subgraph: {host} on the host ({kinds})"

    def large_feature_maps(self) -> List[Tuple[str, int, int, str, Tuple[int, ...]]]:
        """The subgraphs that run a batch > 1 with a feature map of more than
        LARGE_FEATURE_MAP_ELEMENTS elements per frame: ``(subgraph, batch, elements per frame,
        layer, shape)`` of the largest such map of each (``batch_warnings`` says why it matters)."""
        from .rules import call_batch
        from .rules._base import tensor_types

        flow = self._flow
        if flow is None:
            return []
        out = []
        for info, region in zip(self.subgraphs, flow.partition.regions):
            largest = None
            for call in region.calls:
                batch = call_batch(call)
                if batch <= 1:
                    continue
                for t in tensor_types(call.checked_type):
                    if t.ndim >= 2 and t.shape[0] == batch:
                        per_frame = 1
                        for d in t.shape[1:]:
                            per_frame *= int(d)
                        if largest is None or per_frame > largest[0]:
                            largest = (per_frame, batch, call, tuple(int(d) for d in t.shape))
            if largest is not None and largest[0] > LARGE_FEATURE_MAP_ELEMENTS:
                per_frame, batch, call, shape = largest
                out.append((info.name, batch, per_frame, short_layer_name(call.layer, self._layer_type(call.layer)),
                            shape))
        return out

    def batch_warnings(self) -> List[str]:
        """TIDL's "large feature map" batch limit (edgeai-tidl-tools#42: TIDL's import stops with
        "Batch processing is not supported with large feature map case" for a batch of 2 x 224 x 224
        x 8 and accepts 2 x 16 x 16 x 8; TI publishes no limit): one warning per subgraph of
        ``large_feature_maps`` (tidlx's threshold LARGE_FEATURE_MAP_ELEMENTS; docs/ort-flow.md)."""
        from .rules._base import fmt_shape

        return [f"{name} runs batch {batch} with feature maps of up to {per_frame:,} elements per frame ({layer}: "
                f"{fmt_shape(shape)}): {LARGE_FEATURE_MAP_ADVICE}"
                for name, batch, per_frame, layer, shape in self.large_feature_maps()]

    def host_groups(self) -> List["HostGroup"]:
        """The host ops grouped by what keeps them there: one group per (kind, reason), the
        reason without the op and layer it starts with (``general_reason``), in order of first
        appearance; each group keeps its ops in model order."""
        groups: Dict[Tuple[str, str], List[HostOp]] = {}
        for h in self.host_ops:
            groups.setdefault((h.kind, general_reason(h)), []).append(h)
        return [HostGroup(kind, reason, tuple(ops)) for (kind, reason), ops in groups.items()]

    def table(self, max_layers: int = 4, verbose: bool = False):
        """The report as rich renderables (a Group): the verdict, the headline, subgraphs,
        boundary tensors, host ops (one row per reason with the layers it holds back; with
        ``verbose``, one row per op), preparation. Every name from the model is shown as rich
        ``Text`` (never read as markup) with its control characters escaped."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        parts: List[Any] = [_text(self.verdict()), _text(self.headline())]
        device = self.device()
        parts.append(_text(f"target device: {device['rules']}"))
        if device["warning"]:
            parts.append(_text(f"warning: {device['warning']}"))
        parts += [_text(f"warning: {w}") for w in self.batch_warnings()]
        if self.subgraphs:
            sub = Table(title="TIDL subgraphs", title_justify="left")
            for col, just in (("subgraph", "left"), ("nodes", "right"), ("TIDL layers", "right"),
                              ("MACs", "right"), ("% MACs", "right"), ("in", "right"), ("out", "right"),
                              ("boundary", "right"), ("layer types", "left"), ("ops", "left"), ("layers", "left")):
                sub.add_column(col, justify=just)
            for s in self.subgraphs:
                ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in s.ops.items())
                layers = [short_layer_name(x, self._layer_type(x)) for x in s.layers]
                shown = ", ".join(layers[:max_layers]) + (f", ... ({len(layers)} layers)"
                                                          if len(layers) > max_layers else "")
                types = ", ".join(f"{t} x{n}" if n > 1 else t for t, n in s.layer_types.items())
                _add_row(sub, s.name, s.num_nodes, s.num_tidl_layers, describe_macs(s.macs),
                         f"{_pct(s.macs, self.total_macs):.1f}", len(s.inputs), len(s.outputs),
                         describe_bytes(s.io_bytes), types, ops, shown)
            parts.append(sub)
            io_table = Table(title="tensors crossing subgraph boundaries", title_justify="left")
            for col in ("subgraph", "", "tensor", "from", "shape", "dtype", "bytes"):
                io_table.add_column(col, justify="right" if col == "bytes" else "left")
            for s in self.subgraphs:
                for direction, tensors in (("in", s.inputs), ("out", s.outputs)):
                    for t in tensors:
                        _add_row(io_table, s.name, direction, t.name, t.source, "x".join(map(str, t.shape)),
                                 t.dtype, t.nbytes)
            parts.append(io_table)
        if self.host_ops and verbose:
            host = Table(title="ops on the host, and why", title_justify="left")
            for col in ("layer", "op", "kind", "MACs", "reason"):
                host.add_column(col, justify="right" if col == "MACs" else "left", overflow="fold")
            for h in self.host_ops:
                _add_row(host, h.layer or "-", h.op, h.kind, describe_macs(h.macs), h.reason)
            parts.append(host)
        elif self.host_ops:
            groups = self.host_groups()
            host = Table(title=f"ops on the host, and why: {_count(len(groups), 'reason')} (one row each; "
                               f"--verbose: one row per op)", title_justify="left")
            for col in ("kind", "ops", "MACs", "reason", "layers"):
                host.add_column(col, justify="right" if col == "MACs" else "left", overflow="fold")
            for g in groups:
                layers = Text("\n".join(printable(x) for x in g.shown_layers()) or "-")  # one name a line
                _add_row(host, g.kind, g.describe_ops(), describe_macs(g.macs), g.reason, layers)
            parts.append(host)
        if self.host_ops:
            parts.append(_text("host ops by kind: " + ", ".join(f"{k} {n}" for k, n in self.host_kinds().items())))
        else:
            parts.append(_text("every op runs on TIDL"))
        prep = ", ".join(f"{p.name}" + ("" if p.status == "ran" else " (disabled)") for p in self.passes)
        parts.append(_text(f"graph preparation: {prep}"))
        if self.transformations:
            tt = Table(title="graph preparation: layers removed or rewritten", title_justify="left")
            for col in ("pass", "layer", "change", "what"):
                tt.add_column(col, overflow="fold")
            for t in self.transformations:
                _add_row(tt, t.pass_name, t.layer, t.change, t.message)
            parts.append(tt)
            if any(t.into for t in self.transformations if t.pass_name == "FoldBatchNormIntoDense"):
                parts.append(_text("to keep a merged batch norm a layer of its own: -o deny_list=nn.batch_norm "
                                   "(it runs on the host) or -o disabled_passes=FoldBatchNormIntoDense (it stays "
                                   "a TIDL BatchNorm layer)"))
        return Group(*parts)

    def render_text(self, width: Optional[int] = None, verbose: bool = False) -> str:
        """The table as plain text, ``width`` characters wide (default: as wide as each line
        needs, so no sentence is wrapped)."""
        return render_plain(self.table(verbose=verbose), width)

    def __str__(self) -> str:
        return self.render_text()

    def __repr__(self) -> str:
        return f"PartitionReport({self.headline()})"

    # -- SVG --------------------------------------------------------------------------------------
    def svg(self, title: Optional[str] = None) -> str:
        """The graph of the prepared model, one box per TIDL layer (composites as one box) or
        host op, coloured by target; tensors crossing a subgraph boundary in red."""
        if self._flow is None:
            raise ValueError("this report was built without its flow; it has no graph to draw")
        from .svg import SvgNode, render_svg

        nodes, edges = graph_units(self._flow, self.networks)
        legend = {s.name: f"TIDL subgraph {s.name}: {s.num_tidl_layers} layers, {describe_macs(s.macs)}, "
                          f"{len(s.inputs)} in / {len(s.outputs)} out ({describe_bytes(s.io_bytes)})"
                  for s in self.subgraphs}
        legend["host"] = f"host (Arm / C7x via TVM): {len(self.host_ops)} ops, {describe_macs(self.host_macs)}"
        svg_nodes = [SvgNode(n["key"], n["label"], n["group"], n["tooltip"], n["detail"]) for n in nodes]
        return render_svg(svg_nodes, edges, title=title or f"{self.model or 'model'}: TIDL partition "
                                                           f"({self.strategy})",
                          legend=legend, subtitle=self.headline())


def graph_units(flow, networks: Sequence[TidlNetwork] = ()) -> Tuple[List[Dict[str, Any]], List[Tuple[int, int]]]:
    """The drawable graph of a flow: one unit per composite group or op call, plus the
    inputs and outputs of @main; edges between units, in topological order. A unit on TIDL is
    labelled with its layer of the layer model (``networks``; built from the partitioned module
    when not given)."""
    analysis, result = flow.analysis, flow.partition
    network_of = {n.name: n for n in (networks or build_networks(result.module))}
    fn = analysis.prepared["main"]
    layer_types = analysis.prepared.layer_types
    order = post_order(fn.body, enter_functions=False)
    position = {id(n): i for i, n in enumerate(order)}
    unit_of: Dict[int, int] = {}          # node id -> unit key
    members: Dict[int, List[Call]] = {}   # unit key -> calls
    root_pos: Dict[int, int] = {}
    params = {id(p): p for p in fn.params}
    next_key = 0
    for p in fn.params:
        unit_of[id(p)] = next_key
        members[next_key] = []
        root_pos[next_key] = -1
        next_key += 1
    group_key: Dict[int, int] = {}
    for node in order:
        if isinstance(node, Call) and isinstance(node.op, Op) or isinstance(node, TupleGetItem):
            g = analysis.ctx.composite_of(node)
            if g is not None:
                key = group_key.get(id(g))
                if key is None:
                    key = group_key[id(g)] = next_key
                    members[key] = []
                    next_key += 1
            elif isinstance(node, Call):
                key = next_key
                members[key] = []
                next_key += 1
            else:
                continue
            unit_of[id(node)] = key
            if isinstance(node, Call):
                members[key].append(node)
            root_pos[key] = max(root_pos.get(key, -1), position[id(node)])
    # The units each node's value comes from (through tuples and projections).
    sources: Dict[int, Tuple[int, ...]] = {}
    edges_set = set()
    for node in order:
        if id(node) in params:
            sources[id(node)] = (unit_of[id(node)],)
            continue
        if isinstance(node, Constant):
            sources[id(node)] = ()
            continue
        from_children: List[int] = []
        for ch in children(node):
            for u in sources.get(id(ch), ()):
                if u not in from_children:
                    from_children.append(u)
        key = unit_of.get(id(node))
        if key is None:
            sources[id(node)] = tuple(from_children)
            continue
        for u in from_children:
            if u != key:
                edges_set.add((u, key))
        sources[id(node)] = (key,)
    outputs = list(fn.body.fields) if isinstance(fn.body, TupleExpr) else [fn.body]
    out_keys = []
    for i, out in enumerate(outputs):
        key = next_key
        next_key += 1
        members[key] = []
        root_pos[key] = len(order) + i
        out_keys.append(key)
        for u in sources.get(id(out), ()):
            edges_set.add((u, key))
    keys = sorted(members, key=lambda k: (root_pos[k], k))
    nodes = []
    for k in keys:
        calls = members[k]
        if not calls:
            if k in out_keys:
                i = out_keys.index(k)
                t = outputs[i].checked_type
                shape = "x".join(map(str, t.shape)) if isinstance(t, TensorType) else str(t)
                nodes.append({"key": k, "label": f"output {i}", "group": "io", "detail": shape,
                              "tooltip": f"output {i} of @main: {t}"})
            else:
                p = next(p for p in fn.params if unit_of[id(p)] == k)
                t = p.checked_type
                nodes.append({"key": k, "label": f"input %{p.name_hint}", "group": "io",
                              "detail": "x".join(map(str, t.shape)) if isinstance(t, TensorType) else "",
                              "tooltip": f"input %{p.name_hint}: {t}"})
            continue
        region = result.region_of(calls[0])
        group = region.name if region is not None else "host"
        anchor = calls[0]
        g = analysis.ctx.composite_of(anchor)
        if g is not None:
            anchor = g.anchor
        tidl_layer = None
        if region is not None:
            fn = result.composite_of(calls[0])
            net = network_of.get(region.name)
            tidl_layer = net.layer_of(fn) if fn is not None and net is not None else None
        label = tidl_layer.describe() if tidl_layer is not None else anchor.op_name.split(".")[-1]
        layer = anchor.layer
        detail = short_layer_name(layer, layer_types.get(layer) if layer else None)
        tip = [f"{'TIDL ' + region.name if region is not None else 'host'}: " + " + ".join(c.op_name for c in calls)]
        if tidl_layer is not None:
            tip.append(f"TIDL {tidl_layer.type} layer (type {tidl_layer.type_id}), {tidl_layer.composite}"
                       + (f", activation {tidl_layer.activation.type}" if tidl_layer.activation.type_id else ""))
        elif g is not None:
            tip.append(f"composite {g.name} (would be one TIDL {g.layer_type} layer)")
        layers = []
        for c in calls:
            if c.layer and c.layer not in layers:
                layers.append(c.layer)
        if layers:
            tip.append("layers: " + ", ".join(layers))
        out_t = calls[-1].checked_type
        if isinstance(out_t, TensorType):
            tip.append(f"output {out_t}")
        macs = sum(call_macs(c, analysis.prepared) for c in calls)
        tip.append(f"{describe_macs(macs)}")
        if region is None:
            reason = result.host_reason(calls[0])
            if reason:
                tip.append(f"on the host: {reason}")
        nodes.append({"key": k, "label": label, "group": group, "detail": detail, "tooltip": "\n".join(tip)})
    edges = sorted(edges_set, key=lambda e: (root_pos[e[1]], root_pos[e[0]], e[1], e[0]))
    return nodes, edges


# -- strategy comparison ------------------------------------------------------------------------------

@dataclass(frozen=True)
class StrategyRow:
    strategy: str
    subgraphs: int
    tidl_macs_percent: float
    boundary_bytes: int
    host_ops: int
    tidl_macs: int
    total_macs: int
    host_ops_by_kind: Dict[str, int] = field(default_factory=dict)
    error: Optional[str] = None     # the strategy failed: why (the numbers are then 0)

    def to_dict(self) -> Dict[str, Any]:
        return {"strategy": self.strategy, "subgraphs": self.subgraphs, "tidl_macs_percent": self.tidl_macs_percent,
                "boundary_bytes": self.boundary_bytes, "host_ops": self.host_ops, "tidl_macs": self.tidl_macs,
                "macs": self.total_macs, "host_ops_by_kind": dict(self.host_ops_by_kind), "error": self.error}


class StrategyComparison:
    """One row per strategy on the same model and options; ``reports`` holds each full report."""

    def __init__(self, reports: Sequence[PartitionReport], model_name: Optional[str] = None,
                 failures: Optional[Dict[str, str]] = None, order: Optional[Sequence[str]] = None):
        self.reports = list(reports)
        self.model = model_name
        self.failures = dict(failures or {})
        by_name = {r.strategy: StrategyRow(r.strategy, r.num_subgraphs, r.tidl_macs_percent, r.boundary_bytes,
                                           len(r.host_ops), r.tidl_macs, r.total_macs, r.host_kinds())
                   for r in self.reports}
        for name, error in self.failures.items():
            by_name[name] = StrategyRow(name, 0, 0.0, 0, 0, 0, 0, {}, error)
        names = list(order) if order is not None else [r.strategy for r in self.reports] + list(self.failures)
        self.rows = [by_name[n] for n in names]

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]

    def report(self, strategy: str) -> PartitionReport:
        for r in self.reports:
            if r.strategy == strategy:
                return r
        raise KeyError(strategy)

    def table(self):
        from rich.table import Table

        title = "partitioning strategies" + (f" for {self.model}" if self.model else "")
        table = Table(title=_text(title), title_justify="left")
        for col, just in (("strategy", "left"), ("subgraphs", "right"), ("% MACs on TIDL", "right"),
                          ("MACs on TIDL", "right"), ("boundary bytes", "right"), ("host ops", "right"),
                          ("host ops by kind", "left")):
            table.add_column(col, justify=just)
        for row in self.rows:
            if row.error is not None:
                _add_row(table, row.strategy, "-", "-", "-", "-", "-", f"failed: {row.error}")
                continue
            _add_row(table, row.strategy, row.subgraphs, f"{row.tidl_macs_percent:.2f}", describe_macs(row.tidl_macs),
                     f"{row.boundary_bytes} ({describe_bytes(row.boundary_bytes)})", row.host_ops,
                     ", ".join(f"{k} {n}" for k, n in row.host_ops_by_kind.items()) or "-")
        return table

    def to_dict(self) -> Dict[str, Any]:
        return {"schema": JSON_SCHEMA_VERSION, "model": self.model, "strategies": [r.to_dict() for r in self.rows]}

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent) + "\n"

    def render_text(self, width: Optional[int] = None) -> str:
        """The table as plain text (default width: no line wrapped)."""
        return render_plain(self.table(), width)

    def __str__(self) -> str:
        return self.render_text()


__all__ = ["PartitionReport", "SubgraphInfo", "HostOp", "TensorInfo", "StrategyComparison", "StrategyRow",
           "REPORT_KINDS", "HostGroup", "general_reason", "held_back_kind", "short_layer_name", "graph_units",
           "render_plain"]
