"""Fixed-point emulator speed: ResNet-18 (batch 1, 224x224) quantized by tidlx against onnxruntime's int8
QDQ model of the same network (``make bench``).

The network is bench_float.py's ResNet-18 (``build_onnx``, random weights, fixed seed). tidlx quantizes
it to 8 bit (``tidlx.quantize(mod, {"tensor_bits": 8}, calib=frames)``) and runs it with
``tidlx.emulate`` (the TIDL subgraph in fixed point on the fast kernels: VNNI convolutions); onnxruntime
runs the model ``onnxruntime.quantization.quantize_static`` makes of it (QDQ format, int8 weights and
activations, calibrated on the same seeded frames), on the CPU with 2 intra-op threads. Both run in
this process, alternating (``--rounds`` rounds of ``--repeat`` runs each after warm-up); the figures
are medians of all timed runs.

Printed: the latencies and their ratio (goal: tidlx <= 2x onnxruntime), the same at 1 thread each
(which other processes on the cores disturb less), GOPS (2 x MACs / time, MACs
counted from the quantized layers), the share of this machine's int8 VNNI peak, the split of the tidlx
time into the TIDL subgraph (run_subgraph, timed around each call) and the rest (host part, interpreter,
outputs), and the 16-bit model's latency. The peak is measured, not taken from a data sheet: the VNNI
tile microkernel (emulator/fixed/_vnni.py) called in a loop on operands that stay in L1, one thread,
times the cores the runs use (2); a register-only ``vpdpbusd`` loop is printed next to it.
A missed goal is printed, not an error: the script exits 0 whenever it runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_float import Weights, build_onnx  # noqa: E402  (same folder; benchmarks is not a package)

THREADS = 2
GOAL_RATIO = 2.0


def frames(count: int, seed: int, image: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, 3, image, image)).astype(np.float32)


def count_macs(qmodel) -> int:
    """Multiply-adds of the convolutions and inner products of every quantized subgraph."""
    total = 0
    for sub in qmodel.subgraphs.values():
        for layer in sub.compute_layers():
            out = sub.tensors[layer.outputs[0]].shape
            if layer.type == "Conv":
                total += int(np.prod(out)) * int(np.prod(layer.weights.shape[1:]))
            elif layer.type == "InnerProduct":
                total += int(np.prod(out)) * int(layer.weights.shape[1])
    return total


def ort_session(path: str, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def ort_quantized(model_path: str, calib: np.ndarray, out_path: str) -> str:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Frames(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{"input": calib[i:i + 1]} for i in range(len(calib))])

        def get_next(self):
            return next(self.items, None)

    quantize_static(model_path, out_path, Frames(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    return out_path


class SubgraphTimer:
    """Times every run_subgraph call of the fixed-point kernel set (wraps the name kernel_set.py calls)."""

    def __init__(self):
        from tidlx.emulator.fixed import kernel_set

        self.module = kernel_set
        self.inner = kernel_set.run_subgraph
        self.seconds = 0.0

    def __enter__(self):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return self.inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        self.module.run_subgraph = timed
        return self

    def __exit__(self, *exc):
        self.module.run_subgraph = self.inner


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run: fewer frames, rounds and runs")
    parser.add_argument("--frames", type=int, default=None, help="calibration frames (default 4, quick 2)")
    parser.add_argument("--rounds", type=int, default=None, help="alternations (default 5, quick 2)")
    parser.add_argument("--repeat", type=int, default=None, help="timed runs per engine and round (default 10, quick 3)")
    parser.add_argument("--image", type=int, default=224)
    args = parser.parse_args(argv)
    n_frames = args.frames or (2 if args.quick else 4)
    rounds = args.rounds or (2 if args.quick else 5)
    repeat = args.repeat or (3 if args.quick else 10)

    import tidlx
    from tidlx.emulator.fixed import _vnni

    tmp = tempfile.mkdtemp(prefix="tidlx-bench-fixed-")
    model_path = os.path.join(tmp, "resnet18.onnx")
    onnx.save(build_onnx(Weights(0), image=args.image), model_path)
    calib = frames(n_frames, seed=1, image=args.image)
    feed = {"input": frames(1, seed=2, image=args.image)}

    mod = tidlx.load(model_path)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # fewer frames than the calibration_frames option asks for
        q8 = tidlx.quantize(mod, {"tensor_bits": 8}, calib={"input": calib})
        q16 = tidlx.quantize(mod, {"tensor_bits": 16}, calib={"input": calib})
    quantize_s = time.perf_counter() - t0
    qdq_path = ort_quantized(model_path, calib, os.path.join(tmp, "resnet18.qdq.onnx"))
    session, session_1 = ort_session(qdq_path, THREADS), ort_session(qdq_path, 1)
    macs = count_macs(q8)
    print(f"ResNet-18 {args.image}x{args.image} batch 1: {macs / 1e9:.3f} GMAC in "
          f"{sum(len(s.compute_layers()) for s in q8.subgraphs.values())} TIDL layers, "
          f"{len(q8.subgraphs)} subgraph(s); {n_frames} calibration frames; tidlx quantized 8 and 16 bit in "
          f"{quantize_s:.1f} s; VNNI microkernel {'on' if _vnni.AVAILABLE else 'absent (int32 numba loops)'}")

    from tidlx.emulator import EmulatorConfig

    run_tidlx = lambda: tidlx.emulate(q8, feed)  # noqa: E731
    one_thread = EmulatorConfig(threads=1)
    run_tidlx_1 = lambda: q8.run(feed, config=one_thread)  # noqa: E731
    run_ort = lambda: session.run(None, feed)  # noqa: E731
    run_ort_1 = lambda: session_1.run(None, feed)  # noqa: E731
    for _ in range(2):   # warm-up: plans, numba's cache, onnxruntime's first run
        run_tidlx()
        run_tidlx_1()
        run_ort()
        run_ort_1()
    tidlx_times, ort_times, subgraph_times, one_thread_times, ort_1_times = [], [], [], [], []
    load_before = os.getloadavg()[0]
    with SubgraphTimer() as timer:
        for _ in range(rounds):
            for _ in range(repeat):
                timer.seconds = 0.0
                tidlx_times.append(_timed(run_tidlx))
                subgraph_times.append(timer.seconds)
            ort_times.extend(_timed(run_ort) for _ in range(repeat))
            one_thread_times.extend(_timed(run_tidlx_1) for _ in range(max(1, repeat // 2)))
            ort_1_times.extend(_timed(run_ort_1) for _ in range(max(1, repeat // 2)))
    t_tidlx, t_ort = statistics.median(tidlx_times), statistics.median(ort_times)
    t_sub = statistics.median(subgraph_times)
    ratio = t_tidlx / t_ort
    gops = 2 * macs / t_tidlx / 1e9
    print(f"latency (median of {len(tidlx_times)} runs each, alternating in one process, {THREADS} threads):")
    print(f"  tidlx 8-bit fixed point   {t_tidlx * 1e3:8.1f} ms   {gops:6.1f} GOPS")
    print(f"  onnxruntime int8 QDQ      {t_ort * 1e3:8.1f} ms   {2 * macs / t_ort / 1e9:6.1f} GOPS")
    verdict = "met" if ratio <= GOAL_RATIO else "MISSED"
    print(f"  ratio tidlx / onnxruntime {ratio:8.2f}x  (goal <= {GOAL_RATIO:.0f}x: {verdict})")
    t_one, t_ort_1 = statistics.median(one_thread_times), statistics.median(ort_1_times)
    print(f"  1 thread each (less exposed to other processes on the cores, {len(one_thread_times)} runs each):")
    print(f"  tidlx, 1 thread           {t_one * 1e3:8.1f} ms   {2 * macs / t_one / 1e9:6.1f} GOPS")
    print(f"  onnxruntime, 1 thread     {t_ort_1 * 1e3:8.1f} ms   {2 * macs / t_ort_1 / 1e9:6.1f} GOPS")
    print(f"  ratio at 1 thread         {t_one / t_ort_1:8.2f}x")
    print(f"  load average of this machine (1 min) {load_before:.1f} before, {os.getloadavg()[0]:.1f} after the "
          f"timed runs, on {os.cpu_count()} CPUs: other processes share the cores")
    print(f"  tidlx split: TIDL subgraph {t_sub * 1e3:.1f} ms ({100 * t_sub / t_tidlx:.0f}%), host part and "
          f"interpreter {(t_tidlx - t_sub) * 1e3:.1f} ms")

    peak = measure_peak(0.1 if args.quick else 0.3)
    if peak:
        machine_peak = 2 * peak["tile"] * THREADS
        print(f"int8 VNNI peak: tile microkernel in L1 {peak['tile']:.0f} GMAC/s per core "
              f"(register-only vpdpbusd loop {peak['register']:.0f}), x {THREADS} cores = "
              f"{machine_peak:.0f} GOPS; tidlx reaches {100 * gops / machine_peak:.1f}% of it")

    run16 = lambda: tidlx.emulate(q16, feed)  # noqa: E731
    run16()
    t16 = statistics.median(_timed(run16) for _ in range(max(3, repeat // 2)))
    print(f"tidlx 16-bit fixed point: {t16 * 1e3:.1f} ms ({2 * macs / t16 / 1e9:.1f} GOPS, {t16 / t_ort:.1f}x "
          f"onnxruntime int8)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
