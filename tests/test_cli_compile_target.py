"""``tidlx compile --target x86|arm|c7x``: the host part built by apache-tvm beside the TIDL artifacts
(backends/tvm/deploy, docs/tvm.md), listed and checked by the manifest, and ``tidlx run DIR`` running it
(x86 natively, arm under qemu-aarch64, c7x's C source built for this machine) with the TIDL subgraphs
served from their artifacts; the same numbers as the IR host part, the same bytes twice."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from tidlx.cli import main
from tidlx.compiled import load_compiled
from tidlx.emulator.fixed.artifact_format import ArtifactError
from tidlx.models import bevdet_img_stage_tiny

pytest.importorskip("tvm")

#: calibration kept short: the host part is what these tests are about
QUICK = ["-o", "advanced_options:calibration_frames=1", "-o", "advanced_options:calibration_iterations=1"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("compile_target")
    bevdet_img_stage_tiny(backbone="resnet18", batch=1, height=64, width=192, path=str(root / "tiny.onnx"))
    rng = np.random.default_rng(3)
    np.savez(root / "x.npz", img=rng.standard_normal((1, 3, 64, 192)).astype(np.float32))
    return root


def _compile(files, target, folder_name, capsys=None):
    out = files / folder_name
    if not out.exists():
        assert main(["compile", str(files / "tiny.onnx"), "-o", str(out), "--target", target] + QUICK) == 0
    return out


def _outputs(path):
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def _run(folder, files, name, *extra):
    out = files / f"{name}.npz"
    assert main(["run", str(folder), "--input", str(files / "x.npz"), "--output", str(out), *extra]) == 0
    return _outputs(out)


def _close(a, b):
    assert a.keys() == b.keys()
    for k in a:
        scale = max(float(np.abs(b[k]).max()), 1e-30)
        assert float(np.abs(a[k] - b[k]).max()) <= 1e-5 * scale, k


@pytest.fixture(scope="module")
def x86(files):
    return _compile(files, "x86", "tiny_x86")


def test_the_folder_holds_the_host_part_and_the_manifest_lists_it(x86, capsys):
    names = {os.path.relpath(os.path.join(r, f), x86).replace(os.sep, "/")
             for r, _, fs in os.walk(x86) for f in fs}
    for name in ("deploy_lib.so", "deploy_graph.json", "deploy_params.params", "driver/deploy_model.c",
                 "include/tvm/ffi/c_api.h", "host_module.txt", "tidl_subgraph0_net.bin", "tidlx_artifacts.json"):
        assert name in names, name
    manifest = json.loads((x86 / "tidlx_artifacts.json").read_text())
    assert manifest["host"]["target"] == "x86"
    assert set(manifest["host"]["files"]) <= set(manifest["sha256"])
    assert names == set(manifest["sha256"]) | {"tidlx_artifacts.json"}
    assert load_compiled(x86).host_target == "x86"


def test_run_dir_runs_the_built_host_part_with_the_ir_host_parts_numbers(x86, files, capsys, monkeypatch):
    import tidlx.backends.tvm.deploy as deploy

    folders = []
    real = deploy.run_deployed
    monkeypatch.setattr(deploy, "run_deployed", lambda folder, *a, **k: folders.append(folder) or real(folder, *a, **k))
    capsys.readouterr()
    deployed = _run(x86, files, "x86_deployed")
    assert folders == [str(x86)]   # the driver of this folder ran
    said = capsys.readouterr().out
    assert "host part: the host part as deploy_lib.so (TVM-built, x86) through the C driver" in said
    ir = _run(x86, files, "x86_ir", "--host", "ir")
    assert "host part: the IR host part (host_module.txt) in the float emulator, as asked" in capsys.readouterr().out
    assert set(deployed) == {"depth", "volume"}
    _close(deployed, ir)


def test_a_style_4_folder_runs_its_host_part_with_the_ir_host_parts_numbers(files, capsys):
    """target_device=AM68A (style 4, docs/numerics.md §12): the folder's subgraphs are style 6, and the built
    host part between them gives the IR host part's numbers."""
    out = files / "tiny_x86_am68a"
    assert main(["compile", str(files / "tiny.onnx"), "-o", str(out), "--target", "x86", "-o",
                 "target_device=AM68A"] + QUICK) == 0
    compiled = load_compiled(out)
    assert compiled.host_target == "x86"
    assert {sub.quantization_style for sub in compiled.quantized_subgraphs().values()} == {6}
    deployed = _run(out, files, "am68a_deployed")
    ir = _run(out, files, "am68a_ir", "--host", "ir")
    assert set(deployed) == {"depth", "volume"}
    _close(deployed, ir)


def test_compiling_twice_into_other_folders_gives_the_same_bytes(x86, files):
    again = _compile(files, "x86", "tiny_x86_again")
    for root, _, names in os.walk(x86):
        for name in names:
            path = os.path.join(root, name)
            other = os.path.join(again, os.path.relpath(path, x86))
            with open(path, "rb") as f, open(other, "rb") as g:
                assert f.read() == g.read(), os.path.relpath(path, x86)


def test_a_replaced_host_library_is_refused(x86, tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(x86, copy)
    with open(copy / "deploy_lib.so", "r+b") as f:
        f.seek(100)
        f.write(b"\xff")
    with pytest.raises(ArtifactError, match=r"deploy_lib.so: corrupted or replaced"):
        load_compiled(copy)
    assert main(["run", str(copy), "--input", "x.npz"]) == 2
    assert "deploy_lib.so: corrupted or replaced" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["../outside.c", "/etc/passwd", "driver/../../x", "driver//x.c", "a\\b"])
def test_the_manifest_names_no_file_outside_the_folder(x86, tmp_path, name):
    copy = tmp_path / "copy"
    shutil.copytree(x86, copy)
    manifest = json.loads((copy / "tidlx_artifacts.json").read_text())
    manifest["sha256"][name] = "0" * 64
    (copy / "tidlx_artifacts.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="which is not a file name in the folder"):
        load_compiled(copy)


def test_host_deployed_on_a_folder_without_a_built_host_part_says_so(files, capsys):
    plain = files / "tiny_plain"
    assert main(["compile", str(files / "tiny.onnx"), "-o", str(plain)] + QUICK) == 0
    capsys.readouterr()
    assert main(["run", str(plain), "--input", str(files / "x.npz"), "--host", "deployed"]) == 2
    assert "has no built host part (compile it with --target x86|arm|c7x)" in capsys.readouterr().err
    assert main(["run", str(files / "tiny.onnx"), "--input", str(files / "x.npz"), "--host", "ir"]) == 2
    assert "--host apply to a compiled folder" in capsys.readouterr().err


def test_without_the_tools_the_ir_host_part_runs_and_says_why(x86, files, monkeypatch, capsys):
    import tidlx.backends.tvm.deploy.run as deploy_run

    monkeypatch.setattr(deploy_run, "missing_tools", lambda target: ["gcc (apt-get install gcc)"])
    capsys.readouterr()
    _run(x86, files, "x86_notools")
    assert ("host part: the IR host part (host_module.txt) in the float emulator: the x86 host part needs gcc "
            "(apt-get install gcc), not installed here") in capsys.readouterr().out
    assert main(["run", str(x86), "--input", str(files / "x.npz"), "--host", "deployed"]) == 2
    assert "needs gcc (apt-get install gcc) (make system-packages installs them)" in capsys.readouterr().err


def test_a_wrong_target_is_an_option_error(files, capsys):
    with pytest.raises(SystemExit) as info:
        main(["compile", str(files / "tiny.onnx"), "-o", str(files / "never"), "--target", "riscv"])
    assert info.value.code == 2
    assert "invalid choice: 'riscv'" in capsys.readouterr().err
    assert not (files / "never").exists()


def test_c7x_sources_compile_with_werror_and_run_like_x86(x86, files, tmp_path):
    c7x = _compile(files, "c7x", "tiny_c7x")
    includes = [f"-I{c7x / 'include'}", f"-I{c7x / 'driver'}"]
    sources = [os.path.join(r, f) for r, _, fs in os.walk(c7x) for f in fs if f.endswith(".c")]
    assert any(s.endswith("deploy_lib.c") for s in sources)
    for source in sources:
        extra = [f"-I{c7x / 'driver' / 'check'}"] if "/check/" in source else []
        subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", "-c", source, "-o", str(tmp_path / "x.o")]
                       + includes + extra, check=True, capture_output=True)
    _close(_run(c7x, files, "c7x_out"), _run(x86, files, "x86_ref", "--host", "ir"))


def test_arm_runs_under_qemu_like_x86(x86, files):
    from tidlx.backends.tvm.deploy.run import missing_tools

    missing = missing_tools("arm")
    if missing:
        pytest.skip(f"the arm check needs {', '.join(missing)}: make system-packages installs them")
    arm = _compile(files, "arm", "tiny_arm")
    out = subprocess.run(["file", str(arm / "deploy_lib.so")], capture_output=True, text=True).stdout
    assert "aarch64" in out or "ARM aarch64" in out
    _close(_run(arm, files, "arm_out"), _run(x86, files, "x86_out"))
