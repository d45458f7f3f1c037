"""3x3 stride-1 convolutions by Winograd's minimal filtering F(2x2, 3x3).

Each 2x2 output tile is computed from a 4x4 input tile with 16 element-wise products instead
of 36, so the 16 matrix products (one per tile position, O x C times C x tiles) do 2.25x fewer
multiply-adds than im2col, and no im2col matrix is built. The transforms only add and subtract
(and halve the weights), so float32 results stay within a few ulps of the direct sum
(relative error ~1e-6, far inside the emulator's 1e-4 bar).

Transformed weights of constant (read-only) weight arrays are cached for as long as the array
lives, so a model's weights are transformed once, not on every run. Used from 14x14 pixels up
(see MIN_PIXELS); ``TIDLX_EMULATOR_WINOGRAD=0`` turns it off.
"""

from __future__ import annotations

import os
import threading
import weakref

import numpy as np

from ._parallel import for_blocks, splitting_products

# G (4x3): U = G g G^T transforms a 3x3 kernel into a 4x4 one.
_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])

_cache_lock = threading.Lock()
_weight_cache: dict = {}


def transformed_weights(w: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """U[(a, b), o, c] = (G w[o, c] G^T)[a, b], shape (16, O, C); cached for read-only arrays."""
    key = id(w)
    if not w.flags.writeable:
        with _cache_lock:
            hit = _weight_cache.get(key)
        if hit is not None and hit[0]() is w and hit[1].dtype == dtype:
            return hit[1]
    o, c = w.shape[:2]
    u = np.einsum("ai,ocij,bj->aboc", _G, w.astype(np.float64), _G, optimize=True)
    u = np.ascontiguousarray(u.reshape(16, o, c), dtype=dtype)
    if not w.flags.writeable:
        try:
            ref = weakref.ref(w, lambda _r, k=key: _weight_cache.pop(k, None))
        except TypeError:
            return u
        with _cache_lock:
            _weight_cache[key] = (ref, u)
    return u


def _planes16(rows: int, cols: int, dtype) -> np.ndarray:
    """16 (rows, cols) matrices, each contiguous, but not a multiple of 4 KiB apart: the transforms
    stream through all 16 at once, and equal 4 KiB offsets would map them to the same L1 sets."""
    size = rows * cols
    itemsize = np.dtype(dtype).itemsize
    stride = (-(-size * itemsize // 4096) * 4096 + 256) // itemsize  # 4 KiB multiple + 4 cache lines
    buf = np.empty((16, stride), dtype)
    return buf[:, :size].reshape(16, rows, cols)


#: Winograd needs this many output pixels per image: its transformed weights are 16/9 the size,
#: and on small images the products are bound by reading weights, not by multiply-adds. Measured
#: on ResNet-18 shapes (2 cores): 256ch at 14x14 is ~25% faster than im2col, 512ch at 7x7 ~20% slower.
MIN_PIXELS = 14 * 14
ENABLED = os.environ.get("TIDLX_EMULATOR_WINOGRAD", "1") not in ("0", "no", "false")


def usable(x_shape, w_shape, groups, strides, dilation, dtype) -> bool:
    """Winograd pays for dense 3x3 stride-1 float convolutions with enough channels and pixels."""
    n, c, h, wd = x_shape
    o, _, kh, kw = w_shape
    return (ENABLED and groups == 1 and (kh, kw) == (3, 3) and tuple(strides) == (1, 1)
            and tuple(dilation) == (1, 1) and dtype.kind == "f" and c >= 16 and o >= 16
            and h * wd >= MIN_PIXELS)


def conv3x3(x: np.ndarray, w: np.ndarray, pads, out_hw, dtype: np.dtype) -> np.ndarray:
    """NCHW x OIHW -> NCHW, stride 1, no dilation, one group."""
    n, c, h, wd = x.shape
    o = w.shape[0]
    pt, pl, _, _ = pads
    oh, ow = out_hw
    th, tw = -(-oh // 2), -(-ow // 2)
    tiles = n * th * tw
    # Input padded on all sides, and on the bottom/right up to whole tiles.
    xp = np.zeros((n, c, 2 * th + 2, 2 * tw + 2), dtype)
    rows, cols = min(h, 2 * th + 2 - pt), min(wd, 2 * tw + 2 - pl)
    xp[:, :, pt:pt + rows, pl:pl + cols] = x[:, :, :rows, :cols]

    from ._jit import winograd_input, winograd_output

    # V[(a, b), c, (n, ty, tx)] = (B^T d B)[a, b] for the 4x4 input tile d at (2ty, 2tx).
    v = _planes16(c, tiles, dtype)
    for_blocks(n * c, lambda s, e: winograd_input(xp, v, th, tw, s, e), min_block=max(1, 4096 // tiles))

    u = transformed_weights(w, dtype)
    m = _planes16(o, tiles, dtype)
    if splitting_products():
        for_blocks(16, lambda s, e: np.matmul(u[s:e], v[s:e], out=m[s:e]))
    else:
        np.matmul(u, v, out=m)

    # Y = A^T M A with A^T = [[1, 1, 1, 0], [0, 1, -1, -1]].
    y = np.empty((n, o, 2 * th, 2 * tw), dtype)
    for_blocks(n * o, lambda s, e: winograd_output(m, y, th, tw, s, e), min_block=max(1, 4096 // tiles))
    if (2 * th, 2 * tw) != (oh, ow):
        y = y[:, :, :oh, :ow]
    return y
