"""Where the float emulator's time goes, per kind of step, at 1 and at 2 threads.

Not part of ``make bench`` (its name does not match bench_*.py). For each model of
``model_set`` (default MobileNetV2 and MobileNetV3-small) it times every step of the compiled
plan (``emulator.plan_of``; a fused step counts under its head op: 1x1, kxk or depthwise
convolution, else the op's name) in one process, the two configs alternating run by run
(``threads=1`` and ``threads=2, adapt=False``), and prints ms per run and the speedup of each
kind. Timing every step adds ~1 us per step; the load average is printed before and after.

    .venv/bin/python benchmarks/profile_ops.py --models mobilenet_v3_small --runs 20
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_set  # noqa: E402
from bench_float import random_feed  # noqa: E402
from bench_models import save_model_and_feed  # noqa: E402


def step_kind(step) -> str:
    """'conv 1x1', 'conv 3x3', 'depthwise 5x5', or the op's name, for an OP or fused step."""
    payload, node = step[3], step[6]
    head = getattr(payload, "head_node", node)
    op = getattr(head, "op", None)
    if op is None:
        return "other"
    if op.name != "nn.conv2d":
        return op.name
    kh, kw = (int(d) for d in head.args[1].checked_type.shape[2:])
    depthwise = int(head.attrs.groups) > 1 and int(head.args[1].checked_type.shape[1]) == 1
    return f"{'depthwise' if depthwise else 'conv'} {kh}x{kw}"


class _Current:
    """The totals of the config being run: ``add(kind, seconds)``."""

    def __init__(self, totals):
        self.totals, self.label = totals, None

    def add(self, kind, seconds):
        self.totals[self.label][kind] += seconds


class _Timed:
    """A fused step's payload whose run is timed into ``current``."""

    def __init__(self, payload, kind, current):
        self.payload, self.kind, self.current = payload, kind, current

    def __getattr__(self, name):
        return getattr(self.payload, name)

    def run(self, plan, values, stats):
        start = time.perf_counter()
        try:
            return self.payload.run(plan, values, stats)
        finally:
            self.current.add(self.kind, time.perf_counter() - start)


def _timed_kernel(kernel, kind, current):
    def timed(args, attrs, out_type):
        start = time.perf_counter()
        try:
            return kernel(args, attrs, out_type)
        finally:
            current.add(kind, time.perf_counter() - start)
    return timed


def profile(name: str, runs: int) -> None:
    import tidlx
    from tidlx.emulator import EmulatorConfig, run
    from tidlx.emulator.interpreter import CUSTOM, OP, plan_of

    model = model_set.MODELS[name][0]()
    feed = random_feed(model, 0)
    with tempfile.TemporaryDirectory() as tmp:
        model_path, _ = save_model_and_feed(tmp, name, model, feed)
        mod = tidlx.load(model_path)
    configs = {"1 thread": EmulatorConfig(threads=1), "2 threads": EmulatorConfig(threads=2, adapt=False)}
    totals = {label: defaultdict(float) for label in configs}
    wall = defaultdict(float)
    current = _Current(totals)
    plans = {}  # the configs may share one plan (threads are no part of a plan's variant)
    for config in configs.values():
        plan = plan_of(mod, config=config)
        if id(plan) in plans:
            continue
        steps = []
        for step in plan.steps:
            kind = step_kind(step)
            if step[0] == OP:
                payload = (_timed_kernel(step[3][0], kind, current),) + tuple(step[3][1:])
                step = step[:3] + (payload,) + step[4:]
            elif step[0] == CUSTOM:
                step = step[:3] + (_Timed(step[3], kind, current),) + step[4:]
            steps.append(step)
        plans[id(plan)] = (plan, plan.steps, steps)
    try:
        for plan, _, timed in plans.values():
            plan.steps = timed
        for label, config in configs.items():  # warm-up (numba cache, memory)
            current.label = label
            for _ in range(3):
                run(mod, feed, config=config)
        for t in totals.values():
            t.clear()
        for _ in range(runs):
            for label, config in configs.items():
                current.label = label
                start = time.perf_counter()
                run(mod, feed, config=config)
                wall[label] += time.perf_counter() - start
    finally:
        for plan, original, _ in plans.values():
            plan.steps = original
    one, two = totals["1 thread"], totals["2 threads"]
    print(f"\n{name}: ms per run (sum over steps), {runs} runs per config, alternating")
    print(f"{'step kind':<24}{'1 thread':>10}{'2 threads':>11}{'speedup':>9}")
    for kind in sorted(one, key=lambda k: -one[k]):
        a, b = one[kind] * 1e3 / runs, two[kind] * 1e3 / runs
        print(f"{kind:<24}{a:>10.3f}{b:>11.3f}{a / b if b else float('nan'):>8.2f}x")
    a, b = wall["1 thread"] * 1e3 / runs, wall["2 threads"] * 1e3 / runs
    print(f"{'whole run (wall)':<24}{a:>10.3f}{b:>11.3f}{a / b:>8.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet_v2,mobilenet_v3_small")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at start")
    for name in args.models.split(","):
        profile(name, args.runs)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
