"""Acceptance at full size: the built-in BEVDet image stage (resnet18, 6 cameras of
256 x 704, TIDL_RELAY_MAX_BATCH_SIZE=6) plus bev_pool into BEVDet's 128 x 128 grid, deployed for x86,
arm (run under qemu) and c7x (its C source compiled with -Werror and built for x86): each matches the
float emulator within 1e-5 relative; two deploys give byte-identical C source (and aarch64 library), params, graph JSON and driver.

About 20 s here (the TIDL parts run in the float emulator for every target)."""

from __future__ import annotations

import os
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


pytestmark = pytest.mark.usefixtures("bev_pool_op")


@pytest.fixture(scope="module")
def full_model():
    register_bev_pool()
    mod = from_onnx(bevdet_with_bev_pool("resnet18", batch=CAMERAS))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIDL_RELAY_MAX_BATCH_SIZE", str(CAMERAS))
        partitioned, report = tidlx.partition(mod)
    frames = {"img": np.random.default_rng(2).standard_normal((CAMERAS, 3, 256, 704)).astype(np.float32)}
    yield partitioned, report, frames, tidlx.emulate(partitioned, frames)
    tidlx.unregister_op(OP_NAME)


def _relative(got, ref):
    return float(np.max(np.abs(got.astype(np.float64) - ref))) / max(float(np.max(np.abs(ref))), 1e-30)


def test_three_targets_match_the_emulator(full_model, tmp_path):
    partitioned, report, frames, ref = full_model
    assert report.to_dict()["subgraphs"] and any(r["op"] == OP_NAME for r in report.to_dict()["host_ops"])
    assert ref[1].shape == (1, 64, 128, 128)
    for target in ("x86", "arm", "c7x"):
        missing = missing_tools(target)
        if missing:
            pytest.skip(f"the {target} folder needs " + "; ".join(missing))
        paths = deploy(partitioned, tmp_path / target, target)
        if target == "c7x":
            directory = str(tmp_path / target)
            includes = [f"-I{os.path.join(directory, d)}" for d in ("include", "driver", "driver/check")]
            done = subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", "-c", *includes, paths["lib"], "-o",
                                   os.devnull], capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
        got = run_deployed(tmp_path / target, frames, partitioned)
        for g, r in zip(got, ref):
            assert g.shape == r.shape and _relative(g, r) <= 1e-5, target


def test_compiled_twice_gives_the_same_bytes(full_model, tmp_path):
    partitioned = full_model[0]
    for target in ("c7x", "arm"):
        first = deploy(partitioned, tmp_path / f"{target}_a", target, name="bev")
        second = deploy(partitioned, tmp_path / f"{target}_b", target, name="bev")
        assert sorted(first) == sorted(second)
        for key in first:  # deploy_lib (.c or .so), params, graph JSON and every driver file
            assert open(first[key], "rb").read() == open(second[key], "rb").read(), (target, key)
