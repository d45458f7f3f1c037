"""Element-wise ONNX ops: activations, arithmetic, comparisons, Cast, Where, Identity, Dropout."""

from __future__ import annotations

import math

import numpy as np

from ....ir import Expr
from ..context import NodeContext
from ..graph import ir_dtype
from . import converter

#: ONNX op type -> IR op of one input and no attributes.
UNARY = {
    "Relu": "nn.relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Sqrt": "sqrt", "Exp": "exp",
    "Log": "log", "Neg": "negative", "Abs": "abs", "Floor": "floor", "Ceil": "ceil", "Round": "round",
    "Sign": "sign", "Sin": "sin", "Cos": "cos", "Not": "logical_not",
}

#: ONNX op type -> IR op of two broadcast inputs.
BINARY = {
    "Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide",
    "Equal": "equal", "Less": "less", "LessOrEqual": "less_equal", "Greater": "greater",
    "GreaterOrEqual": "greater_equal", "And": "logical_and", "Or": "logical_or", "Xor": "logical_xor",
}


@converter(produces={op_type: (op,) for op_type, op in UNARY.items()})
def convert_unary(ctx: NodeContext):
    return ctx.call(UNARY[ctx.op_type], ctx.input(0))


@converter(produces={op_type: (op,) for op_type, op in BINARY.items()})
def convert_binary(ctx: NodeContext):
    return ctx.call(BINARY[ctx.op_type], ctx.input(0), ctx.input(1))


@converter("Pow", produces=("cast", "power"))
def convert_pow(ctx: NodeContext):
    base, exponent = ctx.input(0), ctx.input(1)
    # Since opset 12 the exponent may have another type; the result has the base's type.
    if ctx.dtype(exponent) != ctx.dtype(base):
        exponent = ctx.call("cast", exponent, dtype=ctx.dtype(base))
    return ctx.call("power", base, exponent)


@converter("Reciprocal", produces=("divide",))
def convert_reciprocal(ctx: NodeContext):
    x = ctx.input(0)
    return ctx.call("divide", ctx.scalar(1, ctx.dtype(x)), x)


#: ONNX op type -> the IR op folding its inputs pairwise.
VARIADIC = {"Max": "maximum", "Min": "minimum", "Sum": "add", "Mean": "add"}


@converter(produces={op_type: (op, "copy") + (("divide",) if op_type == "Mean" else ())
                     for op_type, op in VARIADIC.items()})
def convert_variadic(ctx: NodeContext):
    op = VARIADIC[ctx.op_type]
    args = ctx.inputs()
    if not args:
        raise ctx.error("needs at least one input")
    out = args[0]
    for x in args[1:]:
        out = ctx.call(op, out, x)
    if ctx.op_type == "Mean" and len(args) > 1:
        out = ctx.call("divide", out, ctx.scalar(len(args), ctx.dtype(out)))
    elif len(args) == 1:
        out = ctx.call("copy", out)
    return out


@converter("LeakyRelu", produces=("nn.leaky_relu",))
def convert_leaky_relu(ctx: NodeContext):
    return ctx.call("nn.leaky_relu", ctx.input(0), alpha=float(ctx.attr("alpha", 0.01)))


@converter("PRelu", produces=("broadcast_to", "less", "multiply", "nn.prelu", "reshape", "where"))
def convert_prelu(ctx: NodeContext):
    x, slope = ctx.input(0), ctx.input(1)
    shape, slope_shape = ctx.shape(x), ctx.shape(slope)
    # Align the slope's shape to the data's rank (unidirectional broadcasting).
    aligned = (1,) * (len(shape) - len(slope_shape)) + tuple(slope_shape)
    varying = [a for a, d in enumerate(aligned) if d != 1]
    if len(varying) == 1 and aligned[varying[0]] == shape[varying[0]]:
        axis = varying[0]
        alpha = ctx.call("reshape", slope, newshape=(shape[axis],))
        return ctx.call("nn.prelu", x, alpha, axis=axis)
    if len(shape) >= 2 and all(d == 1 for d in aligned):
        alpha = ctx.call("broadcast_to", ctx.call("reshape", slope, newshape=(1,)), shape=(shape[1],))
        return ctx.call("nn.prelu", x, alpha, axis=1)
    # Any other broadcast: x if x >= 0 else x * slope.
    negative = ctx.call("less", x, ctx.scalar(0, ctx.dtype(x)))
    return ctx.call("where", negative, ctx.call("multiply", x, slope), x)


def _dtype_bounds(dtype: str):
    if dtype == "bool":
        return 0, 1
    if np.issubdtype(np.dtype(dtype), np.integer):
        info = np.iinfo(np.dtype(dtype))
        return int(info.min), int(info.max)
    return -math.inf, math.inf


@converter("Clip", produces=("clip", "maximum", "minimum"))
def convert_clip(ctx: NodeContext):
    x = ctx.input(0)
    dtype = ctx.dtype(x)
    lo_default, hi_default = _dtype_bounds(dtype)
    if ctx.opset < 11:
        lo, hi = float(ctx.attr("min", lo_default)), float(ctx.attr("max", hi_default))
        return ctx.call("clip", x, a_min=min(lo, hi), a_max=hi)
    bounds = []
    for i, default in ((1, lo_default), (2, hi_default)):
        if not ctx.has_input(i):
            bounds.append(default)
        elif ctx.is_const(i):
            bounds.append(np.asarray(ctx.const(i, "min" if i == 1 else "max")).reshape(-1)[0].item())
        else:
            bounds.append(ctx.input(i))
    if not any(isinstance(b, Expr) for b in bounds):
        lo, hi = float(bounds[0]), float(bounds[1])
        # ONNX (numpy.clip) gives max everywhere when min > max.
        return ctx.call("clip", x, a_min=min(lo, hi), a_max=hi)
    # Bounds computed at run time: min(max(x, lo), hi), in numpy.clip's order.
    out = x
    if isinstance(bounds[0], Expr):
        out = ctx.call("maximum", out, bounds[0])
    elif bounds[0] != lo_default:
        out = ctx.call("maximum", out, ctx.scalar(bounds[0], dtype))
    if isinstance(bounds[1], Expr):
        out = ctx.call("minimum", out, bounds[1])
    elif bounds[1] != hi_default:
        out = ctx.call("minimum", out, ctx.scalar(bounds[1], dtype))
    return out


def _hard_sigmoid(ctx: NodeContext, x, alpha: float, beta: float):
    dtype = ctx.dtype(x)
    scaled = ctx.call("add", ctx.call("multiply", x, ctx.scalar(alpha, dtype)), ctx.scalar(beta, dtype))
    return ctx.call("clip", scaled, a_min=0.0, a_max=1.0)


@converter("HardSigmoid", produces=("add", "clip", "multiply"))
def convert_hard_sigmoid(ctx: NodeContext):
    return _hard_sigmoid(ctx, ctx.input(0), float(ctx.attr("alpha", 0.2)), float(ctx.attr("beta", 0.5)))


@converter("HardSwish", produces=("add", "clip", "multiply"))
def convert_hard_swish(ctx: NodeContext):
    x = ctx.input(0)
    return ctx.call("multiply", x, _hard_sigmoid(ctx, x, 1.0 / 6.0, 0.5))


@converter("Gelu", produces=("add", "erf", "multiply", "tanh"))
def convert_gelu(ctx: NodeContext):
    x = ctx.input(0)
    dtype = ctx.dtype(x)
    approximate = ctx.attr_choice("approximate", "none", ("none", "tanh"))
    if approximate == "none":
        # 0.5 * x * (1 + erf(x / sqrt(2)))
        inner = ctx.call("erf", ctx.call("multiply", x, ctx.scalar(1.0 / math.sqrt(2.0), dtype)))
    else:
        # 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
        cube = ctx.call("multiply", ctx.call("multiply", x, x), x)
        poly = ctx.call("add", x, ctx.call("multiply", cube, ctx.scalar(0.044715, dtype)))
        inner = ctx.call("tanh", ctx.call("multiply", poly, ctx.scalar(math.sqrt(2.0 / math.pi), dtype)))
    one_plus = ctx.call("add", inner, ctx.scalar(1.0, dtype))
    return ctx.call("multiply", ctx.call("multiply", x, ctx.scalar(0.5, dtype)), one_plus)


@converter("Elu", produces=("add", "exp", "multiply", "nn.relu", "subtract"))
def convert_elu(ctx: NodeContext):
    # TVM's ONNX frontend form: -alpha * relu(1 - exp(x)) + relu(x); TIDL takes it as one ELU activation
    x = ctx.input(0)
    dtype = ctx.dtype(x)
    alpha = float(ctx.attr("alpha", 1.0))
    negative = ctx.call("nn.relu", ctx.call("subtract", ctx.scalar(1.0, dtype), ctx.call("exp", x)))
    return ctx.call("add", ctx.call("multiply", ctx.scalar(-alpha, dtype), negative), ctx.call("nn.relu", x))


@converter("Cast", produces=("cast",))
def convert_cast(ctx: NodeContext):
    x = ctx.input(0)
    dtype = ir_dtype(int(ctx.required_attr("to")), f"{ctx.where}: attribute 'to'")
    return ctx.call("cast", x, dtype=dtype)


@converter("CastLike", produces=("cast",))
def convert_cast_like(ctx: NodeContext):
    return ctx.call("cast", ctx.input(0), dtype=ctx.dtype(ctx.input(1)))


@converter("Identity", produces=())  # the input itself
def convert_identity(ctx: NodeContext):
    return ctx.input(0)


@converter("Dropout", produces=())  # the input and a constant mask
def convert_dropout(ctx: NodeContext):
    x = ctx.input(0)
    if ctx.has_input(2):
        training = ctx.const(2, "training_mode")
        if bool(np.asarray(training).reshape(-1)[0]):
            raise ctx.unsupported("training_mode=True is not supported (inference only)")
    # Inference: the output is the input and the mask is all true.
    mask = ctx.const_expr(np.ones(ctx.shape(x), dtype=bool))
    return [x, mask]


@converter("Where", produces=("where",))
def convert_where(ctx: NodeContext):
    return ctx.call("where", ctx.input(0), ctx.input(1), ctx.input(2))
