"""Shape and data movement. Shapes are static: reshape-like ops reshape to the IR's output type;
slices and gathers are TE computes that read each output element's source index the way the
reference kernels do (emulator/reference/op_transform.py), so every index mode is exact."""

from __future__ import annotations

import numpy as np

from ....ir.ops._rel import Layout
from ....ir.ops.transform import slice_ranges, split_sizes
from ..facet import lowers


def _out_shape(call):
    return tuple(int(d) for d in call.checked_type.shape)


@lowers("reshape", "squeeze", "expand_dims")
def reshape(ctx, call, args):
    return ctx.op.reshape(args[0], _out_shape(call))


@lowers("transpose")
def transpose(ctx, call, args):
    ndim = len(ctx.shape(args[0]))
    axes = [a % ndim for a in call.attrs.axes] if call.attrs.axes else list(reversed(range(ndim)))
    return ctx.op.permute_dims(args[0], axes)


@lowers("reverse")
def reverse(ctx, call, args):
    return ctx.op.flip(args[0], call.attrs.axis % len(ctx.shape(args[0])))


@lowers("concatenate")
def concatenate(ctx, call, args):
    return ctx.op.concat(args[0], axis=call.attrs.axis)


@lowers("stack")
def stack(ctx, call, args):
    return ctx.op.stack(args[0], axis=call.attrs.axis)


@lowers("split")
def split(ctx, call, args):
    x = args[0]
    axis = call.attrs.axis % len(ctx.shape(x))
    sizes = split_sizes(ctx.shape(x)[axis], call.attrs.indices_or_sections)
    bounds = [int(b) for b in np.cumsum(sizes)[:-1]]
    parts = ctx.emit(ctx.op.split(x, bounds, axis=axis))
    return ctx.relax.Tuple([ctx.emit(ctx.relax.TupleGetItem(parts, i)) for i in range(len(sizes))])


@lowers("strided_slice")
def strided_slice(ctx, call, args):
    x = args[0]
    ranges = slice_ranges(ctx.shape(x), call.attrs)
    out_shape = _out_shape(call)

    def compute(t):
        return ctx.te.compute(out_shape, lambda *i: t(*[b + s * k for k, (b, _, s) in zip(i, ranges)]),
                              name="strided_slice")
    return ctx.emit_te(compute, x)


def _wrapped(tir, index, size: int, mode: str):
    """The in-range index of ``index`` for an axis of ``size`` (take's modes; fast: negatives from the end)."""
    index = index.astype("int64")
    if mode == "clip":
        return tir.max(tir.min(index, size - 1), 0)
    if mode == "wrap":
        return tir.floormod(index, size)
    return tir.Select(index < 0, index + size, index)


@lowers("take")
def take(ctx, call, args):
    data, indices = args
    a = call.attrs
    tir = ctx.tir
    if a.axis is None:
        data = ctx.emit(ctx.op.reshape(data, (int(np.prod(ctx.shape(data))),)))
        axis = 0
    else:
        axis = a.axis % len(ctx.shape(data))
    n_idx = len(ctx.shape(indices))
    batch_dims = a.batch_dims % n_idx if a.batch_dims < 0 else a.batch_dims
    size = ctx.shape(data)[axis]
    out_shape = _out_shape(call)
    mid = n_idx - batch_dims

    def compute(td, ti):
        def element(*i):
            pre, inner, post = i[:axis], i[axis:axis + mid], i[axis + mid:]
            k = _wrapped(tir, ti(*(tuple(pre[:batch_dims]) + tuple(inner))), size, a.mode)
            return td(*(tuple(pre) + (k,) + tuple(post)))
        return ctx.te.compute(out_shape, element, name="take")
    return ctx.emit_te(compute, data, indices)


@lowers("gather")
def gather(ctx, call, args):
    data, indices = args
    axis = call.attrs.axis % len(ctx.shape(data))
    size = ctx.shape(data)[axis]
    tir = ctx.tir

    def compute(td, ti):
        def element(*i):
            src = list(i)
            src[axis] = _wrapped(tir, ti(*i), size, "fast")
            return td(*src)
        return ctx.te.compute(_out_shape(call), element, name="gather")
    return ctx.emit_te(compute, data, indices)


@lowers("scatter_nd")
def scatter_nd(ctx, call, args):
    data, indices, updates = args
    mode = call.attrs.mode
    if mode not in ("update", "add", "mul", "min", "max"):
        ctx.fail(f"scatter_nd mode '{mode}' has no lowering")
    # Relay's indices are (M, ...), Relax's (..., M): the index tuple moves last.
    nd = len(ctx.shape(indices))
    moved = ctx.emit(ctx.op.permute_dims(indices, list(range(1, nd)) + [0])) if nd > 1 else indices
    moved = ctx.emit(ctx.op.astype(moved, "int64"))
    return ctx.op.scatter_nd(data, moved, updates, mode)


@lowers("broadcast_to")
def broadcast_to(ctx, call, args):
    return ctx.op.broadcast_to(args[0], _out_shape(call))


@lowers("zeros")
def zeros(ctx, call, args):
    return ctx.op.zeros(_out_shape(call), call.checked_type.dtype)


@lowers("ones")
def ones(ctx, call, args):
    return ctx.op.ones(_out_shape(call), call.checked_type.dtype)


def _fill_value(ctx, fill, dtype):
    """The fill value as a 0-d tensor of ``dtype`` (the IR allows a one-element tensor)."""
    if ctx.shape(fill):
        fill = ctx.emit(ctx.op.reshape(fill, ()))
    return ctx.emit(ctx.op.astype(fill, dtype)) if ctx.dtype(fill) != dtype else fill


@lowers("full")
def full(ctx, call, args):
    dtype = call.checked_type.dtype
    return ctx.op.full(_out_shape(call), _fill_value(ctx, args[0], dtype), dtype)


@lowers("full_like")
def full_like(ctx, call, args):
    data, fill = args
    return ctx.op.full_like(data, _fill_value(ctx, fill, ctx.dtype(data)))


@lowers("tile")
def tile(ctx, call, args):
    return ctx.op.tile(args[0], tuple(int(r) for r in call.attrs.reps))


@lowers("shape_of")
def shape_of(ctx, call, args):
    # Shapes are static: the shape is a constant.
    return ctx.const(np.array(ctx.shape(args[0])), call.checked_type.dtype)


@lowers("layout_transform")
def layout_transform(ctx, call, args):
    """As the reference: to the primal axes (split axes merged), primal order src -> dst, then
    split and permuted into dst; all reshapes and transposes."""
    op = ctx.op
    src, dst = Layout(call.attrs.src_layout), Layout(call.attrs.dst_layout)
    x = args[0]
    shape = ctx.shape(x)
    sizes = src.primal_sizes(shape)
    order = []
    for i, (letter, factor) in enumerate(src.axes):
        if factor is None:
            order.append(i)
            sub = src.index(letter.lower())
            if sub >= 0:
                order.append(sub)
    if order != list(range(len(shape))):
        x = ctx.emit(op.permute_dims(x, order))
    x = ctx.emit(op.reshape(x, tuple(sizes[c] for c in src.primal)))
    perm = [src.primal.index(c) for c in dst.primal]
    if perm != list(range(len(perm))):
        x = ctx.emit(op.permute_dims(x, perm))
    split_shape, letters = [], []
    for letter, size in zip(dst.primal, ctx.shape(x)):
        factor = dst.sub_factor(letter)
        if dst.has_split(letter):
            split_shape += [size // factor, factor]
            letters += [letter, letter.lower()]
        else:
            split_shape.append(size)
            letters.append(letter)
    x = ctx.emit(op.reshape(x, tuple(split_shape)))
    final = [letters.index(a) for a, _ in dst.axes]
    if final != list(range(len(final))):
        x = ctx.emit(op.permute_dims(x, final))
    return x
