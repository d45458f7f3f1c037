"""``tidlx compare MODEL``: how far TIDL's fixed point is from float, per output and per TIDL layer.

    tidlx compare model.onnx --calib frames.npz                 # 8 bit (TI's default), tables
    tidlx compare model.onnx --calib frames.npz -o tensor_bits=16
    tidlx compare model.onnx --calib frames.npz --input test.npz --top 20
    tidlx compare model.onnx --calib frames.npz --isolated      # also each layer's own error
    tidlx compare model.onnx --calib frames.npz --json > numerics.json

The model is partitioned as ``tidlx partition`` does, calibrated on ``--calib`` (else seeded
random frames, with a warning), quantized, and run both ways on ``--input`` (else on the first
``--frames`` calibration frames). The answer starts with one verdict line (``8-bit fixed point:
output 'depth' 19.8 dB SQNR; worst layer ...``), then the outputs and the worst layers (lowest
SQNR first). A layer's error is accumulated: it ran on fixed-point inputs. Errors print
``tidlx: error: ...`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

#: Where the command stands in ``tidlx --help`` (tidlx/cli.py, ``command_modules``).
COMMAND_ORDER = 40

#: Layers shown when --top is not given.
DEFAULT_TOP = 10


@contextlib.contextmanager
def progress_bar(enabled: bool, labels=None):
    """A ``progress(stage, done, total)`` callback drawing a rich progress bar on standard error (a
    terminal only: nothing in a pipe or a log); yields None when disabled. ``labels``: stage -> text."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    labels = labels or {"calibration": "calibrating", "quantize": "calibrating in fixed point (iterations x frames)",
                        "compare": "float vs fixed point"}
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("left"), TimeRemainingColumn(), console=Console(stderr=True), transient=True) as bar:
        tasks = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(labels.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield update


def float_list(text, option: str):
    """``--mean 123.675,116.28,103.53`` -> [123.675, 116.28, 103.53] (one number or one per channel);
    anything else is an error naming the option."""
    from .ir import TidlxError

    if text is None:
        return None
    values = []
    for part in str(text).replace(" ", ",").split(","):
        if not part:
            continue
        try:
            value = float(part)
        except ValueError:
            value = float("nan")
        if value != value or value in (float("inf"), float("-inf")):
            raise TidlxError(f"{option} {text!r}: {part!r} is not a finite number (write e.g. {option} "
                             f"123.675,116.28,103.53)")
        values.append(value)
    if not values:
        raise TidlxError(f"{option} {text!r}: no numbers (write e.g. {option} 123.675,116.28,103.53)")
    return values


def add_preprocessing_arguments(parser) -> None:
    """--mean and --scale: a --calib folder's per-channel preprocessing (TI's input_mean/input_scale)."""
    parser.add_argument("--mean", metavar="M[,M,...]",
                        help="a --calib folder of images: subtract this per channel (TI's input_mean, e.g. "
                             "123.675,116.28,103.53)")
    parser.add_argument("--scale", metavar="S[,S,...]",
                        help="a --calib folder of images: then multiply by this per channel (TI's input_scale, "
                             "e.g. 0.017125,0.017507,0.017429)")


def _percent(value) -> str:
    return "-" if value is None else f"{value:.3g}%"


def _tables(result, top: int, isolated: bool):
    from rich.table import Table
    from rich.text import Text

    from .backends.tidl.compare import format_db
    from .ir.text import printable

    outputs = Table(title="model outputs: fixed point vs float", title_justify="left")
    for col, justify in (("output", "left"), ("shape", "left"), ("SQNR", "right"), ("max abs error", "right"),
                         ("saturated", "right"), ("fed by (fixed-point tensor)", "left")):
        outputs.add_column(col, justify=justify)
    for o in result.outputs:
        outputs.add_row(Text(printable(o.name)), str(o.shape), format_db(o.sqnr_db), f"{o.max_abs_err:.4g}",
                        _percent(o.saturated_pct), Text(printable(o.fed_by or "computed on the host")))
    shown = result.worst(top)
    layers = Table(title=f"worst layers ({len(shown)} of {len(result.layers)}, lowest SQNR first; error accumulated "
                         f"through the fixed-point layers before)", title_justify="left")
    columns = [("#", "right"), ("subgraph", "left"), ("layer", "left"), ("TIDL layer (Relay ops)", "left"),
               ("SQNR", "right")]
    if isolated:
        columns.append(("own SQNR", "right"))
    columns += [("max abs error", "right"), ("saturated", "right")]
    for col, justify in columns:
        layers.add_column(col, justify=justify)
    for rank, layer in enumerate(shown, 1):
        row = [str(rank), Text(printable(layer.subgraph)), Text(printable(layer.layer)), Text(printable(layer.op)),
               format_db(layer.sqnr_db)]
        if isolated:
            row.append(format_db(layer.isolated_sqnr_db) if layer.type != "Data" else "-")
        row += [f"{layer.max_abs_err:.4g}", _percent(layer.saturated_pct)]
        layers.add_row(*row)
    return outputs, layers


def _qdq_table(result):
    from rich.table import Table
    from rich.text import Text

    from .backends.tidl.compare import format_db
    from .ir.text import printable

    table = Table(title="model outputs against onnxruntime's run of the QDQ model", title_justify="left")
    for col in ("output", "fixed point: SQNR", "fixed point: within one QDQ step", "QDQ step", "float model: SQNR"):
        table.add_column(col, justify="left" if col == "output" else "right")
    for o in result.outputs:
        table.add_row(Text(printable(o.name)), format_db(o.qdq_sqnr_db), _percent(o.qdq_within_step_pct),
                      "-" if o.qdq_step is None else f"{o.qdq_step:.6g}", format_db(o.qdq_float_sqnr_db))
    return table


def cmd_compare(args) -> int:
    from rich.text import Text

    from .backends.tidl.options import TidlOptions
    from .cli import load_model, make_console, positive_int
    from .ir import TidlxError
    from .backends.tidl.compare import format_db
    from .ir.text import printable
    from .quantize_api import compare

    top = positive_int(args.top, "--top") or DEFAULT_TOP
    frames = positive_int(args.frames, "--frames")
    for option, path in (("--calib", args.calib), ("--input", args.input)):
        if path is not None and not os.path.exists(path):
            raise TidlxError(f"{option} {path}: no such file or folder")
    from .backends.tidl.flow import resolve_options
    from .partition_cli import attach_nodes, flow_options

    option_values, flow = flow_options(list(args.option), args.flow)
    resolve_options(option_values)   # a bad option is an error before loading the model
    options = option_values if flow == "ort" else TidlOptions.from_strings(option_values)
    mean, scale = float_list(args.mean, "--mean"), float_list(args.scale, "--scale")
    mod = load_model(args)
    if flow == "ort":
        attach_nodes(mod, args.model)
    from .cli import _asks_prequantized

    # a prequantized QDQ model is also set against onnxruntime's run of the file itself
    qdq_model = args.model if _asks_prequantized(args.option) and str(args.model).endswith(".onnx") else None
    with progress_bar(sys.stderr.isatty()) as progress:
        result = compare(mod, args.input, options, args.calib, frames=frames, isolated=args.isolated,
                         progress=progress, mean=mean, scale=scale, qdq_model=qdq_model)
    if args.json:
        import json

        data = {"model": os.path.basename(args.model), **result.to_dict()}
        sys.stdout.write(json.dumps(data, indent=1, allow_nan=False) + "\n")
        return 0
    console = make_console()
    console.print(Text(printable(result.headline()), style="bold"))
    console.print(Text(printable(f"compared on {result.inputs}; calibrated: {result.calibration}; "
                                 f"quantization_scale_type={result.quantization_scale_type}")))
    device = result.device_dict()
    console.print(Text(printable(f"target device: {device['rules']}")))
    if device["warning"]:
        console.print(Text(printable(f"warning: {device['warning']}"), style="yellow"))
    outputs, layers = _tables(result, top, args.isolated)
    console.print(outputs)
    if any(o.qdq_sqnr_db is not None for o in result.outputs):
        console.print(_qdq_table(result))
    if result.findings:
        shown = result.findings[:top]
        console.print(Text(f"findings ({len(shown)} of {len(result.findings)}, worst layer first):",
                           style="bold"))
        for finding in shown:
            console.print(Text(printable(f"- @{finding.subgraph} '{finding.layer}' ({finding.kind}, "
                                         f"{format_db(finding.sqnr_db)}): {finding.message}")))
    console.print(layers)
    if not args.isolated:
        console.print("each layer ran on fixed-point inputs, so its SQNR counts the error of every layer before it; "
                      "--isolated adds each layer's own (its kernel on its float inputs)", markup=False)
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Adds the ``compare`` command to ``tidlx``'s subparsers."""
    from .cli import add_model_arguments, subcommand

    p = subcommand(
        subparsers, "compare", "float vs TIDL fixed point: SQNR per output and per layer, worst layers first",
        "Partition a model for TIDL, calibrate it (--calib), quantize it as TIDL's import would, run it in "
        "float and in TIDL's fixed point on the same inputs (--input; else the first calibration frame), and "
        "report per model output and per TIDL layer the SQNR in dB, the largest absolute error and the share "
        "of integer values saturated, worst layers first. A layer's figures count the error of the layers "
        "before it (they ran in fixed point too); --isolated adds each layer's own error. Quantization runs TI's "
        "calibration loop: advanced_options:calibration_iterations (50; 1 at accuracy_level 0 in the TVM flow) fixed-point runs of "
        "every calibration frame, each re-collecting the ranges and, at accuracy_level 1 (TI's default), "
        "calibrating the biases; a smaller N gives a quicker answer.",
        ["tidlx compare model.onnx --calib frames.npz",
         "tidlx compare model.onnx --calib frames.npz -o tensor_bits=16",
         "tidlx compare model.onnx --calib calib_images/ --mean 123.675,116.28,103.53 "
         "--scale 0.017125,0.017507,0.017429 --input test.npz --top 20",
         "tidlx compare model.onnx --calib frames.npz --isolated --frames 4",
         "tidlx compare model.onnx --calib frames.npz -o advanced_options:calibration_iterations=5",
         "tidlx compare model.onnx --calib frames.npz --json > numerics.json",
         "python -c \"import numpy as np; np.savez('frames.npz', img=np.random.rand(8, 3, 224, 224)"
         ".astype(np.float32))\"   (8 frames)"])
    add_model_arguments(p)
    p.add_argument("--flow", choices=("tvm", "ort"), default=None,
                   help="which of TI's flows partitions the model: tvm (the default) or ort (TI's ONNX Runtime "
                        "import, docs/ort-flow.md)")
    p.add_argument("--calib", metavar="F",
                   help="calibration frames: an .npz with one array per input name, frames on the batch axis, or "
                        "a folder of .npy images (default: seeded random frames, with a warning)")
    add_preprocessing_arguments(p)
    p.add_argument("--input", metavar="F.npz",
                   help="the frames to compare on (as --calib's .npz); default: the first calibration frame(s), "
                        "in-sample")
    p.add_argument("--frames", metavar="N", help="compare on at most N frames (default: all of --input, else 1)")
    p.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a TIDL option by TI's name (tensor_bits=16, accuracy_level=0, "
                        "advanced_options:quantization_scale_type=1, advanced_options:calibration_frames=N, "
                        "deny_list=..., ...); repeatable")
    p.add_argument("--top", metavar="N", help=f"show the N worst layers (default {DEFAULT_TOP}; --json lists all)")
    p.add_argument("--isolated", action="store_true",
                   help="also each layer's own error: its integer kernel on its float inputs (a second "
                        "fixed-point pass)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON (for scripts)")
    p.set_defaults(func=cmd_compare)
    return p
