"""TIDL layers in the IR (Composite functions inside each Compiler="tidl" subgraph) and the TIDL
layer model built from them (backends/tidl/layers.py)."""

import math

import numpy as np
import pytest

import tidlx
import tidlx.ir as ir
from tidlx.backends.tidl import LAYER_TYPE_IDS, LayerModelError, build_network, build_networks, supported_ops
from tidlx.backends.tidl.layer_params import TIDL_PARAMS, ConvParams, PoolParams
from tidlx.backends.tidl.options import onnx_layer_types
from tidlx.backends.tidl.rules import TIDL_LAYER
from tidlx.ir import TensorType, Var, const, structural_equal
from tidlx.ir.expr import Call, Function, Tuple, TupleGetItem
from tidlx.ir.module import IRModule
from tidlx.ir.op import get_op
from tidlx.ir.traversal import post_order

RNG = np.random.default_rng(7)


def weights(*shape):
    return const(RNG.standard_normal(shape).astype(np.float32))


def small_model():
    """conv + bias + relu6 -> max pool -> split in two -> conv+BN+relu on one half -> concat;
    a sigmoid on the other half; then the depth-style softmax the host keeps (axis 1)."""
    x = Var("x", TensorType((1, 4, 16, 16), "float32"))
    c = ir.call("nn.conv2d", x, weights(8, 4, 3, 3), padding=(1, 1, 1, 1), channels=8, kernel_size=(3, 3),
                layer="conv1")
    c = ir.call("nn.bias_add", c, weights(8), layer="conv1")
    c = ir.call("clip", c, a_min=0.0, a_max=6.0, layer="relu6")
    p = ir.call("nn.max_pool2d", c, pool_size=(2, 2), strides=(2, 2), layer="pool")
    halves = ir.call("split", p, indices_or_sections=2, axis=1, layer="split")
    a = ir.call("nn.conv2d", TupleGetItem(halves, 0), weights(4, 4, 1, 1), channels=4, kernel_size=(1, 1),
                layer="conv2")
    bn = ir.call("nn.batch_norm", a, const(np.full(4, 1.5, np.float32)), weights(4), weights(4),
                 const(np.full(4, 2.0, np.float32)), layer="bn2")
    a = ir.call("nn.relu", TupleGetItem(bn, 0), layer="relu2")
    b = ir.call("sigmoid", TupleGetItem(halves, 1), layer="sig")
    cat = ir.call("concatenate", Tuple([a, b]), axis=1, layer="cat")
    out = ir.call("nn.softmax", cat, axis=1, layer="softmax")
    mod = IRModule({"main": Function([x], out)})
    mod.infer_types()
    return mod


def tidl_functions(mod):
    return [(name, fn) for name, fn in mod.items() if fn.attrs.get("Compiler") == "tidl"]


def test_every_tidl_op_has_a_layer_type_with_an_id_and_parameters():
    for name in supported_ops():
        op = get_op(name)
        assert op.get_attr(TIDL_LAYER) in LAYER_TYPE_IDS, name
        assert op.has_attr(TIDL_PARAMS), f"{name} has a TIDL rule but no tidl.params"
    assert LAYER_TYPE_IDS["Data"] == 0 and LAYER_TYPE_IDS["Conv"] == 1 and LAYER_TYPE_IDS["LayerNorm"] == 42
    assert LAYER_TYPE_IDS["TopK"] == 44
    assert len(LAYER_TYPE_IDS) == 45 and sorted(LAYER_TYPE_IDS.values()) == list(range(45))


def test_each_tidl_layer_is_one_composite_function_called_in_place():
    partitioned, report = tidlx.partition(small_model())
    (name, fn), = tidl_functions(partitioned)
    composites, glue = [], []
    for node in post_order(fn.body, enter_functions=False):
        if isinstance(node, Call):
            assert isinstance(node.op, Function), f"op call {node.op_name} outside a Composite function"
            composites.append(node.op.attrs["Composite"])
        elif isinstance(node, (Tuple, TupleGetItem)):
            glue.append(type(node).__name__)
    assert composites == ["tidl.conv2d_act", "tidl.nn.max_pool2d", "tidl.split", "tidl.conv2d_bn_act",
                          "tidl.sigmoid", "tidl.concatenate"]
    # the split's two halves are glue between layers; the tuple the concatenate reads is rebuilt inside its
    # Composite function from two tensor parameters
    assert glue == ["TupleGetItem", "TupleGetItem"]
    text = partitioned.astext()
    assert 'PartitionedFromPattern="nn.conv2d_nn.bias_add_clip_", Composite="tidl.conv2d_act"' in text
    assert ('PartitionedFromPattern="nn.conv2d_nn.batch_norm_TupleGetItem0_nn.relu_", '
            'Composite="tidl.conv2d_bn_act"') in text
    assert "%FunctionVar_0_0: Tensor[(1, 4, 16, 16), float32]" in text
    assert report.subgraphs[0].num_tidl_layers == 6 and [h.op for h in report.host_ops] == ["nn.softmax"]


def test_partitioned_small_model_round_trips_and_emulates_bit_identically():
    mod = small_model()
    partitioned, _ = tidlx.partition(mod)
    parsed = tidlx.parse_relay(partitioned.astext(show_meta_data=True))
    assert structural_equal(parsed, partitioned)
    x = RNG.standard_normal((1, 4, 16, 16)).astype(np.float32)
    want = tidlx.emulate(mod, {"x": x})
    for got in (tidlx.emulate(partitioned, {"x": x}), tidlx.emulate(parsed, {"x": x})):
        assert all(np.array_equal(a, b) for a, b in zip(want, got))


def test_layer_model_of_the_small_model():
    partitioned, report = tidlx.partition(small_model())
    net, = build_networks(partitioned)
    assert report.networks == (net,)
    assert net.name == "tidl_0"
    assert [(x.type, x.type_id) for x in net.layers] == [
        ("Data", 0), ("Conv", 1), ("Pool", 2), ("Slice", 14), ("Conv", 1), ("Sigmoid", 25), ("Concat", 12),
        ("Data", 0)]
    conv1, pool, split, conv2, sig, cat = net.compute_layers()
    assert conv1.params == ConvParams((3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, 4, 8)
    assert (conv1.activation.type, conv1.activation.type_id) == ("ReLU6", 3)
    assert [c.role for c in conv1.constants] == ["nn.conv2d.weight", "nn.bias_add.bias"]
    assert conv1.constants[0].shape == (8, 4, 3, 3) and conv1.ops == ("nn.conv2d", "nn.bias_add", "clip")
    assert pool.params == PoolParams("Max", 0, (2, 2), (2, 2), (0, 0, 0, 0), False, False, False)
    assert split.params.ranges == (((1, 0, 4),), ((1, 4, 8),)) and len(split.outputs) == 2
    assert (conv2.composite, conv2.activation.type_id, conv2.name) == ("tidl.conv2d_bn_act", 1, "conv2")
    assert [c.role for c in conv2.constants][1:] == ["nn.batch_norm.gamma", "nn.batch_norm.beta",
                                                     "nn.batch_norm.moving_mean", "nn.batch_norm.moving_var"]
    assert (sig.activation.type, sig.activation.type_id) == ("Sigmoid", 5)
    assert (cat.params.axis, cat.params.axis_name, cat.params.num_inputs) == (1, "C", 2)
    # tensors connect the layers: each input was written by an earlier layer
    assert conv2.inputs == (split.outputs[0],) and sig.inputs == (split.outputs[1],)
    assert cat.inputs == (conv2.outputs[0], sig.outputs[0])
    assert all(net.tensors[t].producer < layer.index for layer in net.layers for t in layer.inputs)
    assert net.tensors[cat.outputs[0]].shape == (1, 8, 8, 8) and net.outputs == cat.outputs
    # deterministic, and the same from the printed and parsed-back module
    assert build_networks(partitioned) == (net,)
    assert build_networks(tidlx.parse_relay(partitioned.astext(show_meta_data=True))) == (net,)


def _one_layer(build_body, shape=(1, 4, 8, 8)):
    x = Var("x", TensorType(shape, "float32"))
    mod = IRModule({"main": Function([x], build_body(x))})
    mod.infer_types()
    partitioned, _ = tidlx.partition(mod)
    net, = build_networks(partitioned)
    return net.compute_layers()


def test_bn_activations_hard_sigmoid_gelu_and_leaky_relu():
    gamma, beta, mean, var = (const(np.ones(4, np.float32)) for _ in range(4))

    def hard_sigmoid(x):
        bn = TupleGetItem(ir.call("nn.batch_norm", x, gamma, beta, mean, var), 0)
        return ir.call("clip", ir.call("add", ir.call("multiply", bn, const(np.float32(0.2))),
                                       const(np.float32(0.5))), a_min=0.0, a_max=1.0)

    layer, = _one_layer(hard_sigmoid)
    assert (layer.type, layer.composite, layer.activation.type, layer.activation.type_id) == \
        ("BatchNorm", "tidl.batch_norm_act", "HardSigmoid", 7)
    assert dict(layer.activation.params) == pytest.approx({"alpha": 0.2, "beta": 0.5})

    def gelu(x):
        inner = ir.call("erf", ir.call("multiply", x, const(np.float32(1 / math.sqrt(2)))))
        return ir.call("multiply", ir.call("multiply", x, const(np.float32(0.5))),
                       ir.call("add", inner, const(np.float32(1.0))))

    layer, = _one_layer(gelu)
    assert (layer.type, layer.composite, layer.params.form, layer.activation.type_id) == \
        ("BatchNorm", "tidl.gelu", "gelu", 9)

    layer, = _one_layer(lambda x: ir.call("nn.leaky_relu", x, alpha=0.1))
    assert (layer.type, layer.type_id, layer.activation.type) == ("PReLU", 4, "PReLU")
    assert dict(layer.activation.params) == pytest.approx({"slope": 0.1})


def test_layer_model_errors_name_the_place():
    x = Var("x", TensorType((1, 4), "float32"))
    bare = Function([x], ir.call("nn.relu", x), None, {"Compiler": "tidl"})
    bare_mod = IRModule({"tidl_0": bare})
    bare_mod.infer_types()
    with pytest.raises(LayerModelError, match=r"@tidl_0: nn.relu is not inside a Composite function"):
        build_network(bare_mod["tidl_0"], "tidl_0")
    v = Var("FunctionVar_0_0", TensorType((1, 4), "float32"))
    for composite, message in (("tidl.nn.sigmoid", "neither a TIDL composite pattern nor the op of its one call"),
                               ("tidl.conv2d_bn", "the body does not match the pattern conv2d_bn"),
                               ("dnnl.relu", "not a TIDL Composite")):
        inner = Function([v], ir.call("nn.relu", v), None, {"Composite": composite})
        fn = Function([x], Call(inner, [x]), None, {"Compiler": "tidl"})
        mod = IRModule({"tidl_0": fn})
        mod.infer_types()
        with pytest.raises(LayerModelError, match=message):
            build_networks(mod)


def test_zero_mac_subgraphs_go_back_to_the_host_by_default():
    x = Var("x", TensorType((1, 4, 8, 8), "float32"))
    body = ir.call("transpose", ir.call("nn.softmax", ir.call("reshape", x, newshape=(1, 8, 4, 8)), axis=1),
                   axes=(0, 1, 3, 2))
    mod = IRModule({"main": Function([x], body)})
    mod.infer_types()
    _, report = tidlx.partition(mod)
    assert report.num_subgraphs == 0
    held = [h for h in report.host_ops if h.supported]
    assert [h.op for h in held] == ["reshape", "transpose"]
    assert all(h.kind == "limit:min_subgraph_macs" and "0 MACs < min_subgraph_macs 1" in h.reason for h in held)
    _, kept = tidlx.partition(mod, {"min_subgraph_macs": 0})
    assert kept.num_subgraphs == 2


def test_onnx_layer_types_come_from_the_op_facets(monkeypatch):
    import tidlx.ir.op as op_module

    monkeypatch.setattr(op_module, "ops_with_attr",
                        lambda key: {"nn.relu": ("Relu", "MyRelu")} if key == "onnx.op_types" else {})
    with_facets = onnx_layer_types()
    assert {"Relu", "MyRelu"} <= with_facets  # a custom op type comes from the facet only
    # no op has the facet (the ONNX frontend was not imported): ONNX's own schemas stand in
    monkeypatch.setattr(op_module, "ops_with_attr", lambda key: {})
    without = onnx_layer_types()
    assert {"Conv", "Softmax", "Resize"} <= without and "MyRelu" not in without
    # op types that import to no IR op of their own are still layers a user may deny
    assert {"Identity", "Dropout"} <= without


def test_bevdet_resnet50_partition_round_trips():
    from tidlx.frontends.onnx import from_onnx
    from tidlx.models import bevdet_img_stage

    mod = from_onnx(bevdet_img_stage("resnet50", batch=1))
    partitioned, report = tidlx.partition(mod)
    assert report.num_subgraphs == 2 and report.tidl_macs_percent == 100.0
    assert structural_equal(tidlx.parse_relay(partitioned.astext(show_meta_data=True)), partitioned)
    net = report.networks[0]
    assert net.layer_type_counts()["Conv"] == sum(1 for x in net.compute_layers() if x.params.__class__ is ConvParams)
    assert report.to_dict()["subgraphs"][0]["layer_types"] == net.layer_type_counts()


def test_constant_dtype_text_is_numpys_str_of_the_dtype():
    from tidlx.backends.tidl.layers import _dtype_text
    from tidlx.ir import const

    for dtype in ("float32", "float16", "float64", "int8", "uint8", "int16", "uint16", "int32", "int64", "bool", ">f4"):
        c = const(np.zeros((2,), dtype))
        assert _dtype_text(c) == str(c.data.dtype), dtype
