"""The ``tidlx`` command line: show, run, partition, ops, demo."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections import Counter
from typing import List, Optional

from .ir import TidlxError
from .ir.errors import TidlxWarning


def _op_counts(mod) -> Counter:
    from .ir.traversal import calls

    counts: Counter = Counter()
    for _, fn in mod.items():
        for call in calls(fn):
            counts[call.op.name] += 1
    return counts


def op_count_table(mod, title: str):
    from rich.table import Table

    table = Table(title=title)
    table.add_column("op")
    table.add_column("count", justify="right")
    counts = _op_counts(mod)
    for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        table.add_row(name, str(n))
    table.add_row("[bold]total[/bold]", f"[bold]{sum(counts.values())}[/bold]")
    return table


def cmd_show(args) -> int:
    from rich.console import Console

    from .api import load

    mod = load(args.model)
    console = Console(highlight=False, soft_wrap=True)
    if not args.counts_only:
        console.print(mod.astext(show_meta_data=args.meta), markup=False)
    console.print(op_count_table(mod, title=f"ops in {args.model}"))
    return 0


def cmd_run(args) -> int:
    import numpy as np

    from .api import emulate, load

    mod = load(args.model)
    try:
        with np.load(args.input) as npz:
            inputs = {k: npz[k] for k in npz.files}
    except (OSError, ValueError) as exc:
        raise TidlxError(f"--input {args.input}: cannot read the .npz file ({exc})") from None
    outputs = emulate(mod, inputs)
    for i, out in enumerate(outputs):
        print(f"output {i}: shape {tuple(out.shape)} {out.dtype}, min {out.min():.6g}, max {out.max():.6g}")
    if args.output:
        np.savez(args.output, **{f"output_{i}": out for i, out in enumerate(outputs)})
        print(f"wrote {args.output} (arrays output_0 .. output_{len(outputs) - 1})")
    return 0


def cmd_ops(args) -> int:
    import json

    from .op_table import coverage, coverage_table, facet_legend

    data = coverage()
    if args.op:
        known = {rec["name"]: rec for rec in data["ops"]}
        missing = [name for name in args.op if name not in known]
        if missing:
            from .ir.op import get_op

            get_op(missing[0])  # raises UnknownOpError naming the closest ops
        data = dict(data, ops=[known[name] for name in args.op])
    if args.json:
        print(json.dumps(data, indent=1, sort_keys=True))
        return 0
    from rich.console import Console

    console = Console(highlight=False)
    if args.op:
        for rec in data["ops"]:
            console.print(f"{rec['name']}: {rec['inputs']} inputs, pattern {rec['pattern']}, "
                          f"defined at {rec['defined']}", markup=False)
            for key, value in rec["facets"].items():
                console.print(f"  {key}: {value}", markup=False)
        return 0
    console.print(coverage_table(data))
    for line in facet_legend(data):
        console.print(line, markup=False)
    return 0


def cmd_demo(args) -> int:
    from .demo import run_demo

    result = run_demo(backbone=args.backbone, batch=args.batch, tiny=args.tiny, out_dir=args.out,
                      depth_net=args.depth_net)
    return 0 if all(err <= 1e-4 for err in result["errors"].values()) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidlx", description="TIDL/TVM deployment answers on a laptop.")
    sub = parser.add_subparsers(dest="command", required=True)

    show = sub.add_parser("show", help="print a model as Relay text and a table of op counts")
    show.add_argument("model", help="Relay text (.txt, .relay) or ONNX (.onnx)")
    show.add_argument("--meta", action="store_true", help="include the #[metadata] section (constants)")
    show.add_argument("--counts-only", action="store_true", help="only the op-count table")
    show.set_defaults(func=cmd_show)

    run = sub.add_parser("run", help="run a model in the float32 reference emulator")
    run.add_argument("model", help="ONNX (.onnx) or Relay text (.txt, .relay)")
    run.add_argument("--input", required=True, help=".npz with one array per model input, by input name")
    run.add_argument("--output", help="write the outputs to this .npz")
    run.set_defaults(func=cmd_run)

    ops = sub.add_parser("ops", help="which ops tidlx knows and what each has: kernels, TIDL rule and layer, "
                                     "ONNX op types (the coverage table)")
    ops.add_argument("op", nargs="*", help="only these ops (Relay names), with where each facet is defined")
    ops.add_argument("--json", action="store_true", help="the table as JSON")
    ops.set_defaults(func=cmd_ops)

    demo = sub.add_parser("demo", help="build, import and emulate the built-in BEVDet image stage")
    demo.add_argument("--backbone", default="resnet50", choices=["resnet50", "resnet18"])
    demo.add_argument("--batch", type=int, default=6, help="cameras (batch); BEVDet uses 6")
    demo.add_argument("--tiny", action="store_true", help="the small variant (fast)")
    demo.add_argument("--depth-net", default="camera_aware", choices=["camera_aware", "lss"],
                      help="BEVDet's camera-aware DepthNet (default) or the plain LSS 1x1 conv")
    demo.add_argument("--out", default="out", help="folder for the written model files")
    demo.set_defaults(func=cmd_demo)

    from .partition_cli import add_partition_parser

    add_partition_parser(sub)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None):
    # Warnings the user should act on, as one line each, not Python's source-location format.
    if issubclass(category, TidlxWarning):
        print(f"tidlx: warning: {message}", file=sys.stderr)
    else:
        _python_showwarning(message, category, filename, lineno, file, line)


_python_showwarning = warnings.showwarning


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return args.func(args)
    except TidlxError as exc:
        print(f"tidlx: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
