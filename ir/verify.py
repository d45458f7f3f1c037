"""The verifier: well-formedness and types of a module, with errors that name the place."""

from __future__ import annotations

from .errors import TidlxError, VerifyError
from .expr import Call, Function, GlobalVar, Let, Var
from .op import Op
from .traversal import number_bindings, post_order
from .type_infer import describe_call, infer_module


def verify(mod) -> None:
    """Raises ``VerifyError`` (or ``TidlxTypeError``) naming function, binding and op."""
    for name, fn in mod.items():
        def where(node, name=name, fn=fn):
            n = number_bindings(fn).get(node)  # numbered only for an error message
            return f"in @{name}, " + (f"binding %{n}" if n is not None else "result")

        # One loop over the walk: the variables used and bound, binders bound twice, malformed
        # calls. An unbound variable is reported first, then the first other problem in order.
        bound, used, problem = set(), {}, None
        defined = set()
        for node in post_order(fn):
            kind = type(node)
            if kind is Call:
                if problem is None:
                    problem = _call_problem(node, mod, where)
                continue
            if kind is Var or isinstance(node, Var):
                used.setdefault(node, None)
                continue
            binders = node.params if isinstance(node, Function) else (node.var,) if isinstance(node, Let) else ()
            bound.update(binders)
            for v in binders:
                if v in defined and problem is None:
                    problem = f"in @{name}: variable %{v.name_hint} is bound twice"
                defined.add(v)
            if problem is None and isinstance(node, Call):
                problem = _call_problem(node, mod, where)
        unbound = [v for v in used if v not in bound]
        if unbound:
            raise VerifyError(f"in @{name}: variable(s) {', '.join('%' + v.name_hint for v in unbound)} "
                              f"are used but never bound")
        if problem is not None:
            raise VerifyError(problem)
    try:
        infer_module(mod)
    except VerifyError:
        raise
    except TidlxError as exc:
        raise type(exc)(str(exc)) from None


def _call_problem(node: Call, mod, where):
    """What is wrong with a call (its arity, its attributes, the global it calls), or None."""
    if isinstance(node.op, Op):
        op = node.op
        if op.num_inputs >= 0 and len(node.args) != op.num_inputs:
            return f"{where(node)}: {describe_call(node)} takes {op.num_inputs} inputs, got {len(node.args)}"
        if op.attrs_type is not None and type(node.attrs) is not op.attrs_type:
            return (f"{where(node)}: {describe_call(node)} has attributes of type "
                    f"{type(node.attrs).__name__}, expected {op.attrs_type.__name__}")
    elif isinstance(node.op, GlobalVar) and node.op.name_hint not in mod:
        return f"{where(node)}: calls @{node.op.name_hint}, which is not defined"
    return None
