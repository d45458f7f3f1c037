"""Structural equality and hashing of expressions and modules.

Equality is graph-aware: two expressions are equal when a one-to-one map between their
nodes matches kinds, ops, attributes, types and constants, with variables matched by where
they are bound (so names do not matter) and shared nodes matched to shared nodes. Layer
names are metadata, like TVM's spans, and are compared only with ``compare_layers=True``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Dict

import numpy as np

from .expr import Call, Constant, Expr, Function, GlobalVar, Let, Tuple, TupleGetItem, Var
from .op import Op
from .traversal import children, post_order


def _attrs_equal(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if dataclasses.is_dataclass(a) != dataclasses.is_dataclass(b):
        return False
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and a == b
    return dict(a) == dict(b)


def _const_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


class _Equal:
    def __init__(self, compare_layers: bool):
        self.compare_layers = compare_layers
        self.lhs_to_rhs: Dict[int, Expr] = {}
        self.rhs_to_lhs: Dict[int, Expr] = {}

    def bind(self, a: Expr, b: Expr) -> bool:
        """Records a <-> b; False if either side is already paired with something else."""
        pa, pb = self.lhs_to_rhs.get(id(a)), self.rhs_to_lhs.get(id(b))
        if pa is not None or pb is not None:
            return pa is b and pb is a
        self.lhs_to_rhs[id(a)] = b
        self.rhs_to_lhs[id(b)] = a
        return True

    def equal(self, a: Expr, b: Expr) -> bool:
        work = [(a, b)]
        while work:
            x, y = work.pop()
            already = self.lhs_to_rhs.get(id(x))
            if already is not None:
                if already is not y:
                    return False
                continue
            if type(x) is not type(y):
                return False
            if isinstance(x, Var):
                if x.type_annotation != y.type_annotation:
                    return False
                # Bound vars were paired at their binder; a var reached first here is free.
                if not self.bind(x, y):
                    return False
                continue
            if isinstance(x, GlobalVar):
                # a reference to a module function by name: two GlobalVar objects of one name are
                # the same function (the parser shares one per name, builders may not)
                if x.name_hint != y.name_hint:
                    return False
                continue
            if not self.bind(x, y):
                return False
            if isinstance(x, Constant):
                if not _const_equal(x.data, y.data):
                    return False
            elif isinstance(x, Call):
                if isinstance(x.op, Op) or isinstance(y.op, Op):
                    if x.op is not y.op:
                        return False
                else:
                    work.append((x.op, y.op))
                if len(x.args) != len(y.args) or not _attrs_equal(x.attrs, y.attrs):
                    return False
                if self.compare_layers and x.layer != y.layer:
                    return False
                work.extend(zip(x.args, y.args))
            elif isinstance(x, Tuple):
                if len(x.fields) != len(y.fields):
                    return False
                work.extend(zip(x.fields, y.fields))
            elif isinstance(x, TupleGetItem):
                if x.index != y.index:
                    return False
                work.append((x.tuple_value, y.tuple_value))
            elif isinstance(x, Function):
                if len(x.params) != len(y.params) or x.ret_type != y.ret_type:
                    return False
                if dict(x.attrs) != dict(y.attrs):
                    return False
                for p, q in zip(x.params, y.params):
                    if p.type_annotation != q.type_annotation or not self.bind(p, q):
                        return False
                work.append((x.body, y.body))
            elif isinstance(x, Let):
                if x.var.type_annotation != y.var.type_annotation or not self.bind(x.var, y.var):
                    return False
                work.extend([(x.body, y.body), (x.value, y.value)])
            else:
                return False
        return True


def structural_equal(a, b, compare_layers: bool = False) -> bool:
    """True when two expressions, or two IRModules, have the same structure."""
    from .module import IRModule

    if isinstance(a, IRModule) or isinstance(b, IRModule):
        if not (isinstance(a, IRModule) and isinstance(b, IRModule)):
            return False
        if set(a.functions) != set(b.functions):
            return False
        return all(_Equal(compare_layers).equal(a[name], b[name]) for name in a.functions)
    return _Equal(compare_layers).equal(a, b)


def assert_structural_equal(a, b, compare_layers: bool = False) -> None:
    """Like ``structural_equal``, but raises with both texts side by side when they differ."""
    if not structural_equal(a, b, compare_layers=compare_layers):
        raise AssertionError(f"not structurally equal:\n--- lhs\n{a}\n--- rhs\n{b}")


def _h(*parts) -> int:
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def structural_hash(x) -> int:
    """A hash consistent with ``structural_equal`` (equal structures hash equally),
    stable across runs and processes."""
    from .module import IRModule

    if isinstance(x, IRModule):
        return _h("module", tuple(sorted((name, structural_hash(fn)) for name, fn in x.functions.items())))
    memo: Dict[int, int] = {}
    for node in post_order(x):
        kids = tuple(memo[id(c)] for c in children(node))
        if isinstance(node, Var):
            h = _h("var", str(node.type_annotation))
        elif isinstance(node, GlobalVar):
            h = _h("global", node.name_hint)
        elif isinstance(node, Constant):
            h = _h("const", node.data.dtype.str, node.data.shape,
                   hashlib.blake2b(node.data.tobytes(), digest_size=8).hexdigest())
        elif isinstance(node, Call):
            op = node.op.name if isinstance(node.op, Op) else None
            attrs = repr(node.attrs) if dataclasses.is_dataclass(node.attrs) else repr(sorted(dict(node.attrs or {}).items()))
            h = _h("call", op, attrs, kids)
        elif isinstance(node, Tuple):
            h = _h("tuple", kids)
        elif isinstance(node, TupleGetItem):
            h = _h("proj", node.index, kids)
        elif isinstance(node, Function):
            h = _h("fn", tuple(str(p.type_annotation) for p in node.params), str(node.ret_type),
                   sorted((k, repr(v)) for k, v in node.attrs.items()), kids)
        elif isinstance(node, Let):
            h = _h("let", str(node.var.type_annotation), kids)
        else:
            h = _h(type(node).__name__)
        memo[id(node)] = h
    return memo[id(x)]
