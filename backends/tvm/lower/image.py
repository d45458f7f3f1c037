"""image.resize2d and nn.upsampling with ONNX Resize semantics, as the reference kernel computes
them (emulator/reference/op_image.py): shapes are static, so the input coordinate, taps and
weights of every output row and column are computed at lowering time by the reference's own
formulas and become constants; the TVM code gathers and sums them (rows first, then columns,
in tap order, as the reference does)."""

from __future__ import annotations

import numpy as np

from ....emulator.reference.op_image import cubic_taps, linear_taps, nearest_indices, original_coords
from ..facet import lowers


def _spatial_last(ctx, x, layout: str):
    """``x`` with H and W moved last, and the permutation that undoes it."""
    h, w = layout.find("H"), layout.find("W")
    if h < 0 or w < 0:
        ctx.fail(f"layout '{layout}' has no H and W axes")
    ndim = len(ctx.shape(x))
    perm = [a for a in range(ndim) if a not in (h, w)] + [h, w]
    inverse = list(np.argsort(perm))
    if perm == list(range(ndim)):
        return x, None
    return ctx.emit(ctx.op.permute_dims(x, perm)), inverse


def _separable(ctx, x, ri, rw, ci, cw, work_dtype):
    te = ctx.te
    shape = ctx.shape(x)
    lead, out_h, out_w, in_w = shape[:-2], ri.shape[0], ci.shape[0], shape[-1]
    consts = [ctx.const(ri.astype("int64"), "int64"), ctx.const(rw.astype(work_dtype), work_dtype),
              ctx.const(ci.astype("int64"), "int64"), ctx.const(cw.astype(work_dtype), work_dtype)]

    def compute(t, tri, trw, tci, tcw):
        src = t if t.dtype == work_dtype else te.compute(t.shape, lambda *i: t(*i).astype(work_dtype), name="work")

        def row(*idx):
            *p, o, c = idx
            acc = ctx.tir.const(0, work_dtype)
            for k in range(ri.shape[1]):
                acc = acc + trw[o, k] * src(*p, tri[o, k], c)
            return acc

        mid = te.compute(tuple(lead) + (out_h, in_w), row, name="resize_rows")

        def col(*idx):
            *p, r, o = idx
            acc = tcw[o, 0] * mid(*p, r, tci[o, 0])
            for k in range(1, ci.shape[1]):
                acc = acc + tcw[o, k] * mid(*p, r, tci[o, k])
            return acc

        return te.compute(tuple(lead) + (out_h, out_w), col, name="resize_cols")
    return ctx.emit_te(compute, x, *consts)


def _resize(ctx, x, out_hw, layout, method, mode, rounding, alpha, exclude, extrapolation, roi, out_dtype):
    op = ctx.op
    planes, inverse = _spatial_last(ctx, x, layout)
    in_h, in_w = ctx.shape(planes)[-2:]
    out_h, out_w = out_hw
    ys = original_coords(out_h, in_h, mode, roi[0], roi[2])
    xs = original_coords(out_w, in_w, mode, roi[1], roi[3])
    ndim = len(ctx.shape(planes))
    in_dtype = ctx.dtype(planes)
    if method == "nearest_neighbor":
        if rounding == "":
            rounding = "round" if mode == "align_corners" else "floor"
        rows = ctx.const(nearest_indices(ys, in_h, rounding), "int64")
        cols = ctx.const(nearest_indices(xs, in_w, rounding), "int64")
        out = ctx.emit(op.take(ctx.emit(op.take(planes, rows, axis=ndim - 2, mode="clip")), cols, axis=ndim - 1,
                                   mode="clip"))
    elif method in ("linear", "cubic"):
        if method == "linear":
            (ri, rw), (ci, cw) = linear_taps(ys, in_h), linear_taps(xs, in_w)
        else:
            (ri, rw), (ci, cw) = cubic_taps(ys, in_h, alpha, bool(exclude)), cubic_taps(xs, in_w, alpha, bool(exclude))
        work = "float64" if in_dtype == "float64" else "float32"
        out = _separable(ctx, planes, ri, rw, ci, cw, work)
    else:
        ctx.fail(f"resize method '{method}' has no lowering")
    if mode == "tf_crop_and_resize":
        outside = ((ys < 0) | (ys > in_h - 1))[:, None] | ((xs < 0) | (xs > in_w - 1))[None, :]
        dtype = ctx.dtype(out)
        out = ctx.emit(op.where(ctx.const(outside, "bool"), ctx.scalar(extrapolation, dtype), out))
    if ctx.dtype(out) != out_dtype:
        if out_dtype.startswith(("int", "uint")) and ctx.dtype(out).startswith("float"):
            info = np.iinfo(out_dtype)
            out = ctx.emit(op.clip(ctx.emit(op.round(out)), float(info.min), float(info.max)))
        out = ctx.emit(op.astype(out, out_dtype))
    if inverse is not None:
        out = ctx.emit(op.permute_dims(out, [int(i) for i in inverse]))
    return out


@lowers("image.resize2d")
def resize2d(ctx, call, args):
    a = call.attrs
    size = tuple(a.size) if len(a.size) == 2 else tuple(a.size) * 2
    return _resize(ctx, args[0], size, a.layout, a.method, a.coordinate_transformation_mode, a.rounding_method,
                   a.cubic_alpha, a.cubic_exclude, a.extrapolation_value, a.roi, call.checked_type.dtype)


@lowers("nn.upsampling")
def upsampling(ctx, call, args):
    a = call.attrs
    h, w = a.layout.find("H"), a.layout.find("W")
    shape = call.checked_type.shape
    method = {"nearest_neighbor": "nearest_neighbor", "bilinear": "linear", "bicubic": "cubic"}.get(a.method)
    if method is None:
        ctx.fail(f"upsampling method '{a.method}' has no lowering")
    mode = "align_corners" if a.align_corners else "asymmetric"
    return _resize(ctx, args[0], (shape[h], shape[w]), a.layout, method, mode, "", -0.5, 0, 0.0,
                   (0.0, 0.0, 1.0, 1.0), call.checked_type.dtype)
