"""tidlx sweep: a study of built-in models x option sets on the local process pool and on Ray.

One study of 3 tiny built-in models x 24 option sets (72 partition cells) runs on the local pool,
again from the cache, and on a Ray instance this module starts once; the tables agree (all but the
``time_*`` columns), and sampled cells agree with ``tidlx.partition`` called directly. The Ray tests
come last: once Ray's threads run in this process, the local pool starts through a fork server.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest

import tidlx
from tidlx.studies import read_table, write_table
from tidlx.studies.study import StudyError

MODELS = [
    ("bn_between_gemms", {}),
    ("bevdet_img_stage_tiny", {"backbone": "resnet18", "batch": 1}),
    ("bevdet_ti_export", {"tiny": True, "batch": 1}),
]

STUDY = """\
models:
  - {builtin: bn_between_gemms}
  - {builtin: bevdet_img_stage_tiny, args: {backbone: resnet18, batch: 1}, name: bevdet_tiny}
  - {builtin: bevdet_ti_export, args: {tiny: true, batch: 1}, name: bevdet_ti}
grid:
  max_num_subgraphs: [1, 4, 16]
  deny_list: ["", nn.batch_norm]
  strategy: [greedy, max-offload]
  flow: [tvm, ort]
measures: [partition]
"""

#: The grid above, in its order (the first key varies slowest).
GRID = [(m, d, s, f) for m in (1, 4, 16) for d in ("", "nn.batch_norm") for s in ("greedy", "max-offload")
        for f in ("tvm", "ort")]


def _without_times(rows):
    return [{k: v for k, v in row.items() if not k.startswith("time_")} for row in rows]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("study")
    path = folder / "study.yaml"
    path.write_text(STUDY)
    return path


@pytest.fixture(scope="module")
def local_run(study, tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    return tidlx.sweep(study, jobs=2, out=out), out


def test_the_local_pool_runs_every_cell(local_run):
    result, out = local_run
    assert result.summary() == {"cells": 72, "cached": 0, "failed": 0, "results": result.results}
    assert os.path.dirname(result.results) == str(out)
    columns, rows = read_table(result.results)
    assert columns == result.columns
    assert columns[:6] == ["model", "option_set", "max_num_subgraphs", "deny_list", "strategy", "flow"]
    assert [(r["model"], r["option_set"]) for r in rows] == \
        [(m, k) for m in ("bn_between_gemms", "bevdet_tiny", "bevdet_ti") for k in range(24)]
    assert [(r["max_num_subgraphs"], r["deny_list"], r["strategy"], r["flow"]) for r in rows[:24]] == GRID
    assert {c for c in columns if c.startswith("time_")} >= {"time_load", "time_partition", "time_cell"}
    assert all(r["error"] is None for r in rows)


def test_cells_agree_with_tidlx_partition(local_run, tmp_path):
    """Every fifth cell, measured again here with the public API."""
    import onnx

    result, _ = local_run
    rows = result.rows
    for k in range(0, len(rows), 5):
        name, args = MODELS[k // 24]
        m, deny, strategy, flow = GRID[k % 24]
        path = tmp_path / f"{name}.onnx"
        if not path.exists():
            onnx.save(getattr(tidlx.models, name)(**args), str(path))
        _, report = tidlx.partition(tidlx.load(str(path)),
                                    {"max_num_subgraphs": m, "deny_list": deny, "flow": flow}, strategy)
        expected = {"subgraphs": report.num_subgraphs, "tidl_macs_percent": report.tidl_macs_percent,
                    "tidl_macs": report.tidl_macs, "total_macs": report.total_macs,
                    "host_ops": len(report.host_ops), "boundary_bytes": report.boundary_bytes}
        assert {c: rows[k][c] for c in expected} == expected, (k, rows[k])


def test_a_rerun_reads_every_cell_from_the_cache(local_run, study, capsys):
    from tidlx.cli import main

    result, out = local_run
    assert main(["sweep", str(study), "-j", "2", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary == {"cells": 72, "cached": 72, "failed": 0, "results": result.results}
    assert read_table(result.results)[1] == result.rows   # time_* too: the cached rows are the rows


def test_a_changed_study_recomputes_only_the_new_cells(local_run, study, tmp_path):
    _, out = local_run
    changed = tmp_path / "changed.yaml"
    changed.write_text(STUDY.replace("max_num_subgraphs: [1, 4, 16]", "max_num_subgraphs: [4, 8]")
                       .replace("  - {builtin: bevdet_ti_export, args: {tiny: true, batch: 1}, name: bevdet_ti}\n",
                                ""))
    result = tidlx.sweep(changed, jobs=2, out=out, summary=False)
    assert (result.cells, result.cached, result.failed) == (32, 16, 0)


BROKEN = [
    ("models:\n  - {builtin: bn_between_gemms}\ngrid:\n  max_num_subgraphs: [4, 16]\n  deny_lst: ['']\n",
     5, "deny_lst"),
    ("models:\n  - {builtin: bn_between_gemms}\ngrid:\n  max_num_subgraphs:\n    - 4\n    - 99\n", 6,
     "max_num_subgraphs"),
    ("models:\n  - {builtin: bn_between_gems}\n", 2, "bn_between_gemms"),
    ("models:\n  - missing.onnx\n", 2, "missing.onnx: no such file"),
    ("models:\n  - {builtin: bn_between_gemms}\nmeasures: [partition, sqnr]\n", 3, "sqnr"),
    ("models:\n  - {builtin: bn_between_gemms}\ngird:\n  max_num_subgraphs: [4]\n", 3, "did you mean 'grid'"),
    ("models:\n  - {builtin: bn_between_gemms}\noptions:\n  - {strategy: greedy}\n  - {strategy: greed}\n", 5,
     "greedy"),
    ("models:\n  - {builtin: bn_between_gemms, args: {hiden: 3}}\n", 2, "hiden"),
    ("models: [a.onnx\ngrid: {x: 1}\n", 2, "not valid YAML"),
]


@pytest.mark.parametrize("text,line,named", BROKEN)
def test_a_broken_study_is_an_error_naming_file_and_line(tmp_path, text, line, named):
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    with pytest.raises(StudyError) as info:
        tidlx.sweep(path, jobs=1, out=tmp_path / "out", summary=False)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}:"), message
    assert named in message
    assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


def test_the_command_line_prints_a_broken_study_as_an_error(tmp_path, capsys):
    from tidlx.cli import main

    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN[0][0])
    assert main(["sweep", str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"tidlx: error: {path}:5: grid: deny_lst: unknown TIDL option")


def test_a_failing_cell_is_a_row_with_its_error(tmp_path):
    """A model that does not import with the shapes given fails its cells; the others run, and the
    failures (tidlx's answer about the input) are cached like any row."""
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent("""\
        models:
          - {builtin: bn_between_gemms, name: good}
          - {builtin: bn_between_gemms, name: bad, shapes: {features: [3, 12, 5]}}
        options:
          - {max_num_subgraphs: 4}
          - {max_num_subgraphs: 8, strategy: max-offload}
        """))
    result = tidlx.sweep(path, jobs=2, out=tmp_path / "out", summary=False)
    assert (result.cells, result.failed) == (4, 2)
    good, bad = result.rows[:2], result.rows[2:]
    assert all(r["error"] is None and r["subgraphs"] == 1 for r in good)
    for row in bad:
        assert row["error"].startswith("OnnxImportError: node '/fc1/Gemm' (Gemm)"), row["error"]
        assert row["subgraphs"] is None
    again = tidlx.sweep(path, jobs=2, out=tmp_path / "out", summary=False)
    assert (again.cached, again.failed) == (4, 2)


def test_the_compare_measure_agrees_with_tidlx_compare(tmp_path):
    import onnx

    path = tmp_path / "study.yaml"
    path.write_text("models:\n  - {builtin: bn_between_gemms}\noptions:\n  - {tensor_bits: 16}\n"
                    "measures: [compare]\ncalib: {random: 2, seed: 3}\ncompare: {worst_layers: 2}\n")
    result = tidlx.sweep(path, jobs=1, out=tmp_path / "out", summary=False)
    row = result.rows[0]
    assert row["error"] is None, row["error"]
    onnx.save(tidlx.models.bn_between_gemms(), str(tmp_path / "m.onnx"))
    from tidlx.backends.tidl.frames import model_inputs, random_frames

    mod = tidlx.load(str(tmp_path / "m.onnx"))
    with pytest.warns(tidlx.ir.errors.TidlxWarning):
        expected = tidlx.compare(mod, options={"tensor_bits": 16}, calib=random_frames(model_inputs(mod), 2, 3))
    assert row["sqnr_db:scores"] == row["sqnr_db_min"] == expected.outputs[0].sqnr_db
    assert row["worst_layer"] == expected.layers[0].layer
    assert row["worst_layers"].count(" dB") == 2
    assert "subgraphs" not in result.columns


def test_the_summary_page_shows_each_models_front(local_run):
    result, out = local_run
    assert result.html == str(out / "summary.html")
    page = open(result.html, encoding="utf-8").read()
    for model in ("bn_between_gemms", "bevdet_tiny", "bevdet_ti"):
        assert f"<h2>{model}</h2>" in page
    assert page.count("<svg") == 3 and page.count('id="front0-sweep-front"') == 1


def test_the_pareto_front():
    """A dominates D (as good or better in all three, better in one); A and B are one point; C and E
    each win one measure; F loses to A everywhere but the bytes, where it ties."""
    from tidlx.studies.summary import OBJECTIVES, pareto_front

    rows = [dict(tidl_macs_percent=100, boundary_bytes=10, sqnr_db_min=30.0),    # A
            dict(tidl_macs_percent=100, boundary_bytes=10, sqnr_db_min=30.0),    # B = A
            dict(tidl_macs_percent=90, boundary_bytes=5, sqnr_db_min=30.0),      # C: fewest bytes
            dict(tidl_macs_percent=90, boundary_bytes=20, sqnr_db_min=20.0),     # D < A
            dict(tidl_macs_percent=50, boundary_bytes=5, sqnr_db_min=40.0),      # E: best SQNR
            dict(tidl_macs_percent=99, boundary_bytes=10, sqnr_db_min=float("nan"))]   # F < A
    assert pareto_front(rows, OBJECTIVES) == [[0, 1], [2], [4]]
    assert pareto_front(rows, OBJECTIVES[:2]) == [[0, 1], [2]]


def test_without_pyarrow_the_table_is_csv(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    rows = [{"model": "a", "x": 1, "y": 0.1, "error": None}, {"model": "b", "x": None, "y": 2, "error": "E: no"}]
    path = write_table(["model", "x", "y", "error"], rows, str(tmp_path))
    assert path == str(tmp_path / "results.csv")
    assert (tmp_path / "results.csv").read_text().splitlines() == ["model,x,y,error", "a,1,0.1,", "b,,2.0,E: no"]


def test_a_ray_address_nothing_answers_is_an_error(tmp_path):
    from tidlx.studies.engines import SweepBackendError

    path = tmp_path / "study.yaml"
    path.write_text("models:\n  - {builtin: bn_between_gemms}\n")
    with pytest.raises(SweepBackendError, match=r"--ray 127\.0\.0\.1:1: no Ray cluster answers there"):
        tidlx.sweep(path, ray="127.0.0.1:1", out=tmp_path / "out", summary=False)


# -- Ray: started once for the module, last ---------------------------------------------------------

@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def test_ray_gives_the_same_table(ray_cluster, local_run, study, tmp_path):
    local, _ = local_run
    result = tidlx.sweep(study, ray="local", out=tmp_path / "ray", summary=False)
    assert (result.cells, result.cached, result.failed) == (72, 0, 0)
    assert result.columns == local.columns
    assert _without_times(read_table(result.results)[1]) == _without_times(local.rows)
    assert ray_cluster.is_initialized()   # a Ray started by the caller is left running


def test_each_ray_task_is_named_after_its_cell(ray_cluster, tmp_path, monkeypatch):
    """What Ray's dashboard lists: the task's name, read inside each task."""
    from tidlx.studies import engines

    def task_name(cell, *payloads):
        return {"error": None, "warnings": ray_cluster.get_runtime_context().get_task_name(), "_cacheable": False}

    monkeypatch.setattr(engines, "_ray_cell", task_name)
    path = tmp_path / "study.yaml"
    path.write_text("models:\n  - {builtin: bn_between_gemms, name: bn}\noptions:\n  - {max_num_subgraphs: 4}\n"
                    "  - {deny_list: nn.dense, strategy: max-offload}\n")
    result = tidlx.sweep(path, ray="local", out=tmp_path / "out", summary=False)
    assert [r["warnings"] for r in result.rows] == ["sweep 1/2 bn #0: max_num_subgraphs=4",
                                                    "sweep 2/2 bn #1: deny_list=nn.dense strategy=max-offload"]
