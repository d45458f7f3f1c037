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
from typing import NamedTuple, Optional, Sequence

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


class TailPass(NamedTuple):
    """What the one pass does for a chain's stages: its per-channel scale and shift (None: no
    affine step), which stage's argument is the residual (None: no add), and the activation."""
    scale: Optional[np.ndarray]
    shift: Optional[np.ndarray]
    add_stage: Optional[int]
    relu: bool
    clamp: bool
    lo: object
    hi: object


def tail_pass(stages, others: Sequence[list], dtype: np.dtype, shape: tuple) -> Optional[TailPass]:
    """The pass for ``stages`` on a value of ``shape`` and ``dtype``, from each stage's other
    arguments; a residual given as None is checked when the pass runs (run_tail), a batch norm's
    parameters given as None make it None. None when the operands do not fit the pass."""
    if dtype not in (np.float32, np.float64) or len(shape) < 2 or math.prod(shape) < SMALL:
        return None
    scale = shift = add_stage = None
    relu = clamp = False
    lo = hi = dtype.type(0)
    for i, (stage, args) in enumerate(zip(stages, others)):
        if stage.tail == "affine":  # batch_norm's inference form, or bias_add (scale 1)
            if stage.attrs.axis % len(shape) != 1:
                return None
            if stage.op_name == "nn.bias_add":
                (shift,) = args
                if type(shift) is not np.ndarray or shift.dtype != dtype:
                    return None
                scale = _ones(shape[1], dtype)
            else:
                from .op_nn import cached_scale_shift

                if any(a is None for a in args):
                    return None
                scale, shift = cached_scale_shift(dtype, args, stage.attrs)
            if scale.shape != (shape[1],) or shift.shape != (shape[1],):
                return None
        elif stage.tail == "add":
            (other,) = args
            if other is not None and (type(other) is not np.ndarray or other.shape != shape or other.dtype != dtype
                                      or not other.flags.c_contiguous):
                return None
            add_stage = i
        elif stage.op_name == "clip":
            clamp = True
            lo, hi = dtype.type(stage.attrs.a_min), dtype.type(stage.attrs.a_max)
        else:
            relu = True
    return TailPass(scale, shift, add_stage, relu, clamp, lo, hi)


def run_pass(x: np.ndarray, plan: TailPass, other: Optional[np.ndarray]) -> np.ndarray:
    """The pass ``plan`` on ``x`` in place (a fresh contiguous array), ``other`` the residual."""
    from . import _jit, _microkernel

    inner = math.prod(x.shape[2:])
    rows = x.reshape(-1, inner)
    dummy = np.empty(1, x.dtype)
    other_rows = rows if other is None else other.reshape(rows.shape)
    serial, parallel = _jit.conv_tail, _jit.conv_tail_blocks
    if x.dtype == np.float32 and _microkernel.AVAILABLE and inner > 0 and other_rows.strides[1] == 4 \
            and other_rows.strides[0] % 4 == 0 and other_rows.dtype == np.float32:
        serial, parallel = _jit.conv_tail_stored, _jit.conv_tail_stored_blocks  # rows through the store kernel
    run_blocks(rows.shape[0], serial, parallel, rows, x.shape[1],
               dummy if plan.scale is None else plan.scale, dummy if plan.shift is None else plan.shift,
               other_rows, plan.scale is not None, other is not None,
               plan.relu, plan.clamp, plan.lo, plan.hi, min_block=max(1, MIN_ELEMENTWISE_BLOCK // inner))
    return x


def run_tail(x: np.ndarray, stages, others: Sequence[list]) -> Optional[np.ndarray]:
    """Applies the tail to ``x`` in place (``x`` must be a fresh array that nobody else holds);
    ``stages`` are the fused stages (with .tail and .attrs), ``others`` each stage's other
    arguments. Returns None, with ``x`` untouched, when the operands do not fit the pass."""
    if not x.flags.c_contiguous or not x.flags.writeable:
        return None
    plan = tail_pass(stages, others, x.dtype, x.shape)
    if plan is None:
        return None
    other = None if plan.add_stage is None else others[plan.add_stage][0]
    if other is not None and np.shares_memory(other, x):
        return None
    return run_pass(x, plan, other)


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
