"""Runs an aarch64 ``deploy_lib.so`` (``export(..., target="arm")``) under qemu-aarch64, for checks
on an x86 machine: TVM's runtime cross-compiled for aarch64 and tidlx's driver (arm/driver.cc,
built by ``make arm-runtime``) load the library and run its Relax VM on float32 inputs.

    outputs = run_under_qemu("out/deploy_lib.so", mod, {"img": frame})

TIDL subgraphs have no packed functions on this path: export the model with ``tidl="inline"``
(or unpartitioned).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import List, Mapping, Optional

import numpy as np

from ...ir.module import IRModule
from ...ir.types import TensorType, TupleType
from .errors import TvmBackendError

#: where ``make arm-runtime`` puts TVM's aarch64 runtime and the driver (relative to the repository)
DEFAULT_RUNTIME_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                   "build", "tvm-aarch64")
#: the aarch64 sysroot of libc6-dev-arm64-cross (qemu-aarch64 -L)
AARCH64_SYSROOT = "/usr/aarch64-linux-gnu"


def runtime_dir() -> str:
    return os.environ.get("TIDLX_TVM_AARCH64_RUNTIME", DEFAULT_RUNTIME_DIR)


def missing_tools(runtime: Optional[str] = None) -> List[str]:
    """What running under qemu needs and is not there (empty: ready)."""
    runtime = runtime or runtime_dir()
    missing = []
    if shutil.which("qemu-aarch64") is None:
        missing.append("qemu-aarch64 (apt-get install qemu-user)")
    if not os.path.isdir(AARCH64_SYSROOT):
        missing.append(f"{AARCH64_SYSROOT} (apt-get install libc6-dev-arm64-cross)")
    for name in ("driver", "libtvm_runtime.so"):
        if not os.path.isfile(os.path.join(runtime, name)):
            missing.append(f"{os.path.join(runtime, name)} (make arm-runtime)")
    return missing


def _flat_types(ty) -> List[TensorType]:
    if isinstance(ty, TupleType):
        return [t for f in ty.fields for t in _flat_types(f)]
    return [ty]


def run_under_qemu(library: str, mod: IRModule, inputs: Mapping[str, np.ndarray], *,
                   runtime: Optional[str] = None, timeout: float = 600.0) -> List[np.ndarray]:
    """The outputs of ``library`` (exported from ``mod``) on ``inputs``, run under qemu-aarch64."""
    runtime = runtime or runtime_dir()
    missing = missing_tools(runtime)
    if missing:
        raise TvmBackendError(f"run_under_qemu: missing {'; '.join(missing)}")
    fn = mod.infer_types()["main"]
    outputs = _flat_types(fn.body.checked_type)
    with tempfile.TemporaryDirectory(prefix="tidlx-qemu-") as tmp:
        argv = ["qemu-aarch64", "-L", AARCH64_SYSROOT, os.path.join(runtime, "driver"), os.path.abspath(library),
                os.path.join(tmp, "out.bin")]
        for i, p in enumerate(fn.params):
            if p.name_hint not in inputs:
                raise TvmBackendError(f"run_under_qemu: input '{p.name_hint}' is missing")
            value = np.asarray(inputs[p.name_hint])
            ty = p.checked_type
            if value.dtype != np.float32 or tuple(value.shape) != tuple(ty.shape):
                raise TvmBackendError(f"run_under_qemu: input '{p.name_hint}' must be float32 {tuple(ty.shape)}, "
                                      f"got {value.dtype} {tuple(value.shape)}")
            path = os.path.join(tmp, f"in{i}.bin")
            value.tofile(path)
            argv += [path, ",".join(str(d) for d in ty.shape)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise TvmBackendError(f"run_under_qemu: the driver failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        raw = np.fromfile(os.path.join(tmp, "out.bin"), np.uint8)
    result, offset = [], 0
    for ty in outputs:
        dtype = np.dtype(ty.dtype)
        size = int(np.prod(ty.shape, dtype=np.int64)) * dtype.itemsize
        if offset + size > raw.size:
            raise TvmBackendError(f"run_under_qemu: the driver wrote {raw.size} bytes, fewer than the outputs need")
        result.append(raw[offset:offset + size].view(dtype).reshape(ty.shape).copy())
        offset += size
    return result


__all__ = ["run_under_qemu", "missing_tools", "runtime_dir", "DEFAULT_RUNTIME_DIR"]
