"""Import-side integer rules of TIDL's asymmetric per-channel style (``quantization_scale_type`` 4, TIDL's
internal quantization style 6, AsymNP2): docs/numerics.md §12.

    scale, zp = activation_scale_and_zero_point(lo, hi, bits=8, signed=True)        # §12.2
    mma = mma_search(ratio, weight_bits=8)                                           # §12.1
    ch = quantize_channel(w_c, b_c, in_scale, in_zp, out_scale, out_zp, 8)          # §12.3-§12.5

Scales multiply (``q = x * scale + zp``). TI keeps scales in float32 and the bias term in double; each
function says which. The runtime half (the requantization with ``mmaScale``/``mmaShift``) is in
``tidlx.emulator.fixed.arith_asym`` (§12.6-§12.9).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from ...emulator.fixed.arith import FixedPointError, saturation_bounds

#: §12.1: the largest multiplier (an unsigned 8-bit value) and the right-shift limits by weight width.
MMA_MAX_SCALE = 255
MMA_MAX_SHIFT_8 = 40
MMA_MAX_SHIFT_16 = 64
#: §12.3: the smallest out/(in x weight) ratio kept, by weight width (TI's MMAv2 minimum scales).
MMA_MIN_RATIO_8 = np.float32(2.14 * 10e-9)
MMA_MIN_RATIO_16 = np.float32(10e-15)
#: §12.4: the widest bias term, in bits, by weight width; the weight scale halves until the term fits.
MAX_BIAS_TERM_BITS_8 = 30
MAX_BIAS_TERM_BITS_16 = 53
#: §12.3: a ratio whose best multiplier is off by more than this (relative) moves the weight scale ...
MAX_RATIO_ERROR = np.float32(10e-4)
#: ... when the move is smaller than this (relative).
MAX_WEIGHT_SCALE_MOVE = np.float32(2.0 * 10e-3)
#: §12.2: a range narrower than this quantizes to nothing (tidlx's value; TI names the constant only).
MIN_RANGE = 1e-15


def _round_half_away(v: float) -> float:
    """C's ``round``: half away from zero."""
    return math.copysign(math.floor(abs(v) + 0.5), v)


@dataclass(frozen=True)
class MmaFactor:
    """A ratio as ``scale / 2^shift`` (§12.1) and the search's absolute error (float32)."""

    scale: int
    shift: int
    error: float

    @property
    def value(self) -> float:
        return self.scale / float(2 ** self.shift)


def mma_max_shift(weight_bits: int) -> int:
    """§12.1: the right shift the MMA applies, at most 40 with 8-bit weights and 64 with 16-bit ones
    (TI: ``TIDL_getMMAv2_ScaleShiftAndError``'s ``maxShiftBits``)."""
    return MMA_MAX_SHIFT_16 if weight_bits > 8 else MMA_MAX_SHIFT_8


def mma_search_plain(ratio: float, weight_bits: int = 8) -> MmaFactor:
    """§12.1 (TI: ``TIDL_getMMAv2_ScaleShiftAndError``): for every multiplier 1..255 the shift nearest to
    ``log2(multiplier / ratio)`` (rounded half away from zero, clamped to [0, max shift]); the pair whose
    float32 value ``multiplier / 2^shift`` is nearest to the float32 ratio wins, the smallest multiplier on
    a tie. The rule as written, one multiplier at a time; ``mma_search`` gives the same answers faster."""
    r = _positive_ratio(ratio)
    limit = mma_max_shift(weight_bits)
    best = None
    for m in range(1, MMA_MAX_SCALE + 1):
        shift = int(_round_half_away(math.log(m / float(r)) / math.log(2.0)))
        shift = min(max(shift, 0), limit)
        approx = np.float32(m / math.pow(2.0, shift))
        err = np.float32(abs(np.float32(r - approx)))
        if best is None or err < best.error:
            best = MmaFactor(m, shift, float(err))
    return best


def _positive_ratio(ratio: float) -> np.float32:
    r = np.float32(ratio)
    if not (math.isfinite(float(r)) and r > 0):
        raise FixedPointError(f"MMA scale ratio {ratio}: must be a finite positive number")
    return r


_MULTIPLIERS = np.arange(1, MMA_MAX_SCALE + 1, dtype=np.float64)
#: a log2 this close to a half-integer is recomputed with the C library's log, as the plain rule does:
#: numpy's vector log may differ from it in the last bit, which could only matter at a rounding tie.
_TIE_MARGIN = 1e-9


def mma_search(ratio: float, weight_bits: int = 8) -> MmaFactor:
    """§12.1, all 255 multipliers at once: ``mma_search_plain``'s answer (tests/fixed check both on the
    same ratios). Cached: the calibration loop asks again for the same ratios at every iteration."""
    return _mma_search_vector(float(_positive_ratio(ratio)), mma_max_shift(weight_bits))


def mma_search_from_above(ratio: float, weight_bits: int = 8) -> MmaFactor:
    """§12.1 as TI's inner products search (TI 11.x: ``TIDL_getMMAv2_ScaleShiftAndError`` with ``skipCheck``,
    from the inner-product branches of ``TIDL_asymUpdateScalesAndShifts`` and ``TIDL_asymDeriveBiasTerm``): a
    pair whose float32 value is below the ratio does not take part (it would widen the weight scale); of the
    others the nearest, the smallest multiplier on a tie."""
    return _mma_search_vector(float(_positive_ratio(ratio)), mma_max_shift(weight_bits), True)


@functools.lru_cache(maxsize=1 << 16)
def _mma_search_vector(ratio: float, limit: int, from_above: bool = False) -> MmaFactor:
    r = np.float32(ratio)
    log2 = np.log(_MULTIPLIERS / float(r)) / math.log(2.0)
    near_tie = np.abs(np.abs(log2) - np.floor(np.abs(log2)) - 0.5) < _TIE_MARGIN
    for i in np.flatnonzero(near_tie):
        log2[i] = math.log(_MULTIPLIERS[i] / float(r)) / math.log(2.0)
    shifts = np.clip(np.copysign(np.floor(np.abs(log2) + 0.5), log2), 0, limit)
    approx = (_MULTIPLIERS / np.exp2(shifts)).astype(np.float32)
    errors = np.abs(r - approx)   # float32 arithmetic, as the plain rule
    if from_above:
        errors = np.where(approx < r, np.float32(np.inf), errors)
        if not np.isfinite(errors).any():
            raise FixedPointError(f"MMA scale ratio {ratio}: no multiplier and shift reach it from above")
    best = int(np.argmin(errors))   # the first of equal errors: the smallest multiplier
    return MmaFactor(best + 1, int(shifts[best]), float(errors[best]))


def activation_scale_and_zero_point(lo: float, hi: float, bits: int, signed: bool) -> Tuple[float, int]:
    """§12.2 (TI 11.x: ``TIDL_asymRangeToScale`` on an asymmetric tensor): a feature map's scale and zero
    point from its range. ``scale = (2^bits - 1) / range``; ``zp = round(top - scale * hi)`` (half away
    from zero) saturated to the type, ``top`` the type's largest value (127 / 255 for 8 bits). The range is
    ``hi - lo``, or ``max(|lo|, |hi|)`` when the range does not hold 0. A scale below 1 for a range that
    fits the type becomes 1 (zp recomputed). A range under ``MIN_RANGE``: ``(2^(bits-s)-1) / |hi|``, zp 0;
    all zero: scale ``(2^(bits-s)-1) x 1000``, zp 0. Scales in float32."""
    lo, hi = float(np.float32(lo)), float(np.float32(hi))
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise FixedPointError(f"asymmetric scale: the range [{lo}, {hi}] is not a finite range")
    tlo, thi = saturation_bounds(bits, signed)
    span = float(np.float32(hi - lo))
    if abs(span) < MIN_RANGE:
        sym_top = float(thi)
        if hi != 0:
            return float(np.float32(sym_top / abs(hi))), 0
        return float(np.float32(np.float32(sym_top) * np.float32(1000.0))), 0
    if hi < 0 or lo > 0:
        span = max(abs(lo), abs(hi))
    full = float((1 << bits) - 1)
    scale = np.float32(np.float32(full) / np.float32(span))

    def zero_point(s) -> int:
        z = _round_half_away(float(np.float32(np.float32(thi) - np.float32(s) * np.float32(hi))))
        return int(min(max(z, tlo), thi))

    zp = zero_point(scale)
    if scale < 1.0 and hi <= thi and lo >= (-(1 << (bits - 1)) if signed else 0):
        scale = np.float32(1.0)
        zp = zero_point(scale)
    return float(scale), zp


def symmetric_scale(lo: float, hi: float, bits: int, signed: bool) -> float:
    """§12.13 (TI 11.x: ``TIDL_asymRangeToScale`` on a ``TIDL_SYMMETRIC_TENSOR``, the tensor a layer without
    zero-point arithmetic reads, ``TIDL_areConsumerLayersAsym``): zero point 0 and
    ``scale = top / max(|lo|, |hi|)``, ``top`` the type's largest value (127, 255, 32767, 65535), float32;
    a scale below 1 for a range that fits the type becomes 1; a range under ``MIN_RANGE`` as §12.2's."""
    lo, hi = float(np.float32(lo)), float(np.float32(hi))
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise FixedPointError(f"symmetric scale: the range [{lo}, {hi}] is not a finite range")
    tlo, thi = saturation_bounds(bits, signed)
    if abs(float(np.float32(hi - lo))) < MIN_RANGE:
        return activation_scale_and_zero_point(lo, hi, bits, signed)[0]
    scale = np.float32(np.float32(thi) / np.float32(max(abs(lo), abs(hi))))
    if scale < 1.0 and hi <= thi and lo >= tlo:
        scale = np.float32(1.0)
    return float(scale)


def channel_weight_scale(w_channel: np.ndarray, weight_bits: int = 8) -> float:
    """§12.3 (TI: ``TIDL_asymRangeToScale`` on a symmetric weight tensor, one output channel): weights stay
    symmetric, ``scale = (2^(bits-1) - 1) / max(|min|, |max|)`` (127 for 8 bits), float32. A channel whose
    range is under ``MIN_RANGE`` (every weight the same) takes that function's narrow-range scale, as a
    feature map's (§12.2): ``top / |max|``, so a constant ``c`` quantizes to ``+-top``, or ``top x 1000``
    for an all-zero channel."""
    w = np.asarray(w_channel, np.float32)
    lo, hi = float(w.min()), float(w.max())
    if abs(float(np.float32(hi - lo))) < MIN_RANGE:
        return activation_scale_and_zero_point(lo, hi, weight_bits, True)[0]
    top = float((1 << (weight_bits - 1)) - 1)
    return float(np.float32(np.float32(top) / np.float32(max(abs(lo), abs(hi)))))


def product_width_weight_scale(weight_scale: float, in_scale: float, out_lo: float, out_hi: float,
                               weight_bits: int = 8) -> float:
    """§12.3 step 1 (TI 11.x: ``TIDL_asymUpdateScalesAndShifts``, convolution and inner-product branches, right
    after each channel's ``TIDL_asymRangeToScale``): the width of each end of the output range at the
    accumulator's scale, ``ceil(log2(|sw x sx x v|))`` (float32 product and log; one more bit when the
    product is negative; 0 for ``v = 0`` or an infinite product). When either width exceeds the bias-term
    limit (30 bits for 8-bit weights, 53 for 16-bit), ``sw`` is divided by ``2^(widest - limit)`` (float32)."""
    limit = MAX_BIAS_TERM_BITS_16 if weight_bits > 8 else MAX_BIAS_TERM_BITS_8
    acc = np.float32(np.float32(weight_scale) * np.float32(in_scale))

    def width(v: float) -> int:
        if np.float32(v) == 0:
            return 0
        with np.errstate(over="ignore", invalid="ignore"):
            p = np.float32(acc * np.float32(v))
        if not np.isfinite(p):   # an infinite scale (denormal weights): TI's int cast of inf is negative on
            return 0             # x86, so no check; §12.3's ratio clamp then takes the channel
        n = int(math.ceil(float(np.log2(np.abs(p)))))
        return n + 1 if p < 0 else n

    hi_bits, lo_bits = width(out_hi), width(out_lo)
    if hi_bits <= limit and lo_bits <= limit:
        return weight_scale
    widest = lo_bits if lo_bits > hi_bits else hi_bits
    return float(np.float32(np.float32(weight_scale) / np.float32(2.0 ** (widest - limit))))


def scale_ratio(out_scale: float, in_scale: float, weight_scale: float, weight_bits: int = 8) -> Tuple[float, float]:
    """§12.3 (TI: ``TIDL_asymGetScaleRatio``): ``ratio = outScale / (weightScale x inScale)`` (float32),
    clamped to [min ratio, 255]; a clamped ratio moves the weight scale to ``outScale / (ratio x inScale)``.
    Returns (ratio, weight scale)."""
    lo_ratio = MMA_MIN_RATIO_16 if weight_bits > 8 else MMA_MIN_RATIO_8
    so, si, sw = np.float32(out_scale), np.float32(in_scale), np.float32(weight_scale)
    r = np.float32(so / np.float32(sw * si))
    if r > np.float32(MMA_MAX_SCALE):
        return float(MMA_MAX_SCALE), float(np.float32(so / np.float32(np.float32(MMA_MAX_SCALE) * si)))
    if r < lo_ratio:
        return float(lo_ratio), float(np.float32(so / np.float32(lo_ratio * si)))
    return float(r), float(sw)


def ratio_missed(ratio: float, mma: MmaFactor) -> bool:
    """§12.3 step 3 (TI: ``TIDL_asymUpdateScalesAndShifts``): the multiplier misses the ratio by more than
    0.1% (relative, float32)."""
    return bool(np.float32(np.float32(mma.error) / np.float32(ratio)) > MAX_RATIO_ERROR)


def refined_weight_scale(ratio: float, mma: MmaFactor, out_scale: float, in_scale: float,
                         weight_scale: float, any_move: bool = False) -> float:
    """§12.3 (TI: ``TIDL_asymUpdateScalesAndShifts``): when the multiplier misses the ratio by more than
    0.1% (relative), the weight scale that makes the multiplier exact, ``outScale / (mma x inScale)``, is
    taken if it moves the weight scale by less than 2% (float32), or whatever the move with ``any_move``
    (TI's inner product with 16-bit weights)."""
    if not ratio_missed(ratio, mma):
        return weight_scale
    hw = np.float32(mma.value)
    ideal = np.float32(np.float32(out_scale) / np.float32(hw * np.float32(in_scale)))
    sw = np.float32(weight_scale)
    if any_move or np.float32(abs(np.float32(ideal - sw)) / sw) < MAX_WEIGHT_SCALE_MOVE:
        return float(ideal)
    return weight_scale


def quantize_symmetric_weights(w: np.ndarray, scale: float, weight_bits: int = 8) -> np.ndarray:
    """§12.3 (TI: ``TIDL_QuantizeFloatToFixed`` with zero point 0): ``round(w x scale)`` half away from
    zero (float32 product), saturated to the signed weight type."""
    lo, hi = saturation_bounds(weight_bits, True)
    v = np.asarray(w, np.float32) * np.float32(scale)
    q = np.sign(v) * np.floor(np.abs(v.astype(np.float64)) + 0.5)
    return np.clip(q, lo, hi).astype(np.int8 if weight_bits == 8 else np.int16)


def bias_term(bias: float, in_scale: float, weight_scale: float, in_zp: int, out_scale: float, out_zp: int,
              weight_sum: int) -> float:
    """§12.4 (TI: ``TIDL_asymDeriveBiasTerm``): the accumulator's constant, in double: the float bias at
    the accumulator scale, plus the output zero point brought to it, minus the input zero point times the
    channel's weight sum: ``b sx sw + zy (sx sw / sy) - zx sum(wq)``."""
    sx, sw, sy = float(np.float32(in_scale)), float(np.float32(weight_scale)), float(np.float32(out_scale))
    n_scale = (sx * sw) / sy
    return float(bias) * sx * sw + (out_zp * n_scale - in_zp * float(weight_sum))


def bias_term_bits(value: float) -> int:
    """§12.4 (TI: ``TIDL_calculateAsymmetricAbsBiasTermBits``): one more than the largest n with
    ``|value| >= 2^n - 1`` (1 for 0)."""
    a = abs(float(value))
    n = 63
    while n >= 0 and a < math.pow(2.0, n) - 1:
        n -= 1
    return n + 1


@dataclass(frozen=True)
class ChannelQuantization:
    """One output channel of a style-4 convolution / inner product (§12.3-§12.5)."""

    weights: np.ndarray    # the channel's integer weights (symmetric, zero point 0)
    weight_scale: float
    mma_scale: int
    mma_shift: int
    bias: int              # the accumulator's constant (int32 for 8-bit weights, int64 for 16-bit)
    zeroed: bool = False   # §12.5: the bias alone drives the channel, its weights were zeroed
    missed: bool = False   # §12.3 step 3: the first search missed the ratio by more than 0.1%


def quantize_channel(w: np.ndarray, bias: float, in_scale: float, in_zp: int, out_scale: float, out_zp: int,
                     weight_bits: int = 8, out_range: Optional[Tuple[float, float]] = None,
                     inner_product: bool = False, missed_before: bool = False) -> ChannelQuantization:
    """§12.3-§12.5 for one output channel (TI: ``TIDL_asymUpdateScalesAndShifts`` and
    ``TIDL_asymDeriveBiasTerm``): the symmetric weight scale, its width check against the output range
    ``out_range`` (``(lo, hi)``; None skips it), the ratio clamp and MMA search, the 0.1%/2% refinement, the
    weights, the bias-term width limit (weight scale halved, at most bits - 1 times, then 1.0), the final
    search, then the integer bias (or, when it overflows its container, TI's bias-only channel).
    ``inner_product``: TI's inner-product branch (§12.3, *Inner products*): searches from above, any move
    with 16-bit weights, and no final search once a channel of the layer (``missed_before``, or this one)
    missed its ratio. ``quantize_channels`` carries that across a layer's channels."""
    search = mma_search_from_above if inner_product else mma_search
    w = np.asarray(w, np.float32)
    sw = channel_weight_scale(w, weight_bits)
    if out_range is not None:
        sw = product_width_weight_scale(sw, in_scale, out_range[0], out_range[1], weight_bits)
    ratio, sw = scale_ratio(out_scale, in_scale, sw, weight_bits)
    mma = search(ratio, weight_bits)
    missed = ratio_missed(ratio, mma)
    sw = refined_weight_scale(ratio, mma, out_scale, in_scale, sw, any_move=inner_product and weight_bits == 16)
    wq = quantize_symmetric_weights(w, sw, weight_bits)
    limit = MAX_BIAS_TERM_BITS_16 if weight_bits > 8 else MAX_BIAS_TERM_BITS_8
    most = weight_bits - 1
    reductions = 0
    bits = bias_term_bits(bias_term(bias, in_scale, sw, in_zp, out_scale, out_zp, int(wq.astype(np.int64).sum())))
    while bits > limit:
        reductions += 1
        sw = float(np.float32(np.float32(sw) / np.float32(2.0)))
        if reductions > most:
            sw = 1.0
        wq = quantize_symmetric_weights(w, sw, weight_bits)
        bits = bias_term_bits(bias_term(bias, in_scale, sw, in_zp, out_scale, out_zp, int(wq.astype(np.int64).sum())))
        if reductions > most:
            break
    if not (inner_product and (missed_before or missed)):
        ratio, sw = scale_ratio(out_scale, in_scale, sw, weight_bits)
        mma = search(ratio, weight_bits)
    acc_lo, acc_hi = saturation_bounds(32 if weight_bits <= 8 else 64, True)
    term = bias_term(bias, in_scale, sw, in_zp, out_scale, out_zp, int(wq.astype(np.int64).sum()))
    if abs(term) > acc_hi:
        only = bias_only_channel(w.shape, bias, in_scale, out_scale, out_zp, weight_bits, inner_product)
        return ChannelQuantization(only.weights, only.weight_scale, only.mma_scale, only.mma_shift, only.bias,
                                   zeroed=True, missed=missed)
    return ChannelQuantization(wq, sw, mma.scale, mma.shift, int(_round_half_away(term)), missed=missed)


def quantize_channels(w: np.ndarray, biases, in_scale: float, in_zp: int, out_scale: float, out_zp: int,
                      weight_bits: int = 8, out_range: Optional[Tuple[float, float]] = None,
                      inner_product: bool = False) -> list:
    """§12.3-§12.5 for a layer's output channels in order (``w[c]`` the weights of channel ``c``): each by
    ``quantize_channel``; an inner product's channels after the first that missed its ratio skip the final
    search (TI's layer-wide ``weightScaleCorrection``, set and never cleared in its channel loop)."""
    out, missed = [], False
    for c in range(len(w)):
        ch = quantize_channel(w[c], float(biases[c]), in_scale, in_zp, out_scale, out_zp, weight_bits, out_range,
                              inner_product, missed)
        missed = missed or ch.missed
        out.append(ch)
    return out


def bias_only_channel(shape, bias: float, in_scale: float, out_scale: float, out_zp: int,
                      weight_bits: int = 8, inner_product: bool = False) -> ChannelQuantization:
    """§12.5 (TI: ``TIDL_asymDeriveBiasTerm``, saturation case): a bias term beyond its container makes the
    channel a constant: weights 0, weight scale 1 multiplied by 10 until ``outScale / (sw x inScale)`` is at
    most 255, the multiplier searched for that ratio (from above for an inner product), the bias
    ``b sx sw + zy sx sw / sy``."""
    sx, sy = float(np.float32(in_scale)), float(np.float32(out_scale))
    sw = 1.0
    while sy / (sw * sx) > MMA_MAX_SCALE:
        sw *= 10.0
    sw = float(np.float32(sw))
    n_scale = (sx * sw) / sy
    mma = (mma_search_from_above if inner_product else mma_search)(1.0 / n_scale, weight_bits)
    term = float(bias) * sx * sw + out_zp * n_scale
    lo, hi = saturation_bounds(32 if weight_bits <= 8 else 64, True)
    return ChannelQuantization(np.zeros(shape, np.int8 if weight_bits == 8 else np.int16), sw, mma.scale, mma.shift,
                               int(min(max(_round_half_away(term), lo), hi)), zeroed=True)


#: §12.7: the largest input multiplier of an element-wise sum (TI's MMA takes 7-bit input scales), by width
ELTWISE_MAX_MULTIPLIER_8 = 127
ELTWISE_MAX_MULTIPLIER_16 = 32767


def eltwise_doubling(ratio: float, weight_bits: int = 8) -> Tuple[int, int]:
    """§12.7 step 2 (TI 11.x's import ``TIDL_getMMAv2_ScaleAndShift``): ``ratio`` (float32) doubled while
    the double stays at most 255 and the shift below its limit (40; 64 with 16-bit weights), the last
    doubling undone when it passed 255; the multiplier ``round(r)``. Returns (multiplier, shift)."""
    r = np.float32(ratio)
    if not (math.isfinite(float(r)) and r > 0):
        raise FixedPointError(f"element-wise scale ratio {ratio}: must be a finite positive number")
    limit, shift = mma_max_shift(weight_bits), 0
    while True:
        r = np.float32(r * np.float32(2.0))
        if shift >= limit:
            break
        if r > MMA_MAX_SCALE:
            r = np.float32(r / np.float32(2.0))
            break
        shift += 1
    scale = int(_round_half_away(float(r)))
    if scale > MMA_MAX_SCALE:
        raise FixedPointError(f"element-wise scale ratio {float(ratio):.6g}: beyond the 8-bit MMA multiplier "
                              f"(at most 255)")
    return scale, shift


def _inputs(values, what: str):
    values = list(values)
    if len(values) < 2:
        raise FixedPointError(f"{what}: needs two or more inputs, got {len(values)}")
    return values


def eltwise_multipliers(out_scale: float, in_scales, weight_bits: int = 8):
    """§12.7 steps 1-2 (TI 11.x: ``TIDL_asymUpdateScalesAndShifts``, element-wise sum): the ratios
    ``outScale / inScale_i`` (float32); ``(c, s)`` the import doubling of ``largest / 127`` (32767 at 16
    bit); ``u = c / 2^s``; each input's multiplier ``round(min(ratio / u, 127))``. Returns (ratios,
    multipliers, c, s, u)."""
    top = np.float32(ELTWISE_MAX_MULTIPLIER_16 if weight_bits > 8 else ELTWISE_MAX_MULTIPLIER_8)
    sy = np.float32(out_scale)
    ratios = [np.float32(sy / np.float32(sx)) for sx in _inputs(in_scales, "element-wise sum")]
    c, s = eltwise_doubling(float(np.float32(max(ratios) / top)), weight_bits)
    unit = np.float32(c / 2.0 ** s)
    mults = tuple(int(_round_half_away(float(min(np.float32(r / unit), top)))) for r in ratios)
    return ratios, mults, c, s, unit


def sum_factors(out_scale: float, in_scales, out_zp: int, in_zps, weight_bits: int = 8):
    """§12.7 (TI 11.x: ``TIDL_asymUpdateScalesAndShifts``, element-wise sum): the input multipliers and
    ``(c, s)`` of ``eltwise_multipliers``; the constant ``F = zy - sum_i z_i r_i`` (float32, in input
    order) brought to the accumulator, ``K = round(float32(F x float32(1 / u)))``.
    Returns ((M_i...), K, c, s)."""
    ratios, mults, c, s, unit = eltwise_multipliers(out_scale, in_scales, weight_bits)
    zps = _inputs(in_zps, "element-wise sum")
    f = np.float32(out_zp)
    for z, r in zip(zps, ratios):
        f = np.float32(f - np.float32(np.float32(z) * r))
    k = np.float32(f * np.float32(np.float32(1.0) / unit))
    return mults, int(_round_half_away(float(k))), c, s


def product_factors(out_scale: float, in_scales, out_zp: int, weight_bits: int = 8) -> Tuple[int, int, int]:
    """§12.11 (TI 11.x: ``TIDL_asymUpdateScalesAndShifts``, element-wise product): the ratio
    ``outScale x prod_i (1 / inScale_i)`` and the constant ``(zy / outScale) x prod_i inScale_i``, both in
    float32 in input order; ``(c, s)`` = §12.1's search for the ratio; ``K = round(constant)``.
    Returns (c, s, K)."""
    scales = _inputs(in_scales, "element-wise product")
    sy = np.float32(out_scale)
    ratio, const = sy, np.float32(np.float32(out_zp) / sy)
    for sx in scales:
        ratio = np.float32(ratio * np.float32(np.float32(1.0) / np.float32(sx)))
        const = np.float32(const * np.float32(sx))
    f = mma_search(float(ratio), weight_bits)
    return f.scale, f.shift, int(_round_half_away(float(const)))


def max_factors(out_scale: float, in_scales, out_zp: int, weight_bits: int = 8):
    """§12.11, tidlx's rule for an element-wise max (TI's import has none): §12.7's multipliers and
    ``(c, s)``, and the constant ``round(float32(zy x float32(1 / u)))`` added to ``max_i(M_i (q_i - z_i))``.
    Returns ((M_i...), K, c, s)."""
    _, mults, c, s, unit = eltwise_multipliers(out_scale, in_scales, weight_bits)
    k = np.float32(np.float32(out_zp) * np.float32(np.float32(1.0) / unit))
    return mults, int(_round_half_away(float(k))), c, s


def concat_factors(out_scale: float, in_scale: float, out_zp: int, in_zp: int,
                   weight_bits: int = 8) -> Tuple[int, int, int]:
    """§12.8 (TI 11.x: ``TIDL_asymUpdateScalesAndShifts``, concat): ``(m, s)`` = §12.1 for
    ``r = outScale / inScale`` (float32); ``bias = trunc(float32(zy x float32(inScale / outScale)) - zx)``,
    toward zero as TI's cast to int32. A ratio above 255 is an error. Returns (m, s, bias)."""
    sy, sx = np.float32(out_scale), np.float32(in_scale)
    r = np.float32(sy / sx)
    if r > MMA_MAX_SCALE:
        raise FixedPointError(f"concat: the output scale {float(sy):.6g} is more than 255 times an input's "
                              f"({float(sx):.6g}); TI then narrows the output's range, which tidlx has no rule for")
    f = mma_search(float(r), weight_bits)
    bias = np.float32(np.float32(np.float32(out_zp) * np.float32(sx / sy)) - np.float32(in_zp))
    return f.scale, f.shift, int(math.trunc(float(bias)))


# -- §12.12: tables and PReLU ------------------------------------------------------------------------

def activation_table_zp(kind: str, in_scale: float, in_zp: int, in_signed: bool, out_scale: float, out_zp: int,
                        out_signed: bool, alpha: float = 1.0, beta: float = 0.5, bits: int = 8) -> np.ndarray:
    """§12.12 (TI: ``TIDL_prepareLUT8bit`` / ``TIDL_getQuantizeLUT``, which take the input's and the output's
    zero points): §8.10.2's table over every value ``q`` of the input type, lowest first, ``x = float32(q -
    Zx) / float32(Sx)``, ``round(f(x) Sy + Zy)`` (C's round) saturated to the output type; input and output
    of ``bits`` (8: TI's 256 entries; 16: tidlx's choice, 65536 entries by the same rule)."""
    from . import numerics as nx
    if int(bits) == 8:
        return nx.ti_activation_table(kind, in_scale, in_signed, out_scale, out_signed, alpha, beta, int(in_zp),
                                      int(out_zp))
    if not in_scale > 0 or not out_scale > 0:
        raise FixedPointError(f"activation table: scales must be > 0, got input {in_scale}, output {out_scale}")
    lo, hi = saturation_bounds(int(bits), in_signed)
    return np.array([nx.lut_quantize(nx.lut_function(kind, nx.lut_input_value(q, int(in_zp), in_scale), alpha, beta),
                                     out_scale, int(out_zp), int(bits), out_signed) for q in range(lo, hi + 1)],
                    np.int64)


def style4_table_widths(tidl_version: str, in_bits: int, out_bits: int) -> bool:
    """§12.12: style 4's tables: TIDL 10.x/11.x with input and output of one width, 8 (TI's table) or 16
    bits (tidlx's choice, the same rule over 65536 values)."""
    from . import numerics as nx
    return str(tidl_version) in nx.TI_TABLE_VERSIONS and int(in_bits) == int(out_bits) and int(in_bits) in (8, 16)


def pla_sigmoid_output(in_scale: float, range_max: float, bits: int = 8) -> Tuple[int, float]:
    """§12.12, tidlx's choice for AM62A's piecewise-linear sigmoid in style 4 (TI: ``TIDL_refSigmoidCore``
    has no zero-point term; its integers are at ``128 Sx``): the output is unsigned with zero point 0,
    roundBits by §6.3 on ``[0, range_max]`` at accScale ``2^(bits-1) Sx`` and tensorScale
    ``accScale / 2^roundBits`` (§8.10.2 without §6.6's guard). Returns (roundBits, tensorScale)."""
    from . import numerics as nx
    acc = nx.table_layer_acc_scale("Sigmoid", in_scale, bits)
    rb = nx.round_bits(acc, 0.0, max(float(range_max), 0.0), bits, False)
    return rb, nx.tensor_scale(acc, rb)


def pla_sigmoid_table_zp(in_scale: float, in_zp: int, in_signed: bool, round_bits: int) -> np.ndarray:
    """§12.12, tidlx's choice: AM62A's piecewise-linear sigmoid (§8.10.2, ``numerics.pla_sigmoid``) over
    every value of the 8-bit input type with ``a = |q - Zx|``, as a table (TI's reference reads ``|q|``:
    its asymmetric input was not read)."""
    from . import numerics as nx
    lo, hi = saturation_bounds(8, in_signed)
    return nx.pla_sigmoid(np.arange(lo, hi + 1), in_scale, round_bits, int(in_zp))


def leaky_relu_table_zp(in_scale: float, in_zp: int, in_bits: int, in_signed: bool, out_scale: float, out_zp: int,
                        out_signed: bool, alpha: float) -> np.ndarray:
    """§12.12 (TI: ``TIDL_getQuantizeLUT`` with ``TIDL_leakyRelu``, the zero points as in every TI table): one
    entry per value ``q`` of the input type, lowest first: ``x = float32(q - Zx) / float32(Sx)`` widened to
    double, ``y = x`` for ``x >= 0`` else ``x * float32(alpha)``, ``round(y Sy + Zy)`` (halves away from
    zero) saturated to the output type of the input's width."""
    if not in_scale > 0 or not out_scale > 0:
        raise FixedPointError(f"leaky ReLU table: scales must be > 0, got input {in_scale}, output {out_scale}")
    lo, hi = saturation_bounds(int(in_bits), in_signed)
    q = np.arange(lo, hi + 1)
    x = ((q - int(in_zp)).astype(np.float32) / np.float32(in_scale)).astype(np.float64)
    y = np.where(x >= 0.0, x, x * float(np.float32(alpha)))
    v = y * float(np.float32(out_scale)) + int(out_zp)
    r = np.floor(np.abs(v) + 0.5) * np.where(v >= 0.0, 1.0, -1.0)
    olo, ohi = saturation_bounds(int(in_bits), out_signed)
    return np.clip(r, olo, ohi).astype(np.int64)


def prelu_factors(out_scale: float, in_scale: float, slopes, weight_bits: int = 8
                  ) -> Tuple[MmaFactor, Tuple[Tuple[int, int], ...]]:
    """§12.12, tidlx's rule for a PReLU / leaky ReLU in style 4 (TI's batch-norm PReLU kernel,
    ``TIDL_refBatchNormCore``, has no zero-point term): the positive side's ratio ``sy / sx`` and each
    channel's negative ratio ``|slope| sy / sx`` (float32) as §12.1 multipliers and shifts; a negative
    slope negates its multiplier, a zero slope is (0, 0). Returns (positive factor, ((m, s) per channel))."""
    so, si = np.float32(out_scale), np.float32(in_scale)
    ratio = np.float32(so / si)
    pos = mma_search(float(ratio), weight_bits)
    neg = []
    for slope in np.asarray(slopes, np.float64).reshape(-1):
        r = np.float32(np.float32(abs(float(np.float32(slope)))) * ratio)
        if r == 0:
            neg.append((0, 0))
            continue
        f = mma_search(float(r), weight_bits)
        neg.append((-f.scale if slope < 0 else f.scale, f.shift))
    return pos, tuple(neg)


__all__ = ["MmaFactor", "ChannelQuantization", "mma_max_shift", "mma_search", "mma_search_plain",
           "mma_search_from_above", "ratio_missed", "quantize_channels",
           "activation_scale_and_zero_point", "symmetric_scale",
           "channel_weight_scale", "product_width_weight_scale", "scale_ratio", "refined_weight_scale",
           "quantize_symmetric_weights", "bias_term",
           "bias_term_bits", "quantize_channel", "bias_only_channel", "eltwise_doubling", "eltwise_multipliers",
           "sum_factors", "product_factors", "max_factors", "concat_factors",
           "activation_table_zp", "style4_table_widths", "pla_sigmoid_output", "pla_sigmoid_table_zp",
           "leaky_relu_table_zp", "prelu_factors"]
