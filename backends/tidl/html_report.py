"""One self-contained HTML page with every answer tidlx gives about a model (``tidlx report``).

    data = collect(mod, ["max_batch_size=6"], calib="frames.npz", model_name="model.onnx")
    page = render_html(data)                  # str: write it as report.html
    page = html_report(mod, options, calib)   # both in one call

The page holds, in this order:

* the verdict (``PartitionReport.verdict``: exports yes/no, subgraphs, share of MACs on TIDL) and,
  when the model has TIDL subgraphs, the SQNR of each output at 8 and 16 bit;
* the graph coloured by target (``PartitionReport.svg``, inline): a box per TIDL layer or host op,
  its tooltip (an SVG ``<title>``) naming the layers, MACs and, for a host op, why it stays there;
* per TIDL subgraph its layers (TI's layer types, with their SQNR at 8 and 16 bit), MACs and the
  tensors crossing its boundary; the host ops grouped by reason, then one row per op; the graph
  preparation's changes (all from ``PartitionReport.to_dict``);
* fixed point: the model quantized at 8 and at 16 bit from the same calibration frames and compared
  with float (``compare.py``) on one frame: a chart of SQNR and saturation per layer at both widths,
  the outputs, the findings, the worst layers, and for the worst layers at the options'
  ``tensor_bits`` a histogram of their float and fixed-point values and a scatter of one against
  the other (``report_charts.py``). Without calibration frames the frames are seeded random ones and
  the page says, in a warning box, that the ranges say nothing about real data;
* the fusion check (``fusion_check.check_fusions``) at the options' ``tensor_bits``;
* the options used and the warnings raised while the report was made.

Self-contained: no script, and every style and picture is inline (the charts are matplotlib SVG,
their text drawn as paths), so the page opens offline and nothing is fetched. Deterministic: the
same model, options and frames give the same bytes (no date, no timing, no path but those given).
A quantization or fusion check that cannot run (a layer the fixed point does not run yet) is
reported in its section; the partition sections are still written.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ...emulator import run
from ...ir.analysis import describe_bytes, describe_macs
from ...ir.errors import TidlxError
from ...ir.module import IRModule
from ...ir.text import printable, xml_text
from .calibration import TidlTensorSources, _options, calibrate
from .compare import CompareError, ComparisonResult, compare, format_db
from .flow import partition_for_tidl, resolve_options
from .frames import CalibrationFrames, load_frames
from .options import TidlOptions, parse_key_values
from .quantize import QuantizedModel, quantize_model
from .report import PartitionReport, _share

#: The bit widths the report quantizes at.
REPORT_BITS = (8, 16)
#: Layers whose float and fixed-point values are drawn (the worst, at the options' tensor_bits).
DETAIL_LAYERS = 4
#: A subgraph's layer table is shown unfolded up to this many layers.
OPEN_LAYERS = 60
#: Rows of each worst-layers table.
WORST_ROWS = 10
#: TIDL layers that only move values (their error is their producer's): not drawn as a worst layer.
MOVING_LAYERS = ("Reshape", "Flatten", "Squeeze", "Transpose", "Slice", "Data")

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class FixedPointAnswer:
    """The model at one bit width: the comparison with float, or why there is none."""

    bits: int
    result: Optional[ComparisonResult] = None
    error: Optional[str] = None


@dataclass
class ReportData:
    """What the page shows; ``collect`` fills it, ``render_html`` writes it."""

    model: str
    report: PartitionReport
    option_strings: Tuple[str, ...]
    settings: Tuple[Tuple[str, str], ...]
    tensor_bits: int
    calibration: Optional[str] = None          # where the calibration frames came from
    random_frames: bool = False
    numerics: Dict[int, FixedPointAnswer] = field(default_factory=dict)
    samples: Tuple[Any, ...] = ()               # report_charts.LayerSample of the worst layers
    fusion: Any = None                          # fusion_check.FusionCheckResult
    fusion_error: Optional[str] = None
    warnings: Tuple[str, ...] = ()


# -- collecting the figures ---------------------------------------------------------------------------

def _option_values(options) -> Dict[str, Any]:
    if options is None:
        return {}
    if isinstance(options, Mapping):
        return dict(options)
    return dict(parse_key_values(list(options) if not isinstance(options, str) else [options]))


def _option_strings(options) -> Tuple[str, ...]:
    if options is None:
        return ()
    if isinstance(options, Mapping):
        return tuple(f"{k}={v}" for k, v in options.items())
    return tuple([options] if isinstance(options, str) else options)


class _Values:
    """Keeps, for one frame, the float and fixed-point values of the output tensor of some layers."""

    def __init__(self, qmodel: QuantizedModel, wanted: Sequence[Tuple[str, int]]):
        self.qmodel = qmodel
        networks = [qmodel.calibration[name].network for name in qmodel.subgraphs]
        self.sources = TidlTensorSources(qmodel.module, networks, CompareError, "report")
        self.wanted = set(wanted)
        self.tensors: Dict[Tuple[str, int], int] = {}
        for sub_name, index in wanted:
            layer = qmodel.subgraphs[sub_name].layers[index]
            self.tensors[(sub_name, index)] = layer.outputs[0]
        self.floats: Dict[Tuple[str, int], np.ndarray] = {}
        self.fixed: Dict[Tuple[str, int], np.ndarray] = {}

    def on_float(self, observation) -> None:
        for sub, tid, value in self.sources.observed(observation):
            self.floats[(sub, tid)] = np.array(value, copy=True)

    def on_fixed(self, seen) -> None:
        key = (seen.subgraph, seen.layer.index)
        if key in self.wanted and seen.outputs:
            self.fixed[key] = np.array(seen.outputs[0], copy=True)

    def run(self, frame: Mapping[str, np.ndarray]) -> None:
        self.floats = {(sub, tid): np.asarray(v) for sub, tid, v in self.sources.given(frame)}
        run(self.qmodel.module, frame, kernels="reference", observers=[self.on_float])
        self.qmodel.run(frame, host_kernels="reference", fixed_observers=[self.on_fixed])


def _samples(qmodel: QuantizedModel, result: ComparisonResult, frame: Mapping[str, np.ndarray],
             count: int) -> Tuple[Any, ...]:
    """The float and fixed-point values of the ``count`` worst layers (layers that only move values
    left out) on ``frame``."""
    from .report_charts import LayerSample

    chosen = []
    for layer in result.layers:
        if layer.type in MOVING_LAYERS or math.isnan(layer.sqnr_db):
            continue
        chosen.append(layer)
        if len(chosen) == count:
            break
    if not chosen:
        return ()
    keys = [(c.subgraph, c.index) for c in chosen]
    values = _Values(qmodel, keys)
    values.run(frame)
    out = []
    for c, key in zip(chosen, keys):
        sub = qmodel.subgraphs[key[0]]
        tid = values.tensors[key]
        tensor = sub.tensors[tid]
        ref = values.floats.get((key[0], tid))
        q = values.fixed.get(key)
        if ref is None or q is None:
            continue
        if tensor.is_float:
            fixed, lo, hi = np.asarray(q, np.float64), None, None
        else:
            zp = tensor.zero_point   # style 4: real = (q - zp) / scale
            fixed = (np.asarray(q, np.float64) - zp) / float(tensor.scale)
            qlo, qhi = tensor.fixed_type.bounds
            lo, hi = (qlo - zp) / float(tensor.scale), (qhi - zp) / float(tensor.scale)
        out.append(LayerSample(c.subgraph, c.layer, c.type, result.tensor_bits, c.sqnr_db, c.saturated_pct,
                               np.asarray(ref, np.float64), fixed, lo, hi))
    return tuple(out)


def collect(mod: IRModule, options=None, calib=None, inputs=None, *, model_name: Optional[str] = None,
            settings: Sequence[Tuple[str, str]] = (), mean=None, scale=None,
            progress: Optional[Progress] = None, detail_layers: int = DETAIL_LAYERS) -> ReportData:
    """Partitions ``mod`` for TIDL with ``options`` (TI's names as a dict or ``key=value`` strings),
    then, when it has TIDL subgraphs, quantizes it at 8 and 16 bit from ``calib`` (as
    ``tidlx.quantize``: a path, arrays by input name, or None for seeded random frames), compares
    each with float on ``inputs`` (else the first calibration frame) and runs the fusion check at
    the options' ``tensor_bits``. ``settings``: (label, value) rows for the page's options section
    (the CLI's loading options). ``progress(stage, done, total)``: the stages ``fixed point 8 bit``,
    ``fixed point 16 bit`` and ``fusion check``. Warnings raised on the way are kept in
    ``ReportData.warnings`` (and not raised again)."""
    values = _option_values(options)
    strings = _option_strings(options)
    opts, _ = resolve_options(dict(values))     # a bad option is an error before anything runs
    caught_all: List[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        partitioned, report = partition_for_tidl(mod, dict(values), model_name=model_name)
        data = ReportData(model_name or "model", report, strings, tuple(settings), int(opts.tensor_bits))
        if report.subgraphs:
            _fixed_point(data, mod, partitioned, values, opts, calib, inputs, mean, scale, progress, detail_layers)
    for w in caught:
        text = printable(w.message, keep="\n")
        if text not in caught_all:
            caught_all.append(text)
    data.warnings = tuple(caught_all)
    return data


def _fixed_point(data: ReportData, mod: IRModule, partitioned: IRModule, values: Dict[str, Any],
                 opts: TidlOptions, calib, inputs, mean, scale, progress, detail_layers: int) -> None:
    step = progress or (lambda stage, done, total: None)
    frames = load_frames(calib, partitioned, opts.calibration_frames, mean=mean, scale=scale)
    if len(frames) == 0:
        raise CompareError(f"{frames.source}: no calibration frames")
    data.calibration = (f"{len(frames)} seeded random frame(s), {frames.source}" if frames.random
                        else f"{len(frames)} frame(s) from {frames.source}")
    data.random_frames = bool(frames.random)
    if inputs is not None:
        given = load_frames(inputs, partitioned)
        compared = CalibrationFrames(given.frames[:1], given.source)
        where = f"frame 0 of {len(given)} from {given.source}"
    else:
        compared = CalibrationFrames(frames.frames[:1], frames.source, frames.random)
        where = (f"calibration frame 0 of {len(frames)} [{frames.source}] (in-sample: the ranges were "
                 f"calibrated on it)")
    for bits in REPORT_BITS:
        stage = f"fixed point {bits} bit"
        step(stage, 0, 2)
        try:
            bit_opts = _options(dict(values, tensor_bits=bits))
            results = calibrate(partitioned, bit_opts.replace(calibration_frames=len(frames)), frames)
            qmodel = quantize_model(partitioned, bit_opts, results)
            step(stage, 1, 2)
            result = compare(qmodel, compared, frames=1)
        except TidlxError as exc:
            data.numerics[bits] = FixedPointAnswer(bits, error=printable(exc, keep="\n"))
            step(stage, 2, 2)
            continue
        result = dataclasses.replace(result, inputs=where)
        data.numerics[bits] = FixedPointAnswer(bits, result)
        if bits == data.tensor_bits and detail_layers > 0:
            data.samples = _samples(qmodel, result, compared.frames[0], detail_layers)
        step(stage, 2, 2)
    from .fusion_check import check_fusions

    step("fusion check", 0, 1)
    try:
        data.fusion = check_fusions(mod, dict(values), frames, dict(compared.frames[0]), model_name=data.model,
                                    inputs_source="the compared frame")
    except TidlxError as exc:
        data.fusion_error = printable(exc, keep="\n")
    step("fusion check", 1, 1)


# -- the page -----------------------------------------------------------------------------------------

def _e(text: Any) -> str:
    """Text from the model or the user, escaped for HTML (control characters shown as escapes)."""
    return xml_text(text)


def _db(value: Optional[float]) -> str:
    return format_db(value)


def _pct(value: Optional[float]) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}%"


def _num(value: float) -> str:
    return f"{value:.4g}"


_STYLE = """
:root { --tidl: #4e79a7; --host: #bab0ac; --bad: #c0392b; --good: #2e7d32; --warn: #b26a00; }
* { box-sizing: border-box; }
body { font-family: -apple-system, "Segoe UI", "DejaVu Sans", Arial, sans-serif; font-size: 14px; color: #222;
       margin: 0; background: #fafafa; line-height: 1.4; }
header { background: #1f2d3d; color: #fff; padding: 16px 28px; }
header h1 { margin: 0 0 6px 0; font-size: 20px; font-weight: 600; }
header p { margin: 2px 0; color: #d9e2ec; }
nav { padding: 8px 28px; background: #eef2f6; border-bottom: 1px solid #d5dde5; position: sticky; top: 0; z-index: 2; }
nav a { margin-right: 16px; color: #1f4e79; text-decoration: none; font-weight: 600; }
main { padding: 8px 28px 40px 28px; max-width: 1800px; }
section { margin-top: 26px; }
h2 { font-size: 18px; border-bottom: 2px solid #d5dde5; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px 0; }
.verdict { font-size: 19px; font-weight: 700; padding: 12px 16px; border-radius: 6px; margin: 14px 0 8px 0; }
.verdict.yes { background: #e7f4e8; color: var(--good); border: 1px solid #9ccc9f; }
.verdict.no { background: #fbeaea; color: var(--bad); border: 1px solid #e3a1a1; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 10px 0; }
.card { background: #fff; border: 1px solid #d5dde5; border-radius: 6px; padding: 10px 14px; min-width: 150px; }
.card .value { font-size: 20px; font-weight: 700; }
.card .label { color: #555; font-size: 12px; }
.warning { background: #fff4e0; border: 1px solid #f0c36d; border-left: 6px solid var(--warn); padding: 10px 14px;
           border-radius: 4px; margin: 10px 0; }
.error { background: #fbeaea; border: 1px solid #e3a1a1; border-left: 6px solid var(--bad); padding: 10px 14px;
         border-radius: 4px; margin: 10px 0; white-space: pre-wrap; }
.note { color: #555; font-size: 13px; }
table { border-collapse: collapse; margin: 6px 0 12px 0; background: #fff; font-size: 13px; }
th, td { border: 1px solid #d5dde5; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #eef2f6; font-weight: 600; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
th.num { text-align: right; }
.name { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12px; word-break: break-all; }
tr.bad td { background: #fdf0f0; }
table.fusions { width: 100%; }
table.fusions td:nth-child(5) { min-width: 260px; }
.swatch { display: inline-block; width: 12px; height: 12px; border: 1px solid #333; vertical-align: middle;
          margin-right: 6px; }
.scroll { overflow: auto; max-width: 100%; background: #fff; border: 1px solid #d5dde5; border-radius: 4px; }
.graph { max-height: 900px; }
.chart svg { display: block; }
details { margin: 6px 0 10px 0; }
summary { cursor: pointer; font-weight: 600; }
figure { margin: 10px 0 18px 0; }
figcaption { font-size: 13px; color: #333; margin: 4px 0; }
footer { color: #777; font-size: 12px; padding: 0 28px 24px 28px; }
"""


def _table(headers: Sequence[Tuple[str, str]], rows: Sequence[Sequence[str]], cls: str = "",
           row_classes: Optional[Sequence[str]] = None) -> str:
    """``headers``: (title, "num" or ""); ``rows``: cells as HTML (already escaped)."""
    out = [f'<table class="{cls}">' if cls else "<table>", "<thead><tr>"]
    out += [f'<th class="{c}">{_e(h)}</th>' if c else f"<th>{_e(h)}</th>" for h, c in headers]
    out.append("</tr></thead><tbody>")
    for i, row in enumerate(rows):
        rc = row_classes[i] if row_classes else ""
        out.append(f'<tr class="{rc}">' if rc else "<tr>")
        for (_, c), cell in zip(headers, row):
            out.append(f'<td class="{c}">{cell}</td>' if c else f"<td>{cell}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _short(layer: str, scopes: int = 3) -> str:
    """``/img_backbone/layer1/layer1.0/conv1/Conv`` -> ``layer1.0/conv1/Conv``: a layer name's last
    scopes (a chart's label; the tables keep the whole name)."""
    parts = [p for p in str(layer).split("/") if p]
    return "/".join(parts[-scopes:]) if parts else str(layer)


def _shape(shape) -> str:
    return "x".join(str(d) for d in shape)


def _subgraph_colour(name: str, order: Sequence[str]) -> str:
    from .svg import group_colour

    return group_colour(name, list(order))


def _verdict_section(data: ReportData, doc: Dict[str, Any]) -> str:
    report = data.report
    totals = doc["totals"]
    cls = "yes" if report.exports else "no"
    cards = [("exports", "yes" if report.exports else "no"), ("TIDL subgraphs", str(report.num_subgraphs)),
             ("MACs on TIDL", _share(report.tidl_macs, report.total_macs)),
             ("MACs", describe_macs(report.total_macs)), ("ops on the host", str(len(report.host_ops))),
             ("across subgraph boundaries", describe_bytes(report.boundary_bytes))]
    for bits in REPORT_BITS:
        answer = data.numerics.get(bits)
        if answer is not None and answer.result is not None and answer.result.outputs:
            worst = min((o.sqnr_db for o in answer.result.outputs), key=lambda v: (math.isnan(v), v))
            cards.append((f"lowest output SQNR, {bits} bit", _db(worst)))
    out = ['<section id="verdict">',
           f'<p class="verdict {cls}" id="verdict-line">{_e(report.verdict())}</p>',
           f'<p class="note">{_e(report.headline())}</p>', '<div class="cards">']
    for label, value in cards:
        out.append(f'<div class="card"><div class="value">{_e(value)}</div><div class="label">{_e(label)}</div></div>')
    out.append("</div>")
    if data.random_frames:
        out.append(_random_warning(data))
    out.append("</section>")
    return "\n".join(out)


def _random_warning(data: ReportData, id: str = "random-frames-warning") -> str:
    return (f'<div class="warning" id="{id}"><strong>Calibrated on seeded random frames.</strong> '
            f'No calibration data was given ({_e(data.calibration or "random frames")}): the ranges, and every '
            'fixed-point figure below, say nothing about real data. Give frames like the ones the model will see '
            '(<code>--calib frames.npz</code> or a folder of images).</div>')


def _graph_section(data: ReportData) -> str:
    svg = data.report.svg()
    return ('<section id="graph"><h2>The graph, coloured by target</h2>'
            '<p class="note">One box per TIDL layer (a composite such as conv + batch norm + relu is one box) or '
            'host op; tensors crossing a subgraph boundary are drawn thick and red. Hover a box for its layers, '
            'MACs and, for a host op, why it stays on the host.</p>'
            f'<div class="scroll graph">{svg}</div></section>')


def _layer_sqnr(data: ReportData) -> Dict[Tuple[str, str], Dict[int, float]]:
    out: Dict[Tuple[str, str], Dict[int, float]] = {}
    for bits, answer in data.numerics.items():
        if answer.result is None:
            continue
        for layer in answer.result.layers:
            out.setdefault((layer.subgraph, layer.layer), {})[bits] = layer.sqnr_db
    return out


def _subgraphs_section(data: ReportData, doc: Dict[str, Any]) -> str:
    subs = doc["subgraphs"]
    out = ['<section id="subgraphs"><h2>TIDL subgraphs</h2>']
    if not subs:
        out.append('<p>No TIDL subgraph: every op runs on the host (the next section says why).</p></section>')
        return "\n".join(out)
    order = [s["name"] for s in subs]
    total = doc["totals"]["macs"]
    rows = []
    for s in subs:
        share = 100.0 * s["macs"] / total if total else 0.0
        types = ", ".join(f"{t} x{n}" if n > 1 else t for t, n in s["layer_types"].items())
        rows.append([f'<a href="#sub-{_e(s["name"])}"><span class="swatch" style="background:'
                     f'{_subgraph_colour(s["name"], order)}"></span>{_e(s["name"])}</a>',
                     str(s["num_tidl_layers"]), _e(describe_macs(s["macs"])), f"{share:.1f}",
                     str(len(s["inputs"])), str(len(s["outputs"])), _e(describe_bytes(s["io_bytes"])), _e(types)])
    out.append(_table([("subgraph", ""), ("TIDL layers", "num"), ("MACs", "num"), ("% MACs", "num"),
                       ("in", "num"), ("out", "num"), ("boundary", "num"), ("layer types", "")], rows))
    sqnr = _layer_sqnr(data)
    bits_shown = [b for b in REPORT_BITS if b in data.numerics and data.numerics[b].result is not None]
    for s in subs:
        name = s["name"]
        out.append(f'<div class="subgraph" id="sub-{_e(name)}" data-subgraph="{_e(name)}">')
        out.append(f'<h3><span class="swatch" style="background:{_subgraph_colour(name, order)}"></span>'
                   f'{_e(name)}: {s["num_tidl_layers"]} TIDL layers, {_e(describe_macs(s["macs"]))} '
                   f'({s["macs"]:,} MACs), {len(s["inputs"])} in / {len(s["outputs"])} out '
                   f'({_e(describe_bytes(s["io_bytes"]))} across its boundary)</h3>')
        tensors = []
        for direction, key in (("in", "inputs"), ("out", "outputs")):
            for t in s[key]:
                tensors.append([direction, f'<span class="name">{_e(t["name"])}</span>', _e(t["source"]),
                                _e(_shape(t["shape"])), _e(t["dtype"]), f'{t["bytes"]:,}'])
        out.append("<p><strong>Boundary tensors</strong></p>")
        out.append(_table([("", ""), ("tensor", ""), ("from", ""), ("shape", ""), ("dtype", ""), ("bytes", "num")],
                          tensors, cls="boundary"))
        headers = [("#", "num"), ("layer", ""), ("TIDL layer type", ""), ("type id", "num"), ("composite", ""),
                   ("activation", "")] + [(f"SQNR {b} bit", "num") for b in bits_shown]
        rows = []
        for i, layer in enumerate(s["tidl_layers"]):
            row = [str(i), f'<span class="name">{_e(layer["name"])}</span>', _e(layer["type"]),
                   str(layer["type_id"]), _e(layer["composite"] or "-"), _e(layer["activation"])]
            for b in bits_shown:
                v = sqnr.get((name, layer["name"]), {}).get(b)
                row.append(_e(_db(v)) if v is not None else "-")
            rows.append(row)
        out.append(f'<details{" open" if len(rows) <= OPEN_LAYERS else ""}><summary>{len(rows)} layers</summary>'
                   + _table(headers, rows, cls="layers") + "</details>")
        out.append("</div>")
    out.append("</section>")
    return "\n".join(out)


def _host_section(data: ReportData) -> str:
    report = data.report
    out = ['<section id="host"><h2>Ops on the host, and why</h2>']
    if not report.host_ops:
        out.append("<p>Every op runs on TIDL.</p></section>")
        return "\n".join(out)
    kinds = ", ".join(f"{k} {n}" for k, n in report.host_kinds().items())
    out.append(f'<p>{len(report.host_ops)} op(s), {_e(describe_macs(report.host_macs))}, by kind: {_e(kinds)}. '
               'One row per reason, with the layers it holds back (copy a name into '
               '<code>-o deny_list:layer_name=...</code> or read its rule in <code>tidlx ops</code>).</p>')
    rows = []
    for g in report.host_groups():
        layers = "<br>".join(f'<span class="name">{_e(x)}</span>' for x in g.layers) or "-"
        rows.append([_e(g.kind), _e(g.describe_ops()), _e(describe_macs(g.macs)), _e(g.reason), layers])
    out.append(_table([("kind", ""), ("ops", ""), ("MACs", "num"), ("reason", ""), ("layers", "")], rows,
                      cls="host-groups"))
    rows = [[f'<span class="name">{_e(h.layer or "-")}</span>', _e(h.op), _e(h.kind), _e(describe_macs(h.macs)),
             _e(h.reason)] for h in report.host_ops]
    out.append(f"<details><summary>every op on the host ({len(rows)})</summary>"
               + _table([("layer", ""), ("op", ""), ("kind", ""), ("MACs", "num"), ("reason", "")], rows,
                        cls="host-ops") + "</details>")
    out.append("</section>")
    return "\n".join(out)


def _preparation_section(doc: Dict[str, Any]) -> str:
    prep = ", ".join(f"{p['pass']}" + ("" if p["status"] == "ran" else " (disabled)") for p in doc["preparation"])
    out = ['<section id="preparation"><h2>Graph preparation</h2>', f"<p>Passes: {_e(prep)}.</p>"]
    if doc["transformations"]:
        rows = [[_e(t["pass"]), f'<span class="name">{_e(t["layer"])}</span>', _e(t["change"]), _e(t["message"])]
                for t in doc["transformations"]]
        out.append(_table([("pass", ""), ("layer", ""), ("change", ""), ("what", "")], rows))
    else:
        out.append("<p>No layer was removed or rewritten.</p>")
    out.append("</section>")
    return "\n".join(out)


def _chart_points(data: ReportData):
    from .report_charts import LayerPoint

    results = {b: a.result for b, a in data.numerics.items() if a.result is not None}
    if not results:
        return []
    first = results[min(results)]
    order = {name: i for i, name in enumerate(first.subgraphs)}
    layers: Dict[Tuple[str, int], Any] = {}
    for result in results.values():
        for layer in result.layers:
            layers.setdefault((layer.subgraph, layer.index), layer)
    points = []
    for key in sorted(layers, key=lambda k: (order.get(k[0], len(order)), k[0], k[1])):
        layer = layers[key]
        sq, sat = {}, {}
        for b, result in results.items():
            match = next((x for x in result.layers if (x.subgraph, x.index) == key), None)
            if match is not None:
                sq[b] = match.sqnr_db
                sat[b] = match.saturated_pct
        label = f"{layer.layer} (input convert)" if layer.type == "Data" else _short(layer.layer)
        points.append(LayerPoint(layer.subgraph, printable(label), sq, sat))
    return points


def _numerics_section(data: ReportData) -> str:
    from .report_charts import layer_values_chart, sqnr_chart

    out = ['<section id="numerics"><h2>Fixed point vs float</h2>']
    if not data.report.subgraphs:
        out.append("<p>No TIDL subgraph: nothing runs in fixed point.</p></section>")
        return "\n".join(out)
    if data.random_frames:
        out.append(_random_warning(data, "numerics-random-frames-warning"))
    answers = [data.numerics[b] for b in REPORT_BITS if b in data.numerics]
    results = [a for a in answers if a.result is not None]
    for a in answers:
        if a.error is not None:
            out.append(f'<div class="error" id="numerics-error-{a.bits}bit"><strong>{a.bits}-bit fixed point: not '
                       f'available.</strong> {_e(a.error)}</div>')
    if not results:
        out.append("</section>")
        return "\n".join(out)
    first = results[0].result
    out.append(f"<p>Quantized at {' and '.join(str(a.bits) for a in results)} bit from the same calibration frames "
               f"({_e(data.calibration)}; {_e(first.calibration or '')}) and run in TIDL's integer arithmetic "
               f"next to float on {_e(first.inputs)}. A layer's figures count the error of every layer before it "
               f"(it ran on fixed-point inputs).</p>")
    out.append("<ul>" + "".join(f'<li id="headline-{a.bits}bit">{_e(a.result.headline())}</li>' for a in results)
               + "</ul>")
    # outputs
    rows = []
    out_names = [o.name for o in first.outputs]
    for k, name in enumerate(out_names):
        row = [f'<span class="name">{_e(name)}</span>', _e(_shape(first.outputs[k].shape))]
        for a in results:
            o = a.result.outputs[k]
            row += [_e(_db(o.sqnr_db)), _e(_num(o.max_abs_err)), _e(_pct(o.saturated_pct))]
        row.append(_e(first.outputs[k].fed_by or "computed on the host"))
        rows.append(row)
    headers = [("output", ""), ("shape", "")]
    for a in results:
        headers += [(f"SQNR {a.bits} bit", "num"), (f"max abs error {a.bits} bit", "num"),
                    (f"saturated {a.bits} bit", "num")]
    headers.append(("fed by (fixed-point tensor)", ""))
    out.append("<h3>Model outputs</h3>" + _table(headers, rows, cls="outputs"))
    # the chart
    points = _chart_points(data)
    if points:
        svg = sqnr_chart(points, [a.bits for a in results], prefix="chart-sqnr")
        bits_text = " and ".join(f"{a.bits}" for a in results)
        out.append(f'<h3>SQNR and saturation per layer</h3><figure class="chart scroll" id="sqnr-chart" '
                   f'data-bits="{_e(",".join(str(a.bits) for a in results))}">{svg}<figcaption>SQNR of each TIDL '
                   f'layer\'s output against float at {bits_text} bit, in model order (bands: subgraphs); below, the '
                   f'share of its integers at the largest magnitude their type holds (saturated).</figcaption>'
                   f'</figure>')
    # findings
    out.append('<h3 id="findings">Findings: the causes of error tidlx can name</h3>')
    any_finding = False
    for a in results:
        if not a.result.findings:
            continue
        any_finding = True
        items = "".join(f'<li><strong>{_e(f.kind)}</strong> at @{_e(f.subgraph)} <span class="name">'
                        f'{_e(f.layer)}</span> ({_e(_db(f.sqnr_db))}): {_e(f.message)}</li>'
                        for f in a.result.findings)
        out.append(f'<p>{a.bits} bit, worst layer first:</p><ul class="findings" data-bits="{a.bits}">{items}</ul>')
    if not any_finding:
        out.append('<p class="findings-none">None at either width: no compared value beyond its calibrated range, '
                   'no global-average-pool multiplier and no weight range one scale cannot hold. The error is '
                   'rounding.</p>')
    # worst layers
    for a in results:
        rows, classes = [], []
        for rank, layer in enumerate(a.result.worst(WORST_ROWS), 1):
            rows.append([str(rank), _e(layer.subgraph), f'<span class="name">{_e(layer.layer)}</span>', _e(layer.op),
                         _e(_db(layer.sqnr_db)), _e(_num(layer.max_abs_err)), _e(_pct(layer.saturated_pct))])
            classes.append("bad" if layer.saturated_pct else "")
        out.append(f"<h3>Worst layers at {a.bits} bit ({len(rows)} of {len(a.result.layers)})</h3>"
                   + _table([("#", "num"), ("subgraph", ""), ("layer", ""), ("TIDL layer (Relay ops)", ""),
                             ("SQNR", "num"), ("max abs error", "num"), ("saturated", "num")], rows,
                            cls=f"worst worst-{a.bits}bit", row_classes=classes))
    # values of the worst layers
    if data.samples:
        out.append(f'<h3 id="layer-values">Float vs fixed point values of the worst layers at {data.tensor_bits} bit'
                   f'</h3><p class="note">On the compared frame. Left: histograms of the layer\'s output in float '
                   f'and in fixed point (dequantized: q / tensorScale); values piled at a dashed line are '
                   f'saturated. Right: each value in fixed point against float (a sample), the diagonal where they '
                   f'agree.</p>')
        for i, s in enumerate(data.samples):
            svg = layer_values_chart(s, prefix=f"chart-values-{i}")
            out.append(f'<figure class="chart scroll layer-values" data-layer="{_e(s.layer)}">'
                       f'<figcaption><strong>@{_e(s.subgraph)} <span class="name">{_e(s.layer)}</span></strong> '
                       f'({_e(s.type)}): {_e(_db(s.sqnr_db))}, {_e(_pct(s.saturated_pct))} saturated</figcaption>'
                       f'{svg}</figure>')
    out.append("</section>")
    return "\n".join(out)


def _fusion_section(data: ReportData) -> str:
    from .report_charts import fusion_chart

    out = ['<section id="fusion"><h2>Fusion check: fused vs unfused in fixed point</h2>']
    if not data.report.subgraphs:
        out.append("<p>No TIDL subgraph: no fusion to check.</p></section>")
        return "\n".join(out)
    if data.fusion_error is not None:
        out.append(f'<div class="error">The fusion check did not run: {_e(data.fusion_error)}</div></section>')
        return "\n".join(out)
    result = data.fusion
    if result is None:
        out.append("<p>Not run.</p></section>")
        return "\n".join(out)
    lines = result.lines()
    out.append(f'<p>As <code>tidlx check-fusion</code> at {data.tensor_bits} bit: each fusion TIDL\'s import applies, '
               f'the model quantized again with it switched off, both from the same calibration frames, compared '
               f'where both sequences end. {_e(lines[0])}.</p>')
    compared = [f for f in result.fusions if f.comparison is not None]
    if compared:
        labels = [f"{i + 1}. {f.kind}: {_short(f.layers[0])}"
                  for i, f in enumerate(result.fusions) if f.comparison is not None]
        svg = fusion_chart([(printable(lab), f.fused_error.sqnr_db, f.unfused_error.sqnr_db)
                            for lab, f in zip(labels, compared)], prefix="chart-fusion")
        out.append(f'<figure class="chart scroll" id="fusion-chart">{svg}<figcaption>A round dot left of its '
                   f'square: the fusion costs accuracy there (numbers as in the table below).</figcaption></figure>')
    rows, classes = [], []
    for i, f in enumerate(result.fusions, 1):
        layers = " + ".join(f'<span class="name" title="{_e(x)}">{_e(_short(x))}</span>' for x in f.layers)
        if f.comparison is None:
            rows.append([str(i), _e(f.kind), layers, _e(f.fused_layer or "-"), _e(f.note or "not compared"), "-", "-",
                         f'<span class="name">{_e(f.unfused_by)}</span>'])
            classes.append("")
            continue
        seq = " + ".join(t for _, t in f.unfused_layers)
        diff = f.comparison.describe() + ("" if f.comparison.input_identical else "; its input differed already")
        rows.append([str(i), _e(f.kind), layers, _e(f"{f.fused_type} -> {seq}"), _e(diff),
                     _e(f"{_db(f.fused_error.sqnr_db)} / {_db(f.unfused_error.sqnr_db)}"),
                     _e(f"{f.fused_error.max_abs_err:.3g} / {f.unfused_error.max_abs_err:.3g}"),
                     f'<span class="name">{_e(f.unfused_by)}</span>'])
        worse = (math.isfinite(f.fused_error.sqnr_db) and math.isfinite(f.unfused_error.sqnr_db)
                 and f.fused_error.sqnr_db < f.unfused_error.sqnr_db - 1.0)
        classes.append("bad" if worse else "")
    if rows:
        out.append(_table([("#", "num"), ("fusion", ""), ("layers", ""), ("fused -> unfused", ""),
                           ("fixed point: fused vs unfused", ""), ("SQNR vs float, fused / unfused", "num"),
                           ("max abs error vs float", "num"), ("unfused by", "")], rows, cls="fusions",
                          row_classes=classes))
        out.append('<p class="note">LSB: of the fused output\'s type. Shaded rows: the fused layer is more than '
                   '1 dB worse than the unfused sequence.</p>')
    for b in result.batch_norm_options:
        rows = [[_e(v.option), str(v.num_subgraphs), _e(f"{v.tidl_macs_percent:.4g}%"), str(v.num_host_ops),
                 _e(v.batch_norm)] for v in b.variants]
        out.append(f"<h3>{_e(b.describe())}: TI's ways to keep it</h3>"
                   + _table([("options", ""), ("subgraphs", "num"), ("MACs on TIDL", "num"), ("host ops", "num"),
                             ("the batch norm", "")], rows))
    out.append("</section>")
    return "\n".join(out)


def _options_section(data: ReportData, doc: Dict[str, Any]) -> str:
    out = ['<section id="options"><h2>Options used</h2>']
    given = [[f"<code>{_e(s)}</code>"] for s in data.option_strings]
    if given:
        out.append("<p>TIDL options given (<code>-o</code>):</p>" + _table([("option", "")], given, cls="given"))
    else:
        out.append("<p>No TIDL option given: TI's defaults.</p>")
    resolved = TidlOptions.from_dict({}).as_dict()
    changed = doc["options"]
    rows = [[_e(k), f"<code>{_e(json.dumps(v))}</code>", f"<code>{_e(json.dumps(resolved.get(k)))}</code>"]
            for k, v in changed.items()]
    if rows:
        out.append("<p>Options that differ from TI's defaults:</p>"
                   + _table([("option", ""), ("value", ""), ("default", "")], rows, cls="changed"))
    settings = list(data.settings)
    settings.append(("strategy", data.report.strategy))
    settings.append(("target device", data.report.device()["rules"]))
    if data.report.disabled_passes:
        settings.append(("disabled passes", ", ".join(data.report.disabled_passes)))
    settings.append(("batch", f"{data.report.batch} (limit {data.report.batch_limit.describe()})"))
    if data.calibration:
        settings.append(("calibration frames", data.calibration))
    settings.append(("fixed point", f"quantized at {' and '.join(str(b) for b in REPORT_BITS)} bit; "
                                    f"worst-layer values and fusion check at tensor_bits={data.tensor_bits}"))
    out.append(_table([("setting", ""), ("value", "")], [[_e(k), _e(v)] for k, v in settings], cls="settings"))
    if data.warnings:
        out.append('<h3>Warnings</h3><ul class="warnings">'
                   + "".join(f"<li>{_e(w)}</li>" for w in data.warnings) + "</ul>")
    out.append("</section>")
    return "\n".join(out)


def render_html(data: ReportData) -> str:
    """The page (see the module docstring) as text."""
    doc = data.report.to_dict()
    title = f"tidlx report: {data.model}"
    nav = [("verdict", "verdict"), ("graph", "graph"), ("subgraphs", "subgraphs"), ("host", "host ops"),
           ("preparation", "preparation"), ("numerics", "fixed point"), ("fusion", "fusion check"),
           ("options", "options")]
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_e(title)}</title>", f"<style>{_STYLE}</style>", "</head>", "<body>",
             f"<header><h1>{_e(title)}</h1><p>Will it export to TIDL, into how many subgraphs, what stays on the host "
             f"and why, and how far TIDL's fixed point is from float.</p></header>",
             "<nav>" + "".join(f'<a href="#{k}">{_e(v)}</a>' for k, v in nav) + "</nav>", "<main>",
             _verdict_section(data, doc), _graph_section(data), _subgraphs_section(data, doc), _host_section(data),
             _preparation_section(doc), _numerics_section(data), _fusion_section(data), _options_section(data, doc),
             "</main>", "<footer>Written by tidlx report. Self-contained: no script, nothing fetched.</footer>",
             "</body>", "</html>"]
    return "\n".join(parts) + "\n"


def html_report(mod: IRModule, options=None, calib=None, inputs=None, **kwargs) -> str:
    """``render_html(collect(mod, options, calib, inputs, **kwargs))``."""
    return render_html(collect(mod, options, calib, inputs, **kwargs))


__all__ = ["collect", "render_html", "html_report", "ReportData", "FixedPointAnswer", "REPORT_BITS"]
