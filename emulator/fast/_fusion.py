"""The fast set's plan transform: fuses chains of element-wise ops into the step producing their input
(conv -> batch_norm -> relu, conv -> batch_norm -> add -> relu, ...), so the chain runs in place
on the producer's fresh output.

Unfused, each op of such a chain allocates a new activation and reads and writes it once more.
A fused step runs the head kernel, then each op's *epilogue* (facet ``emulator.epilogue``,
registry.Epilogue), which does the very float operations of the op's kernel but writes into the
head's result. Results therefore stay bit-identical to unfused execution, which matters because
a partitioned module (whose chains are cut at function boundaries) must emulate exactly like the
unpartitioned one. Only ops that have an epilogue join a chain; an epilogue computing a tuple item
(batch_norm's item 0) absorbs the projection too. The first epilogue writes in place only when
the head's kernel declares ``fresh_result`` (a new array no input or constant shares).

A tail whose epilogues declare the roles affine -> add -> relu (any two or more, in that order)
runs as one pass (_tail.py), with the same operations.

A value joins its consumer's chain only when that consumer is its single reader (and the value
is not the function's result), so no fused-away value is ever needed elsewhere. The fused
step takes the place of the chain's last op in the schedule; every input of the chain is
computed before that point, and slot freeing is computed afterwards on the fused schedule.
``EmulatorConfig.fuse=False`` (``TIDLX_EMULATOR_FUSE=0``) turns fusion off, and runs with
observers do not use it (``hides_values``).
"""

from __future__ import annotations

from collections import Counter
from typing import List, NamedTuple, Optional, Tuple

from ..interpreter import CUSTOM, GET_ITEM, OP, EmulatorError, check_result, expected_of, kernel_failure
from ...ir.expr import Call
from ...ir.types import TensorType, TupleType
from ..registry import PlanTransform, get_epilogue
from ._tail import is_tail, run_tail


class Stage(NamedTuple):
    """One fused op after the head: its epilogue, and what the kernel fallback needs."""
    epilogue: object     # the epilogue function
    kernel: object
    attrs: object
    position: int        # index of the chain value among the op's arguments
    n_others: int        # how many of the fused step's inputs are this op's other arguments
    item0: bool          # the op returns a tuple whose item 0 is the chain value (batch_norm)
    expected: object     # (shape, dtype) of the stage's result, as OP payloads carry
    node: Call
    op_name: str
    tail: Optional[str]  # the epilogue's role in the one-pass tail


class Fused(NamedTuple):
    """Payload of a fused step: the head OP payload, its argument count, the stages after it, and
    whether the stages are a conv tail that _tail.py runs in one pass."""
    head: tuple
    n_head_args: int
    head_node: Call
    stages: Tuple[Stage, ...]
    tail: bool = False

    @property
    def fresh(self) -> bool:
        """Whether the head kernel's result is a new array the epilogues may write into."""
        return self.head[4].fresh_result

    def describe(self) -> str:
        """'nn.conv2d+nn.batch_norm+nn.relu' (for debugging and tests)."""
        return "+".join([self.head_node.op.name] + [s.op_name for s in self.stages])

    def run(self, plan, values: list, stats):
        return _run_fused(plan, self, values, stats)


def _float_tensor(t) -> bool:
    return isinstance(t, TensorType) and t.dtype in ("float32", "float64", "float16")


def fuse_chains(raw_steps: List[tuple], result_slot: int) -> List[tuple]:
    """The schedule with fusable chains merged; steps are (kind, out, ins, payload, node)."""
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
        if kind != OP or i in absorbed or not _float_tensor(node.checked_type):
            continue
        stages, members, value, fused_ins = [], [], out, list(ins)
        while readers[value] == 1:
            stage, used = _next_stage(raw_steps, reader_of, readers, value, absorbed)
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
        tail = payload[4].fresh_result and is_tail([s.tail for s in stages])
        placed[last] = (CUSTOM, value, tuple(fused_ins), Fused(payload, len(ins), node, tuple(stages), tail),
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


def _next_stage(raw_steps, reader_of, readers, value, absorbed):
    """(Stage, indices of the steps it absorbs) for the single reader of ``value``, or (None, ())."""
    j = reader_of.get(value)
    if j is None or j in absorbed:
        return None, ()
    kind, out, ins, payload, node = raw_steps[j]
    if kind != OP or not isinstance(node, Call):
        return None, ()
    epi = get_epilogue(node.op)
    if epi is None or ins.count(value) != 1:
        return None, ()
    kernel, attrs = payload[0], payload[1]
    position = ins.index(value)
    name = node.op.name
    if epi.tuple_item is not None:
        # fused together with its TupleGetItem, the only reader of the tuple
        if epi.tuple_item != 0 or position != 0 or readers[out] != 1 or not isinstance(node.checked_type, TupleType):
            return None, ()
        k = reader_of.get(out)
        if k is None or k in absorbed or raw_steps[k][0] != GET_ITEM or raw_steps[k][3] != 0:
            return None, ()
        item_type = node.checked_type.fields[0]
        if not _float_tensor(item_type):
            return None, ()
        stage = Stage(epi.fn, kernel, attrs, 0, len(ins) - 1, True, expected_of(item_type), node, name, epi.tail)
        return stage, (j, k)
    if not _float_tensor(node.checked_type):
        return None, ()
    stage = Stage(epi.fn, kernel, attrs, position, len(ins) - 1, False, payload[3], node, name, epi.tail)
    return stage, (j,)


def stage_inputs(ins: Tuple[int, ...], position: int) -> Tuple[int, ...]:
    """The slots of a stage's other arguments: its inputs without the chain value."""
    return ins[:position] + ins[position + 1:]


def stage_args(value, others: list, position: int) -> list:
    """A stage op's full argument list for its kernel (the chain value back in its place)."""
    return others[:position] + [value] + others[position:]


def describe(payload: Fused) -> str:
    return payload.describe()


def _run_fused(plan, fused: Fused, values: list, stats):
    """A fused step: the head op, then each stage's epilogue on its result (in place when the
    result is an array no one else holds), or the stage's kernel where it has no epilogue form."""
    kernel, attrs, out_type, expected, _ = fused.head
    node = fused.head_node
    try:
        res = kernel(values[:fused.n_head_args], attrs, out_type)
    except Exception as exc:
        if isinstance(exc, EmulatorError):
            raise
        raise kernel_failure(plan, node, exc) from exc
    res = check_result(plan, node, res, expected)
    owned = fused.fresh
    stage_others, at = [], fused.n_head_args
    for stage in fused.stages:
        stage_others.append(values[at:at + stage.n_others])
        at += stage.n_others
    if fused.tail and owned:
        try:
            done = run_tail(res, fused.stages, stage_others)
        except Exception as exc:
            raise kernel_failure(plan, fused.stages[0].node, exc) from exc
        if done is not None:
            res = check_result(plan, fused.stages[-1].node, done, fused.stages[-1].expected)
            if stats is not None:
                _count_fused(stats, fused)
            return res
    for stage, others in zip(fused.stages, stage_others):
        node = stage.node
        try:
            y = stage.epilogue(res, others, stage.attrs, owned and res.flags.writeable)
            if y is None:
                y = stage.kernel(stage_args(res, others, stage.position), stage.attrs, node.checked_type)
                if stage.item0:
                    y = y[0]
        except Exception as exc:
            if isinstance(exc, EmulatorError):
                raise
            raise kernel_failure(plan, node, exc) from exc
        res = check_result(plan, node, y, stage.expected)
        owned = True  # an epilogue's or a kernel's result is a new array (or the owned one)
    if stats is not None:
        _count_fused(stats, fused)
    return res


def _count_fused(stats, fused: Fused) -> None:
    for name in [fused.head_node.op.name] + [s.op_name for s in fused.stages]:
        stats.kernel_calls[name] = stats.kernel_calls.get(name, 0) + 1
    stats.steps += sum(2 if s.item0 else 1 for s in fused.stages)  # the fused-away steps


FUSION = PlanTransform("fusion", fuse_chains, enabled=lambda config: config.fuse, hides_values=True)
