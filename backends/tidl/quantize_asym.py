"""The quantizer's style-4 layers (``quantization_scale_type`` 4, TIDL's AsymNP2; docs/numerics.md §12).

``_Quantizer.layer`` hands every layer of a style-4 subgraph to ``asymmetric_layer``: each output gets a
scale from its calibrated range and, where TI's list lets the writer and every reader take one, a zero point
(§12.2; otherwise zero point 0 at the symmetric scale); a convolution / inner product per-channel weights,
MMA multipliers and shifts and an integer bias with the zero-point terms (§12.3-§12.5); an element-wise
sum, product or max and a concat their multipliers and constants (§12.7, §12.8, §12.11); softmax, layer
norm, the tables and PReLU §12.12's rules; max pool and the data-movement layers keep their input's type,
scale and zero point. A batch norm, a deconvolution and an average pool run TI's symmetric layer (§8) on a
tensor of zero point 0 (§12.13). A layer type whose style-4 rule tidlx does not have yet is a
``QuantizationError`` naming it.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from ...emulator.fixed.arith import FixedPointError, FixedType
from ...emulator.fixed.arith_asym import activation_bounds_zp
from ...emulator.fixed.network import QuantizedLayer, QuantizedTensor
from . import asymmetric as asym
from . import numerics as nx
from .layer_params import ConvParams, PoolParams

#: the activations a style-4 layer ends in (saturation, §12.6)
ASYM_ACTIVATIONS = ("none", "ReLU", "ReLU6", "Clip")
#: the data-movement layers style 4 runs (type, scale and zero point kept, §12.8)
ASYM_KEEPING = ("Reshape", "Flatten", "Squeeze", "Transpose", "Slice", "Resize", "Pad", "DepthToSpace", "Reduce")
#: the layer types style 4 runs (docs/numerics.md §12)
ASYM_LAYER_TYPES = ("Data", "Conv", "InnerProduct", "Pool (max, average)",
                    "EltWise (sum, product, max; sum or product with a constant)", "Concat", "ReLU", "SoftMax",
                    "Sigmoid", "Tanh", "PReLU", "BatchNorm (with any activation)", "Deconv",
                    "LayerNorm") + ASYM_KEEPING


def _not_yet(q, layer, what: str):
    from .quantize import QuantizationError
    return QuantizationError(f"{q.where(layer)}: quantization_scale_type 4 (asymmetric per-channel): {what} has no "
                             f"style-4 rule in tidlx yet (docs/numerics.md §12; it runs {', '.join(ASYM_LAYER_TYPES)} "
                             f"layers with {', '.join(ASYM_ACTIVATIONS)}; a convolution or inner product also with "
                             f"{', '.join(FUSED_ACTIVATIONS)})")


def _clip_bounds(layer) -> Tuple[float, float]:
    p = dict(layer.activation.params)
    return float(p.get("min")), float(p.get("max"))


def output_range(q, layer) -> Tuple[float, float]:
    """§12.6: ReLU6 and Clip take their bounds as the output range; otherwise the calibrated range."""
    act = layer.activation.type
    if act == "ReLU6":
        return 0.0, 6.0
    if act == "Clip":
        lo, hi = _clip_bounds(layer)
        if np.isfinite(lo) and np.isfinite(hi) and lo <= hi:
            return lo, hi
    rng = q.range_of(layer.outputs[0])
    return float(rng.min), float(rng.max)


def runs_symmetric(layer) -> bool:
    """§12.13: a layer TI runs without zero-point arithmetic in style 6 (its docs' "Symmetric, Per-tensor"
    layers; ``TIDL_asymDeriveBiasTerm`` only for convolutions and inner products; the MMA global average
    pool only in TI's TFLite style): a batch norm, a deconvolution, an average pool, global or not."""
    if layer.type in ("BatchNorm", "Deconv"):
        return True
    return layer.type == "Pool" and layer.params.pool_type == "Avg"


#: §12.2 (TI's quantization guide, "TIDL Layer Quantization Restrictions": the layers whose activations are
#: "Asymmetric, Per-tensor" in style 6): the layer types whose input and output may carry a zero point; an
#: element-wise layer only as a sum, an inner product only with a constant second operand.
ZERO_POINT_LAYERS = ("Conv", "InnerProduct", "SoftMax", "Concat", "Flatten", "Reshape", "Transpose", "EltWise",
                     "LayerNorm")
#: ... of which these pass their input's zero point on as it is (TI's guide: "pass through layer")
ZERO_POINT_PASSING = ("Flatten", "Reshape", "Transpose")


def takes_zero_point(layer) -> bool:
    """§12.2 (TI: ``TIDL_doesLayerSupportAsymTensors``, as TI's quantization guide lists it): whether
    ``layer`` reads and writes tensors with a zero point in style 6. The data layers, pools, batch norms,
    deconvolutions, the table activations, PReLU, element-wise products and maxima and the data-movement
    layers other than flatten, reshape and transpose are symmetric."""
    if layer.is_data or layer.type not in ZERO_POINT_LAYERS:
        return False
    if layer.type == "EltWise":
        return layer.params.operation == "add"
    if layer.type == "InnerProduct":
        return len(layer.inputs) == 1
    return True


def read_symmetric(q, tid: int) -> bool:
    """§12.2 (TI: ``TIDL_areConsumerLayersAsym``): tensor ``tid`` is symmetric (zero point 0) when a layer
    that reads it does not take a zero point (``takes_zero_point``); **tidlx's choice**: also when one reads
    it through flatten, reshape or transpose layers, which pass the zero point on."""
    seen, todo = set(), [tid]
    while todo:
        t = todo.pop()
        for consumer in q.consumers.get(t, ()):
            if not takes_zero_point(consumer):
                return True
            if consumer.type in ZERO_POINT_PASSING and consumer.index not in seen:
                seen.add(consumer.index)
                todo.extend(consumer.outputs)
    return False


def asym_output(q, layer, bits: int) -> QuantizedTensor:
    """§12.2: the layer's output tensor, its type from the range's sign, its scale and zero point; §12.13: zero
    point 0 at the symmetric scale when the layer or one that reads the tensor is symmetric."""
    lo, hi = output_range(q, layer)
    signed = nx.feature_map_is_signed(lo)
    if not takes_zero_point(layer) or read_symmetric(q, layer.outputs[0]):
        scale, zp = asym.symmetric_scale(lo, hi, bits, signed), 0
    else:
        scale, zp = asym.activation_scale_and_zero_point(lo, hi, bits, signed)
    t = q.net.tensors[layer.outputs[0]]
    out = QuantizedTensor(t.id, t.name, t.shape, bits, signed, float(scale), int(zp))
    q.tensors[t.id] = out
    return out


def _bounds(q, layer, out: QuantizedTensor) -> Tuple[Tuple[int, int], str]:
    act = layer.activation.type
    clip = _clip_bounds(layer) if act == "Clip" else None
    try:
        bounds = activation_bounds_zp(out.fixed_type, out.zero_point, out.scale, act, clip)
    except FixedPointError as exc:
        from .quantize import QuantizationError
        raise QuantizationError(f"{q.where(layer)}: {exc}") from None
    return bounds, act.lower()


def _kept(q, layer, x: QuantizedTensor) -> None:
    for tid in layer.outputs:
        t = q.net.tensors[tid]
        q.tensors[tid] = QuantizedTensor(t.id, t.name, t.shape, x.bits, x.signed, x.scale, x.zero_point)


def data_in(q, layer) -> QuantizedLayer:
    """§12.9: a float subgraph input, symmetric (§12.2: zero point 0 at the symmetric scale of its range)."""
    t = q.net.tensors[layer.outputs[0]]
    if np.dtype(t.dtype) != np.float32:
        raise _not_yet(q, layer, f"a {np.dtype(t.dtype)} subgraph input")
    out = asym_output(q, layer, q.opts.tensor_bits)
    return QuantizedLayer(layer.index, layer.name, "Data", layer.type_id, (), layer.outputs, {"direction": "in"},
                          acc_scale=out.scale)


def width_check_range(q, layer) -> Tuple[float, float]:
    """§12.3 step 1: the output range TI's width check reads (``outData``'s min and max when
    ``TIDL_asymUpdateScalesAndShifts`` checks it): a Clip's bounds, else the calibrated range, a ReLU6's too
    (TI sets the ReLU6 range to [0, 6] only after the check)."""
    if layer.activation.type == "ReLU6":
        rng = q.range_of(layer.outputs[0])
        return float(rng.min), float(rng.max)
    return output_range(q, layer)


def weighted(q, layer) -> QuantizedLayer:
    """§12.3-§12.6: a convolution or inner product, per output channel."""
    if layer.type not in ("Conv", "InnerProduct") or (layer.type == "InnerProduct"
                                                      and layer.ops[0] not in ("nn.dense", "nn.matmul")):
        raise _not_yet(q, layer, f"a {layer.type} layer")
    if layer.activation.type in FUSED_ACTIVATIONS:
        return weighted_activation(q, layer)
    x = q.tensors[layer.inputs[0]]
    if x.is_float:
        raise q.unsupported(layer, "a float input (the output of a softmax) to a weighted layer")
    wbits, out_bits = q.widths(layer)
    out = asym_output(q, layer, out_bits)
    channels, shape = _quantize_channels(q, layer, x, (out.scale, out.zero_point), wbits,
                                         width_check_range(q, layer))
    bounds, act = _bounds(q, layer, out)
    return _channel_record(layer, x, channels, shape, wbits, {}, act, bounds, ())


def _quantize_channels(q, layer, x: QuantizedTensor, target: Tuple[float, int], wbits: int,
                       checked: Tuple[float, float]):
    """§12.3-§12.5: the folded weights and bias of a convolution or inner product, per output channel, for an
    output at ``target`` (scale, zero point), and the weights' shape; registers the float bias that bias
    calibration moves (§12.10)."""
    p = q.plan(layer)
    w = np.asarray(p.affine.folded_weights(), np.float32)
    bias = np.asarray(p.affine.bias, np.float64)
    from .quantize import BIAS_CALIBRATED
    if p.affine.has_bias and layer.type in BIAS_CALIBRATED:
        q.float_biases[layer.index] = p.affine.bias
    return asym.quantize_channels(w, bias, x.scale, x.zero_point, target[0], target[1], wbits, checked,
                                  layer.type == "InnerProduct"), w.shape


def _channel_record(layer, x: QuantizedTensor, channels, shape, wbits: int, attrs: Dict[str, Any], act: str, bounds,
                    notes: Tuple[str, ...], **extra) -> QuantizedLayer:
    """The per-channel record of a style-4 convolution or inner product: its integer weights, scales, biases
    and MMA factors, a convolution's geometry in ``attrs``, a note for each bias-only channel."""
    wq = np.stack([ch.weights for ch in channels]).reshape(shape)
    notes = notes + tuple(f"output channel {c}: bias term beyond its container, the channel is its bias"
                          for c, ch in enumerate(channels) if ch.zeroed)
    if layer.type == "Conv":
        prm: ConvParams = layer.params
        attrs = {**attrs, "kernel": prm.kernel, "strides": prm.strides, "pads": prm.pads, "dilations": prm.dilation,
                 "groups": prm.groups}
    ws = np.array([ch.weight_scale for ch in channels])
    return QuantizedLayer(layer.index, layer.name, layer.type, layer.type_id, layer.inputs, layer.outputs, attrs, act,
                          wq, wbits, ws, np.array([ch.bias for ch in channels], np.int64),
                          np.ones(len(channels), np.int64), 0.0, 0, (), float(x.scale) * float(ws.max()), bounds,
                          notes, per_channel=True,
                          mma_scale=np.array([ch.mma_scale for ch in channels], np.int64),
                          mma_shift=np.array([ch.mma_shift for ch in channels], np.int64), **extra)


def pool(q, layer) -> QuantizedLayer:
    """§12.8: max pool keeps its input; an average pool, global or not, is TI's symmetric layer (§12.13)."""
    prm: PoolParams = layer.params
    x = q.tensors[layer.inputs[0]]
    attrs = {"pool_type": prm.pool_type, "kernel": prm.kernel, "strides": prm.strides, "pads": prm.pads,
             "ceil_mode": prm.ceil_mode, "global_pool": prm.global_pool}
    if prm.pool_type == "Max":
        if layer.activation.type != "none":
            raise _not_yet(q, layer, "an activation on a max pool")
        _kept(q, layer, x)
        return QuantizedLayer(layer.index, layer.name, "Pool", layer.type_id, layer.inputs, layer.outputs, attrs,
                              acc_scale=x.scale, bounds=x.fixed_type.bounds)
    if prm.pool_type != "Avg":
        raise _not_yet(q, layer, f"a {prm.pool_type} pool")
    return symmetric(q, layer)


def symmetric_form_gap(q_net, layer) -> Optional[str]:
    """What of a symmetric layer's form (§12.13) the symmetric styles refuse too, or None."""
    if layer.type == "Deconv" and tuple(layer.params.output_padding) != (0, 0):
        return f"a deconvolution with output_padding {layer.params.output_padding}"
    if layer.type == "BatchNorm":
        if len(layer.outputs) != 1:
            return f"a BatchNorm layer with {len(layer.outputs)} outputs (a batch norm's mean and variance read)"
        rank = len(q_net.tensors[layer.inputs[0]].shape)
        if layer.params.axis not in (1, rank - 1):
            return f"a batch norm along axis {layer.params.axis} (axis 1 or the last)"
    return None


def symmetric(q, layer) -> QuantizedLayer:
    """§12.13: a batch norm, deconvolution or spatial average pool as TI runs them in style 6: the
    symmetric layer of §8 (per-tensor weights, roundBits, §6's output scale, zero point 0) on an input of
    zero point 0 (``read_symmetric`` made it so)."""
    x = q.tensors[layer.inputs[0]]
    if x.is_float:
        raise q.unsupported(layer, f"a float input to a {layer.type} layer")
    if x.zero_point != 0:
        from .quantize import QuantizationError
        raise QuantizationError(f"{q.where(layer)}: quantization_scale_type 4: its input '{x.name}' has zero "
                                f"point {x.zero_point}; TI's {layer.type} layer has no zero-point term "
                                f"(docs/numerics.md §12.13)")
    gap = symmetric_form_gap(q.net, layer)
    if gap is not None:
        raise q.unsupported(layer, gap)
    return q.pool(layer) if layer.type == "Pool" else q.weighted(layer)


def concat(q, layer, operands) -> QuantizedLayer:
    """§12.8: inputs that share their scale, zero point and type are only joined (the output takes them);
    otherwise each input is brought to the output's scale and zero point by its multiplier, shift and
    bias."""
    xs = [q.tensors[t] for t in operands]
    if any(x.is_float for x in xs):
        raise q.unsupported(layer, "a float input (the output of a softmax) to a concat")
    first = xs[0]
    if all((x.scale, x.zero_point, x.bits, x.signed) == (first.scale, first.zero_point, first.bits, first.signed)
           for x in xs[1:]) and (first.zero_point == 0 or not read_symmetric(q, layer.outputs[0])):
        _kept(q, layer, first)
        out = q.tensors[layer.outputs[0]]
        factors = [(1, 0, 0)] * len(xs)
        notes: Tuple[str, ...] = ("inputs at one scale and zero point: joined as they are",)
    else:
        wbits, out_bits = q.widths(layer)
        out = asym_output(q, layer, out_bits)
        try:
            factors = [asym.concat_factors(out.scale, x.scale, out.zero_point, x.zero_point, wbits) for x in xs]
        except FixedPointError as exc:
            raise q.unsupported(layer, f"its scales ({exc})") from None
        notes = ()
    bounds, act = _bounds(q, layer, out)
    return QuantizedLayer(layer.index, layer.name, "Concat", layer.type_id, tuple(operands), layer.outputs,
                          {"axis": layer.params.axis}, act, bias_a=np.array([f[2] for f in factors], np.int64),
                          acc_scale=out.scale, bounds=bounds, notes=notes,
                          mma_scale=np.array([f[0] for f in factors], np.int64),
                          mma_shift=np.array([f[1] for f in factors], np.int64))


#: §12.7, §12.11: the element-wise operations of two tensors style 4 runs, by Relay op
ASYM_ELTWISE_OPS = {"add": "Sum", "multiply": "Prod", "maximum": "Max"}
#: §12.11: the operations with a constant operand style 4 runs, and the kind each becomes
ASYM_CONSTANT_OPS = {"add": "Sum", "subtract": "Sum", "multiply": "Prod", "divide": "Prod"}


def _constant_operand(layer):
    """§12.11: (op, constant as the second operand's values) of an element-wise layer with a constant, or a
    string naming what style 4 has no rule for."""
    from ...ir.expr import Call, Constant
    from ...ir.traversal import post_order
    calls = [n for n in post_order(layer.function.body, enter_functions=False) if isinstance(n, Call)] \
        if layer.function is not None else []
    if len(calls) != 1 or len(layer.inputs) != 1:
        return "an element-wise layer with a constant input and more than one op"
    call = calls[0]
    consts = [a for a in call.args if isinstance(a, Constant)]
    if call.op_name not in ASYM_CONSTANT_OPS or len(consts) != 1:
        return f"element-wise {call.op_name} with a constant input"
    if call.op_name in ("subtract", "divide") and isinstance(call.args[0], Constant):
        return f"element-wise {call.op_name} of a constant by a tensor"
    const = np.asarray(consts[0].data, np.float32)
    if call.op_name == "subtract":
        const = -const
    elif call.op_name == "divide":
        with np.errstate(divide="ignore"):
            const = np.float32(1.0) / const
    if not np.all(np.isfinite(const)):
        return f"element-wise {call.op_name} by a constant that is not finite (or divides by zero)"
    return call.op_name, const


def _eltwise_gap(layer) -> Optional[str]:
    prm = layer.params
    if prm.constant_input:
        form = _constant_operand(layer)
        return form if isinstance(form, str) else None
    if prm.operation not in ASYM_ELTWISE_OPS:
        return f"element-wise {prm.operation}"
    if prm.num_inputs < 2:
        return f"an element-wise {prm.operation} of one tensor"
    return None


def _constant_tensor(q, layer, const: np.ndarray, bits: int) -> Tuple[QuantizedTensor, np.ndarray]:
    """§12.11 (TI 11.x: ``TIDL_asymUpdateScalesAndShifts`` on an element-wise layer's constant input): a signed
    tensor of its own, §12.2's scale and zero point from its minimum and maximum, its integers by §12.9."""
    from ...emulator.fixed.arith_asym import data_convert_to_fixed_zp
    scale, zp = asym.activation_scale_and_zero_point(float(const.min()), float(const.max()), bits, True)
    values = data_convert_to_fixed_zp(const, scale, zp, FixedType(bits, True))
    return QuantizedTensor(-1, f"{layer.name}:constant", tuple(const.shape), bits, True, float(scale), int(zp)), values


def eltwise(q, layer, operands) -> QuantizedLayer:
    """§12.7, §12.11: an element-wise sum, product or max of two tensors, or of a tensor and a constant."""
    if layer.type == "Concat":
        return concat(q, layer, operands)
    gap = _eltwise_gap(layer)
    if gap is not None:
        raise _not_yet(q, layer, gap)
    wbits, out_bits = q.widths(layer)
    attrs: Dict[str, Any] = {}
    weights = None
    notes: Tuple[str, ...] = ()
    if layer.params.constant_input:
        op, const = _constant_operand(layer)
        kind = ASYM_CONSTANT_OPS[op]
        c, weights = _constant_tensor(q, layer, const, 16 if wbits > 8 else 8)
        xs = [q.tensors[layer.inputs[0]], c]
        operands = tuple(layer.inputs)
        attrs["constant_operand"] = 1
        notes = (f"constant operand at scale {c.scale:.6g}, zero point {c.zero_point}",)
    else:
        kind = ASYM_ELTWISE_OPS[layer.params.operation]
        xs = [q.tensors[t] for t in operands]
    if any(x.is_float for x in xs):
        raise q.unsupported(layer, "a float input (the output of a softmax) to an element-wise layer")
    out = asym_output(q, layer, out_bits)
    scales, zps = [x.scale for x in xs], [x.zero_point for x in xs]
    mult: Tuple[int, ...] = ()
    try:
        if kind == "Sum":
            mult, k, c_scale, shift = asym.sum_factors(out.scale, scales, out.zero_point, zps, wbits)
        elif kind == "Prod":
            c_scale, shift, k = asym.product_factors(out.scale, scales, out.zero_point, wbits)
        else:
            mult, k, c_scale, shift = asym.max_factors(out.scale, scales, out.zero_point, wbits)
    except FixedPointError as exc:
        raise q.unsupported(layer, f"its scales ({exc})") from None
    bounds, act = _bounds(q, layer, out)
    attrs.update({"eltwise_type": kind, "zero_points": tuple(int(z) for z in zps)})
    return QuantizedLayer(layer.index, layer.name, "EltWise", layer.type_id, tuple(operands), layer.outputs,
                          attrs, act, weights=weights, weight_bits=xs[-1].bits if weights is not None else 0,
                          weight_scale=xs[-1].scale if weights is not None else None, bias_a=int(k),
                          multipliers=tuple(int(m) for m in mult), acc_scale=out.scale * float(1 << shift) / c_scale,
                          bounds=bounds, notes=notes, mma_scale=int(c_scale), mma_shift=int(shift))


def keeping(q, layer) -> QuantizedLayer:
    """§12.8: the symmetric styles' data-movement record (its parameters and checks), its outputs with the
    input's zero point as well."""
    if layer.activation.type != "none":
        raise _not_yet(q, layer, f"an activation on a {layer.type} layer")
    record = q.keeping(layer)
    _kept(q, layer, q.tensors[layer.inputs[0]])
    return record


def saturating(q, layer) -> QuantizedLayer:
    """§12.6, tidlx's choice for a ReLU/ReLU6/Clip layer of its own: the input's type, scale and zero point
    kept, saturated to the activation's bounds at them."""
    x = q.tensors[layer.inputs[0]]
    if x.is_float:
        raise q.unsupported(layer, "a float input to a saturation layer")
    _kept(q, layer, x)
    bounds, act = _bounds(q, layer, q.tensors[layer.outputs[0]])
    return QuantizedLayer(layer.index, layer.name, "ReLU", layer.type_id, layer.inputs, layer.outputs, {}, act,
                          acc_scale=x.scale, bounds=bounds)


def softmax(q, layer) -> QuantizedLayer:
    """§12.12 (TI: ``TIDL_softmaxRefProcess`` and ``TIDL_refSoftmaxProcessInt``, TIDL 11.x): both kernels
    read ``q - max(q)`` along the axis, so the input's zero point cancels and §8.9 runs on the integers as
    they are; a fixed-point output is unsigned with zero point 0 at TI's softmax scale (TI's import:
    ``TIDL_UpdateScaleFactors``, "always have unsigned output with ZP=0"), a float32 one stays float."""
    if q.tensors[layer.inputs[0]].is_float:
        raise q.unsupported(layer, "a float input to a softmax")
    return q.softmax(layer)


def layer_norm(q, layer) -> QuantizedLayer:
    """§12.12 (TI: ``TIDL_refLayerNormCore``, TIDL 11.x): the row's sums enter as ``W q - S1`` and ``W S2 -
    S1^2``, which a common shift of every ``q`` leaves as they are, so the input's zero point cancels; TI's
    kernel adds no output zero point. §8.14 runs as it is, its output at zero point 0."""
    if q.tensors[layer.inputs[0]].is_float:
        raise q.unsupported(layer, "a float input to a layer norm")
    return q.layer_norm(layer)


#: §12.12: the activations a style-4 convolution or inner product runs besides saturation
FUSED_ACTIVATIONS = ("PReLU",) + nx.TABLE_ACTIVATIONS


def weighted_activation(q, layer) -> QuantizedLayer:
    """§12.12: a convolution or inner product ending in a PReLU / leaky ReLU or a table activation. PReLU: the
    channels quantized for the output's scale with zero point 0 (§12.3-§12.5), the accumulator then takes
    the positive or the channel's negative multiplier and the output's zero point (``prelu_requantize``).
    Table: the channels requantize to a signed pre-activation tensor whose range is the output's mapped back
    through the function (§8.10.2's ``table_pre_range``), scale and zero point by §12.2; TI's table (or
    AM62A's sigmoid) then reads it."""
    x = q.tensors[layer.inputs[0]]
    if x.is_float:
        raise q.unsupported(layer, "a float input (the output of a softmax) to a weighted layer")
    kind = layer.activation.type
    wbits, out_bits = q.widths(layer)
    rng = q.range_of(layer.outputs[0])
    params = dict(layer.activation.params)
    extra: Dict[str, Any] = {}
    attrs: Dict[str, Any] = {}
    notes: Tuple[str, ...] = ()
    if kind == "PReLU":
        out = asym_output(q, layer, out_bits)
        target = (out.scale, 0)
        checked = (float(rng.min), float(rng.max))
    else:
        if not asym.style4_table_widths(q.tidl_version, out_bits, out_bits):
            raise _not_yet(q, layer, f"a {kind} activation of {out_bits} bits with tidl_version {q.tidl_version} "
                                     f"(style 4 runs the 8- and 16-bit tables of TIDL 10.x/11.x)")
        plo, phi = nx.table_pre_range(kind, rng.min, rng.max, out_bits, float(params.get("alpha", 1.0)))
        pre_scale, pre_zp = asym.activation_scale_and_zero_point(plo, phi, out_bits, True)
        target = (pre_scale, pre_zp)
        checked = (float(plo), float(phi))
        attrs["pre_zero_point"] = int(pre_zp)
        out, table, notes = _table(q, layer, pre_scale, pre_zp, True, out_bits)
        extra = {"activation_table": table, "pre_scale": float(pre_scale)}
    channels, shape = _quantize_channels(q, layer, x, target, wbits, checked)
    if kind == "PReLU":
        slopes = np.broadcast_to(q.prelu_slopes(layer), (len(channels),))
        neg = [asym.prelu_factors(out.scale, float(np.float32(np.float32(x.scale) * np.float32(ch.weight_scale))),
                                  [a], wbits)[1][0]
               for ch, a in zip(channels, slopes)]
        attrs["negative_shifts"] = tuple(s for _, s in neg)
        extra = {"prelu_slopes": np.array([m for m, _ in neg], np.int64), "prelu_shift": 0}
    return _channel_record(layer, x, channels, shape, wbits, attrs, kind.lower(), out.fixed_type.bounds, notes,
                           **extra)


def _table(q, layer, in_scale: float, in_zp: int, in_signed: bool, out_bits: int):
    """§12.12: the output tensor, table and notes of the layer's table activation on an input at
    ``in_scale``/``in_zp``: TI's table with both zero points (``asym.activation_table_zp``), the output's
    scale and zero point by §12.2; AM62A's 8-bit sigmoid: the piecewise-linear integers, unsigned, zero
    point 0 (``asym.pla_sigmoid_output``)."""
    kind = layer.activation.type
    params = dict(layer.activation.params)
    t = q.net.tensors[layer.outputs[0]]
    if q.device == "pla" and out_bits == 8:
        if kind != "Sigmoid":
            raise q.unsupported(layer, f"the {kind} activation on AM62A (TI computes it per element in float32 there; "
                                       f"only the sigmoid's integer form is modelled)")
        rb, scale = asym.pla_sigmoid_output(in_scale, q.range_of(t.id).max, out_bits)
        out = QuantizedTensor(t.id, t.name, t.shape, out_bits, False, float(scale), 0)
        q.tensors[t.id] = out
        return out, asym.pla_sigmoid_table_zp(in_scale, in_zp, in_signed, rb), ("AM62A's piecewise-linear sigmoid",)
    out = asym_output(q, layer, out_bits)
    try:
        table = asym.activation_table_zp(kind, in_scale, in_zp, in_signed, out.scale, out.zero_point, out.signed,
                                         float(params.get("alpha", 1.0)), float(params.get("beta", 0.5)), out_bits)
    except FixedPointError as exc:
        raise q.unsupported(layer, str(exc)) from None
    return out, table, ()


#: §12.12: the standalone layers of TI's table and PReLU rules in style 4
ASYM_TABLE_LAYERS = ("Sigmoid", "Tanh")


def _activation_layer(layer) -> bool:
    """A layer that is its activation alone: a Sigmoid/Tanh/PReLU layer, or TI's activation BatchNorm (a GELU,
    ELU or hard sigmoid alone)."""
    if layer.type in ASYM_TABLE_LAYERS + ("PReLU",):
        return layer.activation.type == {"PReLU": "PReLU"}.get(layer.type, layer.type)
    if layer.type == "BatchNorm" and layer.activation.type in nx.TI_TABLE_ACTIVATIONS:
        from .quantize import _activation_only
        return _activation_only(layer)
    return False


def _channels(q, layer) -> int:
    shape = q.net.tensors[layer.inputs[0]].shape
    return int(shape[1]) if len(shape) > 1 else 1


def table_activation(q, layer) -> QuantizedLayer:
    """§12.12: a standalone sigmoid, tanh, GELU, ELU or hard sigmoid with input and output of one width, 8 or
    16 bits (TIDL 10.x/11.x): TI's table over the input's own values with both zero points
    (``asym.activation_table_zp``; 16 bits: tidlx's choice), the output's scale and zero point by §12.2 from
    its calibrated range (tidlx's choice); AM62A's 8-bit sigmoid: the piecewise-linear integers with
    ``|q - Zx|``, unsigned, zero point 0 (``asym.pla_sigmoid_output``)."""
    x = q.tensors[layer.inputs[0]]
    if x.is_float:
        raise q.unsupported(layer, "a float input to an activation layer")
    kind = layer.activation.type
    _, out_bits = q.widths(layer)
    if not asym.style4_table_widths(q.tidl_version, x.bits, out_bits):
        raise _not_yet(q, layer, f"a {kind} layer of {x.bits}-bit input and {out_bits}-bit output with tidl_version "
                                 f"{q.tidl_version} (style 4 runs the 8- and 16-bit tables of TIDL 10.x/11.x)")
    out, table, notes = _table(q, layer, x.scale, x.zero_point, x.signed, out_bits)
    weights: Dict[str, Any] = {}
    attrs: Dict[str, Any] = {}
    if layer.type == "BatchNorm":
        channels = int(q.net.tensors[layer.inputs[0]].shape[int(layer.params.axis)])
        attrs = {"axis": int(layer.params.axis)}
        weights = {"weights": np.ones(channels, np.int8), "weight_bits": 8, "weight_scale": 1.0,
                   "bias_a": np.zeros(channels, np.int64), "bias_b": np.ones(channels, np.int64)}
    return QuantizedLayer(layer.index, layer.name, layer.type, layer.type_id, layer.inputs, layer.outputs, attrs,
                          kind.lower(), round_bits=0, acc_scale=x.scale, bounds=out.fixed_type.bounds, notes=notes,
                          activation_table=table, pre_scale=x.scale, table_on_input=True, **weights)


def prelu(q, layer) -> QuantizedLayer:
    """§12.12: a standalone PReLU / leaky ReLU. A leaky ReLU of one width, 8 or 16 bits, with TIDL 10.x/11.x
    is TI's table with both zero points (``asym.leaky_relu_table_zp``); otherwise tidlx's rule: ``q - zx``
    times the positive or its channel's negative multiplier (``asym.prelu_factors``), the output's zero
    point added (``arith_asym.prelu_mma``). The output's scale and zero point by §12.2."""
    x = q.tensors[layer.inputs[0]]
    if x.is_float:
        raise q.unsupported(layer, "a float input to a PReLU layer")
    wbits, out_bits = q.widths(layer)
    slopes = q.prelu_slopes(layer)
    out = asym_output(q, layer, out_bits)
    channels = _channels(q, layer)
    # the record keeps a batch norm's weight 1 and bias 0 (TI runs a PReLU as one); the rules below read neither
    record = {"weights": np.ones(channels, np.int8 if wbits == 8 else np.int16), "weight_bits": wbits,
              "weight_scale": 1.0, "bias_a": np.zeros(channels, np.int64), "bias_b": np.ones(channels, np.int64)}
    if "slope" in dict(layer.activation.params) and nx.leaky_relu_uses_table(q.tidl_version, x.bits, out_bits):
        table = asym.leaky_relu_table_zp(x.scale, x.zero_point, x.bits, x.signed, out.scale, out.zero_point,
                                         out.signed, float(slopes[0]))
        return QuantizedLayer(layer.index, layer.name, "PReLU", layer.type_id, layer.inputs, layer.outputs,
                              {"axis": 1}, "prelu", round_bits=0, acc_scale=x.scale, bounds=out.fixed_type.bounds,
                              notes=("TI's leaky ReLU table",), activation_table=table, pre_scale=x.scale,
                              table_on_input=True, **record)
    if slopes.size not in (1, channels):
        raise q.unsupported(layer, f"{slopes.size} PReLU slopes for {channels} channels")
    pos, neg = asym.prelu_factors(out.scale, x.scale, np.broadcast_to(slopes, (channels,)), wbits)
    return QuantizedLayer(layer.index, layer.name, "PReLU", layer.type_id, layer.inputs, layer.outputs,
                          {"axis": 1, "negative_shifts": tuple(s for _, s in neg)}, "prelu", acc_scale=x.scale,
                          bounds=out.fixed_type.bounds, prelu_slopes=np.array([m for m, _ in neg], np.int64),
                          prelu_shift=0, mma_scale=int(pos.scale), mma_shift=int(pos.shift), **record)


def _table_gap(layer, options) -> Optional[str]:
    """§12.12: style 4 has the 8- and 16-bit tables of TIDL 10.x/11.x only; ``options`` (when given) say the
    width and the TIDL version."""
    kind = layer.activation.type
    if options is None or kind not in nx.TI_TABLE_ACTIVATIONS:
        return None
    bits, version = int(getattr(options, "tensor_bits", 8)), str(getattr(options, "tidl_version", "11.00"))
    return None if asym.style4_table_widths(version, bits, bits) else \
        f"a {bits}-bit {kind} table with tidl_version {version}"


def style4_gap(net, layer, options=None) -> Optional[str]:
    """What in ``layer`` (of the TIDL network ``net``) style 4 has no rule for yet, or None: the layer
    types, activations and forms ``asymmetric_layer`` runs (docs/numerics.md §12); ``options`` add the
    width and version checks of §12.12's tables."""
    if layer.is_data:
        if layer.inputs:
            return None
        dtype = np.dtype(net.tensors[layer.outputs[0]].dtype)
        return None if dtype == np.float32 else f"a {dtype} subgraph input"
    if _activation_layer(layer):
        return _table_gap(layer, options)
    if runs_symmetric(layer):   # TI's symmetric layer with its own activations (§12.13)
        return symmetric_form_gap(net, layer)
    if layer.activation.type not in ASYM_ACTIVATIONS and not (layer.activation.type in FUSED_ACTIVATIONS
                                                              and layer.type in ("Conv", "InnerProduct")):
        return f"the {layer.activation.type} activation"
    if layer.activation.type in FUSED_ACTIVATIONS and _table_gap(layer, options):
        return _table_gap(layer, options)
    if layer.type in ("Conv", "InnerProduct"):
        if layer.type == "InnerProduct" and len(layer.inputs) == 2:
            return "an inner product of two tensors"
        if layer.type == "InnerProduct" and layer.ops[0] not in ("nn.dense", "nn.matmul"):
            return f"a {layer.type} layer"
        return None
    if layer.type == "Pool":
        prm = layer.params
        if prm.pool_type == "Max":
            return "an activation on a max pool" if layer.activation.type != "none" else None
        return None if prm.pool_type == "Avg" else f"a {prm.pool_type} pool"
    if layer.type == "EltWise":
        return _eltwise_gap(layer)
    if layer.type in ASYM_KEEPING:
        return f"an activation on a {layer.type} layer" if layer.activation.type != "none" else None
    if layer.type in ("Concat", "ReLU", "SoftMax", "LayerNorm"):
        return None
    return f"a {layer.type} layer"


def asymmetric_layer(q, layer, operands) -> QuantizedLayer:
    """One layer of a style-4 subgraph (``q`` the ``_Quantizer``; ``operands`` a merging layer's inputs)."""
    gap = style4_gap(q.net, layer, q.opts)
    if gap is not None:
        raise _not_yet(q, layer, gap)
    if layer.is_data:
        if layer.inputs:
            return QuantizedLayer(layer.index, layer.name, "Data", layer.type_id, layer.inputs, (),
                                  {"direction": "out"})
        return data_in(q, layer)
    if _activation_layer(layer):
        return prelu(q, layer) if layer.type == "PReLU" else table_activation(q, layer)
    if layer.type in ("BatchNorm", "Deconv"):
        return symmetric(q, layer)
    if layer.activation.type not in ASYM_ACTIVATIONS and layer.type not in ("Conv", "InnerProduct"):
        raise _not_yet(q, layer, f"the {layer.activation.type} activation")
    if layer.type in ("Conv", "InnerProduct"):
        if layer.type == "InnerProduct" and len(layer.inputs) == 2:
            raise _not_yet(q, layer, "an inner product of two tensors")
        return weighted(q, layer)
    if layer.type == "Pool":
        return pool(q, layer)
    if layer.type in ("EltWise", "Concat"):
        return eltwise(q, layer, operands)
    if layer.type in ASYM_KEEPING:
        return keeping(q, layer)
    if layer.type == "ReLU":
        return saturating(q, layer)
    if layer.type == "SoftMax":
        return softmax(q, layer)
    if layer.type == "LayerNorm":
        return layer_norm(q, layer)
    raise _not_yet(q, layer, f"a {layer.type} layer")


__all__ = ["ASYM_ACTIVATIONS", "ASYM_KEEPING", "ASYM_LAYER_TYPES", "asymmetric_layer", "device_style", "output_range",
           "read_symmetric", "runs_symmetric", "style4_gap", "takes_zero_point",
           "ZERO_POINT_LAYERS", "ZERO_POINT_PASSING"]


def device_style(networks, options, warn: bool = True):
    """``options`` for quantizing ``networks`` (the TIDL networks of a partitioned model): style 4 taken
    from ``target_device`` (TI's tools' preset, not asked for) stays only when tidlx has a style-4 rule for
    every layer; else, with a warning naming the first layers it lacks, TIDL's own default style 0.
    A ``quantization_scale_type`` 4 the user gave is kept (a layer without a rule is then an error)."""
    if options.quantization_scale_type != 4 or "quantization_scale_type" in getattr(options, "_given", ()):
        return options
    gaps = [(net.name, layer.name, gap) for net in networks for layer in net.layers
            if (gap := style4_gap(net, layer, options)) is not None]
    if not gaps:
        return options
    if warn:
        import warnings

        from ...ir.errors import TidlxWarning

        named = "; ".join(f"@{sub} '{name}': {gap}" for sub, name, gap in gaps[:3])
        more = f" and {len(gaps) - 3} more" if len(gaps) > 3 else ""
        warnings.warn(f"target_device={options.target_device}: TI's tools quantize with quantization_scale_type 4 "
                      f"(asymmetric per-channel) there, but tidlx has no style-4 rule yet for {named}{more} "
                      f"(docs/numerics.md §12); tidlx uses TIDL's default quantization_scale_type 0 (give "
                      f"-o advanced_options:quantization_scale_type=0 or =4 to choose)", TidlxWarning, stacklevel=2)
    return options.replace(quantization_scale_type=0)
