"""Element-wise ops: Relax's unary and broadcasting binary ops, where the reference kernel
(emulator/reference/op_elemwise.py) has the same semantics; TE where Relax differs (integer
division truncates in Relay, ``mod`` is C's fmod)."""

from __future__ import annotations

import math

import numpy as np

from ..facet import lowers

#: tidlx op -> the Relax op of the same semantics (name in relax.op)
_SAME_UNARY = {
    "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "erf": "erf", "negative": "negative", "abs": "abs", "zeros_like": "zeros_like", "ones_like": "ones_like",
    "floor": "floor", "ceil": "ceil", "round": "round", "sign": "sign", "trunc": "trunc", "sin": "sin",
    "cos": "cos", "logical_not": "logical_not",
}
_SAME_BINARY = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "maximum": "maximum", "minimum": "minimum",
    "power": "power", "floor_mod": "floor_mod", "equal": "equal", "not_equal": "not_equal", "less": "less",
    "less_equal": "less_equal", "greater": "greater", "greater_equal": "greater_equal",
    "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
}


def _unary(relax_name):
    def lower(ctx, call, args):
        return getattr(ctx.op, relax_name)(args[0])
    lower.__name__ = f"lower_{relax_name}"
    return lower


def _binary(relax_name):
    def lower(ctx, call, args):
        return getattr(ctx.op, relax_name)(args[0], args[1])
    lower.__name__ = f"lower_{relax_name}"
    return lower


for _name, _relax in _SAME_UNARY.items():
    lowers(_name)(_unary(_relax))
for _name, _relax in _SAME_BINARY.items():
    lowers(_name)(_binary(_relax))


def _is_int(dtype: str) -> bool:
    return dtype.startswith(("int", "uint"))


def _broadcast_te(ctx, fn, a, b):
    """``fn(x, y)`` element by element over the numpy broadcast of ``a`` and ``b`` (TE)."""
    tir = ctx.tir

    def compute(ta, tb):
        shape = np.broadcast_shapes(tuple(int(d) for d in ta.shape), tuple(int(d) for d in tb.shape))

        def index(t, idx):
            off = len(shape) - len(t.shape)
            return [0 if int(t.shape[k]) == 1 else idx[k + off] for k in range(len(t.shape))]

        return ctx.te.compute(shape, lambda *idx: fn(tir, ta(*index(ta, idx)), tb(*index(tb, idx))),
                              name="T_ewise")
    return ctx.emit_te(compute, a, b)


@lowers("divide")
def divide(ctx, call, args):
    a, b = args
    if _is_int(ctx.dtype(a)):  # Relay's integer division truncates toward zero
        return _broadcast_te(ctx, lambda tir, x, y: tir.truncdiv(x, y), a, b)
    return ctx.op.divide(a, b)


@lowers("floor_divide")
def floor_divide(ctx, call, args):
    a, b = args
    if _is_int(ctx.dtype(a)):
        return _broadcast_te(ctx, lambda tir, x, y: tir.floordiv(x, y), a, b)
    return ctx.op.floor(ctx.emit(ctx.op.divide(a, b)))


@lowers("mod")
def mod(ctx, call, args):
    a, b = args
    if _is_int(ctx.dtype(a)):
        return _broadcast_te(ctx, lambda tir, x, y: tir.truncmod(x, y), a, b)
    # C's fmod has no LLVM lowering in TVM: x - trunc(x / y) * y (exact when the quotient is)
    return _broadcast_te(ctx, lambda tir, x, y: x - tir.trunc(x / y) * y, a, b)


@lowers("nn.relu")
def relu(ctx, call, args):
    return ctx.op.nn.relu(args[0])


@lowers("copy")
def copy(ctx, call, args):
    return args[0]  # values are immutable in Relax: a copy is the value itself


@lowers("nn.leaky_relu")
def leaky_relu(ctx, call, args):
    x = args[0]
    dtype = ctx.dtype(x)
    zero = ctx.scalar(0, dtype)
    alpha = ctx.scalar(call.attrs.alpha, dtype)
    return ctx.op.where(ctx.emit(ctx.op.greater_equal(x, zero)), x, ctx.emit(ctx.op.multiply(x, alpha)))


@lowers("nn.prelu")
def prelu(ctx, call, args):
    x, alpha = args
    ndim = len(ctx.shape(x))
    axis = call.attrs.axis % ndim
    shape = [1] * ndim
    shape[axis] = ctx.shape(x)[axis]
    alpha = ctx.emit(ctx.op.reshape(alpha, shape))
    zero = ctx.scalar(0, ctx.dtype(x))
    return ctx.op.where(ctx.emit(ctx.op.greater_equal(x, zero)), x, ctx.emit(ctx.op.multiply(x, alpha)))


@lowers("clip")
def clip(ctx, call, args):
    x = args[0]
    dtype = ctx.dtype(x)
    lo, hi = call.attrs.a_min, call.attrs.a_max
    if _is_int(dtype):
        info = np.iinfo(dtype)
        lo = int(info.min) if lo <= info.min else math.ceil(lo)
        hi = int(info.max) if hi >= info.max else math.floor(hi)
    return ctx.op.minimum(ctx.emit(ctx.op.maximum(x, ctx.scalar(lo, dtype))), ctx.scalar(hi, dtype))


@lowers("cast")
def cast(ctx, call, args):
    return ctx.op.astype(args[0], call.checked_type.dtype)


@lowers("where")
def where(ctx, call, args):
    cond, x, y = args
    if ctx.dtype(cond) != "bool":
        cond = ctx.emit(ctx.op.not_equal(cond, ctx.scalar(0, ctx.dtype(cond))))
    return ctx.op.where(cond, x, y)
