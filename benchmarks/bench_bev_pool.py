"""bev_pool (tidlx/models/bev_pool.py): the TVM-built kernel against the numpy reference kernel.

The full model's sizes: 6 cameras x 59 depth bins x 16 x 44 frustum points (256 x 704 images), C = 64,
BEVDet's 128 x 128 grid, the index from the built-in model's camera geometry. Three ways, alternated
in one process (A B C A B C ...), medians of ``--rounds`` (default 9):

* reference: ``bev_pool_reference`` (numpy ``add.at``), what ``tidlx.emulate`` runs;
* tvm: the op alone built for x86 by ``tidlx.backends.tvm.build`` (the TE extern scatter), one VM call;
* loop-free numpy: ``np.bincount`` per channel (float64 sums, another order): a baseline for what
  plain numpy can do, not the reference's bits;
* the part of the tvm time that is copying the 64 MB volume into a TVM tensor (``TvmModel.run`` does).

Checks (the script fails otherwise): the TVM kernel gives the reference's bytes, the bincount form
matches within 1e-5 relative. Run: ``.venv/bin/python benchmarks/bench_bev_pool.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np


def _bincount_pool(volume, index, grid):
    rows, cols = grid
    batch, channels = volume.shape[0], volume.shape[-1]
    flat = index.reshape(-1)
    kept = flat >= 0
    cells = flat[kept]
    points = volume.reshape(batch, -1, channels)[:, kept]
    out = np.empty((batch, channels, rows * cols), np.float32)
    for b in range(batch):
        for c in range(channels):
            out[b, c] = np.bincount(cells, weights=points[b, :, c], minlength=rows * cols)
    return out.reshape(batch, channels, rows, cols)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)

    import tvm

    from tidlx.backends.tvm import build
    from tidlx.ir import Function, IRModule, TensorType, Var, call, const
    from tidlx.models.bev_pool import (FULL_GRID, OP_NAME, BevPoolAttrs, bev_pool_reference, cameras,
                                       frustum_cell_index, register_bev_pool)
    from tidlx.models.bevdet import DEPTH_BINS

    register_bev_pool()
    cols, rows, _ = FULL_GRID
    index = frustum_cell_index(cameras(6, 256, 704, seed=0), 256, 704, DEPTH_BINS, FULL_GRID)
    volume = np.random.default_rng(0).standard_normal((1,) + index.shape + (64,)).astype(np.float32)
    x = Var("volume", TensorType(volume.shape, "float32"))
    mod = IRModule({"main": Function([x], call(OP_NAME, x, const(index), grid_size=(rows, cols)))})
    started = time.perf_counter()
    built = build(mod, "x86")
    build_seconds = time.perf_counter() - started
    attrs = BevPoolAttrs((rows, cols))

    ways = {
        "reference (numpy add.at)": lambda: bev_pool_reference([volume, index], attrs, None),
        "tvm x86 (TE extern scatter)": lambda: built.run({"volume": volume})[0],
        "numpy bincount per channel": lambda: _bincount_pool(volume, index, (rows, cols)),
        "of tvm: the input's copy": lambda: tvm.runtime.tensor(volume),
    }
    results = {name: fn() for name, fn in ways.items() if not name.startswith("of tvm")}  # warm-up, and the values the checks read
    reference = results["reference (numpy add.at)"]
    if results["tvm x86 (TE extern scatter)"].tobytes() != reference.tobytes():
        print("FAILED: the TVM kernel does not give the reference's bytes")
        return 1
    bincount = results["numpy bincount per channel"]
    error = float(np.max(np.abs(bincount - reference))) / float(np.max(np.abs(reference)))
    if error > 1e-5:
        print(f"FAILED: the bincount form differs from the reference by {error:.2e} relative")
        return 1

    times = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, fn in ways.items():  # alternated: machine load hits every way alike
            started = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - started)
    kept = int(np.count_nonzero(index >= 0))
    print(f"bev_pool: {index.size} frustum points ({kept} kept) x C=64 -> {rows} x {cols} grid; "
          f"TVM build {build_seconds:.2f} s; medians of {args.rounds} alternating rounds")
    base = statistics.median(times["reference (numpy add.at)"])
    for name, values in times.items():
        median = statistics.median(values)
        ratio = "" if name.startswith("of tvm") else f"   {base / median:5.2f}x the reference's speed"
        print(f"  {name:30s} {median * 1e3:8.2f} ms{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
