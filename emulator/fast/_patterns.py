"""What the fast set's pattern passes share (_activations.py, _shuffle.py): who reads which value in a
plan's raw schedule, and how a step standing for several ops runs."""

from __future__ import annotations

from collections import Counter
from typing import Callable, List, NamedTuple, Optional

from ..interpreter import OP, EmulatorError, check_result, expected_of, kernel_failure
from ...ir.expr import Call


class Readers(NamedTuple):
    """``count[slot]``: the steps reading a slot (the result slot once more, for the caller);
    ``of[slot]``: those steps' indices in order."""
    steps: List[tuple]
    count: Counter
    of: dict

    def single_reader(self, slot) -> Optional[int]:
        """The index of the one step reading ``slot``, or None (read by none, several, or the caller)."""
        found = self.of.get(slot, [])
        return found[0] if self.count[slot] == 1 and len(found) == 1 else None

    def op_step(self, i, name) -> bool:
        """Whether step i runs op ``name``."""
        kind, _, _, _, node = self.steps[i]
        return kind == OP and isinstance(node, Call) and node.op.name == name


def readers_of(raw_steps: List[tuple], result_slot: int) -> Readers:
    count = Counter(s for step in raw_steps for s in step[2])
    count[result_slot] += 1
    of: dict = {}
    for i, step in enumerate(raw_steps):
        for s in step[2]:
            of.setdefault(s, []).append(i)
    return Readers(raw_steps, count, of)


def run_replacing(plan, node: Call, ops: tuple, stats, compute: Callable[[], object]):
    """``compute()`` as the step that stands for ``ops`` (ending at ``node``): a failure names the
    node's binding, the run's stats count each op it replaces, the result is checked against node's type."""
    try:
        res = compute()
    except Exception as exc:
        if isinstance(exc, EmulatorError):
            raise
        raise kernel_failure(plan, node, exc) from exc
    if stats is not None:
        for name in ops:
            stats.kernel_calls[name] = stats.kernel_calls.get(name, 0) + 1
        stats.steps += len(ops) - 1  # the replaced steps
    return check_result(plan, node, res, expected_of(node.checked_type))
