"""How the emulator cuts a matrix product: one block per CPU against the short-k rule of _parallel.product_blocks.

Not part of ``make bench`` (its name does not match bench_*.py). The shapes are the 1x1
convolutions (stride 1, one group) of the benchmark set (benchmarks/model_set.py), each with the
number of times one run of every model meets it, from 0.4M multiply-adds (the smallest split
product) to ``--max-macs``. For each shape, one process: the blocks of the old rule (one per CPU)
and of the current ``product_blocks`` are timed at 1 thread (the blocks in turn) and at 2 (one
numba region), the four alternating call by call (old and new in turn first); medians over ``--runs``, the gain old/new,
and the totals weighted by the counts. The load average is printed before and after.

    .venv/bin/python benchmarks/ab_product_blocks.py --runs 15
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_set  # noqa: E402
from bench_float import random_feed  # noqa: E402
from bench_models import save_model_and_feed  # noqa: E402


def pointwise_shapes(names) -> collections.Counter:
    """(m, k, n) of every 1x1 stride-1 one-group convolution of the models, counted per run."""
    import tidlx
    from tidlx.emulator import EmulatorConfig
    from tidlx.emulator.interpreter import plan_of

    shapes = collections.Counter()
    for name in names:
        model = model_set.MODELS[name][0]()
        with tempfile.TemporaryDirectory() as tmp:
            model_path, _ = save_model_and_feed(tmp, name, model, random_feed(model, 0))
            mod = tidlx.load(model_path)
        for step in plan_of(mod, config=EmulatorConfig(threads=1)).steps:
            head = getattr(step[3], "head_node", step[6])
            if getattr(getattr(head, "op", None), "name", None) != "nn.conv2d":
                continue
            o, i, kh, kw = (int(d) for d in head.args[1].checked_type.shape)
            h, w = (int(d) for d in head.checked_type.shape[2:])
            if (kh, kw) == (1, 1) and int(head.attrs.groups) == 1 and tuple(head.attrs.strides) == (1, 1):
                shapes[(o, i, h * w)] += 1
    return shapes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--max-macs", type=float, default=32e6)
    parser.add_argument("--models", default=",".join(model_set.MODELS))
    args = parser.parse_args()
    names = args.models.split(",")
    unknown = [n for n in names if n not in model_set.MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(model_set.MODELS)}")
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")

    from tidlx.emulator import EmulatorConfig
    from tidlx.emulator.fast import _blas, _parallel

    print(f"load average {os.getloadavg()[0]:.2f} at start")
    configs = {1: EmulatorConfig(threads=1), 2: EmulatorConfig(threads=2, adapt=False)}
    engines = {1: _blas.gemm_blocks_serial, 2: _blas.gemm_blocks}
    rng = np.random.default_rng(0)
    totals = collections.defaultdict(float)
    print(f"{'m x k x n':>20} {'MMAC':>6} {'runs':>4} {'blocks':>11}  {'1 thread old/new us':>20} {'gain':>5}"
          f"  {'2 threads old/new us':>21} {'gain':>5}")
    for (m, k, n), count in sorted(pointwise_shapes(names).items(), key=lambda item: np.prod(item[0])):
        macs = m * k * n
        if macs < _parallel._MIN_PARALLEL_MACS or macs > args.max_macs:
            continue
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        out = np.empty((m, n), np.float32)
        by_rows, old_blocks, _ = _parallel.product_blocks(m, n)  # no k: one block per CPU
        _, new_blocks, _ = _parallel.product_blocks(m, n, k, np.float32)
        times = collections.defaultdict(list)
        for run in range(args.runs):
            for threads, config in configs.items():
                with _parallel.run_context(config):
                    pair = (("old", old_blocks), ("new", new_blocks))
                    for label, blocks in pair if run % 2 == 0 else pair[::-1]:  # neither always second (warm)
                        start = time.perf_counter()
                        engines[threads](a, b, out, blocks, by_rows, 16)
                        times[threads, label].append(time.perf_counter() - start)
        med = {key: float(np.median(v)) * 1e6 for key, v in times.items()}
        for key, value in med.items():
            totals[key] += count * value
        print(f"{m:>6}x{k:>5}x{n:>6}  {macs / 1e6:6.2f} {count:>4} {old_blocks:>4} -> {new_blocks:<3}"
              f"  {med[1, 'old']:9.1f} {med[1, 'new']:9.1f} {med[1, 'old'] / med[1, 'new']:5.2f}x"
              f"  {med[2, 'old']:10.1f} {med[2, 'new']:9.1f} {med[2, 'old'] / med[2, 'new']:5.2f}x", flush=True)
    if not totals:
        print(f"no product of these models is split below --max-macs {args.max_macs:g}")
    for threads in configs if totals else ():
        old, new = totals[threads, "old"], totals[threads, "new"]
        print(f"weighted total at {threads} thread(s): {old / 1e3:.2f} -> {new / 1e3:.2f} ms ({old / new:.2f}x)")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
