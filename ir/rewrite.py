"""Graph rewriting with tables of (pattern, function), applied bottom-up to a fixpoint.

    table = RewriteTable([
        (is_op("multiply")(wildcard().named("x"), is_constant().where(is_one)), lambda m: m["x"]),
    ], name="DropMultiplyByOne")
    new_mod = table.rewrite(mod)

A rule's function gets a ``Match`` and returns the replacement expression, or None for "no
change". A sweep visits every node once, children before parents (an explicit loop, no
recursion), and at each node applies the first rule that fires, then tries the rules again on
the replacement until none fires. Sweeps repeat until one changes nothing; a table that keeps
firing raises ``RewriteError`` after ``max_sweeps``.

Every replacement is checked: its type must equal the type of the node it replaces, and new
calls without a layer name take the layer of the call they replace, or for a projection
``call(...).N`` the layer of that call (set one in the rule to override). Functions of other compilers (attributes ``Compiler``, ``Primitive`` or
``Composite``) are left alone unless ``enter_external=True``.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections import Counter
from typing import Callable, Dict, Iterator, List, Optional, Sequence

from .errors import TidlxError
from .expr import Call, Expr, Function, TupleGetItem
from .module import IRModule
from .op import Op
from .pattern import ANY_CALL, Match, Pattern
from .traversal import children, post_order, rebuild
from .type_infer import describe_call, infer_expr_type

#: Function attributes marking code that belongs to another compiler or is already fused.
EXTERNAL_FUNCTION_ATTRS = ("Compiler", "Primitive", "Composite")


class RewriteError(TidlxError):
    """A rewrite table that does not converge, or a rule that produced an invalid replacement."""


def is_external(fn: Expr) -> bool:
    return isinstance(fn, Function) and any(k in fn.attrs for k in EXTERNAL_FUNCTION_ATTRS)


class Rule:
    __slots__ = ("name", "pattern", "fn", "index")

    def __init__(self, name: str, pattern: Pattern, fn: Callable[[Match], Optional[Expr]], index: int):
        self.name, self.pattern, self.fn, self.index = name, pattern, fn, index

    def __repr__(self) -> str:
        return f"Rule({self.name}: {self.pattern!r})"


def _node_keys(node: Expr) -> tuple:
    if isinstance(node, Call):
        return (node.op.name, ANY_CALL) if isinstance(node.op, Op) else (ANY_CALL,)
    return (type(node),)


def _candidate_key(node: Expr):
    """What the rules that may fire at ``node`` depend on: its op (calls of ops) or its class."""
    return node.op if type(node) is Call and isinstance(node.op, Op) else type(node)


def _keys_of_candidate_key(key) -> tuple:
    return (key.name, ANY_CALL) if isinstance(key, Op) else (ANY_CALL,) if key is Call else (key,)


class RewriteTable:
    """An ordered table of rewrite rules: ``(pattern, fn)`` or ``(name, pattern, fn)``."""

    def __init__(self, rules: Sequence, name: str = "RewriteTable"):
        self.name = name
        self.rules: List[Rule] = []
        for i, entry in enumerate(rules):
            if not isinstance(entry, tuple) or len(entry) not in (2, 3):
                raise RewriteError(f"rule {i} of table '{name}' must be (pattern, fn) or (name, pattern, fn)")
            rule_name, pattern, fn = entry if len(entry) == 3 else (getattr(entry[1], "__name__", f"rule{i}"),) + entry
            if not isinstance(pattern, Pattern):
                raise RewriteError(f"rule '{rule_name}' of table '{name}': expected a pattern, "
                                   f"got {type(pattern).__name__}")
            if not callable(fn):
                raise RewriteError(f"rule '{rule_name}' of table '{name}': the rewrite function is not callable")
            self.rules.append(Rule(str(rule_name), pattern, fn, i))
        # Rules indexed by what their root must be; ``None`` collects rules that match anything.
        self._by_key: Dict[object, List[Rule]] = {}
        self._any: List[Rule] = []
        for rule in self.rules:
            keys = rule.pattern.dispatch_keys()
            if keys is None:
                self._any.append(rule)
            else:
                for k in keys:
                    self._by_key.setdefault(k, []).append(rule)
        self._cache: Dict[tuple, List[Rule]] = {}
        self._fast: Dict[object, List[Rule]] = {}

    def __add__(self, other: "RewriteTable") -> "RewriteTable":
        entries = [(r.name, r.pattern, r.fn) for r in self.rules + other.rules]
        return RewriteTable(entries, name=f"{self.name}+{other.name}")

    def __len__(self) -> int:
        return len(self.rules)

    def candidates(self, node: Expr) -> List[Rule]:
        # Cached per op (calls of ops) or per node class: one dict lookup per node of a sweep.
        return self._candidates_of(_candidate_key(node))

    def _candidates_of(self, cache_key) -> List[Rule]:
        found = self._fast.get(cache_key)
        if found is None:
            found = self._fast[cache_key] = self._candidates_for_keys(_keys_of_candidate_key(cache_key))
        return found

    def _candidates_for_keys(self, keys: tuple) -> List[Rule]:
        found = self._cache.get(keys)
        if found is None:
            seen = {}
            for k in keys:
                for r in self._by_key.get(k, ()):
                    seen[r.index] = r
            for r in self._any:
                seen[r.index] = r
            found = self._cache[keys] = [seen[i] for i in sorted(seen)]
        return found

    def rewrite(self, target, *, mod: Optional[IRModule] = None, max_sweeps: int = 64,
                max_local: int = 64, check_types: bool = True, enter_external: bool = False):
        """Rewrites an IRModule (every function that is not external) or one expression."""
        return rewrite(self, target, mod=mod, max_sweeps=max_sweeps, max_local=max_local,
                       check_types=check_types, enter_external=enter_external)

    def __repr__(self) -> str:
        return f"RewriteTable({self.name}, {len(self.rules)} rules)"


class SweepContext:
    """What rules may ask about the graph during one sweep (via ``Match.users``)."""

    def __init__(self, users_by_id: Optional[Dict[int, tuple]] = None, *, order: Sequence[Expr] = (),
                 opaque=frozenset(), root: Optional[Expr] = None):
        # Either the users (id -> (node, users)) or the walk to compute them from when a rule
        # first asks: most sweeps match nothing that asks, and the graph at the start of the
        # sweep (the nodes of ``order``) does not change, so later is the same answer.
        self._users = users_by_id
        self._order, self._opaque, self._root = order, opaque, root
        self._origin: Dict[int, tuple] = {}  # id(new node) -> (new node, original node)

    def _users_by_id(self) -> Dict[int, tuple]:
        if self._users is None:
            users: Dict[int, tuple] = {id(n): (n, []) for n in self._order}
            for node in self._order:
                if id(node) in self._opaque:
                    continue
                for child in children(node):
                    users[id(child)][1].append(node)
            users[id(self._root)][1].append(None)  # the result of the whole expression is used
            self._users = users
        return self._users

    def record(self, new: Expr, original: Expr) -> None:
        if new is not original:
            self._origin[id(new)] = (new, original)

    def original(self, expr: Expr) -> Expr:
        entry = self._origin.get(id(expr))
        return entry[1] if entry is not None and entry[0] is expr else expr

    def users(self, expr: Expr) -> Optional[list]:
        found = self._users_by_id().get(id(self.original(expr)))
        return None if found is None else list(found[1])


def _walk_order(root: Expr, enter_external: bool) -> List[Expr]:
    """Post order from ``root`` that does not enter external functions."""
    return post_order(root, enter_functions=True if enter_external else (lambda fn: not is_external(fn)))


class _Walk:
    """One sweep's view of a graph: its post order, the ids of the external functions in it
    (left alone), and the candidate keys of its nodes (which rules could fire anywhere)."""

    __slots__ = ("root", "order", "opaque", "positions")

    def __init__(self, root: Expr, enter_external: bool):
        self.root = root  # held, so that the ids below stay those of live nodes
        self.order = _walk_order(root, enter_external)
        self.opaque = frozenset() if enter_external else \
            {id(n) for n in self.order if isinstance(n, Function) and n is not root and is_external(n)}
        #: candidate key -> the positions in ``order`` of the nodes with that key
        self.positions: Dict[object, List[int]] = {}
        for i, n in enumerate(self.order):
            key = _candidate_key(n)
            found = self.positions.get(key)
            if found is None:
                self.positions[key] = [i]
            else:
                found.append(i)


#: The walks of the innermost ``shared_walks`` block: (id(root), enter_external) -> _Walk.
_SHARED_WALKS: contextvars.ContextVar = contextvars.ContextVar("tidlx_shared_walks", default=None)


@contextlib.contextmanager
def shared_walks() -> Iterator[None]:
    """Within the block, rewrites that sweep a graph another rewrite of the block swept
    already (a pass that changed nothing hands the next one the same function) reuse that
    walk instead of walking again. Nodes are immutable, so a walk stays true for as long as
    its root is held (the block holds it); the walks are dropped when the block ends. A table
    none of whose rules can fire at any node of a walk skips the sweep: that sweep would
    change nothing. Results are the same with or without the block."""
    token = _SHARED_WALKS.set({})
    try:
        yield
    finally:
        _SHARED_WALKS.reset(token)


def _walk(root: Expr, enter_external: bool) -> _Walk:
    walks = _SHARED_WALKS.get()
    if walks is None:
        return _Walk(root, enter_external)
    key = (id(root), enter_external)
    found = walks.get(key)
    if found is None or found.root is not root:
        found = walks[key] = _Walk(root, enter_external)
    return found


def _layer_of(node: Expr) -> Optional[str]:
    """The layer a replacement inherits: the call's, or for ``call(...).N`` that call's."""
    if isinstance(node, TupleGetItem):
        node = node.tuple_value
    return node.layer if isinstance(node, Call) else None


def _may_fire(rules: Sequence[Rule], node: Expr) -> bool:
    """Whether some rule's quick test admits ``node`` (most nodes of a sweep: none does)."""
    for rule in rules:
        if rule.pattern._may_match(node):
            return True
    return False


class _Rewriter:
    def __init__(self, table: RewriteTable, mod, max_sweeps, max_local, check_types, enter_external):
        self.table, self.mod = table, mod
        self.max_sweeps, self.max_local = max_sweeps, max_local
        self.check_types, self.enter_external = check_types, enter_external

    def run(self, root: Expr) -> Expr:
        if self.check_types:
            self._type_of(root)
        last = Counter()
        for _ in range(self.max_sweeps):
            fired: Counter = Counter()
            root = self._sweep(root, fired)
            if not fired:
                return root
            last = fired
        top = ", ".join(f"{name} ({n}x)" for name, n in last.most_common(3))
        raise RewriteError(f"rewrite table '{self.table.name}' did not reach a fixpoint after "
                           f"{self.max_sweeps} sweeps; rules still firing: {top}")

    def _type_of(self, expr: Expr):
        if expr.has_type:
            return expr._checked_type
        return infer_expr_type(expr, self.mod)

    def _sweep(self, root: Expr, fired: Counter) -> Expr:
        walk = _walk(root, self.enter_external)
        candidates_of = self.table._candidates_of
        live = [key for key in walk.positions if candidates_of(key)]
        if not live:
            return root  # no rule can fire at any node
        order, opaque = walk.order, walk.opaque
        ctx = SweepContext(order=order, opaque=opaque, root=root)
        # Nodes that existed before a replacement (kept alive so ids stay unique), made when a
        # rule first fires: until then every node is its original.
        self._known = None
        self._order = order
        memo: Dict[int, Expr] = {}  # id(original) -> its replacement, for the nodes that changed
        candidates = self.table.candidates
        max_local = self.max_local

        def visit(node: Expr) -> None:
            rebuilt = node if not memo or id(node) in opaque else rebuild(node, memo)
            if rebuilt is not node:
                ctx.record(rebuilt, node)
                self._known[id(rebuilt)] = rebuilt
            if not _may_fire(candidates(rebuilt), rebuilt):
                if rebuilt is not node:
                    memo[id(node)] = rebuilt
                return
            out = rebuilt
            for _ in range(max_local):
                new, rule = self._apply_once(out, ctx)
                if new is None:
                    break
                fired[rule.name] += 1
                ctx.record(new, node)
                self._known[id(new)] = new
                out = new
            else:
                raise RewriteError(f"rewrite table '{self.table.name}': rules keep replacing "
                                   f"{self._describe(node)} ({max_local} times in a row); last rule: "
                                   f"{rule.name}")
            if out is not node:
                memo[id(node)] = out

        # Until a rule fires nothing is rebuilt, so only the nodes some rule is keyed on need a
        # visit; from the first change on, every later node may need rebuilding.
        if len(live) == len(walk.positions):
            firsts = range(len(order))
        else:
            firsts = sorted(i for key in live for i in walk.positions[key])
        rest = len(order)
        for i in firsts:
            visit(order[i])
            if memo:
                rest = i + 1
                break
        for i in range(rest, len(order)):
            visit(order[i])
        return memo.get(id(root), root)

    def _apply_once(self, node: Expr, ctx: SweepContext):
        for rule in self.table.candidates(node):
            if not rule.pattern._may_match(node):
                continue

            def replacement(env, fn=rule.fn):
                new = fn(Match(node, env, ctx))
                return None if new is node else new  # None: declined; the pattern may match another way

            new = rule.pattern._first(node, {}, replacement)
            if new is None:
                continue  # no way of matching it that the rule takes: the next rule
            if not isinstance(new, Expr):
                raise RewriteError(f"rule '{rule.name}' of '{self.table.name}' returned "
                                   f"{type(new).__name__}, expected an expression or None")
            return self._finish(node, new, rule), rule
        return None, None

    def _finish(self, old: Expr, new: Expr, rule: Rule) -> Expr:
        if self._known is None:
            self._known = {id(n): n for n in self._order}
        layer = _layer_of(old)
        if layer:
            new = self._stamp_layer(new, layer)
        if self.check_types:
            old_t = self._type_of(old)
            try:
                new_t = self._type_of(new)
            except TidlxError as exc:
                raise RewriteError(f"rule '{rule.name}' of '{self.table.name}' replaced "
                                   f"{self._describe(old)} by ill-typed IR: {exc}") from None
            if new_t != old_t:
                raise RewriteError(f"rule '{rule.name}' of '{self.table.name}' changed the type of "
                                   f"{self._describe(old)} from {old_t} to {new_t}")
        return new

    def _stamp_layer(self, new: Expr, layer: str) -> Expr:
        """Gives the new calls of a replacement (those not in the graph before) ``layer``."""
        fresh, seen, stack = [], set(), [(new, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                fresh.append(node)
                continue
            if id(node) in seen or id(node) in self._known:
                continue
            seen.add(id(node))
            stack.append((node, True))
            if isinstance(node, Function):
                continue  # a new function's body is its own scope; leave it as the rule built it
            for child in reversed(children(node)):
                stack.append((child, False))
        memo: Dict[int, Expr] = {}
        for node in fresh:
            out = node if isinstance(node, Function) else rebuild(node, memo)
            if isinstance(out, Call) and not out.layer:
                out = Call(out.op, out.args, out.attrs, layer=layer)
            memo[id(node)] = out
        return memo.get(id(new), new)

    @staticmethod
    def _describe(node: Expr) -> str:
        if isinstance(node, Call):
            return describe_call(node)
        if isinstance(node, TupleGetItem):
            inner = node.tuple_value
            return (f"projection .{node.index} of {describe_call(inner)}" if isinstance(inner, Call)
                    else f"projection .{node.index}")
        return type(node).__name__.lower()


def rewrite(table: RewriteTable, target, *, mod: Optional[IRModule] = None, max_sweeps: int = 64,
            max_local: int = 64, check_types: bool = True, enter_external: bool = False):
    """Applies ``table`` to a fixpoint. ``target`` is an IRModule (returns a new module) or an
    expression (``mod`` then resolves global functions it calls)."""
    if not isinstance(table, RewriteTable):
        raise RewriteError(f"rewrite takes a RewriteTable, got {type(table).__name__}")
    if max_sweeps < 1 or max_local < 1:
        raise RewriteError("max_sweeps and max_local must be at least 1")
    if isinstance(target, IRModule):
        if check_types:
            target.infer_types()
        out = target.copy()
        worker = _Rewriter(table, target, max_sweeps, max_local, check_types, enter_external)
        for name, fn in target.items():
            if is_external(fn) and not enter_external:
                continue
            try:
                out[name] = worker.run(fn)
            except RewriteError as exc:
                raise RewriteError(f"in @{name}: {exc}") from None
        return out
    if not isinstance(target, Expr):
        raise RewriteError(f"rewrite takes an IRModule or an expression, got {type(target).__name__}")
    return _Rewriter(table, mod, max_sweeps, max_local, check_types, enter_external).run(target)


__all__ = ["RewriteTable", "RewriteError", "Rule", "SweepContext", "rewrite", "is_external", "shared_walks",
           "EXTERNAL_FUNCTION_ATTRS"]
