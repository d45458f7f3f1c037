"""Iterative graph walks (no recursion: models have thousands of nodes in a chain)."""

from __future__ import annotations

from typing import Callable, Dict, Iterator, List, Optional

from .expr import Call, Constant, Expr, Function, GlobalVar, Let, Tuple, TupleGetItem, Var
from .op import Op


def children(expr: Expr) -> tuple:
    """Sub-expressions in evaluation order. A nested Function's body is its child."""
    if isinstance(expr, Call):
        return ((expr.op,) if isinstance(expr.op, Expr) else ()) + expr.args
    if isinstance(expr, Tuple):
        return expr.fields
    if isinstance(expr, TupleGetItem):
        return (expr.tuple_value,)
    if isinstance(expr, Function):
        return (expr.body,)
    if isinstance(expr, Let):
        return (expr.value, expr.body)
    return ()


def post_order(root: Expr, enter_functions: bool = True,
               enter: Optional[Callable[[Expr], bool]] = None) -> List[Expr]:
    """Every node reachable from ``root`` once, each after all of its children.

    With ``enter_functions=False`` nested Functions are listed but not entered; more
    generally a node (other than ``root``) for which ``enter(node)`` is False is listed but
    its children are not visited.
    """
    order: List[Expr] = []
    seen = set()
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        if node is not root and ((isinstance(node, Function) and not enter_functions)
                                 or (enter is not None and not enter(node))):
            continue
        for child in reversed(children(node)):
            if id(child) not in seen:
                stack.append((child, False))
    return order


def users(root: Expr) -> Dict[Expr, List[Expr]]:
    """For every node reachable from ``root``: the nodes that use it (in post order)."""
    out: Dict[Expr, List[Expr]] = {}
    for node in post_order(root):
        out.setdefault(node, [])
        for child in children(node):
            out.setdefault(child, []).append(node)
    return out


def free_vars(expr: Expr) -> List[Var]:
    """Vars used but not bound inside ``expr``, in first-use order."""
    bound = set()
    for node in post_order(expr):
        if isinstance(node, Function):
            bound.update(node.params)
        elif isinstance(node, Let):
            bound.add(node.var)
    out, seen = [], set()
    for node in post_order(expr):
        if isinstance(node, Var) and node not in bound and node not in seen:
            seen.add(node)
            out.append(node)
    return out


def is_binding(expr: Expr) -> bool:
    """Nodes the printer names ``%N = ...``: everything but atoms and ops."""
    return isinstance(expr, (Call, Tuple, TupleGetItem, Function))


def number_bindings(func: Function) -> Dict[Expr, int]:
    """``%N`` numbers for the bindings of a function, in printing (post) order.

    The function body's result itself is printed inline and so gets no number, nor does a
    Let's value (it binds the let's own variable), nor a nested function's unshared result.
    """
    numbers: Dict[Expr, int] = {}
    order = post_order(func.body)
    inline = {id(func.body)}
    use_count: Dict[int, int] = {}
    for node in order:
        for child in children(node):
            use_count[id(child)] = use_count.get(id(child), 0) + 1
        if isinstance(node, Let):
            inline.add(id(node.value))
    for node in order:
        # A nested function's result is printed inline as its block's last line, unless shared.
        if isinstance(node, Function) and use_count.get(id(node.body), 0) == 1:
            inline.add(id(node.body))
    for node in order:
        if id(node) in inline or not is_binding(node):
            continue
        numbers[node] = len(numbers)
    return numbers


def calls(root: Expr, op_name: Optional[str] = None) -> Iterator[Call]:
    """The op calls under ``root`` (optionally of one op), in post order."""
    for node in post_order(root):
        if isinstance(node, Call) and isinstance(node.op, Op) and (op_name is None or node.op.name == op_name):
            yield node


def global_calls(root: Expr) -> List[GlobalVar]:
    out = []
    for node in post_order(root):
        if isinstance(node, Call) and isinstance(node.op, GlobalVar) and node.op not in out:
            out.append(node.op)
    return out


def map_post_order(root: Expr, fn: Callable[[Expr, Expr], Expr]) -> Expr:
    """Rebuilds ``root`` bottom-up: ``fn(old, rebuilt)`` returns the node to use for ``old``.

    ``rebuilt`` is ``old`` with its children replaced by their mapped versions (``old``
    itself when nothing changed below it), so sharing is kept.
    """
    memo: Dict[int, Expr] = {}
    for node in post_order(root):
        memo[id(node)] = fn(node, rebuild(node, memo))
    return memo[id(root)]


def rebuild(node: Expr, memo: Dict[int, Expr]) -> Expr:
    """``node`` with each child looked up in ``memo`` (by id); ``node`` if none changed."""
    def m(e):
        return memo.get(id(e), e)

    if isinstance(node, Call):
        op = m(node.op) if isinstance(node.op, Expr) else node.op
        args = tuple(m(a) for a in node.args)
        if op is node.op and all(a is b for a, b in zip(args, node.args)):
            return node
        return Call(op, args, node.attrs, node.layer)
    if isinstance(node, Tuple):
        fields = tuple(m(f) for f in node.fields)
        if all(a is b for a, b in zip(fields, node.fields)):
            return node
        return Tuple(fields)
    if isinstance(node, TupleGetItem):
        tv = m(node.tuple_value)
        return node if tv is node.tuple_value else TupleGetItem(tv, node.index)
    if isinstance(node, Function):
        body = m(node.body)
        return node if body is node.body else Function(node.params, body, node.ret_type, node.attrs)
    if isinstance(node, Let):
        value, body = m(node.value), m(node.body)
        if value is node.value and body is node.body:
            return node
        return Let(node.var, value, body)
    return node


__all__ = ["children", "post_order", "users", "free_vars", "number_bindings", "calls", "global_calls",
           "map_post_order", "rebuild", "is_binding", "Constant"]
