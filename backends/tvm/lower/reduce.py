"""Reductions over the axes the IR resolves (``reduced_axes``: axis, exclude), with keepdims."""

from __future__ import annotations

from ....ir.ops.reduce import reduced_axes
from ..facet import lowers


def _reduction(relax_name):
    def lower(ctx, call, args):
        x = args[0]
        axes = list(reduced_axes(len(ctx.shape(x)), call.attrs))
        if not axes:
            return x
        dtype = ctx.dtype(x)
        if relax_name == "mean" and not dtype.startswith("float"):
            # An integer mean truncates toward zero (the reference: float64 mean, trunc).
            mean = ctx.emit(ctx.op.mean(ctx.emit(ctx.op.astype(x, "float64")), axes, keepdims=call.attrs.keepdims))
            return ctx.op.astype(ctx.emit(ctx.op.trunc(mean)), dtype)
        return getattr(ctx.op, relax_name)(x, axes, keepdims=call.attrs.keepdims)
    lower.__name__ = f"lower_{relax_name}"
    return lower


for _name in ("sum", "mean", "max", "min", "prod"):
    lowers(_name)(_reduction(_name))


def _logical(topi_name):
    def lower(ctx, call, args):
        x = args[0]
        axes = list(reduced_axes(len(ctx.shape(x)), call.attrs))
        if not axes:
            return x
        return ctx.emit_te(getattr(ctx.topi, topi_name), x, axes, call.attrs.keepdims)
    lower.__name__ = f"lower_{topi_name}"
    return lower


lowers("all")(_logical("all"))
lowers("any")(_logical("any"))


def _arg_reduce(find_max: bool):
    """As the reference: the reduced axes moved last and flattened, the index into that block;
    select_last_index searches the flipped block."""
    def lower(ctx, call, args):
        x = args[0]
        op = ctx.op
        shape = ctx.shape(x)
        axes = list(reduced_axes(len(shape), call.attrs))
        kept = [a for a in range(len(shape)) if a not in axes]
        moved = ctx.emit(op.permute_dims(x, kept + axes)) if kept + axes != list(range(len(shape))) else x
        block = 1
        for a in axes:
            block *= shape[a]
        flat = ctx.emit(op.reshape(moved, tuple(shape[a] for a in kept) + (block,)))
        if call.attrs.select_last_index:
            flat = ctx.emit(op.flip(flat, len(kept)))
        idx = ctx.emit((op.argmax if find_max else op.argmin)(flat, len(kept), keepdims=False))
        if call.attrs.select_last_index:
            idx = ctx.emit(op.subtract(ctx.scalar(block - 1, ctx.dtype(idx)), idx))
        out_shape = tuple(int(d) for d in call.checked_type.shape)
        idx = ctx.emit(op.reshape(idx, out_shape))
        return op.astype(idx, call.checked_type.dtype)
    lower.__name__ = "lower_argmax" if find_max else "lower_argmin"
    return lower


lowers("argmax")(_arg_reduce(True))
lowers("argmin")(_arg_reduce(False))


@lowers("variance")
def variance(ctx, call, args):
    x, mean = args
    op = ctx.op
    shape = ctx.shape(x)
    axes = list(reduced_axes(len(shape), call.attrs))
    kept_shape = tuple(1 if a in axes else d for a, d in enumerate(shape))
    centered = ctx.emit(op.subtract(x, ctx.emit(op.reshape(mean, kept_shape))))
    total = ctx.emit(op.sum(ctx.emit(op.multiply(centered, centered)), axes, keepdims=call.attrs.keepdims))
    count = 1
    for a in axes:
        count *= shape[a]
    divisor = count - 1 if call.attrs.unbiased else count
    out = ctx.emit(op.divide(total, ctx.scalar(max(divisor, 1), ctx.dtype(x))))
    return op.astype(out, call.checked_type.dtype) if ctx.dtype(out) != call.checked_type.dtype else out


@lowers("topk")
def topk(ctx, call, args):
    a = call.attrs
    x = args[0]
    axis = a.axis % len(ctx.shape(x))
    out = ctx.emit(ctx.op.topk(x, k=int(a.k), axis=axis, ret_type=a.ret_type, largest=not a.is_ascend,
                               dtype=a.dtype))
    if a.ret_type != "both":
        return out
    return ctx.relax.Tuple([ctx.emit(ctx.relax.TupleGetItem(out, i)) for i in range(2)])
