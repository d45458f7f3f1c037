"""The fixed-point kernel set: the shared interpreter runs the host part in float, and every call of a
quantized TIDL subgraph in fixed point.

    ks = fixed_point_kernel_set({"tidl_0": quantized_subgraph, ...}, host="fast", fixed="fast")
    outputs = run_fixed(partitioned_module, inputs, ks, fixed_observers=[seen.append])

The kernel set is the host set's facets plus one plan transform, ``tidl-fixed``: in every plan, a
call of a quantized subgraph's global function becomes a custom step that runs the subgraph's plain
data (layers.run_subgraph): data convert in, the integer layer kernels, data convert out. The
subgraph's own float body is then never run. The transform hides no value the host computes, so
observed runs keep it (a run with observers is still a fixed-point run). Build the set once per
quantized model: plans are cached per kernel set.

``fixed`` picks the layer kernels: ``"reference"`` the plain ones (layers.KERNELS, numpy int64, the
definition), ``"fast"`` the same table with fast_kernels.FAST_OVERRIDES over it (VNNI convolutions,
same bits), or an explicit table (layer type -> kernel).
"""

from __future__ import annotations

import contextvars
from typing import Callable, Dict, Mapping, Sequence, Union

import numpy as np

from ..config import EmulatorConfig
from ..interpreter import CALL_GLOBAL, CUSTOM, EmulatorError, run
from ..registry import KernelSet, PlanTransform, kernel_set
from .arith import FixedPointError
from .layers import KERNELS, FixedObservation, Kernel, run_subgraph
from .network import QuantizedSubgraph

#: The fixed-point observers of the run in progress (the kernel set outlives runs).
_FIXED_OBSERVERS: contextvars.ContextVar = contextvars.ContextVar("tidlx_fixed_observers", default=())


class _FixedSubgraphStep:
    """A custom step: one call of a quantized subgraph."""

    __slots__ = ("subgraph", "kernels")

    def __init__(self, subgraph: QuantizedSubgraph, kernels: Mapping[str, Kernel]):
        self.subgraph = subgraph
        self.kernels = kernels

    def describe(self) -> str:
        return f"@{self.subgraph.name} in fixed point ({len(self.subgraph.compute_layers())} layers)"

    def run(self, plan, values: list, stats):
        try:
            outs = run_subgraph(self.subgraph, values, _FIXED_OBSERVERS.get(), self.kernels)
        except FixedPointError as exc:
            raise EmulatorError(f"emulator: {plan.where}, the call of @{self.subgraph.name} in fixed point "
                                f"failed: {exc}") from exc
        return tuple(outs) if self.subgraph.returns_tuple else outs[0]


def global_call_transform(name: str, steps: Mapping[str, object]) -> PlanTransform:
    """The plan transform ``name``: every call of a global function named in ``steps`` becomes that custom
    step (the fixed-point subgraphs here, the artifacts' subgraphs in artifact_runtime.py)."""
    def apply(raw_steps: list, result_slot: int) -> list:
        out = []
        for step in raw_steps:
            kind, slot, ins, payload, node = step
            if kind == CALL_GLOBAL and payload in steps:
                step = (CUSTOM, slot, ins, steps[payload], node)
            out.append(step)
        return out

    return PlanTransform(name, apply, hides_values=False)


def _subgraph_transform(subgraphs: Mapping[str, QuantizedSubgraph], kernels: Mapping[str, Kernel]) -> PlanTransform:
    return global_call_transform("tidl-fixed", {name: _FixedSubgraphStep(sub, kernels) for name, sub in subgraphs.items()})


def fixed_layer_kernels(fixed: Union[str, Mapping[str, Kernel]] = "fast") -> Dict[str, Kernel]:
    """The layer kernel table of ``fixed`` ("fast", "reference" or a table), built now: KERNELS may
    gain layer types after import."""
    if fixed == "reference":
        return dict(KERNELS)
    if fixed == "fast":
        from .fast_kernels import FAST_OVERRIDES

        return {**KERNELS, **FAST_OVERRIDES}
    if isinstance(fixed, Mapping):
        return dict(fixed)
    raise FixedPointError(f"fixed-point kernels: fixed must be 'fast', 'reference' or a table of layer kernels, "
                          f"got {fixed!r}")


def fixed_point_kernel_set(subgraphs: Mapping[str, QuantizedSubgraph], host: Union[str, KernelSet] = "fast",
                           fixed: Union[str, Mapping[str, Kernel]] = "fast") -> KernelSet:
    """The kernel set running ``subgraphs`` (by the name of their global function) in fixed point with
    the ``fixed`` layer kernels ("fast" or "reference", the same bits) and everything else with the
    ``host`` set (``fast`` or ``reference``)."""
    table = fixed_layer_kernels(fixed)
    base = kernel_set(host)
    for name, sub in subgraphs.items():
        if not isinstance(sub, QuantizedSubgraph):
            raise FixedPointError(f"@{name}: expected a QuantizedSubgraph, got {type(sub).__name__}")
    return KernelSet(f"fixed+{base.name}", base.facets, (_subgraph_transform(subgraphs, table),) + base.transforms,
                     base.context)


def run_fixed(mod, inputs: Mapping[str, np.ndarray], kernels: KernelSet, *, observers: Sequence[Callable] = (),
              fixed_observers: Sequence[Callable[[FixedObservation], None]] = (),
              config: EmulatorConfig = None, entry: str = "main") -> list:
    """Runs ``@entry`` with a fixed-point kernel set: ``observers`` see the interpreter's values (host
    part and subgraph results), ``fixed_observers`` every layer of every quantized subgraph."""
    token = _FIXED_OBSERVERS.set(tuple(fixed_observers))
    try:
        return run(mod, inputs, entry, kernels=kernels, observers=observers, config=config)
    finally:
        _FIXED_OBSERVERS.reset(token)


__all__ = ["fixed_layer_kernels", "fixed_point_kernel_set", "global_call_transform", "run_fixed"]
