"""TIDL's import-side numerics: one function per rule of docs/numerics.md (§1.4, §2-§6, §8.1.1).

How a layer's scales, integer weights, bias parts (biasA x biasB), roundBits and tensorScale are
chosen. Weight scales, weight and bias products, the bias clip of the weight scale, the forced clip
scale, inScaleFactor and the split's product, roundBits' ``m`` and tensorScale are float32 as in TI's
import, with TI's double ``ceil(log(x) / log(2))`` where TI takes one (docs/numerics.md §1.3,
``ti_ceil_log2``). Weights, biases and shifts come out as integers,
ready for the runtime rules in ``tidlx.emulator.fixed``.
"""

from __future__ import annotations

import math
from typing import Iterable, Optional, Sequence, Tuple

import numpy as np

from ...emulator.fixed.arith import FixedPointError, FixedType, activation_bounds, saturation_bounds

#: §2: quantization_scale_type -> TI's quantizationStyle (TIDL-NUMERICS.md, "Scales and styles")
NP2_FIXED = 2
P2_DYNAMIC = 3
ASYM_NP2 = 6
#: §6.1: softmax and argmax outputs have scale 1.0 and roundBits 0
SOFTMAX_OUTPUT_SCALE = 1.0
#: §6.4: a tensorScale of 0 becomes C's FLT_MIN
FLT_MIN = 2.0 ** -126
#: §4.1, §5.1: an absMax below this gives scale 0
ABS_MAX_EPSILON = 1e-15


def ti_ceil_log2(a: float) -> int:
    """§1.4: TI's ``ceil(log(a) / log(2.0))`` in double (``TIDL_GetMaxQuantScale``, ``TIDL_UpdateScaleFactors``,
    ``TIDL_findRangeUsingMedian``, tidl_import_quantize.cpp): the quotient of two rounded logs, so for a
    few exact powers of 2 (2^29, 2^31, ...) it is one above log2."""
    if not a > 0 or math.isinf(a):
        raise FixedPointError(f"a power of 2 needs a finite positive value, got {a}")
    return math.ceil(math.log(float(a)) / math.log(2.0))


def _f32(v) -> np.float32:
    return np.float32(v)


def smallest_power_of_2_at_least(a: float) -> float:
    """§1.4: ``2^ceil(log2 a)`` for a > 0, exactly from the binary exponent (TIDL-NUMERICS.md, "Weights":
    P2 styles round absMax up to a power of 2; "Feature-map scales": roundBits' p)."""
    if not a > 0 or math.isinf(a):
        raise FixedPointError(f"a power of 2 needs a finite positive value, got {a}")
    mantissa, exponent = math.frexp(a)
    return math.ldexp(1.0, exponent - 1 if mantissa == 0.5 else exponent)


def largest_power_of_2_at_most(a: float) -> float:
    """§1.4: ``2^floor(log2 a)`` for a > 0, exactly (used by §2's P2 clip and §4.7)."""
    if not a > 0 or math.isinf(a):
        raise FixedPointError(f"a power of 2 needs a finite positive value, got {a}")
    return math.ldexp(1.0, math.frexp(a)[1] - 1)


def quantization_style(quantization_scale_type: int) -> int:
    """§2: ``quantization_scale_type`` 0 -> NP2Fixed (style 2, the default), 1 -> P2Dynamic (style 3), 4 ->
    AsymNP2 (style 6, asymmetric per-channel, §12) (TIDL-NUMERICS.md, "Scales and styles"). 3 is not
    implemented yet."""
    styles = {0: NP2_FIXED, 1: P2_DYNAMIC, 4: ASYM_NP2}
    if quantization_scale_type not in styles:
        raise FixedPointError(f"quantization_scale_type {quantization_scale_type}: tidlx's fixed point implements "
                              f"0 (NP2Fixed), 1 (P2Dynamic) and 4 (asymmetric per-channel); 3 (TFLite "
                              f"prequantized) is not implemented yet")
    return styles[quantization_scale_type]


def layer_bit_widths(layer_name: str, tensor_bits: int, output_16bit_names: Iterable[str] = (),
                     params_16bit_names: Iterable[str] = ()) -> Tuple[int, int]:
    """§3 mixed precision: (weight bits, output bits) of a layer: ``tensor_bits``, raised to 16 for a
    layer named in ``params_16bit_names_list`` (weights) or ``output_feature_16bit_names_list``
    (output) (TIDL-NOTES.md, "Compile options")."""
    if tensor_bits not in (8, 16):
        raise FixedPointError(f"tensor_bits must be 8 or 16, got {tensor_bits}")
    weight_bits = 16 if layer_name in set(params_16bit_names) else tensor_bits
    output_bits = 16 if layer_name in set(output_16bit_names) else tensor_bits
    return weight_bits, output_bits


def feature_map_is_signed(range_min: float) -> bool:
    """§3, the range test: a feature map is unsigned when its range starts at >= 0, signed otherwise.
    TI's TVM flow types a float subgraph input this way (TI: ``tensor_quant_flatten``, tidl.py: unsigned
    when the calibration data's minimum is >= 0); tidlx keeps it for the layers whose rule in TI's import
    was not read (``layer_output_is_signed``)."""
    return not range_min >= 0


#: §3: the activations after which TI's import makes a layer's output unsigned (a Clip only with min >= 0)
UNSIGNED_ACTIVATIONS = ("ReLU", "ReLU6")


def layer_output_is_signed(kind: str, activation: str = "none", clip_min: Optional[float] = None,
                           inputs_signed: Sequence[bool] = ()) -> bool:
    """§3, TI's structural rule for a layer's output element type (TI: the ``TIDL_tfOutReshape*`` functions
    of TI's import, tidl_import_common.cpp, which set ``outData[0].elementType``; the clip branch of
    ``TIDL_UpdateScaleFactors``, "Unsigned output is a better fit", for a Clip with clipMin >= 0).

    ``kind``: ``"weighted"`` (convolution, deconvolution, inner product, batch norm): signed, unsigned
    after ReLU, ReLU6 or a Clip with min >= 0; ``"merging"`` (element-wise sum / max / product, concat):
    signed when any input is signed, else unsigned, and unsigned after ReLU, ReLU6 or a Clip with
    min >= 0; ``"following"`` (pooling, resize, depth-to-space, pad, slice, reshape, ...): its first
    input's; ``"activation"`` (a ReLU or Clip layer): unsigned, a Clip with min < 0 signed."""
    unsigned_after = activation in UNSIGNED_ACTIVATIONS or (activation == "Clip" and clip_min is not None
                                                            and clip_min >= 0)
    if kind in ("weighted", "activation"):
        return not unsigned_after
    if kind == "merging":
        return any(inputs_signed) and not unsigned_after
    if kind == "following":
        if not inputs_signed:
            raise FixedPointError("a layer that follows its input's type needs that input's signedness")
        return bool(inputs_signed[0])
    raise FixedPointError(f"no signedness rule for a {kind!r} layer")


def float_input_is_signed(flow: str, range_min: float) -> bool:
    """§3, §8.12: the type a float network input is converted to. The ONNX Runtime flow (``flow``
    "ort") makes it signed whatever its range (TI: ``TIDL_onnxRtImportInit``: a float input becomes
    ``TIDL_SignedChar`` / ``TIDL_SignedShort``, only a uint8/uint16 input unsigned); TI's TVM flow
    decides by the calibration data's range (``feature_map_is_signed``)."""
    return True if flow == "ort" else feature_map_is_signed(range_min)


# ---- §4: weights -----------------------------------------------------------------------------

def _floats(values, what: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind not in "fiu":
        raise FixedPointError(f"{what}: expected numbers, got {arr.dtype}")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise FixedPointError(f"{what}: holds NaN or infinity")
    return arr


def weight_abs_max(w) -> float:
    """§4.1: ``absMax = max(|min|, |max|)`` of a weight tensor (TIDL-NUMERICS.md, "Weights")."""
    arr = _floats(w, "weights")
    if arr.size == 0:
        raise FixedPointError("weights: empty tensor")
    return float(max(abs(arr.min()), abs(arr.max())))


def weight_median_rank(size: int) -> int:
    """§4.3: the 0-based rank in ascending order of the value TI calls the median of n weights:
    ``TIDL_findKthSmallest(|w|, n, n/2 + 1)`` (tidl_import_quantize.cpp, TIDL 08.06 and 11.x), a
    quickselect that returns the element at sorted index ``n // 2 + 1``; for n <= 2, where TI reads
    past the array, tidlx's choice: the largest (index n - 1)."""
    if size < 1:
        raise FixedPointError("weights: empty tensor")
    return min(size // 2 + 1, size - 1)


def limit_weight_range_median(w, abs_max: float, bits: int) -> float:
    """§4.3 weight range limiting, the median method (TI's ``TIDL_findRangeUsingMedian``,
    tidl_import_quantize.cpp, TIDL 08.06 and 11.x), in float32: ``med`` = the |w| at
    ``weight_median_rank``; if absMax > 2^(bits-1)/8 - 1 and absMax > 16 med, the range's ends are
    clamped to ``c = 2^ti_ceil_log2(min(absMax, 16 med)) - 1``, so absMax becomes min(absMax, c) (the
    weights are clipped to it by ``quantize_weights``). tidlx's choice when c <= 0 (16 med < 1, e.g.
    more than half of the weights 0), where TI's range inverts: no limiting."""
    mags = np.abs(np.asarray(_floats(w, "weights"), np.float32)).ravel()
    k = weight_median_rank(mags.size)
    limit = _f32(np.partition(mags, k)[k]) * _f32(16.0)
    a = _f32(abs_max)
    if not (a > _f32((1 << (bits - 1)) / 8 - 1) and a > limit):
        return float(abs_max)
    reach = min(a, limit)
    if not reach > 0:
        return float(abs_max)
    clamp = _f32(2.0 ** ti_ceil_log2(float(reach))) - _f32(1.0)
    if not clamp > 0:
        return float(abs_max)
    return float(min(a, clamp))


def max_quant_scale(abs_max: float, bits: int, power_of_2: bool = False) -> float:
    """§4.1/§5.1: TI's ``TIDL_GetMaxQuantScale`` (tidl_import_quantize.cpp, TIDL 11.x): absMax as float32;
    0 below 1e-15 (TI: -1, no scale); P2 styles replace it by ``2^ti_ceil_log2(absMax)``; the scale is
    ``2^(bits-1) / absMax`` divided in double and stored as float32. Returned as the float32's value."""
    a = _f32(abs_max)
    if not a >= ABS_MAX_EPSILON:
        return 0.0
    if power_of_2:
        a = _f32(2.0 ** ti_ceil_log2(float(a)))
    return float(_f32(float(1 << (bits - 1)) / float(a)))


def weight_scale(abs_max: float, bits: int, power_of_2: bool = False) -> float:
    """§4.1 weight scale: ``2^(bits-1) / absMax`` as ``max_quant_scale`` (float32, TI's
    ``TIDL_GetMaxQuantScale``), absMax first rounded up to a power of 2 in P2 styles, 0 when absMax <
    1e-15 (TIDL-NUMERICS.md, "Weights")."""
    if bits not in (8, 16):
        raise FixedPointError(f"weights are 8 or 16 bits wide, not {bits}")
    return max_quant_scale(abs_max, bits, power_of_2)


def depthwise_weight_scales(w, bits: int, power_of_2: bool = False) -> np.ndarray:
    """§4.5 per-channel weights: one §4.1 scale per output channel (axis 0), for depthwise convolutions
    with calibration option bit PerChannelWeight 8 (TIDL-NUMERICS.md, "Weights")."""
    arr = _floats(w, "weights")
    return np.array([weight_scale(weight_abs_max(arr[c]), bits, power_of_2) for c in range(arr.shape[0])])


def _quantize_signed_max(values, scale, limit) -> np.ndarray:
    """§4.2/§5.2, TI's ``TIDL_QuantizeSignedMax`` (tidl_import_quantize.cpp, TIDL 08.06 and 11.x): each
    value as float32, clipped to [-limit, limit] (the range §4.3 left), times the float32 scale in
    float32, then +0.5 (value > 0) or -0.5 in double, truncated (the int cast). Unsaturated, float64."""
    v = np.asarray(_floats(values, "weights"), np.float32)
    if limit is not None:
        lim = np.asarray(limit, np.float32)
        v = np.maximum(np.minimum(v, lim), -lim)
    prod = (v * np.asarray(_floats(scale, "weight scale"), np.float32)).astype(np.float64)
    return np.trunc(np.where(v > 0, prod + 0.5, prod - 0.5))


def quantize_weights(w, scale, bits: int, limit=None) -> np.ndarray:
    """§4.2 weight quantization (``_quantize_signed_max``, TI's ``TIDL_QuantizeSignedMax``): float32
    ``w scale`` +-0.5 in double, round half away from zero with a truncating cast, clamped to
    [-2^(bits-1), 2^(bits-1) - 1]; ``limit`` (§4.3's absMax; per channel: shape (O, 1, 1, 1)) clips the
    weights first. ``scale`` broadcasts against ``w`` (per-channel scales: shape (O, 1, 1, 1))."""
    lo, hi = saturation_bounds(bits, True)
    if bits not in (8, 16):
        raise FixedPointError(f"weights are 8 or 16 bits wide, not {bits}")
    q = _quantize_signed_max(w, scale, limit)
    return np.clip(q, lo, hi).astype(np.int8 if bits == 8 else np.int16)


def clip_weight_scale_for_bias(weight_scale_: float, in_scale: float, bias_abs_max: float, weight_bits: int,
                               input_signed: bool, power_of_2: bool = False) -> Tuple[float, bool]:
    """§4.4: a convolution/deconvolution with a bias clips its weight scale to ``maxBiasScale / inScale``,
    ``maxBiasScale = 2^(2 wbits - signed(input) - 1) / absMax(bias)`` (TI's ``TIDL_findMaxQuantizationScale``
    and its use in ``TIDL_importQuantLayerParams``, tidl_import_quantize.cpp, TIDL 11.x; TI warns "Weight
    Scale Clipped"), both quotients float32 and the comparison on float32 values (§1.3). Returns (scale,
    clipped); P2 rounds a clipped scale down to a power of 2 (tidlx's choice)."""
    if bias_abs_max < ABS_MAX_EPSILON:
        return weight_scale_, False
    # TI divides in double and stores a float: the same value as one float32 division (a power-of-2 numerator)
    max_bias_scale = _f32(2.0 ** (2 * weight_bits - int(input_signed) - 1) / float(_f32(bias_abs_max)))
    max_weight_scale = _f32(max_bias_scale / _f32(in_scale))
    if _f32(weight_scale_) <= max_weight_scale:
        return weight_scale_, False
    limit = float(max_weight_scale)
    return (largest_power_of_2_at_most(limit) if power_of_2 else limit), True


def batch_norm_weight_scale_before_nonlinearity(bits: int) -> float:
    """§4.6: a batch norm followed by sigmoid, tanh, hard-sigmoid or ELU uses weight scale 2^(bits-1)
    (TIDL-NUMERICS.md, "Weights")."""
    return float(1 << (bits - 1))


def clip_forced_scale(clip_max: float, out_bits: int, symmetric: bool = False) -> float:
    """§4.7: the output scale a ReLU6/Clip forces (TI's ``isOutputTensorMaxSatAvailable``,
    tidl_import_quantize.cpp, TIDL 11.x): float32 ``2^bits / clipMax``, ``bits`` the output's width,
    one less for a symmetric clip [-clipMax, clipMax] (a signed output)."""
    if not clip_max > 0:
        raise FixedPointError(f"clip bound {clip_max}: a forced output scale needs clipMax > 0")
    bits = out_bits - 1 if symmetric else out_bits
    return float(np.float32(float(1 << bits) / float(np.float32(clip_max))))


def clip_output_scale(clip_max: float, out_bits: int, weight_scale_: float, in_scale: float,
                      symmetric: bool = False) -> Tuple[float, float, int]:
    """§4.7: an output clipped by ReLU6/Clip takes TI's forced weight scale (``TIDL_QuantizeSignedMax``
    with ``isOutMaxSat``, TIDL 11.x), in float32: ``accScale = inScale x weightScale``, ``outDiv =
    accScale / outScale``, ``pow2Div`` the largest power of 2 <= outDiv (``2^ceil(log2 outDiv)`` with the
    log in double, halved when above outDiv), also when outDiv < 1; ``accScale' = outScale x pow2Div``,
    ``weightScale' = accScale' / inScale``. §6.3 on the clip range then gives roundBits ``k = log2
    pow2Div`` for k >= 0 and 0 for k < 0 (``clipMax x accScale'`` is exactly ``2^bits x 2^k`` in float32),
    and §6.4 the tensorScale ``accScale' / 2^roundBits``: outScale for k >= 0, ``outScale x 2^k`` below.
    Returns (tensorScale, weightScale', roundBits)."""
    out_scale = np.float32(clip_forced_scale(clip_max, out_bits, symmetric))
    if not weight_scale_ > 0 or not in_scale > 0:
        raise FixedPointError(f"a forced output scale needs weight and input scales > 0, got {weight_scale_}, "
                              f"{in_scale}")
    acc = np.float32(np.float32(in_scale) * np.float32(weight_scale_))
    out_div = np.float32(acc / out_scale)
    pow2_div = np.float32(2.0 ** math.ceil(math.log(float(out_div)) / math.log(2.0)))
    if pow2_div > out_div:
        pow2_div = np.float32(pow2_div / np.float32(2.0))
    forced_acc = np.float32(out_scale * pow2_div)
    weight = float(np.float32(forced_acc / np.float32(in_scale)))
    k = math.frexp(float(pow2_div))[1] - 1
    rb = max(k, 0)
    return float(forced_acc) / float(1 << rb), weight, rb


# ---- §5: bias --------------------------------------------------------------------------------

def bias_scale(bias_abs_max: float, weight_bits: int, power_of_2: bool = False) -> float:
    """§5.1 bias scale: ``2^(wbits - 1) / absMax(bias)``, as TI's import quantizes a bias with
    ``TIDL_QuantizeSignedMax`` at the weights' bit width (scale from ``TIDL_GetMaxQuantScale``,
    tidl_import_quantize.cpp, TIDL 11.x: ``max_quant_scale``, float32); P2 rounds absMax up to a power
    of 2 first; 0 for absMax < 1e-15 (a zero bias)."""
    return max_quant_scale(bias_abs_max, weight_bits, power_of_2)


def quantize_bias(b, scale: float, weight_bits: int) -> np.ndarray:
    """§5.2 bias quantization (TI's ``TIDL_QuantizeSignedMax``, TIDL 11.x, ``_quantize_signed_max``): the
    float32 product +-0.5 in double, round half away from zero with a truncating cast, saturated to the
    weights' width: int8 for 8-bit weights, int16 for 16-bit."""
    lo, hi = saturation_bounds(weight_bits, True)
    return np.clip(_quantize_signed_max(_floats(b, "bias"), float(scale), None), lo, hi).astype(np.int64)


def in_scale_factor(weight_scale_, in_scale: float, bias_scale_: float):
    """§5.3: ``inScaleFactor = weightScale x inScale / biasScale`` takes a bias into the accumulator
    domain, float32 as TI's runtime computes it from the stored float32 scales before
    ``TIDL_conv2dBiasSplit`` (tidl_conv2d_base_ref.c, the batch norm and inner product kernels, TIDL 11.x):
    the product rounded, then the quotient. 0 for a zero bias scale (a zero bias)."""
    ws = np.asarray(_floats(weight_scale_, "weight scale"), np.float32)
    if bias_scale_ == 0:
        return np.zeros_like(ws, np.float64)
    return ((ws * _f32(in_scale)) / _f32(bias_scale_)).astype(np.float64)


def bias_b_max(weight_bits: int, input_bits: int, input_signed: bool) -> int:
    """§5.4: the largest bias multiplier biasB: 255 for 8-bit weights, halved for a signed input; 65535 for
    16-bit weights, 255 with a signed 8-bit input (TIDL-NUMERICS.md, "Bias")."""
    if weight_bits == 8:
        return 255 // 2 if input_signed else 255
    if weight_bits == 16:
        return 255 if (input_signed and input_bits == 8) else 65535
    raise FixedPointError(f"weights are 8 or 16 bits wide, not {weight_bits}")


def split_bias(bias_q, isf, weight_bits: int, input_bits: int, input_signed: bool) -> Tuple[np.ndarray, np.ndarray]:
    """§5.4: the bias as ``biasA x biasB`` (TI's ``TIDL_conv2dBiasSplit``, tidl_commonUtils.c, TIDL 11.x):
    isf > biasBMax: biasA = trunc(b isf) / biasBMax (truncating), biasB = biasBMax; 1 < isf <= biasBMax:
    biasA = b, biasB = (int) isf; else biasA = (int)(b isf), biasB = 1. biasA is clamped to the weights'
    width (TI's [-(255/2 + 1), 255/2] for 8-bit weights, int16 for 16-bit; only the first case can
    exceed it). ``isf`` is float32 and ``b isf`` a float32 product, as TI's parameter and C's int x float
    (§1.3). ``bias_q`` from quantize_bias, ``isf`` per channel or one."""
    b = np.asarray(bias_q)
    if b.dtype.kind not in "iu":
        raise FixedPointError(f"split_bias: the bias must be quantized integers, got {b.dtype}")
    b = b.astype(np.int64)
    factor = np.broadcast_to(_floats(isf, "inScaleFactor"), b.shape)
    if (factor < 0).any():
        raise FixedPointError("split_bias: inScaleFactor must be >= 0")
    b_max = bias_b_max(weight_bits, input_bits, input_signed)
    a_lo, a_hi = saturation_bounds(weight_bits, True)
    # TI's isf is a float32 parameter and ``b x isf`` a float32 product, truncated; held in int64 (beyond
    # +-2^62 every case saturates biasA anyway)
    factor = factor.astype(np.float32)
    with np.errstate(over="ignore"):
        product = (b.astype(np.float32) * factor).astype(np.float64)
    scaled = np.clip(np.trunc(product), -2.0 ** 62, 2.0 ** 62).astype(np.int64)
    big = np.sign(scaled) * (np.abs(scaled) // b_max)   # C's integer division truncates toward zero
    bias_a = np.where(factor > b_max, big, np.where(factor > 1, b, scaled))
    bias_b = np.where(factor > b_max, b_max, np.where(factor > 1, np.trunc(factor), 1))
    return np.clip(bias_a, a_lo, a_hi).astype(np.int64), bias_b.astype(np.int64)


# ---- §6: feature-map scales --------------------------------------------------------------------

def acc_scale_weighted(weight_scale_, in_scale: float):
    """§6.1: convolution, deconvolution, inner product and batch norm: accScale = weightScale x inScale
    (per channel with per-channel weights) (TIDL-NUMERICS.md, "Feature-map scales")."""
    return _floats(weight_scale_, "weight scale") * float(in_scale) if np.ndim(weight_scale_) else \
        float(weight_scale_) * float(in_scale)


def average_pool_q(kernel: Tuple[int, int], strides: Tuple[int, int], processing_bits: int,
                   global_pool: bool = False) -> int:
    """§6.1: average pool's Q: 8 for a 2x2 or 3x3 kernel at stride 2 with 8-bit processing, else 12;
    12 for the global pool (TIDL-NUMERICS.md, "Feature-map scales")."""
    kernel, strides = tuple(kernel), tuple(strides)
    if not global_pool and processing_bits == 8 and kernel in ((2, 2), (3, 3)) and strides == (2, 2):
        return 8
    return 12


def acc_scale_average_pool(in_scale: float, q: int) -> float:
    """§6.1: average pool (spatial and global): accScale = 2^Q x inScale (TIDL-NUMERICS.md,
    "Feature-map scales")."""
    return float(1 << q) * float(in_scale)


def acc_scale_keeping(in_scale: float) -> Tuple[float, int]:
    """§6.1: max pool and the layers that cannot change scale (flatten, crop, split, slice, pad, ...; resize
    keeps its input's scale): (accScale = inScale, roundBits 0) (TIDL-NUMERICS.md, "Feature-map scales")."""
    return float(in_scale), 0


def _eltwise_q(out_bits: int, q8: int, q16: int) -> int:
    if out_bits not in (8, 16):
        raise FixedPointError(f"outputs are 8 or 16 bits wide, not {out_bits}")
    return q8 if out_bits == 8 else q16


def acc_scale_eltwise_sum(in_scales: Sequence[float], out_bits: int) -> float:
    """§6.1: element-wise sum: accScale = min(inScales) x 2^Q, Q = 6 (8 bit), 14 (16 bit)
    (TIDL-NUMERICS.md, "Feature-map scales")."""
    return min(float(s) for s in in_scales) * float(1 << _eltwise_q(out_bits, 6, 14))


def acc_scale_eltwise_max(in_scales: Sequence[float], out_bits: int) -> float:
    """§6.1, tidlx's choice: element-wise max takes the sum's accScale (its runtime form max(in_j x s_j)
    in TIDL-NUMERICS.md, "Runtime arithmetic", needs the sum's multipliers)."""
    return acc_scale_eltwise_sum(in_scales, out_bits)


def acc_scale_eltwise_product(in_scales: Sequence[float]) -> float:
    """§6.1: element-wise product: accScale = the product of the inScales (TIDL-NUMERICS.md,
    "Feature-map scales")."""
    return float(np.prod([float(s) for s in in_scales]))


def acc_scale_concat(in_scales: Sequence[float], out_bits: int) -> float:
    """§6.1: concat: accScale = min(inScales) x 2^Q, Q = 7 (8 bit), 15 (16 bit) (TIDL-NUMERICS.md,
    "Feature-map scales")."""
    return min(float(s) for s in in_scales) * float(1 << _eltwise_q(out_bits, 7, 15))


def acc_scale_data_convert(in_scale: float = 1.0, out_bits: int = 8) -> float:
    """§6.1, tidlx's choice for the quantizations it models on a data convert (§8.5's constant operand,
    §8.14's normalized values): accScale = inScale x 2^Q, Q = 7 (8 bit), 15 (16 bit). TI's data convert
    of a float input takes ``data_convert_input_q``."""
    return float(in_scale) * float(1 << _eltwise_q(out_bits, 7, 15))


def _c_round(x: float) -> int:
    """C's round: half away from zero."""
    return int(math.copysign(math.floor(abs(x) + 0.5), x))


def data_convert_input_q(out_bits: int, signed: bool, range_min: float, range_max: float,
                         tidl_version: str = "11.00") -> int:
    """§6.1: Q of the data convert that brings a float input into a subgraph (accScale = 2^Q, the float
    tensor's scale 1.0), as TI's ``TIDL_UpdateScaleFactors`` (tidl_import_quantize.cpp) sets it: 7
    (``TIDL_INTERNAL_INDATA_Q``) for an 8-bit output, and for every width in TIDL 08.06. TIDL 10.x/11.x
    for a 16-bit output: ``round(log(S) / log(2))`` (C's round) with S the symmetric scale of TI's
    ``TIDL_asymRangeToScale``: ``float32(32767 / absMax)`` signed, ``65535 / absMax`` unsigned; S = 1
    when it is below 1 and the range lies within the type's bounds; a range narrower than 1e-15:
    ``32767 / |max|`` (``32767 x 1000`` for a zero max). tidlx's choice for a negative result (a range
    beyond twice the type's bounds, where TI shifts by a negative amount): 0."""
    if out_bits not in (8, 16):
        raise FixedPointError(f"outputs are 8 or 16 bits wide, not {out_bits}")
    if out_bits == 8 or tidl_version == "08.06":
        return 7
    top = _f32(32767.0 if signed else 65535.0)
    lo_bound, hi_bound = (-32768.0, 32767.0) if signed else (0.0, 65535.0)
    lo, hi = _f32(range_min), _f32(range_max)
    if not abs(hi - lo) >= _f32(ABS_MAX_EPSILON):
        scale = top / abs(hi) if hi != 0 else top * _f32(1000)
    else:
        scale = top / max(abs(lo), abs(hi))
        if scale < 1 and hi <= hi_bound and lo >= lo_bound:
            scale = _f32(1.0)
    return max(0, _c_round(math.log(float(scale)) / math.log(2.0)))


def symmetric_range_scale(range_min: float, range_max: float, bits: int, signed: bool) -> float:
    """§8.16: TI's symmetric scale of a range (``TIDL_asymRangeToScale``, symmetric, TIDL 11.x), in
    float32: ``top / absMax`` with top = 2^(bits-1) - 1 signed, 2^bits - 1 unsigned; 1.0 when that is
    below 1 and the range lies within the type's bounds; for a range narrower than 1e-15, ``top /
    |max|``, or ``top x 1000`` when max is 0."""
    lo, hi = _f32(range_min), _f32(range_max)
    top = _f32((1 << (bits - 1)) - 1 if signed else (1 << bits) - 1)
    if not abs(hi - lo) >= _f32(ABS_MAX_EPSILON):
        return float(top / abs(hi)) if hi != 0 else float(top * _f32(1000))
    scale = top / max(abs(lo), abs(hi))
    type_lo = -float(top) - 1 if signed else 0.0
    if scale < 1 and hi <= top and lo >= type_lo:
        scale = _f32(1.0)
    return float(scale)


def scatter_add_common_scale(data_scale: float, updates_scale: float) -> float:
    """§8.16: the one tensorScale TI's import gives an 'add' ScatterElements' data and updates producers
    (TI 11.x ``TIDL_UpdateScaleFactors``, ScatterND branch: "forcing the Data and Update inputs to have same
    scales"): the smaller of the two."""
    return float(min(float(data_scale), float(updates_scale)))


def all_zero_constant_scale(values) -> Optional[float]:
    """§6.1: the tensorScale TI's import gives a constant tensor whose values are all 0 (TI:
    ``TIDL_updateParamsRange`` / ``TIDL_QuantizeSignedMax`` find no scale, -1, made 1 for a
    ``TIDL_ConstDataLayer``'s weights; ``TIDL_UpdateScaleFactors`` then takes accScale = that weight scale
    and, on the [0, 0] range, roundBits 0 and tensorScale = accScale): 1.0. None when a value is not 0."""
    arr = np.asarray(values)
    return 1.0 if arr.size and not np.any(arr) else None


def in_scales_for_min(in_scales: Sequence[float], zero_ranges: Sequence[bool],
                      tidl_version: str = "11.00") -> Tuple[float, ...]:
    """§6.1: the input scales an element-wise sum/max or a concat takes ``min(inScales)`` over. TIDL
    10.x/11.x's ``TIDL_UpdateScaleFactors`` skips an input whose producer's range is [0, 0] (an all-zero
    tensor); 08.06 takes every input. tidlx's choice when every input is [0, 0] (TI's minimum stays
    FLT_MAX): all of them."""
    scales = tuple(float(s) for s in in_scales)
    if tidl_version == "08.06":
        return scales
    kept = tuple(s for s, zero in zip(scales, zero_ranges) if not zero)
    return kept or scales


def output_range(range_min: float, range_max: float, *, activation: str = "none", clip_min: float = None,
                 clip_max: float = None, widen: bool = False, expansion: float = 1.0) -> Tuple[float, float]:
    """§6.2 the range of an output: calibration min/max x quantRangeExpansionFactor; Clip uses its bounds,
    ReLU6 [0, 6]; global average pool and inner product (``widen``): the max x 1.25, the min as it is
    (TI's ``TIDL_UpdateScaleFactors``, tidl_import_quantize.cpp, TIDL 11.x)."""
    if activation == "relu6":
        return 0.0, 6.0
    if activation == "clip":
        if clip_min is None or clip_max is None or clip_min > clip_max:
            raise FixedPointError("clip: the range needs bounds min <= max")
        return float(clip_min), float(clip_max)
    if range_min > range_max:
        raise FixedPointError(f"range [{range_min}, {range_max}]: min above max")
    return float(range_min) * expansion, float(range_max) * expansion * (1.25 if widen else 1.0)


def round_bits(acc_scale: float, range_min: float, range_max: float, bits: int, signed: bool) -> int:
    """§6.3 roundBits as TI's ``TIDL_UpdateScaleFactors`` (tidl_import_quantize.cpp, TIDL 08.06 and 11.x)
    computes it: accScale, min and max as float32, ``m = max(|min accScale|, |max accScale|)`` with float32
    products; nb = 8 bytes - 1 signed, 8 bytes unsigned; signed: ``m -= 1`` (float32) when ``m`` equals
    ``2^ti_ceil_log2(m)``; ``d = m / 2^nb`` (float32); if d >= 1: ``p = 2^ti_ceil_log2(d)``, halved when
    ``p >= 2d`` (2d in float32), roundBits = ``ti_ceil_log2(p)``; else 0."""
    if bits not in (8, 16):
        raise FixedPointError(f"outputs are 8 or 16 bits wide, not {bits}")
    acc = _f32(acc_scale)
    with np.errstate(over="ignore"):
        m = max(abs(_f32(range_min) * acc), abs(_f32(range_max) * acc))
    if not np.isfinite(m):
        raise FixedPointError(f"roundBits: accScale {acc_scale} x range [{range_min}, {range_max}] is not finite")
    nb = bits - 1 if signed else bits
    if signed and m > 0 and float(m) == 2.0 ** ti_ceil_log2(float(m)):
        m = m - _f32(1.0)
    d = m / _f32(1 << nb)
    if not d >= 1:
        return 0
    p = 2.0 ** ti_ceil_log2(float(d))
    if p >= float(_f32(2) * d):
        p /= 2
    return ti_ceil_log2(p)


def tensor_scale(acc_scale: float, round_bits_: int) -> float:
    """§6.4: ``tensorScale = accScale / 2^roundBits`` in float32, as TI's ``TIDL_UpdateScaleFactors``
    stores it (the float32's value); 0 becomes FLT_MIN (TIDL-NUMERICS.md, "Feature-map scales")."""
    scale = float(_f32(acc_scale) / _f32(1 << int(round_bits_)))
    return scale if scale != 0 else FLT_MIN


def lower_round_bits_for_multipliers(round_bits_: int, out_scale: float, acc_scale: float) -> int:
    """§6.5's loop: roundBits lowered until ``2^roundBits x outScale < accScale``, not below 0 (TI's
    ``TIDL_UpdateScaleFactors``, TIDL 11.x; ``merging_round_bits`` says when it runs)."""
    rb = int(round_bits_)
    while rb > 0 and float(1 << rb) * out_scale >= acc_scale:
        rb -= 1
    return rb


def merging_round_bits(round_bits_: int, acc_scale: float, clip_scale: Optional[float] = None,
                       bias_range: bool = False) -> Tuple[int, float]:
    """§6.5: (roundBits, tensorScale) of an element-wise sum/max or a concat, as TI's
    ``TIDL_UpdateScaleFactors`` (TIDL 11.x) sets them: when the output's scale is forced by ReLU6/Clip
    (``clip_scale``, §4.7's ``2^bits / clipMax``), calibration bit BiasRange 64 is off and roundBits > 0,
    roundBits is lowered by ``lower_round_bits_for_multipliers`` and tensorScale is ``clip_scale``;
    otherwise roundBits stays and tensorScale is §6.4's ``accScale / 2^roundBits``."""
    rb = int(round_bits_)
    if clip_scale is None or bias_range or rb == 0:
        return rb, tensor_scale(acc_scale, rb)
    return lower_round_bits_for_multipliers(rb, float(clip_scale), acc_scale), float(clip_scale)


def eltwise_multipliers(out_scale: float, round_bits_: int, in_scales: Sequence[float]) -> Tuple[int, ...]:
    """§6.5: input j's integer multiplier ``(int32)(accScale / inScale_j)``, truncated, with the runtime
    accScale = outScale x 2^roundBits (TIDL-NUMERICS.md, "Runtime arithmetic": element-wise sum)."""
    acc_rt = float(out_scale) * float(1 << int(round_bits_))
    _, hi = saturation_bounds(32, True)
    result = []
    for s in in_scales:
        if not float(s) > 0:
            raise FixedPointError(f"input scale {s} must be > 0")
        m = math.trunc(acc_rt / float(s))
        if m > hi:
            raise FixedPointError(f"multiplier {m} of an input at scale {s} does not fit int32")
        result.append(m)
    return tuple(result)


#: §6.6: TI's ratio for a consumer without a bias, and the least ratio (``TIDL_maxWeightScale``'s 1/256)
GUARD_NO_BIAS_RATIO = 1.0 / 256.0
#: §6.6: the ratio TI's guard takes for an output whose scale ReLU6/Clip forces (``TIDL_UpdateScaleFactors``)
GUARD_CLIP_RATIO = 0.0001


def consumer_weight_to_bias_scale(weight_scale_: float, bias_scale_: float, per_channel: bool = False) -> float:
    """§6.6: one consumer's ratio in TI's ``TIDL_maxWeightScale`` (tidl_import_quantize.cpp, TIDL 11.x):
    ``weightScale / biasScale`` (§4.1's unclipped weight scale, §5.1's bias scale); 1/256 without a bias
    (bias scale 0); a per-channel depthwise convolution takes 1/256 in place of its weight scale."""
    if bias_scale_ == 0:
        return GUARD_NO_BIAS_RATIO
    return (GUARD_NO_BIAS_RATIO if per_channel else float(weight_scale_)) / float(bias_scale_)


def max_weight_to_bias_scale(ratios: Iterable[float]) -> float:
    """§6.6: TI's ``TIDL_maxWeightScale``: the largest of 1/256 and the consumers' ratios (a consumer that
    is not a convolution, deconvolution, inner product or batch norm counts as 1/256)."""
    return max([GUARD_NO_BIAS_RATIO] + [float(r) for r in ratios])


def bias_saturation_guard(round_bits_: int, tensor_scale_: float, weight_to_bias: float, consumer_weight_bits: int,
                          output_signed: bool) -> int:
    """§6.6 the bias-saturation guard (TI's ``TIDL_UpdateScaleFactors``, TIDL 11.x): E = 256 when the
    consumers' smallest weight width is 8 bits, 32768 when wider, halved for a signed output; while
    tensorScale x ratio > E, halve tensorScale and count n; roundBits += (n + 1) / 2. ``weight_to_bias``
    is ``max_weight_to_bias_scale``'s ratio (``GUARD_CLIP_RATIO`` for a ReLU6/Clip-forced output)."""
    limit = (256.0 if consumer_weight_bits <= 8 else 32768.0) / (2.0 if output_signed else 1.0)
    scale = float(tensor_scale_)
    halvings = 0
    while scale * float(weight_to_bias) > limit:
        scale /= 2
        halvings += 1
    return int(round_bits_) + (halvings + 1) // 2


def depthwise_per_channel_round_bits(weight_scales, in_scale: float, out_scale: float) -> np.ndarray:
    """§8.1.1: per-channel depthwise ``roundBits[c] = (int8)(log(float32(weightScale[c] x inScale) /
    outScale) / log 2)``, the quotient in float32, the logs in double, the cast truncating toward zero
    (TI's ``TIDL_refConv2d``, conv reference); tidlx's choice: a negative value becomes 0 (TI stores it
    in an unsigned byte)."""
    result = []
    out = np.float32(out_scale)
    if not out > 0:
        raise FixedPointError(f"per-channel roundBits: the output scale must be > 0, got {out_scale}")
    for w in _floats(weight_scales, "weight scales").ravel():
        ratio = np.float32(np.float32(np.float32(w) * np.float32(in_scale)) / out)
        if not ratio > 0:
            raise FixedPointError("per-channel roundBits: weight scales must be > 0")
        result.append(max(0, int(math.log(float(ratio)) / math.log(2.0))))
    if max(result, default=0) > 127:
        raise FixedPointError("per-channel roundBits above the int8 range")
    return np.array(result, np.int64)


# ---- §8.10.1-2: the non-saturating activations -------------------------------------------------

#: §8.10.2: the limit L of a table activation's pre-activation range, by kind and output width
#: (beyond it the output saturates at the output's resolution).
TABLE_PRE_LIMIT = {("Sigmoid", 8): 8.0, ("Sigmoid", 16): 16.0, ("Tanh", 8): 4.0, ("Tanh", 16): 8.0,
                   ("GELU", 8): 4.0, ("GELU", 16): 8.0, ("ELU", 8): 8.0, ("ELU", 16): 16.0}
TABLE_ACTIVATIONS = ("Sigmoid", "Tanh", "GELU", "ELU")
#: The table activations whose output range is the function's own (a fixed output scale); GELU's and
#: ELU's outputs are unbounded above and take their scale from the calibrated range.
FIXED_RANGE_TABLES = ("Sigmoid", "Tanh")
#: Where GELU turns: it increases from here on (its minimum, about -0.17).
GELU_TURN = -0.7517915246


def prelu_slope_scale(slopes, weight_bits: int, power_of_2: bool = False) -> float:
    """§8.10.1: a PReLU's slope scale, as TI's ``TIDL_updateParamsRange`` sets ``slopeScale`` with
    ``TIDL_GetMaxQuantScale`` over the slopes' [min, max] (tidl_import_quantize.cpp, TIDL 11.x): float32
    ``2^(bits-1) / absMax`` (absMax rounded up to a power of 2 in P2 styles, the log in double); TI's -1
    for an absMax below 1e-15 becomes 1, as for weights."""
    s = _floats(slopes, "PReLU slopes").ravel()
    if s.size == 0:
        raise FixedPointError("PReLU slopes: none given")
    if weight_bits not in (8, 16):
        raise FixedPointError(f"PReLU slopes are 8 or 16 bits wide (the weights'), not {weight_bits}")
    lo, hi = np.float32(s.min()), np.float32(s.max())
    abs_range = np.float32(max(abs(lo), abs(hi)))
    if float(abs_range) < ABS_MAX_EPSILON:
        return 1.0
    if power_of_2:
        abs_range = np.float32(2.0 ** float(np.float32(math.ceil(math.log(float(abs_range)) / math.log(2.0)))))
    return float(np.float32(float(1 << (weight_bits - 1)) / float(abs_range)))


def quantize_prelu_slopes(slopes, slope_scale: float, weight_bits: int) -> np.ndarray:
    """§8.10.1: the slopes quantized as TI's ``TIDL_QuantizeSignedMax`` quantizes weights: the float32
    product ``slope x slopeScale``, plus or minus 0.5 in double, truncated, clamped to the weights' type
    (int8 for 8-bit weights, int16 for 16-bit)."""
    lo, hi = saturation_bounds(weight_bits, True)
    s = _floats(slopes, "PReLU slopes").astype(np.float32)
    product = (s * np.float32(slope_scale)).astype(np.float64)
    q = np.trunc(np.where(s > 0, product + 0.5, product - 0.5))
    return np.clip(q, lo, hi).astype(np.int64)


def prelu_slope_factors(slopes_q, slope_scale: float, weight_bits: int) -> Tuple[np.ndarray, int]:
    """§8.10.1: (slope factors, shift) of a PReLU's accumulator rule, as TI's ``TIDL_refBatchNormCore``
    derives them (TIDL 11.x): ``f = float32(slope_q x 256) / slopeScale`` in float32; 8-bit weights:
    factor ``(int32) f`` with shift 8 (an 8.8 slope); 16-bit weights: ``(int32)(f x 256)`` in float32
    with shift 16. The casts truncate toward zero."""
    q = np.asarray(slopes_q)
    if q.dtype.kind not in "iu":
        raise FixedPointError(f"PReLU slope factors: the slopes must be quantized integers, got {q.dtype}")
    if not slope_scale > 0:
        raise FixedPointError(f"PReLU slope factors: slopeScale must be > 0, got {slope_scale}")
    f = (q.astype(np.int64) * 256).astype(np.float32) / np.float32(slope_scale)
    if weight_bits == 8:
        return np.trunc(f).astype(np.int64), 8
    if weight_bits == 16:
        return np.trunc(f * np.float32(256.0)).astype(np.int64), 16
    raise FixedPointError(f"PReLU slopes are 8 or 16 bits wide (the weights'), not {weight_bits}")


def table_output_scale(kind: str, bits: int) -> Tuple[float, bool]:
    """§8.10.2: (tensorScale, signed) of a table activation's output: sigmoid 2^bits unsigned, tanh
    2^(bits-1) signed (the function's range [0, 1] / [-1, 1] over the whole type)."""
    if kind == "Sigmoid":
        return float(1 << bits), False
    if kind == "Tanh":
        return float(1 << (bits - 1)), True
    raise FixedPointError(f"activation {kind}: no table form (Sigmoid, Tanh)")


def table_output_scale_of_range(pre_scale: float, range_min: float, range_max: float, bits: int
                                ) -> Tuple[float, bool]:
    """§8.10.2: (tensorScale, signed) of a GELU or ELU output: signed when its calibrated range starts
    below 0 (§6.3's test), ``tensorScale = preScale / 2^roundBits`` with roundBits by §6.3 on that range
    at accScale = preScale."""
    signed = feature_map_is_signed(range_min)
    return tensor_scale(pre_scale, round_bits(pre_scale, range_min, range_max, bits, signed)), signed


def _gelu(x: float) -> float:
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def _gelu_inverse(y: float) -> float:
    """The x >= GELU_TURN with GELU(x) = y (y above GELU's minimum), by 200 bisection steps in float64."""
    lo, hi = GELU_TURN, max(1.0, 2.0 * y)
    if y <= _gelu(lo):
        return lo
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _gelu(mid) < y:
            lo = mid
        else:
            hi = mid
    return hi


def table_pre_range(kind: str, range_min: float, range_max: float, bits: int, alpha: float = 1.0
                    ) -> Tuple[float, float]:
    """§8.10.2: the pre-activation range of a table activation: the inverse function of the output's
    calibrated range. Sigmoid (logit) and tanh (atanh): each end limited to [-L, L]
    (``TABLE_PRE_LIMIT``), an end at or beyond the function's own limits becoming -L / L. ELU (``alpha``):
    ``y`` above 0, ``ln(1 + y / alpha)`` below, ``-L`` at or below ``-alpha``; the lower end not below
    ``-L``. GELU: ``[-L, x]`` with ``x`` the point of GELU's increasing branch where it reaches the
    output's maximum (GELU has no inverse below its turn; it is within half an output step of 0 below
    ``-L``)."""
    limit = TABLE_PRE_LIMIT[(kind, bits)]
    lo_y, hi_y = float(range_min), float(range_max)
    if kind == "GELU":
        return -limit, max(-limit, _gelu_inverse(hi_y))
    if kind == "ELU":
        if not alpha > 0:
            raise FixedPointError(f"ELU: alpha must be > 0 for a table, got {alpha}")

        def inverse_elu(y: float) -> float:
            return y if y >= 0 else -limit if y <= -alpha else math.log1p(y / alpha)

        return max(-limit, inverse_elu(lo_y)), max(-limit, inverse_elu(hi_y))

    def inverse(y: float) -> float:
        if kind == "Sigmoid":
            return -limit if y <= 0 else limit if y >= 1 else math.log(y / (1.0 - y))
        return -limit if y <= -1 else limit if y >= 1 else math.atanh(y)

    lo, hi = inverse(lo_y), inverse(hi_y)
    return max(-limit, min(lo, limit)), max(-limit, min(hi, limit))


def _activation_value(kind: str, x: float, alpha: float = 1.0) -> float:
    if kind == "Sigmoid":
        # both forms are the same function; each avoids an overflow of exp on its side
        return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))
    if kind == "Tanh":
        return math.tanh(x)
    if kind == "GELU":
        return _gelu(x)
    if kind == "ELU":
        return x if x >= 0 else alpha * math.expm1(x)
    raise FixedPointError(f"activation {kind}: no table form ({', '.join(TABLE_ACTIVATIONS)})")


def activation_table(kind: str, pre_scale: float, pre_bits: int, out_scale: float, out_bits: int,
                     out_signed: bool, alpha: float = 1.0) -> np.ndarray:
    """§8.10.2: the table of a sigmoid/tanh/GELU/ELU over every value p of the signed ``pre_bits``
    pre-activation type: ``clamp(floor(f(p / preScale) * outScale + 0.5), out type)``, f in float64 by
    Python's math (one call per entry, in increasing p; ELU's ``alpha``)."""
    plo, phi = saturation_bounds(pre_bits, True)
    olo, ohi = saturation_bounds(out_bits, out_signed)
    if not pre_scale > 0:
        raise FixedPointError(f"activation table: the pre-activation scale must be > 0, got {pre_scale}")
    table = np.empty(phi - plo + 1, np.int64)
    for i, p in enumerate(range(plo, phi + 1)):
        v = math.floor(_activation_value(kind, p / float(pre_scale), alpha) * float(out_scale) + 0.5)
        table[i] = olo if v < olo else ohi if v > ohi else v
    return table


# ---- §8.10.2: TI's own tables (TIDL 10.x/11.x import, 8-bit input and output) -------------------------

#: TIDL versions whose 8-bit table activations are TI's import-side tables (tidl_version "08.06": tidlx's
#: own tables above).
TI_TABLE_VERSIONS = ("11.00", "10.01")
#: The table activations TI's import tabulates for an 8-bit BatchNorm layer (TIDL_getQuantizeLUT).
TI_TABLE_ACTIVATIONS = ("Sigmoid", "Tanh", "GELU", "ELU", "HardSigmoid")
#: How a device computes them: "lut" (TDA4VM/J721E, J721S2, J784S4, J722S: a 256-entry table) or "pla"
#: (AM62A, C7504 without a lookup unit: sigmoid as four line segments).
TABLE_DEVICES = ("lut", "pla")
#: TI's non-linear parameters (ELU's and hard sigmoid's alpha, beta) are integers in units of 2^-24.
NON_LINEAR_PARAM_SCALE = 1 << 24
#: AM62A's piecewise-linear sigmoid: per segment (|x| >= 5, >= 2.375, >= 1, below) the slope and offset
#: in units of 2^-7, and the thresholds in units of 1/16 of the input's step.
PLA_SIGMOID_SLOPES = (0, 4, 16, 32)
PLA_SIGMOID_OFFSETS = (128, 108, 80, 64)
PLA_SIGMOID_THRESHOLDS = (5.0, 2.375, 1.0)
PLA_SIGMOID_THRESHOLD_SCALE = 16


def uses_ti_tables(tidl_version: str, in_bits: int, out_bits: int) -> bool:
    """§8.10.2: whether a table activation follows TI's rule: TIDL 10.x/11.x with 8-bit input and output
    (16-bit layers, and every layer of ``tidl_version`` "08.06", keep tidlx's own tables)."""
    return str(tidl_version) in TI_TABLE_VERSIONS and int(in_bits) == 8 and int(out_bits) == 8


def table_device(target_device: Optional[str] = None) -> str:
    """§8.10.2: "pla" on a device without a table unit (AM62A's C7504: TI's piecewise-linear sigmoid), else
    "lut" (TI's 8-bit tables: TDA4VM and the other C7x; also without a target device). The device record
    (``devices.py``) says which."""
    from .devices import device

    dev = device(target_device)
    return "lut" if dev is None else dev.table_kind


def exp_taylor(x) -> np.ndarray:
    """§8.10.2 TI's float32 exponential (TI: ``exp_taylor``): ``y = x / ln 2`` (float32 constant
    1.4426950409), ``n = trunc(y)``, ``r = (y - n) * ln 2``; ``2^(y-n)`` as ``((1 + r + r²/2) + r³ *
    0.1666667) + r⁴ * 0.0416667`` (r⁴ = r² * r²), times ``2^n``; 0 when ``n < -16``, FLT_MAX when ``n > 14``.
    Every step float32, in that order."""
    f = np.float32
    x = np.asarray(x, np.float32)
    y = (f(1.44269504090) * x).astype(np.float32)
    n = np.trunc(y).astype(np.int64)
    r = ((y - n.astype(np.float32)).astype(np.float32) * f(0.693147180559945)).astype(np.float32)
    r2 = (r * r).astype(np.float32)
    r3 = (r2 * r).astype(np.float32)
    r4 = (r2 * r2).astype(np.float32)
    t = ((f(1.0) + r).astype(np.float32) + (r2 * f(0.5)).astype(np.float32)).astype(np.float32)
    t = (t + (r3 * f(0.1666667)).astype(np.float32)).astype(np.float32)
    t = (t + (r4 * f(0.0416667)).astype(np.float32)).astype(np.float32)
    # 2^16 shifted by n, then times 2^-16: exactly 2^n for -16 <= n <= 14
    shift = np.where(n > 0, np.left_shift(1 << 16, np.clip(n, 0, 14)),
                     np.right_shift(1 << 16, np.clip(-n, 0, 17))).astype(np.float32)
    e = ((t * shift).astype(np.float32) * f(2.0 ** -16)).astype(np.float32)
    e = np.where(n < -16, f(0.0), e)
    return np.where(n > 14, np.finfo(np.float32).max, e).astype(np.float32)


def refined_reciprocal_divide(x: float, y: float) -> float:
    """§8.10.2 TI's import-side division (TI: ``div_sp``, double): ``r = 1 / y``, one Newton step ``r = r
    * (2 - y * r)``, then ``x * r``; float64 throughout."""
    r = 1.0 / float(y)
    r = r * (2.0 - float(y) * r)
    return float(x) * r


def lut_input_value(q: int, zero_point: int, scale: float) -> float:
    """§8.10.2 a table entry's input (TI: ``TIDL_dequantize``): ``(q - zero) / tensorScale`` in float32 (a
    division, not a reciprocal product), then widened to float64."""
    return float(np.float32(np.float32(q) - np.float32(zero_point)) / np.float32(scale))


def lut_quantize(value: float, scale: float, zero_point: int, bits: int, signed: bool) -> int:
    """§8.10.2 a table entry (TI: ``TIDL_quantize``): ``round(value * tensorScale + zero)`` in float64,
    rounding halves away from zero (C's ``round``), clamped to the output type."""
    v = float(value) * float(np.float32(scale)) + int(zero_point)
    r = math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)
    lo, hi = saturation_bounds(bits, signed)
    return int(min(max(r, lo), hi))


def non_linear_param(value: float) -> int:
    """§8.10.2 ELU's alpha and hard sigmoid's alpha/beta as TI keeps them: integers in units of 2^-24
    (TI's ``TIDL_NON_LIN_PARAM_SCALE``); tidlx's choice of rounding: half away from zero."""
    v = float(value) * NON_LINEAR_PARAM_SCALE
    return int(math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1))


def lut_function(kind: str, x: float, alpha: float = 1.0, beta: float = 0.5) -> float:
    """§8.10.2 the float64 function of TI's import-side table (TI: ``TIDL_NonLinearActOut``, TIDL 11.x):
    sigmoid ``div_sp(1, exp_taylor(float32(-x)) + 1)``; tanh C's ``tanh``; GELU ``0.5 x (1 + erf(x *
    0.70710678118))``; ELU ``x`` for ``x >= 0`` else ``a (exp(x) - 1)``; hard sigmoid ``clip(a x + b, 0,
    1)``; ``a``, ``b`` the parameters through ``non_linear_param`` and back (``/ 2^24``)."""
    if kind == "Sigmoid":
        return refined_reciprocal_divide(1.0, float(exp_taylor(np.float32(-x))) + 1.0)
    if kind == "Tanh":
        return math.tanh(x)
    if kind == "GELU":
        return 0.5 * x * (1.0 + math.erf(x * 0.70710678118))
    a = non_linear_param(alpha) / float(NON_LINEAR_PARAM_SCALE)
    if kind == "ELU":
        return x if not x < 0.0 else a * (math.exp(x) - 1.0)
    if kind == "HardSigmoid":
        b = non_linear_param(beta) / float(NON_LINEAR_PARAM_SCALE)
        return min(max(a * x + b, 0.0), 1.0)
    raise FixedPointError(f"activation {kind}: TI has no table for it ({', '.join(TI_TABLE_ACTIVATIONS)})")


def ti_activation_table(kind: str, in_scale: float, in_signed: bool, out_scale: float, out_signed: bool,
                        alpha: float = 1.0, beta: float = 0.5, in_zero_point: int = 0,
                        out_zero_point: int = 0) -> np.ndarray:
    """§8.10.2 TI's 256-entry table of an 8-bit activation layer (TI: ``TIDL_getQuantizeLUT`` through
    ``TIDL_prepareLUTTable``, TIDL 10.x/11.x import), one entry per value ``q`` of the **input** type,
    lowest first: ``lut_quantize(lut_function(lut_input_value(q)), out)``."""
    if not in_scale > 0 or not out_scale > 0:
        raise FixedPointError(f"activation table: scales must be > 0, got input {in_scale}, output {out_scale}")
    lo, hi = saturation_bounds(8, in_signed)
    return np.array([lut_quantize(lut_function(kind, lut_input_value(q, in_zero_point, in_scale), alpha, beta),
                                  out_scale, out_zero_point, 8, out_signed) for q in range(lo, hi + 1)], np.int64)


#: TI's ``SOFTMAX_16_BIT_SCALE_LIM``: a 16-bit softmax output's scale per element of the softmax axis.
SOFTMAX_16_BIT_SCALE_PER_ELEMENT = 254


def softmax_fixed_output_scale(bits: int, axis_length: int) -> float:
    """§8.9 the tensorScale of a softmax's fixed-point (unsigned) output (TI: ``TIDL_UpdateScaleFactors``,
    TIDL 10.x/11.x): 8-bit 256; 16-bit ``254 x`` the input's length along the softmax axis
    (``SOFTMAX_16_BIT_SCALE_LIM x dim``, TI's default ``softmax16BitScaleUpdate`` 0; 65536 only with
    that option set)."""
    if int(bits) == 8:
        return 256.0
    if int(bits) == 16:
        if int(axis_length) < 1:
            raise FixedPointError(f"softmax: an axis of length {axis_length}")
        return float(SOFTMAX_16_BIT_SCALE_PER_ELEMENT * int(axis_length))
    raise FixedPointError(f"softmax: a fixed-point output of {bits} bits (8 or 16)")


def leaky_relu_uses_table(tidl_version: str, in_bits: int, out_bits: int) -> bool:
    """§8.10.1: whether a standalone leaky ReLU is TI's table (TI: ``TIDL_LUTMethodMapTable``, TIDL
    10.x/11.x: the 8-bit hardware table, AM62A's 8-bit single-point table, the 16-bit single-point table
    on every device, each built by ``TIDL_prepareLUTTable``): TIDL 10.x/11.x with input and output of
    one width, 8 or 16 bits. Else the PReLU rule."""
    return str(tidl_version) in TI_TABLE_VERSIONS and int(in_bits) == int(out_bits) and int(in_bits) in (8, 16)


def leaky_relu_table(in_scale: float, in_bits: int, in_signed: bool, out_scale: float, out_signed: bool,
                     alpha: float) -> np.ndarray:
    """§8.10.1 TI's leaky ReLU table (TI: ``TIDL_getQuantizeLUT`` with ``TIDL_leakyRelu``, TIDL 11.x
    import), one entry per value ``q`` of the input type, lowest first, output of the input's width:
    ``x = (float)q / (float)inScale`` widened to double; ``y = x`` for ``x >= 0``, else ``x * alpha``
    with ``alpha`` the float32 slope in double; ``round(y * outScale)`` in double, halves away from
    zero, saturated to the output type."""
    if not in_scale > 0 or not out_scale > 0:
        raise FixedPointError(f"leaky ReLU table: scales must be > 0, got input {in_scale}, output {out_scale}")
    lo, hi = saturation_bounds(int(in_bits), in_signed)
    q = np.arange(lo, hi + 1)
    x = (q.astype(np.float32) / np.float32(in_scale)).astype(np.float64)
    y = np.where(x >= 0.0, x, x * float(np.float32(alpha)))
    v = y * float(np.float32(out_scale))
    r = np.floor(np.abs(v) + 0.5) * np.where(v >= 0.0, 1.0, -1.0)
    olo, ohi = saturation_bounds(int(in_bits), out_signed)
    return np.clip(r, olo, ohi).astype(np.int64)


def pla_sigmoid(q, in_scale: float, round_bits_: int, in_zero_point: int = 0) -> np.ndarray:
    """§8.10.2 AM62A's 8-bit sigmoid, four line segments in integers (TI: ``TIDL_refSigmoidCore`` on
    C7504, offsets by ``TIDL_refSigmoidProcess``), unsigned 8-bit out. With ``s = tensorScale`` of the
    input: offsets ``o_k`` (``PLA_SIGMOID_OFFSETS``) become ``(uint8)(o_k * s / m)`` with ``m =
    (uint8) s`` when ``s > 1``, else ``(uint8)(o_k * s)`` with ``m = 1`` (float32 products, truncated);
    thresholds ``t_j = (uint32)(T_j * 16 * s)`` (T = 5, 2.375, 1). Per element ``a = |q - zero|``: the
    segment k is the first with ``16 a >= t_k`` (else the last), ``v = slope_k * a + o_k * m``; below
    the zero point ``v = o_0 * m - v``; ``out = roundSat(v, roundBits)`` to uint8. The accumulator's
    scale is ``128 s``."""
    s = np.float32(in_scale)
    if s > 1:
        m = int(np.uint8(int(s)))
        offsets = [int(np.float32(np.float32(o) * s) / np.float32(m)) & 0xFF for o in PLA_SIGMOID_OFFSETS]
    else:
        m = 1
        offsets = [int(np.float32(o) * s) & 0xFF for o in PLA_SIGMOID_OFFSETS]
    thresholds = [int(np.float32(np.float32(t) * np.float32(PLA_SIGMOID_THRESHOLD_SCALE)) * s)
                  for t in PLA_SIGMOID_THRESHOLDS]
    qi = np.asarray(q, np.int64)
    a = np.abs(qi - int(in_zero_point))
    scaled = a * PLA_SIGMOID_THRESHOLD_SCALE
    segment = np.where(scaled >= thresholds[0], 0, np.where(scaled >= thresholds[1], 1,
                                                            np.where(scaled >= thresholds[2], 2, 3)))
    slope = np.array(PLA_SIGMOID_SLOPES, np.int64)[segment]
    offset = np.array(offsets, np.int64)[segment] * m
    v = slope * a + offset
    v = np.where(qi < int(in_zero_point), offsets[0] * m - v, v)
    rb = int(round_bits_)
    if rb > 0:
        v = (v + (1 << (rb - 1))) >> rb
    return np.clip(v, 0, 255).astype(np.int64)


def pla_sigmoid_table(in_scale: float, in_signed: bool, round_bits_: int) -> np.ndarray:
    """§8.10.2 ``pla_sigmoid`` over every value of the 8-bit input type, lowest first (the same integers
    as TI's per-element arithmetic, as a table)."""
    lo, hi = saturation_bounds(8, in_signed)
    return pla_sigmoid(np.arange(lo, hi + 1), in_scale, round_bits_)


def table_layer_acc_scale(kind: str, in_scale: float, bits: int) -> float:
    """§8.10.2 the accumulator scale TI's import gives an activation BatchNorm layer (TI:
    ``TIDL_UpdateScaleFactors``): its weight scale ``2^(bits-1)`` (a batch norm before sigmoid, tanh,
    hard sigmoid or ELU) times the input's tensorScale; GELU: the input's tensorScale alone."""
    return float(in_scale) if kind == "GELU" else float(in_scale) * float(1 << (int(bits) - 1))


def table_layer_is_signed(kind: str) -> bool:
    """§8.10.2 TI's output type of an activation BatchNorm layer: unsigned for sigmoid, signed (the batch
    norm's own type) for the others."""
    return kind != "Sigmoid"


def clip_activation_bounds(out: FixedType, tensor_scale: float, clip_min: float, clip_max: float,
                           fused: bool = True) -> Tuple[int, int]:
    """§8.10: the saturation of a Clip activation. Fused into a layer (convolution, deconvolution, inner
    product, batch norm, element-wise, pooling): the output type's bounds only -- TI's kernels saturate
    with ``TIDL_getSaturationLimits`` (``tidl_conv2d_base_ref.c``) or their output type's
    ``numeric_limits`` (``TIDL_refBatchNormCore``); the clip acts through the range (§6.2: its bounds, an
    unsigned type when clipMin >= 0) and, for [0, c] and [-c, c], §4.7's forced scale. A standalone Clip
    layer, which keeps its input's scale (tidlx's choice): the clip's bounds at that scale
    (``activation_bounds``)."""
    if fused:
        return out.bounds
    return activation_bounds(out, "clip", tensor_scale, clip_min, clip_max)


def per_channel_layer_weight_scale(abs_max: float, bits: int) -> float:
    """§4.5: the weight scale whose accScale (times the input scale, §6.1) gives a per-channel layer its
    roundBits and tensorScale. TI (TIDL 11.x): ``TIDL_UpdateScaleFactors`` reads the layer's
    ``convParams.weightScale``, which ``TIDL_updateParamsRange`` set to ``TIDL_GetMaxQuantScale`` of all
    the layer's weights (``abs_max``: after §4.3's limit with WeightRange) and ``TIDL_QuantPerChannelWeight``
    leaves as it is (its scales go to ``perChannelWeightScale``; the statistics run's largest-output
    channel scale is not read back by ``TIDL_readQuantStats``). P2, as the network is P2Dynamic; no bias
    clip (§4.4), no §4.7 forcing; an absMax below 1e-15 gives 1 (TI's -1 made 1)."""
    ws = weight_scale(abs_max, bits, power_of_2=True)
    return ws if ws > 0 else 1.0
