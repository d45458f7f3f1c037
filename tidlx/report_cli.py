"""``tidlx report MODEL -o report.html``: every answer about a model in one self-contained HTML page.

    tidlx report model.onnx -o report.html                        # seeded random calibration, with a warning
    tidlx report model.onnx --calib frames.npz -o report.html
    tidlx report model.onnx --batch 6 -o max_batch_size=6 -o b6.html
    tidlx report model.onnx --calib frames.npz --out report.html -o tensor_bits=16

The page (``backends/tidl/html_report.py``): the verdict, the graph coloured by target (host ops
with their reasons on hover), each TIDL subgraph's layers, MACs and boundary tensors, the host ops
by reason, then fixed point at 8 and 16 bit (SQNR and saturation per layer, the outputs, the
findings, the worst layers' float and fixed-point values), the fusion check and the options used.

``-o`` takes the output file (a value without ``=``, ending in ``.html``) and TI's options
(``key=value``), as ``tidlx compile`` does for its folder; ``--out FILE`` names the file explicitly.
The file is written beside its place and renamed, never half-written. The same model, options and
frames give the same bytes. Errors print ``tidlx: error: ...`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from .ir import TidlxError

#: Where the command stands in ``tidlx --help`` (tidlx/cli.py, ``command_modules``).
COMMAND_ORDER = 47

#: What the output file's name must end with.
HTML_SUFFIXES = (".html", ".htm")

#: The stages of the report as the progress bar names them.
STAGE_LABELS = {"fixed point 8 bit": "8-bit fixed point (calibrate, quantize, compare)",
                "fixed point 16 bit": "16-bit fixed point (calibrate, quantize, compare)",
                "fusion check": "fusion check"}


def split_output(values, out):
    """``-o`` values and ``--out`` -> (the HTML file, TI's ``key=value`` options)."""
    files = [v for v in values if "=" not in v]
    options = [v for v in values if "=" in v]
    if out is not None:
        files = [out] + files
    if not files:
        raise TidlxError("tidlx report: say where to write the page: -o FILE.html (or --out FILE.html)")
    if len(files) > 1:
        raise TidlxError(f"tidlx report: one output file, got {len(files)}: {', '.join(files)} (options are "
                         f"written key=value)")
    path = files[0]
    if not path.lower().endswith(HTML_SUFFIXES):
        raise TidlxError(f"tidlx report: the page is an HTML file: -o NAME.html (got {path!r}; TIDL options are "
                         f"written key=value)")
    if os.path.isdir(path):
        raise TidlxError(f"{path}: is a folder; give the HTML file's name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise TidlxError(f"{path}: the folder {os.path.dirname(path) or '.'} does not exist")
    return path, options


def write_page(path: str, text: str) -> None:
    """Writes ``text`` to a temporary file beside ``path``, then renames it into place."""
    from .backends.tidl.artifacts import write_file_atomically

    try:
        write_file_atomically(path, text)
    except OSError as exc:
        raise TidlxError(f"{path}: cannot write the file ({exc.strerror})") from None


def _settings(args):
    """The page's rows for the options given on the command line (paths as given)."""
    rows = [("model", args.model)]
    for label, value in (("--params", args.params), ("--batch", args.batch),
                         ("--shapes", ", ".join(args.shapes) if args.shapes else None),
                         ("--opset", args.opset), ("--custom-ops", ", ".join(args.custom_ops) or None),
                         ("--max-tensor-bytes", args.max_tensor_bytes), ("--calib", args.calib),
                         ("--mean", args.mean), ("--scale", args.scale), ("--input", args.input)):
        if value is not None:
            rows.append((label, str(value)))
    if args.calib is None:
        rows.append(("--calib", "not given: seeded random frames"))
    return rows


def cmd_report(args) -> int:
    from .cli import load_model, print_warnings_once
    from .compare_cli import float_list, progress_bar
    from .backends.tidl.flow import resolve_options
    from .ir.text import printable

    path, options = split_output(args.option, args.out)
    for option, given in (("--calib", args.calib), ("--input", args.input)):
        if given is not None and not os.path.exists(given):
            raise TidlxError(f"{option} {given}: no such file or folder")
    with warnings.catch_warnings():   # its warnings come once, from the report's own run below
        warnings.simplefilter("ignore")
        resolve_options(list(options))   # a bad option is an error before loading the model
    mean, scale = float_list(args.mean, "--mean"), float_list(args.scale, "--scale")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise TidlxError("tidlx report draws its charts with matplotlib: pip install 'tidlx[test]' (or "
                         "pip install matplotlib)") from None
    from .backends.tidl.html_report import collect, render_html

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = load_model(args)
        with progress_bar(sys.stderr.isatty(), STAGE_LABELS) as progress:
            data = collect(mod, list(options), args.calib, args.input, model_name=os.path.basename(args.model),
                           settings=_settings(args), mean=mean, scale=scale, progress=progress)
    print_warnings_once(caught)
    for text in data.warnings:
        if all(str(w.message) != text for w in caught):
            print(f"tidlx: warning: {text}", file=sys.stderr)
    for bits, answer in sorted(data.numerics.items()):
        if answer.error is not None:
            print(printable(f"tidlx: warning: {bits}-bit fixed point is not in the page: {answer.error}"),
                  file=sys.stderr)
    if data.fusion_error is not None:
        print(printable(f"tidlx: warning: the fusion check is not in the page: {data.fusion_error}"), file=sys.stderr)
    write_page(path, render_html(data))
    print(printable(f"wrote {path}: {data.report.verdict()}"))
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Adds the ``report`` command to ``tidlx``'s subparsers."""
    from .cli import add_model_arguments, subcommand
    from .compare_cli import add_preprocessing_arguments

    p = subcommand(
        subparsers, "report", "every answer about a model in one self-contained HTML page",
        "Partition a model for TIDL, quantize it at 8 and 16 bit and compare each with float, run the fusion "
        "check, and write one HTML page that opens offline (no script; every style and chart inline): the "
        "verdict, the graph coloured by target (hover a host op for why it stays on the host), each TIDL "
        "subgraph's layers, MACs and boundary tensors, the host ops by reason, the SQNR and saturation of every "
        "layer at 8 and 16 bit, the findings, the worst layers' float and fixed-point values (histograms and "
        "scatter plots), the fusion check and the options used. Without --calib it calibrates on seeded random "
        "frames, and the page says the ranges mean nothing for real data. The same model, options and frames "
        "give the same bytes.",
        ["tidlx report model.onnx -o report.html",
         "tidlx report model.onnx --calib frames.npz -o report.html",
         "tidlx report model.onnx --calib frames.npz --input test.npz -o tensor_bits=16 -o report16.html",
         "tidlx report model.onnx --batch 6 -o max_batch_size=6 --out b6.html",
         "tidlx report model.onnx --calib frames.npz -o advanced_options:calibration_iterations=5 -o report.html"])
    add_model_arguments(p)
    p.add_argument("-o", "--option", action="append", default=[], metavar="FILE.html|KEY=VALUE",
                   help="the HTML file to write (a value without '=', ending in .html), or a TIDL option by TI's "
                        "name (tensor_bits=16: the worst layers' values and the fusion check at 16 bit; "
                        "max_batch_size=6, deny_list=..., advanced_options:calibration_iterations=N, ...); "
                        "repeatable")
    p.add_argument("--out", metavar="FILE.html", help="the HTML file to write (instead of -o FILE.html)")
    p.add_argument("--calib", metavar="F",
                   help="calibration frames: an .npz with one array per input name, frames on the batch axis, or "
                        "a folder of images (default: seeded random frames, with a warning in the page)")
    add_preprocessing_arguments(p)
    p.add_argument("--input", metavar="F.npz",
                   help="the frame to compare float and fixed point on (its first frame); default: the first "
                        "calibration frame")
    p.set_defaults(func=cmd_report)
    return p
