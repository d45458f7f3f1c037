"""The rule table and the helpers rules share.

A rule is ``rule(call, ctx) -> None | str``: None when TIDL supports the call, else a reason
naming the op, the layer and the offending value. Family files register rules with

    @rule("nn.conv2d", layer="Conv")
    def conv2d(call, ctx):
        ...
        return "depthwise 5x5 stride 1 is not supported (...)"   # the body of the reason

and the registered function prefixes the body with ``<op> '<layer>': ``. The decorator hangs
two facets on each op (``tidlx.ir.op``): ``tidl.rule`` (the ``RuleInfo``) and ``tidl.layer``
(the TIDL layer type, one of TI's names in ``layers.LAYER_TYPE_IDS``). An op without them has
no TIDL layer.

Axis names follow TIDL's 6-D tensors (N, D1, D2, C, H, W), aligned to the right: the last axis
of any tensor is W, the one before H, then C (so TI's "axis -1/-2/-3" mean W/H/C at any rank).
The batch axis is axis 0 of a tensor of rank >= 2, as in TI's relay import (N = dim 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple

from ....ir.expr import Call, Constant, Expr
from ....ir.op import Op, declare_facet, get_op, register_op_attr
from ....ir.type_infer import describe_call
from ....ir.types import TensorType, TupleType, Type

RuleFn = Callable[[Call, "RuleContext"], Optional[str]]

#: The dims of TIDL's tensors, outermost first.
TIDL_DIMS = ("N", "D1", "D2", "C", "H", "W")
_DIM_WORDS = {"W": "width", "H": "height", "C": "channel", "N": "batch", "D1": "D1", "D2": "D2"}


@dataclass(frozen=True)
class RuleInfo:
    """A registered rule: the op, the TIDL layer it maps to, and which tensors may be non-float
    (``int_args``: argument indices; ``int_output``: the result) for the dtype check."""

    op: str
    layer: str
    check: RuleFn
    int_args: Tuple[int, ...] = ()
    int_output: bool = False
    any_dtype: bool = False


TIDL_RULE = declare_facet("tidl.rule", "TIDL support rule: RuleInfo(check(call, ctx) -> None | reason, int_args, "
                          "int_output, any_dtype)", "tidlx.backends.tidl")
TIDL_LAYER = declare_facet("tidl.layer", "the TIDL layer type the op becomes (TI's name, e.g. Conv, Pool, EltWise)",
                           "tidlx.backends.tidl")
#: Why TIDL has no layer for an op that users expect it to have (read by generic.op_reason).
TIDL_NO_LAYER = declare_facet("tidl.no_layer", "why TIDL has no layer for the op (the body of its host reason)",
                              "tidlx.backends.tidl")


def rule_info(op) -> Optional[RuleInfo]:
    """The registered rule of an op (an ``Op`` or its name), or None when TIDL has no layer for it."""
    if not isinstance(op, Op):
        op = get_op(op)
    return op.get_attr(TIDL_RULE)


def where(call: Call) -> str:
    """``nn.conv2d 'backbone.conv1'``: how a reason names its call."""
    return describe_call(call)


def rule(*ops: str, layer: str, int_args: Sequence[int] = (), int_output: bool = False,
         any_dtype: bool = False):
    """Registers the decorated body check for ``ops``; the registered rule prefixes the reason."""
    def register(body: RuleFn) -> RuleFn:
        def check(call: Call, ctx) -> Optional[str]:
            reason = body(call, ctx)
            return None if reason is None else f"{where(call)}: {reason}"

        check.__name__ = f"rule_{body.__name__}"
        check.__doc__ = body.__doc__
        check.body = body
        check.__wrapped__ = body  # so tools (tidlx ops) point at the body, not at this wrapper
        for op in ops:
            register_op_attr(op, TIDL_RULE, RuleInfo(op, layer, check, tuple(int_args), int_output, any_dtype))
            register_op_attr(op, TIDL_LAYER, layer)
        return check

    return register


# -- type helpers -----------------------------------------------------------------------------------

def ttype(expr: Expr) -> TensorType:
    """The tensor type of an expression (rules only run on well-typed calls)."""
    t = expr.checked_type
    if not isinstance(t, TensorType):
        raise TypeError(f"expected a tensor, got {t}")
    return t


def shape(expr: Expr) -> Tuple[int, ...]:
    return ttype(expr).shape


def tensor_types(t: Type):
    """The tensor types inside a type (a tuple's fields, recursively)."""
    stack, out = [t], []
    while stack:
        x = stack.pop()
        if isinstance(x, TensorType):
            out.append(x)
        elif isinstance(x, TupleType):
            stack.extend(reversed(x.fields))
    return out


def axis_name(axis: int, ndim: int) -> str:
    """TIDL's name of axis ``axis`` (normalized) of a rank-``ndim`` tensor: W, H, C, D2, D1 or N,
    counting from the right; axis 0 of rank >= 2 is the batch."""
    if ndim >= 2 and axis == 0:
        return "N"
    from_right = ndim - axis  # 1 for the last axis
    if from_right > len(TIDL_DIMS):
        return f"axis {axis}"
    return TIDL_DIMS[-from_right]


def axis_word(axis: int, ndim: int) -> str:
    """``axis 1 (channel)``-style description of a normalized axis."""
    name = axis_name(axis, ndim)
    return f"axis {axis} ({_DIM_WORDS.get(name, name)})"


def norm_axis(axis: int, ndim: int) -> int:
    return axis % ndim if ndim else 0


def is_const(expr: Expr) -> bool:
    return isinstance(expr, Constant)


def const_size_one(expr: Expr) -> bool:
    return isinstance(expr, Constant) and expr.data.size == 1


def const_value(expr: Expr) -> Optional[float]:
    """The single value of a size-1 constant, else None."""
    if const_size_one(expr):
        return float(expr.data.reshape(-1)[0])
    return None


def fmt_shape(s) -> str:
    return "(" + ", ".join(str(d) for d in s) + ("," if len(s) == 1 else "") + ")"


def pair(value) -> Tuple[int, int]:
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    return (values[0], values[0]) if len(values) == 1 else (values[0], values[1])


def is_channelwise(const_shape: Sequence[int], out_shape: Sequence[int]) -> bool:
    """Whether a constant of ``const_shape`` broadcast onto ``out_shape`` varies only along the
    channel axis (axis 1 of rank >= 2, the only axis of rank 1): a per-channel scale or bias.
    A single value counts."""
    size = 1
    for d in const_shape:
        size *= d
    if size == 1:
        return True
    r = len(out_shape)
    if len(const_shape) > r:
        return False
    aligned = (1,) * (r - len(const_shape)) + tuple(const_shape)
    channel = 1 if r >= 2 else 0
    return all(d == 1 for i, d in enumerate(aligned) if i != channel) and aligned[channel] == out_shape[channel]
