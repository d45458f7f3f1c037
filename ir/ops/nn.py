"""Neural-network layers: convolution, dense/matmul, normalization, softmax, padding, pixel shuffles."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

from ..errors import TidlxTypeError
from ..op import define_op
from ..types import TensorType, TupleType
from ._rel import (check_choice, check_dtype_name, expand_padding, int_tuple, normalize_axis, operand_dtypes, pair,
                   positive, same_dtype, set_int_tuples, tensor_arg)


def conv_out_dim(size: int, kernel: int, stride: int, dilation: int, pad_before: int, pad_after: int) -> int:
    return (size + pad_before + pad_after - dilation * (kernel - 1) - 1) // stride + 1


def _permutation_layout(layout: str, letters: str, what: str) -> str:
    if not isinstance(layout, str) or len(layout) != len(letters) or sorted(layout) != sorted(letters):
        raise TidlxTypeError(f"{what} '{layout}' is not supported (a permutation of {letters}, e.g. "
                             f"{'NCHW or NHWC' if letters == 'NCHW' else 'OIHW, HWIO or IOHW'})")
    return layout


def data_dims(shape, layout: str, what: str = "data_layout") -> Tuple[int, int, int, int]:
    """(N, C, H, W) of a 4-D tensor in ``layout``."""
    layout = _permutation_layout(layout, "NCHW", what)
    return tuple(shape[layout.index(c)] for c in "NCHW")


def layout_shape(nchw, layout: str) -> Tuple[int, ...]:
    """The shape in ``layout`` of a tensor with sizes (N, C, H, W)."""
    return tuple(nchw["NCHW".index(c)] for c in layout)


def kernel_dims(shape, layout: str) -> Tuple[int, int, int, int]:
    """(O, I, KH, KW) of a 4-D weight in ``layout``."""
    layout = _permutation_layout(layout, "OIHW", "kernel_layout")
    return tuple(shape[layout.index(c)] for c in "OIHW")


def _check_4d(data: TensorType, weight: TensorType) -> None:
    if data.ndim != 4 or weight.ndim != 4:
        raise TidlxTypeError(f"data and weight must be 4-D, got {data.shape} and {weight.shape}")


def _out_layout(attrs) -> str:
    out_layout = attrs.out_layout or attrs.data_layout
    return _permutation_layout(out_layout, "NCHW", "out_layout")


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

    def __post_init__(self):
        set_int_tuples(self, "strides", "padding", "dilation", "kernel_size")


def conv2d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    _check_4d(data, weight)
    operand_dtypes(data, weight)
    n, c, h, w = data_dims(data.shape, attrs.data_layout)
    o, i, kh, kw = kernel_dims(weight.shape, attrs.kernel_layout)
    groups = positive(attrs.groups, "groups")
    if c != i * groups:
        raise TidlxTypeError(
            f"input has {c} channels but weight expects {i} x groups {groups} = {i * groups}")
    if o % groups:
        raise TidlxTypeError(f"{o} output channels are not divisible by groups {groups}")
    if attrs.channels is not None and attrs.channels != o:
        raise TidlxTypeError(f"channels={attrs.channels} but the weight has {o} output channels")
    if attrs.kernel_size is not None and pair(attrs.kernel_size, "kernel_size") != (kh, kw):
        raise TidlxTypeError(f"kernel_size={list(attrs.kernel_size)} but the weight is {kh}x{kw}")
    sh, sw = (positive(s, "strides") for s in pair(attrs.strides, "strides"))
    dh, dw = (positive(d, "dilation") for d in pair(attrs.dilation, "dilation"))
    pt, pl, pb, pr = expand_padding(attrs.padding)
    oh = conv_out_dim(h, kh, sh, dh, pt, pb)
    ow = conv_out_dim(w, kw, sw, dw, pl, pr)
    if oh <= 0 or ow <= 0:
        raise TidlxTypeError(f"output would be empty ({oh}x{ow}) for input {h}x{w} and kernel {kh}x{kw}")
    dtype = check_dtype_name(attrs.out_dtype, "out_dtype") if attrs.out_dtype else data.dtype
    return TensorType(layout_shape((n, o, oh, ow), _out_layout(attrs)), dtype)


define_op("nn.conv2d", num_inputs=2, attrs=Conv2DAttrs, type_rel=conv2d_rel, arg_names=("data", "weight"),
            pattern="out_elemwise_fusable")


# --- nn.conv2d_transpose --------------------------------------------------------------------

@dataclass(frozen=True)
class Conv2DTransposeAttrs:
    channels: Optional[int] = None
    kernel_size: Optional[tuple] = None
    strides: tuple = (1, 1)
    padding: tuple = (0, 0)
    output_padding: tuple = (0, 0)
    dilation: tuple = (1, 1)
    groups: int = 1
    data_layout: str = "NCHW"
    kernel_layout: str = "IOHW"
    out_layout: str = ""
    out_dtype: str = ""

    def __post_init__(self):
        set_int_tuples(self, "kernel_size", "strides", "padding", "output_padding", "dilation")


def conv2d_transpose_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    _check_4d(data, weight)
    operand_dtypes(data, weight)
    n, c, h, w = data_dims(data.shape, attrs.data_layout)
    # The weight's "I" axis is the input channels and "O" the output channels per group.
    o_per_group, i, kh, kw = kernel_dims(weight.shape, attrs.kernel_layout)
    groups = positive(attrs.groups, "groups")
    if c != i:
        raise TidlxTypeError(f"input has {c} channels but the weight ({attrs.kernel_layout}) expects {i}")
    if c % groups:
        raise TidlxTypeError(f"{c} input channels are not divisible by groups {groups}")
    o = o_per_group * groups
    if attrs.channels is not None and attrs.channels != o:
        raise TidlxTypeError(f"channels={attrs.channels} but the weight gives {o} output channels")
    if attrs.kernel_size is not None and pair(attrs.kernel_size, "kernel_size") != (kh, kw):
        raise TidlxTypeError(f"kernel_size={list(attrs.kernel_size)} but the weight is {kh}x{kw}")
    sh, sw = (positive(s, "strides") for s in pair(attrs.strides, "strides"))
    dh, dw = (positive(d, "dilation") for d in pair(attrs.dilation, "dilation"))
    oph, opw = pair(attrs.output_padding, "output_padding")
    for op_, s, d in ((oph, sh, dh), (opw, sw, dw)):
        if not 0 <= op_ < max(s, d):
            raise TidlxTypeError(f"output_padding {list(attrs.output_padding)} must be non-negative and smaller "
                                 f"than the stride or dilation")
    pt, pl, pb, pr = expand_padding(attrs.padding)
    oh = (h - 1) * sh - pt - pb + dh * (kh - 1) + oph + 1
    ow = (w - 1) * sw - pl - pr + dw * (kw - 1) + opw + 1
    if oh <= 0 or ow <= 0:
        raise TidlxTypeError(f"output would be empty ({oh}x{ow}): padding {list(attrs.padding)} is too large")
    dtype = check_dtype_name(attrs.out_dtype, "out_dtype") if attrs.out_dtype else data.dtype
    return TensorType(layout_shape((n, o, oh, ow), _out_layout(attrs)), dtype)


define_op("nn.conv2d_transpose", num_inputs=2, attrs=Conv2DTransposeAttrs, type_rel=conv2d_transpose_rel,
            arg_names=("data", "weight"), pattern="out_elemwise_fusable")


# --- nn.deformable_conv2d -------------------------------------------------------------------

@dataclass(frozen=True)
class DeformableConv2DAttrs:
    """Relay's DeformableConv2DAttrs (DCNv1: no modulation mask); the IR types NCHW data, OIHW weights."""

    strides: tuple = (1, 1)
    padding: tuple = (0, 0)
    dilation: tuple = (1, 1)
    deformable_groups: int = 1
    groups: int = 1
    channels: Optional[int] = None
    kernel_size: Optional[tuple] = None
    data_layout: str = "NCHW"
    kernel_layout: str = "OIHW"
    out_layout: str = ""
    out_dtype: str = ""

    def __post_init__(self):
        set_int_tuples(self, "strides", "padding", "dilation", "kernel_size")


def deformable_conv2d_rel(arg_types, attrs):
    """data N x C x H x W, offset N x (2 * deformable_groups * KH * KW) x OH x OW (a (dy, dx) pair per
    kernel tap, per deformable group), weight O x C/groups x KH x KW -> N x O x OH x OW."""
    data = tensor_arg(arg_types, 0, "data")
    offset = tensor_arg(arg_types, 1, "offset")
    weight = tensor_arg(arg_types, 2, "weight")
    _check_4d(data, weight)
    if offset.ndim != 4:
        raise TidlxTypeError(f"offset must be 4-D, got {offset.shape}")
    for layout, want, what in ((attrs.data_layout, "NCHW", "data_layout"), (attrs.kernel_layout, "OIHW", "kernel_layout"),
                               (_out_layout(attrs), "NCHW", "out_layout")):
        if layout != want:
            raise TidlxTypeError(f"{what} '{layout}' is not supported (deformable convolutions take NCHW data and "
                                 f"OIHW weights)")
    out = conv2d_rel((data, weight), attrs)
    n, o, oh, ow = out.shape
    c, kh, kw = data.shape[1], weight.shape[2], weight.shape[3]
    deformable_groups = positive(attrs.deformable_groups, "deformable_groups")
    if c % deformable_groups:
        raise TidlxTypeError(f"{c} input channels are not divisible by deformable_groups {deformable_groups}")
    want = (n, 2 * deformable_groups * kh * kw, oh, ow)
    if tuple(offset.shape) != want:
        raise TidlxTypeError(f"offset has shape {tuple(offset.shape)}, expected {want} (N x 2 * deformable_groups "
                             f"{deformable_groups} * {kh}x{kw} taps x output {oh}x{ow})")
    if offset.dtype != data.dtype:
        raise TidlxTypeError(f"offset has dtype {offset.dtype} but data has {data.dtype}")
    return out


define_op("nn.deformable_conv2d", num_inputs=3, attrs=DeformableConv2DAttrs, type_rel=deformable_conv2d_rel,
            arg_names=("data", "offset", "weight"), pattern="out_elemwise_fusable")


# --- nn.dense, nn.matmul, nn.batch_matmul ---------------------------------------------------

@dataclass(frozen=True)
class DenseAttrs:
    units: Optional[int] = None
    out_dtype: str = ""


def dense_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    weight = tensor_arg(arg_types, 1, "weight")
    if weight.ndim != 2:
        raise TidlxTypeError(f"weight must be 2-D (units, in_features), got {weight.shape}")
    operand_dtypes(data, weight)
    if data.ndim < 1:
        raise TidlxTypeError("data must have at least one dimension")
    if data.shape[-1] != weight.shape[1]:
        raise TidlxTypeError(f"data has {data.shape[-1]} features but weight expects {weight.shape[1]}")
    if attrs.units is not None and attrs.units != weight.shape[0]:
        raise TidlxTypeError(f"units={attrs.units} but the weight has {weight.shape[0]} rows")
    dtype = check_dtype_name(attrs.out_dtype, "out_dtype") if attrs.out_dtype else data.dtype
    return TensorType(data.shape[:-1] + (weight.shape[0],), dtype)


define_op("nn.dense", num_inputs=2, attrs=DenseAttrs, type_rel=dense_rel, arg_names=("data", "weight"),
            pattern="out_elemwise_fusable")


@dataclass(frozen=True)
class MatmulAttrs:
    units: Optional[int] = None
    out_dtype: str = ""
    transpose_a: bool = False
    transpose_b: bool = False


def matmul_rel(arg_types, attrs):
    a = tensor_arg(arg_types, 0, "tensor_a")
    b = tensor_arg(arg_types, 1, "tensor_b")
    if b.ndim != 2:
        raise TidlxTypeError(f"tensor_b must be 2-D, got {b.shape}")
    operand_dtypes(a, b, "tensor_a", "tensor_b")
    if a.ndim < 1 or (attrs.transpose_a and a.ndim < 2):
        raise TidlxTypeError(f"tensor_a of shape {a.shape} has too few dimensions")
    if attrs.transpose_a:
        k, rows = a.shape[-2], a.shape[:-2] + (a.shape[-1],)
    else:
        k, rows = a.shape[-1], a.shape[:-1]
    kb, n = (b.shape[1], b.shape[0]) if attrs.transpose_b else (b.shape[0], b.shape[1])
    if k != kb:
        raise TidlxTypeError(f"reduction sizes differ: tensor_a gives {k}, tensor_b gives {kb} "
                             f"(transpose_a={attrs.transpose_a}, transpose_b={attrs.transpose_b})")
    if attrs.units is not None and attrs.units != n:
        raise TidlxTypeError(f"units={attrs.units} but tensor_b gives {n} output features")
    dtype = check_dtype_name(attrs.out_dtype, "out_dtype") if attrs.out_dtype else a.dtype
    return TensorType(rows + (n,), dtype)


define_op("nn.matmul", num_inputs=2, attrs=MatmulAttrs, type_rel=matmul_rel,
            arg_names=("tensor_a", "tensor_b"), pattern="out_elemwise_fusable")


@dataclass(frozen=True)
class BatchMatmulAttrs:
    out_dtype: str = ""
    transpose_a: bool = False
    transpose_b: bool = True


def batch_matmul_rel(arg_types, attrs):
    x = tensor_arg(arg_types, 0, "tensor_a")
    y = tensor_arg(arg_types, 1, "tensor_b")
    if x.ndim != 3 or y.ndim != 3:
        raise TidlxTypeError(f"both inputs must be 3-D (batch, rows, cols), got {x.shape} and {y.shape}")
    operand_dtypes(x, y, "tensor_a", "tensor_b")
    bx, by = x.shape[0], y.shape[0]
    if bx != by and bx != 1 and by != 1:
        raise TidlxTypeError(f"batch sizes {bx} and {by} differ and neither is 1")
    m, k = (x.shape[2], x.shape[1]) if attrs.transpose_a else (x.shape[1], x.shape[2])
    ky, n = (y.shape[2], y.shape[1]) if attrs.transpose_b else (y.shape[1], y.shape[2])
    if k != ky:
        raise TidlxTypeError(f"reduction sizes differ: tensor_a gives {k}, tensor_b gives {ky} "
                             f"(transpose_a={attrs.transpose_a}, transpose_b={attrs.transpose_b})")
    dtype = check_dtype_name(attrs.out_dtype, "out_dtype") if attrs.out_dtype else x.dtype
    return TensorType((max(bx, by), m, n), dtype)


define_op("nn.batch_matmul", num_inputs=2, attrs=BatchMatmulAttrs, type_rel=batch_matmul_rel,
            arg_names=("tensor_a", "tensor_b"), pattern="out_elemwise_fusable")


# --- nn.bias_add ----------------------------------------------------------------------------

@dataclass(frozen=True)
class BiasAddAttrs:
    axis: int = 1


def bias_add_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    bias = tensor_arg(arg_types, 1, "bias")
    axis = normalize_axis(attrs.axis, data.ndim)
    if bias.shape != (data.shape[axis],):
        raise TidlxTypeError(f"bias must have shape ({data.shape[axis]},) (the size of axis {attrs.axis}), "
                             f"got {bias.shape}")
    same_dtype(data, bias)
    return data


define_op("nn.bias_add", num_inputs=2, attrs=BiasAddAttrs, type_rel=bias_add_rel, arg_names=("data", "bias"),
            pattern="broadcast")


# --- normalization --------------------------------------------------------------------------

def _channel_vectors(arg_types, names, channels: int, dtype: str, start: int = 1) -> None:
    for i, what in enumerate(names, start=start):
        t = tensor_arg(arg_types, i, what)
        if t.shape != (channels,):
            raise TidlxTypeError(f"{what} must have shape ({channels},), got {t.shape}")
        if t.dtype != dtype:
            raise TidlxTypeError(f"{what} has dtype {t.dtype} but data has {dtype}")


@dataclass(frozen=True)
class BatchNormAttrs:
    axis: int = 1
    epsilon: float = 1e-05
    center: bool = True
    scale: bool = True


def batch_norm_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    axis = normalize_axis(attrs.axis, data.ndim)
    channels = data.shape[axis]
    _channel_vectors(arg_types, ("gamma", "beta", "moving_mean", "moving_var"), channels, data.dtype)
    vec = TensorType((channels,), data.dtype)
    return TupleType((data, vec, vec))


define_op("nn.batch_norm", num_inputs=5, attrs=BatchNormAttrs, type_rel=batch_norm_rel,
            arg_names=("data", "gamma", "beta", "moving_mean", "moving_var"))


@dataclass(frozen=True)
class LayerNormAttrs:
    axis: int = -1
    epsilon: float = 1e-05
    center: bool = True
    scale: bool = True


def layer_norm_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    axis = normalize_axis(attrs.axis, data.ndim)
    _channel_vectors(arg_types, ("gamma", "beta"), data.shape[axis], data.dtype)
    return data


define_op("nn.layer_norm", num_inputs=3, attrs=LayerNormAttrs, type_rel=layer_norm_rel,
            arg_names=("data", "gamma", "beta"))


@dataclass(frozen=True)
class InstanceNormAttrs:
    axis: int = 1
    epsilon: float = 1e-05
    center: bool = True
    scale: bool = True


define_op("nn.instance_norm", num_inputs=3, attrs=InstanceNormAttrs, type_rel=layer_norm_rel,
            arg_names=("data", "gamma", "beta"))


@dataclass(frozen=True)
class GroupNormAttrs:
    num_groups: int = 0
    axis: int = 1
    epsilon: float = 1e-05
    center: bool = True
    scale: bool = True


def group_norm_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    axis = normalize_axis(attrs.axis, data.ndim)
    groups = positive(attrs.num_groups, "num_groups")
    if data.shape[axis] % groups:
        raise TidlxTypeError(f"{data.shape[axis]} channels are not divisible by num_groups {groups}")
    _channel_vectors(arg_types, ("gamma", "beta"), data.shape[axis], data.dtype)
    return data


define_op("nn.group_norm", num_inputs=3, attrs=GroupNormAttrs, type_rel=group_norm_rel,
            arg_names=("data", "gamma", "beta"))


@dataclass(frozen=True)
class LRNAttrs:
    size: int = 5
    axis: int = 1
    bias: float = 2.0
    alpha: float = 1e-05
    beta: float = 0.75


def lrn_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    normalize_axis(attrs.axis, data.ndim)
    positive(attrs.size, "size")
    return data


define_op("nn.lrn", num_inputs=1, attrs=LRNAttrs, type_rel=lrn_rel, arg_names=("data",))


@dataclass(frozen=True)
class L2NormalizeAttrs:
    eps: float = 0.0
    axis: tuple = ()

    def __post_init__(self):
        set_int_tuples(self, "axis")


def l2_normalize_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    for a in int_tuple(attrs.axis, "axis"):
        normalize_axis(a, data.ndim)
    return data


define_op("nn.l2_normalize", num_inputs=1, attrs=L2NormalizeAttrs, type_rel=l2_normalize_rel,
            arg_names=("data",), pattern="out_elemwise_fusable")


# --- softmax --------------------------------------------------------------------------------

@dataclass(frozen=True)
class SoftmaxAttrs:
    axis: int = -1


def softmax_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    normalize_axis(attrs.axis, data.ndim)
    return data


define_op("nn.softmax", num_inputs=1, attrs=SoftmaxAttrs, type_rel=softmax_rel, arg_names=("data",))
define_op("nn.log_softmax", num_inputs=1, attrs=SoftmaxAttrs, type_rel=softmax_rel, arg_names=("data",))


# --- nn.pad ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class PadAttrs:
    pad_width: tuple = ()
    pad_mode: str = "constant"


def pad_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    pad_value = tensor_arg(arg_types, 1, "pad_value")
    if pad_value.ndim != 0:
        raise TidlxTypeError(f"pad_value must be a scalar, got shape {pad_value.shape}")
    mode = check_choice(attrs.pad_mode, ("constant", "edge", "reflect"), "pad_mode")
    width = attrs.pad_width
    if not isinstance(width, tuple) or len(width) != data.ndim:
        raise TidlxTypeError(f"pad_width must have one [before, after] pair per axis ({data.ndim}), "
                             f"got {width!r}")
    out = []
    for axis, (dim, pads) in enumerate(zip(data.shape, width)):
        pads = int_tuple(pads, f"pad_width of axis {axis}")
        if len(pads) != 2:
            raise TidlxTypeError(f"pad_width of axis {axis} must be a [before, after] pair, got {list(pads)}")
        before, after = pads
        if before < 0 or after < 0:
            raise TidlxTypeError(f"pad_width of axis {axis} is negative ({[before, after]})")
        if mode == "reflect" and (before >= dim or after >= dim):
            raise TidlxTypeError(f"reflect padding {[before, after]} of axis {axis} must be smaller than its "
                                 f"size {dim}")
        out.append(dim + before + after)
    return TensorType(tuple(out), data.dtype)


define_op("nn.pad", num_inputs=2, attrs=PadAttrs, type_rel=pad_rel, arg_names=("data", "pad_value"),
            pattern="injective")


# --- nn.batch_flatten, nn.dropout -----------------------------------------------------------

def batch_flatten_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    if data.ndim < 1:
        raise TidlxTypeError("data must have a batch dimension")
    return TensorType((data.shape[0], math.prod(data.shape[1:])), data.dtype)


define_op("nn.batch_flatten", num_inputs=1, type_rel=batch_flatten_rel, arg_names=("data",),
            pattern="injective")


@dataclass(frozen=True)
class DropoutAttrs:
    rate: float = 0.5


def dropout_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    if not 0.0 <= attrs.rate < 1.0:
        raise TidlxTypeError(f"rate={attrs.rate} must be in [0, 1)")
    return TupleType((data, TensorType(data.shape, data.dtype)))


define_op("nn.dropout", num_inputs=1, attrs=DropoutAttrs, type_rel=dropout_rel, arg_names=("data",))


# --- pixel shuffles and upsampling ----------------------------------------------------------

@dataclass(frozen=True)
class SubPixelAttrs:
    block_size: int = 1
    layout: str = "NCHW"
    mode: str = "DCR"


def _nchw4(data: TensorType, layout: str):
    if data.ndim != 4:
        raise TidlxTypeError(f"data must be 4-D, got {data.shape}")
    return data_dims(data.shape, layout, "layout")


def depth_to_space_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    n, c, h, w = _nchw4(data, attrs.layout)
    b = positive(attrs.block_size, "block_size")
    check_choice(attrs.mode, ("DCR", "CRD"), "mode")
    if c % (b * b):
        raise TidlxTypeError(f"{c} channels are not divisible by block_size^2 = {b * b}")
    return TensorType(layout_shape((n, c // (b * b), h * b, w * b), attrs.layout), data.dtype)


def space_to_depth_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    n, c, h, w = _nchw4(data, attrs.layout)
    b = positive(attrs.block_size, "block_size")
    if h % b or w % b:
        raise TidlxTypeError(f"height {h} and width {w} must be divisible by block_size {b}")
    return TensorType(layout_shape((n, c * b * b, h // b, w // b), attrs.layout), data.dtype)


define_op("nn.depth_to_space", num_inputs=1, attrs=SubPixelAttrs, type_rel=depth_to_space_rel,
            arg_names=("data",), pattern="injective")
define_op("nn.space_to_depth", num_inputs=1, attrs=SubPixelAttrs, type_rel=space_to_depth_rel,
            arg_names=("data",), pattern="injective")


@dataclass(frozen=True)
class UpSamplingAttrs:
    scale_h: float = 1.0
    scale_w: float = 1.0
    layout: str = "NCHW"
    method: str = "nearest_neighbor"
    align_corners: bool = False


def _round_half_away(x: float) -> int:
    # TVM rounds the scaled size with tvm::round (half away from zero), not Python's banker's round.
    return int(math.floor(x + 0.5))


def upsampling_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    n, c, h, w = _nchw4(data, attrs.layout)
    check_choice(attrs.method, ("nearest_neighbor", "bilinear", "bicubic"), "method")
    if attrs.scale_h <= 0 or attrs.scale_w <= 0:
        raise TidlxTypeError(f"scales must be positive, got scale_h={attrs.scale_h}, scale_w={attrs.scale_w}")
    oh, ow = _round_half_away(h * attrs.scale_h), _round_half_away(w * attrs.scale_w)
    if oh <= 0 or ow <= 0:
        raise TidlxTypeError(f"output would be empty ({oh}x{ow})")
    return TensorType(layout_shape((n, c, oh, ow), attrs.layout), data.dtype)


define_op("nn.upsampling", num_inputs=1, attrs=UpSamplingAttrs, type_rel=upsampling_rel, arg_names=("data",),
            pattern="injective")
