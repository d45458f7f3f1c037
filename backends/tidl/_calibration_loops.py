"""numba loops of the calibration loop (calibration_loop.py, docs/numerics.md §9): one pass each where
the plain numpy rules take several, with the same integers.

* ``quantize_weights_f32``: ``numerics.quantize_weights`` for one scalar scale (§4.2, TI's
  ``TIDL_QuantizeSignedMax``) on weights already cast to float32 -- the loop re-quantizes the weights of
  every layer whose scale moved (the bias clip of §4.4 follows the input scale and the calibrated bias).
* ``value_counts``: ``np.bincount`` of an 8/16-bit tensor's values offset to start at 0, without the
  offset copy.

Compiled on first use and cached on disk (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _quantize_signed_max_f32(w, scale, limit, clip, lo, hi, out):
    """float32 ``w`` clipped to [-limit, limit] (when ``clip``), times the float32 scale in float32,
    +-0.5 in double by the sign of the clipped value, truncated, saturated to [lo, hi]."""
    for i in range(w.size):
        v = w[i]
        if clip:
            if v > limit:
                v = limit
            if v < -limit:
                v = -limit
        prod = np.float64(v * scale)
        q = np.trunc(prod + 0.5) if v > 0 else np.trunc(prod - 0.5)
        if q < lo:
            q = lo
        elif q > hi:
            q = hi
        out[i] = q


def quantize_weights_f32(w32: np.ndarray, scale: float, bits: int, limit=None) -> np.ndarray:
    """``numerics.quantize_weights(w, scale, bits, limit)`` for a scalar ``scale`` and scalar or no
    ``limit``, from ``w32 = w.astype(np.float32)`` (finite, checked by the plain rule beforehand)."""
    out = np.empty(w32.shape, np.int8 if bits == 8 else np.int16)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    flat = np.ascontiguousarray(w32).reshape(-1)
    lim = np.float32(0.0 if limit is None else np.float32(np.float64(limit)))
    _quantize_signed_max_f32(flat, np.float32(np.float64(scale)), lim, limit is not None, np.float64(lo),
                             np.float64(hi), out.reshape(-1))
    return out


@njit(cache=True, nogil=True)
def _count_offset(flat, offset, counts):
    # four interleaved tables: runs of one value do not wait on the same counter
    tables = np.zeros((4, counts.size), np.int64)
    n4 = flat.size - flat.size % 4
    for i in range(0, n4, 4):
        tables[0, np.int64(flat[i]) + offset] += 1
        tables[1, np.int64(flat[i + 1]) + offset] += 1
        tables[2, np.int64(flat[i + 2]) + offset] += 1
        tables[3, np.int64(flat[i + 3]) + offset] += 1
    for i in range(n4, flat.size):
        tables[0, np.int64(flat[i]) + offset] += 1
    for j in range(counts.size):
        counts[j] = tables[0, j] + tables[1, j] + tables[2, j] + tables[3, j]


def value_counts(flat: np.ndarray) -> np.ndarray:
    """``np.bincount`` of the 8/16-bit values of ``flat`` (1-D) plus ``-min(dtype)``: counts[i] is how many
    hold ``i + min(dtype)``, its length the highest such i + 1, as bincount's."""
    info = np.iinfo(flat.dtype)
    counts = np.zeros(int(info.max) - int(info.min) + 1, np.int64)
    _count_offset(flat, -int(info.min), counts)
    nonzero = np.flatnonzero(counts)
    return counts[:int(nonzero[-1]) + 1] if nonzero.size else counts[:0]
