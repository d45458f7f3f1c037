"""A/B speed of the float emulator: this checkout against another one (by default commit 468ffe1), same run.

Not part of ``make bench`` (it needs a second checkout; its name does not match bench_*.py).

    git worktree add /tmp/tidlx-base 468ffe1
    .venv/bin/python benchmarks/ab_emulator_checkouts.py --base /tmp/tidlx-base [--rounds 7] [--repeat 15]
        [--models mobilenet_v3_small,efficientnet_b0]   (models of model_set.py instead of the two below)

Times ``tidlx.emulator.run`` with its defaults (the fast kernel set) on a ResNet-18-shaped model
(224x224, batch 1, random weights, built here as ONNX) and the built-in BEVDet image stage
(ResNet-18 backbone, batch 1, 256x704). Each measurement is a fresh process that imports tidlx
from one checkout (``--child``: the checkout's folders are mapped into the ``tidlx`` namespace as
setup.py maps them, so the venv's editable install of this checkout is not used), imports both
ONNX files, warms up (plans, numba's cache) and prints the median of ``--repeat`` timed runs.
Processes of the two checkouts alternate, in ABBA order, for ``--rounds`` rounds; a figure is the
median over rounds, and the ratio new/old per round shows how noisy the machine is. Both
checkouts compile their numba kernels once first (``--warmup-processes``; ~26 s each after a change).
Not part of ``make bench`` (it needs the second checkout).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUBPACKAGES = ("ir", "emulator", "frontends", "backends")  # in dependency order


# -- the child: one checkout, both models ---------------------------------------------------------

def load_tidlx(root: str):
    """Imports the ``tidlx`` package of the checkout at ``root`` (folders mapped as setup.py does)."""
    root = os.path.abspath(root)

    def package(name, folder):
        spec = importlib.util.spec_from_file_location(name, os.path.join(folder, "__init__.py"),
                                                      submodule_search_locations=[folder])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        return spec, module

    top_spec, top = package("tidlx", os.path.join(root, "tidlx"))
    for sub in SUBPACKAGES:  # before tidlx/__init__ runs (it imports .ir)
        spec, module = package(f"tidlx.{sub}", os.path.join(root, sub))
        setattr(top, sub, module)
    for sub in SUBPACKAGES:
        sys.modules[f"tidlx.{sub}"].__spec__.loader.exec_module(sys.modules[f"tidlx.{sub}"])
    top_spec.loader.exec_module(top)
    return top


def child(args) -> int:
    tidlx = load_tidlx(args.root)
    import onnx

    from tidlx.emulator import run
    from tidlx.frontends.onnx import from_onnx

    assert os.path.dirname(sys.modules["tidlx.emulator"].__file__).startswith(os.path.abspath(args.root))
    result = {}
    for path in args.model:
        model = onnx.load(path)
        feeds = dict(np.load(path + ".npz"))
        mod = from_onnx(model)
        for _ in range(args.warmup):
            run(mod, feeds)
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            run(mod, feeds)
            times.append((time.perf_counter() - start) * 1e3)
        result[os.path.basename(path)] = statistics.median(times)
    print(json.dumps(result))
    return 0


# -- the parent: models, alternation, table --------------------------------------------------------

def resnet18_onnx(seed: int = 0, image: int = 224):
    """ResNet-18 (conv/batch-norm/relu, max pool, 8 basic blocks, global pool, dense) with random weights."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(arr.astype(np.float32), name))
        return name

    def conv_bn(x, name, cin, cout, k, stride, relu=True):
        w = init(name + ".w", rng.normal(0, np.sqrt(2.0 / (cin * k * k)), (cout, cin, k, k)))
        nodes.append(helper.make_node("Conv", [x, w], [name + ".c"], kernel_shape=[k, k], strides=[stride] * 2,
                                      pads=[k // 2] * 4, name=name))
        bn = [init(f"{name}.{p}", v) for p, v in zip(("g", "b", "m", "v"), (
            rng.uniform(0.5, 1.5, cout), rng.uniform(-0.2, 0.2, cout), rng.uniform(-0.2, 0.2, cout),
            rng.uniform(0.5, 2.0, cout)))]
        nodes.append(helper.make_node("BatchNormalization", [name + ".c"] + bn, [name + ".bn"], name=name + "_bn"))
        if not relu:
            return name + ".bn"
        nodes.append(helper.make_node("Relu", [name + ".bn"], [name + ".r"], name=name + "_relu"))
        return name + ".r"

    x = conv_bn("input", "conv1", 3, 64, 7, 2)
    nodes.append(helper.make_node("MaxPool", [x], ["pool"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
    x, cin = "pool", 64
    for stage, (c, stride) in enumerate(((64, 1), (128, 2), (256, 2), (512, 2)), start=1):
        for block in range(2):
            name, s = f"layer{stage}.{block}", stride if block == 0 else 1
            y = conv_bn(x, name + ".conv1", cin, c, 3, s)
            y = conv_bn(y, name + ".conv2", c, c, 3, 1, relu=False)
            short = conv_bn(x, name + ".down", cin, c, 1, s, relu=False) if (s != 1 or cin != c) else x
            nodes.append(helper.make_node("Add", [y, short], [name + ".add"]))
            nodes.append(helper.make_node("Relu", [name + ".add"], [name + ".out"]))
            x, cin = name + ".out", c
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    w = init("fc.w", rng.normal(0, np.sqrt(1.0 / 512), (1000, 512)))
    b = init("fc.b", rng.uniform(-0.1, 0.1, 1000))
    nodes.append(helper.make_node("Gemm", ["flat", w, b], ["logits"], transB=1))
    graph = helper.make_graph(nodes, "resnet18", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                                [1, 3, image, image])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def write_models(folder: str, names=()):
    """The benchmark models as ONNX files with their inputs beside them (``.onnx.npz``): ResNet-18
    and the BEVDet image stage, or the models of model_set.py named in ``names``."""
    import onnx

    if names:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import model_set

        models = [(f"{name}.onnx", model_set.MODELS[name][0]()) for name in names]
    else:
        from tidlx.models import bevdet_img_stage

        models = [("resnet18_b1.onnx", resnet18_onnx()),
                  ("bevdet_r18_b1.onnx", bevdet_img_stage(backbone="resnet18", batch=1))]
    paths = []
    for name, model in models:
        path = os.path.join(folder, name)
        onnx.save(model, path)
        inp = model.graph.input[0]
        dims = tuple(d.dim_value for d in inp.type.tensor_type.shape.dim)
        np.savez(path + ".npz", **{inp.name: np.random.default_rng(1).standard_normal(dims, dtype=np.float32)})
        paths.append(path)
    return paths


def measure(root: str, paths, args) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--root", root, "--repeat", str(args.repeat),
           "--warmup", str(args.warmup)]
    for p in paths:
        cmd += ["--model", p]
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="/tmp/tidlx-base", help="the other checkout (old code)")
    parser.add_argument("--new", default=HERE, help="this checkout (new code)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--warmup-processes", type=int, default=1)
    parser.add_argument("--models", default="", help="comma-separated names from model_set.MODELS instead")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--model", action="append", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    model_names = [m for m in args.models.split(",") if m]
    if model_names:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import model_set

        unknown = [m for m in model_names if m not in model_set.MODELS]
        if unknown:
            parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(model_set.MODELS)}")
    if not os.path.isdir(os.path.join(args.base, "emulator")):
        print(f"no checkout at {args.base}: git worktree add {args.base} 468ffe1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_models(tmp, model_names)
        names = [os.path.basename(p) for p in paths]
        variants = {"old": args.base, "new": args.new}
        for _ in range(args.warmup_processes):  # numba compiles (or loads) its cache in each checkout
            for root in variants.values():
                measure(root, paths, args)
        results = {v: [] for v in variants}
        for r in range(args.rounds):
            order = ("old", "new") if r % 2 == 0 else ("new", "old")
            for v in order:
                results[v].append(measure(variants[v], paths, args))
            print(f"round {r + 1}: " + "; ".join(
                f"{n}: old {results['old'][-1][n]:.1f} ms, new {results['new'][-1][n]:.1f} ms" for n in names),
                flush=True)
    print(f"\n{'model':22} {'old ms':>8} {'new ms':>8} {'new/old':>8}   per-round new/old (min..max)")
    for n in names:
        old = [x[n] for x in results["old"]]
        new = [x[n] for x in results["new"]]
        ratios = [b / a for a, b in zip(old, new)]
        print(f"{n:22} {statistics.median(old):8.1f} {statistics.median(new):8.1f} "
              f"{statistics.median(new) / statistics.median(old):8.3f}   {min(ratios):.3f}..{max(ratios):.3f} "
              f"(median {statistics.median(ratios):.3f}; old runs {min(old):.1f}..{max(old):.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
