"""The TVM backend: tidlx IR -> apache-tvm Relax, built for a target, run in TVM's virtual machine.

    relax_mod = to_relax(mod)                        # a tvm.IRModule, built with relax.BlockBuilder
    model = build(mod, target="x86")                 # compiled; TIDL subgraphs as external calls
    outputs = model.run({"img": frame})              # numpy arrays, as tidlx.emulate returns them

Every op lowers through its ``tvm.lower`` facet (``lower/<family>.py``). A ``Compiler="tidl"``
function becomes ``R.call_dps_packed("tidlx.tidl_subgraph.<name>", ...)``: a packed function that
runs the subgraph in tidlx (the float emulator, or the fixed-point layers of a ``QuantizedModel``).

apache-tvm is imported only when a function here runs (``import tidlx`` stays free of it); the
facet registrations in ``lower/`` import no TVM at all.
"""

from __future__ import annotations

from . import lower as _lowerings  # noqa: F401  (registers every op's tvm.lower facet; imports no TVM)
# Loaded now (it imports no TVM) so the submodule never replaces the function build below as the
# package's attribute (Python sets that attribute when a submodule is first imported).
from . import build as _build_module  # noqa: F401
from .errors import TvmBackendError, TvmLoweringError, TvmNotInstalledError


def to_relax(mod, *, tidl="external"):
    """The Relax module of ``mod`` (see ``convert.to_relax``)."""
    from .convert import to_relax as _to_relax

    return _to_relax(mod, tidl=tidl)


def build(model, target="x86", **kwargs):
    """A ``TvmModel`` of ``model`` built for ``target`` (see ``build.build``)."""
    from .build import build as _build

    return _build(model, target, **kwargs)


def export(model, directory, target="arm", **kwargs):
    """Writes the deploy folder of ``model`` for ``target`` into ``directory``: TVM-built kernels
    (deploy_lib.so or deploy_lib.c), deploy_graph.json, deploy_params.params, the C driver (see
    ``deploy.deploy``; ``deploy.run_deployed`` runs it here)."""
    from .build import export as _export

    return _export(model, directory, target, **kwargs)


__all__ = ["to_relax", "build", "export", "TvmBackendError", "TvmLoweringError", "TvmNotInstalledError"]
