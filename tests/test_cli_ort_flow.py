"""The ORT flow on the command line: ``tidlx partition --flow ort``, ``--compare-allowed``, ``tidlx compile
--flow ort`` (TI's ONNX Runtime files) and ``tidlx inspect`` of an allowedNode.txt."""

from __future__ import annotations

import json
import os

import onnx
import pytest

from tidlx.cli import main


def _model_makers():
    """The small models of tests/backends/test_tidl_ort_flow.py (the tests folder is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "tidl_ort_flow_tests", os.path.join(os.path.dirname(__file__), "backends", "test_tidl_ort_flow.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.chain, module.cyclic, module.three_runs


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ort")
    paths = {}
    for make in _model_makers():
        path = folder / f"{make.__name__}.onnx"
        onnx.save(make(), str(path))
        paths[make.__name__] = path
    return paths


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_partition_with_flow_ort_prints_tis_grouping(models, capsys):
    code, out, err = run(capsys, "partition", models["chain"], "--flow", "ort")
    assert code == 0 and err == ""
    assert "chain.onnx: 2 TIDL subgraph(s) (ort)" in out
    assert "Final number of subgraphs created are : 2, - Offloaded Nodes - 4, Total Nodes - 5" in out
    assert "subgraph_0 (@tidl_0): 2 node(s): 0-1" in out and "subgraph_1 (@tidl_1): 2 node(s): 3-4" in out
    assert "limit none (TI's ONNX Runtime import offloads batch > 1)" in out
    assert run(capsys, "partition", models["chain"], "-o", "flow=ort") == (code, out, err)


def test_partition_json_in_the_ort_flow(models, capsys):
    code, out, err = run(capsys, "partition", models["three_runs"], "--flow", "ort", "-o", "max_num_subgraphs=2",
                         "--json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc["flow"] == "ort" and doc["strategy"] == "ort"
    assert [s["nodes"] for s in doc["ort"]["subgraphs"]] == [[0], [2]] and doc["ort"]["dropped_subgraphs"] == 1
    assert doc["totals"]["num_subgraphs"] == 2


def test_partition_of_a_cyclic_grouping(models, capsys):
    code, out, err = run(capsys, "partition", models["cyclic"], "--flow", "ort")
    assert code == 0
    assert err.count("\n") == 1 and err.startswith("tidlx: warning: flow=ort: TI's grouping of the ONNX nodes is cyclic")
    assert 'the graph is not acyclic' in err
    assert "the graph is not acyclic: subgraph 0 (nodes 0-1)" in out
    assert "tidlx's acyclic partition instead (greedy):" in out
    assert "(ort, cyclic: greedy)" in out


@pytest.mark.parametrize("argv, message", [
    (["--flow", "tvm", "-o", "flow=ort"], "--flow tvm and -o flow=ort name different flows"),
    (["-o", "flow=onnx"], "option flow='onnx' is not allowed"),
    (["--flow", "ort", "--strategy", "all"], "comparing strategies is a question of the TVM flow"),
    (["--flow", "tvm", "--compare-allowed", "allowedNode.txt"], "--compare-allowed compares with TI's ONNX Runtime"),
    (["-o", "flow=tvm", "--compare-allowed", "{same}"], "--compare-allowed (flow ort) and -o flow=tvm name different"),
])
def test_partition_flow_errors(models, tmp_path, capsys, argv, message):
    same = tmp_path / "allowedNode.txt"
    same.write_text("0\n")
    code, out, err = run(capsys, "partition", models["chain"], *[a.format(same=same) for a in argv])
    assert code == 2 and out == "" and err.startswith("tidlx: error: ") and message in err
    assert err.count("\n") == 1


def test_compile_writes_tis_onnx_runtime_files_and_inspect_reads_them(models, tmp_path, capsys):
    folder = tmp_path / "chain_ort"
    code, out, err = run(capsys, "compile", models["chain"], "-o", folder, "--flow", "ort", "-o",
                         "advanced_options:calibration_frames=2", "-o", "accuracy_level=0",
                         "-o", "advanced_options:calibration_iterations=1")
    assert code == 0, err
    assert "ONNX Runtime flow files: allowedNode.txt, onnxrtMetaData.txt, subgraph_0_tidl_io_1.bin" in out
    names = set(os.listdir(folder))
    assert {"allowedNode.txt", "onnxrtMetaData.txt", "subgraph_0_tidl_net.bin", "subgraph_0_tidl_io_1.bin",
            "subgraph_1_tidl_net.bin", "subgraph_1_tidl_io_1.bin"} <= names
    assert (folder / "allowedNode.txt").read_text() == "2\n2\n0\n1\n2\n3\n4\n"
    meta = (folder / "onnxrtMetaData.txt").read_text().splitlines()
    assert meta[0] == "numGraphNodes=5" and "1:inDataNames=e" in meta and "1:outDataNames=y" in meta
    for k in (0, 1):   # copies of tidlx's files under TI's names
        assert (folder / f"subgraph_{k}_tidl_net.bin").read_bytes() == (folder / f"tidl_subgraph{k}_net.bin").read_bytes()
        assert (folder / f"subgraph_{k}_tidl_io_1.bin").read_bytes() == \
            (folder / f"tidl_subgraph{k}_io_1.bin").read_bytes()
    # round trip: inspect reads the file back as the partition's groups
    code, out, err = run(capsys, "inspect", folder / "allowedNode.txt", "--json")
    assert code == 0 and err == ""
    assert json.loads(out)["subgraphs"] == [[0, 1], [3, 4]]
    code, part, _ = run(capsys, "partition", models["chain"], "--flow", "ort", "--json")
    assert [s["nodes"] for s in json.loads(part)["ort"]["subgraphs"]] == json.loads(out)["subgraphs"]
    code, out, err = run(capsys, "inspect", folder / "allowedNode.txt")
    assert code == 0 and out.splitlines() == [f"{folder / 'allowedNode.txt'}: 2 subgraph(s), 4 node(s) offloaded",
                                              "  subgraph 0: 2 node(s): 0-1", "  subgraph 1: 2 node(s): 3-4"]
    code, out, err = run(capsys, "inspect", folder)   # the compiled folder still reads as tidlx's
    assert code == 0 and "tidl_subgraph0_net.bin" in out


def test_inspect_a_ti_artifacts_folder(tmp_path, capsys):
    (tmp_path / "allowedNode.txt").write_text("1\n3\n4\n5\n7\n")
    code, out, err = run(capsys, "inspect", tmp_path)
    assert code == 0 and "1 subgraph(s), 3 node(s) offloaded" in out and "subgraph 0: 3 node(s): 4-5, 7" in out


def test_compare_allowed_same_and_different(models, tmp_path, capsys):
    same = tmp_path / "same.txt"
    same.write_text("2\n2\n0\n1\n2\n3\n4\n")
    code, out, err = run(capsys, "partition", models["chain"], "--compare-allowed", same)
    assert code == 0 and err == ""
    assert f"{same}: TI 2 subgraph(s), 4 node(s) offloaded; tidlx 2 subgraph(s), 4 node(s) offloaded; 5 of 5" in out
    assert "the same subgraphs, node for node" in out
    other = tmp_path / "allowedNode.txt"
    other.write_text("2\n3\n0\n1\n2\n1\n4\n")
    code, out, err = run(capsys, "partition", models["chain"], "--compare-allowed", other)
    assert code == 1 and err == ""
    assert ("node 2 'e1' (Exp): TI subgraph 0, tidlx host (exp 'e1': tidlx has no TIDL layer model for exp (TI's "
            "ONNX Runtime import runs Exp as TIDL_ExpLayer") in out
    assert "node 3 'c2' (Conv): TI host, tidlx subgraph 1" in out
    assert "node 4 'r2' (Relu): TI subgraph 1 (from node 4), tidlx subgraph 1 (from node 3)" in out
    code, out, _ = run(capsys, "partition", models["chain"], "--compare-allowed", other, "--json")
    doc = json.loads(out)
    assert code == 1 and not doc["compare_allowed"]["same"] and len(doc["compare_allowed"]["differences"]) == 3


@pytest.mark.parametrize("content, line, what", [
    ("2\n1\n0\nx\n", 4, "'x' is not the node count of subgraph 1"),
    ("1\n2\n0\n", 4, "the file ends inside subgraph 0"),
    ("", 1, "the file is empty"),
])
def test_a_malformed_allowed_nodes_file_is_one_error_line(models, tmp_path, capsys, content, line, what):
    path = tmp_path / "allowedNode.txt"
    path.write_text(content)
    for argv in (["partition", models["chain"], "--compare-allowed", path], ["inspect", path]):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == ""
        assert err.startswith(f"tidlx: error: {path}:{line}: ") and what in err and err.count("\n") == 1


def test_compare_allowed_of_another_model(models, tmp_path, capsys):
    path = tmp_path / "allowedNode.txt"
    path.write_text("1\n1\n40\n")
    code, out, err = run(capsys, "partition", models["chain"], "--compare-allowed", path)
    assert code == 2 and "lists node 40, and the model has 5 node(s)" in err


def test_compare_follows_the_ort_flow(models, capsys):
    """``tidlx compare --flow ort`` quantizes the subgraphs of TI's ONNX Runtime grouping."""
    code, out, err = run(capsys, "compare", models["three_runs"], "--flow", "ort", "-o", "max_num_subgraphs=2",
                         "-o", "accuracy_level=0", "-o", "advanced_options:calibration_iterations=1", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["subgraphs"] == ["tidl_0", "tidl_1"]
    code, _, err = run(capsys, "compare", models["chain"], "--flow", "tvm", "-o", "flow=ort")
    assert code == 2 and "name different flows" in err
