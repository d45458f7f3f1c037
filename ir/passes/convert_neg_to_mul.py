"""ConvertNegToMul: a negation becomes a multiply by the constant -1 (TI's model optimizer rule
``convert_neg_to_mul``, on by default in TI's runner). TIDL has no Neg layer; it has an
element-wise multiply by a constant.

    negative(x)   ->   multiply(x, [-1.0])       # the constant has shape (1,), x's dtype

The new call takes the negation's layer name.

Exactness: multiplying by -1 flips the sign bit, as negation does: the results are equal.
"""

from __future__ import annotations

import numpy as np

from ..expr import Constant
from ..op import call
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass
from ..types import TensorType

#: TI's name of the rule.
TI_RULE = "convert_neg_to_mul"


def _convert(m):
    neg = m.expr
    t = neg.args[0].checked_type
    if not isinstance(t, TensorType) or not t.dtype.startswith("float"):
        return None
    return call("multiply", neg.args[0], Constant(np.array([-1], dtype=t.dtype)), layer=neg.layer)


CONVERT_NEG_TO_MUL = RewriteTable([
    ("negation", is_op("negative"), _convert),
], name="ConvertNegToMul")


@module_pass("ConvertNegToMul", opt_level=0)
def convert_neg_to_mul(mod, ctx):
    """Turns each float negation into a multiply by -1 (TI's convert_neg_to_mul)."""
    return CONVERT_NEG_TO_MUL.rewrite(mod)


ConvertNegToMul = convert_neg_to_mul

__all__ = ["ConvertNegToMul", "CONVERT_NEG_TO_MUL", "TI_RULE"]
