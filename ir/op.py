"""The op registry.

Each op is registered once, in the family file under ``ir/ops/`` that defines its
attribute dataclass (TVM's field names and defaults) and its type relation:

    @dataclass(frozen=True)
    class Conv2DAttrs: strides: tuple = (1, 1); ...

    register_op("nn.conv2d", num_inputs=2, attrs=Conv2DAttrs, type_rel=conv2d_rel)

A type relation takes ``(arg_types, attrs)`` and returns the output type, raising
``TidlxTypeError`` with a user-facing reason when the call is ill-typed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from .errors import OpAttributeError, TidlxError, UnknownOpError, closest

TypeRelation = Callable[[Sequence[Any], Any], Any]

#: ``num_inputs`` value for ops taking any number of inputs.
VARIADIC = -1


@dataclass(frozen=True, eq=False)
class Op:
    """A registered primitive operator. One instance per name; compare by identity."""

    name: str
    num_inputs: int
    attrs_type: Optional[type]
    type_rel: TypeRelation
    arg_names: Tuple[str, ...] = ()
    family: str = ""
    description: str = ""
    #: TVM's fusion pattern kind: elemwise, broadcast, injective, comm_reduce,
    #: out_elemwise_fusable, tuple or opaque.
    pattern: str = "opaque"

    def __repr__(self) -> str:
        return f"Op({self.name})"

    def make_attrs(self, values: Optional[Dict[str, Any]] = None, *, where: str = ""):
        """Builds this op's attribute object from keyword values, checking names."""
        return make_attrs(self, values or {}, where=where)


_REGISTRY: Dict[str, Op] = {}


PATTERNS = ("elemwise", "broadcast", "injective", "comm_reduce", "out_elemwise_fusable", "tuple", "opaque")


def register_op(name: str, *, num_inputs: int, type_rel: TypeRelation, attrs: Optional[type] = None,
                arg_names: Sequence[str] = (), description: str = "", pattern: str = "opaque") -> Op:
    if name in _REGISTRY:
        raise ValueError(f"op '{name}' is registered twice")
    if attrs is not None and not dataclasses.is_dataclass(attrs):
        raise ValueError(f"attrs of '{name}' must be a frozen dataclass")
    if pattern not in PATTERNS:
        raise ValueError(f"pattern of '{name}' must be one of {PATTERNS}")
    family = type_rel.__module__.rsplit(".", 1)[-1]
    op = Op(name, num_inputs, attrs, type_rel, tuple(arg_names), family, description, pattern)
    _REGISTRY[name] = op
    return op


def _ensure_loaded() -> None:
    from . import ops  # noqa: F401  (registers every family)


def get_op(name: str) -> Op:
    _ensure_loaded()
    op = _REGISTRY.get(name)
    if op is None:
        raise UnknownOpError(name, _REGISTRY.keys())
    return op


def has_op(name: str) -> bool:
    _ensure_loaded()
    return name in _REGISTRY


def list_ops() -> list:
    _ensure_loaded()
    return sorted(_REGISTRY)


def _normalize(value):
    """Lists become tuples (attribute values are hashable and immutable)."""
    if isinstance(value, (list, tuple)):
        return tuple(_normalize(v) for v in value)
    return value


def make_attrs(op: Op, values: Dict[str, Any], *, where: str = ""):
    place = f" at {where}" if where else ""
    if op.attrs_type is None:
        if values:
            raise OpAttributeError(f"{op.name}{place} takes no attributes, got {', '.join(sorted(values))}")
        return None
    known = {f.name: f for f in fields(op.attrs_type)}
    for key in values:
        if key not in known:
            hint = closest(key, known)
            extra = f"; did you mean {', '.join(hint)}?" if hint else f"; it takes {', '.join(known) or 'none'}"
            raise OpAttributeError(f"{op.name}{place} has no attribute '{key}'{extra}")
    try:
        return op.attrs_type(**{k: _normalize(v) for k, v in values.items()})
    except (TypeError, ValueError) as exc:
        raise OpAttributeError(f"{op.name}{place}: bad attribute value: {exc}") from None


def non_default_attrs(attrs) -> Dict[str, Any]:
    """The attributes that differ from the dataclass defaults, in declaration order."""
    if attrs is None:
        return {}
    if not dataclasses.is_dataclass(attrs):
        return dict(attrs)
    out = {}
    for f in fields(attrs):
        value = getattr(attrs, f.name)
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
        if default is dataclasses.MISSING or value != default or type(value) is not type(default):
            out[f.name] = value
    return out


def call(name: str, *args, layer: Optional[str] = None, **attrs):
    """Builds ``Call(op, args, attrs)`` by op name: ``call("nn.relu", x)``."""
    from .expr import Call

    op = get_op(name)
    if op.num_inputs != VARIADIC and len(args) != op.num_inputs:
        raise TidlxError(f"{name} takes {op.num_inputs} inputs, got {len(args)}")
    return Call(op, args, make_attrs(op, attrs), layer=layer)
