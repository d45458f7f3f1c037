"""Immutable expression nodes of the Relay-style IR.

Nodes compare and hash by identity (so they can key dicts in graph algorithms);
``tidlx.ir.structural_equal`` compares them by structure. A node's inferred type is
cached once in ``checked_type`` by type inference; no other field ever changes.
"""

from __future__ import annotations

from collections.abc import Mapping as _MappingABC
from types import MappingProxyType
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .op import Op  # op.py imports no node class, so no cycle
from .types import TensorType, Type


def _frozen_mapping(attrs: Optional[Mapping[str, Any]]) -> Mapping[str, Any]:
    return MappingProxyType(dict(attrs or {}))


class Expr:
    __slots__ = ("_checked_type",)

    def __init__(self):
        object.__setattr__(self, "_checked_type", None)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    @property
    def checked_type(self) -> Type:
        """The inferred type; inferred on demand for expressions that need no module."""
        if self._checked_type is None:
            from .type_infer import infer_expr_type

            infer_expr_type(self)
        return self._checked_type

    @property
    def has_type(self) -> bool:
        return self._checked_type is not None

    def _set_checked_type(self, ty: Type) -> None:
        object.__setattr__(self, "_checked_type", ty)

    # Structural identity is by object; see structural_equal for structure.
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __repr__(self) -> str:
        from .printer import expr_to_text

        try:
            return expr_to_text(self)
        except Exception:  # repr must never raise
            return f"<{type(self).__name__} at {id(self):#x}>"


class Var(Expr):
    """A local variable: a function parameter, a let binding, or a free variable."""

    __slots__ = ("name_hint", "type_annotation")

    def __init__(self, name_hint: str, type_annotation: Optional[Type] = None):
        super().__init__()
        object.__setattr__(self, "name_hint", str(name_hint))
        object.__setattr__(self, "type_annotation", type_annotation)
        if type_annotation is not None:
            self._set_checked_type(type_annotation)


class GlobalVar(Expr):
    """Names a function of an IRModule (``@name``)."""

    __slots__ = ("name_hint",)

    def __init__(self, name_hint: str):
        super().__init__()
        object.__setattr__(self, "name_hint", str(name_hint))


class Constant(Expr):
    """A constant tensor. Its data is a read-only numpy array."""

    __slots__ = ("data",)

    def __init__(self, data):
        super().__init__()
        arr = np.array(data, copy=True)
        if arr.dtype == np.float64 and not isinstance(data, np.ndarray):
            arr = arr.astype(np.float32)  # Python floats default to float32, as in Relay
        elif arr.dtype == np.int64 and not isinstance(data, np.ndarray):
            arr = arr.astype(np.int32)
        arr.setflags(write=False)
        object.__setattr__(self, "data", arr)
        self._set_checked_type(TensorType(arr.shape, _dtype_name(arr.dtype)))


def _dtype_name(dt: np.dtype) -> str:
    if dt == np.bool_:
        return "bool"
    return np.dtype(dt).name


class Call(Expr):
    """Applies an op, a function, a global or a closure to arguments.

    ``attrs`` is the op's frozen attribute dataclass (``None`` for ops without
    attributes); calls of functions may carry a plain mapping. ``layer`` is the
    user-facing layer name (the ONNX node name), kept through passes.
    """

    __slots__ = ("op", "args", "attrs", "layer")

    def __init__(self, op, args: Sequence[Expr], attrs=None, layer: Optional[str] = None):
        super().__init__()
        if not isinstance(op, (Op, Expr)):
            raise TypeError(f"Call op must be an Op or an expression, got {type(op).__name__}")
        args = tuple(args)
        for a in args:
            if not isinstance(a, Expr):
                raise TypeError(f"Call argument must be an Expr, got {type(a).__name__}")
        if attrs is not None and isinstance(attrs, _MappingABC):  # (typing's Mapping checks 2x slower)
            attrs = _frozen_mapping(attrs) if attrs else None
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "attrs", attrs)
        object.__setattr__(self, "layer", layer)

    @property
    def op_name(self) -> Optional[str]:
        op = self.op
        return op.name if isinstance(op, Op) else None


class Tuple(Expr):
    __slots__ = ("fields",)

    def __init__(self, fields: Sequence[Expr]):
        super().__init__()
        fields = tuple(fields)
        for f in fields:
            if not isinstance(f, Expr):
                raise TypeError(f"Tuple field must be an Expr, got {type(f).__name__}")
        object.__setattr__(self, "fields", fields)


class TupleGetItem(Expr):
    __slots__ = ("tuple_value", "index")

    def __init__(self, tuple_value: Expr, index: int):
        super().__init__()
        object.__setattr__(self, "tuple_value", tuple_value)
        object.__setattr__(self, "index", int(index))


class Function(Expr):
    """``fn (%params) -> ret_type { body }`` with function attributes
    (``Compiler="tidl"``, ``Primitive=1``, ``global_symbol=...``)."""

    __slots__ = ("params", "body", "ret_type", "attrs")

    def __init__(self, params: Sequence[Var], body: Expr, ret_type: Optional[Type] = None,
                 attrs: Optional[Mapping[str, Any]] = None):
        super().__init__()
        params = tuple(params)
        for p in params:
            if not isinstance(p, Var):
                raise TypeError("Function parameters must be Vars")
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "ret_type", ret_type)
        object.__setattr__(self, "attrs", _frozen_mapping(attrs))

    def with_attr(self, key: str, value) -> "Function":
        attrs = dict(self.attrs)
        attrs[key] = value
        return Function(self.params, self.body, self.ret_type, attrs)


class Let(Expr):
    __slots__ = ("var", "value", "body")

    def __init__(self, var: Var, value: Expr, body: Expr):
        super().__init__()
        object.__setattr__(self, "var", var)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "body", body)


ATOMIC = (Var, GlobalVar, Constant)


def const(value, dtype: Optional[str] = None) -> Constant:
    """A Constant from a Python or numpy value, optionally cast to ``dtype``."""
    arr = np.asarray(value)
    if dtype is not None:
        arr = arr.astype(dtype)
    elif arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype == np.int64 and not isinstance(value, np.ndarray):
        arr = arr.astype(np.int32)
    return Constant(arr)
