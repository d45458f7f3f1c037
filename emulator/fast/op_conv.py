"""Fast nn.conv2d: direct sums on phase planes, Winograd, im2col, products split over threads, a depthwise vector kernel.

Dense float32 convolutions with a kernel larger than 1x1 sum each output's taps directly on the
input's padded phase planes (``DirectConv``: the microkernel's direct_taps kernels, no im2col matrix,
weights packed once per model), except the few-channel stems (``_conv_few_channels``) and the 3x3
layers where Winograd runs on BLAS products (large weights and many tiles: FCN's 512- and
2048-channel layers, ``winograd_preferred``). On a 2-vCPU AMD EPYC Zen 5 VM (2 threads, in-process A/B)
the direct route beat F(2x2, 3x3) Winograd by tile blocks 1.2-1.45x at 64 channels 56x56 and 64x64,
1.2x at 512 channels 7x7, 1.05-1.15x on the stride-2 3x3 layers (im2col + sgemm before), 1.4-1.6x on
5x5, and was within the noise at 128-256 channels 14x14-32x32; whole models: ResNet-18 0.83-0.94x the
time, ResNet-50 0.93-0.97x, the BEVDet image stage 0.95-0.96x, FCN-ResNet-50 unchanged. Each output
sums its taps in chunks of DIRECT_CHANNEL_CHUNK channels, then adds the chunk sums in order (as the
Winograd products do), so results do not depend on the thread count or the blocking; a conv tail
(bias/batch norm, residual, relu/clip) fused after it is applied to each output row as it is stored
(_prepared._direct_with_tail, _microkernel.store_rows).

Other dense 3x3 stride-1 convolutions (float64; the direct route off) use Winograd, down to 7x7 in float32
(_winograd.py: F(2x2, 3x3) in float32 unless TIDLX_EMULATOR_WINOGRAD=4 asks for F(4x4, 3x3)); dilated
ones too, as the Winograd convolution of their phase sub-grids. Other dense and grouped convolutions
are one BLAS matmul per group over an im2col matrix (gathered by a numba loop for one image); 1x1
stride-1 convolutions multiply the input directly, those of small maps (at most 28x28) with enough
channels on the pointwise tile kernel (``PointwiseConv``: output channels as the vector lanes,
weights packed once), the others by BLAS. Depthwise convolutions (one input channel per
group) run on the microkernel's depthwise vector kernel (float32, any stride) or in a numba loop. The
definition is reference/op_conv.py; products are summed in another order than the reference's
single sgemm (and Winograd transforms round differently), hence the stated tolerance.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..config import active_config
from ..reference._common import from_nchw, out_dtype
from ..reference.op_conv import ConvGeometry, conv_operands, finish, work_dtype
from ..registry import fast_kernel
from . import _winograd as winograd
from ._parallel import MIN_ELEMENTWISE_BLOCK, matmul as gemm, run_blocks

#: |fast - reference| / max |reference| the fast convolutions stay within, with any config: F(4x4, 3x3)
#: Winograd (on request) rounds its transforms (4e-6..9e-6 of the output's largest value per
#: ResNet-18 layer against a float64 sum); the default paths only sum the products in another order.
TOLERANCE = 3e-5


def _pad_nchw(x: np.ndarray, pt: int, pl: int, pb: int, pr: int, dtype: np.dtype) -> np.ndarray:
    n, c, h, w = x.shape
    if not (pt or pl or pb or pr):
        return x if x.dtype == dtype else x.astype(dtype)
    xp = np.zeros((n, c, h + pt + pb, w + pl + pr), dtype)
    xp[:, :, pt:pt + h, pl:pl + w] = x
    return xp


def _pad_nhwc(x: np.ndarray, pt: int, pl: int, pb: int, pr: int, dtype: np.dtype) -> np.ndarray:
    n, h, w, c = x.shape
    if not (pt or pl or pb or pr):
        return x if x.dtype == dtype else x.astype(dtype)
    xp = np.zeros((n, h + pt + pb, w + pl + pr, c), dtype)
    xp[:, pt:pt + h, pl:pl + w, :] = x
    return xp


def _im2col(xp: np.ndarray, kh: int, kw: int, strides, dilation, out_hw) -> np.ndarray:
    """The (n, c, kh, kw, oh, ow) im2col array of the padded input ``xp``, contiguous. For one
    image a numba gather in parallel blocks of (channel, kernel row) (a strided numpy copy runs on one thread at
    a fraction of memory speed: ~1 ms of the 224x224 stem's 3.5 ms); else a copy of a window view."""
    n, c = xp.shape[:2]
    (sh, sw), (dh, dw), (oh, ow) = strides, dilation, out_hw
    col = np.empty((n, c, kh, kw, oh, ow), xp.dtype)
    if n == 1 and xp.strides[-1] == xp.itemsize:
        from ._jit import im2col_chw, im2col_chw_blocks

        run_blocks(c * kh, im2col_chw, im2col_chw_blocks, xp[0], col[0], sh, sw, dh, dw,
                   min_block=max(1, MIN_ELEMENTWISE_BLOCK // (kw * oh * ow)))
        return col
    s_n, s_c, s_h, s_w = xp.strides
    col[...] = as_strided(xp, col.shape, (s_n, s_c, s_h * dh, s_w * dw, s_h * sh, s_w * sw), writeable=False)
    return col


def _conv_nchw(x, w, groups, strides, dilation, pads, out_hw, work):
    """x NCHW, w OIHW -> NCHW result in ``work`` dtype."""
    n, c, h, wd = x.shape
    o, i_per_group, kh, kw = w.shape
    sh, sw = strides
    pt, pl, pb, pr = pads
    oh, ow = out_hw
    if w.dtype != work:
        w = w.astype(work)
    if kh == 1 and kw == 1 and not any(pads):
        xs = x if (sh, sw) == (1, 1) else x[:, :, ::sh, ::sw][:, :, :oh, :ow]
        if xs.dtype != work:
            xs = xs.astype(work)
        col = xs.reshape(n, groups, i_per_group, oh * ow)
        wm = w.reshape(groups, o // groups, i_per_group)
    else:
        xp = _pad_nchw(x, pt, pl, pb, pr, work)
        col = _im2col(xp, kh, kw, strides, dilation, out_hw).reshape(n, groups, i_per_group * kh * kw, oh * ow)
        wm = w.reshape(groups, o // groups, i_per_group * kh * kw)
    if n == 1 and groups == 1 and kh == 1 and kw == 1 and POINTWISE_LANES and pointwise_usable(o, i_per_group, oh * ow,
                                                                                              work):
        res = pointwise_conv(w)(col[0, 0])
    elif n == 1 and groups == 1:
        res = gemm(wm[0], col[0, 0])
    elif wm[0].size * col.shape[-1] >= 2_000_000:  # big per-group products: one pooled GEMM each
        res = np.empty((n, groups, o // groups, oh * ow), np.result_type(wm, col))
        for b in range(n):
            for g in range(groups):
                gemm(wm[g], col[b, g], out=res[b, g])
    else:
        res = np.matmul(wm, col)
    return res.reshape(n, o, oh, ow)


def _conv_nhwc(x, w, strides, dilation, pads, out_hw, work):
    """x NHWC, w OIHW (groups=1) -> NHWC result: (pixels x KH*KW*C) @ (KH*KW*C x O)."""
    n, h, wd, c = x.shape
    o, _, kh, kw = w.shape
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = pads
    oh, ow = out_hw
    w_hwio = w.transpose(2, 3, 1, 0).reshape(kh * kw * c, o)
    if w_hwio.dtype != work:
        w_hwio = w_hwio.astype(work)
    xp = _pad_nhwc(x, pt, pl, pb, pr, work)
    s_n, s_h, s_w, s_c = xp.strides
    view = as_strided(xp, (n, oh, ow, kh, kw, c), (s_n, s_h * sh, s_w * sw, s_h * dh, s_w * dw, s_c),
                      writeable=False)
    col = view.reshape(n * oh * ow, kh * kw * c)
    return gemm(col, w_hwio).reshape(n, oh, ow, o)


#: Whether float32 depthwise convolutions run on the vector kernel (benchmarks/ab_depthwise.py turns it
#: off for A/B against the plain loop).
DEPTHWISE_VECTOR_KERNEL = True
#: Multiply-adds per block of the vector route's planes (a block under this runs whole on one thread)
DEPTHWISE_VECTOR_BLOCK_MACS = 800_000
#: Stride-1 planes of at most this many outputs take the flat kernel (_jit.depthwise_conv_flat: whole
#: vectors over the flattened plane), larger ones the row kernel (0: none, for A/B). One thread, ns a
#: plane (benchmarks/ab_depthwise.py --flat): 3x3 7x7 72 -> 44, 5x5 7x7 105 -> 77, 3x3 14x14 137 -> 111,
#: 5x5 14x14 231 -> 192; 3x3 28x28 about equal (324 / 333, 341 / 321), 56x56 2x slower (the copies).
DEPTHWISE_FLAT_POSITIONS = 400


def _conv_depthwise(x, w, strides, dilation, pads, out_hw, work):
    """One input channel per group: float32 on the microkernel's vector kernel
    (_jit.depthwise_conv_planes), else the plain numba loop; the same bits."""
    from . import _jit, _microkernel

    n, c, h, wd = x.shape
    o = w.shape[0]
    x = np.ascontiguousarray(x, dtype=work)
    w = np.ascontiguousarray(w, dtype=work)
    out = np.empty((n, o, out_hw[0], out_hw[1]), work)
    if DEPTHWISE_VECTOR_KERNEL and work == np.float32 and _microkernel.AVAILABLE:
        serial, parallel, per_block = (_jit.depthwise_conv_planes, _jit.depthwise_conv_planes_blocks,
                                       DEPTHWISE_VECTOR_BLOCK_MACS)
    else:
        serial, parallel, per_block = _jit.depthwise_conv_nchw, _jit.depthwise_conv_nchw_blocks, 200_000
    per_plane = out_hw[0] * out_hw[1] * w.shape[2] * w.shape[3]
    flat = (DEPTHWISE_FLAT_POSITIONS, _microkernel.LANES) if serial is _jit.depthwise_conv_planes else ()
    run_blocks(n * o, serial, parallel, x, w, out, strides[0], strides[1], dilation[0], dilation[1], pads[0],
               pads[1], o // c, *flat, min_block=max(1, per_block // max(per_plane, 1)))
    return out


#: The direct route (``_conv_few_channels``) takes dense float32 convolutions with a kernel larger than
#: 1x1 and at most FEW_CHANNELS input channels or FEW_CHANNEL_TAPS taps per output (channels x kernel
#: height x kernel width). Measured against im2col + sgemm (benchmarks/ab_conv_routes.py, 1 and 2
#: threads): the 3x3 stride-2 stems from 3 channels 1.3-2.6x faster, ResNet's 7x7 stem (147 taps)
#: 1.4x, 3 -> 64 channels 11x11 stride 4 1.4x, 8 channels 3x3 stride 2 (72 taps) 1.05-1.09x, but 32
#: channels 3x3 stride 2 (288 taps) 0.9x.
FEW_CHANNELS = 8
FEW_CHANNEL_TAPS = 64
#: Whether that route is on (benchmarks/ab_conv_routes.py turns it off for A/B).
DIRECT_FEW_CHANNELS = True
#: Output rows per unit of work of the direct route: fixed, so the blocks do not depend on the threads.
FEW_CHANNEL_BLOCK_ROWS = 8


def _few_channels_usable(x4, w4, groups, work) -> bool:
    o, i_per_group, kh, kw = w4.shape
    if not DIRECT_FEW_CHANNELS or groups != 1 or work != np.float32 or kh * kw == 1 \
            or (i_per_group > FEW_CHANNELS and i_per_group * kh * kw > FEW_CHANNEL_TAPS):
        return False
    from . import _microkernel

    return _microkernel.AVAILABLE


def tap_panels(w: np.ndarray) -> np.ndarray:
    """OIHW weights as the direct route's panels of R = _microkernel.ROWS output channels:
    (ceil(O/R), C*KH*KW, R) float32, taps in (c, kh, kw) order; missing rows are zero (~5 us for a
    stem: not worth a cache)."""
    from ._microkernel import ROWS

    o = w.shape[0]
    taps = w[0].size
    panels = -(-o // ROWS)
    packed = np.zeros((panels * ROWS, taps), np.float32)
    packed[:o] = w.reshape(o, taps)
    return np.ascontiguousarray(packed.reshape(panels, ROWS, taps).transpose(0, 2, 1))


def tail_arguments(y: np.ndarray, tail: Optional[tuple]) -> tuple:
    """The numba convolutions' tail arguments (scale, shift, residual, has_tail, has_affine, has_add, relu,
    clamp, lo, hi, act, act_consts) for a conv tail (_prepared._tail_operands' order: scale, shift,
    residual or None, then the flags) or none: the residual defaults to ``y`` itself, never read; the
    kernels' stores read it as C-contiguous (_microkernel.store_rows), the callers' residuals are."""
    from ._jit import ACT_NONE

    if tail is None:
        none = np.zeros(1, np.float32)
        return none, none, y, False, False, False, False, False, np.float32(0), np.float32(0), ACT_NONE, none
    return (tail[0], tail[1], y if tail[2] is None else np.ascontiguousarray(tail[2]), True) + tuple(tail[3:])


def _conv_few_channels(x, w, strides, dilation, pads, out_hw, packed=None, tail=None):
    """Dense float32 convolution summing each output's C x KH x KW taps directly (_jit.conv_few_channels
    on _microkernel.panel_taps): no padded copy of the input and no im2col matrix, which cost
    more than the products when C x KH x KW is small (the 3-channel stems). ``packed``: tap_panels(w)
    made once by the caller; ``tail``: a conv tail applied to each output row as it is finished
    (DirectConv's tail tuple)."""
    from ._jit import conv_few_channels, conv_few_channels_blocks

    n = x.shape[0]
    o, c, kh, kw = w.shape
    packed = tap_panels(w) if packed is None else packed
    y = np.empty((n, o, out_hw[0], out_hw[1]), np.float32)
    rows = FEW_CHANNEL_BLOCK_ROWS
    units = n * -(-out_hw[0] // rows)
    per_unit = rows * out_hw[1] * packed.size
    run_blocks(units, conv_few_channels, conv_few_channels_blocks, np.ascontiguousarray(x, np.float32), packed, y,
               kh, kw, strides[0], strides[1], dilation[0], dilation[1], pads[0], pads[1], rows, *tail_arguments(y, tail),
               min_block=max(1, 4_000_000 // per_unit))
    return y


#: Whether dense convolutions may run on the direct route (``_conv_direct``; benchmarks/ab_conv_routes.py
#: turns it off for A/B against Winograd and im2col + sgemm).
DIRECT = True
#: Channels per partial sum of the direct route: each output sums all taps of this many input channels
#: in one ordered chain, then adds the chunk sums in order (as Winograd's products do, _jit.CHANNEL_CHUNK).
#: Error of the BEVDet image stage against float64 / onnxruntime's (benchmarks/model_set.py, three feeds,
#: OpenBLAS's own kernels): 32 channels (288-term chains) 1.76x / 1.27x / 1.80x, 16 channels 1.35x /
#: 1.19x / 1.31x, 8 1.48x / 1.17x / 1.39x; Winograd F(2x2, 3x3) by tile blocks 1.28x / 1.26x / 1.43x.
#: 16 costs ~3-9% of the convolution's time against 32 (more kernel calls storing and re-adding sums).
DIRECT_CHANNEL_CHUNK = 16
#: Floats of phase planes a chunk of positions reads (all channels): a chunk's input stays in L2.
DIRECT_CHUNK_FLOATS = 1 << 18
#: A wider kernel call may compute this many times the positions of the narrowest waste
DIRECT_WASTE = 1.05
#: Kernel calls per strip of positions (_jit.conv_direct): each chunk of taps runs over the strip's calls
DIRECT_STRIP_CALLS = 4
#: Split the work of a convolution whose padded input holds at least DIRECT_SPATIAL_INPUT_SHARE times
#: its weights' floats between threads by position chunks (bands of output rows) rather than by panels
#: of output channels, its phase planes filled by bands too (_jit.fill_phase_planes): on a 2-vCPU
#: Intel Xeon VM (AVX-512; private 2 MB L2s on a mesh), a core reading the half of an input that the
#: other core wrote lost ~0.17 ms of each of ResNet-18's 0.8 ms 64-channel 56x56 layers; 128 channels
#: at 28x28 (input 0.8x the weights) gained a little, 256 at 14x14 (0.1x) lost. Whole models, in-process
#: A/B (benchmarks/ab_conv_routes.py --routes spatial): ResNet-18 1.03-1.05x, ResNet-50 1.02-1.03x, FCN
#: 1.02x, BEVDet 1.01x. Any split gives the same bits.
DIRECT_SPATIAL = True
DIRECT_SPATIAL_INPUT_SHARE = 0.5


def direct_static(x_shape, w4, groups, work) -> bool:
    """What the direct route needs of a call's static facts: a dense float32 convolution with a kernel
    larger than 1x1, not one the few-channel route takes (the stems), and the microkernel."""
    kh, kw = w4.shape[2:]
    if not DIRECT or groups != 1 or work != np.float32 or kh * kw == 1 or w4.dtype != np.float32:
        return False
    from . import _microkernel

    return _microkernel.AVAILABLE and not _few_channels_usable(None, w4, groups, work)


def winograd_preferred(x_shape, w_shape, strides, dilation, out_hw, config) -> bool:
    """Whether a 3x3 convolution stays on Winograd rather than the direct route: where Winograd runs
    on BLAS products (large weights and many tiles: FCN's 512- and 2048-channel layers, where it is
    faster than the direct sums)."""
    f32 = np.dtype(np.float32)
    return winograd.usable(x_shape, w_shape, 1, strides, dilation, f32, config, out_hw) \
        and winograd.runs_on_blas(x_shape, w_shape, dilation, out_hw, f32, config)


def direct_geometry(x_shape, w_shape, strides, dilation, out_hw):
    """(rows, grid_w, offsets) of the direct route's phase planes: each of the sh x sw phases of a
    channel's padded input is a plane of rows x grid_w floats, and tap t = (c, i, j) of output position
    p = oy * grid_w + ox is the float at p + offsets[t] of the image's planes."""
    c = x_shape[1]
    kh, kw = w_shape[2:]
    (sh, sw), (dh, dw), (oh, ow) = strides, dilation, out_hw
    rows = -(-((oh - 1) * sh + (kh - 1) * dh + 1) // sh)
    grid_w = -(-((ow - 1) * sw + (kw - 1) * dw + 1) // sw)
    i = np.arange(kh)[:, None] * dh
    j = np.arange(kw)[None, :] * dw
    within = ((i % sh) * sw + j % sw) * rows * grid_w + (i // sh) * grid_w + j // sw
    offsets = (np.arange(c)[:, None, None] * (sh * sw * rows * grid_w) + within[None]).reshape(-1)
    return rows, grid_w, np.ascontiguousarray(offsets, np.int64)


def _direct_vectors(positions: int, lanes: int) -> int:
    """Vectors per kernel call (1.._microkernel.DIRECT_VECTORS): the widest (more accumulators, fewer
    calls) unless it computes over DIRECT_WASTE more positions past the last one than the best
    width does (a 7x7 output is 61 positions: 2 calls of 2 vectors of 16, not 2 of 3)."""
    from ._microkernel import DIRECT_VECTORS

    def computed(v):
        return -(-positions // (v * lanes)) * v * lanes

    fewest = min(computed(v) for v in range(1, DIRECT_VECTORS + 1))
    return max(v for v in range(1, DIRECT_VECTORS + 1) if computed(v) <= fewest * DIRECT_WASTE)


class DirectConv:
    """A convolution on the direct route planned once for its input shape and (constant) weights:
    ``conv(x)`` -> the NCHW float32 result; ``conv(x, tail)`` also applies a conv tail to each output
    row as it is stored (tail = (scale, shift, residual or None, has_affine, has_add, relu, clamp, lo,
    hi, act, act_consts), _prepared._tail_operands' order; the bits of the tail's own pass after the
    convolution, then of the activation step it absorbed, if any).

    Each output sums its taps (c, i, j) on the input's phase planes (_jit.conv_direct on
    _microkernel's direct_taps kernels): the input is padded once (split into sh x sw phases for
    strides), the weights are packed in panels of output channels once, and no im2col matrix is
    built. A kernel call keeps ROWS output channels x up to 48 positions in registers over
    DIRECT_CHANNEL_CHUNK channels' taps. Holds no reference to the weights array itself (it is
    cached per weights array, _weights.derived)."""

    def __init__(self, x_shape, w: np.ndarray, strides, dilation, pads, out_hw):
        from . import _microkernel

        n, c = x_shape[:2]
        o, _, kh, kw = w.shape
        self.strides, self.pads = tuple(strides), tuple(pads)
        self.out_shape = (n, o) + tuple(out_hw)
        self.rows, self.grid_w, self.offsets = direct_geometry(x_shape, w.shape, strides, dilation, out_hw)
        self.lanes = _microkernel.LANES
        positions = (out_hw[0] - 1) * self.grid_w + out_hw[1]
        self.vectors = _direct_vectors(positions, self.lanes)
        columns = self.vectors * self.lanes
        sh, sw = strides
        plane = self.rows * self.grid_w
        self.planes = c * sh * sw * plane
        self.slack = columns + self.grid_w  # read by positions past the last output row's end, never stored
        self.fill_block = max(1, MIN_ELEMENTWISE_BLOCK // (8 * sh * sw * plane))
        self.packed = tap_panels(w)
        # both splits planned (the A/B switch DIRECT_SPATIAL is read at call time)
        self.splits = {spatial: self._split(spatial, n, c * sh * sw, positions, columns) for spatial in (False, True)}
        self.chunk_taps = DIRECT_CHANNEL_CHUNK * kh * kw
        per_unit = min(self.splits[False][1], positions) * self.packed.shape[1] * self.packed.shape[2]
        self.min_block = max(1, 400_000 // per_unit)

    def _split(self, spatial: bool, n: int, phase_channels: int, positions: int, columns: int) -> tuple:
        """(bands, positions per chunk, units) of the work: near-equal chunks of whole kernel calls, at
        most DIRECT_CHUNK_FLOATS of input each; ``spatial`` (where the input outweighs the weights): a
        multiple of the threads' count of chunks, and the phase planes filled in as many bands, so that
        each thread takes whole chunks (horizontal bands of all output channels) rather than panels of
        output channels over the whole input: it then reads the rows that it filled, and that the
        previous layer's thread on its core wrote, from its own cache (DIRECT_SPATIAL)."""
        chunks = -(-positions // max(columns, DIRECT_CHUNK_FLOATS // phase_channels))
        bands = 1
        if spatial and self.planes >= DIRECT_SPATIAL_INPUT_SHARE * self.packed.size:
            from ._parallel import _thread_count

            parts = min(_thread_count(), positions // columns)
            if parts > 1:
                chunks, bands = -(-chunks // parts) * parts, parts
        # near-equal chunks (threads take equal numbers of units: a short last chunk idled one)
        per_chunk = -(-positions // (chunks * columns)) * columns
        chunks = -(-positions // per_chunk)  # whole calls per chunk may leave fewer chunks than asked
        return bands, per_chunk, n * chunks * self.packed.shape[0]

    def __call__(self, x: np.ndarray, tail: Optional[tuple] = None) -> np.ndarray:
        from . import _jit

        n = x.shape[0]
        sh, sw = self.strides
        xp = np.empty((n, self.planes + self.slack), np.float32)
        xp[:, self.planes:] = 0
        x = np.ascontiguousarray(x, np.float32)
        bands, per_chunk, units = self.splits[DIRECT_SPATIAL]
        run_blocks(bands * n * x.shape[1], _jit.fill_phase_planes, _jit.fill_phase_planes_blocks, x, xp, sh, sw,
                   self.pads[0], self.pads[1], self.rows, self.grid_w, bands, min_block=self.fill_block)
        y = np.empty(self.out_shape, np.float32)
        run_blocks(units, _jit.conv_direct, _jit.conv_direct_blocks, xp, self.packed, self.offsets, y,
                   self.grid_w, self.lanes, self.vectors, DIRECT_STRIP_CALLS, per_chunk, self.chunk_taps,
                   *tail_arguments(y, tail), min_block=self.min_block)
        return y


def _conv_direct(x, w, strides, dilation, pads, out_hw):
    """The direct route (DirectConv), planned once per weights array and input shape."""
    from ._weights import derived

    plan = derived(w, ("direct", x.shape, tuple(strides), tuple(dilation), tuple(pads), tuple(out_hw)),
                   lambda: DirectConv(x.shape, w, strides, dilation, pads, out_hw))
    return plan(x)


#: Whether float32 1x1 convolutions of small maps may run on the pointwise tile kernel (PointwiseConv;
#: benchmarks/ab_conv_routes.py --routes pointwise turns it off for A/B against OpenBLAS's sgemm).
POINTWISE_LANES = True
#: ... those of at most this many positions (28x28), this many input and output channels or more and
#: multiply-adds, and at most this share of padded output channels (lanes computed for nothing):
#: the shapes where PointwiseConv measured faster than the sgemm (see its doc).
POINTWISE_MAX_POSITIONS = 784
POINTWISE_MIN_CHANNELS = 96
POINTWISE_MIN_OUTPUTS = 64
POINTWISE_MIN_MACS = 3_000_000
POINTWISE_MAX_LANE_WASTE = 1.15
#: Input channels per ordered FMA chain of the pointwise kernel; the chain sums are added in order.
#: Against float64, 1x1 layers of 7x7 and 14x14 maps: chunks of 64 1.2-2.6x closer than OpenBLAS's
#: sgemm, of 256 about as close, at the same speed.
POINTWISE_CHUNK = 64


def pointwise_usable(o: int, c: int, positions: int, dtype) -> bool:
    """Whether a 1x1 convolution of one image (o x c weights, ``positions`` output positions) runs on
    PointwiseConv (with POINTWISE_LANES, read at call time): float32 on AVX-512 (16-float vectors of
    output channels), a small map, enough input channels, and few padded output channels."""
    if np.dtype(dtype) != np.float32 or positions > POINTWISE_MAX_POSITIONS or c < POINTWISE_MIN_CHANNELS \
            or o < POINTWISE_MIN_OUTPUTS or o * c * positions < POINTWISE_MIN_MACS:
        return False
    from . import _microkernel

    lanes = _microkernel.LANES
    return lanes == 16 and -(-o // lanes) * lanes <= POINTWISE_MAX_LANE_WASTE * o and _microkernel.pointwise_available()


class PointwiseConv:
    """A float32 1x1 convolution of one image planned once for its (constant) weights: ``conv(x)`` for
    the (C, positions) input matrix -> the (O, positions) result; ``conv(x, tail)`` also applies a conv
    tail to each output row as it is stored (DirectConv's tail tuple, the residual as (O, positions)).

    The output channels are the vector lanes (_jit.pointwise_lanes on _microkernel.pointwise_tile):
    each input float is broadcast and multiplied by a vector of 16 output channels' weights, so a map
    of 7x7 or 14x14 positions wastes no lanes (vectors of positions compute 64 for 49, 208 for 196),
    and the weights are packed once, where OpenBLAS packs both operands at every call. Each output
    sums POINTWISE_CHUNK channels per ordered FMA chain, the chain sums added in order: the same bits
    for any thread count. Threads take blocks of up to 3 vectors of channels, the channels first cut
    in one near-equal share per CPU. On a 2-vCPU Intel Xeon VM (AVX-512), against OpenBLAS's
    sgemm on the same products (in-process, alternating; 1 thread / 2 threads): 960->160 at 7x7
    1.47x / 1.44x, 2048->512 at 7x7 1.42x / 1.30x, 576->96 at 14x14 1.30x / 1.23x, 96->576 at 14x14
    1.22x / 1.12x, 1024->256 at 14x14 1.21x / 1.18x, 512->128 at 28x28 1.10x / 1.11x; 64->384 at 14x14
    1.01x / 0.97x, 144->48 at 14x14 0.89x / 0.67x, 192->32 at 28x28 1.15x / 0.91x, 64->256 at 56x56
    0.93x / 0.88x (hence pointwise_usable's limits). In whole runs the layers' inputs arrive cold
    (written by the layer before, partly on the other core) and the gain shrinks: MobileNetV2,
    MobileNetV3-small, EfficientNet-B0 and ResNet-50 1.02-1.03x, ShuffleNetV2 1.00x. Holds no
    reference to the weights array itself.
    """

    def __init__(self, w: np.ndarray):
        from . import _microkernel
        from ._parallel import _thread_count

        if not _microkernel.pointwise_available():
            raise RuntimeError("PointwiseConv needs the pointwise tile kernel (AVX-512, llvmlite): check pointwise_usable")
        o, c = w.shape
        self.lanes = lanes = _microkernel.LANES
        vectors = -(-o // lanes)
        parts = max(1, min(_thread_count(), vectors))
        firsts, widths = [], []
        first = 0
        for part in range(parts):
            share = vectors // parts + (part < vectors % parts)
            while share > 0:
                width = min(_microkernel.POINTWISE_VECTORS, share)
                firsts.append(first)
                widths.append(width)
                first, share = first + width, share - width
        self.firsts, self.widths = np.array(firsts, np.int64), np.array(widths, np.int64)
        padded = np.zeros((vectors * lanes, c), np.float32)
        padded[:o] = w
        # each unit's block of channels as its (C, width * lanes) rows, the blocks one after the other
        self.packed = np.concatenate([padded[f * lanes:(f + n) * lanes].T.ravel() for f, n in zip(firsts, widths)])
        self.shape = (o, c)
        self.unit_macs = min(widths) * lanes * c  # a unit's multiply-adds per position

    def __call__(self, x: np.ndarray, tail: Optional[tuple] = None) -> np.ndarray:
        from . import _jit

        x = np.ascontiguousarray(x, np.float32)
        y = np.empty((self.shape[0], x.shape[1]), np.float32)
        run_blocks(len(self.firsts), _jit.pointwise_lanes, _jit.pointwise_lanes_blocks, x, self.packed, self.firsts,
                   self.widths, y, self.lanes, POINTWISE_CHUNK, *tail_arguments(y, tail),
                   min_block=max(1, 400_000 // (self.unit_macs * x.shape[1])))
        return y


def pointwise_conv(w: np.ndarray) -> PointwiseConv:
    """PointwiseConv of the (O, C, 1, 1) weights, planned once per weights array."""
    from ._weights import derived

    return derived(w, ("pointwise",), lambda: PointwiseConv(w.reshape(w.shape[0], w.shape[1])))


_geometry_cache: dict = {}
_geometry_cache: dict = {}


def _geometry(x4, w4, attrs) -> ConvGeometry:
    """ConvGeometry of a call, cached by its attributes object and operand shapes (~10 us of
    attribute parsing per call; a plan runs the same attrs on the same shapes every time). The
    entry holds the attrs, so its id is not reused while the entry lives; at most 4096 entries."""
    key = (id(attrs), x4.shape, w4.shape)
    hit = _geometry_cache.get(key)
    if hit is not None and hit[0] is attrs:
        return hit[1]
    geo = ConvGeometry(x4, w4, attrs)
    if len(_geometry_cache) >= 4096:
        _geometry_cache.clear()
    _geometry_cache[key] = (attrs, geo)
    return geo


@fast_kernel("nn.conv2d", fresh_result=True, tolerance=TOLERANCE)
def conv2d(args, attrs, out_type):
    x, w = args
    x4, w4, out_layout = conv_operands(args, attrs)
    geo = _geometry(x4, w4, attrs)
    dtype = out_dtype(out_type)
    work = work_dtype(x, w, dtype)
    strides, dilation, pads, out_hw, groups = geo.strides, geo.dilation, geo.pads, geo.out_hw, geo.groups
    config = active_config()
    if groups > 1 and w4.shape[1] == 1:
        res = _conv_depthwise(x4, w4, strides, dilation, pads, out_hw, work)
    elif _few_channels_usable(x4, w4, groups, work) and x.dtype == work and w.dtype == work:
        res = _conv_few_channels(x4, w4, strides, dilation, pads, out_hw)
    elif direct_static(x4.shape, w4, groups, work) and x.dtype == work \
            and not winograd_preferred(x4.shape, w4.shape, strides, dilation, out_hw, config):
        res = _conv_direct(x4, w4, strides, dilation, pads, out_hw)
    elif winograd.usable(x4.shape, w4.shape, groups, strides, dilation, work, config, out_hw) \
            and x.dtype == work and w.dtype == work:
        res = winograd.conv3x3(x4, w4, pads, out_hw, work, config=config, dilation=dilation)
    elif attrs.data_layout == "NHWC" and groups == 1:
        res = _conv_nhwc(x, w4, strides, dilation, pads, out_hw, work)
        return finish(res if out_layout == "NHWC" else res.transpose(0, 3, 1, 2), dtype)
    else:
        res = _conv_nchw(x4, w4, groups, strides, dilation, pads, out_hw, work)
    return finish(from_nchw(res, out_layout), dtype)
