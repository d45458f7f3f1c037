"""TI's calibration loop: the fixed-point iterations after the float pass (docs/numerics.md §9).

    results = calibrate(partitioned, options, frames)        # the float pass (calibration.py)
    qmodel = quantize_model(partitioned, options, results)   # runs this loop, then the final quantization

TI's import (``TIDL_runIterativeCalibration``, then ``TIDL_importQuantLayerParams``; TIDL 08.06 and
11.x alike) does, after the float pass:

* ``calibration_iterations`` times (in the TVM flow 1 when the calibration options are 0 or BiasRange 64
  alone; the ONNX Runtime flow runs the option's count at every level, ``calibration_iterations``):
  quantize the whole network -- weights, scales, roundBits, biases -- from the current ranges and float
  biases; run every calibration frame through it in fixed point; collect each layer output's range
  again from the fixed-point values (``range_of_frame``: the per-frame histogram when the options have
  ActRange, else the frame's min/max), combined across the frames of that iteration by the running
  mean (``calibration.running_range``: the iteration's first frame replaces the previous iteration's
  range); with BiasCalib, move each bias-calibrated layer's float bias by
  ``(meanFloat - meanFixed) x factor`` (``bias_calibration_step``).
* then quantize once more from the last ranges and biases: that is the model returned.

Everything here runs the fast fixed-point kernels (the same bits as the reference ones). What depends on
a layer's float weights alone (its folded parameters, the weight range, the integer weights at a given
weight scale, the weights as float32) is computed once and kept across the quantizations; a weight
scale that moves (the bias clip of §4.4 follows the input scale and the calibrated bias) re-quantizes in
one fused pass (_calibration_loops.py, the plain rule's integers); the statistics of a frame take one
counting pass of each 8/16-bit output.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ...emulator import EmulatorError
from ...ir.module import IRModule
from ...ir.types import TupleType
from ._calibration_loops import value_counts
from .calibration import (HISTOGRAM, MINMAX, PERCENTILE_ACT_RANGE_SHRINK, CalibrationResult, layer_of_tensor,
                          constant_second_operand, frame_channel_means, frame_column_means, running_channel_mean,
                          running_column_mean, running_range, tensor_range)
from .layers import build_networks
from .options import TidlOptions
from .quantize import (ACT_RANGE_BIT, BIAS_CALIB_BIT, BIAS_CALIBRATION_FACTOR, BIAS_RANGE_BIT, NO_OUTLIER_BIT,
                       QuantizationError, QuantizedModel, _quantize_subgraph, bias_calibration_applies,
                       calibration_option_bits)

#: TI's ``TIDL_NUM_ACTIVATION_HISTOGRAM_BINS``.
ACTIVATION_HISTOGRAM_BINS = 1024
#: TI's ``TIDL_BIAS_CALIBRATION_WARMUP_FACTOR``: the factor's divisor in the first and last tenth.
BIAS_CALIBRATION_WARMUP_FACTOR = 10.0

Key = Tuple[str, int]


#: The partitioned module's attribute naming the flow that made it (``ort`` from ``ort_flow.run_ort_flow``;
#: absent: the TVM flow).
FLOW_ATTR = "tidl_flow"


def calibration_iterations(options: TidlOptions, flow: str = "tvm") -> int:
    """How many fixed-point iterations TI's import runs (``TIDL_runIterativeCalibration``, docs/numerics.md
    §9.1). TI replaces an unset count (-1) by 1 when the calibration options are 0 or BiasRange 64 alone
    (accuracy_level 0), else by 50: the TVM flow, whose count tidlx takes as unset at accuracy_level 0.
    TI's ONNX Runtime import always passes its ``calibration_iterations`` (50 unless given), so with
    ``flow`` ``ort`` the option's count runs at every accuracy_level."""
    if flow != "ort" and calibration_option_bits(options) in (0, BIAS_RANGE_BIT):
        return 1
    return int(options.calibration_iterations)


def bias_calibration_step(iteration: int, iterations: int) -> np.float32:
    """The bias factor of one iteration (TI: ``TIDL_runIterativeCalibration``): ``biasCalibrationFactor``
    0.05 in float32, divided by 10 in the first and the last ``iterations // 10`` iterations."""
    factor = np.float32(BIAS_CALIBRATION_FACTOR)
    edge = iterations // 10
    if edge > 0 and (iteration < edge or iteration >= iterations - edge):
        factor = factor / np.float32(BIAS_CALIBRATION_WARMUP_FACTOR)
    return np.float32(factor)


def histogram_shrink_count(total: int) -> int:
    """The elements a frame's histogram drops on a side (TI: ``pct_freq`` in
    ``TIDL_TensorMinMaxHistStats``): ``(int)((0.01f / 100.0) * (float)total)``, in double."""
    return int((float(np.float32(PERCENTILE_ACT_RANGE_SHRINK)) / 100.0) * float(np.float32(total)))


def histogram_bins_of(values: np.ndarray, lo: np.float32, hi: np.float32, scale: np.float32) -> np.ndarray:
    """The bin of each integer value (TI: ``TIDL_TensorMinMaxHistStats``): ``v = q / scale`` and
    ``(v - lo) / (hi - lo) * 1023`` in float32, then ``(int)(x + 0.5)`` with a double 0.5, at most 1023."""
    v = values.astype(np.float32) / scale
    norm = (v - lo) / (hi - lo) * np.float32(ACTIVATION_HISTOGRAM_BINS - 1)
    bins = np.trunc(norm.astype(np.float64) + 0.5).astype(np.int64)
    return np.minimum(bins, ACTIVATION_HISTOGRAM_BINS - 1)


def integer_counts(values: np.ndarray) -> Tuple[np.ndarray, int]:
    """How many elements hold each integer value: ``counts[i]`` for the value ``offset + i``, from the
    lowest value of the type (8/16 bit: one pass of bincount over the bits) or of the array."""
    flat = np.asarray(values).reshape(-1)
    if flat.dtype in (np.uint8, np.uint16, np.int8, np.int16):
        return value_counts(flat), int(np.iinfo(flat.dtype).min)
    q = flat.astype(np.int64)
    low = int(q.min())
    return np.bincount(q - low), low


def frame_histogram_range(values: np.ndarray, scale: float, counts: Optional[Tuple[np.ndarray, int]] = None
                          ) -> Tuple[int, int]:
    """One frame's range of an integer tensor by TI's per-frame histogram (TI:
    ``TIDL_TensorMinMaxHistStats``, docs/numerics.md §9.3), in the tensor's integers: 1024 bins over the
    frame's own [min, max] (in real units, float32); from each end, the first bin where the running count
    reaches ``histogram_shrink_count`` (``>=``; the low end only when the frame's min is below 0); the
    end is that bin's position ``lo + i / 1023 * (hi - lo)`` (float32), kept inside [lo, hi], and back
    to an integer by ``(int)(x * scale)`` (truncation toward zero). A constant frame gives its min/max.
    ``counts``: ``integer_counts(values)`` when known."""
    counts, offset = counts if counts is not None else integer_counts(values)
    present = np.nonzero(counts)[0]
    qmin, qmax = offset + int(present[0]), offset + int(present[-1])
    s = np.float32(scale)
    lo, hi = np.float32(qmin) / s, np.float32(qmax) / s
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi - lo == 0:
        return qmin, qmax
    # every element of one integer value falls in one bin: bin the distinct values, weigh by their counts
    bins = histogram_bins_of(present + offset, lo, hi, s)
    hist = np.bincount(bins, weights=counts[present], minlength=ACTIVATION_HISTOGRAM_BINS).astype(np.int64)
    need = histogram_shrink_count(int(counts.sum()))
    low_bin = int(np.argmax(np.cumsum(hist) >= need)) if qmin < 0 else 0
    high_bin = ACTIVATION_HISTOGRAM_BINS - 1 - int(np.argmax(np.cumsum(hist[::-1]) >= need))
    last = np.float32(ACTIVATION_HISTOGRAM_BINS - 1)
    out_lo = lo + (np.float32(low_bin) / last) * (hi - lo)
    out_hi = lo + (np.float32(high_bin) / last) * (hi - lo)
    out_hi = min(out_hi, hi)
    out_lo = max(out_lo, lo)
    return int(np.trunc(np.float32(out_lo * s))), int(np.trunc(np.float32(out_hi * s)))


def range_of_frame(values: np.ndarray, scale: float, is_float: bool, histogram: bool, zero_point: int = 0
                   ) -> Tuple[Tuple[float, float], Tuple[float, float]]:
    """One frame's range of a layer output in real units (TI: ``TIDL_UpdateTensorRangeStats``), and its
    plain min/max: a float tensor's min/max; an integer tensor's histogram ends (ActRange) or min/max, less
    the zero point (style 4, docs/numerics.md §12), each divided by the tensorScale in float32."""
    if is_float:
        lo, hi = float(values.min()), float(values.max())
        return (lo, hi), (lo, hi)
    counts = integer_counts(values)
    present = np.nonzero(counts[0])[0]
    qmin, qmax = counts[1] + int(present[0]), counts[1] + int(present[-1])
    lo, hi = frame_histogram_range(values, scale, counts) if histogram else (qmin, qmax)
    lo, hi, qmin, qmax = lo - zero_point, hi - zero_point, qmin - zero_point, qmax - zero_point
    s = np.float32(scale)
    return (float(np.float32(lo) / s), float(np.float32(hi) / s)), (qmin / scale, qmax / scale)


def bias_calibration_means(layer, means: Optional[np.ndarray], bias_size: int) -> Optional[np.ndarray]:
    """The means whose shift moves a layer's bias (TI: ``TIDL_updateBiasForBiasCalibration`` adds to bias
    element ``i`` the shift at the layer's offset ``+ i``): a channel's mean per bias element; for an
    inner product whose constant is its second operand the first ``bias_size`` of its channel-major
    column means, channel 0's columns (``calibration.frame_column_means``). None: none recorded."""
    if means is None:
        return None
    means = np.asarray(means, np.float32)
    if constant_second_operand(layer) and len(means) >= bias_size:
        return means[:bias_size]
    return means


def _bias_calibrated(model: QuantizedModel, key: Key, float_mean) -> bool:
    """Whether bias calibration moves this layer's bias (TI 11.x: ``TIDL_updateBiasForBiasCalibration``):
    a convolution or deconvolution with a bias; an inner product whose constant is its second operand
    (TIDL 10.x on, the ONNX Runtime flow: ``quantize.bias_calibration_applies``); a batch
    norm without activation or with ReLU, unless all its weights and all its biases are equal (a scalar
    batch norm); its means match its bias."""
    sg, index = key
    layer = model.subgraphs[sg].layers[index]
    bias = model.float_biases[key]
    if float_mean is None or len(float_mean) != len(bias):
        return False
    if layer.type == "BatchNorm":
        if layer.activation not in ("none", "relu"):
            return False
        weights = np.asarray(layer.weights).reshape(-1)
        products = np.asarray(layer.bias_a, np.int64) * np.asarray(layer.bias_b, np.int64)
        if weights.size and (weights == weights[0]).all() and (products == products[0]).all():
            return False
    return True


class _Collector:
    """A fixed-point observer: per layer output the running range over the frames of one iteration, the
    plain min/max, and the running channel means of the bias-calibrated layers."""

    def __init__(self, model: QuantizedModel, histogram: bool, no_outlier: bool, mean_layers, column_layers=()):
        self.model = model
        self.histogram = histogram
        self.no_outlier = no_outlier
        self.mean_layers = set(mean_layers)
        #: the inner products whose constant is their second operand: means by column
        self.column_layers = set(column_layers)
        self.frame = 0
        self.ranges: Dict[Key, Tuple[float, float]] = {}
        self.observed: Dict[Key, Tuple[float, float]] = {}
        self.means: Dict[Key, np.ndarray] = {}

    def __call__(self, o) -> None:
        sub = self.model.subgraphs[o.subgraph]
        input_convert = o.layer.type == "Data"
        for tid, value in zip(o.layer.outputs, o.outputs):
            t = sub.tensors[tid]
            v = np.asarray(value)   # the whole batch, as TI's TIDL_TensorMinMaxStats
            if v.size == 0:
                continue
            key = (o.subgraph, tid)
            cur, seen = range_of_frame(v, t.scale, t.is_float, self.histogram, t.zero_point)
            self.ranges[key] = running_range(self.ranges.get(key), cur, self.frame,
                                             self.no_outlier or input_convert)
            old = self.observed.get(key)
            self.observed[key] = seen if old is None else (min(old[0], seen[0]), max(old[1], seen[1]))
        layer_key = (o.subgraph, o.layer.index)
        if layer_key in self.mean_layers and o.outputs:
            t = sub.tensors[o.layer.outputs[0]]
            frame_means, running = (frame_column_means, running_column_mean) \
                if layer_key in self.column_layers else (frame_channel_means, running_channel_mean)
            means = frame_means(np.asarray(o.outputs[0]), 1.0 if t.is_float else t.scale)
            if means is not None and t.zero_point:   # style 4: real = (q - zp) / scale
                means = means - np.float32(np.float32(t.zero_point) / np.float32(t.scale))
            if means is not None:
                self.means[layer_key] = running(self.means.get(layer_key), means, self.frame)


def _quantized(partitioned: IRModule, networks, options: TidlOptions, results: Mapping[str, CalibrationResult],
               biases: Mapping[Key, np.ndarray], errors, cache: Dict[str, Dict[Any, Any]]) -> QuantizedModel:
    subgraphs, found = {}, {}
    for net in networks:
        result = results.get(net.name)
        if result is None:
            raise QuantizationError(f"@{net.name}: no calibration result (calibrate the partitioned module)")
        returns_tuple = isinstance(partitioned[net.name].body.checked_type, TupleType)
        own = {index: b for (sg, index), b in biases.items() if sg == net.name}
        subgraphs[net.name], floats = _quantize_subgraph(net, result, options, returns_tuple, own,
                                                         cache.setdefault(net.name, {}),
                                                         str(partitioned.attrs.get(FLOW_ATTR, "tvm")))
        found.update({(net.name, index): b for index, b in floats.items()})
    return QuantizedModel(partitioned, subgraphs, options, dict(results), bias_calibration_errors=tuple(errors),
                          float_biases=found)


def quantize_iteratively(partitioned: IRModule, options: TidlOptions, calibration: Mapping[str, CalibrationResult],
                         progress: Optional[Callable[[int, int], None]] = None) -> QuantizedModel:
    """The model TI's import makes from the float pass's ``calibration``: the fixed-point iterations, then
    the final quantization (module docstring). ``progress(done, total)`` is called after each fixed-point
    frame (total: iterations x frames)."""
    networks = build_networks(partitioned)
    nets = {net.name: net for net in networks}
    bits = calibration_option_bits(options)
    flow = str(partitioned.attrs.get(FLOW_ATTR, "tvm"))
    iterations = calibration_iterations(options, flow) if networks else 0   # no TIDL subgraph: nothing to run
    histogram, no_outlier = bool(bits & ACT_RANGE_BIT), bool(bits & NO_OUTLIER_BIT)
    bias_calibration = bool(bits & BIAS_CALIB_BIT)
    method = HISTOGRAM if histogram else MINMAX
    data = next((r.data for r in calibration.values() if r.data is not None), None)
    if data is None and iterations > 0:
        raise QuantizationError("the calibration iterations need the calibration frames (calibrate() keeps them)")
    owners = layer_of_tensor(networks)
    results: Dict[str, CalibrationResult] = dict(calibration)
    biases: Dict[Key, np.ndarray] = {}
    errors: List[float] = []
    cache: Dict[str, Dict[Any, Any]] = {}
    model = _quantized(partitioned, networks, options, results, biases, errors, cache)
    total = iterations * (len(data) if data is not None else 0)
    for iteration in range(iterations):
        float_means, columns = {}, set()
        if bias_calibration:
            for (sg, index), bias in model.float_biases.items():
                layer = model.subgraphs[sg].layers[index]
                rng = results[sg].tensors.get(layer.outputs[0])
                source = nets[sg].layers[index]
                mean = bias_calibration_means(source, None if rng is None else rng.channel_mean, len(bias))
                if bias_calibration_applies(source, options.tidl_version, flow) and \
                        _bias_calibrated(model, (sg, index), mean):
                    float_means[(sg, index)] = mean
                    if constant_second_operand(source):
                        columns.add((sg, index))
        collector = _Collector(model, histogram, no_outlier, float_means, columns)
        for k, frame in enumerate(data):
            collector.frame = k
            try:
                model.run(frame, fixed_observers=[collector])
            except EmulatorError as exc:
                raise QuantizationError(f"{data.source}, frame {k}: calibration iteration {iteration + 1} of "
                                        f"{iterations}: the fixed-point run failed: {exc}") from exc
            if progress is not None:
                progress(iteration * len(data) + k + 1, total)
        if bias_calibration and float_means:
            step = bias_calibration_step(iteration, iterations)
            deltas = []
            for key, mean_float in float_means.items():
                mean_fixed = collector.means[key][:len(mean_float)]
                deltas.append(float(np.abs(mean_float.astype(np.float64) - mean_fixed).mean()))
                shift = (mean_float - mean_fixed) * step
                biases[key] = (np.asarray(model.float_biases[key]).astype(np.float32) + shift).astype(np.float64)
            errors.append(float(np.mean(deltas)))
        if options.quantization_scale_type != 4:
            # Style 4 keeps the float pass's ranges (docs/numerics.md §12.10): TI re-collects them from the
            # accumulators, before saturation; the outputs seen here are saturated to the asymmetric range,
            # which has no headroom, so ranges re-collected from them could only shrink.
            results = {name: _updated(result, collector, owners, method, len(data))
                       for name, result in results.items()}
        model = _quantized(partitioned, networks, options, results, biases, errors, cache)
    return model


def _updated(result: CalibrationResult, collector: _Collector, owners, method: str, frames: int) -> CalibrationResult:
    """``result`` with the ranges collected in one fixed-point iteration (tensors not seen keep theirs)."""
    tensors = dict(result.tensors)
    for tid, old in result.tensors.items():
        key = (result.subgraph, tid)
        rng = collector.ranges.get(key)
        if rng is None:
            continue
        tensors[tid] = tensor_range(owners.get(key), rng[0], rng[1], method, frames, collector.observed[key],
                                    old.channel_mean)
    return CalibrationResult(result.subgraph, tensors, result.accuracy_level, method, result.frames, result.network,
                             result.data, result.given)


__all__ = ["quantize_iteratively", "calibration_iterations", "FLOW_ATTR", "bias_calibration_step",
           "bias_calibration_means", "frame_histogram_range",
           "histogram_shrink_count", "integer_counts", "range_of_frame", "ACTIVATION_HISTOGRAM_BINS"]
