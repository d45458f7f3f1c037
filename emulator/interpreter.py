"""The interpreter core: runs an IRModule on numpy arrays, op by op, with a kernel set and observers.

Like torch.fx's ``Interpreter.run``: each function is compiled once into a *plan* (a flat
schedule of steps over numbered value slots, in post order) and every run walks that
schedule with a fresh environment. A value is dropped from the environment right after its
last use, so a long chain keeps only a handful of arrays alive. Errors name the failing ``%N``
binding, op and layer.

Calls of other global functions (including ``Compiler="tidl"`` subgraphs, evaluated in
float here), closures (``fn`` values and calls of them), ``let``, tuples and projections
are all followed. No step recurses on graph depth; only calls between functions nest.

What runs each op comes from the kernel set (registry.KernelSet, as xDSL's interpreter takes
its implementations): the facets it looks kernels up in, plan transforms (the fast set fuses
element-wise chains into their producer, fast/_fusion.py) and a context around each run
(threads, BLAS). A plan is compiled per function, kernel set and set of enabled transforms.

Observers (xDSL's listeners) are callables called once per computed value with an
``Observation``: every op call, call of a function or closure, tuple and tuple projection, in
execution order, before the value may be freed. A run with observers uses its plans without
the transforms that hide values (``PlanTransform.hides_values``: fusion), so every value the
unfused graph computes is observed; observers must not modify the values.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Union

import numpy as np

from ..ir.errors import TidlxError
from ..ir.expr import Call, Constant, Expr, Function, GlobalVar, Let, Tuple, TupleGetItem, Var
from ..ir.module import IRModule
from ..ir.op import Op
from ..ir.traversal import children, free_vars, number_bindings, post_order
from ..ir.type_infer import describe_call
from ..ir.types import TensorType, TupleType, Type
from .config import EmulatorConfig, using_config
from .registry import KernelSet, kernel_set


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


class Observation(NamedTuple):
    """What an observer gets for each computed value: the node that computed it, its ``%N`` binding
    number in its global function (None for a function's result, printed inline), the name of
    that global function, the node's layer name (None when it has none) and the value."""

    node: Expr
    binding: Optional[int]
    function: str
    layer: Optional[str]
    value: Any


Observer = Callable[[Observation], None]

# Step kinds. A step is a tuple (kind, out_slot, in_slots, payload, freed_slots, n_counted_frees, node);
# before slot freeing is computed (when transforms see them) a raw step is (kind, out, ins, payload, node).
# An OP payload is (kernel function, attrs, out_type, expected (shape, dtype) or None, Kernel record).
# A CUSTOM step is made by a plan transform: its payload has ``run(plan, values, stats) -> value``
# (e.g. a fused chain, fast/_fusion.py) and ``describe() -> str``.
OP, CALL_GLOBAL, CALL_CLOSURE, TUPLE, GET_ITEM, MAKE_CLOSURE, GLOBAL_REF, CUSTOM = range(8)
_OP, _CALL_GLOBAL, _CALL_CLOSURE, _TUPLE, _GET_ITEM, _MAKE_CLOSURE, _GLOBAL_REF, _CUSTOM = range(8)


class _Plan:
    """The schedule of one function: steps over value slots, each slot freed after its last use."""

    __slots__ = ("func", "owner", "owner_name", "where", "variant", "initial", "param_slots", "free_var_slots",
                 "free_vars", "steps", "result_slot", "result_computed", "bindings", "__weakref__")

    def __init__(self, func: Function, owner: Function, owner_name: str, where: str, variant: "_Variant"):
        self.func = func
        self.owner = owner          # the global function this plan belongs to (for %N numbers)
        self.owner_name = owner_name
        self.where = where
        self.variant = variant
        self.bindings = None        # per step: its %N number (computed on the first observed run)


class _Variant(NamedTuple):
    """What a plan is compiled for: a kernel set and the plan transforms it applies."""

    kernels: KernelSet
    transforms: tuple


def _variant(kernels: KernelSet, config: EmulatorConfig, observed: bool) -> _Variant:
    return _Variant(kernels, tuple(t for t in kernels.transforms
                                   if t.enabled(config) and not (observed and t.hides_values)))


def _compile(func: Function, owner: Function, owner_name: str, where: str, variant: _Variant) -> _Plan:
    plan = _Plan(func, owner, owner_name, where, variant)
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
            inner = _compile(node, owner, owner_name, f"{where} (closure)", variant)
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
                record = variant.kernels.lookup(node.op)
                if record is None:
                    raise EmulatorError(f"{where}: {_binding_name(plan, node)} ({describe_call(node)}): the "
                                        f"{variant.kernels.name} kernel set has no kernel for op '{node.op.name}'")
                out_type = node.checked_type
                payload = (record.fn, node.attrs, out_type, expected_of(out_type), record)
                raw_steps.append((_OP, out, args, payload, node))
            elif isinstance(node.op, GlobalVar):
                raw_steps.append((_CALL_GLOBAL, out, args, node.op.name_hint, node))
            else:
                raw_steps.append((_CALL_CLOSURE, out, (slot(node.op),) + args, None, node))
        else:
            raise EmulatorError(f"{where}: cannot evaluate a {type(node).__name__} node")

    plan.result_slot = slot(func.body)
    for transform in variant.transforms:
        raw_steps = transform.apply(raw_steps, plan.result_slot)
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


def expected_of(t: Type):
    """(shape, numpy dtype) a kernel must return for a tensor type, or None."""
    if isinstance(t, TensorType) and t.dtype != "bfloat16":
        return t.shape, np.dtype(t.dtype)
    return None


class _ModulePlans:
    """Plans of a module's functions, rebuilt when a name is bound to another Function."""

    def __init__(self):
        self.plans: Dict[tuple, _Plan] = {}   # (name, variant) -> plan


_MODULE_PLANS: "weakref.WeakKeyDictionary[IRModule, _ModulePlans]" = weakref.WeakKeyDictionary()
# Functions cannot be weakly referenced, so plans are found by the id of their function; an entry
# lives as long as some module's cache holds the plan, and the plan holds the function (so the
# id cannot be reused meanwhile). Modules sharing functions (``mod.copy()``) share plans.
_PLAN_OF_FUNCTION: "weakref.WeakValueDictionary[tuple, _Plan]" = weakref.WeakValueDictionary()


def _global_plan(mod: IRModule, name: str, variant: _Variant) -> _Plan:
    cache = _MODULE_PLANS.get(mod)
    if cache is None:
        cache = _MODULE_PLANS[mod] = _ModulePlans()
    func = mod[name] if name in mod else None
    if func is None:
        known = ", ".join("@" + n for n in mod)
        raise EmulatorError(f"the module has no function @{name} (it has {known or 'none'})")
    plan = cache.plans.get((name, variant))
    if plan is None or plan.func is not func:
        plan = _PLAN_OF_FUNCTION.get((id(func), variant))
        if plan is None or plan.func is not func or plan.owner_name != name:
            if not _is_typed(func):
                mod.infer_types()
            plan = _compile(func, func, name, f"@{name}", variant)
            if plan.free_vars:
                raise EmulatorError(f"@{name} uses variables that nothing binds: "
                                    + ", ".join("%" + v.name_hint for v in plan.free_vars))
            _PLAN_OF_FUNCTION[(id(func), variant)] = plan
        cache.plans[(name, variant)] = plan
    return plan


def plan_of(mod: IRModule, name: str = "main", kernels: Union[str, KernelSet] = "fast",
            config: Optional[EmulatorConfig] = None, observed: bool = False) -> _Plan:
    """The compiled plan a run would use for ``@name`` (for tests and debugging)."""
    return _global_plan(mod, name, _variant(kernel_set(kernels), config or EmulatorConfig.from_env(), observed))


def _is_typed(func: Function) -> bool:
    return func.has_type and func.body.has_type


class _Context:
    __slots__ = ("mod", "stats", "variant", "observers")

    def __init__(self, mod: IRModule, stats: Optional[RunStats], variant: _Variant, observers: tuple):
        self.mod = mod
        self.stats = stats
        self.variant = variant
        self.observers = observers


def _binding_name(plan: _Plan, node: Expr) -> str:
    try:
        n = number_bindings(plan.owner).get(node)
    except Exception:  # naming must never hide the real error
        n = None
    return f"binding %{n}" if n is not None else "the result"


def kernel_failure(plan: _Plan, node: Call, exc: BaseException) -> EmulatorError:
    """The EmulatorError for a kernel of ``node`` failing with ``exc`` (names the binding)."""
    reason = str(exc) if isinstance(exc, TidlxError) else f"{type(exc).__name__}: {exc}"
    return EmulatorError(f"emulator: {plan.where}, {_binding_name(plan, node)} ({describe_call(node)}) "
                         f"failed: {reason}")


def check_result(plan: _Plan, node: Call, res, expected):
    """Kernels may hand back numpy scalars; anything else off the op's type is a kernel bug."""
    if expected is None:
        return res
    shape, dtype = expected
    if type(res) is not np.ndarray:
        if isinstance(res, tuple):
            raise kernel_failure(plan, node, TidlxError(
                f"kernel returned a tuple but the op's type is {node.checked_type}"))
        res = np.asarray(res)
    if res.shape != shape or res.dtype != dtype:
        raise kernel_failure(plan, node, TidlxError(
            f"kernel returned {res.dtype}{list(res.shape)} but the op's type is {node.checked_type}"))
    return res


def _execute(plan: _Plan, ctx: _Context, args: Sequence[Any], captured: Sequence[Any]):
    env = list(plan.initial)
    for s, v in zip(plan.param_slots, args):
        env[s] = v
    for s, v in zip(plan.free_var_slots, captured):
        env[s] = v
    stats = ctx.stats
    observers = ctx.observers
    bindings = _step_bindings(plan) if observers else None
    for index, (kind, out, ins, payload, frees, n_counted, node) in enumerate(plan.steps):
        if kind == _OP:
            kernel, attrs, out_type, expected, _ = payload
            try:
                res = kernel([env[i] for i in ins], attrs, out_type)
            except Exception as exc:  # a kernel failing on its values: name the binding
                if isinstance(exc, EmulatorError):
                    raise
                raise kernel_failure(plan, node, exc) from exc
            if type(res) is not np.ndarray or expected is None or res.dtype != expected[1] \
                    or res.shape != expected[0]:
                res = check_result(plan, node, res, expected)
            env[out] = res
            if stats is not None:
                stats.kernel_calls[node.op.name] = stats.kernel_calls.get(node.op.name, 0) + 1
        elif kind == _CUSTOM:
            env[out] = payload.run(plan, [env[i] for i in ins], stats)
        elif kind == _CALL_GLOBAL:
            callee = _global_plan(ctx.mod, payload, ctx.variant)
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
            env[out] = Closure(_global_plan(ctx.mod, payload, ctx.variant), ())
        if observers and kind != _MAKE_CLOSURE and kind != _GLOBAL_REF:  # every value but function values
            observation = Observation(node, bindings[index], plan.owner_name, getattr(node, "layer", None), env[out])
            for observer in observers:
                observer(observation)
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


def _step_bindings(plan: _Plan) -> tuple:
    """Per step of the plan: the %N number of its node in the plan's global function, or None."""
    if plan.bindings is None:
        try:
            numbers = number_bindings(plan.owner)
        except Exception:  # numbering must never stop a run
            numbers = {}
        plan.bindings = tuple(numbers.get(step[6]) for step in plan.steps)
    return plan.bindings


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
        kernels: Union[str, KernelSet] = "fast", observers: Sequence[Observer] = (),
        config: Optional[EmulatorConfig] = None, stats: Optional[RunStats] = None) -> List[np.ndarray]:
    """Runs ``@entry`` of ``mod`` in float on ``inputs`` (name -> array); returns the outputs flattened.

    Inputs must match the entry's parameter types exactly (shape and dtype).

    * ``kernels``: ``"fast"`` (the default: numba, Winograd, fusion, threads), ``"reference"`` (the
      plain-numpy definition of the float semantics) or a ``KernelSet``.
    * ``observers``: callables called with an ``Observation`` (node, %N binding, function, layer,
      value) once per computed value; a run with observers runs its plans unfused, so values that
      fusion would compute in place inside a chain are observed too.
    * ``config``: an ``EmulatorConfig``; None reads the ``TIDLX_EMULATOR_*`` variables now.
    * ``stats``: a ``RunStats`` to collect debug counters (steps, peak number of live values).
    """
    if isinstance(mod, Function):
        mod = IRModule({entry: mod})
    if not isinstance(mod, IRModule):
        raise EmulatorError(f"run() takes an IRModule, got {type(mod).__name__}")
    ks = kernel_set(kernels)
    config = config if config is not None else EmulatorConfig.from_env()
    observers = tuple(observers)
    variant = _variant(ks, config, bool(observers))
    plan = _global_plan(mod, entry, variant)
    args = _bind_inputs(plan.func, inputs, f"@{entry}")
    ctx = _Context(mod, stats, variant, observers)
    # inf/nan follow IEEE as in onnxruntime, without warnings
    with np.errstate(all="ignore"), using_config(config), ks.run_context(config):
        result = _execute(plan, ctx, args, ())
    outputs: List[np.ndarray] = []
    _flatten(result, outputs, f"@{entry}")
    return outputs


def compiled_plan_count(mod: IRModule) -> int:
    """How many function plans are cached for ``mod`` (for tests of the cache)."""
    cache = _MODULE_PLANS.get(mod)
    return 0 if cache is None else len(cache.plans)
