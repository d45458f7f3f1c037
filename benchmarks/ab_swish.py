"""The fast set's float32 sigmoid / swish and squeeze-excite scale (emulator/fast/_exp.py) against numpy.

Not part of ``make bench`` (its name does not match bench_*.py). "numpy" is what the fast set did
before: ``1 / (1 + exp(-x))`` and the multiply as numpy's ufuncs, one pass each, and the
(1, C, H, W) * (1, C, 1, 1) scale as numpy's broadcasting multiply, on the calling thread (put in
place of _exp.py's loops for the A runs); "one pass" is the numba loops in blocks over the run's
threads. Each swish and scale shape of EfficientNet-B0 is timed inside a run context, then the
whole model (``emulator.run``, fast set), the two variants alternating run by run; medians,
ratios, the load average before and after. One process.

    .venv/bin/python benchmarks/ab_swish.py --runs 30
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from contextlib import contextmanager

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_set  # noqa: E402
from bench_float import random_feed  # noqa: E402
from bench_models import save_model_and_feed  # noqa: E402

#: the swish shapes of EfficientNet-B0 at 224x224 (its squeeze-excite gates are (1, C, 1, 1))
SHAPES = [(1, 32, 112, 112), (1, 96, 112, 112), (1, 144, 56, 56), (1, 240, 28, 28), (1, 480, 14, 14),
          (1, 672, 14, 14), (1, 1152, 7, 7), (1, 20, 1, 1)]
#: ... and the inputs of its squeeze-excite scales (times (1, C, 1, 1))
SCALE_SHAPES = [(1, 32, 112, 112), (1, 96, 56, 56), (1, 144, 56, 56), (1, 144, 28, 28), (1, 240, 28, 28),
                (1, 240, 14, 14), (1, 480, 14, 14), (1, 672, 14, 14), (1, 672, 7, 7), (1, 1152, 7, 7)]


def _numpy_sigmoid(x, out):
    one = np.float32(1)
    with np.errstate(over="ignore"):
        np.exp(np.negative(x, out=out), out=out)
    np.add(one, out, out=out)
    np.divide(one, out, out=out)


def _numpy_swish(x, out):
    _numpy_sigmoid(x, out)
    np.multiply(x, out, out=out)


_NUMPY_LOOPS = {  # the same signatures as _exp.py's loops, numpy's chain on one thread
    "sigmoid_flat": lambda x, out, start, stop: _numpy_sigmoid(x[start:stop], out[start:stop]),
    "sigmoid_flat_blocks": lambda x, out, count, blocks: _numpy_sigmoid(x, out),
    "swish_flat": lambda x, out, start, stop: _numpy_swish(x[start:stop], out[start:stop]),
    "swish_flat_blocks": lambda x, out, count, blocks: _numpy_swish(x, out),
    "scale_planes": lambda x, scale, out, inner, start, stop: np.multiply(
        x[start * inner:stop * inner].reshape(-1, inner), scale[start:stop, None],
        out=out[start * inner:stop * inner].reshape(-1, inner)),
    "scale_planes_blocks": lambda x, scale, out, inner, count, blocks: np.multiply(
        x.reshape(-1, inner), scale[:, None], out=out.reshape(-1, inner)),
}


@contextmanager
def numpy_chain():
    from tidlx.emulator.fast import _exp

    saved = {name: getattr(_exp, name) for name in _NUMPY_LOOPS}
    for name, fn in _NUMPY_LOOPS.items():
        setattr(_exp, name, fn)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(_exp, name, fn)


def _variant(name):
    return numpy_chain() if name == "numpy" else _nothing()


@contextmanager
def _nothing():
    yield


def ab(label, fn, runs):
    """Median ms of fn() under each variant, alternating."""
    times = {"numpy": [], "one pass": []}
    for name in times:  # warm-up
        with _variant(name):
            fn()
    for _ in range(runs):
        for name in times:
            with _variant(name):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    a, b = (float(np.median(times[n])) * 1e3 for n in times)
    print(f"{label:<34}{a:>10.3f}{b:>10.3f}{a / b:>8.2f}x")
    return a, b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()

    import tidlx
    from tidlx.emulator import EmulatorConfig, run
    from tidlx.emulator.fast import _activations, _parallel

    print(f"load average {os.getloadavg()[0]:.2f} at start; {args.runs} runs per variant, alternating, medians")
    print(f"{'':<34}{'numpy ms':>10}{'one pass':>10}{'ratio':>9}")
    config = EmulatorConfig(adapt=False)
    for shape in SHAPES:
        x = np.random.default_rng(0).normal(0, 3, shape).astype(np.float32)
        act = _activations.Activation("swish", (True,), None, ("sigmoid", "multiply"))

        def swish():
            with _parallel.run_context(config):
                _activations._apply(act, x)

        ab(f"swish {shape}", swish, args.runs)
    from tidlx.emulator.fast.op_elemwise import multiply
    from tidlx.ir import TensorType

    for shape in SCALE_SHAPES:
        x = np.random.default_rng(0).normal(0, 3, shape).astype(np.float32)
        factors = np.random.default_rng(1).random(shape[:2] + (1, 1)).astype(np.float32)
        out_type = TensorType(shape, "float32")

        def scale():
            with _parallel.run_context(config):
                multiply([x, factors], None, out_type)

        ab(f"scale {shape}", scale, args.runs)

    model = model_set.MODELS["efficientnet_b0"][0]()
    feed = random_feed(model, 0)
    with tempfile.TemporaryDirectory() as tmp:
        model_path, _ = save_model_and_feed(tmp, "efficientnet_b0", model, feed)
        mod = tidlx.load(model_path)
    for label, cfg in (("EfficientNet-B0, default config", EmulatorConfig()),
                       ("EfficientNet-B0, threads=1", EmulatorConfig(threads=1))):
        ab(label, lambda: run(mod, feed, config=cfg), args.runs)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
