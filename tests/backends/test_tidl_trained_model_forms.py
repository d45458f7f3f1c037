"""Layer forms of trained models in fixed point.

Element-wise ops with a constant operand, as trained models write them, become the TIDL layers TI's
ONNX import makes of them (``TIDL_onnxMapAddBaseParams`` and its Sub/Mul/Div siblings): a scalar or
per-channel constant makes a BatchNorm layer (``c - x`` the weight -1, ``x / c`` the weight 1/c), in
either operand order, and the layer quantizes at 8 and 16 bit with an error a fixed-point layer
should have. Also two layers that share one node's name (the convolution and pool that
SplitAsymmetricStrideConv makes, the parts of a HardSwish) calibrate their own biases. GELU (erf form)
and ELU are BatchNorm layers with a table activation (docs/numerics.md §8.10.2)."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
from tidlx.backends.tidl.layers import build_networks

RNG = np.random.default_rng(0)
W = (RNG.standard_normal((8, 8, 3, 3)) * 0.2).astype(np.float32)


def _model(nodes, inits, opset=17, shape=(1, 8, 6, 6)):
    path = _model.folder / f"m{_model.count}.onnx"
    _model.count += 1
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in {"W": W, **inits}.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return tidlx.load(path)


_model.count = 0


@pytest.fixture(autouse=True)
def _model_folder(tmp_path):
    _model.folder = tmp_path


def _conv(out="c", **attrs):
    return helper.make_node("Conv", ["x", "W"], [out], pads=[1, 1, 1, 1], name="conv", **attrs)


CHANNEL_BIAS = (np.arange(8, dtype=np.float32).reshape(1, 8, 1, 1) - 3.5) * 0.2
CASES = {
    # PP-LCNetV3's learnable affine block writes the scale first
    "mul_constant_first": ([_conv(), helper.make_node("Mul", ["k", "c"], ["y"], name="op")], {"k": [1.5]}),
    # hard-swish written out, divided by 6
    "divide_by_six": ([_conv(), helper.make_node("Relu", ["c"], ["r"]),
                       helper.make_node("Div", ["r", "six"], ["y"], name="op")], {"six": 6.0}),
    # YOLOv8's anchors minus a tensor
    "constant_minus_x": ([_conv(), helper.make_node("Sub", ["k", "c"], ["y"], name="op")], {"k": 2.0}),
    "x_minus_constant": ([_conv(), helper.make_node("Sub", ["c", "k"], ["y"], name="op")], {"k": CHANNEL_BIAS}),
    "channel_add_after_relu": ([_conv(), helper.make_node("Relu", ["c"], ["r"]),
                                helper.make_node("Add", ["b", "r"], ["y"], name="op")], {"b": CHANNEL_BIAS}),
    "scalar_mul_after_relu": ([_conv(), helper.make_node("Relu", ["c"], ["r"]),
                               helper.make_node("Mul", ["r", "k"], ["y"], name="op")], {"k": 0.5}),
}


def _frames(n=4, shape=(8, 6, 6), seed=1):
    return {"x": np.random.default_rng(seed).standard_normal((n,) + shape).astype(np.float32)}


def _op_layer(mod):
    partitioned, _ = tidlx.partition(mod)
    (net,) = build_networks(partitioned)
    return next(layer for layer in net.layers if layer.name == "op")


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_constant_operand_is_a_batch_norm_layer(case):
    layer = _op_layer(_model(*CASES[case]))
    assert layer.type == "BatchNorm"
    assert layer.params.axis == 1 and layer.params.channels == 8


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("bits,floor_db", [(8, 25.0), (16, 70.0)])
def test_a_constant_operand_quantizes_close_to_float(case, bits, floor_db):
    mod = _model(*CASES[case])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tidlx.compare(mod, options={"tensor_bits": bits,
                                             "advanced_options:calibration_iterations": 2}, calib=_frames())
    assert result.outputs[0].sqnr_db > floor_db


def test_the_channels_are_the_variable_operands():
    """``Mul(c[1], x)``: the layer's channels come from x, not from the one-element constant."""
    layer = _op_layer(_model(*CASES["mul_constant_first"]))
    assert (layer.params.channels, layer.params.axis) == (8, 1)


def test_a_constant_of_more_than_channels_stays_an_eltwise_layer():
    plane = RNG.standard_normal((1, 1, 6, 6)).astype(np.float32)
    layer = _op_layer(_model([_conv(), helper.make_node("Mul", ["c", "p"], ["y"], name="op")], {"p": plane}))
    assert layer.type == "EltWise" and layer.params.constant_input


@pytest.mark.parametrize("nodes,inits", [
    ([helper.make_node("Conv", ["x", "W", "B"], ["y"], pads=[1, 1, 1, 1], strides=[2, 1], name="op")],
     {"B": np.arange(8) * 0.1}),
    ([_conv(), helper.make_node("HardSwish", ["c"], ["y"], name="op")], {}),
], ids=["conv_stride_2x1_with_bias", "hardswish"])
def test_layers_sharing_a_name_calibrate_their_own_biases(nodes, inits):
    """At accuracy level 1 (bias calibration) both forms quantize and stay close to float."""
    mod = _model(nodes, inits)
    partitioned, _ = tidlx.partition(mod)
    (net,) = build_networks(partitioned)
    names = [layer.name for layer in net.layers if layer.name == "op"]
    assert len(names) >= 2       # the case is only a case if two layers share the name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tidlx.compare(mod, options={"tensor_bits": 16, "accuracy_level": 1,
                                             "advanced_options:calibration_iterations": 2}, calib=_frames())
    assert result.outputs[0].sqnr_db > 70.0


@pytest.mark.parametrize("node,activation,opset", [
    (helper.make_node("Gelu", ["c"], ["y"], name="op"), "GELU", 20),
    (helper.make_node("Elu", ["c"], ["y"], name="op", alpha=0.7), "ELU", 17),
], ids=["gelu", "elu"])
def test_gelu_and_elu_quantize_as_table_activations(node, activation, opset):
    mod = _model([_conv(), node], {}, opset=opset)
    layer = _op_layer(mod)
    assert (layer.type, layer.activation.type) == ("BatchNorm", activation)
    if activation == "ELU":
        assert dict(layer.activation.params)["alpha"] == pytest.approx(0.7)
    frames = _frames()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qmodel = tidlx.quantize(mod, {"tensor_bits": 16, "advanced_options:calibration_iterations": 2},
                                calib=frames)
        result = tidlx.compare(qmodel, inputs={"x": frames["x"][:1]})
    (sub,) = qmodel.subgraphs.values()
    assert sub.layer("op").activation_table is not None
    assert result.outputs[0].sqnr_db > 60.0


def _sequence_model(nodes, inits, shape=(1, 10, 16)):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
    path = _model.folder / f"s{_model.count}.onnx"
    _model.count += 1
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return tidlx.load(path)


SEQUENCE = {"M": RNG.standard_normal((16, 24)) * 0.3, "b": RNG.standard_normal(24) * 0.1,
            "g": RNG.random(24) + 0.5, "beta": RNG.standard_normal(24) * 0.2}


def test_an_inner_product_of_a_sequence_and_a_feature_affine_quantize():
    """MatMul of a 3-D tensor with its bias (an InnerProduct over the rows), then (after a ReLU, so that
    nothing folds them into the product) a scale and shift along the last axis, as a LayerNorm ends (a
    BatchNorm along that axis)."""
    mod = _sequence_model([helper.make_node("MatMul", ["x", "M"], ["m"], name="mm"),
                           helper.make_node("Add", ["m", "b"], ["a"], name="mm_bias"),
                           helper.make_node("Relu", ["a"], ["r"], name="relu"),
                           helper.make_node("Mul", ["r", "g"], ["s"], name="op"),
                           helper.make_node("Add", ["s", "beta"], ["y"], name="shift")], SEQUENCE)
    partitioned, report = tidlx.partition(mod)
    (net,) = build_networks(partitioned)
    kinds = {layer.name: layer.type for layer in net.layers}
    assert kinds["mm"] == "InnerProduct" and kinds["op"] == "BatchNorm"
    assert next(layer for layer in net.layers if layer.name == "op").params.axis == 2
    frames = {"x": np.random.default_rng(2).standard_normal((4, 10, 16)).astype(np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for bits, floor_db in ((8, 25.0), (16, 70.0)):
            result = tidlx.compare(mod, options={"tensor_bits": bits, "advanced_options:calibration_iterations": 2},
                                   calib=frames)
            assert result.outputs[0].sqnr_db > floor_db


def test_the_fast_inner_product_of_a_sequence_gives_the_plain_kernels_bits():
    from tidlx.emulator.fixed.fast_kernels import fast_inner_product_kernel
    from tidlx.emulator.fixed.layers import KERNELS

    mod = _sequence_model([helper.make_node("MatMul", ["x", "M"], ["m"], name="mm"),
                           helper.make_node("Add", ["m", "b"], ["y"], name="mm_bias")], SEQUENCE)
    frames = {"x": np.random.default_rng(3).standard_normal((2, 10, 16)).astype(np.float32)}
    for bits in (8, 16):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            qmodel = tidlx.quantize(mod, {"tensor_bits": bits, "accuracy_level": 0}, calib=frames)
        (sub,) = qmodel.subgraphs.values()
        layer = next(layer for layer in sub.layers if layer.type == "InnerProduct")
        x_type = sub.tensors[layer.inputs[0]].fixed_type
        lo, hi = x_type.bounds
        x = np.random.default_rng(bits).integers(lo, hi + 1, (1, 10, 16)).astype(x_type.dtype)
        plain = KERNELS["InnerProduct"](layer, [x], sub.tensors)[0]
        fast = fast_inner_product_kernel(layer, [x], sub.tensors)[0]
        assert plain.shape == (1, 10, 24) and plain.dtype == fast.dtype
        assert np.array_equal(plain, fast)


def test_dividing_two_tensors_runs_on_the_host_with_the_reason():
    mod = _model([_conv(), helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Add", ["r", "one"], ["d"]),
                  helper.make_node("Div", ["c", "d"], ["y"], name="op")], {"one": 1.0})
    _, report = tidlx.partition(mod)
    assert "dividing two variable tensors" in str(report.to_json())


PLANE = (RNG.random((1, 1, 6, 6)) * 4 + 0.5).astype(np.float32)


@pytest.mark.parametrize("op,order", [("Sub", "cx"), ("Sub", "xc"), ("Mul", "xc"), ("Add", "cx"), ("Div", "xc")])
@pytest.mark.parametrize("bits,floor_db", [(8, 25.0), (16, 65.0)])
def test_a_constant_over_the_plane_is_an_eltwise_operand(op, order, bits, floor_db):
    """YOLO heads: anchors minus a tensor, a tensor times per-position strides: an EltWise layer with the
    constant as its data, in fixed point (the constant quantized as a data convert would)."""
    inputs = ["p", "c"] if order == "cx" else ["c", "p"]
    mod = _model([_conv(), helper.make_node(op, inputs, ["y"], name="op")], {"p": PLANE})
    layer = _op_layer(mod)
    assert layer.type == "EltWise" and layer.params.constant_input
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tidlx.compare(mod, options={"tensor_bits": bits, "advanced_options:calibration_iterations": 2},
                               calib=_frames())
    assert result.outputs[0].sqnr_db > floor_db


def test_a_constant_operand_survives_the_compiled_folder(tmp_path):
    mod = _model([_conv(), helper.make_node("Sub", ["p", "c"], ["y"], name="op")], {"p": PLANE})
    frames = _frames()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tidlx.compile_model(mod, tmp_path / "out", options={"tensor_bits": 8, "accuracy_level": 0}, calib=frames)
        qmodel = tidlx.quantize(mod, {"tensor_bits": 8, "accuracy_level": 0}, calib=frames)
    frame = {"x": frames["x"][:1]}
    assert np.array_equal(tidlx.load_compiled(tmp_path / "out").run(frame)[0], qmodel.run(frame)[0])


def _attention_model():
    r = np.random.default_rng(5)
    weights = {k: (r.standard_normal((16, 16)) * 0.3).astype(np.float32) for k in ("Wq", "Wk", "Wv")}
    nodes = [helper.make_node("MatMul", ["x", "Wq"], ["q"], name="q"),
             helper.make_node("MatMul", ["x", "Wk"], ["k"], name="k"),
             helper.make_node("MatMul", ["x", "Wv"], ["v"], name="v"),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="kt"),
             helper.make_node("MatMul", ["q", "kt"], ["s"], name="qk"),
             helper.make_node("Mul", ["s", "scale"], ["ss"], name="scale"),
             helper.make_node("Softmax", ["ss"], ["a"], axis=-1, name="softmax"),
             helper.make_node("MatMul", ["a", "v"], ["y"], name="av")]
    return _sequence_model(nodes, {**weights, "scale": np.array(0.25, np.float32)})


def test_attention_quantizes_its_tensor_products_and_softmax():
    """Q K^T and A V are inner products of two tensors; the softmax they read has TI 11.x's fixed-point
    output (unsigned; tensorScale 256 at 8 bit, 254 x the row's 10 elements at 16 bit). TI's integer
    softmax scales a row by an 8-bit multiplier from an 8-bit reciprocal (docs/numerics.md §8.9), so even
    at 16 bit the attention output is good to about 2^-9 of its values, near 54 dB."""
    mod = _attention_model()
    frames = {"x": np.random.default_rng(6).standard_normal((3, 10, 16)).astype(np.float32)}
    for bits, floor_db in ((8, 20.0), (16, 45.0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            qmodel = tidlx.quantize(mod, {"tensor_bits": bits, "advanced_options:calibration_iterations": 1},
                                    calib=frames)
            result = tidlx.compare(qmodel, inputs={"x": frames["x"][:1]})
        (sub,) = qmodel.subgraphs.values()
        softmax = sub.layer("softmax")
        out = sub.tensors[softmax.outputs[0]]
        assert (out.bits, out.signed, out.scale) == (bits, False, 256.0 if bits == 8 else 2540.0)
        assert sub.layer("av").attrs == {"transpose_a": False, "transpose_b": False}
        assert result.outputs[0].sqnr_db > floor_db


def test_the_fixed_point_softmax_takes_the_devices_exponential_rule():
    """An 8-bit fixed-point softmax on AM62A (C7504) computes its exponentials with exp_taylor, as TI's
    kernel built for that core does (docs/numerics.md §8.9); the layer says so, other devices do not."""
    mod = _attention_model()
    frames = {"x": np.random.default_rng(8).standard_normal((2, 10, 16)).astype(np.float32)}
    rules = {}
    for device in (None, "AM62A", "AM69A"):
        options = {"tensor_bits": 8, "advanced_options:calibration_iterations": 1}
        if device:
            options["target_device"] = device
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            qmodel = tidlx.quantize(mod, options, calib=frames)
            qmodel.run({"x": frames["x"][:1]})
        (sub,) = qmodel.subgraphs.values()
        rules[device] = sub.layer("softmax").attrs.get("exp")
    assert rules == {None: None, "AM62A": "taylor", "AM69A": None}


def test_the_softmax_exponential_rule_survives_the_compiled_folder(tmp_path):
    """The layer's ``exp`` attribute reaches the artifacts, and the reader refuses a rule it does not know."""
    import dataclasses

    from tidlx.emulator.fixed.artifact_checks import check_subgraph
    from tidlx.emulator.fixed.artifact_format import ArtifactError

    mod = _attention_model()
    frames = {"x": np.random.default_rng(9).standard_normal((2, 10, 16)).astype(np.float32)}
    options = {"tensor_bits": 8, "accuracy_level": 0, "target_device": "AM62A"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tidlx.compile_model(mod, tmp_path / "out", options=options, calib=frames)
        qmodel = tidlx.quantize(mod, options, calib=frames)
        loaded = tidlx.load_compiled(tmp_path / "out")
    frame = {"x": frames["x"][:1]}
    assert np.array_equal(loaded.run(frame)[0], qmodel.run(frame)[0])
    (sub,) = qmodel.subgraphs.values()
    softmax = sub.layer("softmax")
    assert softmax.attrs["exp"] == "taylor"
    bad = dataclasses.replace(softmax, attrs={**softmax.attrs, "exp": "exact"})
    sub = dataclasses.replace(sub, layers=tuple(bad if layer is softmax else layer for layer in sub.layers))
    with pytest.raises(ArtifactError, match="'exp' is 'exact'"):
        check_subgraph(sub, "net.bin")


def test_a_tensor_product_survives_the_compiled_folder(tmp_path):
    mod = _attention_model()
    frames = {"x": np.random.default_rng(7).standard_normal((2, 10, 16)).astype(np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tidlx.compile_model(mod, tmp_path / "out", options={"tensor_bits": 8, "accuracy_level": 0}, calib=frames)
        qmodel = tidlx.quantize(mod, {"tensor_bits": 8, "accuracy_level": 0}, calib=frames)
    frame = {"x": frames["x"][:1]}
    assert np.array_equal(tidlx.load_compiled(tmp_path / "out").run(frame)[0], qmodel.run(frame)[0])


#: Layer forms the partition accepts that tidlx's fixed point does not take yet (the README's "not yet").
NOT_YET_IN_FIXED_POINT: dict = {}


def _single_call_model(call):
    from tidlx.ir.expr import Function, TupleGetItem
    from tidlx.ir.module import IRModule
    from tidlx.ir.traversal import free_vars

    body = TupleGetItem(call, 0) if call.op_name == "nn.batch_norm" else call   # as models read it: .0
    return IRModule.from_expr(Function(free_vars(body), body)).infer_types()


def test_every_layer_form_the_partition_accepts_quantizes():
    """Each accepted form of the support rules' own test (tests/backends/test_tidl_rules.py), alone in a
    model: if TIDL takes it, tidlx quantizes it at 8 and 16 bit (or it is listed as not yet)."""
    from test_tidl_rules import accepted_cases

    refused = {}
    for call in accepted_cases():
        mod = _single_call_model(call)
        shapes = {p.name_hint: (p.checked_type.shape, p.checked_type.dtype) for p in mod["main"].params}
        rng = np.random.default_rng(0)
        calib = {name: (rng.standard_normal((2,) + tuple(int(d) for d in shape[1:])) * 4).astype(dtype)
                 for name, (shape, dtype) in shapes.items()}
        for bits in (8, 16):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tidlx.quantize(mod, {"tensor_bits": bits, "accuracy_level": 0}, calib=calib)
            except tidlx.TidlxError as exc:
                refused.setdefault(call.op_name, str(exc))
    assert set(refused) == set(NOT_YET_IN_FIXED_POINT), refused
    for op, layer_type in NOT_YET_IN_FIXED_POINT.items():
        assert f"{layer_type} layers yet" in refused[op]


def _relay(text, params):
    return tidlx.parse_relay(text, params=params)


@pytest.mark.parametrize("tail,check", [
    ("argmax(%1, axis=[1], keepdims=True)", "argmax"),
    ("max(%1, axis=[2], keepdims=True)", "max"),
])
def test_argmax_and_reduce_max_run_in_fixed_point(tail, check):
    text = f'''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3, 8, 8), float32]) {{
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=6, kernel_size=[3, 3]);
  %1 = nn.relu(%0);
  {tail}
}}
'''
    mod = _relay(text, [(RNG.standard_normal((6, 3, 3, 3)) * 0.5).astype(np.float32)])
    frames = {"x": np.random.default_rng(8).standard_normal((3, 3, 8, 8)).astype(np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qmodel = tidlx.quantize(mod, {"tensor_bits": 16, "accuracy_level": 0}, calib=frames)
    frame = {"x": frames["x"][:1]}
    fixed = np.asarray(qmodel.run(frame)[0])
    floating = np.asarray(tidlx.emulate(mod, frame)[0])
    assert fixed.shape == floating.shape
    if check == "argmax":
        assert np.mean(fixed == floating) > 0.95         # ties within a 16-bit step may differ
    else:
        assert np.allclose(fixed, floating, atol=1e-3 * np.abs(floating).max())


def test_a_cast_at_the_input_keeps_the_integers():
    """A uint8 image input cast to float (TIDL's DataConvert at the graph's input): exact integers."""
    text = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3, 8, 8), uint8]) {
  %0 = cast(%x, dtype="float32");
  %1 = nn.conv2d(%0, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
  nn.relu(%1)
}
'''
    mod = _relay(text, [(RNG.standard_normal((4, 3, 3, 3)) * 0.05).astype(np.float32)])
    frames = {"x": np.random.default_rng(9).integers(0, 256, (3, 3, 8, 8)).astype(np.uint8)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tidlx.compare(mod, inputs={"x": frames["x"][:1]},
                               options={"tensor_bits": 16, "accuracy_level": 0}, calib=frames)
    assert result.outputs[0].sqnr_db > 60.0


def test_a_layer_norm_quantizes_with_its_scale_and_shift(tmp_path):
    """ONNX LayerNormalization (opset 17) over a sequence's features: TI 11.x's integer normalization,
    then gamma and beta as a batch norm along the last axis; the compiled folder runs the same bits."""
    inits = {"M": (RNG.standard_normal((16, 32)) * 0.3).astype(np.float32),
             "g": (RNG.random(32) + 0.5).astype(np.float32), "b": (RNG.standard_normal(32) * 0.2).astype(np.float32)}
    mod = _sequence_model([helper.make_node("MatMul", ["x", "M"], ["m"], name="mm"),
                           helper.make_node("LayerNormalization", ["m", "g", "b"], ["y"], axis=-1, name="ln")],
                          inits)
    frames = {"x": np.random.default_rng(11).standard_normal((3, 10, 16)).astype(np.float32)}
    for bits, floor_db in ((8, 25.0), (16, 65.0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            qmodel = tidlx.quantize(mod, {"tensor_bits": bits, "accuracy_level": 0}, calib=frames)
            result = tidlx.compare(qmodel, inputs={"x": frames["x"][:1]})
        (sub,) = qmodel.subgraphs.values()
        assert sub.layer("ln").type == "LayerNorm" and sub.layer("ln").pre_scale > 0
        assert result.outputs[0].sqnr_db > floor_db
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tidlx.compile_model(mod, tmp_path / "out", options={"tensor_bits": 16, "accuracy_level": 0}, calib=frames)
    frame = {"x": frames["x"][:1]}
    assert np.array_equal(tidlx.load_compiled(tmp_path / "out").run(frame)[0], qmodel.run(frame)[0])


def test_layer_norm_core_by_hand():
    """One row of four int8 values at inScale 1, outScale 16, eps 0: (4 q - S1) / sqrt(4 S2 - S1^2) x 16."""
    from tidlx.emulator.fixed import arith

    q = np.array([[1, 2, 3, 6]], np.int8)
    s1, s2 = 12, 1 + 4 + 9 + 36
    expect = np.rint((4 * q.astype(np.float64) - s1) / np.sqrt(4 * s2 - s1 * s1) * 16)
    got = arith.layer_norm_core(q, 1.0, 16.0, 0.0, arith.FixedType(8, True))
    assert got.tolist() == expect.astype(int).tolist()
