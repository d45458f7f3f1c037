"""In-process A/B of the fast convolution routes: dilated 3x3 by Winograd on phase sub-grids, and the
direct route for convolutions with few input channels (the stems), each against the route they
replace (im2col + sgemm), Winograd's BLAS products for large weights against its tile blocks, and the
direct route's split between threads by bands of positions against panels of output channels, and
1x1 convolutions of small maps on the pointwise tile kernel against OpenBLAS's sgemm.

Not part of ``make bench`` (its name does not match bench_*.py). The routes are switched by module
flags (``_winograd.DILATED``, ``op_conv.DIRECT_FEW_CHANNELS``, ``_winograd.BLAS_MIN_CHANNEL_PAIRS``,
``op_conv.DIRECT_SPATIAL``, ``op_conv.POINTWISE_LANES``; ``--routes`` picks which), the two variants alternating run
by run in one process (the machine is shared: quote the ratio of medians). ``--shapes`` times the
nn.conv2d kernel alone inside a fast run context (2 threads unless ``--threads``); ``--models``
times whole models of benchmarks/model_set.py (``tidlx.emulator.run``, ``--threads`` threads, the
adapt rule off: it would pick 1 or 2 threads by the load at each run's start).

    .venv/bin/python benchmarks/ab_conv_routes.py --shapes dilated,stems --runs 30
    .venv/bin/python benchmarks/ab_conv_routes.py --models fcn_resnet50 --runs 6
    .venv/bin/python benchmarks/ab_conv_routes.py --errors fcn_resnet50,mobilenet_v3_small
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_set  # noqa: E402
from bench_float import random_feed  # noqa: E402
from bench_models import float64_outputs, relative_error, save_model_and_feed  # noqa: E402

# (label, N, C, H, W, O, k, stride, pad, dilation)
SHAPES = {
    "dilated": [
        ("FCN layer3 256ch d2 32x32", 1, 256, 32, 32, 256, 3, 1, 2, 2),
        ("FCN layer4 512ch d2 32x32", 1, 512, 32, 32, 512, 3, 1, 2, 2),
        ("FCN layer4 512ch d4 32x32", 1, 512, 32, 32, 512, 3, 1, 4, 4),
    ],
    "stems": [
        ("stem 3->16 s2 224 (V3-small)", 1, 3, 224, 224, 16, 3, 2, 1, 1),
        ("stem 3->32 s2 224 (V2, B0)", 1, 3, 224, 224, 32, 3, 2, 1, 1),
        ("stem 3->24 s2 224 (ShuffleV2)", 1, 3, 224, 224, 24, 3, 2, 1, 1),
        ("stem 3->64 7x7 s2 224 (ResNet)", 1, 3, 224, 224, 64, 7, 2, 3, 1),
    ],
    "winograd": [
        ("FCN head 2048->512 32x32", 1, 2048, 32, 32, 512, 3, 1, 1, 1),
        ("512ch 14x14", 1, 512, 14, 14, 512, 3, 1, 1, 1),
        ("1024->256 16x16", 1, 1024, 16, 16, 256, 3, 1, 1, 1),
    ],
    "stride2": [
        ("ResNet-18 64->128 s2 56", 1, 64, 56, 56, 128, 3, 2, 1, 1),
        ("ResNet-18 128->256 s2 28", 1, 128, 28, 28, 256, 3, 2, 1, 1),
        ("ResNet-18 256->512 s2 14", 1, 256, 14, 14, 512, 3, 2, 1, 1),
    ],
}


def _flags():
    from tidlx.emulator.fast import _winograd, op_conv

    return _winograd, op_conv


ROUTES = ("dilated", "few", "blas", "spatial", "pointwise")
_chosen = list(ROUTES)
_defaults: dict = {}


def _set_route(new: bool) -> None:
    """Turns the chosen routes (``--routes``) on (new) or off (the routes they replace)."""
    winograd, op_conv = _flags()
    if "dilated" in _chosen:
        winograd.DILATED = new
    if "few" in _chosen:
        op_conv.DIRECT_FEW_CHANNELS = new
    if "spatial" in _chosen:
        op_conv.DIRECT_SPATIAL = new
    if "pointwise" in _chosen:
        op_conv.POINTWISE_LANES = new
    if "blas" in _chosen:
        _defaults.setdefault("pairs", winograd.BLAS_MIN_CHANNEL_PAIRS)
        winograd.BLAS_MIN_CHANNEL_PAIRS = _defaults["pairs"] if new else 1 << 62


def _conv_runner(n, c, h, w, o, k, stride, pad, dilation):
    from tidlx.emulator.registry import get_kernel
    from tidlx.ir import TensorType, get_op

    rng = np.random.default_rng(c + h + o + k)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((o, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    wt.setflags(write=False)  # a Constant's data: Winograd caches its transformed weights
    op = get_op("nn.conv2d")
    attrs = op.make_attrs(dict(strides=(stride, stride), padding=(pad, pad, pad, pad),
                               dilation=(dilation, dilation)))
    out_type = op.type_rel([TensorType(x.shape, "float32"), TensorType(wt.shape, "float32")], attrs)
    kernel = get_kernel("nn.conv2d")
    return lambda: kernel([x, wt], attrs, out_type)


def time_shapes(names, runs: int, threads: int) -> None:
    from tidlx.emulator import EmulatorConfig
    from tidlx.emulator.fast._parallel import run_context

    config = EmulatorConfig(threads=threads, adapt=False)
    print(f"{'shape':<34}{'old ms':>9}{'new ms':>9}{'old/new':>9}{'max |new-old|/max|old|':>24}")
    # every kernel of both routes compiled and loaded before the first timing (else the first
    # shape's figures came out 2-3x high)
    with run_context(config):
        for group in names:
            for label, *shape in SHAPES[group]:
                call = _conv_runner(*shape)
                for new in (False, True):
                    _set_route(new)
                    call()
    for group in names:
        for label, *shape in SHAPES[group]:
            call = _conv_runner(*shape)
            times = {False: [], True: []}
            results = {}
            with run_context(config):
                for new in (False, True):  # warm-up (numba cache, weight transforms, threads)
                    _set_route(new)
                    results[new] = call()
                    for _ in range(5):
                        call()
                for _ in range(runs):
                    for new in (False, True):
                        _set_route(new)
                        start = time.perf_counter()
                        call()
                        times[new].append(time.perf_counter() - start)
            _set_route(True)
            old, new = (statistics.median(times[v]) * 1e3 for v in (False, True))
            diff = np.abs(results[True].astype(np.float64) - results[False]).max() / np.abs(results[False]).max()
            print(f"{label:<34}{old:>9.3f}{new:>9.3f}{old / new:>8.2f}x{diff:>24.2e}")


def model_errors(names, seeds) -> None:
    """Each route's error against a float64 evaluation (bench_models' measure: max abs error / max
    abs float64 output), and onnxruntime's (2 threads) for the error ratio (goal: at most 1.5x)."""
    import onnxruntime as ort

    import tidlx
    from tidlx.emulator import run

    for name in names:
        model = model_set.MODELS[name][0]()
        for seed in seeds:
            feed = random_feed(model, seed)
            reference = float64_outputs(model, feed)
            with tempfile.TemporaryDirectory() as tmp:
                model_path, _ = save_model_and_feed(tmp, name, model, feed)
                mod = tidlx.load(model_path)
                options = ort.SessionOptions()
                options.intra_op_num_threads = 2
                session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
                ort_err = relative_error(session.run(None, feed), reference)
            errs = {}
            for new in (False, True):
                _set_route(new)
                out = run(mod, feed)
                errs[new] = relative_error(list(out) if isinstance(out, (list, tuple)) else [out], reference)
            _set_route(True)
            print(f"{name:<20} seed {seed}  err old {errs[False]:.3g} ({errs[False] / ort_err:.2f}x ort)  "
                  f"new {errs[True]:.3g} ({errs[True] / ort_err:.2f}x ort)  ort {ort_err:.3g}")


def time_models(names, runs: int, threads: int) -> None:
    import tidlx
    from tidlx.emulator import EmulatorConfig, run

    # a fixed thread count: the default adapt rule picks 1 or 2 threads by the load at each run's start
    config = EmulatorConfig(threads=threads, adapt=False)

    for name in names:
        model = model_set.MODELS[name][0]()
        feed = random_feed(model, 0)
        with tempfile.TemporaryDirectory() as tmp:
            model_path, _ = save_model_and_feed(tmp, name, model, feed)
            mod = tidlx.load(model_path)
        times = {False: [], True: []}
        outs = {}
        for new in (False, True):  # warm-up
            _set_route(new)
            for _ in range(2):
                outs[new] = run(mod, feed, config=config)
        for _ in range(runs):
            for new in (False, True):
                _set_route(new)
                start = time.perf_counter()
                run(mod, feed, config=config)
                times[new].append(time.perf_counter() - start)
        _set_route(True)
        old, new = (statistics.median(times[v]) * 1e3 for v in (False, True))
        a, b = (np.asarray(outs[v][0] if isinstance(outs[v], (list, tuple)) else outs[v], np.float64)
                for v in (False, True))
        diff = np.abs(b - a).max() / np.abs(a).max()
        print(f"{name:<20} {threads} thr  old {old:8.2f} ms  new {new:8.2f} ms  old/new {old / new:5.2f}x  "
              f"max|new-old|/max|old| {diff:.2e}  ({runs} runs each, alternating)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="", help="comma list of " + ", ".join(SHAPES))
    parser.add_argument("--models", default="", help="comma list of model_set names")
    parser.add_argument("--errors", default="", help="comma list of model_set names: errors against float64")
    parser.add_argument("--seeds", default="1", help="feeds for --errors (bench_models.py uses seed 1)")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--routes", default=",".join(ROUTES),
                        help="the routes switched between old and new: dilated (Winograd on phases), few "
                             "(direct few-channel convolutions), blas (Winograd products by BLAS for large weights), "
                             "spatial (the direct route split by bands of positions), pointwise (1x1 convolutions "
                             "of small maps on the pointwise tile kernel)")
    args = parser.parse_args()
    _chosen[:] = args.routes.split(",")
    print(f"load average {os.getloadavg()[0]:.2f} at start")
    if args.shapes:
        time_shapes(args.shapes.split(","), args.runs, args.threads)
    if args.models:
        time_models(args.models.split(","), args.runs, args.threads)
    if args.errors:
        model_errors(args.errors.split(","), [int(v) for v in args.seeds.split(",")])
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
