"""Nodes of custom domains: ``register_custom_node(domain, op_type, op_name)`` maps each such node
to one call of an IR op (``tidlx.register_op`` calls it for custom ops).

The node's inputs become the call's arguments, in order; its attributes become the op's
attributes, by name, or through ``attrs_from_node(attributes) -> dict`` when the names or values
differ. A node with several outputs takes them from the op's tuple result.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from ...ir.errors import TidlxError
from ...ir.op import get_op, ops_with_attr
from ...ir.types import TupleType
from .context import NodeContext
from .converters import CUSTOM_CONVERTERS, ONNX_OP_TYPES, add_onnx_op_type, remove_onnx_op_type
from .errors import OnnxImportError, OnnxRegistrationError
from .graph import DEFAULT_DOMAINS, qualified_op_type

AttrsFromNode = Callable[[Dict[str, Any]], Dict[str, Any]]


def register_custom_node(domain: str, op_type: str, op_name: str,
                         attrs_from_node: Optional[AttrsFromNode] = None) -> None:
    """Imports each node ``op_type`` of ``domain`` as one call of the IR op ``op_name``."""
    where = f"custom ONNX node {domain!r}/{op_type!r}"
    if not isinstance(domain, str) or not isinstance(op_type, str) or not op_type:
        raise OnnxRegistrationError(f"{where}: the domain and the op type must be strings (the op type not empty)")
    if domain in DEFAULT_DOMAINS:
        raise OnnxRegistrationError(f"{where}: the default ONNX domain has built-in converters; register nodes of "
                                    f"your own domain (e.g. 'com.example')")
    if (domain, op_type) in CUSTOM_CONVERTERS:
        raise OnnxRegistrationError(f"{where} is registered twice")
    if attrs_from_node is not None and not callable(attrs_from_node):
        raise OnnxRegistrationError(f"{where}: attrs_from_node must be a function (attributes -> dict), got "
                                    f"{type(attrs_from_node).__name__}")
    try:
        op = get_op(op_name)
    except TidlxError as exc:
        raise OnnxRegistrationError(f"{where}: {exc}") from None

    def convert(ctx: NodeContext):
        if ctx.num_inputs != op.num_inputs or not all(ctx.has_input(i) for i in range(ctx.num_inputs)):
            raise ctx.error(f"{op.name} takes {op.num_inputs} input(s), the node has {ctx.num_inputs}"
                            f"{' (some empty)' if ctx.num_inputs == op.num_inputs else ''}")
        attrs = dict(ctx.attrs)
        if attrs_from_node is not None:
            try:
                attrs = attrs_from_node(attrs)
            except TidlxError:
                raise
            except Exception as exc:
                raise OnnxImportError(f"{ctx.where}: attrs_from_node of {op.name} failed: "
                                      f"{type(exc).__name__}: {exc}") from exc
            if not isinstance(attrs, dict):
                raise OnnxImportError(f"{ctx.where}: attrs_from_node of {op.name} returned a "
                                      f"{type(attrs).__name__}, not a dict")
        out = ctx.call(op.name, *ctx.inputs(), **attrs)
        if not isinstance(out.checked_type, TupleType):
            return out
        return [ctx.get(out, k) for k in range(len(out.checked_type.fields))]

    add_onnx_op_type((op.name,), qualified_op_type(domain, op_type))
    CUSTOM_CONVERTERS[(domain, op_type)] = convert


def unregister_custom_node(domain: str, op_type: str) -> None:
    """Undoes ``register_custom_node`` (a no-op when the node type is not registered)."""
    if CUSTOM_CONVERTERS.pop((domain, op_type), None) is None:
        return
    name = qualified_op_type(domain, op_type)
    # By facet rather than by op name: the op may already be undefined.
    remove_onnx_op_type([op for op, types in ops_with_attr(ONNX_OP_TYPES).items() if name in types], name)
