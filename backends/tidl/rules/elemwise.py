"""Element-wise layers: binary arithmetic (EltWise), max/min with a constant (Clip after
preparation), activations, and Cast (only at the graph's inputs and outputs)."""

from __future__ import annotations

from ....ir.expr import Call
from ._base import axis_word, const_size_one, fmt_shape, is_const, norm_axis, rule, shape


def _both_constant(call):
    if all(is_const(a) for a in call.args):
        return "both inputs are constants (fold constants first)"
    return None


def _batch_broadcast(call):
    """Variable inputs may broadcast over any axis but the batch."""
    out = shape(call)
    if len(out) < 2 or out[0] == 1:
        return None
    for i, arg in enumerate(call.args):
        s = shape(arg)
        batch = s[0] if len(s) == len(out) else 1
        if batch != out[0]:
            return (f"input {i} of shape {fmt_shape(s)} broadcasts over the batch ({out[0]}), which TIDL does "
                    f"not support for variable inputs")
    return None


def _gemm_bias(call):
    """Gemm's C input: TIDL's inner product takes a bias of shape [N] (or [1, N])."""
    for data, bias in (call.args, reversed(call.args)):
        if (isinstance(data, Call) and data.op_name == "nn.dense" and call.layer is not None
                and data.layer == call.layer):
            units = shape(data)[-1]
            if not is_const(bias):
                return ("Gemm with a variable C input is not supported (TIDL inner products take a constant "
                        "bias)")
            if shape(bias) not in ((units,), (1, units)):
                return (f"Gemm bias of shape {fmt_shape(shape(bias))} is not supported (TIDL inner products "
                        f"take a bias of shape [N] = [{units}])")
    return None


@rule("add", "multiply", "divide", layer="EltWise")
def arithmetic(call, ctx):
    reason = _both_constant(call) or (_gemm_bias(call) if call.op_name == "add" else None)
    if reason:
        return reason
    if not any(is_const(a) for a in call.args):
        if call.op_name == "divide":
            return ("dividing two variable tensors is not supported (TIDL has no element-wise divide layer; TI's "
                    "import keeps such a Div only inside a LayerNorm it fuses)")
        return _batch_broadcast(call)
    if call.op_name == "divide" and is_const(call.args[0]):
        return "dividing a constant by a tensor is not supported (TIDL divides by constants only)"
    return None


@rule("subtract", layer="EltWise")
def subtract(call, ctx):
    reason = _both_constant(call)
    if reason:
        return reason
    if not any(is_const(a) for a in call.args):
        return "subtracting two variable tensors is not supported (TIDL's Sub needs one constant input)"
    return None


@rule("maximum", "minimum", layer="ReLU")
def max_min_with_constant(call, ctx):
    """Preparation turns max/min with a single constant value into Clip; nothing else maps."""
    reason = _both_constant(call)
    if reason:
        return reason
    consts = [a for a in call.args if is_const(a)]
    if not consts:
        return "two variable inputs are not supported (only a single constant value, which becomes Clip)"
    if not const_size_one(consts[0]):
        return (f"a constant of shape {fmt_shape(shape(consts[0]))} is not supported (only a single value, "
                f"which becomes Clip)")
    return None


@rule("nn.relu", layer="ReLU")
def relu(call, ctx):
    return None


@rule("nn.leaky_relu", layer="PReLU")
def leaky_relu(call, ctx):
    return None


@rule("sigmoid", layer="Sigmoid")
def sigmoid(call, ctx):
    return None


@rule("tanh", layer="Tanh")
def tanh(call, ctx):
    return None


@rule("clip", layer="ReLU")
def clip(call, ctx):
    return None


@rule("nn.prelu", layer="PReLU")
def prelu(call, ctx):
    data, alpha = call.args
    if not is_const(alpha):
        return "a variable slope is not supported (PReLU takes a constant per-channel slope)"
    ndim = len(shape(data))
    axis = norm_axis(call.attrs.axis, ndim)
    if ndim >= 2 and axis != 1:
        return f"a slope along {axis_word(axis, ndim)} is not supported (PReLU slopes are per channel, axis 1)"
    return None


@rule("cast", layer="DataConvert", any_dtype=True)
def cast(call, ctx):
    source = call.args[0]
    if ctx.is_graph_input(source) or ctx.is_graph_output(call):
        return None
    return (f"a cast to {call.attrs.dtype} inside the graph is not supported (TIDL casts only at the graph's "
            f"inputs and outputs)")
