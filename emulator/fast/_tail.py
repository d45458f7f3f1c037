"""The element-wise tail of a convolution (batch_norm or bias_add, then a residual add, then relu or
clip) in one pass.

Fusion (_fusion.py) runs each fused op's epilogue in turn: one pass over the activation per op.
When the stages' epilogues declare tail roles (registry.Epilogue.tail) forming any in-order subset
of affine (batch_norm, bias_add) -> add -> relu (relu, clip), two or more, this runs them as a
single numba pass instead, doing the very float operations of the separate epilogues in the same
order (x * scale + shift, then + other, then the relu select or np.clip's two compares), so results
stay bit-identical to the unfused ops. bias_add is the affine step with scale 1: x * 1 is x
exactly (NaN, infinities and signed zeros included), then + bias as the op.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from ._parallel import MIN_ELEMENTWISE_BLOCK, run_blocks

ROLES = ("affine", "add", "relu")
#: Below this many elements the epilogues' numpy calls (~1-2 us each) beat one numba pass (its
#: dispatch of a dozen arguments costs ~10 us): squeeze-excite convolutions on 1x1 maps.
SMALL = 4096


def is_tail(roles: Sequence) -> bool:
    """Whether a fused chain's stages (after the head), by their epilogues' tail roles, form a
    tail this pass runs."""
    if len(roles) < 2:
        return False
    positions = [ROLES.index(r) if r in ROLES else -1 for r in roles]
    return min(positions) >= 0 and all(a < b for a, b in zip(positions, positions[1:]))


def run_tail(x: np.ndarray, stages, others: Sequence[list]) -> Optional[np.ndarray]:
    """Applies the tail to ``x`` in place (``x`` must be a fresh array that nobody else holds);
    ``stages`` are the fused stages (with .tail and .attrs), ``others`` each stage's other
    arguments. Returns None, with ``x`` untouched, when the operands do not fit the pass."""
    if x.dtype not in (np.float32, np.float64) or not x.flags.c_contiguous or not x.flags.writeable \
            or x.ndim < 2 or x.size < SMALL:
        return None
    scale = shift = other = None
    relu = clamp = False
    lo = hi = x.dtype.type(0)
    for stage, args in zip(stages, others):
        if stage.tail == "affine":  # batch_norm's inference form, or bias_add (scale 1)
            if stage.attrs.axis % x.ndim != 1:
                return None
            if stage.op_name == "nn.bias_add":
                (shift,) = args
                if type(shift) is not np.ndarray or shift.dtype != x.dtype:
                    return None
                scale = _ones(x.shape[1], x.dtype)
            else:
                from .op_nn import cached_scale_shift

                scale, shift = cached_scale_shift(x.dtype, args, stage.attrs)
            if scale.shape != (x.shape[1],) or shift.shape != (x.shape[1],):
                return None
        elif stage.tail == "add":
            (other,) = args
            if type(other) is not np.ndarray or other.shape != x.shape or other.dtype != x.dtype \
                    or not other.flags.c_contiguous or np.shares_memory(other, x):
                return None
        elif stage.op_name == "clip":
            clamp = True
            lo, hi = x.dtype.type(stage.attrs.a_min), x.dtype.type(stage.attrs.a_max)
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
               clamp, lo, hi, min_block=max(1, MIN_ELEMENTWISE_BLOCK // inner))
    return x


_ones_cache: dict = {}


def _ones(channels: int, dtype) -> np.ndarray:
    """A read-only vector of ones (bias_add's scale), one per (length, dtype)."""
    key = (channels, np.dtype(dtype))
    ones = _ones_cache.get(key)
    if ones is None:
        ones = np.ones(channels, dtype)
        ones.setflags(write=False)
        _ones_cache[key] = ones
    return ones
