"""Build a tidlx model with apache-tvm and run it in TVM's virtual machine.

    model = build(mod, target="x86")              # host part compiled by TVM, TIDL subgraphs in tidlx's
    outputs = model.run({"img": frame})           # float emulator; a list of numpy arrays
    model = build(qmodel)                         # a QuantizedModel: TIDL subgraphs in fixed point
    model = build(mod, tidl="inline")             # everything compiled by TVM (no external calls)

Targets (docs/tvm.md): ``x86`` is host LLVM, for checks on this machine; ``arm`` is
``{"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mattr": ["+neon"]}`` (TDA4's A72 cores) and
``c7x`` ``{"kind": "c", "mcpu": "c7x"}``; a ``tvm.target.Target`` or a target dict is taken as
it is. Only a model built for the host runs here (``run``).

Each TIDL subgraph ``<name>`` is the packed function ``tidlx.tidl_subgraph.<name>`` (convert.py);
the model registers its own functions just before its VM starts, and the VM binds them then, so
models with the same subgraph names can live side by side in one process.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional

import numpy as np

from ...ir.errors import TidlxInternalError
from ...ir.module import IRModule
from ...ir.types import TensorType
from .convert import is_tidl_function, subgraph_func_name, to_relax
from .deploy.folder import DEPLOY_C_SOURCE, DEPLOY_LIB, TARGETS  # noqa: F401  (TI's artifact names, kept here for callers)
from .errors import TvmBackendError, require_tvm

#: tidlx's target names -> TVM target dicts (TARGETS, from deploy/folder.py)

#: How TIDL subgraphs run: in tidlx's float emulator or fixed-point layers (external calls), or
#: lowered into TVM code like the host part.
TIDL_MODES = ("float", "fixed", "inline")


def target_of(target):
    """The ``tvm.target.Target`` of a tidlx target name, a TVM target dict or a Target."""
    tvm = require_tvm()
    if isinstance(target, tvm.target.Target):
        return target
    if isinstance(target, str):
        spec = TARGETS.get(target)
        if spec is None:
            raise TvmBackendError(f"unknown target '{target}': one of {', '.join(TARGETS)}, a TVM target dict "
                                  f"or a tvm.target.Target")
        return tvm.target.Target(spec)
    if isinstance(target, Mapping):
        try:
            return tvm.target.Target(dict(target))
        except Exception as exc:  # TVM's own message says which key is wrong
            raise TvmBackendError(f"target {dict(target)} is not a valid TVM target: {exc}") from None
    raise TvmBackendError(f"target must be a name ({', '.join(TARGETS)}), a dict or a tvm.target.Target, "
                          f"got {type(target).__name__}")


def _is_quantized_model(model) -> bool:
    # Duck-typed: backends/tidl's QuantizedModel (module + quantized subgraphs), without importing it here.
    return hasattr(model, "module") and hasattr(model, "subgraphs") and isinstance(getattr(model, "module"), IRModule)


def _subgraph_runners(mod: IRModule, mode: str, qmodel, kernels: str) -> Dict[str, Callable]:
    """name -> run(list of input arrays) -> list of output arrays, for every TIDL subgraph."""
    runners: Dict[str, Callable] = {}
    for name, fn in mod.items():
        if not is_tidl_function(fn):
            continue
        if mode == "fixed":
            from ...emulator.fixed.kernel_set import fixed_layer_kernels
            from ...emulator.fixed.layers import run_subgraph

            sub = qmodel.subgraphs.get(name)
            if sub is None:
                raise TvmBackendError(f"@{name}: the QuantizedModel has no quantized subgraph of that name")
            # the fast layer kernels have the plain ones' bits (tests/fixed), at tidlx.emulate's speed
            table = fixed_layer_kernels("reference" if kernels == "reference" else "fast")
            runners[name] = lambda ins, sub=sub, table=table: run_subgraph(sub, ins, kernels=table)
        else:
            from ...emulator import run as emulate

            params = [p.name_hint for p in fn.params]
            runners[name] = lambda ins, name=name, params=params: emulate(
                mod, dict(zip(params, ins)), entry=name, kernels=kernels)
    return runners


class TvmModel:
    """A model built by TVM: the Relax module, the executable, and (for the host) a VM to run it."""

    def __init__(self, module: IRModule, relax_module, executable, target, tidl: str,
                 runners: Mapping[str, Callable]):
        self.module = module
        self.relax_module = relax_module
        self.executable = executable
        self.target = target
        self.tidl = tidl
        self._runners = dict(runners)
        self._vm = None
        self._failure: Optional[BaseException] = None
        fn = module["main"]
        self.input_types = {p.name_hint: p.checked_type for p in fn.params}

    @property
    def subgraphs(self) -> List[str]:
        """The TIDL subgraphs that run as external calls, by name."""
        return sorted(self._runners)

    def _packed(self, name: str, n_inputs: int):
        run = self._runners[name]

        def packed(*tensors):
            try:
                outs = run([t.numpy() for t in tensors[:n_inputs]])
                dests = tensors[n_inputs:]
                if len(outs) != len(dests):
                    raise TidlxInternalError(f"@{name} gave {len(outs)} outputs, the call expects {len(dests)}")
                for dst, value in zip(dests, outs):
                    dst.copyfrom(np.array(value, dtype=np.dtype(str(dst.dtype)), order="C", copy=None))
            except BaseException as exc:  # kept, and raised again as itself once the VM returns
                self._failure = exc
                raise
        return packed

    def _register(self) -> None:
        tvm = require_tvm()
        for name in self._runners:
            n_inputs = len(self.module[name].params)
            tvm.register_global_func(subgraph_func_name(name), self._packed(name, n_inputs), override=True)

    def _check_inputs(self, inputs: Mapping[str, np.ndarray]) -> List[np.ndarray]:
        if not isinstance(inputs, Mapping):
            raise TvmBackendError(f"TvmModel.run: inputs must be a mapping of input name to array, got "
                                  f"{type(inputs).__name__}")
        unknown = sorted(set(inputs) - set(self.input_types))
        if unknown:
            raise TvmBackendError(f"TvmModel.run: unknown input(s) {', '.join(unknown)}; the model takes "
                                  f"{', '.join(self.input_types)}")
        arrays = []
        for name, ty in self.input_types.items():
            if name not in inputs:
                raise TvmBackendError(f"TvmModel.run: input '{name}' is missing")
            value = np.asarray(inputs[name])
            if isinstance(ty, TensorType) and (tuple(value.shape) != tuple(ty.shape) or str(value.dtype) != ty.dtype):
                raise TvmBackendError(f"TvmModel.run: input '{name}' must be {ty.dtype} {tuple(ty.shape)}, got "
                                      f"{value.dtype} {tuple(value.shape)}")
            arrays.append(np.array(value, order="C", copy=None))  # ascontiguousarray would make 0-d 1-d
        return arrays

    def run(self, inputs: Mapping[str, np.ndarray]) -> List[np.ndarray]:
        """Runs ``main`` in TVM's VM on ``inputs`` (name -> array); the outputs flattened, as numpy."""
        tvm = require_tvm()
        from tvm import relax

        if self.target.kind.name != "llvm" or "aarch64" in str(self.target.attrs.get("mtriple", "")):
            raise TvmBackendError(f"TvmModel.run: a model built for {self.target} does not run on this machine "
                                  f"(build it with target='x86')")
        arrays = self._check_inputs(inputs)
        if self._vm is None:
            self._register()  # the VM binds the packed functions when it starts
            self._vm = relax.VirtualMachine(self.executable, tvm.cpu())
        self._failure = None
        try:
            result = self._vm["main"](*[tvm.runtime.tensor(a) for a in arrays])
        except Exception as exc:
            if self._failure is not None:
                raise self._failure from None
            raise TidlxInternalError(f"TvmModel.run: TVM's VM failed: {type(exc).__name__}: {exc}") from exc
        return _flatten(result)


def _flatten(value) -> List[np.ndarray]:
    if hasattr(value, "numpy"):
        return [value.numpy()]
    out: List[np.ndarray] = []
    for item in value:
        out.extend(_flatten(item))
    return out


def build(model, target="x86", *, tidl: Optional[str] = None, kernels: str = "fast") -> TvmModel:
    """Lowers ``model`` to Relax and compiles it for ``target``; returns a ``TvmModel``.

    ``model``: a tidlx ``IRModule`` (partitioned or not) or a ``QuantizedModel`` (``tidlx.quantize``).
    ``tidl``: how ``Compiler="tidl"`` subgraphs run: ``"float"`` (the default for an IRModule: tidlx's
    float emulator with ``kernels``), ``"fixed"`` (the default for a QuantizedModel: its fixed-point
    layers) or ``"inline"`` (lowered into TVM code like the host part)."""
    tvm = require_tvm()
    qmodel = model if _is_quantized_model(model) else None
    mod = qmodel.module if qmodel is not None else model
    if not isinstance(mod, IRModule):
        raise TvmBackendError(f"build takes a tidlx IRModule or a QuantizedModel, got {type(model).__name__}")
    if tidl is None:
        tidl = "fixed" if qmodel is not None else "float"
    if tidl not in TIDL_MODES:
        raise TvmBackendError(f"build: tidl must be one of {', '.join(TIDL_MODES)}, got {tidl!r}")
    if tidl == "fixed" and qmodel is None:
        raise TvmBackendError("build: tidl='fixed' needs a QuantizedModel (tidlx.quantize(mod, options, calib))")
    tvm_target = target_of(target)
    relax_mod = to_relax(mod, tidl="inline" if tidl == "inline" else "external")
    runners = {} if tidl == "inline" else _subgraph_runners(mod, tidl, qmodel, kernels)
    try:
        executable = tvm.compile(relax_mod, target=tvm_target)
    except Exception as exc:
        raise TidlxInternalError(f"build: TVM could not compile the lowered module for {tvm_target}: "
                                 f"{type(exc).__name__}: {exc}") from exc
    return TvmModel(mod, relax_mod, executable, tvm_target, tidl, runners)


def export(model, directory, target="arm", *, tidl: Optional[str] = None) -> Dict[str, str]:
    """Writes the deploy folder of ``model`` for ``target`` into ``directory`` (``deploy/``): the host
    kernels built by TVM (``deploy_lib.so`` for x86/arm, ``deploy_lib.c`` for c7x), ``deploy_graph.json``,
    ``deploy_params.params`` and the plain C driver; returns ``{artifact: path}``. TIDL subgraphs stay
    external calls ``tidl_subgraph_<N>_process``; ``tidl="inline"`` makes them host kernels too.
    ``run_deployed`` (``deploy/run.py``) runs the folder here."""
    from .deploy.folder import deploy

    if tidl not in (None, "float", "fixed", "external", "inline"):
        raise TvmBackendError(f"export: tidl must be one of float, fixed, external, inline, got {tidl!r}")
    return deploy(model, directory, target, tidl="inline" if tidl == "inline" else "external")

__all__ = ["build", "export", "TvmModel", "TARGETS", "TIDL_MODES", "target_of", "DEPLOY_LIB", "DEPLOY_C_SOURCE"]
