"""The arm target's code runs: a deploy folder for aarch64 (deploy_lib.so cross-linked with
aarch64-linux-gnu-gcc, the C driver built with it) runs under ``qemu-aarch64 -L /usr/aarch64-linux-gnu``
with its TIDL calls served over the pipe, and matches the x86 folder (1e-5 relative); BEVDet tiny
matches the float emulator."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

pytest.importorskip("tvm")

import tidlx  # noqa: E402
from tidlx.backends.tvm.deploy import deploy, run_deployed  # noqa: E402
from tidlx.backends.tvm.deploy.run import missing_tools  # noqa: E402

from test_tvm_deploy import assert_close, frames, two_subgraph_model  # noqa: E402

_missing = missing_tools("arm") + missing_tools("x86")
pytestmark = pytest.mark.skipif(bool(_missing), reason="the arm check needs " + "; ".join(_missing) +
                                " (make system-packages installs them with apt-get as root)")

EM_AARCH64 = 183


def _elf_machine(path):
    with open(path, "rb") as f:
        head = f.read(20)
    assert head[:4] == b"\x7fELF"
    return struct.unpack("<H", head[18:20])[0]


def test_aarch64_folder_under_qemu_matches_x86(tmp_path):
    partitioned, _ = tidlx.partition(two_subgraph_model())
    arm = deploy(partitioned, tmp_path / "arm", "arm")
    assert _elf_machine(arm["lib"]) == EM_AARCH64
    assert json.load(open(arm["graph"]))["tvm_target"] == {"kind": "llvm", "mtriple": "aarch64-linux-gnu",
                                                          "mattr": ["+neon"]}
    deploy(partitioned, tmp_path / "x86", "x86")
    x = {"x": frames(1, seed=11)}
    on_arm = run_deployed(tmp_path / "arm", x, partitioned)
    assert_close(on_arm, run_deployed(tmp_path / "x86", x, partitioned))
    assert_close(on_arm, tidlx.emulate(partitioned, x))
    # qemu.py's run_under_qemu takes the library's path (or the folder) and refuses other targets' folders
    from tidlx.backends.tvm import TvmBackendError
    from tidlx.backends.tvm.qemu import run_under_qemu

    assert all(np.array_equal(a, b) for a, b in zip(run_under_qemu(arm["lib"], partitioned, x), on_arm))
    with pytest.raises(TvmBackendError, match="is a x86 deploy folder, not arm"):
        run_under_qemu(tmp_path / "x86", partitioned, x)


def test_bevdet_tiny_for_aarch64_under_qemu_matches_the_float_emulator(tmp_path):
    from tidlx.frontends.onnx import from_onnx
    from tidlx.models import bevdet_img_stage_tiny

    mod = from_onnx(bevdet_img_stage_tiny("resnet18", batch=1))
    partitioned, _ = tidlx.partition(mod)
    frame = {"img": np.random.default_rng(0).standard_normal((1, 3, 64, 192)).astype(np.float32)}
    deploy(partitioned, tmp_path, "arm")
    assert_close(run_deployed(tmp_path, frame, partitioned), tidlx.emulate(mod, frame))
