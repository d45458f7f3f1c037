"""benchmarks/bench_compile.py in its quick mode (the tiny BEVDet resnet50 image stage), so it cannot rot."""

from __future__ import annotations

import json
import math
import os
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
    for engine in ("tvm", "tvm_1", "onnxruntime", "onnxruntime_1", "tvm_partitioned", "tvm_partitioned_host"):
        assert ms[engine] > 0, engine
    # TVM and onnxruntime were timed in processes of their own, one engine and thread count each
    assert sorted(results.processes) == ["onnxruntime", "onnxruntime_1", "tvm", "tvm_1"]
    pids = [line["pid"] for lines in results.processes.values() for line in lines]
    assert len(pids) == 4 and len(set(pids)) == 4 and os.getpid() not in pids
    for name, lines in results.processes.items():
        assert [line["engine"] for line in lines] == [name.split("_")[0]]
        assert [line["threads"] for line in lines] == [1 if name.endswith("_1") else 2]
        assert ms[name] == lines[0]["median_ms"]
    # the host part is one softmax: its time excludes the TIDL subgraphs' external calls (no timing
    # ratio asserted: the float emulator's share of the tiny model moves with its speed and the load)
    assert results.host_ops == 1
    assert 0 < ms["tvm_partitioned_host"] < ms["tvm_partitioned"]
    assert "ratio TVM / onnxruntime" in printed and "load average" in printed
    # the child mode: the library TVM exported and the ONNX file, each run on the saved feed, one JSON line
    for engine, model in (("tvm", "tvm_inline.so"), ("onnxruntime", "bevdet_r50.onnx")):
        assert bench_compile.main(["--engine", engine, "--model", str(tmp_path / model), "--feed",
                                   str(tmp_path / "feed.npz"), "--repeat", "2", "--warmup", "1"]) == 0
        line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert line["engine"] == engine and len(line["times_ms"]) == 2 and line["median_ms"] > 0


def test_main_passes_its_options_and_exits_0(monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr(bench_compile, "run", lambda *args: seen.setdefault("args", args))
    assert bench_compile.main(["--quick", "--rounds", "2", "--repeat", "3", "--calib-frames", "5",
                               "--bias-iterations", "6", "--dlight", "--tvm-repeat", "4"]) == 0
    assert seen["args"] == (True, 2, 3, 5, 6, True, 4)
    assert "bench_compile:" in capsys.readouterr().out
