"""The op registry: one record per op, with facets.

Each op is defined once, in the family file under ``ir/ops/`` that holds its attribute dataclass
(TVM's field names and defaults) and its type relation:

    @dataclass(frozen=True)
    class Conv2DAttrs: strides: tuple = (1, 1); ...

    define_op("nn.conv2d", num_inputs=2, attrs=Conv2DAttrs, type_rel=conv2d_rel)

Every other fact about an op is a *facet*: a value hung on the op by key, as TVM hangs
``FTVMCompute`` or ``target.<name>`` on its ops. Each facet is registered next to the code it
names, by the package that owns it:

    @register_op_attr("nn.conv2d", "emulator.reference")     # emulator/ registers its kernel
    def conv2d(args, attrs, out_type): ...

    get_op("nn.conv2d").get_attr("tidl.rule")               # backends/tidl/ registered this one

A package declares its facet keys once (``declare_facet``), so ``tidlx ops`` can list which ops
have which facets. Facets of a package exist once that package is imported; ``ir`` itself
registers only its own (``macs``).

A type relation takes ``(arg_types, attrs)`` and returns the output type, raising
``TidlxTypeError`` with a user-facing reason when the call is ill-typed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

from .errors import OpAttributeError, TidlxError, UnknownOpError, closest

TypeRelation = Callable[[Sequence[Any], Any], Any]

_MISSING = object()


@dataclass(frozen=True, eq=False)
class Op:
    """A registered primitive operator. One instance per name; compare by identity."""

    name: str
    num_inputs: int
    attrs_type: Optional[type]
    type_rel: TypeRelation
    arg_names: Tuple[str, ...] = ()
    #: TVM's fusion pattern kind: elemwise, broadcast, injective, comm_reduce,
    #: out_elemwise_fusable, tuple or opaque.
    pattern: str = "opaque"
    _facets: Dict[str, Any] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        return f"Op({self.name})"

    def make_attrs(self, values: Optional[Dict[str, Any]] = None, *, where: str = ""):
        """Builds this op's attribute object from keyword values, checking names."""
        return make_attrs(self, values or {}, where=where)

    def arity_error(self, n_args: int) -> Optional[str]:
        """Why a call with ``n_args`` arguments is ill-formed, or None."""
        if n_args == self.num_inputs:
            return None
        return f"{self.name} takes {self.num_inputs} input{'s' * (self.num_inputs != 1)}, got {n_args}"

    # -- facets ------------------------------------------------------------------------------
    def set_attr(self, key: str, value: Any, *, replace: bool = False) -> None:
        """Hangs ``value`` on this op under ``key``; a second value for the same key is an error
        unless ``replace`` (two packages claiming one facet of one op is a bug)."""
        if not replace and key in self._facets:
            raise ValueError(f"facet '{key}' of op '{self.name}' is registered twice")
        self._facets[key] = value

    def get_attr(self, key: str, default: Any = None) -> Any:
        return self._facets.get(key, default)

    def has_attr(self, key: str) -> bool:
        return key in self._facets

    def facet_keys(self) -> Tuple[str, ...]:
        return tuple(sorted(self._facets))

    def reset_attr(self, key: str) -> None:
        """Removes a facet (for tests that register and unregister)."""
        self._facets.pop(key, None)


_REGISTRY: Dict[str, Op] = {}

PATTERNS = ("elemwise", "broadcast", "injective", "comm_reduce", "out_elemwise_fusable", "tuple", "opaque")


def define_op(name: str, *, num_inputs: int, type_rel: TypeRelation, attrs: Optional[type] = None,
              arg_names: Sequence[str] = (), pattern: str = "opaque") -> Op:
    """Defines a primitive op of the IR (its name, arity, attributes and type relation).

    The public one-call registration of a custom op with every facet is ``tidlx.register_op``."""
    if name in _REGISTRY:
        raise ValueError(f"op '{name}' is registered twice")
    if attrs is not None and not dataclasses.is_dataclass(attrs):
        raise ValueError(f"attrs of '{name}' must be a frozen dataclass")
    if pattern not in PATTERNS:
        raise ValueError(f"pattern of '{name}' must be one of {PATTERNS}")
    if not isinstance(num_inputs, int) or num_inputs < 0:
        raise ValueError(f"num_inputs of '{name}' must be a count >= 0")
    op = Op(name, num_inputs, attrs, type_rel, tuple(arg_names), pattern)
    _REGISTRY[name] = op
    return op


def undefine_op(name: str) -> None:
    """Removes an op (custom ops in tests); built-in ops cannot be removed while in use elsewhere."""
    _REGISTRY.pop(name, None)


# -- facet keys ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class FacetKey:
    """A declared facet: its key, what it holds, and the package that registers it."""

    key: str
    description: str
    owner: str


_FACET_KEYS: Dict[str, FacetKey] = {}


def declare_facet(key: str, description: str, owner: str) -> str:
    """Declares a facet key (once per key; the same declaration again is a no-op). Returns ``key``."""
    known = _FACET_KEYS.get(key)
    new = FacetKey(key, description, owner)
    if known is not None and known != new:
        raise ValueError(f"facet '{key}' is declared twice ({known.owner} and {owner})")
    _FACET_KEYS[key] = new
    return key


def declared_facets() -> Dict[str, FacetKey]:
    return dict(_FACET_KEYS)


#: The ir's own marker facet: set on ops registered by users (``tidlx.register_op``), not built in.
CUSTOM_OP = declare_facet("custom", "a user's operator, registered with tidlx.register_op", "tidlx.ir.op")


def register_op_attr(op_names: Union[str, Sequence[str]], key: str, value: Any = _MISSING, *,
                     replace: bool = False):
    """Sets facet ``key`` of the named ops, like ``tvm.ir.register_op_attr``.

    ``register_op_attr("nn.relu", "tidl.layer", "ReLU")`` sets a value;
    ``@register_op_attr(("add", "subtract"), "emulator.reference")`` registers the decorated
    function. An unknown op name or an undeclared key is an error (no fact about an op that does
    not exist)."""
    names = (op_names,) if isinstance(op_names, str) else tuple(op_names)
    if key not in _FACET_KEYS:
        raise ValueError(f"facet '{key}' is not declared (declare_facet first)")
    ops = [get_op(n) for n in names]

    def register(v):
        for op in ops:
            op.set_attr(key, v, replace=replace)
        return v

    if value is _MISSING:
        return register
    register(value)
    return value


def ops_with_attr(key: str) -> Dict[str, Any]:
    """``{op name: facet value}`` of every op that has facet ``key``, by name."""
    _ensure_loaded()
    return {name: op._facets[key] for name, op in sorted(_REGISTRY.items()) if key in op._facets}


# -- lookup -------------------------------------------------------------------------------------

def _ensure_loaded() -> None:
    from . import ops  # noqa: F401  (defines every family and the ir's own facets)


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
    problem = op.arity_error(len(args))
    if problem:
        raise TidlxError(problem)
    return Call(op, args, make_attrs(op, attrs), layer=layer)
