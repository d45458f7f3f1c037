"""Iterative graph walks (no recursion: models have thousands of nodes in a chain)."""

from __future__ import annotations

from typing import Callable, Dict, Iterator, List, Optional, Union

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


_ATOMS = frozenset((Var, GlobalVar, Constant))
_LISTED = object()  # marks, on the walk's stack, that the node below it has had its children walked


def _never(_node) -> bool:
    return False


def post_order(root: Expr, enter_functions: Union[bool, Callable[[Function], bool]] = True,
               enter: Optional[Callable[[Expr], bool]] = None) -> List[Expr]:
    """Every node reachable from ``root`` once, each after all of its children.

    With ``enter_functions=False`` nested Functions are listed but not entered, with a
    predicate only those it is true for are entered; more generally a node (other than
    ``root``) for which ``enter(node)`` is False is listed but its children are not visited.
    """
    # The hottest loop of every pass and analysis: children are read by exact node class (the
    # general ``children`` for anything else), and a marker on the stack instead of
    # (node, expanded) pairs.
    if enter_functions is True:
        function_filter = None
    elif callable(enter_functions):
        function_filter = enter_functions
    else:
        function_filter = _never
    order: List[Expr] = []
    seen = set()
    stack = [root]
    pop, push, append, mark = stack.pop, stack.append, order.append, seen.add
    while stack:
        node = pop()
        if node is _LISTED:
            append(pop())
            continue
        key = id(node)
        if key in seen:
            continue
        mark(key)
        kind = type(node)
        if kind in _ATOMS:
            append(node)
            continue
        push(node)
        push(_LISTED)
        if node is not root and ((function_filter is not None and isinstance(node, Function)
                                  and not function_filter(node))
                                 or (enter is not None and not enter(node))):
            continue
        if kind is Call:
            args = node.args
            for i in range(len(args) - 1, -1, -1):
                child = args[i]
                if id(child) not in seen:
                    push(child)
            op = node.op
            if isinstance(op, Expr) and id(op) not in seen:
                push(op)
            continue
        if kind is TupleGetItem:
            kids = (node.tuple_value,)
        elif kind is Tuple:
            kids = node.fields
        else:
            kids = children(node)
        for i in range(len(kids) - 1, -1, -1):
            child = kids[i]
            if id(child) not in seen:
                push(child)
    return order


def users(root: Expr, order: Optional[List[Expr]] = None) -> Dict[Expr, List[Expr]]:
    """For every node reachable from ``root``: the nodes that use it (in post order).
    ``order``: ``post_order(root)`` if the caller has it already."""
    if order is None:
        order = post_order(root)
    out: Dict[Expr, List[Expr]] = {node: [] for node in order}  # children come before their users
    for node in order:
        kind = type(node)
        if kind is Call:
            op = node.op
            if isinstance(op, Expr):
                out[op].append(node)
            for child in node.args:
                out[child].append(node)
        elif kind is TupleGetItem:
            out[node.tuple_value].append(node)
        elif kind is Tuple:
            for child in node.fields:
                out[child].append(node)
        elif kind not in _ATOMS:
            for child in children(node):
                out[child].append(node)
    return out


def free_vars(expr: Expr, order: Optional[List[Expr]] = None) -> List[Var]:
    """Vars used but not bound inside ``expr``, in first-use order (``order``: its
    ``post_order`` if the caller has it already)."""
    bound = set()
    if order is None:
        order = post_order(expr)
    for node in order:
        if isinstance(node, Function):
            bound.update(node.params)
        elif isinstance(node, Let):
            bound.add(node.var)
    out, seen = [], set()
    for node in order:
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


def _same_types(new_children, old_children) -> bool:
    for n, o in zip(new_children, old_children):
        nt, ot = n._checked_type, o._checked_type
        if nt is None or (nt is not ot and nt != ot):
            return False
    return True


def carry_type(new: Expr, old: Expr) -> Expr:
    """Gives ``new`` (a rebuilt ``old``: an op call with the same op and attributes, a tuple,
    or a projection with the same index) the type of ``old`` when each of its children has the
    type of the child it replaces. That is what inference would compute (a node's type depends
    only on its op, attributes and its children's types), without the type relation: passes and
    the partitioner rebuild whole chains below a change, and the module is typed again after.
    Anything else is left untyped, for inference. Returns ``new``."""
    if new is old or new._checked_type is not None or old._checked_type is None:
        return new
    kind = type(new)
    if kind is not type(old):
        return new
    if kind is Call:
        if new.op is not old.op or not isinstance(new.op, Op) or new.attrs is not old.attrs \
                or len(new.args) != len(old.args) or not _same_types(new.args, old.args):
            return new
    elif kind is Tuple:
        if len(new.fields) != len(old.fields) or not _same_types(new.fields, old.fields):
            return new
    elif kind is TupleGetItem:
        if new.index != old.index or not _same_types((new.tuple_value,), (old.tuple_value,)):
            return new
    else:
        return new
    new._set_checked_type(old._checked_type)
    return new


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
    kind = type(node)
    if kind is Call:
        op, args = node.op, node.args
        new_op = memo.get(id(op), op) if isinstance(op, Expr) else op
        changed = new_op is not op
        for a in args:
            if memo.get(id(a), a) is not a:
                changed = True
                break
        if not changed:
            return node
        return carry_type(Call(new_op, tuple(memo.get(id(a), a) for a in args), node.attrs, node.layer), node)
    if kind in _ATOMS:
        return node

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
        return carry_type(Tuple(fields), node)
    if isinstance(node, TupleGetItem):
        tv = m(node.tuple_value)
        return node if tv is node.tuple_value else carry_type(TupleGetItem(tv, node.index), node)
    if isinstance(node, Function):
        body = m(node.body)
        return node if body is node.body else Function(node.params, body, node.ret_type, node.attrs)
    if isinstance(node, Let):
        value, body = m(node.value), m(node.body)
        if value is node.value and body is node.body:
            return node
        return Let(node.var, value, body)
    return node


__all__ = ["carry_type", "children", "post_order", "users", "free_vars", "number_bindings", "calls", "global_calls",
           "map_post_order", "rebuild", "is_binding", "Constant"]
