"""Convolutions, transposed convolutions, inner products (dense/matmul) and bias adds; the
deformable convolution, which TIDL lacks (facet ``tidl.no_layer``: its host reason).

Not checkable on the float graph: TI's "MatMul: no signed input with unsigned output" depends
on the ranges calibration finds; it is left to the import.
"""

from __future__ import annotations

from ....ir.expr import Call
from ....ir.op import register_op_attr
from ._base import TIDL_NO_LAYER, axis_word, fmt_shape, is_const, norm_axis, pair, rule, shape

register_op_attr("nn.deformable_conv2d", TIDL_NO_LAYER,
                 "TIDL has no deformable convolution (no layer samples its input at per-pixel offsets); it runs on "
                 "the host: Arm, or the C7x through TVM, whose topi has a deformable conv")

#: (kernel, stride) of the depthwise convolutions TIDL runs.
DEPTHWISE = ((3, 1), (3, 2), (5, 2), (7, 1), (7, 2))
DEPTHWISE_TEXT = "depthwise: 3x3 s1/s2, 5x5 s2, 7x7 s1/s2"


def _layouts(attrs, kernel_layout: str):
    out_layout = attrs.out_layout or attrs.data_layout
    if attrs.data_layout != "NCHW" or out_layout != "NCHW" or attrs.kernel_layout != kernel_layout:
        return (f"layout data={attrs.data_layout}, kernel={attrs.kernel_layout}, out={out_layout} is not "
                f"supported (TIDL takes NCHW data and {kernel_layout} weights; convert the layout first)")
    return None


def _constant_weight(call, what: str = "weight"):
    if not is_const(call.args[1]):
        return (f"the {what} is not a constant (TIDL layers take constant weights; bind the params and fold "
                f"constants first)")
    return None


@rule("nn.conv2d", layer="Conv")
def conv2d(call, ctx):
    attrs = call.attrs
    reason = _layouts(attrs, "OIHW") or _constant_weight(call)
    if reason:
        return reason
    _, _, kh, kw = shape(call.args[1])
    in_channels = shape(call.args[0])[1]
    sh, sw = pair(attrs.strides)
    dh, dw = pair(attrs.dilation)
    if sh != sw:
        return f"strides {sh}x{sw} are not supported (TIDL needs the same stride in H and W)"
    stride = sh
    if attrs.groups > 1 and attrs.groups == in_channels:
        if kh != kw or (kh, stride) not in DEPTHWISE:
            return f"depthwise {kh}x{kw} stride {stride} is not supported ({DEPTHWISE_TEXT})"
    if stride == 4 and (kh, kw) != (11, 11):
        return f"stride 4 with a {kh}x{kw} kernel is not supported (stride 4 only with an 11x11 kernel)"
    if stride == 2 and max(kh, kw) > 7:
        return f"kernel {kh}x{kw} with stride 2 is not supported (kernels larger than 7 need stride 1)"
    if stride not in (1, 2, 4):
        return f"stride {stride} is not supported (strides 1 and 2; 4 only with an 11x11 kernel)"
    if (dh, dw) != (1, 1) and stride != 1:
        return f"dilation {dh}x{dw} with stride {stride} is not supported (dilated convolutions need stride 1)"
    return None


@rule("nn.conv2d_transpose", layer="Deconv")
def conv2d_transpose(call, ctx):
    attrs = call.attrs
    reason = _layouts(attrs, "IOHW") or _constant_weight(call)
    if reason:
        return reason
    _, _, kh, kw = shape(call.args[1])
    strides, dilation = pair(attrs.strides), pair(attrs.dilation)
    if (kh, kw) not in ((2, 2), (4, 4)):
        return f"kernel {kh}x{kw} is not supported (transposed convolutions: 2x2 or 4x4 kernels, stride 2)"
    if strides != (2, 2):
        return (f"stride {strides[0]}x{strides[1]} is not supported (transposed convolutions: stride 2; "
                f"a Resize upsamples better)")
    if attrs.groups != 1:
        return f"groups={attrs.groups} is not supported (transposed convolutions: group 1)"
    if dilation != (1, 1):
        return f"dilation {dilation[0]}x{dilation[1]} is not supported (transposed convolutions: dilation 1)"
    return None


def _same_layer_producer(call, arg, op_name: str) -> bool:
    """Whether ``arg`` is a call of ``op_name`` made by the same ONNX node as ``call`` (the Gemm
    importer writes transA as a transpose and a variable alpha as a multiply of A)."""
    return (isinstance(arg, Call) and arg.op_name == op_name and call.layer is not None
            and arg.layer == call.layer)


@rule("nn.dense", "nn.matmul", layer="InnerProduct")
def dense(call, ctx):
    data = call.args[0]
    data_shape = shape(data)
    if len(data_shape) > 3 and any(d != 1 for d in data_shape[:-3]):
        return (f"input of shape {fmt_shape(data_shape)} is not supported (inner products take up to 3-D "
                f"inputs; dims before the last three must be 1)")
    if _same_layer_producer(call, data, "transpose"):
        return "Gemm with transA=1 is not supported (TIDL inner products need transA=0)"
    if _same_layer_producer(call, data, "multiply") and not is_const(call.args[1]):
        return "Gemm with alpha != 1 and a variable B is not supported (TIDL inner products need alpha=1)"
    return None


@rule("nn.batch_matmul", layer="InnerProduct")
def batch_matmul(call, ctx):
    a, b = call.args
    ba, bb = shape(a)[0], shape(b)[0]
    if ba != bb and not (is_const(a) or is_const(b)):
        return (f"variable inputs with batches {ba} and {bb} broadcast over the batch, which TIDL does not "
                f"support (make both batches equal)")
    return None


@rule("nn.bias_add", layer="BatchNorm")
def bias_add(call, ctx):
    data, bias = call.args
    if not is_const(bias):
        return "the bias is not a constant (TIDL adds constant per-channel biases)"
    ndim = len(shape(data))
    axis = norm_axis(call.attrs.axis, ndim)
    if axis == ndim - 1 and isinstance(data, Call) and data.op_name in ("nn.dense", "nn.matmul"):
        return None   # an inner product's bias: one per output feature, the last axis (TI's MatMul + Add)
    if ndim >= 2 and axis != 1:
        return (f"a bias of shape {fmt_shape(shape(bias))} along {axis_word(axis, ndim)} is not supported "
                f"(TIDL adds biases per channel, axis 1, or per output feature of an inner product)")
    return None
