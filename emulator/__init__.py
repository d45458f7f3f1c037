"""Float32 reference emulator: runs any tidlx IRModule on numpy arrays (see interpreter.py)."""

from .interpreter import Closure, EmulatorError, EmulatorInputError, RunStats, run
from .registry import get_kernel, has_kernel, kernel

emulate = run

__all__ = ["run", "emulate", "RunStats", "EmulatorError", "EmulatorInputError", "Closure",
           "kernel", "get_kernel", "has_kernel"]
