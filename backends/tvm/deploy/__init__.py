"""Deploy folders: the host part of a (partitioned) model as TVM-built kernels plus a plain C driver.

    paths = deploy(partitioned, "out/", "c7x")          # x86 | arm | c7x; TI's artifact names
    outputs = run_deployed("out/", {"img": frame}, partitioned)   # or a QuantizedModel: fixed point

``deploy`` (folder.py) reads the host graph (graph.py), builds the kernels with TVM (deploy_lib.so
for x86/arm, deploy_lib.c for c7x) and writes the driver (cgen.py) with our own ABI headers and
runtime calls (c/), so the folder needs no TVM runtime. ``run_deployed`` (run.py) builds the driver
with the check files and serves its TIDL subgraph calls from tidlx over a pipe (arm: under qemu).
Layout, schema and ABI: docs/tvm.md.
"""

from __future__ import annotations


def deploy(model, directory, target="x86", **kwargs):
    """Writes the deploy folder of ``model`` for ``target`` (see ``folder.deploy``); returns the paths."""
    from .folder import deploy as _deploy

    return _deploy(model, directory, target, **kwargs)


def run_deployed(directory, inputs, model=None, **kwargs):
    """Builds (cached) and runs a deploy folder, serving its TIDL calls from ``model`` (see ``run.run_deployed``)."""
    from .run import run_deployed as _run

    return _run(directory, inputs, model, **kwargs)


__all__ = ["deploy", "run_deployed"]
