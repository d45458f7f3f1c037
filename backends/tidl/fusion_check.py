"""Fusion checks: what each fusion TIDL's import applies does to the fixed-point numbers.

    result = check_fusions(mod, {"tensor_bits": 8}, calib="frames.npz")
    for f in result.fusions:
        f.kind, f.layers, f.comparison.identical, f.comparison.max_diff_lsb, f.fused_error.sqnr_db
    result.to_json(); result.table(); result.lines()
    fusion_summary(mod, {"max_batch_size": 6})     # a few lines on the batch norms folded into Gemms

The fusions (one entry per place a fusion was applied, in the order of the TIDL layers):

| kind                          | made by                               | the unfused sequence                   |
|-------------------------------|---------------------------------------|----------------------------------------|
| batch_norm into inner product | FoldBatchNormIntoDense (preparation)  | ``disabled_passes=FoldBatchNormIntoDense``: InnerProduct + BatchNorm layer |
| batch_norm into convolution   | composite FuseBatchNormIntoConv       | ``disabled_fusions=FuseBatchNormIntoConv``: Conv + BatchNorm layer |
| relu/clip into layer          | composite FuseActivation              | ``disabled_fusions=FuseActivation``: the layer + a ReLU layer |
| bias_add into convolution     | composite FuseBiasIntoConv            | ``disabled_fusions=FuseBiasIntoConv``: Conv + a BatchNorm (bias) layer |

How the unfused sequence is made (the design choice): the model is partitioned, calibrated and
quantized a second time with that one fusion switched off (the preparation pass disabled, or the
composite fusion switched off by ``composites.py``'s named steps), everything else as given. Both
are calibrated from the same frames, both run on the same input, and each spot is compared at the
tensor where both sequences end: the fused layer's output and the output of the last layer of the
unfused sequence (the layers holding the fused layer's parts), which compute the same real value.
By default one re-quantization per kind of fusion: the fusion is switched off everywhere, so a spot
downstream of another spot of the same kind also sees that one's difference in its input;
``input_identical`` says whether the spot's input was the same in both runs (then the difference
is the fusion's alone). ``isolate=True`` switches a composite fusion off at one spot at a time
(``disabled_fusions=FuseActivation:<layer of the relu>``), one re-quantization per spot; the BN +
dense merge has no per-layer switch and is always switched off as a whole.

The comparison at a spot (``FusionComparison``): ``identical`` when both outputs have the same type,
the same tensorScale and the same integers; otherwise the largest difference in LSBs of the fused
output's type (``|q_fused - q_unfused * scale_fused / scale_unfused|``: an integer when both have the
same scale) and how many elements differ (of how many). The error of each against float
(``ErrorFigures``: ``metrics.sqnr_db``, ``metrics.max_abs_err``) takes as float the unfused model
run in the float emulator (with the BN as a layer of its own: the original model's arithmetic),
at the same tensor.

For a batch norm folded into inner products, ``batch_norm_options`` says what TI's two ways to keep
it change: ``deny_list=nn.batch_norm`` (every batch norm on the host: subgraphs, MAC share, host
ops) and ``disabled_passes=FoldBatchNormIntoDense`` (the BN stays a TIDL BatchNorm layer: the
unfused run above), each computed by partitioning the model with that option added.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ...emulator import run as run_float
from ...ir.errors import TidlxError, TidlxInternalError
from ...ir.expr import Call, Function, TupleGetItem
from ...ir.module import IRModule
from ...ir.traversal import post_order
from .calibration import calibrate
from .composites import FUSED_MEMBER, FUSIONS, MEMBER, composite_specs, group_fusions
from .flow import DISABLED_PASSES_OPTION, resolve_options, run_flow
from .frames import frames_from_arrays, load_frames, model_inputs
from .layers import COMPOSITE_PREFIX, TidlLayer, TidlNetwork, build_networks
from .metrics import max_abs_err, sqnr_db
from .options import OptionError, TidlOptions, parse_key_values
from .quantize import QuantizedModel, quantize_model
from .report import PartitionReport

JSON_SCHEMA_VERSION = 1

BN_INTO_DENSE = "batch_norm into inner product"
BN_INTO_DENSE_PASS = "FoldBatchNormIntoDense"
#: The kinds of fusion, in the order entries at one layer are listed.
KINDS = (FUSIONS["FuseBatchNormIntoConv"], BN_INTO_DENSE, FUSIONS["FuseActivation"], FUSIONS["FuseBiasIntoConv"])
_STEP_OF_KIND = {BN_INTO_DENSE: BN_INTO_DENSE_PASS, **{kind: step for step, kind in FUSIONS.items()}}
DENY_BATCH_NORM = "deny_list=nn.batch_norm"
KEEP_BATCH_NORM = f"{DISABLED_PASSES_OPTION}={BN_INTO_DENSE_PASS}"


class FusionCheckError(TidlxError):
    """check_fusions cannot run: bad inputs or a model it cannot compare."""


# -- the figures -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ErrorFigures:
    """One fixed-point output against float: SQNR in dB (inf when equal) and the largest |error|."""

    sqnr_db: float
    max_abs_err: float

    @classmethod
    def of(cls, reference: np.ndarray, value: np.ndarray) -> "ErrorFigures":
        return cls(sqnr_db(reference, value), max_abs_err(reference, value))

    def to_dict(self) -> Dict[str, Any]:
        return {"sqnr_db": _number(self.sqnr_db), "max_abs_err": _number(self.max_abs_err)}


@dataclass(frozen=True)
class SpotTensor:
    """The tensor where a sequence ends: its TIDL name, type and tensorScale (real = q / scale)."""

    name: str
    bits: int
    signed: bool
    scale: float

    def describe(self) -> str:
        return f"{'s' if self.signed else 'u'}{self.bits} x 1/{self.scale:.6g}"

    def to_dict(self) -> Dict[str, Any]:
        return {"tensor": self.name, "bits": self.bits, "signed": self.signed, "scale": _number(self.scale)}


@dataclass(frozen=True)
class FusionComparison:
    """Fused vs unfused fixed point at one spot (see the module docstring)."""

    identical: bool
    same_type_and_scale: bool
    max_diff_lsb: float
    elements_differ: int
    elements: int
    input_identical: bool

    def describe(self) -> str:
        if self.identical:
            return "identical bits"
        lsb = f"{self.max_diff_lsb:.0f}" if float(self.max_diff_lsb).is_integer() else f"{self.max_diff_lsb:.2f}"
        scales = "" if self.same_type_and_scale else " (the two scales differ)"
        return f"max {lsb} LSB, {self.elements_differ} of {self.elements} elements differ{scales}"

    def to_dict(self) -> Dict[str, Any]:
        return {"identical": self.identical, "same_type_and_scale": self.same_type_and_scale,
                "max_diff_lsb": _number(self.max_diff_lsb), "elements_differ": self.elements_differ,
                "elements": self.elements, "input_identical": self.input_identical}


def compare_fixed(fused_q: np.ndarray, fused: SpotTensor, unfused_q: np.ndarray, unfused: SpotTensor,
                  input_identical: bool = True) -> FusionComparison:
    """The comparison of two fixed-point arrays of the same shape holding the same real value: the
    difference in LSBs of ``fused``'s type (1 / fused.scale)."""
    a = np.asarray(fused_q).astype(np.int64)
    b = np.asarray(unfused_q).astype(np.int64)
    if a.shape != b.shape:
        raise TidlxInternalError(f"fusion check: the fused output '{fused.name}' {a.shape} and the unfused "
                                 f"'{unfused.name}' {b.shape} differ in shape")
    same = fused.bits == unfused.bits and fused.signed == unfused.signed and fused.scale == unfused.scale
    if same:
        diff = np.abs(a - b)
        differ = int(np.count_nonzero(diff))
        worst = float(diff.max()) if diff.size else 0.0
    else:
        # equal real values give equal products (the same real number rounds the same way)
        differ = int(np.count_nonzero(a * unfused.scale != b * fused.scale))
        diff = np.abs(a - b * (fused.scale / unfused.scale))
        worst = float(diff.max()) if diff.size else 0.0
    return FusionComparison(same and differ == 0, same, worst, differ, int(a.size), input_identical)


# -- one entry --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FusionCheck:
    """One fusion at one place: ``kind`` (KINDS), ``step`` (the pass or composite fusion),
    ``unfused_by`` (the option that switches it off), ``layers`` (the model's layers involved),
    the fused TIDL layer and the unfused sequence, and the figures (None with a ``note`` when the
    spot cannot be compared)."""

    kind: str
    step: str
    unfused_by: str
    subgraph: Optional[str]
    layers: Tuple[str, ...]
    fused_layer: Optional[str]
    fused_type: Optional[str]
    unfused_layers: Tuple[Tuple[str, str], ...] = ()
    fused: Optional[SpotTensor] = None
    unfused: Optional[SpotTensor] = None
    comparison: Optional[FusionComparison] = None
    fused_error: Optional[ErrorFigures] = None
    unfused_error: Optional[ErrorFigures] = None
    note: Optional[str] = None
    detail: Optional[str] = None   # batch norm into inner product: "preceding" or "following" (the Gemm's side)

    def describe(self) -> str:
        names = " + ".join(f"'{n}'" for n in self.layers)
        return f"{self.kind}: {names}"

    def to_dict(self) -> Dict[str, Any]:
        return {
            "kind": self.kind, "step": self.step, "unfused_by": self.unfused_by, "subgraph": self.subgraph,
            "layers": list(self.layers),
            "fused": None if self.fused is None else {"layer": self.fused_layer, "type": self.fused_type,
                                                      **self.fused.to_dict()},
            "unfused": None if self.unfused is None else {
                "layers": [{"layer": n, "type": t} for n, t in self.unfused_layers], **self.unfused.to_dict()},
            "comparison": None if self.comparison is None else self.comparison.to_dict(),
            "float_error": None if self.fused_error is None else {"fused": self.fused_error.to_dict(),
                                                                  "unfused": self.unfused_error.to_dict()},
            "note": self.note, "side": self.detail,
        }


@dataclass(frozen=True)
class PartitionFigures:
    """What one set of options does to the partition: subgraphs, MAC share, host ops, and where a
    named batch norm ends up."""

    option: str
    num_subgraphs: int
    tidl_macs_percent: float
    num_host_ops: int
    batch_norm: str

    @classmethod
    def of(cls, option: str, report: PartitionReport, bn_layer: str, networks: Sequence[TidlNetwork]) \
            -> "PartitionFigures":
        return cls(option, report.num_subgraphs, report.tidl_macs_percent, len(report.host_ops),
                   _where_is(bn_layer, report, networks))

    def describe(self) -> str:
        return (f"{self.num_subgraphs} TIDL subgraph(s), {_percent(self.tidl_macs_percent)} of MACs on TIDL, "
                f"{self.num_host_ops} op(s) on the host; the BN {self.batch_norm}")

    def to_dict(self) -> Dict[str, Any]:
        return {"option": self.option, "num_subgraphs": self.num_subgraphs,
                "tidl_macs_percent": _number(self.tidl_macs_percent), "num_host_ops": self.num_host_ops,
                "batch_norm": self.batch_norm}


@dataclass(frozen=True)
class BatchNormOptions:
    """For one batch norm folded into inner products: the partition as is and with each way out."""

    batch_norm: str
    into: Tuple[str, ...]
    variants: Tuple[PartitionFigures, ...]
    side: Optional[str] = None   # "preceding" / "following": where the Gemm(s) it merged into are

    def describe(self) -> str:
        side = f"the {self.side} " if self.side else ""
        gemms = " and ".join(f"'{d}'" for d in self.into)
        return f"batch norm '{self.batch_norm}' folded by {BN_INTO_DENSE_PASS} into {side}inner product {gemms}"

    def to_dict(self) -> Dict[str, Any]:
        return {"batch_norm": self.batch_norm, "into": list(self.into), "side": self.side,
                "variants": [v.to_dict() for v in self.variants]}


@dataclass(frozen=True)
class FusionCheckResult:
    model: Optional[str]
    options: Mapping[str, Any]
    frames: int
    frames_source: str
    random_frames: bool
    inputs: str
    fusions: Tuple[FusionCheck, ...]
    batch_norm_options: Tuple[BatchNormOptions, ...] = ()
    num_subgraphs: int = 0

    def to_dict(self) -> Dict[str, Any]:
        return {"schema": JSON_SCHEMA_VERSION, "model": self.model, "options": dict(self.options),
                "calibration": {"frames": self.frames, "source": self.frames_source, "random": self.random_frames},
                "inputs": self.inputs, "num_subgraphs": self.num_subgraphs, "num_fusions": len(self.fusions),
                "fusions": [f.to_dict() for f in self.fusions],
                "batch_norm_options": [b.to_dict() for b in self.batch_norm_options]}

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False) + "\n"

    def lines(self) -> List[str]:
        """The answer as plain lines (what the table shows, one fusion per line)."""
        name = f"{self.model}: " if self.model else ""
        if not self.num_subgraphs:
            return [f"{name}no TIDL subgraph (everything runs on the host): no fusion to check"]
        out = [f"{name}{len(self.fusions)} fusion(s) applied; fused vs unfused fixed point on {self.inputs}, "
               f"both calibrated on the same {self.frames} frame(s)"]
        for f in self.fusions:
            out.append(f"{f.describe()} -> {_figures(f)}")
        for b in self.batch_norm_options:
            out.append(f"{b.describe()}; TI's ways to keep it:")
            for v in b.variants:
                out.append(f"  {v.option}: {v.describe()}")
        return out

    def table(self):
        """The fusions as a rich table, then the batch-norm options (names shown as they are)."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        from ...ir.text import printable

        def text(value) -> Text:
            return Text(printable(value, keep="\n"))

        head = self.lines()[0]
        table = Table(title=text(head), title_justify="left")
        for col, justify in (("fusion", "left"), ("layers", "left"), ("fused -> unfused", "left"),
                             ("fixed point: fused vs unfused", "left"), ("SQNR vs float (dB)", "right"),
                             ("max abs err vs float", "right"), ("unfused by", "left")):
            table.add_column(col, justify=justify)
        for f in self.fusions:
            if f.comparison is None:
                table.add_row(text(f.kind), text("\n".join(f.layers)), text(f.fused_layer or "-"),
                              text(f.note or "not compared"), "-", "-", text(f.unfused_by))
                continue
            seq = " + ".join(t for _, t in f.unfused_layers)
            table.add_row(text(f.kind), text("\n".join(f.layers)),
                          text(f"{f.fused_type} ({f.fused.describe()}) -> {seq} ({f.unfused.describe()})"),
                          text(f.comparison.describe() + ("" if f.comparison.input_identical
                                                          else "; its input differed already")),
                          text(f"{_db(f.fused_error.sqnr_db)} / {_db(f.unfused_error.sqnr_db)}"),
                          text(f"{f.fused_error.max_abs_err:.3g} / {f.unfused_error.max_abs_err:.3g}"),
                          text(f.unfused_by))
        parts = [table]
        for b in self.batch_norm_options:
            t = Table(title=text(f"{b.describe()}; TI's ways to keep it"), title_justify="left")
            for col in ("options", "subgraphs", "MACs on TIDL", "host ops", "the batch norm"):
                t.add_column(col)
            for v in b.variants:
                t.add_row(text(v.option), str(v.num_subgraphs), _percent(v.tidl_macs_percent), str(v.num_host_ops),
                          text(v.batch_norm))
            parts.append(t)
        return Group(*parts)


# -- helpers ------------------------------------------------------------------------------------------

def _number(value: float):
    """A float for JSON: finite values as they are, +-inf as strings, nan as null."""
    value = float(value)
    if math.isnan(value):
        return None
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _db(value: float) -> str:
    return "inf" if math.isinf(value) and value > 0 else f"{value:.1f}"


def _percent(value: float) -> str:
    if value >= 100.0:
        return "100%"
    return f"{min(value, 99.9):.1f}%"


def _figures(f: FusionCheck) -> str:
    if f.comparison is None:
        return f.note or "not compared"
    first = "" if f.comparison.input_identical else " (its input differed already)"
    return (f"{f.comparison.describe()}{first}; vs float: fused {_db(f.fused_error.sqnr_db)} dB / max "
            f"{f.fused_error.max_abs_err:.3g}, unfused {_db(f.unfused_error.sqnr_db)} dB / max "
            f"{f.unfused_error.max_abs_err:.3g} ({f.unfused_by})")


def _layer_kind(layer: TidlLayer) -> str:
    """``Conv+ReLU``; a standalone ReLU layer (type ReLU, activation ReLU) is ``ReLU``."""
    return layer.type if layer.activation.type == layer.type else layer.describe()


def _where_is(bn_layer: str, report: PartitionReport, networks: Sequence[TidlNetwork]) -> str:
    if bn_layer in report.host_layers():
        return "runs on the host"
    for net in networks:
        for layer in net.compute_layers():
            if bn_layer in layer.source_layers:
                if layer.ops and layer.ops[0] == "nn.batch_norm":
                    return f"is a TIDL {_layer_kind(layer)} layer (@{net.name})"
                return f"is part of the TIDL {_layer_kind(layer)} layer '{layer.name}' (@{net.name})"
    merged = [t for t in report.transformations if t.layer == bn_layer and t.change == "removed"]
    if merged:
        return f"is merged into {merged[0].into} ({merged[0].pass_name})"
    return "is not in the model"


def _options_dict(options) -> Dict[str, Any]:
    """The user's options as a dict of names (TI's and tidlx's) to values, for adding to."""
    if options is None:
        return {}
    if isinstance(options, TidlOptions):
        default = TidlOptions().as_dict()
        return {k: v for k, v in options.as_dict().items() if v != default[k]}
    if isinstance(options, Mapping):
        return {str(k).strip(): v for k, v in options.items()}
    if isinstance(options, (str, list, tuple)):
        return parse_key_values([options] if isinstance(options, str) else options)
    raise OptionError(f"TIDL options must be a dict of option names to values, a TidlOptions or a list of "
                      f"'key=value' strings, got {type(options).__name__}")


def _with_name(options: Mapping[str, Any], key: str, name: str) -> Dict[str, Any]:
    """``options`` with ``name`` added to the comma-separated list option ``key``."""
    out = dict(options)
    value = out.get(key)
    items: List[str] = []
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = [str(v).strip() for v in value if str(v).strip()]
    if name not in items:
        items.append(name)
    out[key] = ",".join(items)
    return out


def _changed_options(options: Mapping[str, Any]) -> Dict[str, Any]:
    opts, disabled = resolve_options(dict(options))
    default = TidlOptions().as_dict()
    out = {k: v for k, v in opts.as_dict().items() if v != default[k]}
    if disabled:
        out[DISABLED_PASSES_OPTION] = ",".join(disabled)
    return out


# -- running one variant ------------------------------------------------------------------------------

@dataclass
class _Variant:
    """One partition + quantization of the model, run once in fixed point and once in float."""

    options: Dict[str, Any]
    report: PartitionReport
    networks: Tuple[TidlNetwork, ...]
    model: QuantizedModel
    fixed: Dict[Tuple[str, int], Tuple[Tuple[np.ndarray, ...], Tuple[np.ndarray, ...]]] = field(default_factory=dict)
    floats: Dict[Tuple[str, int], np.ndarray] = field(default_factory=dict)

    def network(self, name: str) -> TidlNetwork:
        return next(n for n in self.networks if n.name == name)

    def tensor(self, subgraph: str, tid: int) -> SpotTensor:
        t = self.model.subgraphs[subgraph].tensors[tid]
        return SpotTensor(t.name, t.bits, t.signed, t.scale)


def _float_values(partitioned: IRModule, networks: Sequence[TidlNetwork], inputs, kernels: str) \
        -> Dict[Tuple[str, int], np.ndarray]:
    """The float value of every layer output of every subgraph (by (subgraph, tensor id))."""
    targets: Dict[int, Tuple[str, Tuple[int, ...]]] = {}
    for net in networks:
        for node in post_order(partitioned[net.name].body, enter_functions=False):
            if isinstance(node, Call) and isinstance(node.op, Function):
                layer = net.layer_of(node.op)
                if layer is not None:
                    targets[id(node)] = (net.name, layer.outputs)
    values: Dict[Tuple[str, int], np.ndarray] = {}

    def observe(observation) -> None:
        target = targets.get(id(observation.node))
        if target is None:
            return
        subgraph, tids = target
        value = observation.value
        arrays = list(value) if isinstance(value, (list, tuple)) else [value]
        for tid, array in zip(tids, arrays):
            values[(subgraph, tid)] = np.asarray(array)

    run_float(partitioned, inputs, kernels=kernels, observers=[observe])
    return values


def _run_variant(mod: IRModule, options: Dict[str, Any], frames, inputs, kernels: str) -> _Variant:
    opts, _ = resolve_options(dict(options))
    flow = run_flow(mod, dict(options))
    report = PartitionReport.from_flow(flow)
    partitioned = flow.partition.module
    networks = build_networks(partitioned)
    qmodel = quantize_model(partitioned, opts, calibrate(partitioned, opts, frames, kernels=kernels))
    variant = _Variant(dict(options), report, networks, qmodel)

    def observe(obs) -> None:
        variant.fixed[(obs.subgraph, obs.layer.index)] = (tuple(obs.inputs), tuple(obs.outputs))

    qmodel.run(inputs, fixed_observers=[observe])
    variant.floats = _float_values(partitioned, networks, inputs, kernels)
    return variant


# -- finding the fusions ------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Spot:
    kind: str
    subgraph: Optional[str]
    layer: Optional[TidlLayer]
    layers: Tuple[str, ...]           # the model's layers involved, for the report
    covered: Tuple[str, ...]          # the model's layers the unfused sequence holds
    note: Optional[str] = None
    part: Optional[str] = None        # the layer of the fused part (a composite fusion's relu, BN, bias)

    def switch_off(self, isolate: bool) -> Tuple[str, str]:
        """(option, value) that switches this fusion off: here only when isolating a composite
        fusion whose part has a layer name, else everywhere."""
        step = _STEP_OF_KIND[self.kind]
        if step == BN_INTO_DENSE_PASS:
            return DISABLED_PASSES_OPTION, step
        if isolate and self.part and "," not in self.part:
            return "disabled_fusions", f"{step}:{self.part}"
        return "disabled_fusions", step


def _composite_fusions(layer: TidlLayer) -> Tuple[Tuple[str, Optional[str]], ...]:
    """The composite fusions (FUSIONS keys) of a layer built from a composite pattern, each with the
    layer name of the part it fuses (what ``disabled_fusions=Name:<layer>`` names; None if unnamed)."""
    if layer.function is None or not layer.composite or not layer.composite.startswith(COMPOSITE_PREFIX):
        return ()
    short = layer.composite[len(COMPOSITE_PREFIX):]
    spec = next((s for s in composite_specs() if s.name == short), None)
    if spec is None:
        return ()
    body = layer.function.body
    match = spec.pattern.match(body)
    if match is None:
        raise TidlxInternalError(f"fusion check: layer '{layer.name}' does not match its pattern {short}")
    return tuple((step, getattr(match.get(MEMBER + FUSED_MEMBER[step]), "layer", None))
                 for step in group_fusions(spec.name, match.names))


def _find_spots(variant: _Variant, kinds: Sequence[str]) -> List[_Spot]:
    spots: List[Tuple[Tuple[int, int, int], _Spot]] = []
    order = {net.name: i for i, net in enumerate(variant.networks)}
    for net in variant.networks:
        for layer in net.compute_layers():
            for step, part in _composite_fusions(layer):
                kind = FUSIONS[step]
                if kind in kinds:
                    key = (order[net.name], layer.index, KINDS.index(kind))
                    spots.append((key, _Spot(kind, net.name, layer, layer.source_layers, layer.source_layers,
                                             part=part)))
    if BN_INTO_DENSE in kinds:
        dense_layers = {layer.name: (net, layer) for net in variant.networks for layer in net.compute_layers()}
        for t in variant.report.transformations:
            if t.pass_name != BN_INTO_DENSE_PASS or t.change != "removed" or not t.into:
                continue
            for dense in [d.strip() for d in t.into.split(",")]:
                found = dense_layers.get(dense)
                if found is None:
                    spots.append(((len(order), 0, KINDS.index(BN_INTO_DENSE)),
                                  _Spot(BN_INTO_DENSE, None, None, (t.layer, dense), (t.layer, dense),
                                        note=f"the inner product '{dense}' runs on the host")))
                    continue
                net, layer = found
                covered = tuple(dict.fromkeys(layer.source_layers + (t.layer,)))
                spots.append(((order[net.name], layer.index, KINDS.index(BN_INTO_DENSE)),
                              _Spot(BN_INTO_DENSE, net.name, layer, (t.layer,) + layer.source_layers, covered)))
    spots.sort(key=lambda item: item[0])
    return [s for _, s in spots]


def _unfused_sequence(variant: _Variant, covered: Sequence[str]) -> Optional[Tuple[TidlNetwork, List[TidlLayer]]]:
    """The layers of the unfused variant holding the ``covered`` model layers (one network, in order)."""
    wanted = set(covered)
    for net in variant.networks:
        layers = [layer for layer in net.compute_layers() if wanted & set(layer.source_layers)]
        if layers:
            return net, layers
    return None


def _compare_spot(spot: _Spot, step: str, unfused_by: str, fused: _Variant, unfused: _Variant) -> FusionCheck:
    base = dict(kind=spot.kind, step=step, unfused_by=unfused_by, subgraph=spot.subgraph, layers=spot.layers,
                fused_layer=None if spot.layer is None else spot.layer.name,
                fused_type=None if spot.layer is None else _layer_kind(spot.layer))
    if spot.layer is None:
        return FusionCheck(**base, note=spot.note)
    found = _unfused_sequence(unfused, spot.covered)
    if found is None:
        return FusionCheck(**base, note=f"with {unfused_by} the layers run on the host")
    net, layers = found
    last = layers[-1]
    sequence = tuple((layer.name, _layer_kind(layer)) for layer in layers)
    if len(spot.layer.outputs) != 1 or len(last.outputs) != 1:
        return FusionCheck(**base, unfused_layers=sequence, note="a layer with several outputs: not compared")
    f_in, f_out = fused.fixed[(spot.subgraph, spot.layer.index)]
    u_in, u_out = unfused.fixed[(net.name, last.index)]
    f_tensor = fused.tensor(spot.subgraph, spot.layer.outputs[0])
    u_tensor = unfused.tensor(net.name, last.outputs[0])
    if f_tensor.bits == 0 or u_tensor.bits == 0:
        return FusionCheck(**base, unfused_layers=sequence, note="a float output: not compared")
    first = layers[0]
    s_in, _ = unfused.fixed[(net.name, first.index)]
    f_in_t = fused.tensor(spot.subgraph, spot.layer.inputs[0])
    u_in_t = unfused.tensor(net.name, first.inputs[0])
    same_input = (f_in_t.scale == u_in_t.scale and f_in_t.bits == u_in_t.bits and f_in_t.signed == u_in_t.signed
                  and f_in[0].shape == s_in[0].shape and bool(np.array_equal(f_in[0], s_in[0])))
    comparison = compare_fixed(f_out[0], f_tensor, u_out[0], u_tensor, same_input)
    detail = None
    if spot.kind == BN_INTO_DENSE:  # the BN's layer first in the unfused sequence: the Gemm follows it
        detail = "following" if spot.layers[0] in first.source_layers else "preceding"
    reference = unfused.floats.get((net.name, last.outputs[0]))
    if reference is None:
        raise TidlxInternalError(f"fusion check: no float value observed for '{u_tensor.name}' of @{net.name}")
    f_real = f_out[0].astype(np.float64) / f_tensor.scale
    u_real = u_out[0].astype(np.float64) / u_tensor.scale
    return FusionCheck(**base, unfused_layers=sequence, fused=f_tensor, unfused=u_tensor, comparison=comparison,
                       fused_error=ErrorFigures.of(reference, f_real), unfused_error=ErrorFigures.of(reference, u_real),
                       detail=detail)


# -- the entry points ---------------------------------------------------------------------------------

def _check_kinds(kinds) -> Tuple[str, ...]:
    if kinds is None:
        return KINDS
    if isinstance(kinds, str):
        kinds = [kinds]
    out = []
    for kind in kinds:
        if kind not in KINDS:
            raise FusionCheckError(f"check_fusions: kind {kind!r} is not a fusion kind (the kinds: "
                                   f"{', '.join(repr(k) for k in KINDS)})")
        out.append(kind)
    return tuple(k for k in KINDS if k in out)


def check_fusions(mod: IRModule, options=None, calib=None, inputs: Optional[Mapping[str, Any]] = None, *,
                  kinds: Optional[Sequence[str]] = None, isolate: bool = False, model_name: Optional[str] = None,
                  kernels: str = "reference", inputs_source: str = "check_fusions inputs") -> FusionCheckResult:
    """Every fusion TIDL's import applies to ``mod`` (with ``options``), fused vs unfused in fixed
    point and each against float; see the module docstring.

    ``options``: as for ``tidlx.partition`` (TI's names, ``disabled_passes``, ``disabled_fusions``).
    ``calib``: calibration frames as for ``tidlx.quantize`` (None: seeded random frames, with a
    warning); both sequences are calibrated from the same frames. ``inputs``: the input the outputs
    are compared on (one frame, by input name); None: the first calibration frame. ``kinds``: only
    these kinds of fusion (KINDS). ``isolate``: switch each composite fusion off at its own spot
    only (``disabled_fusions=Name:<layer>``, one re-quantization per spot: slower, and each
    difference is that fusion's alone); the BN + dense merge is always switched off as a whole.
    ``kernels``: the float kernels of calibration and the float reference (``reference`` or
    ``fast``). ``inputs_source`` names the inputs in errors (the CLI: ``--input FILE``)."""
    if not isinstance(mod, IRModule):
        raise FusionCheckError(f"check_fusions takes an IRModule (tidlx.load gives one), got {type(mod).__name__}")
    if kernels not in ("reference", "fast"):
        raise FusionCheckError(f"check_fusions: kernels must be 'reference' or 'fast', got {kernels!r}")
    wanted = _check_kinds(kinds)
    base = _options_dict(options)
    opts, _ = resolve_options(dict(base))
    if not mod["main"].has_type:
        mod.infer_types()
    frames = load_frames(calib, mod, opts.calibration_frames)
    if len(frames) == 0:
        raise FusionCheckError(f"{frames.source}: no calibration frames")
    if inputs is None:
        feed = dict(frames[0])
        described = "calibration frame 0"
    else:
        if not isinstance(inputs, Mapping):
            raise FusionCheckError(f"check_fusions: inputs must be a mapping of input name to array, got "
                                   f"{type(inputs).__name__}")
        given = frames_from_arrays(inputs, model_inputs(mod), inputs_source)
        if len(given) != 1:
            raise FusionCheckError(f"{inputs_source}: {len(given)} frames; give one (the model's batch)")
        feed = dict(given[0])
        described = "the given input"

    fused = _run_variant(mod, base, frames, feed, kernels)
    spots = _find_spots(fused, wanted)
    variants: Dict[Tuple[str, str], _Variant] = {}
    checks: List[FusionCheck] = []
    for spot in spots:
        step = _STEP_OF_KIND[spot.kind]
        key, value = spot.switch_off(isolate)
        unfused_by = f"{key}={value}"
        if spot.layer is None:
            checks.append(_compare_spot(spot, step, unfused_by, fused, fused))
            continue
        if (key, value) not in variants:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the same warnings as the fused run's, once per variant
                variants[(key, value)] = _run_variant(mod, _with_name(base, key, value), frames, feed, kernels)
        checks.append(_compare_spot(spot, step, unfused_by, fused, variants[(key, value)]))
    kept = variants.get((DISABLED_PASSES_OPTION, BN_INTO_DENSE_PASS))
    if kept is None and any(s.kind == BN_INTO_DENSE for s in spots):  # every merged Gemm is on the host
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kept = _run_variant(mod, _with_name(base, DISABLED_PASSES_OPTION, BN_INTO_DENSE_PASS), frames, feed,
                                kernels)
    bn_options = _batch_norm_options(mod, base, fused, kept, checks) if BN_INTO_DENSE in wanted else ()
    return FusionCheckResult(model_name, _changed_options(base), len(frames), str(frames.source), bool(frames.random),
                             described, tuple(checks), bn_options, len(fused.networks))


def _batch_norm_options(mod: IRModule, base: Dict[str, Any], fused: _Variant, kept: Optional[_Variant],
                        checks: Sequence[FusionCheck]) -> Tuple[BatchNormOptions, ...]:
    merged = [t for t in fused.report.transformations
              if t.pass_name == BN_INTO_DENSE_PASS and t.change == "removed" and t.into]
    if not merged:
        return ()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        denied_flow = run_flow(mod, _with_name(base, "deny_list", "nn.batch_norm"))
    denied = PartitionReport.from_flow(denied_flow)
    denied_networks = build_networks(denied_flow.partition.module)
    out = []
    for t in merged:
        variants = [PartitionFigures.of("as is", fused.report, t.layer, fused.networks),
                    PartitionFigures.of(DENY_BATCH_NORM, denied, t.layer, denied_networks)]
        if kept is not None:
            variants.append(PartitionFigures.of(KEEP_BATCH_NORM, kept.report, t.layer, kept.networks))
        sides = sorted({c.detail for c in checks if c.kind == BN_INTO_DENSE and c.layers[0] == t.layer
                        and c.detail})
        out.append(BatchNormOptions(t.layer, tuple(d.strip() for d in t.into.split(",")), tuple(variants),
                                    " and ".join(sides) or None))
    return tuple(out)


def fusion_summary(mod: IRModule, options=None, calib=None, inputs=None, *, kernels: str = "reference") \
        -> List[str]:
    """A few lines on every batch norm folded into inner products (BEVDet's camera BN feeding two
    Gemms): the fold's fixed-point difference against the BN kept as a TIDL layer, the float error
    of each, and what ``deny_list=nn.batch_norm`` and ``disabled_passes=FoldBatchNormIntoDense``
    change. For the demo; ``check_fusions`` has every fusion."""
    result = check_fusions(mod, options, calib, inputs, kinds=[BN_INTO_DENSE], kernels=kernels)
    if not result.fusions:
        return ["no batch norm is folded into an inner product (FoldBatchNormIntoDense changed nothing)"]
    lines = []
    for b in result.batch_norm_options:
        lines.append(f"{b.describe()}; in fixed point, fused vs the BN as its own TIDL layer:")
        for f in result.fusions:
            if f.layers and f.layers[0] == b.batch_norm:
                where = f.fused_layer or f.layers[-1]
                lines.append(f"  at '{where}': {_figures(f)}")
        for v in b.variants:
            lines.append(f"  {v.option}: {v.describe()}")
    return lines


__all__ = ["check_fusions", "fusion_summary", "compare_fixed", "FusionCheckResult", "FusionCheck",
           "FusionComparison", "ErrorFigures", "SpotTensor", "PartitionFigures", "BatchNormOptions",
           "FusionCheckError", "KINDS", "BN_INTO_DENSE", "JSON_SCHEMA_VERSION"]
