"""The whole calibration at TI's defaults: the float pass over ``calibration_frames`` frames, then
``calibration_iterations`` fixed-point iterations (docs/numerics.md §9, backends/tidl/calibration_loop.py).

    .venv/bin/python benchmarks/bench_calibration.py                       # both models, TI's 20 x 50
    .venv/bin/python benchmarks/bench_calibration.py --models resnet18 --rounds 3
    .venv/bin/python benchmarks/bench_calibration.py --models bevdet_r50 --iterations 2   # extrapolated

Models: ``resnet18`` (benchmarks/model_set.py, 224x224, batch 1) and ``bevdet_r50``
(``tidlx.models.bevdet_img_stage(backbone="resnet50", batch=6)``, 256x704, six cameras), seeded weights and
seeded frames, TI's default options (accuracy_level 1: ActRange, WeightRange, BiasCalib).

Each measurement runs in its own process (``--child``): import, partition and frames are not timed;
the float pass (``calibrate``, the fast float kernels) and the loop (``quantize_model``: every iteration's
quantization, its fixed-point runs and statistics, then the final quantization) are, and the loop's time
per iteration comes from its progress callback (the time between an iteration's last frame and the
previous one's, the quantization before it included). With ``--iterations`` below 50 the script also prints
the whole calibration at 50 iterations extrapolated from the measured ones: float pass + loop +
(50 - iterations) x the median iteration. A figure is the median over ``--rounds`` processes; the load
average before and after each round is printed (the machine may be shared).

Goals: ResNet-18 under 1 minute, BEVDet-R50 batch 6 under 30 minutes, at 20 frames x 50 iterations.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TI_FRAMES, TI_ITERATIONS = 20, 50
GOALS_S = {"resnet18": 60.0, "bevdet_r50": 30 * 60.0}


def build(model: str, folder: str):
    """(the partitioned module, the name of its input, the input's shape without the batch axis, batch)."""
    import onnx
    import tidlx

    sys.path.insert(0, HERE)
    if model == "resnet18":
        import model_set

        proto, batch = model_set.resnet18(), 1
    elif model == "bevdet_r50":
        proto, batch = tidlx.models.bevdet_img_stage(backbone="resnet50", batch=6), 6
    else:
        raise SystemExit(f"unknown model {model!r}: resnet18 or bevdet_r50")
    path = os.path.join(folder, f"{model}.onnx")
    onnx.save(proto, path)
    options = {"max_batch_size": batch} if batch > 1 else None
    partitioned, _ = tidlx.partition(tidlx.load(path), options)
    param = partitioned["main"].params[0]
    shape = tuple(int(d) for d in param.checked_type.shape)
    return partitioned, param.name_hint, shape, options


def child(model: str, frames: int, iterations: int) -> dict:
    """One measurement in this process: its JSON record."""
    from tidlx.backends.tidl.calibration import calibrate
    from tidlx.backends.tidl.flow import resolve_options
    from tidlx.backends.tidl.quantize import quantize_model

    with tempfile.TemporaryDirectory() as folder:
        partitioned, name, shape, extra = build(model, folder)
    options = dict(extra or {})
    options.update({"advanced_options:calibration_frames": frames,
                    "advanced_options:calibration_iterations": iterations})
    opts = resolve_options(options)[0]
    data = {name: np.random.default_rng(0).standard_normal((frames * shape[0],) + shape[1:]).astype(np.float32)}
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = calibrate(partitioned, opts, data, kernels="fast")
    float_s = time.perf_counter() - t0
    marks = []
    t1 = time.perf_counter()
    quantize_model(partitioned, opts, results, progress=lambda done, total: marks.append((done, time.perf_counter())))
    loop_s = time.perf_counter() - t1
    ends = [t1] + [t for done, t in marks if done % frames == 0]
    per_iteration = [b - a for a, b in zip(ends, ends[1:])]
    return {"model": model, "frames": frames, "iterations": iterations, "float_s": float_s, "loop_s": loop_s,
            "iteration_s": per_iteration, "load_before": load_before, "load_after": os.getloadavg()[0]}


def run_child(model: str, frames: int, iterations: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", model, "--frames", str(frames),
           "--iterations", str(iterations)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{model} process failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet18,bevdet_r50")
    parser.add_argument("--frames", type=int, default=TI_FRAMES)
    parser.add_argument("--iterations", type=int, default=0,
                        help=f"fixed-point iterations measured (default: {TI_ITERATIONS} for resnet18, 2 for "
                             f"bevdet_r50, whose whole run is extrapolated)")
    parser.add_argument("--rounds", type=int, default=0, help="processes per model (default 3 resnet18, 1 bevdet)")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.frames, args.iterations or TI_ITERATIONS)))
        return 0
    print(f"machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} at the start")
    for model in args.models.split(","):
        iterations = args.iterations or (TI_ITERATIONS if model == "resnet18" else 2)
        rounds = args.rounds or (3 if model == "resnet18" else 1)
        records = [run_child(model, args.frames, iterations) for _ in range(rounds)]
        float_s = statistics.median(r["float_s"] for r in records)
        loop_s = statistics.median(r["loop_s"] for r in records)
        iteration_s = statistics.median(t for r in records for t in r["iteration_s"])
        whole = float_s + loop_s + (TI_ITERATIONS - iterations) * iteration_s
        loads = ", ".join(f"{r['load_before']:.1f}-{r['load_after']:.1f}" for r in records)
        how = "measured" if iterations == TI_ITERATIONS else f"extrapolated from {iterations} iterations"
        print(f"{model}: {args.frames} frames x {iterations} iterations, {rounds} process(es), load {loads}")
        print(f"  float pass {float_s:.1f} s; loop {loop_s:.1f} s; one iteration {iteration_s:.2f} s "
              f"({iteration_s / args.frames * 1e3:.0f} ms a frame)")
        goal = GOALS_S[model]
        print(f"  whole calibration at {args.frames} x {TI_ITERATIONS}: {whole:.0f} s ({how}); goal < {goal:.0f} s: "
              f"{'met' if whole < goal else 'missed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
