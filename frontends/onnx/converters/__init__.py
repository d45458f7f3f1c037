"""ONNX op converters, one family per file, registered by ONNX op type.

A converter takes a ``NodeContext`` and returns the IR expression of the node's output, or a
list with one expression per output (``None`` for outputs it cannot produce). Its registration
names the IR ops it can build, and hangs the ONNX op type on each as the ``onnx.op_types`` facet:

    @converter("Relu", produces=("nn.relu",))
    @converter(produces={"Max": ("maximum", "copy"), "Min": ("minimum", "copy")})  # per op type

Nodes of other domains are mapped to IR ops with ``register_custom_node`` (``..custom``).
"""

from __future__ import annotations

from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

from ....ir.op import declare_facet, get_op, register_op_attr

ConvertFn = Callable

#: The facet: for each IR op, the ONNX op types (sorted; ``domain.OpType`` outside the default
#: domain) whose converters can produce it.
ONNX_OP_TYPES = declare_facet(
    "onnx.op_types", "the ONNX op types (sorted; domain.OpType outside the default domain) that import to this op",
    "tidlx.frontends.onnx")

#: ONNX op type (default domain) -> converter.
CONVERTERS: Dict[str, ConvertFn] = {}

#: (domain, op type) -> converter of a node of another domain (``register_custom_node``).
CUSTOM_CONVERTERS: Dict[Tuple[str, str], ConvertFn] = {}

#: Ops whose outputs are constants whatever their inputs (shapes are static).
CONST_OUTPUT_OPS = frozenset({"Shape", "Size"})

#: Inputs (by position) that must be known at import time because they fix output shapes or
#: attributes of the IR op: shapes, axes, pads, slice bounds, scales, an LSTM's sequence lengths;
#: an If's condition (the IR has no control flow: the importer takes the branch it names).
STATIC_OPERANDS = {
    "Reshape": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 3), "Resize": (1, 2, 3), "Upsample": (1,),
    "Split": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Tile": (1,), "Expand": (1,), "ConstantOfShape": (0,),
    "ReduceMean": (1,), "ReduceSum": (1,), "ReduceMax": (1,), "ReduceMin": (1,), "ReduceProd": (1,),
    "Dropout": (2,), "If": (0,), "LSTM": (4,), "TopK": (1,),
}

Produces = Union[Sequence[str], Mapping[str, Sequence[str]]]


def add_onnx_op_type(op_names: Sequence[str], onnx_op_type: str) -> None:
    """Adds ``onnx_op_type`` to the ``onnx.op_types`` facet of each named IR op (unknown names
    are errors)."""
    for name in op_names:
        known = get_op(name).get_attr(ONNX_OP_TYPES, ())
        register_op_attr(name, ONNX_OP_TYPES, tuple(sorted(set(known) | {onnx_op_type})), replace=True)


def remove_onnx_op_type(op_names: Sequence[str], onnx_op_type: str) -> None:
    """Undoes ``add_onnx_op_type`` (custom nodes unregistered in tests)."""
    for name in op_names:
        op = get_op(name)
        left = tuple(t for t in op.get_attr(ONNX_OP_TYPES, ()) if t != onnx_op_type)
        if left:
            op.set_attr(ONNX_OP_TYPES, left, replace=True)
        else:
            op.reset_attr(ONNX_OP_TYPES)


def _op_names(produces, owner: str) -> Tuple[str, ...]:
    if isinstance(produces, str) or not all(isinstance(n, str) for n in produces):
        raise TypeError(f"produces of {owner} must be a tuple of IR op names, got {produces!r}")
    return tuple(produces)


def converter(*op_types: str, produces: Produces):
    """Decorator: registers the function for those ONNX op types (default domain).

    ``produces`` lists the IR ops the converter can build, for all ``op_types``, or maps each op
    type to its own list (then the op types are the mapping's keys)."""
    if isinstance(produces, Mapping):
        if op_types and set(op_types) != set(produces):
            raise ValueError(f"op types {op_types} differ from the keys of produces {tuple(produces)}")
        by_type = {t: _op_names(ops, f"'{t}'") for t, ops in produces.items()}
    else:
        if not op_types:
            raise ValueError("converter() needs op types, or produces as a mapping by op type")
        by_type = {t: _op_names(produces, f"{op_types}") for t in op_types}
    for op_names in by_type.values():
        for name in op_names:
            get_op(name)  # every name checked before any facet is set

    def register(fn):
        for op_type, op_names in by_type.items():
            if op_type in CONVERTERS:
                raise ValueError(f"converter for '{op_type}' is registered twice")
            add_onnx_op_type(op_names, op_type)
            CONVERTERS[op_type] = fn
        return fn
    return register


def converter_for(domain: str, op_type: str, default_domains: Sequence[str]) -> Optional[ConvertFn]:
    """The converter of a node, or None when tidlx cannot import it."""
    if domain in default_domains:
        return CONVERTERS.get(op_type)
    return CUSTOM_CONVERTERS.get((domain, op_type))


from . import elemwise, integer, nn, quant, reduce, resize, rnn, tensor  # noqa: E402,F401  (registers every family)
