"""Errors of the ONNX importer. Each names the file, node, input or attribute at fault."""

from __future__ import annotations

from typing import Dict, List

from ...ir.errors import TensorTooLargeError, TidlxError


class OnnxImportError(TidlxError):
    """Base of every error the ONNX importer raises."""


class OnnxTensorTooLargeError(OnnxImportError, TensorTooLargeError):
    """A node's value would need more bytes than the tensor budget (TIDLX_MAX_TENSOR_BYTES)."""


class OnnxLoadError(OnnxImportError):
    """The file cannot be read or is not a valid ONNX model."""


class OnnxGraphError(OnnxImportError):
    """The graph is malformed: an undefined input, a cycle, a missing output."""


class DynamicShapeError(OnnxImportError):
    """An input dimension is not known and no override (batch= or shapes=) fixes it."""


class UnsupportedAttributeError(OnnxImportError):
    """A node uses an attribute value (or input form) tidlx cannot import."""


class ControlFlowError(OnnxImportError):
    """A control-flow node (an If) whose branch cannot be chosen at import time: the IR has no
    control flow."""


class OnnxRegistrationError(TidlxError):
    """A custom-node registration that cannot hold (default domain, unknown IR op, twice)."""


class UnsupportedOpsError(OnnxImportError):
    """The model uses op types tidlx cannot import; lists all of them with their nodes."""

    def __init__(self, nodes_by_op: Dict[str, List[str]]):
        self.nodes_by_op = {op: list(nodes) for op, nodes in sorted(nodes_by_op.items())}
        parts = []
        for op, nodes in self.nodes_by_op.items():
            shown = ", ".join(f"'{n}'" for n in nodes[:8])
            more = f" and {len(nodes) - 8} more" if len(nodes) > 8 else ""
            parts.append(f"{op} (node{'s' if len(nodes) > 1 else ''} {shown}{more})")
        count = len(self.nodes_by_op)
        # a dotted name is a node of a custom domain: the user's own op, imported once registered
        hint = ("; a custom domain's node imports once its op is registered: tidlx.register_op(..., "
                "onnx='domain/OpType') (docs/custom_ops.md)") if any("." in op for op in self.nodes_by_op) else ""
        super().__init__(f"the model uses {count} unsupported ONNX op type{'s' if count > 1 else ''}: "
                         + "; ".join(parts) + hint)
