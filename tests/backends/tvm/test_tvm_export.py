"""Exported artifacts (backends/tvm/build.py export): deploy_lib.so for x86 (loaded back and run in
TVM's VM: the same numbers) and for arm (an aarch64 ELF, cross-linked with aarch64-linux-gnu-gcc),
deploy_lib.c for c7x. The aarch64 library running under qemu: test_tvm_arm.py."""

from __future__ import annotations

import shutil
import struct

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

import tidlx  # noqa: E402
from tidlx.backends.tvm import TvmBackendError, build, export  # noqa: E402
from tidlx.ir import Function, IRModule, TensorType, Var, call, const  # noqa: E402

ELF_MACHINE = {"x86": 62, "arm": 183}  # EM_X86_64, EM_AARCH64


def _model():
    x = Var("x", TensorType((1, 2, 6, 6), "float32"))
    w = const(np.random.default_rng(1).standard_normal((3, 2, 3, 3)).astype(np.float32))
    return IRModule({"main": Function([x], call("sin", call("nn.relu", call("nn.conv2d", x, w, padding=(1, 1)))))})


def _elf_machine(path):
    with open(path, "rb") as f:
        head = f.read(20)
    assert head[:4] == b"\x7fELF"
    return struct.unpack("<H", head[18:20])[0]


def test_x86_library_loads_back_and_runs_as_built(tmp_path):
    from tvm import relax

    mod = _model()
    path = export(mod, tmp_path, "x86")["lib"]
    assert path.endswith("deploy_lib.so") and _elf_machine(path) == ELF_MACHINE["x86"]
    frame = np.random.default_rng(2).standard_normal((1, 2, 6, 6)).astype(np.float32)
    vm = relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())
    loaded = vm["main"](tvm.runtime.tensor(frame)).numpy()
    assert np.array_equal(loaded, build(mod, "x86").run({"x": frame})[0])
    np.testing.assert_allclose(loaded, tidlx.emulate(mod, {"x": frame})[0], rtol=0, atol=1e-5)


def test_arm_library_is_an_aarch64_shared_object(tmp_path):
    if shutil.which("aarch64-linux-gnu-gcc") is None:
        pytest.skip("aarch64-linux-gnu-gcc is not installed and could not be (make system-packages installs "
                    "gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user as root)")
    partitioned, _ = tidlx.partition(_model())
    path = export(partitioned, tmp_path, "arm")["lib"]
    assert _elf_machine(path) == ELF_MACHINE["arm"]
    assert b"tidlx.tidl_subgraph.tidl_0" in open(path, "rb").read()  # the TIDL part stays an external call


def test_c7x_gives_the_kernels_c_source(tmp_path):
    path = export(_model(), tmp_path, "c7x")["c_source"]
    text = open(path).read()
    assert path.endswith("deploy_lib.c") and '"mcpu":"c7x"' in text and "conv2d" in text


def test_running_a_model_built_for_arm_here_is_refused():
    with pytest.raises(TvmBackendError, match="does not run on this machine"):
        build(_model(), "arm").run({"x": np.zeros((1, 2, 6, 6), np.float32)})
