"""``--custom-ops MODULE:FUNC``: the command line registers custom ops (``tidlx.register_op``) before it
loads a model, so BEVDet's ``tidlx.bevdet/BevPool`` node imports, partitions (on the host: "custom op"),
compiles for a target and runs from its folder; every mistake in the option is a clean error."""

from __future__ import annotations

import numpy as np
import pytest

from tidlx.cli import main
from tidlx.models import bevdet_with_bev_pool, unregister_bev_pool

REGISTER = "tidlx.models:register_bev_pool"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("custom_ops")
    bevdet_with_bev_pool("resnet18", batch=6, tiny=True, height=64, width=192, path=str(root / "bev.onnx"))
    np.savez(root / "x.npz", img=np.random.default_rng(5).standard_normal((6, 3, 64, 192)).astype(np.float32))
    return root


@pytest.fixture(autouse=True)
def fresh_registry():
    unregister_bev_pool()   # each test starts as a new process would: the op unknown
    yield
    unregister_bev_pool()


def test_without_the_option_the_error_says_how_to_register(files, capsys):
    assert main(["partition", str(files / "bev.onnx")]) == 2
    err = capsys.readouterr().err
    assert "tidlx.bevdet.BevPool" in err and "--custom-ops MODULE:FUNC" in err


def test_with_the_option_bev_pool_stays_on_the_host_as_a_custom_op(files, capsys):
    assert main(["partition", str(files / "bev.onnx"), "--custom-ops", REGISTER, "-o", "max_batch_size=6",
                 "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "exports: yes" in out
    assert "custom op (registered with tidlx.register_op)" in out


@pytest.mark.parametrize("spec, message", [
    ("tidlx.models", "write MODULE:FUNC"),
    ("tidlx.models:", "write MODULE:FUNC"),
    ("no_such_module_xyz:register", "cannot import no_such_module_xyz (ModuleNotFoundError"),
    ("tidlx.models:no_such_function", "tidlx.models has no function no_such_function"),
    ("missing_file.py:register", "missing_file.py: no such file"),
])
def test_option_mistakes_are_clean_errors(files, capsys, spec, message):
    assert main(["show", str(files / "bev.onnx"), "--custom-ops", spec]) == 2
    err = capsys.readouterr().err
    assert f"--custom-ops {spec}" in err and message in err
    assert "Traceback" not in err


def test_a_python_file_registers_and_its_failure_is_named(files, tmp_path, capsys):
    good = tmp_path / "my_ops.py"
    good.write_text("from tidlx.models import register_bev_pool\n\ndef register():\n    register_bev_pool()\n")
    assert main(["show", str(files / "bev.onnx"), "--custom-ops", f"{good}:register", "--counts-only"]) == 0
    assert "bevdet.bev_pool" in capsys.readouterr().out
    bad = tmp_path / "bad_ops.py"
    bad.write_text("def register():\n    raise RuntimeError('no license for this op')\n")
    assert main(["show", str(files / "bev.onnx"), "--custom-ops", f"{bad}:register"]) == 2
    assert "register() failed (RuntimeError: no license for this op)" in capsys.readouterr().err


def test_a_compiled_folder_with_bev_pool_runs_and_says_what_it_needs(files, capsys):
    out = files / "bev_x86"
    assert main(["compile", str(files / "bev.onnx"), "--custom-ops", REGISTER, "-o", str(out), "--target", "x86",
                 "-o", "max_batch_size=6", "-o", "advanced_options:calibration_frames=1",
                 "-o", "advanced_options:calibration_iterations=1"]) == 0
    unregister_bev_pool()
    capsys.readouterr()
    assert main(["run", str(out), "--input", str(files / "x.npz")]) == 2
    assert "unknown op 'bevdet.bev_pool'" in (err := capsys.readouterr().err) and "--custom-ops MODULE:FUNC" in err
    assert main(["run", str(out), "--input", str(files / "x.npz"), "--custom-ops", REGISTER,
                 "--output", str(files / "deployed.npz")]) == 0
    assert "deploy_lib.so (TVM-built, x86)" in capsys.readouterr().out
    assert main(["run", str(out), "--input", str(files / "x.npz"), "--custom-ops", REGISTER, "--host", "ir",
                 "--output", str(files / "ir.npz")]) == 0
    with np.load(files / "deployed.npz") as a, np.load(files / "ir.npz") as b:
        assert sorted(a.files) == ["bev", "depth"]
        for k in a.files:
            np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-5 * float(np.abs(b[k]).max()))
