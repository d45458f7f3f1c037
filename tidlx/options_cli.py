"""``tidlx options``: every option tidlx reads, by TI's name: its default, the values allowed, what it
changes, and how much of it tidlx implements.

    tidlx options                                   # two tables: TI's options, tidlx's own
    tidlx options advanced_options:quantization_scale_type
    tidlx options --json > options.json             # a list of objects with fixed keys, for scripts

Everything printed comes from the option definitions: names, kinds, checks and the notes beside
each spec in ``backends/tidl/options.py`` (``OPTIONS``), defaults from ``TidlOptions()``, and
tidlx's ``disabled_passes`` from ``backends/tidl/flow.py`` (its passes, its default). The output is
the same bytes on every run. Errors print ``tidlx: error: ...`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from typing import Any, Dict, List, Sequence

#: Where the command stands in ``tidlx --help`` (tidlx/cli.py, ``command_modules``).
COMMAND_ORDER = 60

#: The keys of each object of ``--json``, in this order.
JSON_KEYS = ("name", "origin", "field", "kind", "default", "allowed", "choices", "minimum", "maximum", "changes",
             "steps", "support", "support_note")


def _disabled_passes_spec():
    """tidlx's ``disabled_passes`` (``flow.resolve_options`` reads it beside TI's options) as a spec."""
    from .backends.tidl.flow import DISABLED_PASSES_OPTION
    from .backends.tidl.options import OptionSpec

    return OptionSpec(DISABLED_PASSES_OPTION, "", "names",
                      doc="graph preparation passes skipped (tidlx; TI's flow always runs them)",
                      origin="tidlx", steps=("partition",), support="full",
                      support_note="skipping FoldBatchNormIntoDense keeps a batch norm beside a Gemm as a TIDL "
                                   "BatchNorm layer; tidlx check-fusion uses it",
                      values="graph preparation passes")


def _closed_names() -> Dict[str, Sequence[str]]:
    """The names options whose names are a fixed set, by option: the set, from the code that checks them."""
    from .backends.tidl.composites import FUSIONS
    from .backends.tidl.flow import DISABLED_PASSES_OPTION, PREP_PASSES

    return {"disabled_fusions": tuple(FUSIONS), DISABLED_PASSES_OPTION: tuple(PREP_PASSES)}


def _json_value(value):
    return list(value) if isinstance(value, tuple) else value


def option_records() -> List[Dict[str, Any]]:
    """One record per option tidlx reads (TI's, in TI's order, then tidlx's ``disabled_passes``, ``flow`` and ``model_surgery``), with
    ``JSON_KEYS``; ``default`` as TI's tools take it (names joined with commas; None: unset)."""
    from .backends.tidl.flow import resolve_options
    from .backends.tidl.options import DEFAULT_FLOW, FLOW_SPEC, MODEL_SURGERY_SPEC, OPTIONS, TidlOptions

    defaults = dict(TidlOptions().as_dict())
    _, passes = resolve_options(None)
    passes_spec = _disabled_passes_spec()
    defaults[passes_spec.name] = ",".join(passes)
    defaults[FLOW_SPEC.name] = DEFAULT_FLOW
    defaults[MODEL_SURGERY_SPEC.name] = None   # unset: the flow decides (on with flow=ort, off with flow=tvm)
    closed = _closed_names()
    records = []
    for spec in list(OPTIONS.values()) + [passes_spec, FLOW_SPEC, MODEL_SURGERY_SPEC]:
        names = closed.get(spec.name, ())
        if spec.kind == "names":
            allowed = f"a comma-separated list of {spec.values}" if spec.values else spec.allowed()
            if names:
                allowed += f" ({', '.join(names)})"
        else:
            allowed = spec.allowed()
        records.append({
            "name": spec.name, "origin": spec.origin, "field": spec.field or None, "kind": spec.kind,
            "default": _json_value(defaults[spec.name]), "allowed": allowed,
            "choices": list(spec.choices) if spec.kind == "choice" else list(names),
            "minimum": spec.minimum, "maximum": spec.maximum, "changes": spec.doc, "steps": list(spec.steps),
            "support": spec.support, "support_note": spec.support_note,
        })
    return records


def unknown_option(name: str, known: Sequence[str]):
    """An OptionError naming ``name`` and the closest option names (a field name: its option)."""
    from .backends.tidl.options import OPTIONS, OptionError, suggest_option
    from .ir.errors import closest

    key = name.strip()
    by_field = {spec.field: spec.name for spec in OPTIONS.values()}
    if key in by_field:   # the Python field name (deny_layer_types): its option only
        hint = [by_field[key]]
    elif any(n.split(":")[-1] == key.lower() for n in known):   # calibration_frames: its advanced_options:
        hint = [n for n in known if n.split(":")[-1] == key.lower()]
    else:   # spelling neighbours among all the options, TI's (as -o's errors say them) and tidlx's, best first
        near = set(suggest_option(name)) | set(closest(key, [n for n in known if n not in OPTIONS]))
        hint = sorted(near, key=lambda n: (-difflib.SequenceMatcher(None, key.lower(), n).ratio(), n))
    extra = f"; did you mean {' or '.join(repr(h) for h in hint[:3])}?" if hint else \
        f"; the options: {', '.join(known)}"
    return OptionError(f"unknown TIDL option '{name}'{extra}")


def _default_text(value) -> str:
    if value is None:
        return "unset"
    if value == "":
        return '""'
    return str(value)


def _support_text(rec: Dict[str, Any]) -> str:
    return f"{rec['support']}: {rec['support_note']}" if rec["support_note"] else rec["support"]


def _steps_text(rec: Dict[str, Any]) -> str:
    return ", ".join(rec["steps"]) or "nothing"


#: The tables' columns: (heading, share of a terminal's width; None: as wide as its longest line, never
#: wrapped; "acts in" has one step a line in a terminal).
COLUMNS = (("option", None), ("default", None), ("allowed", 3), ("what it changes", 4), ("acts in", None),
           ("in tidlx", 6))


def options_tables(records: Sequence[Dict[str, Any]], fit: bool = False):
    """(heading, rich table) pairs: TI's options, then tidlx's own. ``fit``: the table fills the
    console's width, the long texts sharing what the option names leave (a terminal)."""
    from rich.table import Table
    from rich.text import Text

    tables = []
    for origin, title in (("TI", "TI's options, by TI's name (-o NAME=VALUE, or the options dict)"),
                          ("tidlx", "tidlx's own options (not TI's; -o NAME=VALUE)")):
        rows = [r for r in records if r["origin"] == origin]
        table = Table(expand=fit)
        for col, share in COLUMNS:
            table.add_column(col, no_wrap=share is None, ratio=share if fit else None, overflow="fold")
        for r in rows:
            steps = ("\n".join(r["steps"]) or "nothing") if fit else _steps_text(r)
            table.add_row(*(Text(cell) for cell in (r["name"], _default_text(r["default"]), r["allowed"],
                                                     r["changes"], steps, _support_text(r))))
        tables.append((Text(f"{len(rows)} {title}", style="bold"), table))
    return tables


def legend_lines() -> List[str]:
    from .backends.tidl.options import STEPS, SUPPORT

    return (["in tidlx: " + "; ".join(f"{k}: {v}" for k, v in SUPPORT.items())]
            + ["acts in: " + "; ".join(f"{k}: {v}" for k, v in STEPS.items())])


def option_lines(rec: Dict[str, Any]) -> List[str]:
    """One option as lines of text (``tidlx options NAME``)."""
    who = "TI's option" if rec["origin"] == "TI" else "tidlx's own option"
    field = f", TidlOptions.{rec['field']}" if rec["field"] else ""
    return [f"{rec['name']} ({who}{field})",
            f"  default:  {_default_text(rec['default'])}",
            f"  allowed:  {rec['allowed']}",
            f"  changes:  {rec['changes']}",
            f"  acts in:  {_steps_text(rec)}",
            f"  in tidlx: {_support_text(rec)}"]


def cmd_options(args) -> int:
    from rich.text import Text

    from .cli import make_console
    from .ir.text import printable

    records = option_records()
    if args.name:
        by_name = {r["name"]: r for r in records}
        chosen = []
        for name in args.name:
            if name not in by_name:
                raise unknown_option(name, list(by_name))
            if by_name[name] not in chosen:
                chosen.append(by_name[name])
        records = chosen
    if args.json:
        sys.stdout.write(json.dumps(records, indent=1) + "\n")
        return 0
    console = make_console()
    if args.name:
        for i, rec in enumerate(records):
            if i:
                console.print()
            for line in option_lines(rec):
                console.print(Text(printable(line)))
        return 0
    for heading, table in options_tables(records, fit=console.is_terminal):
        console.print(heading)
        console.print(table)
    for line in legend_lines():
        console.print(Text(line))
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Adds the ``options`` command to ``tidlx``'s subparsers."""
    from .cli import subcommand

    p = subcommand(
        subparsers, "options", "every option tidlx reads: default, allowed values, what it changes, how much of it "
                               "tidlx implements",
        "List every option tidlx reads (TI's compile options by TI's name, then tidlx's own): its default, the "
        "values allowed, what it changes, where it acts, and whether tidlx implements it fully, partly (which "
        "part) or only accepts it. Options are given with -o NAME=VALUE (partition, compare, compile, "
        "check-fusion, run --mode fixed) or as the options dict of the Python API.",
        ["tidlx options", "tidlx options advanced_options:quantization_scale_type",
         "tidlx options tensor_bits accuracy_level", "tidlx options --json > options.json"])
    p.add_argument("name", nargs="*", metavar="NAME", help="only these options (TI's names, e.g. tensor_bits, "
                                                           "advanced_options:calibration_frames)")
    p.add_argument("--json", action="store_true",
                   help="print the options as JSON: a list of objects with the keys " + ", ".join(JSON_KEYS))
    p.set_defaults(func=cmd_options)
    return p
