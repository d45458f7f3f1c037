"""How far fixed point is from float: the figures ``tidlx compare`` and ``tidlx check-fusion`` report.

    sqnr_db(reference, value)        # 10 log10(sum ref^2 / sum (ref - value)^2), inf when equal
    max_abs_err(reference, value)
    saturated_pct(q, lo, hi)         # share of integer values at a saturation bound, in percent

All take arrays of the same shape and compute in float64, so a figure does not depend on the order
of the elements or the dtype of the inputs.
"""

from __future__ import annotations

import math

import numpy as np


def _pair(reference, value):
    ref = np.asarray(reference, dtype=np.float64)
    val = np.asarray(value, dtype=np.float64)
    if ref.shape != val.shape:
        raise ValueError(f"shapes differ: {ref.shape} vs {val.shape}")
    return ref, val


def sqnr_db(reference, value) -> float:
    """Signal to quantization noise ratio in dB: ``inf`` for identical values, ``-inf`` for a zero
    reference with any error, ``nan`` for empty arrays. Non-finite values give ``nan``."""
    ref, val = _pair(reference, value)
    if ref.size == 0 or not (np.isfinite(ref).all() and np.isfinite(val).all()):
        return math.nan
    noise = float(np.sum((ref - val) ** 2))
    signal = float(np.sum(ref ** 2))
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def max_abs_err(reference, value) -> float:
    """The largest |reference - value| (0.0 for empty arrays)."""
    ref, val = _pair(reference, value)
    return float(np.max(np.abs(ref - val))) if ref.size else 0.0


def saturated_pct(q, lo: int, hi: int) -> float:
    """Percent of the integer values ``q`` sitting at ``lo`` or ``hi`` (0.0 for empty arrays)."""
    q = np.asarray(q)
    if q.size == 0:
        return 0.0
    return 100.0 * float(np.count_nonzero((q <= lo) | (q >= hi))) / q.size


__all__ = ["max_abs_err", "saturated_pct", "sqnr_db"]
