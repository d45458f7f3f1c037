"""``tidlx sweep STUDY.yaml``: every model of a study with every option set, on a local process pool
or a Ray cluster; one row per cell in ``results.parquet`` (``results.csv`` without pyarrow).

    tidlx sweep study.yaml                        # a process per CPU; rows under study-sweep/
    tidlx sweep study.yaml -j 2 --out runs/a      # two workers, results in runs/a
    tidlx sweep study.yaml --ray local            # each cell a Ray task on a Ray started here
    tidlx sweep study.yaml --ray ray://head:10001 # on a cluster (or RAY_ADDRESS)
    tidlx sweep study.yaml --json                 # {"cells": N, "cached": K, "failed": F, "results": PATH}

Progress (cells done / total, time left) goes to standard error. docs/sweep.md describes the study
file, the cache and the table.
"""

from __future__ import annotations

import argparse
import sys
import time

#: Where the command stands in ``tidlx --help`` (tidlx/cli.py, ``command_modules``).
COMMAND_ORDER = 48


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class ProgressLine:
    """``sweep: 24/72 cells (8 cached, 0 failed), 0:41 left`` on standard error: one line redrawn on a
    terminal; elsewhere (a log) a line at most every 10 s and at the end."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = getattr(self.stream, "isatty", lambda: False)()
        self.last = 0.0
        self.width = 0

    def __call__(self, done: int, total: int, cached: int, failed: int, left) -> None:
        text = f"sweep: {done}/{total} cells ({cached} cached, {failed} failed)"
        if left is not None and done < total:
            text += f", {_duration(left)} left"
        now = time.monotonic()
        if self.terminal:
            self.stream.write("\r" + text.ljust(self.width) + ("\n" if done == total else ""))
            self.width = len(text)
            self.stream.flush()
        elif done == total or now - self.last >= 10.0:
            self.stream.write(text + "\n")
            self.stream.flush()
            self.last = now


def cmd_sweep(args) -> int:
    import json

    from .cli import positive_int
    from .ir.text import printable
    from .studies import sweep

    jobs = positive_int(args.jobs, "-j")
    result = sweep(args.study, jobs=jobs, ray=args.ray, out=args.out, progress=ProgressLine())
    if args.json:
        print(json.dumps(result.summary()))
    else:
        print(printable(f"{result.cells} cells ({result.cached} cached, {result.failed} failed): {result.results}"))
        print(printable(f"the Pareto front of each model: {result.html}"))
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Adds the ``sweep`` command to ``tidlx``'s subparsers."""
    from .cli import subcommand

    p = subcommand(
        subparsers, "sweep", "run a study: models x option sets, partition and compare measures, on a local "
                             "process pool or a Ray cluster",
        "Run every model of a study file (YAML: models, a grid or a list of option sets, measures) with every "
        "option set: the partition (subgraphs, % MACs on TIDL, host ops, boundary bytes) and/or float vs fixed "
        "point (SQNR per output, the worst layers). One row per cell in OUT/results.parquet (results.csv without "
        "pyarrow); each row is cached under OUT/cache by the hash of the model, options, frames and tidlx, so a "
        "rerun computes only what changed. A cell that fails is a row with its error. docs/sweep.md.",
        ["tidlx sweep study.yaml", "tidlx sweep study.yaml -j 2 --out runs/a",
         "tidlx sweep study.yaml --ray local         (each cell a Ray task on a Ray started here)",
         "tidlx sweep study.yaml --ray auto          (the Ray cluster this machine belongs to; or RAY_ADDRESS)",
         "tidlx sweep study.yaml --json"])
    p.add_argument("study", metavar="STUDY.yaml", help="the study file (docs/sweep.md)")
    p.add_argument("-j", "--jobs", metavar="N",
                   help="worker processes of the local pool (default: the number of CPUs); with --ray local, "
                        "the CPUs of the Ray started here")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="run each cell as a Ray task: a cluster's address, auto, or local to start Ray on this "
                        "machine (default: RAY_ADDRESS when set, else the local pool)")
    p.add_argument("--out", metavar="DIR", help="the folder of the results and the cache (default: "
                                                "STUDY-sweep next to the study file)")
    p.add_argument("--json", action="store_true",
                   help='print {"cells": N, "cached": K, "failed": F, "results": PATH}')
    p.set_defaults(func=cmd_sweep)
    return p
