"""Convolutions, matrix products, normalization, softmax, padding and pixel shuffles.

Convolutions run in NCHW/OIHW (other layouts are transposed there and back, _layout.py);
normalizations follow the reference kernels' formulas step by step (emulator/reference/op_nn.py:
batch_norm as ``x * scale + shift``, the others as ``(x - mean) / sqrt(var + eps)``) so the
float roundings agree.
"""

from __future__ import annotations

from ....ir.ops._rel import expand_padding
from ..facet import lowers
from ._layout import along, permute_from, permute_to


def _out_dtype(call):
    return call.checked_type.dtype


@lowers("nn.conv2d")
def conv2d(ctx, call, args):
    a = call.attrs
    data = permute_to(ctx, args[0], a.data_layout, "NCHW")
    weight = permute_to(ctx, args[1], a.kernel_layout, "OIHW")
    out = ctx.emit(ctx.op.nn.conv2d(data, weight, strides=a.strides, padding=expand_padding(a.padding),
                                    dilation=a.dilation, groups=a.groups, out_dtype=_out_dtype(call)))
    return permute_from(ctx, out, "NCHW", a.out_layout or a.data_layout)


@lowers("nn.conv2d_transpose")
def conv2d_transpose(ctx, call, args):
    a = call.attrs
    data = permute_to(ctx, args[0], a.data_layout, "NCHW")
    weight = permute_to(ctx, args[1], a.kernel_layout, "IOHW")
    out = ctx.emit(ctx.op.nn.conv2d_transpose(
        data, weight, strides=a.strides, padding=expand_padding(a.padding), output_padding=a.output_padding,
        dilation=a.dilation, groups=a.groups, out_dtype=_out_dtype(call)))
    return permute_from(ctx, out, "NCHW", a.out_layout or a.data_layout)


@lowers("nn.deformable_conv2d")
def deformable_conv2d(ctx, call, args):
    """TE, as the reference (emulator/reference/op_deformable_conv.py): each tap samples the input
    bilinearly at its offset position, each of the four corners outside the image reading 0; the
    sampled columns are multiplied by the weights per group."""
    a = call.attrs
    te, tir = ctx.te, ctx.tir
    x, offset, weight = args
    n, c, h, w = ctx.shape(x)
    o, cg, kh, kw = ctx.shape(weight)
    oh, ow = ctx.shape(offset)[2:]
    (sh, sw), (dh, dw) = a.strides, a.dilation
    pt, pl, _, _ = expand_padding(a.padding)
    per_group = c // a.deformable_groups
    dtype = _out_dtype(call)

    def compute(tx, toff, tw):
        def sample(b, ch, ki, kj, y, q):
            g = ch // per_group
            k = (g * kh + ki) * kw + kj
            sy = (y * sh - pt + ki * dh).astype(dtype) + toff(b, 2 * k, y, q)
            sx = (q * sw - pl + kj * dw).astype(dtype) + toff(b, 2 * k + 1, y, q)
            y0, x0 = tir.floor(sy), tir.floor(sx)
            fy, fx = sy - y0, sx - x0
            iy, ix = y0.astype("int32"), x0.astype("int32")
            total = tir.const(0, dtype)
            for cy, wy in ((iy, 1 - fy), (iy + 1, fy)):
                for cx, wx in ((ix, 1 - fx), (ix + 1, fx)):
                    inside = tir.all(cy >= 0, cy < h, cx >= 0, cx < w)
                    v = tx(b, ch, tir.max(tir.min(cy, h - 1), 0), tir.max(tir.min(cx, w - 1), 0))
                    total = total + tir.Select(inside, v * wy * wx, tir.const(0, dtype))
            return total

        cols = te.compute((n, c, kh, kw, oh, ow), sample, name="deformable_columns")
        rc, ri, rj = te.reduce_axis((0, cg), "rc"), te.reduce_axis((0, kh), "ri"), te.reduce_axis((0, kw), "rj")
        per_out = o // a.groups
        return te.compute((n, o, oh, ow), lambda b, oc, y, q: te.sum(
            tw(oc, rc, ri, rj) * cols(b, (oc // per_out) * cg + rc, ri, rj, y, q), axis=[rc, ri, rj]),
            name="deformable_conv2d")
    return ctx.emit_te(compute, x, offset, weight)


@lowers("nn.dense")
def dense(ctx, call, args):
    x, w = args
    return ctx.op.matmul(x, ctx.emit(ctx.op.permute_dims(w, [1, 0])), out_dtype=_out_dtype(call))


@lowers("nn.matmul")
def matmul(ctx, call, args):
    a, b = args
    if call.attrs.transpose_a:
        nd = len(ctx.shape(a))
        a = ctx.emit(ctx.op.permute_dims(a, list(range(nd - 2)) + [nd - 1, nd - 2]))
    if call.attrs.transpose_b:
        b = ctx.emit(ctx.op.permute_dims(b, [1, 0]))
    return ctx.op.matmul(a, b, out_dtype=_out_dtype(call))


@lowers("nn.batch_matmul")
def batch_matmul(ctx, call, args):
    a, b = args
    if call.attrs.transpose_a:
        a = ctx.emit(ctx.op.permute_dims(a, [0, 2, 1]))
    if call.attrs.transpose_b:
        b = ctx.emit(ctx.op.permute_dims(b, [0, 2, 1]))
    return ctx.op.matmul(a, b, out_dtype=_out_dtype(call))


@lowers("nn.bias_add")
def bias_add(ctx, call, args):
    x, b = args
    ndim = len(ctx.shape(x))
    return ctx.op.add(x, along(ctx, b, call.attrs.axis % ndim, ndim))


@lowers("nn.batch_norm")
def batch_norm(ctx, call, args):
    x, gamma, beta, mean, var = args
    a = call.attrs
    dtype, ndim = ctx.dtype(x), len(ctx.shape(x))
    op = ctx.op
    scale = ctx.emit(op.divide(ctx.scalar(1, dtype),
                               ctx.emit(op.sqrt(ctx.emit(op.add(var, ctx.scalar(a.epsilon, dtype)))))))
    if a.scale:
        scale = ctx.emit(op.multiply(scale, gamma))
    shifted_mean = ctx.emit(op.multiply(mean, scale))
    shift = ctx.emit(op.subtract(beta, shifted_mean)) if a.center else ctx.emit(op.negative(shifted_mean))
    axis = a.axis % ndim
    y = ctx.emit(op.add(ctx.emit(op.multiply(x, along(ctx, scale, axis, ndim))), along(ctx, shift, axis, ndim)))
    return ctx.relax.Tuple([y, mean, var])


def _normalize(ctx, x, axes, eps):
    """(x - mean) / sqrt(var + eps) over ``axes``, as the reference computes it."""
    op = ctx.op
    dtype = ctx.dtype(x)
    mean = ctx.emit(op.mean(x, axes, keepdims=True))
    centered = ctx.emit(op.subtract(x, mean))
    var = ctx.emit(op.mean(ctx.emit(op.multiply(centered, centered)), axes, keepdims=True))
    y = ctx.emit(op.divide(centered, ctx.emit(op.sqrt(ctx.emit(op.add(var, ctx.scalar(eps, dtype)))))))
    return y


def _affine(ctx, y, gamma, beta, axis, center, scale):
    ndim = len(ctx.shape(y))
    if scale:
        y = ctx.emit(ctx.op.multiply(y, along(ctx, gamma, axis, ndim)))
    if center:
        y = ctx.emit(ctx.op.add(y, along(ctx, beta, axis, ndim)))
    return y


@lowers("nn.layer_norm")
def layer_norm(ctx, call, args):
    x, gamma, beta = args
    a = call.attrs
    axis = a.axis % len(ctx.shape(x))
    y = _normalize(ctx, x, [axis], a.epsilon)
    return _affine(ctx, y, gamma, beta, axis, a.center, a.scale)


@lowers("nn.instance_norm")
def instance_norm(ctx, call, args):
    x, gamma, beta = args
    a = call.attrs
    ndim = len(ctx.shape(x))
    axis = a.axis % ndim
    axes = [k for k in range(1, ndim) if k != axis]
    y = _normalize(ctx, x, axes, a.epsilon)
    return _affine(ctx, y, gamma, beta, axis, a.center, a.scale)


@lowers("nn.group_norm")
def group_norm(ctx, call, args):
    x, gamma, beta = args
    a = call.attrs
    shape = ctx.shape(x)
    axis = a.axis % len(shape)
    groups = a.num_groups
    grouped_shape = shape[:axis] + (groups, shape[axis] // groups) + shape[axis + 1:]
    grouped = ctx.emit(ctx.op.reshape(x, grouped_shape))
    axes = [k for k in range(1, len(grouped_shape)) if k != axis]
    y = _normalize(ctx, grouped, axes, a.epsilon)
    y = ctx.emit(ctx.op.reshape(y, shape))
    return _affine(ctx, y, gamma, beta, axis, a.center, a.scale)


@lowers("nn.lrn")
def lrn(ctx, call, args):
    a = call.attrs
    x = args[0]
    shape = ctx.shape(x)
    axis = a.axis % len(shape)
    before = (a.size - 1) // 2  # ONNX's window: floor((size-1)/2) before, the rest after
    te, tir = ctx.te, ctx.tir
    dtype = ctx.dtype(x)

    def compute(t):
        k = te.reduce_axis((0, a.size), name="k")

        def window(*idx):
            c = idx[axis] + k - before
            inside = tir.all(c >= 0, c < shape[axis])
            src = list(idx)
            src[axis] = tir.max(tir.min(c, shape[axis] - 1), 0)
            v = t(*src)
            return te.sum(tir.Select(inside, v * v, tir.const(0, dtype)), axis=k)

        sums = te.compute(shape, window, name="lrn_window")
        return te.compute(shape, lambda *idx: t(*idx) / tir.power(
            tir.const(a.bias, dtype) + tir.const(a.alpha / a.size, dtype) * sums(*idx), tir.const(a.beta, dtype)),
            name="lrn")
    return ctx.emit_te(compute, x)


@lowers("nn.l2_normalize")
def l2_normalize(ctx, call, args):
    x = args[0]
    ndim = len(ctx.shape(x))
    axes = [k % ndim for k in call.attrs.axis] if call.attrs.axis else list(range(ndim))
    op = ctx.op
    sq = ctx.emit(op.sum(ctx.emit(op.multiply(x, x)), axes, keepdims=True))
    return op.divide(x, ctx.emit(op.sqrt(ctx.emit(op.maximum(sq, ctx.scalar(call.attrs.eps, ctx.dtype(x)))))))


@lowers("nn.softmax")
def softmax(ctx, call, args):
    return ctx.op.nn.softmax(args[0], call.attrs.axis)


@lowers("nn.log_softmax")
def log_softmax(ctx, call, args):
    return ctx.op.nn.log_softmax(args[0], call.attrs.axis)


@lowers("nn.pad")
def pad(ctx, call, args):
    """TE: each output element reads its source (constant: the pad value outside; edge: clamped;
    reflect: mirrored without repeating the edge, numpy's 'reflect')."""
    x, value = args
    widths = [tuple(int(v) for v in p) for p in call.attrs.pad_width]
    mode = call.attrs.pad_mode
    if mode not in ("constant", "edge", "reflect"):
        ctx.fail(f"pad_mode '{mode}' has no lowering (constant, edge, reflect)")
    te, tir = ctx.te, ctx.tir
    in_shape = ctx.shape(x)
    out_shape = tuple(int(d) for d in call.checked_type.shape)
    dtype = ctx.dtype(x)

    def compute(t, v):
        def element(*idx):
            src, inside = [], []
            for i, (before, _), n in zip(idx, widths, in_shape):
                s = i - before
                if mode == "constant":
                    inside.append(tir.all(s >= 0, s < n))
                    src.append(tir.max(tir.min(s, n - 1), 0))
                elif mode == "edge":
                    src.append(tir.max(tir.min(s, n - 1), 0))
                else:  # reflect, period 2 * (n - 1)
                    if n == 1:
                        src.append(tir.const(0, s.dtype) * s)
                    else:
                        period = 2 * (n - 1)
                        m = tir.floormod(s, period)
                        src.append(tir.Select(m < n, m, period - m))
            value_here = t(*src)
            if mode == "constant" and inside:
                return tir.Select(tir.all(*inside), value_here, v().astype(dtype) if not v.shape else
                                  v(*([0] * len(v.shape))).astype(dtype))
            return value_here
        return te.compute(out_shape, element, name="pad")
    return ctx.emit_te(compute, x, value)


@lowers("nn.batch_flatten")
def batch_flatten(ctx, call, args):
    return ctx.op.reshape(args[0], tuple(int(d) for d in call.checked_type.shape))


@lowers("nn.dropout")
def dropout(ctx, call, args):
    x = args[0]  # inference: the identity, and an all-ones mask
    return ctx.relax.Tuple([x, ctx.emit(ctx.op.ones_like(x))])


def _nchw(ctx, x, layout):
    return permute_to(ctx, x, layout, "NCHW")


@lowers("nn.depth_to_space")
def depth_to_space(ctx, call, args):
    a = call.attrs
    x = _nchw(ctx, args[0], a.layout)
    n, c, h, w = ctx.shape(x)
    b = a.block_size
    op = ctx.op
    if a.mode == "DCR":
        y = ctx.emit(op.permute_dims(ctx.emit(op.reshape(x, (n, b, b, c // (b * b), h, w))), [0, 3, 4, 1, 5, 2]))
    else:
        y = ctx.emit(op.permute_dims(ctx.emit(op.reshape(x, (n, c // (b * b), b, b, h, w))), [0, 1, 4, 2, 5, 3]))
    y = ctx.emit(op.reshape(y, (n, c // (b * b), h * b, w * b)))
    return permute_from(ctx, y, "NCHW", a.layout)


@lowers("nn.space_to_depth")
def space_to_depth(ctx, call, args):
    a = call.attrs
    x = _nchw(ctx, args[0], a.layout)
    n, c, h, w = ctx.shape(x)
    b = a.block_size
    op = ctx.op
    y = ctx.emit(op.reshape(x, (n, c, h // b, b, w // b, b)))
    y = ctx.emit(op.permute_dims(y, [0, 1, 3, 5, 2, 4] if a.mode == "CRD" else [0, 3, 5, 1, 2, 4]))
    y = ctx.emit(op.reshape(y, (n, c * b * b, h // b, w // b)))
    return permute_from(ctx, y, "NCHW", a.layout)
