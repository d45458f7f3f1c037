"""Fast pooling: max, average, global average and adaptive pools as numba plane loops in parallel
blocks. Same bits as reference/op_pool.py (the same maxima in the same order, the same sums in the
same order; the global average pool sums in numpy's pairwise order, see _sums.py)."""

from __future__ import annotations

import numpy as np

from ..reference import op_pool as ref
from ..reference._common import from_planes, spatial_axes, to_planes
from ..registry import fast_kernel
from ._parallel import for_blocks, run_blocks


def _over_planes(kernel, driver, planes, out, *params, work_per_plane: int):
    """Runs a numba plane loop over all (1, P, H, W) planes in parallel blocks (``driver``: its
    parallel form, or None for the Python pool)."""
    count, min_block = planes.shape[0] * planes.shape[1], max(1, 200_000 // max(work_per_plane, 1))
    if driver is None:
        for_blocks(count, lambda start, stop: kernel(planes, out, *params, start, stop), min_block=min_block)
    else:
        run_blocks(count, kernel, driver, planes, out, *params, min_block=min_block)


@fast_kernel("nn.max_pool2d")
def max_pool2d(args, attrs, out_type):
    from ._jit import max_pool_nchw, max_pool_nchw_blocks

    x = args[0]
    planes, perm, lead = to_planes(x, attrs.layout)
    kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow = ref.pool_geometry(attrs, *planes.shape[-2:])
    out = np.empty((1, planes.shape[0], oh, ow), x.dtype)
    if sw == 2 and dw == 1 and x.dtype == np.float32 and _microkernel_available():
        # ResNet stems' 3x3 stride-2 pool: 0.36 -> 0.24 ms (64 x 112 x 112 at two threads, in ResNet-18)
        from ._jit import max_pool_nchw_s2, max_pool_nchw_s2_blocks

        _over_planes(max_pool_nchw_s2, max_pool_nchw_s2_blocks, planes[None], out, kh, kw, sh, dh, pt, pl,
                     np.float32(ref.lowest(x.dtype)), work_per_plane=oh * ow * kh * kw)
        return from_planes(out[0], perm, lead)
    _over_planes(max_pool_nchw, max_pool_nchw_blocks, planes[None], out, kh, kw, sh, sw, dh, dw, pt, pl,
                 ref.lowest(x.dtype), work_per_plane=oh * ow * kh * kw)
    return from_planes(out[0], perm, lead)


def _microkernel_available() -> bool:
    from . import _microkernel

    return _microkernel.AVAILABLE


@fast_kernel("nn.avg_pool2d")
def avg_pool2d(args, attrs, out_type):
    from ._jit import sum_pool_nchw, sum_pool_nchw_blocks

    x = args[0]
    planes, perm, lead = to_planes(x, attrs.layout)
    h, w = planes.shape[-2:]
    geometry = ref.pool_geometry(attrs, h, w)
    kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow = geometry
    work = ref.avg_work_dtype(x.dtype)
    sums = np.empty((1, planes.shape[0], oh, ow), work)
    _over_planes(sum_pool_nchw, sum_pool_nchw_blocks, planes.astype(work, copy=False)[None], sums, kh, kw, sh, sw,
                 dh, dw, pt, pl, work_per_plane=oh * ow * kh * kw)
    return from_planes(ref.avg_divide(sums[0], attrs, h, w, geometry, x.dtype), perm, lead)


def _adaptive(x, attrs, is_max):
    from ._jit import adaptive_pool_nchw

    planes, perm, lead = to_planes(x, attrs.layout)
    h, w = planes.shape[-2:]
    oh, ow = ref.adaptive_size(attrs, h, w)
    work = ref.adaptive_work_dtype(x.dtype, is_max)
    out = np.empty((1, planes.shape[0], oh, ow), work)
    _over_planes(adaptive_pool_nchw, None, planes.astype(work, copy=False)[None], out, is_max, work_per_plane=h * w)
    out = out[0]
    if work != x.dtype:
        out = np.trunc(out).astype(x.dtype)
    return from_planes(out, perm, lead)


@fast_kernel("nn.adaptive_avg_pool2d")
def adaptive_avg_pool2d(args, attrs, out_type):
    return _adaptive(args[0], attrs, False)


@fast_kernel("nn.adaptive_max_pool2d")
def adaptive_max_pool2d(args, attrs, out_type):
    return _adaptive(args[0], attrs, True)


#: planes per block: about this many values; run_blocks takes 16x smaller blocks in numba regions,
#: 28k values, and two of those pay for a region's start: on 2 cores (1, 1152, 7, 7) went 1.2x
#: faster in two blocks, (1, 240, 14, 14) (47k values) no faster, (1, 96, 14, 14) 0.7x
_MEAN_BLOCK_VALUES = 448_000


@fast_kernel("nn.global_avg_pool2d", fresh_result=True)
def global_avg_pool2d(args, attrs, out_type):
    """Plane means of a C-contiguous float32/float64 NCHW tensor in numpy's summation order, 4
    planes at a time in vectors, in blocks of planes over the run's threads (_sums.py): the
    reference's bits (planes whose mean is NaN take numpy's own mean: which NaN two NaNs add to is
    the compiled loop's choice). numpy sums one plane at a time on one thread and pays ~10 us per
    call: the squeeze-excite pools of EfficientNet-B0 and MobileNetV3-small. Anything else (other
    layouts and dtypes, strided or unaligned input, empty planes): the reference kernel."""
    x = args[0]
    if type(x) is not np.ndarray or x.ndim != 4 or x.dtype not in (np.float32, np.float64) \
            or spatial_axes(attrs.layout) != (2, 3) or not x.flags.c_contiguous or not x.flags.aligned \
            or x.size == 0:
        return ref.global_avg_pool2d(args, attrs, out_type)
    from . import _sums

    if not _sums.AVAILABLE:
        return ref.global_avg_pool2d(args, attrs, out_type)
    batch, channels, h, w = x.shape
    planes, n = batch * channels, h * w
    program, depth = _sums.split_program(n)
    flat = x.reshape(-1)
    out = np.empty(planes, x.dtype)
    nan_flag = np.zeros(1, np.int8)
    run_blocks(planes, _sums.plane_means, _sums.plane_means_blocks, flat, program, depth, out,
               nan_flag, min_block=max(1, _MEAN_BLOCK_VALUES // n))
    if nan_flag[0]:
        nan = np.isnan(out)
        out[nan] = flat.reshape(planes, n)[nan].mean(axis=1, dtype=x.dtype)
    return out.reshape(batch, channels, 1, 1)
