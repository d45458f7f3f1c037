"""The seed's questions on its own model, BEVDet's camera-aware image stage (tiny: the graph of the full
model with channels / 8), partitioned by TI's flow at batch 6."""

from __future__ import annotations

import numpy as np
import pytest

import tidlx
from tidlx.models import bevdet_img_stage_tiny

NET = "/img_view_transformer/depth_net"
BN = f"{NET}/bn/BatchNormalization"
FC1 = (f"{NET}/depth_mlp/fc1/Gemm", f"{NET}/context_mlp/fc1/Gemm")
GEMMS = FC1 + (f"{NET}/depth_mlp/fc2/Gemm", f"{NET}/context_mlp/fc2/Gemm")
ASPP_RESIZE = f"{NET}/depth_conv/depth_conv.3/Resize"
DEFORM = f"{NET}/depth_conv/depth_conv.4/DeformConv"
#: What stays on the host at batch 6 with the limit raised, and why.
HOST_AT_BATCH_6 = {
    ASPP_RESIZE: "scales 4x12 (height x width, 1x1 -> 4x12) differ, which is not supported (Resize: equal power-of-2",
    "/img_view_transformer/Slice": "input batch 6 is not supported (Slice needs batch 1)",
    "/img_view_transformer/Slice_1": "input batch 6 is not supported (Slice needs batch 1)",
    "/img_view_transformer/Softmax": "softmax along axis 1 (channel) of shape (6, 59, 4, 12) is not supported",
}


@pytest.fixture(scope="module")
def camera_aware(tmp_path_factory):
    path = tmp_path_factory.mktemp("bevdet") / "camera_aware_b6.onnx"
    bevdet_img_stage_tiny("resnet18", batch=6, depth_net="camera_aware", path=path)
    return tidlx.load(str(path))


@pytest.fixture(scope="module")
def with_dcn(tmp_path_factory):
    path = tmp_path_factory.mktemp("bevdet") / "camera_aware_dcn_b6.onnx"
    bevdet_img_stage_tiny("resnet18", batch=6, depth_net="camera_aware", dcn=True, path=path)
    return tidlx.load(str(path))


def host_reasons(report) -> dict:
    return {h.layer: h.reason for h in report.host_ops}


def layers_on_tidl(report) -> set:
    return {layer for s in report.subgraphs for layer in s.layers}


# -- 1. does it export, into how many subgraphs -------------------------------------------------------

@pytest.mark.parametrize("how", ["option", "environment"])
def test_batch_6_with_the_limit_raised_is_three_subgraphs(camera_aware, how, monkeypatch):
    if how == "environment":
        monkeypatch.setenv("TIDL_RELAY_MAX_BATCH_SIZE", "6")
        _, report = tidlx.partition(camera_aware)
    else:
        _, report = tidlx.partition(camera_aware, {"max_batch_size": 6})
    assert len(report.subgraphs) == 3
    reasons = host_reasons(report)
    assert set(reasons) == set(HOST_AT_BATCH_6)
    for layer, reason in HOST_AT_BATCH_6.items():
        assert reason in reasons[layer]
    assert report.tidl_macs_percent > 99


# -- 2. multi-batch: the camera MLP's (N, 27) matrix meets the batch rule -----------------------------

def test_without_the_limit_every_op_stays_on_the_host_the_camera_mlp_too(camera_aware):
    _, report = tidlx.partition(camera_aware)
    assert len(report.subgraphs) == 0
    reasons = host_reasons(report)
    for gemm in GEMMS:
        assert ("batch 6 > TIDL_RELAY_MAX_BATCH_SIZE=1: set the environment variable TIDL_RELAY_MAX_BATCH_SIZE=6 "
                "or the option max_batch_size=6") in reasons[gemm]
    _, raised = tidlx.partition(camera_aware, {"max_batch_size": 6})
    assert set(GEMMS) <= layers_on_tidl(raised)


# -- 3. the BN feeding two GEMMs -----------------------------------------------------------------------

def test_the_shared_batch_norm_is_merged_into_both_first_gemms(camera_aware):
    _, report = tidlx.partition(camera_aware, {"max_batch_size": 6})
    (merge,) = [t for t in report.transformations if t.layer == BN]
    assert (merge.pass_name, merge.change) == ("FoldBatchNormIntoDense", "removed")
    assert merge.into == ", ".join(FC1)
    assert all(f"nn.dense '{fc1}'" in merge.message for fc1 in FC1)
    assert BN not in layers_on_tidl(report) and BN not in host_reasons(report)
    assert "BatchNorm" not in report.subgraphs[0].layer_types  # every other BN is absorbed by its conv


def test_disabling_the_merge_keeps_it_a_tidl_batch_norm_layer(camera_aware):
    _, report = tidlx.partition(camera_aware, {"max_batch_size": 6, "disabled_passes": "FoldBatchNormIntoDense"})
    assert len(report.subgraphs) == 3
    assert BN in report.subgraphs[0].layers and report.subgraphs[0].layer_types["BatchNorm"] == 1
    assert not [t for t in report.transformations if t.layer == BN]


def test_deny_list_of_the_op_sends_every_batch_norm_to_the_host(camera_aware):
    _, report = tidlx.partition(camera_aware, {"max_batch_size": 6, "deny_list": "nn.batch_norm"})
    reasons = host_reasons(report)
    assert "nn.batch_norm is in the option deny_list" in reasons[BN]
    assert not [t for t in report.transformations if t.layer == BN]  # denied: not merged either
    # ...and so do the 33 backbone/depth-branch BNs: the graph falls apart into more than 16 pieces
    assert len(report.subgraphs) == 16
    assert any("pruned by max_num_subgraphs=16" in r for r in reasons.values())
    assert report.tidl_macs_percent < 80


def test_deny_list_of_the_layer_sends_only_that_batch_norm_to_the_host(camera_aware):
    _, report = tidlx.partition(camera_aware, {"max_batch_size": 6, "deny_list:layer_name": BN})
    reasons = host_reasons(report)
    assert BN in reasons and len(report.subgraphs) == 3
    assert set(FC1) <= layers_on_tidl(report)


# -- 4. unsupported layers: the deformable conv ----------------------------------------------------------

def test_the_deformable_conv_goes_to_the_host_with_its_reason(with_dcn):
    _, report = tidlx.partition(with_dcn, {"max_batch_size": 6})
    reasons = host_reasons(report)
    assert set(reasons) == set(HOST_AT_BATCH_6) | {DEFORM}
    assert reasons[DEFORM].startswith(f"nn.deformable_conv2d '{DEFORM}': TIDL has no deformable convolution")
    assert f"{NET}/depth_conv/depth_conv.4/conv_offset/Conv" in layers_on_tidl(report)
    assert len(report.subgraphs) == 4  # the deformable conv splits the depth branch once more


def test_the_dcn_model_emulates_like_onnxruntime(tmp_path):
    import onnxruntime as ort

    path = tmp_path / "dcn.onnx"
    model = bevdet_img_stage_tiny("resnet18", batch=6, depth_net="camera_aware", dcn=True, path=path)
    rng = np.random.default_rng(11)
    inputs = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim], dtype=np.float32)
              for i in model.graph.input}
    reference = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, inputs)
    for got, want in zip(tidlx.emulate(tidlx.load(str(path)), inputs), reference):
        assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
