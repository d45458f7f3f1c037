"""nn.lstm in Relax, unrolled over the (static) sequence as the reference kernel walks it
(emulator/reference/op_rnn.py): per direction one matmul for the input projections of all steps,
then per step h @ R^T, the optional clip, the four gates (i, o, f, c) and the state update; each
direction's steps are stacked into Y at their own positions.

nn.dynamic_quantize_lstm the same way, each matrix product as the reference computes it: the
float operand quantized to uint8 over its own range (scale and zero point in float32), the
int32 product with the weight minus its zero point, then float32 times (scale * weight scale)."""

from __future__ import annotations

from ..facet import lowers


def _index(ctx, x, axis: int, i: int):
    """``x[i]`` along ``axis`` (the axis dropped)."""
    op = ctx.op
    part = ctx.emit(op.strided_slice(x, axes=[axis], begin=[i], end=[i + 1]))
    shape = [d for k, d in enumerate(ctx.shape(x)) if k != axis]
    return ctx.emit(op.reshape(part, shape))


def _cell(ctx, pre, c, clip):
    """One LSTM step from its gate pre-activations (ONNX's i, o, f, c order; ``clip`` or None): the new
    hidden and cell states."""
    op = ctx.op
    if clip is not None:
        pre = ctx.emit(op.clip(pre, -float(clip), float(clip)))
    parts = ctx.emit(op.split(pre, 4, axis=1))
    i, o, f, g = (ctx.emit(ctx.relax.TupleGetItem(parts, k)) for k in range(4))
    i, o, f = (ctx.emit(op.sigmoid(v)) for v in (i, o, f))
    g = ctx.emit(op.tanh(g))
    c = ctx.emit(op.add(ctx.emit(op.multiply(f, c)), ctx.emit(op.multiply(i, g))))
    return ctx.emit(op.multiply(o, ctx.emit(op.tanh(c)))), c


def _direction(ctx, projected, h, c, seq, reverse, clip, recurrent, bias=None):
    """The steps of one direction: gate pre-activations ``projected[t] + recurrent(h)`` (then ``+ bias``
    when given), one ``_cell`` each, in time order or reversed; ``(Y of the direction, last h, last c)``."""
    op = ctx.op
    steps = [None] * seq
    for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
        pre = ctx.emit(op.add(_index(ctx, projected, 0, t), recurrent(h)))
        if bias is not None:
            pre = ctx.emit(op.add(pre, bias))
        h, c = _cell(ctx, pre, c, clip)
        steps[t] = h
    return ctx.emit(op.stack(steps, axis=0)), h, c


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
        y_d, h, c = _direction(ctx, projected, _index(ctx, h0, 0, d), _index(ctx, c0, 0, d), seq, reverse, a.clip,
                               lambda h: ctx.emit(op.matmul(h, r_t)))
        ys.append(y_d)
        hs.append(h)
        cs.append(c)
    y = ctx.emit(op.stack(ys, axis=1))
    return ctx.relax.Tuple([y, ctx.emit(op.stack(hs, axis=0)), ctx.emit(op.stack(cs, axis=0))])


def _quantized_product(ctx, x, weight, weight_scale):
    """x (rows, k) float32 times ``weight`` (k, n) int32 (zero point subtracted): quantized as
    DynamicQuantizeLinear, the int32 product as float32 times float32(scale * weight_scale)."""
    op = ctx.op
    zero, one = ctx.scalar(0, "float32"), ctx.scalar(1, "float32")
    low = ctx.emit(op.minimum(ctx.emit(op.min(x)), zero))
    high = ctx.emit(op.maximum(ctx.emit(op.max(x)), zero))
    scale = ctx.emit(op.where(ctx.emit(op.equal(high, low)), one,
                              ctx.emit(op.divide(ctx.emit(op.subtract(high, low)), ctx.scalar(255, "float32")))))
    zero_point = ctx.emit(op.round(ctx.emit(op.clip(ctx.emit(op.subtract(zero, ctx.emit(op.divide(low, scale)))),
                                                    0.0, 255.0))))
    q = ctx.emit(op.clip(ctx.emit(op.add(ctx.emit(op.round(ctx.emit(op.divide(x, scale)))), zero_point)), 0.0, 255.0))
    shifted = ctx.emit(op.astype(ctx.emit(op.subtract(q, zero_point)), "int32"))
    sums = ctx.emit(op.astype(ctx.emit(op.matmul(shifted, weight, out_dtype="int32")), "float32"))
    return ctx.emit(op.multiply(sums, ctx.emit(op.multiply(scale, weight_scale))))


@lowers("nn.dynamic_quantize_lstm")
def dynamic_quantize_lstm(ctx, call, args):
    x, w, r, b, h0, c0, w_scale, w_zp, r_scale, r_zp = args
    op = ctx.op
    a = call.attrs
    seq, batch, input_size = ctx.shape(x)
    dirs, hidden, gates = ctx.shape(r)
    rows = ctx.emit(op.reshape(x, [seq * batch, input_size]))

    def shifted_weight(weight, zp, d):
        # the weight minus the direction's (first) zero point, in int32
        first = ctx.emit(op.reshape(ctx.emit(op.strided_slice(ctx.emit(op.reshape(zp, [dirs, -1])), axes=[0, 1],
                                                               begin=[d, 0], end=[d + 1, 1])), ()))
        return ctx.emit(op.subtract(ctx.emit(op.astype(_index(ctx, weight, 0, d), "int32")),
                                    ctx.emit(op.astype(first, "int32"))))

    ys, hs, cs = [], [], []
    for d in range(dirs):
        reverse = a.direction == "reverse" or d == 1
        w_d, r_d = shifted_weight(w, w_zp, d), shifted_weight(r, r_zp, d)
        ws_d, rs_d = _index(ctx, w_scale, 0, d), _index(ctx, r_scale, 0, d)
        projected = ctx.emit(op.reshape(_quantized_product(ctx, rows, w_d, ws_d), [seq, batch, gates]))
        b_d = _index(ctx, b, 0, d)
        bias = ctx.emit(op.add(ctx.emit(op.strided_slice(b_d, axes=[0], begin=[0], end=[gates])),
                               ctx.emit(op.strided_slice(b_d, axes=[0], begin=[gates], end=[2 * gates]))))
        y_d, h, c = _direction(ctx, projected, _index(ctx, h0, 0, d), _index(ctx, c0, 0, d), seq, reverse, a.clip,
                               lambda h: _quantized_product(ctx, h, r_d, rs_d), bias)
        ys.append(y_d)
        hs.append(h)
        cs.append(c)
    y = ctx.emit(op.stack(ys, axis=1))
    return ctx.relax.Tuple([y, ctx.emit(op.stack(hs, axis=0)), ctx.emit(op.stack(cs, axis=0))])
