"""BEVDet's image stage + bev_pool in deploy folders (backends/tvm/deploy) for the three targets: the
host part (the softmax, slices and the bev_pool TE kernel) as TVM-built kernels plus the plain C
driver, the TIDL subgraphs served by tidlx's float emulator. x86, arm (under qemu-aarch64) and the
c7x C source built for x86 match the float emulator within 1e-5 relative; every c7x .c compiles with
-Werror given only the folder's include directories; two deploys give the same bytes."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

pytest.importorskip("tvm")

import tidlx  # noqa: E402
from tidlx.backends.tvm.deploy import deploy, run_deployed  # noqa: E402
from tidlx.backends.tvm.deploy.run import missing_tools  # noqa: E402
from tidlx.frontends.onnx import from_onnx  # noqa: E402
from tidlx.models import bevdet_with_bev_pool, register_bev_pool  # noqa: E402
from tidlx.models.bev_pool import OP_NAME  # noqa: E402

CAMERAS = 6
RELATIVE = 1e-5


pytestmark = pytest.mark.usefixtures("bev_pool_op")


@pytest.fixture(scope="module")
def bev_model():
    register_bev_pool()
    mod = from_onnx(bevdet_with_bev_pool("resnet18", batch=CAMERAS, tiny=True))
    partitioned, _ = tidlx.partition(mod, {"max_batch_size": CAMERAS})
    frames = {"img": np.random.default_rng(1).standard_normal((CAMERAS, 3, 64, 192)).astype(np.float32)}
    yield partitioned, frames, tidlx.emulate(mod, frames)
    tidlx.unregister_op(OP_NAME)


def _relative(got, ref):
    return float(np.max(np.abs(got.astype(np.float64) - ref))) / max(float(np.max(np.abs(ref))), 1e-30)


def _compile_each_c_file(directory):
    includes = [f"-I{os.path.join(directory, d)}" for d in ("include", "driver", "driver/check")]
    sources = sorted(os.path.relpath(os.path.join(d, f), directory)
                     for d, _, files in os.walk(directory) for f in files if f.endswith(".c"))
    for rel in sources:
        done = subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", "-c", *includes, os.path.join(directory, rel),
                               "-o", os.devnull], capture_output=True, text=True)
        assert done.returncode == 0, f"{rel}:\n{done.stderr}"
    return sources


@pytest.mark.parametrize("target", ["x86", "arm", "c7x"])
def test_each_target_runs_and_matches_the_emulator(bev_model, target, tmp_path):
    missing = missing_tools(target)
    if missing:
        pytest.skip(f"the {target} folder needs " + "; ".join(missing))
    partitioned, frames, ref = bev_model
    paths = deploy(partitioned, tmp_path, target)
    if target == "c7x":
        text = open(paths["lib"]).read()
        assert "bevdet_bev_pool(" in text  # the custom op's kernel is in the C source
        assert "deploy_lib.c" in _compile_each_c_file(str(tmp_path))
    got = run_deployed(tmp_path, frames, partitioned)
    assert len(got) == len(ref) == 2
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype
        assert _relative(g, r) <= RELATIVE


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_the_same_model_deployed_twice_gives_the_same_bytes(bev_model, tmp_path):
    partitioned, _, _ = bev_model
    first = deploy(partitioned, tmp_path / "a", "c7x", name="bev")
    second = deploy(partitioned, tmp_path / "b", "c7x", name="bev")
    assert sorted(first) == sorted(second) and {"lib", "params", "graph"} <= set(first)
    for key in first:  # deploy_lib.c, params, graph JSON and every driver file
        assert open(first[key], "rb").read() == open(second[key], "rb").read(), key


@pytest.mark.skipif(not os.environ.get("TIDLX_SLOW_TESTS"),
                    reason="every kernel built for aarch64 (about 30 s): set TIDLX_SLOW_TESTS=1")
def test_the_whole_model_as_tvm_code_runs_on_arm(bev_model, tmp_path):
    missing = missing_tools("arm")
    if missing:
        pytest.skip("the arm folder needs " + "; ".join(missing))
    partitioned, frames, ref = bev_model
    deploy(partitioned, tmp_path, "arm", tidl="inline")  # the TIDL subgraphs lowered as kernels too
    got = run_deployed(tmp_path, frames)  # no TIDL call to serve
    for g, r in zip(got, ref):
        assert g.shape == r.shape and _relative(g, r) <= RELATIVE
