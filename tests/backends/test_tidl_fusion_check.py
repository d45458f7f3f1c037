"""Fusions as named steps (composites.FUSIONS, the option disabled_fusions) and check_fusions."""

import numpy as np
import pytest

import tidlx.ir as ir
from tidlx.backends.tidl.composites import FUSIONS, find_composites, group_fusions
from tidlx.backends.tidl.options import OptionError, TidlOptions
from tidlx.ir import TensorType, Var, const
from tidlx.ir.expr import Function, TupleGetItem


def _var(name, shape):
    return Var(name, TensorType(shape, "float32"))


def _c(*shape, start=1.0):
    return const((np.arange(int(np.prod(shape)), dtype="float32").reshape(shape) * 0.01 + start).astype("float32"))


def conv_bias_bn_relu():
    x = _var("x", (1, 3, 8, 8))
    c = ir.call("nn.conv2d", x, _c(4, 3, 3, 3), padding=(1, 1), layer="conv")
    b = ir.call("nn.bias_add", c, _c(4), layer="conv")
    bn = TupleGetItem(ir.call("nn.batch_norm", b, _c(4), _c(4), _c(4), _c(4), layer="bn"), 0)
    r = ir.call("nn.relu", bn, layer="relu")
    return Function([x], r)


def _shapes(groups):
    return [(g.name, tuple(c.op_name for c in g.calls)) for g in groups]


def test_all_fusions_on_is_one_conv_layer_with_every_fusion():
    (g,) = find_composites(conv_bias_bn_relu())
    assert g.name == "conv2d_bn_act"
    spec_match = g  # the group's own pattern performs all three fusions
    from tidlx.backends.tidl.composites import composite_specs
    spec = next(s for s in composite_specs() if s.name == spec_match.name)
    assert group_fusions(spec.name, spec.pattern.match(g.root).names) == tuple(FUSIONS)


@pytest.mark.parametrize("off, expected", [
    ("FuseActivation", [("conv2d_bn", ("nn.conv2d", "nn.bias_add", "nn.batch_norm"))]),
    ("FuseBatchNormIntoConv", [("conv2d_bias", ("nn.conv2d", "nn.bias_add")),
                               ("batch_norm_act", ("nn.batch_norm", "nn.relu"))]),
    ("FuseBiasIntoConv", [("batch_norm_act", ("nn.batch_norm", "nn.relu"))]),
])
def test_a_switched_off_fusion_splits_only_that_fusion(off, expected):
    groups = find_composites(conv_bias_bn_relu(), disabled_fusions=[off])
    assert _shapes(groups) == expected  # the calls left out are layers of their own (tidl.<op>)


def test_a_fusion_switched_off_at_one_layer_only():
    fn = conv_bias_bn_relu()
    assert _shapes(find_composites(fn, disabled_fusions=["FuseActivation:other"])) == \
        [("conv2d_bn_act", ("nn.conv2d", "nn.bias_add", "nn.batch_norm", "nn.relu"))]
    # named by the relu's layer: the relu joins no group (not even the BN's, as a plain anchor check would allow)
    assert _shapes(find_composites(fn, disabled_fusions=["FuseActivation:relu"])) == \
        [("conv2d_bn", ("nn.conv2d", "nn.bias_add", "nn.batch_norm"))]
    assert _shapes(find_composites(fn, disabled_fusions=["FuseBatchNormIntoConv:bn"])) == \
        [("conv2d_bias", ("nn.conv2d", "nn.bias_add")), ("batch_norm_act", ("nn.batch_norm", "nn.relu"))]


def test_disabled_fusions_option():
    assert TidlOptions().disabled_fusions == ()
    opts = TidlOptions.from_dict({"disabled_fusions": "FuseActivation, FuseBiasIntoConv:/c/Conv"})
    assert opts.disabled_fusions == ("FuseActivation", "FuseBiasIntoConv:/c/Conv")
    with pytest.raises(OptionError, match=r"'FuseActivaton' is not a composite fusion; did you mean FuseActivation"):
        TidlOptions.from_dict({"disabled_fusions": "FuseActivaton"})


# -- check_fusions ------------------------------------------------------------------------------------

import json  # noqa: E402
import warnings  # noqa: E402
from fractions import Fraction  # noqa: E402

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tidlx.backends.tidl.fusion_check import (BN_INTO_DENSE, FusionCheckError, SpotTensor,  # noqa: E402
                                              check_fusions, compare_fixed, fusion_summary)
from tidlx.backends.tidl.flow import partition_for_tidl  # noqa: E402
from tidlx.backends.tidl.layers import build_networks  # noqa: E402
from tidlx.frontends.onnx import from_onnx  # noqa: E402
from tidlx.models import bn_between_gemms  # noqa: E402


def test_compare_fixed_by_hand_with_equal_scales():
    t = SpotTensor("y", 8, True, 4.0)
    c = compare_fixed(np.array([1, 2, 3, -4], np.int8), t, np.array([1, 5, 3, -5], np.int8), t)
    assert (c.identical, c.same_type_and_scale, c.max_diff_lsb, c.elements_differ, c.elements) == \
        (False, True, 3.0, 2, 4)
    same = compare_fixed(np.array([7, -7], np.int8), t, np.array([7, -7], np.int8), t)
    assert same.identical and same.max_diff_lsb == 0 and same.elements_differ == 0


def test_compare_fixed_by_hand_with_different_scales():
    # fused 1/4 steps: 2.5, -0.75, 1.75; unfused 1/2 steps: 2.5, -1.0, 1.5 -> 0, 1, 1 fused LSBs apart
    fused, unfused = SpotTensor("a", 8, True, 4.0), SpotTensor("b", 8, True, 2.0)
    c = compare_fixed(np.array([10, -3, 7], np.int8), fused, np.array([5, -2, 3], np.int8), unfused)
    assert (c.identical, c.same_type_and_scale, c.max_diff_lsb, c.elements_differ, c.elements) == \
        (False, False, 1.0, 2, 3)
    # the same real values at two scales are equal values, but not identical bits
    c = compare_fixed(np.array([10, -4], np.int8), fused, np.array([5, -2], np.int8), unfused)
    assert (c.identical, c.elements_differ, c.max_diff_lsb) == (False, 0, 0.0)


def _conv_relu_model(path=None) -> onnx.ModelProto:
    """Conv (positive weights and bias) + Relu on a positive input: the relu changes no value."""
    rng = np.random.default_rng(3)
    w = rng.uniform(0.05, 1.0, (4, 2, 3, 3)).astype(np.float32)
    b = rng.uniform(0.1, 0.5, 4).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="/conv/Conv", pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["y"], name="/relu/Relu")]
    graph = helper.make_graph(nodes, "conv_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])],
                              initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _add_relu_model() -> onnx.ModelProto:
    """x + x, then Relu, on a positive input: the sum of two unsigned tensors is unsigned with or without
    the relu (docs/numerics.md §3), and the relu changes no value."""
    nodes = [helper.make_node("Add", ["x", "x"], ["s"], name="/add/Add"),
             helper.make_node("Relu", ["s"], ["y"], name="/relu/Relu")]
    graph = helper.make_graph(nodes, "add_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 6, 6])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _positive_frames(n=6):
    return {"x": np.random.default_rng(5).uniform(0.0, 1.0, (n, 2, 6, 6)).astype(np.float32)}


def test_an_exact_fusion_gives_identical_bits():
    result = check_fusions(from_onnx(_add_relu_model()), {"accuracy_level": 0, "advanced_options:calibration_frames": 6},
                           _positive_frames())
    relu = [f for f in result.fusions if f.kind == "relu/clip into layer"]
    assert len(relu) == 1
    f = relu[0]
    assert f.layers == ("/add/Add", "/relu/Relu") and f.fused_type == "EltWise+ReLU"
    assert [t for _, t in f.unfused_layers] == ["EltWise", "ReLU"]
    assert f.comparison.identical and f.comparison.input_identical
    assert f.comparison.max_diff_lsb == 0 and f.comparison.elements_differ == 0 and f.comparison.elements == 72
    assert f.fused_error == f.unfused_error  # the same bits: the same error against float
    assert f.to_dict()["comparison"]["identical"] is True


def test_a_relu_fused_into_a_conv_changes_its_type():
    """Without its ReLU a convolution is signed even when every value is >= 0 (docs/numerics.md §3), so
    the unfused pair runs the conv at a signed type, one bit less: not the fused bits, within one LSB."""
    result = check_fusions(from_onnx(_conv_relu_model()), {"accuracy_level": 0, "advanced_options:calibration_frames": 6},
                           _positive_frames())
    (f,) = [f for f in result.fusions if f.kind == "relu/clip into layer"]
    assert f.layers == ("/conv/Conv", "/relu/Relu") and f.fused_type == "Conv+ReLU"
    assert [t for _, t in f.unfused_layers] == ["Conv", "ReLU"]
    assert f.comparison.input_identical and not f.comparison.same_type_and_scale
    assert not f.comparison.identical and f.comparison.max_diff_lsb <= 1 and f.comparison.elements == 144


def test_the_builtin_bn_between_gemms_case():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = check_fusions(from_onnx(bn_between_gemms()), model_name="bn_between_gemms")
    kinds = [f.kind for f in result.fusions]
    assert kinds == [BN_INTO_DENSE, "relu/clip into layer"]
    bn = result.fusions[0]
    assert bn.layers == ("/bn/BatchNormalization", "/fc1/Gemm") and bn.detail == "preceding"
    assert bn.unfused_by == "disabled_passes=FoldBatchNormIntoDense"
    assert [t for _, t in bn.unfused_layers] == ["InnerProduct", "BatchNorm"]
    assert not bn.comparison.identical and 0 < bn.comparison.elements_differ <= bn.comparison.elements == 24
    assert bn.fused_error.sqnr_db > 20 and bn.unfused_error.sqnr_db > 20
    (options,) = result.batch_norm_options
    assert options.side == "preceding" and options.into == ("/fc1/Gemm",)
    by_option = {v.option: v for v in options.variants}
    assert by_option["as is"].num_subgraphs == 1 and "merged into /fc1/Gemm" in by_option["as is"].batch_norm
    denied = by_option["deny_list=nn.batch_norm"]
    assert (denied.num_subgraphs, denied.num_host_ops, denied.batch_norm) == (2, 1, "runs on the host")
    assert denied.tidl_macs_percent < 100.0
    kept = by_option["disabled_passes=FoldBatchNormIntoDense"]
    assert kept.num_subgraphs == 1 and kept.batch_norm.startswith("is a TIDL BatchNorm layer")
    text = "\n".join(result.lines())
    assert "folded by FoldBatchNormIntoDense into the preceding inner product '/fc1/Gemm'" in text


def test_the_lsb_difference_recomputed_exactly_from_the_two_runs():
    """The builtin's relu spot: the difference in fused LSBs, recomputed in exact rationals from the
    integers of both runs (observed independently here)."""
    from tidlx.backends.tidl.fusion_check import _run_variant
    from tidlx.backends.tidl.frames import load_frames

    mod = from_onnx(bn_between_gemms())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frames = load_frames(None, mod, 20)
        result = check_fusions(mod, kinds=["relu/clip into layer"])
        fused = _run_variant(mod, {}, frames, dict(frames[0]), "reference")
        unfused = _run_variant(mod, {"disabled_fusions": "FuseActivation"}, frames, dict(frames[0]), "reference")
    (f,) = result.fusions
    sub_f, sub_u = fused.model.subgraphs["tidl_0"], unfused.model.subgraphs["tidl_0"]
    fl = sub_f.layer("/fc2/Gemm")
    relu = next(layer for layer in sub_u.layers if layer.type == "ReLU")
    dense = next(layer for layer in sub_u.layers if layer.name == "/fc2/Gemm")
    q_f = fused.fixed[("tidl_0", fl.index)][1][0].astype(int).ravel()
    q_u = unfused.fixed[("tidl_0", relu.index)][1][0].astype(int).ravel()
    q_dense = unfused.fixed[("tidl_0", dense.index)][1][0].astype(int).ravel()
    assert list(q_u) == [max(v, 0) for v in q_dense]  # the ReLU layer keeps its input's scale
    s_f = Fraction(sub_f.tensors[fl.outputs[0]].scale)
    s_u = Fraction(sub_u.tensors[relu.outputs[0]].scale)
    diffs = [abs(Fraction(int(a)) - Fraction(int(b)) * s_f / s_u) for a, b in zip(q_f, q_u)]
    assert f.comparison.elements_differ == sum(1 for d in diffs if d != 0)
    assert abs(f.comparison.max_diff_lsb - float(max(diffs))) < 1e-9
    assert f.comparison.max_diff_lsb > 0


def test_json_schema_and_determinism():
    mod = from_onnx(bn_between_gemms())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = check_fusions(mod).to_json()
        second = check_fusions(from_onnx(bn_between_gemms())).to_json()
    assert first == second
    data = json.loads(first)
    assert set(data) == {"schema", "model", "options", "calibration", "inputs", "num_subgraphs", "num_fusions",
                         "fusions", "batch_norm_options"}
    assert data["schema"] == 1 and data["num_fusions"] == len(data["fusions"]) == 2
    assert set(data["calibration"]) == {"frames", "source", "random"}
    for f in data["fusions"]:
        assert set(f) == {"kind", "step", "unfused_by", "subgraph", "layers", "fused", "unfused", "comparison",
                          "float_error", "note", "side"}
        assert set(f["comparison"]) == {"identical", "same_type_and_scale", "max_diff_lsb", "elements_differ",
                                        "elements", "input_identical"}
        assert set(f["float_error"]) == {"fused", "unfused"}
        assert set(f["float_error"]["fused"]) == {"sqnr_db", "max_abs_err"}
        assert set(f["fused"]) == {"layer", "type", "tensor", "bits", "signed", "scale"}
        assert set(f["unfused"]) == {"layers", "tensor", "bits", "signed", "scale"}
    (bn,) = data["batch_norm_options"]
    assert [v["option"] for v in bn["variants"]] == ["as is", "deny_list=nn.batch_norm",
                                                     "disabled_passes=FoldBatchNormIntoDense"]
    json.dumps(data, allow_nan=False)  # no NaN or inf numbers: inf SQNR is the string "inf"


def test_the_builtin_model_is_deterministic_and_checks_its_arguments():
    from tidlx.models import ModelArgumentError

    assert bn_between_gemms().SerializeToString() == bn_between_gemms().SerializeToString()
    assert bn_between_gemms(seed=1).SerializeToString() != bn_between_gemms().SerializeToString()
    ops = [n.op_type for n in bn_between_gemms().graph.node]
    assert ops == ["Gemm", "BatchNormalization", "Gemm", "Relu", "Gemm"]
    with pytest.raises(ModelArgumentError, match="argument 'hidden' must be an integer >= 1"):
        bn_between_gemms(hidden=0)


def test_disabled_fusions_through_the_flow_and_default_unchanged():
    mod = from_onnx(bn_between_gemms())
    default = [l.composite for n in build_networks(partition_for_tidl(mod)[0]) for l in n.compute_layers()]
    assert default == ["tidl.dense_bias", "tidl.dense_relu", "tidl.dense_bias"]
    off = [l.composite for n in build_networks(partition_for_tidl(mod, {"disabled_fusions": "FuseActivation"})[0])
           for l in n.compute_layers()]
    assert off == ["tidl.dense_bias", "tidl.dense_bias", "tidl.nn.relu", "tidl.dense_bias"]


def test_bad_input_is_a_clear_error():
    mod = from_onnx(bn_between_gemms())
    with pytest.raises(FusionCheckError, match="kind 'bn' is not a fusion kind"):
        check_fusions(mod, kinds=["bn"])
    with pytest.raises(FusionCheckError, match="takes an IRModule"):
        check_fusions("model.onnx")
    with pytest.raises(OptionError, match="unknown TIDL option 'tensorbits'"):
        check_fusions(mod, {"tensorbits": 8})
    with pytest.raises(FusionCheckError, match="inputs must be a mapping"):
        check_fusions(mod, inputs=[1, 2])


def test_fusion_summary_on_the_builtin():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lines = fusion_summary(from_onnx(bn_between_gemms()))
    assert lines[0].startswith("batch norm '/bn/BatchNormalization' folded by FoldBatchNormIntoDense into the "
                               "preceding inner product '/fc1/Gemm'")
    assert lines[1].startswith("  at '/fc1/Gemm': max ") and "LSB" in lines[1]
    assert [line.split(":")[0].strip() for line in lines[2:]] == \
        ["as is", "deny_list=nn.batch_norm", "disabled_passes=FoldBatchNormIntoDense"]


def test_isolate_switches_a_composite_fusion_off_at_its_own_spot():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = check_fusions(from_onnx(bn_between_gemms()), kinds=["relu/clip into layer"], isolate=True)
    (f,) = result.fusions
    assert f.unfused_by == "disabled_fusions=FuseActivation:/act/Relu" and f.comparison.input_identical


def test_a_model_all_on_the_host_has_no_fusion_to_check():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = check_fusions(from_onnx(bn_between_gemms()), {"allow_list:layer_name": "/no/such/layer"})
    assert result.fusions == () and result.num_subgraphs == 0
    assert result.lines() == ["no TIDL subgraph (everything runs on the host): no fusion to check"]
