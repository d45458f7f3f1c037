"""What a converter sees of one ONNX node: its inputs as IR expressions, attributes, opset.

Every call a converter builds goes through ``NodeContext.call``, which stamps the node's name
as the layer name and infers the call's type at once, so a bad shape is reported on the ONNX
node that caused it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import onnx

from ...ir import Call, Constant, Expr, Tuple, TupleGetItem, get_op
from ...ir.errors import TensorTooLargeError, TidlxError
from ...ir.op import make_attrs
from ...ir.types import TensorType
from .errors import OnnxImportError, OnnxTensorTooLargeError, UnsupportedAttributeError
from .graph import qualified_op_type


def constant(value, dtype: Optional[str] = None) -> Constant:
    """A Constant that keeps numpy's dtype (no float64 -> float32 narrowing unless asked)."""
    arr = np.asarray(value)
    if dtype is not None:
        arr = arr.astype(dtype)
    return Constant(arr)  # Constant copies (and keeps 0-d arrays 0-d)


def attribute_values(node: onnx.NodeProto, where: str = "") -> Dict[str, Any]:
    """Attribute name -> Python value (strings decoded, tensors as numpy arrays)."""
    out = {}
    for a in node.attribute:
        if a.ref_attr_name:
            continue  # only inside functions; the importer sees none
        try:
            out[a.name] = _attribute_value(a)
        except Exception as exc:  # onnx raises TypeError/ValueError/... on a malformed attribute
            raise OnnxImportError(f"{where or 'node ' + repr(node.name)}: attribute '{a.name}' cannot be read "
                                  f"({type(exc).__name__}: {exc})") from None
    return out


def _attribute_value(a: onnx.AttributeProto) -> Any:
    value = onnx.helper.get_attribute_value(a)
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    elif isinstance(value, list) and value and isinstance(value[0], bytes):
        value = [v.decode("utf-8", errors="replace") for v in value]
    elif isinstance(value, onnx.TensorProto):
        value = onnx.numpy_helper.to_array(value)
    return value


class NodeContext:
    def __init__(self, node: onnx.NodeProto, name: str, opset: int, inputs: Sequence[Optional[Expr]],
                 rebatch=None):
        self.node = node
        #: The ``batch=`` override that changes the model's exported batch (``graph.Rebatch``), or None.
        self.rebatch = rebatch
        self.name = name
        self.op_type = node.op_type
        self.opset = opset
        self._inputs = list(inputs)
        self.attrs = attribute_values(node, f"node '{name}' ({node.op_type})")
        self.num_outputs = len(node.output)

    # --- messages -------------------------------------------------------------------------

    @property
    def where(self) -> str:
        return f"node '{self.name}' ({qualified_op_type(self.node.domain, self.op_type)})"

    def unsupported(self, message: str) -> UnsupportedAttributeError:
        return UnsupportedAttributeError(f"{self.where}: {message}")

    def error(self, message: str) -> OnnxImportError:
        return OnnxImportError(f"{self.where}: {message}")

    # --- attributes -----------------------------------------------------------------------

    def attr(self, name: str, default=None):
        return self.attrs.get(name, default)

    def required_attr(self, name: str):
        if name not in self.attrs:
            raise self.error(f"attribute '{name}' is required")
        return self.attrs[name]

    def attr_ints(self, name: str, default=None) -> Optional[List[int]]:
        value = self.attrs.get(name)
        if value is None:
            return default
        return [int(v) for v in value]

    def attr_choice(self, name: str, default: str, allowed: Sequence[str]) -> str:
        value = self.attrs.get(name, default)
        if value not in allowed:
            raise self.unsupported(f"attribute {name}={value!r} is not supported (supported: "
                                   f"{', '.join(repr(a) for a in allowed)})")
        return value

    def require_attr_value(self, name: str, allowed, default) -> None:
        """Refuses any value of attribute ``name`` other than those in ``allowed``."""
        value = self.attrs.get(name, default)
        if value not in allowed:
            raise self.unsupported(f"attribute {name}={value!r} is not supported (only "
                                   f"{' or '.join(repr(a) for a in allowed)})")

    # --- inputs ---------------------------------------------------------------------------

    @property
    def num_inputs(self) -> int:
        return len(self._inputs)

    def has_input(self, i: int) -> bool:
        return i < len(self._inputs) and self._inputs[i] is not None

    def input(self, i: int, what: str = "") -> Expr:
        if not self.has_input(i):
            raise self.error(f"input {i}{' (' + what + ')' if what else ''} is required but missing")
        return self._inputs[i]

    def inputs(self) -> List[Expr]:
        return [x for x in self._inputs if x is not None]

    def is_const(self, i: int) -> bool:
        return self.has_input(i) and isinstance(self._inputs[i], Constant)

    def const(self, i: int, what: str) -> np.ndarray:
        """Input ``i`` as a numpy array; it must be known at import time."""
        x = self.input(i, what)
        if not isinstance(x, Constant):
            raise self.unsupported(f"input {i} ({what}, '{self.node.input[i]}') must be a constant or "
                                   f"computable at import time from shapes and constants")
        return x.data

    def const_ints(self, i: int, what: str, default=None) -> Optional[List[int]]:
        if not self.has_input(i):
            return default
        return [int(v) for v in np.asarray(self.const(i, what)).reshape(-1)]

    # --- types ----------------------------------------------------------------------------

    def type_of(self, x: Expr) -> TensorType:
        t = x.checked_type
        if not isinstance(t, TensorType):
            raise self.error(f"expected a tensor, got {t}")
        return t

    def shape(self, x: Expr) -> tuple:
        return self.type_of(x).shape

    def dtype(self, x: Expr) -> str:
        return self.type_of(x).dtype

    def ndim(self, x: Expr) -> int:
        return len(self.type_of(x).shape)

    # --- building -------------------------------------------------------------------------

    def call(self, op_name: str, *args: Expr, **attrs) -> Expr:
        """``op_name(*args, **attrs)`` named after this node, with its type inferred now."""
        op = get_op(op_name)
        problem = op.arity_error(len(args))
        if problem:
            raise self.error(f"internal: {problem}")
        try:
            expr = Call(op, args, make_attrs(op, attrs, where=self.where), layer=self.name)
            expr.checked_type
        except TidlxError as exc:
            message = str(exc).lstrip(": ")
            cls = OnnxTensorTooLargeError if isinstance(exc, TensorTooLargeError) else OnnxImportError
            raise cls(f"{self.where}: cannot build {op_name}: {message}") from None
        return expr

    def tuple(self, fields: Sequence[Expr]) -> Tuple:
        return Tuple(list(fields))

    def get(self, tup: Expr, index: int) -> Expr:
        item = TupleGetItem(tup, index)
        item.checked_type
        return item

    def const_expr(self, value, dtype: Optional[str] = None) -> Constant:
        return constant(value, dtype)

    def scalar(self, value, dtype: str) -> Constant:
        return constant(np.array(value, dtype=dtype))
