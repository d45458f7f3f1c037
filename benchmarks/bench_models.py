"""The float emulator against onnxruntime on the benchmark model set (``make bench``).

For each model of ``model_set.MODELS`` (built in-repo with onnx.helper, seeded weights):

* tidlx ms (``tidlx.emulate``, fast kernels) and onnxruntime ms (CPU, 2 intra-op threads), each
  engine in its own processes (bench_float.py's ``--engine`` child runner), the two alternating
  over ``--rounds``; a figure is the median of the process medians; their ratio;
* the error of each engine against a float64 evaluation of the same model:
  ``onnx.reference.ReferenceEvaluator`` on a float64 copy (float initializers, Constant and
  Cast targets, inputs cast to double), as max abs error / max abs float64 output.

Then the median and max ratio over the set, the contention row (ResNet-18 timed alone and
beside one CPU-bound Python busy loop, alternating; an engine's slowdown = with / without) and
the overhead row (a chain of 1,000 small ops, Add and Relu alternating on a 1x8 tensor: time
per op). Goals are printed met or not met; the script exits 0 whenever it ran.

The machine may be shared: the load average is printed before and after, and absolute figures
move with it (the ratios less so).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_set  # noqa: E402
from bench_float import ORT_THREADS, WARMUP, blas_kernels_line, random_feed, run_child  # noqa: E402

ENGINES = ("tidlx", "onnxruntime")
QUICK_MODELS = ("resnet18", "mobilenet_v3_small", "shufflenet_v2")
CONTENTION_MODEL = "resnet18"
CHAIN_OPS = 1000

GOAL_MEDIAN_RATIO, GOAL_MAX_RATIO, GOAL_ERROR_RATIO, GOAL_SLOWDOWN_RATIO = 1.5, 3.0, 1.5, 2.0


# --- float64 reference ------------------------------------------------------------------------

# Inputs the ONNX spec keeps float32 whatever the data type (Resize's scales).
_FLOAT32_INPUTS = {("Resize", 2), ("Upsample", 1)}


def float64_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same model computing in double: float tensors (initializers, Constants, inputs,
    outputs) and Cast-to-float become double, except inputs the spec pins to float32."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    pinned = {node.input[i] for node in graph.node for (op, i) in _FLOAT32_INPUTS
              if node.op_type == op and len(node.input) > i}

    def to_double(tensor):
        return numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float64), tensor.name)

    for i, init in enumerate(graph.initializer):
        if init.data_type == TensorProto.FLOAT and init.name not in pinned:
            graph.initializer[i].CopyFrom(to_double(init))
    for node in graph.node:
        for attr in node.attribute:
            if node.op_type == "Constant" and attr.name == "value" and attr.t.data_type == TensorProto.FLOAT \
                    and node.output[0] not in pinned:
                attr.t.CopyFrom(to_double(attr.t))
            if node.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.FLOAT:
                attr.i = TensorProto.DOUBLE
    for value in list(graph.input) + list(graph.output):
        if value.type.tensor_type.elem_type == TensorProto.FLOAT:
            value.type.tensor_type.elem_type = TensorProto.DOUBLE
    del graph.value_info[:]
    return model


def float64_outputs(model: onnx.ModelProto, feed: dict) -> list:
    from onnx.reference import ReferenceEvaluator

    evaluator = ReferenceEvaluator(float64_copy(model))
    return evaluator.run(None, {k: v.astype(np.float64) for k, v in feed.items()})


def relative_error(outputs, reference) -> float:
    """Max abs error / max abs reference output, worst over the outputs."""
    return max(float(np.abs(np.asarray(o, np.float64) - r).max() / max(np.abs(r).max(), 1e-30))
               for o, r in zip(outputs, reference))


def _load_outputs(path: str) -> list:
    with np.load(path) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


# --- timing ---------------------------------------------------------------------------------

def time_alternating(model_path, feed_path, rounds, repeat, outputs_dir="", threads=0):
    """{engine: [process median ms]} over ``rounds`` processes per engine, the order alternating;
    round 0 saves each engine's outputs in ``outputs_dir`` when given."""
    medians = {engine: [] for engine in ENGINES}
    for round_ in range(rounds):
        order = ENGINES if round_ % 2 == 0 else ENGINES[::-1]
        for engine in order:
            save = os.path.join(outputs_dir, f"{engine}.npz") if outputs_dir and round_ == 0 else ""
            medians[engine].append(run_child(engine, model_path, feed_path, repeat, WARMUP, save, threads)["median_ms"])
    return medians


def save_model_and_feed(tmp, name, model, feed):
    model_path, feed_path = os.path.join(tmp, f"{name}.onnx"), os.path.join(tmp, f"{name}.npz")
    onnx.save(model, model_path)
    np.savez(feed_path, **feed)
    return model_path, feed_path


def measure_model(tmp, name, args) -> dict:
    build, title = model_set.MODELS[name]
    model = build()
    feed = random_feed(model, seed=1)
    model_path, feed_path = save_model_and_feed(tmp, name, model, feed)
    outputs_dir = os.path.join(tmp, name + "_out")
    os.makedirs(outputs_dir)
    medians = time_alternating(model_path, feed_path, args.rounds, args.repeat, outputs_dir, args.threads)
    row = {"name": name, "title": title, "tidlx_ms": statistics.median(medians["tidlx"]),
           "ort_ms": statistics.median(medians["onnxruntime"])}
    row["ratio"] = row["tidlx_ms"] / row["ort_ms"]
    outputs = {engine: _load_outputs(os.path.join(outputs_dir, f"{engine}.npz")) for engine in ENGINES}
    row["vs_ort"] = relative_error(outputs["tidlx"], [np.asarray(o, np.float64) for o in outputs["onnxruntime"]])
    if not args.skip_float64:
        reference = float64_outputs(model, feed)
        row["tidlx_err"] = relative_error(outputs["tidlx"], reference)
        row["ort_err"] = relative_error(outputs["onnxruntime"], reference)
    return row


class BusyLoop:
    """One CPU-bound competing process (a Python busy loop) for the contention row."""

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(0.3)  # let it reach the CPU before timing starts
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


def measure_contention(tmp, args) -> dict:
    model = model_set.MODELS[CONTENTION_MODEL][0]()
    model_path, feed_path = save_model_and_feed(tmp, "contention", model, random_feed(model, seed=1))
    alone = {engine: [] for engine in ENGINES}
    beside = {engine: [] for engine in ENGINES}
    for round_ in range(args.rounds):
        # Alternate alone / beside the busy loop, and the engine order, round by round.
        for busy in ((False, True) if round_ % 2 == 0 else (True, False)):
            order = ENGINES if round_ % 2 == 0 else ENGINES[::-1]
            for engine in order:
                if busy:
                    with BusyLoop():
                        beside[engine].append(run_child(engine, model_path, feed_path, args.repeat, WARMUP,
                                                           threads=args.threads)["median_ms"])
                else:
                    alone[engine].append(run_child(engine, model_path, feed_path, args.repeat, WARMUP,
                                                   threads=args.threads)["median_ms"])
    result = {}
    for engine in ENGINES:
        a, b = statistics.median(alone[engine]), statistics.median(beside[engine])
        result[engine] = (a, b, b / a)
    return result


def op_chain(ops: int = CHAIN_OPS) -> onnx.ModelProto:
    """Add (a constant) and Relu alternating on a 1x8 tensor, ``ops`` nodes in all."""
    nodes, x = [], "input"
    bias = numpy_helper.from_array(np.full((1, 8), 0.01, np.float32), "bias")
    for i in range(ops):
        out = f"t{i}"
        nodes.append(helper.make_node("Add", [x, "bias"], [out], name=out) if i % 2 == 0
                     else helper.make_node("Relu", [x], [out], name=out))
        x = out
    graph = helper.make_graph(nodes, "op_chain", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 8])], [bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def measure_overhead(tmp, args) -> dict:
    model = op_chain()
    model_path, feed_path = save_model_and_feed(tmp, "chain", model, random_feed(model, seed=1))
    medians = time_alternating(model_path, feed_path, args.rounds, args.repeat * 4, threads=args.threads)
    return {engine: statistics.median(medians[engine]) * 1e3 / CHAIN_OPS for engine in ENGINES}


# --- the report -----------------------------------------------------------------------------

def _goal(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def print_table(rows, args) -> list:
    missed = []
    print(f"{'model':<30}{'tidlx ms':>10}{'ort ms':>9}{'ratio':>8}{'tidlx err':>11}{'ort err':>10}"
          f"{'err ratio':>11}{'tidlx vs ort':>14}")
    for row in rows:
        errs = ""
        if "tidlx_err" in row:
            err_ratio = row["tidlx_err"] / max(row["ort_err"], 1e-30)
            errs = f"{row['tidlx_err']:>11.2e}{row['ort_err']:>10.2e}{err_ratio:>10.2f}x"
            if err_ratio > GOAL_ERROR_RATIO:
                missed.append(f"{row['name']}: error vs float64 {err_ratio:.2f}x onnxruntime's "
                              f"(goal <= {GOAL_ERROR_RATIO}x)")
        else:
            errs = f"{'-':>11}{'-':>10}{'-':>11}"
        print(f"{row['title']:<30}{row['tidlx_ms']:>10.1f}{row['ort_ms']:>9.1f}{row['ratio']:>7.2f}x{errs}"
              f"{row['vs_ort']:>14.1e}")
        if row["ratio"] > GOAL_MAX_RATIO:
            missed.append(f"{row['name']}: {row['ratio']:.2f}x onnxruntime (goal: no model above {GOAL_MAX_RATIO}x)")
    ratios = [row["ratio"] for row in rows]
    median, worst = statistics.median(ratios), max(rows, key=lambda r: r["ratio"])
    print(f"ratio over {len(rows)} models: median {median:.2f}x (goal <= {GOAL_MEDIAN_RATIO}x: "
          f"{_goal(median <= GOAL_MEDIAN_RATIO)}), max {worst['ratio']:.2f}x on {worst['name']} "
          f"(goal <= {GOAL_MAX_RATIO}x: {_goal(worst['ratio'] <= GOAL_MAX_RATIO)})")
    if median > GOAL_MEDIAN_RATIO:
        missed.insert(0, f"median ratio {median:.2f}x (goal <= {GOAL_MEDIAN_RATIO}x)")
    print("err: max abs error / max abs output against onnx.reference.ReferenceEvaluator on a float64 copy of "
          "the model; err ratio: tidlx's / onnxruntime's (goal <= 1.5x); tidlx vs ort: the same measure between "
          "the two float32 engines")
    return missed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{', '.join(QUICK_MODELS)} only, 1 round of 3 runs")
    parser.add_argument("--models", default="", help="comma-separated names from model_set.MODELS")
    parser.add_argument("--rounds", type=int, default=3, help="processes per engine and model (alternating)")
    parser.add_argument("--repeat", type=int, default=10,
                        help="timed runs per process (10: on a noisy VM a median of 5 moved with one slow run)")
    parser.add_argument("--skip-float64", action="store_true", help="skip the float64 reference (errors)")
    parser.add_argument("--skip-contention", action="store_true")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--threads", type=int, default=0,
                        help=f"both engines at this many threads (the per-core comparison: --threads 1); "
                             f"default: tidlx one per CPU, onnxruntime {ORT_THREADS}, as the goals are set")
    args = parser.parse_args(argv)
    if args.threads < 0 or args.rounds < 1 or args.repeat < 1:
        parser.error("--threads must be >= 0, --rounds and --repeat >= 1")
    names = list(model_set.MODELS)
    if args.quick:
        names, args.rounds, args.repeat = list(QUICK_MODELS), 1, 3
    if args.models:
        names = [n.strip() for n in args.models.split(",") if n.strip()]
        unknown = [n for n in names if n not in model_set.MODELS]
        if unknown:
            parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(model_set.MODELS)}")

    threads = (f"both engines capped at {args.threads} thread(s) (the goals are set for the default: tidlx one "
               f"per CPU, onnxruntime {ORT_THREADS})" if args.threads else
               f"onnxruntime CPU with {ORT_THREADS} intra-op threads")
    start, load_before = time.perf_counter(), os.getloadavg()
    print("Float emulator vs onnxruntime on the benchmark set (benchmarks/model_set.py, batch 1)")
    print(f"machine: {os.cpu_count()} cores, load average {load_before[0]:.2f} / {load_before[1]:.2f} / "
          f"{load_before[2]:.2f} (1/5/15 min) at start")
    print(blas_kernels_line())
    print(f"each engine in its own process: {args.rounds} tidlx and {args.rounds} onnxruntime processes per model, "
          f"alternating, {args.repeat} timed runs each after {WARMUP} warm-up runs; ms = median of the process "
          f"medians; {threads}")
    missed, rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            try:
                rows.append(measure_model(tmp, name, args))
            except Exception as exc:  # a model that fails to build, import or run is a finding, not a crash
                missed.append(f"{name}: did not run ({type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200]})")
        if rows:
            missed += print_table(rows, args)
        if not args.skip_contention:
            result = measure_contention(tmp, args)
            (ta, tb, ts), (oa, ob, os_) = result["tidlx"], result["onnxruntime"]
            ok = ts <= GOAL_SLOWDOWN_RATIO * os_
            print(f"contention ({model_set.MODELS[CONTENTION_MODEL][1]}, beside one Python busy loop; alone / beside "
                  f"alternating): tidlx {ta:.1f} -> {tb:.1f} ms ({ts:.2f}x), onnxruntime {oa:.1f} -> {ob:.1f} ms "
                  f"({os_:.2f}x); tidlx's slowdown is {ts / os_:.2f}x onnxruntime's (goal <= "
                  f"{GOAL_SLOWDOWN_RATIO}x: {_goal(ok)})")
            if not ok:
                missed.append(f"contention: tidlx slows {ts:.2f}x, onnxruntime {os_:.2f}x (goal: <= "
                              f"{GOAL_SLOWDOWN_RATIO}x onnxruntime's slowdown)")
        if not args.skip_overhead:
            per_op = measure_overhead(tmp, args)
            print(f"overhead (a chain of {CHAIN_OPS} ops, Add and Relu alternating on 1x8): tidlx "
                  f"{per_op['tidlx']:.1f} us/op, onnxruntime {per_op['onnxruntime']:.1f} us/op "
                  f"({per_op['tidlx'] / per_op['onnxruntime']:.1f}x)")
    load_after = os.getloadavg()
    print(f"load average {load_after[0]:.2f} / {load_after[1]:.2f} / {load_after[2]:.2f} at the end; "
          f"{time.perf_counter() - start:.0f} s in all")
    if missed:
        print("goals not met:")
        for line in missed:
            print(f"  - {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
