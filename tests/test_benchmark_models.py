"""The benchmark model set (benchmarks/model_set.py): deterministic bytes, imports into tidlx, runs like onnxruntime."""

from __future__ import annotations

import hashlib
import pathlib
import sys

import numpy as np
import onnxruntime as ort
import pytest

import tidlx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))
import model_set  # noqa: E402

# Small images keep this fast; the layer structure does not depend on the image size.
SMALL = {"resnet18": dict(image=64), "mobilenet_v2": dict(image=64), "mobilenet_v3_small": dict(image=64),
         "efficientnet_b0": dict(image=64), "shufflenet_v2": dict(image=64)}
# fcn_resnet50 (6 s to draw its 33M weights) and resnet50 are checked by benchmarks/bench_models.py.


def _digest(model) -> str:
    return hashlib.sha256(model.SerializeToString()).hexdigest()


@pytest.mark.parametrize("name", sorted(SMALL))
def test_builder_is_deterministic_imports_and_matches_onnxruntime(name, tmp_path):
    build = model_set.MODELS[name][0]
    model = build(**SMALL[name])
    assert _digest(model) == _digest(build(**SMALL[name]))
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(model.SerializeToString())
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(1).uniform(-1, 1, dims).astype(np.float32)
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    got = tidlx.emulate(tidlx.load(str(path)), {"input": x})[0]
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max()


def test_set_names_every_architecture_the_issue_asks_for():
    assert set(model_set.MODELS) == {"resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
                                     "shufflenet_v2", "fcn_resnet50", "bevdet_img_stage"}


def test_mobilenet_v3_small_uses_its_distinctive_ops():
    ops = {node.op_type for node in model_set.mobilenet_v3_small(image=32).graph.node}
    assert {"HardSwish", "HardSigmoid", "GlobalAveragePool", "Mul"} <= ops
    kernels = {tuple(a.ints) for node in model_set.mobilenet_v3_small(image=32).graph.node if node.op_type == "Conv"
               for a in node.attribute if a.name == "kernel_shape"}
    assert {(3, 3), (5, 5)} <= kernels


def test_shufflenet_v2_splits_and_shuffles():
    ops = {node.op_type for node in model_set.shufflenet_v2(image=32).graph.node}
    assert {"Split", "Transpose", "Reshape", "Concat"} <= ops


def test_the_per_core_comparison_caps_tidlx_threads(tmp_path, monkeypatch):
    import bench_float
    from tidlx.emulator.config import EmulatorConfig

    # setenv (not delenv) so the value _make_runner writes is undone after the test
    monkeypatch.setenv("TIDLX_EMULATOR_THREADS", "0")
    model = model_set.resnet18(image=32)
    path = tmp_path / "r18.onnx"
    path.write_bytes(model.SerializeToString())
    feed = bench_float.random_feed(model, seed=1)
    run, _ = bench_float._make_runner("tidlx", str(path), feed, threads=1)
    assert EmulatorConfig.from_env().threads == 1
    assert np.isfinite(run()[0]).all()


def test_bench_float_refuses_negative_threads(capsys):
    import bench_float

    with pytest.raises(SystemExit) as exit_:
        bench_float.main(["--engine", "tidlx", "--model", "m.onnx", "--feed", "f.npz", "--threads", "-1"])
    assert exit_.value.code == 2
    assert "--threads must be >= 0" in capsys.readouterr().err
