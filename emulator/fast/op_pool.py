"""Fast pooling: max, average and adaptive pools as numba plane loops in parallel blocks. Same bits
as reference/op_pool.py (the same maxima in the same order, the same sums in the same order)."""

from __future__ import annotations

import numpy as np

from ..reference import op_pool as ref
from ..reference._common import from_planes, to_planes
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
    _over_planes(max_pool_nchw, max_pool_nchw_blocks, planes[None], out, kh, kw, sh, sw, dh, dw, pt, pl,
                 ref.lowest(x.dtype), work_per_plane=oh * ow * kh * kw)
    return from_planes(out[0], perm, lead)


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
