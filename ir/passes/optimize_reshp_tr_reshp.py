"""OptimizeReshpTrReshp: in a reshape -> transpose -> reshape, the axes the transpose keeps together
(runs of consecutive source axes, in order) are merged, so the middle tensor has fewer dimensions
(TI's model optimizer rule ``optimize_reshp_tr_reshp``, on by default in TI's runner).

    %0 = reshape(x, newshape=[1, 2, 4, 4, 6]);
    %1 = transpose(%0, axes=[0, 2, 3, 1, 4]);      # runs [0], [2, 3], [1], [4]
    reshape(%1, newshape=[1, 4, 8, 6])
    ->
    %0 = reshape(x, newshape=[1, 2, 16, 6]);       # each run's extent, the runs in source order
    %1 = transpose(%0, axes=[0, 2, 1, 3]);
    reshape(%1, newshape=[1, 4, 8, 6])

TI's conditions: the first reshape's only user is the transpose and the transpose's only user is
the second reshape, the transpose has its permutation, and the first reshape's input and the second
reshape's output have at most 6 dimensions. TI rewrites the first reshape and the transpose in
place, so each keeps its layer name. A reshape tidlx's import adds around another op (a MatMul's
operand or result, of that MatMul's layer) is not an ONNX node, and TI's optimizer never sees it:
such a sequence is left.

TI renumbers the runs for the new permutation by a fix-up (each missing number taken by the first
later entry above it) that gives the runs' true order only for some permutations: for
``[0, 3, 5, 1, 2, 4]`` (the space-to-depth sequence) it writes ``[0, 2, 3, 1, 4]`` where the runs'
order is ``[0, 2, 4, 1, 3]``, and the sequence then computes other values. tidlx rewrites only the
sequences where TI's permutation is the runs' order (the rewrite is then the same function) and
leaves the others, as well as sequences with no run to merge. The second reshape is written with
its static output shape.

Exactness: the values move as before; the results are equal.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..expr import Call
from ..op import call
from ..pattern import is_op, wildcard
from ..rewrite import RewriteTable
from ..transform import module_pass
from ..types import TensorType

#: TI's name of the rule.
TI_RULE = "optimize_reshp_tr_reshp"

#: TI's bound on the rank of the sequence's input and output (its test is ``len(shape) >= 7``).
MAX_OUTER_RANK = 6


def _static_shape(expr) -> Optional[List[int]]:
    t = expr.checked_type
    if not isinstance(t, TensorType):
        return None
    try:
        return [int(d) for d in t.shape]
    except (TypeError, ValueError):
        return None


def consecutive_runs(perm: Sequence[int]) -> List[List[int]]:
    """``perm`` cut into runs of consecutive increasing source axes, in the permutation's order."""
    runs = [[perm[0]]]
    for axis in perm[1:]:
        if axis == runs[-1][-1] + 1:
            runs[-1].append(axis)
        else:
            runs.append([axis])
    return runs


def ti_renumbered(firsts: Sequence[int]) -> List[int]:
    """TI's new permutation from each run's first source axis: every number below the run count
    that is missing is given to the first entry above it (the result is a permutation of the
    run indices only for some inputs)."""
    out = list(firsts)
    for num in range(len(out)):
        if num not in out:
            for i, value in enumerate(out):
                if value > num:
                    out[i] = num
                    break
    return out


def merged(shape: Sequence[int], perm: Sequence[int]) -> Optional[Tuple[List[int], List[int]]]:
    """(the merged middle shape, the new permutation) when merging the runs is TI's rewrite and the
    same function, else None."""
    runs = consecutive_runs(perm)
    if len(runs) == len(perm):
        return None
    by_source = sorted(runs, key=min)
    new_shape = [int(np.prod([shape[a] for a in run])) for run in by_source]
    order = [by_source.index(run) for run in runs]
    if ti_renumbered([min(run) for run in runs]) != order:
        return None
    return new_shape, order


def _part_of(node, other) -> bool:
    """``node`` belongs to the ONNX node ``other`` was imported from: same layer, and ``other`` is
    not itself a reshape or transpose (rules that write a reshape-transpose-reshape give all three
    their source's layer; TI's optimizer sees them as three nodes)."""
    return (isinstance(other, Call) and node.layer is not None and other.layer == node.layer
            and other.op_name not in ("reshape", "transpose"))


def _own_nodes(m, inner, outer) -> bool:
    """Neither reshape is part of the op next to it (tidlx's import adds a reshape, of the MatMul's
    layer, before and after a MatMul of rank above 3)."""
    if _part_of(inner, inner.args[0]):
        return False
    return not any(_part_of(outer, u) for u in (m.users(outer) or ()))


def _optimize(m):
    outer = m.expr
    tr = outer.args[0]
    inner = tr.args[0]
    if not (m.has_single_user(inner) and m.has_single_user(tr)) or tr.attrs.axes is None:
        return None
    if not _own_nodes(m, inner, outer):
        return None
    source, middle, result = _static_shape(inner.args[0]), _static_shape(inner), _static_shape(outer)
    if source is None or middle is None or result is None:
        return None
    if len(source) > MAX_OUTER_RANK or len(result) > MAX_OUTER_RANK:
        return None
    rank = len(middle)
    if rank < 2:
        return None
    perm = [int(a) % rank for a in tr.attrs.axes]
    if sorted(perm) != list(range(rank)):
        return None
    found = merged(middle, perm)
    if found is None:
        return None
    new_shape, order = found
    x = call("reshape", inner.args[0], newshape=new_shape, layer=inner.layer)
    x = call("transpose", x, axes=order, layer=tr.layer)
    return call("reshape", x, newshape=result, layer=outer.layer)


OPTIMIZE_RESHP_TR_RESHP = RewriteTable([
    ("reshape_transpose_reshape", is_op("reshape")(is_op("transpose")(is_op("reshape")(wildcard()))), _optimize),
], name="OptimizeReshpTrReshp")


@module_pass("OptimizeReshpTrReshp", opt_level=0)
def optimize_reshp_tr_reshp(mod, ctx):
    """Merges the axes a reshape -> transpose -> reshape's transpose keeps together (TI's
    optimize_reshp_tr_reshp)."""
    return OPTIMIZE_RESHP_TR_RESHP.rewrite(mod)


OptimizeReshpTrReshp = optimize_reshp_tr_reshp

__all__ = ["OptimizeReshpTrReshp", "OPTIMIZE_RESHP_TR_RESHP", "consecutive_runs", "ti_renumbered", "merged",
           "TI_RULE"]
