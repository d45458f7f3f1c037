"""tidlx.partition: the TIDL flow (options, graph preparation, composites, oracle, partitioner)
and its report (table, JSON, SVG), on small models. BEVDet is in test_tidl_bevdet.py."""

from __future__ import annotations

import json
import re
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
import tidlx.ir as ir
from tidlx.backends.tidl import TidlOptions
from tidlx.backends.tidl.flow import PREP_PASSES, compare_strategies, composites_for, resolve_options
from tidlx.backends.tidl.options import OptionError
from tidlx.backends.tidl.report import REPORT_KINDS, held_back_kind, short_layer_name
from tidlx.frontends.onnx import from_onnx
from tidlx.ir import TensorType, Var, const
from tidlx.ir.errors import TidlxError, TidlxWarning
from tidlx.ir.expr import Function, TupleGetItem
from tidlx.ir.transform import PassContext

SVG_NS = "{http://www.w3.org/2000/svg}"


# -- models ---------------------------------------------------------------------------------------

def bn_between_gemms(seed: int = 0) -> onnx.ModelProto:
    """The seed's failure: Gemm -> BatchNormalization -> Gemm."""
    rng = np.random.default_rng(seed)

    def init(name, arr):
        return numpy_helper.from_array(np.asarray(arr, np.float32), name)

    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1", transB=1),
        helper.make_node("BatchNormalization", ["h", "gamma", "beta", "mean", "var"], ["hn"], name="bn"),
        helper.make_node("Gemm", ["hn", "w2", "b2"], ["y"], name="fc2", transB=1),
    ]
    inits = [init("w1", rng.standard_normal((32, 16))), init("b1", rng.standard_normal(32)),
             init("gamma", rng.random(32) + 0.5), init("beta", rng.standard_normal(32)),
             init("mean", rng.standard_normal(32)), init("var", rng.random(32) + 0.5),
             init("w2", rng.standard_normal((8, 32))), init("b2", rng.standard_normal(8))]
    graph = helper.make_graph(nodes, "bn_between_gemms",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def var(name, shape):
    return Var(name, TensorType(shape, "float32"))


def ones(*shape):
    return const(np.ones(shape, "float32"))


def arange(*shape):
    return const((np.arange(int(np.prod(shape)), dtype="float32").reshape(shape) % 7 + 1) / 7)


def conv_bn_relu(x, channels, name):
    c = ir.call("nn.conv2d", x, arange(channels, x.checked_type.shape[1], 3, 3), padding=(1, 1),
                layer=f"{name}.conv")
    bn = ir.call("nn.batch_norm", c, ones(channels), arange(channels), arange(channels), ones(channels),
                 layer=f"{name}.bn")
    return ir.call("nn.relu", TupleGetItem(bn, 0), layer=f"{name}.relu")


def chain_with_softmaxes(blocks: int = 3):
    """conv+bn+relu blocks separated by channel softmaxes (TIDL: width/height axis only), so
    greedy makes one subgraph per block."""
    x = var("x", (1, 4, 8, 8))
    y = x
    for b in range(blocks):
        y = conv_bn_relu(y, 4, f"b{b}")
        if b < blocks - 1:
            y = ir.call("nn.softmax", y, axis=1, layer=f"softmax{b}")
    mod = ir.IRModule({"main": Function([x], y)})
    return mod.infer_types()


# -- options ----------------------------------------------------------------------------------------

def test_options_come_as_a_dict_strings_or_tidl_options():
    opts, disabled = resolve_options({"tensor_bits": 16, "disabled_passes": "FoldConstant, MergePadIntoConv"})
    assert opts.tensor_bits == 16 and disabled == ("FoldConstant", "MergePadIntoConv")
    opts2, disabled2 = resolve_options(["tensor_bits=16", "disabled_passes=FoldConstant,MergePadIntoConv"])
    assert (opts2, disabled2) == (opts, disabled)
    given = TidlOptions(max_num_subgraphs=3)
    assert resolve_options(given) == (given, ())
    assert resolve_options(None) == (TidlOptions(), ())


@pytest.mark.parametrize("options, message", [
    ({"deny_lst": "nn.relu"}, "unknown TIDL option 'deny_lst'; did you mean 'deny_list'?"),
    ({"disable_passes": "FoldConstant"}, "did you mean 'disabled_passes'"),
    ({"weight_clipping": 1}, "did you mean 'advanced_options:weight_clipping'"),
    ({"disabled_passes": "FoldBatchNormIntoDens"}, "'FoldBatchNormIntoDens' is not a graph preparation pass; "
                                                   "did you mean FoldBatchNormIntoDense?"),
    ({"max_num_subgraphs": 17}, "TIDL runs at most 16 subgraphs"),
    ({"tensor_bits": "12"}, "option tensor_bits=12 is not allowed: it must be one of 8, 16"),
    (["tensor_bits"], "must be written key=value"),
    (["tensor_bits=8", "tensor_bits=16"], "given twice"),
    (42, "TIDL options must be"),
])
def test_bad_options_are_errors_naming_the_option(options, message):
    mod = from_onnx(bn_between_gemms())
    with pytest.raises(OptionError) as info:
        tidlx.partition(mod, options)
    assert message in str(info.value)


def test_inference_mode_1_needs_a_batch_divisible_by_the_cores():
    x = var("x", (6, 4, 8, 8))
    mod = ir.IRModule({"main": Function([x], ir.call("nn.relu", x, layer="r"))}).infer_types()
    with pytest.raises(OptionError, match="batch 6 is not a multiple of advanced_options:num_cores=4"):
        tidlx.partition(mod, {"advanced_options:inference_mode": 1, "advanced_options:num_cores": 4})
    _, report = tidlx.partition(mod, {"advanced_options:inference_mode": 1, "advanced_options:num_cores": 3,
                                      "max_batch_size": 6})
    assert report.num_subgraphs == 1


def test_bad_module_and_strategy_are_errors():
    with pytest.raises(TidlxError, match="takes an IRModule"):
        tidlx.partition("not a module")
    mod = from_onnx(bn_between_gemms())
    with pytest.raises(TidlxError, match="unknown partition strategy 'greedyy'; did you mean greedy"):
        tidlx.partition(mod, strategy="greedyy")
    partitioned, _ = tidlx.partition(mod)
    with pytest.raises(TidlxError, match="already partitioned"):
        tidlx.partition(partitioned)


def test_a_bad_batch_environment_variable_is_an_error(monkeypatch):
    monkeypatch.setenv("TIDL_RELAY_MAX_BATCH_SIZE", "six")
    with pytest.raises(OptionError, match="TIDL_RELAY_MAX_BATCH_SIZE='six' is not allowed"):
        tidlx.partition(from_onnx(bn_between_gemms()))


# -- the seed's failure: a BatchNorm between two Gemms ------------------------------------------------

def _ops(fn):
    return [c.op_name for c in ir.traversal.calls(fn.body)]


def test_default_flow_merges_the_bn_into_the_dense_and_says_so():
    mod = from_onnx(bn_between_gemms())
    assert mod.layer_types == {"fc1": "Gemm", "bn": "BatchNormalization", "fc2": "Gemm"}
    partitioned, report = tidlx.partition(mod)
    assert report.num_subgraphs == 1 and not report.host_ops
    (sub,) = report.subgraphs
    assert sub.layers == ("fc1", "fc2") and "nn.batch_norm" not in sub.ops
    assert sub.ops == {"nn.dense": 2, "nn.bias_add": 2} and sub.num_tidl_layers == 2
    (merge,) = report.transformations
    assert (merge.pass_name, merge.layer, merge.layer_type, merge.change, merge.into) == (
        "FoldBatchNormIntoDense", "bn", "BatchNormalization", "removed", "fc1")
    assert "nn.batch_norm 'bn' merged into nn.dense 'fc1' by FoldBatchNormIntoDense" in merge.message
    text = str(report)
    assert "merged into nn.dense 'fc1'" in text and "-o deny_list=nn.batch_norm" in text
    assert "nn.batch_norm" not in _ops(partitioned["tidl_0"])
    data = json.loads(report.to_json())
    assert data["transformations"][0]["into"] == "fc1"
    assert [p["pass"] for p in data["preparation"]] == list(PREP_PASSES)


def test_fix_one_deny_list_keeps_the_bn_on_the_host():
    mod = from_onnx(bn_between_gemms())
    partitioned, report = tidlx.partition(mod, {"deny_list": "nn.batch_norm"})
    assert not report.transformations  # the merge left the denied BN alone
    (host,) = report.host_ops
    assert (host.layer, host.op, host.kind, host.layer_type) == ("bn", "nn.batch_norm", "deny_list",
                                                                 "BatchNormalization")
    assert host.reason == "nn.batch_norm 'bn': nn.batch_norm is in the option deny_list"
    assert [s.layers for s in report.subgraphs] == [("fc1",), ("fc2",)]
    assert "nn.batch_norm" in _ops(partitioned["main"])


@pytest.mark.parametrize("options, kind", [
    ({"deny_list:layer_name": "bn"}, "deny_list:layer_name"),
    ({"deny_list:layer_type": "BatchNormalization"}, "deny_list:layer_type"),
    ({"allow_list:layer_name": "fc1,fc2"}, "allow_list"),
])
def test_the_other_lists_also_keep_the_bn_from_being_merged(options, kind):
    _, report = tidlx.partition(from_onnx(bn_between_gemms()), options)
    assert [(h.layer, h.kind) for h in report.host_ops] == [("bn", kind)]
    assert not report.transformations


def test_fix_two_disabling_the_merge_keeps_the_bn_a_tidl_layer():
    mod = from_onnx(bn_between_gemms())
    partitioned, report = tidlx.partition(mod, {"disabled_passes": "FoldBatchNormIntoDense"})
    assert not report.host_ops and not report.transformations
    (sub,) = report.subgraphs
    assert sub.layers == ("fc1", "bn", "fc2") and sub.ops["nn.batch_norm"] == 1
    assert sub.num_tidl_layers == 3  # InnerProduct, BatchNorm, InnerProduct
    assert "nn.batch_norm" in _ops(partitioned["tidl_0"])
    assert [p.status for p in report.passes] == ["ran"] * 5 + ["disabled"]
    assert report.to_dict()["disabled_passes"] == ["FoldBatchNormIntoDense"]
    # The same through a PassContext in effect, and through -o strings.
    with PassContext(disabled_passes=["FoldBatchNormIntoDense"]):
        _, via_context = tidlx.partition(mod)
    assert via_context.subgraphs[0].layers == ("fc1", "bn", "fc2")
    _, via_strings = tidlx.partition(mod, ["disabled_passes=FoldBatchNormIntoDense"])
    assert via_strings.subgraphs[0].layers == ("fc1", "bn", "fc2")


def test_all_three_forms_compute_the_same_function():
    mod = from_onnx(bn_between_gemms())
    x = np.random.default_rng(3).standard_normal((1, 16)).astype("float32")
    want = tidlx.emulate(mod, {"x": x})[0]
    for options in (None, {"deny_list": "nn.batch_norm"}, {"disabled_passes": "FoldBatchNormIntoDense"}):
        partitioned, report = tidlx.partition(mod, options)
        got = tidlx.emulate(partitioned, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        # Partitioning itself changes no arithmetic: bit-identical to the prepared module.
        assert np.array_equal(got, tidlx.emulate(report.prepared_module, {"x": x})[0])


# -- composites and the user's lists ------------------------------------------------------------------

def conv_bn_relu_pool():
    x = var("x", (1, 3, 16, 16))
    y = conv_bn_relu(x, 8, "blk")
    y = ir.call("nn.max_pool2d", y, pool_size=(2, 2), strides=(2, 2), layer="pool")
    return ir.IRModule({"main": Function([x], y)}).infer_types()


def test_a_denied_layer_leaves_its_composite_and_the_rest_regroups():
    mod = conv_bn_relu_pool()
    fn = mod["main"]
    assert [g.name for g in composites_for(fn, TidlOptions(), {})] == ["conv2d_bn_act"]
    opts = TidlOptions.from_dict({"deny_list:layer_name": "blk.conv"})
    assert [g.name for g in composites_for(fn, opts, {})] == ["batch_norm_act"]
    _, report = tidlx.partition(mod, {"deny_list:layer_name": "blk.conv"})
    assert report.host_layers() == ["blk.conv"]
    assert report.host_ops[0].kind == "deny_list:layer_name" and report.host_ops[0].composite is None
    assert report.tidl_layers() == ["blk.bn", "blk.relu", "pool"]
    assert report.subgraphs[0].num_tidl_layers == 2  # BatchNorm (+ReLU), Pooling


def test_allow_list_keeps_only_the_listed_layers_on_tidl():
    mod = conv_bn_relu_pool()
    _, report = tidlx.partition(mod, {"allow_list:layer_name": "blk.conv,pool"})
    assert sorted(report.tidl_layers()) == ["blk.conv", "pool"]
    assert {h.layer: h.kind for h in report.host_ops} == {"blk.bn": "allow_list", "blk.relu": "allow_list"}


def test_a_rule_failure_takes_the_whole_composite_to_the_host():
    x = var("x", (1, 8, 16, 16))
    # depthwise 5x5 stride 1 is not a TIDL depthwise form
    c = ir.call("nn.conv2d", x, ones(8, 1, 5, 5), padding=(2, 2), groups=8, layer="dw")
    r = ir.call("nn.relu", c, layer="dw.relu")
    mod = ir.IRModule({"main": Function([x], r)}).infer_types()
    _, report = tidlx.partition(mod)
    assert report.num_subgraphs == 0
    assert [(h.layer, h.kind, h.composite) for h in report.host_ops] == [
        ("dw", "rule", "conv2d_act"), ("dw.relu", "rule", "conv2d_act")]
    assert "depthwise 5x5 stride 1" in report.host_ops[0].reason
    assert "is part of one TIDL Conv layer" in report.host_ops[1].reason


def test_unknown_layer_names_warn():
    with pytest.warns(TidlxWarning, match="'fc3' \\(closest layer: 'fc[12]'\\)"):
        tidlx.partition(from_onnx(bn_between_gemms()), {"deny_list:layer_name": "fc3"})


# -- limits ----------------------------------------------------------------------------------------

def test_greedy_makes_one_subgraph_per_block():
    _, report = tidlx.partition(chain_with_softmaxes(3))
    assert report.num_subgraphs == 3
    assert [h.layer for h in report.host_ops] == ["softmax0", "softmax1"]
    assert {h.kind for h in report.host_ops} == {"rule"}
    assert all(len(s.inputs) == 1 and len(s.outputs) == 1 for s in report.subgraphs)
    assert report.subgraphs[0].inputs[0].source == "%x"
    assert report.subgraphs[1].inputs[0].source == "nn.softmax 'softmax0'"
    assert report.subgraphs[0].outputs[0].nbytes == 4 * 4 * 8 * 8
    assert report.boundary_bytes == sum(s.io_bytes for s in report.subgraphs) == 6 * 4 * 4 * 8 * 8


def test_max_num_subgraphs_prunes_and_says_so():
    _, report = tidlx.partition(chain_with_softmaxes(3), {"max_num_subgraphs": 2})
    assert report.num_subgraphs == 2
    pruned = [h for h in report.host_ops if h.kind == "limit:max_num_subgraphs"]
    assert len(pruned) == 3 and all(h.supported for h in pruned)  # conv, bn, relu of one block
    assert all("pruned by max_num_subgraphs=2" in h.reason for h in pruned)


def test_io_and_node_limits_are_their_own_kinds():
    _, report = tidlx.partition(chain_with_softmaxes(2), {"max_subgraph_io": 1})
    assert {h.kind for h in report.host_ops} == {"rule", "limit:max_subgraph_io"}
    _, report = tidlx.partition(chain_with_softmaxes(2), {"max_num_subgraph_nodes": 2})
    # conv + bn + relu is one TIDL layer of 3 nodes: it cannot fit in 2
    assert {h.kind for h in report.host_ops} == {"rule", "limit:max_num_subgraph_nodes"}
    assert report.num_subgraphs == 0


def test_min_transfer_reasons_are_cost_model():
    assert held_back_kind("min-transfer: its subgraph would not pay off (...)") == "cost_model"
    assert held_back_kind("its composite group stays on the host with nn.conv2d 'c': x") == "composite"
    with pytest.raises(ValueError, match="unclassified"):
        held_back_kind("something new")


def test_every_strategy_runs_and_the_comparison_has_one_row_each():
    mod = chain_with_softmaxes(3)
    comparison = compare_strategies(mod, {"max_num_subgraphs": 2}, ["greedy", "max-offload", "min-transfer"])
    assert [r.strategy for r in comparison] == ["greedy", "max-offload", "min-transfer"]
    for row, report in zip(comparison, comparison.reports):
        assert row.subgraphs == report.num_subgraphs <= 2
        assert row.host_ops == len(report.host_ops)
        assert row.boundary_bytes == report.boundary_bytes
        assert set(row.host_ops_by_kind) <= set(REPORT_KINDS)
    greedy, max_offload = comparison.rows[0], comparison.rows[1]
    assert max_offload.tidl_macs_percent >= greedy.tidl_macs_percent
    text = comparison.render_text()
    assert "% MACs on TIDL" in text and "max-offload" in text
    assert json.loads(comparison.to_json())["strategies"][2]["strategy"] == "min-transfer"


# -- report formats --------------------------------------------------------------------------------

def test_json_has_the_documented_keys():
    _, report = tidlx.partition(chain_with_softmaxes(2), {"deny_list:layer_name": "b1.relu"})
    data = json.loads(report.to_json())
    assert {"subgraphs", "host_ops", "strategy", "totals"} <= set(data)
    assert data["strategy"] == "greedy"
    for s in data["subgraphs"]:
        assert {"name", "layers", "macs", "inputs", "outputs"} <= set(s)
        for t in s["inputs"] + s["outputs"]:
            assert {"name", "source", "shape", "dtype", "bytes"} <= set(t)
    for h in data["host_ops"]:
        assert {"layer", "op", "reason", "kind"} <= set(h) and h["kind"] in REPORT_KINDS
    assert {h["layer"]: h["kind"] for h in data["host_ops"]} == {"softmax0": "rule", "b1.relu": "deny_list:layer_name"}
    assert data["totals"]["macs"] == data["totals"]["tidl_macs"] + data["totals"]["host_macs"]
    assert data["options"] == {"deny_list:layer_name": "b1.relu"}


def svg_nodes(svg: str):
    root = ET.fromstring(svg)
    nodes = []
    for g in root.iter(SVG_NS + "g"):
        if g.get("class") == "node":
            rect = g.find(SVG_NS + "rect")
            nodes.append((g.get("data-group"), rect.get("fill"),
                          tuple(float(rect.get(k)) for k in ("x", "y", "width", "height"))))
    return root, nodes


def test_svg_is_well_formed_with_one_colour_per_subgraph_and_host():
    _, report = tidlx.partition(chain_with_softmaxes(3))
    svg = report.svg()
    root, nodes = svg_nodes(svg)
    assert root.tag == SVG_NS + "svg"
    fills = {}
    for group, fill, _ in nodes:
        fills.setdefault(group, set()).add(fill)
    assert set(fills) == {"tidl_0", "tidl_1", "tidl_2", "host", "io"}
    assert all(len(f) == 1 for f in fills.values())
    colours = [next(iter(fills[g])) for g in ("tidl_0", "tidl_1", "tidl_2", "host")]
    assert len(set(colours)) == 4
    # composites are one box: 3 blocks + 2 softmaxes + input + output
    assert len(nodes) == 7
    assert [g.get("data-group") for g in root.iter(SVG_NS + "g") if g.get("class") == "legend"] == [
        "tidl_0", "tidl_1", "tidl_2", "host"]


def test_outputs_are_deterministic():
    a = tidlx.partition(from_onnx(bn_between_gemms()), {"deny_list": "nn.batch_norm"})[1]
    b = tidlx.partition(from_onnx(bn_between_gemms()), {"deny_list": "nn.batch_norm"})[1]
    assert a.to_json() == b.to_json() and a.svg() == b.svg() and str(a) == str(b)
    assert a.timings and "timings" not in a.to_json()


def test_short_layer_names():
    assert short_layer_name("/img_backbone/layer1/layer1.0/conv1/Conv", "Conv") == "layer1.0/conv1"
    assert short_layer_name("/img_view_transformer/Softmax", "Softmax") == "img_view_transformer"
    assert short_layer_name("fc1", "Gemm") == "fc1"
    assert short_layer_name(None) == ""


def test_report_table_lists_subgraphs_and_host_reasons():
    _, report = tidlx.partition(chain_with_softmaxes(2))
    text = str(report)
    assert re.search(r"2 TIDL subgraph\(s\) \(greedy\)", text)
    assert "tensors crossing subgraph boundaries" in text
    assert "softmax along axis 1 (channel)" in text
    assert "host ops by kind: rule 1" in text


def test_partitioned_module_prints_and_parses_back():
    partitioned, _ = tidlx.partition(chain_with_softmaxes(3))
    text = partitioned.astext()
    assert text.count('Compiler="tidl"') == 3 and 'global_symbol="tidl_2"' in text
    assert ir.structural_equal(tidlx.parse_relay(text), partitioned)


def test_layer_type_deny_without_onnx_types_warns():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tidlx.partition(chain_with_softmaxes(2), {"deny_list:layer_type": "Conv"})
    assert any("records no ONNX op types" in str(w.message) for w in caught)


def test_each_preparation_pass_reports_what_it_did_and_can_be_disabled():
    x = var("x", (1, 4, 16, 16))
    w = ones(4, 4, 3, 3)
    y = ir.call("nn.pad", x, const(np.float32(0)), pad_width=((0, 0), (0, 0), (1, 1), (1, 1)), layer="pad")
    y = ir.call("nn.conv2d", y, w, layer="conv1")
    y = ir.call("multiply", y, const(np.float32(1)), layer="times_one")
    y = ir.call("maximum", y, const(np.float32(0)), layer="max")
    y = ir.call("nn.conv2d", y, w, strides=(1, 2), padding=(1, 1), layer="conv2")
    mod = ir.IRModule({"main": Function([x], y)}).infer_types()
    _, report = tidlx.partition(mod)
    assert [(t.pass_name, t.layer, t.change) for t in report.transformations] == [
        ("RemoveIdentityOps", "times_one", "removed"),
        ("ConvertMaxMinToClip", "max", "rewritten"),
        ("SplitAsymmetricStrideConv", "conv2", "rewritten"),
        ("MergePadIntoConv", "pad", "removed"),
    ]
    assert report.transformations[2].ops_after == ("nn.conv2d", "nn.max_pool2d")
    assert [p.changes for p in report.passes] == [0, 1, 1, 1, 1, 0]
    disabled = ["RemoveIdentityOps", "ConvertMaxMinToClip", "SplitAsymmetricStrideConv", "MergePadIntoConv"]
    _, untouched = tidlx.partition(mod, {"disabled_passes": disabled})
    assert not untouched.transformations
    assert [p.status for p in untouched.passes] == ["ran", "disabled", "disabled", "disabled", "disabled", "ran"]
    layers = untouched.tidl_layers() + untouched.host_layers()
    assert {"pad", "times_one", "max"} <= set(layers)
