"""Float vs fixed point, per model output and per TIDL layer: how far TIDL's integers are from float.

    result = compare(mod, None, {"tensor_bits": 8}, calib="frames.npz")    # quantize, then compare
    result = compare(qmodel, {"img": frames})                              # an existing QuantizedModel
    result.outputs[0].sqnr_db, result.layers[0]        # layers worst first (lowest SQNR)
    print(result.headline()); result.to_dict()         # the figures as plain data (tidlx compare --json)

Each frame runs twice on the same partitioned module: once in float (TIDL subgraphs included,
the ``reference`` kernels by default) with an observer that keeps the float value of every TIDL
tensor, once with the TIDL subgraphs in fixed point (``QuantizedModel.run``, host part in float)
with a fixed-point observer. Figures (the definitions of ``metrics.py``, pooled over frames):

* per model output: the fixed-point run's output vs the float run's, and the saturation of the
  fixed-point tensor feeding it (the subgraph output it comes from, directly or through a chain of
  host ops; none when it is computed on the host from several of them);
* findings (``findings.py``): the causes of error it can name -- a compared frame beyond the
  calibrated range, TIDL's global-average-pool multiplier, weights whose channels one scale cannot
  hold -- each at its layer, worst layer first;
* per TIDL layer (subgraph input data converts included, as layer type ``Data``): its output
  tensor(s) in fixed point, dequantized (``q / tensorScale``), vs the same tensor in the float run.
  The fixed-point layer ran on fixed-point inputs, so its error is **accumulated**: everything
  quantized before it counts too. ``isolated=True`` also runs each layer's integer kernel once
  more on its float inputs converted to fixed point at their tensorScale (§8.12's data convert):
  the layer's own error (``isolated_sqnr_db``), at the cost of a second fixed-point pass.

This is the comparison TI's traces are read for by hand: ``debug_level`` 3 writes each layer's
fixed-point output and level 4 its float form ``(q - zp) / scale`` (docs/artifacts.md, the traces),
which users hold against a float run of the same layer. The dequantized value
here is that float form (zero point 0: tidlx's styles are symmetric), kept in float64.

SQNR pooled over frames is ``10 log10(sum ref^2 / sum (ref - fixed)^2)`` over all their values
(one frame: exactly ``metrics.sqnr_db``); max abs error the largest over frames; *saturated*: the
share of integer values at the largest magnitude the tensor's type holds (-128/127, 255,
-32768/32767, 65535) -- an unsigned tensor's 0 is ReLU's floor, not saturation, and is not counted.
Softmax's float32 output has no saturation (None).

Which inputs: ``inputs`` when given (a path to an ``.npz``, a mapping of arrays by input name,
frames on the batch axis, or ``CalibrationFrames``: all of its frames, or the first ``frames``);
else the first ``frames`` (default 1) of the calibration frames (in-sample: the ranges were
calibrated on them); for a ``QuantizedModel`` given without inputs, one seeded random frame.
``ComparisonResult.inputs`` says which.

Cost: per frame one float run and one fixed-point run (two with ``isolated``); the float values
of every TIDL tensor of one frame are held until its fixed-point run has compared them.

Deterministic: the same model, options and frames give the same figures and the same order (worst
first: lowest SQNR, then subgraph, layer name, layer index).
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ...emulator import EmulatorError, run
from ...emulator.fixed.arith import FixedPointError, data_convert_to_fixed
from ...emulator.fixed.layers import KERNELS, FixedObservation
from ...emulator.fixed.network import QuantizedSubgraph, QuantizedTensor
from ...ir.errors import TidlxError, TidlxInternalError, TidlxWarning
from ...ir.expr import Call, Constant, Function, GlobalVar, Tuple as TupleExpr, TupleGetItem
from ...ir.module import IRModule
from ...ir.types import TupleType
from . import metrics
from .calibration import TidlTensorSources, _options, calibrate
from .qdq_reference import within_step
from .findings import Finding, findings
from .frames import CalibrationFrames, load_frames, random_frames
from .layers import TidlNetwork
from .calibration_loop import calibration_iterations
from .quant_proto import from_proto
from .quantize import BIAS_CALIB_BIT, QuantizedModel, calibration_option_bits, quantize_model

#: Frames compared when no inputs are given (the first calibration frames).
DEFAULT_COMPARE_FRAMES = 1
#: The seed of the random frame a QuantizedModel is compared on when no inputs are given.
RANDOM_FRAME_SEED = 0

Progress = Callable[[str, int, int], None]


class CompareError(TidlxError):
    """A comparison that cannot run: a model without TIDL subgraphs, inputs that do not fit."""


# -- the result ------------------------------------------------------------------------------------

def _sqnr_note(value: float) -> Optional[str]:
    if math.isnan(value):
        return "no finite values"
    if value == math.inf:
        return "exact (no error)"
    if value == -math.inf:
        return "the float value is all zeros"
    return None


def format_db(value: Optional[float]) -> str:
    """``31.2 dB``, ``exact``, ``-inf dB``, ``n/a``."""
    if value is None or math.isnan(value):
        return "n/a"
    if value == math.inf:
        return "exact"
    if value == -math.inf:
        return "-inf dB"
    return f"{value:.1f} dB"


def _number(value: Optional[float]):
    """A figure for JSON: finite numbers as they are, anything else null (JSON has no inf/nan)."""
    return value if value is not None and math.isfinite(value) else None


@dataclass(frozen=True)
class OutputComparison:
    """One model output: ``sqnr_db``, ``max_abs_err`` of the fixed-point run vs float, and
    ``saturated_pct`` of the fixed-point tensor ``fed_by`` (``@tidl_0:name``) feeding it (None: the
    output is computed on the host from several subgraph outputs, or from none)."""

    index: int
    name: str
    shape: Tuple[int, ...]
    sqnr_db: float
    max_abs_err: float
    saturated_pct: Optional[float]
    fed_by: Optional[str]
    #: against onnxruntime's run of a prequantized (QDQ) model, when compared with one: the fixed point's
    #: SQNR, the float run's SQNR, the QDQ model's step of this output and the share of fixed-point
    #: elements within one step (None without a step)
    qdq_sqnr_db: Optional[float] = None
    qdq_float_sqnr_db: Optional[float] = None
    qdq_step: Optional[float] = None
    qdq_within_step_pct: Optional[float] = None

    def to_dict(self) -> Dict[str, Any]:
        out = {"name": self.name, "index": self.index, "shape": list(self.shape), "sqnr_db": _number(self.sqnr_db),
               "max_abs_err": self.max_abs_err, "saturated_pct": self.saturated_pct, "fed_by": self.fed_by}
        note = _sqnr_note(self.sqnr_db)
        if note:
            out["sqnr_note"] = note
        if self.qdq_sqnr_db is not None:
            out["qdq_run"] = {"fixed_sqnr_db": _number(self.qdq_sqnr_db),
                              "float_sqnr_db": _number(self.qdq_float_sqnr_db), "step": self.qdq_step,
                              "fixed_within_one_step_pct": self.qdq_within_step_pct}
        return out


@dataclass(frozen=True)
class LayerComparison:
    """One TIDL layer: its output tensor(s) in fixed point vs float (accumulated error), TIDL's
    layer ``type`` and the Relay ``ops`` of its composite; ``isolated_sqnr_db`` when asked for."""

    subgraph: str
    index: int
    layer: str
    type: str
    ops: Tuple[str, ...]
    sqnr_db: float
    max_abs_err: float
    saturated_pct: Optional[float]
    values: int
    isolated_sqnr_db: Optional[float] = None

    @property
    def op(self) -> str:
        """``Conv (nn.conv2d, nn.bias_add, nn.relu)``; ``Data (input convert)`` for a subgraph input."""
        if self.type == "Data":
            return "Data (input convert)"
        return f"{self.type} ({', '.join(self.ops)})" if self.ops else self.type

    def sort_key(self):
        return (math.isnan(self.sqnr_db), self.sqnr_db, self.subgraph, self.layer, self.index)

    def to_dict(self) -> Dict[str, Any]:
        out = {"subgraph": self.subgraph, "layer": self.layer, "op": self.op, "tidl_type": self.type,
               "relay_ops": list(self.ops), "sqnr_db": _number(self.sqnr_db), "max_abs_err": self.max_abs_err,
               "saturated_pct": self.saturated_pct, "values": self.values}
        note = _sqnr_note(self.sqnr_db)
        if note:
            out["sqnr_note"] = note
        if self.isolated_sqnr_db is not None:
            out["isolated_sqnr_db"] = _number(self.isolated_sqnr_db)
        return out


@dataclass(frozen=True)
class ComparisonResult:
    """``outputs`` in @main's order, ``layers`` worst first; ``frames`` compared and ``inputs`` (where
    they came from); the quantization's ``tensor_bits`` and ``quantization_scale_type``."""

    outputs: Tuple[OutputComparison, ...]
    layers: Tuple[LayerComparison, ...]
    frames: int
    inputs: str
    tensor_bits: int
    quantization_scale_type: int
    subgraphs: Tuple[str, ...]
    isolated: bool = False
    calibration: Optional[str] = None
    #: why layers lost accuracy (findings.py), worst first
    findings: Tuple[Finding, ...] = ()
    #: the option target_device (TI's name; None: TIDL's defaults) and the warning about its quantization style
    target_device: Optional[str] = None
    device_warning: Optional[str] = None

    def worst(self, n: Optional[int] = None) -> Tuple[LayerComparison, ...]:
        return self.layers if n is None else self.layers[:n]

    def headline(self) -> str:
        """``8-bit fixed point: output 'depth' 31.2 dB SQNR; worst layer 'conv1' (Conv) 12.3 dB``."""
        outs = ", ".join(f"'{o.name}' {format_db(o.sqnr_db)}" for o in self.outputs)
        text = f"{self.tensor_bits}-bit fixed point: output{'s' if len(self.outputs) != 1 else ''} {outs} SQNR"
        if self.layers:
            w = self.layers[0]
            text += f"; worst layer '{w.layer}' ({w.type}) {format_db(w.sqnr_db)}"
        return text

    def to_dict(self) -> Dict[str, Any]:
        return {"tensor_bits": self.tensor_bits, "quantization_scale_type": self.quantization_scale_type,
                "frames": self.frames, "inputs": self.inputs, "calibration": self.calibration,
                "subgraphs": list(self.subgraphs), "layer_error": "isolated and accumulated" if self.isolated
                else "accumulated", "headline": self.headline(),
                "outputs": [o.to_dict() for o in self.outputs], "layers": [layer.to_dict() for layer in self.layers],
                "findings": [f.to_dict() for f in self.findings],
                "device": self.device_dict()}

    def device_dict(self) -> Dict[str, Any]:
        """Which device's rules applied (``devices.rules_line``) and the quantization-style warning."""
        from .devices import rules_line

        return {"target_device": self.target_device, "rules": rules_line(self.target_device),
                "warning": self.device_warning}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"


# -- the figures, pooled over frames ------------------------------------------------------------------

class _Figures:
    """Running sums for SQNR, max abs error and saturation over frames (float64)."""

    __slots__ = ("signal", "noise", "max_err", "saturated", "integers", "count", "finite")

    def __init__(self):
        self.signal = self.noise = self.max_err = 0.0
        self.saturated = self.integers = self.count = 0
        self.finite = True

    def add(self, reference: np.ndarray, value: np.ndarray) -> None:
        ref = np.asarray(reference, dtype=np.float64)
        val = np.asarray(value, dtype=np.float64)
        if ref.shape != val.shape:
            raise TidlxInternalError(f"compare: float {ref.shape} and fixed {val.shape} values differ in shape")
        if not (np.isfinite(ref).all() and np.isfinite(val).all()):
            self.finite = False
            return
        self.signal += float(np.sum(ref ** 2))
        self.noise += float(np.sum((ref - val) ** 2))
        self.max_err = max(self.max_err, metrics.max_abs_err(ref, val))
        self.count += ref.size

    def add_saturation(self, q: np.ndarray, tensor: QuantizedTensor) -> None:
        lo, hi = tensor.fixed_type.bounds
        # an unsigned tensor's 0 is ReLU's floor: below any value it can hold, so never counted
        lo = lo if tensor.signed else lo - 1
        pct = metrics.saturated_pct(q, lo, hi)
        self.saturated += int(round(pct * q.size / 100.0))
        self.integers += q.size

    def sqnr_db(self) -> float:
        # metrics.sqnr_db's cases, on the pooled sums
        if self.count == 0 or not self.finite:
            return math.nan
        if self.noise == 0.0:
            return math.inf
        if self.signal == 0.0:
            return -math.inf
        return 10.0 * math.log10(self.signal / self.noise)

    def saturated_pct(self) -> Optional[float]:
        return 100.0 * self.saturated / self.integers if self.integers else None


# -- where the float values of TIDL tensors are ----------------------------------------------------

class _FloatValues:
    """The float run's observer: keeps the value of every tensor of every TIDL subgraph for one frame,
    from where calibration finds them (``calibration.TidlTensorSources``)."""

    def __init__(self, mod: IRModule, networks: Mapping[str, TidlNetwork]):
        self.sources = TidlTensorSources(mod, networks.values(), CompareError, "compare")
        self.values: Dict[Tuple[str, int], np.ndarray] = {}

    def start(self, frame: Mapping[str, np.ndarray]) -> None:
        self.values = {(sub, tid): np.asarray(value) for sub, tid, value in self.sources.given(frame)}

    def __call__(self, observation) -> None:
        for sub, tid, value in self.sources.observed(observation):
            self.values[(sub, tid)] = np.asarray(value)


def _to_fixed(value: np.ndarray, tensor: QuantizedTensor) -> np.ndarray:
    """A float value at a tensor's scale (and zero point, style 4: docs/numerics.md §12.9)."""
    if tensor.zero_point:
        from ...emulator.fixed.arith_asym import data_convert_to_fixed_zp
        return data_convert_to_fixed_zp(value, tensor.scale, tensor.zero_point, tensor.fixed_type)
    return data_convert_to_fixed(value, tensor.scale, tensor.fixed_type)


def _dequantized(q: np.ndarray, tensor: QuantizedTensor) -> np.ndarray:
    """A fixed-point value as the real number it stands for ((q - zero point) / tensorScale, float64)."""
    if tensor.is_float:
        return np.asarray(q, dtype=np.float64)
    return (np.asarray(q, dtype=np.float64) - tensor.zero_point) / float(tensor.scale)


# -- which subgraph output feeds each model output ---------------------------------------------------

def _output_exprs(mod: IRModule) -> List[Any]:
    """@main's outputs as the emulator flattens them: (expr, k-th field of a tuple-valued call or None)."""
    def expand(expr, ttype) -> List[Any]:
        if isinstance(ttype, TupleType):
            if isinstance(expr, TupleExpr):
                out: List[Any] = []
                for f, t in zip(expr.fields, ttype.fields):
                    out.extend(expand(f, t))
                return out
            return [(expr, k) for k in range(len(ttype.fields))]   # a tuple-valued call: its fields
        return [(expr, None)]

    body = mod["main"].body
    return expand(body, body.checked_type)


def _feeder(expr, field_index: Optional[int], subgraphs: Mapping[str, QuantizedSubgraph]) \
        -> Optional[Tuple[str, int]]:
    """(subgraph, tensor id) of the subgraph output an output comes from, directly, through a tuple
    field, or through a chain of host ops with one computed input each; None otherwise."""
    while True:
        if isinstance(expr, TupleGetItem) and field_index is None:
            expr, field_index = expr.tuple_value, expr.index
            continue
        if isinstance(expr, Call) and isinstance(expr.op, GlobalVar) and expr.op.name_hint in subgraphs:
            sub = subgraphs[expr.op.name_hint]
            k = 0 if field_index is None else field_index
            return (sub.name, sub.outputs[k]) if k < len(sub.outputs) else None
        if isinstance(expr, Call) and field_index is None and not isinstance(expr.op, (GlobalVar, Function)):
            computed = list({id(a): a for a in expr.args if not isinstance(a, Constant)}.values())
            if len(computed) == 1:
                expr = computed[0]
                continue
        return None


def _output_names(mod: IRModule, count: int) -> List[str]:
    names = list(mod.attrs.get("output_names") or [])
    if len(names) == count and len(set(names)) == count and all(isinstance(n, str) and n for n in names):
        return names
    return [f"output_{i}" for i in range(count)]


# -- the comparison -----------------------------------------------------------------------------------

class _Comparer:
    def __init__(self, qmodel: QuantizedModel, isolated: bool, kept: Sequence[Tuple[str, int]] = ()):
        self.qmodel = qmodel
        self.kept = set(kept)   # the fixed-point tensors to keep for the frame (those feeding outputs)
        self.isolated = isolated
        self.networks = {name: qmodel.calibration[name].network for name in qmodel.subgraphs}
        self.float_values = _FloatValues(qmodel.module, self.networks)
        self.layer_figures: Dict[Tuple[str, int], _Figures] = {}
        self.isolated_figures: Dict[Tuple[str, int], _Figures] = {}
        self.fixed_values: Dict[Tuple[str, int], Tuple[np.ndarray, QuantizedTensor]] = {}
        #: the float (min, max) of each compared tensor over the frames, for the saturation findings
        self.observed: Dict[Tuple[str, int], Tuple[float, float]] = {}

    def on_fixed(self, seen: FixedObservation) -> None:
        sub = self.qmodel.subgraphs[seen.subgraph]
        layer = seen.layer
        if layer.type == "Data" and layer.inputs:   # a data convert out: its tensor is its producer's
            return
        key = (seen.subgraph, layer.index)
        figures = self.layer_figures.setdefault(key, _Figures())
        for tid, q in zip(layer.outputs, seen.outputs):
            tensor = sub.tensors[tid]
            reference = self.float_values.values.get((seen.subgraph, tid))
            if reference is None:
                raise TidlxInternalError(f"@{seen.subgraph}: no float value observed for tensor '{tensor.name}'")
            figures.add(reference, _dequantized(q, tensor))
            if not tensor.is_float:
                figures.add_saturation(q, tensor)
                self.observe(seen.subgraph, tid, reference)
            if (seen.subgraph, tid) in self.kept:
                self.fixed_values[(seen.subgraph, tid)] = (q, tensor)
        if self.isolated and layer.type != "Data":
            self.run_isolated(sub, layer, key)

    def observe(self, sub_name: str, tid: int, reference: np.ndarray) -> None:
        value = np.asarray(reference)
        if value.size == 0 or not np.isfinite(value).all():
            return
        lo, hi = float(value.min()), float(value.max())
        seen = self.observed.get((sub_name, tid))
        self.observed[(sub_name, tid)] = (lo, hi) if seen is None else (min(seen[0], lo), max(seen[1], hi))

    def run_isolated(self, sub: QuantizedSubgraph, layer, key) -> None:
        """The layer's own error: its integer kernel on its float inputs converted at their tensorScale."""
        xs = []
        for tid in layer.inputs:
            tensor = sub.tensors[tid]
            value = self.float_values.values[(sub.name, tid)]
            xs.append(value if tensor.is_float else _to_fixed(np.asarray(value, np.float32), tensor))
        try:
            outs = KERNELS[layer.type](layer, xs, sub.tensors)
        except FixedPointError as exc:
            raise CompareError(f"@{sub.name}: layer {layer.describe()} on its float inputs: {exc}") from exc
        figures = self.isolated_figures.setdefault(key, _Figures())
        for tid, q in zip(layer.outputs, outs):
            figures.add(self.float_values.values[(sub.name, tid)], _dequantized(q, sub.tensors[tid]))

    def layers(self) -> List[LayerComparison]:
        out = []
        for (sub_name, index), figures in self.layer_figures.items():
            qlayer = self.qmodel.subgraphs[sub_name].layers[index]
            tlayer = self.networks[sub_name].layers[qlayer.index]
            iso = self.isolated_figures.get((sub_name, index))
            out.append(LayerComparison(sub_name, qlayer.index, qlayer.name, qlayer.type,
                                       tuple(tlayer.ops) if qlayer.type != "Data" else (), figures.sqnr_db(),
                                       figures.max_err, figures.saturated_pct(), figures.count,
                                       iso.sqnr_db() if iso is not None else None))
        return sorted(out, key=LayerComparison.sort_key)


def _frame_source(qmodel: QuantizedModel, inputs, given: Optional[CalibrationFrames], frames: Optional[int],
                  calib_frames: Optional[CalibrationFrames]):
    """The frames to compare on and a phrase saying which they are."""
    if given is not None:
        data = given
        source = "the given arrays" if isinstance(inputs, Mapping) else data.source
    elif calib_frames is not None:
        data = calib_frames
    else:
        from .frames import model_inputs

        with warnings.catch_warnings():   # its warning speaks of calibration; the result says "random frame"
            warnings.simplefilter("ignore", TidlxWarning)
            data = random_frames(model_inputs(qmodel.module), 1, RANDOM_FRAME_SEED)
    count = len(data) if frames is None else min(frames, len(data))
    if count == 0:
        raise CompareError(f"{data.source}: no frames to compare on")
    first = "frame 0" if count == 1 else f"frames 0-{count - 1}"
    if given is not None:
        where = f"{first} of {len(data)} from {source}" if count < len(data) else \
            f"{count} frame{'s' if count != 1 else ''} from {source}"
    elif calib_frames is not None:
        where = (f"calibration {first} of {len(data)} [{data.source}] (in-sample: the ranges were calibrated on "
                 f"them)")
    else:
        where = f"one random frame (seed {RANDOM_FRAME_SEED}; no inputs given)"
    return data.frames[:count], where


def compare(model, inputs=None, options=None, calib=None, *, frames: Optional[int] = None, isolated: bool = False,
            kernels: str = "reference", progress: Optional[Progress] = None, mean=None,
            scale=None, qdq_reference=None) -> ComparisonResult:
    """Float vs fixed point per output and per TIDL layer (the module docstring says how).

    ``model``: an ``IRModule`` (partitioned for TIDL with ``options`` unless it holds TIDL
    subgraphs already, calibrated on ``calib`` and quantized), or a ``QuantizedModel``.
    ``inputs``: the frames to compare on (a path, a mapping of arrays by input name, frames on the
    batch axis, or ``CalibrationFrames``); None: the calibration frames (a ``QuantizedModel``: one
    seeded random frame). ``frames``: at most this many (None: all given inputs, or
    ``DEFAULT_COMPARE_FRAMES`` of the calibration frames). ``isolated``: also each layer's own error.
    ``mean``/``scale``: preprocessing of a ``calib`` folder of images (TI's per-channel
    ``input_mean``/``input_scale``). ``kernels``: the float kernels (the float run and the host
    part of the fixed run). ``progress(stage, done, total)``: after each calibration frame (stage
    ``"calibration"``), during quantization (``"quantize"``: 0 of 1, then each fixed-point frame of the
    calibration iterations; 1 of 1 when there is none), and as each compared frame starts and ends
    (``"compare"``). ``qdq_reference``: a ``qdq_reference.QdqReference`` (onnxruntime on the QDQ file of a
    prequantized model): each output is also set against its run (``OutputComparison.qdq_*``).
    """
    if frames is not None and (isinstance(frames, bool) or not isinstance(frames, int) or frames < 1):
        raise CompareError(f"frames must be an integer >= 1, got {frames!r}")
    if kernels not in ("reference", "fast"):
        raise CompareError(f"kernels must be 'reference' or 'fast', got {kernels!r}")
    calib_frames = None
    if not isinstance(model, (QuantizedModel, IRModule)):
        raise TypeError(f"compare takes an IRModule or a QuantizedModel, got {type(model).__name__}")
    # the inputs first: a bad one is an error before the calibration runs
    given = None if inputs is None else \
        load_frames(inputs, model.module if isinstance(model, QuantizedModel) else model)
    if isinstance(model, QuantizedModel):
        if options is not None or calib is not None or mean is not None or scale is not None:
            raise CompareError("compare: a QuantizedModel is already quantized; options=, calib=, mean= and scale= "
                               "apply to an IRModule")
        qmodel = model
    else:
        opts = _options(options)
        partitioned = model
        if not any(fn.attrs.get("Compiler") == "tidl" for _, fn in model.items()):
            from .flow import partition_for_tidl

            partitioned = partition_for_tidl(model, options)[0]   # with disabled_passes
        if not any(fn.attrs.get("Compiler") == "tidl" for _, fn in partitioned.items()):
            raise CompareError("the model has no TIDL subgraph: every op runs on the host, in float, so there is no "
                               "fixed point to compare (tidlx partition MODEL says why)")
        calib_frames = load_frames(calib, partitioned, opts.calibration_frames, mean=mean, scale=scale)
        step = None if progress is None else (lambda done, total: progress("calibration", done, total))
        # the frames are loaded (and any shortfall warned about) once; calibrate takes them all
        results = calibrate(partitioned, opts.replace(calibration_frames=len(calib_frames)),
                            calib_frames, progress=step)
        # quantization runs the calibration iterations: calibration_iterations fixed-point runs of every frame
        steps = []
        if progress is not None:
            progress("quantize", 0, 1)
        qmodel = quantize_model(partitioned, opts, results, progress=None if progress is None else
                                (lambda done, total: (steps.append(done), progress("quantize", done, total))))
        if progress is not None and not steps:   # no fixed-point frame (a quantization-parameters file)
            progress("quantize", 1, 1)
        if inputs is None and frames is None:
            frames = DEFAULT_COMPARE_FRAMES
    if not qmodel.subgraphs:
        raise CompareError("the model has no TIDL subgraph: every op runs on the host, in float, so there is no "
                           "fixed point to compare (tidlx partition MODEL says why)")
    chosen, where = _frame_source(qmodel, inputs, given, frames, calib_frames)
    out_exprs = _output_exprs(qmodel.module)
    out_figures = [_Figures() for _ in out_exprs]
    feeders = [_feeder(expr, k, qmodel.subgraphs) for expr, k in out_exprs]
    comparer = _Comparer(qmodel, isolated, [f for f in feeders if f is not None])
    out_saturation = [_Figures() for _ in out_exprs]
    shapes: List[Tuple[int, ...]] = [()] * len(out_exprs)
    names = _output_names(qmodel.module, len(out_exprs))
    qdq_order = None if qdq_reference is None else qdq_reference.order_for(names)
    qdq_fixed = [_Figures() for _ in out_exprs]
    qdq_float = [_Figures() for _ in out_exprs]
    qdq_within = [0] * len(out_exprs)
    if progress is not None:
        progress("compare", 0, len(chosen))
    for n, frame in enumerate(chosen):
        comparer.float_values.start(frame)
        try:
            floats = run(qmodel.module, frame, kernels=kernels, observers=[comparer.float_values])
            comparer.fixed_values = {}
            fixed = qmodel.run(frame, host_kernels=kernels, fixed_observers=[comparer.on_fixed])
        except EmulatorError as exc:
            raise CompareError(f"{where}, frame {n}: {exc}") from exc
        if len(floats) != len(out_exprs) or len(fixed) != len(out_exprs):
            raise TidlxInternalError(f"compare: {len(out_exprs)} outputs expected, float run gave {len(floats)}, "
                                     f"fixed run {len(fixed)}")
        qdq_outs = None if qdq_reference is None else qdq_reference.run(frame)
        for k, (ref, val) in enumerate(zip(floats, fixed)):
            out_figures[k].add(ref, val)
            shapes[k] = tuple(np.shape(ref))
            if qdq_outs is not None:
                theirs = qdq_outs[qdq_order[k]]
                if np.shape(theirs) != np.shape(val):
                    raise CompareError(f"{qdq_reference.path}: its output {qdq_reference.output_names[qdq_order[k]]!r} "
                                       f"has shape {tuple(np.shape(theirs))}, the compiled model's {names[k]!r} "
                                       f"{tuple(np.shape(val))}")
                qdq_fixed[k].add(theirs, val)
                qdq_float[k].add(theirs, ref)
                step = qdq_reference.steps[qdq_order[k]]
                if step is not None:
                    qdq_within[k] += within_step(theirs, val, step)
            if feeders[k] is not None:
                q, tensor = comparer.fixed_values[feeders[k]]
                if not tensor.is_float:
                    out_saturation[k].add_saturation(q, tensor)
        comparer.fixed_values = {}
        if progress is not None:
            progress("compare", n + 1, len(chosen))
    outputs = []
    for k, name in enumerate(names):
        feeder = feeders[k]
        fed_by = None
        if feeder is not None:
            fed_by = f"@{feeder[0]}:{qmodel.subgraphs[feeder[0]].tensors[feeder[1]].name}"
        qdq = {}
        if qdq_reference is not None:
            step = qdq_reference.steps[qdq_order[k]]
            count = qdq_fixed[k].count
            qdq = dict(qdq_sqnr_db=qdq_fixed[k].sqnr_db(), qdq_float_sqnr_db=qdq_float[k].sqnr_db(), qdq_step=step,
                       qdq_within_step_pct=None if step is None or not count else 100.0 * qdq_within[k] / count)
        outputs.append(OutputComparison(k, name, shapes[k], out_figures[k].sqnr_db(), out_figures[k].max_err,
                                        out_saturation[k].saturated_pct(), fed_by, **qdq))
    opts = qmodel.options
    calibrated = sorted({f"{r.method} on {r.frames} frame(s)" if r.frames else
                         f"{r.method} (the model's Q/DQ ranges, no calibration run)"
                         for r in qmodel.calibration.values()})
    if calibrated and not from_proto(qmodel.calibration):
        # TI's loop: a float pass, then fixed-point iterations re-collecting the ranges (and the biases)
        iterations = calibration_iterations(opts)
        frames = sorted({r.frames for r in qmodel.calibration.values()})
        methods = sorted({r.method for r in qmodel.calibration.values()})
        # style 4 keeps the float pass's ranges through the iterations (docs/numerics.md §12.10)
        ranges = "the float pass's minmax ranges kept" if opts.quantization_scale_type == 4 else \
            f"{'/'.join(methods)} ranges"
        calibrated = [f"a float pass on {'/'.join(map(str, frames))} frame(s), then {iterations} fixed-point "
                      f"iteration{'s' if iterations != 1 else ''} ({ranges}"
                      f"{', biases' if calibration_option_bits(opts) & BIAS_CALIB_BIT else ''})"]
    layers = tuple(comparer.layers())
    return ComparisonResult(tuple(outputs), layers, len(chosen), where, int(opts.tensor_bits),
                            int(opts.quantization_scale_type), tuple(qmodel.subgraphs), isolated,
                            ", ".join(calibrated) or None, findings(qmodel, layers, comparer.observed),
                            opts.target_device, opts.device_warning())


__all__ = ["compare", "CompareError", "ComparisonResult", "LayerComparison", "OutputComparison", "format_db",
           "DEFAULT_COMPARE_FRAMES", "RANDOM_FRAME_SEED"]
