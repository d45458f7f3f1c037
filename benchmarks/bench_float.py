"""Float emulator speed on a ResNet-18-shaped model and BEVDet's image stage at batch 1 (``make bench``).

Builds ResNet-18 (conv/batch-norm/relu, max pool, 8 basic blocks, global pool, dense) as ONNX
with random weights (fixed seed), and ``tidlx.models.bevdet_img_stage(backbone="resnet18",
batch=1)`` (256x704, one camera; skip with ``--skip-bevdet``), and times on each:

* the tidlx float emulator (``tidlx.load`` of the ONNX file, then ``tidlx.emulate``),
* onnxruntime on the CPU with 2 intra-op threads,
* onnx.reference.ReferenceEvaluator.

Each engine runs in its own process (``bench_float.py --engine tidlx|onnxruntime|reference
--model M.onnx --feed F.npz``, which prints one JSON line): timed in the emulator's process,
onnxruntime is slowed by what ran before it (62 ms right after the emulator against 17 ms in its
own process, ResNet-18, in one run here), so same-process ratios say little. The emulator and
onnxruntime processes alternate (``--rounds``, 5 each by default; each process times
``--repeat`` runs after warm-up); a figure is the median of the processes' medians.

Goals: emulator <= 1.5x onnxruntime and max abs error <= 1e-4 x max abs output against onnxruntime.
The speed against the ONNX reference evaluator is no goal (it measures the evaluator's Python
loops, not tidlx); its ratio is printed for information.

The reference evaluator spends ~80-90% of its time in MaxPool, a Python loop over output
positions (cProfile: 1.8 of 2.0 s on ResNet-18, 6.3 of 7.9 s on BEVDet here), so its speed
against onnxruntime follows the host's Python speed; the table prints that ratio too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
from typing import Sequence
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ENGINES = ("tidlx", "onnxruntime", "reference")
ORT_THREADS = 2
WARMUP = 2  # runs before timing in each process (the emulator's first run builds plans, loads numba's cache)

STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))  # (channels, stride of the first block)


class Weights:
    """Deterministic random weights (fixed seed)."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def conv(self, name, out_c, in_c, k):
        fan_in = in_c * k * k
        w = self.rng.normal(0, np.sqrt(2.0 / fan_in), (out_c, in_c, k, k)).astype(np.float32)
        return w

    def bn(self, name, c):
        vals = (self.rng.uniform(0.5, 1.5, c), self.rng.uniform(-0.2, 0.2, c),
                self.rng.uniform(-0.2, 0.2, c), self.rng.uniform(0.5, 2.0, c))
        vals = tuple(v.astype(np.float32) for v in vals)
        return vals

    def dense(self, name, out_f, in_f):
        w = self.rng.normal(0, np.sqrt(1.0 / in_f), (out_f, in_f)).astype(np.float32)
        b = self.rng.uniform(-0.1, 0.1, out_f).astype(np.float32)
        return w, b


def resnet18_layers():
    """The layer list: ('conv', name, in, out, k, stride, pad) / ('block', name, in, out, stride)."""
    layers = [("stem", "conv1", 3, 64, 7, 2, 3)]
    in_c = 64
    for stage, (c, stride) in enumerate(STAGES, start=1):
        for block in range(2):
            layers.append(("block", f"layer{stage}.{block}", in_c, c, stride if block == 0 else 1))
            in_c = c
    return layers


def build_onnx(weights: Weights, image: int = 224, classes: int = 1000) -> onnx.ModelProto:
    nodes, inits = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def conv_bn(x, name, in_c, out_c, k, stride, pad, relu=True):
        w = init(f"{name}.weight", weights.conv(name, out_c, in_c, k))
        nodes.append(helper.make_node("Conv", [x, w], [f"{name}.conv"], name=name, kernel_shape=[k, k],
                                      strides=[stride, stride], pads=[pad] * 4))
        g, b, m, v = weights.bn(name + ".bn", out_c)
        bn_in = [f"{name}.conv"] + [init(f"{name}.bn.{p}", a) for p, a in zip(("g", "b", "m", "v"), (g, b, m, v))]
        nodes.append(helper.make_node("BatchNormalization", bn_in, [f"{name}.bn"], name=name + ".bn", epsilon=1e-5))
        if not relu:
            return f"{name}.bn"
        nodes.append(helper.make_node("Relu", [f"{name}.bn"], [f"{name}.relu"], name=name + ".relu"))
        return f"{name}.relu"

    x = conv_bn("input", "conv1", 3, 64, 7, 2, 3)
    nodes.append(helper.make_node("MaxPool", [x], ["maxpool"], name="maxpool", kernel_shape=[3, 3], strides=[2, 2],
                                  pads=[1, 1, 1, 1]))
    x = "maxpool"
    for kind, name, in_c, out_c, stride in resnet18_layers()[1:]:
        y = conv_bn(x, name + ".conv1", in_c, out_c, 3, stride, 1)
        y = conv_bn(y, name + ".conv2", out_c, out_c, 3, 1, 1, relu=False)
        short = x
        if stride != 1 or in_c != out_c:
            short = conv_bn(x, name + ".downsample", in_c, out_c, 1, stride, 0, relu=False)
        nodes.append(helper.make_node("Add", [y, short], [name + ".add"], name=name + ".add"))
        nodes.append(helper.make_node("Relu", [name + ".add"], [name + ".out"], name=name + ".out"))
        x = name + ".out"
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool"], name="avgpool"))
    nodes.append(helper.make_node("Flatten", ["pool"], ["flat"], name="flatten"))
    w, b = weights.dense("fc", classes, 512)
    nodes.append(helper.make_node("Gemm", ["flat", init("fc.weight", w), init("fc.bias", b)], ["logits"], name="fc",
                                  transB=1))
    graph = helper.make_graph(nodes, "resnet18", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                                [1, 3, image, image])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


# --- one engine in this process (--engine) --------------------------------------------------

def _load_feed(path: str) -> dict:
    with np.load(path) as data:
        return {name: data[name] for name in data.files}


def blas_kernels_line() -> str:
    """Which OpenBLAS kernels the emulator's products run on in this environment (the children
    inherit it): AVX-512 ones are ~1.7x faster than AVX2 ones, and OPENBLAS_CORETYPE overrides
    OpenBLAS's own choice."""
    from tidlx.emulator.fast import _blas

    line = f"tidlx's matrix products: numpy's OpenBLAS, {_blas.KERNELS or 'unknown'} kernels"
    forced = os.environ.get("OPENBLAS_CORETYPE")
    if forced:
        line += (f" (forced by OPENBLAS_CORETYPE={forced} in the environment; `make bench` runs without it "
                 "and OPENBLAS_L2_SIZE, so OpenBLAS picks by CPU)")
    return line


def _make_runner(engine: str, model_path: str, feed: dict, threads: int = 0):
    """(run(), load ms): a zero-argument call that runs the model once on ``feed``; ``threads`` > 0 caps
    the engine's threads (tidlx's ``TIDLX_EMULATOR_THREADS``, onnxruntime's intra-op threads), 0 leaves
    tidlx at one thread per CPU and onnxruntime at ``ORT_THREADS``."""
    t0 = time.perf_counter()
    if engine == "tidlx":
        if threads:
            os.environ["TIDLX_EMULATOR_THREADS"] = str(threads)  # read as each run starts
        import tidlx

        mod = tidlx.load(model_path)
        run = lambda: tidlx.emulate(mod, feed)  # noqa: E731
    elif engine == "onnxruntime":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or ORT_THREADS
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
        run = lambda: session.run(None, feed)  # noqa: E731
    elif engine == "reference":
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(onnx.load(model_path))
        run = lambda: evaluator.run(None, feed)  # noqa: E731
    else:
        raise ValueError(f"unknown engine {engine!r} (expected one of {', '.join(ENGINES)})")
    return run, (time.perf_counter() - t0) * 1e3


def time_engine(engine: str, model_path: str, feed_path: str, repeat: int, warmup: int,
                outputs_path: str = "", threads: int = 0) -> dict:
    """Times ``repeat`` runs of one engine after ``warmup`` runs; what the child process prints."""
    feed = _load_feed(feed_path)
    run, load_ms = _make_runner(engine, model_path, feed, threads)
    return time_runner(engine, model_path, run, load_ms, repeat, warmup, outputs_path)


def time_runner(engine: str, model_path: str, run, load_ms: float, repeat: int, warmup: int,
                outputs_path: str = "") -> dict:
    """The first run timed apart (its outputs saved to ``outputs_path``), ``warmup - 1`` more, then
    ``repeat`` timed runs of ``run()``: the child process's JSON record."""
    t0 = time.perf_counter()
    outputs = run()
    first_ms = (time.perf_counter() - t0) * 1e3
    if outputs_path:
        np.savez(outputs_path, *[np.asarray(o) for o in outputs])
    for _ in range(warmup - 1):
        run()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        run()
        times.append((time.perf_counter() - t) * 1e3)
    return {"engine": engine, "model": os.path.basename(model_path), "load_ms": load_ms, "first_ms": first_ms,
            "times_ms": times, "median_ms": statistics.median(times)}


# --- the comparison (default): one process per engine run ------------------------------------

def run_child(engine: str, model_path: str, feed_path: str, repeat: int, warmup: int, outputs_path: str = "",
              threads: int = 0, script: str = __file__, extra: Sequence[str] = ()) -> dict:
    """One engine in a new process of ``script`` (this one, or another benchmark with the same ``--engine``
    child arguments), ``extra`` arguments appended; its JSON line."""
    cmd = [sys.executable, os.path.abspath(script), "--engine", engine, "--model", model_path, "--feed", feed_path,
           "--repeat", str(repeat), "--warmup", str(warmup), "--threads", str(threads)]
    if outputs_path:
        cmd += ["--save-outputs", outputs_path]
    cmd += list(extra)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{engine} process failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])  # the JSON line is last; anything before it is the engine's own chatter


def _spread(values) -> str:
    return f"{min(values):.1f}-{max(values):.1f}"


def compare(title: str, model: onnx.ModelProto, feed: dict, args) -> bool:
    """Times the engines on one model, each in its own processes, and prints the table; True when
    the emulator's outputs are within the error bar."""
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        model_path, feed_path = os.path.join(tmp, "model.onnx"), os.path.join(tmp, "feed.npz")
        onnx.save(model, model_path)
        np.savez(feed_path, **feed)
        out_paths = {e: os.path.join(tmp, f"{e}_outputs.npz") for e in ENGINES}
        results = {"tidlx": [], "onnxruntime": []}
        for round_ in range(args.rounds):
            # Alternate which engine goes first, so neither always runs on a machine just woken up.
            order = ("tidlx", "onnxruntime") if round_ % 2 == 0 else ("onnxruntime", "tidlx")
            for engine in order:
                results[engine].append(run_child(engine, model_path, feed_path, args.repeat, WARMUP,
                                                 out_paths[engine] if round_ == 0 else ""))
        reference = None
        if not args.skip_reference:
            reference = run_child("reference", model_path, feed_path, args.reference_repeat, 0)
        ours = list(_load_feed(out_paths["tidlx"]).values())
        refs = list(_load_feed(out_paths["onnxruntime"]).values())
    rel_err = max(float(np.abs(o - r).max() / max(np.abs(r).max(), 1e-30)) for o, r in zip(ours, refs))

    emu = [r["median_ms"] for r in results["tidlx"]]
    ort_ = [r["median_ms"] for r in results["onnxruntime"]]
    emu_ms, ort_ms = statistics.median(emu), statistics.median(ort_)
    ratio = emu_ms / ort_ms
    round_ratios = [e / o for e, o in zip(emu, ort_)]
    print(title)
    # Other processes on the machine change these figures a lot (here the emulator's more than onnxruntime's).
    print(f"machine load (1-minute average) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after on "
          f"{os.cpu_count()} cores")
    print(blas_kernels_line())
    print(f"each engine in its own process: {args.rounds} emulator and {args.rounds} onnxruntime processes, "
          f"alternating, {args.repeat} timed runs each after {WARMUP} warm-up runs; figures are medians of the "
          f"process medians")
    print(f"tidlx.load {statistics.median(r['load_ms'] for r in results['tidlx']):.0f} ms; first emulator run in a "
          f"new process (plans, numba cache load) {statistics.median(r['first_ms'] for r in results['tidlx']):.0f} ms")
    print(f"{'engine':<34}{'median ms':>11}{'process medians':>18}{'emulator is':>16}")
    print(f"{'tidlx emulator (float32)':<34}{emu_ms:>11.1f}{_spread(emu):>18}")
    print(f"{f'onnxruntime CPU, {ORT_THREADS} threads':<34}{ort_ms:>11.1f}{_spread(ort_):>18}{ratio:>14.2f}x"
          f"  (goal <= 1.5x: {'met' if ratio <= 1.5 else 'not met'}; per round {min(round_ratios):.2f}-"
          f"{max(round_ratios):.2f}x)")
    if reference is not None:
        ref_ms = reference["median_ms"]
        faster = ref_ms / emu_ms
        runs = f"1 process, {args.reference_repeat} runs"
        print(f"{'onnx.reference.ReferenceEvaluator':<34}{ref_ms:>11.1f}{runs:>18}{faster:>13.1f}x faster "
              f"(for information; the goal is the ratio to onnxruntime)")
        print(f"onnxruntime is {ref_ms / ort_ms:.0f}x faster than the ReferenceEvaluator here")
    print(f"max abs error vs onnxruntime: {rel_err:.2e} x max abs output (goal <= 1e-4)")
    print()
    return rel_err <= 1e-4


def random_feed(model: onnx.ModelProto, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    feed = {}
    for value in model.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        feed[value.name] = rng.uniform(-1, 1, shape).astype(np.float32)
    return feed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", type=int, default=224)
    parser.add_argument("--rounds", type=int, default=5, help="processes per engine (emulator, onnxruntime)")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs per process")
    parser.add_argument("--reference-repeat", type=int, default=3, help="ReferenceEvaluator runs (median)")
    parser.add_argument("--skip-reference", action="store_true", help="skip the (slow) ONNX reference evaluator")
    parser.add_argument("--skip-bevdet", action="store_true", help="only the ResNet-18 model")
    child = parser.add_argument_group("one engine in this process (what the comparison spawns)")
    child.add_argument("--engine", choices=ENGINES)
    child.add_argument("--model", help="the ONNX file")
    child.add_argument("--feed", help="the inputs, an .npz by input name")
    child.add_argument("--warmup", type=int, default=WARMUP)
    child.add_argument("--save-outputs", default="", help="write the first run's outputs to this .npz")
    child.add_argument("--threads", type=int, default=0,
                       help=f"cap the engine's threads (0: tidlx one per CPU, onnxruntime {ORT_THREADS})")
    args = parser.parse_args(argv)

    if args.engine:
        if not (args.model and args.feed):
            parser.error("--engine needs --model and --feed")
        if args.warmup < 0 or args.repeat < 1 or args.threads < 0:
            parser.error("--warmup must be >= 0, --threads must be >= 0 and --repeat >= 1")
        print(json.dumps(time_engine(args.engine, args.model, args.feed, args.repeat, args.warmup,
                                     args.save_outputs, args.threads)))
        return 0
    if args.rounds < 1 or args.repeat < 1:
        parser.error("--rounds and --repeat must be >= 1")

    model = build_onnx(Weights(seed=0), args.image)
    ok = compare(f"ResNet-18 shaped model, batch 1, {args.image}x{args.image}", model, random_feed(model, 1), args)
    if not args.skip_bevdet:
        from tidlx.models import bevdet_img_stage

        model = bevdet_img_stage(backbone="resnet18", batch=1)
        ok &= compare("BEVDet image stage (tidlx.models.bevdet_img_stage(backbone='resnet18', batch=1): "
                      "256x704, 1 camera)", model, random_feed(model, 2), args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
