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
_EPILOGUES: Dict[str, Callable] = {}


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


def epilogue(*op_names: str):
    """Decorator: ``@epilogue("nn.relu")`` registers the in-place form of an element-wise op that the
    interpreter may fuse after the op producing its input (_fusion.py).

    An epilogue is ``fn(x, others, attrs, in_place) -> np.ndarray | None``: the op applied to ``x``
    (the fused chain's value; ``others`` the op's remaining arguments), written into ``x`` when
    ``in_place``, else into a new array. It must do exactly the float operations of the op's kernel
    (so fused and unfused runs agree bit for bit) and returns None when it has no such form for
    these operands (the interpreter then calls the kernel).
    """
    def register(fn):
        for name in op_names:
            if name in _EPILOGUES:
                raise ValueError(f"epilogue for '{name}' is registered twice")
            _EPILOGUES[name] = fn
        return fn
    return register


def get_epilogue(op_name: str):
    _ensure_loaded()
    return _EPILOGUES.get(op_name)
