"""TI's model surgery (tidlx's option ``model_surgery``): on by default in the ORT flow, off by
default in the TVM flow; the report names each rewrite and, with the surgery off, the rule that
would move a host op to TIDL."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tidlx
from tidlx.backends.tidl.flow import resolve_model_surgery, resolve_options
from tidlx.backends.tidl.options import MODEL_SURGERY_SPEC, OptionError
from tidlx.backends.tidl.ort_flow import attach_onnx_nodes
from tidlx.frontends.onnx import from_onnx
from tidlx.models import bevdet_img_stage

SOFTMAX = "/img_view_transformer/Softmax"
RULE = "convert_softmax_axis_channel_to_width"
HINT = "TI model optimizer rule convert_softmax_axis_channel_to_width moves it to TIDL (on by default in the ORT flow; model_surgery=1)"


@pytest.fixture(scope="module")
def bevdet():
    model = bevdet_img_stage("resnet50", batch=1, tiny=True)
    return attach_onnx_nodes(from_onnx(model), model)


def test_option_defaults_follow_the_flow():
    assert resolve_model_surgery({"flow": "ort"}) is True
    assert resolve_model_surgery({}) is False and resolve_model_surgery(None) is False
    assert resolve_model_surgery({"flow": "ort", "model_surgery": 0}) is False
    assert resolve_model_surgery({"model_surgery": "1"}) is True
    assert resolve_model_surgery(["flow=ort", "model_surgery=0"]) is False
    resolve_options({"model_surgery": 1})   # read beside TI's options
    with pytest.raises(OptionError, match="model_surgery=2"):
        resolve_options({"model_surgery": 2})
    with pytest.raises(OptionError, match="did you mean 'model_surgery'"):
        resolve_options({"model_surgery_": 1})
    assert MODEL_SURGERY_SPEC.origin == "tidlx" and MODEL_SURGERY_SPEC.choices == (0, 1)
    assert MODEL_SURGERY_SPEC.support == "partial" and MODEL_SURGERY_SPEC.support_note


def test_bevdet_depth_softmax_on_tidl_in_the_ort_flow(bevdet):
    """The acceptance check: with TI's default surgery the depth softmax is on TIDL, and the report
    says which rule moved it."""
    _, report = tidlx.partition(bevdet, {"flow": "ort"})
    assert not report.host_ops
    assert report.ort.summary_line().startswith("Final number of subgraphs created are : 1,")
    (t,) = report.transformations
    assert (t.pass_name, t.rule, t.layer, t.change) == ("ConvertSoftmaxAxisChannelToWidth", RULE, SOFTMAX, "rewritten")
    assert t.ops_before == ("nn.softmax",) and t.ops_after == ("transpose", "nn.softmax", "transpose")
    assert t.message == (f"'{SOFTMAX}': nn.softmax -> transpose+nn.softmax+transpose by TI's {RULE} rule "
                         f"(ConvertSoftmaxAxisChannelToWidth: softmax along the channel axis, run along the width "
                         f"axis between two transposes)")
    assert "ConvertSoftmaxAxisChannelToWidth" in report.render_text() and RULE in report.render_text()
    data = json.loads(report.to_json())
    assert data["transformations"][0]["rule"] == RULE
    assert {"pass": "ConvertSoftmaxAxisChannelToWidth", "status": "ran", "changes": 1} in data["preparation"]
    assert all(v.state != "host" for v in report.ort.verdicts)


def test_without_surgery_the_softmax_falls_back_and_names_the_rule(bevdet):
    _, report = tidlx.partition(bevdet, {"flow": "ort", "model_surgery": 0})
    (host,) = report.host_ops
    assert host.layer == SOFTMAX and host.kind == "rule" and host.reason.endswith(HINT)
    (verdict,) = [v for v in report.ort.verdicts if v.state == "host"]
    assert verdict.reason.endswith(HINT)
    assert not report.transformations
    assert [p.name for p in report.passes][0] == "FoldConstant"   # no surgery pass ran


def test_surgery_pass_disabled_by_name(bevdet):
    _, report = tidlx.partition(bevdet, {"flow": "ort", "disabled_passes": "ConvertSoftmaxAxisChannelToWidth"})
    (host,) = report.host_ops
    assert host.layer == SOFTMAX and HINT not in host.reason
    assert ("ConvertSoftmaxAxisChannelToWidth", "disabled") in [(p.name, p.status) for p in report.passes]


def test_tvm_flow_partition_unchanged_by_default_and_surgery_on_request(bevdet):
    plain, report = tidlx.partition(bevdet)
    assert [h.layer for h in report.host_ops] == [SOFTMAX] and report.host_ops[0].reason.endswith(HINT)
    assert not report.transformations and len(report.subgraphs) == 2
    assert "ConvertSoftmaxAxisChannelToWidth" not in [p.name for p in report.passes]
    _, with_surgery = tidlx.partition(bevdet, {"model_surgery": 1})
    assert not with_surgery.host_ops and len(with_surgery.subgraphs) == 1
    assert [t.rule for t in with_surgery.transformations] == [RULE]


def test_surgery_keeps_the_outputs(bevdet):
    from tidlx.backends.tidl.flow import analyse

    prepared = analyse(bevdet, {"flow": "ort"}).prepared
    unsurgered = analyse(bevdet, {"flow": "ort", "model_surgery": 0}).prepared
    rng = np.random.default_rng(3)
    inputs = {p.name_hint: rng.standard_normal(p.checked_type.shape).astype("float32")
              for p in bevdet.main.params}
    for got, want in zip(tidlx.emulate(prepared, inputs), tidlx.emulate(unsurgered, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_no_hint_where_the_rule_would_not_move_the_op():
    """A rank-3 channel softmax: TI's rule applies, but its transposes would move axis 0, which
    TIDL's Transpose refuses, so the report names no rule."""
    mod = tidlx.parse_relay('#[version = "0.0.5"]\n'
                            'def @main(%x: Tensor[(8, 4, 6), float32]) {\n'
                            '  nn.softmax(%x, axis=0) /* span=sm:0:0 */\n}')
    _, report = tidlx.partition(mod)
    (host,) = report.host_ops
    assert "model_surgery" not in host.reason


def test_mean_over_the_plane_hint_and_rewrite():
    mod = tidlx.parse_relay('#[version = "0.0.5"]\n'
                            'def @main(%x: Tensor[(1, 8, 4, 6), float32]) {\n'
                            '  %0 = nn.relu(%x) /* span=r:0:0 */;\n'
                            '  mean(%0, axis=[2, 3], keepdims=True) /* span=rm:0:0 */\n}')
    _, off = tidlx.partition(mod)
    (host,) = off.host_ops
    assert host.reason.endswith("TI model optimizer rule convert_reducemean_to_matmul moves it to TIDL (on by "
                                "default in the ORT flow; model_surgery=1)")
    _, on = tidlx.partition(mod, {"model_surgery": 1})
    assert not on.host_ops
    (t,) = on.transformations
    assert t.rule == "convert_reducemean_to_matmul" and t.ops_after == ("reshape", "nn.dense", "reshape")


def _hint(rule):
    return f"TI model optimizer rule {rule} moves it to TIDL (on by default in the ORT flow; model_surgery=1)"


#: (TI's rule, the body after a relu of %x: Tensor[(1, 8, 13, 13)], params): a host op the rule moves.
MOVED_BY_A_RULE = [
    ("convert_neg_to_mul", "negative(%0) /* span=op:0:0 */", {}),
    ("convert_maxpool_to_cascaded_maxpool",
     "nn.max_pool2d(%0, pool_size=[9, 9], padding=[4, 4, 4, 4]) /* span=op:0:0 */", {}),
    ("convert_gather_with_single_index_to_slice", "take(%0, 5, axis=2) /* span=op:0:0 */", {}),
    ("convert_expand_to_reshape_and_concat",
     "%1 = take(%0, %i, axis=1) /* span=g:0:0 */;\n  broadcast_to(%1, shape=[1, 3, 13, 13]) /* span=op:0:0 */",
     {"i": np.array([0], "int64")}),
    ("convert_conv_7x7_stride4_to_stride1",
     "nn.conv2d(%0, %w, strides=[4, 4], padding=[3, 3, 3, 3], channels=4, kernel_size=[7, 7]) /* span=op:0:0 */",
     {"w": np.ones((4, 8, 7, 7), "float32")}),
    ("convert_reducesum_to_matmul", "sum(%0, axis=[3], keepdims=True) /* span=op:0:0 */", {}),
]


@pytest.mark.parametrize("rule,body,params", MOVED_BY_A_RULE, ids=[r for r, _, _ in MOVED_BY_A_RULE])
def test_each_rule_names_itself_on_the_host_op_it_moves(rule, body, params):
    decls = "".join(f", %{k}: Tensor[({', '.join(map(str, v.shape))},), {v.dtype}]".replace(",)", ")")
                    for k, v in params.items())
    mod = tidlx.parse_relay('#[version = "0.0.5"]\n'
                            f'def @main(%x: Tensor[(1, 8, 13, 13), float32]{decls}) {{\n'
                            '  %0 = nn.relu(%x) /* span=r:0:0 */;\n'
                            f'  {body}\n}}', params=params or None)
    _, off = tidlx.partition(mod)
    (host,) = [h for h in off.host_ops if h.layer == "op"]
    assert host.reason.endswith(_hint(rule))
    _, on = tidlx.partition(mod, {"model_surgery": 1})
    assert "op" not in [h.layer for h in on.host_ops]
    assert rule in [t.rule for t in on.transformations if t.layer == "op"]


def test_large_global_average_pool_names_its_rule_in_the_ort_flow():
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("GlobalAveragePool", ["r"], ["y"], name="gap")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 40, 40])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 1, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    mod = attach_onnx_nodes(from_onnx(model), model)
    _, off = tidlx.partition(mod, {"flow": "ort", "model_surgery": 0})
    (host,) = off.host_ops
    assert host.reason.endswith(_hint("convert_large_global_avg_pooling_to_matmul"))
    assert off.ort.summary_line().startswith("Final number of subgraphs created are : 1,")
    _, on = tidlx.partition(mod, {"flow": "ort"})
    assert not on.host_ops and all(v.state != "host" for v in on.ort.verdicts)
    assert [t.rule for t in on.transformations] == ["convert_large_global_avg_pooling_to_matmul"]


def test_a_rewrite_that_stays_refused_gets_no_hint():
    """A sum over the height: TI's MatMul form reads a transpose, which tidlx's MatMul rule
    refuses (transA), so no rule is named."""
    mod = tidlx.parse_relay('#[version = "0.0.5"]\n'
                            'def @main(%x: Tensor[(1, 8, 4, 6), float32]) {\n'
                            '  %0 = nn.relu(%x) /* span=r:0:0 */;\n'
                            '  sum(%0, axis=[2], keepdims=True) /* span=op:0:0 */\n}')
    _, off = tidlx.partition(mod)
    (host,) = off.host_ops
    assert "model_surgery" not in host.reason


def test_no_surgery_on_a_qdq_model():
    """TI's optimizer runs only its QDQ rules on a model holding a QuantizeLinear."""
    from onnx import TensorProto, helper, numpy_helper

    scale = numpy_helper.from_array(np.array(0.05, np.float32), "s")
    zero = numpy_helper.from_array(np.array(0, np.int8), "z")
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dq"),
         helper.make_node("Neg", ["d"], ["y"], name="neg")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], initializer=[scale, zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    mod = attach_onnx_nodes(from_onnx(model), model)
    _, report = tidlx.partition(mod, {"flow": "ort"})
    assert not report.transformations
    (host,) = [h for h in report.host_ops if h.layer == "neg"]
    assert "model_surgery" not in host.reason


def _onnx(nodes, shape, inits, out="y"):
    from onnx import TensorProto, helper

    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return attach_onnx_nodes(from_onnx(model), model)


def test_a_transformer_block_runs_on_tidl_after_ti_default_surgery():
    """A class token gathered, expanded and concatenated, then LayerNorm, MatMul, a height softmax
    and a Neg: without the surgery the Gather, Expand and Neg fall back, each naming its rule;
    with TI's default surgery (the ORT flow's default) the block is one subgraph."""
    from onnx import helper, numpy_helper

    n = helper.make_node
    inits = [numpy_helper.from_array(np.array(0, np.int64), "i0"),
             numpy_helper.from_array(np.array([1], np.int64), "ax"),
             numpy_helper.from_array(np.array([1, 4, 32], np.int64), "shape"),
             numpy_helper.from_array(np.ones(32, np.float32), "g"),
             numpy_helper.from_array(np.zeros(32, np.float32), "b"),
             numpy_helper.from_array(np.full((32, 32), 0.1, np.float32), "w")]
    mod = _onnx([n("Relu", ["x"], ["t0"], name="relu"),
                 n("Gather", ["t0", "i0"], ["cls"], name="gather", axis=1),
                 n("Unsqueeze", ["cls", "ax"], ["cls3"], name="unsqueeze"),
                 n("Expand", ["cls3", "shape"], ["clsn"], name="expand"),
                 n("Concat", ["clsn", "t0"], ["tokens"], name="concat", axis=1),
                 n("LayerNormalization", ["tokens", "g", "b"], ["ln"], name="ln", axis=-1),
                 n("MatMul", ["ln", "w"], ["mm"], name="matmul"),
                 n("Softmax", ["mm"], ["sm"], name="softmax", axis=1),
                 n("Neg", ["sm"], ["y"], name="neg")], [1, 16, 32], inits)
    _, off = tidlx.partition(mod, {"flow": "ort", "model_surgery": 0})
    hints = {h.layer: h.reason for h in off.host_ops}
    assert sorted(hints) == ["expand", "gather", "neg"]
    assert hints["gather"].endswith(_hint("convert_gather_with_single_index_to_slice"))
    assert hints["expand"].endswith(_hint("convert_expand_to_reshape_and_concat"))
    assert hints["neg"].endswith(_hint("convert_neg_to_mul"))
    _, on = tidlx.partition(mod, {"flow": "ort"})
    assert not on.host_ops and on.ort.summary_line().startswith("Final number of subgraphs created are : 1,")
    assert [t.rule for t in on.transformations] == [
        "convert_expand_to_reshape_and_concat", "convert_single_concat_to_consecutive_concats", "convert_neg_to_mul",
        "convert_softmax_axis_height_to_width", "convert_gather_with_single_index_to_slice"]
    rng = np.random.default_rng(5)
    from tidlx.backends.tidl.flow import analyse

    x = {"x": rng.standard_normal((1, 16, 32)).astype("float32")}
    got = tidlx.emulate(analyse(mod, {"flow": "ort"}).prepared, x)
    want = tidlx.emulate(analyse(mod, {"flow": "ort", "model_surgery": 0}).prepared, x)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


def test_yolo_spp_pools_run_on_tidl_after_ti_default_surgery():
    from onnx import helper

    n = helper.make_node
    pools = [n("MaxPool", ["r"], [f"p{k}"], name=f"pool{k}", kernel_shape=[k, k], pads=[k // 2] * 4)
             for k in (5, 9, 13)]
    mod = _onnx([n("Relu", ["x"], ["r"], name="relu")] + pools +
                [n("Concat", ["r", "p5", "p9", "p13"], ["y"], name="concat", axis=1)], [1, 8, 20, 20], [])
    _, off = tidlx.partition(mod, {"flow": "ort", "model_surgery": 0})
    assert sorted(h.layer for h in off.host_ops) == ["pool13", "pool5", "pool9"]
    assert all(h.reason.endswith(_hint("convert_maxpool_to_cascaded_maxpool")) for h in off.host_ops)
    _, on = tidlx.partition(mod, {"flow": "ort"})
    assert not on.host_ops
    assert {t.layer: t.ops_after.count("nn.max_pool2d") for t in on.transformations} == \
        {"pool5": 2, "pool9": 4, "pool13": 6}


def test_an_aspp_branch_padded_beyond_its_map_runs_on_tidl_after_ti_default_surgery():
    """DeepLab's ASPP: a 3x3 conv of dilation 36 on a 32x32 map is padded beyond the map's width,
    which TIDL refuses on AM62A and AM67A; TI's rule crops it to its centre tap."""
    from onnx import helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(2).standard_normal((8, 8, 3, 3)).astype(np.float32), "w")
    n = helper.make_node
    mod = _onnx([n("Relu", ["x"], ["r"], name="relu"),
                 n("Conv", ["r", "w"], ["y"], name="aspp", kernel_shape=[3, 3], dilations=[36, 36], pads=[36] * 4)],
                [1, 8, 32, 32], [w])
    _, off = tidlx.partition(mod, {"flow": "ort", "model_surgery": 0, "target_device": "AM62A"})
    (host,) = off.host_ops
    assert "on AM62A (target_device)" in host.reason
    assert host.reason.endswith(_hint("convert_conv_large_pad_to_smaller_kernel"))
    assert not tidlx.partition(mod, {"flow": "ort", "model_surgery": 0})[1].host_ops   # other devices take it
    _, on = tidlx.partition(mod, {"flow": "ort", "target_device": "AM62A"})
    assert not on.host_ops and [t.rule for t in on.transformations] == ["convert_conv_large_pad_to_smaller_kernel"]
    assert on.transformations[0].message.startswith("'aspp': nn.conv2d rewritten in place by TI's "
                                                    "convert_conv_large_pad_to_smaller_kernel rule")


def test_a_space_to_depth_runs_on_tidl_after_ti_default_surgery():
    """tidlx has no TIDL layer for SpaceToDepth: without the surgery it falls back naming its rule;
    with it the rank-6 reshape, transpose and reshape are judged one by one and run on TIDL."""
    from onnx import helper

    n = helper.make_node
    mod = _onnx([n("Relu", ["x"], ["r"], name="relu"), n("SpaceToDepth", ["r"], ["s"], name="focus", blocksize=2),
                 n("Relu", ["s"], ["y"], name="relu2")], [1, 3, 16, 24], [])
    _, off = tidlx.partition(mod, {"flow": "ort", "model_surgery": 0})
    (host,) = off.host_ops
    assert host.layer == "focus" and host.reason.endswith(_hint("convert_space2depth_to_reshp_tr_reshp"))
    _, on = tidlx.partition(mod, {"flow": "ort"})
    assert not on.host_ops
    assert on.ort.summary_line().startswith("Final number of subgraphs created are : 1,")
    assert [(t.layer, t.rule, t.ops_after) for t in on.transformations] == \
        [("focus", "convert_space2depth_to_reshp_tr_reshp", ("reshape", "transpose", "reshape"))]


def test_a_depth_to_space_is_rewritten_in_the_ort_flow():
    from onnx import helper

    n = helper.make_node
    mod = _onnx([n("Relu", ["x"], ["r"], name="relu"), n("DepthToSpace", ["r"], ["y"], name="shuffle", blocksize=2)],
                [1, 12, 8, 10], [])
    _, on = tidlx.partition(mod, {"flow": "ort"})
    assert not on.host_ops
    assert [(t.layer, t.rule, t.ops_after) for t in on.transformations] == \
        [("shuffle", "convert_depth2space_to_reshp_tr_reshp", ("reshape", "transpose", "transpose", "reshape"))]


def test_a_reshape_transpose_reshape_is_merged_in_place_in_the_ort_flow():
    """TI's rule rewrites the first Reshape and the Transpose in place: each is listed under its
    own name; the second Reshape is unchanged."""
    from onnx import helper, numpy_helper

    n = helper.make_node
    s1 = numpy_helper.from_array(np.array([1, 2, 2, 2, 6, 10], np.int64), "s1")
    s2 = numpy_helper.from_array(np.array([1, 8, 6, 10], np.int64), "s2")
    mod = _onnx([n("Relu", ["x"], ["r"], name="relu"), n("Reshape", ["r", "s1"], ["a"], name="r1"),
                 n("Transpose", ["a"], ["b"], name="t", perm=[0, 3, 4, 5, 1, 2]),
                 n("Reshape", ["b", "s2"], ["y"], name="r2")], [1, 8, 6, 10], [s1, s2])
    _, on = tidlx.partition(mod, {"flow": "ort"})
    assert not on.host_ops
    assert [(t.layer, t.rule, t.change) for t in on.transformations] == \
        [("r1", "optimize_reshp_tr_reshp", "rewritten"), ("t", "optimize_reshp_tr_reshp", "rewritten")]
    _, off = tidlx.partition(mod, {"flow": "ort", "disabled_passes": "OptimizeReshpTrReshp"})
    assert not off.transformations


def test_an_nhwc_patch_embedding_runs_on_tidl_after_ti_default_surgery():
    """A 4x4 stride-4 Conv between NHWC transposes: TIDL refuses the Conv (stride 4 only with an
    11x11 kernel); TI's rule makes it a MatMul, and the transposes are gone."""
    from onnx import helper, numpy_helper

    n = helper.make_node
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((6, 3, 4, 4)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal((6,)).astype(np.float32), "b")
    mod = _onnx([n("Transpose", ["x"], ["a"], name="t1", perm=[0, 3, 1, 2]),
                 n("Conv", ["a", "w", "b"], ["c"], name="patch", kernel_shape=[4, 4], strides=[4, 4]),
                 n("Transpose", ["c"], ["y"], name="t2", perm=[0, 2, 3, 1])], [1, 16, 12, 3], [w, b])
    _, off = tidlx.partition(mod, {"flow": "ort", "model_surgery": 0})
    assert {h.layer for h in off.host_ops} == {"patch"}
    _, on = tidlx.partition(mod, {"flow": "ort"})
    assert not on.host_ops
    assert [(t.layer, t.change) for t in on.transformations] == [("t1", "removed"), ("patch", "rewritten"),
                                                                 ("t2", "removed")]
    assert {t.rule for t in on.transformations} == {"convert_tr_conv_stride_n_tr_to_matmul"}
    assert on.transformations[1].ops_after == ("reshape", "transpose", "reshape", "nn.dense", "add", "reshape")
    assert "removed by TI's convert_tr_conv_stride_n_tr_to_matmul rule" in on.transformations[0].message


def test_a_qdq_model_gets_only_ti_qdq_rule():
    """On a QDQ model TI's optimizer runs its QDQ rules only: the float weight quantized then
    dequantized becomes a quantized constant (remove_quantize_initializer); the Neg stays a Neg."""
    from onnx import helper, numpy_helper

    n = helper.make_node
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.int8), "z"),
             numpy_helper.from_array(rng.standard_normal((4, 4, 1, 1)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array(0.02, np.float32), "ws")]
    mod = _onnx([n("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
                 n("DequantizeLinear", ["q", "s", "z"], ["d"], name="dq"),
                 n("QuantizeLinear", ["w", "ws", "z"], ["wq"], name="wq"),
                 n("DequantizeLinear", ["wq", "ws", "z"], ["wd"], name="wdq"),
                 n("Conv", ["d", "wd"], ["c"], name="conv", kernel_shape=[1, 1]),
                 n("Neg", ["c"], ["y"], name="neg")], [1, 4, 8, 8], inits)
    _, on = tidlx.partition(mod, {"flow": "ort"})
    assert [(t.layer, t.rule, t.change) for t in on.transformations] == \
        [("wq", "remove_quantize_initializer", "removed"), ("wdq", "remove_quantize_initializer", "rewritten")]
    _, off = tidlx.partition(mod, {"flow": "ort", "model_surgery": 0})
    assert not off.transformations
    (neg,) = [h for h in off.host_ops if h.layer == "neg"]
    assert "model_surgery" not in neg.reason


def _initializers():
    """An initializer list and ``const(name, value)``, which adds one to it and returns its name."""
    from onnx import numpy_helper

    inits = []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    return inits, const


def _swin_window_attention(windows=2, tokens=4, heads=2, head_dim=3):
    """A Hugging Face (Swin) window attention block: Q, K, V by three MatMuls with bias Adds, heads
    by Reshape and Transpose, scores scaled, the relative-position bias added, the scores reshaped
    to (1, windows, ...) for the shifted-window mask and back, Softmax, MatMul, heads merged."""
    from onnx import helper

    rng = np.random.default_rng(9)
    d = heads * head_dim
    inits, const = _initializers()
    nodes = []

    n = helper.make_node
    nodes.append(n("Relu", ["x"], ["h"], name="pre"))
    for b in "qkv":
        nodes += [n("MatMul", ["h", const("w" + b, rng.standard_normal((d, d)).astype("float32"))], [b + "0"],
                    name=b + "_mm"),
                  n("Add", [const("b" + b, rng.standard_normal(d).astype("float32")), b + "0"], [b + "1"],
                    name=b + "_bias"),
                  n("Reshape", [b + "1", const("s" + b, np.array([windows, tokens, heads, head_dim]))], [b + "2"],
                    name=b + "_heads"),
                  n("Transpose", [b + "2"], [b + "3"], perm=[0, 2, 3, 1] if b == "k" else [0, 2, 1, 3],
                    name=b + "_tr")]
    scores = (windows, heads, tokens, tokens)
    nodes += [n("MatMul", ["q3", "k3"], ["sc"], name="qk"),
              n("Mul", ["sc", const("scale", np.array(0.5, np.float32))], ["sc1"], name="scale"),
              n("Add", ["sc1", const("rel_bias", rng.standard_normal((1, heads, tokens, tokens)).astype("float32"))],
                ["a1"], name="rel_bias_add"),
              n("Reshape", ["a1", const("win", np.array((1,) + scores))], ["a2"], name="to_windows"),
              n("Add", ["a2", const("mask", rng.standard_normal((1, windows, 1, tokens, tokens)).astype("float32"))],
                ["a3"], name="mask_add"),
              n("Reshape", ["a3", const("back", np.array(scores))], ["a4"], name="from_windows"),
              n("Softmax", ["a4"], ["p"], axis=-1, name="softmax"),
              n("MatMul", ["p", "v3"], ["o"], name="pv"),
              n("Transpose", ["o"], ["o1"], perm=[0, 2, 1, 3], name="merge_tr"),
              n("Reshape", ["o1", const("out", np.array([windows, tokens, d]))], ["y"], name="merge_heads")]
    return _onnx(nodes, [windows, tokens, d], inits)


def test_an_attention_block_bias_and_mask_adds_merge_in_the_ort_flow():
    """TI's hf_attention_block_optimization on a Swin window attention: the block is on TIDL either
    way (no op moves); with the surgery the mask Add and its two Reshapes leave the subgraph, the
    bias Add is rewritten in place, the scale Mul runs on Q (heads x tokens x head size) instead of
    the scores, and the outputs stay the same to rounding."""
    from tidlx.backends.tidl.flow import analyse

    mod = _swin_window_attention()
    _, off = tidlx.partition(mod, {"flow": "ort", "model_surgery": 0})
    _, on = tidlx.partition(mod, {"flow": "ort"})
    assert not off.host_ops and not on.host_ops
    assert off.ort.summary_line() == "Final number of subgraphs created are : 1, - Offloaded Nodes - 23, Total Nodes - 23"
    assert on.ort.summary_line() == "Final number of subgraphs created are : 1, - Offloaded Nodes - 21, Total Nodes - 23"
    mine = {t.layer: t.change for t in on.transformations if t.rule == "hf_attention_block_optimization"}
    assert mine == {"to_windows": "removed", "mask_add": "removed", "from_windows": "removed",
                    "rel_bias_add": "rewritten"}
    def scale_shape(prepared):
        (line,) = [ln for ln in str(prepared).splitlines() if "span=scale:" in ln]
        return line.split("ty=Tensor[")[-1].split("]")[0]

    assert scale_shape(analyse(mod, {"flow": "ort", "model_surgery": 0}).prepared) == "(2, 2, 4, 4), float32"
    assert scale_shape(analyse(mod, {"flow": "ort"}).prepared) == "(2, 2, 4, 3), float32"
    x = {"x": np.random.default_rng(3).standard_normal((2, 4, 6)).astype("float32")}
    got = tidlx.emulate(analyse(mod, {"flow": "ort"}).prepared, x)
    want = tidlx.emulate(analyse(mod, {"flow": "ort", "model_surgery": 0}).prepared, x)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    _, skipped = tidlx.partition(mod, {"flow": "ort", "disabled_passes": "HfAttentionBlockOptimization"})
    assert not [t for t in skipped.transformations if t.rule == "hf_attention_block_optimization"]


def _fused_qkv_attention(tokens=4, heads=2, head_dim=3):
    """A Hugging Face attention block with one Q/K/V projection: MatMul, Split into three, each with
    its bias Add, heads by Reshape and Transpose (K's for the scores), the scores divided, Softmax,
    MatMul, heads merged."""
    from onnx import helper

    rng = np.random.default_rng(5)
    d = heads * head_dim
    inits, const = _initializers()
    nodes = []

    n = helper.make_node
    nodes += [n("Relu", ["x"], ["h"], name="pre"),
              n("MatMul", ["h", const("wqkv", rng.standard_normal((d, 3 * d)).astype("float32"))], ["qkv"],
                name="qkv_mm"),
              n("Split", ["qkv", const("parts", np.array([d, d, d]))], ["q0", "k0", "v0"], axis=-1, name="qkv_split")]
    for b in "qkv":
        nodes += [n("Add", [const("b" + b, rng.standard_normal(d).astype("float32")), b + "0"], [b + "1"],
                    name=b + "_bias"),
                  n("Reshape", [b + "1", const("s" + b, np.array([1, tokens, heads, head_dim]))], [b + "2"],
                    name=b + "_heads"),
                  n("Transpose", [b + "2"], [b + "3"], perm=[0, 2, 3, 1] if b == "k" else [0, 2, 1, 3],
                    name=b + "_tr")]
    nodes += [n("MatMul", ["q3", "k3"], ["sc"], name="qk"),
              n("Div", ["sc", const("scale", np.array(2.0, np.float32))], ["sc1"], name="scale"),
              n("Softmax", ["sc1"], ["p"], axis=-1, name="softmax"),
              n("MatMul", ["p", "v3"], ["o"], name="pv"),
              n("Transpose", ["o"], ["o1"], perm=[0, 2, 1, 3], name="merge_tr"),
              n("Reshape", ["o1", const("out", np.array([1, tokens, d]))], ["y"], name="merge_heads")]
    return _onnx(nodes, [1, tokens, d], inits)


def test_a_fused_qkv_projection_is_lifted_before_its_split_in_the_ort_flow():
    """TI's hf_attention_block_optimization on a fused Q/K/V projection: the three bias Adds,
    Reshapes and V's Transpose leave the graph, Q's become the shared ones before the Split, K's
    Transpose stays; the outputs are the same bits. By TI's operator table the lifted Transpose
    (it moves the batch axis) and the Split of a 5-D tensor then run on the Arm."""
    from tidlx.backends.tidl.flow import analyse

    mod = _fused_qkv_attention()
    _, off = tidlx.partition(mod, {"flow": "ort", "model_surgery": 0})
    _, on = tidlx.partition(mod, {"flow": "ort"})
    assert not off.host_ops and off.ort.summary_line().startswith("Final number of subgraphs created are : 1,")
    mine = {t.layer: t.change for t in on.transformations if t.rule == "hf_attention_block_optimization"}
    assert mine == {"q_bias": "rewritten", "q_heads": "rewritten", "q_tr": "rewritten", "qkv_split": "rewritten",
                    "k_tr": "rewritten", "k_bias": "removed", "k_heads": "removed", "v_bias": "removed",
                    "v_heads": "removed", "v_tr": "removed"}
    assert not [t for t in on.transformations if t.rule == "optimize_reshp_tr_reshp"]
    host = {h.layer for h in on.host_ops}
    assert host == {"q_tr", "qkv_split"}
    x = {"x": np.random.default_rng(3).standard_normal((1, 4, 6)).astype("float32")}
    got = tidlx.emulate(analyse(mod, {"flow": "ort"}).prepared, x)
    want = tidlx.emulate(analyse(mod, {"flow": "ort", "model_surgery": 0}).prepared, x)
    np.testing.assert_array_equal(got[0], want[0])
