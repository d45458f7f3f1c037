"""Runtime integer rules of TIDL's asymmetric per-channel style (``quantization_scale_type`` 4, style 6):
docs/numerics.md §12.6-§12.9. The import-side rules that choose the numbers are in
``tidlx.backends.tidl.asymmetric``.

    y = convolution_mma(x, w, bias, mma_scale, mma_shift, out, zero_point=zx, pads=1)

A tensor's real value is ``(q - zp) / scale``. Every function takes integer arrays in their TIDL dtypes
and gives the output type's dtype.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from .arith import (FixedPointError, FixedType, _bounds, _integers, _tensor, accumulator_bits,
                    convolution_columns, float_convert_input, round_sat, wrap_accumulator)

#: §12.6: the 8-bit MMA keeps 40 bits of the requantized accumulator.
MMA_ACC_MASK_8 = (1 << 40) - 1


def mma_requantize(acc, mma_scale, mma_shift, lo: int, hi: int, *, channel_axis: int = 1,
                   input_bits: int = 8) -> np.ndarray:
    """§12.6 (TI: the asymmetric branch of ``tidl_conv2d_base_ref.c`` with ``TIDL_roundSatMMA``):
    ``roundSat(acc x mmaScale[c], mmaShift[c], psatMin, psatMax)``; with an 8-bit input the result is then
    kept to the accumulator's 40 bits (``& (2^40 - 1)``) and cast to the output type, which leaves every
    saturated value as it is (a value in [lo, hi] has the same low bits). ``mma_scale``/``mma_shift``: one
    value, or one per channel laid along ``channel_axis``."""
    a = _integers(acc, "accumulator")
    s = _integers(mma_scale, "mmaScale")
    b = _integers(mma_shift, "mmaShift")
    if s.size and (s.min() < 0 or s.max() > 255):
        raise FixedPointError(f"mmaScale must be in [0, 255], got {s.min()}..{s.max()}")
    if s.ndim == 1 or b.ndim == 1:
        shape = [1] * a.ndim
        shape[channel_axis] = -1
        s, b = s.reshape(shape) if s.ndim == 1 else s, b.reshape(shape) if b.ndim == 1 else b
    q = round_sat(a * s, b, lo, hi)
    if input_bits == 8:
        kept = q & MMA_ACC_MASK_8
        q = np.where(kept >= (1 << 39), kept - (1 << 40), kept)   # the low 40 bits, read back signed
    return q


def exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of integer arrays as int64, exactly: through float64 (BLAS) when every partial sum is an
    integer below 2^53 in magnitude (bounded by K x max|a| x max|b|), else in int64."""
    k = a.shape[-1]
    bound = k * max(int(np.abs(a).max(initial=0)), 1) * max(int(np.abs(b).max(initial=0)), 1)
    if bound < (1 << 53):
        return np.rint(np.matmul(a.astype(np.float64), b.astype(np.float64))).astype(np.int64)
    return np.matmul(a.astype(np.int64), b.astype(np.int64))


def _bias_column(bias, channels: int, acc_bits: int) -> np.ndarray:
    b = wrap_accumulator(_integers(bias, "bias"), acc_bits)
    if b.ndim > 1 or (b.ndim == 1 and b.size != channels):
        raise FixedPointError(f"bias: expected one value per output channel ({channels}), got shape {b.shape}")
    return np.broadcast_to(b, (channels,))


def convolution_mma(x, w, bias, mma_scale, mma_shift, out: FixedType, *, zero_point: int = 0, strides=1, pads=0,
                    dilations=1, groups: int = 1, bounds=None) -> np.ndarray:
    """§12.6 convolution (TI: ``tidl_conv2d_base_ref.c``, asymmetric): padding pixels hold the input's zero
    point; ``acc = bias[c] + sum x w`` (int32 for 8-bit weights, int64 for 16-bit), then
    ``mma_requantize``. The zero-point terms live in ``bias`` (§12.4)."""
    lo, hi = _bounds(out, bounds)
    acc = convolution_accumulator(x, w, bias, zero_point=zero_point, strides=strides, pads=pads,
                                  dilations=dilations, groups=groups)
    input_bits = _tensor(x, "convolution input", 4)[1].bits
    return mma_requantize(acc, mma_scale, mma_shift, lo, hi, input_bits=input_bits).astype(out.dtype)


def convolution_accumulator(x, w, bias, *, zero_point: int = 0, strides=1, pads=0, dilations=1,
                            groups: int = 1) -> np.ndarray:
    """§12.6 convolution's accumulator before the MMA requantization: padding pixels hold the input's zero
    point, ``acc = bias[c] + sum x w`` in the accumulator of §7.2 (int32 for 8-bit weights, int64 for 16)."""
    xi, xtype = _tensor(x, "convolution input", 4)
    wi, wtype = _tensor(w, "convolution weights", 4)
    zlo, zhi = xtype.bounds
    if not zlo <= int(zero_point) <= zhi:
        raise FixedPointError(f"convolution: zero point {zero_point} is not a {xtype.dtype} value")
    wg, cols, (n, o, oh, ow) = convolution_columns(xi, wi, strides, pads, dilations, groups, int(zero_point))
    acc_bits = accumulator_bits(wtype.bits)
    acc = exact_matmul(wg[None], cols).reshape(n, o, oh, ow)
    return wrap_accumulator(acc + _bias_column(bias, o, acc_bits).reshape(1, o, 1, 1), acc_bits)


def inner_product_accumulator(x, w, bias) -> np.ndarray:
    """§12.6 inner product's accumulator before the MMA requantization: ``acc[n, m] = bias[m] + sum_k x[n, k]
    w[m, k]`` (int32 for 8-bit weights, int64 for 16)."""
    xi, _ = _tensor(x, "inner product input", 2)
    wi, wtype = _tensor(w, "inner product weights", 2)
    if xi.shape[1] != wi.shape[1]:
        raise FixedPointError(f"inner product: input {xi.shape} and weights {wi.shape} disagree on K")
    acc_bits = accumulator_bits(wtype.bits)
    return wrap_accumulator(exact_matmul(xi, wi.T) + _bias_column(bias, wi.shape[0], acc_bits)[None], acc_bits)


def inner_product_mma(x, w, bias, mma_scale, mma_shift, out: FixedType, *, bounds=None) -> np.ndarray:
    """§12.6 inner product (TI: ``TIDL_refInnerProduct``'s per-column ``mmav2_Scales``/``mmav2_Shifts``):
    ``acc[n, m] = bias[m] + sum_k x[n, k] w[m, k]``, then ``mma_requantize`` per output column."""
    xi, xtype = _tensor(x, "inner product input", 2)
    wi, wtype = _tensor(w, "inner product weights", 2)
    if xi.shape[1] != wi.shape[1]:
        raise FixedPointError(f"inner product: input {xi.shape} and weights {wi.shape} disagree on K")
    acc_bits = accumulator_bits(wtype.bits)
    lo, hi = _bounds(out, bounds)
    acc = wrap_accumulator(exact_matmul(xi, wi.T) + _bias_column(bias, wi.shape[0], acc_bits)[None], acc_bits)
    return mma_requantize(acc, mma_scale, mma_shift, lo, hi, input_bits=xtype.bits).astype(out.dtype)


def _merging_inputs(inputs, what: str):
    if len(inputs) < 2:
        raise FixedPointError(f"{what}: needs two or more inputs, got {len(inputs)}")
    typed = [_tensor(a, f"{what} input {j}") for j, a in enumerate(inputs)]
    try:
        np.broadcast_shapes(*(a.shape for a, _ in typed))
    except ValueError as e:
        raise FixedPointError(f"{what}: input shapes do not broadcast: {[a.shape for a, _ in typed]}") from e
    acc_bits = 64 if any(t.bits > 8 for _, t in typed) else 32
    return [a for a, _ in typed], acc_bits


def _per_input(values, n: int, what: str):
    values = [int(v) for v in values]
    if len(values) != n:
        raise FixedPointError(f"{what}: one per input ({n}), got {len(values)}")
    return values


def _eltwise_requantize(acc, scale: int, shift: int, lo: int, hi: int, out: FixedType) -> np.ndarray:
    if not 0 <= int(scale) <= 255:
        raise FixedPointError(f"element-wise multiplier {scale} must be in [0, 255]")
    return round_sat(acc * int(scale), int(shift), lo, hi).astype(out.dtype)


def eltwise_sum_mma(inputs: Sequence[np.ndarray], multipliers: Sequence[int], constant: int, scale: int, shift: int,
                    out: FixedType, *, bounds=None) -> np.ndarray:
    """§12.7 (TI: ``TIDL_refEltWiseSum`` then ``TIDL_refEltWiseMMAv2Quantize``): ``acc = sum_i x_i M_i + K``
    in the accumulator (int32; int64 with a 16-bit input), the zero points folded into ``K``; output
    ``roundSat(acc x c, s, lo, hi)`` with the product in 64 bits."""
    xs, acc_bits = _merging_inputs(inputs, "element-wise sum")
    ms = _per_input(multipliers, len(xs), "element-wise sum multipliers")
    lo, hi = _bounds(out, bounds)
    acc = int(constant)
    for x, m in zip(xs, ms):
        acc = acc + x * m
    return _eltwise_requantize(wrap_accumulator(acc, acc_bits), scale, shift, lo, hi, out)


def eltwise_product_mma(inputs: Sequence[np.ndarray], zero_points: Sequence[int], constant: int, scale: int,
                        shift: int, out: FixedType, *, bounds=None) -> np.ndarray:
    """§12.11 (TI: ``TIDL_refEltWiseProduct`` then ``TIDL_refEltWiseMMAv2Quantize``): each input less its
    zero point as it is read, ``acc = prod_i (x_i - z_i) + K`` (int32, wrapping; int64 with a 16-bit input;
    the inputs broadcast), output ``roundSat(acc x c, s, lo, hi)``."""
    xs, acc_bits = _merging_inputs(inputs, "element-wise product")
    zs = _per_input(zero_points, len(xs), "element-wise product zero points")
    lo, hi = _bounds(out, bounds)
    acc = xs[0] - zs[0]
    for x, z in zip(xs[1:], zs[1:]):
        acc = wrap_accumulator(acc * (x - z), acc_bits)
    return _eltwise_requantize(wrap_accumulator(acc + int(constant), acc_bits), scale, shift, lo, hi, out)


def eltwise_max_mma(inputs: Sequence[np.ndarray], zero_points: Sequence[int], multipliers: Sequence[int],
                    constant: int, scale: int, shift: int, out: FixedType, *, bounds=None) -> np.ndarray:
    """§12.11, tidlx's rule for an element-wise max: ``acc = max_i(M_i (x_i - z_i)) + K``, output
    ``roundSat(acc x c, s, lo, hi)``."""
    xs, acc_bits = _merging_inputs(inputs, "element-wise max")
    zs = _per_input(zero_points, len(xs), "element-wise max zero points")
    ms = _per_input(multipliers, len(xs), "element-wise max multipliers")
    lo, hi = _bounds(out, bounds)
    acc = (xs[0] - zs[0]) * ms[0]
    for x, z, m in zip(xs[1:], zs[1:], ms[1:]):
        acc = np.maximum(acc, (x - z) * m)
    return _eltwise_requantize(wrap_accumulator(acc + int(constant), acc_bits), scale, shift, lo, hi, out)


def concat_mma(inputs: Sequence[np.ndarray], mma_scales, mma_shifts, biases, out: FixedType, *, axis: int = 1,
               bounds=None) -> np.ndarray:
    """§12.8 concat (TI: ``TIDL_refConcat``'s MMA path): input j becomes
    ``roundSat((in_j + bias_j) x m_j, s_j, lo, hi)``, then the parts are joined along ``axis``."""
    lo, hi = _bounds(out, bounds)
    m, s, b = (_integers(v, what) for v, what in ((mma_scales, "mmaScale"), (mma_shifts, "mmaShift"),
                                                   (biases, "bias")))
    if not len(inputs) == m.size == s.size == b.size:
        raise FixedPointError("concat: one multiplier, shift and bias per input")
    parts = [round_sat((_tensor(a, f"concat input {j}")[0] + int(b[j])) * int(m[j]), int(s[j]), lo, hi)
             for j, a in enumerate(inputs)]
    try:
        return np.concatenate(parts, axis=axis).astype(out.dtype)
    except (ValueError, np.exceptions.AxisError) as e:
        raise FixedPointError(f"concat along axis {axis}: {e}") from e


def data_convert_to_fixed_zp(x, tensor_scale: float, zero_point: int, out: FixedType) -> np.ndarray:
    """§12.9, tidlx's choice for a float input of a style-4 subgraph (TI: ``TIDL_QuantizeFloatToFixed``):
    ``round(x x scale + zp)`` half away from zero (float32 product and sum), saturated to the type."""
    arr = float_convert_input(x, tensor_scale)
    lo, hi = out.bounds
    with np.errstate(over="ignore"):
        v = arr.astype(np.float32) * np.float32(tensor_scale) + np.float32(zero_point)
    v = v.astype(np.float64)
    q = np.sign(v) * np.floor(np.abs(v) + 0.5)
    return np.clip(q, lo, hi).astype(out.dtype)


def activation_bounds_zp(out: FixedType, zero_point: int, scale: float, activation: str = "none",
                         clip: Optional[Tuple[float, float]] = None) -> Tuple[int, int]:
    """§12.6, tidlx's choice (TI's ``TIDL_getParametricSatLimit(clip, scale, zp)``): ReLU saturates below at
    the zero point; ReLU6/Clip at ``zp + round(bound x scale)`` (half up), inside the type."""
    lo, hi = out.bounds
    if activation in ("none", ""):
        return lo, hi
    if activation == "ReLU":
        return max(lo, min(int(zero_point), hi)), hi
    if activation in ("ReLU6", "Clip"):
        cmin, cmax = (0.0, 6.0) if activation == "ReLU6" else clip
        qlo = int(zero_point) + int(np.floor(float(cmin) * float(scale) + 0.5))
        qhi = int(zero_point) + int(np.floor(float(cmax) * float(scale) + 0.5))
        return max(lo, min(qlo, hi)), min(hi, max(qhi, lo))
    raise FixedPointError(f"activation '{activation}': style 4 saturates none, ReLU, ReLU6, Clip")


def prelu_mma(x, zero_point: int, pos_scale: int, pos_shift: int, neg_scales, neg_shifts, out_zero_point: int,
              out: FixedType, *, axis: int = 1, bounds=None) -> np.ndarray:
    """§12.12, tidlx's rule for a PReLU / leaky ReLU in style 4: ``d = q - zx`` (exact in int64); ``d >= 0``
    takes the positive multiplier and shift, ``d < 0`` its channel's (along ``axis``); ``out = zy +
    ((d m + 2^(s-1)) >> s)`` (§7.1's rounding, no rounding term when s is 0), saturated to [lo, hi]."""
    xi, _ = _tensor(x, "PReLU input")
    return prelu_requantize(xi - int(zero_point), pos_scale, pos_shift, neg_scales, neg_shifts, out_zero_point, out,
                            axis=axis, bounds=bounds)


def prelu_requantize(d, pos_scales, pos_shifts, neg_scales, neg_shifts, out_zero_point: int, out: FixedType, *,
                     axis: int = 1, bounds=None) -> np.ndarray:
    """§12.12, tidlx's rule: a value ``d`` whose real sign is its own (``q - zx``, or a weighted layer's
    accumulator without the output's zero point) takes the positive or its channel's negative multiplier and
    shift (one value, or one per channel along ``axis``); ``out = zy + ((d m + 2^(s-1)) >> s)``, saturated."""
    di = _integers(d, "PReLU value").astype(np.int64)
    lo, hi = _bounds(out, bounds)
    channels = di.shape[axis] if di.ndim > 1 else 1
    shape = [1] * di.ndim
    if di.ndim > 1:
        shape[axis] = -1
    parts = []
    for name, v in (("positive multipliers", pos_scales), ("positive shifts", pos_shifts),
                    ("negative multipliers", neg_scales), ("negative shifts", neg_shifts)):
        a = _integers(v, f"PReLU {name}").reshape(-1)
        if a.size not in (1, channels):
            raise FixedPointError(f"PReLU: {a.size} {name} for {channels} channels")
        parts.append(a.reshape(shape) if di.ndim > 1 else a)
    pm, ps, nm, ns = parts
    neg = di < 0
    m = np.where(neg, nm, pm)
    sh = np.where(neg, ns, ps)
    v = round_sat(di * m, sh, np.iinfo(np.int64).min, np.iinfo(np.int64).max) + int(out_zero_point)
    return np.clip(v, lo, hi).astype(out.dtype)


__all__ = ["MMA_ACC_MASK_8", "exact_matmul", "mma_requantize", "convolution_accumulator", "convolution_mma",
           "inner_product_accumulator", "inner_product_mma", "eltwise_sum_mma", "eltwise_product_mma", "eltwise_max_mma",
           "prelu_mma", "prelu_requantize",
           "concat_mma", "data_convert_to_fixed_zp", "activation_bounds_zp"]
