"""nn.lstm in Relax, unrolled over the (static) sequence as the reference kernel walks it
(emulator/reference/op_rnn.py): per direction one matmul for the input projections of all steps,
then per step h @ R^T, the optional clip, the four gates (i, o, f, c) and the state update; each
direction's steps are stacked into Y at their own positions."""

from __future__ import annotations

from ..facet import lowers


def _index(ctx, x, axis: int, i: int):
    """``x[i]`` along ``axis`` (the axis dropped)."""
    op = ctx.op
    part = ctx.emit(op.strided_slice(x, axes=[axis], begin=[i], end=[i + 1]))
    shape = [d for k, d in enumerate(ctx.shape(x)) if k != axis]
    return ctx.emit(op.reshape(part, shape))


@lowers("nn.lstm")
def lstm(ctx, call, args):
    x, w, r, b, h0, c0 = args
    op = ctx.op
    a = call.attrs
    seq = ctx.shape(x)[0]
    dirs, gates, hidden = ctx.shape(r)
    ys, hs, cs = [], [], []
    for d in range(dirs):
        reverse = a.direction == "reverse" or d == 1
        w_t = ctx.emit(op.permute_dims(_index(ctx, w, 0, d), [1, 0]))
        r_t = ctx.emit(op.permute_dims(_index(ctx, r, 0, d), [1, 0]))
        b_d = _index(ctx, b, 0, d)
        bias = ctx.emit(op.add(ctx.emit(op.strided_slice(b_d, axes=[0], begin=[0], end=[gates])),
                               ctx.emit(op.strided_slice(b_d, axes=[0], begin=[gates], end=[2 * gates]))))
        projected = ctx.emit(op.add(ctx.emit(op.matmul(x, w_t)), bias))
        h, c = _index(ctx, h0, 0, d), _index(ctx, c0, 0, d)
        steps = [None] * seq
        for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
            pre = ctx.emit(op.add(_index(ctx, projected, 0, t), ctx.emit(op.matmul(h, r_t))))
            if a.clip is not None:
                pre = ctx.emit(op.clip(pre, -float(a.clip), float(a.clip)))
            parts = ctx.emit(op.split(pre, 4, axis=1))
            i, o, f, g = (ctx.emit(ctx.relax.TupleGetItem(parts, k)) for k in range(4))
            i, o, f = (ctx.emit(op.sigmoid(v)) for v in (i, o, f))
            g = ctx.emit(op.tanh(g))
            c = ctx.emit(op.add(ctx.emit(op.multiply(f, c)), ctx.emit(op.multiply(i, g))))
            h = ctx.emit(op.multiply(o, ctx.emit(op.tanh(c))))
            steps[t] = h
        ys.append(ctx.emit(op.stack(steps, axis=0)))
        hs.append(h)
        cs.append(c)
    y = ctx.emit(op.stack(ys, axis=1))
    return ctx.relax.Tuple([y, ctx.emit(op.stack(hs, axis=0)), ctx.emit(op.stack(cs, axis=0))])
