"""The camera-aware BEVDet image stage (tidlx.models, depth_net="camera_aware"): the ONNX graph, and the
float emulator against onnxruntime on it."""

from __future__ import annotations

import os

import collections

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import tidlx
from tidlx.models import ModelArgumentError, bevdet_img_stage, bevdet_img_stage_tiny

DEPTH_BINS = 59
CAMERA_FEATURES = 27
SCOPE = "/img_view_transformer/depth_net"
CAMERA_AWARE_OPS = {"Conv", "BatchNormalization", "Relu", "MaxPool", "Add", "Resize", "Concat", "Slice", "Softmax",
                    "Unsqueeze", "Mul", "Reshape", "Transpose", "Constant", "Gemm", "Sigmoid", "GlobalAveragePool"}


def camera_aware(backbone="resnet18", batch=1, **kwargs):
    return bevdet_img_stage_tiny(backbone, batch=batch, depth_net="camera_aware", **kwargs)


def random_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim], dtype=np.float32)
            for i in model.graph.input}


def onnxruntime_outputs(model: onnx.ModelProto, inputs, extra_outputs=()) -> dict[str, np.ndarray]:
    model = onnx.ModelProto.FromString(model.SerializeToString())
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(name) for name in extra_outputs)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in model.graph.output]
    return dict(zip(names, session.run(names, inputs)))


def nodes_by_name(model: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    return {n.name: n for n in model.graph.node}


def consumers(model: onnx.ModelProto, tensor: str) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if tensor in n.input]


# -- the graph ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dcn", [False, True])
def test_checks_runs_and_has_the_inputs_and_outputs(dcn):
    model = camera_aware(batch=6, dcn=dcn)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == (19 if dcn else 17)
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    assert shapes == {"img": [6, 3, 64, 192], "mlp_input": [1, 6, CAMERA_FEATURES]}
    outputs = onnxruntime_outputs(model, random_inputs(model))
    assert outputs["depth"].shape == (6, DEPTH_BINS, 4, 12)
    assert outputs["volume"].shape == (1, 6, DEPTH_BINS, 4, 12, 8)
    np.testing.assert_allclose(outputs["depth"].sum(axis=1), 1.0, atol=1e-5)
    assert set(collections.Counter(n.op_type for n in model.graph.node)) == \
        CAMERA_AWARE_OPS | ({"DeformConv"} if dcn else set())


def test_camera_parameters_change_the_depth():
    """The SE gates really read mlp_input: other camera parameters give another depth distribution."""
    model = camera_aware()
    inputs = random_inputs(model)
    first = onnxruntime_outputs(model, inputs)["depth"]
    inputs["mlp_input"] = inputs["mlp_input"] + 1.0
    assert np.abs(onnxruntime_outputs(model, inputs)["depth"] - first).max() > 1e-4


def test_one_batch_norm_feeds_both_camera_mlps():
    """BEVDet's DepthNet.bn (BatchNorm1d(27)) on the (N, 27) camera matrix feeds context_mlp.fc1 and depth_mlp.fc1."""
    model = camera_aware(batch=6)
    nodes = nodes_by_name(model)
    reshape = nodes[f"{SCOPE}/Reshape"]
    assert reshape.input[0] == "mlp_input"
    shape = onnx.numpy_helper.to_array(next(n for n in model.graph.node if n.output[0] == reshape.input[1])
                                       .attribute[0].t)
    assert shape.tolist() == [-1, CAMERA_FEATURES]
    bn = nodes[f"{SCOPE}/bn/BatchNormalization"]
    assert bn.input[0] == reshape.output[0]
    assert sorted(n.name for n in consumers(model, bn.output[0])) == [f"{SCOPE}/context_mlp/fc1/Gemm",
                                                                      f"{SCOPE}/depth_mlp/fc1/Gemm"]
    for mlp in ("context_mlp", "depth_mlp"):
        fc1, act, fc2 = (nodes[f"{SCOPE}/{mlp}/{part}"] for part in ("fc1/Gemm", "act/Relu", "fc2/Gemm"))
        assert act.input[0] == fc1.output[0] and fc2.input[0] == act.output[0]
        assert {a.name: onnx.helper.get_attribute_value(a) for a in fc1.attribute}["transB"] == 1


def test_se_gate_is_broadcast_over_height_and_width():
    model = camera_aware(batch=2)
    inputs = random_inputs(model)
    gate = f"{SCOPE}/context_se/gate/Sigmoid_output_0"
    features = f"{SCOPE}/reduce_conv/reduce_conv.2/Relu_output_0"
    gated = f"{SCOPE}/context_se/Mul_output_0"
    outputs = onnxruntime_outputs(model, inputs, (gate, features, gated))
    assert outputs[gate].shape == (2, 32, 1, 1)
    np.testing.assert_allclose(outputs[gated], outputs[features] * outputs[gate], rtol=1e-6)


def test_depth_branch_follows_bevdet_module_names():
    model = camera_aware(dcn=True)
    nodes = nodes_by_name(model)
    branch = f"{SCOPE}/depth_conv"
    for name in (f"{branch}/depth_conv.0/conv1/Conv", f"{branch}/depth_conv.2/relu_1/Relu",
                 f"{branch}/depth_conv.3/aspp1/atrous_conv/Conv", f"{branch}/depth_conv.3/aspp4/bn/BatchNormalization",
                 f"{branch}/depth_conv.3/global_avg_pool/global_avg_pool.0/GlobalAveragePool",
                 f"{branch}/depth_conv.3/Resize", f"{branch}/depth_conv.3/conv1/Conv",
                 f"{branch}/depth_conv.4/conv_offset/Conv", f"{branch}/depth_conv.4/DeformConv",
                 f"{branch}/depth_conv.5/Conv", f"{SCOPE}/context_conv/Conv", f"{SCOPE}/Concat"):
        assert name in nodes, name
    dilations = [onnx.helper.get_attribute_value(a) for number in (2, 3, 4)
                 for a in nodes[f"{branch}/depth_conv.3/aspp{number}/atrous_conv/Conv"].attribute if a.name == "dilations"]
    assert dilations == [[6, 6], [12, 12], [18, 18]]
    aspp_concat = nodes[f"{branch}/depth_conv.3/Concat_1"]
    assert len(aspp_concat.input) == 5
    deform = nodes[f"{branch}/depth_conv.4/DeformConv"]
    assert deform.input[2] == nodes[f"{branch}/depth_conv.4/conv_offset/Conv"].output[0]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in deform.attribute}
    assert (attrs["group"], attrs["offset_group"], attrs["kernel_shape"]) == (4, 1, [3, 3])
    weights = {i.name for i in model.graph.initializer}
    for name in ("img_view_transformer.depth_net.bn.running_var", "img_view_transformer.depth_net.context_mlp.fc2.bias",
                 "img_view_transformer.depth_net.depth_se.conv_expand.weight",
                 "img_view_transformer.depth_net.depth_conv.4.conv_offset.bias",
                 "img_view_transformer.depth_net.depth_conv.4.weight",
                 "img_view_transformer.depth_net.depth_conv.5.bias"):
        assert name in weights, name


def test_aspp_false_drops_the_aspp_block():
    nodes = nodes_by_name(camera_aware(aspp=False))
    assert not any("aspp" in name or "GlobalAveragePool" in name for name in nodes)
    assert f"{SCOPE}/depth_conv/depth_conv.3/Conv" in nodes  # the 1x1 conv to D follows the BasicBlocks


def test_depth_is_the_softmax_of_the_depth_branch_and_the_volume_its_outer_product():
    model = camera_aware(batch=2)
    concat = f"{SCOPE}/Concat_output_0"
    outputs = onnxruntime_outputs(model, random_inputs(model), (concat,))
    logits, context = outputs[concat][:, :DEPTH_BINS], outputs[concat][:, DEPTH_BINS:]
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(outputs["depth"], expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(outputs["volume"], np.einsum("ndyx,ncyx->ndyxc", expected, context)[None],
                               rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("backbone", ["resnet50", "resnet18"])
def test_tiny_keeps_the_full_structure(backbone):
    def structure(model):
        return [(n.name, n.op_type, tuple(n.input), tuple(n.output)) for n in model.graph.node]

    full = bevdet_img_stage(backbone, batch=1, depth_net="camera_aware", dcn=True)
    assert structure(full) == structure(camera_aware(backbone, dcn=True))


def test_deterministic_bytes_and_the_lss_model_is_unchanged():
    first = camera_aware(batch=2, seed=3, dcn=True).SerializeToString()
    assert camera_aware(batch=2, seed=3, dcn=True).SerializeToString() == first
    assert camera_aware(batch=2, seed=4, dcn=True).SerializeToString() != first
    assert bevdet_img_stage_tiny("resnet18", batch=2).SerializeToString() == \
        bevdet_img_stage_tiny("resnet18", batch=2, depth_net="lss").SerializeToString()
    lss = bevdet_img_stage_tiny("resnet18", batch=2)
    assert [i.name for i in lss.graph.input] == ["img"] and lss.opset_import[0].version == 17


@pytest.mark.parametrize("kwargs, argument", [
    ({"depth_net": "bevdepth"}, "depth_net"),
    ({"depth_net": None}, "depth_net"),
    ({"depth_net": "lss", "dcn": True}, "depth_net"),
    ({"depth_net": "lss", "aspp": False}, "depth_net"),
    ({"depth_net": "camera_aware", "aspp": 1}, "aspp"),
    ({"depth_net": "camera_aware", "dcn": "yes"}, "dcn"),
])
def test_bad_arguments_name_the_argument(kwargs, argument):
    with pytest.raises(ModelArgumentError, match=f"'{argument}'") as caught:
        bevdet_img_stage(**kwargs)
    assert caught.value.argument == argument


# -- the float emulator against onnxruntime -------------------------------------------------------------

def relative_error(ours: np.ndarray, reference: np.ndarray) -> float:
    scale = float(np.abs(reference).max()) or 1.0
    return float(np.abs(ours.astype(np.float64) - reference.astype(np.float64)).max()) / scale


@pytest.mark.parametrize("backbone", ["resnet50", "resnet18"])
@pytest.mark.parametrize("batch", [1, 6])
def test_emulator_agrees_with_onnxruntime(backbone, batch, tmp_path):
    path = tmp_path / "camera_aware.onnx"
    model = camera_aware(backbone, batch=batch, path=path)
    inputs = random_inputs(model, seed=batch)
    reference = onnxruntime_outputs(model, inputs)
    ours = tidlx.emulate(tidlx.load(str(path)), inputs)
    for name, got in zip(("depth", "volume"), ours):
        assert got.shape == reference[name].shape
        assert relative_error(got, reference[name]) <= 1e-4, name


def test_demo_states_the_answers_on_the_camera_aware_model(tmp_path):
    from rich.console import Console

    from tidlx.demo import run_demo

    console = Console(record=True, width=400, highlight=False)
    result = run_demo(backbone="resnet18", batch=2, tiny=True, out_dir=str(tmp_path), console=console)
    assert all(err <= 1e-4 for err in result["errors"].values())
    out = console.export_text()
    assert "(1) export: 3 TIDL subgraphs (the seed's TVM run gave 5)" in out
    assert out.count("      host: ") == 4 and "Slice needs batch 1" in out
    assert "(2) batch 2: as is, 0 subgraphs" in out and "set TIDL_RELAY_MAX_BATCH_SIZE=2" in out
    assert "merged into nn.dense '/img_view_transformer/depth_net/depth_mlp/fc1/Gemm' and nn.dense" in out
    for way in ("-o deny_list=nn.batch_norm", "-o deny_list:layer_name=", "-o disabled_passes=FoldBatchNormIntoDense"):
        assert way in out
    assert "(4) with dcn=True: 4 subgraphs; nn.deformable_conv2d" in out and "TIDL has no deformable convolution" in out
    # 6: TI's export through the ORT flow, next to the built-in model through the TVM flow
    assert "6. TI's BEVDet as TI exports it, through TI's ONNX Runtime flow" in out
    assert "the built-in camera-aware BEVDet (TVM flow) and TI's export (ORT flow)" in out
    ti = result["ti_export"]
    assert ti["summary"] in out and ti["summary"].startswith(f"Final number of subgraphs created are : {ti['subgraphs']}")
    assert "   ScatterND /img_view_transformer/ScatterND: TIDL subgraph_" in out
    assert "   TopK /pts_bbox_head/bbox_coder/TopK: TIDL subgraph_" in out
    assert "the other flow: TI's export through the TVM flow: exports:" in out
    assert "batch 2: no feature map above the large-feature-map threshold" in out   # tiny: 36,864 per frame
    # 8: the host part through TVM, and bev_pool as a custom op end to end
    host = result["host"]
    assert host["c7x"]["kernels"] >= 1 and host["c7x"]["tidl_calls"] == 3
    assert os.path.getsize(tmp_path / "host_c7x" / "deploy_lib.c") > 0
    assert host["bev_pool"]["reason"].endswith("custom op (registered with tidlx.register_op): TIDL has no layer "
                                               "for it, it runs on the host")
    assert host["bev_pool"]["error"] <= 1e-5
    assert "8. the host part through TVM" in out and "built by TVM with its te_compute" in out
