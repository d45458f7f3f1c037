"""The float32 emulator: runs any tidlx IRModule on numpy arrays (see interpreter.py).

``run(mod, inputs, kernels="fast" | "reference" | KernelSet, observers=(), config=EmulatorConfig(...))``.
The reference kernel set (reference/) defines the float semantics in plain numpy; the fast set
(fast/) overlays it with numba, Winograd, threads and fusion. Importing this package also gives
FoldConstant (tidlx.ir.passes) its evaluator: the reference kernels.
"""

from ..ir.passes.fold_constant import register_constant_evaluator
from .config import EmulatorConfig, active_config, using_config
from .interpreter import Closure, EmulatorError, EmulatorInputError, Observation, RunStats, run
from .registry import (Epilogue, Kernel, KernelSet, PlanTransform, epilogue, fast_kernel, get_kernel, has_kernel,
                       kernel, kernel_set, reference_kernel, register_kernel_set)
from . import reference as _reference, fast as _fast  # noqa: E402,F401  (register the kernels and sets)

emulate = run
REFERENCE_SET = kernel_set("reference")
FAST_SET = kernel_set("fast")


def _evaluate_constant(call, arrays):
    """FoldConstant's evaluator: the op's reference kernel on constant arrays, or None when the op
    has none (a TidlxError from the kernel means it refuses these operands)."""
    k = REFERENCE_SET.lookup(call.op)
    if k is None:
        return None
    return k.fn(list(arrays), call.attrs, call.checked_type)


register_constant_evaluator(_evaluate_constant)

__all__ = ["run", "emulate", "RunStats", "Observation", "EmulatorError", "EmulatorInputError", "Closure",
           "EmulatorConfig", "active_config", "using_config", "KernelSet", "PlanTransform", "Kernel", "Epilogue",
           "REFERENCE_SET", "FAST_SET", "kernel_set", "register_kernel_set", "kernel", "reference_kernel",
           "fast_kernel", "epilogue", "get_kernel", "has_kernel"]
