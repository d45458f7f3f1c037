"""ConvertConv7x7Stride4ToStride1: a 7x7 convolution of stride 4 becomes the same convolution
of stride 1 followed by two 1x1 max pools of stride 2 (TI's model optimizer rule
``convert_conv_7x7_stride4_to_stride1``, on by default in TI's runner; SegFormer's patch
embedding). TIDL's convolutions take strides 1 and 2.

    nn.conv2d(x, w, strides=[4, 4], padding=[3, 3, 3, 3], kernel_size=[7, 7])
    ->
    %0 = nn.conv2d(x, w, padding=[3, 3, 3, 3], kernel_size=[7, 7]);
    %1 = nn.max_pool2d(%0, pool_size=[1, 1], strides=[2, 2]);
    nn.max_pool2d(%1, pool_size=[1, 1], strides=[2, 2])

As in TI's rule, the kernel is 7x7 and the strides 4x4; padding, dilation and groups stay. Where
the convolution's bias is added by the call right after it (as tidlx imports an ONNX Conv with a
bias), the pools come after that addition, so the convolution keeps its bias. All new calls
take the convolution's layer name.

Exactness: the stride-1 output at row 4i and column 4j is the stride-4 output at (i, j), and the
two pools keep every fourth row and column starting at 0 (the output sizes agree:
floor((L - 1) / 4) + 1 for a stride-1 output of L rows); the results are equal.
"""

from __future__ import annotations

from ..expr import Call
from ..op import call
from ..pattern import is_op, wildcard
from ..rewrite import RewriteTable
from ..transform import module_pass

#: TI's name of the rule.
TI_RULE = "convert_conv_7x7_stride4_to_stride1"


def is_7x7_stride4(call_) -> bool:
    if not isinstance(call_, Call) or call_.op_name != "nn.conv2d":
        return False
    a = call_.attrs
    kernel = tuple(a.kernel_size) if a.kernel_size else tuple(call_.args[1].checked_type.shape[2:])
    return kernel == (7, 7) and tuple(a.strides) == (4, 4) and a.data_layout == "NCHW"


def _stride1(conv: Call) -> Call:
    attrs = {f: getattr(conv.attrs, f) for f in conv.attrs.__dataclass_fields__}
    attrs["strides"] = (1, 1)
    return call("nn.conv2d", *conv.args, layer=conv.layer, **attrs)


def _subsample(x, layer):
    for _ in range(2):
        x = call("nn.max_pool2d", x, pool_size=[1, 1], strides=[2, 2], padding=[0, 0, 0, 0], layer=layer)
    return x


def _with_bias(m):
    bias_add = m.expr
    conv = bias_add.args[0]
    if not is_7x7_stride4(conv) or not m.has_single_user(conv):
        return None
    biased = Call(bias_add.op, [_stride1(conv), bias_add.args[1]], bias_add.attrs, layer=bias_add.layer)
    return _subsample(biased, conv.layer)


def _alone(m):
    conv = m.expr
    if not is_7x7_stride4(conv):
        return None
    users = m.users(conv) or ()
    if len(users) == 1 and isinstance(users[0], Call) and users[0].op_name == "nn.bias_add":
        return None  # rewritten with its bias
    return _subsample(_stride1(conv), conv.layer)


CONVERT_CONV_7X7_STRIDE4_TO_STRIDE1 = RewriteTable([
    ("conv_7x7_stride4_with_bias", is_op("nn.bias_add")(is_op("nn.conv2d"), wildcard()), _with_bias),
    ("conv_7x7_stride4", is_op("nn.conv2d"), _alone),
], name="ConvertConv7x7Stride4ToStride1")


@module_pass("ConvertConv7x7Stride4ToStride1", opt_level=0)
def convert_conv_7x7_stride4_to_stride1(mod, ctx):
    """Runs a 7x7 stride-4 convolution at stride 1 and keeps every fourth row and column with two
    1x1 stride-2 max pools (TI's convert_conv_7x7_stride4_to_stride1)."""
    return CONVERT_CONV_7X7_STRIDE4_TO_STRIDE1.rewrite(mod)


ConvertConv7x7Stride4ToStride1 = convert_conv_7x7_stride4_to_stride1

__all__ = ["ConvertConv7x7Stride4ToStride1", "CONVERT_CONV_7X7_STRIDE4_TO_STRIDE1", "is_7x7_stride4", "TI_RULE"]
