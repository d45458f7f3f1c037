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

Latency, each engine in its own processes (``bench_compile.py --engine tvm|onnxruntime --model M
--feed F.npz --threads N``: load, ``--warmup`` runs, ``--repeat`` timed runs, one JSON line), as
bench_float.py and bench_fixed.py time theirs:

* the whole model built by apache-tvm for x86 (``tidl="inline"``: TVM's default ``tvm.compile``
  pipeline, no tuning) against onnxruntime (CPU) on the same ONNX file, at 2 threads and at 1 thread
  (onnxruntime's ``intra_op_num_threads``; TVM's ``TVM_NUM_THREADS``, which changes nothing for the
  untuned code: it has no parallel loops). This process builds the TVM model once (the "TVM build
  x86, whole model" stage) and writes it with ``export_library`` (a shared library; its export time
  is printed); a TVM process loads it (``tvm.runtime.load_module``) into a new relax
  ``VirtualMachine`` and times runs that make TVM tensors of the input, call ``main`` and turn the
  outputs into numpy arrays, as ``TvmModel.run`` does. An onnxruntime process creates its session
  (bench_float.py's runner). For each thread count ``--rounds`` processes per engine run,
  alternating which engine goes first; a TVM process times 1 warm-up run and ``--tvm-repeat`` runs
  (a run of the full model takes tens of seconds, and the library is compiled ahead of time: no
  first-run compilation to wait out), an onnxruntime process 2 warm-up runs and ``--repeat`` runs. A
  figure is the median of the process medians, the ratio TVM / onnxruntime is printed with its
  spread over the rounds, and the largest output difference between the two (the outputs the first
  TVM and onnxruntime processes saved, relative to the largest |output|) shows both compute the same
  thing. With ``--dlight`` a third engine joins the 2-thread rounds: the same model built with
  dlight's CPU rules, exported and run the same way;
* the partitioned model as TVM built it (``build(partitioned)``, TIDL subgraphs in tidlx's fast
  float kernels), timed in this process once the latency processes are done (one warm-up run, then
  ``--repeat`` runs; medians): its whole run, and its host part alone (the run minus the time
  inside the TIDL subgraphs' external calls: TVM's kernels, its VM and the copies at the calls).
  The TIDL subgraphs are not run in fixed point here: ``build(qmodel)`` runs them on the plain
  fixed-point layers (``run_subgraph``'s default kernels: 52.7 s a run on this model, where a
  fixed-point pass of bias calibration takes about 0.5 s), which would dominate the script's time.

TVM's default CPU pipeline legalizes each op into plain TIR loops and schedules none of them: no
tiling, vectorization or threads (tuning with meta_schedule is TVM's way to get speed; dlight's CPU
rules, ``--dlight``, cover only GEMV and reductions, not convolutions: measured 43.0 s a run against
30.4 s for the default, in one run at load 4.7; a target ``mcpu`` such as znver4 gave no gain either), so
the untuned TVM model is far slower than onnxruntime's hand-written kernels. That is the figure,
reported as it is.

No goals are set; the script prints the figures and exits 0 whenever it ran. The
machine may be shared: the load average is printed before and after.

Run: ``.venv/bin/python benchmarks/bench_compile.py [--quick] [--rounds N] [--repeat N] [--tvm-repeat N]
[--dlight]``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_float  # noqa: E402  (same folder; benchmarks is not a package)
from bench_fixed import _relative_difference  # noqa: E402

ENGINES = ("tvm", "onnxruntime")
THREAD_COUNTS = (bench_float.ORT_THREADS, 1)
TVM_WARMUP = 1   # the library is compiled ahead of time; one run before timing is enough
FULL = dict(calib_frames=4, bias_iterations=4, rounds=3, repeat=5, tvm_repeat=1)
QUICK = dict(calib_frames=2, bias_iterations=1, rounds=1, repeat=2, tvm_repeat=2)


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
    processes: Dict[str, List[dict]] = field(default_factory=dict)   # the child processes' JSON lines
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


# --- one engine in this process (--engine) ----------------------------------------------------

def _tvm_runner(lib_path: str, feed: dict, threads: int):
    """(run(), load ms): the library TVM exported, loaded into a new relax VM; a run makes TVM tensors
    of the inputs (in the order of the model's inputs), calls main and turns the outputs into numpy
    arrays, as TvmModel.run does."""
    if threads:
        os.environ["TVM_NUM_THREADS"] = str(threads)  # TVM's thread pool reads it when it starts
    t0 = time.perf_counter()
    import tvm
    from tvm import relax

    from tidlx.backends.tvm.build import _flatten

    vm = relax.VirtualMachine(tvm.runtime.load_module(lib_path), tvm.cpu())
    arrays = [np.ascontiguousarray(a) for a in feed.values()]
    run = lambda: _flatten(vm["main"](*[tvm.runtime.tensor(a) for a in arrays]))  # noqa: E731
    return run, (time.perf_counter() - t0) * 1e3


def time_engine(engine: str, model_path: str, feed_path: str, repeat: int, warmup: int,
                outputs_path: str = "", threads: int = 0) -> dict:
    """Times ``repeat`` runs of one engine after ``warmup`` runs (the first one timed apart); what the
    child process prints. onnxruntime is bench_float.py's own runner and loop."""
    if engine == "onnxruntime":
        result = bench_float.time_engine("onnxruntime", model_path, feed_path, repeat, warmup, outputs_path,
                                         threads)
    elif engine == "tvm":
        run, load_ms = _tvm_runner(model_path, bench_float._load_feed(feed_path), threads)
        result = bench_float.time_runner(engine, model_path, run, load_ms, repeat, warmup, outputs_path)
    else:
        raise ValueError(f"unknown engine {engine!r} (expected one of {', '.join(ENGINES)})")
    result.update(threads=threads, pid=os.getpid())
    return result


def run_child(engine: str, model_path: str, feed_path: str, repeat: int, warmup: int, threads: int,
              outputs_path: str = "") -> dict:
    """One engine in a new process of this script; its JSON line (bench_float's runner)."""
    return bench_float.run_child(engine, model_path, feed_path, repeat, warmup, outputs_path, threads, script=__file__)


# --- the compile flow and the comparison (default) --------------------------------------------

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


def _dlight_executable(mod):
    """The whole model (tidl="inline") built for x86 with dlight's CPU rules."""
    import tvm

    from tidlx.backends.tvm import to_relax
    from tidlx.backends.tvm.build import target_of

    target = target_of("x86")
    return tvm.compile(to_relax(mod, tidl="inline"), target=target, relax_pipeline=_dlight_pipeline(target))


def _print_stages(results: Results) -> None:
    print(f"compile stages, {results.model} (wall s; CPU s of this process)")
    print(f"  {'stage':<50}{'wall s':>9}{'CPU s':>9}  note")
    for s in results.stages:
        cpu = f"{s.cpu:9.3f}" if s.cpu is not None else f"{'':>9}"
        print(f"  {s.name:<50}{s.wall:9.3f}{cpu}  {s.note}")


def _threads_text(threads: int) -> str:
    return f"{threads} thread{'s' if threads > 1 else ''}"


def run(quick: bool = False, rounds: Optional[int] = None, repeat: Optional[int] = None,
        calib_frames: Optional[int] = None, bias_iterations: Optional[int] = None, dlight: bool = False,
        tvm_repeat: Optional[int] = None, workdir: Optional[str] = None) -> Results:
    import tidlx
    from tidlx.backends.tidl.artifacts import folder_files, write_folder
    from tidlx.backends.tidl.calibration import _options, calibrate
    from tidlx.backends.tidl.quantize import quantize_model
    from tidlx.backends.tvm import build
    from tidlx.backends.tvm.deploy import deploy

    settings = dict(QUICK if quick else FULL)
    for key, value in (("rounds", rounds), ("repeat", repeat), ("calib_frames", calib_frames),
                       ("bias_iterations", bias_iterations), ("tvm_repeat", tvm_repeat)):
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

        # --- latency: each engine in its own processes -------------------------------------------
        x = rng.standard_normal(dims).astype(np.float32)
        feed = {input_name: x}
        feed_path = os.path.join(folder, "feed.npz")
        np.savez(feed_path, **feed)
        libs = {"tvm": os.path.join(folder, "tvm_inline.so")}
        _, export_wall, _ = _timed(lambda: inline_model.executable.export_library(libs["tvm"]))
        del inline_model
        print(f"TVM whole model written with export_library in {export_wall:.1f} s "
              f"({os.path.getsize(libs['tvm']) / 2**20:.1f} MiB)")
        if dlight:
            executable, wall, _ = _timed(lambda: _dlight_executable(mod))
            libs["tvm_dlight"] = os.path.join(folder, "tvm_inline_dlight.so")
            executable.export_library(libs["tvm_dlight"])
            del executable
            print(f"  (TVM build with dlight's CPU rules: {wall:.1f} s)")

        load_timed = os.getloadavg()[0]
        n_rounds, ort_repeat, t_repeat = settings["rounds"], settings["repeat"], settings["tvm_repeat"]
        children: Dict[tuple, List[dict]] = {}
        outputs = {e: os.path.join(folder, f"{e}_outputs.npz") for e in ENGINES}
        for round_ in range(n_rounds):
            for threads in THREAD_COUNTS:
                keys = list(ENGINES) + (["tvm_dlight"] if dlight and threads == THREAD_COUNTS[0] else [])
                if round_ % 2:
                    keys.reverse()   # alternate which engine goes first
                for key in keys:
                    engine = "onnxruntime" if key == "onnxruntime" else "tvm"
                    save = outputs[key] if key in outputs and round_ == 0 and threads == THREAD_COUNTS[0] else ""
                    line = (run_child("tvm", libs[key], feed_path, t_repeat, TVM_WARMUP, threads, save)
                            if engine == "tvm" else
                            run_child("onnxruntime", onnx_path, feed_path, ort_repeat, bench_float.WARMUP,
                                      threads, save))
                    children.setdefault((key, threads), []).append(line)
        results.max_output_difference = _relative_difference(outputs["tvm"], outputs["onnxruntime"])
        medians: Dict[tuple, List[float]] = {}
        for (key, threads), lines in children.items():
            name = key if threads == THREAD_COUNTS[0] else f"{key}_{threads}"
            results.processes[name] = lines
            medians[key, threads] = [line["median_ms"] for line in lines]
            results.latency_ms[name] = statistics.median(medians[key, threads])
        load_children = os.getloadavg()[0]

        # the partitioned model, in this process (no other engine timed here)
        clock = _SubgraphClock(host_model)
        host_model.run(feed)
        part_times: List[float] = []
        host_times: List[float] = []
        for _ in range(ort_repeat):
            clock.seconds = 0.0
            _, wall, _ = _timed(lambda: host_model.run(feed))
            part_times.append(wall)
            host_times.append(wall - clock.seconds)
        results.latency_ms["tvm_partitioned"] = 1e3 * statistics.median(part_times)
        results.latency_ms["tvm_partitioned_host"] = 1e3 * statistics.median(host_times)
        results.load_after = os.getloadavg()[0]

        ms = results.latency_ms
        tvm_lines = [line for (key, _), lines in children.items() if key != "onnxruntime" for line in lines]
        ort_lines = children["onnxruntime", THREAD_COUNTS[0]] + children["onnxruntime", THREAD_COUNTS[1]]
        print(f"latency, x86, batch 1: each engine in its own processes ({os.path.basename(__file__)} "
              f"--engine tvm|onnxruntime), {n_rounds} per engine and thread count, alternating which goes "
              f"first; a TVM process {TVM_WARMUP} warm-up run then {t_repeat} timed, an onnxruntime process "
              f"{bench_float.WARMUP} warm-up runs then {ort_repeat} timed; figures are medians of the process "
              f"medians")
        print(f"  in a new process (medians): import tvm, load the library, start the VM "
              f"{statistics.median(line['load_ms'] for line in tvm_lines):.0f} ms; import onnxruntime and "
              f"create the session {statistics.median(line['load_ms'] for line in ort_lines):.0f} ms")
        print(f"  {'':<48}{'median ms':>11}{'process medians':>22}")
        for threads in THREAD_COUNTS:
            suffix = "" if threads == THREAD_COUNTS[0] else f"_{threads}"
            tvm_m, ort_m = medians["tvm", threads], medians["onnxruntime", threads]
            per_round = [a / b for a, b in zip(tvm_m, ort_m)]
            print(f"  {_threads_text(threads)}:")
            print(f"    {'TVM whole model (default tvm.compile, untuned)':<46}{ms['tvm' + suffix]:11.1f}"
                  f"{bench_float._spread(tvm_m):>22}")
            if ("tvm_dlight", threads) in medians:
                print(f"    {'TVM whole model, dlight CPU rules':<46}{ms['tvm_dlight' + suffix]:11.1f}"
                      f"{bench_float._spread(medians['tvm_dlight', threads]):>22}   speed-up over the default "
                      f"{ms['tvm' + suffix] / ms['tvm_dlight' + suffix]:.2f}x")
            print(f"    {'onnxruntime':<46}{ms['onnxruntime' + suffix]:11.1f}{bench_float._spread(ort_m):>22}")
            print(f"    ratio TVM / onnxruntime {ms['tvm' + suffix] / ms['onnxruntime' + suffix]:.1f}x "
                  f"(per round {min(per_round):.1f}-{max(per_round):.1f}x)")
        print(f"  largest output difference TVM vs onnxruntime {results.max_output_difference:.1e} "
              f"(of the largest |output|; {_threads_text(THREAD_COUNTS[0])}, the first processes' outputs)")
        print(f"partitioned model via TVM (TIDL: float emulator), in this process after the others, "
              f"{ort_repeat} runs after 1 warm-up run (medians)")
        print(f"  whole run                                       {ms['tvm_partitioned']:10.1f} ms")
        print(f"  of which the host part (TVM code, VM, copies)   {ms['tvm_partitioned_host']:10.3f} ms   "
              f"({results.host_ops} op(s); the rest: the TIDL subgraphs in tidlx's float emulator)")
        print(f"load average (1 min): {results.load_before:.2f} at the start, {load_timed:.2f} before the "
              f"latency processes, {load_children:.2f} after them, {results.load_after:.2f} at the end, on "
              f"{os.cpu_count()} CPUs")
        return results
    finally:
        if own_dir is not None:
            own_dir.cleanup()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the tiny model, fewer frames and runs (the test)")
    parser.add_argument("--rounds", type=int,
                        help="latency processes per engine and thread count (default 3, quick 1)")
    parser.add_argument("--repeat", type=int, help="timed runs per onnxruntime process, and of the partitioned "
                                                   "model (default 5, quick 2); with --engine: timed runs")
    parser.add_argument("--tvm-repeat", type=int, help="timed runs per TVM process (default 1, quick 2)")
    parser.add_argument("--calib-frames", type=int, help="calibration frames")
    parser.add_argument("--bias-iterations", type=int, help="bias calibration iterations")
    parser.add_argument("--dlight", action="store_true", help="also TVM with dlight's CPU schedule rules")
    child = parser.add_argument_group("one engine in this process (what the latency comparison spawns)")
    child.add_argument("--engine", choices=ENGINES)
    child.add_argument("--model", help="tvm: the library TVM exported; onnxruntime: the ONNX file")
    child.add_argument("--feed", help="the inputs, an .npz (in the order of the model's inputs)")
    child.add_argument("--warmup", type=int, default=bench_float.WARMUP, help="runs before the timed ones")
    child.add_argument("--save-outputs", default="", help="write the first run's outputs to this .npz")
    child.add_argument("--threads", type=int, default=0,
                       help="tvm: TVM_NUM_THREADS; onnxruntime: intra-op threads (0: each engine's default)")
    args = parser.parse_args(argv)

    if args.engine:
        if not (args.model and args.feed):
            parser.error("--engine needs --model and --feed")
        repeat = FULL["repeat"] if args.repeat is None else args.repeat
        if args.warmup < 0 or repeat < 1 or args.threads < 0:
            parser.error("--warmup and --threads must be >= 0, --repeat >= 1")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            print(json.dumps(time_engine(args.engine, args.model, args.feed, repeat, args.warmup,
                                         args.save_outputs, args.threads)))
        return 0
    if any(v is not None and v < 1 for v in (args.rounds, args.repeat, args.tvm_repeat)):
        parser.error("--rounds, --repeat and --tvm-repeat must be >= 1")
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the flow's notes on the model, not about the timing
        run(args.quick, args.rounds, args.repeat, args.calib_frames, args.bias_iterations, args.dlight,
            args.tvm_repeat)
    print(f"bench_compile: {time.perf_counter() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
