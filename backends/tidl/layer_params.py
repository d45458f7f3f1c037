"""The parameters of a TIDL layer, read from the Relay call it is made of.

Each op with a TIDL rule also has two facets registered here, next to the dataclasses they build:

    get_op("nn.conv2d").get_attr("tidl.params")(call)   -> ConvParams(kernel=(3, 3), strides=(1, 1), ...)
    get_op("nn.relu").get_attr("tidl.activation")(call) -> Activation("ReLU", 1, ())

``tidl.params`` builds the parameters of the layer the call anchors; ``tidl.activation`` (ops
TIDL can fuse into a layer as its activation) builds that activation. Every value is a plain
Python value (ints, floats, strings, tuples), so layers compare and print deterministically.
TI's numeric codes (pool type Max 0 / Avg 1, eltwise Prod 0 / Sum 1 / Max 2, resize Nearest 0
/ Bilinear 1, the activation ids) come from TIDL's network record (docs/artifacts.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from ...ir.expr import Call, Constant
from ...ir.op import declare_facet, register_op_attr
from ...ir.ops.reduce import reduced_axes
from ...ir.ops.transform import slice_ranges, transpose_axes
from ...ir.types import TensorType
from .rules import axis_name

TIDL_PARAMS = declare_facet("tidl.params", "the parameters of the TIDL layer a call anchors: fn(call) -> params "
                            "dataclass (backends/tidl/layer_params.py)", "tidlx.backends.tidl")
TIDL_ACTIVATION = declare_facet("tidl.activation", "the TIDL activation a call is when fused into a layer: "
                                "fn(call) -> Activation", "tidlx.backends.tidl")

#: TIDL's activation types (the network record's actType).
ACTIVATION_IDS = {"none": 0, "ReLU": 1, "PReLU": 2, "ReLU6": 3, "Clip": 4, "Sigmoid": 5, "Tanh": 6,
                  "HardSigmoid": 7, "ELU": 8, "GELU": 9}
POOL_TYPE_IDS = {"Max": 0, "Avg": 1}
ELTWISE_TYPE_IDS = {"Prod": 0, "Sum": 1, "Max": 2}
RESIZE_MODE_IDS = {"Nearest": 0, "Bilinear": 1}


@dataclass(frozen=True)
class Activation:
    """A layer's activation: TIDL's type name and id, and its parameters as ``(name, value)``
    pairs (clip bounds, a leaky slope, hard-sigmoid alpha/beta); a per-channel PReLU slope is
    one of the layer's constants instead."""

    type: str
    type_id: int
    params: Tuple[Tuple[str, float], ...] = ()

    @classmethod
    def of(cls, type_name: str, **params: float) -> "Activation":
        return cls(type_name, ACTIVATION_IDS[type_name], tuple(sorted((k, float(v)) for k, v in params.items())))


NO_ACTIVATION = Activation("none", 0)


def _shape(expr) -> Tuple[int, ...]:
    t = expr.checked_type
    return tuple(int(d) for d in t.shape) if isinstance(t, TensorType) else ()


def _pair(value) -> Tuple[int, int]:
    v = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    return (int(v[0]), int(v[0])) if len(v) == 1 else (int(v[0]), int(v[1]))


def _pads(padding) -> Tuple[int, int, int, int]:
    """Relay's 1-, 2- or 4-value padding as (top, left, bottom, right)."""
    p = tuple(int(x) for x in (padding if isinstance(padding, (tuple, list)) else (padding,)))
    if len(p) == 1:
        return (p[0],) * 4
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    return p[:4]


def _axis(axis: int, ndim: int) -> int:
    return axis % ndim if ndim else 0


# -- parameter records -------------------------------------------------------------------------------

@dataclass(frozen=True)
class NoParams:
    """Layers without parameters of their own (activation layers, Flatten)."""


@dataclass(frozen=True)
class ConvParams:
    """Conv and Deconv: kernel (h, w), strides, pads (top, left, bottom, right), dilation, groups,
    input and output channels; ``output_padding`` for Deconv."""

    kernel: Tuple[int, int]
    strides: Tuple[int, int]
    pads: Tuple[int, int, int, int]
    dilation: Tuple[int, int]
    groups: int
    in_channels: int
    out_channels: int
    output_padding: Tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class PoolParams:
    """Pool: TIDL's pool type (Max 0 / Avg 1), kernel, strides, pads; a global pool has the whole
    plane as its kernel."""

    pool_type: str
    pool_type_id: int
    kernel: Tuple[int, int]
    strides: Tuple[int, int]
    pads: Tuple[int, int, int, int]
    ceil_mode: bool
    count_include_pad: bool
    global_pool: bool


@dataclass(frozen=True)
class InnerProductParams:
    """InnerProduct: input and output features, and whether the second input is transposed
    (``nn.dense`` weights are [out, in]: transposed)."""

    in_features: int
    out_features: int
    transpose_a: bool
    transpose_b: bool


@dataclass(frozen=True)
class BatchNormParams:
    """BatchNorm (TIDL's per-channel scale + bias): the channels along ``axis``, the epsilon of
    a batch_norm (0.0 for other forms), and ``form``: what it was made from (batch_norm,
    bias_add, channelwise, hard_sigmoid, gelu)."""

    channels: int
    axis: int
    epsilon: float
    form: str


@dataclass(frozen=True)
class EltWiseParams:
    """EltWise: TIDL's type (Prod 0 / Sum 1 / Max 2), the Relay operation (add, subtract,
    multiply, divide), its input count and whether one input is a constant."""

    eltwise_type: str
    eltwise_type_id: int
    operation: str
    num_inputs: int
    constant_input: bool


@dataclass(frozen=True)
class AxisParams:
    """SoftMax and Concat: the (normalized) axis, TIDL's name of it (W, H, C, ...), input count."""

    axis: int
    axis_name: str
    num_inputs: int = 1


@dataclass(frozen=True)
class ResizeParams:
    """Resize: TIDL's mode (Nearest 0 / Bilinear 1), ratios (h, w), output size (h, w) and the
    coordinate transformation."""

    mode: str
    mode_id: int
    ratios: Tuple[float, float]
    out_size: Tuple[int, int]
    coordinate_transformation_mode: str


@dataclass(frozen=True)
class SliceParams:
    """Slice: per output, the (begin, end) of each axis that is cut; ``axis`` the one cut axis
    (None when a strided slice cuts several)."""

    axis: Optional[int]
    ranges: Tuple[Tuple[Tuple[int, int, int], ...], ...]   # per output: (axis, begin, end) per cut axis


@dataclass(frozen=True)
class ShapeParams:
    """Reshape, Squeeze, Flatten, Transpose: the output shape and, for Transpose, the permutation."""

    out_shape: Tuple[int, ...]
    perm: Tuple[int, ...] = ()


@dataclass(frozen=True)
class ReduceParams:
    """Reduce (Max/Min) and ArgMax: the operation, the reduced axis, keepdims."""

    operation: str
    axis: int
    keepdims: bool


@dataclass(frozen=True)
class PadParams:
    """Pad: per axis (before, after), and the pad value."""

    pads: Tuple[Tuple[int, int], ...]
    value: float


@dataclass(frozen=True)
class DepthToSpaceParams:
    block_size: int
    mode: str


@dataclass(frozen=True)
class GatherParams:
    axis: int


@dataclass(frozen=True)
class ScatterParams:
    """ScatterElements for ScatterND: the reduction (ONNX's name: none, add, max, min)."""

    reduction: str


@dataclass(frozen=True)
class TopKParams:
    """TopK: K, the axis (normalized) and whether the largest values are kept."""

    k: int
    axis: int
    largest: bool


@dataclass(frozen=True)
class LayerNormParams:
    axis: int
    epsilon: float


@dataclass(frozen=True)
class DataConvertParams:
    """DataConvert (a cast at the graph's inputs or outputs): the output element type."""

    out_dtype: str


# -- tidl.params: one builder per op family ----------------------------------------------------------

@register_op_attr("nn.conv2d", TIDL_PARAMS)
def conv2d_params(call: Call) -> ConvParams:
    a = call.attrs
    w = _shape(call.args[1])
    return ConvParams((w[2], w[3]), _pair(a.strides), _pads(a.padding), _pair(a.dilation), int(a.groups),
                      _shape(call.args[0])[1], w[0])


@register_op_attr("nn.conv2d_transpose", TIDL_PARAMS)
def conv2d_transpose_params(call: Call) -> ConvParams:
    a = call.attrs
    w = _shape(call.args[1])   # IOHW
    return ConvParams((w[2], w[3]), _pair(a.strides), _pads(a.padding), _pair(a.dilation), int(a.groups),
                      w[0], w[1] * int(a.groups), _pair(a.output_padding))


def _pool2d(kind: str):
    def pool2d_params(call: Call) -> PoolParams:
        a = call.attrs
        return PoolParams(kind, POOL_TYPE_IDS[kind], _pair(a.pool_size), _pair(a.strides), _pads(a.padding),
                          bool(a.ceil_mode), bool(getattr(a, "count_include_pad", False)), False)
    return pool2d_params


register_op_attr("nn.max_pool2d", TIDL_PARAMS, _pool2d("Max"))
register_op_attr("nn.avg_pool2d", TIDL_PARAMS, _pool2d("Avg"))


@register_op_attr(("nn.global_avg_pool2d", "nn.adaptive_avg_pool2d"), TIDL_PARAMS)
def global_pool_params(call: Call) -> PoolParams:
    _, _, h, w = _shape(call.args[0])
    return PoolParams("Avg", POOL_TYPE_IDS["Avg"], (h, w), (1, 1), (0, 0, 0, 0), False, False, True)


@register_op_attr(("nn.dense", "nn.matmul", "nn.batch_matmul"), TIDL_PARAMS)
def inner_product_params(call: Call) -> InnerProductParams:
    a_shape = _shape(call.args[0])
    out = _shape(call)
    transpose_a = bool(getattr(call.attrs, "transpose_a", False))
    transpose_b = True if call.op_name == "nn.dense" else bool(getattr(call.attrs, "transpose_b", False))
    in_features = a_shape[-2] if transpose_a else a_shape[-1]
    return InnerProductParams(in_features, out[-1], transpose_a, transpose_b)


def _channels(call: Call, axis: int) -> int:
    s = _shape(call.args[0])
    return s[_axis(axis, len(s))] if s else 1


@register_op_attr("nn.batch_norm", TIDL_PARAMS)
def batch_norm_params(call: Call) -> BatchNormParams:
    ndim = len(_shape(call.args[0]))
    return BatchNormParams(_channels(call, call.attrs.axis), _axis(call.attrs.axis, ndim), float(call.attrs.epsilon),
                           "batch_norm")


@register_op_attr("nn.bias_add", TIDL_PARAMS)
def bias_add_params(call: Call) -> BatchNormParams:
    ndim = len(_shape(call.args[0]))
    return BatchNormParams(_channels(call, call.attrs.axis), _axis(call.attrs.axis, ndim), 0.0, "bias_add")


def _eltwise(kind: str):
    def eltwise_params(call: Call) -> EltWiseParams:
        constant = any(isinstance(a, Constant) for a in call.args)
        return EltWiseParams(kind, ELTWISE_TYPE_IDS[kind], call.op_name, len(call.args), constant)
    return eltwise_params


# TIDL subtracts (one constant input) as a sum and divides as a product by the inverse.
register_op_attr(("add", "subtract"), TIDL_PARAMS, _eltwise("Sum"))
register_op_attr(("multiply", "divide"), TIDL_PARAMS, _eltwise("Prod"))


def _activation_layer_params(call: Call) -> NoParams:
    return NoParams()


register_op_attr(("nn.relu", "nn.leaky_relu", "nn.prelu", "sigmoid", "tanh", "clip", "maximum", "minimum",
                  "nn.batch_flatten"), TIDL_PARAMS, _activation_layer_params)


@register_op_attr("nn.softmax", TIDL_PARAMS)
def softmax_params(call: Call) -> AxisParams:
    ndim = len(_shape(call.args[0]))
    axis = _axis(call.attrs.axis, ndim)
    return AxisParams(axis, axis_name(axis, ndim))


@register_op_attr("concatenate", TIDL_PARAMS)
def concat_params(call: Call) -> AxisParams:
    ndim = len(_shape(call))
    axis = _axis(call.attrs.axis, ndim)
    fields = call.args[0].checked_type.fields
    return AxisParams(axis, axis_name(axis, ndim), len(fields))


@register_op_attr(("image.resize2d", "nn.upsampling"), TIDL_PARAMS)
def resize_params(call: Call) -> ResizeParams:
    a = call.attrs
    _, _, h, w = _shape(call.args[0])
    _, _, oh, ow = _shape(call)
    mode = "Nearest" if a.method == "nearest_neighbor" else "Bilinear"
    transform = getattr(a, "coordinate_transformation_mode", None)
    if transform is None:
        transform = "align_corners" if getattr(a, "align_corners", False) else "asymmetric"
    return ResizeParams(mode, RESIZE_MODE_IDS[mode], (oh / h, ow / w), (oh, ow), str(transform))


@register_op_attr("strided_slice", TIDL_PARAMS)
def strided_slice_params(call: Call) -> SliceParams:
    data = _shape(call.args[0])
    cut = tuple((axis, begin, end) for axis, (begin, end, _) in enumerate(slice_ranges(data, call.attrs))
                if (begin, end) != (0, data[axis]))
    return SliceParams(cut[0][0] if len(cut) == 1 else None, (cut,))


@register_op_attr("split", TIDL_PARAMS)
def split_params(call: Call) -> SliceParams:
    data = _shape(call.args[0])
    axis = _axis(call.attrs.axis, len(data))
    ranges, begin = [], 0
    for field in call.checked_type.fields:
        end = begin + int(field.shape[axis])
        ranges.append(((axis, begin, end),))
        begin = end
    return SliceParams(axis, tuple(ranges))


@register_op_attr(("reshape", "squeeze", "expand_dims"), TIDL_PARAMS)
def reshape_params(call: Call) -> ShapeParams:
    return ShapeParams(_shape(call))


@register_op_attr("transpose", TIDL_PARAMS)
def transpose_params(call: Call) -> ShapeParams:
    return ShapeParams(_shape(call), tuple(transpose_axes(len(_shape(call.args[0])), call.attrs.axes)))


def _reduce(operation: str):
    def reduce_params(call: Call) -> ReduceParams:
        ndim = len(_shape(call.args[0]))
        axes = reduced_axes(ndim, call.attrs)
        return ReduceParams(operation, axes[0] if axes else 0, bool(call.attrs.keepdims))
    return reduce_params


register_op_attr("max", TIDL_PARAMS, _reduce("Max"))
register_op_attr("min", TIDL_PARAMS, _reduce("Min"))
register_op_attr("argmax", TIDL_PARAMS, _reduce("ArgMax"))


@register_op_attr("nn.pad", TIDL_PARAMS)
def pad_params(call: Call) -> PadParams:
    value = call.args[1]
    pad_value = float(value.data.reshape(-1)[0]) if isinstance(value, Constant) and value.data.size == 1 else 0.0
    return PadParams(tuple((int(b), int(e)) for b, e in call.attrs.pad_width), pad_value)


@register_op_attr("nn.depth_to_space", TIDL_PARAMS)
def depth_to_space_params(call: Call) -> DepthToSpaceParams:
    return DepthToSpaceParams(int(call.attrs.block_size), str(call.attrs.mode))


@register_op_attr("take", TIDL_PARAMS)
def take_params(call: Call) -> GatherParams:
    ndim = len(_shape(call.args[0]))
    return GatherParams(_axis(int(call.attrs.axis), ndim))


@register_op_attr("scatter_nd", TIDL_PARAMS)
def scatter_nd_params(call: Call) -> ScatterParams:
    return ScatterParams("none" if call.attrs.mode == "update" else str(call.attrs.mode))


@register_op_attr("topk", TIDL_PARAMS)
def topk_params(call: Call) -> TopKParams:
    ndim = len(_shape(call.args[0]))
    return TopKParams(int(call.attrs.k), _axis(int(call.attrs.axis), ndim), not call.attrs.is_ascend)


@register_op_attr("nn.layer_norm", TIDL_PARAMS)
def layer_norm_params(call: Call) -> LayerNormParams:
    ndim = len(_shape(call.args[0]))
    return LayerNormParams(_axis(call.attrs.axis, ndim), float(call.attrs.epsilon))


@register_op_attr("cast", TIDL_PARAMS)
def cast_params(call: Call) -> DataConvertParams:
    return DataConvertParams(str(call.attrs.dtype))


# -- tidl.activation -----------------------------------------------------------------------------------

@register_op_attr("nn.relu", TIDL_ACTIVATION)
def relu_activation(call: Call) -> Activation:
    return Activation.of("ReLU")


@register_op_attr("clip", TIDL_ACTIVATION)
def clip_activation(call: Call) -> Activation:
    lo, hi = float(call.attrs.a_min), float(call.attrs.a_max)
    if (lo, hi) == (0.0, 6.0):
        return Activation.of("ReLU6")
    return Activation.of("Clip", min=lo, max=hi)


def _single_constant(call: Call) -> Optional[float]:
    consts = [a for a in call.args if isinstance(a, Constant) and a.data.size == 1]
    return float(consts[0].data.reshape(-1)[0]) if consts else None


@register_op_attr("maximum", TIDL_ACTIVATION)
def maximum_activation(call: Call) -> Activation:
    """max(x, c) is Clip(c, +inf) (what preparation's ConvertMaxMinToClip makes of it)."""
    return Activation.of("Clip", min=_single_constant(call), max=float("inf"))


@register_op_attr("minimum", TIDL_ACTIVATION)
def minimum_activation(call: Call) -> Activation:
    return Activation.of("Clip", min=float("-inf"), max=_single_constant(call))


@register_op_attr("nn.leaky_relu", TIDL_ACTIVATION)
def leaky_relu_activation(call: Call) -> Activation:
    """TIDL runs a leaky ReLU as a PReLU with one slope for every channel."""
    return Activation.of("PReLU", slope=float(call.attrs.alpha))


@register_op_attr("nn.prelu", TIDL_ACTIVATION)
def prelu_activation(call: Call) -> Activation:
    return Activation.of("PReLU")   # the per-channel slope is the layer's constant nn.prelu.alpha


@register_op_attr("sigmoid", TIDL_ACTIVATION)
def sigmoid_activation(call: Call) -> Activation:
    return Activation.of("Sigmoid")


@register_op_attr("tanh", TIDL_ACTIVATION)
def tanh_activation(call: Call) -> Activation:
    return Activation.of("Tanh")


__all__ = ["TIDL_PARAMS", "TIDL_ACTIVATION", "ACTIVATION_IDS", "POOL_TYPE_IDS", "ELTWISE_TYPE_IDS",
           "RESIZE_MODE_IDS", "Activation", "NO_ACTIVATION", "NoParams", "ConvParams", "PoolParams",
           "InnerProductParams", "BatchNormParams", "EltWiseParams", "AxisParams", "ResizeParams", "SliceParams",
           "ShapeParams", "ReduceParams", "PadParams", "DepthToSpaceParams", "GatherParams", "ScatterParams", "TopKParams", "LayerNormParams",
           "DataConvertParams"]
