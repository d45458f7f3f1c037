"""Reductions: ReduceMean/Sum/Max/Min/Prod, ArgMax/ArgMin and TopK."""

from __future__ import annotations

from ..context import NodeContext
from . import converter
from .tensor import _axes

#: ONNX op -> (IR op, first opset that takes the axes as an input).
REDUCE = {
    "ReduceMean": ("mean", 18), "ReduceSum": ("sum", 13), "ReduceMax": ("max", 18),
    "ReduceMin": ("min", 18), "ReduceProd": ("prod", 18),
}


@converter(produces={op_type: (op, "copy") for op_type, (op, _) in REDUCE.items()})
def convert_reduce(ctx: NodeContext):
    op, axes_input_since = REDUCE[ctx.op_type]
    x = ctx.input(0)
    ndim = ctx.ndim(x)
    axes = ctx.attr_ints("axes") if ctx.opset < axes_input_since else ctx.const_ints(1, "axes")
    keepdims = bool(ctx.attr("keepdims", 1))
    if not axes:
        if int(ctx.attr("noop_with_empty_axes", 0)):
            return ctx.call("copy", x)
        axes = list(range(ndim))
    axes = _axes(ctx, axes, ndim)
    return ctx.call(op, x, axis=tuple(sorted(axes)), keepdims=keepdims)


@converter(produces={"ArgMax": ("argmax", "cast"), "ArgMin": ("argmin", "cast")})
def convert_arg_reduce(ctx: NodeContext):
    x = ctx.input(0)
    axis = _axes(ctx, [int(ctx.attr("axis", 0))], ctx.ndim(x), "axis")[0]
    op = "argmax" if ctx.op_type == "ArgMax" else "argmin"
    out = ctx.call(op, x, axis=(axis,), keepdims=bool(ctx.attr("keepdims", 1)),
                   select_last_index=bool(ctx.attr("select_last_index", 0)))
    # ONNX returns int64 indices; the IR's arg reductions return int32.
    if ctx.dtype(out) != "int64":
        out = ctx.call("cast", out, dtype="int64")
    return out


@converter("TopK", produces=("topk",))
def convert_topk(ctx: NodeContext):
    x = ctx.input(0)
    shape = ctx.shape(x)
    axis = _axes(ctx, [int(ctx.attr("axis", -1))], len(shape), "axis")[0]
    if ctx.opset < 10:
        k = int(ctx.attr("k", 0))
    else:
        values = ctx.const_ints(1, "K")
        if values is None or len(values) != 1:
            raise ctx.error(f"K must hold one value, got {values}")
        k = values[0]
    if not 1 <= k <= shape[axis]:
        raise ctx.unsupported(f"K={k} must be between 1 and the size {shape[axis]} of axis {axis} (a K of 0 gives "
                              f"zero-size tensors, which are not supported)")
    largest = bool(ctx.attr("largest", 1)) if ctx.opset >= 11 else True
    is_sorted = bool(ctx.attr("sorted", 1)) if ctx.opset >= 11 else True
    out = ctx.call("topk", x, k=k, axis=axis, ret_type="both", is_ascend=not largest, dtype="int64",
                   sorted=is_sorted)
    return [ctx.get(out, 0), ctx.get(out, 1)]
