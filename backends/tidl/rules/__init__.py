"""TIDL support rules: one per Relay op, registered by op name in family files as the op
facets ``tidl.rule`` and ``tidl.layer``.

    rule_info("nn.conv2d").check(call, ctx) -> None | "nn.conv2d 'conv1': depthwise 5x5 stride 1 is ..."
    check_call(call, ctx)                   -> the generic rules, then the op's rule
    layer_type("nn.conv2d")                 -> "Conv"
    supported_ops()                         -> every op with a rule

Ops with no rule have no TIDL layer ("TIDL has no layer for <op>"). ``ctx`` is a
``RuleContext`` (graph users, inputs, outputs). The batch limit is separate (``batch_reason``)
because it depends on the options.
"""

from __future__ import annotations

from typing import Optional

from ....ir.expr import Call
from ....ir.op import Op, get_op, has_op, ops_with_attr
from . import conv, elemwise, host_only, norm, pool, shape  # noqa: F401  (registers every family)
from ._base import TIDL_LAYER, TIDL_RULE, RuleInfo, axis_name, is_channelwise, rule_info, where
from .generic import MAX_RANK, batch_reason, op_reason, call_batch, type_reason


def check_call(call: Call, ctx, *, absorbed: bool = False) -> Optional[str]:
    """Why TIDL cannot take ``call`` (generic rules, then its op rule), or None.

    ``absorbed=True`` is for members of a composite that TIDL folds into another layer: an op
    without a layer of its own (the erf of a GELU) is then accepted; every other check applies."""
    if (not isinstance(call.op, Op) or call.op.name.startswith("qnn.")
            or (not call.op.has_attr(TIDL_RULE) and not absorbed)):
        return op_reason(call)
    reason = type_reason(call)
    if reason:
        return reason
    info = call.op.get_attr(TIDL_RULE)
    return info.check(call, ctx) if info is not None else None


def layer_type(op_name: str) -> Optional[str]:
    """The TIDL layer type an op maps to, or None when TIDL has no layer for it."""
    return get_op(op_name).get_attr(TIDL_LAYER) if has_op(op_name) else None


def supported_ops() -> list:
    """The Relay ops TIDL has a layer for (those with a ``tidl.rule`` facet), by name."""
    return sorted(ops_with_attr(TIDL_RULE))


__all__ = ["TIDL_RULE", "TIDL_LAYER", "RuleInfo", "rule_info", "supported_ops", "check_call", "layer_type", "supported_ops", "batch_reason",
           "call_batch", "type_reason", "op_reason", "where", "axis_name", "is_channelwise", "MAX_RANK"]
