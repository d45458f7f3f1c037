"""Type inference: every node gets its type once, bottom-up, from the op type relations."""

from __future__ import annotations

from typing import Optional

from .errors import TidlxError, TidlxTypeError, VerifyError
from .expr import Call, Constant, Expr, Function, GlobalVar, Let, Tuple, TupleGetItem, Var
from .op import Op
from .traversal import children
from .types import FuncType, TensorType, TupleType, Type, check_tensor_bytes, max_tensor_bytes


def describe_call(call: Call) -> str:
    """``nn.conv2d 'layer1.conv'`` — how errors name a call."""
    if isinstance(call.op, Op):
        what = call.op.name
    elif isinstance(call.op, GlobalVar):
        what = f"call of @{call.op.name_hint}"
    elif isinstance(call.op, Var):
        what = f"call of %{call.op.name_hint}"
    else:
        what = "call of a closure"
    return f"{what} '{call.layer}'" if call.layer else what


class _Where:
    """Names the place of a failing node: function and ``%N`` binding."""

    def __init__(self, func_name: Optional[str], func: Optional[Function]):
        self.func_name = func_name
        self.func = func

    def __call__(self, node: Expr) -> str:
        parts = []
        if self.func_name:
            parts.append(f"in @{self.func_name}")
        if self.func is not None:
            from .traversal import number_bindings

            n = number_bindings(self.func).get(node)
            parts.append(f"binding %{n}" if n is not None else "result")
        return ", ".join(parts)

    def prefix(self, node: Expr) -> str:
        place = self(node)
        return f"{place}: " if place else ""


def infer_expr_type(root: Expr, mod=None, func_name: Optional[str] = None,
                    func: Optional[Function] = None) -> Type:
    """Infers and caches the type of every node under ``root``; returns root's type."""
    where = _Where(func_name, func)
    where.budget = max_tensor_bytes()  # read once per inference
    stack = [(root, 0)]
    while stack:
        node, state = stack.pop()
        if node.has_type and state == 0:
            continue
        if isinstance(node, Let):
            # Value first, then the variable gets the value's type, then the body.
            if state == 0:
                stack += [(node, 2), (node.body, 0), (node, 1), (node.value, 0)]
                continue
            if state == 1:
                if node.var.type_annotation is None:
                    node.var._set_checked_type(node.value._checked_type)
                elif node.var.type_annotation != node.value._checked_type:
                    raise TidlxTypeError(
                        f"{where.prefix(node)}let %{node.var.name_hint} is annotated "
                        f"{node.var.type_annotation} but its value is {node.value._checked_type}")
                continue
            node._set_checked_type(node.body._checked_type)
            continue
        if state == 0:
            stack.append((node, 1))
            for child in reversed(children(node)):
                if not child.has_type:
                    stack.append((child, 0))
            continue
        node._set_checked_type(_node_type(node, mod, where))
    return root._checked_type


def _node_type(node: Expr, mod, where) -> Type:
    if isinstance(node, Var):
        raise VerifyError(f"{where.prefix(node)}variable %{node.name_hint} has no type annotation and is not "
                          f"bound by a let")
    if isinstance(node, GlobalVar):
        if mod is None or node.name_hint not in mod:
            raise VerifyError(f"{where.prefix(node)}@{node.name_hint} is not a function of the module")
        return mod[node.name_hint].checked_type
    if isinstance(node, Tuple):
        return TupleType(tuple(f._checked_type for f in node.fields))
    if isinstance(node, TupleGetItem):
        t = node.tuple_value._checked_type
        if not isinstance(t, TupleType):
            raise TidlxTypeError(f"{where.prefix(node)}projection .{node.index} of a non-tuple {t}")
        if not 0 <= node.index < len(t.fields):
            raise TidlxTypeError(f"{where.prefix(node)}projection .{node.index} out of range for a "
                                 f"{len(t.fields)}-tuple")
        return t.fields[node.index]
    if isinstance(node, Function):
        body_t = node.body._checked_type
        if node.ret_type is not None and node.ret_type != body_t:
            raise TidlxTypeError(f"{where.prefix(node)}function declares return type {node.ret_type} but its "
                                 f"body has type {body_t}")
        for p in node.params:
            if p.type_annotation is None:
                raise VerifyError(f"{where.prefix(node)}parameter %{p.name_hint} has no type annotation")
        return FuncType(tuple(p.type_annotation for p in node.params), body_t)
    if isinstance(node, Call):
        arg_types = [a._checked_type for a in node.args]
        if isinstance(node.op, Op):
            op = node.op
            if op.num_inputs >= 0 and len(node.args) != op.num_inputs:
                raise VerifyError(f"{where.prefix(node)}{describe_call(node)} takes {op.num_inputs} inputs, "
                                  f"got {len(node.args)}")
            try:
                out = op.type_rel(arg_types, node.attrs)
            except TidlxError as exc:
                raise TidlxTypeError(f"{where.prefix(node)}{describe_call(node)}: {exc}") from None
            except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError) as exc:
                raise TidlxTypeError(f"{where.prefix(node)}{describe_call(node)}: invalid inputs or "
                                     f"attributes ({exc})") from None
            if _too_large(out, where.budget):  # the message (and its %N numbering) only on failure
                check_tensor_bytes(out, f"{where.prefix(node)}{describe_call(node)}", where.budget)
            return out
        ft = node.op._checked_type
        if not isinstance(ft, FuncType):
            raise TidlxTypeError(f"{where.prefix(node)}{describe_call(node)}: callee is not a function ({ft})")
        if len(ft.arg_types) != len(arg_types):
            raise TidlxTypeError(f"{where.prefix(node)}{describe_call(node)} passes {len(arg_types)} arguments, "
                                 f"the function takes {len(ft.arg_types)}")
        for i, (want, got) in enumerate(zip(ft.arg_types, arg_types)):
            if want != got:
                raise TidlxTypeError(f"{where.prefix(node)}{describe_call(node)}: argument {i} is {got}, "
                                     f"the function expects {want}")
        return ft.ret_type
    if isinstance(node, Constant):
        return node._checked_type
    raise VerifyError(f"{where.prefix(node)}unknown node {type(node).__name__}")


def _too_large(t: Type, budget: int) -> bool:
    if isinstance(t, TensorType):
        n = 1
        for d in t.shape:
            n *= d
        return n > 0 and n * 8 > budget and t.nbytes > budget
    if isinstance(t, TupleType):
        return any(_too_large(f, budget) for f in t.fields)
    return False


def infer_module(mod) -> None:
    """Types every function of the module, callees before callers. A function already typed
    is not walked again (its callees' types were known when it was typed; functions are
    immutable), so re-typing a module after a pass costs only the functions the pass rebuilt."""
    from .traversal import global_calls

    done, visiting = set(), set()
    for name in list(mod.functions):
        if name not in done and mod[name].has_type:
            done.add(name)
            continue
        stack = [(name, False)]
        while stack:
            fname, expanded = stack.pop()
            if fname in done:
                continue
            if expanded:
                visiting.discard(fname)
                fn = mod[fname]
                infer_expr_type(fn, mod, fname, fn)
                done.add(fname)
                continue
            if fname in visiting:
                raise VerifyError(f"@{fname} calls itself (recursion is not supported)")
            if fname not in mod:
                raise VerifyError(f"@{fname} is called but not defined in the module")
            if mod[fname].has_type:
                done.add(fname)
                continue
            visiting.add(fname)
            stack.append((fname, True))
            for gv in global_calls(mod[fname].body):
                if gv.name_hint not in done:
                    if gv.name_hint in visiting:
                        raise VerifyError(f"@{fname} and @{gv.name_hint} call each other "
                                          f"(recursion is not supported)")
                    stack.append((gv.name_hint, False))
