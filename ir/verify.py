"""The verifier: well-formedness and types of a module, with errors that name the place."""

from __future__ import annotations

from .errors import TidlxError, VerifyError
from .expr import Call, Function, GlobalVar, Let
from .op import Op
from .traversal import free_vars, number_bindings, post_order
from .type_infer import describe_call, infer_module


def verify(mod) -> None:
    """Raises ``VerifyError`` (or ``TidlxTypeError``) naming function, binding and op."""
    for name, fn in mod.items():
        def where(node, name=name, fn=fn):
            n = number_bindings(fn).get(node)  # numbered only for an error message
            return f"in @{name}, " + (f"binding %{n}" if n is not None else "result")

        order = post_order(fn)
        unbound = free_vars(fn, order)
        if unbound:
            raise VerifyError(f"in @{name}: variable(s) {', '.join('%' + v.name_hint for v in unbound)} "
                              f"are used but never bound")
        defined = set()
        for node in order:
            binders = node.params if isinstance(node, Function) else (node.var,) if isinstance(node, Let) else ()
            for v in binders:
                if v in defined:
                    raise VerifyError(f"in @{name}: variable %{v.name_hint} is bound twice")
                defined.add(v)
            if isinstance(node, Call):
                if isinstance(node.op, Op):
                    op = node.op
                    if op.num_inputs >= 0 and len(node.args) != op.num_inputs:
                        raise VerifyError(f"{where(node)}: {describe_call(node)} takes {op.num_inputs} "
                                          f"inputs, got {len(node.args)}")
                    if op.attrs_type is not None and type(node.attrs) is not op.attrs_type:
                        raise VerifyError(f"{where(node)}: {describe_call(node)} has attributes of type "
                                          f"{type(node.attrs).__name__}, expected {op.attrs_type.__name__}")
                elif isinstance(node.op, GlobalVar) and node.op.name_hint not in mod:
                    raise VerifyError(f"{where(node)}: calls @{node.op.name_hint}, which is not defined")
    try:
        infer_module(mod)
    except VerifyError:
        raise
    except TidlxError as exc:
        raise type(exc)(str(exc)) from None
