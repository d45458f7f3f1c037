"""Cost figures of calls: multiply-accumulates (MACs) and bytes, from checked types and attrs.

Conventions (those of TI's and TVM's MAC counters, where they agree):

* convolutions, dense and matmuls are exact: one MAC per weight tap per output element
  (a transposed convolution: per weight tap per *input* element);
* element-wise and broadcasting ops, normalizations, softmax and (de/re)quantization count
  one per output element;
* pools count the window per output element; global and adaptive pools and reductions
  count one per input element;
* resizes count the interpolation taps per output element (nearest: 0);
* pure data movement (reshape, transpose, concatenate, split, pad, slices, ...) counts 0.

Ops not named here follow their registered fusion pattern: ``injective``/``tuple`` -> 0,
``comm_reduce`` -> input size, anything else -> output size.
"""

from __future__ import annotations

from dataclasses import dataclass
from .errors import TidlxError
from .expr import Call, Constant, Function, GlobalVar
from .op import Op
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


#: kernel layouts by op (attrs.kernel_layout overrides); 'O' = output and 'I' = input channels.
_CONV = {"nn.conv1d": "OIW", "nn.conv2d": "OIHW", "nn.conv3d": "OIDHW", "qnn.conv2d": "OIHW"}
_CONV_TRANSPOSE = {"nn.conv1d_transpose": "IOW", "nn.conv2d_transpose": "IOHW",
                   "nn.conv3d_transpose": "IODHW"}
_DENSE = ("nn.dense", "qnn.dense")
_MATMUL = ("nn.matmul", "nn.batch_matmul")
_WINDOW_POOLS = ("nn.max_pool1d", "nn.max_pool2d", "nn.max_pool3d",
                 "nn.avg_pool1d", "nn.avg_pool2d", "nn.avg_pool3d")
_INPUT_SIZED = ("nn.global_avg_pool2d", "nn.global_max_pool2d",
                "nn.adaptive_avg_pool1d", "nn.adaptive_avg_pool2d", "nn.adaptive_avg_pool3d",
                "nn.adaptive_max_pool1d", "nn.adaptive_max_pool2d", "nn.adaptive_max_pool3d")
_OUTPUT_SIZED = ("nn.batch_norm", "nn.layer_norm", "nn.instance_norm", "nn.group_norm", "nn.lrn",
                 "nn.l2_normalize", "nn.softmax", "nn.log_softmax", "nn.bias_add", "nn.prelu",
                 "nn.leaky_relu", "clip", "qnn.quantize", "qnn.dequantize", "qnn.requantize",
                 "qnn.add", "qnn.subtract", "qnn.mul", "qnn.concatenate")
_DATA_MOVEMENT = ("nn.dropout", "nn.pad", "nn.batch_flatten", "nn.depth_to_space", "nn.space_to_depth",
                  "layout_transform", "shape_of")
#: interpolation taps per output element of a resize, by method.
_RESIZE_TAPS = {"nearest_neighbor": 0, "nearest": 0, "linear": 4, "bilinear": 4, "cubic": 16, "bicubic": 16}


def _kernel_channels(weight: TensorType, layout: str, letter: str, where: str) -> int:
    if len(layout) != weight.ndim or letter not in layout:
        raise TidlxError(f"{where}: kernel layout '{layout}' does not match the weight shape {weight.shape}")
    return weight.shape[layout.index(letter)]


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
    name = call.op.name
    where = f"{name} '{call.layer}'" if call.layer else name
    out_t = call.checked_type
    arg_ts = [a.checked_type for a in call.args]
    if name in _CONV:
        weight = arg_ts[1]
        layout = getattr(call.attrs, "kernel_layout", None) or _CONV[name]
        return _elements(out_t) * weight.size // max(_kernel_channels(weight, layout, "O", where), 1)
    if name in _CONV_TRANSPOSE:
        weight = arg_ts[1]
        layout = getattr(call.attrs, "kernel_layout", None) or _CONV_TRANSPOSE[name]
        return _elements(arg_ts[0]) * weight.size // max(_kernel_channels(weight, layout, "I", where), 1)
    if name in _DENSE:
        return _elements(out_t) * arg_ts[0].shape[-1]
    if name in _MATMUL:
        a = arg_ts[0]
        k = a.shape[-2] if getattr(call.attrs, "transpose_a", False) else a.shape[-1]
        return _elements(out_t) * k
    if name in _WINDOW_POOLS:
        window = 1
        for d in getattr(call.attrs, "pool_size", ()) or ():
            window *= int(d)
        return _elements(out_t) * window
    if name in _INPUT_SIZED:
        return _elements(arg_ts[0])
    if name in ("image.resize1d", "image.resize2d", "image.resize3d", "nn.upsampling", "nn.upsampling3d"):
        method = str(getattr(call.attrs, "method", "nearest_neighbor"))
        if method not in _RESIZE_TAPS:
            raise TidlxError(f"{where}: unknown resize method '{method}'")
        return _elements(out_t) * _RESIZE_TAPS[method]
    if name in _OUTPUT_SIZED:
        return _elements(out_t)
    if name in _DATA_MOVEMENT:
        return 0
    if call.op.pattern in ("injective", "tuple"):
        return 0
    if call.op.pattern == "comm_reduce":
        return sum(_elements(t) for t in arg_ts[:1])
    return _elements(out_t)


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
