"""TIDL's quantization styles side by side: SQNR of ResNet-18 or BEVDet-R18 in fixed point at
``quantization_scale_type`` 0 (NP2, TIDL's default), 1 (power of 2) and 4 (asymmetric per-channel, TI's
tools' default on AM62A/AM67A/AM68A/AM69A).

    .venv/bin/python benchmarks/bench_styles.py [--model resnet18|bevdet_r18] [--calib N] [--iterations N]
        [--frames N] [--image S] [--batch B] [--height H --width W]

``model_set.resnet18`` (seeded weights, ``--image`` square) or ``tidlx.models.bevdet_img_stage("resnet18")``
(seeded weights, ``--batch`` cameras of ``--height`` x ``--width``, 256 x 704 by default; the TVM flow's
TIDL subgraphs hold its backbone, neck, depth net and the depth x context product) is calibrated on N
seeded standard-normal frames with TI's loop
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
    ap.add_argument("--model", choices=("resnet18", "bevdet_r18"), default="resnet18")
    ap.add_argument("--image", type=int, default=224, help="resnet18's square input")
    ap.add_argument("--batch", type=int, default=6, help="bevdet_r18's cameras")
    ap.add_argument("--height", type=int, default=256, help="bevdet_r18's image height")
    ap.add_argument("--width", type=int, default=704, help="bevdet_r18's image width")
    args = ap.parse_args()
    import onnx

    import tidlx

    path = os.path.join(tempfile.mkdtemp(), f"{args.model}.onnx")
    if args.model == "resnet18":
        from model_set import resnet18

        onnx.save(resnet18(args.image), path)
        shape = (3, args.image, args.image)
        args.batch = 1
        what = f"resnet18 {args.image}x{args.image}"
    else:
        from tidlx.models import bevdet_img_stage

        bevdet_img_stage("resnet18", batch=args.batch, height=args.height, width=args.width, path=path)
        shape = (3, args.height, args.width)
        what = f"BEVDet-R18 image stage, {args.batch} x 3 x {args.height} x {args.width}"
    mod = tidlx.load(path)
    name = mod["main"].params[0].name_hint
    rng = np.random.default_rng(11)
    # frames on the batch axis: a frame is ``batch`` images
    calib = {name: rng.standard_normal((args.calib * args.batch,) + shape).astype(np.float32)}
    held_out = {name: rng.standard_normal((args.frames * args.batch,) + shape).astype(np.float32)}
    print(f"{what} (seeded weights), {args.calib} calibration frames x {args.iterations} iterations, "
          f"{args.frames} held-out frames")
    print("| quantization_scale_type | output SQNR | worst layer | time |")
    print("|---|---|---|---|")
    for style in STYLES:
        options = {"advanced_options:quantization_scale_type": style,
                   "advanced_options:calibration_iterations": args.iterations,
                   "advanced_options:calibration_frames": args.calib}
        if args.batch > 1:
            options["max_batch_size"] = args.batch
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = tidlx.compare(mod, held_out, options, calib)
        seconds = time.perf_counter() - started
        worst = result.layers[0]
        sqnr = ", ".join(f"{o.name} {o.sqnr_db:.1f} dB" for o in result.outputs)
        print(f"| {style} | {sqnr} | '{worst.layer}' ({worst.type}) "
              f"{worst.sqnr_db:.1f} dB | {seconds:.0f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
