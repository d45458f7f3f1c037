"""TIDL's runtime integer arithmetic: one function per rule of docs/numerics.md (§1.2, §7, §8).

Integer tensors travel in the numpy dtype of their TIDL element type (uint8, int8, uint16, int16),
so a function reads each input's width and signedness from its dtype. Every result is computed
exactly in int64 and then truncated to its accumulator width (§7.2) and saturated to its output type,
as roundSat does; float appears only where TIDL itself is float (§8.8's other ratios, §8.9, §8.12).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from ...ir.errors import TidlxError

IntOrArray = Union[int, np.ndarray]


class FixedPointError(TidlxError):
    """Bad input to a fixed-point rule: a wrong dtype, shape, shift or parameter."""


# §1.2: the element type ids of TIDL's network record (TIDL-NUMERICS.md, "The network record").
ELEMENT_TYPE_IDS = {"U8": 0, "S8": 1, "U16": 2, "S16": 3, "U32": 4, "S32": 5, "F32": 6, "U64": 7, "S64": 8}
_TENSOR_DTYPES = {np.dtype(np.uint8): (8, False), np.dtype(np.int8): (8, True),
                  np.dtype(np.uint16): (16, False), np.dtype(np.int16): (16, True)}


def saturation_bounds(bits: int, signed: bool) -> Tuple[int, int]:
    """§1.2: the saturation bounds of a ``bits``-wide integer; TIDL-NUMERICS.md, "Weights" (the clamp
    ``[-2^(bits-1), 2^(bits-1) - 1]``) and "Runtime arithmetic" (ReLU = saturate to the unsigned type)."""
    if bits not in (8, 16, 32, 64):
        raise FixedPointError(f"bit width {bits}: TIDL integers are 8, 16, 32 or 64 bits wide")
    if signed:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def element_type_id(bits: int, signed: bool) -> int:
    """§1.2: TIDL's element type id of an integer type (TIDL-NUMERICS.md, "The network record":
    U8 0, S8 1, U16 2, S16 3, U32 4, S32 5, U64 7, S64 8)."""
    saturation_bounds(bits, signed)
    return ELEMENT_TYPE_IDS[("S" if signed else "U") + str(bits)]


@dataclass(frozen=True)
class FixedType:
    """§1.2: a feature map's element type: 8 or 16 bits, signed or unsigned; or TIDL's signed 32-bit
    index type (§8.15: TopK's indices, ScatterElements' indices; ``INDEX_TYPE``)."""

    bits: int
    signed: bool

    def __post_init__(self):
        if self.bits not in (8, 16) and (self.bits, self.signed) != (32, True):
            raise FixedPointError(f"feature maps are 8 or 16 bits wide, not {self.bits}")

    @property
    def bounds(self) -> Tuple[int, int]:
        return saturation_bounds(self.bits, self.signed)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(("int" if self.signed else "uint") + str(self.bits))

    @property
    def type_id(self) -> int:
        return element_type_id(self.bits, self.signed)

    @classmethod
    def of(cls, array: np.ndarray, what: str = "input") -> "FixedType":
        """The type an integer tensor carries in its dtype."""
        dtype = getattr(array, "dtype", None)
        if dtype not in _TENSOR_DTYPES:
            raise FixedPointError(f"{what}: expected a uint8, int8, uint16 or int16 array, got "
                                  f"{dtype if dtype is not None else type(array).__name__}")
        return cls(*_TENSOR_DTYPES[dtype])


#: §8.15: TIDL's index tensors are int32 (S32), whatever the model's index type.
INDEX_TYPE = FixedType(32, True)


def check_moved(array, what: str = "input") -> None:
    """A tensor that data movement copies (§8.11): a feature map (8/16 bit) or an int32 index tensor."""
    if getattr(array, "dtype", None) != np.dtype(np.int32):
        FixedType.of(array, what)


def _tensor(array, what: str, ndim: Optional[int] = None) -> Tuple[np.ndarray, FixedType]:
    """An integer tensor as int64 plus the type its dtype says."""
    ftype = FixedType.of(array, what)
    if ndim is not None and array.ndim != ndim:
        raise FixedPointError(f"{what}: expected {ndim} dimensions, got shape {array.shape}")
    return array.astype(np.int64), ftype


def _integers(values, what: str) -> np.ndarray:
    """Integer parameters (bias parts, multipliers, shifts) as int64."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu":
        raise FixedPointError(f"{what}: expected integers, got {arr.dtype}")
    return arr.astype(np.int64)


def _bounds(out: FixedType, bounds: Optional[Tuple[int, int]]) -> Tuple[int, int]:
    """The final saturation bounds: the output type's, or an activation's inside them (§8.10)."""
    if not isinstance(out, FixedType):
        raise FixedPointError(f"the output type must be a FixedType, got {type(out).__name__}")
    if bounds is None:
        return out.bounds
    lo, hi = int(bounds[0]), int(bounds[1])
    tlo, thi = out.bounds
    if not tlo <= lo <= hi <= thi:
        raise FixedPointError(f"activation bounds [{lo}, {hi}] are not inside {out.dtype}'s [{tlo}, {thi}]")
    return lo, hi


# ---- §7: roundSat, accumulators, the bias multiply ---------------------------------------------

def round_sat(v: IntOrArray, b: IntOrArray, lo: int, hi: int) -> np.ndarray:
    """§7.1 roundSat; TIDL-NUMERICS.md, "Runtime arithmetic": ``v += 1 << (b-1)`` when b > 0, ``v >>= b``
    (arithmetic), clamp to [lo, hi]: round half toward +infinity. Computed as ``(v >> b) + ((v >> (b-1))
    & 1)``, which never overflows, not even at int64's ends. ``b`` may be an array (per-channel shifts)."""
    v = _integers(v, "roundSat value")
    b = _integers(b, "roundSat shift")
    if b.size and (b.min() < 0 or b.max() > 62):
        raise FixedPointError(f"roundSat shift must be in [0, 62], got {b.min()}..{b.max()}")
    shifted = (v >> b) + ((v >> np.maximum(b - 1, 0)) & 1)
    return np.clip(np.where(b > 0, shifted, v), lo, hi)


def accumulator_bits(weight_bits: int) -> int:
    """§7.2: convolution, deconvolution, inner product and batch norm accumulate in int32 for weights of
    <= 8 bits, int64 for 16-bit weights (TIDL-NUMERICS.md, "Runtime arithmetic")."""
    if weight_bits == 8:
        return 32
    if weight_bits == 16:
        return 64
    raise FixedPointError(f"weights are 8 or 16 bits wide, not {weight_bits}")


def pool_accumulator_bits(out_bits: int) -> int:
    """§7.2: average pools accumulate in 32 bits for an 8-bit output, 64 for a 16-bit one
    (TIDL-NUMERICS.md, "Runtime arithmetic", global average pool)."""
    return {8: 32, 16: 64}[FixedType(out_bits, False).bits]


def product_accumulator_bits(input_bits: Sequence[int]) -> int:
    """§7.2, tidlx's choice: an element-wise product accumulates in int32 when every input is 8 bit,
    int64 when one is 16 bit (TIDL-NUMERICS.md gives no width for the product)."""
    return 64 if max(input_bits) > 8 else 32


def wrap_accumulator(acc: np.ndarray, acc_bits: int) -> np.ndarray:
    """§7.2, tidlx's choice: a 32-bit accumulator wraps modulo 2^32 (two's complement); int64 is numpy's
    own width. Applied once to the exact int64 sum, which equals wrapping after every add."""
    acc = np.asarray(acc, dtype=np.int64)
    if acc_bits == 64:
        return acc
    if acc_bits != 32:
        raise FixedPointError(f"accumulators are 32 or 64 bits wide, not {acc_bits}")
    return ((acc + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def bias_multiply(bias_a, bias_b, acc_bits: int) -> np.ndarray:
    """§7.3: the accumulator starts at ``biasA * biasB`` (TIDL-NUMERICS.md, "Bias": the bias kept as an
    integer times an integer multiplier), in the accumulator width."""
    return wrap_accumulator(_integers(bias_a, "biasA") * _integers(bias_b, "biasB"), acc_bits)


def requantize_16bit_to_8bit(acc, round_bits: IntOrArray, signed: bool, lo: int, hi: int) -> np.ndarray:
    """§7.4: 16-bit processing with an 8-bit output (TIDL-NUMERICS.md, "Runtime arithmetic"): roundSat by
    roundBits - 8 to the 16-bit type of the output's signedness, then ``>> 8``; tidlx's choice for
    roundBits < 8: a left shift by 8 - roundBits, saturated."""
    acc = _integers(acc, "accumulator")
    rb = _integers(round_bits, "roundBits")
    lo16, hi16 = saturation_bounds(16, signed)
    right = round_sat(acc, np.maximum(rb - 8, 0), lo16, hi16)
    # |acc| >= 2^17 saturates after any left shift of 1..8; clipping first keeps the shift in int64.
    left = np.clip(np.clip(acc, -(1 << 17), 1 << 17) << np.maximum(8 - rb, 0), lo16, hi16)
    return np.clip(np.where(rb >= 8, right, left) >> 8, lo, hi)


def _requantize(acc, round_bits, weight_bits: int, out: FixedType, lo: int, hi: int, channel_axis: int):
    """roundSat or §7.4, with per-channel roundBits laid along ``channel_axis``."""
    rb = _integers(round_bits, "roundBits")
    if rb.ndim == 1:
        shape = [1] * acc.ndim
        shape[channel_axis] = -1
        if rb.size != acc.shape[channel_axis]:
            raise FixedPointError(f"{rb.size} per-channel roundBits for {acc.shape[channel_axis]} channels")
        rb = rb.reshape(shape)
    elif rb.ndim != 0:
        raise FixedPointError("roundBits must be one integer or one per output channel")
    if weight_bits == 16 and out.bits == 8:
        q = requantize_16bit_to_8bit(acc, rb, out.signed, lo, hi)
    else:
        q = round_sat(acc, rb, lo, hi)
    return q.astype(out.dtype)


def _with_slopes(acc: np.ndarray, negative_slopes, channel_axis: int) -> np.ndarray:
    """The accumulator after a PReLU's slopes (§8.10.1; ``negative_slopes``: (slope factors, shift), or
    None for a layer without PReLU)."""
    if negative_slopes is None:
        return acc
    factors, shift = negative_slopes
    return prelu(acc, factors, shift, channel_axis=channel_axis)


def _bias_vector(bias_a, bias_b, channels: int, acc_bits: int) -> np.ndarray:
    bias = bias_multiply(bias_a, bias_b, acc_bits)
    if bias.ndim > 1 or (bias.ndim == 1 and bias.size != channels):
        raise FixedPointError(f"bias: expected one value per output channel ({channels}), got shape {bias.shape}")
    return np.broadcast_to(bias, (channels,))


# ---- §8.1-8.4: the layers with weights -------------------------------------------------------

def _pair(v, what: str) -> Tuple[int, int]:
    t = (int(v), int(v)) if np.isscalar(v) else tuple(int(e) for e in v)
    if len(t) != 2:
        raise FixedPointError(f"{what}: expected two values (H, W), got {v}")
    return t


def _pads4(pads) -> Tuple[int, int, int, int]:
    t = (int(pads),) * 4 if np.isscalar(pads) else tuple(int(p) for p in pads)
    if len(t) == 2:
        t = t + t
    if len(t) != 4 or min(t) < 0:
        raise FixedPointError(f"pads: expected (top, left, bottom, right) >= 0, got {pads}")
    return t


def _window_geometry(strides, dilations, pads, what: str):
    """(sh, sw), (dh, dw), (top, left, bottom, right) of a convolution-like layer, checked."""
    (sh, sw), (dh, dw) = _pair(strides, "strides"), _pair(dilations, "dilations")
    if min(sh, sw, dh, dw) < 1:
        raise FixedPointError(f"{what}: strides and dilations must be >= 1")
    return (sh, sw), (dh, dw), _pads4(pads)


def convolution_columns(xi, wi, strides, pads, dilations, groups: int, pad_value: int = 0):
    """A convolution's operands as grouped matrices: the weights ``groups x O/groups x (C/groups KH KW)``
    and the input's taps ``N x groups x (C/groups KH KW) x (OH OW)``, padding pixels ``pad_value`` (the
    zero point); with the output's ``(N, O, OH, OW)``. Checks the groups and that the kernel fits."""
    n, c, h, wd = xi.shape
    o, cg, kh, kw = wi.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = _window_geometry(strides, dilations, pads, "convolution")
    if groups < 1 or c % groups or o % groups or cg != c // groups:
        raise FixedPointError(f"convolution: {c} input and {o} output channels with weights {wi.shape} "
                              f"do not make {groups} groups")
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise FixedPointError(f"convolution: a {kh}x{kw} kernel does not fit the padded {h}x{wd} input")
    xp = np.pad(xi, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=pad_value)
    taps = np.stack([xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
                     for i in range(kh) for j in range(kw)], axis=2)          # N, C, KH*KW, OH, OW
    cols = taps.reshape(n, groups, cg * kh * kw, oh * ow)
    wg = wi.reshape(groups, o // groups, cg * kh * kw)
    return wg, cols, (n, o, oh, ow)


def convolution(x, w, bias_a, bias_b, round_bits, out: FixedType, *, strides=1, pads=0, dilations=1,
                groups: int = 1, bounds=None, negative_slopes=None) -> np.ndarray:
    """§8.1 convolution (groups, depthwise, stride, dilation, zero-point padding, per-channel roundBits);
    TIDL-NUMERICS.md, "Runtime arithmetic": the accumulator starts at the bias and adds in x w (int32 for
    8-bit weights, int64 for 16-bit), output roundSat(acc, roundBits) saturated to the output type;
    padding pixels hold the zero point. ``x`` N x C x H x W, ``w`` O x C/groups x KH x KW."""
    xi, _ = _tensor(x, "convolution input", 4)
    wi, wtype = _tensor(w, "convolution weights", 4)
    wg, cols, (n, o, oh, ow) = convolution_columns(xi, wi, strides, pads, dilations, groups)  # zero point 0 (§8.1)
    acc_bits = accumulator_bits(wtype.bits)
    lo, hi = _bounds(out, bounds)
    acc = np.matmul(wg[None], cols).reshape(n, o, oh, ow)
    acc = acc + _bias_vector(bias_a, bias_b, o, acc_bits).reshape(1, o, 1, 1)
    acc = _with_slopes(wrap_accumulator(acc, acc_bits), negative_slopes, 1)
    return _requantize(acc, round_bits, wtype.bits, out, lo, hi, 1)


def deconvolution(x, w, bias_a, bias_b, round_bits, out: FixedType, *, strides=1, pads=0, dilations=1,
                  groups: int = 1, bounds=None, negative_slopes=None) -> np.ndarray:
    """§8.2 deconvolution (transposed convolution, ONNX ConvTranspose's C x O/groups x KH x KW weights):
    every input pixel adds x w into the output taps it reaches, from the bias, with the accumulator and
    requantization of convolution (TIDL-NUMERICS.md, "Runtime arithmetic", convolution)."""
    xi, _ = _tensor(x, "deconvolution input", 4)
    wi, wtype = _tensor(w, "deconvolution weights", 4)
    n, c, h, wd = xi.shape
    cw, og, kh, kw = wi.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = _window_geometry(strides, dilations, pads, "deconvolution")
    if groups < 1 or cw != c or c % groups:
        raise FixedPointError(f"deconvolution: weights {wi.shape} do not fit {c} input channels in {groups} groups")
    full_h, full_w = (h - 1) * sh + dh * (kh - 1) + 1, (wd - 1) * sw + dw * (kw - 1) + 1
    oh, ow = full_h - pt - pb, full_w - pl - pr
    if oh < 1 or ow < 1:
        raise FixedPointError("deconvolution: the pads remove the whole output")
    o = og * groups
    acc_bits = accumulator_bits(wtype.bits)
    lo, hi = _bounds(out, bounds)
    xg = xi.reshape(n, groups, c // groups, h, wd)
    wg = wi.reshape(groups, c // groups, og, kh, kw)
    full = np.zeros((n, groups, og, full_h, full_w), np.int64)
    for i in range(kh):
        for j in range(kw):
            contrib = np.einsum("ngchw,gco->ngohw", xg, wg[:, :, :, i, j])
            full[:, :, :, i * dh:i * dh + sh * (h - 1) + 1:sh, j * dw:j * dw + sw * (wd - 1) + 1:sw] += contrib
    acc = full.reshape(n, o, full_h, full_w)[:, :, pt:pt + oh, pl:pl + ow]
    acc = acc + _bias_vector(bias_a, bias_b, o, acc_bits).reshape(1, o, 1, 1)
    acc = _with_slopes(wrap_accumulator(acc, acc_bits), negative_slopes, 1)
    return _requantize(acc, round_bits, wtype.bits, out, lo, hi, 1)


def inner_product(x, w, bias_a, bias_b, round_bits, out: FixedType, *, bounds=None,
                  negative_slopes=None) -> np.ndarray:
    """§8.3 inner product: ``acc[n, m] = biasA[m] biasB[m] + sum_k x[n, k] w[m, k]`` (TIDL-NUMERICS.md,
    "Runtime arithmetic": as convolution), ``x`` N x K, ``w`` M x K as Relay's nn.dense."""
    xi, _ = _tensor(x, "inner product input", 2)
    wi, wtype = _tensor(w, "inner product weights", 2)
    if xi.shape[1] != wi.shape[1]:
        raise FixedPointError(f"inner product: input {xi.shape} and weights {wi.shape} disagree on K")
    acc_bits = accumulator_bits(wtype.bits)
    lo, hi = _bounds(out, bounds)
    acc = xi @ wi.T + _bias_vector(bias_a, bias_b, wi.shape[0], acc_bits)[None]
    acc = _with_slopes(wrap_accumulator(acc, acc_bits), negative_slopes, 1)
    return _requantize(acc, round_bits, wtype.bits, out, lo, hi, 1)


def matmul(a, b, round_bits, out: FixedType, *, transpose_a: bool = False, transpose_b: bool = False,
           bounds=None) -> np.ndarray:
    """§8.3 inner product of two tensors (attention's Q K^T and A V): ``acc[n] = a[n] @ b[n]`` (batches
    broadcast), exact, in the product accumulator of the inputs' widths (§7.2), then roundSat."""
    ai, at = _tensor(a, "matrix product input a", 3)
    bi, bt = _tensor(b, "matrix product input b", 3)
    if transpose_a:
        ai = ai.transpose(0, 2, 1)
    if transpose_b:
        bi = bi.transpose(0, 2, 1)
    if ai.shape[2] != bi.shape[1] or (ai.shape[0] != bi.shape[0] and 1 not in (ai.shape[0], bi.shape[0])):
        raise FixedPointError(f"matrix product: shapes {ai.shape} and {bi.shape} do not multiply")
    lo, hi = _bounds(out, bounds)
    acc = wrap_accumulator(np.matmul(ai, bi), product_accumulator_bits([at.bits, bt.bits]))
    return round_sat(acc, round_bits, lo, hi).astype(out.dtype)


def layer_norm_core(x, in_scale: float, out_scale: float, epsilon: float, out: FixedType) -> np.ndarray:
    """§8.14 layer norm over the last axis, TIDL 11.x's integer-input path (``TIDL_refLayerNormCore``):
    per row of W values ``S1 = sum q``, ``S2 = sum q^2`` (int64); ``d = float32(W S2 - S1^2) + eps
    inScale^2 W^2`` (float32); ``r = 1 / sqrt(d)`` in float32, refined by one Newton-Raphson step for a
    16-bit input; ``r = outScale r``; each output ``round((float32(W) float32(q) - float32(S1)) r)``
    (to nearest, ties to even), saturated to the output type."""
    qi, qt = _tensor(x, "layer norm input")
    if qi.ndim < 1 or qi.shape[-1] < 1:
        raise FixedPointError(f"layer norm: an input of shape {qi.shape} has no values to normalize")
    f32 = np.float32
    width = qi.shape[-1]
    s1 = qi.sum(axis=-1, keepdims=True)
    s2 = (qi * qi).sum(axis=-1, keepdims=True)
    inp = (width * s2 - s1 * s1).astype(f32)
    ep = f32(epsilon) * (f32(in_scale) * f32(in_scale) * f32(width) * f32(width))
    d = (inp + ep).astype(f32)
    with np.errstate(divide="ignore"):
        r = (f32(1.0) / np.sqrt(d)).astype(f32)
    if qt.bits == 16:
        r = (r * (f32(1.5) - f32(0.5) * d * r * r)).astype(f32)
    r = (f32(out_scale) * r).astype(f32)
    y = ((f32(width) * qi.astype(f32) - s1.astype(f32)) * r).astype(f32)
    lo, hi = out.bounds
    return np.clip(np.rint(y), lo, hi).astype(out.dtype)


def batch_norm(x, w, bias_a, bias_b, round_bits, out: FixedType, *, bounds=None, axis: int = 1,
               negative_slopes=None) -> np.ndarray:
    """§8.4 batch norm: per channel ``acc = biasA[c] biasB[c] + x w[c]`` in the weights' accumulator,
    then roundSat (TIDL-NUMERICS.md, "Feature-map scales": accScale = weightScale x inScale, and
    "Runtime arithmetic": the convolution's accumulate-and-requantize). Channels on ``axis`` (1, or the
    last axis of a sequence)."""
    xi, _ = _tensor(x, "batch norm input")
    wi, wtype = _tensor(w, "batch norm weights", 1)
    if xi.ndim < 2 or not -xi.ndim <= axis < xi.ndim or xi.shape[axis] != wi.size:
        raise FixedPointError(f"batch norm: {wi.size} weights along axis {axis} for input shape {xi.shape}")
    acc_bits = accumulator_bits(wtype.bits)
    lo, hi = _bounds(out, bounds)
    shape = [1] * xi.ndim
    shape[axis] = -1
    acc = xi * wi.reshape(shape) + _bias_vector(bias_a, bias_b, wi.size, acc_bits).reshape(shape)
    acc = _with_slopes(wrap_accumulator(acc, acc_bits), negative_slopes, axis)
    return _requantize(acc, round_bits, wtype.bits, out, lo, hi, 1)


# ---- §8.5: element-wise --------------------------------------------------------------------

def _scaled_inputs(inputs, multipliers, what: str):
    if len(inputs) < 2 or len(inputs) != len(multipliers):
        raise FixedPointError(f"{what}: needs at least two inputs, one multiplier each "
                              f"(got {len(inputs)} inputs, {len(multipliers)} multipliers)")
    arrays = [_tensor(a, f"{what} input {j}")[0] for j, a in enumerate(inputs)]
    try:
        np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError as e:
        raise FixedPointError(f"{what}: input shapes do not broadcast: {[a.shape for a in arrays]}") from e
    return [wrap_accumulator(a * int(_integers(s, "multiplier")), 32) for a, s in zip(arrays, multipliers)]


def eltwise_sum(inputs: Sequence[np.ndarray], multipliers: Sequence[int], round_bits: int, out: FixedType,
                *, bounds=None) -> np.ndarray:
    """§8.5 element-wise sum: ``acc = sum_j in_j s_j`` in int32, then roundSat (TIDL-NUMERICS.md,
    "Runtime arithmetic"; the multipliers s_j come from §6.5)."""
    lo, hi = _bounds(out, bounds)
    acc = sum(_scaled_inputs(inputs, multipliers, "element-wise sum"))
    return round_sat(wrap_accumulator(acc, 32), round_bits, lo, hi).astype(out.dtype)


def eltwise_max(inputs: Sequence[np.ndarray], multipliers: Sequence[int], round_bits: int, out: FixedType,
                *, bounds=None) -> np.ndarray:
    """§8.5 element-wise max: ``acc = max_j in_j s_j`` in int32, then roundSat (TIDL-NUMERICS.md,
    "Runtime arithmetic": Max; the requantization as the sum's, tidlx's choice)."""
    lo, hi = _bounds(out, bounds)
    scaled = _scaled_inputs(inputs, multipliers, "element-wise max")
    acc = scaled[0]
    for s in scaled[1:]:
        acc = np.maximum(acc, s)
    return round_sat(acc, round_bits, lo, hi).astype(out.dtype)


def eltwise_product(inputs: Sequence[np.ndarray], round_bits: int, out: FixedType, *, bounds=None) -> np.ndarray:
    """§8.5 element-wise product: ``acc = prod_j (in_j - zp_j)`` (zero points 0), then roundSat
    (TIDL-NUMERICS.md, "Runtime arithmetic": Product); width by product_accumulator_bits (§7.2)."""
    lo, hi = _bounds(out, bounds)
    if len(inputs) < 2:
        raise FixedPointError("element-wise product: needs at least two inputs")
    typed = [_tensor(a, f"element-wise product input {j}") for j, a in enumerate(inputs)]
    acc_bits = product_accumulator_bits([t.bits for _, t in typed])
    try:
        np.broadcast_shapes(*(a.shape for a, _ in typed))
    except ValueError as e:
        raise FixedPointError("element-wise product: input shapes do not broadcast") from e
    acc = typed[0][0]
    for a, _ in typed[1:]:
        acc = wrap_accumulator(acc * a, acc_bits)
    return round_sat(acc, round_bits, lo, hi).astype(out.dtype)


# ---- §8.6: pooling ---------------------------------------------------------------------------

def _pool_geometry(d: int, k: int, s: int, p0: int, p1: int, ceil_mode: bool) -> int:
    """§8.6: the number of windows along one axis."""
    if k < 1 or s < 1:
        raise FixedPointError("pool: kernel and stride must be >= 1")
    if p0 >= k or p1 >= k:
        raise FixedPointError(f"pool: pads ({p0}, {p1}) must be smaller than the kernel {k} "
                              f"(a window would lie in the padding only)")
    span = d + p0 + p1 - k
    if span < 0:
        raise FixedPointError(f"pool: a kernel of {k} does not fit the padded size {d + p0 + p1}")
    count = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (count - 1) * s >= d + p0:   # ONNX: the last window must start inside
        count -= 1
    return count


def max_pool(x, kernel, strides, pads=0, *, ceil_mode: bool = False) -> np.ndarray:
    """§8.6 max pool: the largest real pixel of each window, no requantization (TIDL-NUMERICS.md, "Runtime
    arithmetic": Max pool; tidlx's choice: padded pixels take no part)."""
    xi, xtype = _tensor(x, "max pool input", 4)
    (kh, kw), (sh, sw) = _pair(kernel, "kernel"), _pair(strides, "strides")
    pt, pl, pb, pr = _pads4(pads)
    n, c, h, wd = xi.shape
    oh = _pool_geometry(h, kh, sh, pt, pb, ceil_mode)
    ow = _pool_geometry(wd, kw, sw, pl, pr, ceil_mode)
    extra_h = max(pb, (oh - 1) * sh + kh - h - pt)
    extra_w = max(pr, (ow - 1) * sw + kw - wd - pl)
    # The type's lowest value never wins over a real pixel, so the padding takes no part.
    xp = np.pad(xi, ((0, 0), (0, 0), (pt, extra_h), (pl, extra_w)), constant_values=xtype.bounds[0])
    result = np.full((n, c, oh, ow), xtype.bounds[0], np.int64)
    for i in range(kh):
        for j in range(kw):
            result = np.maximum(result, xp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw])
    return result.astype(xtype.dtype)


def average_pool_multiplier(pool_size, q: int) -> np.ndarray:
    """§8.6: a spatial average pool multiplies each window's sum by ``2^Q // poolSize``, an INTEGER
    division (TIDL-NUMERICS.md, "Runtime arithmetic": spatial average pool)."""
    size = _integers(pool_size, "pool size")
    if size.size and size.min() < 1:
        raise FixedPointError("average pool: a window holds no pixel")
    return (1 << int(q)) // size


def _window_sizes(count: int, d: int, k: int, s: int, p0: int) -> np.ndarray:
    """§8.6: each window's extent, starting at i*s in padded coordinates, clipped at d + p0."""
    start = np.arange(count) * s
    return np.minimum(start + k, d + p0) - start


def average_pool(x, kernel, strides, pads, q: int, round_bits: int, out: FixedType, *, ceil_mode: bool = False,
                 bounds=None) -> np.ndarray:
    """§8.6 average pool: ``acc = sum(window) * (2^Q // poolSize)``, roundSat; the divisor counts top/left
    padding and windows are clipped at the bottom/right; padded pixels are 0 (TIDL-NUMERICS.md, "Runtime
    arithmetic": spatial average pool). Q comes from §6.1 (backends/tidl/numerics.py: average_pool_q)."""
    xi, _ = _tensor(x, "average pool input", 4)
    (kh, kw), (sh, sw) = _pair(kernel, "kernel"), _pair(strides, "strides")
    pt, pl, pb, pr = _pads4(pads)
    n, c, h, wd = xi.shape
    oh = _pool_geometry(h, kh, sh, pt, pb, ceil_mode)
    ow = _pool_geometry(wd, kw, sw, pl, pr, ceil_mode)
    lo, hi = _bounds(out, bounds)
    acc_bits = pool_accumulator_bits(out.bits)
    extra_h = max(pb, (oh - 1) * sh + kh - h - pt)
    extra_w = max(pr, (ow - 1) * sw + kw - wd - pl)
    xp = np.pad(xi, ((0, 0), (0, 0), (pt, extra_h), (pl, extra_w)))   # zeros past the clip add nothing
    window_sum = np.zeros((n, c, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            window_sum += xp[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
    pool_size = np.outer(_window_sizes(oh, h, kh, sh, pt), _window_sizes(ow, wd, kw, sw, pl))
    acc = wrap_accumulator(window_sum * average_pool_multiplier(pool_size, q), acc_bits)
    return round_sat(acc, round_bits, lo, hi).astype(out.dtype)


def global_average_pool_multiplier(h: int, w: int, q: int) -> int:
    """§8.6: ``s = (int32)(2^Q / (H x W) + 0.5)`` (TIDL-NUMERICS.md, "Runtime arithmetic": global
    average pool), computed exactly as ``(2^(Q+1) + HW) // (2 HW)``."""
    hw = int(h) * int(w)
    if hw < 1:
        raise FixedPointError("global average pool: empty input")
    return ((1 << (int(q) + 1)) + hw) // (2 * hw)


def global_average_pool(x, q: int, round_bits: int, out: FixedType, *, bounds=None) -> np.ndarray:
    """§8.6 global average pool: ``acc = sum(in) x s``, 32-bit accumulator for 8-bit outputs and 64-bit
    for 16-bit, then roundSat (TIDL-NUMERICS.md, "Runtime arithmetic"). Output N x C x 1 x 1."""
    xi, _ = _tensor(x, "global average pool input", 4)
    lo, hi = _bounds(out, bounds)
    s = global_average_pool_multiplier(xi.shape[2], xi.shape[3], q)
    acc = wrap_accumulator(xi.sum(axis=(2, 3), keepdims=True) * s, pool_accumulator_bits(out.bits))
    return round_sat(acc, round_bits, lo, hi).astype(out.dtype)


# ---- §8.7-8.12 -------------------------------------------------------------------------------

def concat(inputs: Sequence[np.ndarray], multipliers: Sequence[int], round_bits: int, out: FixedType, *,
           axis: int = 1, bounds=None) -> np.ndarray:
    """§8.7 concat: each input becomes ``roundSat(in_j s_j, roundBits)`` (int32), then the parts are joined
    (TIDL-NUMERICS.md, "Runtime arithmetic": Concat, as the sum)."""
    lo, hi = _bounds(out, bounds)
    if len(inputs) < 1 or len(inputs) != len(multipliers):
        raise FixedPointError("concat: one multiplier per input")
    parts = [round_sat(wrap_accumulator(_tensor(a, f"concat input {j}")[0] * int(_integers(s, "multiplier")), 32),
                       round_bits, lo, hi) for j, (a, s) in enumerate(zip(inputs, multipliers))]
    try:
        return np.concatenate(parts, axis=axis).astype(out.dtype)
    except (ValueError, np.exceptions.AxisError) as e:
        raise FixedPointError(f"concat along axis {axis}: {e}") from e


def _ratio(r, what: str) -> int:
    if int(r) != r or r < 1:
        raise FixedPointError(f"resize: {what} ratio {r}: the fixed-point resize takes integer upscales >= 1")
    return int(r)


def _source_positions(out_size: int, in_size: int, r: int):
    """§8.8: for each output index, (i0, i1, fraction in units of 1/(2r)) of pos = max((i+0.5)/r - 0.5, 0)."""
    p = np.maximum(2 * np.arange(out_size) + 1 - r, 0)
    i0 = p // (2 * r)
    return np.minimum(i0, in_size - 1), np.minimum(i0 + 1, in_size - 1), p % (2 * r)


def resize_nearest(x, ratio_h, ratio_w) -> np.ndarray:
    """§8.8 nearest resize: source index ``(int)(pos + 0.5)`` clamped to the last index, pos = (i + 0.5) /
    ratio - 0.5 clamped >= 0; type and scale unchanged (TIDL-NUMERICS.md, "Runtime arithmetic": Resize)."""
    xi, xtype = _tensor(x, "resize input", 4)
    rh, rw = _ratio(ratio_h, "height"), _ratio(ratio_w, "width")
    h, w = xi.shape[2:]
    iy = np.minimum((2 * np.arange(h * rh) + 1) // (2 * rh), h - 1)
    ix = np.minimum((2 * np.arange(w * rw) + 1) // (2 * rw), w - 1)
    return xi[:, :, iy[:, None], ix[None, :]].astype(xtype.dtype)


def resize_bilinear(x, ratio_h, ratio_w) -> np.ndarray:
    """§8.8 bilinear resize (TIDL-NUMERICS.md, "Runtime arithmetic": Resize): with equal ratios 2 or 4,
    integer weights of b = 2 or 3 bits and ``>> 2b`` without a rounding term; other ratios in float64,
    then a truncating cast. Type and scale unchanged."""
    xi, xtype = _tensor(x, "resize input", 4)
    rh, rw = _ratio(ratio_h, "height"), _ratio(ratio_w, "width")
    h, w = xi.shape[2:]
    y0, y1, fy = _source_positions(h * rh, h, rh)
    x0, x1, fx = _source_positions(w * rw, w, rw)
    a, b = xi[:, :, y0[:, None], x0[None, :]], xi[:, :, y0[:, None], x1[None, :]]
    c, d = xi[:, :, y1[:, None], x0[None, :]], xi[:, :, y1[:, None], x1[None, :]]
    ly, lx = fy[:, None], fx[None, :]
    if rh == rw and rh in (2, 4):
        one = 2 * rh            # 2^b: the fraction is already in units of 2^-b
        shift = 2 * (one.bit_length() - 1)
        v = ((one - ly) * ((one - lx) * a + lx * b) + ly * ((one - lx) * c + lx * d)) >> shift
        return v.astype(xtype.dtype)
    lyf, lxf = ly / (2.0 * rh), lx / (2.0 * rw)
    v = (1.0 - lyf) * ((1.0 - lxf) * a + lxf * b) + lyf * ((1.0 - lxf) * c + lxf * d)
    return np.trunc(v).astype(xtype.dtype)


SOFTMAX_LANES = 16   # §8.9: TI's VEC_NELEM(float), the float32 lanes of a 512-bit C7x vector
#: §8.9: TI's constants, each a float32 as TI's reference computes it
_LN2 = np.float32(0.693147180559945)
_LOG2E = np.float32(1) / _LN2
_ONE_SIXTH = np.float32(1) / np.float32(6)
_ONE_24TH = np.float32(0.25 * float(_ONE_SIXTH))


def softmax_exp(d, inv_scale: np.float32) -> np.ndarray:
    """§8.9 steps 1-4, TI's float-output softmax reference (``TIDL_softmaxRefProcess``, tidl_softmax_ref.c,
    TIDL 11.x; the same in 08.06): ``x = float32(d) * inv_scale`` (``d = q - max q``, ``inv_scale = 1 /
    inScale`` in float32), ``t = x * float32(1 / float32(ln 2))``, ``n = trunc(t)``, ``f = (t - n) * ln 2``;
    ``p = (1 + f) + f^2 * 0.5`` (the half-term added in double, the sum rounded to float32), then ``+ f^3 / 6``
    and ``+ f^4 / 24`` in float32 (``f^4 = f^2 f^2``); ``p * 2^n``, 0 when n < -16."""
    x = np.asarray(d).astype(np.float32) * np.float32(inv_scale)
    t = x * _LOG2E
    n = np.trunc(t)
    f = (t - n.astype(np.float32)) * _LN2
    f2 = f * f
    f3 = f2 * f
    f4 = f2 * f2
    p = ((np.float32(1) + f).astype(np.float64) + f2.astype(np.float64) * 0.5).astype(np.float32)
    p = p + f3 * _ONE_SIXTH
    p = p + f4 * _ONE_24TH
    e = np.ldexp(p, np.clip(n, -17, 0).astype(np.int32)).astype(np.float32)
    return np.where(n >= -16, e, np.float32(0)).astype(np.float32)


def softmax_pad_lanes(width: int, narrow_row_pads: bool = False, lanes: int = SOFTMAX_LANES) -> int:
    """§8.9: how many pad lanes TI's softmax adds to a row of ``width`` values: the rest of the last
    vector, ``-width mod lanes``. TIDL 11.x adds them only when ``width >= lanes`` (a narrower row fills
    lanes 0..width-1 only); 08.06 (``narrow_row_pads``) also for a narrower row."""
    if width >= lanes or narrow_row_pads:
        return -width % lanes
    return 0


def softmax(q, in_scale: float, *, axis: int = -1, narrow_row_pads: bool = False,
            lanes: int = SOFTMAX_LANES) -> np.ndarray:
    """§8.9 softmax: fixed point in, float32 out, as TI's reference (``TIDL_softmaxRefProcess``,
    tidl_softmax_ref.c, TIDL 11.x; 08.06's ``TIDL_refSoftmaxProcess``): ``softmax_exp`` per value; the
    denominator summed per lane (``lanes``, TI's VEC_NELEM(float): 16 on a 512-bit C7x; element k in
    lane k mod lanes, the pad lanes of ``softmax_pad_lanes`` holding the input type's lowest value),
    then the lanes in order; the output ``e * float32(1 / denominator)``."""
    lanes = int(lanes)
    if lanes < 1:
        raise FixedPointError(f"softmax: lanes must be >= 1, got {lanes}")
    qi, qtype = _tensor(q, "softmax input")
    if not in_scale > 0:
        raise FixedPointError(f"softmax: the input scale must be > 0, got {in_scale}")
    try:
        qi = np.moveaxis(qi, axis, -1)
    except np.exceptions.AxisError as e:
        raise FixedPointError(f"softmax: {e}") from e
    inv_scale = np.float32(1) / np.float32(in_scale)
    top = qi.max(axis=-1, keepdims=True)
    e = softmax_exp(qi - top, inv_scale)
    k = e.shape[-1]
    pads = softmax_pad_lanes(k, narrow_row_pads, lanes)
    pad_e = softmax_exp(qtype.bounds[0] - top, inv_scale)      # a pad lane holds the type's lowest value
    padded = np.concatenate([e, np.broadcast_to(pad_e, e.shape[:-1] + (pads,))], axis=-1)
    # the zeros that complete the last block change no lane sum
    padded = np.concatenate([padded, np.zeros(e.shape[:-1] + (-(k + pads) % lanes,), np.float32)], axis=-1)
    blocks = padded.reshape(e.shape[:-1] + (-1, lanes))
    sums = np.zeros(e.shape[:-1] + (lanes,), np.float32)
    for block in range(blocks.shape[-2]):
        sums = sums + blocks[..., block, :]
    total = np.zeros(e.shape[:-1], np.float32)
    for lane in range(lanes):
        total = total + sums[..., lane]
    inverse = np.float32(1) / total
    return np.moveaxis((e * inverse[..., None]).astype(np.float32), -1, axis)


# -- §8.9 fixed-point output: TI 11.x's integer softmax (TIDL_refSoftmaxProcessInt) ----------------------

#: §8.9: the bits of the per-row multiplier's mantissa (TI's SCALE_PRECISION_BITS)
SOFTMAX_SCALE_BITS = 8
#: §8.9: how the 8-bit exponentials are computed: "double" (C7100/C7120, and without a device), "taylor"
#: (C7504/C7524: AM62A, AM67A)
SOFTMAX_EXP_RULES = ("double", "taylor")


def exp_taylor(x) -> np.ndarray:
    """§8.9 TI's runtime float32 exponential (TI: ``exp_taylor``, tidl_alg_int.h, TIDL 11.x): ``y =
    float32(1.44269504090) * x``, ``n = trunc(y)``, ``r = (y - n) * float32(0.693147180559945)``; ``p =
    ((1 + r) + r^2 * 0.5) + r^3 * 0.1666667 + r^4 * 0.0416667`` (float32 constants, ``r^4 = r^2 r^2``), each
    step one float32 operation; ``p * 2^n`` (exact), 0 when ``n < -16``, FLT_MAX when ``n > 14``."""
    f = np.float32
    y = (f(1.44269504090) * np.asarray(x, np.float32)).astype(np.float32)
    n = np.trunc(y)
    r = ((y - n.astype(np.float32)).astype(np.float32) * f(0.693147180559945)).astype(np.float32)
    r2 = (r * r).astype(np.float32)
    p = ((f(1) + r).astype(np.float32) + (r2 * f(0.5)).astype(np.float32)).astype(np.float32)
    p = (p + ((r2 * r).astype(np.float32) * f(0.1666667)).astype(np.float32)).astype(np.float32)
    p = (p + ((r2 * r2).astype(np.float32) * f(0.0416667)).astype(np.float32)).astype(np.float32)
    e = np.ldexp(p, np.clip(n, -17, 15).astype(np.int32)).astype(np.float32)
    e = np.where(n < -16, f(0), e)
    return np.where(n > 14, np.finfo(np.float32).max, e).astype(np.float32)


def float_to_int_c7x(v) -> np.ndarray:
    """§8.9 TI's float32-to-integer conversion on the C7x (TI: ``float_to_int_c7x``; TI's GPU port of the
    reference, ``cuda_float_to_int``): to the nearest integer, a tie to the even one."""
    return np.rint(np.asarray(v, np.float32).astype(np.float64)).astype(np.int64)


def round_half_away(v) -> np.ndarray:
    """§8.9 C's ``round`` of a double, as TI's 8-bit softmax exponentials take it (TI: ``round`` in
    ``TIDL_refSoftmaxProcessInt``): to the nearest integer, a tie away from zero."""
    v = np.asarray(v, np.float64)
    t = np.trunc(v)
    return (t + np.sign(v) * (np.abs(v - t) >= 0.5)).astype(np.int64)


def c7x_reciprocal(v) -> np.ndarray:
    """§8.9 the C7x's float32 reciprocal estimate (TI: the ``__recip`` intrinsic, instruction VRCPSP; TI's
    GPU port of the reference reproduces it as ``__recip_bitmatch``): for ``v = (1 + i/256 + ...) * 2^(E-127)``
    (``E`` the biased exponent, ``i`` the top 8 fraction bits) the result is ``2^(127-E)`` when ``i = 0``,
    else ``round(2^17 / (256 + i)) / 256 * 2^(126-E)``: 8 correct bits, the rest of ``v`` ignored.
    Defined here for positive normal ``v`` below 2^125 (softmax's denominators)."""
    v = np.asarray(v, np.float32)
    if not np.all((v >= np.finfo(np.float32).tiny) & (v < np.float32(2.0 ** 125))):
        raise FixedPointError("C7x reciprocal: defined here for positive normal float32 values below 2^125")
    bits = v.view(np.uint32).astype(np.int64)
    e = (bits >> 23) & 0xFF
    i = (bits >> 15) & 0xFF
    # round(2^17 / (256 + i)) never meets a tie: 256 + i (257..511) is no power of 2
    m = np.where(i == 0, 512, (2 * (1 << 17) + (256 + i)) // (2 * (256 + i)))
    return np.ldexp(m.astype(np.float64), (118 - e).astype(np.int32)).astype(np.float32)


def float_to_scale_and_shift(v, bits: int = SOFTMAX_SCALE_BITS) -> Tuple[np.ndarray, np.ndarray]:
    """§8.9 a positive float32 as ``scale * 2^shift`` (TI: ``TIDL_convertFloatToScaleAndShift``,
    tidl_commonUtils.c): ``scale`` the top ``bits`` bits of the significand, truncated (2^(bits-1) ..
    2^bits - 1), ``shift = E - 127 - bits + 1`` (``E`` the biased exponent)."""
    v = np.asarray(v, np.float32)
    if not np.all(v >= np.finfo(np.float32).tiny) or not np.all(np.isfinite(v)):
        raise FixedPointError("scale and shift: defined for positive normal float32 values")
    raw = v.view(np.uint32).astype(np.int64)
    significand = (raw & 0x7FFFFF) | (1 << 23)
    return significand >> (24 - bits), ((raw >> 23) & 0xFF) - 127 - bits + 1


def softmax_exp_8bit(d, in_scale: float, rule: str = "double") -> np.ndarray:
    """§8.9 an 8-bit input's exponentials at 255 (TI: ``TIDL_refSoftmaxProcessInt``, tidl_softmax_ref.c,
    TIDL 11.x), ``d = q - max(q)`` (-255 .. 0). ``"double"`` (C7100/C7120): ``round(exp(double(d) /
    double(float32(inScale))) * (1 / double(float32(1 / 255))))`` with C's ``round`` (a tie away from zero);
    ``"taylor"`` (C7504/C7524): ``round(double(exp_taylor(float32(d) * float32(1 / float32(inScale))) *
    float32(255))))``."""
    d = np.asarray(d, np.int64)
    if rule == "double":
        lut_scale = float(np.float32(1.0 / 255.0))
        return round_half_away(np.exp(d.astype(np.float64) / float(np.float32(in_scale))) * (1.0 / lut_scale))
    if rule == "taylor":
        inv = np.float32(1) / np.float32(in_scale)
        e = (exp_taylor((d.astype(np.float32) * inv).astype(np.float32)) * np.float32(255)).astype(np.float32)
        return round_half_away(e.astype(np.float64))
    raise FixedPointError(f"softmax: exponential rule '{rule}' (one of {', '.join(SOFTMAX_EXP_RULES)})")


def softmax_exp_16bit(d, in_scale: float) -> np.ndarray:
    """§8.9 a 16-bit input's exponentials at 65535 (TI: ``TIDL_refSoftmaxProcessInt``): ``float_to_int_c7x(
    exp_taylor(float32(d) * float32(1 / float32(inScale))) * float32(65535))``, ``d = q - max(q)``."""
    inv = np.float32(1) / np.float32(in_scale)
    x = (np.asarray(d, np.int64).astype(np.float32) * inv).astype(np.float32)
    return float_to_int_c7x((exp_taylor(x) * np.float32(65535)).astype(np.float32))


def softmax_row_multiplier(total, out_scale: float) -> Tuple[np.ndarray, np.ndarray]:
    """§8.9 a row's multiplier (TI: ``TIDL_refSoftmaxProcessInt``): the exponentials' integer sum (uint32,
    wrapping) to float32, ``m = float32(c7x_reciprocal(sum) * float32(outScale))``, then
    ``float_to_scale_and_shift(m, 8)``."""
    total = (np.asarray(total, np.int64) & 0xFFFFFFFF).astype(np.float32)
    m = (c7x_reciprocal(total) * np.float32(out_scale)).astype(np.float32)
    return float_to_scale_and_shift(m, SOFTMAX_SCALE_BITS)


def softmax_requantize(e, scale, shift, out_max: int) -> np.ndarray:
    """§8.9 an exponential to the output (TI: ``TIDL_refSoftmaxProcessInt``): ``p = e * scale``; ``shift >=
    0``: ``p << shift`` (uint32, wrapping); ``shift < 0``: ``(p + 2^(-shift-1)) >> -shift``; then at most
    ``out_max``."""
    p = np.asarray(e, np.int64) * np.asarray(scale, np.int64)
    shift = np.broadcast_to(np.asarray(shift, np.int64), p.shape)
    if np.any(np.abs(shift) > 31):
        raise FixedPointError("softmax: a multiplier's shift beyond 31 bits")
    left = (p << np.clip(shift, 0, 31)) & 0xFFFFFFFF
    s = np.clip(-shift, 1, 31)
    right = (p + (np.int64(1) << (s - 1))) >> s
    return np.minimum(np.where(shift >= 0, left, right), int(out_max))


def softmax_fixed(q, in_scale: float, out_scale: float, out: FixedType, *, axis: int = -1,
                  exp_rule: str = "double") -> np.ndarray:
    """§8.9 softmax with a fixed-point output, as TI 11.x's integer kernel (``TIDL_refSoftmaxProcessInt``):
    per row along ``axis``, ``d = q - max(q)``; exponentials by ``softmax_exp_8bit`` (``exp_rule``) or
    ``softmax_exp_16bit``; their sum's ``softmax_row_multiplier``; each exponential through
    ``softmax_requantize`` to ``out`` (unsigned, the input's width). No pad lanes."""
    qi, qtype = _tensor(q, "softmax input")
    if out.signed or out.bits != qtype.bits:
        raise FixedPointError(f"softmax: a fixed-point output is unsigned at the input's width "
                              f"({qtype.bits} bits), not {'' if out.signed else 'u'}int{out.bits}")
    if not in_scale > 0 or not out_scale > 0:
        raise FixedPointError(f"softmax: scales must be > 0, got in {in_scale}, out {out_scale}")
    try:
        qi = np.moveaxis(qi, axis, -1)
    except np.exceptions.AxisError as e:
        raise FixedPointError(f"softmax: {e}") from e
    d = qi - qi.max(axis=-1, keepdims=True)
    e = softmax_exp_8bit(d, in_scale, exp_rule) if qtype.bits == 8 else softmax_exp_16bit(d, in_scale)
    scale, shift = softmax_row_multiplier(e.sum(axis=-1), out_scale)
    y = softmax_requantize(e, scale[..., None], shift[..., None], out.bounds[1])
    return np.moveaxis(y.astype(out.dtype), -1, axis)


def activation_bounds(out: FixedType, activation: str = "none", tensor_scale: Optional[float] = None,
                      clip_min: Optional[float] = None, clip_max: Optional[float] = None) -> Tuple[int, int]:
    """§8.10 activations as saturation (TIDL-NUMERICS.md, "Runtime arithmetic": ReLU = saturate to the
    unsigned type): the [lo, hi] of a layer's final roundSat. ReLU6 and Clip put their bounds at the
    output scale, rounded half up (tidlx's choice)."""
    lo, hi = out.bounds
    if activation == "none":
        return lo, hi
    if activation == "relu":
        return max(0, lo), hi
    if activation in ("relu6", "clip"):
        if activation == "relu6":
            clip_min, clip_max = 0.0, 6.0
        if tensor_scale is None or clip_min is None or clip_max is None or clip_min > clip_max:
            raise FixedPointError(f"{activation}: needs the output's tensorScale and clip bounds min <= max")
        qlo = int(np.floor(float(clip_min) * float(tensor_scale) + 0.5))
        qhi = int(np.floor(float(clip_max) * float(tensor_scale) + 0.5))
        return max(lo, min(qlo, hi)), min(hi, max(qhi, lo))
    raise FixedPointError(f"activation '{activation}': the saturating activations are none, relu, relu6, clip")


def pad_with_zero_point(x, pads: Sequence[Tuple[int, int]], zero_point: int = 0) -> np.ndarray:
    """§8.11 data movement: a pad layer fills new pixels with the zero point (TIDL-NUMERICS.md, "Runtime
    arithmetic": padding pixels hold the zero point, 0 in symmetric styles); type and scale unchanged."""
    xi, xtype = _tensor(x, "pad input")
    pads = [tuple(int(v) for v in p) for p in pads]
    if len(pads) != xi.ndim or any(len(p) != 2 or min(p) < 0 for p in pads):
        raise FixedPointError(f"pad: expected one (before, after) >= 0 per axis of shape {xi.shape}, got {pads}")
    lo, hi = xtype.bounds
    if not lo <= zero_point <= hi:
        raise FixedPointError(f"pad: zero point {zero_point} is not a {xtype.dtype} value")
    return np.pad(xi, pads, constant_values=zero_point).astype(xtype.dtype)


def float_convert_input(x, tensor_scale: float) -> np.ndarray:
    """A data convert's float input and scale checked: a float array without NaN, a scale > 0."""
    arr = np.asarray(x)
    if arr.dtype.kind != "f":
        raise FixedPointError(f"data convert: expected a float array, got {arr.dtype}")
    if np.isnan(arr).any():
        raise FixedPointError("data convert: the float input holds NaN")
    if not tensor_scale > 0:
        raise FixedPointError(f"data convert: tensorScale must be > 0, got {tensor_scale}")
    return arr


def data_convert_to_fixed(x, tensor_scale: float, out: FixedType) -> np.ndarray:
    """§8.12 data convert into a subgraph, as TI 11.x's DataConvert reference (``TIDL_refDataConvertNew``,
    float source): ``val = float32(x * float32(tensorScale))`` (float32 product); ``val + 0.5`` when
    ``val > 0``, else ``val - 0.5``, added in float64 and rounded to float32 (``tidl_sat``'s float
    parameter); saturated to the output type; then truncated toward zero. So round half away from zero,
    except where the float32 rounding of the sum carries it to the next integer."""
    arr = float_convert_input(x, tensor_scale)
    lo, hi = out.bounds
    with np.errstate(over="ignore"):
        val = (arr.astype(np.float32) * np.float32(tensor_scale)).astype(np.float64)
    moved = np.where(val > 0, val + 0.5, val - 0.5).astype(np.float32)
    return np.trunc(np.clip(moved, lo, hi)).astype(out.dtype)


def data_convert_to_float(q, tensor_scale: float, zero_point: int = 0) -> np.ndarray:
    """§8.12 data convert out of a subgraph, as TI 11.x's DataConvert reference (``TIDL_refDataConvertNew``
    with ``TIDL_dataConvertGetScaleAndBias``): ``s = float32(1 / float32(tensorScale))``, then
    ``float32(q) * s + float32(-(zp * s))``, each operation in float32."""
    FixedType.of(q, "data convert input")
    if not tensor_scale > 0:
        raise FixedPointError(f"data convert: tensorScale must be > 0, got {tensor_scale}")
    s = np.float32(1.0) / np.float32(tensor_scale)
    bias = np.float32(0.0) - np.float32(zero_point) * s
    out = np.asarray(q).astype(np.float32)   # 8/16-bit integers are exact in float32
    out *= s
    out += bias
    return out


# ---- §8.10.1-2: the non-saturating activations -------------------------------------------------

def prelu(acc, slope_factors, shift: int, *, channel_axis: int = 1) -> np.ndarray:
    """§8.10.1 PReLU / leaky ReLU on the accumulator, before its one roundSat (TI:
    ``TIDL_refBatchNormCoreRoundSlope`` in ``TIDL_refBatchNormCore``): a negative accumulator, taken as
    int32, becomes ``(acc * slopeFact[c]) >> shift`` in 64 bits (an arithmetic shift: floor, no
    rounding), held in int32; a value >= 0 passes. ``slope_factors``: the 8.8 (8-bit weights, shift 8)
    or 8.24 (16-bit weights, shift 16) factors of ``numerics.prelu_slope_factors``, one integer or one
    per channel along ``channel_axis``. Returns the new accumulator (int64)."""
    a = _integers(acc, "PReLU accumulator")
    s = _integers(slope_factors, "PReLU slope factors")
    if not 0 <= int(shift) <= 62:
        raise FixedPointError(f"PReLU: shift {shift} outside 0..62")
    if s.ndim == 1 and s.size == 1:
        s = s.reshape(())
    if s.ndim == 1 and a.ndim >= 2:
        if s.size != a.shape[channel_axis]:
            raise FixedPointError(f"PReLU: {s.size} slopes for {a.shape[channel_axis]} channels")
        shape = [1] * a.ndim
        shape[channel_axis] = -1
        s = s.reshape(shape)
    elif s.ndim > 1 or (s.ndim == 1 and a.ndim < 2):
        raise FixedPointError("PReLU: slopes must be one integer or one per channel")
    if (np.abs(s) >= 1 << 31).any():
        raise FixedPointError("PReLU: slope factors must fit int32")
    negative = wrap_accumulator(wrap_accumulator(a, 32) * s >> int(shift), 32)
    return np.where(a < 0, negative, a)


def lookup_activation(pre, table, out: FixedType) -> np.ndarray:
    """§8.10.2 sigmoid, tanh and hard sigmoid by a table over the pre-activation type (tidlx's choice, TIDL
    is silent): ``out = table[pre - lo(pre type)]``; the table has one entry per value of that type."""
    p, ptype = _tensor(pre, "activation input")
    t = _integers(table, "activation table")
    lo, hi = ptype.bounds
    if t.ndim != 1 or t.size != hi - lo + 1:
        raise FixedPointError(f"activation table: expected {hi - lo + 1} entries for a {ptype.dtype} input, "
                              f"got shape {t.shape}")
    olo, ohi = out.bounds
    if t.size and (t.min() < olo or t.max() > ohi):
        raise FixedPointError(f"activation table: entries outside {out.dtype}")
    return t[p - lo].astype(out.dtype)


def depth_to_space(x, block: int, mode: str = "DCR") -> np.ndarray:
    """§8.11 depth-to-space (data movement, ONNX's DCR and CRD orders): type and scale unchanged."""
    xi, xtype = _tensor(x, "depth-to-space input", 4)
    n, c, h, w = xi.shape
    b = int(block)
    if b < 1 or c % (b * b):
        raise FixedPointError(f"depth-to-space: {c} channels do not divide by block {b} squared")
    if mode == "DCR":
        y = xi.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        y = xi.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        raise FixedPointError(f"depth-to-space: mode {mode!r} (DCR or CRD)")
    return np.ascontiguousarray(y.reshape(n, c // (b * b), h * b, w * b)).astype(xtype.dtype)


# ---- §8.15 TopK, §8.16 ScatterElements ----------------------------------------------------------

def topk_fill(dtype, largest: bool) -> Tuple[int, int]:
    """§8.15: TopK's starting (value, index) in every output slot: the value type's lowest (largest
    first) or highest (smallest first), and the int32 that TI's output buffer holds where that value's
    bytes are repeated over the index (TI: TIDL_refTopK fills the whole buffer, indices included, with
    the value)."""
    dtype = np.dtype(dtype)
    info = np.iinfo(dtype)
    value = int(info.min if largest else info.max)
    raw = np.array([value], dtype).tobytes() * (4 // dtype.itemsize)
    return value, int(np.frombuffer(raw, "<i4")[0])


def topk(x, k: int, axis: int, largest: bool = True) -> Tuple[np.ndarray, np.ndarray]:
    """§8.15 (TI: TIDL_refTopK, TIDL_findTopK): the k largest (smallest) values along ``axis`` in
    order, equal values the lower index first, and their indices as int32. A value equal to the slot's
    starting value (§8.15, ``topk_fill``) whose starting index is not negative is never taken: such
    slots keep the starting value and index."""
    xi, xtype = _tensor(x, "TopK input")
    axis = int(axis) % max(xi.ndim, 1)
    n = xi.shape[axis]
    if not 1 <= int(k) <= n:
        raise FixedPointError(f"TopK: K {k} is not in [1, {n}] (the axis' size)")
    key = -xi if largest else xi
    order = np.argsort(key, axis=axis, kind="stable")[(slice(None),) * axis + (slice(0, int(k)),)]
    values = np.take_along_axis(xi, order, axis=axis)
    fill, fill_index = topk_fill(xtype.dtype, largest)
    idx = order.astype(np.int64)
    if fill_index >= 0:
        blocked = values == fill
        idx = np.where(blocked, fill_index, idx)
    return values.astype(xtype.dtype), idx.astype(np.int32)


def mma_scale_and_shift(ratio: float) -> Tuple[int, int]:
    """§8.16 (TI: TIDL_getMMAv2_ScaleAndShift, the runtime's): ``ratio`` as an 8-bit multiplier and a
    right shift, ``ratio ~ scale / 2^shift``, in float32: the ratio doubled while the double stays at
    most 255 (at most 40 times), then rounded half up."""
    r = np.float32(ratio)
    if not (math.isfinite(float(r)) and r > 0):
        raise FixedPointError(f"scale ratio {ratio}: must be a finite positive number")
    shift = 0
    while True:
        r = np.float32(r * np.float32(2.0))
        if shift >= 40:
            break
        if r > 255.0:
            r = np.float32(r / np.float32(2.0))
            break
        shift += 1
    scale = int(math.floor(float(r) + 0.5))
    if scale > 255:
        raise FixedPointError(f"scale ratio {ratio}: beyond TIDL's 8-bit multiplier (at most 255)")
    return scale, shift


SCATTER_REDUCTIONS = ("none", "add", "max", "min")


def scatter_accumulator_type(updates_type: FixedType, reduction: str) -> Tuple[int, int]:
    """§8.16 (TI: TIDL_scatterElementsRefProcess): the accumulator's bounds: twice the updates' width
    (same signedness) for 'add', the updates' own type otherwise."""
    if reduction == "add":
        return saturation_bounds(updates_type.bits * 2, updates_type.signed)
    return updates_type.bounds


def scatter_elements(data, indices, updates, reduction: str, out: FixedType, *, scale: int = 1, shift: int = 0,
                     data_scale: int = 1, data_shift: int = 0) -> np.ndarray:
    """§8.16 (TI: TIDL_refScatterElements, ScatterND form): ``indices`` (int32, M x Y...) address the
    first M axes of ``data``; update ``y`` (updates[y], a line or an element) goes to data[indices[:, y]]
    in order. The accumulator starts as ``data`` (brought to the updates' scale by ``data_scale`` /
    ``data_shift``, a roundSat to the accumulator's bounds); 'add' adds and saturates to the
    accumulator's bounds after every update, 'max'/'min' keep the larger/smaller, 'none' replaces.
    An index below ``-size`` or at ``size`` or above is skipped, a negative one counts from the end.
    'add' then requantizes: ``roundSat(acc * scale, shift)`` to ``out``; the others copy."""
    if reduction not in SCATTER_REDUCTIONS:
        raise FixedPointError(f"ScatterElements: reduction {reduction!r} (one of {', '.join(SCATTER_REDUCTIONS)})")
    d, _ = _tensor(data, "ScatterElements data")
    u, utype = _tensor(updates, "ScatterElements updates")
    idx = np.asarray(indices)
    if idx.dtype != np.int32:
        raise FixedPointError(f"ScatterElements indices: expected an int32 array (TIDL's index type), got {idx.dtype}")
    m = idx.shape[0] if idx.ndim else 0
    if not 1 <= m <= d.ndim or u.shape != idx.shape[1:] + d.shape[m:]:
        raise FixedPointError(f"ScatterElements: indices {list(idx.shape)} and updates {list(u.shape)} do not "
                              f"address data {list(d.shape)}")
    lo, hi = scatter_accumulator_type(utype, reduction)
    acc = round_sat(d * int(data_scale), int(data_shift), lo, hi)
    points = idx.reshape(m, -1).T.astype(np.int64)
    rows = u.reshape(points.shape[0], *d.shape[m:])
    dims = np.array(d.shape[:m], np.int64)
    for where, row in zip(points, rows):
        if np.any(where >= dims) or np.any(where < -dims):
            continue
        at = tuple(int(v) for v in np.where(where < 0, where + dims, where))
        if reduction == "add":
            acc[at] = np.clip(acc[at] + row, lo, hi)
        elif reduction == "max":
            acc[at] = np.maximum(acc[at], row)
        elif reduction == "min":
            acc[at] = np.minimum(acc[at], row)
        else:
            acc[at] = row
    if reduction == "add":
        return round_sat(acc * int(scale), int(shift), *out.bounds).astype(out.dtype)
    return np.clip(acc, *out.bounds).astype(out.dtype)
