"""Reference element-wise kernels: unary math, broadcasting arithmetic, comparisons, logic, clip, cast, where.

Float results keep the input dtype (numpy's float32 ufuncs, as onnxruntime computes them).
Integer division follows Relay: ``divide``/``mod`` truncate (C semantics, like ONNX Div and
Mod with fmod=1), ``floor_divide``/``floor_mod`` round toward minus infinity.
"""

from __future__ import annotations

import math

import numpy as np

from ..registry import kernel
from ._common import out_dtype


def _unary(fn):
    def run(args, attrs, out_type):
        return fn(args[0])
    return run


_UNARY = {
    "tanh": np.tanh,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "negative": np.negative,
    "abs": np.abs,
    "floor": np.floor,
    "ceil": np.ceil,
    # Relay's round lowers to nearbyint (half to even), the same as ONNX Round.
    "round": np.rint,
    "sign": np.sign,
    "trunc": np.trunc,
    "sin": np.sin,
    "cos": np.cos,
    "copy": np.copy,
    "zeros_like": np.zeros_like,
    "ones_like": np.ones_like,
}
for _name, _fn in _UNARY.items():
    kernel(_name)(_unary(_fn))


@kernel("nn.relu")
def relu(args, attrs, out_type):
    """max(x, 0) as numpy's maximum computes it: NaN stays NaN and -0.0 becomes +0.0 (the second
    operand wins a tie), as onnxruntime's Relu."""
    x = args[0]
    return np.maximum(x, x.dtype.type(0))


@kernel("sigmoid")
def sigmoid(args, attrs, out_type):
    x = args[0]
    one = x.dtype.type(1)
    # 1 / (1 + exp(-x)): exp overflows to inf for very negative x, giving exactly 0.
    with np.errstate(over="ignore"):
        return (one / (one + np.exp(-x))).astype(x.dtype, copy=False)


@kernel("rsqrt")
def rsqrt(args, attrs, out_type):
    x = args[0]
    return (x.dtype.type(1) / np.sqrt(x)).astype(x.dtype, copy=False)


@kernel("erf")
def erf(args, attrs, out_type):
    """The C library's erf (Python's math.erf) in float64, element by element."""
    x = args[0]
    flat = np.asarray(x, dtype=np.float64).reshape(-1)
    res = np.fromiter((math.erf(v) for v in flat.tolist()), np.float64, flat.size)
    return res.reshape(x.shape).astype(out_dtype(out_type))


# --- binary ------------------------------------------------------------------------------------

def _trunc_divide(a, b):
    if a.dtype.kind in "iu" or b.dtype.kind in "iu":
        q = np.floor_divide(a, b)
        # floor -> truncation: step back toward zero where the signs differ and it is inexact.
        fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        return q + fix.astype(q.dtype)
    return np.divide(a, b)


def _trunc_mod(a, b):
    return np.fmod(a, b)


_BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": _trunc_divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
    "floor_divide": lambda a, b: np.floor(a / b) if a.dtype.kind == "f" else np.floor_divide(a, b),
    "mod": _trunc_mod,
    "floor_mod": np.mod,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}


def _binary(fn):
    def run(args, attrs, out_type):
        res = fn(args[0], args[1])
        dtype = out_dtype(out_type)
        return res if res.dtype == dtype else res.astype(dtype)
    return run


for _name, _fn in _BINARY.items():
    kernel(_name, fresh_result=True)(_binary(_fn))


@kernel("logical_not")
def logical_not(args, attrs, out_type):
    return np.logical_not(args[0])


# --- activations with attributes ---------------------------------------------------------------

@kernel("nn.leaky_relu")
def leaky_relu(args, attrs, out_type):
    x = args[0]
    alpha = x.dtype.type(attrs.alpha) if x.dtype.kind == "f" else attrs.alpha
    return np.where(x >= 0, x, x * alpha).astype(x.dtype, copy=False)


@kernel("nn.prelu")
def prelu(args, attrs, out_type):
    x, alpha = args
    axis = attrs.axis % x.ndim
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    return np.where(x >= 0, x, x * alpha.reshape(shape)).astype(x.dtype, copy=False)


@kernel("clip")
def clip(args, attrs, out_type):
    x = args[0]
    lo, hi = attrs.a_min, attrs.a_max
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        lo = info.min if lo <= info.min else math.ceil(lo)
        hi = info.max if hi >= info.max else math.floor(hi)
        return np.clip(x, x.dtype.type(lo), x.dtype.type(hi))
    if x.dtype.kind == "f":
        return np.clip(x, x.dtype.type(lo), x.dtype.type(hi))
    return np.clip(x, lo, hi).astype(x.dtype)


@kernel("cast")
def cast(args, attrs, out_type):
    x = args[0]
    dtype = out_dtype(out_type)
    if dtype.kind in "iu" and x.dtype.kind == "f":
        # Float to int truncates toward zero (C cast, as onnxruntime's Cast); NaN becomes 0.
        return np.nan_to_num(np.trunc(x)).astype(dtype)
    return x.astype(dtype)


@kernel("where")
def where(args, attrs, out_type):
    cond, x, y = args
    if cond.dtype != np.bool_:
        cond = cond != 0
    return np.where(cond, x, y)
