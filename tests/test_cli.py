"""``tidlx show``, ``tidlx run`` and ``tidlx demo`` in-process: output, files and exit codes."""

import numpy as np
import pytest

import tidlx
from tidlx.cli import main
from tidlx.models import bevdet_img_stage


def test_show_prints_relay_text_and_op_counts(relay_samples, capsys):
    code = main(["show", str(relay_samples / "09_resnet18_opt_nometa.txt")])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0
    # the text was printed without its constants: one warning line, no Python warning format
    assert captured.err.startswith("tidlx: warning: ") and "meta[relay.Constant][0-41]" in captured.err
    assert "TidlxWarning" not in captured.err
    assert out.startswith('#[version = "0.0.5"]')
    assert "def @main(%input: Tensor[(1, 3, 224, 224), float32]" in out
    # ResNet-18: 20 convolutions (17 + 3 downsample) and one dense
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in out.splitlines()
            if line.startswith("│")}
    assert rows["nn.conv2d"] == "20" and rows["nn.dense"] == "1"


def test_show_onnx_counts_only(tmp_path, capsys):
    path = tmp_path / "tiny.onnx"
    bevdet_img_stage(backbone="resnet18", batch=1, tiny=True, path=str(path))
    assert main(["show", str(path), "--counts-only"]) == 0
    out = capsys.readouterr().out
    assert "def @main" not in out
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in out.splitlines()
            if line.startswith("│")}
    assert rows["nn.conv2d"] == "24" and rows["nn.softmax"] == "1"


def test_run_writes_outputs_equal_to_the_api(tmp_path, capsys):
    path = tmp_path / "tiny.onnx"
    model = bevdet_img_stage(backbone="resnet18", batch=1, tiny=True, path=str(path))
    dims = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    image = np.random.default_rng(3).standard_normal(dims, dtype=np.float32)
    np.savez(tmp_path / "in.npz", img=image)
    assert main(["run", str(path), "--input", str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz")]) == 0
    expected = tidlx.emulate(tidlx.load(str(path)), {"img": image})
    with np.load(tmp_path / "out.npz") as saved:  # under the model's output names
        assert sorted(saved.files) == ["depth", "volume"]
        for name, want in zip(("depth", "volume"), expected):
            assert np.array_equal(saved[name], want)
    out = capsys.readouterr().out
    assert "output 0 'depth': shape (1, 59, 4, 12)" in out and f"wrote {tmp_path / 'out.npz'}" in out


def test_run_mode_fixed_equals_the_api(tmp_path, capsys):
    """--mode fixed: quantize then run, the same bits as tidlx.emulate(mode="fixed")."""
    path = tmp_path / "tiny.onnx"
    bevdet_img_stage(backbone="resnet18", batch=1, tiny=True, path=str(path))
    rng = np.random.default_rng(3)
    image = rng.standard_normal((1, 3, 64, 192), dtype=np.float32)
    calib = rng.standard_normal((2, 3, 64, 192), dtype=np.float32)
    np.savez(tmp_path / "in.npz", img=image)
    np.savez(tmp_path / "calib.npz", img=calib)
    argv = ["run", str(path), "--input", str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz"),
            "--mode", "fixed", "--calib", str(tmp_path / "calib.npz"), "-o", "advanced_options:calibration_frames=2",
            "-o", "advanced_options:calibration_iterations=1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "fixed point: QuantizedModel(2 subgraph(s)" in out and "tensor_bits=8" in out
    options = {"advanced_options:calibration_frames": 2, "advanced_options:calibration_iterations": 1}
    expected = tidlx.emulate(tidlx.load(str(path)), {"img": image}, mode="fixed", options=options,
                             calib={"img": calib})
    floats = tidlx.emulate(tidlx.load(str(path)), {"img": image})
    with np.load(tmp_path / "out.npz") as saved:
        for name, want, float_out in zip(("depth", "volume"), expected, floats):
            assert np.array_equal(saved[name], want)
            assert not np.array_equal(saved[name], float_out)   # fixed point, not the float run


@pytest.mark.parametrize("extra, message", [
    (["--calib", "calib.npz"], "--calib applies to --mode fixed"),
    (["-o", "tensor_bits=16"], "-o applies to --mode fixed"),
    (["--mean", "1"], "--mean applies to --mode fixed"),
    (["--mode", "fixed", "-o", "tensor_bits=9"], "tensor_bits=9 is not allowed"),
    (["--mode", "fixed", "--calib", "missing.npz"], "--calib missing.npz: no such file"),
    (["--mode", "fixed", "--calib", "calib.npz", "-o", "deny_list=nn.relu"], "m.txt: no TIDL subgraph"),
])
def test_run_mode_fixed_bad_input(extra, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.txt").write_text('#[version = "0.0.5"]\ndef @main(%x: Tensor[(1, 4), float32]) {\n'
                                    '  nn.relu(%x)\n}\n', encoding="utf-8")
    np.savez(tmp_path / "in.npz", x=np.zeros((1, 4), np.float32))
    np.savez(tmp_path / "calib.npz", x=np.zeros((1, 4), np.float32))
    assert main(["run", "m.txt", "--input", "in.npz", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tidlx: error:") and message in err, err


@pytest.mark.parametrize("argv, message", [
    (["show", "missing.txt"], "missing.txt: no such file"),
    (["show", "missing.pb"], "missing.pb: no such file"),
    (["show", "model.pb"], "unknown model format '.pb'"),
    (["run", "missing.onnx", "--input", "x.npz"], "missing.onnx"),
])
def test_bad_input_is_a_clean_error(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.pb").write_bytes(b"\x08\x07")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tidlx: error: ") and message in err and "Traceback" not in err


def test_run_with_a_wrong_input_name(tmp_path, capsys):
    path = tmp_path / "tiny.onnx"
    bevdet_img_stage(backbone="resnet18", batch=1, tiny=True, path=str(path))
    np.savez(tmp_path / "in.npz", image=np.zeros((1, 3, 64, 192), np.float32))
    assert main(["run", str(path), "--input", str(tmp_path / "in.npz")]) == 2
    err = capsys.readouterr().err
    assert "tidlx: error:" in err and "img" in err


def test_bad_relay_text_points_at_the_place(tmp_path, capsys):
    path = tmp_path / "bad.txt"
    path.write_text('#[version = "0.0.5"]\ndef @main(%x: Tensor[(1, 4), float32]) {\n  nn.relux(%x)\n}\n',
                    encoding="utf-8")
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:3:3" in err and "nn.relu" in err


def test_demo_tiny_agrees(tmp_path, capsys):
    assert main(["demo", "--tiny", "--backbone", "resnet18", "--batch", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "bevdet_resnet18_b2_tiny.onnx").exists()
    assert "float emulator vs onnxruntime" in out and "NO" not in out
    # step 4: batch 2 is refused as is, and the limit raised puts the convolutions on TIDL
    assert "TIDL_RELAY_MAX_BATCH_SIZE=1" in out and "with max_batch_size=2" in out
