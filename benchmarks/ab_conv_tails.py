"""Convolution tails fused into the convolution's own loops (emulator/fast/_prepared.py: a 1x1
convolution's tail per product block, ``_pointwise_with_tail``; a depthwise one's per output plane,
``_depthwise_with_tail``) against the convolution, then one pass of the tail over the whole result.

Not part of ``make bench`` (its name does not match bench_*.py). For each model of ``model_set``
(default MobileNetV2, ResNet-50, ShuffleNetV2) the model is loaded twice in one process: once as
the fast set plans it ("fused"), once with the forms named by ``--forms`` turned off while its plan
is compiled ("one pass"); then runs of the two alternate, at each thread count given (default one and
two; at one thread a 1x1 convolution runs the product, then the pass, either way), and the medians and their ratio are
printed. The same bits either way (checked on the first run of each).

    .venv/bin/python benchmarks/ab_conv_tails.py --models mobilenet_v2 --forms depthwise --threads 2 --runs 40
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_set  # noqa: E402
from bench_float import random_feed  # noqa: E402
from bench_models import save_model_and_feed  # noqa: E402


FORMS = {"pointwise": "_pointwise_with_tail", "depthwise": "_depthwise_with_tail"}


def measure(name: str, runs: int, thread_counts, forms) -> None:
    import tidlx
    from tidlx.emulator import EmulatorConfig, run
    from tidlx.emulator.fast import _prepared
    from tidlx.emulator.interpreter import plan_of

    model = model_set.MODELS[name][0]()
    feed = random_feed(model, 0)
    with tempfile.TemporaryDirectory() as tmp:
        path, _ = save_model_and_feed(tmp, name, model, feed)
        fused, one_pass = tidlx.load(path), tidlx.load(path)
    for threads in thread_counts:
        config = EmulatorConfig(threads=threads, adapt=False)
        plan_of(fused, config=config)
        originals = {form: getattr(_prepared, FORMS[form]) for form in forms}
        for form in forms:
            setattr(_prepared, FORMS[form], lambda *args: None)
        try:
            plan_of(one_pass, config=config)
        finally:
            for form, fn in originals.items():
                setattr(_prepared, FORMS[form], fn)
        first = [run(m, feed, config=config)[0] for m in (fused, one_pass)]
        same = first[0].tobytes() == first[1].tobytes()
        times = {"fused": [], "one pass": []}
        for _ in range(3):
            run(fused, feed, config=config)
            run(one_pass, feed, config=config)
        for _ in range(runs):
            for label, mod in (("fused", fused), ("one pass", one_pass)):
                start = time.perf_counter()
                run(mod, feed, config=config)
                times[label].append(time.perf_counter() - start)
        a, b = (float(np.median(t)) * 1e3 for t in times.values())
        print(f"{name:<22}{threads} thread(s) {a:>10.2f}{b:>10.2f}{a / b:>9.3f}   {'same bits' if same else 'BITS DIFFER'}",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet_v2,resnet50,shufflenet_v2")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--forms", default="pointwise,depthwise", help=f"fused forms to turn off for 'one pass': "
                        f"comma-separated, of {', '.join(FORMS)}")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at start")
    forms = [f.strip() for f in args.forms.split(",") if f.strip()]
    if not forms or any(f not in FORMS for f in forms):
        parser.error(f"--forms takes {', '.join(FORMS)}")
    print(f"{'model':<22}{'config':<12}{'fused':>10}{'one pass':>10}{'ratio':>9}   (ms, medians; off: {', '.join(forms)})")
    for name in args.models.split(","):
        measure(name.strip(), args.runs, [int(t) for t in args.threads.split(",")], forms)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
