"""Runs an arm deploy folder (``deploy(model, directory, "arm")``) under qemu-aarch64, for checks on
an x86 machine: ``run_deployed`` (deploy/run.py) builds the folder's C driver with
aarch64-linux-gnu-gcc and runs it under ``qemu-aarch64 -L /usr/aarch64-linux-gnu``, serving its
TIDL subgraph calls from tidlx over a pipe.

    outputs = run_under_qemu("out/deploy_lib.so", partitioned, {"img": frame})
"""

from __future__ import annotations

import os
from typing import List, Mapping

import numpy as np

from .deploy.run import AARCH64_SYSROOT, missing_tools as _missing_tools, read_graph, run_deployed
from .errors import TvmBackendError


def missing_tools(runtime=None) -> List[str]:
    """What running an arm folder here needs and is not installed (empty: ready). ``runtime`` is
    not used (the C driver needs no TVM runtime)."""
    return _missing_tools("arm")


def run_under_qemu(library, mod, inputs: Mapping[str, np.ndarray], *, timeout: float = 600.0) -> List[np.ndarray]:
    """The outputs of the arm deploy folder holding ``library`` (or the folder itself) on ``inputs``;
    ``mod`` runs its TIDL subgraphs (the partitioned module, or its QuantizedModel)."""
    directory = os.fspath(library)
    if not os.path.isdir(directory):
        directory = os.path.dirname(os.path.abspath(directory))
    target = read_graph(directory)["target"]
    if target != "arm":
        raise TvmBackendError(f"run_under_qemu: {directory} is a {target} deploy folder, not arm")
    return run_deployed(directory, inputs, mod, timeout=timeout)


__all__ = ["run_under_qemu", "missing_tools", "AARCH64_SYSROOT"]
