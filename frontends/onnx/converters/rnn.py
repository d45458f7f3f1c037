"""Recurrent layers: LSTM -> nn.lstm; com.microsoft.DynamicQuantizeLSTM (onnxruntime's contrib
op) -> nn.dynamic_quantize_lstm.

What nn.lstm computes is ONNX's LSTM with layout 0, the default activations (Sigmoid, Tanh, Tanh)
and no peepholes; other forms are refused by name, for both ops. Absent inputs become zeros: the
bias B, initial_h and initial_c. ``sequence_lens`` imports when it is a constant that gives every
batch entry the full sequence (then it changes nothing).

DynamicQuantizeLSTM's weights are int8 or uint8, (num_directions, input_size, 4 * hidden) and
(num_directions, hidden, 4 * hidden), with a scale and zero point per direction or per column.
Its zero points must be constants that onnxruntime accepts: one value per direction (per-column
ones equal), 0 for int8 weights.
"""

from __future__ import annotations

import numpy as np

from ....ir.ops.rnn import LSTM_DIRECTIONS, num_directions
from ..context import NodeContext
from . import CUSTOM_CONVERTERS, converter

_DEFAULT_ACTIVATIONS = ("Sigmoid", "Tanh", "Tanh")

#: onnxruntime's contrib domain
MS_DOMAIN = "com.microsoft"


def _lstm_common(ctx: NodeContext, r_hidden_axis: int):
    """The checks LSTM and DynamicQuantizeLSTM share; returns (x, direction, clip, hidden and a
    maker of the optional B, initial_h, initial_c)."""
    if int(ctx.attr("layout", 0)) != 0:
        raise ctx.unsupported(f"attribute layout={ctx.attr('layout')} (batch first) is not supported; only "
                              f"layout 0 (seq_length, batch, ...)")
    direction = ctx.attr_choice("direction", "forward", LSTM_DIRECTIONS)
    dirs = num_directions(direction)
    activations = ctx.attr("activations")
    if activations is not None and tuple(activations) != _DEFAULT_ACTIVATIONS * dirs:
        raise ctx.unsupported(f"attribute activations={list(activations)} is not supported; only the default "
                              f"{list(_DEFAULT_ACTIVATIONS * dirs)}")
    if int(ctx.attr("input_forget", 0)) != 0:
        raise ctx.unsupported("attribute input_forget=1 (coupled input and forget gates) is not supported")
    clip = ctx.attr("clip")
    x, r = ctx.input(0, "X"), ctx.input(2, "R")
    if ctx.ndim(x) != 3 or ctx.ndim(r) != 3:
        raise ctx.error(f"X and R must be 3-D, got shapes {ctx.shape(x)} and {ctx.shape(r)}")
    seq, batch = ctx.shape(x)[:2]
    hidden = ctx.shape(r)[r_hidden_axis]
    if ctx.attr("hidden_size") is not None and int(ctx.attr("hidden_size")) != hidden:
        raise ctx.error(f"attribute hidden_size={ctx.attr('hidden_size')} but R has shape {ctx.shape(r)} "
                        f"(hidden size {hidden})")
    dtype = ctx.dtype(x)
    if ctx.has_input(4):
        if not ctx.is_const(4):
            raise ctx.unsupported(f"input 4 (sequence_lens, '{ctx.node.input[4]}') must be a constant (sequences "
                                  f"of per-batch lengths are not supported)")
        lengths = np.asarray(ctx.const(4, "sequence_lens")).reshape(-1)
        if np.any(lengths != seq):
            raise ctx.unsupported(f"sequence_lens {lengths.tolist()} is not supported: only full-length sequences "
                                  f"({seq} steps for every batch entry)")
    if ctx.has_input(7):
        if not (ctx.is_const(7) and not np.any(ctx.const(7, "P"))):
            raise ctx.unsupported("peephole weights (input 7, P) are not supported")

    def optional(i: int, what: str, shape):
        return ctx.input(i, what) if ctx.has_input(i) else ctx.const_expr(np.zeros(shape, dtype))

    states = [optional(3, "B", (dirs, 8 * hidden)), optional(5, "initial_h", (dirs, batch, hidden)),
              optional(6, "initial_c", (dirs, batch, hidden))]
    return x, r, direction, None if clip is None else float(clip), states


@converter("LSTM", produces=("nn.lstm",))
def convert_lstm(ctx: NodeContext):
    x, r, direction, clip, (b, h0, c0) = _lstm_common(ctx, -1)
    out = ctx.call("nn.lstm", x, ctx.input(1, "W"), r, b, h0, c0, direction=direction, clip=clip)
    return [ctx.get(out, 0), ctx.get(out, 1), ctx.get(out, 2)]


def _weight_zero_point(ctx: NodeContext, i: int, what: str):
    if not ctx.is_const(i):
        raise ctx.unsupported(f"input {i} ({what}, '{ctx.node.input[i]}') must be a constant")
    zp = np.asarray(ctx.const(i, what))
    per_direction = zp.reshape(zp.shape[0], -1) if zp.ndim >= 1 else zp.reshape(1, 1)
    if zp.dtype == np.int8 and np.any(per_direction != 0):
        raise ctx.unsupported(f"{what} {zp.tolist()} is not supported: onnxruntime takes int8 weights with zero "
                              f"points 0")
    if np.any(per_direction != per_direction[:, :1]):
        raise ctx.unsupported(f"{what} is not supported: onnxruntime takes one zero point per direction (per-column "
                              f"zero points must be equal)")
    return ctx.input(i, what)


def convert_dynamic_quantize_lstm(ctx: NodeContext):
    for i, what in ((1, "W"), (2, "R"), (8, "W_scale"), (9, "W_zero_point"), (10, "R_scale"),
                    (11, "R_zero_point")):
        if not ctx.has_input(i):
            raise ctx.error(f"input {i} ({what}) is required")
    x, r, direction, clip, (b, h0, c0) = _lstm_common(ctx, 1)
    if ctx.dtype(x) != "float32":
        raise ctx.unsupported(f"input 0 (X) has dtype {ctx.dtype(x)}; DynamicQuantizeLSTM takes float32")
    w_zp = _weight_zero_point(ctx, 9, "W_zero_point")
    r_zp = _weight_zero_point(ctx, 11, "R_zero_point")
    out = ctx.call("nn.dynamic_quantize_lstm", x, ctx.input(1, "W"), r, b, h0, c0, ctx.input(8, "W_scale"), w_zp,
                   ctx.input(10, "R_scale"), r_zp, direction=direction, clip=clip)
    return [ctx.get(out, 0), ctx.get(out, 1), ctx.get(out, 2)]


# A node of onnxruntime's contrib domain: converted as the built-in converters are, looked up by
# (domain, op type) as nodes of custom domains are.
CUSTOM_CONVERTERS[(MS_DOMAIN, "DynamicQuantizeLSTM")] = convert_dynamic_quantize_lstm
