"""Kernel registry: one function per op name, registered by the op's family file in kernels/.

A kernel is ``fn(args: list[np.ndarray], attrs, out_type) -> np.ndarray | tuple[np.ndarray, ...]``
where ``attrs`` is the call's attribute dataclass (or None) and ``out_type`` its inferred
IR type. Kernels never modify their inputs.
"""

from __future__ import annotations

from typing import Callable, Dict

from ..ir.errors import TidlxError, closest

Kernel = Callable
_KERNELS: Dict[str, Kernel] = {}


def kernel(*op_names: str):
    """Decorator: ``@kernel("add", "subtract")`` registers the function for those ops."""
    def register(fn):
        for name in op_names:
            if name in _KERNELS:
                raise ValueError(f"kernel for '{name}' is registered twice")
            _KERNELS[name] = fn
        return fn
    return register


def _ensure_loaded() -> None:
    from . import kernels  # noqa: F401  (registers every family)


def get_kernel(op_name: str) -> Kernel:
    _ensure_loaded()
    fn = _KERNELS.get(op_name)
    if fn is None:
        hint = closest(op_name, _KERNELS)
        raise TidlxError(f"the emulator has no kernel for op '{op_name}'"
                         + (f" (closest: {', '.join(hint)})" if hint else ""))
    return fn


def has_kernel(op_name: str) -> bool:
    _ensure_loaded()
    return op_name in _KERNELS
