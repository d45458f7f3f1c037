"""Calibration: the float range of every tensor of every TIDL subgraph, as TIDL's import collects it.

    partitioned, report = tidlx.partition(mod)
    results = calibrate(partitioned, {"accuracy_level": 1, "advanced_options:calibration_frames": 20}, "frames.npz")
    r = results["tidl_0"]                       # a CalibrationResult
    for tensor_id, rng in r.tensors.items():    # ids of report.networks[0].tensors
        print(r.network.tensors[tensor_id].name, rng.min, rng.max, rng.method, rng.frames)
    r.by_name()["conv1"]                        # TensorRange(min=0.0, max=4.137, method='histogram', ...)

How (TI's flow): the whole partitioned module runs in the float
emulator, host part included, so the values entering each subgraph are the ones the host
computes, as TI's calibration graph exposes every subgraph boundary. An observer records, per
subgraph of its ``TidlNetwork``, the value of each subgraph input and of each layer's output
tensor(s). Statistics take batch index 0 of each frame only (axis 0 of a tensor of rank >= 2;
a tensor of rank 0 or 1 whole: tidlx's choice). The kernels are the reference set by default
(plain numpy: the same ranges on any machine and thread count); ``kernels="fast"`` is quicker
on large models, its convolutions within 3e-5 of the output's largest value.

Methods (docs/numerics.md §9.1, and the range rules of §6.2 "Feature-map
scales"):

* ``accuracy_level`` 0: ``minmax``, the min and max over all frames.
* ``accuracy_level`` 1 (TI's option 7; at level 9 when ``activation_clipping=1``):
  ``histogram``, with ``percentileActRangeShrink`` 0.01: ``floor(total * 0.01 / 100)``
  elements of all frames' batch-0 values are dropped on each side (the min side only when the
  tensor is signed, i.e. its min is below 0). tidlx's choices where the document is open: one
  histogram per tensor over all frames together, of ``HISTOGRAM_BINS`` = 1024 bins whose centres
  are ``min + i * (max - min) / 1023`` over the pooled min and max, each value assigned to the
  nearest centre (half up); the range end is the centre of the first bin, counted from that
  side, where the cumulative count exceeds the elements dropped. It is computed exactly in
  one pass without holding the histogram: only the ``dropped + 1`` most extreme values per side
  are kept, and the bin of the first value not dropped is the bin where the count crosses.
* Then the layer rules, at every level, by ``numerics.output_range`` (docs/numerics.md §6.2,
  the rules' one definition): a Clip activation's bounds replace the range
  (``clip``), ReLU6 is [0, 6] (``relu6``); global average pool and inner product outputs have
  their max multiplied by 1.25 and their min kept (TI's ``TIDL_UpdateScaleFactors``; method gets
  ``, x 1.25``); every range is multiplied by ``quantRangeExpansionFactor`` = 1.0.

``TensorRange.min``/``max`` are the range with the rules applied; ``raw_min``/``raw_max`` the
method's range before them (for a quantizer that applies docs/numerics.md §6.2 itself: apply the
rules once); ``observed_min``/``observed_max`` the plain min/max of the frames.

A clip bound of +-FLT_MAX or +-inf (graph preparation writes ``max(x, c)`` as ``clip(c, FLT_MAX)``)
is no bound: that side keeps its calibrated value (``<method>, clip``).

For bias calibration (``quantize.calibrate_biases``, docs/numerics.md §9.3) each ``TensorRange`` also
holds the float per-channel means (``channel_mean``) and each ``CalibrationResult`` the frames
(``data``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ...emulator import EmulatorError, run
from ...ir.errors import TidlxError, TidlxInternalError, TidlxWarning
from ...ir.expr import Call, Constant, Function, GlobalVar, Var
from ...ir.module import IRModule
from ...ir.traversal import post_order
from .frames import CalibrationFrames, FrameSource, load_frames
from .layer_params import InnerProductParams, PoolParams
from .layers import TidlLayer, TidlNetwork, build_networks
from .numerics import output_range
from .options import TidlOptions

#: TI's ``percentileActRangeShrink``: percent of the elements dropped on each side.
PERCENTILE_ACT_RANGE_SHRINK = 0.01

#: Bins of the activation histogram (tidlx's choice; TI's weight histogram has 1024).
HISTOGRAM_BINS = 1024

#: TI's ``quantRangeExpansionFactor``.
QUANT_RANGE_EXPANSION_FACTOR = 1.0

#: Global average pool and inner product outputs: their max x this (numerics.output_range's widen).
WIDE_OUTPUT_FACTOR = 1.25

MINMAX, HISTOGRAM = "minmax", "histogram"


class CalibrationError(TidlxError):
    """Calibration cannot run: bad options, a module without its TIDL layer model, or a tensor
    whose values are not finite on some frame."""


@dataclass(frozen=True)
class TensorRange:
    """The float range TIDL quantizes a tensor for: ``min``/``max`` after the method and the layer
    rules, ``method`` how they were found (``minmax``, ``histogram``, ``clip``, ``relu6``, with
    ``, x 1.25`` where that rule applied), ``frames`` how many frames were seen, the plain min/max
    of those frames' batch-0 values, and the method's range before the layer rules (``raw_*``)."""

    min: float
    max: float
    method: str
    frames: int
    observed_min: float
    observed_max: float
    raw_min: float
    raw_max: float
    #: the float mean of each channel (axis 1) of the frames' batch-0 values, for bias calibration;
    #: None for a tensor of rank < 2
    channel_mean: Optional[Tuple[float, ...]] = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class CalibrationResult:
    """The ranges of one TIDL subgraph: ``tensors`` maps each tensor id of ``network`` (its inputs
    and every layer output) to its TensorRange."""

    subgraph: str
    tensors: Mapping[int, TensorRange]
    accuracy_level: int
    method: str
    frames: int
    network: TidlNetwork = field(compare=False, repr=False)
    #: the frames calibrated on (bias calibration runs them again in fixed point)
    data: Optional[CalibrationFrames] = field(default=None, compare=False, repr=False)
    #: read from a quantization-parameters file (quant_proto.read): layer index -> its weight and bias
    #: ranges and bias values from the file; None: calibrated
    given: Optional[Mapping[int, Any]] = field(default=None, compare=False, repr=False)

    def by_name(self) -> Dict[str, TensorRange]:
        """The ranges by tensor name (layer names; ``:k`` for the k-th output of a layer)."""
        return {self.network.tensors[t].name: r for t, r in self.tensors.items()}


def _shrunk_count(total: int) -> int:
    """Elements dropped on each side: floor(total * percentileActRangeShrink / 100), exactly."""
    return int(total * Fraction(str(PERCENTILE_ACT_RANGE_SHRINK)) // 100)


class _TensorStats:
    """Running statistics of one tensor's batch-0 values over the frames."""

    __slots__ = ("name", "count", "min", "max", "keep", "low", "high", "frames", "channel_sum", "channel_count")

    def __init__(self, name: str, elements: int, frames: int, histogram: bool):
        self.name = name
        self.count = 0
        self.frames = 0
        self.min = math.inf
        self.max = -math.inf
        # the dropped values and the first kept one, per side; 0 keeps nothing beyond min/max
        dropped = _shrunk_count(elements * frames) if histogram else 0
        self.keep = dropped + 1 if dropped else 0
        self.low = np.empty(0, np.float64)
        self.high = np.empty(0, np.float64)
        self.channel_sum: Optional[np.ndarray] = None
        self.channel_count = 0

    def add(self, values: np.ndarray, where: str) -> None:
        values = np.asarray(values)
        if values.ndim >= 2 and values.size:
            sums = np.moveaxis(values, 1, 0).reshape(values.shape[1], -1).astype(np.float64).sum(axis=1)
            self.channel_sum = sums if self.channel_sum is None else self.channel_sum + sums
            self.channel_count += values.size // values.shape[1]
        flat = values.reshape(-1)
        if flat.size == 0:
            return
        lo, hi = float(flat.min()), float(flat.max())
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise CalibrationError(f"{where}: tensor '{self.name}' has non-finite values (inf or nan); TIDL cannot "
                                   f"calibrate a range for it")
        self.min, self.max = min(self.min, lo), max(self.max, hi)
        self.count += flat.size
        self.frames += 1
        if self.keep:
            k = self.keep
            if flat.size > 2 * k:   # both tails of this frame in one partition, then merged with the kept ones
                part = np.partition(flat, (k - 1, flat.size - k))
                low, high = part[:k], part[flat.size - k:]
            else:
                low = high = flat
            low = np.concatenate([self.low, low.astype(np.float64)])
            self.low = low if low.size <= k else np.partition(low, k - 1)[:k]
            high = np.concatenate([self.high, high.astype(np.float64)])
            self.high = high if high.size <= k else np.partition(high, high.size - k)[high.size - k:]

    def minmax(self) -> Tuple[float, float]:
        return self.min, self.max

    def histogram(self) -> Tuple[float, float]:
        lo, hi = self.min, self.max
        dropped = _shrunk_count(self.count)
        if dropped == 0 or hi == lo:
            return lo, hi
        width = (hi - lo) / (HISTOGRAM_BINS - 1)

        def centre(value: float) -> float:
            return lo + math.floor((value - lo) / width + 0.5) * width

        first_kept_high = float(np.sort(self.high)[-(dropped + 1)])
        new_hi = min(hi, centre(first_kept_high))
        new_lo = lo
        if lo < 0:
            first_kept_low = float(np.sort(self.low)[dropped])
            new_lo = max(lo, centre(first_kept_low))
        return new_lo, new_hi


#: A clip bound this large is no bound: graph preparation writes max(x, c) as clip(x, c, FLT_MAX).
_NO_BOUND = float(np.finfo(np.float32).max)


def _finite(value: Optional[float]) -> bool:
    return value is not None and math.isfinite(value) and abs(value) < _NO_BOUND


def _layer_range(layer: Optional[TidlLayer], lo: float, hi: float, method: str) -> Tuple[float, float, str]:
    """TIDL's range rules for the output of ``layer`` (None: a subgraph input), by
    ``numerics.output_range`` (docs/numerics.md §6.2), the one definition of the rules."""
    if layer is not None:
        act = layer.activation
        if act.type == "ReLU6":
            return (*output_range(lo, hi, activation="relu6"), "relu6")
        if act.type == "Clip":
            bounds = dict(act.params)
            c_lo, c_hi = bounds.get("min"), bounds.get("max")
            if _finite(c_lo) and _finite(c_hi):
                return (*output_range(lo, hi, activation="clip", clip_min=c_lo, clip_max=c_hi), "clip")
            # max(x, c) / min(x, c): the one bound, the other side calibrated
            lo, hi = output_range(lo, hi, expansion=QUANT_RANGE_EXPANSION_FACTOR)
            return (c_lo if _finite(c_lo) else lo), (c_hi if _finite(c_hi) else hi), f"{method}, clip"
        if isinstance(layer.params, InnerProductParams) or \
                (isinstance(layer.params, PoolParams) and layer.params.global_pool):
            return (*output_range(lo, hi, widen=True, expansion=QUANT_RANGE_EXPANSION_FACTOR),
                    f"{method}, x {WIDE_OUTPUT_FACTOR}")
    return (*output_range(lo, hi, expansion=QUANT_RANGE_EXPANSION_FACTOR), method)


def _batch0(value: np.ndarray) -> np.ndarray:
    return value[:1] if value.ndim >= 2 else value


def _flatten(value) -> List[np.ndarray]:
    if isinstance(value, (tuple, list)):
        out: List[np.ndarray] = []
        for v in value:
            out.extend(_flatten(v))
        return out
    return [value]


def _method(options: TidlOptions) -> str:
    if options.accuracy_level == 0:
        return MINMAX
    if options.accuracy_level == 9:
        return HISTOGRAM if options.activation_clipping else MINMAX
    return HISTOGRAM


class TidlTensorSources:
    """Where each tensor of the TIDL subgraphs of ``mod`` gets its float value in a run: a layer's outputs
    from its Composite call, a subgraph input from the host value, model input or constant the host calls
    it with. Calibration and ``compare`` read the float run through it. ``error`` (with ``who`` in its
    message) is raised for a subgraph input the run cannot show; ``calls`` counts each subgraph's calls."""

    def __init__(self, mod: IRModule, networks, error, who: str, entry: str = "main"):
        by_name = {net.name: net for net in networks}
        # id(node) -> [(subgraph, tensor ids)]: a composite call inside a subgraph, or an argument of a
        # subgraph call in a host function (the boundary values the host computes)
        self.targets: Dict[int, List[Tuple[str, Tuple[int, ...]]]] = {}
        # input name of @entry -> [(subgraph, tensor id)]: subgraph inputs that are model inputs
        self.from_inputs: Dict[str, List[Tuple[str, int]]] = {}
        self.constant_inputs: List[Tuple[str, int, np.ndarray]] = []
        self.calls: Dict[str, int] = {}
        for net in by_name.values():
            for node in post_order(mod[net.name].body, enter_functions=False):
                if isinstance(node, Call) and isinstance(node.op, Function):
                    layer = net.layer_of(node.op)
                    if layer is None:
                        raise TidlxInternalError(f"@{net.name}: a Composite call without its layer")
                    self.targets.setdefault(id(node), []).append((net.name, layer.outputs))
        for name, fn in mod.items():
            if name in by_name:
                continue
            params = {id(p): p.name_hint for p in fn.params}
            for node in post_order(fn.body, enter_functions=False):
                if not (isinstance(node, Call) and isinstance(node.op, GlobalVar) and node.op.name_hint in by_name):
                    continue
                net = by_name[node.op.name_hint]
                self.calls[net.name] = self.calls.get(net.name, 0) + 1
                for arg, tid in zip(node.args, net.inputs):
                    if isinstance(arg, Constant):
                        self.constant_inputs.append((net.name, tid, arg.data))
                    elif isinstance(arg, Var):
                        if name != entry or id(arg) not in params:
                            raise error(f"@{name}: the input %{arg.name_hint} of @{net.name} is neither an input "
                                        f"of @{entry} nor a computed value; {who} cannot see it")
                        self.from_inputs.setdefault(params[id(arg)], []).append((net.name, tid))
                    else:
                        self.targets.setdefault(id(arg), []).append((net.name, (tid,)))

    def given(self, frame: Mapping[str, np.ndarray]):
        """(subgraph, tensor id, value) of the tensors known before the run: constants and model inputs."""
        for subgraph, tid, data in self.constant_inputs:
            yield subgraph, tid, data
        for name, places in self.from_inputs.items():
            for subgraph, tid in places:
                yield subgraph, tid, frame[name]

    def observed(self, observation):
        """(subgraph, tensor id, value) of the tensors an interpreter observation holds (none: not one)."""
        targets = self.targets.get(id(observation.node))
        if targets is None:
            return
        values = _flatten(observation.value)
        for subgraph, tids in targets:
            if len(values) != len(tids):
                raise TidlxInternalError(f"@{subgraph}: {len(values)} value(s) observed for tensors {tids}")
            for tid, value in zip(tids, values):
                yield subgraph, tid, value


class _Recorder:
    """The observer: routes each observed value to the tensors of the subgraphs it belongs to."""

    def __init__(self, mod: IRModule, networks: Tuple[TidlNetwork, ...], n_frames: int, method: str,
                 entry: str = "main"):
        self.networks = networks
        self.stats: Dict[str, Dict[int, _TensorStats]] = {}
        self.layer_of_tensor: Dict[Tuple[str, int], TidlLayer] = {}
        for net in networks:
            self.stats[net.name] = {t.id: _TensorStats(t.name, _batch0_size(t.shape), n_frames, method == HISTOGRAM)
                                    for t in net.tensors}
            for layer in net.layers:
                for tid in layer.outputs:
                    if not layer.is_data:
                        self.layer_of_tensor[(net.name, tid)] = layer
        self.sources = TidlTensorSources(mod, networks, CalibrationError, "calibration", entry)
        for net in networks:
            if self.sources.calls.get(net.name, 0) != 1:
                raise CalibrationError(f"@{net.name} is called {self.sources.calls.get(net.name, 0)} times by the "
                                       f"host part; calibration needs each TIDL subgraph called exactly once")
        self.frame = 0
        self.seen: set = set()

    def record(self, subgraph: str, tid: int, value) -> None:
        if not isinstance(value, np.ndarray):
            value = np.asarray(value)
        where = f"frame {self.frame}, @{subgraph}"
        self.stats[subgraph][tid].add(_batch0(value), where)
        self.seen.add((subgraph, tid))

    def __call__(self, observation) -> None:
        for subgraph, tid, value in self.sources.observed(observation):
            self.record(subgraph, tid, value)

    def run_frame(self, mod: IRModule, frame: Mapping[str, np.ndarray], kernels: str) -> None:
        self.seen = set()
        for subgraph, tid, value in self.sources.given(frame):
            self.record(subgraph, tid, value)
        run(mod, frame, kernels=kernels, observers=[self])
        for net in self.networks:
            missing = [t.name for t in net.tensors if (net.name, t.id) not in self.seen]
            if missing:
                raise TidlxInternalError(f"frame {self.frame}: no value observed for tensor(s) "
                                         f"{', '.join(missing)} of @{net.name}")
        self.frame += 1


def _batch0_size(shape: Tuple[int, ...]) -> int:
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    return size // shape[0] if len(shape) >= 2 and shape[0] else size


def _options(options) -> TidlOptions:
    """TI's options from what users pass (as ``tidlx.partition`` takes them); ``disabled_passes`` is the
    partition's business and is accepted and dropped here."""
    from .flow import resolve_options

    return resolve_options(options)[0]


def calibrate(partitioned: IRModule, options: Union[None, TidlOptions, Mapping[str, Any]] = None,
              frames: FrameSource = None, *, kernels: str = "reference", mean=None, scale=None,
              seed: int = 0, progress: Optional[Callable[[int, int], None]] = None) -> Dict[str, CalibrationResult]:
    """The calibrated range of every tensor of every TIDL subgraph of ``partitioned``.

    ``partitioned``: a module from ``tidlx.partition``. ``options``: TI's options (``accuracy_level``
    picks the method, ``calibration_frames`` how many frames are used). ``frames``: a path to an
    ``.npz`` or a folder of images (``mean``/``scale`` as TI's configs write them), a mapping of
    arrays by input name, ``CalibrationFrames``, or None for seeded random frames (with a
    TidlxWarning). ``kernels``: the emulator's kernel set (``reference`` by default).
    ``progress(done, total)`` is called after each frame (a progress bar).

    >>> import numpy as np, tidlx
    >>> from tidlx.backends.tidl.calibration import calibrate
    >>> partitioned, report = tidlx.partition(mod)                                  # doctest: +SKIP
    >>> frames = {"img": np.random.default_rng(0).random((4, 3, 64, 192), np.float32)}
    >>> results = calibrate(partitioned, {"accuracy_level": 0}, frames)            # doctest: +SKIP
    >>> results["tidl_0"].by_name()["tidl_0_i0"]                                    # doctest: +SKIP
    TensorRange(min=1.1e-06, max=0.99999, method='minmax', frames=4, ...)

    Returns ``{subgraph name: CalibrationResult}`` in module order; deterministic for given frames.
    """
    if not isinstance(partitioned, IRModule):
        raise CalibrationError(f"calibrate takes the IRModule tidlx.partition returns, got "
                               f"{type(partitioned).__name__}")
    opts = _options(options)
    if kernels not in ("reference", "fast"):
        raise CalibrationError(f"kernels must be 'reference' or 'fast', got {kernels!r}")
    networks = build_networks(partitioned)
    if not networks:
        warnings.warn("calibrate: the module has no Compiler=\"tidl\" subgraph (partition it with "
                      "tidlx.partition first): nothing to calibrate", TidlxWarning, stacklevel=2)
        return {}
    if opts.quant_params_proto_path:
        from . import quant_proto

        if quant_proto.exists(opts.quant_params_proto_path):   # the file's ranges, no calibration run
            return quant_proto.read(opts.quant_params_proto_path, partitioned, networks, opts.accuracy_level)
    data = load_frames(frames, partitioned, opts.calibration_frames, mean=mean, scale=scale, seed=seed)
    if len(data) == 0:
        raise CalibrationError(f"{data.source}: no calibration frames")
    method = _method(opts)
    recorder = _Recorder(partitioned, networks, len(data), method)
    for frame in data:
        try:
            recorder.run_frame(partitioned, frame, kernels)
        except EmulatorError as exc:
            raise CalibrationError(f"{data.source}, frame {recorder.frame}: the float run failed: {exc}") from exc
        if progress is not None:
            progress(recorder.frame, len(data))
    results: Dict[str, CalibrationResult] = {}
    for net in networks:
        tensors: Dict[int, TensorRange] = {}
        for tid, stats in recorder.stats[net.name].items():
            raw_lo, raw_hi = stats.histogram() if method == HISTOGRAM else stats.minmax()
            lo, hi, how = _layer_range(recorder.layer_of_tensor.get((net.name, tid)), raw_lo, raw_hi, method)
            means = None if stats.channel_sum is None else \
                tuple(float(v) for v in stats.channel_sum / max(stats.channel_count, 1))
            tensors[tid] = TensorRange(float(lo), float(hi), how, stats.frames, stats.min, stats.max,
                                       float(raw_lo), float(raw_hi), means)
        results[net.name] = CalibrationResult(net.name, tensors, opts.accuracy_level, method, len(data), net, data)
    return results


__all__ = ["calibrate", "CalibrationResult", "TensorRange", "CalibrationError", "PERCENTILE_ACT_RANGE_SHRINK",
           "HISTOGRAM_BINS", "QUANT_RANGE_EXPANSION_FACTOR", "WIDE_OUTPUT_FACTOR", "MINMAX", "HISTOGRAM"]
