"""TI's exported BEVDet (tidlx.models.bevdet_ti_export): its structure, ScatterND and TopK imported
and emulated against onnxruntime, and what each of TI's flows does with it."""

import hashlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
from tidlx.emulator import run
from tidlx.frontends.onnx import from_onnx
from tidlx.ir.errors import TidlxWarning
from tidlx.models import bevdet_ti_export, bevdet_ti_inputs, bevdet_ti_lidar_coor_1d
from tidlx.models.bevdet_ti import NUM_CLASSES, TINY_TOPK

KERNEL_SETS = ("reference", "fast")


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _one_node_model(node, inputs, outputs, opset, initializers=()):
    graph = helper.make_graph([node], "one_node", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


# -- ScatterND and TopK through the importer and the emulator ---------------------------------------------

# ScatterND takes max and min from opset 18
@pytest.mark.parametrize("opset,reduction", [(16, r) for r in ("none", "add", "mul")] +
                         [(18, r) for r in ("none", "add", "mul", "max", "min")])
@pytest.mark.parametrize("kernels", KERNEL_SETS)
def test_scatter_nd_with_run_time_int64_indices_matches_onnxruntime(opset, reduction, kernels):
    rng = np.random.default_rng(4)
    data = rng.standard_normal((9, 5)).astype(np.float32)
    count = 9 if reduction == "none" else 23   # 'none' needs distinct indices; the others accumulate repeats
    index = (rng.permutation(9) if reduction == "none" else rng.integers(0, 9, count)).astype(np.int64)
    updates = rng.standard_normal((count, 5)).astype(np.float32)
    node = helper.make_node("ScatterND", ["data", "idx", "upd"], ["out"], reduction=reduction)
    model = _one_node_model(node, [helper.make_tensor_value_info("data", TensorProto.FLOAT, data.shape),
                                   helper.make_tensor_value_info("idx", TensorProto.INT64, (count, 1)),
                                   helper.make_tensor_value_info("upd", TensorProto.FLOAT, updates.shape)],
                            [helper.make_tensor_value_info("out", TensorProto.FLOAT, data.shape)], opset)
    feeds = {"data": data, "idx": index.reshape(count, 1), "upd": updates}
    want = _ort(model, feeds)[0]
    got = run(from_onnx(model), feeds, kernels=kernels)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    # an independent sum: every update added into its row of data, in order
    if reduction == "add":
        expected = data.astype(np.float64)
        for i, row in zip(index, updates):
            expected[i] += row
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_scatter_nd_index_out_of_range_is_an_error_naming_the_op():
    node = helper.make_node("ScatterND", ["data", "idx", "upd"], ["out"], reduction="add")
    model = _one_node_model(node, [helper.make_tensor_value_info("data", TensorProto.FLOAT, (4, 2)),
                                   helper.make_tensor_value_info("idx", TensorProto.INT64, (3, 1)),
                                   helper.make_tensor_value_info("upd", TensorProto.FLOAT, (3, 2))],
                            [helper.make_tensor_value_info("out", TensorProto.FLOAT, (4, 2))], 16)
    with pytest.raises(tidlx.TidlxError, match="scatter_nd: an index on axis 0 is out of range for size 4"):
        run(from_onnx(model), {"data": np.zeros((4, 2), np.float32), "idx": np.array([[0], [4], [1]], np.int64),
                               "upd": np.ones((3, 2), np.float32)})


@pytest.mark.parametrize("opset, attrs", [(10, {}), (11, {}), (11, {"largest": 0}), (11, {"axis": 0}),
                                          (11, {"axis": 1, "largest": 0}), (18, {"axis": -1})])
@pytest.mark.parametrize("kernels", KERNEL_SETS)
def test_topk_matches_onnxruntime_ties_included(opset, attrs, kernels):
    rng = np.random.default_rng(5)
    x = np.round(rng.standard_normal((5, 8, 6)), 1).astype(np.float32)   # one decimal: many equal values
    x[1, :, 2] = 0.5   # a whole column of ties
    axis = attrs.get("axis", -1)
    k = 3
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], **attrs)
    model = _one_node_model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                            [helper.make_tensor_value_info("values", TensorProto.FLOAT, None),
                             helper.make_tensor_value_info("indices", TensorProto.INT64, None)], opset,
                            [numpy_helper.from_array(np.array([k], np.int64), "k")])
    want = _ort(model, {"x": x})
    with pytest.warns(TidlxWarning) if opset < 11 else _no_warning():
        mod = from_onnx(model)
    got = run(mod, {"x": x}, kernels=kernels)
    assert got[1].dtype == np.int64
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    # independently: the values are the k extremes of each line, and the indices point at them
    largest = attrs.get("largest", 1)
    ends = np.sort(x, axis=axis)
    expected = np.flip(ends, axis=axis) if largest else ends
    np.testing.assert_array_equal(got[0], np.take(expected, np.arange(k), axis=axis))
    np.testing.assert_array_equal(np.take_along_axis(x, got[1], axis=axis), got[0])


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_topk_keeps_sorted_and_refuses_a_bad_k():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 6))
    outs = [helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("i", TensorProto.INT64, None)]
    unsorted = _one_node_model(helper.make_node("TopK", ["x", "k"], ["v", "i"], sorted=0), [x], outs, 11,
                               [numpy_helper.from_array(np.array([2], np.int64), "k")])
    call = [c for c in _calls(from_onnx(unsorted)) if c.op_name == "topk"][0]
    assert call.attrs.sorted is False and call.attrs.k == 2 and call.attrs.dtype == "int64"
    too_many = _one_node_model(helper.make_node("TopK", ["x", "k"], ["v", "i"], name="top"), [x], outs, 11,
                               [numpy_helper.from_array(np.array([7], np.int64), "k")])
    with pytest.raises(tidlx.TidlxError, match=r"top.*K=7 must be between 1 and the size 6 of axis 1"):
        from_onnx(too_many)


def _calls(mod):
    from tidlx.ir.expr import Call
    from tidlx.ir.traversal import post_order

    return [n for n in post_order(mod["main"].body) if isinstance(n, Call)]


# -- the export -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny():
    return bevdet_ti_export("resnet18", tiny=True)


def test_the_export_has_ti_inputs_outputs_and_ops(tiny):
    graph = tiny.graph
    assert [i.name for i in graph.input] == ["inputs", "bev_feat", "lidar_coor_1d"]
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.input}
    points = 6 * 59 * (64 // 16) * (192 // 16)
    assert shapes == {"inputs": [6, 3, 64, 192], "bev_feat": [32 * 32 + 1, 8], "lidar_coor_1d": [points]}
    assert graph.input[2].type.tensor_type.elem_type == TensorProto.INT64
    assert [o.name for o in graph.output] == ["bboxes", "scores", "labels"]
    assert tiny.opset_import[0].version == 16
    ops = [n.op_type for n in graph.node]
    scatter = next(n for n in graph.node if n.op_type == "ScatterND")
    assert scatter.input[0] == "bev_feat" and helper.get_attribute_value(scatter.attribute[0]) == b"add"
    # the plain LSS depth net: one 1x1 conv to D + C channels, then softmax over depth and the outer product
    depth_net = next(n for n in graph.node if n.name == "/img_view_transformer/depth_net/Conv")
    weight = next(i for i in graph.initializer if i.name == depth_net.input[1])
    assert list(weight.dims)[:1] == [59 + 8] and list(weight.dims)[2:] == [1, 1]
    softmax = next(n for n in graph.node if n.op_type == "Softmax")
    assert helper.get_attribute_value(softmax.attribute[0]) == 1
    assert ops.count("TopK") == 2 and ops.count("Sigmoid") == 1 and "BevPool" not in ops
    assert ops.index("Softmax") < ops.index("Mul") < ops.index("ScatterND") < ops.index("Squeeze") < ops.index("TopK")
    onnx.checker.check_model(tiny, full_check=True)


def test_the_export_is_deterministic(tmp_path):
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    bevdet_ti_export("resnet18", tiny=True, path=a)
    bevdet_ti_export("resnet18", tiny=True, path=b)
    assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()
    other = bevdet_ti_export("resnet18", tiny=True, seed=1)
    assert other.SerializeToString() != a.read_bytes()


def test_full_export_shapes():
    model = bevdet_ti_export("resnet50")
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    assert shapes == {"inputs": [6, 3, 256, 704], "bev_feat": [16385, 64], "lidar_coor_1d": [6 * 59 * 16 * 44]}
    assert [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim] == [1, 500, 10]


def test_bad_arguments_name_the_builder():
    with pytest.raises(tidlx.models.ModelArgumentError, match="bevdet_ti_export.*backbone"):
        bevdet_ti_export("vgg")
    with pytest.raises(tidlx.models.ModelArgumentError, match="bevdet_ti_export.*tiny"):
        bevdet_ti_export(tiny="yes")


def test_lidar_coor_1d_sends_points_outside_the_grid_to_the_dump_cell():
    index = bevdet_ti_lidar_coor_1d(6, 64, 192, tiny=True)
    assert index.dtype == np.int64 and index.shape == (6 * 59 * 4 * 12,)
    assert index.min() >= 0 and index.max() == 32 * 32          # the dump row is used
    assert 0 < np.count_nonzero(index < 32 * 32) < index.size


def test_the_export_emulates_as_onnxruntime_runs_it(tiny):
    feeds = bevdet_ti_inputs(tiny)
    want = _ort(tiny, feeds)
    got = tidlx.emulate(from_onnx(tiny), feeds)
    for name, g, w in zip(["bboxes", "scores", "labels"], got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, name
        scale = float(np.max(np.abs(w))) or 1.0
        assert float(np.max(np.abs(g.astype(np.float64) - w))) / scale <= 1e-4, name
    np.testing.assert_array_equal(got[2], want[2])
    assert got[2].max() < NUM_CLASSES and got[1].shape == (1, TINY_TOPK)


# -- the two flows on TI's export --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("ti") / "bevdet_ti_tiny.onnx"
    bevdet_ti_export("resnet18", tiny=True, path=path)
    return path


def _verdict(report, name):
    node = next(n for n in report.ort.nodes if n.name == name)
    return report.ort.verdicts[node.index]


def test_ort_flow_offloads_the_scatter_and_the_topks_and_says_why_the_rest_falls_back(tiny_path):
    _, report = tidlx.partition(tidlx.load(str(tiny_path)), {"flow": "ort"})
    scatter = _verdict(report, "/img_view_transformer/ScatterND")
    assert scatter.state == "tidl"   # variable bev_feat, one index per point, rank-2 updates: TI's constraints pass
    for name in ("/pts_bbox_head/bbox_coder/TopK", "/pts_bbox_head/bbox_coder/TopK_1"):
        assert _verdict(report, name).state == "tidl"
    host = {v.index: v for v in report.ort.verdicts if v.state == "host"}
    by_name = {report.ort.nodes[i].name: v.reason for i, v in host.items()}
    assert "input 0 has dtype int64" in by_name["/img_view_transformer/Unsqueeze_2"]   # lidar_coor_1d's Unsqueeze
    assert "Slice needs batch 1" in by_name["/img_view_transformer/Slice"]
    # TIDL 11.0 takes a Squeeze of up to 6 non-singleton dims: the 5-D one is on TIDL
    assert "/img_view_transformer/Squeeze" not in by_name
    assert "input 0 has dtype int64" in by_name["/pts_bbox_head/bbox_coder/Div"]
    # TI's documented constraint comes first: the gathered axis is not the outermost non-1 axis
    assert "whose outer dims are not 1" in by_name["/pts_bbox_head/bbox_coder/Gather_1"]
    # the softmax over depth is on TIDL: TI's default surgery moves its axis to the width
    assert _verdict(report, "/img_view_transformer/Softmax").state == "tidl"
    assert report.ort.summary_line().startswith(f"Final number of subgraphs created are : {len(report.ort.groups)}")
    assert len(host) == 8


def test_tvm_flow_keeps_the_scatter_on_the_host_for_its_point_axis(tiny_path):
    _, report = tidlx.partition(tidlx.load(str(tiny_path)), {"max_batch_size": 6})
    reasons = {h.layer: h.reason for h in report.host_ops if h.op == "scatter_nd"}
    reason = reasons["/img_view_transformer/ScatterND"]
    assert "(16992, 8) has 16992 there while the model's batch is 6" in reason
    assert not any(h.op == "topk" for h in report.host_ops)


def test_a_refused_topk_says_why_in_the_ort_flow(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 8, 4, 4))
    outs = [helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("i", TensorProto.INT64, None)]
    model = _one_node_model(helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, name="top"), [x], outs, 11,
                            [numpy_helper.from_array(np.array([3], np.int64), "k")])
    path = tmp_path / "topk.onnx"
    onnx.save(model, path)
    _, report = tidlx.partition(tidlx.load(str(path)), {"flow": "ort"})
    assert report.ort.verdicts[0].state == "host"
    assert "TopK along axis 1 (channel) is not supported (TopK: width or height axis only)" in report.ort.verdicts[0].reason


def test_large_feature_map_batch_warning():
    path_model = bevdet_ti_export("resnet18", batch=2)
    mod = from_onnx(path_model)
    from tidlx.backends.tidl.ort_flow import attach_onnx_nodes
    from tidlx.backends.tidl.report import LARGE_FEATURE_MAP_ELEMENTS

    attach_onnx_nodes(mod, path_model)
    _, report = tidlx.partition(mod, {"flow": "ort"})
    warnings_ = report.batch_warnings()
    assert warnings_ and warnings_[0].startswith("tidl_0 runs batch 2 with feature maps of up to 2,883,584 elements "
                                                 "per frame (img_backbone/conv1: (2, 64, 128, 352))")
    assert "edgeai-tidl-tools#42" in warnings_[0]
    assert report.to_dict()["warnings"] == warnings_
    assert any(w in report.render_text() for w in warnings_)
    # independently: 64 x 128 x 352 (conv1's output of one 256 x 704 frame) is above the threshold
    assert 64 * 128 * 352 > LARGE_FEATURE_MAP_ELEMENTS
    one = bevdet_ti_export("resnet18", batch=1)
    mod1 = from_onnx(one)
    attach_onnx_nodes(mod1, one)
    assert tidlx.partition(mod1, {"flow": "ort"})[1].batch_warnings() == []


def test_partition_flow_both(tiny_path, capsys):
    from tidlx.cli import main

    assert main(["partition", str(tiny_path), "--flow", "both", "-o", "max_batch_size=6"]) == 0
    out = capsys.readouterr().out
    assert "flow=tvm: exports: yes" in out and "flow=ort: exports: yes" in out
    assert "Final number of subgraphs created are :" in out
    assert "on the host with flow=tvm only" in out and "on the host with flow=ort only" not in out
    assert "nn.softmax '/img_view_transformer/Softmax': softmax along axis 1 (channel)" in out
    assert "squeeze '/img_view_transformer/Squeeze'" not in out   # on TIDL in both flows
    assert main(["partition", str(tiny_path), "--flow", "both", "--json"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    assert set(doc["flows"]) == {"tvm", "ort"} and "ort" in doc["flows"]["ort"]
    assert {d["host_in"] for d in doc["differences"]} <= {"tvm", "ort"} and doc["differences"]
    assert main(["partition", str(tiny_path), "--flow", "both", "--svg", "x.svg"]) == 2
    assert "--flow both compares" in capsys.readouterr().err
    assert main(["partition", str(tiny_path), "--flow", "both", "-o", "flow=ort"]) == 2
    assert "the option flow names one of them" in capsys.readouterr().err
