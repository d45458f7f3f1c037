"""tidlx sweep: cells per minute on the local process pool and on Ray, and the overhead per cell
against calling tidlx.partition in a loop.

    .venv/bin/python benchmarks/bench_sweep.py [--rounds 3] [--jobs 2]

The study: 3 tiny built-in models (bn_between_gemms, BEVDet's image stage and TI's BEVDet export,
ResNet-18, batch 1) x 40 option sets (max_num_subgraphs 1..16 x deny_list x strategy x flow), measure
``partition``: 120 cells, each run from an empty cache. Engines, each in a process of its own, in
turn in every round:

* ``loop``: the models loaded once, ``tidlx.partition`` per cell in one process (what the sweep does
  without the sweep);
* ``pool j1`` / ``pool jN``: ``tidlx.sweep(jobs=...)`` on the local process pool;
* ``ray``: ``tidlx.sweep(ray="local")`` on a Ray this process started with N CPUs (the start is timed
  apart: it is paid once, when Ray starts).

Each engine's time runs from before the models are built to the table written (not the summary page,
whose matplotlib import and charts are paid once per study). The overhead per cell
is (engine seconds x its workers - loop seconds) / cells: the worker-seconds a cell costs beyond the
work itself (starting workers, shipping payloads, pickling rows, the cache, the table).
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

STUDY = """\
models:
  - {builtin: bn_between_gemms}
  - {builtin: bevdet_img_stage_tiny, args: {backbone: resnet18, batch: 1}, name: bevdet_tiny}
  - {builtin: bevdet_ti_export, args: {tiny: true, batch: 1}, name: bevdet_ti}
grid:
  max_num_subgraphs: [1, 2, 4, 8, 16]
  deny_list: ["", nn.batch_norm]
  strategy: [greedy, max-offload]
  flow: [tvm, ort]
measures: [partition]
"""

MODELS = [("bn_between_gemms", {}), ("bevdet_img_stage_tiny", {"backbone": "resnet18", "batch": 1}),
          ("bevdet_ti_export", {"tiny": True, "batch": 1})]


def _loop(study_path: str, out: str) -> dict:
    import warnings

    import tidlx
    from tidlx.studies import load_study

    study = load_study(study_path)
    t = time.perf_counter()
    cells = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, args in MODELS:
            path = os.path.join(out, name + ".onnx")
            with open(path, "wb") as f:
                f.write(getattr(tidlx.models, name)(**args).SerializeToString())
            mod = tidlx.load(path)
            for option_set in study.option_sets:
                _, report = tidlx.partition(mod, option_set.options, option_set.strategy)
                cells += 1
    return {"seconds": time.perf_counter() - t, "cells": cells, "workers": 1}


def _pool(study_path: str, out: str, jobs: int) -> dict:
    import tidlx

    t = time.perf_counter()
    result = tidlx.sweep(study_path, jobs=jobs, out=out, summary=False)
    assert result.failed == 0 and result.cached == 0
    return {"seconds": time.perf_counter() - t, "cells": result.cells, "workers": jobs}


def _ray(study_path: str, out: str, jobs: int) -> dict:
    import ray

    import tidlx

    t = time.perf_counter()
    ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    started = time.perf_counter() - t
    t = time.perf_counter()
    result = tidlx.sweep(study_path, ray="local", out=out, summary=False)
    seconds = time.perf_counter() - t
    ray.shutdown()
    assert result.failed == 0 and result.cached == 0
    return {"seconds": seconds, "cells": result.cells, "workers": jobs, "start": started}


def run_engine(engine: str, jobs: int) -> dict:
    """One engine in a fresh process (its own imports, pool and Ray)."""
    code = ("import json, sys; sys.path.insert(0, %r); import bench_sweep as b; "
            "print(json.dumps(b.engine_main(%r, %d)))" % (os.path.dirname(os.path.abspath(__file__)), engine, jobs))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise SystemExit(f"{engine} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def engine_main(engine: str, jobs: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        study = os.path.join(tmp, "study.yaml")
        with open(study, "w") as f:
            f.write(STUDY)
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        if engine == "loop":
            return _loop(study, out)
        if engine == "pool j1":
            return _pool(study, out, 1)
        if engine == "pool jN":
            return _pool(study, out, jobs)
        return _ray(study, out, jobs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2, help="workers of the pool and Ray's CPUs (default 2)")
    args = ap.parse_args()
    engines = ["loop", "pool j1", "pool jN", "ray"]
    runs = {e: [] for e in engines}
    for _ in range(args.rounds):
        for engine in engines:
            runs[engine].append(run_engine(engine, args.jobs))
    cells = runs["loop"][0]["cells"]
    loop = statistics.median(r["seconds"] for r in runs["loop"])
    print(f"study: {cells} partition cells (3 tiny built-in models x {cells // 3} option sets), "
          f"{args.rounds} rounds, medians; {os.cpu_count()} CPUs")
    for engine in engines:
        seconds = statistics.median(r["seconds"] for r in runs[engine])
        workers = runs[engine][0]["workers"]
        label = engine.replace("jN", f"j{args.jobs}") + (f" ({args.jobs} CPUs)" if engine == "ray" else "")
        line = f"{label:16s} {seconds:6.2f} s  {cells / seconds * 60:7.0f} cells/min"
        if engine != "loop":
            line += (f"  overhead {(seconds * workers - loop) / cells * 1000:6.1f} ms/cell"
                     f"  loop/engine {loop / seconds:4.2f}x")
        print(line)
    start = statistics.median(r["start"] for r in runs["ray"])
    print(f"ray.init (local, {args.jobs} CPUs, no dashboard): {start:.1f} s, paid once when Ray starts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
