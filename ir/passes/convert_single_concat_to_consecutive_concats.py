"""ConvertSingleConcatToConsecutiveConcats: a concatenation of three or more copies of one
tensor becomes a chain of two-input concatenations (TI's model optimizer rule
``convert_single_concat_to_consecutive_concats``, on by default in TI's runner; TI notes TIDL
does not take the single concatenation of copies).

    concatenate((x, x, x, x), axis=-2)
    ->
    %0 = concatenate((x, x), axis=-2);
    %1 = concatenate((x, %0), axis=-2);
    concatenate((x, %1), axis=-2)

The chain is TI's: the innermost concatenation joins two copies, each next one puts a copy in
front. All new calls take the concatenation's layer name.

Exactness: both forms copy the same values.
"""

from __future__ import annotations

from ..expr import Tuple
from ..op import call
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass

#: TI's name of the rule.
TI_RULE = "convert_single_concat_to_consecutive_concats"


def copies(concat) -> int:
    """How many copies of one tensor ``concat`` joins (0 unless three or more)."""
    if getattr(concat, "op_name", None) != "concatenate" or not isinstance(concat.args[0], Tuple):
        return 0
    fields = concat.args[0].fields
    if len(fields) < 3 or any(f is not fields[0] for f in fields):
        return 0
    return len(fields)


def _convert(m):
    concat = m.expr
    n = copies(concat)
    if not n:
        return None
    x = concat.args[0].fields[0]
    axis, layer = concat.attrs.axis, concat.layer
    out = call("concatenate", Tuple([x, x]), axis=axis, layer=layer)
    for _ in range(n - 2):
        out = call("concatenate", Tuple([x, out]), axis=axis, layer=layer)
    return out


CONVERT_SINGLE_CONCAT_TO_CONSECUTIVE_CONCATS = RewriteTable([
    ("concat_of_copies", is_op("concatenate"), _convert),
], name="ConvertSingleConcatToConsecutiveConcats")


@module_pass("ConvertSingleConcatToConsecutiveConcats", opt_level=0)
def convert_single_concat_to_consecutive_concats(mod, ctx):
    """Turns a concatenation of three or more copies of a tensor into two-input concatenations
    (TI's convert_single_concat_to_consecutive_concats)."""
    return CONVERT_SINGLE_CONCAT_TO_CONSECUTIVE_CONCATS.rewrite(mod)


ConvertSingleConcatToConsecutiveConcats = convert_single_concat_to_consecutive_concats

__all__ = ["ConvertSingleConcatToConsecutiveConcats", "CONVERT_SINGLE_CONCAT_TO_CONSECUTIVE_CONCATS", "copies",
           "TI_RULE"]
