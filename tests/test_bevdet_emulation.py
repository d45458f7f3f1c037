"""The built-in BEVDet image stage: ONNX -> tidlx IR -> float emulator agrees with onnxruntime,
and going through Relay text on the way changes nothing."""

import numpy as np
import onnxruntime as ort
import pytest

import tidlx
from tidlx.frontends.onnx import from_onnx
from tidlx.models import bevdet_img_stage

TOLERANCE = 1e-4  # max abs error relative to the output's max abs value


def onnxruntime_outputs(model, feeds):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def image_for(model, seed=0):
    dims = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    return {model.graph.input[0].name: np.random.default_rng(seed).standard_normal(dims, dtype=np.float32)}


def relative_error(ours, reference):
    return float(np.max(np.abs(ours.astype(np.float64) - reference))) / float(np.max(np.abs(reference)))


@pytest.mark.parametrize("tiny", [True, False], ids=["tiny", "full"])
@pytest.mark.parametrize("batch", [1, 6])
@pytest.mark.parametrize("backbone", ["resnet18", "resnet50"])
def test_emulator_agrees_with_onnxruntime(backbone, batch, tiny):
    model = bevdet_img_stage(backbone=backbone, batch=batch, tiny=tiny)
    feeds = image_for(model)
    reference = onnxruntime_outputs(model, feeds)
    ours = tidlx.emulate(from_onnx(model), feeds)
    assert len(ours) == len(reference) == 2
    for got, want, info in zip(ours, reference, model.graph.output):
        assert got.shape == want.shape and got.dtype == want.dtype, info.name
        assert np.all(np.isfinite(got)), info.name
        assert relative_error(got, want) <= TOLERANCE, (info.name, relative_error(got, want))


@pytest.mark.parametrize("backbone", ["resnet18", "resnet50"])
def test_reference_kernel_set_agrees_with_onnxruntime(backbone):
    """The plain-numpy reference set (the definition of the float semantics) meets the same bar."""
    model = bevdet_img_stage(backbone=backbone, batch=1, tiny=True)
    feeds = image_for(model, seed=2)
    reference = onnxruntime_outputs(model, feeds)
    ours = tidlx.emulate(from_onnx(model), feeds, kernels="reference")
    for got, want, info in zip(ours, reference, model.graph.output):
        assert got.shape == want.shape and got.dtype == want.dtype, info.name
        assert relative_error(got, want) <= TOLERANCE, (info.name, relative_error(got, want))


@pytest.mark.parametrize("batch", [1, 6])
@pytest.mark.parametrize("backbone", ["resnet18", "resnet50"])
def test_relay_text_round_trip_emulates_identically(backbone, batch):
    model = bevdet_img_stage(backbone=backbone, batch=batch, tiny=True)
    mod = from_onnx(model)
    text = mod.astext(show_meta_data=True)
    reparsed = tidlx.parse_relay(text)
    assert tidlx.ir.structural_equal(mod, reparsed, compare_layers=True)
    feeds = image_for(model, seed=1)
    direct = tidlx.emulate(mod, feeds)
    via_text = tidlx.emulate(reparsed, feeds)
    for a, b in zip(direct, via_text):
        assert np.array_equal(a, b)

