"""Cost figures of calls: multiply-accumulates (MACs) and bytes, from checked types and attrs.

Conventions (those of TI's and TVM's MAC counters, where they agree):

* convolutions, dense and matmuls are exact: one MAC per weight tap per output element
  (a transposed convolution: per weight tap per *input* element);
* an LSTM counts its gates' matrix products: seq x directions x batch x 4 hidden x (input + hidden);
* element-wise and broadcasting ops, normalizations, softmax and (de/re)quantization count
  one per output element;
* pools count the window per output element; global and adaptive pools and reductions
  count one per input element;
* resizes count the interpolation taps per output element (nearest: 0);
* pure data movement (reshape, transpose, concatenate, split, pad, slices, ...) counts 0.

Each op's count is its ``macs`` facet, registered below next to the others. Ops without one
follow their fusion pattern: ``injective``/``tuple`` -> 0, ``comm_reduce`` -> input size,
anything else -> output size.
"""

from __future__ import annotations

from dataclasses import dataclass
from .errors import TidlxError
from .expr import Call, Constant, Function, GlobalVar
from .op import Op, declare_facet, register_op_attr
from .types import FuncType, TensorType, TupleType, Type


def tensor_bytes(ty: Type) -> int:
    """Bytes of a value of type ``ty``: a tensor's size times its dtype width; tuples sum fields."""
    total = 0
    stack = [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, TensorType):
            total += t.nbytes
        elif isinstance(t, TupleType):
            stack.extend(t.fields)
        elif isinstance(t, FuncType):
            raise TidlxError(f"a function value ({t}) has no size in bytes")
        else:
            raise TidlxError(f"cannot size a value of type {t!r}")
    return total


def _elements(ty: Type) -> int:
    """Elements of a tensor, or of the first tensor of a tuple (batch_norm's normalized output)."""
    while isinstance(ty, TupleType):
        if not ty.fields:
            return 0
        ty = ty.fields[0]
    return ty.size if isinstance(ty, TensorType) else 0


MACS = declare_facet("macs", "multiply-accumulates of one call: fn(call, where) -> int", "tidlx.ir.analysis")

#: interpolation taps per output element of a resize, by method.
_RESIZE_TAPS = {"nearest_neighbor": 0, "nearest": 0, "linear": 4, "bilinear": 4, "cubic": 16, "bicubic": 16}


def _kernel_channels(weight: TensorType, layout: str, letter: str, where: str) -> int:
    if len(layout) != weight.ndim or letter not in layout:
        raise TidlxError(f"{where}: kernel layout '{layout}' does not match the weight shape {weight.shape}")
    return weight.shape[layout.index(letter)]


# -- the MAC facet of each op (ops without one follow their fusion pattern, see _pattern_macs) ------

@register_op_attr(("nn.conv2d", "qnn.conv2d", "nn.conv2d_integer"), MACS)
def _conv_macs(call: Call, where: str) -> int:
    weight = call.args[1].checked_type
    layout = getattr(call.attrs, "kernel_layout", None) or "OIHW"
    return _elements(call.checked_type) * weight.size // max(_kernel_channels(weight, layout, "O", where), 1)


@register_op_attr("nn.deformable_conv2d", MACS)
def _deformable_conv_macs(call: Call, where: str) -> int:
    # the convolution's taps, plus the 4 bilinear taps of each sampled input value (C x KH x KW per output pixel)
    data, weight = call.args[0].checked_type, call.args[2].checked_type
    n, o, oh, ow = call.checked_type.shape
    conv = _elements(call.checked_type) * weight.size // max(o, 1)
    sampling = 4 * n * data.shape[1] * weight.shape[2] * weight.shape[3] * oh * ow
    return conv + sampling


@register_op_attr("nn.conv2d_transpose", MACS)
def _conv_transpose_macs(call: Call, where: str) -> int:
    # one MAC per weight tap per *input* element
    weight = call.args[1].checked_type
    layout = getattr(call.attrs, "kernel_layout", None) or "IOHW"
    return _elements(call.args[0].checked_type) * weight.size // max(_kernel_channels(weight, layout, "I", where), 1)


@register_op_attr(("nn.dense", "qnn.dense"), MACS)
def _dense_macs(call: Call, where: str) -> int:
    return _elements(call.checked_type) * call.args[0].checked_type.shape[-1]


@register_op_attr(("nn.matmul", "nn.batch_matmul", "nn.matmul_integer"), MACS)
def _matmul_macs(call: Call, where: str) -> int:
    a = call.args[0].checked_type
    k = a.shape[-2] if getattr(call.attrs, "transpose_a", False) else a.shape[-1]
    return _elements(call.checked_type) * k


@register_op_attr("nn.lstm", MACS)
def _lstm_macs(call: Call, where: str) -> int:
    # per step and direction, the four gates' products with the input and the hidden state
    seq, batch, input_size = call.args[0].checked_type.shape
    dirs, gates, hidden = call.args[2].checked_type.shape
    return seq * dirs * batch * gates * (input_size + hidden)


@register_op_attr(("nn.max_pool2d", "nn.avg_pool2d"), MACS)
def _window_pool_macs(call: Call, where: str) -> int:
    window = 1
    for d in getattr(call.attrs, "pool_size", ()) or ():
        window *= int(d)
    return _elements(call.checked_type) * window


@register_op_attr(("nn.global_avg_pool2d", "nn.global_max_pool2d", "nn.adaptive_avg_pool2d",
                   "nn.adaptive_max_pool2d"), MACS)
def _input_sized_macs(call: Call, where: str) -> int:
    return _elements(call.args[0].checked_type)


@register_op_attr(("image.resize2d", "nn.upsampling"), MACS)
def _resize_macs(call: Call, where: str) -> int:
    method = str(getattr(call.attrs, "method", "nearest_neighbor"))
    if method not in _RESIZE_TAPS:
        raise TidlxError(f"{where}: unknown resize method '{method}'")
    return _elements(call.checked_type) * _RESIZE_TAPS[method]


@register_op_attr(("nn.batch_norm", "nn.layer_norm", "nn.instance_norm", "nn.group_norm", "nn.lrn",
                   "nn.l2_normalize", "nn.softmax", "nn.log_softmax", "nn.bias_add", "nn.prelu", "nn.leaky_relu",
                   "clip", "qnn.quantize", "qnn.dequantize", "qnn.requantize", "qnn.add", "qnn.subtract", "qnn.mul",
                   "qnn.concatenate", "dynamic_quantize_linear"), MACS)
def _output_sized_macs(call: Call, where: str) -> int:
    return _elements(call.checked_type)


@register_op_attr(("nn.dropout", "nn.pad", "nn.batch_flatten", "nn.depth_to_space", "nn.space_to_depth",
                   "layout_transform", "shape_of"), MACS)
def _data_movement_macs(call: Call, where: str) -> int:
    return 0


@register_op_attr("topk", MACS)
def _topk_macs(call: Call, where: str) -> int:
    # one comparison per input element (a selection over the axis)
    return _elements(call.args[0].checked_type)


@register_op_attr("scatter_nd", MACS)
def _scatter_macs(call: Call, where: str) -> int:
    # one per element written (or accumulated) from the updates
    return _elements(call.args[2].checked_type)


def _pattern_macs(call: Call, where: str) -> int:
    """Ops without a MAC facet: ``injective``/``tuple`` -> 0, ``comm_reduce`` -> the input size,
    anything else -> the output size."""
    if call.op.pattern in ("injective", "tuple"):
        return 0
    if call.op.pattern == "comm_reduce":
        return sum(_elements(a.checked_type) for a in call.args[:1])
    return _elements(call.checked_type)


def macs(call: Call, mod=None) -> int:
    """Multiply-accumulates of one call (see the module docstring for the conventions).

    A call of a closure counts its body; a call of a global function needs ``mod``.
    """
    if not isinstance(call, Call):
        raise TidlxError(f"macs() takes a Call, got {type(call).__name__}")
    if isinstance(call.op, Function):
        return function_macs(call.op, mod)
    if isinstance(call.op, GlobalVar):
        if mod is None or call.op.name_hint not in mod:
            raise TidlxError(f"MACs of a call of @{call.op.name_hint} need the module that defines it")
        return function_macs(mod[call.op.name_hint], mod)
    if not isinstance(call.op, Op):
        return 0  # a call of a function-typed variable: its body is unknown here
    where = f"{call.op.name} '{call.layer}'" if call.layer else call.op.name
    return call.op.get_attr(MACS, _pattern_macs)(call, where)


def function_macs(func: Function, mod=None) -> int:
    """MACs of every call in a function body (nested closures and callees included)."""
    from .traversal import post_order

    total = 0
    for node in post_order(func.body, enter_functions=False):
        if isinstance(node, Call):
            total += macs(node, mod)
    return total


@dataclass(frozen=True)
class CallCost:
    """What one call computes and moves: MACs; bytes of its activations in (non-constant
    arguments), of its constant arguments (weights, biases) and of its output."""

    macs: int
    input_bytes: int
    weight_bytes: int
    output_bytes: int


def call_cost(call: Call, mod=None) -> CallCost:
    """MACs and bytes of one call (see ``macs`` and ``tensor_bytes``)."""
    inputs = weights = 0
    for arg in call.args:
        t = arg.checked_type
        if isinstance(t, FuncType):
            continue
        if isinstance(arg, Constant):
            weights += tensor_bytes(t)
        else:
            inputs += tensor_bytes(t)
    out_t = call.checked_type
    out = 0 if isinstance(out_t, FuncType) else tensor_bytes(out_t)
    return CallCost(macs(call, mod), inputs, weights, out)


def describe_macs(n: int) -> str:
    """``1.23 GMAC`` style, for reports."""
    for unit, scale in (("GMAC", 1e9), ("MMAC", 1e6), ("kMAC", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} MAC"


def describe_bytes(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


__all__ = ["macs", "function_macs", "tensor_bytes", "call_cost", "CallCost", "describe_macs",
           "describe_bytes"]
