"""Reference recurrent layers: nn.lstm with ONNX's LSTM semantics (layout 0, activations
sigmoid/tanh/tanh, no peepholes), in the data's dtype.

Per direction, the input projections of all steps are one matrix product (x @ W^T + Wb + Rb);
each step then adds h @ R^T, clips the pre-activations when ``clip`` is set, and updates

    i, o, f, c~ = sigmoid, sigmoid, sigmoid, tanh  of the four gate blocks (ONNX's order i, o, f, c)
    C = f * C + i * c~,   H = o * tanh(C)

The reverse direction (``reverse``, and the second of ``bidirectional``) walks the sequence from
its end; Y holds each step's H at the step's own position.
"""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._common import out_dtype


def _sigmoid(x: np.ndarray) -> np.ndarray:
    one = x.dtype.type(1)
    with np.errstate(over="ignore"):  # exp overflows to inf for very negative x, giving exactly 0
        return one / (one + np.exp(-x))


@kernel("nn.lstm")
def lstm(args, attrs, out_type):
    x, w, r, b, h0, c0 = args
    dtype = out_dtype(out_type.fields[0])
    seq, batch, _ = x.shape
    dirs, gates, hidden = r.shape
    y = np.empty((seq, dirs, batch, hidden), dtype)
    y_h = np.empty((dirs, batch, hidden), dtype)
    y_c = np.empty((dirs, batch, hidden), dtype)
    clip = None if attrs.clip is None else dtype.type(attrs.clip)
    for d in range(dirs):
        reverse = attrs.direction == "reverse" or d == 1
        projected = np.matmul(x, w[d].T) + (b[d, :gates] + b[d, gates:])  # (seq, batch, 4 * hidden)
        h, c = h0[d], c0[d]
        recurrence = r[d].T
        for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
            pre = projected[t] + np.matmul(h, recurrence)
            if clip is not None:
                pre = np.clip(pre, -clip, clip)
            i = _sigmoid(pre[:, :hidden])
            o = _sigmoid(pre[:, hidden:2 * hidden])
            f = _sigmoid(pre[:, 2 * hidden:3 * hidden])
            g = np.tanh(pre[:, 3 * hidden:])
            c = f * c + i * g
            h = o * np.tanh(c)
            y[t, d] = h
        y_h[d] = h
        y_c[d] = c
    return y, y_h, y_c
