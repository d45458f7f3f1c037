"""``tidlx partition MODEL``: which parts of a model run on TIDL, in how many subgraphs, and why
the rest stays on the host.

    tidlx partition model.onnx                                  # the report as tables
    tidlx partition model.onnx -o deny_list=nn.batch_norm -o max_num_subgraphs=4
    tidlx partition model.onnx --strategy all                   # compare the strategies
    tidlx partition model.onnx --json > report.json             # for scripts
    tidlx partition model.onnx --svg graph.svg --print-relay
    tidlx partition model.onnx --batch 6 -o max_batch_size=6    # BEVDet's 6 cameras

``-o`` takes TI's option names (``deny_list:layer_name=a,b``, ``advanced_options:num_cores=2``)
and tidlx's ``disabled_passes=FoldBatchNormIntoDense`` (graph preparation passes to skip).
Errors print ``tidlx: error: ...`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Optional

from .ir import TidlxError


def _batch(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    try:
        value = int(text.strip(), 10)
    except ValueError:
        value = 0
    if value < 1:
        raise TidlxError(f"--batch {text!r} is not allowed: it must be an integer >= 1")
    return value


def _load(path: str, batch: Optional[int]):
    from .api import load

    if not os.path.exists(path):
        raise TidlxError(f"{path}: no such file")
    if os.path.isdir(path):
        raise TidlxError(f"{path}: is a folder, not a model file")
    ext = os.path.splitext(path)[1].lower()
    if batch is not None and ext != ".onnx":
        raise TidlxError(f"--batch applies to ONNX models (it overrides dim 0 of their inputs); {path} is Relay "
                         f"text, whose shapes are written in the text")
    return load(path, batch=batch) if batch is not None else load(path)


def _console():
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=160)
    return console


def cmd_partition(args) -> int:
    from .backends.tidl.flow import compare_strategies, partition_for_tidl
    from .ir.partition import get_strategy

    compare = args.compare or args.strategy == "all"
    if compare and args.svg:
        raise TidlxError("--svg draws one partition: choose a --strategy instead of comparing all")
    if compare and args.print_relay:
        raise TidlxError("--print-relay prints one partitioned module: choose a --strategy instead of comparing all")
    if args.json and args.print_relay:
        raise TidlxError("--json and --print-relay both write to standard output: use one of them")
    if not compare:
        get_strategy(args.strategy)
    batch = _batch(args.batch)
    name = os.path.basename(args.model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = _load(args.model, batch)
        if compare:
            result = compare_strategies(mod, list(args.option), model_name=name)
        else:
            module, report = partition_for_tidl(mod, list(args.option), args.strategy, model_name=name)
    seen = set()
    for w in caught:
        text = str(w.message)
        if text not in seen:
            seen.add(text)
            print(f"tidlx: warning: {text}", file=sys.stderr)
    if compare:
        if args.json:
            sys.stdout.write(result.to_json())
        else:
            _console().print(result.table())
        return 0
    if args.svg:
        try:
            with open(args.svg, "w", encoding="utf-8") as f:
                f.write(report.svg())
        except OSError as exc:
            raise TidlxError(f"--svg {args.svg}: cannot write the file ({exc.strerror})") from None
    if args.json:
        sys.stdout.write(report.to_json())
    else:
        console = _console()
        console.print(report.table())
        if args.print_relay:
            console.print(module.astext(show_meta_data=False), markup=False, highlight=False)
    if args.svg:
        print(f"wrote {args.svg}", file=sys.stderr)
    return 0


def add_partition_parser(subparsers) -> argparse.ArgumentParser:
    """Adds the ``partition`` command to ``tidlx``'s subparsers."""
    from .backends.tidl.flow import PREP_PASSES
    from .ir.partition import list_strategies

    strategies = list(list_strategies())
    p = subparsers.add_parser(
        "partition", help="split a model into TIDL subgraphs and host ops, and say why",
        description="Partition a model for TIDL as TI's TVM flow does (graph preparation, composites, support "
                    "rules, deny/allow lists, batch limit, subgraph limits) and report the subgraphs, the ops "
                    "left on the host and why.")
    p.add_argument("model", help="ONNX (.onnx) or Relay text (.txt, .relay)")
    p.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a TIDL option by TI's name (deny_list, deny_list:layer_type, deny_list:layer_name, "
                        "allow_list:layer_name, max_num_subgraphs, max_num_subgraph_nodes, max_batch_size, "
                        "advanced_options:..., ...) or disabled_passes=NAME[,NAME] to skip graph preparation "
                        f"passes ({', '.join(PREP_PASSES)}); repeatable")
    p.add_argument("--strategy", default="greedy", metavar="S",
                   help=f"partitioning strategy: {', '.join(strategies)}, or 'all' to compare them "
                        f"(default: greedy, TVM's)")
    p.add_argument("--compare", action="store_true", help="compare every strategy (same as --strategy all)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (for scripts)")
    p.add_argument("--svg", metavar="FILE", help="write the graph, coloured by target, as SVG")
    p.add_argument("--batch", metavar="N", help="override the batch (dim 0) of an ONNX model's inputs")
    p.add_argument("--print-relay", action="store_true", help="print the partitioned module as Relay text")
    p.set_defaults(func=cmd_partition)
    return p
