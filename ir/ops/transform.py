"""Shape and data-movement ops: reshape, transpose, concatenate, split, slices, gathers, layouts."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ..errors import TidlxTypeError
from ..op import define_op
from ..types import TensorType, TupleType
from ._rel import (INT_DTYPES, Layout, broadcast_shapes, check_choice, check_dtype, check_dtype_name, int_tuple,
                   normalize_axes, normalize_axis, positive, same_dtype, set_int_tuples, tensor_arg, tuple_arg)


# --- reshape --------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReshapeAttrs:
    newshape: tuple = ()
    allowzero: bool = False

    def __post_init__(self):
        set_int_tuples(self, "newshape")


def infer_reshape(ishape, newshape, allowzero: bool = False) -> tuple:
    """Relay's reshape rule with its special values:
    0 copies the input dim, -1 is inferred, -2 copies all remaining dims,
    -3 merges the next two input dims, -4 splits one input dim into the next two values."""
    newshape = int_tuple(newshape, "newshape")
    out = []
    infer_at = None
    src = 0
    i = 0

    def take(n: int, code: int):
        if src + n > len(ishape):
            raise TidlxTypeError(f"newshape {list(newshape)}: special value {code} refers past the "
                                 f"input's {len(ishape)} dims")

    while i < len(newshape):
        v = newshape[i]
        if v > 0 or (v == 0 and allowzero):
            out.append(v)
            src += 1
        elif v == 0:
            take(1, 0)
            out.append(ishape[src])
            src += 1
        elif v == -1:
            if infer_at is not None:
                raise TidlxTypeError(f"newshape {list(newshape)} has more than one -1")
            infer_at = len(out)
            out.append(1)
            src += 1
        elif v == -2:
            out.extend(ishape[src:])
            src = len(ishape)
        elif v == -3:
            take(2, -3)
            out.append(ishape[src] * ishape[src + 1])
            src += 2
        elif v == -4:
            if i + 2 >= len(newshape):
                raise TidlxTypeError(f"newshape {list(newshape)}: -4 must be followed by two values")
            take(1, -4)
            d1, d2 = newshape[i + 1], newshape[i + 2]
            dim = ishape[src]
            if d1 == -1 and d2 == -1 or d1 < -1 or d2 < -1 or d1 == 0 or d2 == 0:
                raise TidlxTypeError(f"newshape {list(newshape)}: -4 needs two positive values, at most one -1")
            if d1 == -1:
                d1 = dim // d2
            elif d2 == -1:
                d2 = dim // d1
            if d1 * d2 != dim:
                raise TidlxTypeError(f"newshape {list(newshape)}: -4 splits dim {dim} into {d1} x {d2}")
            out += [d1, d2]
            src += 1
            i += 2
        else:
            raise TidlxTypeError(f"newshape {list(newshape)} has an invalid value {v}")
        i += 1
    total = math.prod(ishape)
    if infer_at is not None:
        known = math.prod(out)
        if known == 0 or total % known:
            raise TidlxTypeError(f"cannot reshape {tuple(ishape)} ({total} elements) to {list(newshape)}: "
                                 f"-1 cannot be inferred")
        out[infer_at] = total // known
    if math.prod(out) != total:
        raise TidlxTypeError(f"cannot reshape {tuple(ishape)} ({total} elements) to {tuple(out)} "
                             f"({math.prod(out)} elements)")
    return tuple(out)


def reshape_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    return TensorType(infer_reshape(data.shape, attrs.newshape, attrs.allowzero), data.dtype)


define_op("reshape", num_inputs=1, attrs=ReshapeAttrs, type_rel=reshape_rel, arg_names=("data",),
            pattern="injective")


# --- transpose, squeeze, expand_dims, reverse -------------------------------------------------

@dataclass(frozen=True)
class TransposeAttrs:
    axes: Optional[tuple] = None

    def __post_init__(self):
        set_int_tuples(self, "axes")


def transpose_axes(ndim: int, axes) -> tuple:
    if axes is None or len(axes) == 0:
        return tuple(reversed(range(ndim)))
    axes = int_tuple(axes, "axes")
    if len(axes) != ndim:
        raise TidlxTypeError(f"axes {list(axes)} must list each of the {ndim} axes once")
    return normalize_axes(axes, ndim, "axes")


def transpose_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    perm = transpose_axes(data.ndim, attrs.axes)
    return TensorType(tuple(data.shape[a] for a in perm), data.dtype)


define_op("transpose", num_inputs=1, attrs=TransposeAttrs, type_rel=transpose_rel, arg_names=("data",),
            pattern="injective")


@dataclass(frozen=True)
class SqueezeAttrs:
    axis: Optional[tuple] = None

    def __post_init__(self):
        set_int_tuples(self, "axis")


def squeeze_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    if attrs.axis is None:
        return TensorType(tuple(d for d in data.shape if d != 1), data.dtype)
    axes = normalize_axes(int_tuple(attrs.axis, "axis"), data.ndim)
    for a in axes:
        if data.shape[a] != 1:
            raise TidlxTypeError(f"cannot squeeze axis {a} of size {data.shape[a]} (only size-1 axes)")
    return TensorType(tuple(d for i, d in enumerate(data.shape) if i not in axes), data.dtype)


define_op("squeeze", num_inputs=1, attrs=SqueezeAttrs, type_rel=squeeze_rel, arg_names=("data",),
            pattern="injective")


@dataclass(frozen=True)
class ExpandDimsAttrs:
    axis: int = 0
    num_newaxis: int = 1


def expand_dims_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    axis = normalize_axis(attrs.axis, data.ndim + 1)
    if isinstance(attrs.num_newaxis, bool) or not isinstance(attrs.num_newaxis, int) or attrs.num_newaxis < 0:
        raise TidlxTypeError(f"num_newaxis must be a non-negative integer, got {attrs.num_newaxis!r}")
    return TensorType(data.shape[:axis] + (1,) * attrs.num_newaxis + data.shape[axis:], data.dtype)


define_op("expand_dims", num_inputs=1, attrs=ExpandDimsAttrs, type_rel=expand_dims_rel, arg_names=("data",),
            pattern="broadcast")


@dataclass(frozen=True)
class ReverseAttrs:
    axis: int = 0


def reverse_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    normalize_axis(attrs.axis, data.ndim)
    return data


define_op("reverse", num_inputs=1, attrs=ReverseAttrs, type_rel=reverse_rel, arg_names=("data",),
            pattern="injective")


# --- concatenate, stack, split --------------------------------------------------------------

@dataclass(frozen=True)
class ConcatenateAttrs:
    axis: int = 0


def concat_shapes(shapes, axis_attr: int) -> tuple:
    """The shape of the concatenation of ``shapes`` along ``axis_attr``."""
    if not shapes:
        raise TidlxTypeError("needs at least one tensor")
    ndim = len(shapes[0])
    if ndim == 0:
        raise TidlxTypeError("cannot concatenate scalars")
    axis = normalize_axis(axis_attr, ndim)
    for k, s in enumerate(shapes[1:], start=1):
        if len(s) != ndim:
            raise TidlxTypeError(f"tensor {k} has rank {len(s)} but tensor 0 has rank {ndim}")
        for d in range(ndim):
            if d != axis and s[d] != shapes[0][d]:
                raise TidlxTypeError(f"tensor {k} has shape {tuple(s)}, which differs from tensor 0's "
                                     f"{tuple(shapes[0])} outside axis {axis_attr}")
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return tuple(out)


def concatenate_rel(arg_types, attrs):
    data = tuple_arg(arg_types, 0, "data")
    dtype = same_dtype(*data.fields) if data.fields else None
    return TensorType(concat_shapes([t.shape for t in data.fields], attrs.axis), dtype)


define_op("concatenate", num_inputs=1, attrs=ConcatenateAttrs, type_rel=concatenate_rel, arg_names=("data",),
            pattern="injective")


@dataclass(frozen=True)
class StackAttrs:
    axis: int = 0


def stack_rel(arg_types, attrs):
    data = tuple_arg(arg_types, 0, "data")
    if not data.fields:
        raise TidlxTypeError("needs at least one tensor")
    dtype = same_dtype(*data.fields)
    first = data.fields[0].shape
    for k, t in enumerate(data.fields[1:], start=1):
        if t.shape != first:
            raise TidlxTypeError(f"tensor {k} has shape {t.shape} but tensor 0 has {first}")
    axis = normalize_axis(attrs.axis, len(first) + 1)
    return TensorType(first[:axis] + (len(data.fields),) + first[axis:], dtype)


define_op("stack", num_inputs=1, attrs=StackAttrs, type_rel=stack_rel, arg_names=("data",),
            pattern="injective")


@dataclass(frozen=True)
class SplitAttrs:
    indices_or_sections: object = 1
    axis: int = 0

    def __post_init__(self):
        if isinstance(self.indices_or_sections, list):
            object.__setattr__(self, "indices_or_sections", tuple(self.indices_or_sections))


def split_sizes(dim: int, indices_or_sections) -> tuple:
    """The sizes of the pieces: an int is a number of equal sections, a tuple the split indices."""
    if isinstance(indices_or_sections, int) and not isinstance(indices_or_sections, bool):
        sections = positive(indices_or_sections, "indices_or_sections")
        if dim % sections:
            raise TidlxTypeError(f"axis of size {dim} cannot be split into {sections} equal sections")
        return (dim // sections,) * sections
    indices = int_tuple(indices_or_sections, "indices_or_sections")
    bounds = (0,) + indices + (dim,)
    for a, b in zip(bounds, bounds[1:]):
        if b <= a:
            raise TidlxTypeError(f"split indices {list(indices)} must be ascending, between 1 and {dim - 1}")
    return tuple(b - a for a, b in zip(bounds, bounds[1:]))


def split_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    axis = normalize_axis(attrs.axis, data.ndim)
    fields = []
    for size in split_sizes(data.shape[axis], attrs.indices_or_sections):
        shape = list(data.shape)
        shape[axis] = size
        fields.append(TensorType(tuple(shape), data.dtype))
    return TupleType(tuple(fields))


define_op("split", num_inputs=1, attrs=SplitAttrs, type_rel=split_rel, arg_names=("data",),
            pattern="injective")


# --- strided_slice --------------------------------------------------------------------------

@dataclass(frozen=True)
class StridedSliceAttrs:
    begin: Optional[tuple] = None
    end: Optional[tuple] = None
    strides: Optional[tuple] = None
    slice_mode: str = "end"
    axes: Optional[tuple] = None

    def __post_init__(self):
        set_int_tuples(self, "begin", "end", "strides", "axes")


def _canonical_index(index: int, extent: int, stride: int) -> int:
    # Negative indices count from the end; then clamp into the range a stride can start/stop at.
    lo, hi = (-1, extent - 1) if stride < 0 else (0, extent)
    if index < 0:
        index += extent
    return min(max(index, lo), hi)


def slice_ranges(shape, attrs) -> list:
    """(begin, end, stride) for every axis of ``shape``, canonicalized like Relay's strided_slice."""
    ndim = len(shape)
    mode = check_choice(attrs.slice_mode, ("end", "size"), "slice_mode")
    begin = int_tuple(attrs.begin, "begin") if attrs.begin is not None else ()
    end = int_tuple(attrs.end, "end") if attrs.end is not None else ()
    strides = int_tuple(attrs.strides, "strides") if attrs.strides is not None else ()
    if attrs.axes is not None:
        axes = normalize_axes(int_tuple(attrs.axes, "axes"), ndim, "axes")
        for name, values in (("begin", begin), ("end", end)):
            if len(values) != len(axes):
                raise TidlxTypeError(f"{name} has {len(values)} values but axes has {len(axes)}")
        if len(strides) > len(axes):
            raise TidlxTypeError(f"strides has {len(strides)} values but axes has {len(axes)}")
    else:
        if len(begin) > ndim or len(end) > ndim or len(strides) > ndim:
            raise TidlxTypeError(f"begin/end/strides have more values ({len(begin)}/{len(end)}/{len(strides)}) "
                                 f"than the data has axes ({ndim})")
        axes = tuple(range(ndim))
    ranges = [(0, d, 1) for d in shape]
    for k, axis in enumerate(axes):
        dim = shape[axis]
        stride = strides[k] if k < len(strides) else 1
        if mode == "size":
            stride = 1
        if stride == 0:
            raise TidlxTypeError(f"stride of axis {axis} is 0")
        if k < len(begin):
            b = _canonical_index(begin[k], dim, stride)
        else:
            b = 0 if stride > 0 else dim - 1
        if mode == "size":
            size = end[k] if k < len(end) else -1
            e = dim if size < 0 else min(b + size, dim)
        elif k < len(end):
            e = _canonical_index(end[k], dim, stride)
        else:
            e = dim if stride > 0 else -1
        ranges[axis] = (b, e, stride)
    return ranges


def strided_slice_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    out = []
    for axis, (b, e, s) in enumerate(slice_ranges(data.shape, attrs)):
        length = -(-(e - b) // s) if s > 0 else -(-(b - e) // -s)
        if length <= 0:
            raise TidlxTypeError(f"slice of axis {axis} (size {data.shape[axis]}) is empty: begin {b}, end {e}, "
                                 f"stride {s} after normalization")
        out.append(length)
    return TensorType(tuple(out), data.dtype)


define_op("strided_slice", num_inputs=1, attrs=StridedSliceAttrs, type_rel=strided_slice_rel,
            arg_names=("data",), pattern="injective")


# --- take, gather, scatter_nd -----------------------------------------------------------------

@dataclass(frozen=True)
class TakeAttrs:
    batch_dims: int = 0
    axis: Optional[int] = None
    mode: str = "clip"


def take_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    indices = tensor_arg(arg_types, 1, "indices")
    check_dtype(indices, INT_DTYPES, "indices")
    check_choice(attrs.mode, ("clip", "wrap", "fast"), "mode")
    if attrs.axis is None:
        return TensorType(indices.shape, data.dtype)
    axis = normalize_axis(attrs.axis, data.ndim)
    batch_dims = attrs.batch_dims
    if batch_dims < 0:
        batch_dims += indices.ndim
    if not 0 <= batch_dims <= min(axis, indices.ndim):
        raise TidlxTypeError(f"batch_dims={attrs.batch_dims} must be between 0 and min(axis, rank of "
                             f"indices) = {min(axis, indices.ndim)}")
    if data.shape[:batch_dims] != indices.shape[:batch_dims]:
        raise TidlxTypeError(f"the first {batch_dims} dims of data {data.shape} and indices {indices.shape} "
                             f"differ")
    return TensorType(data.shape[:axis] + indices.shape[batch_dims:] + data.shape[axis + 1:], data.dtype)


define_op("take", num_inputs=2, attrs=TakeAttrs, type_rel=take_rel, arg_names=("data", "indices"),
            pattern="injective")


@dataclass(frozen=True)
class GatherAttrs:
    axis: int = 0


def gather_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    indices = tensor_arg(arg_types, 1, "indices")
    check_dtype(indices, INT_DTYPES, "indices")
    axis = normalize_axis(attrs.axis, data.ndim)
    if indices.ndim != data.ndim:
        raise TidlxTypeError(f"indices must have the rank of data ({data.ndim}), got {indices.shape}")
    for d in range(data.ndim):
        if d != axis and indices.shape[d] > data.shape[d]:
            raise TidlxTypeError(f"indices {indices.shape} exceed data {data.shape} on axis {d}")
    return TensorType(indices.shape, data.dtype)


define_op("gather", num_inputs=2, attrs=GatherAttrs, type_rel=gather_rel, arg_names=("data", "indices"),
            pattern="injective")


@dataclass(frozen=True)
class ScatterNDAttrs:
    mode: str = "update"


def scatter_nd_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    indices = tensor_arg(arg_types, 1, "indices")
    updates = tensor_arg(arg_types, 2, "updates")
    check_dtype(indices, INT_DTYPES, "indices")
    check_choice(attrs.mode, ("update", "add", "mul", "min", "max"), "mode")
    if updates.dtype != data.dtype:
        raise TidlxTypeError(f"updates have dtype {updates.dtype} but data has {data.dtype}")
    if indices.ndim < 1:
        raise TidlxTypeError("indices must have at least one dimension (M, ...)")
    m = indices.shape[0]
    if m > data.ndim:
        raise TidlxTypeError(f"indices address {m} axes but data has rank {data.ndim}")
    want = indices.shape[1:] + data.shape[m:]
    if updates.shape != want:
        raise TidlxTypeError(f"updates must have shape {want} (indices.shape[1:] + data.shape[{m}:]), "
                             f"got {updates.shape}")
    return data


define_op("scatter_nd", num_inputs=3, attrs=ScatterNDAttrs, type_rel=scatter_nd_rel,
            arg_names=("data", "indices", "updates"))


# --- broadcast_to, tile, creation ops, shape_of ------------------------------------------------

@dataclass(frozen=True)
class InitOpAttrs:
    """TVM's attrs of broadcast_to, zeros, ones and full."""
    shape: Optional[tuple] = None
    dtype: str = ""

    def __post_init__(self):
        set_int_tuples(self, "shape")


def _init_shape(attrs) -> tuple:
    if attrs.shape is None:
        raise TidlxTypeError("the shape attribute is required")
    shape = int_tuple(attrs.shape, "shape")
    if any(d < 0 for d in shape):
        raise TidlxTypeError(f"shape {list(shape)} has a negative dim")
    return shape


def broadcast_to_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    shape = _init_shape(attrs)
    try:
        out = broadcast_shapes(data.shape, shape)
    except TidlxTypeError:
        out = None
    if out != shape:
        raise TidlxTypeError(f"data of shape {data.shape} cannot be broadcast to {shape}")
    return TensorType(shape, data.dtype)


define_op("broadcast_to", num_inputs=1, attrs=InitOpAttrs, type_rel=broadcast_to_rel, arg_names=("data",),
            pattern="broadcast")


def init_rel(arg_types, attrs):
    dtype = check_dtype_name(attrs.dtype or "float32", "dtype")
    return TensorType(_init_shape(attrs), dtype)


define_op("zeros", num_inputs=0, attrs=InitOpAttrs, type_rel=init_rel, pattern="elemwise")
define_op("ones", num_inputs=0, attrs=InitOpAttrs, type_rel=init_rel, pattern="elemwise")


def full_rel(arg_types, attrs):
    fill = tensor_arg(arg_types, 0, "fill_value")
    if fill.ndim != 0:
        raise TidlxTypeError(f"fill_value must be a scalar, got shape {fill.shape}")
    dtype = check_dtype_name(attrs.dtype or fill.dtype, "dtype")
    return TensorType(_init_shape(attrs), dtype)


define_op("full", num_inputs=1, attrs=InitOpAttrs, type_rel=full_rel, arg_names=("fill_value",),
            pattern="elemwise")


def full_like_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    fill = tensor_arg(arg_types, 1, "fill_value")
    if fill.ndim != 0:
        raise TidlxTypeError(f"fill_value must be a scalar, got shape {fill.shape}")
    return data


define_op("full_like", num_inputs=2, type_rel=full_like_rel, arg_names=("data", "fill_value"),
            pattern="elemwise")


@dataclass(frozen=True)
class TileAttrs:
    reps: tuple = ()

    def __post_init__(self):
        set_int_tuples(self, "reps")


def tile_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    reps = int_tuple(attrs.reps, "reps")
    if not reps:
        raise TidlxTypeError("reps must not be empty")
    if any(r <= 0 for r in reps):
        raise TidlxTypeError(f"reps {list(reps)} must be positive")
    ndim = max(data.ndim, len(reps))
    shape = (1,) * (ndim - data.ndim) + data.shape
    reps = (1,) * (ndim - len(reps)) + reps
    return TensorType(tuple(d * r for d, r in zip(shape, reps)), data.dtype)


define_op("tile", num_inputs=1, attrs=TileAttrs, type_rel=tile_rel, arg_names=("data",), pattern="injective")


@dataclass(frozen=True)
class ShapeOfAttrs:
    dtype: str = "int32"


def shape_of_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    dtype = check_dtype_name(attrs.dtype, "dtype", INT_DTYPES)
    return TensorType((data.ndim,), dtype)


define_op("shape_of", num_inputs=1, attrs=ShapeOfAttrs, type_rel=shape_of_rel, arg_names=("data",))


# --- layout_transform -------------------------------------------------------------------------

@dataclass(frozen=True)
class LayoutTransformAttrs:
    src_layout: str = ""
    dst_layout: str = ""


def layout_transform_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    src, dst = Layout(attrs.src_layout), Layout(attrs.dst_layout)
    if sorted(src.primal) != sorted(dst.primal):
        raise TidlxTypeError(f"src_layout '{src.name}' and dst_layout '{dst.name}' have different axes")
    if data.ndim != src.ndim:
        raise TidlxTypeError(f"data has rank {data.ndim} but src_layout '{src.name}' has {src.ndim} axes")
    return TensorType(dst.shape_of(src.primal_sizes(data.shape)), data.dtype)


define_op("layout_transform", num_inputs=1, attrs=LayoutTransformAttrs, type_rel=layout_transform_rel,
            arg_names=("data",), pattern="injective")
