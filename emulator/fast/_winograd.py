"""3x3 stride-1 convolutions by Winograd's minimal filtering, F(2x2, 3x3) and F(4x4, 3x3).

F(m x m, 3x3) computes each m x m output tile from an (m+2) x (m+2) input tile with (m+2)^2
element-wise products, so the (m+2)^2 matrix products (one per tile position, O x C times
C x tiles) do 36/16 = 2.25x (F(2,3)) or 144/36 = 4x (F(4,3)) fewer multiply-adds than im2col,
and no im2col matrix is built.

A 3x3 convolution with dilation (dh, dw) is dh * dw plain 3x3 convolutions, one per phase sub-grid
x_padded[r::dh, q::dw] of the padded input; ``conv3x3`` stacks the phases as images, runs them
through the same Winograd path and interleaves their outputs (FCN-ResNet-50's dilated layer3 and
layer4: 1.3-1.45x faster than im2col + sgemm per layer, and closer to float64: the sums are the
chunked ones below, see benchmarks/ab_conv_routes.py).

F(2x2, 3x3) transforms only add, subtract and halve: float32 results stay within a few ulps
of the direct sum. F(4x4, 3x3) uses the points 0, +-1, +-2 and infinity (Lavin & Gray); its
transforms scale by up to 8 and 1/24, so its float32 error is ~15x F(2,3)'s: 4e-6..9e-6 of
the output's largest value per ResNet-18 layer against 3e-7..6e-7 (float64 reference).

Accuracy decides the default (the goal: the fast set's error against a float64 evaluation no
more than 1.5x onnxruntime's on every model of benchmarks/model_set.py). Measured (error /
onnxruntime's error, both against onnx.reference on a float64 copy, chunked sums as below):
F(2x2, 3x3) everywhere 1.16x on FCN-ResNet-50 256x256 and 1.28x on the BEVDet image stage;
F(4x4, 3x3) where it is faster 1.79x and 1.55x; F(4x4) only on layers of <= 64 channels still
1.58x on BEVDet. So float32 uses F(2x2, 3x3) unless the config asks for F(4x4, 3x3)
(``TIDLX_EMULATOR_WINOGRAD=4``: ~1.4x faster convolutions at 64ch 56x56 .. 256ch 14x14, one
thread). float64 uses F(4x4, 3x3) from 28x28 up: its rounding is far below float32's.

float32 convolutions run by blocks of 16 tiles (the tile-block passes in _jit.py): a block
goes through the input transform, the products and the output transform while its transformed
values stay in the core's cache, the products by _microkernel.py's register-blocked kernel on
weights prepacked in panels of 8 or 6 output channels (_microkernel.ROWS; OpenBLAS would pack both
operands again on every one of these small products). Each output element's sum runs over the input channels in
order, in chunks of _jit.CHANNEL_CHUNK channels whose sums are then added in order (a single
chain over 2048 channels was 1.8x onnxruntime's error on FCN), so results do not depend on the
thread count. float64 (and a
CPU the microkernel does not compile for) uses whole transformed arrays and BLAS products, and so do
float32 convolutions with large weights and enough tiles (``blas_products_pay``: FCN's 512- and
2048-channel layers), where a block's pass over all the transformed weights would stream them from
memory for only 16 tiles.

Transformed weights of constant (read-only) weight arrays are cached for as long as the array
lives, so a model's weights are transformed once, not on every run. The run's config
(``EmulatorConfig.winograd``, ``TIDLX_EMULATOR_WINOGRAD``): ``"off"`` turns Winograd off, ``"2"``
uses only F(2x2, 3x3), ``"4"`` uses F(4x4, 3x3) wherever Winograd is used; ``"auto"`` is F(2x2, 3x3)
in float32 and chooses by shape in float64. ``EmulatorConfig.tile_blocks=False`` uses whole transformed arrays for float32 too.
"""

from __future__ import annotations

import numpy as np

from ..config import EmulatorConfig, active_config
from ._parallel import for_blocks, numba_threads, run_blocks, splitting_products
from ._weights import derived

# G (4x3): U = G g G^T transforms a 3x3 kernel into a 4x4 one for F(2x2, 3x3).
_G23 = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
# G (6x3) for F(4x4, 3x3); the input (B^T) and output (A^T) transforms are _jit.winograd43_*.
_G43 = np.array([[1 / 4, 0.0, 0.0],
                 [-1 / 6, -1 / 6, -1 / 6],
                 [-1 / 6, 1 / 6, -1 / 6],
                 [1 / 24, 1 / 12, 1 / 6],
                 [1 / 24, -1 / 12, 1 / 6],
                 [0.0, 0.0, 1.0]])


def transformed_weights(w: np.ndarray, dtype: np.dtype, tile: int = 2, panels: bool = False) -> np.ndarray:
    """U[(a, b), o, c] = (G w[o, c] G^T)[a, b], shape ((tile+2)^2, O, C) for F(tile x tile, 3x3);
    computed in float64 and cached for read-only arrays (_weights.derived). ``panels``: float32 in
    the microkernel's layout, ((tile+2)^2, ceil(O/ROWS), C, ROWS)."""

    def make():
        g = _G23 if tile == 2 else _G43
        size = g.shape[0]
        o, c = w.shape[:2]
        u = np.einsum("ai,ocij,bj->aboc", g, w.astype(np.float64), g, optimize=True)
        u = np.ascontiguousarray(u.reshape(size * size, o, c), dtype=dtype)
        if panels:
            from ._microkernel import pack_panels

            u = pack_panels(u)
        return u

    return derived(w, ("winograd", tile, np.dtype(dtype), panels), make)


def _offset_matrices(count: int, rows: int, cols: int, dtype) -> np.ndarray:
    """``count`` (rows, cols) matrices, each contiguous, but not a multiple of 4 KiB apart: the
    transforms stream through all of them at once, and equal 4 KiB offsets would map them to
    the same L1 sets."""
    size = rows * cols
    itemsize = np.dtype(dtype).itemsize
    stride = (-(-size * itemsize // 4096) * 4096 + 256) // itemsize  # 4 KiB multiple + 4 cache lines
    buf = np.empty((count, stride), dtype)
    return buf[:, :size].reshape(count, rows, cols)


#: Winograd needs this many output pixels per image: its transformed weights are 16/9 the size,
#: and on small images the products are bound by reading weights, not by multiply-adds. Measured
#: on ResNet-18 shapes (2 cores): 256ch at 14x14 is ~25% faster than im2col, 512ch at 7x7 ~20% slower.
MIN_PIXELS = 14 * 14
#: float64 uses F(4x4, 3x3) from 28x28 outputs up. Measured on ResNet-18 shapes (whole arrays, 2
#: cores, 1 image): 64ch at 56x56 and 128ch at 28x28 are ~1.5x faster than F(2x2, 3x3); 256ch at
#: 14x14 is no faster (its 16 tiles of 4x4 leave the products bound by reading the 36/16 larger weights).
F43_MIN_PIXELS = 28 * 28
#: With tile blocks (float32) Winograd pays from 7x7 up: 512ch at 7x7 ~35% faster than im2col.
MIN_PIXELS_TILE_BLOCKS = 7 * 7


#: Dilated convolutions use Winograd on their phase sub-grids (see ``conv3x3``) when each phase's
#: output is at least this many pixels a side: smaller phases waste much of their 2x2 or 4x4 tiles.
MIN_PHASE_EDGE = 4
#: Whether dilated 3x3 convolutions may use Winograd (benchmarks/ab_conv_routes.py turns it off for A/B).
DILATED = True


def usable(x_shape, w_shape, groups, strides, dilation, dtype, config: EmulatorConfig | None = None,
           out_hw=None) -> bool:
    """Winograd pays for dense 3x3 stride-1 float convolutions with enough channels and pixels;
    dilated ones are Winograd convolutions of their phase sub-grids (``conv3x3``), each of which
    needs MIN_PHASE_EDGE output pixels a side (``out_hw``: the convolution's output size; by
    default the unpadded one)."""
    config = config or active_config()
    n, c, h, wd = x_shape
    o, _, kh, kw = w_shape
    dh, dw = (int(d) for d in dilation)
    if (dh, dw) != (1, 1):
        oh, ow = out_hw if out_hw is not None else (h - 2 * dh, wd - 2 * dw)
        if not DILATED or min(dh, dw) < 1 or -(-oh // dh) < MIN_PHASE_EDGE or -(-ow // dw) < MIN_PHASE_EDGE:
            return False
    return (config.winograd != "off" and groups == 1 and (kh, kw) == (3, 3) and tuple(strides) == (1, 1)
            and dtype.kind == "f" and c >= 16 and o >= 16
            and h * wd >= (MIN_PIXELS_TILE_BLOCKS if _tile_blocks(dtype, config) else MIN_PIXELS))


def tile_size(out_hw, dtype, config: EmulatorConfig | None = None) -> int:
    """Output tile edge (2 or 4) for a convolution that ``usable`` accepted: the config's forced
    size, else F(2x2, 3x3) in float32 (F(4x4, 3x3) misses the accuracy goal, see the module doc)
    and F(4x4, 3x3) in float64 from F43_MIN_PIXELS up."""
    config = config or active_config()
    if config.winograd == "2":
        return 2
    if config.winograd == "4":
        return 4
    if np.dtype(dtype) != np.float64:
        return 2
    return 4 if out_hw[0] * out_hw[1] >= F43_MIN_PIXELS else 2


def conv3x3(x: np.ndarray, w: np.ndarray, pads, out_hw, dtype: np.dtype, tile: int | None = None,
            config: EmulatorConfig | None = None, dilation=(1, 1)) -> np.ndarray:
    """NCHW x OIHW -> NCHW, stride 1, one group; ``tile`` 2 or 4 (default by shape). A dilated
    convolution runs as the non-dilated one of its phase sub-grids stacked as images (_phase_images)."""
    config = config or active_config()
    if tuple(dilation) != (1, 1):
        dh, dw = (int(d) for d in dilation)
        phases, phase_hw = _phase_images(x, pads, out_hw, dh, dw, dtype)
        edge = tile or tile_size(phase_hw, dtype, config)
        y = conv3x3(phases, w, (0, 0, 0, 0), phase_hw, dtype, edge, config)
        return _interleave_phases(y, x.shape[0], out_hw, dh, dw)
    edge = tile or tile_size(out_hw, dtype, config)
    chunked = False
    if _tile_blocks(dtype, config):
        if not blas_products_pay(x.shape, w.shape, out_hw, edge):
            return _conv3x3_tile_blocks(x, w, pads, out_hw, edge)
        from . import _blas

        chunked = _blas.AVAILABLE  # the tile blocks' summation, on BLAS products
    if edge == 4:
        return _conv3x3_f43(x, w, pads, out_hw, dtype, chunked)
    return _conv3x3_f23(x, w, pads, out_hw, dtype, chunked)


def _phase_images(x: np.ndarray, pads, out_hw, dh: int, dw: int, dtype):
    """The phase sub-grids of a 3x3 convolution with dilation (dh, dw), as (n * dh * dw) images for
    an unpadded, undilated 3x3 convolution with (ceil(oh / dh), ceil(ow / dw)) outputs, and that size.

    Output pixel (r + dh * k, q + dw * l) (0 <= r < dh, 0 <= q < dw) sums the taps
    x_padded[r + dh * (k + i), q + dw * (l + j)] * w[i, j]: a plain 3x3 convolution of the sub-grid
    x_padded[r::dh, q::dw]. Phases whose outputs stop a row or column short compute one extra
    (dropped by _interleave_phases) on zeros or real pixels."""
    n, c, h, wd = x.shape
    pt, pl = pads[0], pads[1]
    ph, pw = -(-out_hw[0] // dh), -(-out_hw[1] // dw)
    phases = np.zeros((n, dh, dw, c, ph + 2, pw + 2), dtype)  # each phase reads ph + 2 rows, pw + 2 columns
    for r in range(dh):
        # phase row m is padded row r + dh * m, input row r + dh * m - pt: those inside the image
        m0 = max(0, -(-(pt - r) // dh))
        m1 = min(ph + 2, (h - 1 + pt - r) // dh + 1)
        for q in range(dw):
            l0 = max(0, -(-(pl - q) // dw))
            l1 = min(pw + 2, (wd - 1 + pl - q) // dw + 1)
            if m0 < m1 and l0 < l1:
                row, col = r + dh * m0 - pt, q + dw * l0 - pl
                phases[:, r, q, :, m0:m1, l0:l1] = x[:, :, row:row + dh * (m1 - m0):dh, col:col + dw * (l1 - l0):dw]
    return phases.reshape(n * dh * dw, c, ph + 2, pw + 2), (ph, pw)


def _interleave_phases(y: np.ndarray, n: int, out_hw, dh: int, dw: int) -> np.ndarray:
    """The dilated convolution's output from its phases' outputs (n * dh * dw, O, ph, pw): pixel
    (r + dh * k, q + dw * l) is phase (r, q)'s pixel (k, l)."""
    o = y.shape[1]
    phases = y.reshape((n, dh, dw) + y.shape[1:])
    out = np.empty((n, o) + tuple(out_hw), y.dtype)
    for r in range(dh):
        for q in range(dw):
            part = out[:, :, r::dh, q::dw]
            part[...] = phases[:, r, q, :, :part.shape[2], :part.shape[3]]
    return out


#: Tiles per block: the microkernel's 16 columns. Wider blocks were slower on ResNet-18 shapes
#: (their transformed tiles no longer stay in L2).
BLOCK_TILES = 16


#: float32 convolutions with at least this many (input, output) channel pairs and BLAS_MIN_TILES
#: tiles use whole transformed arrays and BLAS products even with tile blocks: a block of 16 tiles
#: reads all the transformed weights (16 x O x C floats: 16 MB at 512 x 512), far past the L2
#: cache, for 16 tiles' products, where OpenBLAS blocks the per-position products for its caches.
#: Measured on this 2-core EPYC VM (1 / 2 threads, blocks / whole arrays): 512 x 512 at 32x32
#: 1.8x / 1.4x, FCN's head 2048 -> 512 at 32x32 1.7x / 1.6x, 1024 -> 256 at 16x16 1.5x / 1.6x,
#: 512 x 512 at 14x14 (49 tiles) 1.5x / 1.5x; but 512 x 512 at 7x7 (16 tiles) 0.8x / 0.7x and 256 x 256
#: 1.06-1.3x (noisy, shared machine). These products sum BLAS_CHANNEL_CHUNK channels per OpenBLAS
#: call and add the chunk sums in order (_jit.winograd_chunked_products): one call over all
#: channels chains 256 of them here, 2x the tile blocks' RMS error against float64 (FCN-ResNet-50
#: rose to 1.39x onnxruntime's error on one feed). Chunks of 64 keep the tile blocks' RMS error
#: (2048 channels: 5.9e-8 both; 32: the same, but OpenBLAS repacks so often that the gain goes;
#: 128: 7e-8) at 1.4x / 1.4x the tile blocks' speed (2048 -> 512 at 32x32; 512 x 512: 1.4x / 1.3x).
BLAS_MIN_CHANNEL_PAIRS = 1 << 18
BLAS_CHANNEL_CHUNK = 64
BLAS_MIN_TILES = 49


def blas_products_pay(x_shape, w_shape, out_hw, edge: int) -> bool:
    """Whether a tile-blocks convolution runs on whole arrays and BLAS products instead (see above)."""
    tiles = x_shape[0] * -(-out_hw[0] // edge) * -(-out_hw[1] // edge)
    return w_shape[0] * w_shape[1] >= BLAS_MIN_CHANNEL_PAIRS and tiles >= BLAS_MIN_TILES


def runs_on_blas(x_shape, w_shape, dilation, out_hw, dtype, config: EmulatorConfig | None = None) -> bool:
    """Whether ``conv3x3`` would run a convolution that ``usable`` accepted on whole transformed arrays
    and BLAS products (blas_products_pay, for a dilated one on its phase images) rather than by tile
    blocks."""
    config = config or active_config()
    n = x_shape[0]
    dh, dw = (int(d) for d in dilation)
    if (dh, dw) != (1, 1):
        n, out_hw = n * dh * dw, (-(-out_hw[0] // dh), -(-out_hw[1] // dw))
    if not _tile_blocks(dtype, config):
        return True
    return blas_products_pay((n,) + tuple(x_shape[1:]), w_shape, out_hw, tile_size(out_hw, dtype, config))


def _output_splits(outs: int) -> int:
    """In how many parts each block's output channels go: one per thread, so the threads share every
    block evenly, however few blocks there are (512 channels at 7x7 is one; BEVDet's 8x22 three,
    where whole blocks per thread left one thread with twice the work). A thread's consecutive
    parts share one input transform; only a block split between two threads transforms twice."""
    from ._microkernel import ROWS

    return min(numba_threads(), -(-outs // ROWS))


def _tile_blocks(dtype, config: EmulatorConfig) -> bool:
    """float32 convolutions run by tile blocks when the config asks for them (the default) and the
    microkernel compiled for this CPU."""
    if not config.tile_blocks or np.dtype(dtype) != np.float32:
        return False
    from . import _microkernel

    return _microkernel.AVAILABLE


def _whole_output(y: np.ndarray, oh: int, ow: int) -> np.ndarray:
    """The output without the padding to whole tiles, as a new contiguous array when cut (a small
    copy: convolutions whose output is not whole tiles are small; a contiguous result lets the
    fused batch_norm/add/relu after it run as one in-place pass)."""
    if y.shape[2:] == (oh, ow):
        return y
    return np.ascontiguousarray(y[:, :, :oh, :ow])


def _conv3x3_tile_blocks(x, w, pads, out_hw, edge: int) -> np.ndarray:
    """float32 F(edge x edge, 3x3) by tile blocks (_jit.winograd_tiles)."""
    from ._jit import winograd_tiles, winograd_tiles_blocks

    n = x.shape[0]
    o = w.shape[0]
    oh, ow = out_hw
    th, tw = -(-oh // edge), -(-ow // edge)
    y = np.empty((n, o, edge * th, edge * tw), np.float32)
    splits = _output_splits(o)
    run_blocks(-(-n * th * tw // BLOCK_TILES) * splits, winograd_tiles, winograd_tiles_blocks, np.ascontiguousarray(x),
               transformed_weights(w, np.float32, edge, panels=True), y, th, tw, edge, _F43_CONSTANTS, pads[0],
               pads[1], BLOCK_TILES, splits)
    return _whole_output(y, oh, ow)


#: the F(4x4, 3x3) transforms' multipliers 2, 4, 5, 8 in float32, so that numba does not widen to float64
_F43_CONSTANTS = np.array([2, 4, 5, 8], np.float32)


def _padded_input(x: np.ndarray, pads, tile: int, th: int, tw: int, dtype) -> np.ndarray:
    """Input padded on all sides, and on the bottom/right up to whole tiles."""
    n, c, h, wd = x.shape
    pt, pl = pads[0], pads[1]
    xp = np.zeros((n, c, tile * th + 2, tile * tw + 2), dtype)
    rows, cols = min(h, tile * th + 2 - pt), min(wd, tile * tw + 2 - pl)
    xp[:, :, pt:pt + rows, pl:pl + cols] = x[:, :, :rows, :cols]
    return xp


def _products(u: np.ndarray, v: np.ndarray, m: np.ndarray, chunked: bool = False) -> None:
    """m[p] = u[p] @ v[p] for every tile position p; ``chunked``: summed over CHANNEL_CHUNK channels
    at a time (_jit.winograd_chunked_products), one position per thread at a time."""
    if chunked:
        from ._jit import winograd_chunked_products, winograd_chunked_products_blocks

        run_blocks(u.shape[0], winograd_chunked_products, winograd_chunked_products_blocks, u, v, m, BLAS_CHANNEL_CHUNK)
        return
    if numba_threads() > 1:
        from . import _blas

        if _blas.usable(u, v, m):
            _blas.gemm_stack(u, v, m)
            return
    if splitting_products():
        for_blocks(u.shape[0], lambda s, e: np.matmul(u[s:e], v[s:e], out=m[s:e]))
    else:
        np.matmul(u, v, out=m)


def _conv3x3_f23(x, w, pads, out_hw, dtype, chunked=False):
    n, c = x.shape[:2]
    o = w.shape[0]
    oh, ow = out_hw
    th, tw = -(-oh // 2), -(-ow // 2)
    tiles = n * th * tw
    xp = _padded_input(x, pads, 2, th, tw, dtype)

    from ._jit import winograd_input, winograd_input_blocks, winograd_output, winograd_output_blocks

    # V[(a, b), c, (n, ty, tx)] = (B^T d B)[a, b] for the 4x4 input tile d at (2ty, 2tx).
    v = _offset_matrices(16, c, tiles, dtype)
    run_blocks(n * c, winograd_input, winograd_input_blocks, xp, v, th, tw, min_block=max(1, 4096 // tiles))
    m = _offset_matrices(16, o, tiles, dtype)
    _products(transformed_weights(w, dtype, 2), v, m, chunked)

    # Y = A^T M A with A^T = [[1, 1, 1, 0], [0, 1, -1, -1]].
    y = np.empty((n, o, 2 * th, 2 * tw), dtype)
    run_blocks(n * o, winograd_output, winograd_output_blocks, m, y, th, tw, min_block=max(1, 4096 // tiles))
    if (2 * th, 2 * tw) != (oh, ow):
        y = y[:, :, :oh, :ow]
    return y


def _conv3x3_f43(x, w, pads, out_hw, dtype, chunked=False):
    n, c = x.shape[:2]
    o = w.shape[0]
    oh, ow = out_hw
    th, tw = -(-oh // 4), -(-ow // 4)
    tiles = n * th * tw
    # the transforms' multipliers in the working dtype, so that numba does not widen to float64
    consts = np.array([2, 4, 5, 8], dtype)
    xp = _padded_input(x, pads, 4, th, tw, dtype)
    f43_input, f43_input_blocks, f43_output, f43_output_blocks = _f43_kernels()

    # V[(a, b), c, (n, ty, tx)] = (B^T d B)[a, b] for the 6x6 input tile d at (4ty, 4tx).
    v = _offset_matrices(36, c, tiles, dtype)
    run_blocks(n * c, f43_input, f43_input_blocks, xp, v, th, tw, consts, min_block=max(1, 2048 // tiles))
    m = _offset_matrices(36, o, tiles, dtype)
    _products(transformed_weights(w, dtype, 4), v, m, chunked)

    y = np.empty((n, o, 4 * th, 4 * tw), dtype)
    run_blocks(n * o, f43_output, f43_output_blocks, m, y, th, tw, consts, min_block=max(1, 2048 // tiles))
    if (4 * th, 4 * tw) != (oh, ow):
        y = y[:, :, :oh, :ow]
    return y


def _f43_kernels():
    """The F(4x4, 3x3) input and output transforms and their parallel drivers (in _jit.py, which
    imports numba; it is imported on first use)."""
    from ._jit import winograd43_input, winograd43_input_blocks, winograd43_output, winograd43_output_blocks

    return winograd43_input, winograd43_input_blocks, winograd43_output, winograd43_output_blocks
