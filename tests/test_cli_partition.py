"""``tidlx partition MODEL ...`` (tidlx/partition_cli.py), run in-process through ``tidlx.cli.main``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import onnx
import pytest

import tidlx
from tidlx.backends.tidl.options import BATCH_ENV_VAR
from tidlx.models import bevdet_img_stage
from tidlx.cli import main


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    b1 = folder / "bevdet_tiny_b1.onnx"
    bevdet_img_stage("resnet50", batch=1, tiny=True, path=str(b1))
    return folder, b1


@pytest.fixture(scope="module")
def bevdet_b6(tmp_path_factory):
    # BEVDet's Resize carries its output size (batch included), so batch 6 is built, not overridden
    path = tmp_path_factory.mktemp("models") / "bevdet_tiny_b6.onnx"
    bevdet_img_stage("resnet50", batch=6, tiny=True, path=str(path))
    return path


@pytest.fixture(scope="module")
def gemms(tmp_path_factory):
    import importlib.util
    import os

    spec = importlib.util.spec_from_file_location(
        "tidl_partition_tests", os.path.join(os.path.dirname(__file__), "backends", "test_tidl_partition.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    bn_between_gemms = module.bn_between_gemms
    path = tmp_path_factory.mktemp("models") / "gemms.onnx"
    onnx.save(bn_between_gemms(), str(path))
    return path


def run(capsys, *argv):
    code = main(["partition", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_prints_the_report(models, capsys):
    _, b1 = models
    code, out, err = run(capsys, b1)
    assert code == 0 and err == ""
    assert "bevdet_tiny_b1.onnx: 2 TIDL subgraph(s) (greedy)" in out
    assert "ops on the host, and why" in out and "/img_view_transformer/Softmax" in out
    assert "tidl_0" in out and "tidl_1" in out


def test_json_is_the_only_output_and_parses(models, capsys):
    _, b1 = models
    code, out, err = run(capsys, b1, "--json", "-o", "deny_list:layer_name=/img_neck/Resize")
    assert code == 0 and err == ""
    data = json.loads(out)
    assert data["model"] == "bevdet_tiny_b1.onnx" and data["strategy"] == "greedy"
    assert [s["name"] for s in data["subgraphs"]] == ["tidl_0", "tidl_1", "tidl_2"]
    assert {h["layer"]: h["kind"] for h in data["host_ops"]} == {
        "/img_neck/Resize": "deny_list:layer_name", "/img_view_transformer/Softmax": "rule"}
    assert data["options"] == {"deny_list:layer_name": "/img_neck/Resize"}


def test_svg_and_relay_text(models, capsys, tmp_path):
    _, b1 = models
    svg = tmp_path / "graph.svg"
    code, out, err = run(capsys, b1, "--svg", svg, "--print-relay", "--strategy", "max-offload")
    assert code == 0 and f"wrote {svg}" in err
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    text = out[out.index('#[version = "0.0.5"]'):]
    assert text.count('Compiler="tidl"') == 2 and "def @tidl_1(" in text
    assert "(max-offload)" in out


def test_compare_strategies(models, capsys):
    _, b1 = models
    code, out, _ = run(capsys, b1, "--strategy", "all")
    assert code == 0
    assert "partitioning strategies for bevdet_tiny_b1.onnx" in out
    for name in ("greedy", "max-offload", "min-transfer"):
        assert name in out
    code, out, _ = run(capsys, b1, "--compare", "--json")
    rows = {r["strategy"]: r for r in json.loads(out)["strategies"]}
    # other tests may have registered strategies of their own
    assert {"greedy", "max-offload", "min-transfer"} <= set(rows)
    assert all(rows[s]["error"] is None and rows[s]["subgraphs"] == 2 for s in ("greedy", "max-offload"))


def test_batch6_and_the_batch_limit(bevdet_b6, capsys, monkeypatch):
    monkeypatch.delenv(BATCH_ENV_VAR, raising=False)
    code, out, _ = run(capsys, bevdet_b6, "--json")
    data = json.loads(out)
    assert data["batch"]["model"] == 6 and data["totals"]["tidl_macs"] == 0
    assert data["totals"]["host_ops_by_kind"]["batch"] >= 180
    assert all(f"{BATCH_ENV_VAR}=1" in h["reason"] for h in data["host_ops"] if h["kind"] == "batch")
    code, out, _ = run(capsys, bevdet_b6, "-o", "max_batch_size=6", "--json")
    assert json.loads(out)["totals"]["tidl_macs_percent"] > 99.0
    monkeypatch.setenv(BATCH_ENV_VAR, "6")
    code, out, _ = run(capsys, bevdet_b6, "--json")
    data = json.loads(out)
    assert data["batch"]["limit_from"] == f"{BATCH_ENV_VAR}=6" and data["totals"]["tidl_macs_percent"] > 99.0
    code, out, err = run(capsys, bevdet_b6, "-o", "advanced_options:inference_mode=1", "-o",
                         "advanced_options:num_cores=4")
    assert code == 2 and "batch 6 is not a multiple of advanced_options:num_cores=4" in err


def test_batch_override(gemms, capsys, monkeypatch):
    monkeypatch.delenv(BATCH_ENV_VAR, raising=False)
    code, out, _ = run(capsys, gemms, "--batch", "4", "--json")
    data = json.loads(out)
    assert code == 0 and data["batch"]["model"] == 4 and data["subgraphs"] == []
    assert {h["kind"] for h in data["host_ops"]} == {"batch"}
    code, out, _ = run(capsys, gemms, "--batch", "4", "-o", "max_batch_size=4", "--json")
    data = json.loads(out)
    assert data["subgraphs"][0]["inputs"][0]["shape"] == [4, 16]
    assert data["transformations"][0]["into"] == "fc1"


def test_relay_text_model(models, capsys, tmp_path):
    _, b1 = models
    mod = tidlx.load(str(b1))
    path = tmp_path / "bevdet.relay"
    path.write_text(mod.astext(), encoding="utf-8")
    code, out, err = run(capsys, path, "--json")
    assert code == 0
    data = json.loads(out)
    assert len(data["subgraphs"]) == 2
    assert [h["layer"] for h in data["host_ops"]] == ["/img_view_transformer/Softmax"]


def test_warnings_are_one_line_each(models, capsys):
    _, b1 = models
    code, _, err = run(capsys, b1, "-o", "deny_list:layer_name=/img_neck/Resiz")
    assert code == 0
    assert err.startswith("tidlx: warning: option deny_list:layer_name names 1 layer(s) not in the model")
    assert "closest layer: '/img_neck/Resize'" in err and "Traceback" not in err


@pytest.mark.parametrize("argv, message", [
    (["-o", "deny_lst=nn.relu"], "unknown TIDL option 'deny_lst'; did you mean 'deny_list'?"),
    (["-o", "max_num_subgraphs=40"], "max_num_subgraphs=40 is too large"),
    (["-o", "tensor_bits=12"], "option tensor_bits=12 is not allowed"),
    (["-o", "tensor_bits"], "must be written key=value"),
    (["-o", "disabled_passes=FoldBatchNormIntoDens"], "did you mean FoldBatchNormIntoDense?"),
    (["--strategy", "greedyy"], "unknown partition strategy 'greedyy'; did you mean greedy?"),
    (["--batch", "0"], "--batch '0' is not allowed"),
    (["--batch", "two"], "--batch 'two' is not allowed"),
    (["--json", "--print-relay"], "both write to standard output"),
    (["--compare", "--svg", "x.svg"], "--svg draws one partition"),
])
def test_errors_exit_2_without_a_traceback(models, capsys, argv, message):
    _, b1 = models
    code, out, err = run(capsys, b1, *argv)
    assert code == 2 and out == ""
    assert err.startswith("tidlx: error: ") and message in err and "Traceback" not in err


def test_bad_files_exit_2(capsys, tmp_path):
    code, _, err = run(capsys, tmp_path / "missing.onnx")
    assert code == 2 and "missing.onnx: no such file" in err
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    code, _, err = run(capsys, bad)
    assert code == 2 and err.startswith("tidlx: error: ") and "not an ONNX model" in err
    text = tmp_path / "model.relay"
    text.write_text("def @main(%x: Tensor[(1, 4), float32]) { nn.relu(%x) }", encoding="utf-8")
    code, _, err = run(capsys, text, "--batch", "2")
    assert code == 2 and "--batch applies to ONNX models" in err
    code, _, err = run(capsys, tmp_path / "model.pt")
    assert code == 2 and "no such file" in err
    (tmp_path / "model.pt").write_bytes(b"x")
    code, _, err = run(capsys, tmp_path / "model.pt")
    assert code == 2 and "unknown model format '.pt'" in err
    code, _, err = run(capsys, tmp_path, "--json")
    assert code == 2 and "is a folder" in err
