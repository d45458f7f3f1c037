"""Recurrent layers: ``nn.lstm``, ONNX's LSTM (layout 0, activations sigmoid/tanh/tanh, no peepholes).

    nn.lstm(data, weight, recurrence_weight, bias, initial_h, initial_c, direction=, clip=)
      data               (seq_length, batch, input_size)
      weight             (num_directions, 4 * hidden, input_size)   gates in ONNX's order i, o, f, c
      recurrence_weight  (num_directions, 4 * hidden, hidden)
      bias               (num_directions, 8 * hidden)               Wb then Rb
      initial_h/_c       (num_directions, batch, hidden)
    -> (Y (seq_length, num_directions, batch, hidden), Y_h, Y_c (num_directions, batch, hidden))

The hidden size is the last dimension of ``recurrence_weight``. Absent ONNX inputs (B,
initial_h, initial_c) are zeros, filled in by the importer.

    nn.dynamic_quantize_lstm(data, weight, recurrence_weight, bias, initial_h, initial_c,
                             weight_scale, weight_zero_point, recurrence_scale,
                             recurrence_zero_point, direction=, clip=)
      data               (seq_length, batch, input_size) float32
      weight             (num_directions, input_size, 4 * hidden)   int8 or uint8, gates i, o, f, c
      recurrence_weight  (num_directions, hidden, 4 * hidden)       the dtype of weight
      bias, initial_h/_c as nn.lstm (float32)
      *_scale            (num_directions,) or (num_directions, 4 * hidden) float32
      *_zero_point       the shape of the matching scale, the dtype of the weight
    -> as nn.lstm

onnxruntime's contrib op com.microsoft.DynamicQuantizeLSTM: nn.lstm whose two matrix products
quantize their float operand to uint8 at run time (its own range, as DynamicQuantizeLinear) and
multiply it with the integer weights (emulator/reference/op_rnn.py). The weights are stored
transposed with respect to nn.lstm's, as onnxruntime stores them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import TidlxTypeError
from ..op import define_op
from ..types import TensorType, TupleType
from ._rel import check_choice, check_dtype, tensor_arg

LSTM_DIRECTIONS = ("forward", "reverse", "bidirectional")
LSTM_DTYPES = ("float32", "float64", "float16")


@dataclass(frozen=True)
class LSTMAttrs:
    #: forward, reverse or bidirectional (ONNX's names)
    direction: str = "forward"
    #: the gates' pre-activations are clipped to [-clip, clip] when set (ONNX's ``clip``)
    clip: Optional[float] = None


def num_directions(direction: str) -> int:
    return 2 if direction == "bidirectional" else 1


def lstm_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    recurrence = tensor_arg(arg_types, 2, "recurrence_weight")
    bias = tensor_arg(arg_types, 3, "bias")
    h0 = tensor_arg(arg_types, 4, "initial_h")
    c0 = tensor_arg(arg_types, 5, "initial_c")
    check_dtype(data, LSTM_DTYPES, "data")
    for what, t in (("weight", weight), ("recurrence_weight", recurrence), ("bias", bias), ("initial_h", h0),
                    ("initial_c", c0)):
        if t.dtype != data.dtype:
            raise TidlxTypeError(f"{what} has dtype {t.dtype} but data has {data.dtype}")
    check_choice(attrs.direction, LSTM_DIRECTIONS, "direction")
    if attrs.clip is not None and not attrs.clip > 0:
        raise TidlxTypeError(f"clip must be positive, got {attrs.clip}")
    if data.ndim != 3:
        raise TidlxTypeError(f"data must be 3-D (seq_length, batch, input_size), got shape {data.shape}")
    seq, batch, input_size = data.shape
    dirs = num_directions(attrs.direction)
    if recurrence.ndim != 3 or recurrence.shape[0] != dirs or recurrence.shape[1] != 4 * recurrence.shape[2]:
        raise TidlxTypeError(f"recurrence_weight must be (num_directions={dirs}, 4 * hidden, hidden), got shape "
                             f"{recurrence.shape}")
    hidden = recurrence.shape[2]
    if hidden <= 0:
        raise TidlxTypeError("the hidden size (recurrence_weight's last dimension) must be positive")
    expected = {"weight": (weight, (dirs, 4 * hidden, input_size)), "bias": (bias, (dirs, 8 * hidden)),
                "initial_h": (h0, (dirs, batch, hidden)), "initial_c": (c0, (dirs, batch, hidden))}
    for what, (t, shape) in expected.items():
        if t.shape != shape:
            raise TidlxTypeError(f"{what} must have shape {shape} (num_directions {dirs}, hidden {hidden}, batch "
                                 f"{batch}, input_size {input_size}), got {t.shape}")
    state = TensorType((dirs, batch, hidden), data.dtype)
    return TupleType((TensorType((seq, dirs, batch, hidden), data.dtype), state, state))


define_op("nn.lstm", num_inputs=6, attrs=LSTMAttrs, type_rel=lstm_rel,
          arg_names=("data", "weight", "recurrence_weight", "bias", "initial_h", "initial_c"))


# --- nn.dynamic_quantize_lstm ---------------------------------------------------------------------

QUANTIZED_WEIGHT_DTYPES = ("int8", "uint8")


def dynamic_quantize_lstm_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    recurrence = tensor_arg(arg_types, 2, "recurrence_weight")
    check_dtype(data, ("float32",), "data")
    check_dtype(weight, QUANTIZED_WEIGHT_DTYPES, "weight")
    if recurrence.dtype != weight.dtype:
        raise TidlxTypeError(f"recurrence_weight has dtype {recurrence.dtype} but weight has {weight.dtype}")
    dirs = num_directions(attrs.direction)
    if weight.ndim != 3 or recurrence.ndim != 3:
        raise TidlxTypeError(f"weight and recurrence_weight must be 3-D, got shapes {weight.shape} and "
                             f"{recurrence.shape}")
    hidden = recurrence.shape[1]
    if data.ndim == 3 and (weight.shape != (dirs, data.shape[2], 4 * hidden)
                           or recurrence.shape != (dirs, hidden, 4 * hidden)):
        raise TidlxTypeError(f"weight must be (num_directions={dirs}, input_size={data.shape[2]}, 4 * hidden) and "
                             f"recurrence_weight (num_directions, hidden, 4 * hidden), got {weight.shape} and "
                             f"{recurrence.shape}")
    # nn.lstm's checks on the other operands, with the weights in nn.lstm's layout
    as_lstm = [data, TensorType((dirs, 4 * hidden, weight.shape[1]), "float32"),
               TensorType((dirs, 4 * hidden, hidden), "float32")] + list(arg_types[3:6])
    out = lstm_rel(as_lstm, attrs)
    for i, (what, dtype) in enumerate((("weight_scale", "float32"), ("weight_zero_point", weight.dtype),
                                       ("recurrence_scale", "float32"), ("recurrence_zero_point", weight.dtype))):
        t = tensor_arg(arg_types, 6 + i, what)
        if t.dtype != dtype:
            raise TidlxTypeError(f"{what} must have dtype {dtype}, got {t.dtype}")
        if t.shape not in ((dirs,), (dirs, 4 * hidden)):
            raise TidlxTypeError(f"{what} must have shape ({dirs},) (one value per direction) or ({dirs}, "
                                 f"{4 * hidden}) (one per column), got {t.shape}")
    for a, b in ((6, 7), (8, 9)):
        if arg_types[a].shape != arg_types[b].shape:
            raise TidlxTypeError(f"{('weight', 'recurrence')[a // 8]}_scale and its zero point must have the same "
                                 f"shape, got {arg_types[a].shape} and {arg_types[b].shape}")
    return out


define_op("nn.dynamic_quantize_lstm", num_inputs=10, attrs=LSTMAttrs, type_rel=dynamic_quantize_lstm_rel,
          arg_names=("data", "weight", "recurrence_weight", "bias", "initial_h", "initial_c", "weight_scale",
                     "weight_zero_point", "recurrence_scale", "recurrence_zero_point"))
