"""Pooling: Relax's max/avg pools in NCHW at the IR's geometry (emulator/reference/op_pool.py) (other layouts transposed there and back), global pools
as reductions over H and W, adaptive pools with TOPI."""

from __future__ import annotations

import numpy as np

from ....emulator.reference.op_pool import adaptive_size, pool_geometry, tap_counts
from ..facet import lowers
from ._layout import permute_from, permute_to


def _nchw(ctx, x, layout):
    if sorted(layout) != sorted("NCHW"):
        ctx.fail(f"layout '{layout}' has no lowering (a permutation of NCHW)")
    return permute_to(ctx, x, layout, "NCHW")


def _padding_for(ctx, attrs, h: int, w: int):
    """The IR's geometry, and a padding that gives its output size without ceil_mode: the windows
    that only ceil_mode adds read extra padding at the end (never counted, see avg_pool2d)."""
    geometry = pool_geometry(attrs, h, w)
    kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow = geometry
    need_h = (oh - 1) * sh + dh * (kh - 1) + 1
    need_w = (ow - 1) * sw + dw * (kw - 1) + 1
    return geometry, (pt, pl, pb + max(0, need_h - (h + pt + pb)), pr + max(0, need_w - (w + pl + pr)))


@lowers("nn.max_pool2d")
def max_pool2d(ctx, call, args):
    a = call.attrs
    x = _nchw(ctx, args[0], a.layout)
    h, w = ctx.shape(x)[2:]
    geometry, padding = _padding_for(ctx, a, h, w)
    out = ctx.emit(ctx.op.nn.max_pool2d(x, pool_size=a.pool_size, strides=a.strides, padding=padding,
                                        dilation=a.dilation, ceil_mode=False, layout="NCHW"))
    kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow = geometry
    empty = np.outer(tap_counts(oh, h, kh, sh, dh, pt, pb, False), tap_counts(ow, w, kw, sw, dw, pl, pr, False)) == 0
    if empty.any() and ctx.dtype(x).startswith("float"):
        # A window with no tap in the image is -inf in the reference; TVM's padding is the lowest finite value.
        out = ctx.emit(ctx.op.where(ctx.const(empty, "bool"), ctx.scalar(-np.inf, ctx.dtype(x)), out))
    return permute_from(ctx, out, "NCHW", a.out_layout or a.layout)


@lowers("nn.avg_pool2d")
def avg_pool2d(ctx, call, args):
    """Window sums divided by the reference's tap counts (a constant: taps inside the image, or the
    padded image with count_include_pad; never the taps ceil_mode adds)."""
    a = call.attrs
    op = ctx.op
    x = _nchw(ctx, args[0], a.layout)
    dtype = ctx.dtype(x)
    h, w = ctx.shape(x)[2:]
    geometry, padding = _padding_for(ctx, a, h, w)
    kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow = geometry
    work = dtype if dtype.startswith("float") else "float64"
    src = x if work == dtype else ctx.emit(op.astype(x, work))
    means = ctx.emit(op.nn.avg_pool2d(src, pool_size=a.pool_size, strides=a.strides, padding=padding,
                                      dilation=a.dilation, ceil_mode=False, count_include_pad=True, layout="NCHW"))
    sums = ctx.emit(op.multiply(means, ctx.scalar(kh * kw, work)))
    counts = np.outer(tap_counts(oh, h, kh, sh, dh, pt, pb, a.count_include_pad),
                      tap_counts(ow, w, kw, sw, dw, pl, pr, a.count_include_pad))
    out = ctx.emit(op.divide(sums, ctx.const(np.maximum(counts, 1).astype(work), work)))
    if work != dtype:
        out = ctx.emit(op.astype(ctx.emit(op.trunc(out)), dtype))
    return permute_from(ctx, out, "NCHW", a.out_layout or a.layout)


def _global(ctx, call, args, reduce):
    a = call.attrs
    h, w = a.layout.find("H"), a.layout.find("W")
    out = ctx.emit(reduce(args[0], [h, w], keepdims=True))
    return out if not a.out_layout or a.out_layout == a.layout else \
        permute_from(ctx, permute_to(ctx, out, a.layout, "NCHW"), "NCHW", a.out_layout)


@lowers("nn.global_avg_pool2d")
def global_avg_pool2d(ctx, call, args):
    return _global(ctx, call, args, ctx.op.mean)


@lowers("nn.global_max_pool2d")
def global_max_pool2d(ctx, call, args):
    return _global(ctx, call, args, ctx.op.max)


def _adaptive(ctx, call, args, is_max):
    """TOPI's adaptive pool: the windows [floor(o*H/OH), ceil((o+1)*H/OH)) of the reference."""
    a = call.attrs
    x = _nchw(ctx, args[0], a.layout)
    h, w = ctx.shape(x)[2:]
    if not is_max and not ctx.dtype(x).startswith("float"):
        ctx.fail("integer adaptive average pools have no lowering")
    out = ctx.emit_te(ctx.topi.nn.adaptive_pool, x, adaptive_size(a, h, w), "max" if is_max else "avg", "NCHW")
    return permute_from(ctx, out, "NCHW", a.out_layout or a.layout)


@lowers("nn.adaptive_avg_pool2d")
def adaptive_avg_pool2d(ctx, call, args):
    return _adaptive(ctx, call, args, False)


@lowers("nn.adaptive_max_pool2d")
def adaptive_max_pool2d(ctx, call, args):
    return _adaptive(ctx, call, args, True)
