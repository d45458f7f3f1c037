"""``batch=`` on models whose constants carry the exported batch (frontends/onnx: the Resize
converter's and the Reshape converter's rules, graph.py's input rule).

A model exported at batch 1 with a Resize by ``sizes`` (PyTorch's ``F.interpolate(size=...)``:
N and C baked in) and a constant Reshape shape (``x.view(1, ...)``), imported with ``batch=6``,
must compute what onnxruntime computes on the same model exported at batch 6.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
import tidlx.emulator
from tidlx.frontends.onnx import from_onnx
from tidlx.frontends.onnx.errors import OnnxImportError
from tidlx.ir.errors import TidlxWarning

CHANNELS, HEIGHT, WIDTH = 4, 3, 5


def resize_reshape_model(batch: int, reshape_dim0=None, mode: str = "linear") -> onnx.ModelProto:
    """x (batch, 4, 3, 5) -> Resize to sizes (batch, 4, 6, 10) -> Reshape to the constant
    (reshape_dim0 or batch, 4, 60) -> Relu, as an exporter writes it at ``batch``."""
    sizes = numpy_helper.from_array(np.array([batch, CHANNELS, 2 * HEIGHT, 2 * WIDTH], np.int64), "sizes")
    shape = numpy_helper.from_array(np.array([batch if reshape_dim0 is None else reshape_dim0, CHANNELS,
                                              4 * HEIGHT * WIDTH], np.int64), "shape")
    nodes = [
        helper.make_node("Resize", ["x", "", "", "sizes"], ["up"], name="up", mode=mode),
        helper.make_node("Reshape", ["up", "shape"], ["flat"], name="flat"),
        helper.make_node("Relu", ["flat"], ["y"], name="act"),
    ]
    graph = helper.make_graph(nodes, "rebatch", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [batch, CHANNELS, HEIGHT, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [sizes, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def onnxruntime_run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_batch_6_on_a_batch_1_export_matches_onnxruntime_on_the_batch_6_export(mode):
    x = np.random.default_rng(0).standard_normal((6, CHANNELS, HEIGHT, WIDTH)).astype(np.float32)
    expected = onnxruntime_run(resize_reshape_model(6, mode=mode), x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = from_onnx(resize_reshape_model(1, mode=mode), batch=6)
    messages = [str(w.message) for w in caught if issubclass(w.category, TidlxWarning)]
    assert any("node 'up' (Resize)" in m and "[1, 4, 6, 10]" in m and "(6, 4, 6, 10)" in m for m in messages), \
        messages
    assert any("node 'flat' (Reshape)" in m and "[1, 4, 60]" in m and "(6, 4, 60)" in m for m in messages), messages
    got = tidlx.emulator.run(mod, {"x": x})[0]
    assert got.shape == expected.shape == (6, CHANNELS, 60)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_without_a_batch_override_nothing_changes_and_nothing_is_said():
    with warnings.catch_warnings():
        warnings.simplefilter("error", TidlxWarning)
        mod = from_onnx(resize_reshape_model(1))
        same = from_onnx(resize_reshape_model(2), batch=2)  # the exported batch: no rebatching
    assert mod["main"].checked_type.ret_type.shape == (1, CHANNELS, 60)
    assert same["main"].checked_type.ret_type.shape == (2, CHANNELS, 60)


def test_a_resize_of_the_batch_axis_is_still_refused():
    model = resize_reshape_model(1)
    sizes = next(i for i in model.graph.initializer if i.name == "sizes")
    sizes.CopyFrom(numpy_helper.from_array(np.array([2, CHANNELS, 6, 10], np.int64), "sizes"))  # N 1 -> 2
    with pytest.raises(OnnxImportError, match=r"node 'up' \(Resize\): resizing the batch or channel axis"):
        from_onnx(model)
    with pytest.raises(OnnxImportError, match=r"node 'up' \(Resize\): resizing the batch or channel axis"):
        from_onnx(model, batch=6)  # sizes' N (2) is not the exported batch (1)


def _view_model(batch: int, view) -> onnx.ModelProto:
    model = resize_reshape_model(batch, reshape_dim0=1)
    shape = next(i for i in model.graph.initializer if i.name == "shape")
    shape.CopyFrom(numpy_helper.from_array(np.array(view, np.int64), "shape"))
    return model


def test_a_view_with_the_batch_after_leading_ones_follows_the_batch():
    # BEVDet's view transformer reshapes (B*N, ...) to (1, N, ...): cameras in dim 1 after a 1.
    x = np.random.default_rng(1).standard_normal((3, CHANNELS, HEIGHT, WIDTH)).astype(np.float32)
    expected = onnxruntime_run(_view_model(3, [1, 3, CHANNELS, 60]), x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod = from_onnx(_view_model(2, [1, 2, CHANNELS, 60]), batch=3)
    messages = [str(w.message) for w in caught if issubclass(w.category, TidlxWarning)]
    assert any("node 'flat' (Reshape)" in m and "[1, 2, 4, 60]" in m and "in dim 1" in m and "(1, 3, 4, 60)" in m
               for m in messages), messages
    got = tidlx.emulator.run(mod, {"x": x})[0]
    assert got.shape == expected.shape == (1, 3, CHANNELS, 60)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_a_reshape_that_cannot_follow_the_batch_names_the_node_and_why():
    # The exported batch (2) sits after a dim that is not 1: nothing says it is the batch.
    model = _view_model(2, [CHANNELS, 2, 60])
    from_onnx(model)  # as exported it imports
    with pytest.raises(OnnxImportError) as info:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TidlxWarning)
            from_onnx(model, batch=3)
    message = str(info.value)
    assert message.startswith("node 'flat' (Reshape): cannot reshape (3, 4, 6, 10)")
    assert "exported with batch 2, and cannot follow batch=3" in message


def two_input_model() -> onnx.ModelProto:
    """img (6, 4, 3, 5) and cams (1, 6, 4) (BEVDet's mlp_input: batch in dim 1) -> img * cams'."""
    nodes = [
        helper.make_node("Reshape", ["cams", "cam_shape"], ["per_image"], name="per_image"),
        helper.make_node("Mul", ["img", "per_image"], ["y"], name="scale"),
    ]
    cam_shape = numpy_helper.from_array(np.array([-1, CHANNELS, 1, 1], np.int64), "cam_shape")
    graph = helper.make_graph(nodes, "two", [
        helper.make_tensor_value_info("img", TensorProto.FLOAT, [6, CHANNELS, HEIGHT, WIDTH]),
        helper.make_tensor_value_info("cams", TensorProto.FLOAT, [1, 6, CHANNELS])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [cam_shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_batch_refuses_an_input_whose_dim_0_is_not_the_models_batch():
    model = two_input_model()
    # batch=1 used to set cams to (1, 6, 4) unchanged and img to 1: the Mul broadcast one image to 6.
    with pytest.raises(OnnxImportError, match=r"input 'cams' is \[1, 6, 4\]: its dim 0 \(1\) is not the model's "
                                              r"batch \(6, dim 0 of input 'img'\).*shapes="):
        from_onnx(model, batch=1)
    assert from_onnx(model, batch=6)["main"].checked_type.ret_type.shape == (6, CHANNELS, HEIGHT, WIDTH)
    fixed = from_onnx(model, batch=2, shapes={"cams": [1, 2, CHANNELS]})
    assert fixed["main"].checked_type.ret_type.shape == (2, CHANNELS, HEIGHT, WIDTH)


def test_the_built_in_bevdet_exported_at_batch_1_loads_with_batch_2_and_6(tmp_path):
    from tidlx.models import bevdet_img_stage

    path = tmp_path / "bevdet_b1.onnx"
    bevdet_img_stage(backbone="resnet18", batch=1, tiny=True, path=str(path))
    for batch in (1, 2, 6):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TidlxWarning)
            mod = tidlx.load(path, batch=batch)
        depth = mod["main"].checked_type.ret_type.fields[0]
        assert depth.shape[0] == batch
