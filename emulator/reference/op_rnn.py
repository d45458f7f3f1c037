"""Reference recurrent layers: nn.lstm with ONNX's LSTM semantics (layout 0, activations
sigmoid/tanh/tanh, no peepholes), in the data's dtype.

Per direction, the input projections of all steps are one matrix product (x @ W^T + Wb + Rb);
each step then adds h @ R^T, clips the pre-activations when ``clip`` is set, and updates

    i, o, f, c~ = sigmoid, sigmoid, sigmoid, tanh  of the four gate blocks (ONNX's order i, o, f, c)
    C = f * C + i * c~,   H = o * tanh(C)

The reverse direction (``reverse``, and the second of ``bidirectional``) walks the sequence from
its end; Y holds each step's H at the step's own position.

nn.dynamic_quantize_lstm is onnxruntime's CPU kernel of com.microsoft.DynamicQuantizeLSTM
(DeepCpuLstmOp with quantized GEMMs, rnn_helpers.cc ComputeGemm), in float32:

* each product quantizes its float operand as one uint8 block: the input projections all of X
  (seq_length x batch rows) at once, each step's recurrence the batch's hidden state;
  scale = (max - min) / 255 over the block's range extended to hold 0 (1 when empty),
  zero point = round_half_to_even(clip(-min / scale, 0, 255)),
  q = clip(round_half_to_even(x / scale) + zero point, 0, 255) (DynamicQuantizeLinear's rule);
* the exact integer sums of (q - zero point) x (weight - weight zero point) become float32 and are
  multiplied by float32(scale * weight scale) (one weight scale per direction, or one per column);
  onnxruntime reads one weight zero point per direction (the first: per-column zero points must
  be equal, and 0 for int8 weights);
* per step: pre = (x projection + h projection) + (Wb + Rb), clipped when ``clip`` is set; the
  gates as nn.lstm's; C = C_prev * f + i * c~, H = tanh(C) * o.

onnxruntime splits the batch over its threads when batch > 4, or batch >= 2 and hidden <= 256,
and then quantizes each thread's rows of the hidden state apart: this kernel is onnxruntime with
one intra-op thread (the same for every thread count when batch is 1).
"""

from __future__ import annotations

import numpy as np

from ...ir.analysis import MACS
from ...ir.op import register_op_attr
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


def _quantize_uint8(x: np.ndarray):
    """(q - zero point) as float64 and the scale: ``x`` quantized to uint8 over its own range."""
    zero = np.float32(0)
    low = min(np.float32(x.min()), zero) if x.size else zero
    high = max(np.float32(x.max()), zero) if x.size else zero
    scale = np.float32(1) if high == low else np.float32(high - low) / np.float32(255)
    zero_point = np.rint(np.clip(zero - low / scale, np.float32(0), np.float32(255)))
    q = np.clip(np.rint(x / scale) + zero_point, 0, 255)
    return q.astype(np.float64) - np.float64(zero_point), scale


def _quantized_product(x: np.ndarray, weight: np.ndarray, weight_scale: np.ndarray) -> np.ndarray:
    """x (rows, k) float32 times the weight (k, n), zero point already subtracted (float64):
    float32(the integer sums) * float32(x's scale * weight_scale)."""
    shifted, scale = _quantize_uint8(x)
    sums = np.matmul(shifted, weight)  # exact: integers well below 2**53
    return sums.astype(np.float32) * (scale * weight_scale).astype(np.float32)


@kernel("nn.dynamic_quantize_lstm")
def dynamic_quantize_lstm(args, attrs, out_type):
    x, w, r, b, h0, c0, w_scale, w_zp, r_scale, r_zp = args
    seq, batch, input_size = x.shape
    dirs, hidden, gates = r.shape
    y = np.empty((seq, dirs, batch, hidden), np.float32)
    y_h = np.empty((dirs, batch, hidden), np.float32)
    y_c = np.empty((dirs, batch, hidden), np.float32)
    clip = None if attrs.clip is None else np.float32(attrs.clip)
    rows = np.asarray(x, np.float32).reshape(seq * batch, input_size)
    for d in range(dirs):
        reverse = attrs.direction == "reverse" or d == 1
        w_d = w[d].astype(np.float64) - np.float64(w_zp[d].reshape(-1)[0])
        r_d = r[d].astype(np.float64) - np.float64(r_zp[d].reshape(-1)[0])
        projected = _quantized_product(rows, w_d, w_scale[d]).reshape(seq, batch, gates)
        bias = b[d, :gates] + b[d, gates:]
        h, c = h0[d], c0[d]
        for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
            pre = (projected[t] + _quantized_product(h, r_d, r_scale[d])) + bias
            if clip is not None:
                pre = np.maximum(np.minimum(pre, clip), -clip)
            i = _sigmoid(pre[:, :hidden])
            o = _sigmoid(pre[:, hidden:2 * hidden])
            f = _sigmoid(pre[:, 2 * hidden:3 * hidden])
            g = np.tanh(pre[:, 3 * hidden:])
            c = c * f + i * g
            h = np.tanh(c) * o
            y[t, d] = h
        y_h[d] = h
        y_c[d] = c
    return y, y_h, y_c


@register_op_attr("nn.dynamic_quantize_lstm", MACS)
def _dynamic_quantize_lstm_macs(call, where: str) -> int:
    # as nn.lstm's (ir/analysis.py): per step and direction, the four gates' products with the
    # input and the hidden state
    seq, batch, input_size = call.args[0].checked_type.shape
    dirs, hidden, gates = call.args[2].checked_type.shape
    return seq * dirs * batch * gates * (input_size + hidden)
