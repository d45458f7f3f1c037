"""Shape and data movement: reshape, transpose, slices, concatenate/split, gathers, scatters,
broadcasts, creation ops and layout transforms.

Shape-only ops return numpy views where possible (kernels never write into their inputs).
"""

from __future__ import annotations

import numpy as np

from ...ir.errors import TidlxError
from ...ir.ops._rel import Layout
from ...ir.ops.transform import slice_ranges, split_sizes
from ..registry import kernel
from ._common import out_dtype


def _reshape_to_type(args, attrs, out_type):
    return args[0].reshape(out_type.shape)


for _name in ("reshape", "squeeze", "expand_dims"):
    kernel(_name)(_reshape_to_type)


@kernel("transpose")
def transpose(args, attrs, out_type):
    x = args[0]
    if not attrs.axes:
        return x.transpose()
    return x.transpose([a % x.ndim for a in attrs.axes])


@kernel("reverse")
def reverse(args, attrs, out_type):
    return np.flip(args[0], axis=attrs.axis)


@kernel("concatenate")
def concatenate(args, attrs, out_type):
    return np.concatenate(args[0], axis=attrs.axis)


@kernel("stack")
def stack(args, attrs, out_type):
    return np.stack(args[0], axis=attrs.axis)


@kernel("split")
def split(args, attrs, out_type):
    x = args[0]
    axis = attrs.axis % x.ndim
    sizes = split_sizes(x.shape[axis], attrs.indices_or_sections)
    bounds = np.cumsum(sizes)[:-1]
    return tuple(np.split(x, bounds, axis=axis))


@kernel("strided_slice")
def strided_slice(args, attrs, out_type):
    x = args[0]
    index = []
    for b, e, s in slice_ranges(x.shape, attrs):
        # A canonical end of -1 with a negative stride means "through index 0".
        index.append(slice(b, None if e < 0 else e, s))
    return x[tuple(index)]


def _wrap_indices(indices: np.ndarray, size: int, mode: str, what: str) -> np.ndarray:
    if mode == "clip":
        return np.clip(indices, 0, size - 1)
    if mode == "wrap":
        return np.mod(indices, size)
    # "fast" promises in-range indices; negative ones count from the end (ONNX Gather).
    bad = (indices < -size) | (indices >= size)
    if bad.any():
        first = indices[bad].reshape(-1)[0]
        raise TidlxError(f"{what}: index {int(first)} is out of range for an axis of size {size} (mode 'fast')")
    return np.where(indices < 0, indices + size, indices)


@kernel("take")
def take(args, attrs, out_type):
    data, indices = args
    if attrs.axis is None:
        flat = data.reshape(-1)
        return flat[_wrap_indices(indices, flat.size, attrs.mode, "take")]
    axis = attrs.axis % data.ndim
    idx = _wrap_indices(indices, data.shape[axis], attrs.mode, "take")
    batch_dims = attrs.batch_dims % indices.ndim if attrs.batch_dims < 0 else attrs.batch_dims
    if batch_dims == 0:
        return np.take(data, idx, axis=axis)
    out = np.empty(out_type.shape, data.dtype)
    for b in np.ndindex(*data.shape[:batch_dims]):
        out[b] = np.take(data[b], idx[b], axis=axis - batch_dims)
    return out


@kernel("gather")
def gather(args, attrs, out_type):
    data, indices = args
    axis = attrs.axis % data.ndim
    size = data.shape[axis]
    idx = _wrap_indices(indices, size, "fast", "gather")
    # take_along_axis needs equal shapes off the axis; indices may be smaller there.
    view = data[tuple(slice(0, n) if a != axis else slice(None) for a, n in enumerate(indices.shape))]
    return np.take_along_axis(view, idx.astype(np.intp, copy=False), axis=axis)


@kernel("scatter_nd")
def scatter_nd(args, attrs, out_type):
    data, indices, updates = args
    m = indices.shape[0]
    out = data.copy()
    index = tuple(indices[i].reshape(-1).astype(np.intp) for i in range(m))
    for axis, ix in enumerate(index):
        size = data.shape[axis]
        if ix.size and (ix.min() < -size or ix.max() >= size):
            raise TidlxError(f"scatter_nd: an index on axis {axis} is out of range for size {size}")
    upd = updates.reshape((-1,) + data.shape[m:])
    if attrs.mode == "update":
        out[index] = upd
    elif attrs.mode == "add":
        np.add.at(out, index, upd)
    elif attrs.mode == "mul":
        np.multiply.at(out, index, upd)
    elif attrs.mode == "min":
        np.minimum.at(out, index, upd)
    elif attrs.mode == "max":
        np.maximum.at(out, index, upd)
    else:
        raise TidlxError(f"scatter_nd: unknown mode '{attrs.mode}'")
    return out


@kernel("broadcast_to")
def broadcast_to(args, attrs, out_type):
    return np.broadcast_to(args[0], out_type.shape)


@kernel("zeros")
def zeros(args, attrs, out_type):
    return np.zeros(out_type.shape, out_dtype(out_type))


@kernel("ones")
def ones(args, attrs, out_type):
    return np.ones(out_type.shape, out_dtype(out_type))


@kernel("full")
def full(args, attrs, out_type):
    return np.full(out_type.shape, args[0], out_dtype(out_type))


@kernel("full_like")
def full_like(args, attrs, out_type):
    data, fill = args
    return np.full(data.shape, fill, data.dtype)


@kernel("tile")
def tile(args, attrs, out_type):
    return np.tile(args[0], attrs.reps)


@kernel("shape_of")
def shape_of(args, attrs, out_type):
    return np.array(args[0].shape, out_dtype(out_type))


def _to_primal(x: np.ndarray, layout: Layout) -> np.ndarray:
    """``x`` in ``layout`` (e.g. NCHW4c) as a tensor of the primal axes in layout order (NCHW)."""
    sizes = layout.primal_sizes(x.shape)
    order = []
    for i, (letter, factor) in enumerate(layout.axes):
        if factor is None:
            order.append(i)
            sub = layout.index(letter.lower())
            if sub >= 0:
                order.append(sub)
    return x.transpose(order).reshape([sizes[c] for c in layout.primal])


def _from_primal(p: np.ndarray, layout: Layout) -> np.ndarray:
    """A primal-order tensor (axes in ``layout.primal`` order) split and permuted into ``layout``."""
    shape, letters = [], []
    for letter, size in zip(layout.primal, p.shape):
        factor = layout.sub_factor(letter)
        if layout.has_split(letter):
            shape += [size // factor, factor]
            letters += [letter, letter.lower()]
        else:
            shape.append(size)
            letters.append(letter)
    split = p.reshape(shape)
    return split.transpose([letters.index(a) for a, _ in layout.axes])


@kernel("layout_transform")
def layout_transform(args, attrs, out_type):
    src, dst = Layout(attrs.src_layout), Layout(attrs.dst_layout)
    primal = _to_primal(args[0], src)
    # primal axes from src order to dst order
    primal = primal.transpose([src.primal.index(c) for c in dst.primal])
    return np.ascontiguousarray(_from_primal(primal, dst))
