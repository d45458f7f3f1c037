"""Quantization: a TidlNetwork + its calibrated ranges + TI's options -> a ``QuantizedSubgraph``.

    results = calibrate(partitioned, options, frames)
    qmodel = quantize_model(partitioned, options, results)      # a QuantizedModel
    sub = qmodel.subgraphs["tidl_0"]                            # plain data (tidlx.emulator.fixed.network)
    sub.layers[3].weights, .bias_a, .bias_b, .round_bits, .bounds; sub.tensors[7].scale
    outputs = qmodel.run({"img": frame})                        # TIDL subgraphs in fixed point

Every scale, shift and integer comes from a rule of ``numerics.py`` (docs/numerics.md §2-§6), applied
layer by layer in the network's order, each layer's input scales being its producers' tensorScales:

* Subgraph inputs (data convert, §6.1, §8.12): a float input gets accScale 2^7 (8 bit) or 2^15
  (16 bit), roundBits from its calibrated range; an integer input keeps its type at scale 1.0.
* Conv / InnerProduct / BatchNorm: the composite's float weights with every batch norm, bias and
  per-channel scale/shift of the composite folded into one weight and bias per output channel (float64);
  absMax (§4.1), median range limiting (§4.3, when the calibration options have WeightRange: accuracy
  level 1, or 9 with weight_clipping), P2 rounding (§2), the bias clip (§4.4, Conv), the forced scale
  of ReLU6/Clip (§4.7), §4.2 weights, §5 bias and its biasA x biasB split, §6.3/§6.4, and the
  bias-saturation guard of §6.6 on each producer whose consumers have a bias.
* Pool (max keeps its input's type and scale; average and global average §6.1), EltWise (sum, max:
  §6.5's multipliers; product), Concat (§6.5), Resize and data movement (type and scale kept),
  SoftMax (float32 out).
* A standalone ReLU/ReLU6/Clip layer (tidlx's choice: docs/numerics.md has no accScale for it): it
  keeps its input's scale, its output is unsigned (a Clip with a negative min: signed; §3), and it
  saturates to its activation's bounds (§8.10).
* Signedness (§3) by TI's structural rule: a weighted layer is signed unless ReLU, ReLU6 or a Clip at
  >= 0 follows it, element-wise and concat layers follow their inputs, pooling and data movement their
  input; a float input is signed in the ONNX Runtime flow, by its calibrated range in the TVM flow.

Anything else (another layer type, activation, or parameter combination) is a ``QuantizationError``
naming the layer: fixed point never falls back to float inside a TIDL subgraph.

* Deconv (§8.2, one group); PReLU / leaky ReLU (§8.10.1) and Sigmoid / Tanh (§8.10.2, a table) as
  activations of the weighted layers and as layers of their own; TIDL 10.x/11.x at 8 bits: TI's tables
  over the input's values for Sigmoid/Tanh layers and for a GELU, ELU or HardSigmoid alone (a BatchNorm);
  otherwise HardSigmoid as its affine part plus Clip [0, 1]; Pad and DepthToSpace (§8.11).
* Per-channel depthwise weights with calibration bit 8 (§4.5), bias calibration with bit 4 over
  ``calibration_iterations`` (§9.5, calibration_loop.py), mixed precision by the 16-bit name lists (§3).

GELU and ELU are table activations (§8.10.2) of the BatchNorm layer their composite makes.

* TopK (§8.15: values at the input's type and scale, int32 indices) and ScatterElements for ScatterND
  (§8.16); an int64 subgraph input is an int32 index tensor.

* ``quantization_scale_type`` 4 (asymmetric per-channel, §12): quantize_asym.py, for the layer types it
  names; any other layer is a ``QuantizationError``.

Left for later: TFLite prequantized (style 5), the histogram weight-range method, ArgMax/Reduce.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ...emulator.config import EmulatorConfig
from ...emulator.fixed.arith import (INDEX_TYPE, FixedPointError, FixedType, activation_bounds,
                                     data_convert_to_fixed, mma_scale_and_shift)
from ...emulator.fixed.kernel_set import fixed_point_kernel_set, run_fixed
from ...emulator.fixed.network import QuantizedLayer, QuantizedSubgraph, QuantizedTensor
from ...ir.errors import TidlxError
from ...ir.expr import Call, Constant, Tuple as TupleExpr
from ...ir.pattern import wildcard
from ...ir.module import IRModule
from ...ir.ops.transform import slice_ranges
from ...ir.traversal import post_order
from ...ir.types import TupleType
from . import numerics as nx
from . import quant_proto
from ._calibration_loops import quantize_weights_f32
from .calibration import CalibrationResult, TensorRange, constant_second_operand
from .composites import MEMBER, elu, gelu, hard_sigmoid
from .devices import DEFAULT_SOFTMAX_LANES, softmax_exp_rule, softmax_lanes
from .layer_params import ConvParams, PoolParams
from .layers import TidlLayer, TidlNetwork, build_networks
from .options import TidlOptions

#: Calibration option bits (TIDL-NUMERICS.md, "Calibration").
ACT_RANGE_BIT = 1
WEIGHT_RANGE_BIT = 2
BIAS_CALIB_BIT = 4
PER_CHANNEL_WEIGHT_BIT = 8
BIAS_RANGE_BIT = 64
#: TIDL 11.x's NoOutlier: ranges combined across frames by running min/max instead of the running mean.
NO_OUTLIER_BIT = 128
#: TI's default at accuracy_level 1: ActRange 1 + WeightRange 2 + BiasCalib 4.
ACCURACY_LEVEL_1_OPTIONS = 7
#: accuracy_level 0: BiasRange 64 alone (min/max ranges; no §4.4 bias clip, no §6.6 guard).
ACCURACY_LEVEL_0_OPTIONS = BIAS_RANGE_BIT

#: Activations the fixed point runs as saturation (docs/numerics.md §8.10); HardSigmoid's alpha/beta are
#: folded into the layer's affine part, leaving a clip to [0, 1] (unless it is TI's table layer, §8.10.2).
SATURATING = ("none", "ReLU", "ReLU6", "Clip", "HardSigmoid")
#: Activations with their own integer rule (§8.10.1 PReLU, §8.10.2 the tables).
NON_SATURATING = ("PReLU",) + nx.TABLE_ACTIVATIONS
SUPPORTED_ACTIVATIONS = SATURATING + NON_SATURATING
#: The ops of a composite that are its activation (skipped when folding the affine part).
ACTIVATION_OPS = ("nn.relu", "clip", "nn.leaky_relu", "nn.prelu", "sigmoid", "tanh")
#: Layer types with weights.
WEIGHTED = ("Conv", "Deconv", "InnerProduct", "BatchNorm")
#: Layer types whose biases bias calibration corrects in every TIDL version (TI's: convolution,
#: deconvolution, batch norm); the inner product by ``bias_calibration_applies``.
BIAS_CALIBRATED = ("Conv", "Deconv", "BatchNorm")


def bias_calibration_applies(layer: TidlLayer, tidl_version: str, flow: str = "ort") -> bool:
    """Whether bias calibration moves this layer's bias (TI: ``TIDL_updateBiasForBiasCalibration``,
    docs/numerics.md §9.5): convolutions, deconvolutions and batch norms (their further conditions in
    ``calibration_loop``); from TIDL 10.x on also an inner product whose constant is its second operand
    (``innerProductParams.constIdx == 1``, which TI's ONNX import gives a Gemm or MatMul with a constant B)
    in the ONNX Runtime flow (``flow`` "ort"); TI's relay import gives ``nn.dense`` ``constIdx`` -1, so the
    TVM flow's inner products keep their bias, as every inner product with TIDL 08.06."""
    if layer.type in BIAS_CALIBRATED:
        return True
    return tidl_version != "08.06" and flow == "ort" and constant_second_operand(layer)
#: Layer types whose output keeps the input's type and scale (docs/numerics.md §6.1, §8.11).
KEEPING = ("Reshape", "Flatten", "Squeeze", "Transpose", "Slice", "Resize", "Pad", "DepthToSpace", "DataConvert",
           "Reduce")
_NO_BOUND = float(np.finfo(np.float32).max)
#: §8.16: the largest ratio TIDL's 8-bit multiplier holds (``TIDL_getMMAv2_ScaleAndShift``).
MMA_MAX_SCALE = 255.0


#: the ops whose operands are an EltWise / Concat layer's inputs, one each
_MERGING_OPS = ("add", "multiply", "maximum", "concatenate")


def _operand_tensors(layer: TidlLayer) -> Tuple[int, ...]:
    """A merging layer's input tensors, one per operand of its op: ``add(%x, %x)`` reads one tensor
    twice (TIDL's layer lists the same data id twice), though outlining gave its Composite one
    parameter."""
    fn = layer.function
    if fn is None or len(fn.params) != len(layer.inputs) or len(set(layer.inputs)) > 1:
        return tuple(layer.inputs)
    tensor_of = {id(p): t for p, t in zip(fn.params, layer.inputs)}
    for node in post_order(fn.body, enter_functions=False):
        if isinstance(node, Call) and node.op_name in _MERGING_OPS:
            operands = node.args[0].fields if node.op_name == "concatenate" and hasattr(node.args[0], "fields") \
                else node.args
            ids = [tensor_of.get(id(a)) for a in operands]
            if all(t is not None for t in ids):
                return tuple(ids)
    return tuple(layer.inputs)


def _is_tensor_product(layer: TidlLayer) -> bool:
    """An inner product of two tensors (attention's matrix products): no weights, no bias."""
    return layer.type == "InnerProduct" and bool(layer.ops) and layer.ops[0] == "nn.batch_matmul" \
        and len(layer.inputs) == 2


class QuantizationError(TidlxError):
    """A TIDL subgraph cannot be quantized: a layer type, activation or parameter combination that
    tidlx's fixed point does not support yet, or missing calibration data."""


def calibration_option_bits(options: TidlOptions) -> int:
    """The calibration option bits TI's import uses (its OSRT option map, TIDL 11.x): 7 at accuracy_level 1,
    BiasRange 64 at 0; at 9 the advanced options (activation_clipping -> ActRange 1, weight_clipping ->
    WeightRange 2, bias_calibration -> BiasCalib 4, channel_wise_quantization -> PerChannelWeight 8).
    ``quantization_scale_type`` 4 (style 6) takes BiasCalib 4 alone, at every level (TI's
    ``TIDL_derivedInterfaceOptions``; docs/numerics.md §12.10)."""
    if options.quantization_scale_type == 4:
        return BIAS_CALIB_BIT
    if options.accuracy_level == 1:
        return ACCURACY_LEVEL_1_OPTIONS
    if options.accuracy_level == 9:
        return (int(bool(options.activation_clipping)) | 2 * int(bool(options.weight_clipping))
                | 4 * int(bool(options.bias_calibration)) | 8 * int(bool(options.channel_wise_quantization)))
    return ACCURACY_LEVEL_0_OPTIONS


def data_convert_acc_scale(out_bits: int) -> float:
    """The accScale of a float input's data convert (docs/numerics.md §6.1, inScale 1.0)."""
    return nx.acc_scale_data_convert(1.0, out_bits)


# -- reading a layer's float parameters ---------------------------------------------------------------

def _channel_vector(const: np.ndarray, out_shape: Tuple[int, ...], channels: int, axis: int = 1) -> np.ndarray:
    """A constant that varies along ``axis`` only (1, or the last for an inner product), as one float64
    value per channel."""
    target = [1] * len(out_shape)
    target[axis] = channels
    full = np.broadcast_to(np.asarray(const, np.float64), tuple(target))
    return full.reshape(channels).copy()


def _constant_arg(call: Call) -> np.ndarray:
    consts = [a for a in call.args if isinstance(a, Constant)]
    if len(consts) != 1:
        raise QuantizationError(f"{call.op_name}: expected one constant operand")
    return consts[0].data


@dataclass
class _Affine:
    """The weighted layer's float parameters: ``weights`` (O x ... for conv/dense, None for a batch
    norm) and per output channel ``scale`` (folded into the weights) and ``bias``."""

    weights: Optional[np.ndarray]
    scale: np.ndarray
    bias: np.ndarray
    has_bias: bool
    out_axis: int = 0      # the weights' output-channel axis (1 for a deconvolution's IOHW)

    def folded_weights(self) -> np.ndarray:
        """The weights with the per-channel scale folded in (the scale alone for a batch norm)."""
        if self.weights is None:
            return self.scale
        shape = [1] * self.weights.ndim
        shape[self.out_axis] = -1
        return self.weights * self.scale.reshape(shape)


#: The composite patterns of the activations whose calls are all the activation's (none of them is
#: part of the layer's affine part), by TIDL activation name.
_PATTERN_ACTIVATIONS = {"GELU": gelu, "ELU": elu}


def _activation_calls(layer: TidlLayer) -> set:
    """The ids of the calls that make up a GELU or ELU activation at the end of the layer's function."""
    pattern = _PATTERN_ACTIVATIONS.get(layer.activation.type)
    if pattern is None:
        return set()
    body = layer.function.body
    root = body.fields[0] if isinstance(body, TupleExpr) and len(body.fields) == 1 else body
    match = pattern(wildcard()).match(root)
    if match is None:
        raise QuantizationError(f"{layer.name}: the {layer.activation.type} activation is not in the form "
                                f"its composite pattern matched")
    return {id(node) for key, node in match.names.items() if key.startswith(MEMBER) and isinstance(node, Call)}


def _activation_only(layer: TidlLayer) -> bool:
    """A BatchNorm layer that is a GELU, ELU or hard sigmoid alone (its composite's calls are all the
    activation's): TI's activation BatchNorm layer of weight 1 and no bias."""
    pattern = {"GELU": gelu, "ELU": elu, "HardSigmoid": hard_sigmoid}.get(layer.activation.type)
    if layer.type != "BatchNorm" or pattern is None:
        return False
    body = layer.function.body
    root = body.fields[0] if isinstance(body, TupleExpr) and len(body.fields) == 1 else body
    match = pattern(wildcard()).match(root)
    if match is None:
        return False
    members = {id(node) for key, node in match.names.items() if key.startswith(MEMBER) and isinstance(node, Call)}
    return all(id(n) in members for n in post_order(body, enter_functions=False) if isinstance(n, Call))


def _fold(layer: TidlLayer, where: str) -> _Affine:
    """The composite's calls as one weight tensor and one bias: batch norms, biases and per-channel
    scale/shift after the anchor are folded per output channel (float64); the calls of a GELU or ELU
    activation are left to its table."""
    activation_calls = _activation_calls(layer)
    calls = [n for n in post_order(layer.function.body, enter_functions=False)
             if isinstance(n, Call) and id(n) not in activation_calls]
    if not calls and activation_calls:   # the activation alone: a BatchNorm of weight 1, bias 0
        shape = tuple(int(d) for d in layer.function.params[0].checked_type.shape)
        if len(shape) < 2:
            raise QuantizationError(f"{where}: a {layer.activation.type} of a tensor without a channel axis")
        return _Affine(None, np.ones(shape[1]), np.zeros(shape[1]), False)
    weights = None
    affine: Optional[_Affine] = None
    # an inner product's output features are its last axis (rank 2 or more); everything else's axis 1
    axis = -1 if layer.type == "InnerProduct" else layer.params.axis if layer.type == "BatchNorm" else 1
    for call in calls:
        name = call.op_name
        out_shape = tuple(int(d) for d in call.checked_type.shape) if not isinstance(call.checked_type, TupleType) \
            else tuple(int(d) for d in call.checked_type.fields[0].shape)
        channels = out_shape[axis] if len(out_shape) >= 2 else None
        if name == "nn.conv2d":
            a = call.attrs
            if a.data_layout != "NCHW" or a.kernel_layout != "OIHW":
                raise QuantizationError(f"{where}: {a.data_layout}/{a.kernel_layout} convolutions: fixed point "
                                        f"takes NCHW/OIHW only yet")
            weights = _constant_arg(call).astype(np.float64)
        elif name == "nn.dense":
            weights = _constant_arg(call).astype(np.float64)
        elif name == "nn.matmul":   # x @ B with a constant B (K x N, or N x K with transpose_b): dense's N x K
            if call.attrs.transpose_a:
                raise QuantizationError(f"{where}: a matrix product with transpose_a: fixed point takes transpose_a=0")
            weights = _constant_arg(call).astype(np.float64)
            weights = weights if call.attrs.transpose_b else weights.T
        elif name == "nn.conv2d_transpose":
            a = call.attrs
            if a.data_layout != "NCHW" or a.kernel_layout not in ("IOHW", "OIHW"):
                raise QuantizationError(f"{where}: {a.data_layout}/{a.kernel_layout} deconvolutions: fixed point "
                                        f"takes NCHW/IOHW only yet")
            if int(a.groups) != 1:
                raise QuantizationError(f"{where}: a deconvolution of {a.groups} groups: fixed point takes one group")
            weights = _constant_arg(call).astype(np.float64)
        if affine is None:
            if channels is None:
                raise QuantizationError(f"{where}: {name} has no channel axis (axis 1)")
            affine = _Affine(weights, np.ones(channels), np.zeros(channels), False,
                             1 if name == "nn.conv2d_transpose" else 0)
            if name in ("nn.conv2d", "nn.dense", "nn.matmul", "nn.conv2d_transpose"):
                continue
        if name in ACTIVATION_OPS:   # the layer's activation, applied by the integer rules
            continue
        if name == "nn.bias_add" or name == "add":
            if name == "nn.bias_add" and int(call.attrs.axis) % len(out_shape) != axis % len(out_shape):
                raise QuantizationError(f"{where}: a bias along axis {call.attrs.axis}: fixed point takes axis "
                                        f"{axis % len(out_shape)}")
            const = _constant_arg(call)
            # bias_add's bias is one value per channel; add's constant broadcasts as numpy does
            affine.bias = affine.bias + (const.astype(np.float64).reshape(channels) if name == "nn.bias_add"
                                         else _channel_vector(const, out_shape, channels, axis))
            affine.has_bias = True
        elif name == "subtract":   # x - c: a bias of -c; c - x: the weight -1 and the bias c (TI's Sub map)
            c = _channel_vector(_constant_arg(call), out_shape, channels, axis)
            if isinstance(call.args[0], Constant):
                affine.scale, affine.bias = -affine.scale, c - affine.bias
            else:
                affine.bias = affine.bias - c
            affine.has_bias = True
        elif name in ("multiply", "divide"):   # x / c: the weight 1/c (TI's Div map)
            k = _channel_vector(_constant_arg(call), out_shape, channels, axis)
            if name == "divide":
                k = (np.float32(1.0) / k.astype(np.float32)).astype(np.float64)   # float32, as TI inverts it
            affine.scale, affine.bias = affine.scale * k, affine.bias * k
        elif name == "nn.batch_norm":
            a = call.attrs
            if int(a.axis) % len(out_shape) != 1:
                raise QuantizationError(f"{where}: a batch norm along axis {a.axis}: fixed point takes axis 1")
            gamma, beta, mean, var = (c.data.astype(np.float64) for c in call.args[1:5])
            k = (gamma if a.scale else 1.0) / np.sqrt(var + float(a.epsilon))
            affine.scale = affine.scale * k
            affine.bias = (affine.bias - mean) * k + (beta if a.center else 0.0)
            affine.has_bias = True
        else:
            raise QuantizationError(f"{where}: fixed point does not support {name} inside a "
                                    f"{layer.type} layer yet")
    if affine is None:
        raise QuantizationError(f"{where}: no calls")
    return affine


# -- the quantizer ------------------------------------------------------------------------------------

@dataclass
class _WeightedPlan:
    """What a weighted layer's consumers-side rules need before its input scale is known."""

    affine: _Affine
    weight_bits: int
    abs_max: float
    weight_scale: Any        # §4.1 (after range limiting and P2), before the bias clip; per channel: an array
    bias_abs_max: float
    input_signed: bool
    bias_scale: float
    #: §4.3: the absMax the median rule left (per channel: an array (O, 1, 1, 1)), to which the weights are
    #: clipped before quantization; None when the rule is off or the weights come from a quant proto
    weight_limit: Any = None
    #: §4.5: a per-channel layer's whole-layer weight scale, which sets its output scale (None otherwise)
    layer_weight_scale: Optional[float] = None


class _Quantizer:
    def __init__(self, net: TidlNetwork, calib: CalibrationResult, options: TidlOptions,
                 biases: Optional[Mapping[int, np.ndarray]] = None, cache: Optional[Dict[Any, Any]] = None,
                 flow: str = "tvm"):
        self.net = net
        #: which of TI's flows made the network ("tvm" or "ort"): a float input's type depends on it (§3)
        self.flow = flow
        #: layer index -> the float bias to quantize instead of the composite's (bias calibration's)
        self.bias_override = biases or {}
        #: what depends on a layer's float weights alone (its folded parameters, weight scale, integer
        #: weights at a given scale), kept across the quantizations of the calibration loop
        self.cache = cache if cache is not None else {}
        self.calib = calib
        self.opts = options
        bits = calibration_option_bits(options)
        self.per_channel_depthwise = bool(bits & PER_CHANNEL_WEIGHT_BIT)
        # §2/§4.5: per-channel weights switch the whole network to P2Dynamic, as TI's import does
        self.power_of_2 = nx.quantization_style(options.quantization_scale_type) == nx.P2_DYNAMIC \
            or self.per_channel_depthwise
        self.limit_weights = bool(bits & WEIGHT_RANGE_BIT)
        self.bias_range = bool(bits & BIAS_RANGE_BIT)
        #: style 4 (asymmetric per-channel, docs/numerics.md §12): every layer through quantize_asym.py
        self.asymmetric = options.quantization_scale_type == 4
        self.tensors: Dict[int, QuantizedTensor] = {}
        self.consumers: Dict[int, List[TidlLayer]] = {}
        self.producers: Dict[int, TidlLayer] = {t: layer for layer in net.layers for t in layer.outputs}
        for layer in net.layers:
            for t in layer.inputs:
                self.consumers.setdefault(t, []).append(layer)
        self.plans: Dict[int, _WeightedPlan] = {}
        #: layer index -> the float bias (folded, float64) of every layer whose bias is quantized (by index:
        #: names repeat, e.g. the convolution and the pool that SplitAsymmetricStrideConv makes of one node)
        self.float_biases: Dict[int, np.ndarray] = {}

    # -- helpers
    def where(self, layer: TidlLayer) -> str:
        return f"@{self.net.name}: layer '{layer.name}' ({layer.describe()})"

    def unsupported(self, layer: TidlLayer, what: str) -> QuantizationError:
        return QuantizationError(f"{self.where(layer)}: TIDL fixed point does not support {what} yet")

    def range_of(self, tid: int) -> TensorRange:
        rng = self.calib.tensors.get(tid)
        if rng is None:
            raise QuantizationError(f"@{self.net.name}: no calibrated range for tensor "
                                    f"'{self.net.tensors[tid].name}'")
        return rng

    def widths(self, layer: TidlLayer) -> Tuple[int, int]:
        return nx.layer_bit_widths(layer.name, self.opts.tensor_bits, self.opts.output_feature_16bit_names,
                                   self.opts.params_16bit_names)

    def signed_of(self, tid: int) -> bool:
        """Whether tensor ``tid`` is signed: its quantized type once made, else its producer's rule."""
        if tid in self.tensors:
            return self.tensors[tid].signed
        producer = self.producers.get(tid)
        return self.output_signed(producer) if producer is not None else \
            nx.feature_map_is_signed(self.range_of(tid).min)

    def output_signed(self, layer: TidlLayer) -> bool:
        """§3: the signedness TI's import gives a layer's output by the layer's structure
        (``numerics.layer_output_is_signed``, ``numerics.float_input_is_signed``); the range test where
        TI's rule was not read (matrix products, LayerNorm, activation tables, constants)."""
        act = layer.activation.type
        clip_min = dict(layer.activation.params).get("min") if act == "Clip" else None
        if layer.is_data and not layer.inputs:
            t = self.net.tensors[layer.outputs[0]]
            dtype = np.dtype(t.dtype)
            if dtype.kind in "iu":
                return dtype.kind == "i"
            return nx.float_input_is_signed(self.flow, self.range_of(layer.outputs[0]).min)
        if act in nx.TABLE_ACTIVATIONS or act in nx.TI_TABLE_ACTIVATIONS or act == "PReLU" \
                or _is_tensor_product(layer):
            return nx.feature_map_is_signed(self.range_of(layer.outputs[0]).min)
        if layer.type in WEIGHTED:
            return nx.layer_output_is_signed("weighted", act, clip_min)
        if layer.type in ("EltWise", "Concat") and not getattr(layer.params, "constant_input", False):
            return nx.layer_output_is_signed("merging", act, clip_min,
                                             [self.signed_of(t) for t in _operand_tensors(layer)])
        if layer.type == "ReLU":
            return nx.layer_output_is_signed("activation", act, clip_min)
        if (layer.type == "Pool" or layer.type in KEEPING) and layer.inputs:
            return nx.layer_output_is_signed("following", inputs_signed=[self.signed_of(layer.inputs[0])])
        return nx.feature_map_is_signed(self.range_of(layer.outputs[0]).min)

    # -- the weighted layers' scales that do not depend on their input scale (for §6.6)
    def plan(self, layer: TidlLayer) -> _WeightedPlan:
        found = self.plans.get(layer.index)
        if found is not None:
            return found
        where = self.where(layer)
        if layer.activation.type not in SUPPORTED_ACTIVATIONS:
            raise self.unsupported(layer, f"the {layer.activation.type} activation")
        affine = self.cache.get(("fold", layer.index))
        if affine is None:
            affine = self.cache[("fold", layer.index)] = _fold(layer, where)
        if layer.index in self.bias_override:
            affine = dataclasses.replace(affine, bias=np.asarray(self.bias_override[layer.index], np.float64))
        wbits, _ = self.widths(layer)

        limits: List[float] = []

        def scale_of(w_part: np.ndarray) -> Tuple[float, float]:
            abs_max = nx.weight_abs_max(w_part)
            if self.limit_weights:
                abs_max = nx.limit_weight_range_median(w_part, abs_max, wbits)
                limits.append(abs_max)
            if self.power_of_2 and abs_max >= nx.ABS_MAX_EPSILON:
                abs_max = nx.smallest_power_of_2_at_least(abs_max)
            return abs_max, nx.weight_scale(abs_max, wbits, self.power_of_2)

        given = (self.calib.given or {}).get(layer.index)   # read from a quant_params_proto_path file
        weight_limit: Any = None
        layer_ws: Optional[float] = None
        if self.is_per_channel(layer):   # §4.5: one scale per output channel, no range limiting
            w = affine.folded_weights()
            per = [nx.weight_abs_max(w[c]) for c in range(w.shape[0])]
            abs_max, ws = max(per), np.array([nx.weight_scale(a, wbits, self.power_of_2) for a in per])
            whole = nx.limit_weight_range_median(w, abs_max, wbits) if self.limit_weights else abs_max
            layer_ws = nx.per_channel_layer_weight_scale(whole, wbits)
        elif given is not None and given.weight_abs_max is not None:
            abs_max = given.weight_abs_max
            if self.power_of_2 and abs_max >= nx.ABS_MAX_EPSILON:
                abs_max = nx.smallest_power_of_2_at_least(abs_max)
            ws = nx.weight_scale(abs_max, wbits, self.power_of_2)
        else:
            found = self.cache.get(("scale", layer.index))
            if found is None:
                abs_max, ws = scale_of(affine.folded_weights())
                found = self.cache[("scale", layer.index)] = (abs_max, ws, limits[0] if limits else None)
            abs_max, ws, weight_limit = found
        bias_abs_max = float(np.abs(affine.bias).max()) if affine.has_bias else 0.0
        if given is not None and affine.has_bias and given.bias_abs_max is not None:
            bias_abs_max = given.bias_abs_max
            if given.bias_values is not None:
                affine = dataclasses.replace(affine, bias=quant_proto.given_bias(given, affine.bias, where))
        in_signed = self.signed_of(layer.inputs[0])
        bs = nx.bias_scale(bias_abs_max, wbits, self.power_of_2)
        found = _WeightedPlan(affine, wbits, abs_max, ws, bias_abs_max, in_signed, bs, weight_limit, layer_ws)
        self.plans[layer.index] = found
        return found

    def is_per_channel(self, layer: TidlLayer) -> bool:
        """§4.5: a depthwise convolution (input channels = output channels = groups, TI's
        ``isPerChannelQuantizationEnabled``) with PerChannelWeight set."""
        if not self.per_channel_depthwise or layer.type != "Conv":
            return False
        prm: ConvParams = layer.params
        return prm.groups == prm.in_channels == prm.out_channels

    def guarded(self, layer: TidlLayer, round_bits: int, acc_scale: float, signed: bool) -> Tuple[int, List[str]]:
        """§6.6 on the layer's output (TI's guard in ``TIDL_UpdateScaleFactors``): roundBits raised so that
        its consumers' biases fit; not with BiasRange 64 nor at roundBits 0; a ReLU6/Clip-forced output
        takes TI's ratio 0.0001."""
        if self.bias_range or round_bits == 0:
            return round_bits, []
        consumers = self.consumers.get(layer.outputs[0], ())
        if self.forced_clip(layer) is not None:
            ratio = nx.GUARD_CLIP_RATIO
        else:
            ratio = nx.max_weight_to_bias_scale(self.weight_to_bias(c) for c in consumers)
        weight_bits = min((self.widths(c)[0] for c in consumers), default=self.opts.tensor_bits)
        raised = nx.bias_saturation_guard(round_bits, nx.tensor_scale(acc_scale, round_bits), ratio, weight_bits,
                                          signed)
        notes = [f"roundBits {round_bits} -> {raised} for the bias of its consumers (bias-saturation guard)"] \
            if raised != round_bits else []
        return raised, notes

    def weight_to_bias(self, consumer: TidlLayer) -> float:
        """§6.6: a consumer's weightScale / biasScale in TI's ``TIDL_maxWeightScale`` (1/256 for a layer
        without weights)."""
        if consumer.type not in WEIGHTED or _is_tensor_product(consumer) or self.is_table_layer(consumer):
            return nx.GUARD_NO_BIAS_RATIO
        p = self.plan(consumer)
        return nx.consumer_weight_to_bias_scale(float(np.max(p.weight_scale)), p.bias_scale,
                                                self.is_per_channel(consumer))

    def output_tensor(self, layer: TidlLayer, k: int, bits: int, signed: bool, scale: float) -> QuantizedTensor:
        t = self.net.tensors[layer.outputs[k]]
        q = QuantizedTensor(t.id, t.name, t.shape, bits, signed, float(scale))
        self.tensors[t.id] = q
        return q

    def bounds(self, layer: TidlLayer, out: QuantizedTensor, forced: bool = False,
               fused: bool = True) -> Tuple[Tuple[int, int], str]:
        """The layer's final saturation (§8.10) and its activation word. ``forced``: §4.7 forced the output
        scale, and the output type's bounds are the only saturation (TI's kernels take the type's limits;
        the forced scale puts the type's top at the clip). A Clip is the type's bounds too when ``fused``
        (the layer's own activation), its bounds at the output scale in a standalone Clip layer
        (``numerics.clip_activation_bounds``)."""
        act = layer.activation
        if act.type not in SUPPORTED_ACTIVATIONS:
            raise self.unsupported(layer, f"the {act.type} activation")
        ftype = out.fixed_type
        if act.type in NON_SATURATING:   # their own rule; then the output type's bounds
            return ftype.bounds, act.type.lower()
        if forced:
            return ftype.bounds, "relu6" if act.type == "ReLU6" else "clip"
        if act.type == "HardSigmoid":    # alpha x + beta folded into the affine part: a clip to [0, 1]
            return activation_bounds(ftype, "clip", out.scale, 0.0, 1.0), "clip"
        if act.type == "none":
            return ftype.bounds, "none"
        if act.type == "ReLU":
            return activation_bounds(ftype, "relu"), "relu"
        if act.type == "ReLU6":
            return activation_bounds(ftype, "relu6", out.scale), "relu6"
        params = dict(act.params)
        lo_t, hi_t = ftype.bounds
        c_lo, c_hi = params.get("min"), params.get("max")
        # a missing bound (max(x, c) is clip(c, FLT_MAX)) is the type's own
        c_lo = c_lo if c_lo is not None and math.isfinite(c_lo) and abs(c_lo) < _NO_BOUND else lo_t / out.scale
        c_hi = c_hi if c_hi is not None and math.isfinite(c_hi) and abs(c_hi) < _NO_BOUND else hi_t / out.scale
        return nx.clip_activation_bounds(ftype, out.scale, c_lo, c_hi, fused), "clip"

    def forced_clip(self, layer: TidlLayer) -> Optional[Tuple[float, bool]]:
        """§4.7, TI's ``isOutputTensorMaxSatAvailable``: (clipMax, symmetric) when the layer's activation
        forces its output scale: ReLU6 (6), a Clip of clipMax > 0 with clipMin 0 or clipMin = -clipMax
        (symmetric: a signed output), tidlx's hard sigmoid clip [0, 1]; else None."""
        act = layer.activation
        if act.type == "ReLU6":
            return 6.0, False
        if act.type == "HardSigmoid":
            return 1.0, False
        if act.type == "Clip":
            p = dict(act.params)
            lo, hi = p.get("min"), p.get("max")
            if lo is not None and hi is not None and math.isfinite(hi) and 0 < hi < _NO_BOUND \
                    and (lo == 0 or -lo == hi):
                return float(hi), lo < 0
        return None

    def clip_scale(self, layer: TidlLayer, out_bits: int) -> Optional[float]:
        """§4.7's forced output scale (``2^bits / clipMax``, ``2^(bits-1) / clipMax`` for a symmetric clip)
        when the layer's activation forces it, else None."""
        clip = self.forced_clip(layer)
        return None if clip is None else nx.clip_forced_scale(clip[0], out_bits, clip[1])

    def prelu_slopes(self, layer: TidlLayer) -> np.ndarray:
        """The float slopes of a PReLU activation: a leaky ReLU's one slope, or nn.prelu's per-channel
        constant."""
        params = dict(layer.activation.params)
        if "slope" in params:
            return np.array([params["slope"]], np.float64)
        refs = [c for c in layer.constants if c.role == "nn.prelu.alpha"]
        if len(refs) != 1:
            raise QuantizationError(f"{self.where(layer)}: a PReLU without its slope constant")
        return np.asarray(refs[0].constant.data, np.float64).reshape(-1)

    def prelu_fields(self, layer: TidlLayer) -> Dict[str, Any]:
        """§8.10.1: a PReLU's slope factors and shift (QuantizedLayer fields), from its slopes quantized at
        their own scale in the layer's weight width (TI's ``slopeScale``)."""
        slopes = self.prelu_slopes(layer)
        wbits, _ = self.widths(layer)
        slope_scale = nx.prelu_slope_scale(slopes, wbits, self.power_of_2)
        factors, shift = nx.prelu_slope_factors(nx.quantize_prelu_slopes(slopes, slope_scale, wbits), slope_scale,
                                                wbits)
        return {"prelu_slopes": factors, "prelu_shift": shift}

    def activation_stage(self, layer: TidlLayer, acc_scale: float, out_bits: int) -> Tuple[int, bool, float,
                                                                                              Dict[str, Any],
                                                                                              List[str]]:
        """§6.3/§6.4 with the non-saturating activations' rules (§8.10.1, §8.10.2): (roundBits, signed,
        tensorScale, extra QuantizedLayer fields, notes)."""
        kind = layer.activation.type
        rng = self.range_of(layer.outputs[0])
        if kind == "PReLU":   # §8.10.1: the slopes act on the accumulator; roundBits from the output's range
            rb = nx.round_bits(acc_scale, rng.min, rng.max, out_bits, True)   # a PReLU output is signed
            rb, notes = self.guarded(layer, rb, acc_scale, True)
            return rb, True, nx.tensor_scale(acc_scale, rb), self.prelu_fields(layer), notes
        if kind in nx.TABLE_ACTIVATIONS:
            alpha = float(dict(layer.activation.params).get("alpha", 1.0))
            lo, hi = nx.table_pre_range(kind, rng.min, rng.max, out_bits, alpha)
            rb = nx.round_bits(acc_scale, lo, hi, out_bits, True)
            pre_scale = nx.tensor_scale(acc_scale, rb)
            if nx.uses_ti_tables(self.tidl_version, out_bits, out_bits):
                table, signed, out_scale, notes = self.ti_table(layer, kind, pre_scale, True, out_bits)
                return rb, signed, out_scale, {"activation_table": table, "pre_scale": pre_scale}, notes
            if kind in nx.FIXED_RANGE_TABLES:
                out_scale, signed = nx.table_output_scale(kind, out_bits)
            else:
                out_scale, signed = nx.table_output_scale_of_range(pre_scale, rng.min, rng.max, out_bits)
            table = nx.activation_table(kind, pre_scale, out_bits, out_scale, out_bits, signed, alpha)
            return rb, signed, out_scale, {"activation_table": table, "pre_scale": pre_scale}, []
        rb, signed, notes = self.requantized(layer, acc_scale, out_bits)
        return rb, signed, nx.tensor_scale(acc_scale, rb), {}, notes

    @property
    def tidl_version(self) -> str:
        return str(getattr(self.opts, "tidl_version", "11.00"))

    @property
    def device(self) -> str:
        """§8.10.2: "lut" or "pla" (AM62A), from the options' target device when they name one."""
        return nx.table_device(getattr(self.opts, "target_device", None))

    def ti_table(self, layer: TidlLayer, kind: str, in_scale: float, in_signed: bool,
                 out_bits: int) -> Tuple[np.ndarray, bool, float, List[str]]:
        """§8.10.2 TI's 8-bit activation layer: (table over the input type, signed, tensorScale, notes).
        The output's scale as TI's import gives an activation BatchNorm layer (accScale = 2^(bits-1) x the
        input's scale, GELU: the input's scale; roundBits by §6.3 on the output's calibrated range, then
        §6.6); the table by TI's import (``ti_activation_table``), or AM62A's piecewise-linear sigmoid."""
        rng = self.range_of(layer.outputs[0])
        params = dict(layer.activation.params)
        signed = nx.table_layer_is_signed(kind)
        acc = nx.table_layer_acc_scale(kind, in_scale, out_bits)
        rb = nx.round_bits(acc, rng.min if signed else 0.0, rng.max, out_bits, signed)
        rb, notes = self.guarded(layer, rb, acc, signed)
        out_scale = nx.tensor_scale(acc, rb)
        if self.device == "pla":
            if kind != "Sigmoid":
                raise self.unsupported(layer, f"the {kind} activation on AM62A (TI computes it per element in "
                                              f"float32 there; only the sigmoid's integer form is modelled)")
            return nx.pla_sigmoid_table(in_scale, in_signed, rb), False, out_scale, notes
        table = nx.ti_activation_table(kind, in_scale, in_signed, out_scale, signed,
                                       float(params.get("alpha", 1.0)), float(params.get("beta", 0.5)))
        return table, signed, out_scale, notes

    def requantized(self, layer: TidlLayer, acc_scale: float, out_bits: int, guard: bool = True,
                    signed: Optional[bool] = None) -> Tuple[int, bool, List[str]]:
        """§6.3 (+ §6.6 unless ``guard`` is False) for a layer's one output: (roundBits, signed, notes);
        the output's signedness by §3 (``output_signed``) unless ``signed`` gives it."""
        rng = self.range_of(layer.outputs[0])
        if signed is None:
            signed = self.output_signed(layer)
        rb = nx.round_bits(acc_scale, rng.min, rng.max, out_bits, signed)
        rb, notes = self.guarded(layer, rb, acc_scale, signed) if guard else (rb, [])
        return rb, signed, notes

    # -- layer by layer
    def data_in(self, layer: TidlLayer) -> QuantizedLayer:
        t = self.net.tensors[layer.outputs[0]]
        dtype = np.dtype(t.dtype)
        if dtype.kind in "iu":
            ftype = FixedType.of(np.empty(0, dtype), f"@{self.net.name}: input '{t.name}'")
            q = self.output_tensor(layer, 0, ftype.bits, ftype.signed, 1.0)   # §8.12: enters at scale 1.0
            return QuantizedLayer(layer.index, layer.name, "Data", layer.type_id, (), layer.outputs,
                                  {"direction": "in"}, acc_scale=1.0)
        if dtype != np.float32:
            raise QuantizationError(f"@{self.net.name}: input '{t.name}' is {dtype}: fixed point takes float32 or "
                                    f"8/16-bit integer inputs")
        bits = self.opts.tensor_bits
        rng = self.range_of(layer.outputs[0])
        acc = float(1 << nx.data_convert_input_q(bits, self.output_signed(layer), rng.min, rng.max,
                                                 self.opts.tidl_version))
        rb, signed, notes = self.requantized(layer, acc, bits)
        self.output_tensor(layer, 0, bits, signed, nx.tensor_scale(acc, rb))
        return QuantizedLayer(layer.index, layer.name, "Data", layer.type_id, (), layer.outputs,
                              {"direction": "in"}, round_bits=rb, acc_scale=acc, notes=tuple(notes))

    def data_out(self, layer: TidlLayer) -> QuantizedLayer:
        return QuantizedLayer(layer.index, layer.name, "Data", layer.type_id, layer.inputs, (), {"direction": "out"})

    def is_table_layer(self, layer: TidlLayer) -> bool:
        """§8.10.2: a layer TI runs as its 8-bit table over the input's values: a Sigmoid/Tanh layer, or a
        BatchNorm that is a GELU, ELU or hard sigmoid alone, with 8-bit input and output (TIDL 10.x/11.x)."""
        if layer.activation.type not in nx.TI_TABLE_ACTIVATIONS or not layer.inputs:
            return False
        if not (layer.type in ("Sigmoid", "Tanh") or _activation_only(layer)):
            return False
        x = self.tensors.get(layer.inputs[0])
        in_bits = x.bits if x is not None else self.widths(layer)[1]
        return nx.uses_ti_tables(self.tidl_version, in_bits, self.widths(layer)[1])

    def table_layer(self, layer: TidlLayer) -> QuantizedLayer:
        """§8.10.2 TI's activation layer: the table over the input's own values, no requantization before it
        (roundBits 0); a BatchNorm keeps weight 1 and bias 0 as its record (the runtime reads the table)."""
        x = self.tensors[layer.inputs[0]]
        _, out_bits = self.widths(layer)
        kind = layer.activation.type
        table, signed, out_scale, notes = self.ti_table(layer, kind, x.scale, x.signed, out_bits)
        out = self.output_tensor(layer, 0, out_bits, signed, out_scale)
        bounds = out.fixed_type.bounds
        weights: Dict[str, Any] = {}
        attrs: Dict[str, Any] = {}
        if layer.type == "BatchNorm":
            axis = int(layer.params.axis)
            channels = int(self.net.tensors[layer.inputs[0]].shape[axis])
            attrs = {"axis": axis}
            weights = {"weights": np.ones(channels, np.int8), "weight_bits": 8, "weight_scale": 1.0,
                       "bias_a": np.zeros(channels, np.int64), "bias_b": np.ones(channels, np.int64)}
        return QuantizedLayer(layer.index, layer.name, layer.type, layer.type_id, layer.inputs, layer.outputs,
                              attrs, kind.lower(), round_bits=0,
                              acc_scale=nx.table_layer_acc_scale(kind, x.scale, out_bits), bounds=bounds,
                              notes=tuple(notes), activation_table=table, pre_scale=x.scale, table_on_input=True,
                              **weights)

    def weighted(self, layer: TidlLayer) -> QuantizedLayer:
        where = self.where(layer)
        if self.is_table_layer(layer):
            return self.table_layer(layer)
        p = self.plan(layer)
        x = self.tensors[layer.inputs[0]]
        if x.is_float:
            raise self.unsupported(layer, "a float input (the output of a softmax) to a weighted layer")
        _, out_bits = self.widths(layer)
        in_scale = x.scale
        notes: List[str] = []
        ws = p.weight_scale
        if isinstance(ws, np.ndarray):
            return self.weighted_per_channel(layer, p, x, out_bits)
        if layer.type in ("Conv", "Deconv") and p.affine.has_bias and not self.bias_range:   # §4.4: conv/deconv
            ws, clipped = nx.clip_weight_scale_for_bias(ws, in_scale, p.bias_abs_max, p.weight_bits, x.signed,
                                                        self.power_of_2)
            if clipped:
                notes.append(f"weight scale clipped {p.weight_scale:.6g} -> {ws:.6g} for the bias (Weight Scale "
                             f"Clipped)")
        if ws == 0:
            raise QuantizationError(f"{where}: all weights are zero (weight scale 0)")
        extra: Dict[str, Any] = {}
        clip = self.forced_clip(layer)
        if clip is not None:   # §4.7: the weight scale moved so that accScale is outScale x 2^k
            out_scale, ws, rb = nx.clip_output_scale(clip[0], out_bits, ws, in_scale, clip[1])
            signed = clip[1]
            acc = nx.acc_scale_weighted(ws, in_scale)
            notes.append(f"output scale forced to {out_scale:.6g} by {layer.activation.type}")
        else:
            acc = nx.acc_scale_weighted(ws, in_scale)
            rb, signed, out_scale, extra, more = self.activation_stage(layer, acc, out_bits)
            notes += more
        out = self.output_tensor(layer, 0, out_bits, signed, out_scale)
        bounds, act = self.bounds(layer, out, forced=clip is not None)
        aff = p.affine
        key = (float(ws), p.weight_bits, p.weight_limit)
        found = self.cache.get(("weights", layer.index))   # the last scale's integers, the float32 weights
        if found is not None and found[0] == key:
            wq = found[1]
        elif found is not None:   # the same float weights at another scale: one fused pass (same integers)
            wq = quantize_weights_f32(found[2], ws, p.weight_bits, p.weight_limit)
            self.cache[("weights", layer.index)] = (key, wq, found[2])
        else:
            folded = aff.folded_weights()
            if np.isfinite(folded).all():
                w32 = np.asarray(folded, np.float32)
                wq = quantize_weights_f32(w32, ws, p.weight_bits, p.weight_limit)
            else:   # the plain rule names the bad weights
                w32, wq = None, nx.quantize_weights(folded, ws, p.weight_bits, p.weight_limit)
            self.cache[("weights", layer.index)] = (key, wq, w32)
        bias_scale = nx.bias_scale(p.bias_abs_max, p.weight_bits, self.power_of_2)
        if aff.has_bias and bias_scale > 0:
            if bias_calibration_applies(layer, self.tidl_version):
                self.float_biases[layer.index] = aff.bias
            bq = nx.quantize_bias(aff.bias, bias_scale, p.weight_bits)
            isf = nx.in_scale_factor(ws, in_scale, bias_scale)
            bias_a, bias_b = nx.split_bias(bq, isf, p.weight_bits, x.bits, x.signed)
        else:
            bias_a, bias_b = np.zeros(len(aff.bias), np.int64), np.ones(len(aff.bias), np.int64)
        attrs: Dict[str, Any] = {}
        if layer.type in ("Conv", "Deconv"):
            prm: ConvParams = layer.params
            attrs = {"kernel": prm.kernel, "strides": prm.strides, "pads": prm.pads, "dilations": prm.dilation,
                     "groups": prm.groups}
        elif layer.type == "BatchNorm":
            attrs = {"axis": int(layer.params.axis)}
        return QuantizedLayer(layer.index, layer.name, layer.type, layer.type_id, layer.inputs, layer.outputs, attrs,
                              act, wq, p.weight_bits, ws, bias_a, bias_b, bias_scale, int(rb), (), acc, bounds,
                              tuple(notes), **extra)

    def weighted_per_channel(self, layer: TidlLayer, p: _WeightedPlan, x: QuantizedTensor,
                             out_bits: int) -> QuantizedLayer:
        """A depthwise convolution with per-channel weights (§4.5, §8.1.1, TI's
        ``TIDL_QuantPerChannelWeight``): each channel's P2 weight scale clipped for the bias (§4.4, with
        or without BiasRange) and forced by a ReLU6/Clip (§4.7); the output's roundBits and tensorScale
        from the whole layer's weight scale (``numerics.per_channel_layer_weight_scale``); one roundBits per
        channel."""
        if layer.activation.type in NON_SATURATING:
            raise self.unsupported(layer, f"per-channel weights with the {layer.activation.type} activation")
        notes: List[str] = []
        ws = np.array(p.weight_scale, np.float64)
        if not (ws > 0).any():
            raise QuantizationError(f"{self.where(layer)}: all weights are zero (weight scale 0)")
        ws = np.where(ws > 0, ws, 1.0)   # a channel of zero weights: scale 1 (TI's stated intent)
        if p.affine.has_bias:
            clipped = [nx.clip_weight_scale_for_bias(float(s), x.scale, p.bias_abs_max, p.weight_bits, x.signed,
                                                     self.power_of_2) for s in ws]
            if any(c for _, c in clipped):
                notes.append(f"weight scale clipped for the bias in {sum(c for _, c in clipped)} channel(s) "
                             f"(Weight Scale Clipped)")
            ws = np.array([s for s, _ in clipped])
        clip = self.forced_clip(layer)
        if clip is not None:   # §4.7 per channel
            forced = [nx.clip_output_scale(clip[0], out_bits, float(s), x.scale, clip[1]) for s in ws]
            ws = np.array([w for _, w, _ in forced])
            notes.append(f"channel weight scales forced by {layer.activation.type}")
        # the output's roundBits and tensorScale from the whole layer's weight scale; a clip-forced output
        # has no §6.6 guard (TI's TIDL_UpdateScaleFactors)
        acc_ref = nx.acc_scale_weighted(p.layer_weight_scale, x.scale)
        rb0, signed, more = self.requantized(layer, acc_ref, out_bits, guard=clip is None)
        notes += more
        out_scale = nx.tensor_scale(acc_ref, rb0)
        rbs = nx.depthwise_per_channel_round_bits(ws, x.scale, out_scale)
        out = self.output_tensor(layer, 0, out_bits, signed, out_scale)
        bounds, act = self.bounds(layer, out, forced=clip is not None)
        aff = p.affine
        wq = nx.quantize_weights(aff.folded_weights(), ws.reshape(-1, 1, 1, 1), p.weight_bits, p.weight_limit)
        bias_scale = nx.bias_scale(p.bias_abs_max, p.weight_bits, self.power_of_2)
        if aff.has_bias and bias_scale > 0:
            self.float_biases[layer.index] = aff.bias
            bq = nx.quantize_bias(aff.bias, bias_scale, p.weight_bits)
            bias_a, bias_b = nx.split_bias(bq, nx.in_scale_factor(ws, x.scale, bias_scale), p.weight_bits, x.bits,
                                           x.signed)
        else:
            bias_a, bias_b = np.zeros(len(aff.bias), np.int64), np.ones(len(aff.bias), np.int64)
        prm: ConvParams = layer.params
        attrs = {"kernel": prm.kernel, "strides": prm.strides, "pads": prm.pads, "dilations": prm.dilation,
                 "groups": prm.groups}
        return QuantizedLayer(layer.index, layer.name, layer.type, layer.type_id, layer.inputs, layer.outputs, attrs,
                              act, wq, p.weight_bits, ws, bias_a, bias_b, bias_scale, rbs, (), acc_ref, bounds,
                              tuple(notes), per_channel=True)

    def pool(self, layer: TidlLayer) -> QuantizedLayer:
        prm: PoolParams = layer.params
        x = self.tensors[layer.inputs[0]]
        attrs = {"pool_type": prm.pool_type, "kernel": prm.kernel, "strides": prm.strides, "pads": prm.pads,
                 "ceil_mode": prm.ceil_mode, "global_pool": prm.global_pool}
        if prm.pool_type == "Max":
            if layer.activation.type != "none":
                raise self.unsupported(layer, "an activation on a max pool")
            out = self.output_tensor(layer, 0, x.bits, x.signed, x.scale)
            return QuantizedLayer(layer.index, layer.name, "Pool", layer.type_id, layer.inputs, layer.outputs, attrs,
                                  acc_scale=x.scale, bounds=out.fixed_type.bounds)
        if prm.pool_type != "Avg":
            raise self.unsupported(layer, f"{prm.pool_type} pooling")
        _, out_bits = self.widths(layer)
        q = nx.average_pool_q(prm.kernel, prm.strides, x.bits, prm.global_pool)
        acc = nx.acc_scale_average_pool(x.scale, q)
        rb, signed, notes = self.requantized(layer, acc, out_bits, guard=False)   # §6.6: not for average pools
        out = self.output_tensor(layer, 0, out_bits, signed, nx.tensor_scale(acc, rb))
        bounds, act = self.bounds(layer, out)
        attrs["q"] = q
        return QuantizedLayer(layer.index, layer.name, "Pool", layer.type_id, layer.inputs, layer.outputs, attrs, act,
                              round_bits=rb, acc_scale=acc, bounds=bounds, notes=tuple(notes))

    def merging(self, layer: TidlLayer) -> QuantizedLayer:
        """EltWise and Concat."""
        inputs = _operand_tensors(layer)
        xs = [self.tensors[t] for t in inputs]
        _, out_bits = self.widths(layer)
        scales = [x.scale for x in xs]
        # §6.1: min(inScale) over the inputs TI's release takes (11.x leaves out all-zero inputs)
        zero = [self.range_of(t).min == 0 and self.range_of(t).max == 0 for t in inputs]
        min_scales = nx.in_scales_for_min(scales, zero, self.opts.tidl_version)
        attrs: Dict[str, Any] = {}
        if layer.type == "EltWise":
            prm = layer.params
            if prm.constant_input:
                return self.eltwise_with_constant(layer)
            if prm.operation not in ("add", "multiply"):
                raise self.unsupported(layer, f"element-wise {prm.operation}")
            if len(xs) < 2:
                raise self.unsupported(layer, "an element-wise layer with one tensor input")
            kind = prm.eltwise_type
            attrs["eltwise_type"] = kind
            if kind == "Prod":
                acc = nx.acc_scale_eltwise_product(scales)
            elif kind == "Sum":
                acc = nx.acc_scale_eltwise_sum(min_scales, out_bits)
            else:
                acc = nx.acc_scale_eltwise_max(min_scales, out_bits)
        else:
            attrs["axis"] = layer.params.axis
            acc = nx.acc_scale_concat(min_scales, out_bits)
            kind = "Concat"
        rb, signed, notes = self.requantized(layer, acc, out_bits)
        out_scale = nx.tensor_scale(acc, rb)
        multipliers: Tuple[int, ...] = ()
        forced = False
        if kind != "Prod":   # §6.5: roundBits and the multipliers
            clip_scale = self.clip_scale(layer, out_bits)
            rb, out_scale = nx.merging_round_bits(rb, acc, clip_scale, self.bias_range)
            multipliers = nx.eltwise_multipliers(out_scale, rb, scales)
            acc = out_scale * float(1 << rb)
            forced = clip_scale is not None and out_scale == clip_scale
        out = self.output_tensor(layer, 0, out_bits, signed, out_scale)
        bounds, act = self.bounds(layer, out, forced)
        return QuantizedLayer(layer.index, layer.name, layer.type, layer.type_id, inputs, layer.outputs, attrs,
                              act, round_bits=rb, multipliers=multipliers, acc_scale=acc, bounds=bounds,
                              notes=tuple(notes))

    def layer_norm(self, layer: TidlLayer) -> QuantizedLayer:
        """§8.14: TI's LayerNorm normalizes into a signed tensor at ``pre_scale`` (its range: at most
        sqrt(W - 1) in magnitude, and no wider than the output's range mapped back through the scale and
        shift); the scale (gamma) and shift (beta) then run as a batch norm along the last axis (§4-§6:
        weights, bias, roundBits), in the same layer."""
        call = next(n for n in post_order(layer.function.body, enter_functions=False)
                    if isinstance(n, Call) and n.op_name == "nn.layer_norm")
        if layer.activation.type != "none":
            raise self.unsupported(layer, f"the {layer.activation.type} activation on a layer norm")
        shape = self.net.tensors[layer.inputs[0]].shape
        width = int(shape[-1])
        gamma = np.asarray(call.args[1].data, np.float64).reshape(-1) if call.attrs.scale else np.ones(width)
        beta = np.asarray(call.args[2].data, np.float64).reshape(-1) if call.attrs.center else np.zeros(width)
        gamma, beta = np.broadcast_to(gamma, (width,)).copy(), np.broadcast_to(beta, (width,)).copy()
        wbits, out_bits = self.widths(layer)
        rng = self.range_of(layer.outputs[0])
        bound = math.sqrt(max(width - 1, 1))
        nonzero = np.abs(gamma) > 0
        if nonzero.any():
            back = np.maximum(np.abs(rng.max - beta), np.abs(rng.min - beta))[nonzero] / np.abs(gamma[nonzero])
            bound = min(bound, float(back.max()))
        convert = nx.acc_scale_data_convert(1.0, out_bits)   # the normalized values as a data convert's (§6.1)
        pre_scale = nx.tensor_scale(convert, nx.round_bits(convert, -bound, bound, out_bits, True))
        abs_max = nx.weight_abs_max(gamma)
        if abs_max < nx.ABS_MAX_EPSILON:
            raise QuantizationError(f"{self.where(layer)}: every scale (gamma) of the layer norm is zero")
        if self.power_of_2:
            abs_max = nx.smallest_power_of_2_at_least(abs_max)
        ws = nx.weight_scale(abs_max, wbits, self.power_of_2)
        acc = nx.acc_scale_weighted(ws, pre_scale)
        rb, signed, notes = self.requantized(layer, acc, out_bits)
        out = self.output_tensor(layer, 0, out_bits, signed, nx.tensor_scale(acc, rb))
        bounds, act = self.bounds(layer, out)
        wq = nx.quantize_weights(gamma, ws, wbits)
        has_bias = bool(np.any(beta != 0))
        bias_scale = nx.bias_scale(float(np.abs(beta).max()), wbits, self.power_of_2) if has_bias else 0.0
        if has_bias and bias_scale > 0:
            bq = nx.quantize_bias(beta, bias_scale, wbits)
            bias_a, bias_b = nx.split_bias(bq, nx.in_scale_factor(ws, pre_scale, bias_scale), wbits, out_bits, True)
        else:
            bias_a, bias_b = np.zeros(width, np.int64), np.ones(width, np.int64)
        return QuantizedLayer(layer.index, layer.name, "LayerNorm", layer.type_id, layer.inputs, layer.outputs,
                              {"epsilon": float(call.attrs.epsilon), "axis": len(shape) - 1}, act, wq, wbits, ws,
                              bias_a, bias_b, bias_scale, int(rb), (), acc, bounds, tuple(notes),
                              pre_scale=pre_scale)

    def argmax(self, layer: TidlLayer) -> QuantizedLayer:
        """ArgMax over the channels: the index of the largest value (the first of equal ones), unsigned at
        scale 1 in 8 bits, or 16 when there are more than 256 channels (tidlx's choice)."""
        x = self.tensors[layer.inputs[0]]
        channels = self.net.tensors[layer.inputs[0]].shape[1]
        self.output_tensor(layer, 0, 8 if channels <= 256 else 16, False, 1.0)
        return QuantizedLayer(layer.index, layer.name, "ArgMax", layer.type_id, layer.inputs, layer.outputs,
                              {"axis": 1}, acc_scale=x.scale)

    def matmul(self, layer: TidlLayer) -> QuantizedLayer:
        """An inner product of two tensors (attention): accScale = the product of the input scales, as
        the element-wise product's (§6.1), roundBits by §6.3 on the output's range (tidlx's choice)."""
        call = next(n for n in post_order(layer.function.body, enter_functions=False)
                    if isinstance(n, Call) and n.op_name == "nn.batch_matmul")
        tensor_of = {id(p): tid for p, tid in zip(layer.function.params, layer.inputs)}
        operands = [tensor_of.get(id(a)) for a in call.args]
        if any(t is None for t in operands) or layer.activation.type != "none":
            raise self.unsupported(layer, "a matrix product of other than two tensors, or with an activation")
        xs = [self.tensors[t] for t in operands]
        _, out_bits = self.widths(layer)
        acc = nx.acc_scale_eltwise_product([x.scale for x in xs])
        rb, signed, notes = self.requantized(layer, acc, out_bits)
        out = self.output_tensor(layer, 0, out_bits, signed, nx.tensor_scale(acc, rb))
        return QuantizedLayer(layer.index, layer.name, "InnerProduct", layer.type_id, tuple(operands), layer.outputs,
                              {"transpose_a": bool(call.attrs.transpose_a), "transpose_b": bool(call.attrs.transpose_b)},
                              round_bits=rb, acc_scale=acc, bounds=out.fixed_type.bounds, notes=tuple(notes))

    def eltwise_with_constant(self, layer: TidlLayer) -> QuantizedLayer:
        """An element-wise layer of a tensor and a constant that varies along more than the channels (TI's
        import keeps it an EltWise layer with the constant as its data, ``TIDL_onnxMapAddBaseParams``):
        the constant quantized as a data convert of its values would be (§6.1, §8.12; tidlx's choice),
        held in ``weights``; then the layer as a two-input sum or product (§6.1, §6.5). ``x - c`` adds
        ``-c``, ``x / c`` multiplies by ``1/c`` (float32), ``c - x`` adds ``c`` with x's multiplier
        negated."""
        calls = [n for n in post_order(layer.function.body, enter_functions=False) if isinstance(n, Call)]
        if len(calls) != 1 or len(layer.inputs) != 1:
            raise self.unsupported(layer, "an element-wise layer with a constant input and more than one op")
        call = calls[0]
        op = call.op_name
        position = 0 if isinstance(call.args[0], Constant) else 1
        const = np.asarray(_constant_arg(call), np.float32)
        if op == "divide" and position == 0:
            raise self.unsupported(layer, "dividing a constant by a tensor")
        if op not in ("add", "subtract", "multiply", "divide"):
            raise self.unsupported(layer, f"element-wise {op} with a constant input")
        negate_x = op == "subtract" and position == 0
        if op == "subtract" and position == 1:
            const = -const
        elif op == "divide":
            const = np.float32(1.0) / const
        kind = "Prod" if op in ("multiply", "divide") else "Sum"
        x = self.tensors[layer.inputs[0]]
        _, out_bits = self.widths(layer)
        c_bits = out_bits
        c_signed = nx.feature_map_is_signed(float(const.min()))
        c_acc = data_convert_acc_scale(c_bits)
        c_rb = nx.round_bits(c_acc, float(const.min()), float(const.max()), c_bits, c_signed)
        zero = nx.all_zero_constant_scale(const)
        c_scale = nx.tensor_scale(c_acc, c_rb) if zero is None else zero
        c_type = FixedType(c_bits, c_signed)
        c_q = data_convert_to_fixed(const, c_scale, c_type)
        scales = [x.scale, c_scale]
        # §6.1: an all-zero constant's [0, 0] range leaves it out of min(inScale) (TIDL 10.x/11.x)
        min_scales = nx.in_scales_for_min(scales, [False, zero is not None], self.opts.tidl_version)
        acc = nx.acc_scale_eltwise_product(scales) if kind == "Prod" else \
            nx.acc_scale_eltwise_sum(min_scales, out_bits)
        # §3: an element-wise layer follows its inputs' types, the constant's among them
        act = layer.activation.type
        signed = nx.layer_output_is_signed("merging", act, dict(layer.activation.params).get("min"),
                                           [x.signed, c_signed])
        rb, signed, notes = self.requantized(layer, acc, out_bits, signed=signed)
        out_scale = nx.tensor_scale(acc, rb)
        multipliers: Tuple[int, ...] = ()
        forced = False
        if kind == "Sum":
            clip_scale = self.clip_scale(layer, out_bits)
            rb, out_scale = nx.merging_round_bits(rb, acc, clip_scale, self.bias_range)
            mx, mc = nx.eltwise_multipliers(out_scale, rb, scales)
            multipliers = (-mx if negate_x else mx, mc)
            acc = out_scale * float(1 << rb)
            forced = clip_scale is not None and out_scale == clip_scale
        out = self.output_tensor(layer, 0, out_bits, signed, out_scale)
        bounds, act = self.bounds(layer, out, forced)
        # the variable operand first in the kernel's operand list, the constant second
        return QuantizedLayer(layer.index, layer.name, "EltWise", layer.type_id, layer.inputs, layer.outputs,
                              {"eltwise_type": kind, "constant_operand": 1}, act, weights=c_q, weight_bits=c_bits,
                              weight_scale=c_scale, round_bits=rb, multipliers=multipliers, acc_scale=acc,
                              bounds=bounds, notes=tuple(notes) + (f"constant operand at scale {c_scale:.6g}",))

    def saturating(self, layer: TidlLayer) -> QuantizedLayer:
        """A standalone ReLU / ReLU6 / Clip layer: input scale kept, saturated (tidlx's choice)."""
        x = self.tensors[layer.inputs[0]]
        _, out_bits = self.widths(layer)
        out = self.output_tensor(layer, 0, out_bits, self.output_signed(layer), x.scale)
        bounds, act = self.bounds(layer, out, fused=False)
        return QuantizedLayer(layer.index, layer.name, "ReLU", layer.type_id, layer.inputs, layer.outputs, {}, act,
                              acc_scale=x.scale, bounds=bounds)

    def standalone_prelu(self, layer: TidlLayer) -> QuantizedLayer:
        """A PReLU / leaky ReLU layer (§8.10.1): TI's batch norm of weight 1.0 and bias 0 with the PReLU
        activation: the weight at its §4.1 scale (1.0 at scale 2^(bits-1) quantizes to 2^(bits-1) - 1),
        accScale = weightScale x inScale, the slopes on the accumulator, roundBits from the output's
        range."""
        x = self.tensors[layer.inputs[0]]
        if x.is_float:
            raise self.unsupported(layer, "a float input to a PReLU layer")
        wbits, out_bits = self.widths(layer)
        if "slope" in dict(layer.activation.params) and nx.leaky_relu_uses_table(self.tidl_version, x.bits,
                                                                                 out_bits):
            return self.leaky_relu_table_layer(layer)
        shape = self.net.tensors[layer.inputs[0]].shape
        channels = int(shape[1]) if len(shape) > 1 else 1
        ws = nx.weight_scale(1.0, wbits, self.power_of_2)
        acc = nx.acc_scale_weighted(ws, x.scale)
        rb, signed, out_scale, extra, notes = self.activation_stage(layer, acc, out_bits)
        out = self.output_tensor(layer, 0, out_bits, signed, out_scale)
        bounds, act = self.bounds(layer, out)
        return QuantizedLayer(layer.index, layer.name, "PReLU", layer.type_id, layer.inputs, layer.outputs,
                              {"axis": 1}, act, nx.quantize_weights(np.ones(channels), ws, wbits), wbits, ws,
                              np.zeros(channels, np.int64), np.ones(channels, np.int64), 0.0, rb, (), acc, bounds,
                              tuple(notes), **extra)

    def leaky_relu_table_layer(self, layer: TidlLayer) -> QuantizedLayer:
        """A standalone leaky ReLU with TIDL 10.x/11.x (§8.10.1): TI's activation batch norm with its table
        over the input's own values (``numerics.leaky_relu_table``); accScale = 2^(bits-1) x the input's
        scale (weight 1.0 at its §4.1 scale), a signed output, roundBits by §6.3 on the output's range, then
        §6.6."""
        x = self.tensors[layer.inputs[0]]
        _, out_bits = self.widths(layer)
        rng = self.range_of(layer.outputs[0])
        acc = nx.table_layer_acc_scale("LeakyReLU", x.scale, out_bits)
        rb, notes = self.guarded(layer, nx.round_bits(acc, rng.min, rng.max, out_bits, True), acc, True)
        out_scale = nx.tensor_scale(acc, rb)
        table = nx.leaky_relu_table(x.scale, x.bits, x.signed, out_scale, True, float(self.prelu_slopes(layer)[0]))
        out = self.output_tensor(layer, 0, out_bits, True, out_scale)
        shape = self.net.tensors[layer.inputs[0]].shape
        channels = int(shape[1]) if len(shape) > 1 else 1
        return QuantizedLayer(layer.index, layer.name, "PReLU", layer.type_id, layer.inputs, layer.outputs,
                              {"axis": 1}, "prelu", np.ones(channels, np.int8 if out_bits == 8 else np.int16),
                              out_bits, 1.0,
                              np.zeros(channels, np.int64), np.ones(channels, np.int64), 0.0, 0, (), acc,
                              out.fixed_type.bounds, tuple(notes) + ("TI's leaky ReLU table",),
                              activation_table=table, pre_scale=x.scale, table_on_input=True,
                              **self.prelu_fields(layer))

    def standalone_activation(self, layer: TidlLayer) -> QuantizedLayer:
        """A Sigmoid or Tanh layer: its input is the accumulator (accScale = the input's scale),
        requantized to the pre-activation type, then the activation's rule (§8.10.2); a PReLU layer is
        ``standalone_prelu``'s."""
        if layer.type == "PReLU":
            return self.standalone_prelu(layer)
        x = self.tensors[layer.inputs[0]]
        _, out_bits = self.widths(layer)
        if self.is_table_layer(layer):
            return self.table_layer(layer)
        rb, signed, out_scale, extra, notes = self.activation_stage(layer, x.scale, out_bits)
        out = self.output_tensor(layer, 0, out_bits, signed, out_scale)
        bounds, act = self.bounds(layer, out)
        return QuantizedLayer(layer.index, layer.name, layer.type, layer.type_id, layer.inputs, layer.outputs, {}, act,
                              round_bits=rb, acc_scale=x.scale, bounds=bounds, notes=tuple(notes), **extra)

    def keeping(self, layer: TidlLayer) -> QuantizedLayer:
        x = self.tensors[layer.inputs[0]]
        if layer.activation.type != "none":
            raise self.unsupported(layer, f"an activation on a {layer.type} layer")
        attrs: Dict[str, Any] = {}
        if layer.type == "Resize":
            prm = layer.params
            ratios = tuple(float(r) for r in prm.ratios)
            if any(r != int(r) or r < 1 for r in ratios):
                raise self.unsupported(layer, f"resize ratios {ratios} (integer upscales only)")
            if prm.coordinate_transformation_mode == "align_corners":
                raise self.unsupported(layer, "resize with align_corners")
            if prm.mode == "Bilinear" and prm.coordinate_transformation_mode not in ("half_pixel",
                                                                                      "pytorch_half_pixel"):
                raise self.unsupported(layer, f"bilinear resize with {prm.coordinate_transformation_mode} "
                                              f"coordinates (half_pixel only)")
            attrs = {"mode": prm.mode, "ratios": (int(ratios[0]), int(ratios[1]))}
        elif layer.type == "Transpose":
            attrs = {"perm": tuple(layer.params.perm)}
        elif layer.type == "Slice":
            attrs = {"slices": self.slices(layer)}
        elif layer.type == "Pad":
            prm = layer.params
            if prm.value != 0:
                raise self.unsupported(layer, f"padding with {prm.value} (the zero point 0 only)")
            attrs = {"pads": tuple(tuple(int(v) for v in p) for p in prm.pads)}
        elif layer.type == "DepthToSpace":
            attrs = {"block": int(layer.params.block_size), "mode": str(layer.params.mode)}
        elif layer.type == "Reduce":   # max / min: a value of the input, at its type and scale
            call = [n for n in post_order(layer.function.body, enter_functions=False) if isinstance(n, Call)][0]
            rank = len(self.net.tensors[layer.inputs[0]].shape)
            axes = tuple(sorted(int(a) % rank for a in (call.attrs.axis or range(rank))))
            attrs = {"reduce": call.op_name, "axes": axes, "keepdims": bool(call.attrs.keepdims)}
        for k in range(len(layer.outputs)):
            self.output_tensor(layer, k, x.bits, x.signed, x.scale)
        return QuantizedLayer(layer.index, layer.name, layer.type, layer.type_id, layer.inputs, layer.outputs, attrs,
                              acc_scale=x.scale)

    def slices(self, layer: TidlLayer) -> Tuple[Tuple[Tuple[int, int, int], ...], ...]:
        call = [n for n in post_order(layer.function.body, enter_functions=False) if isinstance(n, Call)][0]
        shape = tuple(int(d) for d in call.args[0].checked_type.shape)
        if call.op_name == "strided_slice":
            return (tuple((int(b), int(e), int(s)) for b, e, s in slice_ranges(shape, call.attrs)),)
        if call.op_name == "split":
            out = []
            for ranges in layer.params.ranges:
                per_axis = [(0, d, 1) for d in shape]
                for axis, b, e in ranges:
                    per_axis[axis] = (b, e, 1)
                out.append(tuple(per_axis))
            return tuple(out)
        raise self.unsupported(layer, f"a Slice layer made of {call.op_name}")

    def softmax(self, layer: TidlLayer) -> QuantizedLayer:
        """Float32 out (§8.9), unless layers of the subgraph read it (attention's A V): then unsigned at
        the layer's width with TI 11.x's fixed-point softmax scale (``numerics.softmax_fixed_output_scale``:
        8-bit 256, 16-bit 254 x the axis length), computed by TI's integer kernel; ``exp`` names its 8-bit
        exponential rule when the device's C7x core is not the default one (``devices.softmax_exp_rule``)."""
        x = self.tensors[layer.inputs[0]]
        t = self.net.tensors[layer.outputs[0]]
        readers = [c for c in self.consumers.get(t.id, ()) if not c.is_data]
        if readers:
            _, out_bits = self.widths(layer)
            length = int(self.net.tensors[layer.inputs[0]].shape[int(layer.params.axis)])
            self.output_tensor(layer, 0, out_bits, False, nx.softmax_fixed_output_scale(out_bits, length))
        else:
            self.tensors[t.id] = QuantizedTensor.float32(t.id, t.name, t.shape)
        attrs: Dict[str, Any] = {"axis": layer.params.axis}
        if self.opts.tidl_version == "08.06":   # §8.9: 08.06 pads a row narrower than the lanes too
            attrs["narrow_row_pads"] = 1
        lanes = softmax_lanes(getattr(self.opts, "target_device", None))
        if lanes != DEFAULT_SOFTMAX_LANES:      # §8.9: the denominator's lanes are the device's vector width
            attrs["lanes"] = lanes
        if readers and softmax_exp_rule(getattr(self.opts, "target_device", None)) != "double":
            attrs["exp"] = softmax_exp_rule(getattr(self.opts, "target_device", None))
        return QuantizedLayer(layer.index, layer.name, "SoftMax", layer.type_id, layer.inputs, layer.outputs,
                              attrs, acc_scale=x.scale)

    def index_input(self, layer: TidlLayer) -> QuantizedLayer:
        """§8.15: an int64 (or int32) subgraph input holds indices: TIDL takes them as int32 at scale 1."""
        self.output_tensor(layer, 0, 32, True, 1.0)
        return QuantizedLayer(layer.index, layer.name, "Data", layer.type_id, (), layer.outputs,
                              {"direction": "in"}, acc_scale=1.0)

    def topk(self, layer: TidlLayer) -> QuantizedLayer:
        """§8.15: the values keep the input's type and scale (TI's import: roundBits 0, the input's
        tensorScale), the indices are int32 at scale 1."""
        x = self.tensors[layer.inputs[0]]
        if x.bits not in (8, 16):
            raise self.unsupported(layer, "TopK of an index tensor")
        prm = layer.params
        self.output_tensor(layer, 0, x.bits, x.signed, x.scale)
        if len(layer.outputs) > 1:
            self.output_tensor(layer, 1, 32, True, 1.0)
        return QuantizedLayer(layer.index, layer.name, "TopK", layer.type_id, layer.inputs, layer.outputs,
                              {"k": int(prm.k), "axis": int(prm.axis), "largest": bool(prm.largest)},
                              acc_scale=x.scale)

    def scatter_elements(self, layer: TidlLayer) -> QuantizedLayer:
        """§8.16, TI's ScatterND form of the ScatterElements layer: the output at the updates' type; 'add'
        at the symmetric scale of its own calibrated range (TI 11.x ``TIDL_UpdateScaleFactors``) reached
        by an 8-bit multiplier and shift from the updates' scale, the others at the updates' scale; the
        data brought to the updates' scale (tidlx's choice). A constant data is held in ``weights`` (at the
        updates' type and scale), constant indices in ``attrs["indices"]`` (int32)."""
        consts = {c.role.split(".")[-1]: c.constant.data for c in layer.constants}
        if "updates" in consts or len(layer.inputs) + len(consts) != 3:
            raise self.unsupported(layer, "a ScatterElements layer with constant updates (or other than data, "
                                          "indices and updates)")
        tensors = iter(layer.inputs)
        ids = {name: None if name in consts else next(tensors) for name in ("data", "indices", "updates")}
        u = self.tensors[ids["updates"]]
        i = INDEX_TYPE if ids["indices"] is None else self.tensors[ids["indices"]].fixed_type
        d = None if ids["data"] is None else self.tensors[ids["data"]]
        if i != INDEX_TYPE or u.bits not in (8, 16) or (d is not None and d.bits not in (8, 16)):
            raise self.unsupported(layer, "a ScatterElements layer whose indices are not an index tensor or "
                                          "whose data or updates are")
        extra: Dict[str, Any] = {}
        if d is None:   # a constant data: quantized at the updates' type and scale (§8.12's rounding)
            data_q = data_convert_to_fixed(np.asarray(consts["data"], np.float32), u.scale, u.fixed_type)
            extra = {"weights": data_q, "weight_bits": u.bits, "weight_scale": u.scale}
            d = u
        reduction = layer.params.reduction
        attrs: Dict[str, Any] = {"reduction": reduction}
        notes: List[str] = []
        if "indices" in consts:
            index_values = np.asarray(consts["indices"])
            if index_values.size and (index_values.min() < -2**31 or index_values.max() >= 2**31):
                raise QuantizationError(f"{self.where(layer)}: constant indices outside int32 (TIDL's index type)")
            attrs["indices"] = index_values.astype(np.int32)
        if reduction == "add" and ids["data"] is not None and d.scale != u.scale:
            # TI forces the data's and the updates' producers to one scale: relabelled, not requantized
            d, u = self.scatter_add_common_scale(layer, ids["data"], ids["updates"])
            notes.append(f"data and updates relabelled at their smaller scale {u.scale:.6g} (TI's import)")
        out_scale = u.scale
        if reduction == "add":
            rng = self.scatter_add_range(layer)
            if abs(rng.max - rng.min) < nx.ABS_MAX_EPSILON:   # tidlx's choice: a constant output, the updates'
                notes.append("calibrated output range empty: the updates' scale")
            else:
                out_scale = nx.symmetric_range_scale(rng.min, rng.max, u.bits, u.signed)
            if out_scale / u.scale > MMA_MAX_SCALE:   # tidlx's choice: the largest ratio TI's multiplier holds
                notes.append(f"output scale {out_scale:.6g} lowered to {MMA_MAX_SCALE} x the updates' scale")
                out_scale = MMA_MAX_SCALE * u.scale
            attrs["scale"], attrs["shift"] = self.mma(layer, out_scale / u.scale, "the output")
        if d.scale != u.scale:
            attrs["data_scale"], attrs["data_shift"] = self.mma(layer, u.scale / d.scale, "the data")
            notes.append(f"data at scale {d.scale:.6g} brought to the updates' {u.scale:.6g}")
        out = self.output_tensor(layer, 0, u.bits, u.signed, out_scale)
        return QuantizedLayer(layer.index, layer.name, "ScatterElements", layer.type_id, layer.inputs,
                              layer.outputs, attrs, acc_scale=u.scale, bounds=out.fixed_type.bounds,
                              notes=tuple(notes), **extra)

    def scatter_add_common_scale(self, layer: TidlLayer, data: int, updates: int
                                 ) -> Tuple[QuantizedTensor, QuantizedTensor]:
        """§8.16 TI's forcing of an 'add' ScatterElements' data and updates to one scale (TI 11.x
        ``TIDL_UpdateScaleFactors``, ScatterND branch): both producers' tensorScale becomes the smaller of
        the two (``numerics.scatter_add_common_scale``), their roundBits unchanged -- the producers' integers
        stay, read at that scale by the scatter and by every layer quantized after it."""
        common = nx.scatter_add_common_scale(self.tensors[data].scale, self.tensors[updates].scale)
        for tid in (data, updates):
            self.tensors[tid] = dataclasses.replace(self.tensors[tid], scale=common)
        return self.tensors[data], self.tensors[updates]

    def scatter_add_range(self, layer: TidlLayer) -> TensorRange:
        """§8.16 the range an 'add' ScatterElements' output scale comes from (TI 11.x
        ``TIDL_UpdateScaleFactors``): the first layer reading the output, when it is a Slice, gives its
        range (the slice drops the out-of-range updates TI's exports add at the last line); else the
        layer's own."""
        readers = [c for c in self.consumers.get(layer.outputs[0], ()) if not c.is_data]
        if readers and readers[0].type == "Slice":
            return self.range_of(readers[0].outputs[0])
        return self.range_of(layer.outputs[0])

    def mma(self, layer: TidlLayer, ratio: float, what: str) -> Tuple[int, int]:
        try:
            return mma_scale_and_shift(ratio)
        except FixedPointError as exc:
            raise QuantizationError(f"{self.where(layer)}: {what}: {exc}") from None

    def layer(self, layer: TidlLayer) -> QuantizedLayer:
        if self.asymmetric:
            from .quantize_asym import asymmetric_layer
            merging = layer.type in ("EltWise", "Concat")
            return asymmetric_layer(self, layer, _operand_tensors(layer) if merging else layer.inputs)
        if layer.is_data and not layer.inputs and np.dtype(self.net.tensors[layer.outputs[0]].dtype) in \
                (np.dtype(np.int64), np.dtype(np.int32)):
            return self.index_input(layer)
        if layer.is_data:
            return self.data_in(layer) if not layer.inputs else self.data_out(layer)
        if layer.activation.type not in SUPPORTED_ACTIVATIONS:
            raise self.unsupported(layer, f"the {layer.activation.type} activation")
        for t in layer.inputs:
            if self.tensors[t].is_float and layer.type != "SoftMax":
                raise self.unsupported(layer, f"a float input ('{self.tensors[t].name}', a softmax output) "
                                              f"inside the subgraph")
        if layer.type == "Deconv" and tuple(layer.params.output_padding) != (0, 0):
            raise self.unsupported(layer, f"a deconvolution with output_padding {layer.params.output_padding}")
        if _is_tensor_product(layer):
            return self.matmul(layer)
        if layer.type in WEIGHTED:
            if len(layer.outputs) != 1:
                raise self.unsupported(layer, f"a {layer.type} layer with {len(layer.outputs)} outputs (a batch "
                                              f"norm's mean and variance read)")
            if layer.type == "InnerProduct" and layer.ops[0] not in ("nn.dense", "nn.matmul"):
                raise self.unsupported(layer, f"an inner product made of {layer.ops[0]}")
            rank = len(self.net.tensors[layer.inputs[0]].shape)
            if layer.type == "BatchNorm" and layer.params.axis not in (1, rank - 1):
                raise self.unsupported(layer, f"a batch norm along axis {layer.params.axis} (axis 1 or the last)")
            return self.weighted(layer)
        if layer.type == "Pool":
            return self.pool(layer)
        if layer.type in ("EltWise", "Concat"):
            return self.merging(layer)
        if layer.type == "ReLU":
            if layer.activation.type not in SATURATING:
                raise self.unsupported(layer, f"a ReLU layer with the {layer.activation.type} activation")
            return self.saturating(layer)
        if layer.type in ("PReLU", "Sigmoid", "Tanh"):
            if layer.activation.type != {"PReLU": "PReLU"}.get(layer.type, layer.type):
                raise self.unsupported(layer, f"a {layer.type} layer with the {layer.activation.type} activation")
            return self.standalone_activation(layer)
        if layer.type == "SoftMax":
            return self.softmax(layer)
        if layer.type == "ArgMax":
            return self.argmax(layer)
        if layer.type == "LayerNorm":
            return self.layer_norm(layer)
        if layer.type == "TopK":
            return self.topk(layer)
        if layer.type == "ScatterElements":
            return self.scatter_elements(layer)
        if layer.type in KEEPING:
            return self.keeping(layer)
        raise self.unsupported(layer, f"{layer.type} layers")

    def run(self, returns_tuple: bool) -> QuantizedSubgraph:
        layers = tuple(self.layer(layer) for layer in self.net.layers)
        tensors = tuple(self.tensors[t.id] for t in self.net.tensors)
        return QuantizedSubgraph(self.net.name, layers, tensors, self.net.inputs, self.net.outputs, returns_tuple,
                                 self.opts.tensor_bits,
                                 nx.P2_DYNAMIC if self.power_of_2 else
                                 nx.quantization_style(self.opts.quantization_scale_type))


def _quantize_subgraph(net: TidlNetwork, calibration: CalibrationResult, options: TidlOptions,
                       returns_tuple: bool, biases: Optional[Mapping[int, np.ndarray]] = None,
                       cache: Optional[Dict[Any, Any]] = None,
                       flow: str = "tvm") -> Tuple[QuantizedSubgraph, Dict[int, np.ndarray]]:
    if calibration.network.name != net.name:
        raise QuantizationError(f"@{net.name}: the calibration is of @{calibration.network.name}")
    quantizer = _Quantizer(net, calibration, options, biases, cache, flow)
    return quantizer.run(returns_tuple), quantizer.float_biases


def quantize_subgraph(net: TidlNetwork, calibration: CalibrationResult, options: TidlOptions,
                      returns_tuple: bool = False, flow: str = "tvm") -> QuantizedSubgraph:
    """The fixed-point form of one TIDL subgraph, from its calibrated ranges (without bias calibration,
    which needs the whole model: ``quantize_model``); ``flow`` "ort": TI's ONNX Runtime import's types."""
    return _quantize_subgraph(net, calibration, options, returns_tuple, flow=flow)[0]


@dataclass(frozen=True, eq=False)
class QuantizedModel:
    """A partitioned module with every TIDL subgraph quantized: ``subgraphs`` by function name (plain
    data), ``options``, ``calibration`` (the ranges it was made from). ``run`` emulates it: TIDL
    subgraphs in fixed point, the host part in float."""

    module: IRModule
    subgraphs: Mapping[str, QuantizedSubgraph]
    options: TidlOptions
    calibration: Mapping[str, CalibrationResult] = field(repr=False)
    _kernels: Dict[str, Any] = field(default_factory=dict, repr=False)
    #: bias calibration's mean |float - fixed| channel-mean error before each iteration (empty: not run)
    bias_calibration_errors: Tuple[float, ...] = ()
    #: (subgraph, layer index) -> the float bias the layer's bias was quantized from (after bias calibration)
    float_biases: Mapping[Tuple[str, int], np.ndarray] = field(default_factory=dict, repr=False)

    def kernel_set(self, host: str = "fast"):
        ks = self._kernels.get(host)
        if ks is None:
            ks = self._kernels[host] = fixed_point_kernel_set(self.subgraphs, host)
        return ks

    def run(self, inputs: Mapping[str, np.ndarray], *, host_kernels: str = "fast", observers: Sequence = (),
            fixed_observers: Sequence = (), config: Optional[EmulatorConfig] = None) -> List[np.ndarray]:
        """Runs @main on ``inputs``; ``fixed_observers`` see every layer of every subgraph
        (``tidlx.emulator.fixed.layers.FixedObservation``), ``observers`` the interpreter's values."""
        return run_fixed(self.module, inputs, self.kernel_set(host_kernels), observers=observers,
                         fixed_observers=fixed_observers, config=config)

    def __repr__(self) -> str:
        layers = sum(len(s.compute_layers()) for s in self.subgraphs.values())
        return (f"QuantizedModel({len(self.subgraphs)} subgraph(s), {layers} layers, "
                f"tensor_bits={self.options.tensor_bits}, quantization_scale_type="
                f"{self.options.quantization_scale_type})")


def quantize_model(partitioned: IRModule, options: TidlOptions, calibration: Mapping[str, CalibrationResult],
                   progress: Optional[Callable[[int, int], None]] = None) -> QuantizedModel:
    """Quantizes every TIDL subgraph of ``partitioned`` as TI's import does from the float pass's
    ``calibration`` (``calibrate``'s result): ``calibration_iterations`` fixed-point iterations that
    re-collect the ranges and, with BiasCalib (accuracy_level 1), calibrate the biases, then the final
    quantization (calibration_loop.py, docs/numerics.md §9). Ranges read from a quantization-parameters
    file are used as given, without iterations. ``progress(done, total)`` after each fixed-point frame."""
    from .quantize_asym import device_style

    # the device's style 4 only where tidlx has its rules (calibrate said so already)
    options = device_style(build_networks(partitioned), options, warn=False)
    if options.quant_params_proto_path and not quant_proto.from_proto(calibration):
        return quant_proto.quantize_with_proto(partitioned, options, calibration)
    if quant_proto.from_proto(calibration):   # a file's ranges and biases are used as given
        from .calibration_loop import FLOW_ATTR

        subgraphs: Dict[str, QuantizedSubgraph] = {}
        biases: Dict[Tuple[str, int], np.ndarray] = {}
        for net in build_networks(partitioned):
            result = calibration.get(net.name)
            if result is None:
                raise QuantizationError(f"@{net.name}: no calibration result (calibrate the partitioned module)")
            returns_tuple = isinstance(partitioned[net.name].body.checked_type, TupleType)
            subgraphs[net.name], found = _quantize_subgraph(net, result, options, returns_tuple,
                                                            flow=str(partitioned.attrs.get(FLOW_ATTR, "tvm")))
            biases.update({(net.name, index): b for index, b in found.items()})
        return QuantizedModel(partitioned, subgraphs, options, dict(calibration), float_biases=biases)
    from .calibration_loop import quantize_iteratively

    return quantize_iteratively(partitioned, options, calibration, progress)


#: Bias calibration's step factor: TI's import default ``biasCalibrationFactor`` 0.05 (its
#: ``setDefaultParams``, TIDL 11.x; the import tool's help text still says 0.1).
BIAS_CALIBRATION_FACTOR = 0.05


def bias_calibration_factor(iteration: int, iterations: int) -> float:
    """docs/numerics.md §9.5: the factor of one iteration, divided by 10 in the first and the last 10%
    of the iterations (``iterations // 10`` each); float32 as TI computes it (calibration_loop.py)."""
    from .calibration_loop import bias_calibration_step

    return float(bias_calibration_step(iteration, iterations))


__all__ = ["QuantizationError", "QuantizedModel", "QuantizedSubgraph", "QuantizedLayer", "QuantizedTensor",
           "quantize_subgraph", "quantize_model", "calibration_option_bits", "data_convert_acc_scale"]
