"""tidlx IR -> Relax (``relax.BlockBuilder``): ``to_relax(mod)``.

Each function the module's ``@main`` reaches is lowered into one Relax ``main`` in a dataflow
block: every op call through its ``tvm.lower`` facet (facet.py), tuples and projections as
Relax tuples, calls of function literals (TIDL composites) and of host global functions inlined
(their bodies lowered with the parameters bound to the arguments). What happens to a
``Compiler="tidl"`` function depends on ``tidl``:

* ``"external"`` (default): a ``R.call_dps_packed("tidlx.tidl_subgraph.<name>", args, out_types)``,
  which ``build.TvmModel`` backs with the subgraph run in tidlx (float or fixed point);
* ``"inline"``: its body lowered like the host part (the whole model in TVM-generated code).

Parameters keep their names and types; constants become Relax constants. The graph is walked
iteratively (models have long chains).
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np

from ...ir.errors import TidlxInternalError
from ...ir.expr import Call, Constant, Expr, Function, GlobalVar, Let, Tuple, TupleGetItem, Var
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.traversal import post_order
from ...ir.type_infer import describe_call
from ...ir.types import TensorType, TupleType
from .errors import TvmBackendError, TvmLoweringError, require_tvm
from . import lower as _lowerings  # noqa: F401  (registers every op's tvm.lower facet)
from .facet import TVM_LOWER

#: The prefix of the packed function that runs TIDL subgraph ``<name>``.
SUBGRAPH_FUNC_PREFIX = "tidlx.tidl_subgraph."

TIDL_MODES = ("external", "inline")


def subgraph_func_name(name: str) -> str:
    return SUBGRAPH_FUNC_PREFIX + name


def is_tidl_function(fn: Function) -> bool:
    return fn.attrs.get("Compiler") == "tidl"


class LowerContext:
    """What a lowering works with: the Relax/TE namespaces, the BlockBuilder, the call's place."""

    def __init__(self, bb):
        import tvm
        from tvm import relax, te, topi

        self.tvm = tvm
        self.bb = bb
        self.relax = relax
        self.op = relax.op
        self.te = te
        self.topi = topi
        self.tir = tvm.tirx
        self.where = ""

    # -- building ------------------------------------------------------------------------------
    def emit(self, expr):
        return self.bb.emit(expr)

    def emit_te(self, fn, *args, **kwargs):
        """``bb.emit_te``: TE compute ``fn`` over the Relax tensors in ``args``."""
        return self.bb.emit_te(fn, *args, **kwargs)

    def const(self, value, dtype: str):
        return self.relax.const(np.asarray(value, dtype=dtype), dtype)

    def scalar(self, value, dtype: str):
        """A 0-d Relax constant of ``dtype`` (for broadcasting arithmetic)."""
        return self.const(np.asarray(value).astype(dtype).reshape(()), dtype)

    # -- reading -------------------------------------------------------------------------------
    @staticmethod
    def shape(expr) -> tuple:
        return tuple(int(d) for d in expr.ty.shape)

    @staticmethod
    def dtype(expr) -> str:
        return str(expr.ty.dtype)

    def relax_type(self, ty):
        """The Relax type of a tidlx tensor or tuple type."""
        if isinstance(ty, TensorType):
            return self.relax.TensorType(tuple(int(d) for d in ty.shape), ty.dtype)
        if isinstance(ty, TupleType):
            return self.relax.TupleType([self.relax_type(f) for f in ty.fields])
        raise TvmLoweringError(f"{self.where or 'to_relax'}: values of type {ty} have no Relax form")

    def fail(self, reason: str):
        """A TvmLoweringError naming the call being lowered."""
        raise TvmLoweringError(f"{self.where}: {reason}")


class _FunctionLowerer:
    """Lowers function bodies into the BlockBuilder's current dataflow block."""

    def __init__(self, mod: IRModule, ctx: LowerContext, tidl: str):
        self.mod = mod
        self.ctx = ctx
        self.tidl = tidl
        self.depth = 0

    def lower(self, body: Expr, env: Dict[Expr, object], fn_name: str):
        """The Relax value of ``body`` with the free variables bound by ``env``."""
        relax = self.ctx.relax
        values: Dict[Expr, object] = dict(env)
        for node in post_order(body, enter_functions=False):
            if node in values:
                continue
            if isinstance(node, Var):
                raise TvmLoweringError(f"@{fn_name}: variable %{node.name_hint} is not bound (a free variable)")
            if isinstance(node, Constant):
                values[node] = relax.const(np.ascontiguousarray(node.data), node.checked_type.dtype)
            elif isinstance(node, (GlobalVar, Function)):
                continue  # lowered where they are called
            elif isinstance(node, Tuple):
                values[node] = relax.Tuple([self._value(values, f) for f in node.fields])
            elif isinstance(node, TupleGetItem):
                tup = self._value(values, node.tuple_value)
                values[node] = tup.fields[node.index] if isinstance(tup, relax.Tuple) else \
                    self.ctx.emit(relax.TupleGetItem(tup, node.index))
            elif isinstance(node, Call):
                values[node] = self._call(node, values, fn_name)
            elif isinstance(node, Let):
                raise TvmLoweringError(f"@{fn_name}: let bindings are not lowered to Relax (tidlx's frontends "
                                       "give graph form; bind the value directly)")
            else:
                raise TidlxInternalError(f"to_relax: unexpected node {type(node).__name__} in @{fn_name}")
        return self._value(values, body)

    def _value(self, values, node):
        try:
            return values[node]
        except KeyError:
            raise TidlxInternalError(f"to_relax: a {type(node).__name__} was used before it was lowered") from None

    def _call(self, call: Call, values, fn_name: str):
        args = [self._value(values, a) if not isinstance(a, (Function, GlobalVar)) else None for a in call.args]
        if isinstance(call.op, Op):
            return self._op_call(call, args, fn_name)
        if isinstance(call.op, Function):
            return self._inline(call.op, args, fn_name, "a function literal")
        if isinstance(call.op, GlobalVar):
            name = call.op.name_hint
            if name not in self.mod:
                raise TvmLoweringError(f"@{fn_name}: call of @{name}, which the module does not define")
            callee = self.mod[name]
            if is_tidl_function(callee) and self.tidl == "external":
                return self._external(name, callee, args)
            return self._inline(callee, args, fn_name, f"@{name}")
        raise TvmLoweringError(f"@{fn_name}: calls of a {type(call.op).__name__} (a closure) are not lowered")

    def _op_call(self, call: Call, args, fn_name: str):
        op = call.op
        lower = op.get_attr(TVM_LOWER)
        where = f"@{fn_name}: {describe_call(call)}"
        if lower is None:
            raise TvmLoweringError(
                f"{where}: op {op.name} has no TVM lowering (a 'tvm.lower' facet); a custom op gets one "
                f"from tidlx.register_op(..., te_compute=...)")
        relax = self.ctx.relax
        # A tuple-typed argument reaches the lowering as the list of its fields.
        lowered_args: List[object] = []
        for ir_arg, value in zip(call.args, args):
            if isinstance(ir_arg.checked_type, TupleType):
                if isinstance(value, relax.Tuple):
                    lowered_args.append(list(value.fields))
                else:
                    lowered_args.append([self.ctx.emit(relax.TupleGetItem(value, i))
                                         for i in range(len(ir_arg.checked_type.fields))])
            else:
                lowered_args.append(value)
        self.ctx.where = where
        try:
            out = lower(self.ctx, call, lowered_args)
            if not isinstance(out, (relax.Tuple, relax.Var)):
                out = self.ctx.emit(out)
        except TvmBackendError:
            raise
        except Exception as exc:  # a TVM error inside a lowering is ours: the IR call was well typed
            raise TidlxInternalError(f"to_relax: lowering {where} failed: {type(exc).__name__}: {exc}") from exc
        if isinstance(out, relax.Tuple):
            return out
        self._check_type(out, call.checked_type, where)
        return out

    def _check_type(self, value, ty, where: str):
        """A lowering must produce the IR's type exactly (a silent shape change would misplace data)."""
        if isinstance(ty, TensorType):
            got = (self.ctx.shape(value), self.ctx.dtype(value))
            want = (tuple(int(d) for d in ty.shape), ty.dtype)
            if got != want:
                raise TidlxInternalError(f"to_relax: {where} lowered to {got}, the IR types it {want}")

    def _inline(self, fn: Function, args, fn_name: str, what: str):
        if len(args) != len(fn.params):
            raise TvmLoweringError(f"@{fn_name}: {what} takes {len(fn.params)} arguments, got {len(args)}")
        self.depth += 1
        if self.depth > 64:
            raise TvmLoweringError(f"@{fn_name}: functions nest or recurse deeper than 64 levels at {what}")
        try:
            return self.lower(fn.body, dict(zip(fn.params, args)), fn.attrs.get("global_symbol", fn_name))
        finally:
            self.depth -= 1

    def _external(self, name: str, fn: Function, args):
        relax = self.ctx.relax
        ret = fn.body.checked_type
        outs = [self.ctx.relax_type(t) for t in (ret.fields if isinstance(ret, TupleType) else (ret,))]
        for p, a in zip(fn.params, args):
            if not isinstance(p.checked_type, TensorType):
                raise TvmLoweringError(f"@{name}: TIDL subgraph parameter %{p.name_hint} is not a tensor")
        call = relax.op.call_dps_packed(subgraph_func_name(name), list(args),
                                        outs if isinstance(ret, TupleType) else outs[0])
        return self.ctx.emit(call)


def to_relax(mod: IRModule, *, tidl: str = "external", entry: str = "main"):
    """The Relax ``tvm.IRModule`` of ``mod``'s ``@entry`` (named ``main``), built with a BlockBuilder.

    ``tidl``: ``"external"`` (TIDL subgraphs as packed calls, see the module doc) or ``"inline"``."""
    require_tvm()
    if not isinstance(mod, IRModule):
        raise TvmBackendError(f"to_relax takes a tidlx IRModule (tidlx.load gives one), got {type(mod).__name__}")
    if tidl not in TIDL_MODES:
        raise TvmBackendError(f"to_relax: tidl must be one of {', '.join(TIDL_MODES)}, got {tidl!r}")
    if entry not in mod:
        raise TvmBackendError(f"to_relax: the module has no @{entry}")
    from tvm import relax

    mod.infer_types()
    fn = mod[entry]
    bb = relax.BlockBuilder()
    ctx = LowerContext(bb)
    params = []
    for p in fn.params:
        ctx.where = f"@{entry}: parameter %{p.name_hint}"
        params.append(relax.Var(p.name_hint, ctx.relax_type(p.checked_type)))
    lowerer = _FunctionLowerer(mod, ctx, tidl)
    with bb.function("main", params):
        with bb.dataflow():
            result = lowerer.lower(fn.body, dict(zip(fn.params, params)), entry)
            if not isinstance(result, relax.Var) or isinstance(result, relax.DataflowVar):
                result = bb.emit_output(result)
        bb.emit_func_output(result)
    return bb.get()


__all__ = ["to_relax", "LowerContext", "SUBGRAPH_FUNC_PREFIX", "subgraph_func_name", "is_tidl_function",
           "TIDL_MODES"]
