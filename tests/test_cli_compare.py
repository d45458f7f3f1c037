"""``tidlx compare MODEL ...`` (tidlx/compare_cli.py), run in-process through ``tidlx.cli.main``."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tidlx
from tidlx.cli import main
from tidlx.models import bevdet_img_stage

RELU = '#[version = "0.0.5"]\ndef @main(%x: Tensor[(1, 1, 2, 4), float32]) {\n  nn.relu(%x)\n}\n'
#: Bias calibration runs every calibration frame in fixed point per iteration (TI's default: 50)
ITERATIONS = "advanced_options:calibration_iterations=1"
X = np.array([-3.0, 0.1, 0.7, 1.25, 2.5, -0.5, 3.0, 0.02], np.float32).reshape(1, 1, 2, 4)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare")
    model = folder / "tiny.onnx"
    bevdet_img_stage(backbone="resnet18", batch=1, tiny=True, path=str(model))
    rng = np.random.default_rng(7)
    np.savez(folder / "calib.npz", img=rng.standard_normal((3, 3, 64, 192), dtype=np.float32))
    np.savez(folder / "test.npz", img=rng.standard_normal((1, 3, 64, 192), dtype=np.float32))
    (folder / "relu.txt").write_text(RELU, encoding="utf-8")
    np.savez(folder / "x.npz", x=X)
    return folder


def run(capsys, *argv):
    code = main(["compare", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_schema_and_worst_first(files, capsys):
    code, out, err = run(capsys, files / "tiny.onnx", "--calib", files / "calib.npz", "--input", files / "test.npz",
                         "-o", "advanced_options:calibration_frames=3", "-o", ITERATIONS, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["model"] == "tiny.onnx" and data["tensor_bits"] == 8 and data["frames"] == 1
    assert data["inputs"] == f"1 frame from {files / 'test.npz'}"
    assert [o["name"] for o in data["outputs"]] == ["depth", "volume"]
    for o in data["outputs"]:
        assert {"name", "sqnr_db", "max_abs_err", "saturated_pct"} <= set(o)
        assert isinstance(o["sqnr_db"], float) and 5.0 < o["sqnr_db"] < 60.0
    assert len(data["layers"]) > 40
    for layer in data["layers"]:
        assert {"layer", "op", "sqnr_db", "max_abs_err", "saturated_pct"} <= set(layer)
    sqnrs = [layer["sqnr_db"] for layer in data["layers"] if layer["sqnr_db"] is not None]
    assert sqnrs == sorted(sqnrs)
    assert data["headline"].startswith("8-bit fixed point: outputs 'depth' ")
    assert not err   # no progress bar and no warning in a pipe (3 frames = calibration_frames)


def test_tables_same_bytes_twice(files, capsys):
    argv = (files / "tiny.onnx", "--calib", files / "calib.npz", "-o", "tensor_bits=16",
            "-o", "advanced_options:calibration_frames=3", "-o", ITERATIONS, "--top", "4")
    first = run(capsys, *argv)
    second = run(capsys, *argv)
    assert first == second and first[0] == 0
    out = first[1]
    lines = out.splitlines()
    assert lines[0].startswith("16-bit fixed point: outputs 'depth' ") and "worst layer" in lines[0]
    assert "compared on calibration frame 0 of 3" in lines[1] and "in-sample" in lines[1]
    assert "worst layers (4 of " in out and "│ 4 │" in out and "│ 5 │" not in out


def test_hand_checked_figures_on_the_command_line(files, capsys):
    """The one-ReLU model of tests/backends/test_tidl_compare.py: 47.3 dB by hand."""
    code, out, _ = run(capsys, files / "relu.txt", "--calib", files / "x.npz", "--input", files / "x.npz",
                       "-o", "accuracy_level=0", "--json")
    assert code == 0
    data = json.loads(out)
    assert round(data["outputs"][0]["sqnr_db"], 3) == 47.307
    assert [layer["op"] for layer in data["layers"]] == ["ReLU (nn.relu)", "Data (input convert)"]


@pytest.mark.parametrize("argv, message", [
    (["missing.onnx"], "missing.onnx: no such file"),
    (["relu.txt", "--calib", "missing.npz"], "--calib missing.npz: no such file"),
    (["relu.txt", "--input", "missing.npz"], "--input missing.npz: no such file"),
    (["relu.txt", "-o", "tensor_bits=9"], "tensor_bits=9 is not allowed"),
    (["relu.txt", "-o", "no_such_option=1"], "no_such_option"),
    (["relu.txt", "--top", "0"], "--top '0' is not allowed"),
    (["relu.txt", "--calib", "x.npz", "-o", "deny_list=nn.relu"], "the model has no TIDL subgraph"),
    (["relu.txt", "--calib", "x.npz", "--input", "calib.npz"], "no array for input 'x'"),
])
def test_bad_input_exits_2(argv, message, files, capsys, monkeypatch):
    monkeypatch.chdir(files)
    code, out, err = run(capsys, *argv)
    assert code == 2 and not out
    assert err.startswith("tidlx: error:") and message in err, err


def test_help_has_examples(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "tidlx compare model.onnx --calib frames.npz" in out and "--isolated" in out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "compare" in capsys.readouterr().out


def test_api_and_command_agree(files, capsys):
    code, out, _ = run(capsys, files / "relu.txt", "--calib", files / "x.npz", "-o", "accuracy_level=0", "--json")
    assert code == 0
    mod = tidlx.load(str(files / "relu.txt"))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tidlx.compare(mod, None, {"accuracy_level": 0}, str(files / "x.npz"))
    data = json.loads(out)
    del data["model"]
    assert data == json.loads(result.to_json())


def test_a_folder_of_images_with_mean_and_scale(tmp_path, capsys):
    """--calib folder --mean --scale: the same figures as an .npz of the images preprocessed by hand."""
    model = tmp_path / "m.txt"
    model.write_text('#[version = "0.0.5"]\ndef @main(%x: Tensor[(1, 3, 2, 2), float32]) {\n  nn.relu(%x)\n}\n',
                     encoding="utf-8")
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (3, 2, 2, 3)).astype(np.float32)      # H x W x C, as a decoder gives them
    folder = tmp_path / "images"
    folder.mkdir()
    for k, image in enumerate(images):
        np.save(folder / f"{k}.npy", image)
    mean, scale = np.array([120.0, 110.0, 100.0]), np.array([0.02, 0.03, 0.04])
    by_hand = ((images - mean) * scale).transpose(0, 3, 1, 2).astype(np.float32)
    np.savez(tmp_path / "calib.npz", x=by_hand)
    np.savez(tmp_path / "test.npz", x=by_hand[:1])
    common = ("--input", tmp_path / "test.npz", "-o", "advanced_options:calibration_frames=3", "--json")
    code, out_folder, err = run(capsys, model, "--calib", folder, "--mean", "120,110,100", "--scale", "0.02,0.03,0.04",
                                *common)
    assert code == 0, err
    code, out_npz, err = run(capsys, model, "--calib", tmp_path / "calib.npz", *common)
    assert code == 0, err
    assert json.loads(out_folder)["outputs"] == json.loads(out_npz)["outputs"]
    code, _, err = run(capsys, model, "--calib", folder, "--mean", "12x", *common)
    assert code == 2 and "--mean '12x': '12x' is not a finite number" in err


def test_relay_text_with_a_tvm_params_file(capsys):
    """Relay text printed without metadata plus TVM's params file (--params, as every loading command takes
    it): the weights are constants, so the conv is a TIDL layer and is compared (without --params the conv
    stays on the host, "the weight is not a constant", and only the ReLU is compared)."""
    import os

    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tvm_params")
    code, out, _ = run(capsys, os.path.join(data, "conv.txt"), "--params", os.path.join(data, "conv.params"),
                       "-o", "advanced_options:calibration_iterations=1", "--json")
    assert code == 0
    doc = json.loads(out)
    assert any(layer["op"].startswith("Conv") for layer in doc["layers"]) and doc["outputs"][0]["sqnr_db"] > 20
    code, out, _ = run(capsys, os.path.join(data, "conv.txt"), "-o", "advanced_options:calibration_iterations=1",
                       "--json")
    assert code == 0 and [layer["op"].split(" ")[0] for layer in json.loads(out)["layers"]
                          if layer["op"].split(" ")[0] != "Data"] == ["ReLU"]
