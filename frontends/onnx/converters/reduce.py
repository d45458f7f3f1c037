"""Reductions: ReduceMean/Sum/Max/Min/Prod and ArgMax/ArgMin."""

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
