"""Neural-network layers: convolution, dense/matmul, normalization, pooling, padding, softmax."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from ..errors import TidlxTypeError
from ..op import register_op
from ..types import TensorType, TupleType
from ._rel import tensor_arg


def expand_padding(padding, n: int = 2) -> Tuple[int, ...]:
    """TVM's padding forms: 1 value, n values (each side), or 2n values (befores then afters)."""
    padding = tuple(int(p) for p in padding) if isinstance(padding, (tuple, list)) else (int(padding),)
    if len(padding) == 1:
        return padding * (2 * n)
    if len(padding) == n:
        return padding + padding
    if len(padding) == 2 * n:
        return padding
    raise TidlxTypeError(f"padding must have 1, {n} or {2 * n} values, got {len(padding)}")


def _pair(v, what: str) -> Tuple[int, int]:
    v = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    if len(v) == 1:
        v = v * 2
    if len(v) != 2:
        raise TidlxTypeError(f"{what} must have 2 values, got {len(v)}")
    return int(v[0]), int(v[1])


def conv_out_dim(size: int, kernel: int, stride: int, dilation: int, pad_before: int, pad_after: int) -> int:
    return (size + pad_before + pad_after - dilation * (kernel - 1) - 1) // stride + 1


# --- nn.conv2d ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Conv2DAttrs:
    strides: tuple = (1, 1)
    padding: tuple = (0, 0)
    dilation: tuple = (1, 1)
    groups: int = 1
    channels: Optional[int] = None
    kernel_size: Optional[tuple] = None
    data_layout: str = "NCHW"
    kernel_layout: str = "OIHW"
    out_layout: str = ""
    out_dtype: str = ""


def _to_nchw(shape, layout: str, op: str):
    if sorted(layout) != sorted("NCHW") or len(layout) != 4:
        raise TidlxTypeError(f"data layout '{layout}' is not supported (NCHW or NHWC)")
    return tuple(shape[layout.index(c)] for c in "NCHW")


def _from_nchw(nchw, layout: str):
    return tuple(nchw["NCHW".index(c)] for c in layout)


def conv2d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "nn.conv2d", "data")
    weight = tensor_arg(arg_types, 1, "nn.conv2d", "weight")
    if data.ndim != 4 or weight.ndim != 4:
        raise TidlxTypeError(f"data and weight must be 4-D, got {data.shape} and {weight.shape}")
    n, c, h, w = _to_nchw(data.shape, attrs.data_layout, "nn.conv2d")
    klayout = attrs.kernel_layout
    if sorted(klayout) != sorted("OIHW"):
        raise TidlxTypeError(f"kernel layout '{klayout}' is not supported")
    o, i, kh, kw = (weight.shape[klayout.index(ch)] for ch in "OIHW")
    if c != i * attrs.groups:
        raise TidlxTypeError(
            f"input has {c} channels but weight expects {i} x groups {attrs.groups} = {i * attrs.groups}")
    if o % attrs.groups:
        raise TidlxTypeError(f"{o} output channels are not divisible by groups {attrs.groups}")
    if attrs.channels is not None and attrs.channels != o:
        raise TidlxTypeError(f"channels={attrs.channels} but the weight has {o} output channels")
    if attrs.kernel_size is not None and tuple(attrs.kernel_size) != (kh, kw):
        raise TidlxTypeError(f"kernel_size={list(attrs.kernel_size)} but the weight is {kh}x{kw}")
    sh, sw = _pair(attrs.strides, "strides")
    dh, dw = _pair(attrs.dilation, "dilation")
    pt, pl, pb, pr = expand_padding(attrs.padding)
    oh = conv_out_dim(h, kh, sh, dh, pt, pb)
    ow = conv_out_dim(w, kw, sw, dw, pl, pr)
    if oh <= 0 or ow <= 0:
        raise TidlxTypeError(f"output would be empty ({oh}x{ow}) for input {h}x{w} and kernel {kh}x{kw}")
    out_layout = attrs.out_layout or attrs.data_layout
    dtype = attrs.out_dtype or data.dtype
    return TensorType(_from_nchw((n, o, oh, ow), out_layout), dtype)


register_op("nn.conv2d", num_inputs=2, attrs=Conv2DAttrs, type_rel=conv2d_rel, arg_names=("data", "weight"))


# --- nn.batch_norm --------------------------------------------------------------------------

@dataclass(frozen=True)
class BatchNormAttrs:
    axis: int = 1
    epsilon: float = 1e-05
    center: bool = True
    scale: bool = True


def batch_norm_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "nn.batch_norm", "data")
    axis = attrs.axis % max(data.ndim, 1)
    channels = data.shape[axis]
    for i, what in enumerate(("gamma", "beta", "moving_mean", "moving_var"), start=1):
        t = tensor_arg(arg_types, i, "nn.batch_norm", what)
        if t.shape != (channels,):
            raise TidlxTypeError(f"{what} must have shape ({channels},), got {t.shape}")
    vec = TensorType((channels,), data.dtype)
    return TupleType((data, vec, vec))


register_op("nn.batch_norm", num_inputs=5, attrs=BatchNormAttrs, type_rel=batch_norm_rel,
            arg_names=("data", "gamma", "beta", "moving_mean", "moving_var"))


# --- nn.dense -------------------------------------------------------------------------------

@dataclass(frozen=True)
class DenseAttrs:
    units: Optional[int] = None
    out_dtype: str = ""


def dense_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "nn.dense", "data")
    weight = tensor_arg(arg_types, 1, "nn.dense", "weight")
    if weight.ndim != 2 or data.ndim < 1:
        raise TidlxTypeError(f"weight must be 2-D (units, in), got {weight.shape}")
    if data.shape[-1] != weight.shape[1]:
        raise TidlxTypeError(f"data has {data.shape[-1]} features but weight expects {weight.shape[1]}")
    if attrs.units is not None and attrs.units != weight.shape[0]:
        raise TidlxTypeError(f"units={attrs.units} but the weight has {weight.shape[0]} rows")
    return TensorType(data.shape[:-1] + (weight.shape[0],), attrs.out_dtype or data.dtype)


register_op("nn.dense", num_inputs=2, attrs=DenseAttrs, type_rel=dense_rel, arg_names=("data", "weight"))
