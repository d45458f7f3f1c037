"""Shape and data-movement ops: Reshape, Flatten, Transpose, Squeeze/Unsqueeze, Concat, Split,
Slice, Gather, Pad, Expand, Tile, DepthToSpace/SpaceToDepth, ScatterND, Shape, Size,
ConstantOfShape.

Shape-like inputs (Reshape's shape, Slice's starts, Pad's pads, ...) must be constants at
import time; the importer has folded every shape computation by then.

A Reshape shape and a changed batch: a shape computed from the data (Shape -> Gather -> Concat)
is folded with the overridden input shapes and follows ``batch=`` by itself; a shape stored as a
constant carries the batch the model was exported with (PyTorch's ``x.view(1, 1, ...)``). When
``batch=`` changes the model's batch (``ctx.rebatch``), the constant shape cannot hold the data
and its batch dim is the exported batch, that dim becomes the new batch if that makes the element
counts agree, with a ``TidlxWarning`` naming the node and both shapes. The batch dim is dim 0 (as
for ``batch=`` itself) or, after leading 1s, the first other dim (``x.view(1, N, ...)``: BEVDet's
view transformer puts the cameras in dim 1). Otherwise the error names the node, the exported and the new batch.
"""

from __future__ import annotations

import math
import warnings
from typing import List, Optional

import numpy as np

from ....ir import Constant
from ....ir.errors import TidlxWarning
from ..context import NodeContext
from ..errors import OnnxImportError
from . import converter
from .nn import reshape


def _axes(ctx: NodeContext, axes: List[int], ndim: int, what: str = "axes") -> List[int]:
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ctx.error(f"{what} {axes} has {a}, out of range for rank {ndim}")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ctx.error(f"{what} {axes} names an axis twice")
    return out


def _axes_operand(ctx: NodeContext, attr_until: int, index: int) -> Optional[List[int]]:
    """Axes given as an attribute before opset ``attr_until`` and as input ``index`` since."""
    if ctx.opset < attr_until:
        return ctx.attr_ints("axes")
    return ctx.const_ints(index, "axes")


# --- Shape, Size, ConstantOfShape --------------------------------------------------------------

@converter("Shape", produces=())  # a constant
def convert_shape(ctx: NodeContext):
    shape = ctx.shape(ctx.input(0))
    ndim = len(shape)
    start, end = int(ctx.attr("start", 0)), ctx.attr("end")
    start = min(max(start + ndim if start < 0 else start, 0), ndim)
    end = ndim if end is None else min(max(int(end) + ndim if int(end) < 0 else int(end), 0), ndim)
    return ctx.const_expr(np.array(shape[start:end], dtype=np.int64))


@converter("Size", produces=())  # a constant
def convert_size(ctx: NodeContext):
    return ctx.const_expr(np.array(math.prod(ctx.shape(ctx.input(0))), dtype=np.int64))


@converter("ConstantOfShape", produces=())  # a constant
def convert_constant_of_shape(ctx: NodeContext):
    shape = ctx.const_ints(0, "input")
    value = ctx.attr("value")
    value = np.zeros(1, dtype=np.float32) if value is None else np.asarray(value).reshape(-1)
    return ctx.const_expr(np.full(shape, value[0], dtype=value.dtype))


# --- Reshape, Flatten, Transpose, Squeeze, Unsqueeze ----------------------------------------------

def onnx_reshape_target(ctx: NodeContext, in_shape, target: List[int], allowzero: bool) -> tuple:
    """ONNX's rule: 0 copies the input dim (unless allowzero), one -1 is inferred."""
    out = []
    infer_at = None
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            if i >= len(in_shape):
                raise ctx.error(f"shape {target} copies dim {i} (0) but the input {tuple(in_shape)} has rank "
                                f"{len(in_shape)}")
            out.append(in_shape[i])
        elif d == -1:
            if infer_at is not None:
                raise ctx.error(f"shape {target} has more than one -1")
            infer_at = i
            out.append(1)
        elif d < 0:
            raise ctx.error(f"shape {target} has an invalid value {d}")
        else:
            out.append(d)
    total = math.prod(in_shape)
    if infer_at is not None:
        known = math.prod(out)
        if known == 0 or total % known:
            raise ctx.error(f"cannot reshape {tuple(in_shape)} to {target}: -1 cannot be inferred")
        out[infer_at] = total // known
    if math.prod(out) != total:
        raise ctx.error(f"cannot reshape {tuple(in_shape)} ({total} elements) to {tuple(out)}")
    return tuple(out)


@converter("Reshape", produces=("reshape",))
def convert_reshape(ctx: NodeContext):
    x = ctx.input(0)
    target = ctx.attr_ints("shape") if ctx.opset < 5 else ctx.const_ints(1, "shape")
    allowzero = bool(ctx.attr("allowzero", 0))
    try:
        shape = onnx_reshape_target(ctx, ctx.shape(x), target, allowzero)
    except OnnxImportError as exc:
        shape = _rebatched_target(ctx, ctx.shape(x), target, allowzero, exc)
    # The target is fully resolved: a 0 in it is a zero-size dim, not "copy the input's".
    return ctx.call("reshape", x, newshape=shape, allowzero=0 in shape)


def _rebatched_target(ctx: NodeContext, in_shape, target: List[int], allowzero: bool, error) -> tuple:
    """The module docstring's rule for a constant Reshape shape under a changed batch; raises
    ``error`` (with why the shape cannot follow) when it does not apply."""
    rebatch = ctx.rebatch
    if rebatch is None or not target:
        raise error
    if -1 not in target:
        # The batch dim: dim 0, or the first dim after leading 1s (a view (1, cameras, ...) of a
        # camera batch, as BEVDet's view transformer reshapes it).
        for i, d in enumerate(target):
            if d in rebatch.exported:
                try:
                    shape = onnx_reshape_target(ctx, in_shape, list(target[:i]) + [rebatch.batch] + list(target[i + 1:]),
                                                allowzero)
                except OnnxImportError:
                    break
                warnings.warn(f"{ctx.where}: its shape {list(target)} is a constant carrying the exported batch "
                              f"{d} in dim {i}; with batch={rebatch.batch} it reshapes {tuple(in_shape)} to {shape}",
                              TidlxWarning, stacklevel=2)
                return shape
            if d != 1:
                break
    raise OnnxImportError(f"{error}: the shape is a constant of the model, exported with batch "
                    f"{rebatch.describe_exported()}, and cannot follow batch={rebatch.batch} (only a dim 0 equal to the "
                    f"exported batch, or the first dim after leading 1s, follows it, when the element counts then agree); export the model with batch "
                    f"{rebatch.batch}, or compute the shape from the data (x.shape) in the exported code") from None


@converter("Flatten", produces=("nn.batch_flatten", "reshape"))
def convert_flatten(ctx: NodeContext):
    x = ctx.input(0)
    shape = ctx.shape(x)
    ndim = len(shape)
    axis = int(ctx.attr("axis", 1))
    if not -ndim <= axis <= ndim:
        raise ctx.error(f"axis {axis} is out of range for rank {ndim}")
    axis = axis + ndim if axis < 0 else axis
    if axis == 1 and ndim >= 2:
        return ctx.call("nn.batch_flatten", x)
    return ctx.call("reshape", x, newshape=(math.prod(shape[:axis]), math.prod(shape[axis:])))


@converter("Transpose", produces=("transpose",))
def convert_transpose(ctx: NodeContext):
    x = ctx.input(0)
    ndim = ctx.ndim(x)
    perm = ctx.attr_ints("perm") or list(reversed(range(ndim)))
    return ctx.call("transpose", x, axes=tuple(perm))


@converter("Squeeze", produces=("squeeze",))
def convert_squeeze(ctx: NodeContext):
    x = ctx.input(0)
    shape = ctx.shape(x)
    axes = _axes_operand(ctx, 13, 1)
    if axes is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = _axes(ctx, axes, len(shape))
    if not axes:
        return x
    return ctx.call("squeeze", x, axis=tuple(sorted(axes)))


@converter("Unsqueeze", produces=("expand_dims", "reshape"))
def convert_unsqueeze(ctx: NodeContext):
    x = ctx.input(0)
    shape = list(ctx.shape(x))
    axes = _axes_operand(ctx, 13, 1)
    if axes is None:
        raise ctx.error("axes are required")
    out_rank = len(shape) + len(axes)
    axes = sorted(_axes(ctx, axes, out_rank))
    if axes == list(range(axes[0], axes[0] + len(axes))):
        return ctx.call("expand_dims", x, axis=axes[0], num_newaxis=len(axes))
    for a in axes:
        shape.insert(a, 1)
    return ctx.call("reshape", x, newshape=tuple(shape))


# --- Concat, Split ----------------------------------------------------------------------------

@converter("Concat", produces=("concatenate",))
def convert_concat(ctx: NodeContext):
    args = ctx.inputs()
    if not args:
        raise ctx.error("needs at least one input")
    axis = int(ctx.required_attr("axis"))
    # Inputs with a zero-size concat axis contribute nothing (exporters emit them).
    shapes = [ctx.shape(a) for a in args]
    ndim = len(shapes[0])
    if ndim and -ndim <= axis < ndim:
        args = [a for a, s in zip(args, shapes) if s[axis] != 0] or args[:1]
    return ctx.call("concatenate", ctx.tuple(args), axis=axis)


@converter("Split", produces=("split",))
def convert_split(ctx: NodeContext):
    x = ctx.input(0)
    shape = ctx.shape(x)
    axis = _axes(ctx, [int(ctx.attr("axis", 0))], len(shape), "axis")[0]
    dim = shape[axis]
    if ctx.opset < 13:
        sizes = ctx.attr_ints("split")
    else:
        sizes = ctx.const_ints(1, "split")
    count = ctx.num_outputs
    if sizes is None:
        num_outputs = ctx.attr("num_outputs")
        if num_outputs is not None:
            count = int(num_outputs)
            # Opset 18: equal chunks of ceil(dim / n); the last one may be smaller.
            chunk = -(-dim // count)
            sizes = [min(chunk, dim - i * chunk) for i in range(count)]
        else:
            if dim % count:
                raise ctx.error(f"axis {axis} of size {dim} cannot be split into {count} equal parts")
            sizes = [dim // count] * count
    if sum(sizes) != dim:
        raise ctx.error(f"split sizes {sizes} do not add up to the size {dim} of axis {axis}")
    if any(s <= 0 for s in sizes):
        raise ctx.unsupported(f"split sizes {sizes} contain an empty part (zero-size tensors are not supported)")
    if len(set(sizes)) == 1:
        sections = len(sizes)
    else:
        sections = tuple(int(v) for v in np.cumsum(sizes)[:-1])
    parts = ctx.call("split", x, indices_or_sections=sections, axis=axis)
    return [ctx.get(parts, i) for i in range(len(sizes))]


# --- Slice ------------------------------------------------------------------------------------

@converter("Slice", produces=("strided_slice",))
def convert_slice(ctx: NodeContext):
    x = ctx.input(0)
    shape = ctx.shape(x)
    ndim = len(shape)
    if ctx.opset < 10:
        starts, ends = ctx.attr_ints("starts"), ctx.attr_ints("ends")
        axes, steps = ctx.attr_ints("axes"), None
    else:
        starts, ends = ctx.const_ints(1, "starts"), ctx.const_ints(2, "ends")
        axes, steps = ctx.const_ints(3, "axes"), ctx.const_ints(4, "steps")
    if starts is None or ends is None or len(starts) != len(ends):
        raise ctx.error(f"starts {starts} and ends {ends} must be given with the same length")
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(axes) == len(steps) == len(starts):
        raise ctx.error(f"starts, ends, axes and steps must have the same length ({starts}, {ends}, {axes}, "
                        f"{steps})")
    axes = _axes(ctx, axes, ndim)
    begin, end, strides = [], [], []
    for axis, start, stop, step in zip(axes, starts, ends, steps):
        dim = shape[axis]
        if step == 0:
            raise ctx.error(f"step of axis {axis} is 0")
        # ONNX's clamping; a negative step running past index 0 ends at -1, which strided_slice
        # would read as "the last element", so it is written as -(dim + 1).
        start = start + dim if start < 0 else start
        stop = stop + dim if stop < 0 else stop
        if step > 0:
            start, stop = min(max(start, 0), dim), min(max(stop, 0), dim)
        else:
            start, stop = min(max(start, 0), dim - 1), min(max(stop, -1), dim - 1)
            if stop == -1:
                stop = -(dim + 1)
        begin.append(start)
        end.append(stop)
        strides.append(step)
    return ctx.call("strided_slice", x, begin=tuple(begin), end=tuple(end), strides=tuple(strides),
                    axes=tuple(axes))


# --- Gather, ScatterND --------------------------------------------------------------------------

@converter("Gather", produces=("take",))
def convert_gather(ctx: NodeContext):
    data, indices = ctx.input(0), ctx.input(1)
    shape = ctx.shape(data)
    axis = _axes(ctx, [int(ctx.attr("axis", 0))], len(shape), "axis")[0]
    dim = shape[axis]
    if isinstance(indices, Constant):
        idx = np.asarray(indices.data)
        if idx.size and (idx.min() < -dim or idx.max() >= dim):
            raise ctx.error(f"indices {idx.reshape(-1)[:8].tolist()} are out of range for axis {axis} of size "
                            f"{dim}")
        indices = ctx.const_expr(np.where(idx < 0, idx + dim, idx).astype(idx.dtype))
        return ctx.call("take", data, indices, axis=axis, mode="clip")
    # Run-time indices may be negative (counting from the end): wrap them.
    return ctx.call("take", data, indices, axis=axis, mode="wrap")


@converter("ScatterND", produces=("scatter_nd", "transpose"))
def convert_scatter_nd(ctx: NodeContext):
    data, indices, updates = ctx.input(0), ctx.input(1), ctx.input(2)
    mode = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}
    reduction = ctx.attr_choice("reduction", "none", tuple(mode))
    k = ctx.ndim(indices)
    # ONNX indexes with the last axis of indices, Relay with the first.
    moved = (k - 1,) + tuple(range(k - 1))
    if isinstance(indices, Constant):
        indices = ctx.const_expr(np.transpose(indices.data, moved))
    else:
        indices = ctx.call("transpose", indices, axes=moved)
    return ctx.call("scatter_nd", data, indices, updates, mode=mode[reduction])


# --- Pad --------------------------------------------------------------------------------------

@converter("Pad", produces=("concatenate", "copy", "nn.pad", "reshape", "strided_slice"))
def convert_pad(ctx: NodeContext):
    x = ctx.input(0)
    shape = ctx.shape(x)
    ndim = len(shape)
    dtype = ctx.dtype(x)
    mode = ctx.attr_choice("mode", "constant", ("constant", "reflect", "edge", "wrap"))
    if ctx.opset < 11:
        pads = ctx.attr_ints("pads", [])
        pad_value = ctx.scalar(float(ctx.attr("value", 0.0)), dtype)
        axes = list(range(ndim))
    else:
        pads = ctx.const_ints(1, "pads")
        if ctx.has_input(2):
            value = ctx.input(2, "constant_value")
            if isinstance(value, Constant):
                pad_value = ctx.scalar(np.asarray(value.data).reshape(-1)[0], dtype) if value.data.size else \
                    ctx.scalar(0, dtype)
            else:
                pad_value = reshape(ctx, value, ())
        else:
            pad_value = ctx.scalar(0, dtype)
        axes = ctx.const_ints(3, "axes")
        axes = list(range(ndim)) if axes is None else _axes(ctx, axes, ndim)
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads {pads} must have 2 values per padded axis ({len(axes)} axes)")
    befores, afters = [0] * ndim, [0] * ndim
    for k, axis in enumerate(axes):
        befores[axis], afters[axis] = pads[k], pads[k + len(axes)]
    out = x
    if mode == "wrap":
        out = _wrap_pad(ctx, x, [max(b, 0) for b in befores], [max(a, 0) for a in afters])
    elif any(p > 0 for p in befores + afters):
        width = tuple((max(b, 0), max(a, 0)) for b, a in zip(befores, afters))
        out = ctx.call("nn.pad", x, pad_value, pad_width=width, pad_mode=mode)
    if any(p < 0 for p in befores + afters):
        # Negative pads crop.
        padded = ctx.shape(out)
        crop_axes = [i for i in range(ndim) if befores[i] < 0 or afters[i] < 0]
        out = ctx.call("strided_slice", out, begin=tuple(-min(befores[i], 0) for i in crop_axes),
                       end=tuple(padded[i] + min(afters[i], 0) for i in crop_axes),
                       strides=(1,) * len(crop_axes), axes=tuple(crop_axes))
    if out is x:
        return ctx.call("copy", x)
    return out


def _wrap_pad(ctx: NodeContext, x, befores: List[int], afters: List[int]):
    """Circular padding: each padded axis becomes concat(tail, x, head)."""
    out = x
    for axis, (before, after) in enumerate(zip(befores, afters)):
        if before == 0 and after == 0:
            continue
        dim = ctx.shape(out)[axis]
        if before > dim or after > dim:
            raise ctx.unsupported(f"wrap padding {before, after} of axis {axis} is larger than its size {dim}")
        parts = []
        if before:
            parts.append(ctx.call("strided_slice", out, begin=(dim - before,), end=(dim,), strides=(1,),
                                  axes=(axis,)))
        parts.append(out)
        if after:
            parts.append(ctx.call("strided_slice", out, begin=(0,), end=(after,), strides=(1,), axes=(axis,)))
        out = ctx.call("concatenate", ctx.tuple(parts), axis=axis)
    return out


# --- Expand, Tile, DepthToSpace, SpaceToDepth -------------------------------------------------------

@converter("Expand", produces=("broadcast_to",))
def convert_expand(ctx: NodeContext):
    x = ctx.input(0)
    target = ctx.const_ints(1, "shape")
    try:
        shape = tuple(int(d) for d in np.broadcast_shapes(ctx.shape(x), tuple(target)))
    except ValueError:
        raise ctx.error(f"input of shape {ctx.shape(x)} cannot be expanded to {target}") from None
    except RuntimeError as exc:  # numpy broadcasts at most 32 dimensions (NPY_MAXDIMS)
        raise ctx.error(f"input of shape {ctx.shape(x)} cannot be expanded to a shape of rank {len(target)} "
                        f"({exc})") from None
    return ctx.call("broadcast_to", x, shape=shape)


@converter("Tile", produces=("tile",))
def convert_tile(ctx: NodeContext):
    x = ctx.input(0)
    repeats = ctx.const_ints(1, "repeats")
    if len(repeats) != ctx.ndim(x):
        raise ctx.error(f"repeats {repeats} must have one value per axis ({ctx.ndim(x)})")
    return ctx.call("tile", x, reps=tuple(repeats))


@converter("DepthToSpace", produces=("nn.depth_to_space",))
def convert_depth_to_space(ctx: NodeContext):
    mode = ctx.attr_choice("mode", "DCR", ("DCR", "CRD"))
    return ctx.call("nn.depth_to_space", ctx.input(0), block_size=int(ctx.required_attr("blocksize")), mode=mode)


@converter("SpaceToDepth", produces=("nn.space_to_depth",))
def convert_space_to_depth(ctx: NodeContext):
    mode = ctx.attr_choice("mode", "DCR", ("DCR", "CRD"))
    return ctx.call("nn.space_to_depth", ctx.input(0), block_size=int(ctx.required_attr("blocksize")), mode=mode)
