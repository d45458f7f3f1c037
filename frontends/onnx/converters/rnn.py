"""Recurrent layers: LSTM -> nn.lstm.

What nn.lstm computes is ONNX's LSTM with layout 0, the default activations (Sigmoid, Tanh, Tanh)
and no peepholes; other forms are refused by name. Absent inputs become zeros: the bias B,
initial_h and initial_c. ``sequence_lens`` imports when it is a constant that gives every batch
entry the full sequence (then it changes nothing).
"""

from __future__ import annotations

import numpy as np

from ....ir.ops.rnn import LSTM_DIRECTIONS, num_directions
from ..context import NodeContext
from . import converter

_DEFAULT_ACTIVATIONS = ("Sigmoid", "Tanh", "Tanh")


@converter("LSTM", produces=("nn.lstm",))
def convert_lstm(ctx: NodeContext):
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
    x, w, r = ctx.input(0, "X"), ctx.input(1, "W"), ctx.input(2, "R")
    if ctx.ndim(x) != 3 or ctx.ndim(r) != 3:
        raise ctx.error(f"X and R must be 3-D, got shapes {ctx.shape(x)} and {ctx.shape(r)}")
    seq, batch = ctx.shape(x)[:2]
    hidden = ctx.shape(r)[-1]
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

    b = optional(3, "B", (dirs, 8 * hidden))
    h0 = optional(5, "initial_h", (dirs, batch, hidden))
    c0 = optional(6, "initial_c", (dirs, batch, hidden))
    out = ctx.call("nn.lstm", x, w, r, b, h0, c0, direction=direction,
                   clip=None if clip is None else float(clip))
    return [ctx.get(out, 0), ctx.get(out, 1), ctx.get(out, 2)]
