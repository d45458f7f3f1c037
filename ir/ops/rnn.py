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
