"""Composite patterns: groups of calls TIDL runs as one layer, so they must be placed together.

    groups = find_composites(mod["main"])
    for g in groups: g.layer_type, g.name, g.members, g.anchor

The patterns use the IR's pattern language (``tidlx.ir.pattern``), one table entry per
composite, tried in order at every node from the outputs back; the first match whose inner
values are used only inside the group (and whose nodes are not in another group yet) wins.

| composite           | TIDL layer   | calls                                                         |
|---------------------|--------------|---------------------------------------------------------------|
| conv2d_bn_act       | Conv         | conv2d [+ bias] + batch_norm .0 + BN activation               |
| conv2d_bn           | Conv         | conv2d [+ bias] + batch_norm .0                               |
| conv2d_act          | Conv         | conv2d [+ bias] + relu / clip / leaky_relu                    |
| conv2d_bias         | Conv         | conv2d + bias_add (or add of a per-channel constant)          |
| conv2d_transpose_*  | Deconv       | conv2d_transpose [+ bias] [+ relu / clip / leaky_relu]        |
| dense_bias_relu ... | InnerProduct | dense [+ bias_add or add of a [N] constant, any rank] [+ relu] |
| batch_norm_act      | BatchNorm    | batch_norm .0 + BN activation                                 |
| batch_norm          | BatchNorm    | batch_norm + its .0 projection                                |
| hard_sigmoid        | BatchNorm    | clip(x * alpha + beta, 0, 1)                                  |
| gelu                | BatchNorm    | x * 0.5 * (1 + erf(x / sqrt 2)), both operand orders          |
| elu                 | BatchNorm    | -alpha * relu(1 - exp(x)) + relu(x), any operand order         |
| channelwise         | BatchNorm    | multiply/divide and/or add/subtract by per-channel constants   |
|                     |              | (one op alone too) [+ BN activation]                          |
| eltwise_act         | EltWise      | add / multiply of two variables + relu / clip                 |

"BN activation" is what TIDL's BatchNorm absorbs: relu, clip, leaky_relu, prelu, sigmoid, tanh,
hard sigmoid, GELU (erf form) and ELU. A bias is ``nn.bias_add`` or ``add`` of a constant that
varies only along the channel axis. As TI's ONNX import does (``TIDL_onnxMapAddBaseParams`` and its
Sub/Mul/Div siblings), an add, subtract, multiply or divide of a variable by a scalar or per-channel
constant is a BatchNorm layer even alone (``c - x`` has the weight -1, ``x / c`` the weight 1/c); so is
one that varies only along the last axis of a sequence (rank >= 3: a LayerNorm's scale and shift), a
BatchNorm along that axis. Only a constant of more than one varying axis stays an EltWise layer with a
constant input.

Fusions, each a named step that can be switched off (tidlx's option ``disabled_fusions``, as
``disabled_passes`` switches off a preparation pass; ``tidlx check-fusion`` uses it to build the
unfused layer sequence):

| fusion                | what a composite fuses                                     | switched off, the parts become  |
|-----------------------|------------------------------------------------------------|---------------------------------|
| FuseBatchNormIntoConv | a batch_norm into the conv before it (conv2d_bn[_act])      | Conv + BatchNorm layer          |
| FuseActivation        | a relu or clip into the layer before it (conv, deconv,      | the layer + a ReLU layer        |
|                       | inner product, batch norm, channel-wise)                    |                                 |
| FuseBiasIntoConv      | a bias_add (or per-channel add) into a conv or deconv       | Conv + a BatchNorm (bias) layer |

A match that performs a switched-off fusion is refused and the next pattern tried, so the other
fusions of the same group still happen (conv + bias + BN + ReLU without FuseActivation is a
conv2d_bn layer and a ReLU layer). ``"FuseActivation"`` switches the fusion off everywhere,
``"FuseActivation:<layer>"`` only for the part of that layer name (the relu or clip, the batch norm,
the bias: an ONNX Conv's bias has the Conv's name), whichever group would take it.
With no fusion switched off the groups are exactly the table's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ...ir.expr import Call, Constant, Expr, Function, TupleGetItem
from ...ir.op import Op
from ...ir.pattern import (ANY_CALL, AltPattern, CallPattern, OpPattern, Pattern, is_constant, is_op,
                           is_tuple_get_item, wildcard)
from ...ir.traversal import post_order, users
from ...ir.types import TensorType
from .rules import is_channelwise

MEMBER = "m."  # capture names of group members start with this


@dataclass(frozen=True, eq=False)
class Composite:
    """One group: ``members`` (calls and projections, inputs first), ``root`` (the member whose
    value leaves the group), ``anchor`` (the main call, naming the layer)."""

    name: str
    layer_type: str
    members: Tuple[Expr, ...]
    root: Expr
    anchor: Call

    def __post_init__(self):
        object.__setattr__(self, "_calls", tuple(m for m in self.members if isinstance(m, Call)))

    @property
    def calls(self) -> Tuple[Call, ...]:
        return self._calls

    @property
    def layer(self) -> Optional[str]:
        return self.anchor.layer

    def describe(self) -> str:
        ops = "+".join(c.op_name for c in self.calls)
        where = f" '{self.anchor.layer}'" if self.anchor.layer else ""
        return f"{self.layer_type} composite {self.name}{where} ({ops})"

    def __repr__(self) -> str:
        return f"Composite({self.describe()})"


@dataclass(frozen=True)
class CompositeSpec:
    name: str
    layer_type: str
    pattern: Pattern
    anchors: Tuple[str, ...]  # capture names, first present one is the anchor
    min_members: int = 2


# -- pattern pieces --------------------------------------------------------------------------------

def _tensor_shape(expr: Expr):
    t = expr.checked_type
    return t.shape if isinstance(t, TensorType) else None


def _constant_operand(call: Call, fits) -> bool:
    """``call`` combines one variable with one constant, without growing the variable's shape, and
    ``fits(constant shape, output shape)``."""
    if len(call.args) != 2:
        return False
    consts = [a for a in call.args if isinstance(a, Constant)]
    variables = [a for a in call.args if not isinstance(a, Constant)]
    out = _tensor_shape(call)
    if len(consts) != 1 or len(variables) != 1 or out is None or _tensor_shape(variables[0]) != out:
        return False
    return fits(tuple(consts[0].data.shape), tuple(out))


def _last_axis_constant(const_shape, out_shape) -> bool:
    """A constant that varies only along the last axis of a tensor of rank 3 or more (the features of a
    sequence, as a LayerNorm's scale and shift): a BatchNorm along that axis."""
    shape = tuple(const_shape)
    return (len(out_shape) >= 3 and 0 < len(shape) <= len(out_shape) and all(d == 1 for d in shape[:-1])
            and shape[-1] == out_shape[-1] > 1)


def _inner_product_bias(const_shape, out_shape) -> bool:
    """An inner product's bias: one value, or one per output feature (the last axis)."""
    return (len(const_shape) <= len(out_shape) and all(d == 1 for d in const_shape[:-1])
            and (not const_shape or const_shape[-1] in (1, out_shape[-1])))


def _per_channel_operand(call: Call) -> bool:
    """``call`` (add/multiply/...) combines a variable with a per-channel constant (or one along a
    sequence's last axis) without growing the variable's shape."""
    return _constant_operand(call, lambda c, o: is_channelwise(c, o) or _last_axis_constant(c, o))


def _two_variables(call: Call) -> bool:
    """``call`` combines two computed tensors (no constant operand)."""
    return not any(isinstance(a, Constant) for a in call.args)


def _last_axis_operand(call: Call) -> bool:
    """``call`` (add) combines a variable with an inner product's bias, without growing its shape."""
    return _constant_operand(call, _inner_product_bias)


def _scalar(value: float) -> Pattern:
    def near(e: Expr) -> bool:
        if not isinstance(e, Constant) or e.data.size != 1:
            return False
        v = float(e.data.reshape(-1)[0])
        return abs(v - value) <= 1e-3 * max(1.0, abs(value))

    return is_constant().where(near)


def _any_scalar() -> Pattern:
    return is_constant().where(lambda e: e.data.size == 1)


def _channel_op(op: str, x: Pattern, name: str) -> Pattern:
    """``op(x, c)`` or ``op(c, x)`` with a per-channel constant ``c``; ``divide`` only as ``x / c``
    (``c / x`` is not affine)."""
    pattern = is_op(op)(x, is_constant()).where(_per_channel_operand).named(name)
    return pattern if op == "divide" else pattern.commutative()


def bias(x: Pattern) -> Pattern:
    """A bias after a conv or dense: ``bias_add(x, c)`` or ``add`` of a per-channel constant."""
    return is_op("nn.bias_add")(x, is_constant()).named(MEMBER + "bias") | _channel_op("add", x, MEMBER + "bias")


def dense_bias(x: Pattern) -> Pattern:
    """A bias after a dense of any rank: ``bias_add`` or ``add`` of a constant along the last axis."""
    return (is_op("nn.bias_add")(x, is_constant()).named(MEMBER + "bias")
            | is_op("add")(x, is_constant()).where(_last_axis_operand).named(MEMBER + "bias").commutative())


def batch_norm_out(x: Pattern) -> Pattern:
    """``batch_norm(x, ...).0`` with constant statistics."""
    c = is_constant
    norm = is_op("nn.batch_norm")(x, c(), c(), c(), c()).named(MEMBER + "bn")
    return is_tuple_get_item(norm, 0).named(MEMBER + "bn0")


def hard_sigmoid(x: Pattern) -> Pattern:
    """``clip(x * alpha + beta, 0, 1)`` (ONNX HardSigmoid as imported)."""
    scaled = is_op("multiply")(x, _any_scalar()).named(MEMBER + "hs_scale").commutative()
    shifted = is_op("add")(scaled, _any_scalar()).named(MEMBER + "hs_shift").commutative()
    return is_op("clip")(shifted).has_attr({"a_min": 0.0, "a_max": 1.0}).named(MEMBER + "act")


def gelu(x: Pattern) -> Pattern:
    """GELU, erf form: ``(x * 0.5) * (1 + erf(x * 1/sqrt2))`` (ONNX Gelu as imported) or
    ``(x * (1 + erf(x / sqrt2))) * 0.5`` (PyTorch's export), in any operand order."""
    inner = (is_op("multiply")(x, _scalar(1.0 / math.sqrt(2.0))).named(MEMBER + "gelu_scale").commutative()
             | is_op("divide")(x, _scalar(math.sqrt(2.0))).named(MEMBER + "gelu_scale"))
    erf = is_op("erf")(inner).named(MEMBER + "gelu_erf")
    one_plus = is_op("add")(erf, _scalar(1.0)).named(MEMBER + "gelu_add").commutative()
    half_x = is_op("multiply")(x, _scalar(0.5)).named(MEMBER + "gelu_mul").commutative()
    form_a = is_op("multiply")(half_x, one_plus).named(MEMBER + "act").commutative()
    x_times = is_op("multiply")(x, one_plus).named(MEMBER + "gelu_mul").commutative()
    form_b = is_op("multiply")(x_times, _scalar(0.5)).named(MEMBER + "act").commutative()
    return form_a | form_b


def elu(x: Pattern) -> Pattern:
    """ELU as imported (TVM's form): ``-alpha * relu(1 - exp(x)) + relu(x)``, in any operand order."""
    one_minus = is_op("subtract")(_scalar(1.0), is_op("exp")(x).named(MEMBER + "elu_exp")).named(MEMBER + "elu_sub")
    negative = is_op("nn.relu")(one_minus).named(MEMBER + "elu_neg")
    scaled = is_op("multiply")(negative, _any_scalar()).named(MEMBER + "elu_scale").commutative()
    positive = is_op("nn.relu")(x).named(MEMBER + "elu_pos")
    return is_op("add")(scaled, positive).named(MEMBER + "act").commutative()


#: Activations a convolution (or inner product) takes directly.
CONV_ACTIVATIONS = ("nn.relu", "clip", "nn.leaky_relu")
#: Unary activations TIDL's BatchNorm absorbs (plus prelu, hard sigmoid and GELU).
BN_ACTIVATIONS = ("nn.relu", "clip", "nn.leaky_relu", "sigmoid", "tanh")


def conv_activation(x: Pattern) -> Pattern:
    return is_op(*CONV_ACTIVATIONS)(x).named(MEMBER + "act")


def bn_activation(x: Pattern) -> Pattern:
    return (is_op(*BN_ACTIVATIONS)(x).named(MEMBER + "act")
            | is_op("nn.prelu")(x, is_constant()).named(MEMBER + "act")
            | hard_sigmoid(x) | gelu(x) | elu(x))


def _specs() -> List[CompositeSpec]:
    specs: List[CompositeSpec] = []
    conv = is_op("nn.conv2d")(wildcard(), is_constant()).named(MEMBER + "conv")
    conv_b = conv.optional(bias)
    specs += [
        CompositeSpec("conv2d_bn_act", "Conv", bn_activation(batch_norm_out(conv_b)), (MEMBER + "conv",)),
        CompositeSpec("conv2d_bn", "Conv", batch_norm_out(conv_b), (MEMBER + "conv",)),
        CompositeSpec("conv2d_act", "Conv", conv_activation(conv_b), (MEMBER + "conv",)),
        CompositeSpec("conv2d_bias", "Conv", bias(conv), (MEMBER + "conv",)),
    ]
    deconv = is_op("nn.conv2d_transpose")(wildcard(), is_constant()).named(MEMBER + "deconv")
    specs += [
        CompositeSpec("conv2d_transpose_act", "Deconv", conv_activation(deconv.optional(bias)),
                      (MEMBER + "deconv",)),
        CompositeSpec("conv2d_transpose_bias", "Deconv", bias(deconv), (MEMBER + "deconv",)),
    ]
    dense = is_op("nn.dense")(wildcard(), is_constant()).named(MEMBER + "dense")
    specs += [
        CompositeSpec("dense_relu", "InnerProduct",
                      is_op("nn.relu")(dense.optional(dense_bias)).named(MEMBER + "act"), (MEMBER + "dense",)),
        CompositeSpec("dense_bias", "InnerProduct", dense_bias(dense), (MEMBER + "dense",)),
    ]
    any_input = wildcard()
    specs += [
        CompositeSpec("batch_norm_act", "BatchNorm", bn_activation(batch_norm_out(any_input)), (MEMBER + "bn",)),
        CompositeSpec("batch_norm", "BatchNorm", batch_norm_out(any_input), (MEMBER + "bn",)),
        CompositeSpec("hard_sigmoid", "BatchNorm", hard_sigmoid(wildcard()), (MEMBER + "hs_scale",)),
        CompositeSpec("gelu", "BatchNorm", gelu(wildcard()), (MEMBER + "gelu_erf",)),
        CompositeSpec("elu", "BatchNorm", elu(wildcard()), (MEMBER + "elu_exp",)),
    ]
    # TI's import merges a ReLU or Clip into the element-wise layer before it (its TIDL_UpdateScaleFactors has
    # the clip-forced branch for element-wise layers): a sum or product of two variables with its activation
    eltwise = is_op("add", "multiply")(wildcard(), wildcard()).where(_two_variables).named(MEMBER + "eltwise")
    eltwise_act = is_op(*FUSED_ACTIVATIONS)(eltwise).named(MEMBER + "act")
    specs += [CompositeSpec("eltwise_act", "EltWise", eltwise_act, (MEMBER + "eltwise",))]

    def scale(x: Pattern) -> Pattern:
        return _channel_op("multiply", x, MEMBER + "scale") | _channel_op("divide", x, MEMBER + "scale")

    def shift(x: Pattern) -> Pattern:
        return _channel_op("add", x, MEMBER + "shift") | _channel_op("subtract", x, MEMBER + "shift")

    scale_shift = shift(scale(wildcard())) | scale(wildcard()) | shift(wildcard())
    specs += [
        CompositeSpec("channelwise", "BatchNorm", bn_activation(scale_shift) | scale_shift,
                      (MEMBER + "scale", MEMBER + "shift"), min_members=1),
    ]
    return specs


_SPECS: Optional[List[CompositeSpec]] = None


def composite_specs() -> List[CompositeSpec]:
    """The composite table, in the order it is tried (built once, on first use)."""
    global _SPECS
    if _SPECS is None:
        _SPECS = _specs()
    return _SPECS


# -- finding groups ---------------------------------------------------------------------------------

def _node_key(node: Expr):
    if isinstance(node, Call):
        return node.op_name or ANY_CALL
    return type(node)


def _branches(pattern: Pattern) -> Optional[List[Tuple[Optional[frozenset], Tuple[Optional[frozenset], ...]]]]:
    """A two-level necessary test for ``pattern`` at a node: its alternatives as ``(the op
    names the call may have (None: any op), the dispatch keys of each argument)``; None when
    some alternative is not a call of ops with argument patterns (then no quick test)."""
    if isinstance(pattern, AltPattern):
        left, right = _branches(pattern.left), _branches(pattern.right)
        return None if left is None or right is None else left + right
    if isinstance(pattern, CallPattern) and isinstance(pattern.callee, OpPattern) and pattern.args is not None:
        names = frozenset(op.name for op in pattern.callee.op_list) or None
        return [(names, tuple(a.dispatch_keys() for a in pattern.args))]
    return None


def _may_take(branches, node: Expr) -> bool:
    """False only if no alternative of ``_branches`` can match ``node``: the call's op, its
    arity and each argument's op or node class (as ``Pattern.dispatch_keys`` says them). The
    full match would refuse the same nodes, more slowly: most nodes fail every pattern here."""
    if not isinstance(node, Call) or not isinstance(node.op, Op):
        return False
    name, args = node.op.name, node.args
    for names, arg_keys in branches:
        if (names is not None and name not in names) or len(arg_keys) != len(args):
            continue
        for keys, arg in zip(arg_keys, args):
            if keys is None:
                continue
            if isinstance(arg, Call):
                if ANY_CALL in keys or (isinstance(arg.op, Op) and arg.op.name in keys):
                    continue
                break
            if type(arg) not in keys:
                break
        else:
            return True
    return False


def find_composites(function: Function, specs: Optional[Sequence[CompositeSpec]] = None,
                    exclude: Iterable[Expr] = (), disabled_fusions: Iterable[str] = (), *,
                    context=None) -> List[Composite]:
    """The composite groups of ``function``, each a list of calls TIDL runs as one layer.

    Nodes are visited from the outputs back, so the largest pattern ending at a node is taken
    before its parts; a match is kept only when every inner value is used inside the group only
    and none of its nodes is in an earlier group. Nodes in ``exclude`` join no group. A match
    performing a fusion of ``disabled_fusions`` (``"FuseActivation"`` or
    ``"FuseActivation:<layer of the relu>"``, see the module docstring) is refused. ``context``
    (a RuleContext of ``function``) lends its walk and users instead of walking again."""
    if isinstance(function, Function):
        root = function.body
    else:
        root = function
    specs = list(composite_specs() if specs is None else specs)
    if context is not None and context.function is function:
        order, node_users = context.post_order(), context.users
    else:
        order, node_users = post_order(root, enter_functions=False), users(root)
    position = {node: i for i, node in enumerate(order)}
    keyed = [(spec, spec.pattern.dispatch_keys(), _branches(spec.pattern)) for spec in specs]
    excluded = {id(node) for node in exclude}
    switched_off = parse_disabled_fusions(disabled_fusions)
    blocker = object()  # pre-claims excluded nodes so that no group can take them
    claimed: Dict[Expr, object] = {node: blocker for node in order if id(node) in excluded}
    groups: List[Composite] = []
    by_key: Dict[object, list] = {}  # node key -> the (spec, branches) whose root may be such a node
    for node in reversed(order):
        if node in claimed or not isinstance(node, (Call, TupleGetItem)):
            continue
        key = _node_key(node)
        specs_here = by_key.get(key)
        if specs_here is None:
            specs_here = by_key[key] = [(spec, branches) for spec, keys, branches in keyed
                                        if keys is None or key in keys or (isinstance(node, Call) and ANY_CALL in keys)]
        for spec, branches in specs_here:
            if branches is not None and not _may_take(branches, node):
                continue
            group = _try(spec, node, node_users, claimed, position, switched_off)
            if group is not None:
                for member in group.members:
                    claimed[member] = group
                groups.append(group)
                break
    groups.sort(key=lambda g: position[g.root])
    return groups


def _try(spec: CompositeSpec, node: Expr, node_users, claimed, position,
         switched_off: Optional[Dict[str, Optional[frozenset]]] = None) -> Optional[Composite]:
    match = spec.pattern.match(node)
    if match is None:
        return None
    members = {v for k, v in match.names.items() if k.startswith(MEMBER)}
    if len(members) < spec.min_members or not claimed.keys().isdisjoint(members):
        return None
    for member in members:
        if member is node:
            continue
        for u in node_users.get(member, ()):
            if u not in members:
                return None  # an inner value is used outside: the group cannot be one layer
    ordered = tuple(sorted(members, key=position.__getitem__))
    anchor = next((match.get(a) for a in spec.anchors if match.get(a) is not None), None)
    if not isinstance(anchor, Call):
        anchor = next(m for m in ordered if isinstance(m, Call))
    if switched_off:
        for fusion in group_fusions(spec.name, match.names):
            layers = switched_off.get(fusion, frozenset())
            if layers is None or match.get(MEMBER + FUSED_MEMBER[fusion]).layer in layers:
                return None  # that fusion is switched off here: let a smaller pattern take the parts
    return Composite(spec.name, spec.layer_type, ordered, node, anchor)


# -- fusions as named steps ------------------------------------------------------------------------

#: The fusions a composite performs, by step name -> what check-fusion calls it.
FUSIONS: Dict[str, str] = {
    "FuseBatchNormIntoConv": "batch_norm into convolution",
    "FuseActivation": "relu/clip into layer",
    "FuseBiasIntoConv": "bias_add into convolution",
}
#: The member each fusion fuses into the group's layer (its layer name is what ``Name:<layer>`` names).
FUSED_MEMBER: Dict[str, str] = {"FuseBatchNormIntoConv": "bn", "FuseActivation": "act", "FuseBiasIntoConv": "bias"}
#: The activations FuseActivation is about (TIDL runs them as the layer's saturation).
FUSED_ACTIVATIONS = ("nn.relu", "clip")


def group_fusions(spec_name: str, members: Mapping[str, Expr]) -> Tuple[str, ...]:
    """The fusions (FUSIONS keys) a match of pattern ``spec_name`` with capture names ``members``
    performs, in FUSIONS order."""
    def has(name: str) -> bool:
        return members.get(MEMBER + name) is not None

    out = []
    if has("bn") and has("conv"):
        out.append("FuseBatchNormIntoConv")
    act = members.get(MEMBER + "act")
    if spec_name != "hard_sigmoid" and isinstance(act, Call) and act.op_name in FUSED_ACTIVATIONS:
        out.append("FuseActivation")  # hard sigmoid's clip is part of its function, not a fused activation
    if has("bias") and (has("conv") or has("deconv")):
        out.append("FuseBiasIntoConv")
    return tuple(out)


class FusionNameError(ValueError):
    """A disabled fusion that names no fusion step (the options turn it into an OptionError)."""


def parse_disabled_fusions(entries: Iterable[str]) -> Dict[str, Optional[frozenset]]:
    """``["FuseActivation", "FuseBiasIntoConv:/conv1/Conv"]`` -> ``{fusion: None (everywhere) or the
    layers of the parts it does not fuse}``. An unknown fusion name is a FusionNameError."""
    layers: Dict[str, set] = {}
    everywhere: set = set()
    for entry in entries:
        name, sep, layer = str(entry).strip().partition(":")
        name = name.strip()
        if name not in FUSIONS:
            raise FusionNameError(name)
        if sep and layer.strip():
            layers.setdefault(name, set()).add(layer.strip())
        else:
            everywhere.add(name)
    out: Dict[str, Optional[frozenset]] = {name: frozenset(v) for name, v in layers.items()}
    out.update({name: None for name in everywhere})
    return out


__all__ = ["Composite", "CompositeSpec", "find_composites", "composite_specs", "bias", "batch_norm_out",
           "hard_sigmoid", "gelu", "elu", "conv_activation", "bn_activation", "CONV_ACTIVATIONS", "BN_ACTIVATIONS",
           "FUSIONS", "FUSED_MEMBER", "FUSED_ACTIVATIONS", "group_fusions", "parse_disabled_fusions", "FusionNameError"]
