"""Reads a Relax function binding by binding (``from_relax``).

The entry function's parameters become tidlx Vars of the same names and types; each
``VarBinding`` of its dataflow blocks is converted by the converter of its Relax op
(``CONVERTERS``, relax op name -> ``convert(call, args) -> tidlx Expr``), with the shapes and
attributes read from the Relax call; constants become tidlx Constants. Anything else (a match
cast, a call of another function, an op without a converter) is a ``RelaxImportError`` naming
the binding and the op. The types are inferred once at the end.
"""

from __future__ import annotations

from typing import Callable, Dict, List

import numpy as np

from ...ir.errors import TidlxError
from ...ir.expr import Function, Tuple, TupleGetItem, Var, const
from ...ir.module import IRModule
from ...ir.op import call as op_call
from ...ir.types import TensorType, TupleType


class RelaxImportError(TidlxError):
    """A Relax module tidlx cannot read (the binding and op are named)."""


Converter = Callable[[object, List[object]], object]
CONVERTERS: Dict[str, Converter] = {}


def converter(*names: str):
    def register(fn):
        for name in names:
            CONVERTERS[name] = fn
        return fn
    return register


# -- reading TVM objects ---------------------------------------------------------------------------

def _ints(value):
    return None if value is None else tuple(int(v) for v in value)


def _int(value):
    return int(value) if value is not None else None


def _str(value):
    return "" if value is None else str(value)


def _same_layout(out_layout, layout) -> str:
    """Relax spells out the output layout; the IR leaves it empty when it is the input's."""
    return "" if out_layout is None or str(out_layout) == str(layout) else str(out_layout)


def _prim_value(expr):
    """The Python number of a Relax PrimValue (or an IntImm/FloatImm)."""
    value = getattr(expr, "value", expr)
    value = getattr(value, "value", value)
    return value


def _prim_tuple(expr):
    return tuple(int(_prim_value(f)) for f in expr.fields)


def _type_of(ty, where: str):
    kind = type(ty).__name__
    if kind == "TensorType":
        if ty.shape is None:
            raise RelaxImportError(f"{where}: a tensor of unknown shape (tidlx needs static shapes)")
        try:
            shape = tuple(int(d) for d in ty.shape)
        except TypeError:
            raise RelaxImportError(f"{where}: a symbolic shape {ty.shape} (tidlx needs static shapes)") from None
        return TensorType(shape, str(ty.dtype))
    if kind == "TupleType":
        return TupleType([_type_of(f, where) for f in ty.fields])
    raise RelaxImportError(f"{where}: values of type {ty} are not read")


def _is_constant(expr) -> bool:
    return type(expr).__name__ in ("GenericConst", "Constant")


def _out_shape(call):
    return tuple(int(d) for d in call.ty.shape)


# -- converters ------------------------------------------------------------------------------------

_SAME_NAME = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "floor_divide", "floor_mod",
              "mod", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
              "logical_or", "logical_xor", "logical_not", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "erf",
              "negative", "abs", "floor", "ceil", "round", "sign", "trunc", "sin", "cos", "zeros_like",
              "ones_like", "where")


def _same(name):
    def convert(call, args):
        return op_call(name, *args)
    return convert


for _name in _SAME_NAME:
    converter(f"relax.{_name}")(_same(_name))


@converter("relax.nn.relu")
def _relu(call, args):
    return op_call("nn.relu", args[0])


@converter("relax.nn.leakyrelu")
def _leaky_relu(call, args):
    return op_call("nn.leaky_relu", args[0], alpha=float(call.attrs.alpha))


@converter("relax.nn.conv2d")
def _conv2d(call, args):
    a = call.attrs
    return op_call("nn.conv2d", args[0], args[1], strides=_ints(a.strides), padding=_ints(a.padding),
                   dilation=_ints(a.dilation), groups=int(a.groups), data_layout=_str(a.data_layout),
                   kernel_layout=_str(a.kernel_layout), out_layout=_same_layout(a.out_layout, a.data_layout),
                   out_dtype=_str(a.out_dtype) if a.out_dtype is not None and str(a.out_dtype) != "void" else "")


@converter("relax.nn.batch_norm")
def _batch_norm(call, args):
    a = call.attrs
    if bool(a.training):
        raise RelaxImportError("R.nn.batch_norm with training=True: tidlx reads inference models")
    return op_call("nn.batch_norm", *args, axis=int(a.axis), epsilon=float(a.epsilon), center=bool(a.center),
                   scale=bool(a.scale))


def _pool(name):
    def convert(call, args):
        a = call.attrs
        attrs = dict(pool_size=_ints(a.pool_size), strides=_ints(a.strides), dilation=_ints(a.dilation),
                     padding=_ints(a.padding), ceil_mode=bool(a.ceil_mode), layout=_str(a.layout),
                     out_layout=_same_layout(a.out_layout, a.layout))
        if name == "nn.avg_pool2d":
            attrs["count_include_pad"] = bool(a.count_include_pad)
        return op_call(name, args[0], **attrs)
    return convert


converter("relax.nn.max_pool2d")(_pool("nn.max_pool2d"))
converter("relax.nn.avg_pool2d")(_pool("nn.avg_pool2d"))


@converter("relax.nn.adaptive_avg_pool2d")
def _adaptive_avg_pool2d(call, args):
    a = call.attrs
    return op_call("nn.adaptive_avg_pool2d", args[0], output_size=_ints(a.output_size), layout=_str(a.layout),
                   out_layout=_same_layout(a.out_layout, a.layout))


@converter("relax.nn.softmax")
def _softmax(call, args):
    return op_call("nn.softmax", args[0], axis=int(call.attrs.axis))


@converter("relax.nn.log_softmax")
def _log_softmax(call, args):
    return op_call("nn.log_softmax", args[0], axis=int(call.attrs.axis))


@converter("relax.reshape", "relax.flatten")
def _reshape(call, args):
    # Shapes are static: a reshape to its result's shape.
    return op_call("reshape", args[0], newshape=_out_shape(call))


@converter("relax.expand_dims")
def _expand_dims(call, args):
    ndim = len(_out_shape(call))
    axes = sorted(a % ndim for a in _ints(call.attrs.axis))
    if axes == list(range(axes[0], axes[0] + len(axes))):  # consecutive: Relay's expand_dims, as ONNX Unsqueeze
        return op_call("expand_dims", args[0], axis=axes[0], num_newaxis=len(axes))
    return op_call("reshape", args[0], newshape=_out_shape(call))


@converter("relax.squeeze")
def _squeeze(call, args):
    return op_call("squeeze", args[0], axis=_ints(call.attrs.axis))


@converter("relax.permute_dims")
def _permute_dims(call, args):
    return op_call("transpose", args[0], axes=_ints(call.attrs.axes))


@converter("relax.strided_slice")
def _strided_slice(call, args):
    axes, begin, end = (_prim_tuple(call.args[i]) for i in (1, 2, 3))
    strides = _prim_tuple(call.args[4]) if len(call.args) > 4 else tuple(1 for _ in axes)
    return op_call("strided_slice", args[0], begin=begin, end=end, strides=strides, axes=axes)


@converter("relax.concat")
def _concat(call, args):
    fields = args[0]
    return op_call("concatenate", fields if isinstance(fields, Tuple) else Tuple([fields]),
                   axis=int(call.attrs.axis))


@converter("relax.image.resize2d")
def _resize2d(call, args):
    a = call.attrs
    size = tuple(int(v) for v in call.args[1].values)
    return op_call("image.resize2d", args[0], size=size, roi=tuple(float(_prim_value(v)) for v in a.roi),
                   layout=_str(a.layout), method=_str(a.method),
                   coordinate_transformation_mode=_str(a.coordinate_transformation_mode),
                   rounding_method=_str(a.rounding_method), cubic_alpha=float(a.cubic_alpha),
                   cubic_exclude=int(a.cubic_exclude), extrapolation_value=float(a.extrapolation_value))


@converter("relax.matmul")
def _matmul(call, args):
    a, b = call.args
    ra, rb = len(a.ty.shape), len(b.ty.shape)
    if rb == 2:
        return op_call("nn.matmul", args[0], args[1])
    if ra == rb == 3:
        return op_call("nn.batch_matmul", args[0], args[1], transpose_b=False)
    raise RelaxImportError(f"R.matmul of ranks {ra} and {rb} is not read (2-D right operands, or two 3-D)")


@converter("relax.clip")
def _clip(call, args):
    return op_call("clip", args[0], a_min=float(_prim_value(call.args[1])), a_max=float(_prim_value(call.args[2])))


@converter("relax.astype")
def _astype(call, args):
    return op_call("cast", args[0], dtype=str(call.attrs.dtype))


def _reduce(name):
    def convert(call, args):
        a = call.attrs
        return op_call(name, args[0], axis=_ints(a.axis), keepdims=bool(a.keepdims))
    return convert


for _name in ("sum", "mean", "max", "min", "prod"):
    converter(f"relax.{_name}")(_reduce(_name))


# -- the walk --------------------------------------------------------------------------------------

def _convert_expr(expr, values: Dict[object, object], where: str):
    """The tidlx expression of a Relax argument (a variable, a constant, a tuple of them)."""
    kind = type(expr).__name__
    if expr in values:
        return values[expr]
    if _is_constant(expr):
        return const(np.asarray(expr.value.numpy()))
    if kind == "Tuple":
        fields = [_convert_expr(f, values, where) for f in expr.fields]
        return None if any(f is None for f in fields) else Tuple(fields)  # None: a tuple of numbers
    if kind == "TupleGetItem":
        return TupleGetItem(_convert_expr(expr.tuple_value, values, where), int(expr.index))
    if kind in ("ShapeExpr", "PrimValue", "StringImm", "DataTypeImm", "IntImm", "FloatImm"):
        return None  # read from the call by its converter
    if kind in ("Var", "DataflowVar"):
        raise RelaxImportError(f"{where}: %{expr.name} is not bound")
    raise RelaxImportError(f"{where}: a {kind} argument is not read")


def _convert_call(call, values, where: str):
    op = getattr(call, "op", None)
    name = getattr(op, "name", None)
    if type(op).__name__ != "Op" or name is None:
        raise RelaxImportError(f"{where}: calls of {type(op).__name__} {op} are not read (only Relax ops: "
                               f"legalized or external calls are TVM's own business)")
    convert = CONVERTERS.get(name)
    if convert is None:
        raise RelaxImportError(f"{where}: the Relax op {name} has no tidlx converter (tidlx reads "
                               f"{len(CONVERTERS)} ops: frontends/relax/importer.py CONVERTERS)")
    args = [_convert_expr(a, values, where) for a in call.args]
    try:
        return convert(call, args)
    except TidlxError as exc:
        if isinstance(exc, RelaxImportError):
            raise RelaxImportError(f"{where}: {exc}") from None
        raise RelaxImportError(f"{where}: {name}: {exc}") from None


def from_relax(tvm_module, entry: str = "main") -> IRModule:
    """The tidlx ``IRModule`` (``@main``) of the Relax function ``entry`` of ``tvm_module``."""
    try:
        fn = tvm_module[entry]
    except Exception:
        raise RelaxImportError(f"from_relax: the module has no function '{entry}'") from None
    if type(fn).__name__ != "Function":
        raise RelaxImportError(f"from_relax: '{entry}' is a {type(fn).__name__}, not a Relax function")
    values: Dict[object, object] = {}
    params = []
    for p in fn.params:
        var = Var(p.name, _type_of(p.ty, f"parameter %{p.name}"))
        values[p] = var
        params.append(var)
    body = fn.body
    blocks = getattr(body, "blocks", None)
    if blocks is None:
        raise RelaxImportError(f"from_relax: the body of '{entry}' is not a sequence of bindings")
    for block in blocks:
        for binding in block.bindings:
            where = f"{entry}: binding %{binding.var.name}"
            if type(binding).__name__ != "VarBinding":
                raise RelaxImportError(f"{where}: a {type(binding).__name__} is not read")
            value = binding.value
            if type(value).__name__ == "Call":
                values[binding.var] = _convert_call(value, values, where)
            else:
                values[binding.var] = _convert_expr(value, values, where)
    result = _convert_expr(body.body, values, f"{entry}: the result")
    mod = IRModule({"main": Function(params, result)})
    try:
        return mod.infer_types()
    except TidlxError as exc:
        raise RelaxImportError(f"from_relax: the converted module does not type: {exc}") from None
