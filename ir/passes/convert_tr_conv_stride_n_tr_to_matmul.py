"""ConvertTrConvStrideNTrToMatmul: a transpose -> convolution whose kernel equals its stride (a
patch embedding, as in vision transformers) -> transpose becomes reshapes, a transpose and a MatMul
(TI's model optimizer rule ``convert_tr_conv_stride_n_tr_to_matmul``, on by default in TI's runner;
its first rule in TI's order). TIDL takes a strided convolution only with some kernels (stride 4
only with 11x11); it takes the MatMul.

    %0 = transpose(x, axes=[0, 3, 1, 2]);                  # x: (N, H, W, C) -> NCHW
    %1 = nn.conv2d(%0, w, strides=[k, k], kernel_size=[k, k]);   w: (O, C, k, k)
    %2 = nn.bias_add(%1, b);                               # optional
    transpose(%2, axes=[0, 2, 3, 1])                       # (N, H/k, W/k, O)
    ->
    %0 = reshape(x, newshape=[N, H/k, k, W/k, k, C]);
    %1 = transpose(%0, axes=[0, 1, 3, 2, 4, 5]);           # each patch's k x k x C values together
    %2 = reshape(%1, newshape=[N, H/k * W/k, k * k * C]);
    %3 = nn.dense(%2, w');                                 # ONNX MatMul by w as (kh, kw, C, O), (k*k*C, O)
    %4 = add(%3, b);                                       # only with a bias
    reshape(%4, newshape=[N, H/k, W/k, O])

TI's conditions: the convolution has one producer, a transpose, and one user, a transpose; square
kernel k with stride k along the height; group 1, no dilation along the height; constant weights; a
4-D input whose height and width divide by k. TI's rule does not look at the transposes'
permutations, the padding, the width's stride or dilation: it assumes NHWC in and out and no
padding. tidlx rewrites only where those assumptions hold (the transposes are exactly NHWC -> NCHW
and back, stride and dilation the same along both axes, no padding; the first transpose's only
user is the convolution), where the rewrite is the same function, and leaves the rest. All new
calls take the convolution's layer name; the two transposes are gone. TI writes the bias as a
(1, 1, O) constant; tidlx writes it as (O,), the same broadcast: its MatMul and Add share the
convolution's layer, so tidlx judges them as one Gemm, whose bias TIDL takes as [O].

Exactness: the MatMul sums the same products as the convolution, in another order; the float
results agree to rounding.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..expr import Constant
from ..op import call
from ..pattern import is_constant, is_op, wildcard
from ..rewrite import RewriteTable
from ..transform import module_pass
from ..types import TensorType

#: TI's name of the rule.
TI_RULE = "convert_tr_conv_stride_n_tr_to_matmul"

_TO_NCHW = [0, 3, 1, 2]
_TO_NHWC = [0, 2, 3, 1]


def _axes(transpose) -> Optional[list]:
    axes = transpose.attrs.axes
    return None if axes is None else [int(a) % 4 for a in axes]


def _patch_kernel(conv) -> Optional[int]:
    """k when ``conv`` is a k x k, stride-k, unpadded, undilated, ungrouped NCHW/OIHW conv."""
    a = conv.attrs
    kernel = [int(v) for v in conv.args[1].data.shape[2:]] if isinstance(conv.args[1], Constant) else None
    if kernel is None or len(kernel) != 2 or kernel[0] != kernel[1]:
        return None
    k = kernel[0]
    if str(a.data_layout) != "NCHW" or str(a.kernel_layout) != "OIHW" or int(a.groups) != 1:
        return None
    if [int(s) for s in a.strides] != [k, k] or any(int(d) != 1 for d in a.dilation) or any(int(p) for p in a.padding):
        return None
    return k


def _convert(m):
    t2 = m.expr
    inner = t2.args[0]
    bias = None
    if inner.op_name == "nn.bias_add":
        if int(inner.attrs.axis) % 4 != 1 or not m.has_single_user(inner):
            return None
        bias = inner.args[1].data
        conv = inner.args[0]
    else:
        conv = inner
    t1 = conv.args[0]
    if _axes(t1) != _TO_NCHW or _axes(t2) != _TO_NHWC:
        return None
    if not (m.has_single_user(t1) and m.has_single_user(conv)):
        return None
    k = _patch_kernel(conv)
    x = t1.args[0]
    t = x.checked_type
    if k is None or not isinstance(t, TensorType) or not t.dtype.startswith("float") or len(t.shape) != 4:
        return None
    try:
        n, h, w, c = (int(d) for d in t.shape)
    except (TypeError, ValueError):
        return None
    if h % k or w % k:
        return None
    weight = conv.args[1].data                                  # (O, C, k, k)
    units = weight.shape[0]
    # nn.dense takes the MatMul's (k*k*C, O) weight transposed: (O, k*k*C), in (kh, kw, C) order.
    dense_w = np.ascontiguousarray(weight.transpose(0, 2, 3, 1).reshape(units, k * k * c)).astype(t.dtype)
    layer = conv.layer
    y = call("reshape", x, newshape=[n, h // k, k, w // k, k, c], layer=layer)
    y = call("transpose", y, axes=[0, 1, 3, 2, 4, 5], layer=layer)
    y = call("reshape", y, newshape=[n, (h // k) * (w // k), k * k * c], layer=layer)
    y = call("nn.dense", y, Constant(dense_w), units=units, layer=layer)
    if bias is not None:
        y = call("add", y, Constant(np.asarray(bias, dtype=t.dtype).reshape(units)), layer=layer)
    return call("reshape", y, newshape=[n, h // k, w // k, units], layer=layer)


def _pattern(with_bias: bool):
    conv = is_op("nn.conv2d")(is_op("transpose")(wildcard()), is_constant())
    if with_bias:
        conv = is_op("nn.bias_add")(conv, is_constant())
    return is_op("transpose")(conv)


CONVERT_TR_CONV_STRIDE_N_TR_TO_MATMUL = RewriteTable([
    ("transpose_conv_bias_transpose", _pattern(True), _convert),
    ("transpose_conv_transpose", _pattern(False), _convert),
], name="ConvertTrConvStrideNTrToMatmul")


@module_pass("ConvertTrConvStrideNTrToMatmul", opt_level=0)
def convert_tr_conv_stride_n_tr_to_matmul(mod, ctx):
    """Turns each NHWC patch-embedding convolution (kernel = stride) between transposes into
    reshapes, a transpose and a MatMul (TI's convert_tr_conv_stride_n_tr_to_matmul)."""
    return CONVERT_TR_CONV_STRIDE_N_TR_TO_MATMUL.rewrite(mod)


ConvertTrConvStrideNTrToMatmul = convert_tr_conv_stride_n_tr_to_matmul

__all__ = ["ConvertTrConvStrideNTrToMatmul", "CONVERT_TR_CONV_STRIDE_N_TR_TO_MATMUL", "TI_RULE"]
