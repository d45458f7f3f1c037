"""The ``tvm.lower`` facet: how one op becomes Relax.

A lowering is ``lower(ctx, call, args) -> relax expression``: ``call`` is the typed tidlx call
(attributes, ``call.checked_type``), ``args`` its arguments already lowered (a tuple-typed
argument, e.g. of ``concatenate``, as a list of its fields), ``ctx`` a ``LowerContext``
(convert.py) that gives the Relax and TE namespaces and emits bindings. Family files register
them by op name, as the TIDL backend registers its rules:

    @lowers("nn.relu")
    def relu(ctx, call, args):
        return ctx.op.nn.relu(args[0])

Lowerings use Relax ops where Relax has one with the same semantics as the reference kernel
(emulator/reference), TE through ``ctx.emit_te`` where not. This module imports no TVM.
"""

from __future__ import annotations

from typing import Callable

from ...ir.op import declare_facet, register_op_attr

TVM_LOWER = declare_facet("tvm.lower", "the Relax lowering: lower(ctx, call, args) -> relax expr (Relax op or "
                          "TE through emit_te)", "tidlx.backends.tvm")


def lowers(*op_names: str) -> Callable:
    """Registers the decorated function as the ``tvm.lower`` facet of ``op_names``."""
    def register(fn: Callable) -> Callable:
        register_op_attr(op_names, TVM_LOWER, fn)
        return fn
    return register
