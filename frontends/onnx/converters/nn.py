"""Layers: Conv, DeformConv, ConvTranspose, pools, BatchNormalization, LayerNormalization, Gemm, MatMul, Softmax.

1-D convolutions and pools are imported as 2-D ones over a height of 1 (the IR has 2-D ops
only); 3-D ones are refused.
"""

from __future__ import annotations

import math
from typing import List, Sequence, Tuple

import numpy as np

from ....ir import Constant, Expr
from ..context import NodeContext
from . import converter


# --- shared helpers ---------------------------------------------------------------------------

def reshape(ctx: NodeContext, x: Expr, shape: Sequence[int]) -> Expr:
    """``x`` reshaped; constants are reshaped at import time."""
    shape = tuple(int(d) for d in shape)
    if isinstance(x, Constant):
        return ctx.const_expr(x.data.reshape(shape))
    if ctx.shape(x) == shape:
        return x
    return ctx.call("reshape", x, newshape=shape)


def transpose(ctx: NodeContext, x: Expr, axes: Sequence[int]) -> Expr:
    axes = tuple(int(a) for a in axes)
    if isinstance(x, Constant):
        return ctx.const_expr(np.transpose(x.data, axes))
    return ctx.call("transpose", x, axes=axes)


def spatial_rank(ctx: NodeContext, x: Expr, what: str) -> int:
    ndim = ctx.ndim(x)
    if ndim not in (3, 4):
        raise ctx.unsupported(f"{what} of {ndim - 2 if ndim >= 2 else 0}-D data (shape {ctx.shape(x)}) is "
                              f"not supported; only 1-D and 2-D")
    return ndim - 2


def _list_attr(ctx: NodeContext, name: str, default: int, n: int) -> List[int]:
    values = ctx.attr_ints(name)
    if values is None:
        return [default] * n
    if len(values) != n:
        raise ctx.unsupported(f"attribute {name}={values} must have {n} values (one per spatial axis)")
    return values


def onnx_pads(ctx: NodeContext, in_sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
              dilations: Sequence[int]) -> Tuple[List[int], List[int]]:
    """(begins, ends) of the spatial padding from ``auto_pad`` or ``pads``."""
    n = len(in_sizes)
    auto_pad = ctx.attr_choice("auto_pad", "NOTSET", ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"))
    if auto_pad == "VALID":
        return [0] * n, [0] * n
    if auto_pad == "NOTSET":
        pads = _list_attr(ctx, "pads", 0, 2 * n)
        if any(p < 0 for p in pads):
            raise ctx.unsupported(f"negative pads {pads} are not supported")
        return pads[:n], pads[n:]
    begins, ends = [], []
    for size, k, s, d in zip(in_sizes, kernel, strides, dilations):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return begins, ends


def tvm_padding(begins: Sequence[int], ends: Sequence[int]) -> tuple:
    """TVM's (top, left, bottom, right) padding from per-axis begins and ends."""
    return tuple(begins) + tuple(ends)


def to_2d(ctx: NodeContext, x: Expr) -> Expr:
    """(N, C, W) -> (N, C, 1, W)."""
    n, c, w = ctx.shape(x)
    return reshape(ctx, x, (n, c, 1, w))


def from_2d(ctx: NodeContext, y: Expr) -> Expr:
    n, c, one, w = ctx.shape(y)
    return reshape(ctx, y, (n, c, w))


def lift_1d(values: Sequence[int], fill: int) -> List[int]:
    """A 1-D attribute as its 2-D equivalent over a height of 1."""
    return [fill] + list(values)


# --- Conv, ConvTranspose ----------------------------------------------------------------------

def conv_setup(ctx: NodeContext, x: Expr, w: Expr):
    """(x, w, nn.conv2d attributes, spatial rank) of a Conv-like node; 1-D lifted to 2-D."""
    dims = spatial_rank(ctx, x, "convolution")
    wshape = ctx.shape(w)
    kernel = ctx.attr_ints("kernel_shape") or list(wshape[2:])
    if list(kernel) != list(wshape[2:]):
        raise ctx.error(f"kernel_shape {kernel} does not match the weight's shape {list(wshape)}")
    strides = _list_attr(ctx, "strides", 1, dims)
    dilations = _list_attr(ctx, "dilations", 1, dims)
    begins, ends = onnx_pads(ctx, ctx.shape(x)[2:], kernel, strides, dilations)
    if dims == 1:
        x, w = to_2d(ctx, x), reshape(ctx, w, (wshape[0], wshape[1], 1, wshape[2]))
        kernel, strides, dilations = lift_1d(kernel, 1), lift_1d(strides, 1), lift_1d(dilations, 1)
        begins, ends = lift_1d(begins, 0), lift_1d(ends, 0)
    attrs = dict(strides=tuple(strides), padding=tvm_padding(begins, ends), dilation=tuple(dilations),
                 groups=int(ctx.attr("group", 1)), channels=wshape[0], kernel_size=tuple(kernel))
    return x, w, attrs, dims


@converter("Conv", produces=("nn.bias_add", "nn.conv2d", "reshape"))
def convert_conv(ctx: NodeContext):
    x, w, attrs, dims = conv_setup(ctx, ctx.input(0, "X"), ctx.input(1, "W"))
    out = ctx.call("nn.conv2d", x, w, **attrs)
    if ctx.has_input(2):
        out = ctx.call("nn.bias_add", out, ctx.input(2, "B"), axis=1)
    return from_2d(ctx, out) if dims == 1 else out


@converter("DeformConv", produces=("nn.bias_add", "nn.deformable_conv2d"))
def convert_deform_conv(ctx: NodeContext):
    """DeformConv (opset 19) -> Relay's nn.deformable_conv2d(data, offset, weight), offset_group ->
    deformable_groups. Relay's op is DCNv1: a modulation mask imports only when it is all ones."""
    x, w, offset = ctx.input(0, "X"), ctx.input(1, "W"), ctx.input(2, "offset")
    if ctx.ndim(x) != 4:
        raise ctx.unsupported(f"deformable convolution of {ctx.ndim(x) - 2}-D data (shape {ctx.shape(x)}) is not "
                              f"supported; only 2-D")
    if ctx.has_input(4):
        mask = ctx.input(4, "mask")
        if not (isinstance(mask, Constant) and np.all(mask.data == 1)):
            raise ctx.unsupported("a modulation mask (DCNv2) is not supported: nn.deformable_conv2d is Relay's "
                                  "DCNv1, which samples without a mask (only an all-ones constant mask imports)")
    x, w, attrs, _ = conv_setup(ctx, x, w)
    out = ctx.call("nn.deformable_conv2d", x, offset, w, deformable_groups=int(ctx.attr("offset_group", 1)), **attrs)
    if ctx.has_input(3):
        out = ctx.call("nn.bias_add", out, ctx.input(3, "B"), axis=1)
    return out


@converter("ConvTranspose", produces=("nn.bias_add", "nn.conv2d_transpose", "reshape"))
def convert_conv_transpose(ctx: NodeContext):
    x, w = ctx.input(0, "X"), ctx.input(1, "W")
    dims = spatial_rank(ctx, x, "transposed convolution")
    wshape = ctx.shape(w)
    groups = int(ctx.attr("group", 1))
    kernel = ctx.attr_ints("kernel_shape") or list(wshape[2:])
    strides = _list_attr(ctx, "strides", 1, dims)
    dilations = _list_attr(ctx, "dilations", 1, dims)
    output_padding = _list_attr(ctx, "output_padding", 0, dims)
    in_sizes = ctx.shape(x)[2:]
    auto_pad = ctx.attr_choice("auto_pad", "NOTSET", ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"))
    output_shape = ctx.attr_ints("output_shape")
    if output_shape is not None and len(output_shape) > dims:
        output_shape = output_shape[-dims:]  # some exporters write N and C too
    if output_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = [size * s for size, s in zip(in_sizes, strides)]
    if output_shape is not None:
        begins, ends = [], []
        for i in range(dims):
            full = strides[i] * (in_sizes[i] - 1) + output_padding[i] + (kernel[i] - 1) * dilations[i] + 1
            total = full - output_shape[i]
            if total < 0:
                # The requested output is larger than the full result: extend with output_padding.
                output_padding[i] -= total
                total = 0
            if auto_pad == "SAME_UPPER":
                begins.append(total // 2)
                ends.append(total - total // 2)
            else:
                begins.append(total - total // 2)
                ends.append(total // 2)
    elif auto_pad == "VALID":
        begins, ends = [0] * dims, [0] * dims
    else:
        pads = _list_attr(ctx, "pads", 0, 2 * dims)
        begins, ends = pads[:dims], pads[dims:]
    if dims == 1:
        x, w = to_2d(ctx, x), reshape(ctx, w, (wshape[0], wshape[1], 1, wshape[2]))
        kernel, strides, dilations = lift_1d(kernel, 1), lift_1d(strides, 1), lift_1d(dilations, 1)
        begins, ends, output_padding = lift_1d(begins, 0), lift_1d(ends, 0), lift_1d(output_padding, 0)
    out = ctx.call("nn.conv2d_transpose", x, w, channels=wshape[1] * groups, kernel_size=tuple(kernel),
                   strides=tuple(strides), padding=tvm_padding(begins, ends),
                   output_padding=tuple(output_padding), dilation=tuple(dilations), groups=groups,
                   kernel_layout="IOHW")
    if ctx.has_input(2):
        out = ctx.call("nn.bias_add", out, ctx.input(2, "B"), axis=1)
    return from_2d(ctx, out) if dims == 1 else out


# --- pools ------------------------------------------------------------------------------------

def _pool(ctx: NodeContext, op: str, **extra):
    x = ctx.input(0, "X")
    dims = spatial_rank(ctx, x, "pooling")
    kernel = ctx.attr_ints("kernel_shape")
    if kernel is None or len(kernel) != dims:
        raise ctx.error(f"kernel_shape must list {dims} sizes, got {kernel}")
    strides = _list_attr(ctx, "strides", 1, dims)
    dilations = _list_attr(ctx, "dilations", 1, dims)
    in_sizes = list(ctx.shape(x)[2:])
    begins, ends = onnx_pads(ctx, in_sizes, kernel, strides, dilations)
    ceil_mode = bool(ctx.attr("ceil_mode", 0))
    if ceil_mode:
        # ONNX drops a last window that would start in the right padding; TVM's ceil mode does
        # not, so where they differ use floor mode (same size then).
        exact = True
        for size, k, s, d, b, e in zip(in_sizes, kernel, strides, dilations, begins, ends):
            span = size + b + e - ((k - 1) * d + 1)
            out = -(-span // s) + 1
            if (out - 1) * s >= size + b:
                exact = False
        ceil_mode = exact
    if dims == 1:
        x = to_2d(ctx, x)
        kernel, strides, dilations = lift_1d(kernel, 1), lift_1d(strides, 1), lift_1d(dilations, 1)
        begins, ends = lift_1d(begins, 0), lift_1d(ends, 0)
    out = ctx.call(op, x, pool_size=tuple(kernel), strides=tuple(strides), dilation=tuple(dilations),
                   padding=tvm_padding(begins, ends), ceil_mode=ceil_mode, **extra)
    return from_2d(ctx, out) if dims == 1 else out


@converter("MaxPool", produces=("nn.max_pool2d", "reshape"))
def convert_max_pool(ctx: NodeContext):
    ctx.require_attr_value("storage_order", (0,), 0)
    return [_pool(ctx, "nn.max_pool2d")]


@converter("AveragePool", produces=("nn.avg_pool2d", "reshape"))
def convert_avg_pool(ctx: NodeContext):
    return _pool(ctx, "nn.avg_pool2d", count_include_pad=bool(ctx.attr("count_include_pad", 0)))


@converter(produces={"GlobalAveragePool": ("mean", "nn.global_avg_pool2d"),
                     "GlobalMaxPool": ("max", "nn.global_max_pool2d")})
def convert_global_pool(ctx: NodeContext):
    x = ctx.input(0, "X")
    ndim = ctx.ndim(x)
    reduce_op = "mean" if ctx.op_type == "GlobalAveragePool" else "max"
    if ndim == 4:
        op = "nn.global_avg_pool2d" if ctx.op_type == "GlobalAveragePool" else "nn.global_max_pool2d"
        return ctx.call(op, x)
    if ndim < 3:
        raise ctx.error(f"input must have N, C and spatial axes, got shape {ctx.shape(x)}")
    return ctx.call(reduce_op, x, axis=tuple(range(2, ndim)), keepdims=True)


# --- normalization ----------------------------------------------------------------------------

@converter("BatchNormalization", produces=("nn.batch_norm",))
def convert_batch_norm(ctx: NodeContext):
    if int(ctx.attr("training_mode", 0)):
        raise ctx.unsupported("training_mode=1 is not supported (inference only)")
    x = ctx.input(0, "X")
    args = [ctx.input(i, what) for i, what in enumerate(("scale", "B", "input_mean", "input_var"), start=1)]
    norm = ctx.call("nn.batch_norm", x, *args, axis=1, epsilon=float(ctx.attr("epsilon", 1e-5)))
    return [ctx.get(norm, 0)]


@converter("InstanceNormalization", produces=("nn.instance_norm",))
def convert_instance_norm(ctx: NodeContext):
    return ctx.call("nn.instance_norm", ctx.input(0), ctx.input(1), ctx.input(2), axis=1,
                    epsilon=float(ctx.attr("epsilon", 1e-5)))


@converter("LayerNormalization", produces=("add", "mean", "multiply", "nn.layer_norm", "rsqrt", "subtract"))
def convert_layer_norm(ctx: NodeContext):
    x = ctx.input(0, "X")
    shape = ctx.shape(x)
    ndim = len(shape)
    axis = int(ctx.attr("axis", -1))
    if not -ndim <= axis < ndim:
        raise ctx.error(f"axis {axis} is out of range for rank {ndim}")
    axis %= ndim
    epsilon = float(ctx.attr("epsilon", 1e-5))
    if int(ctx.attr("stash_type", 1)) != 1:
        raise ctx.unsupported("stash_type other than 1 (float32 statistics) is not supported")
    dtype = ctx.dtype(x)
    scale = ctx.input(1, "Scale")
    bias = ctx.input(2, "B") if ctx.has_input(2) else None
    wants_stats = any(o for o in ctx.node.output[1:])
    norm_size = shape[-1]
    if (axis == ndim - 1 and not wants_stats and ctx.shape(scale) in ((norm_size,),)
            and (bias is None or ctx.shape(bias) == (norm_size,))):
        beta = bias if bias is not None else ctx.const_expr(np.zeros(norm_size, dtype=dtype))
        return ctx.call("nn.layer_norm", x, scale, beta, axis=-1, epsilon=epsilon)
    # Normalizing over several trailing axes (or returning Mean/InvStdDev): compose it.
    axes = tuple(range(axis, ndim))
    mean = ctx.call("mean", x, axis=axes, keepdims=True)
    centered = ctx.call("subtract", x, mean)
    variance = ctx.call("mean", ctx.call("multiply", centered, centered), axis=axes, keepdims=True)
    inv_std = ctx.call("rsqrt", ctx.call("add", variance, ctx.scalar(epsilon, dtype)))
    out = ctx.call("multiply", ctx.call("multiply", centered, inv_std), scale)
    if bias is not None:
        out = ctx.call("add", out, bias)
    return [out, mean, inv_std]


# --- Gemm, MatMul -----------------------------------------------------------------------------

@converter("Gemm", produces=("add", "multiply", "nn.bias_add", "nn.dense", "transpose"))
def convert_gemm(ctx: NodeContext):
    a, b = ctx.input(0, "A"), ctx.input(1, "B")
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    if ctx.ndim(a) != 2 or ctx.ndim(b) != 2:
        raise ctx.error(f"A and B must be 2-D, got {ctx.shape(a)} and {ctx.shape(b)}")
    dtype = ctx.dtype(a)
    if int(ctx.attr("transA", 0)):
        a = transpose(ctx, a, (1, 0))
    if not int(ctx.attr("transB", 0)):
        b = transpose(ctx, b, (1, 0))  # nn.dense takes the weight as (units, in_features)
    if alpha != 1.0:
        if isinstance(b, Constant):
            b = ctx.const_expr((b.data * alpha).astype(b.data.dtype))
        else:
            a = ctx.call("multiply", a, ctx.scalar(alpha, dtype))
    out = ctx.call("nn.dense", a, b, units=ctx.shape(b)[0])
    if not ctx.has_input(2) or beta == 0.0:
        return out
    c = ctx.input(2, "C")
    if beta != 1.0:
        if isinstance(c, Constant):
            c = ctx.const_expr((c.data * beta).astype(c.data.dtype))
        else:
            c = ctx.call("multiply", c, ctx.scalar(beta, dtype))
    units = ctx.shape(out)[1]
    if ctx.shape(c) == (units,) or (ctx.shape(c) == (1, units) and isinstance(c, Constant)):
        return ctx.call("nn.bias_add", out, reshape(ctx, c, (units,)), axis=1)
    return ctx.call("add", out, c)


#: The IR ops ``matmul`` builds.
MATMUL_OPS = ("broadcast_to", "nn.batch_matmul", "nn.dense", "reshape", "transpose")


@converter("MatMul", produces=MATMUL_OPS)
def convert_matmul(ctx: NodeContext):
    return matmul(ctx, ctx.input(0, "A"), ctx.input(1, "B"))


def matmul(ctx: NodeContext, a: Expr, b: Expr) -> Expr:
    """numpy.matmul semantics with nn.dense (2-D right side) or nn.batch_matmul."""
    a_shape, b_shape = ctx.shape(a), ctx.shape(b)
    if not a_shape or not b_shape:
        raise ctx.error(f"MatMul of a scalar ({a_shape} x {b_shape})")
    squeeze_rows = len(a_shape) == 1
    squeeze_cols = len(b_shape) == 1
    if squeeze_rows:
        a = reshape(ctx, a, (1,) + tuple(a_shape))
    if squeeze_cols:
        b = reshape(ctx, b, tuple(b_shape) + (1,))
    a_shape, b_shape = ctx.shape(a), ctx.shape(b)
    if len(b_shape) == 2:
        out = ctx.call("nn.dense", a, transpose(ctx, b, (1, 0)), units=b_shape[1])
    else:
        batch = tuple(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]))
        count = int(np.prod(batch)) if batch else 1
        m, k = a_shape[-2:]
        n = b_shape[-1]
        a3 = _batched(ctx, a, batch, count, (m, k))
        b3 = _batched(ctx, b, batch, count, (k, n))
        out = ctx.call("nn.batch_matmul", a3, b3, transpose_a=False, transpose_b=False)
        out = reshape(ctx, out, batch + (m, n))
    shape = list(ctx.shape(out))
    if squeeze_rows:
        del shape[-2]
    if squeeze_cols:
        del shape[-1]
    return reshape(ctx, out, shape)


def _batched(ctx: NodeContext, x: Expr, batch: tuple, count: int, matrix: tuple) -> Expr:
    """``x`` as (count, rows, cols), broadcasting its batch axes (a single batch stays 1)."""
    lead = tuple(ctx.shape(x)[:-2])
    if math.prod(lead) == 1:
        return reshape(ctx, x, (1,) + matrix)
    if (1,) * (len(batch) - len(lead)) + lead != batch:
        x = ctx.call("broadcast_to", x, shape=batch + matrix)
    return reshape(ctx, x, (count,) + matrix)


# --- Softmax ----------------------------------------------------------------------------------

@converter(produces={"Softmax": ("nn.softmax", "reshape"), "LogSoftmax": ("nn.log_softmax", "reshape")})
def convert_softmax(ctx: NodeContext):
    x = ctx.input(0)
    op = "nn.softmax" if ctx.op_type == "Softmax" else "nn.log_softmax"
    shape = ctx.shape(x)
    ndim = len(shape)
    if ctx.opset >= 13:
        return ctx.call(op, x, axis=int(ctx.attr("axis", -1)))
    # Before opset 13 the input is coerced to 2-D at ``axis`` and normalized over the second part.
    axis = int(ctx.attr("axis", 1)) % max(ndim, 1)
    if axis == ndim - 1:
        return ctx.call(op, x, axis=-1)
    flat = reshape(ctx, x, (math.prod(shape[:axis]), math.prod(shape[axis:])))
    return reshape(ctx, ctx.call(op, flat, axis=-1), shape)


@converter("LRN", produces=("nn.lrn",))
def convert_lrn(ctx: NodeContext):
    return ctx.call("nn.lrn", ctx.input(0), size=int(ctx.required_attr("size")), axis=1, bias=float(ctx.attr("bias", 1.0)),
                    alpha=float(ctx.attr("alpha", 1e-4)), beta=float(ctx.attr("beta", 0.75)))
