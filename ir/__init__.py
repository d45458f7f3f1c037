"""The Relay-style IR of tidlx: types, nodes, op registry, inference, equality, text."""

from .bind_params import bind_params_by_name
from .errors import OpAttributeError, TensorTooLargeError, TidlxError, TidlxTypeError, UnknownOpError, VerifyError
from .expr import Call, Constant, Expr, Function, GlobalVar, Let, Tuple, TupleGetItem, Var, const
from .module import IRModule
from .op import Op, call, get_op, has_op, list_ops, define_op
from .structural import assert_structural_equal, structural_equal, structural_hash
from .types import FuncType, TensorType, TupleType, Type
from .verify import verify

__all__ = [
    "TidlxError", "TidlxTypeError", "TensorTooLargeError", "VerifyError", "UnknownOpError", "OpAttributeError",
    "Expr", "Var", "GlobalVar", "Constant", "Call", "Tuple", "TupleGetItem", "Function", "Let", "const",
    "IRModule", "Op", "call", "get_op", "has_op", "list_ops", "define_op",
    "structural_equal", "structural_hash", "assert_structural_equal",
    "Type", "TensorType", "TupleType", "FuncType", "verify", "bind_params_by_name",
]
