"""A prequantized (QDQ) ResNet-18 compiled with ``advanced_options:prequantized_model=1``.

    .venv/bin/python benchmarks/bench_prequantized.py [--calib N] [--frames N] [--image S]

``model_set.resnet18`` (seeded weights) is quantized with onnxruntime's ``quantize_static``: QDQ format,
symmetric int8 activations, per-channel symmetric int8 weights, calibrated on N seeded uniform [-1, 1)
frames. tidlx imports the QDQ model as TIDL's prequantized import does (docs/prequantized.md) and runs
it in fixed point (NP2 and P2 scales, and style 4) on held-out frames; the same model quantized with
asymmetric uint8 activations (``ActivationSymmetric=False``) runs in style 4 (``quantization_scale_type``
4, whose zero points hold the pairs'); printed: the share of output elements within
one QDQ step (the output pair's scale) of onnxruntime's run of the QDQ model, the largest difference in
steps, and the SQNR against that run; for context the same share for the float model the QDQ model
was made from. Figures, not timings: the same arguments give the same numbers.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calib", type=int, default=16)
    ap.add_argument("--frames", type=int, default=4)
    ap.add_argument("--image", type=int, default=224)
    args = ap.parse_args()
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    from onnxruntime import quantization as q

    import tidlx
    from model_set import resnet18

    shape = (1, 3, args.image, args.image)
    rng = np.random.default_rng(7)
    calib = rng.uniform(-1, 1, (args.calib,) + shape[1:]).astype(np.float32)
    held_out = rng.uniform(-1, 1, (args.frames,) + shape[1:]).astype(np.float32)
    tmp = tempfile.mkdtemp()
    fpath, qpath = os.path.join(tmp, "resnet18.onnx"), os.path.join(tmp, "resnet18_qdq.onnx")
    onnx.save(resnet18(args.image), fpath)
    name = onnx.load(fpath).graph.input[0].name

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{name: f[None]} for f in calib])

        def get_next(self):
            return next(self.it, None)

    q.quantize_static(fpath, qpath, Reader(), quant_format=q.QuantFormat.QDQ, activation_type=q.QuantType.QInt8,
                      weight_type=q.QuantType.QInt8, per_channel=True,
                      extra_options={"ActivationSymmetric": True, "WeightSymmetric": True})
    apath = os.path.join(tmp, "resnet18_qdq_asym.onnx")
    q.quantize_static(fpath, apath, Reader(), quant_format=q.QuantFormat.QDQ, activation_type=q.QuantType.QUInt8,
                      weight_type=q.QuantType.QInt8, per_channel=True,
                      extra_options={"ActivationSymmetric": False, "WeightSymmetric": True})
    # the same model with every scale rounded up to a power of 2 (as TI's P2 QAT configurations export),
    # the weights' and biases' integers re-rounded on their new scales
    p2path = os.path.join(tmp, "resnet18_qdq_p2.onnx")
    p2 = onnx.load(qpath)
    by_name = {t.name: t for t in p2.graph.initializer}
    old_scales = {n.input[1]: numpy_helper.to_array(by_name[n.input[1]]) for n in p2.graph.node
                  if n.op_type in ("QuantizeLinear", "DequantizeLinear")}
    for scale_name, old in old_scales.items():
        by_name[scale_name].CopyFrom(numpy_helper.from_array((2.0 ** np.ceil(np.log2(old))).astype(np.float32),
                                                             scale_name))
    for n in p2.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in by_name:
            qv = numpy_helper.to_array(by_name[n.input[0]])
            old, new = old_scales[n.input[1]], numpy_helper.to_array(by_name[n.input[1]])
            shape = (-1,) + (1,) * (qv.ndim - 1) if old.size > 1 else ()
            limit = np.iinfo(qv.dtype).max
            requant = np.clip(np.rint(qv * (old.reshape(shape) / new.reshape(shape))), -limit, limit)
            by_name[n.input[0]].CopyFrom(numpy_helper.from_array(requant.astype(qv.dtype), n.input[0]))
    onnx.save(p2, p2path)
    for label, path, scale_types in (("symmetric int8 activations, QDQ scales as calibrated", qpath, (0, 1, 4)),
                                     ("symmetric int8 activations, QDQ scales rounded up to powers of 2", p2path,
                                      (1,)),
                                     ("asymmetric uint8 activations", apath, (4,))):
        _measure(label, path, fpath, args.image, scale_types, name, calib, held_out)
    return 0


def _measure(label, qpath, fpath, image, scale_types, name, calib, held_out) -> None:
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    import tidlx

    model = onnx.load(qpath)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    made_by = {n.output[0]: n for n in model.graph.node}
    out_dq = made_by[model.graph.output[0].name]
    step = float(inits[out_dq.input[1]])
    session = ort.InferenceSession(qpath, providers=["CPUExecutionProvider"])
    refs = [session.run(None, {name: f[None]})[0] for f in held_out]
    print(f"resnet18 {image}x{image}, QDQ by quantize_static (per-channel symmetric int8 weights), {label}; "
          f"{len(held_out)} held-out frames; output step {step:.6g}")
    # context: the float model onnxruntime quantized, against the QDQ model's run (activation rounding only)
    float_session = ort.InferenceSession(fpath, providers=["CPUExecutionProvider"])
    ferr = np.concatenate([np.abs(float_session.run(None, {name: f[None]})[0].astype(np.float64) - ref).ravel()
                           for f, ref in zip(held_out, refs)])
    print(f"the float model (no quantization): {100 * float(np.mean(ferr <= step * (1 + 1e-6))):.1f}% within one "
          f"QDQ step of the QDQ run; largest {ferr.max() / step:.2f} steps")
    for scale_type in scale_types:
        mod = tidlx.load(qpath, prequantized=True)
        opts = {"advanced_options:prequantized_model": 1, "accuracy_level": 0,
                "advanced_options:quantization_scale_type": scale_type}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            qm = tidlx.quantize(mod, opts, {name: calib[:2]})
        errs, sig, noise = [], 0.0, 0.0
        for f, ref in zip(held_out, refs):
            out = qm.run({name: f[None]})[0].astype(np.float64)
            err = np.abs(out - ref)
            errs.append(err.ravel())
            sig += float(np.sum(ref.astype(np.float64) ** 2))
            noise += float(np.sum(err ** 2))
        err = np.concatenate(errs)
        share = float(np.mean(err <= step * (1 + 1e-6)))
        sqnr = 10 * math.log10(sig / noise) if noise else float("inf")
        print(f"quantization_scale_type={scale_type}: {100 * share:.1f}% of {err.size} outputs within one QDQ step "
              f"of onnxruntime's QDQ run; largest {err.max() / step:.2f} steps; SQNR {sqnr:.1f} dB")


if __name__ == "__main__":
    sys.exit(main())
