"""The depthwise convolution's vector kernel against the plain numba loop (emulator/fast/op_conv.py).

Not part of ``make bench`` (its name does not match bench_*.py). The depthwise shapes are those met
by one run of MobileNetV2, MobileNetV3-small, EfficientNet-B0 and ShuffleNetV2 (benchmarks/model_set.py;
recorded from op_conv._conv_depthwise); each is timed inside one run context at 1 thread and at 2,
the two alternating call by call; then each model's whole run (``emulator.run``, fast set) with the
loop and with the kernel (op_conv.DEPTHWISE_VECTOR_KERNEL switched around the runs), alternating run
by run; medians, ratios (loop / kernel), the load average before and after. One process.
``--flat``: the vector kernel's row route against its flat route instead (op_conv.DEPTHWISE_FLAT_POSITIONS
0 against its default: small stride-1 planes on _jit.depthwise_conv_flat).

    .venv/bin/python benchmarks/ab_depthwise.py --runs 30
    .venv/bin/python benchmarks/ab_depthwise.py --runs 30 --flat
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

MODELS = (("mobilenet_v2", "MobileNetV2"), ("mobilenet_v3_small", "MobileNetV3-small"),
          ("efficientnet_b0", "EfficientNet-B0"), ("shufflenet_v2", "ShuffleNetV2"))


@contextmanager
def vector_kernel(on: bool, flat: bool = False):
    """The B variant (``on``) or the A one: the vector kernel or the plain loop; with ``flat``, the
    vector kernel with or without its flat route."""
    from tidlx.emulator.fast import op_conv

    saved = op_conv.DEPTHWISE_VECTOR_KERNEL, op_conv.DEPTHWISE_FLAT_POSITIONS
    if flat:
        op_conv.DEPTHWISE_FLAT_POSITIONS = saved[1] if on else 0
    else:
        op_conv.DEPTHWISE_VECTOR_KERNEL = on
    try:
        yield
    finally:
        op_conv.DEPTHWISE_VECTOR_KERNEL, op_conv.DEPTHWISE_FLAT_POSITIONS = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--skip-models", action="store_true", help="only the depthwise shapes")
    parser.add_argument("--skip-shapes", action="store_true", help="only the whole models")
    parser.add_argument("--flat", action="store_true", help="the row route against the flat route")
    parser.add_argument("--models", default=",".join(name for name, _ in MODELS),
                        help="comma-separated model_set names (default: all four)")
    args = parser.parse_args()
    wanted = [m for m in args.models.split(",") if m]
    unknown = [m for m in wanted if m not in dict(MODELS)]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(name for name, _ in MODELS)}")
    models = [(name, label) for name, label in MODELS if name in wanted]

    import tidlx
    from tidlx.emulator import EmulatorConfig, run
    from tidlx.emulator.fast import _parallel, op_conv

    print(f"load average {os.getloadavg()[0]:.2f} at start; {args.runs} runs per variant, alternating, medians")
    a_name, b_name = ("rows", "flat") if args.flat else ("loop", "kernel")
    modules, calls = {}, {}
    conv = op_conv._conv_depthwise

    def recording(x, w, strides, dilation, pads, out_hw, work):
        key = (tuple(x.shape), tuple(w.shape), tuple(strides), tuple(dilation), tuple(pads), tuple(out_hw))
        calls[key] = calls.get(key, 0) + 1
        return conv(x, w, strides, dilation, pads, out_hw, work)

    with tempfile.TemporaryDirectory() as tmp:
        for name, _ in models:
            model = model_set.MODELS[name][0]()
            feed = random_feed(model, 0)
            model_path, _ = save_model_and_feed(tmp, name, model, feed)
            modules[name] = (tidlx.load(model_path), feed)
            op_conv._conv_depthwise = recording
            try:  # the shapes of one run (a module of its own: its plan records)
                run(tidlx.load(model_path), feed, config=EmulatorConfig())
            finally:
                op_conv._conv_depthwise = conv

    if not args.skip_shapes:
        print(f"{'per call, ms (input, kernel, stride)':<60}{a_name:>10}{b_name:>10}{'ratio':>9}")
        totals = {}
        for threads in (1, 2):
            config = EmulatorConfig(threads=threads, adapt=False)
            for key in sorted(calls, key=lambda k: -int(np.prod(k[5]) * k[1][0] * k[1][2] * k[1][3])):
                x_shape, w_shape, strides, dilation, pads, out_hw = key
                rng = np.random.default_rng(0)
                x = rng.normal(0, 1, x_shape).astype(np.float32)
                w = rng.normal(0, 1, w_shape).astype(np.float32)

                def timed(on, x=x, w=w, strides=strides, dilation=dilation, pads=pads, out_hw=out_hw):
                    def call():
                        with vector_kernel(on, args.flat):
                            conv(x, w, strides, dilation, pads, out_hw, np.float32)
                    return call

                with _parallel.run_context(config):
                    a, b = ab(f"threads={threads} {x_shape} {w_shape[2]}x{w_shape[3]} s{strides[0]} x{calls[key]}",
                              {a_name: timed(False), b_name: timed(True)}, args.runs)
                total = totals.setdefault(threads, [0.0, 0.0])
                total[0] += a * calls[key]
                total[1] += b * calls[key]
        for threads, (a, b) in totals.items():
            print(f"{f'threads={threads}, all calls of the runs':<60}{a:>10.4f}{b:>10.4f}{a / b:>8.2f}x")
    if args.skip_models:
        return
    print(f"{'whole run, ms':<60}{a_name:>10}{b_name:>10}{'ratio':>9}")
    for config_label, config in (("threads=1", EmulatorConfig(threads=1)),
                                 ("threads=2", EmulatorConfig(threads=2, adapt=False))):
        for name, label in models:
            mod, feed = modules[name]

            def whole(on, mod=mod, feed=feed, config=config):
                def call():
                    with vector_kernel(on, args.flat):
                        run(mod, feed, config=config)
                return call

            ab(f"{label}, {config_label}", {a_name: whole(False), b_name: whole(True)}, args.runs)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
