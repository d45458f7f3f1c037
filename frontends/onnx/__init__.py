"""The ONNX frontend: ``from_onnx(model_or_path, batch=None, shapes=None, opset=None) -> IRModule``."""

from .converters import CONVERTERS
from .errors import (DynamicShapeError, OnnxGraphError, OnnxImportError, OnnxLoadError, UnsupportedAttributeError,
                     UnsupportedOpsError)
from .importer import from_onnx, load_onnx, static_inputs


def supported_ops() -> list:
    """The ONNX op types (default domain) the importer converts."""
    return sorted(set(CONVERTERS) | {"Constant"})  # Constant nodes are folded


__all__ = ["from_onnx", "load_onnx", "static_inputs", "supported_ops", "OnnxImportError", "OnnxLoadError", "OnnxGraphError",
           "DynamicShapeError", "UnsupportedAttributeError", "UnsupportedOpsError"]
