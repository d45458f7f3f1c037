"""2-D pooling: windowed max/avg, global and adaptive pools."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..errors import TidlxTypeError
from ..op import define_op
from ..types import TensorType
from ._rel import expand_padding, int_tuple, pair, positive, set_int_tuples, spatial_layout, tensor_arg


@dataclass(frozen=True)
class MaxPool2DAttrs:
    pool_size: tuple = (1, 1)
    strides: tuple = (1, 1)
    dilation: tuple = (1, 1)
    padding: tuple = (0, 0)
    layout: str = "NCHW"
    out_layout: str = ""
    ceil_mode: bool = False

    def __post_init__(self):
        set_int_tuples(self, "pool_size", "strides", "dilation", "padding")


@dataclass(frozen=True)
class AvgPool2DAttrs(MaxPool2DAttrs):
    """The max pool's fields, then count_include_pad (TVM's order)."""

    count_include_pad: bool = False


def pool_out_dim(size: int, kernel: int, stride: int, dilation: int, pad_total: int, ceil_mode: bool) -> int:
    """TVM's Pool2DRel: floor (or ceil) of (size + pads - dilated kernel) / stride, plus one."""
    span = size + pad_total - (dilation * (kernel - 1) + 1)
    if ceil_mode:
        span += stride - 1
    return span // stride + 1


def _out_layout(attrs, layout) -> None:
    if attrs.out_layout and attrs.out_layout != attrs.layout:
        raise TidlxTypeError(f"out_layout '{attrs.out_layout}' differs from layout '{attrs.layout}' "
                             f"(pools do not change layout)")


def pool2d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    layout = spatial_layout(attrs.layout)
    if data.ndim != layout.ndim:
        raise TidlxTypeError(f"data has rank {data.ndim} but layout '{attrs.layout}' has {layout.ndim} axes")
    _out_layout(attrs, layout)
    hi, wi = layout.index("H"), layout.index("W")
    kh, kw = (positive(k, "pool_size") for k in pair(attrs.pool_size, "pool_size"))
    sh, sw = (positive(s, "strides") for s in pair(attrs.strides, "strides"))
    dh, dw = (positive(d, "dilation") for d in pair(attrs.dilation, "dilation"))
    pt, pl, pb, pr = expand_padding(attrs.padding)
    h, w = data.shape[hi], data.shape[wi]
    if (kh - 1) * dh + 1 > h + pt + pb or (kw - 1) * dw + 1 > w + pl + pr:
        raise TidlxTypeError(f"pool window {kh}x{kw} (dilation {dh}x{dw}) is larger than the padded input "
                             f"{h + pt + pb}x{w + pl + pr}")
    oh = pool_out_dim(h, kh, sh, dh, pt + pb, attrs.ceil_mode)
    ow = pool_out_dim(w, kw, sw, dw, pl + pr, attrs.ceil_mode)
    shape = list(data.shape)
    shape[hi], shape[wi] = oh, ow
    return TensorType(tuple(shape), data.dtype)


define_op("nn.max_pool2d", num_inputs=1, attrs=MaxPool2DAttrs, type_rel=pool2d_rel, arg_names=("data",),
            pattern="out_elemwise_fusable")
define_op("nn.avg_pool2d", num_inputs=1, attrs=AvgPool2DAttrs, type_rel=pool2d_rel, arg_names=("data",),
            pattern="out_elemwise_fusable")


@dataclass(frozen=True)
class GlobalPool2DAttrs:
    layout: str = "NCHW"
    out_layout: str = ""


def global_pool2d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    layout = spatial_layout(attrs.layout)
    if data.ndim != layout.ndim:
        raise TidlxTypeError(f"data has rank {data.ndim} but layout '{attrs.layout}' has {layout.ndim} axes")
    _out_layout(attrs, layout)
    shape = list(data.shape)
    shape[layout.index("H")] = shape[layout.index("W")] = 1
    return TensorType(tuple(shape), data.dtype)


define_op("nn.global_avg_pool2d", num_inputs=1, attrs=GlobalPool2DAttrs, type_rel=global_pool2d_rel,
            arg_names=("data",), pattern="out_elemwise_fusable")
define_op("nn.global_max_pool2d", num_inputs=1, attrs=GlobalPool2DAttrs, type_rel=global_pool2d_rel,
            arg_names=("data",), pattern="out_elemwise_fusable")


@dataclass(frozen=True)
class AdaptivePool2DAttrs:
    output_size: Optional[tuple] = None
    layout: str = "NCHW"
    out_layout: str = ""

    def __post_init__(self):
        set_int_tuples(self, "output_size")


def adaptive_pool2d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    layout = spatial_layout(attrs.layout)
    if data.ndim != layout.ndim:
        raise TidlxTypeError(f"data has rank {data.ndim} but layout '{attrs.layout}' has {layout.ndim} axes")
    _out_layout(attrs, layout)
    hi, wi = layout.index("H"), layout.index("W")
    shape = list(data.shape)
    # No output_size keeps the input size (TVM's rule); one value is used for both axes.
    if attrs.output_size is not None and len(attrs.output_size) > 0:
        sizes = int_tuple(attrs.output_size, "output_size")
        if len(sizes) > 2:
            raise TidlxTypeError(f"output_size must have 1 or 2 values, got {list(sizes)}")
        oh, ow = pair(sizes, "output_size")
        shape[hi], shape[wi] = positive(oh, "output_size"), positive(ow, "output_size")
    return TensorType(tuple(shape), data.dtype)


define_op("nn.adaptive_avg_pool2d", num_inputs=1, attrs=AdaptivePool2DAttrs, type_rel=adaptive_pool2d_rel,
            arg_names=("data",), pattern="out_elemwise_fusable")
define_op("nn.adaptive_max_pool2d", num_inputs=1, attrs=AdaptivePool2DAttrs, type_rel=adaptive_pool2d_rel,
            arg_names=("data",), pattern="out_elemwise_fusable")
