"""The fast set's channel-shuffle pattern: concatenate, reshape, transpose, reshape as one copy.

ShuffleNet's units end with ``concatenate((a, b), axis=1) -> reshape (N, g, C/g, H, W) -> transpose
(0, 2, 1, 3, 4) -> reshape (N, C, H, W)``: the concatenation writes the whole tensor once and the
last reshape (of a transposed view) copies it again, and the four ops are four steps. When the g
concatenated tensors have C/g channels each, output channel c * g + k is input k's channel c, so
this plan transform (before fusion) replaces the chain by one step that copies each input's planes
straight to their shuffled places: the same values (a copy moves bits; NaN payloads and -0 too), one
write of the tensor. ShuffleNetV2 runs 16 such units (their four steps took ~17 us each, at 2 threads).

A chain qualifies when every value is a float32 or float64 NCHW tensor of one dtype, the reshapes
and the transpose are exactly those above, and each intermediate value has one reader. Runs with
observers do not use the transform (``hides_values``).
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional

import numpy as np

from ..interpreter import CUSTOM
from ...ir.expr import Call, Tuple
from ...ir.types import TensorType
from ..registry import PlanTransform
from ._patterns import readers_of, run_replacing

_OPS = ("concatenate", "reshape", "transpose", "reshape")


class ChannelShuffle(NamedTuple):
    """Payload of a channel-shuffle step: the groups, the chain's last op (its value; errors name
    it) and the names of the ops it replaces."""
    groups: int
    node: Call
    ops: tuple = _OPS

    def describe(self) -> str:
        return f"channel_shuffle({'+'.join(self.ops)}, groups={self.groups})"

    def run(self, plan, values: list, stats):
        shape = tuple(int(d) for d in self.node.checked_type.shape)
        return run_replacing(plan, self.node, self.ops, stats, lambda: _shuffle(values[0], self.groups, shape))


def _shuffle(parts: tuple, groups: int, shape: tuple) -> np.ndarray:
    """The concatenation of ``parts`` along channels, its channels reordered as g x (C/g) -> (C/g) x g."""
    n, c, h, w = shape
    out = np.empty((n, c // groups, groups, h * w), parts[0].dtype)
    for k, part in enumerate(parts):
        out[:, :, k, :] = part.reshape(n, c // groups, h * w)
    return out.reshape(shape)


def _float_4d(node) -> Optional[TensorType]:
    t = node.checked_type
    if isinstance(t, TensorType) and t.dtype in ("float32", "float64") and len(t.shape) == 4 \
            and all(isinstance(d, int) for d in t.shape):
        return t
    return None


def _shuffle_of(raw_steps, i, single_reader, op_step) -> Optional[tuple]:
    """((step indices), groups) of the chain starting at concatenate step i, or None."""
    concat = raw_steps[i][4]
    t = _float_4d(concat)
    fields = concat.args[0]
    if t is None or int(concat.attrs.axis) % 4 != 1 or not isinstance(fields, Tuple) or len(fields.fields) < 2:
        return None
    n, c, h, w = t.shape
    groups = len(fields.fields)
    for field in fields.fields:
        u = _float_4d(field)
        if u is None or u.dtype != t.dtype or tuple(u.shape) != (n, c // groups, h, w) or c % groups:
            return None
    j = single_reader(raw_steps[i][1])
    if j is None or not op_step(j, "reshape") or tuple(raw_steps[j][4].checked_type.shape) != \
            (n, groups, c // groups, h, w):
        return None
    k = single_reader(raw_steps[j][1])
    if k is None or not op_step(k, "transpose"):
        return None
    transpose = raw_steps[k][4]
    if tuple(int(a) % 5 for a in (transpose.attrs.axes or ())) != (0, 2, 1, 3, 4):
        return None
    m = single_reader(raw_steps[k][1])
    if m is None or not op_step(m, "reshape"):
        return None
    last = raw_steps[m][4]
    u = _float_4d(last)
    if u is None or u.dtype != t.dtype or tuple(u.shape) != (n, c, h, w):
        return None
    return (i, j, k, m), groups


def find_channel_shuffles(raw_steps: List[tuple], result_slot: int) -> List[tuple]:
    """The schedule with each qualifying chain replaced by one CUSTOM step at its last op."""
    lookups = readers_of(raw_steps, result_slot)
    single_reader, op_step = lookups.single_reader, lookups.op_step
    replaced, absorbed = {}, set()
    for i, (kind, _, ins, _, node) in enumerate(raw_steps):
        if i in absorbed or not op_step(i, "concatenate") or len(ins) != 1:
            continue
        found = _shuffle_of(raw_steps, i, single_reader, op_step)
        if found is None:
            continue
        members, groups = found
        absorbed.update(members)
        last = members[-1]
        replaced[last] = (CUSTOM, raw_steps[last][1], (ins[0],), ChannelShuffle(groups, raw_steps[last][4]),
                          raw_steps[last][4])
    if not replaced:
        return raw_steps
    return [replaced.get(i, step) for i, step in enumerate(raw_steps) if i in replaced or i not in absorbed]


CHANNEL_SHUFFLE = PlanTransform("channel_shuffle", find_channel_shuffles, enabled=lambda config: config.fuse,
                                hides_values=True)
