"""Reductions: sum/mean/max/min/prod/all/any (axis, keepdims, exclude), argmax/argmin, variance.

Float sums accumulate in the input dtype with numpy's pairwise summation (float32 for float
models), close to onnxruntime's float32 accumulation.
"""

from __future__ import annotations

import numpy as np

from ...ir.ops.reduce import reduced_axes
from ..registry import kernel
from ._common import out_dtype


def _reduce(fn):
    def run(args, attrs, out_type):
        x = args[0]
        axes = reduced_axes(x.ndim, attrs)
        if not axes:
            return x.copy()
        res = fn(x, axis=axes, keepdims=attrs.keepdims)
        dtype = out_dtype(out_type)
        return res if getattr(res, "dtype", None) == dtype else np.asarray(res).astype(dtype)
    return run


def _sum(x, axis, keepdims):
    return np.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)


def _prod(x, axis, keepdims):
    return np.prod(x, axis=axis, keepdims=keepdims, dtype=x.dtype)


def _mean(x, axis, keepdims):
    if x.dtype.kind == "f":
        return np.mean(x, axis=axis, keepdims=keepdims, dtype=x.dtype)
    # Integer means truncate toward zero (TVM's C-semantics division).
    return np.trunc(np.mean(x, axis=axis, keepdims=keepdims, dtype=np.float64))


for _name, _fn in (("sum", _sum), ("mean", _mean), ("max", np.max), ("min", np.min), ("prod", _prod),
                   ("all", np.all), ("any", np.any)):
    kernel(_name)(_reduce(_fn))


def _arg_reduce(find_max: bool):
    def run(args, attrs, out_type):
        x = args[0]
        axes = reduced_axes(x.ndim, attrs)
        kept = [a for a in range(x.ndim) if a not in axes]
        # Move the reduced axes last and flatten them: the index is into that flattened block.
        moved = x.transpose(kept + list(axes))
        flat = moved.reshape(moved.shape[:len(kept)] + (-1,))
        if attrs.select_last_index:
            flat = flat[..., ::-1]
        idx = np.argmax(flat, axis=-1) if find_max else np.argmin(flat, axis=-1)
        if attrs.select_last_index:
            idx = flat.shape[-1] - 1 - idx
        if attrs.keepdims:
            idx = idx.reshape(tuple(1 if a in axes else x.shape[a] for a in range(x.ndim)))
        return np.asarray(idx).astype(out_dtype(out_type))
    return run


kernel("argmax")(_arg_reduce(True))
kernel("argmin")(_arg_reduce(False))


@kernel("variance")
def variance(args, attrs, out_type):
    x, mean = args
    axes = reduced_axes(x.ndim, attrs)
    kept_shape = tuple(1 if a in axes else d for a, d in enumerate(x.shape))
    centered = x - mean.reshape(kept_shape)
    count = 1
    for a in axes:
        count *= x.shape[a]
    total = np.sum(np.square(centered), axis=axes, keepdims=attrs.keepdims, dtype=x.dtype)
    divisor = count - 1 if attrs.unbiased else count
    return (total / x.dtype.type(max(divisor, 1))).astype(out_dtype(out_type))


@kernel("topk")
def topk(args, attrs, out_type):
    """The k largest (or, with ``is_ascend``, smallest) along the axis, best first; equal values
    keep their order along the axis (the lower index first, as ONNX's TopK). The same order with
    ``sorted=False``, where ONNX leaves it open."""
    x = args[0]
    axis = attrs.axis % x.ndim
    n = x.shape[axis]
    if attrs.is_ascend:
        order = np.argsort(x, axis=axis, kind="stable")
    else:
        # A stable ascending sort of the reversed axis, read backwards: descending, ties by index.
        order = n - 1 - np.flip(np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable"), axis=axis)
    indices = np.take(order, np.arange(attrs.k), axis=axis)
    values = np.take_along_axis(x, indices, axis=axis)
    indices = indices.astype(attrs.dtype)
    if attrs.ret_type == "values":
        return values
    if attrs.ret_type == "indices":
        return indices
    return values, indices
