"""Fast element-wise kernels: relu, erf, float32 sigmoid and the squeeze-excite scale (a tensor
times per-channel factors) in numba loops, and the epilogues (in-place fused forms) of relu,
clip (ReLU6) and the residual add.

Same bits as the reference kernels (reference/op_elemwise.py), except the float32 sigmoid: its own
vectorized exp (_exp.py) is within 1.5e-7 relative of the exact value over every float32 (numpy's
chain: 2.53e-7), so the kernel declares a tolerance of ``SIGMOID_TOLERANCE`` against numpy's bits;
the swish step (_activations.py) uses the same function, so fused and unfused swish agree bit for
bit. float64 sigmoid is the reference's."""

from __future__ import annotations

import numpy as np

from ..reference import op_elemwise as ref
from ..reference._common import out_dtype
from ..registry import epilogue, fast_kernel, lookup
from ._parallel import MIN_ELEMENTWISE_BLOCK, run_blocks

#: below this many elements numpy's maximum is as fast as a numba pass
_SMALL = 4096
#: exp-based passes (sigmoid, swish) over fewer elements than this per thread run in one call:
#: ~10x the work per element of a relu, so blocks may be smaller than MIN_ELEMENTWISE_BLOCK
#: (run_blocks divides it by 16 in numba regions: 16k floats, ~8 us of work)
MIN_EXP_BLOCK = 1 << 18
#: |fast - reference| / max |reference| of the float32 sigmoid: its error (1.5e-7 relative to the
#: exact value, _exp.py; 2.75e-7 from numpy's chain at most, measured over every float32 in
#: [-104, 89]), with a margin for numpy's other exp paths
SIGMOID_TOLERANCE = 5e-7


@fast_kernel("nn.relu")
def relu(args, attrs, out_type):
    x = args[0]
    if x.dtype.kind != "f" or x.size < _SMALL:
        return ref.relu(args, attrs, out_type)
    return _relu_into(np.ascontiguousarray(x), None)


def _relu_into(x: np.ndarray, out) -> np.ndarray:
    """relu of a contiguous float array into ``out`` (x itself for in place; None: a new array);
    the numba select ``0 if v <= 0 else v`` is np.maximum(v, 0), signed zeros and NaN included."""
    from ._jit import relu_flat, relu_flat_blocks, relu_flat_inplace, relu_flat_inplace_blocks

    flat = x.reshape(-1)
    zero = x.dtype.type(0)
    if out is x:
        run_blocks(flat.size, relu_flat_inplace, relu_flat_inplace_blocks, flat, zero, min_block=MIN_ELEMENTWISE_BLOCK)
        return x
    dst = np.empty_like(flat) if out is None else out.reshape(-1)
    run_blocks(flat.size, relu_flat, relu_flat_blocks, flat, dst, zero, min_block=MIN_ELEMENTWISE_BLOCK)
    return dst.reshape(x.shape)


@epilogue("nn.relu", tail="relu")
def relu_epilogue(x, others, attrs, in_place):
    if x.dtype.kind != "f" or not x.flags.c_contiguous:
        return None
    if x.size < _SMALL:
        return np.maximum(x, x.dtype.type(0), out=x if in_place else None)
    return _relu_into(x, x if in_place else None)


@epilogue("add", tail="add")
def add_epilogue(x, others, attrs, in_place):
    """A residual add of an array of the same shape and dtype (IEEE addition commutes exactly, so
    the chain value may have been either operand)."""
    (other,) = others
    if type(other) is not np.ndarray or other.shape != x.shape or other.dtype != x.dtype \
            or x.dtype.kind != "f":
        return None
    return np.add(x, other, out=x if in_place else None)


@epilogue("clip", tail="relu")
def clip_epilogue(x, others, attrs, in_place):
    """np.clip of a float array, as the reference kernel, into x. In a one-pass tail it takes the
    activation's place (_tail.py: lo if v < lo, then hi if v > hi, as np.clip: NaN and -0 kept)."""
    if x.dtype.kind != "f" or not x.flags.c_contiguous:
        return None
    return np.clip(x, x.dtype.type(attrs.a_min), x.dtype.type(attrs.a_max), out=x if in_place else None)


@fast_kernel("sigmoid", fresh_result=True, tolerance=SIGMOID_TOLERANCE)
def sigmoid(args, attrs, out_type):
    """float32: one vectorized pass of _exp.sigmoid_f32 (every size, so that the swish step, which
    uses the same function, gives the bits of this kernel then multiply); else the reference."""
    x = args[0]
    if x.dtype != np.float32:
        return ref.sigmoid(args, attrs, out_type)
    from ._exp import sigmoid_flat, sigmoid_flat_blocks

    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    run_blocks(flat.size, sigmoid_flat, sigmoid_flat_blocks, flat, out, min_block=MIN_EXP_BLOCK)
    return out.reshape(x.shape)


@fast_kernel("erf")
def erf(args, attrs, out_type):
    """math.erf in a numba loop (the C library's erf, as the reference)."""
    from ._jit import erf_f64

    x = args[0]
    flat = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    return erf_f64(flat).reshape(x.shape).astype(out_dtype(out_type))


def plane_split(tensor_shape, factors_shape):
    """(planes, inner) when ``factors_shape`` gives one factor per plane of ``tensor_shape`` (the
    tensor's shape up to some axis, then 1s: the squeeze-excite (1, C, 1, 1) against (1, C, H, W)),
    at least two planes, and the tensor is not small; else None."""
    if len(factors_shape) > len(tensor_shape):
        return None
    size = int(np.prod(tensor_shape, dtype=np.int64))
    if int(np.prod(factors_shape, dtype=np.int64)) >= size or size < _SMALL:
        return None
    shape = (1,) * (len(tensor_shape) - len(factors_shape)) + tuple(factors_shape)
    lead = max((i + 1 for i, d in enumerate(shape) if d != 1), default=0)
    if shape[:lead] != tuple(tensor_shape[:lead]):
        return None  # broadcast along a leading axis too (a batch): numpy's
    planes = int(np.prod(tensor_shape[:lead], dtype=np.int64))
    if planes < 2:
        return None  # one factor: numpy's scalar loop is as fast
    return planes, size // planes


def _plane_factors(a, b):
    """(tensor, factors, planes, inner) when one operand is a float tensor and the other, of its
    dtype, has one factor per plane of it (plane_split) and no NaN; else None."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype != b.dtype \
            or a.dtype not in (np.float32, np.float64):
        return None
    for tensor, factors in ((a, b), (b, a)):
        split = plane_split(tensor.shape, factors.shape)
        if split is None:
            continue
        from ._jit import any_nan

        if any_nan(np.ascontiguousarray(factors).reshape(-1)):
            return None  # NaN factors: see _exp.scale_planes
        return (tensor, factors) + split
    return None


def scale_by_planes(tensor, factors, planes: int, inner: int) -> np.ndarray:
    """tensor times one factor per plane (factors without NaN), as multiply computes it."""
    from ._exp import scale_planes, scale_planes_blocks

    flat = np.ascontiguousarray(tensor).reshape(-1)
    out = np.empty_like(flat)
    run_blocks(planes, scale_planes, scale_planes_blocks, flat, np.ascontiguousarray(factors).reshape(-1), out,
               inner, min_block=max(1, MIN_ELEMENTWISE_BLOCK // inner))
    return out.reshape(tensor.shape)


@fast_kernel("multiply", fresh_result=True)
def multiply(args, attrs, out_type):
    """A tensor times one factor per plane (squeeze-excite scales) in a numba loop over the planes,
    in blocks over the run's threads: numpy's broadcasting loop restarts per plane (a (1, 1152, 7,
    7) scale took 15 us, twice a plain multiply). The same products, so the reference's bits (NaN
    factors go to the reference, see _exp.scale_planes). Anything else: the reference kernel."""
    found = _plane_factors(*args)
    if found is None or out_dtype(out_type) != found[0].dtype:
        return lookup("multiply", "reference")(args, attrs, out_type)
    return scale_by_planes(*found)
