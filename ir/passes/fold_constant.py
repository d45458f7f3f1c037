"""FoldConstant: evaluates op calls whose inputs are all constants, through an evaluator hook.

As TVM's FoldConstant calls its interpreter through an interface, this pass calls the function
given to ``register_constant_evaluator``: ``fn(call, arg_arrays) -> array | tuple | None`` (None:
it has no kernel for the op; a TidlxError: it refuses these operands). ``tidlx.emulator``
registers its float reference kernels when it is imported (``ir`` imports nothing above it);
running the pass with no evaluator registered is an internal error naming that package.

What is not folded, and why:
  * calls of functions and globals (only op calls are evaluated), and anything inside a function
    of another compiler (``Compiler="tidl"``, ``Primitive``, ``Composite``) - that code belongs
    to its backend as it is;
  * ops the evaluator has no kernel for, and calls it refuses (a TidlxError from the kernel);
  * QNN ops (``qnn.*``) unless ``FoldConstant.fold_qnn`` is set: a backend such as TIDL needs
    to see ``qnn.quantize(weights)`` to recover the quantization parameters (as in TVM);
  * calls whose result is much larger than their inputs (``broadcast_to``/``zeros``/``tile`` of
    small inputs): more than ``FoldConstant.max_growth`` times the input bytes and above 64 KiB.
    Folding those would only bloat the module's constants. (TVM folds them; we keep them lazy.)

A projection of a tuple (``(%a, %b).1``) is replaced by the field, constant or not.
"""

from __future__ import annotations

import numpy as np

from ..errors import TidlxError
from ..expr import Call, Constant, Tuple
from ..op import Op
from ..pattern import ANY_CALL, Pattern, is_tuple, is_tuple_get_item
from ..rewrite import RewriteTable
from ..transform import PassContext, PassError, module_pass, register_config
from ..type_infer import describe_call
from ..types import TensorType, TupleType, numpy_dtype

register_config("FoldConstant.max_growth", float, 16.0,
                "do not fold a call whose result exceeds this many times its inputs' bytes (and 64 KiB)")
register_config("FoldConstant.fold_qnn", bool, False, "also fold qnn.* ops on constants")

#: Results up to this size are always folded, however much they grow.
ALWAYS_FOLD_BYTES = 64 * 1024

_evaluator = None


class NoConstantEvaluatorError(RuntimeError):
    """FoldConstant ran before any package registered a constant evaluator (an internal error:
    the code running the pass must import ``tidlx.emulator`` first)."""


def register_constant_evaluator(fn):
    """Sets the function FoldConstant evaluates constant calls with (the last one registered wins);
    returns the previous one (None if there was none)."""
    global _evaluator
    previous, _evaluator = _evaluator, fn
    return previous


def constant_evaluator():
    """The registered evaluator; raises NoConstantEvaluatorError when there is none."""
    if _evaluator is None:
        raise NoConstantEvaluatorError(
            "internal error: FoldConstant has no constant evaluator; import tidlx.emulator (it registers its "
            "reference kernels with tidlx.ir.passes.fold_constant.register_constant_evaluator) before running it")
    return _evaluator


def _all_args_constant(call) -> bool:
    return all(isinstance(a, Constant) for a in call.args)


def _is_call_of_constants(expr) -> bool:
    if not isinstance(expr, Call) or not isinstance(expr.op, Op):
        return False
    for arg in expr.args:
        if not isinstance(arg, Constant):
            return False
    return True


class _CallOfConstants(Pattern):
    """``is_op().where(_all_args_constant)`` as one structural test: any op call whose
    arguments are all constants. The rule is a candidate at every call of a model, so its
    quick test (``_may_match``) refuses the calls with a non-constant argument at once,
    before the matcher's generators run."""

    def _may_match(self, expr) -> bool:
        return _is_call_of_constants(expr)

    def _match_node(self, expr, env):
        if _is_call_of_constants(expr):
            yield env

    def dispatch_keys(self):
        return frozenset([ANY_CALL])

    def _describe(self):
        return "is_op().where(_all_args_constant)"


def _result_bytes(t) -> int:
    if isinstance(t, TensorType):
        return t.nbytes
    if isinstance(t, TupleType):
        return sum(_result_bytes(f) for f in t.fields)
    return 0


def _to_constant(value, t: TensorType, call) -> Constant:
    arr = np.asarray(value)
    if arr.shape != t.shape:
        raise PassError(f"FoldConstant: the kernel of {describe_call(call)} returned shape {arr.shape}, "
                        f"the op's type is {t}")
    want = numpy_dtype(t.dtype)
    if arr.dtype != want:
        arr = arr.astype(want)
    return Constant(arr)


def fold_constant_table(max_growth: float = 16.0, fold_qnn: bool = False) -> RewriteTable:
    evaluate = constant_evaluator()

    def fold_call(m):
        call = m.expr
        name = call.op.name
        if name.startswith("qnn.") and not fold_qnn:
            return None
        out_type = call.checked_type
        in_bytes = sum(a.data.nbytes for a in call.args)
        out_bytes = _result_bytes(out_type)
        if out_bytes > ALWAYS_FOLD_BYTES and out_bytes > max_growth * in_bytes:
            return None
        if isinstance(out_type, TupleType) and not all(isinstance(f, TensorType) for f in out_type.fields):
            return None
        try:
            result = evaluate(call, [a.data for a in call.args])
        except TidlxError:
            return None  # the kernel does not support this call; leave it for the backend
        except Exception as exc:  # a kernel bug: name the call that triggered it
            raise PassError(f"FoldConstant: evaluating {describe_call(call)} on constant inputs failed: "
                            f"{type(exc).__name__}: {exc}") from exc
        if result is None:
            return None  # no kernel for this op
        if isinstance(out_type, TupleType):
            if not isinstance(result, (tuple, list)) or len(result) != len(out_type.fields):
                raise PassError(f"FoldConstant: the kernel of {describe_call(call)} returned "
                                f"{type(result).__name__}, expected a {len(out_type.fields)}-tuple")
            return Tuple([_to_constant(r, t, call) for r, t in zip(result, out_type.fields)])
        return _to_constant(result, out_type, call)

    def project_tuple(m):
        return m.expr.tuple_value.fields[m.expr.index]

    return RewriteTable([
        ("fold_call", _CallOfConstants(), fold_call),
        ("project_tuple", is_tuple_get_item(is_tuple()), project_tuple),
    ], name="FoldConstant")


@module_pass("FoldConstant", opt_level=2)
def fold_constant(mod, ctx: PassContext):
    """Evaluates op calls on constant inputs with the registered constant evaluator."""
    table = fold_constant_table(float(ctx.get_config("FoldConstant.max_growth")),
                                bool(ctx.get_config("FoldConstant.fold_qnn")))
    return table.rewrite(mod)


FoldConstant = fold_constant
