"""``tidlx check-fusion MODEL``: what each fusion TIDL's import applies does to the fixed-point numbers.

    tidlx check-fusion model.onnx --calib frames.npz           # one row per fusion, as tables
    tidlx check-fusion --builtin bn-gemm                       # the seed's BN between two Gemms, built in
    tidlx check-fusion model.onnx -o max_batch_size=6 --json   # for scripts
    tidlx check-fusion model.onnx --isolate                    # each composite fusion off at its spot only

For every fusion (a batch norm folded into an inner product by FoldBatchNormIntoDense; a batch norm,
a relu/clip or a bias fused into a conv by the composites) the model is quantized again with that
fusion switched off, both from the same calibration frames, and the two are compared where both
sequences end: identical bits, or the largest difference in LSBs and how many elements differ; and
the error of each against float. For a folded batch norm, the partition with TI's two ways to keep
it (``deny_list=nn.batch_norm``, ``disabled_passes=FoldBatchNormIntoDense``). Errors print
``tidlx: error: ...`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings

#: Where the command stands in ``tidlx --help`` (tidlx/cli.py, ``command_modules``).
COMMAND_ORDER = 45

#: Built-in models by --builtin name: (builder, file name).
BUILTINS = {"bn-gemm": ("bn_between_gemms", "bn_between_gemms.onnx")}


def _builtin_model(name: str, folder: str) -> str:
    from . import models

    builder, file_name = BUILTINS[name]
    path = os.path.join(folder, file_name)
    getattr(models, builder)(path=path)
    return path


def cmd_check_fusion(args) -> int:
    from rich.text import Text

    from .backends.tidl.flow import resolve_options
    from .backends.tidl.fusion_check import check_fusions
    from .cli import load_model, make_console, print_warnings_once
    from .files import read_npz
    from .ir import TidlxError
    from .ir.text import printable

    if args.builtin is not None and args.model is not None:
        raise TidlxError(f"give a MODEL or --builtin {args.builtin}, not both")
    if args.builtin is None and args.model is None:
        raise TidlxError("check-fusion needs a MODEL file (or --builtin bn-gemm for the built-in BN between two "
                         "Gemms)")
    for option, path in (("--calib", args.calib), ("--input", args.input)):
        if path is not None and not os.path.exists(path):
            raise TidlxError(f"{option} {path}: no such file or folder")
    resolve_options(list(args.option))  # a bad option is an error before loading the model
    with tempfile.TemporaryDirectory(prefix="tidlx_fusion_") as folder, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if args.builtin is not None:
            args.model = _builtin_model(args.builtin, folder)
            name = f"{BUILTINS[args.builtin][0]} (built in)"
        else:
            name = os.path.basename(args.model)
        mod = load_model(args)
        inputs = read_npz(args.input, "--input") if args.input is not None else None
        result = check_fusions(mod, list(args.option), args.calib, inputs, isolate=args.isolate, model_name=name,
                               inputs_source=f"--input {args.input}", kernels=args.kernels)
    print_warnings_once(caught)
    if args.json:
        sys.stdout.write(result.to_json())
        return 0
    console = make_console()
    if not result.fusions:
        console.print(Text(printable(result.lines()[0])))
        return 0
    console.print(result.table())
    console.print(Text(printable("LSB: of the fused output's type; when the two outputs have different scales the "
                                 "difference is measured in the fused output's steps. A row whose input differed "
                                 "already also carries the same fusion's effect upstream (--isolate: each "
                                 "composite fusion switched off at its own spot only).")))
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Adds the ``check-fusion`` command to ``tidlx``'s subparsers."""
    from .cli import add_model_arguments, subcommand

    p = subcommand(
        subparsers, "check-fusion", "fused vs unfused layers in TIDL fixed point: identical bits or how many LSBs",
        "For each fusion TIDL's import applies to a model (batch norm into an inner product by "
        "FoldBatchNormIntoDense, the BN + Gemm merge; batch norm, relu/clip and bias into a convolution by the "
        "composite layers), quantize the model again with that fusion switched off (disabled_passes / "
        "disabled_fusions), calibrated from the same frames, run both in TIDL's fixed point on the same input "
        "(--input; else the first calibration frame) and report where the two sequences end: identical bits, "
        "or the largest difference in LSBs and how many elements differ, and the SQNR and largest error of each "
        "against float. For a batch norm folded into Gemms, also what deny_list=nn.batch_norm (the BN on the "
        "host) and disabled_passes=FoldBatchNormIntoDense (a TIDL BatchNorm layer) do to the partition. "
        "--builtin bn-gemm runs it on the seed's case, a BatchNormalization between two Gemms "
        "(tidlx.models.bn_between_gemms; to have the file: python -c \"import tidlx.models as m; "
        "m.bn_between_gemms(path='bn_gemm.onnx')\").",
        ["tidlx check-fusion --builtin bn-gemm", "tidlx check-fusion model.onnx --calib frames.npz",
         "tidlx check-fusion model.onnx --calib frames.npz --input test.npz --json > fusions.json",
         "tidlx check-fusion bevdet.onnx -o max_batch_size=6 -o tensor_bits=16",
         "tidlx check-fusion model.onnx --isolate", "tidlx check-fusion big.onnx --kernels fast"])
    add_model_arguments(p)
    for action in p._actions:  # MODEL may be left out when --builtin names the model
        if action.dest == "model":
            action.nargs = "?"
            action.default = None
            action.help = "ONNX (.onnx) or Relay text (.txt, .relay); leave out with --builtin"
    p.add_argument("--builtin", choices=sorted(BUILTINS), metavar="NAME",
                   help="check a built-in model instead of a file: bn-gemm (Gemm -> BatchNormalization -> Gemm -> "
                        "Relu -> Gemm, the seed's case)")
    p.add_argument("--calib", metavar="F",
                   help="calibration frames: an .npz with one array per input name, frames on the batch axis, or "
                        "a folder of images (default: seeded random frames, with a warning)")
    p.add_argument("--input", metavar="F",
                   help="an .npz with one frame per input name to compare on (default: the first calibration "
                        "frame)")
    p.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a TIDL option by TI's name (tensor_bits, accuracy_level, max_batch_size, deny_list, ...), "
                        "disabled_passes=NAME[,NAME] or disabled_fusions=NAME[,NAME]; repeatable")
    p.add_argument("--isolate", action="store_true",
                   help="switch each composite fusion off at its own spot only (one quantization per spot: "
                        "slower; each difference is that fusion's alone)")
    p.add_argument("--kernels", choices=("reference", "fast"), default="reference",
                   help="float kernels of calibration and of the float reference: reference (default: plain numpy, "
                        "the same figures on every machine) or fast (much quicker on large models; ranges within "
                        "3e-5 of reference, so a scale may land elsewhere in its last bit)")
    p.add_argument("--json", action="store_true", help="print the result as JSON (for scripts)")
    p.set_defaults(func=cmd_check_fusion)
    return p
