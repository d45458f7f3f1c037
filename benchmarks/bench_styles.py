"""TIDL's quantization styles side by side: SQNR of ResNet-18 in fixed point at ``quantization_scale_type``
0 (NP2, TIDL's default), 1 (power of 2) and 4 (asymmetric per-channel, TI's tools' default on AM62A/AM67A/
AM68A/AM69A).

    .venv/bin/python benchmarks/bench_styles.py [--calib N] [--iterations N] [--frames N] [--image S]

``model_set.resnet18`` (seeded weights) is calibrated on N seeded standard-normal frames with TI's loop
(``calibration_iterations``; style 4 runs bias calibration only, as TI maps it) and compared with
``tidlx.compare`` on held-out frames drawn from the same distribution. Printed per style: the output's SQNR,
the worst layer and the wall time of calibration plus comparison. Figures, not timings: the same arguments
give the same SQNR; the times are one run each.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

STYLES = (0, 1, 4)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calib", type=int, default=20, help="calibration frames (TI's default 20)")
    ap.add_argument("--iterations", type=int, default=10, help="calibration_iterations")
    ap.add_argument("--frames", type=int, default=8, help="held-out frames compared")
    ap.add_argument("--image", type=int, default=224)
    args = ap.parse_args()
    import onnx

    import tidlx
    from model_set import resnet18

    path = os.path.join(tempfile.mkdtemp(), "resnet18.onnx")
    onnx.save(resnet18(args.image), path)
    mod = tidlx.load(path)
    name = mod["main"].params[0].name_hint
    rng = np.random.default_rng(11)
    shape = (3, args.image, args.image)
    calib = {name: rng.standard_normal((args.calib,) + shape).astype(np.float32)}
    held_out = {name: rng.standard_normal((args.frames,) + shape).astype(np.float32)}
    print(f"resnet18 {args.image}x{args.image} (seeded weights), {args.calib} calibration frames x "
          f"{args.iterations} iterations, {args.frames} held-out frames")
    print("| quantization_scale_type | output SQNR | worst layer | time |")
    print("|---|---|---|---|")
    for style in STYLES:
        options = {"advanced_options:quantization_scale_type": style,
                   "advanced_options:calibration_iterations": args.iterations}
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = tidlx.compare(mod, held_out, options, calib)
        seconds = time.perf_counter() - started
        worst = result.layers[0]
        print(f"| {style} | {result.outputs[0].sqnr_db:.1f} dB | '{worst.layer}' ({worst.type}) "
              f"{worst.sqnr_db:.1f} dB | {seconds:.0f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
