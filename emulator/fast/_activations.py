"""The fast set's activation patterns: hard-swish, hard-sigmoid and swish, each one pass.

ONNX HardSwish, HardSigmoid and x * Sigmoid(x) (EfficientNet's swish) import as chains of small
ops: ``multiply(x, 1/6) -> add(0.5) -> clip(0, 1) [-> multiply(x, .)]`` and
``sigmoid(x) -> multiply(x, .)``. The value x is read twice, so fusion (_fusion.py) cannot chain
them, and each op allocates and writes an activation of its own: on MobileNetV3-small 112 such
ops per run (~0.85 ms of ~7.5 on one thread), on EfficientNet-B0 the sigmoids and multiplies
~8.7 of ~35 ms. This plan transform (before fusion) replaces each chain by one step that does
the very float operations of the kernels it replaces in the same order, element by element, so
results are bit-identical to the ops it replaces:

* hard-sigmoid: ``t = x * a; t = t + b; t = lo if t < lo else t; t = hi if t > hi else t``
  (np.clip's compares: NaN and -0 kept), hard-swish then ``x * t``;
* float32 swish: ``x * sigmoid_f32(x)`` in one vectorized numba pass in blocks over the run's
  threads (_exp.py), with the very function of the fast set's float32 ``sigmoid`` kernel, so it
  gives that kernel's bits then the multiply's (NaN too: sigmoid_f32 returns the NaN it got).
  That kernel is not numpy's bits: within 1.5e-7 relative of the exact value, a declared
  tolerance of 5e-7 against the reference (op_elemwise.SIGMOID_TOLERANCE, _exp.py's doc). A
  (1, 96, 112, 112) swish took 1.0 ms as numpy's five passes (one thread), 0.31 ms so on 2 threads
  (benchmarks/ab_swish.py, in-process A/B, medians);
* float64 swish: numpy's own ufuncs in the reference's order on one buffer, in place: ``-x``,
  exp, ``1 +``, ``1 /``, then the multiply with x's operand position kept (which NaN a product of
  two NaNs returns depends on it: a numba ``x * s`` flipped the sign of some).

A chain qualifies when its values are float32 or float64 tensors of x's shape and dtype, each
constant is a one-element array of that dtype, and every intermediate value has one reader (x:
the chain's two ops). Runs with observers do not use the transform (``hides_values``).

Where x is a fused convolution chain's result read by nothing else (a 1x1, depthwise or direct
convolution or a stem with its batch norm: 33 of EfficientNet-B0's 49 swishes, 18 of MobileNetV3-small's
19 hard-swishes), _prepared.py merges the step into that chain: _jit.tail_row applies the same
element operations to each part of the output as the tail does, while it is in cache (in-process A/B
at 2 threads: EfficientNet-B0 0.97-0.99x the time, MobileNetV3-small 0.91-0.96x).
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional

import numpy as np

from ..interpreter import CUSTOM, OP
from ...ir.expr import Call, Constant
from ...ir.types import TensorType
from ..registry import PlanTransform
from ._parallel import MIN_ELEMENTWISE_BLOCK, run_blocks
from ._patterns import readers_of, run_replacing
from .op_elemwise import MIN_EXP_BLOCK


class Activation(NamedTuple):
    """Payload of a pattern step: its kind, constants, the node whose value it computes (errors
    name it) and the names of the ops it replaces."""
    kind: str            # "hardsigmoid", "hardswish" or "swish"
    constants: tuple     # (a, b, lo, hi) in x's dtype for the hard ones; swish: (x is the first factor,)
    node: Call           # the chain's last op
    ops: tuple

    def describe(self) -> str:
        return f"{self.kind}({'+'.join(self.ops)})"

    def run(self, plan, values: list, stats):
        return run_replacing(plan, self.node, self.ops, stats, lambda: _apply(self, values[0]))


def _apply(act: Activation, x: np.ndarray) -> np.ndarray:
    from ._jit import hard_sigmoid_flat, hard_sigmoid_flat_blocks, hard_swish_flat, hard_swish_flat_blocks

    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    if act.kind == "swish" and flat.dtype == np.float32:
        from ._exp import swish_flat, swish_flat_blocks

        run_blocks(flat.size, swish_flat, swish_flat_blocks, flat, out, min_block=MIN_EXP_BLOCK)
    elif act.kind == "swish":
        one = flat.dtype.type(1)
        with np.errstate(over="ignore"):
            np.exp(np.negative(flat, out=out), out=out)
        np.add(one, out, out=out)
        np.divide(one, out, out=out)
        if act.constants[0]:
            np.multiply(flat, out, out=out)
        else:
            np.multiply(out, flat, out=out)
    elif act.kind == "hardswish":
        run_blocks(flat.size, hard_swish_flat, hard_swish_flat_blocks, flat, out, *act.constants,
                   min_block=MIN_ELEMENTWISE_BLOCK)
    else:
        run_blocks(flat.size, hard_sigmoid_flat, hard_sigmoid_flat_blocks, flat, out, *act.constants,
                   min_block=MIN_ELEMENTWISE_BLOCK)
    return out.reshape(x.shape)


def _float_tensor(node) -> Optional[TensorType]:
    t = node.checked_type
    return t if isinstance(t, TensorType) and t.dtype in ("float32", "float64") else None


def _scalar(node, dtype: str):
    """The value of a one-element constant of ``dtype``, as that numpy scalar type, else None."""
    if not isinstance(node, Constant):
        return None
    data = node.data
    if type(data) is not np.ndarray or data.size != 1 or data.dtype != np.dtype(dtype):
        return None
    return data.reshape(-1)[0]


def _other(node: Call, value_node) -> Optional[object]:
    """The argument of a binary call that is not ``value_node`` (None when neither or both are)."""
    a, b = node.args
    if a is value_node and b is not value_node:
        return b
    if b is value_node and a is not value_node:
        return a
    return None


def find_activations(raw_steps: List[tuple], result_slot: int) -> List[tuple]:
    """The schedule with each qualifying chain replaced by one CUSTOM step at its last op."""
    lookups = readers_of(raw_steps, result_slot)
    readers, reader_of, single_reader, op_step = lookups.count, lookups.of, lookups.single_reader, lookups.op_step
    replaced = {}   # index of a chain's last step -> the new step
    absorbed = set()
    for i, (kind, out, ins, payload, node) in enumerate(raw_steps):
        if i in absorbed or kind != OP or not isinstance(node, Call):
            continue
        name = node.op.name
        if name == "multiply":
            found = _hard(raw_steps, i, single_reader, op_step, reader_of, readers)
        elif name == "sigmoid":
            found = _swish(raw_steps, i, single_reader, op_step, reader_of, readers)
        else:
            continue
        if found is None or absorbed.intersection(found[0]):
            continue
        members, x_slot, act = found
        absorbed.update(members)
        last = members[-1]
        replaced[last] = (CUSTOM, raw_steps[last][1], (x_slot,), act, raw_steps[last][4])
    if not replaced:
        return raw_steps
    return [replaced.get(i, step) for i, step in enumerate(raw_steps) if i in replaced or i not in absorbed]


def _hard(raw_steps, i, single_reader, op_step, reader_of, readers):
    """multiply(x, a) -> add(., b) -> clip [-> multiply(x, .)] starting at step i, or None."""
    _, m1_out, m1_ins, _, m1 = raw_steps[i]
    t = _float_tensor(m1)
    if t is None:
        return None
    for x_pos in (0, 1):
        x_node, a_node = m1.args[x_pos], m1.args[1 - x_pos]
        a = _scalar(a_node, t.dtype)
        if a is not None and not isinstance(x_node, Constant):
            break
    else:
        return None
    x_slot = m1_ins[x_pos]
    x_type = x_node.checked_type
    if not isinstance(x_type, TensorType) or x_type.shape != t.shape or x_type.dtype != t.dtype:
        return None
    j = single_reader(m1_out)
    if j is None or not op_step(j, "add"):
        return None
    add = raw_steps[j][4]
    b_node = _other(add, m1)
    b = None if b_node is None else _scalar(b_node, t.dtype)
    if b is None or not _same_type(add, t):
        return None
    k = single_reader(raw_steps[j][1])
    if k is None or not op_step(k, "clip") or not _same_type(raw_steps[k][4], t):
        return None
    clip = raw_steps[k][4]
    dtype = np.dtype(t.dtype).type
    constants = (a, b, dtype(clip.attrs.a_min), dtype(clip.attrs.a_max))
    m2 = single_reader(raw_steps[k][1])
    if m2 is not None and op_step(m2, "multiply") and readers[x_slot] == 2 and m2 in reader_of[x_slot] \
            and sorted(raw_steps[m2][2]) == sorted((x_slot, raw_steps[k][1])) and _same_type(raw_steps[m2][4], t):
        return (i, j, k, m2), x_slot, Activation("hardswish", constants, raw_steps[m2][4],
                                                 ("multiply", "add", "clip", "multiply"))
    return (i, j, k), x_slot, Activation("hardsigmoid", constants, clip, ("multiply", "add", "clip"))


def _swish(raw_steps, i, single_reader, op_step, reader_of, readers):
    """sigmoid(x) -> multiply(x, .) starting at step i, or None."""
    _, s_out, s_ins, _, sig = raw_steps[i]
    t = _float_tensor(sig)
    x_node = sig.args[0]
    if t is None or isinstance(x_node, Constant) or not _same_type(x_node, t):
        return None
    x_slot = s_ins[0]
    m = single_reader(s_out)
    if m is None or not op_step(m, "multiply") or readers[x_slot] != 2 or m not in reader_of[x_slot]:
        return None
    mul = raw_steps[m][4]
    if sorted(raw_steps[m][2]) != sorted((x_slot, s_out)) or not _same_type(mul, t):
        return None
    return (i, m), x_slot, Activation("swish", (raw_steps[m][2][0] == x_slot,), mul, ("sigmoid", "multiply"))


def _same_type(node, t: TensorType) -> bool:
    u = node.checked_type
    return isinstance(u, TensorType) and u.shape == t.shape and u.dtype == t.dtype


ACTIVATIONS = PlanTransform("activations", find_activations, enabled=lambda config: config.fuse, hides_values=True)
