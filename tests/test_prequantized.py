"""advanced_options:prequantized_model=1: a QDQ model made by onnxruntime's quantize_static compiles as
TIDL's prequantized import does (docs/prequantized.md)."""

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
from tidlx.backends.tidl.calibration import QDQ
from tidlx.frontends.onnx.prequantized import PrequantizedModelError
from tidlx.ir import TidlxError

ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

SHAPE = (1, 3, 16, 16)


def _float_model(path):
    rng = np.random.default_rng(0)
    inits, nodes = [], []
    for i, (x, cin, cout) in enumerate([("x", 3, 8), ("r1", 8, 8)]):
        name = f"conv{i + 1}"
        inits += [numpy_helper.from_array((rng.standard_normal((cout, cin, 3, 3)) * 0.2).astype(np.float32), name + "_w"),
                  numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), name + "_b")]
        nodes += [helper.make_node("Conv", [x, name + "_w", name + "_b"], [f"c{i + 1}"], name=name, pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i + 1}"], [f"r{i + 1}"], name=f"relu{i + 1}")]
    nodes.append(helper.make_node("Conv", ["r2", "conv3_w", "conv3_b"], ["y"], name="conv3"))
    inits += [numpy_helper.from_array((rng.standard_normal((4, 8, 1, 1)) * 0.3).astype(np.float32), "conv3_w"),
              numpy_helper.from_array(np.zeros(4, np.float32), "conv3_b")]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 4, 16, 16))], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def _frames(n, seed):
    return np.random.default_rng(seed).uniform(-1, 1, (n,) + SHAPE[1:]).astype(np.float32)


def _qdq_model(tmp_path, symmetric=True, activation="QInt8"):
    fpath, qpath = str(tmp_path / "float.onnx"), str(tmp_path / "qdq.onnx")
    _float_model(fpath)

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.frames = iter([{"x": f[None]} for f in _frames(8, 1)])

        def get_next(self):
            return next(self.frames, None)

    quantization.quantize_static(fpath, qpath, Reader(), quant_format=quantization.QuantFormat.QDQ,
                                 activation_type=getattr(quantization.QuantType, activation),
                                 weight_type=quantization.QuantType.QInt8, per_channel=True,
                                 extra_options={"ActivationSymmetric": symmetric, "WeightSymmetric": True})
    return qpath


def _scales(path):
    model = onnx.load(path)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    scales = {n.input[0]: float(inits[n.input[1]]) for n in model.graph.node if n.op_type == "QuantizeLinear"}
    made_by = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")}
    for out in model.graph.output:   # a model output: the scale of the pair that ends on it
        scales[out.name] = scales[made_by[made_by[out.name]]]
    return scales


def _quantize(path, scale_type):
    mod = tidlx.load(path, prequantized=True)
    opts = {"advanced_options:prequantized_model": 1, "accuracy_level": 0,
            "advanced_options:quantization_scale_type": scale_type}
    return tidlx.quantize(mod, opts, {"x": _frames(4, 2)})


@pytest.fixture(scope="module")
def qdq_path(tmp_path_factory):
    return _qdq_model(tmp_path_factory.mktemp("qdq"))


def test_no_qdq_op_reaches_the_partition(qdq_path):
    mod = tidlx.load(qdq_path, prequantized=True)
    text = str(mod["main"])
    assert "qnn." not in text and "conv2d" in text
    # without the option the model keeps its Q/DQ ops
    assert "qnn.quantize" in str(tidlx.load(qdq_path)["main"])


@pytest.mark.parametrize("scale_type", [0, 1])
def test_layer_ranges_and_scales_follow_the_qdq_scales(qdq_path, scale_type):
    qdq = _scales(qdq_path)
    qm = _quantize(qdq_path, scale_type)
    (sg,) = qm.subgraphs.values()
    (calib,) = qm.calibration.values()
    ranges = calib.by_name()
    assert calib.frames == 0 and calib.data is None   # every tensor has its pair's range: nothing calibrated
    for layer, tensor, after_relu in (("conv1", "r1", True), ("conv2", "r2", True), ("conv3", "y", False)):
        s = qdq[tensor]
        lo, hi = (0.0 if after_relu else -128 * s), 127 * s
        assert ranges[layer].method == QDQ
        assert ranges[layer].min == pytest.approx(lo, rel=1e-6) and ranges[layer].max == pytest.approx(hi, rel=1e-6)
        t = next(t for t in sg.tensors if t.name == layer)
        assert t.signed == (not after_relu)
        # the largest scale that holds the range (§6.4: accScale / 2^roundBits never exceeds it, and is
        # above half of it); power-of-2 mode: that power of 2
        ideal = (127.0 if t.signed else 255.0) / max(abs(lo), abs(hi))
        if scale_type == 1:
            assert t.scale == 2.0 ** math.floor(math.log2(ideal))
        else:
            assert ideal / 2 < t.scale <= ideal * (1 + 1e-6)


def test_fixed_point_within_one_qdq_step_of_onnxruntime(qdq_path):
    qm = _quantize(qdq_path, 0)
    session = ort.InferenceSession(qdq_path, providers=["CPUExecutionProvider"])
    step = _scales(qdq_path)["y"]
    within, total = 0, 0
    for frame in _frames(4, 3):
        fixed = qm.run({"x": frame[None]})[0]
        ref = session.run(None, {"x": frame[None]})[0]
        err = np.abs(fixed.astype(np.float64) - ref.astype(np.float64))
        within += int(np.sum(err <= step * (1 + 1e-6)))
        total += err.size
    assert within / total >= 0.8, within / total


@pytest.fixture(scope="module")
def asym_path(tmp_path_factory):
    """quantize_static with ActivationSymmetric=False, QUInt8: the input's and the output's pairs have
    non-zero zero points (the ReLU outputs' are 0)."""
    return _qdq_model(tmp_path_factory.mktemp("qdq_asym"), symmetric=False, activation="QUInt8")


def _pairs(path):
    """ONNX tensor (a model output: the tensor its pair ends on) -> (scale, zero point) of its QuantizeLinear."""
    model = onnx.load(path)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    pairs = {n.input[0]: (float(inits[n.input[1]]), int(inits[n.input[2]])) for n in model.graph.node
             if n.op_type == "QuantizeLinear"}
    made_by = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")}
    for out in model.graph.output:
        pairs[out.name] = pairs[made_by[made_by[out.name]]]
    return pairs


@pytest.mark.parametrize("options", [{"target_device": "TDA4VM"}, {}])
def test_asymmetric_activations_are_refused_in_a_symmetric_style_naming_the_node(asym_path, options):
    assert _pairs(asym_path)["x"][1] != 0
    mod = tidlx.load(asym_path, prequantized=True)   # the style decides: loading takes the pairs
    opts = {"advanced_options:prequantized_model": 1, "accuracy_level": 0, **options}
    message = r"qdq\.onnx: node 'x_QuantizeLinear' \(QuantizeLinear\): zero point \d+ is not 0 \(an asymmetric"
    with pytest.raises(TidlxError, match=message + (".*TDA4VM has no asymmetric feature maps" if options else
                                                    ".*quantization_scale_type 0 has symmetric feature maps")):
        tidlx.quantize(mod, opts, {"x": _frames(4, 2)})


def test_the_cli_refuses_asymmetric_activations_on_tda4vm(asym_path, tmp_path, capsys):
    from tidlx.cli import main

    assert main(["compile", asym_path, "-o", str(tmp_path / "out"), "-o", "advanced_options:prequantized_model=1",
                 "-o", "target_device=TDA4VM"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "node 'x_QuantizeLinear' (QuantizeLinear): zero point" in err


@pytest.mark.parametrize("options", [{"target_device": "AM68A"}, {"advanced_options:quantization_scale_type": 4}])
def test_asymmetric_activations_are_the_ranges_of_a_style_4_quantization(asym_path, options):
    """Each pair's range [(0 - zp) s, (255 - zp) s] is the tensor's, as given (no frame is calibrated); style
    4's scale of that range (§12.2: 255 / range) is the pair's 1 / s and its zero point the pair's, moved
    by -128 where the tensor is signed (its range holds negative values)."""
    pairs = _pairs(asym_path)
    mod = tidlx.load(asym_path, prequantized=True)
    qm = tidlx.quantize(mod, {"advanced_options:prequantized_model": 1, **options})
    (sg,) = qm.subgraphs.values()
    (calib,) = qm.calibration.values()
    assert sg.quantization_style == 6 and calib.frames == 0 and calib.data is None
    ranges = calib.by_name()
    for layer, tensor in (("conv1", "r1"), ("conv2", "r2"), ("conv3", "y")):
        s, zp = pairs[tensor]
        lo, hi = max((0 - zp) * s, 0.0) if tensor != "y" else (0 - zp) * s, (255 - zp) * s
        assert ranges[layer].min == pytest.approx(lo, rel=1e-6, abs=1e-9)
        assert ranges[layer].max == pytest.approx(hi, rel=1e-6)
        t = next(t for t in sg.tensors if t.name == layer)
        assert t.signed == (lo < 0)
        if tensor == "y":   # §12.2: the subgraph's output is symmetric (TI's data layer), zero point 0
            assert (t.scale, t.zero_point) == (pytest.approx(127 / max(-lo, hi), rel=1e-5), 0)
        else:
            assert t.scale == pytest.approx(1 / s, rel=1e-5)
            assert t.zero_point == (zp - 128 if t.signed else zp)
    session = ort.InferenceSession(asym_path, providers=["CPUExecutionProvider"])
    step = pairs["y"][0]
    within = total = 0
    for frame in _frames(4, 3):
        err = np.abs(qm.run({"x": frame[None]})[0].astype(np.float64) - session.run(None, {"x": frame[None]})[0])
        within += int(np.sum(err <= step * (1 + 1e-6)))
        total += err.size
    assert within / total >= 0.9, within / total   # style 4 keeps the asymmetric pairs' own scales


def test_a_device_style_4_that_fell_back_says_why_it_refuses_the_pair(asym_path):
    """On a device whose style 4 tidlx quantizes with style 0 (a layer without a style-4 rule), the error
    says that the device's style 4 was replaced."""
    from tidlx.backends.tidl.calibration import CalibrationError, check_qdq_zero_points
    from tidlx.backends.tidl.options import TidlOptions

    mod = tidlx.load(asym_path, prequantized=True)
    fell_back = TidlOptions.from_dict({"target_device": "AM68A", "advanced_options:prequantized_model": 1,
                                          "advanced_options:quantization_scale_type": 0})
    with pytest.raises(CalibrationError, match=r"node 'x_QuantizeLinear'.*target_device=AM68A quantizes with "
                                               r"quantization_scale_type 4 there, but tidlx has no style-4 rule"):
        check_qdq_zero_points(mod, fell_back, asked_scale_type=4)
    check_qdq_zero_points(mod, fell_back.replace(quantization_scale_type=4), asked_scale_type=4)   # style 4 takes it


def test_per_channel_activation_zero_points_are_refused_naming_the_node(qdq_path, tmp_path):
    model = onnx.load(qdq_path)
    for t in model.graph.initializer:
        if t.name == "r1_zero_point":
            t.CopyFrom(numpy_helper.from_array(np.zeros(8, numpy_helper.to_array(t).dtype), t.name))
    path = str(tmp_path / "zp_vector.onnx")
    onnx.save(model, path)
    with pytest.raises(PrequantizedModelError, match=r"zp_vector\.onnx: node 'r1_QuantizeLinear' \(QuantizeLinear\): "
                                                     r"per-channel activation zero points \(8 values"):
        tidlx.load(path, prequantized=True)


def test_a_weight_zero_point_is_refused_naming_the_node(qdq_path, tmp_path):
    model = onnx.load(qdq_path)
    for t in model.graph.initializer:
        if t.name == "conv2_w_zero_point":
            t.CopyFrom(numpy_helper.from_array(np.ones(numpy_helper.to_array(t).shape, np.int8), t.name))
    path = str(tmp_path / "zp.onnx")
    onnx.save(model, path)
    with pytest.raises(PrequantizedModelError, match=r"node 'conv2_w_DequantizeLinear' \(DequantizeLinear\): zero "
                                                     r"point \[1"):
        tidlx.load(path, prequantized=True)


def test_a_float_model_with_the_option_is_an_error(tmp_path):
    path = str(tmp_path / "float.onnx")
    _float_model(path)
    with pytest.raises(PrequantizedModelError, match="no QuantizeLinear"):
        tidlx.load(path, prequantized=True)


def test_the_cli_compiles_with_the_option(qdq_path, tmp_path, capsys):
    from tidlx.cli import main

    out = str(tmp_path / "out")
    assert main(["compile", qdq_path, "-o", out, "-o", "advanced_options:prequantized_model=1",
                 "-o", "accuracy_level=0"]) == 0
    assert "1 TIDL subgraph" in capsys.readouterr().out


def test_a_tensor_no_pair_covers_is_calibrated(qdq_path, tmp_path):
    model = onnx.load(qdq_path)
    pair = [n for n in model.graph.node if n.name in ("r1_QuantizeLinear", "r1_DequantizeLinear")]
    assert len(pair) == 2
    dq_out = pair[1].output[0]
    for n in model.graph.node:
        for i, name in enumerate(n.input):
            if name == dq_out:
                n.input[i] = "r1"
    for n in pair:
        model.graph.node.remove(n)
    path = str(tmp_path / "partial.onnx")
    onnx.save(model, path)
    with pytest.warns(Warning):   # fewer frames than calibration_frames
        qm = _quantize(path, 0)
    (calib,) = qm.calibration.values()
    methods = {name: r.method for name, r in calib.by_name().items()}
    assert methods["conv1"] != QDQ and methods["conv2"] == QDQ and methods["conv3"] == QDQ
    assert calib.frames == 4


def test_compare_sets_the_fixed_point_against_onnxruntimes_run_of_the_qdq_model(qdq_path, tmp_path, capsys):
    """``tidlx compare`` on a QDQ model with prequantized_model=1 also runs the QDQ file in onnxruntime:
    per output, the fixed point's SQNR against that run and the share within one QDQ step, recomputed
    here from the two runs."""
    import json

    from tidlx.cli import main

    frames = _frames(3, 5)
    inputs = str(tmp_path / "in.npz")
    np.savez(inputs, x=frames)
    calib = str(tmp_path / "calib.npz")
    np.savez(calib, x=_frames(4, 2))
    assert main(["compare", qdq_path, "--calib", calib, "--input", inputs, "--json",
                 "-o", "advanced_options:prequantized_model=1", "-o", "accuracy_level=0"]) == 0
    (out,) = json.loads(capsys.readouterr().out)["outputs"]
    qdq = out["qdq_run"]
    step = _scales(qdq_path)["y"]
    assert qdq["step"] == pytest.approx(step)
    qm = _quantize(qdq_path, 0)
    session = ort.InferenceSession(qdq_path, providers=["CPUExecutionProvider"])
    within = total = 0
    signal = noise = 0.0
    for frame in frames:
        fixed = qm.run({"x": frame[None]})[0].astype(np.float64)
        ref = session.run(None, {"x": frame[None]})[0].astype(np.float64)
        within += int(np.sum(np.abs(fixed - ref) <= step * (1 + 1e-6)))
        total += ref.size
        signal += float(np.sum(ref ** 2))
        noise += float(np.sum((fixed - ref) ** 2))
    assert qdq["fixed_within_one_step_pct"] == pytest.approx(100 * within / total)
    assert qdq["fixed_sqnr_db"] == pytest.approx(10 * math.log10(signal / noise), abs=1e-6)
    assert qdq["float_sqnr_db"] > qdq["fixed_sqnr_db"]     # the float run is nearer the QDQ model's than TIDL's
    # the tables name the comparison; a model compared without the option has none
    assert main(["compare", qdq_path, "--calib", calib, "--input", inputs,
                 "-o", "advanced_options:prequantized_model=1", "-o", "accuracy_level=0"]) == 0
    assert "against onnxruntime's run of the QDQ model" in capsys.readouterr().out
