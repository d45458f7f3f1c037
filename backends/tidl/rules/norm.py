"""Normalizations and softmax.

Softmax: TIDL normalizes along the width or the height axis. Axes are named from the right at
every rank (TIDL's tensors are N, D1, D2, C, H, W), so axis -1 is W and -2 is H whatever the
rank. BEVDet's depth softmax (axis 1 of N x 59 x h x w) is along C: it is refused and runs on
the host, as in TI's flow; moving the depth axis last (transpose/reshape) would make it fit.
"""

from __future__ import annotations

from ._base import axis_name, axis_word, is_const, norm_axis, rule, shape


def _constants(call, names):
    for arg, what in zip(call.args[1:], names):
        if not is_const(arg):
            return f"{what} is not a constant (bind the params and fold constants first)"
    return None


@rule("nn.batch_norm", layer="BatchNorm")
def batch_norm(call, ctx):
    reason = _constants(call, ("gamma", "beta", "moving_mean", "moving_var"))
    if reason:
        return reason
    ndim = len(shape(call.args[0]))
    axis = norm_axis(call.attrs.axis, ndim)
    if ndim >= 2 and axis != 1:
        return f"normalizing along {axis_word(axis, ndim)} is not supported (BatchNorm is per channel, axis 1)"
    return None


@rule("nn.layer_norm", layer="LayerNorm")
def layer_norm(call, ctx):
    reason = _constants(call, ("gamma", "beta"))
    if reason:
        return reason
    ndim = len(shape(call.args[0]))
    axis = norm_axis(call.attrs.axis, ndim)
    if axis_name(axis, ndim) != "W":
        return (f"normalizing along {axis_word(axis, ndim)} is not supported (LayerNormalization: width axis "
                f"only, axis -1)")
    return None


@rule("nn.softmax", layer="SoftMax")
def softmax(call, ctx):
    ndim = len(shape(call.args[0]))
    axis = norm_axis(call.attrs.axis, ndim)
    if axis_name(axis, ndim) not in ("W", "H"):
        return (f"softmax along {axis_word(axis, ndim)} of shape {tuple(shape(call.args[0]))} is not supported "
                f"(TIDL: width or height axis only, axis -1 or -2; move the axis last with a transpose)")
    return None
