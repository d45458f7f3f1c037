"""RemoveWhereLayer: a select whose condition is a constant, all true or all false, becomes the
input it always selects (TI's model optimizer rule ``remove_where_layer``, on by default in TI's
runner). TIDL has no Where layer.

    where(c, x, y)    # c: a constant, all true   ->  x
    where(c, x, y)    # c: a constant, all false  ->  y

The chosen input takes the select's place only where it has the select's type (no broadcast
left to do); a select whose chosen input would still need broadcasting is left alone.

Exactness: the select returns that input's values unchanged.
"""

from __future__ import annotations

import numpy as np

from ..expr import Constant
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass
from ..types import TensorType

#: TI's name of the rule.
TI_RULE = "remove_where_layer"


def chosen_input(where):
    """The input a constant-condition ``where`` always selects, else None."""
    if getattr(where, "op_name", None) != "where" or not isinstance(where.args[0], Constant):
        return None
    cond = np.asarray(where.args[0].data)
    picked = where.args[1] if np.all(cond) else where.args[2] if not np.any(cond) else None
    have, want = getattr(picked, "checked_type", None), where.checked_type
    if not isinstance(have, TensorType) or not isinstance(want, TensorType) or \
            tuple(have.shape) != tuple(want.shape) or have.dtype != want.dtype:
        return None
    return picked


def _convert(m):
    return chosen_input(m.expr)


REMOVE_WHERE_LAYER = RewriteTable([
    ("select_by_constant_condition", is_op("where"), _convert),
], name="RemoveWhereLayer")


@module_pass("RemoveWhereLayer", opt_level=0)
def remove_where_layer(mod, ctx):
    """Replaces a select with an all-true or all-false constant condition by the input it selects
    (TI's remove_where_layer)."""
    return REMOVE_WHERE_LAYER.rewrite(mod)


RemoveWhereLayer = remove_where_layer

__all__ = ["RemoveWhereLayer", "REMOVE_WHERE_LAYER", "chosen_input", "TI_RULE"]
