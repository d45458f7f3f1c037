"""``tidlx check-fusion`` (tidlx/fusion_cli.py), run in-process through ``tidlx.cli.main``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tidlx.cli import main
from tidlx.models import bn_between_gemms


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("fusion") / "bn_gemm.onnx"
    bn_between_gemms(path=str(path))
    return path


def run(capsys, *argv):
    code = main(["check-fusion", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_builtin_tables(capsys):
    code, out, err = run(capsys, "--builtin", "bn-gemm")
    assert code == 0
    assert "bn_between_gemms (built in): 2 fusion(s) applied" in out
    assert "batch_norm into inner product" in out and "relu/clip into layer" in out
    assert "folded by FoldBatchNormIntoDense into the preceding inner product '/fc1/Gemm'" in out
    assert "deny_list=nn.batch_norm" in out and "runs on the host" in out
    assert "is a TIDL BatchNorm layer" in out
    assert "no calibration data given" in err and err.count("tidlx: warning:") == 1


def test_json_is_deterministic_and_the_same_for_the_file(capsys, model_file):
    code, first, _ = run(capsys, "--builtin", "bn-gemm", "--json")
    assert code == 0
    _, second, _ = run(capsys, "--builtin", "bn-gemm", "--json")
    assert first == second
    _, from_file, _ = run(capsys, model_file, "--json")
    a, b = json.loads(first), json.loads(from_file)
    assert a.pop("model") == "bn_between_gemms (built in)" and b.pop("model") == "bn_gemm.onnx"
    assert a == b
    assert a["schema"] == 1 and [f["kind"] for f in a["fusions"]] == ["batch_norm into inner product",
                                                                   "relu/clip into layer"]


def test_options_input_and_calib(capsys, model_file, tmp_path):
    rng = np.random.default_rng(2)
    calib = tmp_path / "frames.npz"
    np.savez(calib, features=rng.standard_normal((8, 12)).astype(np.float32))
    frame = tmp_path / "frame.npz"
    np.savez(frame, features=rng.standard_normal((1, 12)).astype(np.float32))
    code, out, err = run(capsys, model_file, "--calib", calib, "--input", frame, "-o", "tensor_bits=16",
                         "-o", "advanced_options:calibration_frames=8", "--kernels", "fast", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["inputs"] == "the given input" and data["calibration"]["frames"] == 8
    assert data["options"]["tensor_bits"] == 16
    assert all(f["fused"]["bits"] == 16 for f in data["fusions"])
    # the BN kept as a TIDL layer, as a user option: nothing left to fold, only the relu fusion
    code, out, _ = run(capsys, model_file, "--calib", calib, "-o", "disabled_passes=FoldBatchNormIntoDense",
                       "-o", "advanced_options:calibration_frames=8", "--json")
    assert code == 0
    data = json.loads(out)
    assert [f["kind"] for f in data["fusions"]] == ["relu/clip into layer"] and data["batch_norm_options"] == []


@pytest.mark.parametrize("argv, message", [
    ((), "check-fusion needs a MODEL file (or --builtin bn-gemm"),
    (("nothere.onnx",), "nothere.onnx: no such file"),
    (("MODEL", "--builtin", "bn-gemm"), "give a MODEL or --builtin bn-gemm, not both"),
    (("--builtin", "bn-gemm", "-o", "tensorbits=8"), "unknown TIDL option 'tensorbits'"),
    (("--builtin", "bn-gemm", "-o", "disabled_fusions=FuseRelu"), "'FuseRelu' is not a composite fusion"),
    (("--builtin", "bn-gemm", "--calib", "missing.npz"), "--calib missing.npz: no such file or folder"),
    (("--builtin", "bn-gemm", "--input", "missing.npz"), "--input missing.npz: no such file or folder"),
])
def test_bad_input_exits_2(capsys, model_file, argv, message):
    argv = tuple(str(model_file) if a == "MODEL" else a for a in argv)
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("tidlx: error: ") and message in err


def test_a_bad_input_file_exits_2(capsys, tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not an npz")
    code, _, err = run(capsys, "--builtin", "bn-gemm", "--input", bad)
    assert code == 2 and "tidlx: error:" in err and "Traceback" not in err
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, other=np.zeros((1, 12), np.float32))
    code, _, err = run(capsys, "--builtin", "bn-gemm", "--input", wrong)
    assert code == 2 and f"tidlx: error: --input {wrong}: no array for input 'features'" in err


def test_unknown_builtin_and_help(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["check-fusion", "--builtin", "resnet"])
    assert exc.value.code == 2
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["check-fusion", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "FoldBatchNormIntoDense" in out and "examples:" in out.lower()
    assert "tidlx check-fusion --builtin bn-gemm" in out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "check-fusion" in capsys.readouterr().out
