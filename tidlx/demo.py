"""``tidlx demo``: the main job on the built-in BEVDet image-stage model.

Builds the model as ONNX, imports it, runs it in the float emulator next to onnxruntime,
prints how well they agree, then partitions it for TIDL as TI's flow would.
"""

from __future__ import annotations

import os
import time

import numpy as np

from .ir import TidlxError


def relative_error(ours: np.ndarray, reference: np.ndarray) -> float:
    """max |ours - reference| / max |reference| (the acceptance measure used throughout)."""
    scale = float(np.max(np.abs(reference))) or 1.0
    return float(np.max(np.abs(ours.astype(np.float64) - reference.astype(np.float64)))) / scale


def run_demo(backbone: str = "resnet50", batch: int = 6, tiny: bool = False, out_dir: str = "out",
             console=None) -> dict:
    from rich.console import Console
    from rich.table import Table

    from . import emulate, load
    from .cli import op_count_table
    from .models import bevdet_img_stage

    console = console or Console(highlight=False)
    os.makedirs(out_dir, exist_ok=True)
    name = f"bevdet_{backbone}_b{batch}{'_tiny' if tiny else ''}.onnx"
    path = os.path.join(out_dir, name)

    t0 = time.perf_counter()
    model = bevdet_img_stage(backbone=backbone, batch=batch, tiny=tiny, path=path)
    console.print(f"[bold]1. built[/bold] {path} ({os.path.getsize(path) / 1e6:.1f} MB, "
                  f"{len(model.graph.node)} ONNX nodes) in {time.perf_counter() - t0:.2f} s")

    t0 = time.perf_counter()
    mod = load(path)
    console.print(f"[bold]2. imported[/bold] into the tidlx IR in {time.perf_counter() - t0:.2f} s")
    console.print(op_count_table(mod, title="Relay ops after import"))

    shape = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    rng = np.random.default_rng(0)
    image = rng.standard_normal(shape, dtype=np.float32)
    input_name = model.graph.input[0].name

    try:
        import onnxruntime as ort
    except ImportError:  # the demo compares against onnxruntime, installed with the test extras
        raise TidlxError("the demo needs onnxruntime: pip install 'tidlx[test]'") from None
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    t0 = time.perf_counter()
    reference = session.run(None, {input_name: image})
    t_ort = time.perf_counter() - t0

    t0 = time.perf_counter()
    ours = emulate(mod, {input_name: image})
    t_emu = time.perf_counter() - t0

    table = Table(title="3. float emulator vs onnxruntime (same input)")
    for col in ("output", "shape", "max abs error / max abs", "agrees (<= 1e-4)"):
        table.add_column(col)
    errors = {}
    for out_info, got, want in zip(model.graph.output, ours, reference):
        err = relative_error(got, want) if got.shape == want.shape else float("inf")
        errors[out_info.name] = err
        table.add_row(out_info.name, str(tuple(want.shape)), f"{err:.2e}", "yes" if err <= 1e-4 else "NO")
    console.print(table)
    console.print(f"time: tidlx emulator {t_emu:.2f} s (first run, includes kernel compilation), "
                  f"onnxruntime {t_ort:.2f} s")

    # The questions a TIDL user asks first: does it export, into how many subgraphs, what falls back.
    from . import partition

    console.print("[bold]4. TIDL partition[/bold] (TI's flow; details: tidlx partition MODEL)")
    _, report = partition(mod)
    console.print(f"   as is: {report.headline()}")
    if batch > 1:
        _, report = partition(mod, {"max_batch_size": batch})
        console.print(f"   with max_batch_size={batch} (or TIDL_RELAY_MAX_BATCH_SIZE={batch}): {report.headline()}")
    for host in report.host_ops[:5]:
        console.print(f"   host: {host.reason}", markup=False)
    return {"path": path, "errors": errors, "emulator_s": t_emu, "onnxruntime_s": t_ort}
