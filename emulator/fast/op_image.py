"""Fast resize (image.resize2d, nn.upsampling): the reference's linear/cubic passes as numba loops over
planes in parallel blocks; the same sums in the same order, so the same bits as reference/op_image.py."""

from __future__ import annotations

import numpy as np

from ..reference import op_image as ref
from ..registry import fast_kernel
from ._parallel import for_blocks


def interpolate(src: np.ndarray, ri, rw, ci, cw) -> np.ndarray:
    """reference.op_image.interpolate in numba (_jit.interp_rows / interp_cols)."""
    from ._jit import interp_cols, interp_rows

    n_planes, in_h, in_w = src.shape
    out_h, out_w = ri.shape[0], ci.shape[0]
    min_block = max(1, 100_000 // (out_h * max(in_w, out_w) * ri.shape[1]))
    mid = np.empty((n_planes, out_h, in_w), src.dtype)
    for_blocks(n_planes, lambda start, stop: interp_rows(src, ri, rw, mid, start, stop), min_block)
    out = np.empty((n_planes, out_h, out_w), src.dtype)
    for_blocks(n_planes, lambda start, stop: interp_cols(mid, ci, cw, out, start, stop), min_block)
    return out


@fast_kernel("image.resize2d")
def resize2d(args, attrs, out_type):
    return ref.resize2d(args, attrs, out_type, interpolate)


@fast_kernel("nn.upsampling")
def upsampling(args, attrs, out_type):
    return ref.upsampling(args, attrs, out_type, interpolate)
