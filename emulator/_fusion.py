"""Fuses chains of element-wise ops into the step producing their input (conv -> batch_norm -> relu,
conv -> batch_norm -> add -> relu, ...), so the chain runs in place on the producer's fresh output.

Unfused, each op of such a chain allocates a new activation and reads and writes it once more.
A fused step runs the head kernel, then each op's *epilogue* (registry.epilogue), which does the
very float operations of the op's kernel but writes into the head's result. Results therefore
stay bit-identical to unfused execution, which matters because a partitioned module (whose
chains are cut at function boundaries) must emulate exactly like the unpartitioned one.

A tail of batch_norm -> add -> relu (any two or more, in that order) runs as one pass
(kernels/_tail.py), with the same operations.

A value joins its consumer's chain only when that consumer is its single reader (and the value
is not the function's result), so no fused-away value is ever needed elsewhere. The fused
step takes the place of the chain's last op in the schedule; every input of the chain is
computed before that point, and slot freeing is computed afterwards on the fused schedule.
``TIDLX_EMULATOR_FUSE=0`` turns fusion off.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import List, NamedTuple, Tuple

from ..ir.expr import Call
from ..ir.types import TensorType, TupleType
from .kernels._tail import is_tail
from .registry import get_epilogue

ENABLED = os.environ.get("TIDLX_EMULATOR_FUSE", "1") not in ("0", "no", "false")

#: heads whose kernels always return a new array (never a view of an input or a constant), so
#: the first epilogue may write into it; after other heads the first epilogue writes a new array
FRESH_RESULT_OPS = frozenset({"nn.conv2d", "nn.conv2d_transpose", "nn.dense", "add"})


class Stage(NamedTuple):
    """One fused op after the head: its epilogue, and what the kernel fallback needs."""
    epilogue: object
    kernel: object
    attrs: object
    position: int        # index of the chain value among the op's arguments
    n_others: int        # how many of the fused step's inputs are this op's other arguments
    item0: bool          # the op returns a tuple whose item 0 is the chain value (batch_norm)
    expected: object     # (shape, dtype) of the stage's result, as _OP payloads carry
    node: Call
    op_name: str


class Fused(NamedTuple):
    """Payload of a fused step: the head _OP payload, its argument count, the stages after it, and
    whether the stages are a conv tail that kernels/_tail.py runs in one pass."""
    head: tuple
    n_head_args: int
    head_node: Call
    stages: Tuple[Stage, ...]
    tail: bool = False


def _float_tensor(t) -> bool:
    return isinstance(t, TensorType) and t.dtype in ("float32", "float64", "float16")


def fuse_chains(raw_steps: List[tuple], result_slot: int, op_kind: int, get_item_kind: int,
                fused_kind: int, expected_of) -> List[tuple]:
    """The schedule with fusable chains merged; steps are (kind, out, ins, payload, node)."""
    if not ENABLED:
        return raw_steps
    readers = Counter(s for step in raw_steps for s in step[2])
    readers[result_slot] += 1
    reader_of = {}
    for i, step in enumerate(raw_steps):
        for s in step[2]:
            if readers[s] == 1:
                reader_of[s] = i

    absorbed = set()
    placed = {}   # index of a chain's last op -> fused step
    for i, (kind, out, ins, payload, node) in enumerate(raw_steps):
        if kind != op_kind or i in absorbed or not _float_tensor(node.checked_type):
            continue
        stages, members, value, fused_ins = [], [], out, list(ins)
        while readers[value] == 1:
            stage, used = _next_stage(raw_steps, reader_of, readers, value, absorbed, op_kind, get_item_kind,
                                      expected_of)
            if stage is None:
                break
            stages.append(stage)
            members.extend(used)
            fused_ins.extend(stage_inputs(raw_steps[used[0]][2], stage.position))
            value = raw_steps[used[-1]][1]
        if not stages:
            continue
        absorbed.update(members)
        absorbed.add(i)
        last = members[-1]
        tail = fresh_head(node.op.name) and is_tail([s.op_name for s in stages])
        placed[last] = (fused_kind, value, tuple(fused_ins), Fused(payload, len(ins), node, tuple(stages), tail),
                        raw_steps[last][4])
    if not placed:
        return raw_steps
    fused = []
    for i, step in enumerate(raw_steps):
        if i in placed:
            fused.append(placed[i])
        elif i not in absorbed:
            fused.append(step)
    return fused


def _next_stage(raw_steps, reader_of, readers, value, absorbed, op_kind, get_item_kind, expected_of):
    """(Stage, indices of the steps it absorbs) for the single reader of ``value``, or (None, ())."""
    j = reader_of.get(value)
    if j is None or j in absorbed:
        return None, ()
    kind, out, ins, payload, node = raw_steps[j]
    if kind != op_kind or not isinstance(node, Call):
        return None, ()
    name = node.op.name
    epi = get_epilogue(name)
    if epi is None or ins.count(value) != 1:
        return None, ()
    kernel, attrs = payload[0], payload[1]
    position = ins.index(value)
    if name == "nn.batch_norm":
        # fused together with its TupleGetItem 0, the only reader of the tuple
        if position != 0 or readers[out] != 1 or not isinstance(node.checked_type, TupleType):
            return None, ()
        k = reader_of.get(out)
        if k is None or k in absorbed or raw_steps[k][0] != get_item_kind or raw_steps[k][3] != 0:
            return None, ()
        item_type = node.checked_type.fields[0]
        if not _float_tensor(item_type):
            return None, ()
        stage = Stage(epi, kernel, attrs, 0, len(ins) - 1, True, expected_of(item_type), node, name)
        return stage, (j, k)
    if not _float_tensor(node.checked_type):
        return None, ()
    stage = Stage(epi, kernel, attrs, position, len(ins) - 1, False, payload[3], node, name)
    return stage, (j,)


def stage_inputs(ins: Tuple[int, ...], position: int) -> Tuple[int, ...]:
    """The slots of a stage's other arguments: its inputs without the chain value."""
    return ins[:position] + ins[position + 1:]


def stage_args(value, others: list, position: int) -> list:
    """A stage op's full argument list for its kernel (the chain value back in its place)."""
    return others[:position] + [value] + others[position:]


def fresh_head(op_name: str) -> bool:
    return op_name in FRESH_RESULT_OPS


def describe(payload: Fused) -> str:
    """'nn.conv2d+nn.batch_norm+nn.relu' (for debugging and tests)."""
    return "+".join([payload.head_node.op.name] + [s.op_name for s in payload.stages])
