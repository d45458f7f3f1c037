"""Fixed-point emulator speed: ResNet-18 (batch 1, 224x224) quantized by tidlx against onnxruntime's int8
QDQ model of the same network, each engine in its own processes (``make bench``).

The network is bench_float.py's ResNet-18 (``build_onnx``, random weights, fixed seed). This process
builds it once and makes both quantized models from the same seeded calibration frames:

* tidlx: ``tidlx.compile_model(mod, folder, options={"tensor_bits": 8}, calib={"input": frames})``, a
  compiled folder; ``tidlx.load_compiled(folder).run(feed)`` runs it (the TIDL subgraph in fixed
  point on the fast kernels, VNNI convolutions where the CPU has them; the host part in the float
  emulator). Its outputs are the bits of ``tidlx.emulate(tidlx.quantize(...), feed)`` at the same
  speed, and loading the folder takes a fraction of a second where quantizing takes seconds.
* onnxruntime: ``quant_pre_process`` (its graph optimizations fold the batch norms into the
  convolutions), then ``quantize_static`` in the form onnxruntime runs fast on x86: QuantFormat.QDQ,
  activations QuantType.QUInt8, weights QuantType.QInt8 per channel, MinMax calibration.

Each engine runs in its own process (``bench_fixed.py --engine tidlx|onnxruntime --model M --feed
F.npz --threads N``: load, ``--warmup`` runs, ``--repeat`` timed runs, one JSON line), as in
bench_float.py: in one process an engine is slowed by what ran before it. For each thread count
(2 and 1: tidlx's ``TIDLX_EMULATOR_THREADS``, onnxruntime's ``intra_op_num_threads``) ``--rounds``
processes per engine run, alternating which engine goes first; a figure is the median of the
process medians.

Printed: the machine (CPU model, CPUs) and OpenBLAS's kernels; per thread count each engine's
latency and GOPS (2 x MACs / time, MACs of the compiled subgraph's layers), the ratio tidlx /
onnxruntime and the goal (tidlx 8-bit <= 2x onnxruntime int8: "met" or "MISSED"; a missed goal is
printed, not an error: the script exits 0 whenever it runs), and the split of tidlx's time into the
TIDL subgraph calls (data convert in and out included) and the rest (host part, interpreter). Then
the 16-bit model's latency (its own compiled folder and processes, 2 threads; not with ``--quick``)
and this machine's int8 VNNI peak, measured in this process: the VNNI tile microkernel
(emulator/fixed/_vnni.py) called in a loop on operands that stay in L1, one thread, times the cores
the runs use; a register-only ``vpdpbusd`` loop is printed next to it.

``--profile`` adds one process per engine and thread count that times each layer (tidlx: every
layer kernel call; onnxruntime: its session profiler) and prints the medians by kind of layer,
side by side. ``--quick``: 2 calibration frames, 2 rounds of 3 runs, no 16-bit model.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_float  # noqa: E402  (same folder; benchmarks is not a package)
from bench_float import (ORT_THREADS, WARMUP, Weights, _load_feed, _make_runner, _spread,  # noqa: E402
                         blas_kernels_line, build_onnx)  # (same folder; benchmarks is not a package)

ENGINES = ("tidlx", "onnxruntime")
THREAD_COUNTS = (2, 1)
GOAL_RATIO = 2.0
ORT_FORM = "QDQ, activations QUInt8, weights QInt8 per channel"


def frames(count: int, seed: int, image: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, 3, image, image)).astype(np.float32)


def machine_line() -> str:
    """The CPU model (/proc/cpuinfo), the CPUs this process may use, and whether the CPU has VNNI."""
    model, flags = "", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not model:
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    model = model or platform.processor() or platform.machine()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    vnni = [f for f in ("avx512_vnni", "avx_vnni") if f in flags]
    return f"machine: {model}, {cpus} CPUs ({os.cpu_count()} online); {', '.join(vnni) or 'no VNNI'} in its flags"


# --- quantized models (this process) ----------------------------------------------------------

def compile_tidlx(model_path: str, calib: np.ndarray, folder: str, tensor_bits: int) -> float:
    """Writes the compiled folder of ``tensor_bits``; returns the seconds it took."""
    import tidlx

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # fewer frames than the calibration_frames option asks for
        tidlx.compile_model(tidlx.load(model_path), folder, options={"tensor_bits": tensor_bits},
                            calib={"input": calib})
    return time.perf_counter() - t0


def ort_quantized(model_path: str, calib: np.ndarray, out_path: str) -> float:
    """onnxruntime's int8 model (``ORT_FORM``) calibrated on ``calib``; returns the seconds it took.
    The model is first pre-processed as onnxruntime's quantization guide asks (``quant_pre_process``:
    onnxruntime's graph optimizations, which fold each batch norm into its convolution, and ONNX
    shape inference; the symbolic shape inference, for dynamic shapes, is skipped). Quantized without
    it, the batch norms stay float operators between their own dequantize and quantize nodes."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Frames(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{"input": calib[i:i + 1]} for i in range(len(calib))])

        def get_next(self):
            return next(self.items, None)

    t0 = time.perf_counter()
    prepared = out_path + ".prepared.onnx"
    quant_pre_process(model_path, prepared, skip_symbolic_shape=True)   # symbolic: for dynamic shapes, needs sympy
    quantize_static(prepared, out_path, Frames(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)
    return time.perf_counter() - t0


# --- one engine in this process (--engine) ----------------------------------------------------

class _SubgraphClock:
    """Seconds spent in the compiled model's TIDL subgraph calls (wraps the name artifact_runtime's
    subgraph step calls)."""

    def __init__(self):
        from tidlx.emulator.fixed import artifact_runtime

        self.module, self.inner, self.seconds = artifact_runtime, artifact_runtime.run_subgraph_on_cores, 0.0

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return self.inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        self.module.run_subgraph_on_cores = timed


def _tidlx_runner(folder: str, feed: dict, threads: int):
    """(run(), load ms, facts): the compiled folder's run on ``feed`` with at most ``threads`` threads."""
    if threads:
        os.environ["TIDLX_EMULATOR_THREADS"] = str(threads)  # read as each run starts
    t0 = time.perf_counter()
    import tidlx

    compiled = tidlx.load_compiled(folder)
    load_ms = (time.perf_counter() - t0) * 1e3
    from tidlx.emulator.fixed import _vnni, fast_kernels

    convs = sum(1 for s in compiled.quantized_subgraphs().values() for layer in s.compute_layers()
                if layer.type == "Conv")
    facts = {"vnni_available": bool(_vnni.AVAILABLE), "convs": convs, "vnni_convs": 0}
    inner = fast_kernels._conv_vnni

    def counted(*args, **kwargs):
        facts["vnni_convs"] += 1
        return inner(*args, **kwargs)

    def first():   # the first run counts the convolutions on the VNNI microkernel
        fast_kernels._conv_vnni = counted
        try:
            return compiled.run(feed)
        finally:
            fast_kernels._conv_vnni = inner
            facts["macs"] = sum(c.macs for w in compiled.last_work for c in w.cores)
            facts["host"] = compiled.last_host

    return (lambda: compiled.run(feed)), first, load_ms, facts


def time_engine(engine: str, model_path: str, feed_path: str, repeat: int, warmup: int,
                outputs_path: str = "", threads: int = 0) -> dict:
    """Loads one engine's model, runs it ``warmup`` times (the first run timed apart), then times
    ``repeat`` runs; what the child process prints."""
    feed = _load_feed(feed_path)
    facts: dict = {}
    if engine == "tidlx":
        run, first, load_ms, facts = _tidlx_runner(model_path, feed, threads)
    elif engine == "onnxruntime":
        run, load_ms = _make_runner("onnxruntime", model_path, feed, threads)
        first = run
    else:
        raise ValueError(f"unknown engine {engine!r} (expected one of {', '.join(ENGINES)})")
    t0 = time.perf_counter()
    outputs = first()
    first_ms = (time.perf_counter() - t0) * 1e3
    if outputs_path:
        np.savez(outputs_path, *[np.asarray(o) for o in outputs])
    for _ in range(warmup - 1):
        run()
    clock = _SubgraphClock() if engine == "tidlx" else None
    times, subgraph = [], []
    for _ in range(repeat):
        if clock is not None:
            clock.seconds = 0.0
        t = time.perf_counter()
        run()
        times.append((time.perf_counter() - t) * 1e3)
        if clock is not None:
            subgraph.append(clock.seconds * 1e3)
    result = {"engine": engine, "model": os.path.basename(model_path.rstrip(os.sep)), "threads": threads,
              "load_ms": load_ms, "first_ms": first_ms, "times_ms": times, "median_ms": statistics.median(times)}
    if subgraph:
        result["subgraph_ms"] = statistics.median(subgraph)
    result.update(facts)
    return result


def run_child(engine: str, model_path: str, feed_path: str, repeat: int, warmup: int, threads: int,
              outputs_path: str = "", profile: bool = False) -> dict:
    """One engine in a new process of this script; its JSON line (bench_float's runner)."""
    return bench_float.run_child(engine, model_path, feed_path, repeat, warmup, outputs_path, threads, script=__file__,
                                 extra=("--profile",) if profile else ())


# --- where the time goes (--profile) ----------------------------------------------------------

def _pair_text(v) -> str:
    t = (int(v),) * 2 if np.isscalar(v) else tuple(int(e) for e in v)
    return f"{t[0]}x{t[1]}" if len(t) == 2 else "x".join(map(str, t))


def layer_kind(layer) -> str:
    """'Conv 3x3 s1', 'Pool Max 3x3 s2', 'Pool Avg global', or the layer type."""
    a = layer.attrs
    if layer.type == "Conv":
        return f"Conv {_pair_text(layer.weights.shape[2:])} s{_pair_text(a['strides']).split('x')[0]}"
    if layer.type == "Pool":
        if a.get("global_pool"):
            return f"Pool {a.get('pool_type')} global"
        return f"Pool {a.get('pool_type')} {_pair_text(a['kernel'])} s{_pair_text(a['strides']).split('x')[0]}"
    return layer.type


def profile_engine(engine: str, model_path: str, feed_path: str, repeat: int, warmup: int, threads: int) -> dict:
    """Per-layer times of one engine, each layer's median over ``repeat`` runs after ``warmup``: tidlx
    times every layer kernel call of the compiled subgraph (and each subgraph call), onnxruntime
    profiles its session (``enable_profiling``; a node's name is its ONNX node's, with a
    ``_token_N`` suffix where onnxruntime rewrote it). Wall times are medians of runs without
    profiling."""
    feed = _load_feed(feed_path)
    per: dict = {}
    walls = []
    result: dict = {"engine": engine, "threads": threads}
    if engine == "tidlx":
        run, _first, _load_ms, _facts = _tidlx_runner(model_path, feed, threads)
        from tidlx.emulator.fixed import artifact_runtime

        for _ in range(max(1, warmup)):
            run()
        walls = [_timed(run) * 1e3 for _ in range(repeat)]
        inner_table, active = artifact_runtime.fixed_layer_kernels, [False]

        def timed_table(fixed="fast"):
            table = dict(inner_table(fixed))
            for name, kernel in table.items():
                def timed(layer, xs, tensors, kernel=kernel):
                    t0 = time.perf_counter()
                    try:
                        return kernel(layer, xs, tensors)
                    finally:
                        if active[0]:
                            per.setdefault(layer.name, []).append((time.perf_counter() - t0) * 1e3)
                table[name] = timed
            return table

        artifact_runtime.fixed_layer_kernels = timed_table
        clock = _SubgraphClock()
        subgraph = []
        run()
        active[0] = True
        for _ in range(repeat):
            clock.seconds = 0.0
            run()
            subgraph.append(clock.seconds * 1e3)
        import tidlx

        kinds = {}
        for sub in tidlx.load_compiled(model_path).quantized_subgraphs().values():
            for layer in sub.compute_layers():
                macs = artifact_runtime.layer_macs(layer, sub.tensors) if layer.type in ("Conv", "InnerProduct") else 0
                kinds[layer.name] = (layer_kind(layer), macs)
        result.update(subgraph_ms=statistics.median(subgraph), kinds=kinds)
    elif engine == "onnxruntime":
        run, _ = _make_runner("onnxruntime", model_path, feed, threads)
        for _ in range(max(1, warmup)):
            run()
        walls = [_timed(run) * 1e3 for _ in range(repeat)]
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or ORT_THREADS
        options.inter_op_num_threads = 1
        options.enable_profiling = True
        with tempfile.TemporaryDirectory(prefix="tidlx-bench-ort-profile-") as tmp:
            options.profile_file_prefix = os.path.join(tmp, "ort")
            session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
            skip = max(1, warmup)
            for _ in range(skip + repeat):
                session.run(None, feed)
            with open(session.end_profiling()) as f:
                events = json.load(f)
        nodes = [e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")]
        per_run = len(nodes) // (skip + repeat)
        for e in nodes[skip * per_run:]:
            per.setdefault(e["name"][:-len("_kernel_time")], []).append(e["dur"] / 1e3)
        result["ops"] = {e["name"][:-len("_kernel_time")]: e["args"].get("op_name", "") for e in nodes[:per_run]}
    else:
        raise ValueError(f"unknown engine {engine!r} (expected one of {', '.join(ENGINES)})")
    result.update(wall_ms=statistics.median(walls), layers={k: statistics.median(v) for k, v in per.items()})
    return result


def print_profile(threads: int, ours: dict, theirs: dict) -> None:
    """The per-kind table of one thread count: tidlx's layers by kind beside the onnxruntime nodes of
    the same names."""
    kinds: dict = {}
    order = []
    theirs_by_name = {}
    for name, ms in theirs["layers"].items():
        base = re.sub(r"_token_\d+$", "", name)
        theirs_by_name[base] = theirs_by_name.get(base, 0.0) + ms
    matched = set()
    for name, ms in ours["layers"].items():
        kind, macs = ours["kinds"].get(name, ("?", 0))
        if kind not in kinds:
            kinds[kind] = [0.0, 0.0, 0, 0]
            order.append(kind)
        entry = kinds[kind]
        entry[0] += ms
        entry[2] += macs
        entry[3] += 1
        if name in theirs_by_name:
            entry[1] += theirs_by_name[name]
            matched.add(name)
    rest = sum(ms for name, ms in theirs_by_name.items() if name not in matched)
    rest_ops = sorted({theirs["ops"].get(n, "") for n in theirs["layers"]
                       if re.sub(r"_token_\d+$", "", n) not in matched} - {""})
    print(f"  {threads} thread{'s' if threads > 1 else ''}: each layer's median over the runs, ms (onnxruntime: "
          f"its nodes of the same names)")
    print(f"    {'layer kind':<20}{'layers':>7}{'tidlx ms':>10}{'GOPS':>7}{'onnxruntime ms':>16}{'GOPS':>7}"
          f"{'tidlx is':>10}")
    for kind in sorted(order, key=lambda k: -kinds[k][0]):
        a, b, macs, n = kinds[kind]
        gops_a = f"{_gops(macs, a):.0f}" if macs and a else ""
        gops_b = f"{_gops(macs, b):.0f}" if macs and b else ""
        times = f"{a / b:.1f}x" if b else ""
        print(f"    {kind:<20}{n:>7}{a:>10.2f}{gops_a:>7}{b:>16.2f}{gops_b:>7}{times:>10}")
    sum_a, sum_b = sum(v[0] for v in kinds.values()), sum(v[1] for v in kinds.values()) + rest
    print(f"    {'onnxruntime only':<20}{'':>7}{'':>10}{'':>7}{rest:>16.2f}{'':>7}  ({', '.join(rest_ops)})")
    print(f"    {'sum of the medians':<20}{'':>7}{sum_a:>10.2f}{'':>7}{sum_b:>16.2f}")
    print(f"    {'whole run (median)':<20}{'':>7}{ours['wall_ms']:>10.2f}{'':>7}{theirs['wall_ms']:>16.2f}"
          f"   (profiled runs: tidlx's subgraph calls {ours['subgraph_ms']:.2f} ms)")


# --- the VNNI peak (this process) -------------------------------------------------------------

def measure_peak(seconds: float = 0.3) -> dict:
    """GMAC/s of one thread: the tile microkernel on L1-resident operands, and a register-only loop."""
    from numba import njit

    from tidlx.emulator.fixed import _vnni

    if not _vnni.AVAILABLE:
        return {}

    @njit(nogil=True)
    def tile_loop(w, x, offsets, bias, c, calls):
        for _ in range(calls):
            _vnni.vnni_tile(w.ctypes.data, x.ctypes.data, offsets.ctypes.data, offsets.size, bias.ctypes.data,
                            c.ctypes.data, _vnni.PIXELS)

    @njit(nogil=True)
    def register_loop(iterations):
        return _vnni.vnni_peak(iterations)

    steps = 64   # weights 2 KiB, activations 8 KiB, tile 1 KiB: all in L1
    rng = np.random.default_rng(0)
    w = rng.integers(-2 ** 31, 2 ** 31, (steps, _vnni.ROWS), dtype=np.int64).astype(np.int32)
    x = rng.integers(0, 256, steps * _vnni.PIXELS * 4, dtype=np.int64).astype(np.uint8)
    offsets = (np.arange(steps) * _vnni.PIXELS * 4).astype(np.int64)
    c = np.zeros((_vnni.ROWS, _vnni.PIXELS), np.int32)
    bias = np.zeros(_vnni.ROWS, np.int32)
    tile_loop(w, x, offsets, bias, c, 1)
    register_loop(1)
    macs_per_call = steps * _vnni.ROWS * _vnni.PIXELS * 4
    calls = max(1, int(2e9 * seconds / macs_per_call))
    best_tile = min(_timed(lambda: tile_loop(w, x, offsets, bias, c, calls)) for _ in range(5))
    iterations = max(1, int(2e9 * seconds / (24 * 64)))
    best_reg = min(_timed(lambda: register_loop(iterations)) for _ in range(5))
    return {"tile": calls * macs_per_call / best_tile / 1e9, "register": iterations * 24 * 64 / best_reg / 1e9}


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# --- the comparison (default) -----------------------------------------------------------------

def _gops(macs: int, ms: float) -> float:
    return 2 * macs / (ms * 1e-3) / 1e9


def _relative_difference(a_path: str, b_path: str) -> float:
    a, b = list(_load_feed(a_path).values()), list(_load_feed(b_path).values())
    return max(float(np.abs(x - y).max() / max(np.abs(y).max(), 1e-30)) for x, y in zip(a, b))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run: fewer frames, rounds and runs")
    parser.add_argument("--frames", type=int, default=None, help="calibration frames (default 4, quick 2)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="processes per engine and thread count (default 5, quick 2)")
    parser.add_argument("--repeat", type=int, default=None, help="timed runs per process (default 10, quick 3)")
    parser.add_argument("--image", type=int, default=224)
    parser.add_argument("--skip-16bit", action="store_true", help="skip the 16-bit model (--quick skips it)")
    parser.add_argument("--profile", action="store_true",
                        help="then one more process per engine and thread count timing each layer; with --engine: "
                             "that process")
    child = parser.add_argument_group("one engine in this process (what the comparison spawns)")
    child.add_argument("--engine", choices=ENGINES)
    child.add_argument("--model", help="tidlx: the compiled folder; onnxruntime: the ONNX file")
    child.add_argument("--feed", help="the inputs, an .npz by input name")
    child.add_argument("--warmup", type=int, default=WARMUP)
    child.add_argument("--save-outputs", default="", help="write the first run's outputs to this .npz")
    child.add_argument("--threads", type=int, default=0, help="cap the engine's threads (0: its default)")
    args = parser.parse_args(argv)

    if args.engine:
        if not (args.model and args.feed):
            parser.error("--engine needs --model and --feed")
        if args.warmup < 0 or (args.repeat is not None and args.repeat < 1) or args.threads < 0:
            parser.error("--warmup and --threads must be >= 0, --repeat >= 1")
        if args.profile:
            print(json.dumps(profile_engine(args.engine, args.model, args.feed, args.repeat or 10, args.warmup,
                                            args.threads)))
        else:
            print(json.dumps(time_engine(args.engine, args.model, args.feed, args.repeat or 10, args.warmup,
                                         args.save_outputs, args.threads)))
        return 0
    n_frames = args.frames or (2 if args.quick else 4)
    rounds = args.rounds or (2 if args.quick else 5)
    repeat = args.repeat or (3 if args.quick else 10)
    if min(n_frames, rounds, repeat) < 1:
        parser.error("--frames, --rounds and --repeat must be >= 1")

    print(f"ResNet-18 {args.image}x{args.image} batch 1, tidlx 8-bit fixed point against onnxruntime int8 "
          f"({time.strftime('%Y-%m-%d %H:%M %Z')})")
    print(machine_line())
    print(blas_kernels_line())
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory(prefix="tidlx-bench-fixed-") as tmp:
        model_path = os.path.join(tmp, "resnet18.onnx")
        onnx.save(build_onnx(Weights(0), image=args.image), model_path)
        calib = frames(n_frames, seed=1, image=args.image)
        feed_path = os.path.join(tmp, "feed.npz")
        np.savez(feed_path, input=frames(1, seed=2, image=args.image))
        folder8, folder16 = os.path.join(tmp, "resnet18_tidl8"), os.path.join(tmp, "resnet18_tidl16")
        qdq_path = os.path.join(tmp, "resnet18.qdq.onnx")
        compile8_s = compile_tidlx(model_path, calib, folder8, 8)
        ort_s = ort_quantized(model_path, calib, qdq_path)
        print(f"{n_frames} calibration frames (seeded) for both; tidlx.compile_model 8 bit {compile8_s:.1f} s; "
              f"onnxruntime quantize_static ({ORT_FORM}) {ort_s:.1f} s")

        results = {(e, t): [] for e in ENGINES for t in THREAD_COUNTS}
        outputs = {e: os.path.join(tmp, f"{e}_outputs.npz") for e in ENGINES}
        for round_ in range(rounds):
            # Alternate which engine goes first, so neither always runs on a machine just woken up.
            order = ENGINES if round_ % 2 == 0 else ENGINES[::-1]
            for threads in THREAD_COUNTS:
                for engine in order:
                    path = folder8 if engine == "tidlx" else qdq_path
                    save = outputs[engine] if round_ == 0 and threads == THREAD_COUNTS[0] else ""
                    results[engine, threads].append(run_child(engine, path, feed_path, repeat, WARMUP, threads,
                                                              save))
        difference = _relative_difference(outputs["tidlx"], outputs["onnxruntime"])

        profiles = {}
        if args.profile:
            for threads in THREAD_COUNTS:
                profiles[threads] = [run_child(e, folder8 if e == "tidlx" else qdq_path, feed_path, repeat, WARMUP,
                                               threads, profile=True) for e in ENGINES]

        t16 = None
        if not (args.skip_16bit or args.quick):
            compile16_s = compile_tidlx(model_path, calib, folder16, 16)
            t16 = [run_child("tidlx", folder16, feed_path, repeat, WARMUP, THREAD_COUNTS[0])
                   for _ in range(max(1, rounds // 2))]
    load_after = os.getloadavg()

    first = results["tidlx", THREAD_COUNTS[0]][0]
    macs = first["macs"]
    print(f"tidlx: {macs / 1e9:.3f} GMAC in the TIDL subgraph; {first['vnni_convs']} of {first['convs']} "
          f"convolutions on the VNNI microkernel"
          f"{'' if first['vnni_available'] else ' (no AVX-512 VNNI here: int32 numba loops)'}; host part: "
          f"{first['host']}")
    tl = [r["load_ms"] for rs in (results["tidlx", t] for t in THREAD_COUNTS) for r in rs]
    ol = [r["load_ms"] for rs in (results["onnxruntime", t] for t in THREAD_COUNTS) for r in rs]
    tf = [r["first_ms"] for rs in (results["tidlx", t] for t in THREAD_COUNTS) for r in rs]
    print(f"in a new process (medians): import tidlx and load_compiled {statistics.median(tl):.0f} ms, first run "
          f"{statistics.median(tf):.0f} ms; import onnxruntime and create the session {statistics.median(ol):.0f} ms")
    print(f"each engine in its own process: {rounds} tidlx and {rounds} onnxruntime processes per thread count, "
          f"alternating, {repeat} timed runs each after {WARMUP} warm-up runs; figures are medians of the "
          f"process medians")
    print(f"{'':<40}{'median ms':>11}{'process medians':>18}{'GOPS':>8}")
    verdicts = []
    t_ort_2 = None
    for threads in THREAD_COUNTS:
        ours = [r["median_ms"] for r in results["tidlx", threads]]
        theirs = [r["median_ms"] for r in results["onnxruntime", threads]]
        ms_ours, ms_theirs = statistics.median(ours), statistics.median(theirs)
        if t_ort_2 is None:
            t_ort_2 = ms_theirs
        ratio = ms_ours / ms_theirs
        per_round = [a / b for a, b in zip(ours, theirs)]
        verdict = "met" if ratio <= GOAL_RATIO else "MISSED"
        verdicts.append(f"{threads} thread{'s' if threads > 1 else ''} {verdict}")
        sub = statistics.median(r["subgraph_ms"] for r in results["tidlx", threads])
        label = f"{threads} thread{'s' if threads > 1 else ''}"
        print(f"{label}:")
        print(f"  {'tidlx 8-bit fixed point (compiled)':<38}{ms_ours:>11.1f}{_spread(ours):>18}"
              f"{_gops(macs, ms_ours):>8.1f}")
        print(f"  {'onnxruntime int8 QDQ':<38}{ms_theirs:>11.1f}{_spread(theirs):>18}"
              f"{_gops(macs, ms_theirs):>8.1f}")
        print(f"  ratio tidlx / onnxruntime {ratio:.2f}x (per round {min(per_round):.2f}-{max(per_round):.2f}x); "
              f"goal <= {GOAL_RATIO:.0f}x: {verdict}")
        print(f"  tidlx split: TIDL subgraph calls {sub:.1f} ms ({100 * sub / ms_ours:.0f}%), host part and "
              f"interpreter {ms_ours - sub:.1f} ms")
    print(f"goal (tidlx 8-bit <= {GOAL_RATIO:.0f}x onnxruntime int8): {'; '.join(verdicts)}")
    if not profiles and any(v.endswith("MISSED") for v in verdicts):
        print("  (--profile times each layer of both engines)")
    print(f"outputs, tidlx 8-bit vs onnxruntime int8 (different quantizers; for information): max abs difference "
          f"{difference:.2e} x max abs output")
    if profiles:
        print(f"where the time goes ({repeat} runs per process, one process per engine and thread count):")
        for threads, (ours, theirs) in profiles.items():
            print_profile(threads, ours, theirs)
    if t16 is not None:
        ms16 = statistics.median(r["median_ms"] for r in t16)
        print(f"tidlx 16-bit fixed point (compiled in {compile16_s:.1f} s), {THREAD_COUNTS[0]} threads, "
              f"{len(t16)} process(es): {ms16:.1f} ms ({_gops(macs, ms16):.1f} GOPS, {ms16 / t_ort_2:.1f}x "
              f"onnxruntime int8)")

    peak = measure_peak(0.1 if args.quick else 0.3)
    if peak:
        cores = THREAD_COUNTS[0]
        machine_peak = 2 * peak["tile"] * cores
        ms_ours = statistics.median(r["median_ms"] for r in results["tidlx", cores])
        print(f"int8 VNNI peak (this process): tile microkernel in L1 {peak['tile']:.0f} GMAC/s per core "
              f"(register-only vpdpbusd loop {peak['register']:.0f}), x {cores} cores = {machine_peak:.0f} GOPS; "
              f"tidlx at {cores} threads reaches {100 * _gops(macs, ms_ours) / machine_peak:.1f}% of it")
    print(f"load average (1, 5, 15 min) {', '.join(f'{v:.2f}' for v in load_before)} before, "
          f"{', '.join(f'{v:.2f}' for v in load_after)} after the processes, on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
