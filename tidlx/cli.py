"""The ``tidlx`` command line: show, run, demo."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import List, Optional

from .ir import TidlxError


def _op_counts(mod) -> Counter:
    from .ir.traversal import calls

    counts: Counter = Counter()
    for _, fn in mod.items():
        for call in calls(fn):
            counts[call.op.name] += 1
    return counts


def cmd_show(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from .api import load

    mod = load(args.model)
    console = Console(highlight=False, soft_wrap=True)
    if not args.counts_only:
        console.print(mod.astext(show_meta_data=args.meta), markup=False)
    table = Table(title=f"ops in {args.model}")
    table.add_column("op")
    table.add_column("count", justify="right")
    counts = _op_counts(mod)
    for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        table.add_row(name, str(n))
    table.add_row("[bold]total[/bold]", f"[bold]{sum(counts.values())}[/bold]")
    console.print(table)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidlx", description="TIDL/TVM deployment answers on a laptop.")
    sub = parser.add_subparsers(dest="command", required=True)

    show = sub.add_parser("show", help="print a model as Relay text and a table of op counts")
    show.add_argument("model", help="Relay text (.txt, .relay) or ONNX (.onnx)")
    show.add_argument("--meta", action="store_true", help="include the #[metadata] section (constants)")
    show.add_argument("--counts-only", action="store_true", help="only the op-count table")
    show.set_defaults(func=cmd_show)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except TidlxError as exc:
        print(f"tidlx: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
