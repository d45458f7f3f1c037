"""Deploy folders (backends/tvm/deploy): the host part as TVM-built kernels plus a plain C driver.

* x86: deploy_lib.so + the driver, TIDL calls served over the pipe by the float emulator, matches
  ``tidlx.emulate`` within 1e-5 relative; with a QuantizedModel it matches ``tidlx.emulate(qmodel)``;
* c7x: every .c of the folder compiles with ``gcc -std=c99 -Wall -Werror -c`` and only the folder's
  include directories, and built for x86 with the driver and the pipe bridge it matches too;
* the same model deployed twice gives byte-identical deploy_lib.c, deploy_params.params, deploy_graph.json;
* deploy_graph.json and deploy_params.params say what the driver does.

Arm under qemu: test_tvm_arm.py. The folders are written once per module (TVM builds cost seconds).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import warnings

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

import tidlx  # noqa: E402
from tidlx.backends.tvm import TvmBackendError, export  # noqa: E402
from tidlx.backends.tvm.deploy import deploy, run_deployed  # noqa: E402
from tidlx.backends.tvm.deploy import run as deploy_run  # noqa: E402
from tidlx.ir import Function, IRModule, TensorType, TidlxError, Tuple, Var, call, const  # noqa: E402
from tidlx.ir.errors import TidlxInternalError  # noqa: E402
from test_tvm_models import assert_close, relative_error  # noqa: E402  (the same measure)

HOST_CC = shutil.which("gcc")
needs_gcc = pytest.mark.skipif(HOST_CC is None, reason="gcc is not installed (apt-get install gcc)")


def two_subgraph_model(seed=4):
    """conv/relu/pool/resize (TIDL) -> softmax * power by a constant (host) -> conv/relu/sigmoid (TIDL),
    and a mean of the pooled tensor (host): 2 TIDL subgraphs, 2 host kernels, a host constant."""
    rng = np.random.default_rng(seed)
    x = Var("x", TensorType((1, 3, 10, 12), "float32"))
    y = call("nn.conv2d", x, const((rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)), padding=(1, 1))
    y = call("nn.relu", call("nn.bias_add", y, const(rng.standard_normal(8).astype(np.float32))))
    pooled = call("nn.max_pool2d", y, pool_size=(2, 2), strides=(2, 2))
    z = call("nn.softmax", call("image.resize2d", pooled, size=(10, 12), method="linear"), axis=1)
    z = call("power", z, const(np.linspace(0.5, 2, 8, dtype=np.float32).reshape(1, 8, 1, 1)))
    z = call("nn.conv2d", z, const((rng.standard_normal((4, 8, 3, 3)) * 0.3).astype(np.float32)), padding=(1, 1))
    z = call("nn.relu", z)
    return IRModule({"main": Function([x], Tuple([call("sigmoid", z), call("mean", pooled, axis=(2, 3))]))})


def frames(n, seed=5):
    return np.random.default_rng(seed).standard_normal((n, 3, 10, 12)).astype(np.float32)


@pytest.fixture(scope="module")
def partitioned():
    part, _ = tidlx.partition(two_subgraph_model())
    assert sorted(n for n, f in part.items() if f.attrs.get("Compiler") == "tidl") == ["tidl_0", "tidl_1"]
    return part


@pytest.fixture(scope="module")
def folders(partitioned, tmp_path_factory):
    root = tmp_path_factory.mktemp("deploy")
    return {target: (str(root / target), deploy(partitioned, root / target, target, name="two_subgraphs"))
            for target in ("x86", "c7x")}


def test_the_folder_has_ti_artifact_names_and_the_driver(folders):
    for target, (directory, paths) in folders.items():
        library = "deploy_lib.c" if target == "c7x" else "deploy_lib.so"
        assert paths["lib"] == os.path.join(directory, library)
        assert paths["graph"].endswith("deploy_graph.json") and paths["params"].endswith("deploy_params.params")
        for rel in ("driver/deploy_model.c", "driver/deploy_model.h", "driver/deploy_weights.c",
                    "driver/tidl_subgraphs.h", "driver/tidlx_runtime.c", "include/tvm/ffi/c_api.h",
                    "include/dlpack/dlpack.h", "driver/check/tidl_pipe.c", "driver/check/check_main.c"):
            assert os.path.isfile(os.path.join(directory, rel)), rel
    header = open(os.path.join(folders["c7x"][0], "driver/tidl_subgraphs.h")).read()
    for n in (0, 1):
        assert f"int32_t tidl_subgraph_{n}_process(const DLTensor* inputs" in header
    model_h = open(os.path.join(folders["c7x"][0], "driver/deploy_model.h")).read()
    assert "int model_run(const float* in_x, float* out_0, float* out_1);" in model_h


def test_the_graph_json_is_the_flat_call_sequence(folders, partitioned):
    directory, paths = folders["x86"]
    doc = json.load(open(paths["graph"]))
    assert doc["format"] == "tidlx-deploy-graph" and doc["version"] == 1 and doc["target"] == "x86"
    assert doc["tvm_target"] == {"kind": "llvm"} and doc["library"] == "deploy_lib.so"
    kinds = [(n["kind"], n["symbol"]) for n in doc["nodes"]]
    assert kinds[0] == ("tidl", "tidl_subgraph_0_process") and ("tidl", "tidl_subgraph_1_process") in kinds
    kernels = [n for n in doc["nodes"] if n["kind"] == "kernel"]
    assert len(kernels) == 2 and all(n["symbol"] == "__tvm_ffi_" + n["name"] for n in kernels)
    tensors = {t["id"]: t for t in doc["tensors"]}
    (x,) = doc["inputs"]
    assert tensors[x] == {"id": x, "kind": "input", "name": "x", "shape": [1, 3, 10, 12], "dtype": "float32",
                          "bytes": 1440}
    assert [tensors[h]["shape"] for h in doc["heads"]] == [[1, 4, 10, 12], [1, 8]]
    # every value lives in a storage big enough; a value is never written over while it is still read
    storages = {s["id"]: s["bytes"] for s in doc["storages"]}
    live = {}
    for i, node in enumerate(doc["nodes"]):
        for t in node["outputs"]:
            sid = tensors[t]["storage"]
            assert storages[sid] >= tensors[t]["bytes"]
            if sid in live:
                older = live[sid]
                assert not any(older in n["inputs"] for n in doc["nodes"][i:]), (older, t)
            live[sid] = t
    assert len(storages) < sum(1 for t in doc["tensors"] if t["kind"] == "value")  # storages are reused


def test_the_params_file_holds_the_constants_the_driver_embeds(folders):
    directory, paths = folders["c7x"]
    doc = json.load(open(paths["graph"]))
    params = tvm.runtime.load_param_dict(open(paths["params"], "rb").read())
    assert sorted(params) == sorted(doc["params"]) == ["p0"]
    value = params["p0"].numpy()
    np.testing.assert_array_equal(value, np.linspace(0.5, 2, 8, dtype=np.float32).reshape(1, 8, 1, 1))
    weights = open(os.path.join(directory, "driver/deploy_weights.c")).read()
    first = ",".join(f"0x{b:02x}" for b in value.tobytes()[:8])
    assert "deploy_param_p0[32]" in weights and first in weights


@needs_gcc
def test_x86_host_kernels_with_tidl_in_float_match_the_emulator(folders, partitioned):
    directory, _ = folders["x86"]
    for seed in (5, 6):
        x = {"x": frames(1, seed)}
        assert_close(run_deployed(directory, x, partitioned), tidlx.emulate(partitioned, x))


@needs_gcc
def test_x86_with_a_quantized_model_matches_the_fixed_point_emulator(folders, partitioned, tmp_path):
    directory, _ = folders["x86"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fewer calibration frames than TI's default of 20
        qmodel = tidlx.quantize(partitioned, {"tensor_bits": 8}, calib={"x": frames(2, seed=1)})
    x = {"x": frames(1, seed=9)}
    got = run_deployed(directory, x, qmodel)
    assert_close(got, tidlx.emulate(qmodel, x))
    # it is the fixed point: 8-bit results differ from the float model
    assert max(relative_error(g, f) for g, f in zip(got, tidlx.emulate(partitioned, x))) > 1e-3
    # a QuantizedModel deploys as its partitioned module: the same folder
    again = deploy(qmodel, tmp_path, "c7x", name="two_subgraphs")
    for key in ("graph", "lib", "params", "driver/deploy_model.c"):
        assert open(again[key], "rb").read() == open(folders["c7x"][1][key], "rb").read(), key


def _compile_each_c_file(directory, extra=()):
    includes = [f"-I{os.path.join(directory, d)}" for d in ("include", "driver", "driver/check")]
    sources = sorted(os.path.relpath(os.path.join(d, f), directory)
                     for d, _, files in os.walk(directory) for f in files if f.endswith(".c"))
    for rel in sources:
        done = subprocess.run([HOST_CC, "-std=c99", "-Wall", "-Werror", *extra, "-c", *includes, os.path.join(directory, rel),
                               "-o", os.devnull], capture_output=True, text=True)
        assert done.returncode == 0, f"{rel}:\n{done.stderr}"
    return sources


@needs_gcc
def test_every_c7x_file_compiles_strictly_with_only_the_folders_headers(folders):
    directory, _ = folders["c7x"]
    sources = _compile_each_c_file(directory)
    assert "deploy_lib.c" in sources and "driver/deploy_model.c" in sources and len(sources) == 7
    # the LLVM targets' driver files are as strict (their kernels are deploy_lib.so)
    assert "driver/tidlx_llvm_context.c" in _compile_each_c_file(folders["x86"][0])
    # and ISO C99 itself: our headers mark their one C11 construct (TVMFFIAny's unnamed union)
    _compile_each_c_file(directory, ["-pedantic"])
    text = open(os.path.join(directory, "deploy_lib.c")).read()
    assert '#include "tvm/ffi/c_api.h"' in text and "__tvm_ffi_" in text


@needs_gcc
def test_c7x_source_built_for_x86_with_the_driver_matches_the_emulator(folders, partitioned):
    directory, _ = folders["c7x"]
    x = {"x": frames(1, 7)}
    assert_close(run_deployed(directory, x, partitioned), tidlx.emulate(partitioned, x))


@pytest.mark.parametrize("target", ["c7x", "x86"])
def test_the_same_model_deployed_twice_gives_the_same_bytes(partitioned, tmp_path, target):
    # every file, deploy_lib.so too (the same toolchain links the same bytes)
    first = deploy(partitioned, tmp_path / "a", target, name="m")
    again = deploy(tidlx.partition(two_subgraph_model())[0], tmp_path / "b", target, name="m")
    assert sorted(first) == sorted(again)
    for key in first:
        assert open(first[key], "rb").read() == open(again[key], "rb").read(), key


@needs_gcc
def test_a_failing_subgraph_reaches_the_caller_as_itself(folders, partitioned):
    directory, _ = folders["x86"]

    def broken(inputs):
        raise TidlxError("@tidl_1: the subgraph failed")

    from tidlx.backends.tvm.build import _subgraph_runners

    runners = dict(_subgraph_runners(partitioned, "float", None, "fast"))
    runners["tidl_1"] = broken
    with pytest.raises(TidlxError, match="@tidl_1: the subgraph failed"):
        run_deployed(directory, {"x": frames(1)}, runners)


@needs_gcc
def test_a_failing_kernel_is_an_internal_error_with_the_drivers_message(folders, tmp_path):
    directory, _ = folders["c7x"]
    broken = tmp_path / "broken"
    shutil.copytree(directory, broken)
    model_c = broken / "driver" / "deploy_model.c"
    # a wrong shape in a kernel's tensor descriptor: TVM's argument checks refuse it
    text = model_c.read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("static int64_t shape_") and "{1, 8}" in ln)
    model_c.write_text(text.replace(line, line.replace("{1, 8}", "{1, 9}")))
    with pytest.raises(TidlxInternalError, match=r"model_run failed: node \d+: kernel mean: ValueError: Invalid"):
        run_deployed(broken, {"x": frames(1)}, tidlx.partition(two_subgraph_model())[0])


def _drop(doc, *path):
    *where, key = path
    for step in where:
        doc = doc[step]
    del doc[key]


@pytest.mark.parametrize("damage, message", [
    (lambda d: _drop(d, "nodes", 0, "kind"), r"nodes\[0\] lacks a 'kind'"),
    (lambda d: d["nodes"][0].update(inputs=[999]), r"nodes\[0\] lacks .* lists of the tensors' ids"),
    (lambda d: _drop(d, "tensors", 0, "bytes"), r"tensors\[0\] lacks"),
    (lambda d: _drop(d, "tensors", 0, "name"), r"input tensor 0 has no str 'name'"),
    (lambda d: d.update(heads="all"), r"'heads' is not a list of the tensors' ids"),
    (lambda d: d.update(target="riscv"), r"'target' 'riscv' is not one of"),
    (lambda d: _drop(d, "nodes"), r"'nodes' is missing"),
])
def test_a_damaged_graph_file_is_named_before_anything_runs(folders, partitioned, tmp_path, damage, message):
    directory, _ = folders["x86"]
    copy = tmp_path / "copy"
    shutil.copytree(directory, copy)
    doc = json.loads((copy / "deploy_graph.json").read_text())
    damage(doc)
    (copy / "deploy_graph.json").write_text(json.dumps(doc))
    with pytest.raises(TvmBackendError, match=r"deploy_graph.json: " + message):
        run_deployed(copy, {"x": frames(1)}, partitioned)


def test_bad_inputs_targets_and_missing_tools_are_named(folders, partitioned, tmp_path, monkeypatch):
    directory, _ = folders["x86"]
    with pytest.raises(TvmBackendError, match=r"input 'x' must be float32 \(1, 3, 10, 12\)"):
        run_deployed(directory, {"x": np.zeros((1, 3, 10, 11), np.float32)}, partitioned)
    with pytest.raises(TvmBackendError, match="unknown input"):
        run_deployed(directory, {"x": frames(1), "y": 1}, partitioned)
    with pytest.raises(TvmBackendError, match="calls TIDL subgraph.*@tidl_0.*pass the partitioned model"):
        run_deployed(directory, {"x": frames(1)})
    with pytest.raises(TvmBackendError, match="no such file"):
        run_deployed(tmp_path, {"x": frames(1)}, partitioned)
    with pytest.raises(TvmBackendError, match="unknown target 'riscv'"):
        deploy(partitioned, tmp_path / "r", "riscv")
    with pytest.raises(TvmBackendError, match="IRModule or a QuantizedModel"):
        deploy("model.onnx", tmp_path / "r", "x86")
    monkeypatch.setenv("TIDLX_CACHE_DIR", "/proc/no-such-place")
    with pytest.raises(TvmBackendError, match="cache .* is not writable.*TIDLX_CACHE_DIR"):
        deploy_run.build_driver(directory)
    monkeypatch.setattr(deploy_run.shutil, "which", lambda name: None)
    with pytest.raises(TvmBackendError, match="gcc .*make system-packages"):
        run_deployed(directory, {"x": frames(1)}, partitioned)
    with pytest.raises(TvmBackendError, match="aarch64-linux-gnu-gcc.*qemu-aarch64"):
        deploy_run.build_driver(directory, "arm")


def test_export_writes_the_deploy_folder(tmp_path):
    paths = export(two_subgraph_model(), tmp_path, "c7x")
    assert paths["lib"].endswith("deploy_lib.c") and os.path.isfile(paths["graph"])
    doc = json.load(open(paths["graph"]))
    assert all(n["kind"] == "kernel" for n in doc["nodes"])  # unpartitioned: everything is host code


@needs_gcc
def test_inline_deploys_the_tidl_subgraphs_as_kernels_too(partitioned, tmp_path):
    paths = deploy(partitioned, tmp_path, "x86", tidl="inline")
    doc = json.load(open(paths["graph"]))
    assert doc["nodes"] and all(n["kind"] == "kernel" for n in doc["nodes"])
    x = {"x": frames(1)}
    assert_close(run_deployed(tmp_path, x), tidlx.emulate(partitioned, x))


@pytest.fixture(scope="module")
def bevdet():
    from tidlx.frontends.onnx import from_onnx
    from tidlx.models import bevdet_img_stage_tiny

    mod = from_onnx(bevdet_img_stage_tiny("resnet18", batch=1))
    partitioned, _ = tidlx.partition(mod)
    frame = {"img": np.random.default_rng(0).standard_normal((1, 3, 64, 192)).astype(np.float32)}
    return mod, partitioned, frame


@needs_gcc
def test_bevdet_tiny_x86_and_c7x_match_the_float_emulator(bevdet, tmp_path):
    mod, partitioned, frame = bevdet
    ref = tidlx.emulate(mod, frame)
    for target in ("x86", "c7x"):
        paths = deploy(partitioned, tmp_path / target, target)
        doc = json.load(open(paths["graph"]))
        assert any(n["kind"] == "tidl" for n in doc["nodes"]) and any(n["kind"] == "kernel" for n in doc["nodes"])
        assert_close(run_deployed(tmp_path / target, frame, partitioned), ref)
    _compile_each_c_file(str(tmp_path / "c7x"))


def dtype_model():
    x = Var("x", TensorType((2, 5), "float32"))
    b = Var("mask:0", TensorType((2, 5), "bool"))  # not a C identifier
    return IRModule({"main": Function([x, b], Tuple([
        call("greater", x, const(np.float32(0))), call("logical_and", b, call("less", x, const(np.float32(0.5)))),
        call("cast", x, dtype="int8"), call("cast", x, dtype="float16")]))})


@needs_gcc
@pytest.mark.parametrize("target", ["x86", "c7x"])
def test_bool_int8_and_float16_tensors_cross_the_driver_exactly(target, tmp_path):
    mod = dtype_model()
    x = {"x": np.random.default_rng(1).standard_normal((2, 5)).astype(np.float32) * 3,
         "mask:0": np.array([[1, 0, 1, 0, 1]] * 2, bool)}
    deploy(mod, tmp_path, target)
    assert "const uint8_t* in_mask_0" in open(tmp_path / "driver" / "deploy_model.h").read()
    if target == "c7x":
        _compile_each_c_file(str(tmp_path))
    got = run_deployed(tmp_path, x)
    for g, r in zip(got, tidlx.emulate(mod, x)):
        assert g.dtype == r.dtype and np.array_equal(g, r)


def test_subgraph_numbers_keep_the_partitioners_and_never_collide():
    from tidlx.backends.tvm.deploy.graph import subgraph_numbers

    assert subgraph_numbers(["tidl_0", "tidl_1"]) == {"tidl_0": 0, "tidl_1": 1}
    assert subgraph_numbers(["tidl_3", "tidl_1"]) == {"tidl_3": 3, "tidl_1": 1}
    assert subgraph_numbers(["custom", "tidl_0", "other"]) == {"tidl_0": 0, "custom": 1, "other": 2}


@needs_gcc
def test_a_run_that_never_ends_is_killed_after_the_timeout(folders, partitioned):
    import time

    from tidlx.backends.tvm.build import _subgraph_runners

    runners = dict(_subgraph_runners(partitioned, "float", None, "fast"))
    runners["tidl_1"] = lambda inputs: time.sleep(3)  # longer than the timeout, whatever the machine
    with pytest.raises(TidlxInternalError, match="ran longer than 0.5 s"):
        run_deployed(folders["x86"][0], {"x": frames(1)}, runners, timeout=0.5)
