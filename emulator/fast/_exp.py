"""float32 sigmoid and swish in one vectorized numba pass each (the fast set's ``sigmoid`` kernel and
swish step, EfficientNet's activation), and the squeeze-excite channel scale.

numpy's ``1 / (1 + exp(-x))`` makes five passes over the tensor on one thread, and its exp alone
took 0.6 ms for the 1.2M floats of a (1, 96, 112, 112) swish. Here each element goes through
one inlined function with no library call, so LLVM vectorizes the loop (AVX-512 ``zmm`` code on
this machine), and the loops run in blocks over the run's threads (_parallel.run_blocks).

The exp: ``e^z = 2^n * e^r`` with ``n`` the integer nearest ``z * log2(e)`` (rounded by adding
1.5 * 2^23), ``r = z - n * ln2`` in two steps (Cody-Waite: ``ln2_hi`` has 9 significant bits, so
``n * ln2_hi`` is exact) and ``e^r = 1 + r + r^2 q(r)`` with ``q`` of degree 4, a near-minimax fit
on [-0.3467, 0.3467] made for this file (Lawson-weighted least squares on Chebyshev nodes;
relative error 3.7e-9 with its float32 coefficients, far below float32's 6e-8 half ulp). ``2^n``
is put into the exponent bits (``2^(n-1)`` times ``2 e^r``, so that n = 128 still fits). The exp
alone is within 8.1e-8 relative of float64 over [-80, 88.72] (every 7th float32; numpy's
float32 exp: 2.05e-7). The sigmoid computes it as ``exp_neg_f32(x)``: the same operations with
the signs flipped where that is exact, saving the negation (the same bits, checked on every
third float32; with the clamp as min/max, 12% faster than the plain form).

The sigmoid is then numpy's formula ``1 / (1 + e^-x)`` with ``x`` clamped to [-89, 80]:
e^-80 vanishes next to 1 (as it does exactly), and above ln(FLT_MAX) = 88.7228 the exp overflows
to inf in its last multiply, exactly where float32 exp does (checked element by element around
the threshold in the tests), so sigmoid(x) = 0 for x <= -88.72284 and sigmoid(-inf) = 0,
sigmoid(inf) = 1, as the reference kernel gives; NaN returns x itself. Swish is ``x * sigmoid(x)``
with that same function, so a fused swish and the unfused ``sigmoid`` kernel then ``multiply``
give the same bits (for NaN too: sigmoid(NaN) is that very NaN, so either operand order of the
product returns it; x = -inf gives the default NaN of inf * 0 either way).

Only IEEE float32 multiplies, adds, one divide and selects (no FMA: numba does not contract
without fastmath), so the bits do not depend on the CPU's vector width or the thread count.
Measured against float64 (``1 / (1 + exp(-x))`` of the float32 input, in float64) over every
float32 in [-104, 89], all 2.24e9 of them (tests/emulator/test_emu_activations.py re-checks a
dense subset):

* relative error at most 1.48e-7 (``SIGMOID_RELATIVE_ERROR`` = 1.5e-7; 1.2-2.5 float32 ulps)
  where the float64 value is a normal float32 (x > -87.34); numpy's own float32 chain: 2.53e-7;
  the two differ by at most 2.75e-7 relative (same bits for 96.4% of the inputs);
* where it is subnormal (-88.73 < x < -87.34) the absolute error is at most 1.4e-45 (one
  subnormal ulp, the division's rounding); below, both give 0 exactly for the same inputs (the
  true value is below 3e-39).

Against the reference kernel (numpy's float32 chain) that makes the fast ``sigmoid`` kernel's
tolerance (registry ``Kernel.tolerance``, relative to the output's largest value) 5e-7: numpy's
exp differs between its SIMD paths and versions, hence the margin.
float64 tensors keep numpy's chain (the reference's bits).

The squeeze-excite scale (``scale_planes``: planes times one factor each, op_elemwise.multiply)
is a plain product loop and gives the reference's bits; it is here to keep the fast set's new
numba loops out of _jit.py.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from ._blocks import block_range

#: measured bound of |sigmoid - exact| / exact for float32 outputs that are normal (see the doc)
SIGMOID_RELATIVE_ERROR = 1.5e-7


@intrinsic
def _float_bits(typingctx, value):
    """The int32 with the bits of a float32 (a bitcast LLVM keeps in vector registers)."""
    if value != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(types.float32), codegen


@intrinsic
def _bits_float(typingctx, value):
    """The float32 with the bits of an integer's low 32 bits (numba widens int32 arithmetic to int64)."""
    if not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        low = args[0] if value.bitwidth == 32 else builder.trunc(args[0], ir.IntType(32))
        return builder.bitcast(low, ir.FloatType())

    return types.float32(value), codegen


_ROUNDER = np.float32(12582912.0)          # 1.5 * 2^23: t = v + this holds round(v) in its low bits
_ROUNDER_BITS = np.int32(0x4B400000)
_LN2_HI = np.float32(0.693359375)          # 355 / 512
_LN2_LO = np.float32(0.6931471805599453 - 0.693359375)
_Q0 = np.float32(0.4999999403953552)
_Q1 = np.float32(0.1666652113199234)
_Q2 = np.float32(0.04166838899254799)
_Q3 = np.float32(0.008368735201656818)
_Q4 = np.float32(0.001381455920636654)
_NEG_LOG2E = np.float32(-1.4426950408889634)
_NEG_Q4 = np.float32(-_Q4)
_V_LOW = np.float32(-89.0)                 # e^-v overflows to inf from v = -88.7228 down
_V_HIGH = np.float32(80.0)                 # e^-80 vanishes next to 1
_ONE = np.float32(1.0)


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def exp_f32(z):
    """e^z for float32 z in [-80, 89] (inf above ln(FLT_MAX)); NaN gives NaN. See the module doc."""
    return exp_neg_f32(-z)


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def exp_neg_f32(w):
    """e^-w for float32 w in [-89, 80]: exp_f32(-w)'s operations with the sign of every
    intermediate flipped where that is exact (round to nearest is symmetric), so the same bits
    without the negation: u = -r, and q(r)'s Horner steps subtract ``q * u``."""
    t = w * _NEG_LOG2E + _ROUNDER
    n = t - _ROUNDER
    u = w + n * _LN2_HI
    u = u + n * _LN2_LO
    q = _NEG_Q4 * u + _Q3
    q = _Q2 - q * u
    q = _Q1 - q * u
    q = _Q0 - q * u
    p = (q * (u * u) - u) + _ONE
    half_scale = _bits_float((_float_bits(t) - _ROUNDER_BITS + np.int32(126)) << np.int32(23))  # 2^(n-1)
    return (p + p) * half_scale


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def sigmoid_f32(v):
    """1 / (1 + e^-v) for a float32 v, as the module doc says (NaN: v itself). The clamp as
    min/max (vminps/vmaxps; their NaN rule does not matter, the last select returns a NaN v)."""
    w = min(max(v, _V_LOW), _V_HIGH)
    s = _ONE / (_ONE + exp_neg_f32(w))
    return v if v != v else s


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def swish_f32(v):
    """v * sigmoid_f32(v): the swish step's value (and a conv tail's, _jit.tail_row)."""
    return v * sigmoid_f32(v)


@njit(cache=True, nogil=True, error_model="numpy")
def sigmoid_flat(x, out, start, stop):
    """out[i] = sigmoid_f32(x[i]) for i in [start, stop) of flat float32 arrays (slices from 0, so
    that LLVM vectorizes the loop)."""
    src = x[start:stop]
    dst = out[start:stop]
    for i in range(src.size):
        dst[i] = sigmoid_f32(src[i])


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def sigmoid_flat_blocks(x, out, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            sigmoid_flat(x, out, start, stop)


@njit(cache=True, nogil=True, error_model="numpy")
def swish_flat(x, out, start, stop):
    """out[i] = x[i] * sigmoid_f32(x[i]) (the sigmoid kernel's value times x)."""
    src = x[start:stop]
    dst = out[start:stop]
    for i in range(src.size):
        dst[i] = swish_f32(src[i])


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def swish_flat_blocks(x, out, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            swish_flat(x, out, start, stop)


# --- the squeeze-excite scale: planes times one factor each ----------------------------------

@njit(cache=True, nogil=True, error_model="numpy")
def scale_planes(x, scale, out, inner, start, stop):
    """out[p * inner + i] = x[p * inner + i] * scale[p] for planes p in [start, stop) of flat x and
    out. The caller gives no NaN scale: then the bits are numpy's whichever operand order LLVM
    gives the multiply (a NaN x comes back quieted, inf * 0 is the default NaN; only for two NaN
    operands does the order pick the result, and numpy's own choice depends on its loop)."""
    for p in range(start, stop):
        s = scale[p]
        src = x[p * inner:(p + 1) * inner]
        dst = out[p * inner:(p + 1) * inner]
        for i in range(inner):
            dst[i] = src[i] * s


@njit(cache=True, nogil=True, parallel=True, error_model="numpy")
def scale_planes_blocks(x, scale, out, inner, count, blocks):
    for i in prange(blocks):
        start, stop = block_range(count, blocks, i)
        if start < stop:
            scale_planes(x, scale, out, inner, start, stop)
