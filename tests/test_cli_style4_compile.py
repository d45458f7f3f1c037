"""A ResNet-18 (benchmarks' model set, 32x32) compiled for AM68A takes TI's tools' style 4 there
(quantization style 6 in its network record), runs from its folder, and its level-4 traces read back as
(q - zero point) / scale."""

from __future__ import annotations

import pathlib
import sys

import numpy as np

from tidlx.cli import main

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "benchmarks"))
import model_set  # noqa: E402


def test_am68a_compiles_style_4_and_traces_its_zero_points(tmp_path, capsys):
    model = model_set.resnet18(image=32)
    (tmp_path / "r18.onnx").write_bytes(model.SerializeToString())
    name = model.graph.input[0].name
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "c.npz", **{name: rng.standard_normal((4, 3, 32, 32), dtype=np.float32)})
    np.savez(tmp_path / "x.npz", **{name: rng.standard_normal((1, 3, 32, 32), dtype=np.float32)})
    out = tmp_path / "out"
    assert main(["compile", str(tmp_path / "r18.onnx"), "--calib", str(tmp_path / "c.npz"), "-o", "target_device=AM68A",
                 "-o", "advanced_options:calibration_iterations=1", "-o", "advanced_options:calibration_frames=4",
                 "--out", str(out)]) == 0
    assert main(["inspect", str(out)]) == 0
    assert "quantization style 6" in capsys.readouterr().out
    traces = tmp_path / "tr"
    assert main(["run", str(out), "--input", str(tmp_path / "x.npz"), "--debug-level", "4", "--trace-dir",
                 str(traces)]) == 0
    info = next(traces.glob("*tensor_info.txt")).read_text(encoding="utf-8").splitlines()[1:]
    facts = {int(d): (int(e), float(s), int(z)) for d, e, s, z in (line.split() for line in info)}
    assert any(z != 0 for _, _, z in facts.values())
    data_id, (etype, scale, zp) = next((d, f) for d, f in facts.items() if f[2] != 0)
    y = next(traces.glob(f"tidl_trace_subgraph_0_{data_id:04d}_*.y"))
    q = np.fromfile(y, np.int8 if etype == 1 else np.uint8).astype(np.float64)
    real = np.fromfile(str(y)[:-2] + "_float.bin", "<f4")
    assert np.array_equal(real, ((q - zp) / scale).astype(np.float32))
