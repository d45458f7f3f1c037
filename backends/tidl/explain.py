"""Why a call stays on the host: the support rules and the user's options, together.

    reason = explain(call, ctx, options)      # None: TIDL may take it
    reason.kind, reason.message               # e.g. "batch", "nn.conv2d 'conv1': batch 6 > ..."

Checks, first hit wins: the user's lists (``deny_list`` by Relay op, ``deny_list:layer_type``
by ONNX op type, ``deny_list:layer_name``, ``allow_list:layer_name``), then the support rules
(generic and per op), then the batch limit.

Composites are judged whole: TIDL runs a composite as one layer, so if any member is denied
(by op, layer type or layer name), is missing from a non-empty allow list, breaks a rule or
exceeds the batch limit, every member of the composite goes to the host, and the reason names
the member at fault. Ops without a layer of their own (the erf of a GELU) are accepted inside a
composite.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Union

from ...ir.errors import TidlxWarning
from ...ir.expr import Call, Function
from ...ir.module import IRModule
from .context import RuleContext
from .options import BatchLimit, TidlOptions
from .rules import batch_reason, check_call, where
from .rules.device import device_reason

#: The kinds of host reasons, in the order they are checked.
HOST_REASON_KINDS = ("deny_list", "deny_list:layer_type", "deny_list:layer_name", "allow_list", "rule", "batch")


@dataclass(frozen=True)
class HostReason:
    """Why a call runs on the host: ``kind`` (one of HOST_REASON_KINDS) and a message for users."""

    kind: str
    message: str

    def __post_init__(self):
        if self.kind not in HOST_REASON_KINDS:
            raise ValueError(f"unknown host reason kind {self.kind!r}")

    def __str__(self) -> str:
        return self.message


def _members(call: Call, group) -> Sequence[Call]:
    """The calls judged together with ``call``: itself first, then its composite's anchor and the
    other members."""
    if group is None:
        return (call,)
    rest = [group.anchor] + [m for m in group.calls if m is not group.anchor]
    return [call] + [m for m in rest if m is not call]


def _in_group(call: Call, member: Call, group, message: str) -> str:
    if member is call or group is None:
        return message
    return f"{where(call)} is part of one TIDL {group.layer_type} layer ({group.name}) with {message}"


def _list_reason(call: Call, members: Sequence[Call], ctx: RuleContext, options: TidlOptions,
                 group) -> Optional[HostReason]:
    deny_ops = set(options.deny_list)
    for m in members:
        if m.op_name in deny_ops:
            return HostReason("deny_list", _in_group(call, m, group,
                                                     f"{where(m)}: {m.op_name} is in the option deny_list"))
    deny_types = set(options.deny_layer_types)
    if deny_types:
        for m in members:
            onnx_type = ctx.layer_type(m)
            if onnx_type in deny_types:
                return HostReason("deny_list:layer_type", _in_group(
                    call, m, group, f"{where(m)}: its ONNX op type {onnx_type} is in the option "
                                    f"deny_list:layer_type"))
    deny_names = set(options.deny_layer_names)
    for m in members:
        if m.layer is not None and m.layer in deny_names:
            return HostReason("deny_list:layer_name", _in_group(
                call, m, group, f"{where(m)}: layer '{m.layer}' is in the option deny_list:layer_name"))
    if options.allow_layer_names:
        allowed = set(options.allow_layer_names)
        for m in members:
            if m.layer is None:
                return HostReason("allow_list", _in_group(
                    call, m, group, f"{where(m)}: it has no layer name and the option allow_list:layer_name "
                                    f"admits only the layers it lists"))
            if m.layer not in allowed:
                return HostReason("allow_list", _in_group(
                    call, m, group, f"{where(m)}: layer '{m.layer}' is not in the option allow_list:layer_name"))
    return None


def explain(call: Call, ctx: RuleContext, options: Optional[TidlOptions] = None, *,
            batch_limit: Optional[BatchLimit] = None) -> Optional[HostReason]:
    """None when TIDL may take ``call``, else the reason it stays on the host.

    The batch limit is ``batch_limit`` when given, else ``options.batch_limit()`` (the option,
    else the environment variable, read now)."""
    options = TidlOptions() if options is None else options
    limit = options.batch_limit() if batch_limit is None else batch_limit
    return _explain(call, ctx, options, limit, {}, {})


def _explain(call: Call, ctx: RuleContext, options: TidlOptions, limit: BatchLimit,
             rule_memo: Dict[Call, Optional[str]], batch_memo: Dict[Call, Optional[str]]) -> Optional[HostReason]:
    """``explain`` with the rule and batch verdicts of calls already judged (each member of a
    composite is judged once, not once per member)."""
    group = ctx.composite_of(call)
    members = _members(call, group)
    reason = _list_reason(call, members, ctx, options, group)
    if reason is not None:
        return reason
    for m in members:
        if m in rule_memo:
            message = rule_memo[m]
        else:
            message = rule_memo[m] = check_call(m, ctx, absorbed=group is not None)
        if message:
            return HostReason("rule", _in_group(call, m, group, message))
    if options.target_device is not None:
        for m in members:
            message = device_reason(m, options)
            if message:
                return HostReason("rule", _in_group(call, m, group, message))
    if limit.value is None:  # no batch limit (TI's ONNX Runtime import)
        return None
    for m in members:
        if m in batch_memo:
            message = batch_memo[m]
        else:
            message = batch_memo[m] = batch_reason(m, limit, ctx)
        if message:
            return HostReason("batch", _in_group(call, m, group, message))
    return None


def explain_function(target: Union[Function, IRModule], options: Optional[TidlOptions] = None,
                     layer_types=None, ctx: Optional[RuleContext] = None, *,
                     batch_limit: Optional[BatchLimit] = None) -> Dict[Call, HostReason]:
    """The host reason of every op call of a function (``mod["main"]`` for a module) that TIDL
    cannot take; calls missing from the result may go to TIDL. Warns (TidlxWarning) about
    option entries that name no layer or layer type of the model. ``batch_limit``: as for
    ``explain`` (a limit whose value is None checks no batch)."""
    options = TidlOptions() if options is None else options
    if ctx is None:
        if isinstance(target, IRModule):
            ctx = RuleContext.for_module(target)
        else:
            ctx = RuleContext.for_function(target, layer_types)
    options.check_layer_names(ctx.layer_names())
    if options.deny_layer_types:
        if not ctx.layer_types:
            warnings.warn("option deny_list:layer_type is set but the model records no ONNX op types (it was not "
                          "imported from ONNX): it denies nothing", TidlxWarning, stacklevel=2)
        else:
            options.check_layer_types(set(ctx.layer_types.values()))
    limit = options.batch_limit() if batch_limit is None else batch_limit  # resolved once for the function
    out: Dict[Call, HostReason] = {}
    rule_memo: Dict[Call, Optional[str]] = {}
    batch_memo: Dict[Call, Optional[str]] = {}
    for call in ctx.calls():
        reason = _explain(call, ctx, options, limit, rule_memo, batch_memo)
        if reason is not None:
            out[call] = reason
    return out


# -- TI's model surgery: which rule would move a host call to TIDL ----------------------------------

def _softmax_channel_to_width(call: Call) -> bool:
    """A softmax along the channel axis at rank 4 or more: after the rule, the softmax is along the
    width axis and its transposes keep the batch axis, all of which TIDL takes (at rank 3 the
    transposes would move axis 0, which TIDL's Transpose refuses)."""
    from ...ir.passes.convert_softmax_axis_channel_to_width import channel_perm

    return channel_perm(call) is not None and call.args[0].checked_type.ndim >= 4


def _reducemean_to_matmul(call: Call) -> bool:
    """A mean over H and W, or W, of a batch-1 4-D tensor: the MatMul (an inner product) takes it."""
    from ...ir.passes.convert_reducemean_to_matmul import mean_form

    return mean_form(call) is not None and int(call.args[0].checked_type.shape[0]) == 1


def _alone(call: Call) -> Optional[IRModule]:
    """A module whose @main is ``call`` alone: its non-constant inputs become parameters (one per
    distinct input, so a concatenation of copies stays one of copies), its constants stay."""
    from ...ir.expr import Constant, Tuple, Var

    params: Dict[int, Var] = {}

    def param(arg):
        if isinstance(arg, Constant):
            return arg
        if isinstance(arg, Tuple):
            return Tuple([param(f) for f in arg.fields])
        if id(arg) not in params:
            t = getattr(arg, "checked_type", None)
            if t is None:
                raise ValueError("an input without a type")
            params[id(arg)] = Var(f"in{len(params)}", t)
        return params[id(arg)]

    try:
        body = Call(call.op, [param(a) for a in call.args], call.attrs, layer=call.layer)
        return IRModule({"main": Function(list(params.values()), body)}).infer_types()
    except Exception:  # a call that cannot stand alone gets no hint
        return None


def _moves_to_tidl(rule: str, call: Call) -> bool:
    """Whether the pass of TI's ``rule``, run on ``call`` alone, rewrites it into calls the support
    rules all take (a removed call counts as taken)."""
    from ...ir.passes import SURGERY_PASSES
    from .flow import SURGERY_RULES

    name = next((n for n, r in SURGERY_RULES.items() if r == rule), None)
    mod = _alone(call) if name is not None else None
    if mod is None:
        return False
    try:
        out = SURGERY_PASSES[name](mod)
    except Exception:  # a rule that cannot run on the call alone gives no hint
        return False
    if out["main"] is mod["main"] or out["main"].body is mod["main"].body:
        return False
    ctx = RuleContext(out["main"])
    return all(check_call(c, ctx, absorbed=c in ctx.composites) is None for c in ctx.calls())


#: TI's model optimizer rule -> whether it rewrites a call the support rules refuse into calls they
#: take. Rules not listed are judged by running their pass on the call alone (``_moves_to_tidl``).
SURGERY_FIXES = {
    "convert_softmax_axis_channel_to_width": _softmax_channel_to_width,
    "convert_reducemean_to_matmul": _reducemean_to_matmul,
}


def surgery_hint(rule: str) -> str:
    return f"TI model optimizer rule {rule} moves it to TIDL (on by default in the ORT flow; model_surgery=1)"


def with_surgery_hints(reasons: Dict[Call, HostReason], rules: Sequence[str]) -> Dict[Call, HostReason]:
    """``reasons`` with, on each call a support rule refuses and one of TI's model surgery ``rules``
    (not applied) would move to TIDL, the rule named after the reason."""
    out = dict(reasons)
    for call, reason in reasons.items():
        if reason.kind != "rule":
            continue
        for rule in rules:
            fixes = SURGERY_FIXES.get(rule)
            if fixes(call) if fixes is not None else _moves_to_tidl(rule, call):
                out[call] = HostReason(reason.kind, f"{reason.message}; {surgery_hint(rule)}")
                break
    return out


__all__ = ["HostReason", "HOST_REASON_KINDS", "explain", "explain_function", "with_surgery_hints", "SURGERY_FIXES",
           "surgery_hint"]
