"""The fast set's global average pool (emulator/fast/_sums.py) against the reference kernel (numpy's mean).

Not part of ``make bench`` (its name does not match bench_*.py). The pool shapes are those met by
one run of EfficientNet-B0 and MobileNetV3-small (benchmarks/model_set.py, 224x224); each is timed
inside one run context at 1 thread and at 2 (the kernel calls alone, the two kernels alternating
call by call), then each model's whole run (``emulator.run``, fast set) with and without the fast
pool (the module loaded twice; the fast set's ``nn.global_avg_pool2d`` facet is removed around the
runs of one of them), alternating run by run; medians, ratios, the load average before and after.
One process.

    .venv/bin/python benchmarks/ab_global_pool.py --runs 30
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from contextlib import contextmanager

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_set  # noqa: E402
from ab_alternate import ab  # noqa: E402
from bench_float import random_feed  # noqa: E402
from bench_models import save_model_and_feed  # noqa: E402

OP = "nn.global_avg_pool2d"
MODELS = (("efficientnet_b0", "EfficientNet-B0"), ("mobilenet_v3_small", "MobileNetV3-small"))


@contextmanager
def facet(value):
    """The fast set's kernel of the global average pool set to ``value`` (None: the reference's)."""
    from tidlx.emulator.registry import FAST
    from tidlx.ir import get_op

    op = get_op(OP)
    saved = op.get_attr(FAST)
    op.set_attr(FAST, value, replace=True)
    try:
        yield
    finally:
        op.set_attr(FAST, saved, replace=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--skip-models", action="store_true", help="only the pool shapes")
    args = parser.parse_args()

    import tidlx
    from tidlx.emulator import EmulatorConfig, run
    from tidlx.emulator.fast import _parallel
    from tidlx.emulator.registry import FAST, REFERENCE
    from tidlx.ir import get_op

    op = get_op(OP)
    fast, reference = op.get_attr(FAST), op.get_attr(REFERENCE)
    attrs = op.make_attrs({})
    print(f"load average {os.getloadavg()[0]:.2f} at start; {args.runs} runs per variant, alternating, medians")

    from tidlx.emulator.registry import Kernel
    from tidlx.ir import TensorType

    modules, shapes = {}, []

    def recording(args_, attrs_, out_type):
        shapes.append(args_[0].shape)
        return reference(args_, attrs_, out_type)

    with tempfile.TemporaryDirectory() as tmp:
        for name, _ in MODELS:
            model = model_set.MODELS[name][0]()
            feed = random_feed(model, 0)
            model_path, _ = save_model_and_feed(tmp, name, model, feed)
            modules[name] = (tidlx.load(model_path), tidlx.load(model_path), feed)
            with facet(Kernel(recording)):  # the shapes of one run (a module of its own: its plan records)
                run(tidlx.load(model_path), feed, config=EmulatorConfig())
    count = {}
    for shape in shapes:
        count[shape] = count.get(shape, 0) + 1

    print(f"{'per call, ms':<44}{'numpy':>10}{'fast':>10}{'ratio':>9}")
    for threads in (1, 2):
        config = EmulatorConfig(threads=threads, adapt=False)
        for shape in sorted(count, key=lambda s: -int(np.prod(s))):
            x = np.random.default_rng(0).normal(0, 3, shape).astype(np.float32)
            out_type = TensorType(shape[:2] + (1, 1), "float32")

            def timed(kernel, x=x, out_type=out_type):
                return lambda: kernel([x], attrs, out_type)

            with _parallel.run_context(config):
                ab(f"threads={threads} {shape} x{count[shape]}", {"numpy": timed(reference), "fast": timed(fast)},
                   args.runs)
    if args.skip_models:
        return
    print(f"{'whole run, ms':<44}{'without':>10}{'with':>10}{'ratio':>9}")
    for config_label, config in (("default config", EmulatorConfig()), ("threads=1", EmulatorConfig(threads=1)),
                                 ("threads=2", EmulatorConfig(threads=2, adapt=False))):
        for name, label in MODELS:
            with_fast, without, feed = modules[name]

            def run_without(mod=without, feed=feed, config=config):
                with facet(None):  # the plan made (and any remade) without the fast pool
                    run(mod, feed, config=config)

            ab(f"{label}, {config_label}", {"without": run_without,
                                             "with": lambda mod=with_fast, feed=feed, config=config:
                                             run(mod, feed, config=config)}, args.runs)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
