"""Reference integer ops of dynamically quantized models, with ONNX's semantics (what onnxruntime
computes, bit for bit):

* nn.conv2d_integer / nn.matmul_integer: exact int32 sums of the operands minus their zero
  points (products summed in float64, exact for 8-bit operands; zero padding after the shift
  equals padding with the input zero point);
* dynamic_quantize_linear: the range of the data extended to hold 0, scale = (max - min) / 255
  in float32 (1 when the range is empty, as onnxruntime), zero point = round_half_to_even(
  clip(0 - min / scale, 0, 255)), y = clip(round_half_to_even(x / scale) + zero point, 0, 255).
"""

from __future__ import annotations

import numpy as np

from ..registry import kernel
from ._common import out_dtype
from .op_conv import conv2d as _float_conv2d


def _per_axis(value: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """A zero point as float64, shaped to broadcast along ``axis`` when it has one value per index."""
    value = np.asarray(value, np.float64)
    if value.ndim == 0 or value.size == 1:
        return value.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = value.shape[0]
    return value.reshape(shape)


@kernel("nn.conv2d_integer", fresh_result=True)
def conv2d_integer(args, attrs, out_type):
    x, w, x_zp, w_zp = args
    xs = x.astype(np.float64) - float(np.asarray(x_zp).reshape(-1)[0])
    ws = w.astype(np.float64) - _per_axis(w_zp, attrs.kernel_layout.index("O"), w.ndim)
    return _float_conv2d([xs, ws], attrs, out_type)


@kernel("nn.matmul_integer", fresh_result=True)
def matmul_integer(args, attrs, out_type):
    a, b, a_zp, b_zp = args
    a_s = a.astype(np.float64) - _per_axis(a_zp, -2, max(a.ndim, 2))
    b_s = b.astype(np.float64) - _per_axis(b_zp, -1, b.ndim)
    return np.rint(np.matmul(a_s, b_s)).astype(out_dtype(out_type))


@kernel("dynamic_quantize_linear")
def dynamic_quantize_linear(args, attrs, out_type):
    x = np.asarray(args[0], np.float32)
    zero = np.float32(0)
    low = min(np.float32(x.min()), zero) if x.size else zero
    high = max(np.float32(x.max()), zero) if x.size else zero
    scale = np.float32(1) if high == low else np.float32(high - low) / np.float32(255)
    zero_point = np.rint(np.clip(zero - low / scale, np.float32(0), np.float32(255)))
    y = np.clip(np.rint(x / scale) + zero_point, 0, 255).astype(np.uint8)
    return y, np.array(scale, np.float32), np.array(zero_point, np.uint8)
