"""The compile flow stage by stage on the built-in resnet50 model, and the TVM-built x86 latency next to
onnxruntime's (``make bench``).

The model is the repo's main built-in one, BEVDet's image stage with the ResNet-50 backbone
(``tidlx.models.bevdet_img_stage(backbone="resnet50", batch=1)``: batch 1 at its default 256 x 704
image, the LSS depth net; seeded weights), written to an ONNX file first (not timed as a stage).
``--quick`` takes its tiny variant (channels / 8, 64 x 192): the same graph, for the test.

Stages, each timed once in this process (wall seconds, and the process's CPU seconds, which count
both cores when two work), in the order ``tidlx compile`` runs them:

* import: ``tidlx.load`` of the ONNX file (conversion, constant folding, types);
* prepare / partition: one ``tidlx.partition`` call, split by the flow's own timings: prepare is
  options + TI's graph preparation passes, partition the rest (composites, support rules, the
  partitioner, the TIDL layer model and the report);
* calibrate: ``calibrate`` (backends/tidl/calibration.py) on ``--calib-frames`` seeded frames with
  the reference kernels, as ``tidlx compile`` does;
* TIDL artifacts: quantization alone (scales, integer weights: accuracy_level 9 with accuracy_level
  1's clipping bits but not BiasCalib), the same with bias calibration (``--bias-iterations``
  fixed-point passes over the frames, as TI's default accuracy_level 1 does), and writing the
  compiled folder (``folder_files`` + ``write_folder``: the tidl_subgraph<N> net/io files, the host
  module, the manifest);
* TVM import: ``import tvm.relax`` (tidlx imports apache-tvm on first use; this keeps its import and
  initialisation out of the first build's row);
* TVM build: ``build(partitioned, "x86")`` (the host part compiled by apache-tvm, each TIDL subgraph
  an external call into tidlx's float emulator) and ``build(mod, "x86", tidl="inline")`` (every op
  as TVM code: the model the latency compares);
* TVM deploy folder: ``tidlx.backends.tvm.deploy.deploy(qmodel, dir, "x86")`` (deploy_graph.json,
  deploy_params.params, deploy_lib.so, the C driver's sources; the driver is not compiled here).

TI's defaults are 20 calibration frames and 50 bias calibration iterations: far longer than this
script may take (calibration is about linear in frames, bias calibration in frames x iterations), so
the per-frame and per-pass costs are printed to scale from.

Latency, alternating in one process after one warm-up run each (``--rounds`` rounds: one run of the
TVM model, then ``--repeat`` runs of each onnxruntime session), medians:

* the whole model built by apache-tvm for x86 (``tidl="inline"``: TVM's default ``tvm.compile``
  pipeline, no tuning) against onnxruntime (CPU, 2 intra-op threads, and 1 thread) on the same ONNX
  file; their largest output difference is printed, so both compute the same thing;
* the partitioned model as TVM built it (``build(partitioned)``, TIDL subgraphs in tidlx's fast
  float kernels): its whole run, and its host part alone (the run minus the time inside the TIDL
  subgraphs' external calls: TVM's kernels, its VM and the copies at the calls). The TIDL subgraphs
  are not run in fixed point here: ``build(qmodel)`` runs them on the plain fixed-point layers
  (``run_subgraph``'s default kernels: 52.7 s a run on this model, where a fixed-point pass of bias
  calibration takes about 0.5 s), which would dominate the script's time.

TVM's default CPU pipeline legalizes each op into plain TIR loops and schedules none of them: no
tiling, vectorization or threads (tuning with meta_schedule is TVM's way to get speed; dlight's CPU
rules, ``--dlight``, cover only GEMV and reductions, not convolutions: measured 43.0 s a run against
30.4 s for the default, in one run at load 4.7; a target ``mcpu`` such as znver4 gave no gain either), so
the untuned TVM model is far slower than onnxruntime's hand-written kernels. That is the figure,
reported as it is.

No goals are set; the script prints the figures and exits 0 whenever it ran. The
machine may be shared: the load average is printed before and after.

Run: ``.venv/bin/python benchmarks/bench_compile.py [--quick] [--rounds N] [--dlight]``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import numpy as np

ORT_THREADS = 2
FULL = dict(calib_frames=4, bias_iterations=4, rounds=3, repeat=5)
QUICK = dict(calib_frames=2, bias_iterations=1, rounds=1, repeat=2)


@dataclass
class Stage:
    name: str
    wall: float
    cpu: Optional[float]
    note: str = ""


@dataclass
class Results:
    """What one run measured (the test reads it)."""
    model: str
    stages: List[Stage] = field(default_factory=list)
    latency_ms: Dict[str, float] = field(default_factory=dict)
    max_output_difference: float = float("nan")
    host_ops: int = 0
    load_before: float = 0.0
    load_after: float = 0.0

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)


def _timed(fn: Callable):
    wall0, cpu0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall0, time.process_time() - cpu0


def _ort_session(path: str, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


class _SubgraphClock:
    """Times the TIDL subgraphs' external calls of a TvmModel: its runners, wrapped before its VM
    starts (the VM binds the packed functions then)."""

    def __init__(self, model):
        self.seconds = 0.0
        runners = model._runners
        for name, run in list(runners.items()):
            runners[name] = self._wrap(run)

    def _wrap(self, run):
        def timed(inputs):
            t0 = time.perf_counter()
            try:
                return run(inputs)
            finally:
                self.seconds += time.perf_counter() - t0
        return timed


def _host_op_count(partitioned) -> int:
    """Op calls of @main that are not calls of a TIDL subgraph (what TVM compiles as the host part)."""
    from tidlx.ir import Call
    from tidlx.ir.traversal import post_order

    return sum(1 for node in post_order(partitioned["main"].body)
               if isinstance(node, Call) and getattr(node, "op_name", None) is not None)


def _dlight_pipeline(target):
    """TVM's default CPU pipeline with dlight's CPU schedule rules (GEMV, Reduction) after legalization."""
    import tvm
    from tvm.relax.backend.cpu_generic import pipeline as cpu
    from tvm.s_tir import dlight

    @tvm.transform.module_pass(opt_level=0)
    def _pipeline(mod, _ctx):
        with target:
            passes = (cpu.library_dispatch_passes(target) + cpu.legalize_passes(target)
                      + [dlight.ApplyDefaultSchedule(dlight.cpu.GEMV(), dlight.cpu.Reduction())]
                      + cpu.dataflow_lower_passes(target) + cpu.finalize_passes(target))
            return tvm.transform.Sequential(passes)(mod)
    return _pipeline


def _dlight_runner(mod, feed_arrays):
    import tvm
    from tvm import relax

    from tidlx.backends.tvm import to_relax
    from tidlx.backends.tvm.build import target_of

    target = target_of("x86")
    executable = tvm.compile(to_relax(mod, tidl="inline"), target=target, relax_pipeline=_dlight_pipeline(target))
    vm = relax.VirtualMachine(executable, tvm.cpu())
    args = [tvm.runtime.tensor(a) for a in feed_arrays]
    return lambda: vm["main"](*args)


def _print_stages(results: Results) -> None:
    print(f"compile stages, {results.model} (wall s; CPU s of this process)")
    print(f"  {'stage':<50}{'wall s':>9}{'CPU s':>9}  note")
    for s in results.stages:
        cpu = f"{s.cpu:9.3f}" if s.cpu is not None else f"{'':>9}"
        print(f"  {s.name:<50}{s.wall:9.3f}{cpu}  {s.note}")


def run(quick: bool = False, rounds: Optional[int] = None, repeat: Optional[int] = None,
        calib_frames: Optional[int] = None, bias_iterations: Optional[int] = None, dlight: bool = False,
        workdir: Optional[str] = None) -> Results:
    import tidlx
    from tidlx.backends.tidl.artifacts import folder_files, write_folder
    from tidlx.backends.tidl.calibration import _options, calibrate
    from tidlx.backends.tidl.quantize import quantize_model
    from tidlx.backends.tvm import build
    from tidlx.backends.tvm.deploy import deploy

    settings = dict(QUICK if quick else FULL)
    for key, value in (("rounds", rounds), ("repeat", repeat), ("calib_frames", calib_frames),
                       ("bias_iterations", bias_iterations)):
        if value is not None:
            settings[key] = value
    frames_n, iterations = settings["calib_frames"], settings["bias_iterations"]

    own_dir = tempfile.TemporaryDirectory(prefix="bench_compile_") if workdir is None else None
    folder = own_dir.name if own_dir is not None else workdir
    try:
        onnx_model, build_wall, _ = _timed(lambda: tidlx.models.bevdet_img_stage(
            backbone="resnet50", batch=1, tiny=quick))
        dims = [d.dim_value for d in onnx_model.graph.input[0].type.tensor_type.shape.dim]
        model_name = (f"BEVDet image stage, ResNet-50{' tiny (channels / 8)' if quick else ''}, "
                      f"batch {dims[0]}, {dims[2]} x {dims[3]}")
        results = Results(model_name, load_before=os.getloadavg()[0])
        print(f"{model_name}: ONNX model built in {build_wall:.1f} s (not a stage); load average (1 min) "
              f"{results.load_before:.2f} on {os.cpu_count()} CPUs")
        onnx_path = os.path.join(folder, "bevdet_r50.onnx")
        with open(onnx_path, "wb") as f:
            f.write(onnx_model.SerializeToString())
        input_name = onnx_model.graph.input[0].name
        del onnx_model

        options = {"advanced_options:calibration_frames": frames_n,
                   "advanced_options:calibration_iterations": iterations}
        stages = results.stages

        mod, wall, cpu = _timed(lambda: tidlx.load(onnx_path))
        stages.append(Stage("import (tidlx.load)", wall, cpu, f"{len(mod['main'].params)} input(s)"))

        (partitioned, report), wall, cpu = _timed(lambda: tidlx.partition(mod, options))
        flow = report.timings
        prepare = flow.get("options", 0.0) + flow.get("prepare", 0.0)
        subgraphs = sum(1 for _, fn in partitioned.items() if fn.attrs.get("Compiler") == "tidl")
        results.host_ops = _host_op_count(partitioned)
        stages.append(Stage("prepare (options, graph preparation)", prepare, None, "the flow's own timing"))
        stages.append(Stage("partition (composites, rules, partition, report)", wall - prepare, None,
                            f"{subgraphs} TIDL subgraph(s), {results.host_ops} op(s) on the host; "
                            f"CPU of both rows {cpu:.2f} s"))

        rng = np.random.default_rng(0)
        frames = {input_name: rng.standard_normal((frames_n, *dims[1:])).astype(np.float32)}
        opts = _options(options)
        calibration, wall, cpu = _timed(lambda: calibrate(partitioned, opts, frames, kernels="reference"))
        stages.append(Stage("calibrate (reference kernels)", wall, cpu,
                            f"{frames_n} frame(s), {wall / frames_n:.2f} s a frame (TI's default: 20)"))

        # accuracy_level 1 is options 7 = ActRange | WeightRange | BiasCalib; 9 with those bits but
        # BiasCalib is the same quantization without the bias calibration passes.
        opts_no_bias = _options(dict(options, accuracy_level=9, **{"advanced_options:activation_clipping": 1,
                                                                   "advanced_options:weight_clipping": 1,
                                                                   "advanced_options:bias_calibration": 0}))
        _, wall, cpu = _timed(lambda: quantize_model(partitioned, opts_no_bias, calibration))
        stages.append(Stage("TIDL: quantize (no bias calibration)", wall, cpu, "scales, integer weights"))
        quantize_wall = wall
        qmodel, wall, cpu = _timed(lambda: quantize_model(partitioned, opts, calibration))
        passes = iterations * frames_n
        stages.append(Stage("TIDL: quantize + bias calibration", wall, cpu,
                            f"{iterations} iteration(s) x {frames_n} frame(s): about "
                            f"{(wall - quantize_wall) / max(passes, 1):.2f} s a fixed-point pass "
                            f"(TI's default: 50 x 20)"))

        def write():
            files = folder_files(qmodel, options=[f"{k}={v}" for k, v in options.items()],
                                 calibration="random frames (seeded)", tidlx_version=tidlx.__version__)
            write_folder(files, os.path.join(folder, "compiled"), force=True)
            return files
        files, wall, cpu = _timed(write)
        stages.append(Stage("TIDL: write artifacts", wall, cpu,
                            f"{len(files)} files, {sum(len(b) for b in files.values()) / 2**20:.1f} MiB"))

        # apache-tvm is imported on first use: its import and initialisation would fall on the first build
        _, wall, cpu = _timed(lambda: importlib.import_module("tvm.relax"))
        stages.append(Stage("TVM import (apache-tvm, first use)", wall, cpu, "once a process"))
        host_model, wall, cpu = _timed(lambda: build(partitioned, "x86"))
        stages.append(Stage("TVM build x86, host part", wall, cpu, "TIDL subgraphs as external calls"))
        inline_model, wall, cpu = _timed(lambda: build(mod, "x86", tidl="inline"))
        stages.append(Stage("TVM build x86, whole model (tidl=inline)", wall, cpu, "every op as TVM code"))

        _, wall, cpu = _timed(lambda: deploy(qmodel, os.path.join(folder, "deploy"), "x86"))
        stages.append(Stage("TVM deploy folder x86", wall, cpu, "deploy_graph/params/lib, C driver"))
        _print_stages(results)

        # --- latency -------------------------------------------------------------------------------
        x = rng.standard_normal(dims).astype(np.float32)
        feed = {input_name: x}
        clock = _SubgraphClock(host_model)
        ort_2, ort_1 = _ort_session(onnx_path, ORT_THREADS), _ort_session(onnx_path, 1)
        engines: Dict[str, Callable] = {
            "tvm": lambda: inline_model.run(feed),
            "onnxruntime": lambda: ort_2.run(None, feed),
            "onnxruntime_1": lambda: ort_1.run(None, feed),
            "tvm_partitioned": lambda: host_model.run(feed),
        }
        if dlight:
            _, wall, _ = _timed(lambda: engines.__setitem__("tvm_dlight", _dlight_runner(mod, [x])))
            print(f"  (TVM build with dlight's CPU rules: {wall:.1f} s)")
        warm = {name: fn() for name, fn in engines.items()}
        tvm_out = np.asarray(warm["tvm"][0])
        ort_out = np.asarray(warm["onnxruntime"][0])
        results.max_output_difference = float(np.abs(tvm_out - ort_out).max() / max(np.abs(ort_out).max(), 1e-30))

        times: Dict[str, List[float]] = {name: [] for name in engines}
        host_times: List[float] = []
        load_timed = os.getloadavg()[0]
        for _ in range(settings["rounds"]):
            for name in engines:
                reps = settings["repeat"] if name.startswith("onnxruntime") else 1
                for _ in range(reps):
                    clock.seconds = 0.0
                    _, wall, _ = _timed(engines[name])
                    times[name].append(wall)
                    if name == "tvm_partitioned":
                        host_times.append(wall - clock.seconds)
        results.latency_ms = {name: 1e3 * statistics.median(t) for name, t in times.items()}
        results.latency_ms["tvm_partitioned_host"] = 1e3 * statistics.median(host_times)
        results.load_after = os.getloadavg()[0]
        ms = results.latency_ms
        print(f"latency, x86, batch 1 (medians, alternating in one process: {settings['rounds']} run(s) of each "
              f"TVM model, {settings['rounds'] * settings['repeat']} of each onnxruntime session)")
        print(f"  TVM whole model (default tvm.compile, untuned)  {ms['tvm']:10.1f} ms")
        if "tvm_dlight" in ms:
            print(f"  TVM whole model, dlight CPU rules               {ms['tvm_dlight']:10.1f} ms   "
                  f"speed-up over the default {ms['tvm'] / ms['tvm_dlight']:.2f}x")
        print(f"  onnxruntime, {ORT_THREADS} threads                         {ms['onnxruntime']:10.1f} ms")
        print(f"  onnxruntime, 1 thread                           {ms['onnxruntime_1']:10.1f} ms")
        print(f"  ratio TVM / onnxruntime                         {ms['tvm'] / ms['onnxruntime']:10.1f}x   "
              f"(at 1 thread: {ms['tvm'] / ms['onnxruntime_1']:.1f}x)")
        print(f"  largest output difference TVM vs onnxruntime    {results.max_output_difference:10.1e}   "
              f"(of the largest |output|)")
        print(f"  partitioned model via TVM (TIDL: float emulator) {ms['tvm_partitioned']:10.1f} ms")
        print(f"    of which the host part (TVM code, VM, copies){ms['tvm_partitioned_host']:10.3f} ms   "
              f"({results.host_ops} op(s); the rest: the TIDL subgraphs in tidlx's float emulator)")
        print(f"load average (1 min): {results.load_before:.2f} at the start, {load_timed:.2f} before the timed "
              f"runs, {results.load_after:.2f} after, on {os.cpu_count()} CPUs")
        return results
    finally:
        if own_dir is not None:
            own_dir.cleanup()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the tiny model, fewer frames and runs (the test)")
    parser.add_argument("--rounds", type=int, help="rounds of alternating latency runs")
    parser.add_argument("--repeat", type=int, help="onnxruntime runs per round")
    parser.add_argument("--calib-frames", type=int, help="calibration frames")
    parser.add_argument("--bias-iterations", type=int, help="bias calibration iterations")
    parser.add_argument("--dlight", action="store_true", help="also TVM with dlight's CPU schedule rules")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the flow's notes on the model, not about the timing
        run(args.quick, args.rounds, args.repeat, args.calib_frames, args.bias_iterations, args.dlight)
    print(f"bench_compile: {time.perf_counter() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
