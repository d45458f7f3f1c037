"""``tidlx partition MODEL``: which parts of a model run on TIDL, in how many subgraphs, and why
the rest stays on the host.

    tidlx partition model.onnx                                  # the report as tables
    tidlx partition model.onnx -o deny_list=nn.batch_norm -o max_num_subgraphs=4
    tidlx partition model.onnx --strategy all                   # compare the strategies
    tidlx partition model.onnx --json > report.json             # for scripts
    tidlx partition model.onnx --svg graph.svg --print-relay
    tidlx partition model.onnx --batch 6 -o max_batch_size=6    # BEVDet's 6 cameras
    tidlx partition resnet18.txt --params resnet18.params        # Relay text + TVM's params file
    tidlx partition model.onnx --verbose                        # one host-op row per op
    tidlx partition model.onnx --flow ort                       # TI's ONNX Runtime grouping (docs/ort-flow.md)
    tidlx partition model.onnx --flow both                      # both flows, and what differs
    tidlx partition model.onnx --compare-allowed artifacts/allowedNode.txt   # against a real TI compile

The answer starts with one verdict line (``exports: yes — 2 TIDL subgraphs, 100% of MACs on
TIDL, 3 ops on the host``); the host ops are grouped by reason, one row per reason with the
layers it holds back (``--verbose``: one row per op).

``-o`` takes TI's option names (``deny_list:layer_name=a,b``, ``advanced_options:num_cores=2``)
and tidlx's ``disabled_passes=FoldBatchNormIntoDense`` (graph preparation passes to skip) and
``flow=ort`` (the same as ``--flow ort``). Errors print ``tidlx: error: ...`` and exit with status
2. ``--compare-allowed`` exits with status 1 when tidlx's grouping differs from the file's.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from .ir import TidlxError

#: Where the command stands in ``tidlx --help`` (tidlx/cli.py, ``command_modules``).
COMMAND_ORDER = 30


def flow_options(option_values, flow_flag, what: str = "--flow"):
    """The ``-o`` values with ``--flow`` added as ``flow=...``, and the flow they choose; ``-o flow=``
    and ``--flow`` naming different flows is an error."""
    from .backends.tidl.flow import resolve_flow
    from .backends.tidl.options import FLOW_OPTION

    options = list(option_values)
    given = resolve_flow(options)
    named = any(o.partition("=")[0].strip() == FLOW_OPTION for o in options)
    if flow_flag is None:
        return options, given
    if named and given != flow_flag:
        flag_text = f"{what} {flow_flag}" + (")" if what.endswith("(flow") else "")
        raise TidlxError(f"{flag_text} and -o {FLOW_OPTION}={given} name different flows: give one")
    if not named:
        options.append(f"{FLOW_OPTION}={flow_flag}")
    return options, flow_flag


def attach_nodes(mod, path: str) -> None:
    """Records the ONNX file's node list on the module (the ORT flow numbers nodes by it)."""
    from .api import ONNX_SUFFIXES
    from .backends.tidl.ort_flow import attach_onnx_nodes

    if os.path.splitext(path)[1].lower() in ONNX_SUFFIXES:
        attach_onnx_nodes(mod, path)


def _ort_json(report, comparison) -> str:
    import json

    doc = report.to_dict()
    doc["flow"] = "ort"
    doc["ort"] = report.ort.to_dict()
    if comparison is not None:
        doc["compare_allowed"] = comparison.to_dict()
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def cmd_partition(args) -> int:
    from rich.text import Text

    from .backends.tidl.flow import compare_strategies, partition_for_tidl
    from .cli import load_model, make_console, print_warnings_once
    from .ir.partition import get_strategy
    from .ir.text import printable

    if args.flow == "both":
        return _cmd_both_flows(args)
    allowed = None
    flag = args.flow
    if args.compare_allowed is not None:
        from .backends.tidl.allowed_nodes import read_allowed_nodes

        if flag == "tvm":
            raise TidlxError("--compare-allowed compares with TI's ONNX Runtime flow (allowedNode.txt is its file): "
                             "use it with --flow ort, or without --flow")
        flag = "ort"
        allowed = read_allowed_nodes(args.compare_allowed)   # a bad file is an error before the model loads
    what = "--flow" if args.flow is not None or args.compare_allowed is None else "--compare-allowed (flow"
    options, flow = flow_options(args.option, flag, what)
    compare = args.compare or args.strategy == "all"
    if compare and args.svg:
        raise TidlxError("--svg draws one partition: choose a --strategy instead of comparing all")
    if compare and args.print_relay:
        raise TidlxError("--print-relay prints one partitioned module: choose a --strategy instead of comparing all")
    if args.json and args.print_relay:
        raise TidlxError("--json and --print-relay both write to standard output: use one of them")
    if not compare:
        get_strategy(args.strategy)
    name = os.path.basename(args.model)
    comparison = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = load_model(args)
        if flow == "ort":
            attach_nodes(mod, args.model)
        if compare:
            result = compare_strategies(mod, options, model_name=name)
        else:
            module, report = partition_for_tidl(mod, options, args.strategy, model_name=name)
            if allowed is not None:
                from .backends.tidl.allowed_nodes import compare_allowed

                comparison = compare_allowed(report.ort, allowed)
    print_warnings_once(caught)
    if compare:
        if args.json:
            sys.stdout.write(result.to_json())
        else:
            make_console().print(result.table())
        return 0
    if args.svg:
        try:
            with open(args.svg, "w", encoding="utf-8") as f:
                f.write(report.svg())
        except OSError as exc:
            raise TidlxError(f"--svg {args.svg}: cannot write the file ({exc.strerror})") from None
    ort = getattr(report, "ort", None)
    if args.json:
        sys.stdout.write(_ort_json(report, comparison) if ort is not None else report.to_json())
    else:
        console = make_console()
        console.print(report.table(verbose=args.verbose))
        if ort is not None:
            for line in ort.lines(verbose=args.verbose):
                console.print(Text(printable(line)), soft_wrap=True)
        if comparison is not None:
            for line in comparison.lines():
                console.print(Text(printable(line)), soft_wrap=True)
        if args.print_relay:
            console.print(Text(printable(module.astext(show_meta_data=False), keep="\n\t")), soft_wrap=True)
    if args.svg:
        print(printable(f"wrote {args.svg}"), file=sys.stderr)
    return 1 if comparison is not None and not comparison.same else 0


def _cmd_both_flows(args) -> int:
    """``--flow both``: the model through the TVM flow and the ORT flow, and where they differ."""
    from rich.text import Text

    from .backends.tidl.flows_compare import compare_flows
    from .cli import load_model, make_console, print_warnings_once
    from .ir.partition import get_strategy
    from .ir.text import printable

    for given, flag in ((args.compare_allowed is not None, "--compare-allowed"),
                        (args.compare or args.strategy == "all", "--compare/--strategy all"),
                        (bool(args.svg), "--svg"), (args.print_relay, "--print-relay")):
        if given:
            raise TidlxError(f"--flow both compares the two flows' partitions: {flag} takes one flow (--flow tvm or "
                             f"--flow ort)")
    get_strategy(args.strategy)
    name = os.path.basename(args.model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = load_model(args)
        attach_nodes(mod, args.model)
        both = compare_flows(mod, list(args.option), args.strategy, model_name=name)
    print_warnings_once(caught)
    if args.json:
        sys.stdout.write(both.to_json())
        return 0
    console = make_console()
    for line in both.lines():
        console.print(Text(printable(line)), soft_wrap=True)
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Adds the ``partition`` command to ``tidlx``'s subparsers."""
    from .backends.tidl.flow import PREP_PASSES
    from .backends.tidl.options import FLOWS
    from .ir.partition import list_strategies

    from .cli import add_model_arguments, subcommand

    strategies = list(list_strategies())
    p = subcommand(
        subparsers, "partition", "split a model into TIDL subgraphs and host ops, and say why",
        "Partition a model for TIDL as TI's TVM flow does (graph preparation, composites, support rules, "
        "deny/allow lists, batch limit, subgraph limits) and report the subgraphs, the ops left on the host and "
        "why. The answer starts with one verdict line; host ops are grouped by reason (--verbose: one row per "
        "op). With --flow ort, as TI's ONNX Runtime import groups the ONNX nodes (docs/ort-flow.md).",
        ["tidlx partition model.onnx", "tidlx partition model.onnx -o deny_list=nn.batch_norm -o max_num_subgraphs=4",
         "tidlx partition model.onnx --batch 6 -o max_batch_size=6",
         "tidlx partition resnet18.txt --params resnet18.params",
         "tidlx partition model.onnx --strategy all", "tidlx partition model.onnx --json > report.json",
         "tidlx partition model.onnx --svg graph.svg --print-relay",
         "tidlx partition model.onnx --flow ort        (TI's ONNX Runtime grouping, docs/ort-flow.md)",
         "tidlx partition model.onnx --flow both       (both flows, and the layers where they differ)",
         "tidlx partition model.onnx --compare-allowed artifacts/allowedNode.txt"])
    add_model_arguments(p)
    p.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a TIDL option by TI's name (deny_list, deny_list:layer_type, deny_list:layer_name, "
                        "allow_list:layer_name, max_num_subgraphs, max_num_subgraph_nodes, max_batch_size, "
                        "advanced_options:..., ...), disabled_passes=NAME[,NAME] to skip graph preparation "
                        f"passes ({', '.join(PREP_PASSES)}) or flow=tvm|ort; repeatable")
    p.add_argument("--flow", choices=FLOWS + ("both",), default=None,
                   help="which of TI's flows to follow: tvm (TI's TVM import, the default), ort (TI's ONNX "
                        "Runtime import: ONNX nodes grouped in node order, the first max_num_subgraphs kept), or "
                        "both: each flow's verdict and the layers one keeps on the host and the other does not")
    p.add_argument("--compare-allowed", metavar="FILE",
                   help="compare, node by node, tidlx's ORT-flow grouping with an allowedNode.txt of a real TI "
                        "compile of the same model (implies --flow ort; exit status 1 when they differ)")
    p.add_argument("--strategy", default="greedy", metavar="S",
                   help=f"partitioning strategy: {', '.join(strategies)}, or 'all' to compare them "
                        f"(default: greedy, TVM's; with --flow ort, the partitioner used when TI's grouping is "
                        f"cyclic)")
    p.add_argument("--compare", action="store_true", help="compare every strategy (same as --strategy all)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (for scripts)")
    p.add_argument("--svg", metavar="FILE", help="write the graph, coloured by target, as SVG")
    p.add_argument("--print-relay", action="store_true", help="print the partitioned module as Relay text")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="list every op on the host in its own row (default: one row per reason)")
    p.set_defaults(func=cmd_partition)
    return p
