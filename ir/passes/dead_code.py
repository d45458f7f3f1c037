"""DeadCodeElimination: drops unused let bindings and unreachable global functions.

* ``let %x = v; body`` with ``%x`` unused becomes ``body`` (every op is pure).
* With ``DeadCodeElimination.inline_once`` (default on), a let whose variable is used exactly
  once, and not inside a nested function, is inlined: ``let %x = v; f(%x)`` -> ``f(v)``.
* When the module has ``@main``, global functions that ``@main`` cannot reach are removed.

Graph bindings (``%0 = ...;`` in the text) are not lets: they are shared nodes and disappear on
their own when nothing uses them. Functions of other compilers are left as they are inside.
"""

from __future__ import annotations

from typing import Dict, List

from ..expr import Expr, Function, Let, Var
from ..module import IRModule
from ..rewrite import is_external
from ..traversal import children, global_calls, rebuild
from ..transform import PassContext, PassError, module_pass, register_config

register_config("DeadCodeElimination.inline_once", bool, True,
                "inline let bindings whose variable is used exactly once")

#: A cap on the passes over one function (each pass removes at least one binding).
MAX_ROUNDS = 1000


def _order_with_scopes(root: Expr):
    """Post order of ``root`` (not entering external functions), and for each Var the number
    of uses and whether a use sits inside a nested function."""
    order, seen = [], set()
    uses: Dict[int, int] = {}
    in_closure: set = set()
    # Stack entries: (node, expanded, function depth below root).
    stack = [(root, False, 0)]
    while stack:
        node, expanded, depth = stack.pop()
        if expanded:
            order.append(node)
            continue
        if isinstance(node, Var):
            uses[id(node)] = uses.get(id(node), 0) + 1
            if depth:
                in_closure.add(id(node))
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True, depth))
        if node is not root and is_external(node):
            continue
        inner = depth + 1 if isinstance(node, Function) and node is not root else depth
        for child in reversed(children(node)):
            if isinstance(child, Var) or id(child) not in seen:
                stack.append((child, False, inner))
    return order, uses, in_closure


def eliminate_dead_code(func: Function, inline_once: bool = True) -> Function:
    """``func`` without unused lets (and with single-use lets inlined); iterative."""
    for _ in range(MAX_ROUNDS):
        func, changed = _one_round(func, inline_once)
        if not changed:
            return func
    raise PassError(f"DeadCodeElimination did not finish after {MAX_ROUNDS} rounds")


def _one_round(func: Function, inline_once: bool):
    order, uses, in_closure = _order_with_scopes(func)
    # Variables to replace by their let's value: id(var) -> the value (original node).
    inline_value: Dict[int, Expr] = {}
    if inline_once:
        for node in order:
            if isinstance(node, Let) and uses.get(id(node.var), 0) == 1 and id(node.var) not in in_closure:
                inline_value[id(node.var)] = node.value
    memo: Dict[int, Expr] = {}
    changed = False
    for node in order:
        if isinstance(node, Var):
            value = inline_value.get(id(node))
            if value is not None:
                # A let's value comes before its body in post order, so it is rewritten already.
                memo[id(node)] = memo[id(value)]
            continue
        if isinstance(node, Let) and (uses.get(id(node.var), 0) == 0 or id(node.var) in inline_value):
            memo[id(node)] = memo.get(id(node.body), node.body)
            changed = True
            continue
        memo[id(node)] = node if (node is not func and is_external(node)) else rebuild(node, memo)
    return memo[id(func)], changed


@module_pass("DeadCodeElimination", opt_level=1)
def dead_code_elimination(mod: IRModule, ctx: PassContext) -> IRModule:
    """Drops unused lets (inlining single-use ones) and globals unreachable from @main."""
    inline_once = bool(ctx.get_config("DeadCodeElimination.inline_once"))
    keep: List[str] = list(mod)
    if "main" in mod:
        reachable, work = {"main"}, ["main"]
        while work:
            name = work.pop()
            for gv in global_calls(mod[name].body):
                if gv.name_hint in mod and gv.name_hint not in reachable:
                    reachable.add(gv.name_hint)
                    work.append(gv.name_hint)
        keep = [name for name in mod if name in reachable]
    out = IRModule(attrs=mod.attrs)
    out._gvars = {k: v for k, v in mod._gvars.items() if k in keep}
    for name in keep:
        fn = mod[name]
        out[name] = fn if is_external(fn) else eliminate_dead_code(fn, inline_once)
    return out


DeadCodeElimination = dead_code_elimination
