"""TIDL support rules: one per Relay op, registered by op name in family files.

    RULES["nn.conv2d"](call, ctx)   -> None | "nn.conv2d 'conv1': depthwise 5x5 stride 1 is not ..."
    check_call(call, ctx)           -> the generic rules, then the op's rule
    layer_type("nn.conv2d")         -> "Conv"

Ops with no rule have no TIDL layer ("TIDL has no layer for <op>"). ``ctx`` is a
``RuleContext`` (graph users, inputs, outputs). The batch limit is separate (``batch_reason``)
because it depends on the options.
"""

from __future__ import annotations

from typing import Optional

from ....ir.expr import Call
from ....ir.op import Op
from . import conv, elemwise, norm, pool, shape  # noqa: F401  (registers every family)
from ._base import RULE_INFO, RULES, RuleInfo, axis_name, is_channelwise, where
from .generic import MAX_RANK, batch_reason, op_reason, call_batch, type_reason


def check_call(call: Call, ctx, *, absorbed: bool = False) -> Optional[str]:
    """Why TIDL cannot take ``call`` (generic rules, then its op rule), or None.

    ``absorbed=True`` is for members of a composite that TIDL folds into another layer: an op
    without a layer of its own (the erf of a GELU) is then accepted; every other check applies."""
    if (not isinstance(call.op, Op) or call.op.name.startswith("qnn.")
            or (call.op.name not in RULES and not absorbed)):
        return op_reason(call)
    reason = type_reason(call)
    if reason:
        return reason
    rule_fn = RULES.get(call.op.name)
    return rule_fn(call, ctx) if rule_fn is not None else None


def layer_type(op_name: str) -> Optional[str]:
    """The TIDL layer type an op maps to, or None when TIDL has no layer for it."""
    info = RULE_INFO.get(op_name)
    return info.layer if info else None


def supported_ops() -> list:
    return sorted(RULES)


__all__ = ["RULES", "RULE_INFO", "RuleInfo", "check_call", "layer_type", "supported_ops", "batch_reason",
           "call_batch", "type_reason", "op_reason", "where", "axis_name", "is_channelwise", "MAX_RANK"]
