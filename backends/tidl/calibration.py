"""Calibration's float pass: the float range of every tensor of every TIDL subgraph, as TI's import collects
it before its fixed-point iterations (calibration_loop.py; docs/numerics.md §9).

    partitioned, report = tidlx.partition(mod)
    results = calibrate(partitioned, {"accuracy_level": 1, "advanced_options:calibration_frames": 20}, "frames.npz")
    r = results["tidl_0"]                       # a CalibrationResult
    for tensor_id, rng in r.tensors.items():    # ids of report.networks[0].tensors
        print(r.network.tensors[tensor_id].name, rng.min, rng.max, rng.method, rng.frames)
    r.by_name()["conv1"]                        # TensorRange(min=0.0, max=4.137, method='minmax', ...)

How (TI's flow): the whole partitioned module runs in the float
emulator, host part included, so the values entering each subgraph are the ones the host
computes, as TI's calibration graph exposes every subgraph boundary. An observer records, per
subgraph of its ``TidlNetwork``, the value of each subgraph input and of each layer's output
tensor(s). Statistics take each frame's whole tensor, every batch item, as TI's statistics do. The kernels are the reference set by default
(plain numpy: the same ranges on any machine and thread count); ``kernels="fast"`` is quicker
on large models, its convolutions within 3e-5 of the output's largest value.

The range (docs/numerics.md §9.2; TI: ``TIDL_UpdateTensorRangeStats`` on a float network), at every
accuracy_level: each frame's plain min and max (no histogram: TI's float pass has none; the histogram of
ActRange belongs to the fixed-point iterations), combined across the frames by the running mean
(``running_range``, TI's ``quantRangeUpdateFactor`` -1), or by the running min/max with TIDL 11.x's
NoOutlier option (128). A subgraph input is TI's input data convert: the min and max over the frames.
Then the layer rules, by ``numerics.output_range`` (docs/numerics.md §6.2, the rules' one definition): a
Clip activation's bounds replace the range (``clip``), ReLU6 is [0, 6] (``relu6``); global average pool
and inner product outputs have their max multiplied by 1.25 and their min kept (TI's
``TIDL_UpdateScaleFactors``; method gets ``, x 1.25``); every range is multiplied by
``quantRangeExpansionFactor`` = 1.0.

``TensorRange.min``/``max`` are the range with the rules applied; ``raw_min``/``raw_max`` the
method's range before them (for a quantizer that applies docs/numerics.md §6.2 itself: apply the
rules once); ``observed_min``/``observed_max`` the plain min/max of the frames.

A clip bound of +-FLT_MAX or +-inf (graph preparation writes ``max(x, c)`` as ``clip(c, FLT_MAX)``)
is no bound: that side keeps its calibrated value (``<method>, clip``).

For bias calibration (calibration_loop.py, docs/numerics.md §9.5) each ``TensorRange`` also holds the
float per-channel means (``channel_mean``, the running mean of each frame's) and each
``CalibrationResult`` the frames (``data``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
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
    of those frames' values, and the method's range before the layer rules (``raw_*``)."""

    min: float
    max: float
    method: str
    frames: int
    observed_min: float
    observed_max: float
    raw_min: float
    raw_max: float
    #: the float mean of each channel (axis 1) of the frames' values, for bias calibration (an inner
    #: product whose constant is its second operand: of each channel and column, ``frame_column_means``);
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


#: TI's cap on the frame counter of the running mean (``procCallCounter`` stops at 256).
RUNNING_MEAN_FRAME_CAP = 256


def running_range(previous: Optional[Tuple[float, float]], current: Tuple[float, float], frame: int,
                  no_outlier: bool = False) -> Tuple[float, float]:
    """A tensor's range after one more frame (docs/numerics.md §9.2; TI: ``TIDL_UpdateTensorRangeStats``,
    ``TIDL_UpdateTensorRange`` in 08.06, with ``quantRangeUpdateFactor`` -1): the first frame of a run
    (``frame`` 0) sets the range; every later frame k moves it to ``old * (1 - b) + cur * b`` with
    ``b = 1 / (k + 1)`` (k capped at 256), all in float32 -- the running mean of the per-frame min and max.
    With NoOutlier (calibration option 128, TIDL 11.x) the range is the running min / max instead."""
    cur_lo, cur_hi = np.float32(current[0]), np.float32(current[1])
    if frame == 0 or previous is None:
        return float(cur_lo), float(cur_hi)
    old_lo, old_hi = np.float32(previous[0]), np.float32(previous[1])
    if no_outlier:
        return float(min(old_lo, cur_lo)), float(max(old_hi, cur_hi))
    beta = np.float32(1.0) / (np.float32(min(frame, RUNNING_MEAN_FRAME_CAP)) + np.float32(1.0))
    alpha = np.float32(1.0) - beta
    return float(old_lo * alpha + cur_lo * beta), float(old_hi * alpha + cur_hi * beta)


def running_channel_mean(previous: Optional[np.ndarray], current: np.ndarray, frame: int) -> np.ndarray:
    """Per-channel means after one more frame (TI: ``TIDL_TensorPerChannelMeanStats``): frame k weighs the
    frame's channel means by ``u = 1 / (k + 1)`` (computed in double, stored as float32):
    ``old * (1 - u) + cur * u`` in float32; frame 0 starts from zeros. ``current`` holds one row of channel
    means per batch item; TI applies the update once per item, in batch order, with the frame's ``u`` (so
    frame 0 ends at the last item's means)."""
    cur = np.asarray(current, np.float32)
    rows = cur.reshape(-1, cur.shape[-1]) if cur.ndim > 1 else cur.reshape(1, -1)
    old = np.zeros_like(rows[0]) if previous is None or frame == 0 else np.asarray(previous, np.float32)
    u = np.float32(1.0 / (float(frame) + 1.0))
    for row in rows:
        old = old * (np.float32(1.0) - u) + row * u
    return old


def running_column_mean(previous: Optional[np.ndarray], current: np.ndarray, frame: int) -> np.ndarray:
    """An inner product's column means after one more frame (TI: ``TIDL_TensorPerChannelMeanStats``, its
    branch for an inner product whose constant is the second operand): as ``running_channel_mean``, but
    TI writes the kept part as ``old * (1.0 - u)`` with a double 1.0, so that product and the sum are in
    double (``cur * u`` stays a float32 product), rounded to float32 once per row."""
    cur = np.asarray(current, np.float32)
    rows = cur.reshape(-1, cur.shape[-1]) if cur.ndim > 1 else cur.reshape(1, -1)
    old = np.zeros_like(rows[0]) if previous is None or frame == 0 else np.asarray(previous, np.float32)
    u = np.float32(1.0 / (float(frame) + 1.0))
    keep = 1.0 - float(u)
    for row in rows:
        old = (old.astype(np.float64) * keep + (row * u).astype(np.float64)).astype(np.float32)
    return old


#: Integers whose magnitudes add up to at most 2^24 have a float32 running sum without rounding.
_FLOAT32_EXACT_SUM = 1 << 24


def float32_running_sums(values: np.ndarray) -> np.ndarray:
    """Sums along the last axis as TI accumulates a channel (``TIDL_TensorPerChannelMeanStats``: each
    value cast to float32 and added in element order to a float32 sum). Integers whose magnitudes add up
    to at most 2^24 sum without rounding (their int64 sum is the same float32); anything else takes a
    float32 running sum (``cumsum``, never numpy's pairwise sum)."""
    values = np.asarray(values)
    if values.shape[-1] == 0:
        return np.zeros(values.shape[:-1], np.float32)
    if values.dtype.kind in "iu":
        magnitude = max(-int(values.min()), int(values.max()))
        if magnitude * values.shape[-1] <= _FLOAT32_EXACT_SUM:
            return values.sum(axis=-1, dtype=np.int64).astype(np.float32)
    return np.cumsum(values.astype(np.float32), axis=-1, dtype=np.float32)[..., -1]


def frame_channel_means(values: np.ndarray, scale: float = 1.0) -> Optional[np.ndarray]:
    """One frame's per-channel (axis 1) means in real units, one row per batch item (axis 0), as TI's
    ``TIDL_TensorPerChannelMeanStats`` takes them: the sum in float32 (``float32_running_sums``), divided
    by the element count, then by ``scale`` (the tensorScale, 1.0 for float), as float32 operations. None
    for a tensor of rank < 2."""
    values = np.asarray(values)
    if values.ndim < 2 or values.size == 0:
        return None
    per = values.reshape(values.shape[0], values.shape[1], -1)
    sums = float32_running_sums(per)
    return (sums / np.float32(per.shape[2])) / np.float32(scale)


def frame_column_means(values: np.ndarray, scale: float = 1.0) -> Optional[np.ndarray]:
    """One frame's means of an inner product's output whose constant is the second operand (TI:
    ``TIDL_TensorPerChannelMeanStats``, the branch for ``innerProductParams.constIdx == 1``: the bias
    runs along the columns). TIDL's dimensions are the tensor's, right-aligned: width the last axis,
    height the one before (1 for rank 1), channels the third from the end (1 below rank 3), and every
    axis before that a row of its own. Per row, channel and column: the float32 sum over the height,
    divided by the height, then by ``scale``, as float32 operations. One row per leading index, each
    ``channels x width`` long, channel-major (TI's ``c * width + w``). None for an empty tensor."""
    values = np.asarray(values)
    if values.ndim < 1 or values.size == 0:
        return None
    shape = values.shape
    width = shape[-1]
    height = shape[-2] if values.ndim >= 2 else 1
    channels = shape[-3] if values.ndim >= 3 else 1
    per = np.swapaxes(values.reshape(-1, channels, height, width), 2, 3)   # rows, channels, width, height
    means = (float32_running_sums(per) / np.float32(height)) / np.float32(scale)
    return means.reshape(means.shape[0], channels * width)


def constant_second_operand(layer: Optional[TidlLayer]) -> bool:
    """Whether ``layer`` is an inner product whose constant is its second operand (TI's
    ``innerProductParams.constIdx == 1``: a MatMul or Gemm with a constant B, TIDL 11.x's ONNX import):
    its per-channel means run along the output's columns (``frame_column_means``) and bias calibration
    updates its bias (``quantize.bias_calibration_applies``)."""
    if layer is None or layer.type != "InnerProduct" or layer.function is None:
        return False
    for node in post_order(layer.function.body, enter_functions=False):
        if isinstance(node, Call) and node.op_name in ("nn.dense", "nn.matmul"):
            return len(node.args) == 2 and isinstance(node.args[1], Constant) \
                and not isinstance(node.args[0], Constant)
    return False


class _TensorStats:
    """One tensor's statistics over the frames of the float pass: the running mean of the per-frame
    min/max (or their running min/max under NoOutlier), the plain min/max, and the running per-channel
    means (bias calibration's float means)."""

    __slots__ = ("name", "frames", "min", "max", "range", "no_outlier", "channel_mean", "input_convert",
                 "columns")

    def __init__(self, name: str, no_outlier: bool, input_convert: bool, columns: bool = False):
        self.name = name
        self.frames = 0
        self.min = math.inf
        self.max = -math.inf
        self.range: Optional[Tuple[float, float]] = None
        self.no_outlier = no_outlier
        #: a float subgraph input (TI's input DataConvert layer): running min/max whatever the option
        self.input_convert = input_convert
        self.channel_mean: Optional[np.ndarray] = None
        #: the output of an inner product whose constant is its second operand: means by column
        self.columns = columns

    def add(self, values: np.ndarray, where: str) -> None:
        values = np.asarray(values)
        flat = values.reshape(-1)
        if flat.size == 0:
            return
        lo, hi = float(flat.min()), float(flat.max())
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise CalibrationError(f"{where}: tensor '{self.name}' has non-finite values (inf or nan); TIDL cannot "
                                   f"calibrate a range for it")
        if values.dtype.kind == "f":
            frame_means, running = (frame_column_means, running_column_mean) if self.columns else \
                (frame_channel_means, running_channel_mean)
            means = frame_means(values)
            if means is not None:
                self.channel_mean = running(self.channel_mean, means, self.frames)
        self.min, self.max = min(self.min, lo), max(self.max, hi)
        self.range = running_range(self.range, (lo, hi), self.frames, self.no_outlier or self.input_convert)
        self.frames += 1


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


def _flatten(value) -> List[np.ndarray]:
    if isinstance(value, (tuple, list)):
        out: List[np.ndarray] = []
        for v in value:
            out.extend(_flatten(v))
        return out
    return [value]


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

    def __init__(self, mod: IRModule, networks: Tuple[TidlNetwork, ...], no_outlier: bool, entry: str = "main"):
        self.networks = networks
        self.stats: Dict[str, Dict[int, _TensorStats]] = {}
        self.layer_of_tensor: Dict[Tuple[str, int], TidlLayer] = layer_of_tensor(networks)
        for net in networks:
            self.stats[net.name] = {
                t.id: _TensorStats(t.name, no_outlier, t.id in net.inputs,
                                   constant_second_operand(self.layer_of_tensor.get((net.name, t.id))))
                for t in net.tensors}
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
        self.stats[subgraph][tid].add(value, where)
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


def layer_of_tensor(networks) -> Dict[Tuple[str, int], TidlLayer]:
    """(subgraph, tensor id) -> the layer whose output it is (the range rules' layer; inputs absent)."""
    found: Dict[Tuple[str, int], TidlLayer] = {}
    for net in networks:
        for layer in net.layers:
            if not layer.is_data:
                for tid in layer.outputs:
                    found[(net.name, tid)] = layer
    return found


def tensor_range(layer: Optional[TidlLayer], raw_lo: float, raw_hi: float, method: str, frames: int,
                 observed: Tuple[float, float], channel_mean) -> TensorRange:
    """The TensorRange of a tensor from its collected range: the layer rules of docs/numerics.md §6.2 applied."""
    lo, hi, how = _layer_range(layer, raw_lo, raw_hi, method)
    means = None if channel_mean is None else tuple(float(v) for v in channel_mean)
    return TensorRange(float(lo), float(hi), how, frames, float(observed[0]), float(observed[1]), float(raw_lo),
                       float(raw_hi), means)


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
    from .quantize_asym import device_style

    asked_scale_type = opts.quantization_scale_type
    opts = device_style(networks, opts)   # the device's style 4 where tidlx has its rules
    check_qdq_zero_points(partitioned, opts, asked_scale_type)
    if not networks:
        warnings.warn("calibrate: the module has no Compiler=\"tidl\" subgraph (partition it with "
                      "tidlx.partition first): nothing to calibrate", TidlxWarning, stacklevel=2)
        return {}
    if opts.quant_params_proto_path:
        from . import quant_proto

        if quant_proto.exists(opts.quant_params_proto_path):   # the file's ranges, no calibration run
            return quant_proto.read(opts.quant_params_proto_path, partitioned, networks, opts.accuracy_level,
                                    opts.quantization_scale_type)
    given_ranges = _prequantized_ranges(partitioned, opts)
    if given_ranges is not None:
        covered = _qdq_only(partitioned, networks, given_ranges, opts.accuracy_level)
        if covered is not None:   # every tensor has its pair's range: no calibration run
            return covered
    data = load_frames(frames, partitioned, opts.calibration_frames, mean=mean, scale=scale, seed=seed)
    if len(data) == 0:
        raise CalibrationError(f"{data.source}: no calibration frames")
    from .quantize import NO_OUTLIER_BIT, calibration_option_bits

    recorder = _Recorder(partitioned, networks, bool(calibration_option_bits(opts) & NO_OUTLIER_BIT))
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
            raw_lo, raw_hi = stats.range
            tensors[tid] = tensor_range(recorder.layer_of_tensor.get((net.name, tid)), raw_lo, raw_hi, MINMAX,
                                        stats.frames, (stats.min, stats.max), stats.channel_mean)
        results[net.name] = CalibrationResult(net.name, tensors, opts.accuracy_level, MINMAX, len(data), net, data)
    if given_ranges is not None:
        return _with_qdq_ranges(partitioned, networks, results, given_ranges)
    return results


#: The method of a range a prequantized model's Q/DQ pair gives.
QDQ = "qdq"
#: The module attribute holding a prequantized model's ranges (ONNX tensor name -> (min, max)),
#: set by ``tidlx.load(path, prequantized=True)``.
QDQ_RANGES_ATTR = "qdq_ranges"


#: The module attribute holding a prequantized model's asymmetric activation pairs (ONNX tensor name ->
#: (the QuantizeLinear node as an error names it, its non-zero zero point)), set by ``tidlx.load``.
QDQ_ZERO_POINTS_ATTR = "qdq_zero_points"


def check_qdq_zero_points(partitioned: IRModule, opts, asked_scale_type: Optional[int] = None) -> None:
    """A prequantized model's activation pair with a non-zero zero point (an asymmetric feature map)
    needs ``quantization_scale_type`` 4, whose zero points hold it (docs/numerics.md §12.2): its range
    ``[(qmin - zp) x s, (qmax - zp) x s]`` is then the tensor's. In the symmetric styles it is an error
    naming the node (docs/prequantized.md). ``asked_scale_type``: the style before ``device_style``
    replaced a device's style 4 by 0 (the error then says why)."""
    zero_points = partitioned.attrs.get(QDQ_ZERO_POINTS_ATTR) or {}
    if not opts.prequantized_model or not zero_points or opts.quantization_scale_type == 4:
        return
    from .devices import DEVICES, device

    tensor, (where, zp) = next(iter(zero_points.items()))
    more = f" (and {len(zero_points) - 1} more such pair(s))" if len(zero_points) > 1 else ""
    dev = device(opts.target_device)
    if asked_scale_type == 4:
        why = (f"target_device={dev.name if dev is not None else opts.target_device} quantizes with "
               f"quantization_scale_type 4 there, but tidlx has no style-4 rule for some layer of this model "
               f"(see the warning) and quantizes it with 0, whose feature maps are symmetric")
    elif dev is not None and dev.ti_scale_type.value != 4:
        why = (f"target_device={dev.name} has no asymmetric feature maps (quantization_scale_type "
               f"{opts.quantization_scale_type}); TIDL takes them with quantization_scale_type 4, on the "
               f"devices that have it ({', '.join(d.name for d in DEVICES.values() if d.ti_scale_type.value == 4)})")
    else:
        why = (f"quantization_scale_type {opts.quantization_scale_type} has symmetric feature maps; TIDL takes "
               f"asymmetric ones with quantization_scale_type 4 (-o advanced_options:quantization_scale_type=4, "
               f"or a target_device that has it)")
    raise CalibrationError(f"{where}: zero point {zp} is not 0 (an asymmetric feature map, tensor '{tensor}')"
                           f"{more}: {why}")


def _prequantized_ranges(partitioned: IRModule, opts) -> Optional[Mapping[str, Tuple[float, float]]]:
    """The Q/DQ ranges of a module loaded as prequantized (None: ``prequantized_model`` is 0); the
    option on a module loaded without them is an error."""
    ranges = partitioned.attrs.get(QDQ_RANGES_ATTR)
    if not opts.prequantized_model:
        return None
    if ranges is None:
        raise CalibrationError("advanced_options:prequantized_model=1: the module was not loaded as a "
                                     "prequantized QDQ model (tidlx.load(path, prequantized=True); the CLI does "
                                     "it when the option is given)")
    return ranges


def _qdq_only(partitioned: IRModule, networks, ranges: Mapping[str, Tuple[float, float]],
              accuracy_level: int) -> Optional[Dict[str, CalibrationResult]]:
    """The calibration results of a prequantized model whose Q/DQ pairs cover every tensor of every
    subgraph (None when one is not covered: those are calibrated)."""
    from .quant_proto import ti_layer_names

    names = ti_layer_names(partitioned, networks)
    out: Dict[str, CalibrationResult] = {}
    for net in networks:
        tensors: Dict[int, TensorRange] = {}
        for layer in net.layers:
            found = ranges.get(names.get((net.name, layer.index), ""))
            for k, tid in enumerate(layer.outputs):
                if k > 0 or found is None:
                    return None
                lo, hi = found
                tensors[tid] = TensorRange(lo, hi, QDQ, 0, lo, hi, lo, hi)
        if any(t not in tensors for t in range(len(net.tensors))):
            return None
        out[net.name] = CalibrationResult(net.name, tensors, accuracy_level, QDQ, 0, net, None, given={})
    return out


def _with_qdq_ranges(partitioned: IRModule, networks, results: Dict[str, CalibrationResult],
                     ranges: Mapping[str, Tuple[float, float]]) -> Dict[str, CalibrationResult]:
    """``results`` with each layer output a Q/DQ pair covers at the pair's range (method ``qdq``): the
    ranges a prequantized model gives in place of calibration, used as given (no calibration
    iterations, as with a quantization-parameters file). A layer's tensor is the ONNX output TI names
    it after (``quant_proto.ti_layer_names``)."""
    from .quant_proto import ti_layer_names

    names = ti_layer_names(partitioned, networks)
    out: Dict[str, CalibrationResult] = {}
    for net in networks:
        result = results[net.name]
        tensors = dict(result.tensors)
        for layer in net.layers:
            if not layer.outputs or (net.name, layer.index) not in names:
                continue
            found = ranges.get(names[(net.name, layer.index)])
            if found is None:
                continue
            lo, hi = found
            old = tensors.get(layer.outputs[0])
            seen = (old.observed_min, old.observed_max) if old is not None else (lo, hi)
            tensors[layer.outputs[0]] = TensorRange(lo, hi, QDQ, result.frames, seen[0], seen[1], lo, hi,
                                                    old.channel_mean if old is not None else None)
        out[net.name] = dataclasses.replace(result, tensors=tensors, method=QDQ, given={})
    return out


__all__ = ["calibrate", "CalibrationResult", "TensorRange", "CalibrationError", "PERCENTILE_ACT_RANGE_SHRINK",
           "running_range", "running_channel_mean", "running_column_mean", "frame_column_means",
           "float32_running_sums", "constant_second_operand", "QUANT_RANGE_EXPANSION_FACTOR", "WIDE_OUTPUT_FACTOR",
           "MINMAX", "HISTOGRAM"]
