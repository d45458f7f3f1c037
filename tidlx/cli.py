"""The ``tidlx`` command line: show, run, ops, demo here; partition, compare, check-fusion, compile, inspect,
diff-traces each in a ``tidlx/<name>_cli.py`` of its own (also ``python -m tidlx``).

Every command that loads a model takes the same loading options (``add_model_arguments``):
``--params FILE`` (the constants of Relay text printed without metadata: an ``.npz`` or a TVM
params file), ``--batch N``, ``--shapes NAME:DIMS`` and ``--opset N`` (ONNX), and
``--max-tensor-bytes SIZE`` (the tensor budget, else ``TIDLX_MAX_TENSOR_BYTES``). Errors print
``tidlx: error: ...`` and exit with status 2; warnings print ``tidlx: warning: ...``, one line
each. Names from the model or the command line are printed as they are (never read as rich
markup), their control characters escaped.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import warnings
from collections import Counter
from typing import Dict, List, Optional, Sequence, Tuple

from .ir import TidlxError
from .ir.errors import TidlxWarning
from .ir.text import printable


def _op_counts(mod) -> Counter:
    from .ir.traversal import calls

    counts: Counter = Counter()
    for _, fn in mod.items():
        for call in calls(fn):
            counts[call.op.name] += 1
    return counts


def op_count_table(mod, title: str):
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(printable(title)))
    table.add_column("op")
    table.add_column("count", justify="right")
    counts = _op_counts(mod)
    for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        table.add_row(Text(printable(name)), str(n))
    table.add_row(Text("total", style="bold"), Text(str(sum(counts.values())), style="bold"))
    return table


def make_console(**kwargs):
    """A rich console for standard output: a terminal's width, else no width limit (output that
    goes to a file or a pipe is never wrapped mid-sentence)."""
    from rich.console import Console

    from .backends.tidl.report import NO_WRAP_WIDTH

    console = Console(highlight=False, **kwargs)
    if not console.is_terminal:
        console = Console(highlight=False, width=NO_WRAP_WIDTH, **kwargs)
    return console


# -- loading a model: the options every command that loads one takes ---------------------------------

def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """MODEL and the options that say how to load it."""
    parser.add_argument("model", metavar="MODEL", help="ONNX (.onnx) or Relay text (.txt, .relay)")
    group = parser.add_argument_group("loading the model")
    group.add_argument("--params", metavar="FILE",
                       help="Relay text: the constants the text refers to but does not hold (printed without "
                            "metadata), from an .npz or a TVM params file (relay.save_param_dict); a key binds "
                            "@main's parameter of that name, a key meta[relay.Constant][i] fills that constant")
    group.add_argument("--batch", metavar="N", help="ONNX: set dimension 0 of every input to N")
    group.add_argument("--shapes", metavar="NAME:DIMS", action="append", default=[],
                       help="ONNX: the whole shape of an input, e.g. img:6x3x256x704 (several: "
                            "img:1x3x224x224,mask:1x1x224x224, or the option again)")
    group.add_argument("--opset", metavar="N", help="ONNX: read the model as this default-domain opset")
    group.add_argument("--custom-ops", metavar="MODULE:FUNC", action="append", default=[],
                       help="call FUNC() of MODULE (a module name or a .py file) before loading, to register custom "
                            "ops with tidlx.register_op (e.g. tidlx.models:register_bev_pool for BEVDet's "
                            "tidlx.bevdet/BevPool nodes); repeatable")
    group.add_argument("--max-tensor-bytes", metavar="SIZE",
                       help="the most bytes one value of the model may need (e.g. 16G, 500MB, 8589934592; default: "
                            "TIDLX_MAX_TENSOR_BYTES, else 4 GiB): a larger one is refused before anything is "
                            "allocated")


def positive_int(text: Optional[str], option: str) -> Optional[int]:
    """``--batch 6`` -> 6; anything but an integer >= 1 is an error naming the option."""
    if text is None:
        return None
    try:
        value = int(str(text).strip(), 10)
    except ValueError:
        value = 0
    if value < 1:
        raise TidlxError(f"{option} {text!r} is not allowed: it must be an integer >= 1")
    return value


def parse_shapes(specs: Sequence[str], option: str = "--shapes") -> Optional[Dict[str, Tuple[int, ...]]]:
    """``["img:6x3x256x704,mask:6x1x64x176"]`` -> ``{"img": (6, 3, 256, 704), ...}``.

    An input is ``NAME:DIMS``, the name before the last colon (``input:0:1x3x224x224`` names
    ``input:0``), the dimensions separated by ``x`` or by commas (``img:1,3,224,224``; ``[...]``
    around them is allowed); inputs are separated by commas or given in several options."""
    if not specs:
        return None
    items: List[List[str]] = []
    for spec in specs:
        for token in str(spec).split(","):
            token = token.strip()
            if ":" in token or not items:
                items.append([token])
            else:
                items[-1].append(token)  # a dimension of a comma-separated shape
    shapes: Dict[str, Tuple[int, ...]] = {}
    for parts in items:
        name, sep, first = parts[0].rpartition(":")
        dims_text = ",".join([first] + parts[1:]).strip().strip("[]()")
        example = f"{option} img:1x3x224x224"
        if not sep or not name:
            raise TidlxError(f"{option} {parts[0]!r}: write NAME:DIMS, e.g. {example}")
        dims = []
        for d in dims_text.replace("x", ",").replace("X", ",").split(",") if dims_text else []:
            try:
                value = int(d.strip(), 10)
            except ValueError:
                value = -1
            if value < 0:
                raise TidlxError(f"{option} {name}:{dims_text}: dimension {d.strip()!r} is not an integer >= 0 "
                                 f"(e.g. {example})")
            dims.append(value)
        if name in shapes:
            raise TidlxError(f"{option} gives input '{name}' twice")
        shapes[name] = tuple(dims)
    return shapes


def register_custom_ops(specs: Sequence[str]) -> None:
    """``--custom-ops MODULE:FUNC``: imports MODULE (a dotted name, or a path to a .py file) and calls
    FUNC(), which registers ops (``tidlx.register_op``); each failure names the option and what failed."""
    import importlib
    import importlib.util

    for spec in specs:
        where = f"--custom-ops {spec}"
        module_name, sep, func_name = str(spec).rpartition(":")
        if not sep or not module_name or not func_name.isidentifier():
            raise TidlxError(f"{where}: write MODULE:FUNC (a module name or a .py file, and the function that "
                             f"registers the ops), e.g. tidlx.models:register_bev_pool")
        try:
            if module_name.endswith(".py"):
                if not os.path.isfile(module_name):
                    raise TidlxError(f"{where}: {module_name}: no such file")
                loader_spec = importlib.util.spec_from_file_location(
                    f"tidlx_custom_ops_{abs(hash(os.path.abspath(module_name)))}", module_name)
                module = importlib.util.module_from_spec(loader_spec)
                loader_spec.loader.exec_module(module)
            else:
                module = importlib.import_module(module_name)
        except TidlxError:
            raise
        except Exception as exc:  # the user's module: its own error, named
            raise TidlxError(f"{where}: cannot import {module_name} ({type(exc).__name__}: {exc})") from None
        func = getattr(module, func_name, None)
        if not callable(func):
            raise TidlxError(f"{where}: {module_name} has no function {func_name}")
        try:
            func()
        except TidlxError as exc:
            raise TidlxError(f"{where}: {exc}") from None
        except Exception as exc:
            raise TidlxError(f"{where}: {func_name}() failed ({type(exc).__name__}: {exc})") from None


def _asks_prequantized(option_values) -> bool:
    """Whether the -o values set ``advanced_options:prequantized_model`` to 1 (the model is then
    imported as TIDL's prequantized import does)."""
    from .backends.tidl.options import parse_key_values

    items = [v for v in option_values if "=" in v]
    try:
        values = parse_key_values(items)
    except TidlxError:
        return False   # the options' own check reports it
    return str(values.get("advanced_options:prequantized_model", "0")).strip() == "1"


def load_model(args):
    """Loads ``args.model`` with the loading options; every problem is a TidlxError that names
    the file or the option."""
    from .api import ONNX_SUFFIXES, RELAY_SUFFIXES, load, relay_params

    path = args.model
    if not os.path.exists(path):
        raise TidlxError(f"{path}: no such file")
    if os.path.isdir(path):
        raise TidlxError(f"{path}: is a folder, not a model file")
    register_custom_ops(getattr(args, "custom_ops", None) or ())
    batch = positive_int(args.batch, "--batch")
    shapes = parse_shapes(args.shapes)
    opset = positive_int(args.opset, "--opset")
    ext = os.path.splitext(path)[1].lower()
    onnx = ext in ONNX_SUFFIXES
    if ext in RELAY_SUFFIXES:
        for option, value in (("--batch", batch), ("--shapes", shapes), ("--opset", opset)):
            if value is not None:
                raise TidlxError(f"{option} applies to ONNX models (it overrides their input shapes or opset); "
                                 f"{path} is Relay text, whose shapes are written in the text")
    params = None
    if args.params is not None:
        if onnx:
            raise TidlxError(f"--params binds the constants of Relay text printed without metadata; {path} is "
                             f"an ONNX model, which holds its own weights")
        params = relay_params(args.params, "--params")
    try:
        return load(path, batch=batch, shapes=shapes, opset=opset, params=params,
                    prequantized=onnx and _asks_prequantized(getattr(args, "option", None) or ()))
    except TidlxError as exc:  # the importers speak the API's keywords; say the options too
        hints = [option for keyword, option in _OPTION_OF_KEYWORD if re.search(rf"(?<!\w){keyword}", str(exc))]
        if not hints:
            raise
        first, newline, rest = str(exc).partition("\n")  # after the message, before a quoted source line
        raise TidlxError(f"{first} (on the command line: {', '.join(hints)}){newline}{rest}") from None


#: The API keyword an import error may name -> the command-line option that sets it.
_OPTION_OF_KEYWORD = (("batch=", "--batch N"), ("shapes=", "--shapes NAME:DIMS, e.g. --shapes img:1x3x224x224"),
                      ("opset=", "--opset N"), ("TIDLX_MAX_TENSOR_BYTES=", "--max-tensor-bytes SIZE"),
                      ("onnx='domain/OpType'", "--custom-ops MODULE:FUNC, a function that registers it"))


# -- the commands -------------------------------------------------------------------------------------

def cmd_show(args) -> int:
    from rich.text import Text

    mod = load_model(args)
    console = make_console(soft_wrap=True)
    if not args.counts_only:
        console.print(Text(printable(mod.astext(show_meta_data=args.meta), keep="\n\t")))
    console.print(op_count_table(mod, title=f"ops in {args.model}"))
    return 0


def output_names(mod, count: int) -> List[str]:
    """The names of @main's outputs: the ONNX graph's output names when the importer kept them
    (one each, all different), else ``output_0``, ``output_1``, ..."""
    names = list(mod.attrs.get("output_names") or [])
    if len(names) == count and len(set(names)) == count and all(isinstance(n, str) and n for n in names):
        return names
    return [f"output_{i}" for i in range(count)]


def describe_values(array) -> str:
    """``min -1.2, max 3.4`` for a value (``empty`` when it has no element)."""
    import numpy as np

    if array.size == 0:
        return "empty (no elements)"
    if array.dtype == np.bool_:
        return f"{int(np.count_nonzero(array))} of {array.size} true"
    return f"min {array.min():.6g}, max {array.max():.6g}"


def cmd_run(args) -> int:
    from .api import emulate
    from .files import npz_target, read_npz, write_npz

    if os.path.isdir(args.model):   # a compiled folder (tidlx compile): run it from its artifacts
        from .compiled import cmd_run_compiled

        return cmd_run_compiled(args)
    if args.debug_level is not None or args.trace_dir is not None or args.host is not None:
        raise TidlxError("--debug-level, --trace-dir and --host apply to a compiled folder (tidlx compile MODEL -o DIR)")
    if args.output:
        npz_target(args.output, "--output")  # a bad place is an error before the run, not after
    fixed_only = [name for name, given in (("--calib", args.calib is not None), ("-o", bool(args.option)),
                                            ("--mean", args.mean is not None), ("--scale", args.scale is not None))
                  if given]
    if args.mode == "float" and fixed_only:
        raise TidlxError(f"{fixed_only[0]} applies to --mode fixed (TIDL's fixed point); --mode float runs the "
                         f"float32 emulator as it is")
    if args.calib is not None and not os.path.exists(args.calib):
        raise TidlxError(f"--calib {args.calib}: no such file or folder")
    options = None
    if args.mode == "fixed":
        from .backends.tidl.options import TidlOptions

        from .compare_cli import float_list

        options = TidlOptions.from_strings(list(args.option))  # a bad option is an error before loading
        mean, scale = float_list(args.mean, "--mean"), float_list(args.scale, "--scale")
    mod = load_model(args)
    inputs = read_npz(args.input, "--input")
    if args.mode == "fixed":
        from .api import partition
        from .quantize_api import emulate as emulate_fixed, quantize

        partitioned, report = partition(mod, options)
        if not report.subgraphs:
            raise TidlxError(f"{args.model}: no TIDL subgraph, every op runs on the host in float, so --mode fixed "
                             f"has nothing to run in fixed point (tidlx partition {args.model} says why)")
        qmodel = quantize(partitioned, options, args.calib, mean=mean, scale=scale)
        print(printable(f"fixed point: {qmodel!r}"))
        outputs = emulate_fixed(qmodel, inputs)
    else:
        outputs = emulate(mod, inputs)
    names = output_names(mod, len(outputs))
    for i, (name, out) in enumerate(zip(names, outputs)):
        print(printable(f"output {i} '{name}': shape {tuple(out.shape)} {out.dtype}, {describe_values(out)}"))
    if args.output:
        written = write_npz(args.output, dict(zip(names, outputs)), "--output")
        print(printable(f"wrote {written} (arrays {', '.join(names)})"))
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
    console = make_console()
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

    out = args.out
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise TidlxError(f"--out {out}: cannot create the folder ({exc.strerror})") from None
    # the model files are written by bevdet_img_stage, whose errors name the file
    result = run_demo(backbone=args.backbone, batch=args.batch, tiny=args.tiny, out_dir=out,
                      depth_net=args.depth_net, console=make_console())
    return 0 if all(err <= 1e-4 for err in result["errors"].values()) else 1


# -- the parser ---------------------------------------------------------------------------------------

def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def _paragraph(text: str) -> str:
    import textwrap

    return textwrap.fill(text, width=88)


def subcommand(sub, name: str, help: str, description: str, examples: Sequence[str]) -> argparse.ArgumentParser:
    """A subcommand whose ``--help`` has a description and examples (shared by every command)."""
    return sub.add_parser(name, help=help, description=_paragraph(description), epilog=_examples(*examples),
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="tidlx", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_paragraph("TIDL/TVM deployment answers on a laptop: will a model export to TIDL, into how "
                               "many subgraphs, what stays on the host and why, and what its float numbers are."),
        epilog=_examples("tidlx partition model.onnx", "tidlx partition resnet18.txt --params resnet18.params",
                         "tidlx run model.onnx --input inputs.npz --output outputs.npz",
                         "tidlx show model.onnx --counts-only", "tidlx demo --tiny",
                         "tidlx COMMAND --help      (each command's options)"))
    parser.add_argument("--version", action="version", version=f"tidlx {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    show = subcommand(sub, "show", "print a model as Relay text and a table of op counts",
                      "Print a model as tidlx imported it, as Relay text (TVM's format), then a table of how "
                      "many calls of each op it has.",
                      ["tidlx show model.onnx", "tidlx show model.onnx --batch 6 --counts-only",
                       "tidlx show resnet18.txt --params resnet18.params --meta"])
    add_model_arguments(show)
    show.add_argument("--meta", action="store_true", help="include the #[metadata] section (constants)")
    show.add_argument("--counts-only", action="store_true", help="only the op-count table")
    show.set_defaults(func=cmd_show)

    run = subcommand(sub, "run", "run a model in the float32 emulator, or with TIDL's fixed point",
                     "Run a model in tidlx's float32 emulator on inputs from an .npz file (one array per "
                     "model input, by input name), print each output's shape and range, and optionally save "
                     "the outputs to an .npz under the model's output names. --mode fixed partitions it for "
                     "TIDL, calibrates on --calib, quantizes, and runs the TIDL subgraphs in TIDL's fixed point "
                     "(the host part in float), as tidlx.emulate(mod, inputs, mode='fixed') does. MODEL may be a "
                     "folder written by tidlx compile: its TIDL subgraphs then run in fixed point from their "
                     ".bin files, with the options they were compiled with.",
                     ["tidlx run model.onnx --input inputs.npz",
                      "tidlx run model.onnx --input inputs.npz --output outputs.npz",
                      "tidlx run model.onnx --batch 6 --input inputs_b6.npz",
                      "tidlx run model.onnx --input inputs.npz --mode fixed --calib frames.npz -o tensor_bits=16",
                      "tidlx run out/model --input inputs.npz      (a folder from tidlx compile: from its artifacts)",
                      "tidlx run out/model --input inputs.npz --debug-level 3 --trace-dir traces",
                      "tidlx run out/model_arm --input inputs.npz --host deployed   (compiled with --target arm: "
                      "under qemu)",
                      "python -c \"import numpy as np; np.savez('in.npz', img=np.zeros((1, 3, 224, 224), "
                      "np.float32))\""])
    add_model_arguments(run)
    run.add_argument("--input", required=True, metavar="FILE",
                     help=".npz with one array per model input, by input name")
    run.add_argument("--output", metavar="FILE",
                     help="write the outputs to this .npz, under the model's output names (.npz is added "
                          "when FILE has another ending)")
    run.add_argument("--mode", choices=["float", "fixed"], default="float",
                     help="float: the float32 emulator (default); fixed: TIDL subgraphs in TIDL's fixed point")
    run.add_argument("--calib", metavar="F",
                     help="--mode fixed: calibration frames, an .npz with one array per input name, frames on the "
                          "batch axis, or a folder of .npy images (default: seeded random frames, with a warning)")
    run.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                     help="--mode fixed: a TIDL option by TI's name (tensor_bits=16, accuracy_level=0, "
                          "advanced_options:calibration_frames=N, ...); repeatable")
    from .compare_cli import add_preprocessing_arguments

    add_preprocessing_arguments(run)
    run.add_argument("--debug-level", type=int, metavar="N",
                     help="a compiled folder: 3 writes each layer's output as TI's per-layer traces, 4 also as "
                          "float (default: the debug_level it was compiled with)")
    run.add_argument("--trace-dir", metavar="DIR", help="a compiled folder: where the traces go (default: DIR_traces)")
    run.add_argument("--host", choices=["ir", "deployed"],
                     help="a compiled folder: run the host part as built by tidlx compile --target (deployed: "
                          "x86 natively, arm under qemu-aarch64, c7x's C source built for this machine) or as IR "
                          "in the float emulator (default: deployed where this machine can run it)")
    run.set_defaults(func=cmd_run)

    ops = subcommand(sub, "ops", "which ops tidlx knows and what each has: kernels, TIDL rule and layer, "
                                 "ONNX op types (the coverage table)",
                     "List every op tidlx knows with its facets: reference and fast kernels, the TIDL rule "
                     "and layer, the ONNX op types that import to it.",
                     ["tidlx ops", "tidlx ops nn.conv2d nn.dense", "tidlx ops --json"])
    ops.add_argument("op", nargs="*", help="only these ops (Relay names), with where each facet is defined")
    ops.add_argument("--json", action="store_true", help="the table as JSON")
    ops.set_defaults(func=cmd_ops)

    demo = subcommand(sub, "demo", "build, import, emulate and partition the built-in BEVDet image stage",
                      "Build the built-in BEVDet image stage as ONNX, import it, run it in the float emulator "
                      "next to onnxruntime, and answer the TIDL questions on it (subgraphs, host ops, batch, "
                      "the BatchNorm feeding two GEMMs, the deformable conv).",
                      ["tidlx demo", "tidlx demo --tiny --backbone resnet18 --batch 2 --out /tmp/demo"])
    demo.add_argument("--backbone", default="resnet50", choices=["resnet50", "resnet18"])
    demo.add_argument("--batch", type=int, default=6, help="cameras (batch); BEVDet uses 6")
    demo.add_argument("--tiny", action="store_true", help="the small variant (fast)")
    demo.add_argument("--depth-net", default="camera_aware", choices=["camera_aware", "lss"],
                      help="BEVDet's camera-aware DepthNet (default) or the plain LSS 1x1 conv")
    demo.add_argument("--out", default="out", help="folder for the written model files (default: out)")
    demo.set_defaults(func=cmd_demo)

    for module in command_modules():
        module.add_parser(sub)
    return parser


def command_modules():
    """The modules ``tidlx/<name>_cli.py`` that add a command of their own (``add_parser(subparsers)``),
    in their ``COMMAND_ORDER``: a new command is one new file, and the commands stay in the help's order."""
    import importlib
    import pkgutil

    from . import __path__ as package_path

    modules = [importlib.import_module(f"{__package__}.{info.name}")
               for info in pkgutil.iter_modules(package_path) if info.name.endswith("_cli")]
    return sorted(modules, key=lambda m: (m.COMMAND_ORDER, m.__name__))


# -- main ---------------------------------------------------------------------------------------------

def warn_line(message) -> str:
    """A warning as the CLI prints it: one ``tidlx: warning:`` line, control characters escaped."""
    return f"tidlx: warning: {printable(message, keep=chr(10))}"


def print_warnings_once(caught) -> None:
    """Warnings caught while a command ran, each text once, as ``tidlx: warning:`` lines on stderr."""
    seen = set()
    for w in caught:
        text = str(w.message)
        if text not in seen:
            seen.add(text)
            print(warn_line(text), file=sys.stderr)


def _show_warning(message, category, filename, lineno, file=None, line=None):
    # Warnings the user should act on, as one line each, not Python's source-location format.
    if issubclass(category, TidlxWarning):
        print(warn_line(message), file=sys.stderr)
    else:
        _python_showwarning(message, category, filename, lineno, file, line)


_python_showwarning = warnings.showwarning


def _tensor_budget(size: Optional[str]):
    """The tensor budget of ``--max-tensor-bytes`` for the command (none given: as it is)."""
    import contextlib

    from .ir.types import parse_bytes, tensor_budget

    return contextlib.nullcontext() if size is None else tensor_budget(parse_bytes(size, "--max-tensor-bytes"))


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings(), _tensor_budget(getattr(args, "max_tensor_bytes", None)):
            warnings.showwarning = _show_warning
            return args.func(args)
    except TidlxError as exc:
        print(f"tidlx: error: {printable(exc, keep=chr(10))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (tidlx ... | head): stop without a traceback
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 141


if __name__ == "__main__":
    sys.exit(main())
