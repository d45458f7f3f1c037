"""Float reference interpreter: runs an IRModule on numpy arrays, op by op.

Like torch.fx's ``Interpreter.run``: each function is compiled once into a *plan* (a flat
schedule of steps over numbered value slots, in post order) and every run walks that
schedule with a fresh environment. A value is dropped from the environment right after its
last use, so a long chain keeps only a handful of arrays alive.

Calls of other global functions (including ``Compiler="tidl"`` subgraphs, evaluated in
float here), closures (``fn`` values and calls of them), ``let``, tuples and projections
are all followed. No step recurses on graph depth; only calls between functions nest.

Chains of element-wise ops after a producer (conv -> batch_norm -> add -> relu) are fused into
one step that runs them in place on the producer's output, bit-identically (_fusion.py).

Kernels live in kernels/op_<family>.py (see registry.py). During a run the process keeps freed
memory for reuse (_memory.py) and heavy kernels run in parallel blocks (kernels/_parallel.py).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..ir.errors import TidlxError
from ..ir.expr import Call, Constant, Expr, Function, GlobalVar, Let, Tuple, TupleGetItem, Var
from ..ir.module import IRModule
from ..ir.op import Op
from ..ir.traversal import children, free_vars, number_bindings, post_order
from ..ir.type_infer import describe_call
from ..ir.types import TensorType, TupleType, Type
from ._fusion import fresh_head, fuse_chains, stage_args
from ._memory import keep_freed_memory
from .kernels._parallel import run_context
from .kernels._tail import run_tail
from .registry import get_kernel


class EmulatorError(TidlxError):
    """Running a model failed: bad inputs, or an op failed on the values it got."""


class EmulatorInputError(EmulatorError):
    """The inputs given to ``run`` do not match the entry function's parameters."""


@dataclass
class RunStats:
    """Debug counters of one run; pass an instance as ``run(..., stats=RunStats())``.

    ``live_values`` counts values computed by steps and still held by some environment;
    ``peak_live_values`` is its maximum over the run (bounded on a chain thanks to freeing).
    """

    steps: int = 0
    live_values: int = 0
    peak_live_values: int = 0
    kernel_calls: Dict[str, int] = field(default_factory=dict)


class Closure:
    """A function value: a compiled plan plus the values of its free variables."""

    __slots__ = ("plan", "captured")

    def __init__(self, plan: "_Plan", captured: tuple):
        self.plan = plan
        self.captured = captured

    def __repr__(self) -> str:
        return f"<closure of {self.plan.where}>"


# Step kinds. A step is a tuple (kind, out_slot, in_slots, payload, freed_slots, n_counted_frees, node).
# _FUSED is an op followed by a chain of element-wise ops run in place (_fusion.py).
_OP, _CALL_GLOBAL, _CALL_CLOSURE, _TUPLE, _GET_ITEM, _MAKE_CLOSURE, _GLOBAL_REF, _FUSED = range(8)


class _Plan:
    """The schedule of one function: steps over value slots, each slot freed after its last use."""

    __slots__ = ("func", "owner", "owner_name", "where", "initial", "param_slots", "free_var_slots",
                 "free_vars", "steps", "result_slot", "result_computed", "__weakref__")

    def __init__(self, func: Function, owner: Function, owner_name: str, where: str):
        self.func = func
        self.owner = owner          # the global function this plan belongs to (for %N numbers)
        self.owner_name = owner_name
        self.where = where


def _compile(func: Function, owner: Function, owner_name: str, where: str) -> _Plan:
    plan = _Plan(func, owner, owner_name, where)
    slot_of: Dict[int, int] = {}
    initial: List[Any] = []

    def new_slot(value=None) -> int:
        initial.append(value)
        return len(initial) - 1

    plan.param_slots = tuple(slot_of.setdefault(id(p), new_slot()) for p in func.params)
    plan.free_vars = tuple(v for v in free_vars(func) if id(v) not in slot_of)
    plan.free_var_slots = tuple(slot_of.setdefault(id(v), new_slot()) for v in plan.free_vars)

    order = post_order(func.body, enter_functions=False)
    let_value_of: Dict[int, Expr] = {}
    for node in order:
        if isinstance(node, Let):
            let_value_of[id(node.var)] = node.value

    # Which nodes are used as values (a GlobalVar only called needs no value of its own).
    value_used = set()
    for node in order:
        if isinstance(node, Call):
            for a in node.args:
                value_used.add(id(a))
            if isinstance(node.op, Expr) and not isinstance(node.op, GlobalVar):
                value_used.add(id(node.op))
        elif isinstance(node, Function):
            pass  # its free vars are resolved below, not as children
        else:
            for c in children(node):
                value_used.add(id(c))
    value_used.add(id(func.body))

    def slot(node: Expr) -> int:
        s = slot_of.get(id(node))
        if s is None:
            raise EmulatorError(f"{where}: internal: a value is used before it is computed")
        return s

    raw_steps = []   # (kind, out, ins, payload, node)
    for node in order:
        if isinstance(node, Var):
            if id(node) in slot_of:
                continue
            value = let_value_of.get(id(node))
            if value is None:
                raise EmulatorError(f"{where}: variable %{node.name_hint} is not bound")
            slot_of[id(node)] = slot(value)
        elif isinstance(node, Constant):
            slot_of[id(node)] = new_slot(node.data)
        elif isinstance(node, Let):
            slot_of[id(node)] = slot(node.body)
        elif isinstance(node, GlobalVar):
            if id(node) in value_used:
                out = slot_of[id(node)] = new_slot()
                raw_steps.append((_GLOBAL_REF, out, (), node.name_hint, node))
        elif isinstance(node, Tuple):
            out = slot_of[id(node)] = new_slot()
            raw_steps.append((_TUPLE, out, tuple(slot(f) for f in node.fields), None, node))
        elif isinstance(node, TupleGetItem):
            out = slot_of[id(node)] = new_slot()
            raw_steps.append((_GET_ITEM, out, (slot(node.tuple_value),), node.index, node))
        elif isinstance(node, Function):
            inner = _compile(node, owner, owner_name, f"{where} (closure)")
            ins = []
            for v in inner.free_vars:
                if id(v) not in slot_of:
                    value = let_value_of.get(id(v))
                    if value is None:
                        raise EmulatorError(f"{where}: closure uses %{v.name_hint}, which is not bound")
                    slot_of[id(v)] = slot(value)
                ins.append(slot_of[id(v)])
            out = slot_of[id(node)] = new_slot()
            raw_steps.append((_MAKE_CLOSURE, out, tuple(ins), inner, node))
        elif isinstance(node, Call):
            out = slot_of[id(node)] = new_slot()
            args = tuple(slot(a) for a in node.args)
            if isinstance(node.op, Op):
                kernel = get_kernel(node.op.name)
                out_type = node.checked_type
                payload = (kernel, node.attrs, out_type, _expected(out_type))
                raw_steps.append((_OP, out, args, payload, node))
            elif isinstance(node.op, GlobalVar):
                raw_steps.append((_CALL_GLOBAL, out, args, node.op.name_hint, node))
            else:
                raw_steps.append((_CALL_CLOSURE, out, (slot(node.op),) + args, None, node))
        else:
            raise EmulatorError(f"{where}: cannot evaluate a {type(node).__name__} node")

    plan.result_slot = slot(func.body)
    raw_steps = fuse_chains(raw_steps, plan.result_slot, _OP, _GET_ITEM, _FUSED, _expected)
    plan.initial = initial
    plan.result_computed = any(s[1] == plan.result_slot for s in raw_steps)

    # Free each slot after its last reader; never the result, never constants.
    computed = {s[1] for s in raw_steps}
    freeable = computed | set(plan.param_slots) | set(plan.free_var_slots)
    last_use: Dict[int, int] = {}
    for i, (_, _, ins, _, _) in enumerate(raw_steps):
        for s in ins:
            last_use[s] = i
    frees_at: List[List[int]] = [[] for _ in raw_steps]
    for s, i in last_use.items():
        if s in freeable and s != plan.result_slot:
            frees_at[i].append(s)
    for i, (_, out, _, _, _) in enumerate(raw_steps):
        if out not in last_use and out != plan.result_slot:
            frees_at[i].append(out)  # computed but never read (e.g. an unused tuple field)
    plan.steps = tuple(
        (kind, out, ins, payload, tuple(frees_at[i]), sum(1 for s in frees_at[i] if s in computed), node)
        for i, (kind, out, ins, payload, node) in enumerate(raw_steps))
    return plan


def _expected(t: Type):
    """(shape, numpy dtype) a kernel must return for a tensor type, or None."""
    if isinstance(t, TensorType) and t.dtype != "bfloat16":
        return t.shape, np.dtype(t.dtype)
    return None


class _ModulePlans:
    """Plans of a module's functions, rebuilt when a name is bound to another Function."""

    def __init__(self):
        self.plans: Dict[str, _Plan] = {}


_MODULE_PLANS: "weakref.WeakKeyDictionary[IRModule, _ModulePlans]" = weakref.WeakKeyDictionary()
# Functions cannot be weakly referenced, so plans are found by the id of their function; an entry
# lives as long as some module's cache holds the plan, and the plan holds the function (so the
# id cannot be reused meanwhile). Modules sharing functions (``mod.copy()``) share plans.
_PLAN_OF_FUNCTION: "weakref.WeakValueDictionary[int, _Plan]" = weakref.WeakValueDictionary()


def _global_plan(mod: IRModule, name: str) -> _Plan:
    cache = _MODULE_PLANS.get(mod)
    if cache is None:
        cache = _MODULE_PLANS[mod] = _ModulePlans()
    func = mod[name] if name in mod else None
    if func is None:
        known = ", ".join("@" + n for n in mod)
        raise EmulatorError(f"the module has no function @{name} (it has {known or 'none'})")
    plan = cache.plans.get(name)
    if plan is None or plan.func is not func:
        plan = _PLAN_OF_FUNCTION.get(id(func))
        if plan is None or plan.func is not func or plan.owner_name != name:
            if not _is_typed(func):
                mod.infer_types()
            plan = _compile(func, func, name, f"@{name}")
            if plan.free_vars:
                raise EmulatorError(f"@{name} uses variables that nothing binds: "
                                    + ", ".join("%" + v.name_hint for v in plan.free_vars))
            _PLAN_OF_FUNCTION[id(func)] = plan
        cache.plans[name] = plan
    return plan


def _is_typed(func: Function) -> bool:
    return func.has_type and func.body.has_type


class _Context:
    __slots__ = ("mod", "stats")

    def __init__(self, mod: IRModule, stats: Optional[RunStats]):
        self.mod = mod
        self.stats = stats


def _binding_name(plan: _Plan, node: Expr) -> str:
    try:
        n = number_bindings(plan.owner).get(node)
    except Exception:  # naming must never hide the real error
        n = None
    return f"binding %{n}" if n is not None else "the result"


def _kernel_failure(plan: _Plan, node: Call, exc: BaseException) -> EmulatorError:
    reason = str(exc) if isinstance(exc, TidlxError) else f"{type(exc).__name__}: {exc}"
    return EmulatorError(f"emulator: {plan.where}, {_binding_name(plan, node)} ({describe_call(node)}) "
                         f"failed: {reason}")


def _check_result(plan: _Plan, node: Call, res, expected):
    """Kernels may hand back numpy scalars; anything else off the op's type is a kernel bug."""
    if expected is None:
        return res
    shape, dtype = expected
    if type(res) is not np.ndarray:
        if isinstance(res, tuple):
            raise _kernel_failure(plan, node, TidlxError(
                f"kernel returned a tuple but the op's type is {node.checked_type}"))
        res = np.asarray(res)
    if res.shape != shape or res.dtype != dtype:
        raise _kernel_failure(plan, node, TidlxError(
            f"kernel returned {res.dtype}{list(res.shape)} but the op's type is {node.checked_type}"))
    return res


def _execute(plan: _Plan, ctx: _Context, args: Sequence[Any], captured: Sequence[Any]):
    env = list(plan.initial)
    for s, v in zip(plan.param_slots, args):
        env[s] = v
    for s, v in zip(plan.free_var_slots, captured):
        env[s] = v
    stats = ctx.stats
    for kind, out, ins, payload, frees, n_counted, node in plan.steps:
        if kind == _OP:
            kernel, attrs, out_type, expected = payload
            try:
                res = kernel([env[i] for i in ins], attrs, out_type)
            except Exception as exc:  # a kernel failing on its values: name the binding
                if isinstance(exc, EmulatorError):
                    raise
                raise _kernel_failure(plan, node, exc) from exc
            if type(res) is not np.ndarray or expected is None or res.dtype != expected[1] \
                    or res.shape != expected[0]:
                res = _check_result(plan, node, res, expected)
            env[out] = res
            if stats is not None:
                stats.kernel_calls[node.op.name] = stats.kernel_calls.get(node.op.name, 0) + 1
        elif kind == _FUSED:
            env[out] = _run_fused(plan, payload, [env[i] for i in ins], stats)
        elif kind == _CALL_GLOBAL:
            callee = _global_plan(ctx.mod, payload)
            try:
                env[out] = _execute(callee, ctx, [env[i] for i in ins], ())
            except EmulatorError as exc:
                raise EmulatorError(f"{exc}\n  called from {plan.where}, {_binding_name(plan, node)}") \
                    from exc.__cause__
        elif kind == _CALL_CLOSURE:
            fn = env[ins[0]]
            if not isinstance(fn, Closure):
                raise EmulatorError(f"emulator: {plan.where}, {_binding_name(plan, node)}: the callee is "
                                    f"not a function value")
            try:
                env[out] = _execute(fn.plan, ctx, [env[i] for i in ins[1:]], fn.captured)
            except EmulatorError as exc:
                raise EmulatorError(f"{exc}\n  called from {plan.where}, {_binding_name(plan, node)}") \
                    from exc.__cause__
        elif kind == _TUPLE:
            env[out] = tuple(env[i] for i in ins)
        elif kind == _GET_ITEM:
            env[out] = env[ins[0]][payload]
        elif kind == _MAKE_CLOSURE:
            env[out] = Closure(payload, tuple(env[i] for i in ins))
        else:  # _GLOBAL_REF
            env[out] = Closure(_global_plan(ctx.mod, payload), ())
        for i in frees:
            env[i] = None
        if stats is not None:
            stats.steps += 1
            stats.live_values += 1 - n_counted
            if stats.live_values > stats.peak_live_values:
                stats.peak_live_values = stats.live_values
    if stats is not None and plan.result_computed:
        stats.live_values -= 1  # the caller's slot holds (and counts) the result from here on
    return env[plan.result_slot]


def _run_fused(plan: _Plan, fused, values: list, stats: Optional[RunStats]):
    """A fused step: the head op, then each stage's epilogue on its result (in place when the
    result is an array no one else holds), or the stage's kernel where it has no epilogue form."""
    kernel, attrs, out_type, expected = fused.head
    node = fused.head_node
    try:
        res = kernel(values[:fused.n_head_args], attrs, out_type)
    except Exception as exc:
        if isinstance(exc, EmulatorError):
            raise
        raise _kernel_failure(plan, node, exc) from exc
    res = _check_result(plan, node, res, expected)
    owned = fresh_head(node.op.name)
    stage_others, at = [], fused.n_head_args
    for stage in fused.stages:
        stage_others.append(values[at:at + stage.n_others])
        at += stage.n_others
    if fused.tail and owned:
        try:
            done = run_tail(res, fused.stages, stage_others)
        except Exception as exc:
            raise _kernel_failure(plan, fused.stages[0].node, exc) from exc
        if done is not None:
            res = _check_result(plan, fused.stages[-1].node, done, fused.stages[-1].expected)
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
            raise _kernel_failure(plan, node, exc) from exc
        res = _check_result(plan, node, y, stage.expected)
        owned = True  # an epilogue's or a kernel's result is a new array (or the owned one)
    if stats is not None:
        _count_fused(stats, fused)
    return res


def _count_fused(stats: RunStats, fused) -> None:
    for name in [fused.head_node.op.name] + [s.op_name for s in fused.stages]:
        stats.kernel_calls[name] = stats.kernel_calls.get(name, 0) + 1
    stats.steps += sum(2 if s.item0 else 1 for s in fused.stages)  # the fused-away steps


# --- inputs and outputs ------------------------------------------------------------------------

def _check_value(name: str, value, t: Type, where: str):
    if isinstance(t, TupleType):
        if not isinstance(value, (tuple, list)) or len(value) != len(t.fields):
            raise EmulatorInputError(f"input '{name}' of {where} must be a tuple of {len(t.fields)} values "
                                     f"({t})")
        return tuple(_check_value(f"{name}[{i}]", v, ft, where) for i, (v, ft) in enumerate(zip(value, t.fields)))
    if not isinstance(t, TensorType):
        raise EmulatorInputError(f"input '{name}' of {where} has type {t}, which the emulator cannot take")
    if not isinstance(value, np.ndarray):
        try:
            value = np.asarray(value, dtype=t.dtype)
        except (TypeError, ValueError) as exc:
            raise EmulatorInputError(f"input '{name}' of {where} is not convertible to {t.dtype}: {exc}") \
                from None
    if value.dtype != np.dtype(t.dtype):
        raise EmulatorInputError(f"input '{name}' of {where} has dtype {value.dtype}, expected {t.dtype} "
                                 f"(convert it with .astype('{t.dtype}'))")
    if value.shape != t.shape:
        raise EmulatorInputError(f"input '{name}' of {where} has shape {tuple(value.shape)}, expected "
                                 f"{t.shape}")
    return value


def _bind_inputs(func: Function, inputs: Mapping[str, Any], where: str) -> list:
    if not isinstance(inputs, Mapping):
        raise EmulatorInputError(f"inputs must be a dict of name -> array, got {type(inputs).__name__}")
    names = [p.name_hint for p in func.params]
    missing = [n for n in names if n not in inputs]
    extra = [n for n in inputs if n not in names]
    if missing or extra:
        parts = []
        if missing:
            parts.append("missing input" + ("s " if len(missing) > 1 else " ") + ", ".join(f"'{n}'" for n in missing))
        if extra:
            parts.append("unknown input" + ("s " if len(extra) > 1 else " ") + ", ".join(f"'{n}'" for n in extra))
        raise EmulatorInputError(f"{where}: {'; '.join(parts)} (its parameters are "
                                 f"{', '.join(repr(n) for n in names) or 'none'})")
    return [_check_value(p.name_hint, inputs[p.name_hint], p.checked_type, where) for p in func.params]


def _flatten(value, out: list, where: str) -> None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, tuple):
            stack.extend(reversed(v))
        elif isinstance(v, Closure):
            raise EmulatorError(f"{where} returns a function value, which has no array form")
        else:
            if not v.flags.writeable:
                v = v.copy()  # a view of a constant: hand back an array the caller may modify
            out.append(v)


def run(mod: IRModule, inputs: Mapping[str, Any], entry: str = "main", *,
        stats: Optional[RunStats] = None) -> List[np.ndarray]:
    """Runs ``@entry`` of ``mod`` in float on ``inputs`` (name -> array); returns the outputs flattened.

    Inputs must match the entry's parameter types exactly (shape and dtype). Pass a
    ``RunStats`` to collect debug counters (steps, peak number of live values).
    """
    if isinstance(mod, Function):
        mod = IRModule({entry: mod})
    if not isinstance(mod, IRModule):
        raise EmulatorError(f"run() takes an IRModule, got {type(mod).__name__}")
    keep_freed_memory()
    plan = _global_plan(mod, entry)
    args = _bind_inputs(plan.func, inputs, f"@{entry}")
    ctx = _Context(mod, stats)
    # inf/nan follow IEEE as in onnxruntime, without warnings; BLAS computes in our threads
    with np.errstate(all="ignore"), run_context():
        result = _execute(plan, ctx, args, ())
    outputs: List[np.ndarray] = []
    _flatten(result, outputs, f"@{entry}")
    return outputs


def compiled_plan_count(mod: IRModule) -> int:
    """How many function plans are cached for ``mod`` (for tests of the cache)."""
    cache = _MODULE_PLANS.get(mod)
    return 0 if cache is None else len(cache.plans)
