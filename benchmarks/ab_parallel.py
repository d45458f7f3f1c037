"""The float emulator's parallel modes, idle and beside one CPU-bound process.

Modes: ``regions`` (default: numba parallel regions), ``pool`` (``TIDLX_EMULATOR_PARALLEL=pool``),
``threads1`` (``TIDLX_EMULATOR_THREADS=1``), and onnxruntime (2 intra-op threads) for the ratio.
Each mode runs in its own fresh process (bench_float.py's ``--engine`` child runner); the modes
alternate round by round (order reversed on odd rounds), idle and beside a Python busy loop
alternating too; a figure is the median of the process medians. The load average is printed
before and after.

    .venv/bin/python benchmarks/ab_parallel.py --models resnet18,mobilenet_v3_small --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_set  # noqa: E402
from bench_float import WARMUP, random_feed, run_child  # noqa: E402
from bench_models import BusyLoop, save_model_and_feed  # noqa: E402

MODES = {
    "regions": ("tidlx", {"TIDLX_EMULATOR_PARALLEL": "numba", "TIDLX_EMULATOR_ADAPT": "0"}),
    "pool": ("tidlx", {"TIDLX_EMULATOR_PARALLEL": "pool"}),
    "threads1": ("tidlx", {"TIDLX_EMULATOR_THREADS": "1"}),
    "adapt": ("tidlx", {"TIDLX_EMULATOR_ADAPT": "1"}),
    "onnxruntime": ("onnxruntime", {}),
}
_KEYS = ("TIDLX_EMULATOR_PARALLEL", "TIDLX_EMULATOR_THREADS", "TIDLX_EMULATOR_ADAPT")


def run_mode(mode, model_path, feed_path, repeat):
    engine, env = MODES[mode]
    saved = {k: os.environ.pop(k, None) for k in _KEYS}
    os.environ.update(env)
    try:
        return run_child(engine, model_path, feed_path, repeat, WARMUP)["median_ms"]
    finally:
        for k in _KEYS:
            os.environ.pop(k, None)
            if saved[k] is not None:
                os.environ[k] = saved[k]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,mobilenet_v3_small,efficientnet_b0")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    print(f"load average before: {load()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            model = model_set.MODELS[name][0]()
            model_path, feed_path = save_model_and_feed(tmp, name, model, random_feed(model, seed=1))
            times = {(busy, m): [] for busy in (False, True) for m in modes}
            for round_ in range(args.rounds):
                order = modes if round_ % 2 == 0 else modes[::-1]
                for busy in ((False, True) if round_ % 2 == 0 else (True, False)):
                    for mode in order:
                        if busy:
                            with BusyLoop():
                                times[busy, mode].append(run_mode(mode, model_path, feed_path, args.repeat))
                        else:
                            times[busy, mode].append(run_mode(mode, model_path, feed_path, args.repeat))
            print(f"\n{model_set.MODELS[name][1]} (load {load()}); ms = median of {args.rounds} process medians "
                  f"[min-max]")
            print(f"{'mode':<12} {'idle ms':>22} {'busy ms':>22} {'slowdown':>9} {'idle/ort':>9} {'busy/ort':>9}")
            med = {k: statistics.median(v) for k, v in times.items()}
            ort = "onnxruntime" in modes
            for mode in modes:
                idle, busy = med[False, mode], med[True, mode]
                spread = lambda v: f"[{min(v):.1f}-{max(v):.1f}]"  # noqa: E731
                r_idle = f"{idle / med[False, 'onnxruntime']:.2f}x" if ort else "-"
                r_busy = f"{busy / med[True, 'onnxruntime']:.2f}x" if ort else "-"
                print(f"{mode:<12} {idle:8.1f} {spread(times[False, mode]):>13} {busy:8.1f} "
                      f"{spread(times[True, mode]):>13} {busy / idle:8.2f}x {r_idle:>9} {r_busy:>9}", flush=True)
    print(f"\nload average after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
