"""Fast fixed-point kernels with the bits of the plain ones (layers.py): Conv and InnerProduct, and
the two-input element-wise sum, max pool and standalone saturation (ReLU), which on ResNet-18 took a
third of the time left once the convolutions were fast (numpy's int64 passes), and the two-input
element-wise product with broadcast inputs (BEVDet's depth x context product: most of its fixed-point pass).

    table = {**KERNELS, **FAST_OVERRIDES}        # what kernel_set.py builds for fixed="fast"
    table = {**KERNELS, **fast_overrides(vnni=False)}   # the same without the VNNI microkernel

Each fast kernel takes a layer when it can compute it exactly, and hands every other layer (odd
shapes, parameters the rules refuse, anything not checked here) to the plain kernel of its type,
which computes it or raises the rule's error: same bits, same errors.

Paths, all exact (docs/numerics.md §7-§8.3):

* **8-bit input, 8-bit weights, >= 3 channels per group: AVX-512 VNNI** (_vnni.py). ``vpdpbusd``
  multiplies unsigned by signed bytes, so a signed input is shifted by +128 (``x ^ 0x80``, padding
  becomes 128) and ``128 x sum(w[o])`` is subtracted once per output channel, folded into the bias
  (computed once per layer). Its non-saturating int32 sum wraps modulo 2^32 as §7.2's accumulator
  does, and the wrap commutes with the compensation. The input is laid out once per layer call as
  groups of 4 channels x stride phases x padded rows, so each (channel group, tap) step of a block of
  output pixels is one fixed byte offset; output columns past the width are computed and dropped.
* **8-bit without VNNI, or depthwise/few channels per group: direct numba loops**, int32
  accumulators stored into int32 (the wrap of §7.2), tap by tap.
* **16-bit input or weights: float64 products** (im2col + BLAS). Every product is below 2^31 and a
  sum of K < 2^22 of them below 2^53, so float64 holds every partial sum exactly in any order; the
  exact sum is then wrapped to the accumulator width (int32 for 8-bit weights, int64 for 16-bit)
  and requantized (§7.1 or §7.4).

Integer sums are exact (or exact modulo 2^32), so the bits do not depend on the thread count or
the blocking; work is split over output channel panels / planes / rows on the emulator's thread
pool (see _run_blocks).
"""

from __future__ import annotations

import dataclasses

import weakref
from typing import Dict, Optional

import numpy as np

from . import _vnni
from . import arith
from .layers import KERNELS

_TYPE_BOUNDS = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127),
                np.dtype(np.uint16): (0, 65535), np.dtype(np.int16): (-32768, 32767)}
_EXACT_FLOAT64_TERMS = 1 << 22    # products < 2^31, so K of them sum below 2^53
_MIN_BLOCK_MACS = 1 << 20         # work per parallel block worth a hand-off

_prepared: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _loops():
    from . import _loops as loops   # numba: imported on first use
    return loops


def _run_blocks(count, serial, *args, min_block=1):
    """``serial(*args, start, stop)`` over ``range(count)`` in blocks on the emulator's thread pool
    (emulator/fast/_parallel.for_blocks: capped by the run's ``threads``, dynamic hand-out of blocks).
    Not numba parallel regions: those split work statically, and with other processes on the cores
    a region waits for its descheduled thread (ResNet-18 8 bit, 2 threads, load average ~10 on 2
    CPUs, one process, alternating: 1112 ms a run with regions against 68 ms on the pool, and 50 ms
    on 1 thread)."""
    from ..fast._parallel import for_blocks
    for_blocks(count, lambda start, stop: serial(*args, start, stop), min_block=min_block)


def _cache(layer) -> dict:
    entry = _prepared.get(layer)
    if entry is None:
        entry = _prepared[layer] = {}
    return entry


def _reference(layer, xs, tensors):
    return KERNELS[layer.type](layer, xs, tensors)


def _pair(v):
    t = (int(v), int(v)) if np.isscalar(v) else tuple(int(e) for e in v)
    return t if len(t) == 2 else None


def _pads4(p):
    t = (int(p),) * 4 if np.isscalar(p) else tuple(int(e) for e in p)
    if len(t) == 2:
        t = t + t
    return t if len(t) == 4 and min(t) >= 0 else None


def _output_plan(layer, tensors, channels: int, weight_bits: int):
    """(out dtype, lo, hi, roundBits per channel int64, bias per channel int64 in the accumulator
    width, accumulator bits) or None when anything is not what the rules take (the plain kernel
    then reports it)."""
    out_tensor = tensors[layer.outputs[0]]
    if out_tensor.is_float:
        return None
    out_dtype = out_tensor.fixed_type.dtype
    tlo, thi = _TYPE_BOUNDS[out_dtype]
    lo, hi = (tlo, thi) if layer.bounds is None else (int(layer.bounds[0]), int(layer.bounds[1]))
    if not tlo <= lo <= hi <= thi:
        return None
    rb = np.asarray(layer.round_bits)
    if rb.dtype.kind not in "iu" or rb.ndim > 1 or (rb.ndim == 1 and rb.size != channels):
        return None
    rb = np.ascontiguousarray(np.broadcast_to(rb.astype(np.int64), (channels,)))
    if rb.size and (rb.min() < 0 or rb.max() > 62):
        return None
    if layer.bias_a is None or layer.bias_b is None:
        return None
    ba, bb = np.asarray(layer.bias_a), np.asarray(layer.bias_b)
    if ba.dtype.kind not in "iu" or bb.dtype.kind not in "iu":
        return None
    acc_bits = arith.accumulator_bits(weight_bits)
    bias = arith.bias_multiply(ba, bb, acc_bits)
    if bias.ndim > 1 or (bias.ndim == 1 and bias.size != channels):
        return None
    bias = np.ascontiguousarray(np.broadcast_to(bias, (channels,)).astype(np.int64))
    return out_dtype, lo, hi, rb, bias, acc_bits


def _requant_flags(weight_bits: int, out_dtype, acc_bits: int):
    """(wrap32, two_step, lo16, hi16) of the requantization (§7.2 wrap, §7.4)."""
    signed = out_dtype.kind == "i"
    lo16, hi16 = (-32768, 32767) if signed else (0, 65535)
    return acc_bits == 32, weight_bits == 16 and out_dtype.itemsize == 1, lo16, hi16


# ---- convolution ----------------------------------------------------------------------------

def _conv_geometry(layer, x, w):
    """Checked geometry or None."""
    a = layer.attrs
    try:
        strides, dilations, pads = _pair(a["strides"]), _pair(a["dilations"]), _pads4(a["pads"])
        groups = int(a["groups"])
    except (KeyError, TypeError, ValueError):
        return None
    if strides is None or dilations is None or pads is None or min(strides + dilations) < 1:
        return None
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    if groups < 1 or c % groups or o % groups or cg != c // groups:
        return None
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = strides, dilations, pads
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        return None
    return groups, (sh, sw), (dh, dw), (pt, pl, pb, pr), (oh, ow)


def _vnni_weights(layer, w, groups: int, signed_input: bool, bias: np.ndarray):
    """Per layer and input signedness: the weight panels and the int32 bias minus the +128
    compensation (docs: ``base[o] = wrap32(bias[o] - 128 sum w[o])`` for a signed input)."""
    cache = _cache(layer)
    key = ("vnni", signed_input)
    if key not in cache:
        o, cg, kh, kw = w.shape
        c4 = -(-cg // 4)
        wpad = np.zeros((o, c4 * 4, kh, kw), np.int8)
        wpad[:, :cg] = w
        words = np.ascontiguousarray(wpad.reshape(o, c4, 4, kh, kw).transpose(0, 1, 3, 4, 2)).view(np.int32)
        panels = _vnni.pack_weight_panels(words.reshape(groups, o // groups, c4 * kh * kw))
        comp = 128 * w.reshape(o, -1).astype(np.int64).sum(axis=1) if signed_input else 0
        base = arith.wrap_accumulator(bias - comp, 32).astype(np.int32)
        cache[key] = (panels, _vnni.pack_panel_rows(base.reshape(groups, o // groups)), c4)
    return cache[key]


_scratch_buffers: Dict[tuple, np.ndarray] = {}


def _scratch(width: int) -> np.ndarray:
    """A (ROWS, width) int32 scratch for the VNNI tiles, kept per thread and width (the tiles write
    every value that is read back)."""
    import threading
    key = (threading.get_ident(), width)
    buf = _scratch_buffers.get(key)
    if buf is None:
        if len(_scratch_buffers) > 64:
            _scratch_buffers.clear()
        buf = _scratch_buffers[key] = np.empty((_vnni.ROWS, width), np.int32)
    return buf


def _serial_tiles(xb, panels, offsets, base, rb, out, width, groups, image_bytes, ws, lo, hi, start, stop):
    """One block of the VNNI tiles, on this thread's scratch."""
    _loops().conv_vnni(xb, panels, offsets, base, rb, out, _scratch(width), groups, image_bytes, ws, lo, hi,
                       start, stop)


def _conv_vnni(layer, x, w, geometry, plan):
    loops = _loops()
    groups, (sh, sw), (dh, dw), (pt, pl, pb, pr), (oh, ow) = geometry
    out_dtype, lo, hi, rb, bias, _ = plan
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    signed = x.dtype == np.int8
    panels, base, c4 = _vnni_weights(layer, w, groups, signed, bias)
    hs, ws = -(-(h + pt + pb) // sh), -(-(wd + pl + pr) // sw)
    phases, plane = sh * sw, hs * ws
    image_bytes = c4 * phases * plane * 4
    words = n * groups * image_bytes // 4
    xb = np.empty(words + _vnni.PIXELS + ws + 16, np.uint32)
    xb[words:] = 0
    shift = 128 if signed else 0
    _run_blocks(n * groups * c4, loops.pack_vnni_input, x.view(np.uint8), xb, groups,
                cg, c4, sh, sw, pt, pl, hs, ws, shift, min_block=max(1, (1 << 14) // max(1, plane * phases)))
    q4, ii, jj = np.meshgrid(np.arange(c4), np.arange(kh), np.arange(kw), indexing="ij")
    phase = ((ii * dh) % sh) * sw + (jj * dw) % sw
    offsets = ((q4 * phases + phase) * plane + ((ii * dh) // sh) * ws + (jj * dw) // sw) * 4
    offsets = np.ascontiguousarray(offsets.reshape(-1).astype(np.int64))
    out = np.empty((n, o, oh, ow), out_dtype)
    blocks = -(-(oh * ws) // _vnni.PIXELS)
    count = n * groups * panels.shape[1]
    item_macs = panels.shape[2] * _vnni.ROWS * _vnni.PIXELS * 4 * blocks
    _run_blocks(count, _serial_tiles, xb, panels, offsets, base, rb, out, blocks * _vnni.PIXELS, groups,
                image_bytes, ws, lo, hi, min_block=max(1, _MIN_BLOCK_MACS // item_macs))
    return out


def _conv_direct(layer, x, w, geometry, plan, weight_bits):
    loops = _loops()
    groups, (sh, sw), (dh, dw), (pt, pl, _, _), (oh, ow) = geometry
    out_dtype, lo, hi, rb, bias, acc_bits = plan
    wrap32, two_step, lo16, hi16 = _requant_flags(weight_bits, out_dtype, acc_bits)
    n, o = x.shape[0], w.shape[0]
    out = np.empty((n, o, oh, ow), out_dtype)
    acc_proto = np.empty(0, np.int32 if acc_bits == 32 else np.int64)
    plane_macs = w[0].size * oh * ow
    _run_blocks(n * o, loops.conv_direct_planes, x, w, bias, rb, out, sh, sw, dh, dw,
                pt, pl, groups, lo, hi, wrap32, two_step, lo16, hi16, acc_proto,
                min_block=max(1, _MIN_BLOCK_MACS // max(1, plane_macs)))
    return out


def _requantize_exact(acc, plan, weight_bits, out_shape):
    """out from exact float64 sums ``acc`` (rows = (n, channel) pairs)."""
    loops = _loops()
    out_dtype, lo, hi, rb, bias, acc_bits = plan
    wrap32, two_step, lo16, hi16 = _requant_flags(weight_bits, out_dtype, acc_bits)
    out = np.empty(acc.shape, out_dtype)
    _run_blocks(acc.shape[0], loops.requantize_rows, acc, bias, rb, out, lo, hi,
                wrap32, two_step, lo16, hi16, min_block=max(1, (1 << 18) // max(1, acc.shape[1])))
    return out.reshape(out_shape)


def _matmul(a, b):
    """``a @ b`` (float64 holding integers: exact in any order). Inside a fast run, where BLAS is
    single-threaded, in blocks of 64 columns on the pool (see _run_blocks), else one BLAS call."""
    from ..fast._parallel import splitting_products
    out = np.empty((a.shape[0], b.shape[1]), np.float64)
    if not splitting_products() or a.shape[0] * a.shape[1] * b.shape[1] < (1 << 21):
        return np.matmul(a, b, out=out)
    cols = 64

    def block(start, stop):
        np.matmul(a, b[:, start * cols:stop * cols], out=out[:, start * cols:stop * cols])

    from ..fast._parallel import for_blocks
    for_blocks(-(-b.shape[1] // cols), block)
    return out


def _conv_float64(layer, x, w, geometry, plan, weight_bits):
    groups, (sh, sw), (dh, dw), (pt, pl, pb, pr), (oh, ow) = geometry
    n, c = x.shape[:2]
    o, cg, kh, kw = w.shape
    cache = _cache(layer)
    if "w64" not in cache:
        cache["w64"] = np.ascontiguousarray(w.reshape(groups, o // groups, cg * kh * kw).astype(np.float64))
    wg = cache["w64"]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    taps = np.stack([xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
                     for i in range(kh) for j in range(kw)], axis=2)
    cols = taps.reshape(n, groups, cg * kh * kw, oh * ow)
    acc = np.empty((n, groups, o // groups, oh * ow), np.float64)
    for b in range(n):
        for g in range(groups):
            acc[b, g] = _matmul(wg[g], cols[b, g])
    return _requantize_exact(acc.reshape(n * o, oh * ow), plan, weight_bits, (n, o, oh, ow))


def fast_conv_kernel(layer, xs, tensors, *, vnni: Optional[bool] = None):
    """§8.1 convolution with the bits of layers.conv_kernel (see the module doc for the paths)."""
    x, w = xs[0], layer.weights
    if (len(xs) != 1 or not isinstance(x, np.ndarray) or x.dtype not in _TYPE_BOUNDS or x.ndim != 4
            or not isinstance(w, np.ndarray) or w.dtype not in (np.dtype(np.int8), np.dtype(np.int16)) or w.ndim != 4):
        return _reference(layer, xs, tensors)
    geometry = _conv_geometry(layer, x, w)
    weight_bits = w.dtype.itemsize * 8
    plan = None if geometry is None else _output_plan(layer, tensors, w.shape[0], weight_bits)
    if plan is None or tuple(tensors[layer.outputs[0]].shape) != (x.shape[0], w.shape[0]) + geometry[4]:
        return _reference(layer, xs, tensors)
    x = np.ascontiguousarray(x)
    w = np.ascontiguousarray(w)
    use_vnni = _vnni.AVAILABLE if vnni is None else (vnni and _vnni.AVAILABLE)
    if weight_bits == 8 and x.dtype.itemsize == 1:
        if use_vnni and w.shape[1] >= 3:
            return [_conv_vnni(layer, x, w, geometry, plan)]
        return [_conv_direct(layer, x, w, geometry, plan, weight_bits)]
    if w[0].size < _EXACT_FLOAT64_TERMS:
        return [_conv_float64(layer, x, w, geometry, plan, weight_bits)]
    return [_conv_direct(layer, x, w, geometry, plan, weight_bits)]


def fast_conv_kernel_no_vnni(layer, xs, tensors):
    return fast_conv_kernel(layer, xs, tensors, vnni=False)


# ---- inner product ------------------------------------------------------------------------

def fast_inner_product_kernel(layer, xs, tensors):
    """§8.3 inner product with the bits of layers.inner_product_kernel: exact float64 products
    (every partial sum below 2^53), then the accumulator wrap and requantization; an input of more
    than two axes as its rows, as there."""
    x, w = xs[0], layer.weights
    if len(xs) == 1 and isinstance(x, np.ndarray) and x.ndim > 2:
        out = fast_inner_product_kernel(layer, [x.reshape(-1, x.shape[-1])], _RowsView(tensors, layer))
        return [out[0].reshape(x.shape[:-1] + out[0].shape[-1:])]
    if (len(xs) != 1 or not isinstance(x, np.ndarray) or x.dtype not in _TYPE_BOUNDS or x.ndim != 2
            or not isinstance(w, np.ndarray) or w.dtype not in (np.dtype(np.int8), np.dtype(np.int16)) or w.ndim != 2
            or x.shape[1] != w.shape[1] or w.shape[1] >= _EXACT_FLOAT64_TERMS):
        return _reference(layer, xs, tensors)
    weight_bits = w.dtype.itemsize * 8
    plan = _output_plan(layer, tensors, w.shape[0], weight_bits)
    if plan is None or tuple(tensors[layer.outputs[0]].shape) != (x.shape[0], w.shape[0]):
        return _reference(layer, xs, tensors)
    cache = _cache(layer)
    if "w64" not in cache:
        cache["w64"] = np.ascontiguousarray(w.astype(np.float64))
    acc = _matmul(cache["w64"], np.ascontiguousarray(x.astype(np.float64).T))     # M x N
    out = _requantize_exact(acc, plan, weight_bits, acc.shape)
    return [np.ascontiguousarray(out.T)]


class _RowsView:
    """The tensors as an inner product on the rows of its input sees them: its output's shape
    flattened to rows x features, every other tensor as it is."""

    def __init__(self, tensors, layer):
        self.tensors, self.output = tensors, layer.outputs[0]

    def __getitem__(self, tid):
        t = self.tensors[tid]
        if tid != self.output:
            return t
        rows = int(np.prod(t.shape[:-1]))
        return dataclasses.replace(t, shape=(rows, t.shape[-1]))


# ---- element-wise sum, max pool, saturation --------------------------------------------------

def fast_eltwise_kernel(layer, xs, tensors):
    """§8.5 element-wise sum of two inputs of one shape with the bits of layers.eltwise_kernel (one
    numba pass instead of numpy's int64 passes); other kinds and shapes go to the plain kernel."""
    if layer.attrs.get("eltwise_type") == "Prod":
        return _fast_eltwise_product(layer, xs, tensors)
    if (layer.attrs.get("eltwise_type") != "Sum" or len(xs) != 2 or len(layer.multipliers) != 2
            or not all(isinstance(v, np.ndarray) and v.dtype in _TYPE_BOUNDS for v in xs)
            or xs[0].shape != xs[1].shape):
        return _reference(layer, xs, tensors)
    out_tensor = tensors[layer.outputs[0]]
    multipliers = [np.asarray(m) for m in layer.multipliers]
    rb = np.asarray(layer.round_bits)
    if (out_tensor.is_float or tuple(out_tensor.shape) != xs[0].shape or rb.ndim != 0 or rb.dtype.kind not in "iu"
            or not 0 <= int(rb) <= 62 or any(m.ndim != 0 or m.dtype.kind not in "iu" or abs(int(m)) >= 1 << 40
                                             for m in multipliers)):
        return _reference(layer, xs, tensors)
    out_dtype = out_tensor.fixed_type.dtype
    tlo, thi = _TYPE_BOUNDS[out_dtype]
    lo, hi = (tlo, thi) if layer.bounds is None else (int(layer.bounds[0]), int(layer.bounds[1]))
    if not tlo <= lo <= hi <= thi:
        return _reference(layer, xs, tensors)
    loops = _loops()
    a, b = (np.ascontiguousarray(v).reshape(-1) for v in xs)
    out = np.empty(a.size, out_dtype)
    _run_blocks(a.size, loops.eltwise_sum2, a, b, int(multipliers[0]),
                int(multipliers[1]), int(rb), lo, hi, out, min_block=1 << 16)
    return [out.reshape(xs[0].shape)]


def _fast_eltwise_product(layer, xs, tensors):
    """§8.5 element-wise product of two 8/16-bit inputs that broadcast to the output's shape, with the bits
    of layers.eltwise_kernel (one numba pass over the output instead of numpy's int64 passes over the
    broadcast product): the accumulator width of arith.product_accumulator_bits, roundSat, the bounds."""
    if (len(xs) != 2 or "constant_operand" in layer.attrs
            or not all(isinstance(v, np.ndarray) and v.dtype in _TYPE_BOUNDS for v in xs)):
        return _reference(layer, xs, tensors)
    out_tensor = tensors[layer.outputs[0]]
    rb = np.asarray(layer.round_bits)
    if out_tensor.is_float or rb.ndim != 0 or rb.dtype.kind not in "iu" or not 0 <= int(rb) <= 62:
        return _reference(layer, xs, tensors)
    shape = tuple(out_tensor.shape)
    try:
        if np.broadcast_shapes(xs[0].shape, xs[1].shape) != shape:
            return _reference(layer, xs, tensors)
    except ValueError:
        return _reference(layer, xs, tensors)
    if len(shape) > 6 or 0 in shape:
        return _reference(layer, xs, tensors)
    out_dtype = out_tensor.fixed_type.dtype
    tlo, thi = _TYPE_BOUNDS[out_dtype]
    lo, hi = (tlo, thi) if layer.bounds is None else (int(layer.bounds[0]), int(layer.bounds[1]))
    if not tlo <= lo <= hi <= thi:
        return _reference(layer, xs, tensors)
    wrap32 = all(v.dtype.itemsize == 1 for v in xs)   # arith.product_accumulator_bits: int32 for 8-bit inputs
    six = (1,) * (6 - len(shape)) + shape
    a, b = (np.broadcast_to(v.reshape((1,) * (6 - v.ndim) + v.shape), six) for v in xs)
    out = np.empty(six, out_dtype)
    rows = int(np.prod(six[:5]))
    _run_blocks(rows, _loops().eltwise_prod2_rows, a, b, int(rb), wrap32, lo, hi, out,
                min_block=max(1, (1 << 16) // max(1, six[5])))
    return [out.reshape(shape)]


def fast_pool_kernel(layer, xs, tensors):
    """§8.6 max pool with the bits of layers.pool_kernel (a numba loop over the windows, in the input's
    own dtype); average pools go to the plain kernel."""
    a = layer.attrs
    x = xs[0]
    if (a.get("pool_type") != "Max" or len(xs) != 1 or not isinstance(x, np.ndarray) or x.dtype not in _TYPE_BOUNDS
            or x.ndim != 4):
        return _reference(layer, xs, tensors)
    try:
        kernel, strides, pads = _pair(a["kernel"]), _pair(a["strides"]), _pads4(a["pads"])
        ceil_mode = bool(a["ceil_mode"])
    except (KeyError, TypeError, ValueError):
        return _reference(layer, xs, tensors)
    if kernel is None or strides is None or pads is None or min(kernel + strides) < 1:
        return _reference(layer, xs, tensors)
    (kh, kw), (sh, sw), (pt, pl, pb, pr) = kernel, strides, pads
    n, c, h, w = x.shape
    sizes = []
    for d, k, s, p0, p1 in ((h, kh, sh, pt, pb), (w, kw, sw, pl, pr)):
        span = d + p0 + p1 - k
        if p0 >= k or p1 >= k or span < 0:
            return _reference(layer, xs, tensors)
        count = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (count - 1) * s >= d + p0:
            count -= 1
        if (count - 1) * s - p0 >= d:        # a window past the image: the plain kernel decides
            return _reference(layer, xs, tensors)
        sizes.append(count)
    out_tensor = tensors[layer.outputs[0]]
    if out_tensor.is_float or out_tensor.dtype != x.dtype or tuple(out_tensor.shape) != (n, c, sizes[0], sizes[1]):
        return _reference(layer, xs, tensors)
    loops = _loops()
    x = np.ascontiguousarray(x)
    out = np.empty((n, c, sizes[0], sizes[1]), x.dtype)
    _run_blocks(n * c, loops.max_pool_planes, x, out, kh, kw, sh, sw, pt, pl,
                min_block=max(1, (1 << 16) // max(1, sizes[0] * sizes[1] * kh * kw)))
    return [out]


def fast_saturate_kernel(layer, xs, tensors):
    """A standalone ReLU/ReLU6/Clip layer with the bits of layers.saturate_kernel: numpy's clip in the
    input's own dtype (the bounds narrowed to it change nothing: every value is inside it)."""
    x = xs[0]
    out_tensor = tensors[layer.outputs[0]]
    if (len(xs) != 1 or not isinstance(x, np.ndarray) or x.dtype not in _TYPE_BOUNDS or layer.bounds is None
            or out_tensor.is_float):
        return _reference(layer, xs, tensors)
    lo, hi = int(layer.bounds[0]), int(layer.bounds[1])
    xlo, xhi = _TYPE_BOUNDS[x.dtype]
    olo, ohi = _TYPE_BOUNDS[out_tensor.fixed_type.dtype]
    if not olo <= lo <= hi <= ohi or max(lo, xlo) > min(hi, xhi):
        return _reference(layer, xs, tensors)
    clipped = np.clip(x, x.dtype.type(max(lo, xlo)), x.dtype.type(min(hi, xhi)))
    return [clipped.astype(out_tensor.fixed_type.dtype, copy=False)]


def fast_overrides(vnni: Optional[bool] = None) -> Dict[str, object]:
    """The fast kernels by layer type; ``vnni=False`` keeps the 8-bit convolutions off the VNNI
    microkernel (the int32 numba loops), ``None`` uses it where the CPU has it."""
    conv = fast_conv_kernel if vnni is None or vnni else fast_conv_kernel_no_vnni
    return {"Conv": conv, "InnerProduct": fast_inner_product_kernel, "EltWise": fast_eltwise_kernel,
            "Pool": fast_pool_kernel, "ReLU": fast_saturate_kernel}


FAST_OVERRIDES = fast_overrides()

__all__ = ["FAST_OVERRIDES", "fast_conv_kernel", "fast_eltwise_kernel", "fast_inner_product_kernel",
           "fast_overrides", "fast_pool_kernel", "fast_saturate_kernel"]
