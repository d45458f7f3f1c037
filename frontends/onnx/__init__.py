"""The ONNX frontend: ``from_onnx(model_or_path, batch=None, shapes=None, opset=None) -> IRModule``.

Each IR op's ``onnx.op_types`` facet lists the ONNX op types that import to it;
``register_custom_node`` maps nodes of a custom domain to an IR op."""

from .converters import CONVERTERS, ONNX_OP_TYPES
from .custom import register_custom_node, unregister_custom_node
from .errors import (ControlFlowError, DynamicShapeError, OnnxGraphError, OnnxImportError, OnnxLoadError,
                     OnnxRegistrationError, OnnxTensorTooLargeError, UnsupportedAttributeError, UnsupportedOpsError)
from .importer import from_onnx, load_onnx, static_inputs


def supported_ops() -> list:
    """The ONNX op types (default domain) the importer converts."""
    # Constant nodes are folded; an If with a constant condition is replaced by its taken branch
    return sorted(set(CONVERTERS) | {"Constant", "If"})


__all__ = ["from_onnx", "load_onnx", "static_inputs", "supported_ops", "register_custom_node", "unregister_custom_node",
           "ONNX_OP_TYPES", "OnnxImportError", "OnnxLoadError", "OnnxGraphError", "DynamicShapeError",
           "OnnxRegistrationError", "OnnxTensorTooLargeError", "ControlFlowError", "UnsupportedAttributeError",
           "UnsupportedOpsError"]
