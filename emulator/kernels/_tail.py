"""The element-wise tail of a convolution (batch_norm, then a residual add, then relu) in one pass.

The interpreter fuses such chains after their producer (_fusion.py) and by default runs each op's
epilogue in turn: one pass over the activation per op. When the tail is any in-order subset of
batch_norm -> add -> relu (two ops or more), this runs it as a single numba pass instead, doing
the very float operations of the separate epilogues in the same order (x * scale + shift, then
+ other, then the relu select), so results stay bit-identical to the unfused ops.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from ._parallel import MIN_ELEMENTWISE_BLOCK, run_blocks

TAIL_OPS = ("nn.batch_norm", "add", "nn.relu")


def is_tail(op_names: Sequence[str]) -> bool:
    """Whether a fused chain's stages (after the head) form a tail this pass runs."""
    if len(op_names) < 2:
        return False
    positions = [TAIL_OPS.index(n) if n in TAIL_OPS else -1 for n in op_names]
    return min(positions) >= 0 and all(a < b for a, b in zip(positions, positions[1:]))


def run_tail(x: np.ndarray, stages, others: Sequence[list]) -> Optional[np.ndarray]:
    """Applies the tail to ``x`` in place (``x`` must be a fresh array that nobody else holds);
    ``stages`` are the fused stages (with .op_name and .attrs), ``others`` each stage's other
    arguments. Returns None, with ``x`` untouched, when the operands do not fit the pass."""
    if x.dtype not in (np.float32, np.float64) or not x.flags.c_contiguous or not x.flags.writeable \
            or x.ndim < 2:
        return None
    scale = shift = other = None
    relu = False
    for stage, args in zip(stages, others):
        if stage.op_name == "nn.batch_norm":
            if stage.attrs.axis % x.ndim != 1:
                return None
            from .op_nn import _scale_shift

            scale, shift = _scale_shift(x.dtype, args, stage.attrs)
            if scale.shape != (x.shape[1],) or shift.shape != (x.shape[1],):
                return None
        elif stage.op_name == "add":
            (other,) = args
            if type(other) is not np.ndarray or other.shape != x.shape or other.dtype != x.dtype \
                    or not other.flags.c_contiguous or np.shares_memory(other, x):
                return None
        else:
            relu = True
    from ._jit import conv_tail, conv_tail_blocks

    channels = x.shape[1]
    inner = math.prod(x.shape[2:])
    rows = x.reshape(-1, inner)
    dummy = np.empty(1, x.dtype)
    run_blocks(rows.shape[0], conv_tail, conv_tail_blocks, rows, channels,
               dummy if scale is None else scale, dummy if shift is None else shift,
               rows if other is None else other.reshape(rows.shape), scale is not None, other is not None, relu,
               min_block=max(1, MIN_ELEMENTWISE_BLOCK // inner))
    return x
