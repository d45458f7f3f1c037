"""The emulator's op facets and kernel sets.

Kernels hang on the ops (``ir.op`` facets), registered next to their code:

* ``emulator.reference``: the float reference kernel, the definition of an op's float semantics
  (``reference/op_<family>.py``, plain numpy). Every op has one.
* ``emulator.fast``: a faster kernel of the same op (``fast/op_<family>.py``: numba, Winograd,
  threads), registered only where it is faster; it either gives the reference's bits or says
  how far it may be from them (``tolerance``).
* ``emulator.epilogue``: the in-place form of an element-wise op that the fast set's fusion
  runs after the op producing its input (``fast/_fusion.py``).

A kernel is ``fn(args: list[np.ndarray], attrs, out_type) -> np.ndarray | tuple`` where ``attrs``
is the call's attribute dataclass (or None) and ``out_type`` its inferred IR type; kernels never
modify their inputs. The facet's value is a ``Kernel`` record (callable like the function) that
also carries what the interpreter and the tests need to know about it.

A ``KernelSet`` is what the interpreter runs with: the facets to look a kernel up in, in order,
plus plan transforms (fusion is the fast set's) and a context entered around each run. The
reference set is ``("emulator.reference",)``; the fast set ``("emulator.fast", "emulator.reference")``;
a fixed-point set will be ``("emulator.fixed", ...)`` on the same interpreter.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Dict, NamedTuple, Optional, Sequence, Tuple, Union

from ..ir.errors import TidlxError, closest
from ..ir.op import Op, declare_facet, get_op, has_op, list_ops, register_op_attr

REFERENCE = declare_facet("emulator.reference", "float reference kernel: fn(args, attrs, out_type) -> ndarray | tuple",
                          "tidlx.emulator")
FAST = declare_facet("emulator.fast", "fast override of the reference kernel (numba, Winograd, threads)",
                     "tidlx.emulator")
EPILOGUE = declare_facet("emulator.epilogue", "in-place fused form run after a producer by the fast set's fusion",
                         "tidlx.emulator")


class Kernel(NamedTuple):
    """A registered kernel: the function and what is known about its results.

    ``fresh_result``: the result is always a new array (never a view of an input or a constant),
    so fusion may write the epilogues after it into it. ``tolerance`` (fast kernels): None when
    the kernel gives the reference kernel's bits; else the largest ``|fast - reference|`` it may
    differ by, relative to the largest ``|reference|`` of the output (e.g. Winograd, BLAS).
    """

    fn: Callable
    fresh_result: bool = False
    tolerance: Optional[float] = None

    def __call__(self, args, attrs, out_type):
        return self.fn(args, attrs, out_type)


class Epilogue(NamedTuple):
    """``fn(x, others, attrs, in_place) -> np.ndarray | None``: the op applied to ``x`` (the fused
    chain's value; ``others`` the op's remaining arguments), written into ``x`` when ``in_place``,
    else into a new array. It does exactly the float operations of the op's kernels (fused and
    unfused runs agree bit for bit) and returns None when it has no such form for these operands
    (the interpreter then calls the kernel).

    ``tuple_item``: the op returns a tuple and the epilogue computes this item of it (batch_norm: 0;
    fusion then absorbs the projection too). ``tail``: the op's role in the one-pass convolution
    tail (fast/_tail.py): ``"affine"``, ``"add"`` or ``"relu"``, in that order.
    """

    fn: Callable
    tuple_item: Optional[int] = None
    tail: Optional[str] = None


def _names(op_names) -> Tuple[str, ...]:
    return tuple(n for group in op_names for n in ((group,) if isinstance(group, str) else group))


def reference_kernel(*op_names: Union[str, Sequence[str]], fresh_result: bool = False):
    """Decorator: ``@reference_kernel("add", "subtract")`` registers the function as those ops'
    float reference kernel (facet ``emulator.reference``)."""
    def register(fn):
        register_op_attr(_names(op_names), REFERENCE, Kernel(fn, fresh_result))
        return fn
    return register


kernel = reference_kernel


def fast_kernel(*op_names: Union[str, Sequence[str]], fresh_result: bool = False,
                tolerance: Optional[float] = None):
    """Decorator: registers a fast override of the reference kernel (facet ``emulator.fast``);
    ``tolerance`` None promises the reference's bits (see ``Kernel``)."""
    def register(fn):
        register_op_attr(_names(op_names), FAST, Kernel(fn, fresh_result, tolerance))
        return fn
    return register


def epilogue(*op_names: str, tuple_item: Optional[int] = None, tail: Optional[str] = None):
    """Decorator: ``@epilogue("nn.relu", tail="relu")`` registers the fused in-place form (``Epilogue``)."""
    if tail not in (None, "affine", "add", "relu"):
        raise ValueError(f"tail role must be 'affine', 'add' or 'relu', got {tail!r}")

    def register(fn):
        register_op_attr(_names(op_names), EPILOGUE, Epilogue(fn, tuple_item, tail))
        return fn
    return register


# -- plan transforms and kernel sets ---------------------------------------------------------------

@dataclass(frozen=True)
class PlanTransform:
    """Rewrites a compiled plan's schedule (interpreter.py's raw steps) for a kernel set.

    ``apply(steps, result_slot) -> steps``; ``enabled(config)`` says whether a run with that
    config uses it; ``hides_values``: the transformed plan no longer computes some values on their
    own (fusion), so runs with observers use the plan without this transform."""

    name: str
    apply: Callable[[list, int], list]
    enabled: Callable[[Any], bool] = lambda config: True
    hides_values: bool = False


@dataclass(frozen=True, eq=False)
class KernelSet:
    """What the interpreter runs with: facets looked up in order, plan transforms, and a context
    entered around each run (``context(config)``, e.g. thread and BLAS settings)."""

    name: str
    facets: Tuple[str, ...]
    transforms: Tuple[PlanTransform, ...] = ()
    context: Optional[Callable[[Any], ContextManager]] = None

    def lookup(self, op: Op) -> Optional[Kernel]:
        """The kernel of ``op`` in this set (the first of its facets the op has), or None. A facet
        set to a plain function (``register_op_attr(name, "emulator.reference", fn)``) is a Kernel
        with no known properties."""
        for key in self.facets:
            k = op.get_attr(key)
            if k is not None:
                return k if isinstance(k, Kernel) else Kernel(k)
        return None

    def run_context(self, config) -> ContextManager:
        return self.context(config) if self.context is not None else nullcontext()

    def __repr__(self) -> str:
        return f"KernelSet({self.name!r}, {self.facets})"


REFERENCE_SET = KernelSet("reference", (REFERENCE,))
_SETS: Dict[str, KernelSet] = {"reference": REFERENCE_SET}


def register_kernel_set(kernels: KernelSet) -> KernelSet:
    """Makes a kernel set known by name (``run(..., kernels="fast")``)."""
    known = _SETS.get(kernels.name)
    if known is not None and known is not kernels:
        raise ValueError(f"kernel set '{kernels.name}' is registered twice")
    _SETS[kernels.name] = kernels
    return kernels


def _ensure_loaded() -> None:
    from . import fast, reference  # noqa: F401  (registers every family and the fast set)


def kernel_set(kernels: Union[str, KernelSet]) -> KernelSet:
    """The kernel set named ``kernels`` ("fast", "reference"), or ``kernels`` itself."""
    _ensure_loaded()
    if isinstance(kernels, KernelSet):
        return kernels
    found = _SETS.get(kernels) if isinstance(kernels, str) else None
    if found is None:
        raise TidlxError(f"unknown kernel set {kernels!r} (known: {', '.join(sorted(_SETS))})")
    return found


def lookup(op_name: str, kernels: Union[str, KernelSet] = "fast") -> Optional[Kernel]:
    """The ``Kernel`` record that ``kernels`` runs for an op, or None."""
    ks = kernel_set(kernels)
    return ks.lookup(get_op(op_name)) if has_op(op_name) else None


def get_kernel(op_name: str, kernels: Union[str, KernelSet] = "fast") -> Callable:
    """The kernel function that the kernel set (default: the fast one) runs for ``op_name``."""
    found = lookup(op_name, kernels)
    if found is None:
        ks = kernel_set(kernels)
        hint = closest(op_name, [n for n in list_ops() if ks.lookup(get_op(n)) is not None])
        raise TidlxError(f"the emulator has no kernel for op '{op_name}'"
                         + (f" (closest: {', '.join(hint)})" if hint else ""))
    return found.fn


def has_kernel(op_name: str, kernels: Union[str, KernelSet] = "fast") -> bool:
    return lookup(op_name, kernels) is not None


def get_epilogue(op: Op) -> Optional[Epilogue]:
    e = op.get_attr(EPILOGUE)
    return e if e is None or isinstance(e, Epilogue) else Epilogue(e)
