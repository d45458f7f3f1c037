"""Compiled folders: writing, loading, and running in TI's inference modes, as ratios in one process.

    .venv/bin/python benchmarks/bench_artifacts.py [--rounds 5] [--batch 6] [--tiny]

The built-in BEVDet image stage (ResNet-18 backbone; full size unless --tiny) with max_batch_size=batch,
compiled once (seeded random calibration). Figures: the folder's size, write and load times, and the
run time of inference mode 0 (one core), mode 1 (the batch over 2 cores) and mode 2 (rows over 2 cores),
alternated A B C in each round; the medians and the ratios mode/mode 0 per round. Modes 1 and 2 are
emulation: threads on this machine's cores; the ratio says how much the split parallelizes here, not
what a C7x does.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=6)
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()

    import tidlx
    from tidlx.frontends.onnx import from_onnx
    from tidlx.models import bevdet_img_stage

    mod = from_onnx(bevdet_img_stage(backbone="resnet18", batch=args.batch, tiny=args.tiny))
    shape = tuple(int(d) for d in mod["main"].params[0].checked_type.shape)
    x = {mod["main"].params[0].name_hint: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folder = os.path.join(tmp, "model")
        t = time.perf_counter()
        tidlx.compile_model(mod, folder, {"max_batch_size": args.batch})
        compile_s = time.perf_counter() - t
        size = sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder))
        t = time.perf_counter()
        compiled = tidlx.load_compiled(folder)
        load_s = time.perf_counter() - t
        print(f"BEVDet resnet18 {'tiny' if args.tiny else 'full'} batch {args.batch}: folder {size / 1e6:.1f} MB, "
              f"compile (quantize + write) {compile_s:.1f} s, load {load_s:.2f} s")
        modes = {"mode 0": dict(inference_mode=0), "mode 1 x2": dict(inference_mode=1, num_cores=2),
                 "mode 2 x2": dict(inference_mode=2, num_cores=2)}
        reference = compiled.run(x)       # warm-up (plans, numba) and the bits to compare with
        times = {name: [] for name in modes}
        for _ in range(args.rounds):
            for name, kw in modes.items():
                t = time.perf_counter()
                out = compiled.run(x, **kw)
                times[name].append(time.perf_counter() - t)
                assert all(np.array_equal(a, b) for a, b in zip(out, reference)), name
        base = times["mode 0"]
        for name, ts in times.items():
            ratios = [a / b for a, b in zip(ts, base)]
            print(f"  {name}: median {statistics.median(ts):.3f} s, ratio to mode 0 median {statistics.median(ratios):.2f} "
                  f"(per round {', '.join(f'{r:.2f}' for r in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
