"""``tidlx options``: every option tidlx reads, its default, allowed values, what it changes and how much
of it tidlx implements, as tables, as JSON and one at a time."""

import dataclasses
import json
import os
import subprocess
import sys
import warnings

import pytest

from tidlx.backends.tidl.composites import FUSIONS
from tidlx.backends.tidl.flow import DISABLED_PASSES_OPTION, PREP_PASSES, resolve_options
from tidlx.backends.tidl.options import OPTIONS, STEPS, SUPPORT, TidlOptions
from tidlx.cli import main
from tidlx.options_cli import JSON_KEYS

FIELDS = [f.name for f in dataclasses.fields(TidlOptions)]
NAME_OF_FIELD = {spec.field: spec.name for spec in OPTIONS.values()}


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def json_records(capsys, *names):
    code, out, err = run_cli(capsys, "options", *names, "--json")
    assert code == 0 and not err, err
    return json.loads(out)


def table_rows(out):
    """The tables' rows (output to a pipe is never wrapped: one line a row) by option name: the cells."""
    rows = {}
    for line in out.splitlines():
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            assert cells[0] not in rows, cells[0]
            rows[cells[0]] = cells
    return rows


def test_every_option_tidlx_accepts_is_in_the_table_and_the_json(capsys):
    """Every field of TidlOptions (by its TI name), tidlx's disabled_passes, flow and model_surgery: a new option is in the
    output, with where it acts and how much of it tidlx implements, or this test fails."""
    assert set(NAME_OF_FIELD) == set(FIELDS)   # every field has a spec, hence a TI name
    expected = [NAME_OF_FIELD[f] for f in FIELDS] + [DISABLED_PASSES_OPTION, "flow", "model_surgery"]
    code, out, err = run_cli(capsys, "options")
    assert code == 0 and not err, err
    rows = table_rows(out)
    assert sorted(rows) == sorted(expected)
    records = json_records(capsys)
    assert [r["name"] for r in records] == list(OPTIONS) + [DISABLED_PASSES_OPTION, "flow", "model_surgery"]
    assert sorted(r["field"] for r in records if r["field"]) == sorted(FIELDS)
    for r in records:
        assert r["changes"], r["name"]
        assert r["support"] in SUPPORT, r["name"]
        assert set(r["steps"]) <= set(STEPS), r["name"]
        assert r["origin"] in ("TI", "tidlx"), r["name"]
        if r["support"] != "full":       # a part, or accepted only: say which
            assert r["support_note"], r["name"]
        assert (r["support"] == "accepted") == (not r["steps"]), r["name"]   # accepted: acts nowhere
        cells = rows[r["name"]]
        assert cells[2] == r["allowed"] and cells[3] == r["changes"]
        assert cells[5].startswith(r["support"])
    assert {r["name"] for r in records if r["origin"] == "tidlx"} == \
        {"max_batch_size", "max_subgraph_io", "min_subgraph_macs", "disabled_fusions", DISABLED_PASSES_OPTION, "flow",
         "model_surgery", "tidl_version"}


def test_json_has_the_fixed_keys_and_the_checks_of_the_specs(capsys):
    records = json_records(capsys)
    for r in records:
        assert list(r) == list(JSON_KEYS), r["name"]
    by_name = {r["name"]: r for r in records}
    for name, spec in OPTIONS.items():
        r = by_name[name]
        assert (r["field"], r["kind"], r["minimum"], r["maximum"]) == (spec.field, spec.kind, spec.minimum,
                                                                      spec.maximum)
        if spec.kind == "choice":
            assert r["choices"] == list(spec.choices)
    assert by_name["tensor_bits"]["choices"] == [8, 16]
    assert by_name["advanced_options:quantization_scale_type"]["support"] == "partial"
    assert by_name["advanced_options:c7x_codegen"]["support"] == "accepted"
    # closed sets of names come from the code that checks them
    assert by_name["disabled_fusions"]["choices"] == list(FUSIONS)
    assert by_name[DISABLED_PASSES_OPTION]["choices"] == list(PREP_PASSES)
    assert all(p in by_name[DISABLED_PASSES_OPTION]["allowed"] for p in PREP_PASSES)


def test_printed_defaults_are_the_defaults(capsys):
    """The JSON's and the table's defaults are TidlOptions()'s; given back as options they build
    TidlOptions() again."""
    records = json_records(capsys)
    defaults = TidlOptions()
    by_name = {r["name"]: r for r in records}
    for field in FIELDS:
        value = getattr(defaults, field)
        printed = by_name[NAME_OF_FIELD[field]]["default"]
        assert printed == (",".join(value) if isinstance(value, tuple) else value), field
    assert by_name[DISABLED_PASSES_OPTION]["default"] == ",".join(resolve_options(None)[1]) == ""

    _, out, _ = run_cli(capsys, "options")
    rows = table_rows(out)
    given = {}
    for r in records:
        cell = rows[r["name"]][1]
        if cell == "unset":
            assert r["default"] is None
            continue
        given[r["name"]] = "" if cell == '""' else cell
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the accuracy_level 9 options given at level 1
        options, passes = resolve_options(given)
    assert options == defaults and passes == ()


def test_one_option(capsys):
    code, out, err = run_cli(capsys, "options", "advanced_options:quantization_scale_type")
    assert code == 0 and not err
    lines = out.splitlines()
    assert lines[0] == "advanced_options:quantization_scale_type (TI's option, TidlOptions.quantization_scale_type)"
    assert "  default:  0" in lines and "  allowed:  one of 0, 1, 4" in lines
    tidlx_line = next(line for line in lines if line.startswith("  in tidlx: "))
    assert tidlx_line.startswith("  in tidlx: partial: 0 (NP2Fixed), 1 (P2Dynamic) and 4 (asymmetric per-channel")
    assert "│" not in out   # no table

    code, out, _ = run_cli(capsys, "options", "disabled_passes")
    assert code == 0 and out.startswith("disabled_passes (tidlx's own option)\n") and '  default:  ""' in out

    records = json_records(capsys, "max_batch_size")
    assert len(records) == 1 and records[0]["name"] == "max_batch_size" and records[0]["default"] is None
    assert [r["name"] for r in json_records(capsys, "platform", "tensor_bits")] == ["platform", "tensor_bits"]


@pytest.mark.parametrize("name, hint", [
    ("calibration_frames", "'advanced_options:calibration_frames'"),   # without its advanced_options:
    ("tensorbits", "'tensor_bits'"),
    ("deny_layer_types", "'deny_list:layer_type'"),                    # TidlOptions' field name
    ("disabled_pass", "'disabled_passes'"),
])
def test_unknown_option_is_one_error_line_with_the_closest_names(capsys, name, hint):
    code, out, err = run_cli(capsys, "options", "tensor_bits", name)
    assert code == 2 and not out
    assert err.startswith(f"tidlx: error: unknown TIDL option '{name}'; did you mean {hint}")
    assert err.count("\n") == 1


def test_output_is_the_same_bytes_every_run(capsys):
    first = run_cli(capsys, "options")
    assert run_cli(capsys, "options") == first
    # separate processes with different string hashing: no set order leaks into the output
    outs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        for extra in ([], ["--json"]):
            proc = subprocess.run([sys.executable, "-m", "tidlx", "options", *extra], capture_output=True, env=env,
                                  check=True)
            outs.append(proc.stdout)
    assert outs[0] == outs[2] and outs[1] == outs[3]
    assert outs[0].decode("utf-8") == first[1]
