"""The built-in BEVDet image-stage ONNX model (tidlx.models)."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, shape_inference

from tidlx.ir.errors import TidlxError
from tidlx.models import ModelArgumentError, bevdet_img_stage, bevdet_img_stage_tiny

IMG_STAGE_OPS = {"Conv", "BatchNormalization", "Relu", "MaxPool", "Add", "Resize", "Concat", "Slice",
                 "Softmax", "Unsqueeze", "Mul", "Reshape", "Transpose", "Constant"}
DEPTH_BINS = 59
# ResNet parameter counts without the classifier (torchvision: 25,557,032 and 11,689,512 with fc).
RESNET_PARAMETERS = {"resnet50": 25_557_032 - (2048 * 1000 + 1000), "resnet18": 11_689_512 - (512 * 1000 + 1000)}
BACKBONE_STAGE_CHANNELS = {"resnet50": (1024, 2048), "resnet18": (256, 512)}


def _run(model: onnx.ModelProto, extra_outputs: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    model = onnx.ModelProto.FromString(model.SerializeToString())
    model.graph.output.extend(helper.make_empty_tensor_value_info(name) for name in extra_outputs)
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    img = np.random.default_rng(7).standard_normal(dims, dtype=np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    return dict(zip(names, session.run(names, {"img": img})))


def _op_counts(model: onnx.ModelProto) -> collections.Counter:
    return collections.Counter(node.op_type for node in model.graph.node)


@pytest.mark.parametrize("backbone", ["resnet50", "resnet18"])
@pytest.mark.parametrize("batch", [1, 6])
def test_tiny_model_checks_and_runs(backbone, batch):
    model = bevdet_img_stage_tiny(backbone, batch=batch)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 17
    outputs = _run(model)
    depth, volume = outputs["depth"], outputs["volume"]
    assert depth.shape == (batch, DEPTH_BINS, 4, 12)
    assert volume.shape == (1, batch, DEPTH_BINS, 4, 12, 8)
    for value in (depth, volume):
        assert np.isfinite(value).all()
        assert np.abs(value).max() > 0
    np.testing.assert_allclose(depth.sum(axis=1), 1.0, atol=1e-5)
    assert set(_op_counts(model)) == IMG_STAGE_OPS


def test_tiny_flag_and_tiny_function_agree():
    assert bevdet_img_stage(tiny=True, batch=2).SerializeToString() == \
        bevdet_img_stage_tiny(batch=2).SerializeToString()


@pytest.mark.parametrize("backbone", ["resnet50", "resnet18"])
def test_tiny_keeps_the_full_graph_structure(backbone):
    full, tiny = bevdet_img_stage(backbone, batch=1), bevdet_img_stage_tiny(backbone, batch=1)

    def structure(model):
        return [(n.name, n.op_type, tuple(n.input), tuple(n.output)) for n in model.graph.node]

    assert structure(full) == structure(tiny)
    assert [i.name for i in full.graph.initializer] == [i.name for i in tiny.graph.initializer]


def test_same_arguments_give_identical_bytes_and_seed_changes_them():
    first = bevdet_img_stage_tiny("resnet18", batch=2, seed=3).SerializeToString()
    assert bevdet_img_stage_tiny("resnet18", batch=2, seed=3).SerializeToString() == first
    assert bevdet_img_stage_tiny("resnet18", batch=2, seed=4).SerializeToString() != first


def test_depth_and_volume_follow_bevdet_layout():
    """volume[0, n, d, y, x, c] = softmax(depth logits)[n, d, y, x] * context[n, c, y, x]."""
    model = bevdet_img_stage_tiny("resnet18", batch=2)
    depth_net = "/img_view_transformer/depth_net/Conv_output_0"
    outputs = _run(model, (depth_net,))
    logits, context = outputs[depth_net][:, :DEPTH_BINS], outputs[depth_net][:, DEPTH_BINS:]
    expected_depth = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected_depth /= expected_depth.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(outputs["depth"], expected_depth, rtol=1e-4, atol=1e-6)
    expected_volume = np.einsum("ndyx,ncyx->ndyxc", expected_depth, context)[None]
    np.testing.assert_allclose(outputs["volume"], expected_volume, rtol=1e-4, atol=1e-6)


def test_node_and_weight_names_look_like_a_torch_export():
    model = bevdet_img_stage_tiny("resnet50", batch=1)
    node_names = {n.name for n in model.graph.node}
    for name in ("/img_backbone/conv1/Conv", "/img_backbone/bn1/BatchNormalization", "/img_backbone/maxpool/MaxPool",
                 "/img_backbone/layer3/layer3.0/conv1/Conv", "/img_backbone/layer3/layer3.0/relu_2/Relu",
                 "/img_backbone/layer3/layer3.0/downsample/downsample.0/Conv", "/img_backbone/layer4/layer4.2/Add",
                 "/img_neck/lateral_convs.0/conv/Conv", "/img_neck/lateral_convs.1/conv/Conv", "/img_neck/Resize",
                 "/img_neck/fpn_convs.0/conv/Conv", "/img_view_transformer/depth_net/Conv",
                 "/img_view_transformer/Slice_1", "/img_view_transformer/Softmax"):
        assert name in node_names, name
    assert len(node_names) == len(model.graph.node)
    weights = {i.name for i in model.graph.initializer}
    for name in ("img_backbone.layer3.0.conv1.weight", "img_backbone.layer3.0.bn1.running_var",
                 "img_neck.lateral_convs.0.conv.bias", "img_view_transformer.depth_net.weight"):
        assert name in weights, name
    variances = [onnx.numpy_helper.to_array(i) for i in model.graph.initializer if i.name.endswith("running_var")]
    assert min(v.min() for v in variances) > 0


def test_full_resnet50_shapes_by_inference():
    model = bevdet_img_stage("resnet50", batch=1)
    assert _op_counts(model)["Conv"] == 1 + 16 * 3 + 4 + 2 + 1 + 1  # stem, bottlenecks, downsamples, neck, depth
    backbone_parameters = sum(int(np.prod(i.dims)) for i in model.graph.initializer
                              if i.name.startswith("img_backbone.") and "running_" not in i.name)
    assert backbone_parameters == RESNET_PARAMETERS["resnet50"]
    # Forget the declared output shapes so inference has to derive them.
    del model.graph.output[:]
    model.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in ("depth", "volume"))
    inferred = shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    assert shapes["depth"] == [1, DEPTH_BINS, 16, 44]
    assert shapes["volume"] == [1, 1, DEPTH_BINS, 16, 44, 64]
    assert shapes["/img_backbone/layer3/layer3.5/relu_2/Relu_output_0"] == [1, 1024, 16, 44]
    assert shapes["/img_backbone/layer4/layer4.2/relu_2/Relu_output_0"] == [1, 2048, 8, 22]
    assert shapes["/img_neck/fpn_convs.0/conv/Conv_output_0"] == [1, 256, 16, 44]
    assert shapes["/img_view_transformer/depth_net/Conv_output_0"] == [1, DEPTH_BINS + 64, 16, 44]


def test_full_resnet18_backbone_matches_torchvision_size():
    model = bevdet_img_stage("resnet18", batch=6)
    backbone_parameters = sum(int(np.prod(i.dims)) for i in model.graph.initializer
                              if i.name.startswith("img_backbone.") and "running_" not in i.name)
    assert backbone_parameters == RESNET_PARAMETERS["resnet18"]
    lateral_inputs = [onnx.numpy_helper.to_array(i).shape[1] for i in model.graph.initializer
                      if i.name in ("img_neck.lateral_convs.0.conv.weight", "img_neck.lateral_convs.1.conv.weight")]
    assert tuple(lateral_inputs) == BACKBONE_STAGE_CHANNELS["resnet18"]


def test_path_saves_the_returned_model(tmp_path):
    target = tmp_path / "bevdet.onnx"
    model = bevdet_img_stage_tiny("resnet18", batch=1, path=target)
    assert target.read_bytes() == model.SerializeToString()
    with pytest.raises(TidlxError, match="'path'"):
        bevdet_img_stage_tiny("resnet18", batch=1, path=tmp_path / "missing" / "bevdet.onnx")


@pytest.mark.parametrize("kwargs, argument", [
    ({"backbone": "resnet34"}, "backbone"),
    ({"backbone": None}, "backbone"),
    ({"batch": 0}, "batch"),
    ({"batch": 2.0}, "batch"),
    ({"batch": True}, "batch"),
    ({"height": 250}, "height"),
    ({"height": 0}, "height"),
    ({"width": 700}, "width"),
    ({"seed": -1}, "seed"),
    ({"tiny": "yes"}, "tiny"),
    ({"path": 3}, "path"),
])
def test_bad_arguments_name_the_argument(kwargs, argument):
    with pytest.raises(ModelArgumentError, match=f"'{argument}'") as caught:
        bevdet_img_stage(**kwargs)
    assert isinstance(caught.value, TidlxError)
    assert caught.value.argument == argument
