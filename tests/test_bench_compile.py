"""benchmarks/bench_compile.py in its quick mode (the tiny BEVDet resnet50 image stage), so it cannot rot."""

from __future__ import annotations

import math
import pathlib
import sys
import warnings

import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_compile  # noqa: E402

STAGES = ("import (tidlx.load)", "prepare (options, graph preparation)",
          "partition (composites, rules, partition, report)", "calibrate (reference kernels)",
          "TIDL: quantize (no bias calibration)", "TIDL: quantize + bias calibration", "TIDL: write artifacts",
          "TVM import (apache-tvm, first use)", "TVM build x86, host part", "TVM build x86, whole model (tidl=inline)",
          "TVM deploy folder x86")


def test_quick_run_times_every_stage_and_compares_like_with_like(capsys, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = bench_compile.run(quick=True, workdir=str(tmp_path))
    printed = capsys.readouterr().out
    for name in STAGES:
        stage = results.stage(name)
        assert math.isfinite(stage.wall) and stage.wall >= 0, name
        assert name in printed
    # the compiled folder and the ONNX file were written where asked
    assert (tmp_path / "compiled" / "tidlx_artifacts.json").is_file()
    assert (tmp_path / "bevdet_r50.onnx").is_file()
    assert (tmp_path / "deploy" / "deploy_lib.so").is_file()
    # the TVM model and onnxruntime ran the same computation on the same frame
    assert results.max_output_difference < 1e-4
    ms = results.latency_ms
    for engine in ("tvm", "onnxruntime", "onnxruntime_1", "tvm_partitioned", "tvm_partitioned_host"):
        assert ms[engine] > 0, engine
    # the host part is one softmax: its time excludes the TIDL subgraphs' external calls (no timing
    # ratio asserted: the float emulator's share of the tiny model moves with its speed and the load)
    assert results.host_ops == 1
    assert 0 < ms["tvm_partitioned_host"] < ms["tvm_partitioned"]
    assert "ratio TVM / onnxruntime" in printed and "load average" in printed


def test_main_passes_its_options_and_exits_0(monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr(bench_compile, "run", lambda *args: seen.setdefault("args", args))
    assert bench_compile.main(["--quick", "--rounds", "2", "--repeat", "3", "--calib-frames", "5",
                               "--bias-iterations", "6", "--dlight"]) == 0
    assert seen["args"] == (True, 2, 3, 5, 6, True)
    assert "bench_compile:" in capsys.readouterr().out
