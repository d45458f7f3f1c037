"""A dataflow pattern language for the IR, in the spirit of TVM's.

    conv = is_op("nn.conv2d")(wildcard().named("x"), is_constant().named("w"))
    m = conv.has_attr({"groups": 1}).match(expr)
    if m: m["x"], m["w"], m.expr

Semantics:
  * ``is_op("add")(p1, p2)`` matches a call of ``add`` whose arguments match ``p1`` and ``p2``.
    ``is_op("add")`` on its own (not applied) matches a call of ``add`` with any arguments;
    ``is_op("add", "subtract")`` matches either op; ``is_op()`` matches any op call.
  * One pattern object used twice in a pattern graph must match one and the same node
    (``x = wildcard(); is_op("add")(x, x)`` matches ``add(%a, %a)``, not ``add(%a, %b)``);
    two patterns with the same ``named`` name must match the same node too.
  * ``p1 | p2`` tries ``p1`` first, then ``p2``; matching backtracks through alternatives, so a
    later argument that fails under one alternative is retried under the next.
  * Constraints (``has_attr``, ``where``, ``has_shape``, ``has_dtype``, ``has_type``) return a new
    pattern; they are checked after the node matched structurally.

Matching recurses over the *pattern*, whose depth is small; the expression graph is only
walked as deep as the pattern reaches, so long chains in models do not matter here. It is
written in continuation-passing style (``_first``: each pattern hands every way it matches to
the rest of the match, a function that says whether the whole match succeeds), which explores
the ways in the same order as the generators of ``_iter`` do, without making generators.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence

from .errors import OpAttributeError, TidlxError, closest
from .expr import Call, Constant, Expr, Function, GlobalVar, Let, Tuple, TupleGetItem, Var
from .op import Op, get_op
from .types import TensorType, Type


class PatternError(TidlxError):
    """A malformed pattern (unknown op, wrong arity, unknown attribute) or a missing capture."""


#: Dispatch key for "any call" (also calls of functions and globals).
ANY_CALL = "<call>"


def _normalize(value):
    if isinstance(value, (list, tuple)):
        return tuple(_normalize(v) for v in value)
    return value


def get_attr(expr: Expr, key: str, default=None):
    """An attribute of a Call (its attribute dataclass or mapping) or of a Function."""
    attrs = expr.attrs if isinstance(expr, (Call, Function)) else None
    if attrs is None:
        return default
    if dataclasses.is_dataclass(attrs):
        return getattr(attrs, key, default)
    return attrs.get(key, default)


_MISSING = object()


class Pattern:
    """Base of all patterns. Subclasses implement ``_match_node`` (structure only), and may
    implement ``_may_match`` (a quick necessary test, see there)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # A subclass that redefines how it matches but not its quick test gets the test that
        # refuses nothing (an inherited test could refuse what the new _match_node accepts);
        # likewise its continuation-passing match is the one that runs its own _match_node.
        if "_match_node" in cls.__dict__:
            if "_may_match" not in cls.__dict__:
                cls._may_match = Pattern._may_match
            if "_first_node" not in cls.__dict__:
                cls._first_node = Pattern._first_node

    def __init__(self):
        self._name: Optional[str] = None
        self._checks: tuple = ()  # (description, predicate on the matched expr)

    # -- building --------------------------------------------------------------------------
    def _with_check(self, description: str, predicate: Callable[[Expr], bool]) -> "Pattern":
        new = copy.copy(self)
        new._checks = self._checks + ((description, predicate),)
        return new

    def named(self, name: str) -> "Pattern":
        """Captures the matched node under ``name`` (``match[name]``)."""
        if not isinstance(name, str) or not name:
            raise PatternError(f"a capture name must be a non-empty string, got {name!r}")
        new = copy.copy(self)
        new._name = name
        return new

    def has_attr(self, attrs: Mapping[str, Any]) -> "Pattern":
        """Matches only when the node's attributes have these values (lists equal tuples)."""
        if not isinstance(attrs, Mapping):
            raise PatternError(f"has_attr takes a mapping of attribute values, got {type(attrs).__name__}")
        self._check_attr_names(attrs)
        wanted = {k: _normalize(v) for k, v in attrs.items()}

        def check(expr):
            for key, value in wanted.items():
                got = get_attr(expr, key, _MISSING)
                if got is _MISSING or _normalize(got) != value:
                    return False
            return True

        return self._with_check(f"has_attr({wanted})", check)

    def _check_attr_names(self, attrs: Mapping[str, Any]) -> None:
        """Refuses attribute names that none of the pattern's ops take (a typo never matches)."""
        ops = self._ops()
        if not ops:
            return
        known = set()
        for op in ops:
            if op.attrs_type is not None:
                known.update(f.name for f in dataclasses.fields(op.attrs_type))
        for key in attrs:
            if key not in known:
                names = ", ".join(sorted(op.name for op in ops))
                hint = closest(key, known)
                extra = f"; did you mean {', '.join(hint)}?" if hint else ""
                raise OpAttributeError(f"pattern has_attr: {names} has no attribute '{key}'{extra}")

    def _ops(self) -> List[Op]:
        return []

    def where(self, predicate: Callable[[Expr], bool]) -> "Pattern":
        """Matches only when ``predicate(node)`` is true (for call patterns: the Call)."""
        if not callable(predicate):
            raise PatternError("where() takes a callable")
        return self._with_check(getattr(predicate, "__name__", "where"), predicate)

    def has_type(self, ty: Type) -> "Pattern":
        return self._with_check(f"has_type({ty})", lambda e: e.checked_type == ty)

    def has_shape(self, shape: Sequence[Optional[int]]) -> "Pattern":
        """Matches tensors of this shape; ``None`` in ``shape`` matches any size."""
        want = tuple(None if d is None else int(d) for d in shape)

        def check(e):
            t = e.checked_type
            return (isinstance(t, TensorType) and len(t.shape) == len(want)
                    and all(w is None or w == d for w, d in zip(want, t.shape)))

        return self._with_check(f"has_shape({want})", check)

    def has_dtype(self, dtype: str) -> "Pattern":
        return self._with_check(f"has_dtype({dtype})",
                                lambda e: isinstance(e.checked_type, TensorType) and e.checked_type.dtype == dtype)

    def has_rank(self, ndim: int) -> "Pattern":
        return self._with_check(f"has_rank({ndim})",
                                lambda e: isinstance(e.checked_type, TensorType) and e.checked_type.ndim == ndim)

    def __or__(self, other: "Pattern") -> "Pattern":
        if not isinstance(other, Pattern):
            raise PatternError(f"cannot combine a pattern with {type(other).__name__} using |")
        return AltPattern(self, other)

    def optional(self, wrap: Callable[["Pattern"], "Pattern"]) -> "Pattern":
        """``p.optional(lambda x: is_op("nn.relu")(x))`` matches ``wrap(p)`` or, failing that, ``p``."""
        return AltPattern(wrap(self), self)

    def __call__(self, *args: "Pattern") -> "CallPattern":
        """A call whose callee matches this pattern and whose arguments match ``args``."""
        return CallPattern(self, list(args))

    # -- matching --------------------------------------------------------------------------
    def match(self, expr: Expr) -> Optional["Match"]:
        """The first match of this pattern rooted at ``expr``, or None."""
        if not isinstance(expr, Expr):
            raise PatternError(f"can only match expressions, got {type(expr).__name__}")
        if not self._may_match(expr):
            return None
        env = self._first(expr, {}, _found)
        return None if env is None else Match(expr, env)

    def matches(self, expr: Expr) -> bool:
        return self.match(expr) is not None

    def _iter(self, expr, env: Dict) -> Iterator[Dict]:
        bound = env.get(self)
        if bound is not None:
            if bound is expr:
                yield env
            return
        for env2 in self._match_node(expr, env):
            if self._name is not None:
                prev = env2.get(self._name)
                if prev is not None and prev is not expr:
                    continue
            if not all(check(expr) for _, check in self._checks):
                continue
            out = dict(env2)
            out[self] = expr
            if self._name is not None:
                out[self._name] = expr
            yield out

    def _match_node(self, expr, env: Dict) -> Iterator[Dict]:
        raise NotImplementedError

    def _first(self, expr, env: Dict, rest: Callable[[Dict], Any]):
        """The first result of ``rest(env2)`` that is not None, over the ways ``env2`` this
        pattern matches ``expr`` extending ``env``, in the order ``_iter`` yields them (None
        if there is none): the continuation-passing form of ``_iter``."""
        bound = env.get(self)
        if bound is not None:
            return rest(env) if bound is expr else None
        name, checks = self._name, self._checks
        if name is None and not checks:
            def bind(env2):
                out = dict(env2)
                out[self] = expr
                return rest(out)
        else:
            def bind(env2):
                if name is not None:
                    prev = env2.get(name)
                    if prev is not None and prev is not expr:
                        return None
                for _, check in checks:
                    if not check(expr):
                        return None
                out = dict(env2)
                out[self] = expr
                if name is not None:
                    out[name] = expr
                return rest(out)
        return self._first_node(expr, env, bind)

    def _first_node(self, expr, env: Dict, rest: Callable[[Dict], Any]):
        """``_first`` for the structure alone (``_match_node``'s ways); patterns that define
        only ``_match_node`` get this, which runs its generator."""
        if not self._may_match(expr):
            return None
        for env2 in self._match_node(expr, env):
            out = rest(env2)
            if out is not None:
                return out
        return None

    def _may_match(self, expr) -> bool:
        """False only if this pattern cannot match ``expr`` whatever the captures: the
        structure (node classes, ops, arities, tuple indices) without constraints or shared
        captures. A plain recursive test, so matching skips the generators of the full match
        on the many nodes that fail at once (most nodes of a model, for most patterns)."""
        return True

    def dispatch_keys(self) -> Optional[frozenset]:
        """What a root node must be for this pattern to match: op names, ``ANY_CALL`` or node
        classes; None when anything can match. The rewriter uses it to skip rules quickly."""
        return None

    def _describe(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        text = self._describe()
        for description, _ in self._checks:
            text += f".{description}"
        if self._name:
            text += f".named({self._name!r})"
        return text


class WildcardPattern(Pattern):
    def _match_node(self, expr, env):
        yield env

    def _first_node(self, expr, env, rest):
        return rest(env)

    def _describe(self):
        return "wildcard()"


class ExprPattern(Pattern):
    """Matches exactly one given node (by identity)."""

    def __init__(self, expr: Expr):
        super().__init__()
        self.expr = expr

    def _match_node(self, expr, env):
        if expr is self.expr:
            yield env

    def _may_match(self, expr):
        return expr is self.expr

    def _first_node(self, expr, env, rest):
        return rest(env) if expr is self.expr else None

    def _describe(self):
        return f"is_expr({type(self.expr).__name__})"


class ConstantPattern(Pattern):
    def _match_node(self, expr, env):
        if isinstance(expr, Constant):
            yield env

    def _may_match(self, expr):
        return isinstance(expr, Constant)

    def _first_node(self, expr, env, rest):
        return rest(env) if isinstance(expr, Constant) else None

    def dispatch_keys(self):
        return frozenset([Constant])

    def _describe(self):
        return "is_constant()"


class VarPattern(Pattern):
    def __init__(self, name: Optional[str] = None):
        super().__init__()
        self.var_name = name

    def _match_node(self, expr, env):
        if isinstance(expr, Var) and (self.var_name is None or expr.name_hint == self.var_name):
            yield env

    def _may_match(self, expr):
        return isinstance(expr, Var) and (self.var_name is None or expr.name_hint == self.var_name)

    def _first_node(self, expr, env, rest):
        if isinstance(expr, Var) and (self.var_name is None or expr.name_hint == self.var_name):
            return rest(env)
        return None

    def dispatch_keys(self):
        return frozenset([Var])

    def _describe(self):
        return f"is_var({self.var_name!r})" if self.var_name else "is_var()"


class OpPattern(Pattern):
    """Matches an Op, or (as an argument or root) a call of the op with any arguments."""

    def __init__(self, names: Sequence[str]):
        super().__init__()
        self.op_list = [get_op(n) for n in names]  # unknown names raise UnknownOpError here
        self.ops = frozenset(self.op_list)

    def _ops(self):
        return list(self.op_list)

    def _op_matches(self, op) -> bool:
        return isinstance(op, Op) and (not self.ops or op in self.ops)

    def _match_node(self, expr, env):
        if isinstance(expr, Op):
            if self._op_matches(expr):
                yield env
        elif isinstance(expr, Call) and self._op_matches(expr.op):
            yield env

    def _may_match(self, expr):
        if isinstance(expr, Call):
            return self._op_matches(expr.op)
        return isinstance(expr, Op) and self._op_matches(expr)

    def _first_node(self, expr, env, rest):
        if isinstance(expr, Op):
            return rest(env) if self._op_matches(expr) else None
        if isinstance(expr, Call) and self._op_matches(expr.op):
            return rest(env)
        return None

    def __call__(self, *args: Pattern) -> "CallPattern":
        for op in self.op_list:
            if op.arity_error(len(args)):
                raise PatternError(f"pattern is_op({op.name!r}) is given {len(args)} argument patterns, "
                                   f"the op takes {op.num_inputs}")
        # Constraints and a name given to the op pattern are about the call it matches.
        bare = copy.copy(self)
        bare._checks, bare._name = (), None
        call_pattern = CallPattern(bare, list(args))
        call_pattern._checks, call_pattern._name = self._checks, self._name
        return call_pattern

    def dispatch_keys(self):
        return frozenset(op.name for op in self.op_list) if self.op_list else frozenset([ANY_CALL])

    def _describe(self):
        return f"is_op({', '.join(repr(op.name) for op in self.op_list)})"


class CallPattern(Pattern):
    """A call; ``args=None`` matches any arguments."""

    def __init__(self, callee: Pattern, args: Optional[List[Pattern]]):
        super().__init__()
        if not isinstance(callee, Pattern):
            raise PatternError(f"callee of a call pattern must be a pattern, got {type(callee).__name__}")
        if args is not None:
            for a in args:
                if not isinstance(a, Pattern):
                    raise PatternError(f"argument patterns must be patterns, got {type(a).__name__}")
        self.callee = callee
        self.args = None if args is None else tuple(args)

    def _ops(self):
        return self.callee._ops()

    def _match_node(self, expr, env):
        if not isinstance(expr, Call):
            return
        if self.args is not None and len(self.args) != len(expr.args):
            return
        if isinstance(self.callee, OpPattern):
            if not self.callee._op_matches(expr.op):
                return
            envs = iter([env])
        elif isinstance(expr.op, Op):
            if not isinstance(self.callee, WildcardPattern):
                return
            envs = iter([env])
        else:
            envs = self.callee._iter(expr.op, env)
        for env1 in envs:
            if self.args is None:
                yield env1
            else:
                yield from _match_all(self.args, expr.args, 0, env1)

    def _first_node(self, expr, env, rest):
        if not isinstance(expr, Call):
            return None
        args, callee = self.args, self.callee
        if args is not None and len(args) != len(expr.args):
            return None
        if isinstance(callee, OpPattern):
            if not callee._op_matches(expr.op):
                return None
        elif isinstance(expr.op, Op):
            if not isinstance(callee, WildcardPattern):
                return None
        else:
            if args is None:
                return callee._first(expr.op, env, rest)
            return callee._first(expr.op, env, lambda env1: _first_all(args, expr.args, 0, env1, rest))
        return rest(env) if args is None else _first_all(args, expr.args, 0, env, rest)

    def _may_match(self, expr):
        if not isinstance(expr, Call):
            return False
        callee, op = self.callee, expr.op
        if isinstance(callee, OpPattern):
            if not callee._op_matches(op):
                return False
        elif isinstance(op, Op):
            if not isinstance(callee, WildcardPattern):
                return False
        elif not callee._may_match(op):
            return False
        args = self.args
        if args is None:
            return True
        if len(args) != len(expr.args):
            return False
        for pattern, arg in zip(args, expr.args):
            if not pattern._may_match(arg):
                return False
        return True

    def commutative(self) -> Pattern:
        """This two-argument call pattern, or the same with the arguments swapped."""
        if self.args is None or len(self.args) != 2:
            raise PatternError("commutative() needs a call pattern with exactly two arguments")
        swapped = CallPattern(self.callee, [self.args[1], self.args[0]])
        swapped._checks, swapped._name = self._checks, self._name
        return AltPattern(self, swapped)

    def dispatch_keys(self):
        if isinstance(self.callee, OpPattern):
            return self.callee.dispatch_keys()
        return frozenset([ANY_CALL])

    def _describe(self):
        args = "..." if self.args is None else ", ".join(repr(a) for a in self.args)
        return f"{self.callee!r}({args})"


def _match_all(patterns, exprs, i, env) -> Iterator[Dict]:
    """Every way of matching patterns[i:] to exprs[i:] in order (backtracking generator)."""
    if i == len(patterns):
        yield env
        return
    for env1 in patterns[i]._iter(exprs[i], env):
        yield from _match_all(patterns, exprs, i + 1, env1)


def _first_all(patterns, exprs, i, env, rest):
    """``_first`` of matching patterns[i:] to exprs[i:] in order."""
    if i == len(patterns):
        return rest(env)
    if i == len(patterns) - 1:
        return patterns[i]._first(exprs[i], env, rest)
    return patterns[i]._first(exprs[i], env, lambda env1: _first_all(patterns, exprs, i + 1, env1, rest))


def _found(env):
    """The continuation ending a match: the whole pattern matched with captures ``env``."""
    return env


class TuplePattern(Pattern):
    def __init__(self, fields: Optional[Sequence[Pattern]]):
        super().__init__()
        if fields is not None:
            for f in fields:
                if not isinstance(f, Pattern):
                    raise PatternError(f"tuple field patterns must be patterns, got {type(f).__name__}")
        self.fields = None if fields is None else tuple(fields)

    def _match_node(self, expr, env):
        if not isinstance(expr, Tuple):
            return
        if self.fields is None:
            yield env
        elif len(self.fields) == len(expr.fields):
            yield from _match_all(self.fields, expr.fields, 0, env)

    def _first_node(self, expr, env, rest):
        if not isinstance(expr, Tuple):
            return None
        if self.fields is None:
            return rest(env)
        if len(self.fields) != len(expr.fields):
            return None
        return _first_all(self.fields, expr.fields, 0, env, rest)

    def _may_match(self, expr):
        if not isinstance(expr, Tuple):
            return False
        if self.fields is None:
            return True
        return len(self.fields) == len(expr.fields) and all(p._may_match(f) for p, f in zip(self.fields, expr.fields))

    def dispatch_keys(self):
        return frozenset([Tuple])

    def _describe(self):
        return "is_tuple(" + ("None" if self.fields is None else "[" + ", ".join(map(repr, self.fields)) + "]") + ")"


class TupleGetItemPattern(Pattern):
    def __init__(self, tuple_pattern: Pattern, index: Optional[int] = None):
        super().__init__()
        if not isinstance(tuple_pattern, Pattern):
            raise PatternError(f"is_tuple_get_item takes a pattern, got {type(tuple_pattern).__name__}")
        self.tuple_pattern = tuple_pattern
        self.index = None if index is None else int(index)

    def _match_node(self, expr, env):
        if isinstance(expr, TupleGetItem) and (self.index is None or expr.index == self.index):
            yield from self.tuple_pattern._iter(expr.tuple_value, env)

    def _first_node(self, expr, env, rest):
        if isinstance(expr, TupleGetItem) and (self.index is None or expr.index == self.index):
            return self.tuple_pattern._first(expr.tuple_value, env, rest)
        return None

    def _may_match(self, expr):
        return (isinstance(expr, TupleGetItem) and (self.index is None or expr.index == self.index)
                and self.tuple_pattern._may_match(expr.tuple_value))

    def dispatch_keys(self):
        return frozenset([TupleGetItem])

    def _describe(self):
        return f"is_tuple_get_item({self.tuple_pattern!r}, {self.index})"


class FunctionPattern(Pattern):
    """A function (``fn (...) {...}`` or a global's definition); ``body=None`` matches any body."""

    def __init__(self, body: Optional[Pattern] = None):
        super().__init__()
        self.body = body

    def _match_node(self, expr, env):
        if isinstance(expr, Function):
            if self.body is None:
                yield env
            else:
                yield from self.body._iter(expr.body, env)

    def _first_node(self, expr, env, rest):
        if not isinstance(expr, Function):
            return None
        return rest(env) if self.body is None else self.body._first(expr.body, env, rest)

    def _may_match(self, expr):
        return isinstance(expr, Function) and (self.body is None or self.body._may_match(expr.body))

    def dispatch_keys(self):
        return frozenset([Function])

    def _describe(self):
        return "is_function()"


class LetPattern(Pattern):
    def __init__(self, value: Pattern, body: Pattern):
        super().__init__()
        self.value, self.body = value, body

    def _match_node(self, expr, env):
        if isinstance(expr, Let):
            for env1 in self.value._iter(expr.value, env):
                yield from self.body._iter(expr.body, env1)

    def _first_node(self, expr, env, rest):
        if not isinstance(expr, Let):
            return None
        body = self.body
        return self.value._first(expr.value, env, lambda env1: body._first(expr.body, env1, rest))

    def _may_match(self, expr):
        return isinstance(expr, Let) and self.value._may_match(expr.value) and self.body._may_match(expr.body)

    def dispatch_keys(self):
        return frozenset([Let])

    def _describe(self):
        return f"is_let({self.value!r}, {self.body!r})"


def _root_may_match(keys: Optional[frozenset], expr) -> bool:
    """False only if no pattern with dispatch keys ``keys`` can match ``expr`` (a graph node)."""
    if keys is None:
        return True
    kind = type(expr)
    if kind is Call:
        op = expr.op
        return ANY_CALL in keys or (isinstance(op, Op) and op.name in keys)
    return kind in keys or isinstance(expr, Op)  # an Op itself is matched only as a callee


class AltPattern(Pattern):
    def __init__(self, left: Pattern, right: Pattern):
        super().__init__()
        self.left, self.right = left, right
        # What each side's root must be: _first_node skips a side at once on other nodes.
        self._left_keys, self._right_keys = left.dispatch_keys(), right.dispatch_keys()
        # The quick test as one flat list of the alternatives below nested ``|`` (each with its
        # root keys): ``a | b | c | d`` is tested as a, b, c, d, not through three levels.
        self._alternatives = tuple(
            alt for side, keys in ((left, self._left_keys), (right, self._right_keys))
            for alt in (side._alternatives if type(side) is AltPattern else ((keys, side),)))

    def _ops(self):
        return self.left._ops() + self.right._ops()

    def _check_attr_names(self, attrs):
        # An attribute constraint on alternatives needs only one side to know the name.
        left, right = self.left._ops(), self.right._ops()
        if left and right:
            super()._check_attr_names(attrs)

    def _match_node(self, expr, env):
        if self.left._may_match(expr):
            yield from self.left._iter(expr, env)
        if self.right._may_match(expr):
            yield from self.right._iter(expr, env)

    def _first_node(self, expr, env, rest):
        # Only the sides' root test (not the recursive _may_match, which the nested
        # alternatives of a composite would repeat at every level).
        if _root_may_match(self._left_keys, expr):
            out = self.left._first(expr, env, rest)
            if out is not None:
                return out
        if _root_may_match(self._right_keys, expr):
            return self.right._first(expr, env, rest)
        return None

    def _may_match(self, expr):
        for keys, alternative in self._alternatives:
            if _root_may_match(keys, expr) and alternative._may_match(expr):
                return True
        return False

    def dispatch_keys(self):
        a, b = self.left.dispatch_keys(), self.right.dispatch_keys()
        if a is None or b is None:
            return None
        return a | b

    def _describe(self):
        return f"({self.left!r} | {self.right!r})"


class Match:
    """The result of a successful match: the root (``expr``) and the captured nodes.

    ``match["x"]`` is the node captured by ``.named("x")``; ``match[p]`` the node matched by the
    pattern object ``p``. Inside a rewrite, ``users``/``num_users`` tell how the matched nodes
    are used in the graph as it was at the start of the current sweep.
    """

    def __init__(self, expr: Expr, env: Dict, context=None):
        self.expr = expr
        self._env = env
        self.context = context

    def __getitem__(self, key):
        value = self._env.get(key)
        if value is None:
            names = sorted(k for k in self._env if isinstance(k, str))
            raise PatternError(f"the match has no capture {key!r}; captured: {', '.join(names) or 'none'}")
        return value

    def get(self, key, default=None):
        return self._env.get(key, default)

    def __contains__(self, key) -> bool:
        return key in self._env

    @property
    def names(self) -> Dict[str, Expr]:
        return {k: v for k, v in self._env.items() if isinstance(k, str)}

    def users(self, expr: Expr) -> Optional[List[Expr]]:
        """The nodes using ``expr`` (the function's result counts as a use by None), or None
        when unknown (outside a rewrite, or a node created during the current sweep)."""
        return None if self.context is None else self.context.users(expr)

    def num_users(self, expr: Expr) -> Optional[int]:
        u = self.users(expr)
        return None if u is None else len(u)

    def has_single_user(self, expr: Expr) -> bool:
        return self.num_users(expr) == 1

    def __repr__(self) -> str:
        return f"Match({type(self.expr).__name__}, captures={sorted(self.names)})"


# -- constructors --------------------------------------------------------------------------

def wildcard() -> Pattern:
    return WildcardPattern()


def is_op(*names: str) -> OpPattern:
    for n in names:
        if not isinstance(n, str):
            raise PatternError(f"is_op takes op names, got {type(n).__name__}")
    return OpPattern(names)


def is_constant() -> Pattern:
    return ConstantPattern()


def is_var(name: Optional[str] = None) -> Pattern:
    return VarPattern(name)


def is_expr(expr: Expr) -> Pattern:
    if not isinstance(expr, Expr):
        raise PatternError(f"is_expr takes an expression, got {type(expr).__name__}")
    return ExprPattern(expr)


def is_tuple(fields: Optional[Sequence[Pattern]] = None) -> Pattern:
    return TuplePattern(fields)


def is_tuple_get_item(tuple_pattern: Pattern, index: Optional[int] = None) -> Pattern:
    return TupleGetItemPattern(tuple_pattern, index)


def is_function(body: Optional[Pattern] = None) -> Pattern:
    return FunctionPattern(body)


def is_let(value: Pattern, body: Pattern) -> Pattern:
    return LetPattern(value, body)


def is_global() -> Pattern:
    return wildcard().where(lambda e: isinstance(e, GlobalVar))


def match(pattern: Pattern, expr: Expr) -> Optional[Match]:
    if not isinstance(pattern, Pattern):
        raise PatternError(f"match takes a pattern, got {type(pattern).__name__}")
    return pattern.match(expr)


__all__ = [
    "Pattern", "PatternError", "Match", "match", "wildcard", "is_op", "is_constant", "is_var", "is_expr",
    "is_tuple", "is_tuple_get_item", "is_function", "is_let", "is_global", "get_attr", "ANY_CALL",
]
