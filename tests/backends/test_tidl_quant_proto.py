"""advanced_options:quant_params_proto_path: TI's TIDLNetQuantParams file, written when absent, read when present
(docs/quant-proto.md)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
from tidlx.backends.tidl.options import OPTIONS, TidlOptions
from tidlx.backends.tidl.quant_proto import QuantProtoError, message_classes
from tidlx.cli import main
from tidlx.compiled import compile_model

OPT = "advanced_options:quant_params_proto_path"


@pytest.fixture(scope="module")
def conv_relu(tmp_path_factory):
    """x (1x3x8x8) -> Conv 'conv_node' (4 channels, 3x3, bias) -> Relu -> y: one TIDL layer that TI names
    after its output tensor, y."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.5).astype(np.float32)
    b = (rng.standard_normal(4) * 0.1).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "W", "B"], ["conv_out"], name="conv_node", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["conv_out"], ["y"], name="relu_node")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
    path = tmp_path_factory.mktemp("model") / "conv_relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    calib = {"x": np.random.default_rng(1).standard_normal((4, 3, 8, 8)).astype(np.float32)}
    return path, tidlx.load(str(path)), calib


def _quiet_compile(mod, folder, options, calib):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compile_model(mod, folder, options=options, calib=calib)


def test_write_then_read_gives_byte_identical_artifacts(conv_relu, tmp_path):
    _, mod, calib = conv_relu
    proto = tmp_path / "q.prototxt"
    opts = {OPT: str(proto), "advanced_options:calibration_iterations": 3}
    a = Path(_quiet_compile(mod, tmp_path / "a", opts, calib))
    text = proto.read_text()
    assert 'layer_name: "x"' in text and 'layer_type: "TIDL_DataLayer"' in text
    assert 'layer_name: "y"' in text and 'layer_type: "TIDL_ConvolutionLayer"' in text
    assert "value:" in text and "weights {" in text
    # read mode: no calibration run (no frames needed: calibrating on None would warn about random frames)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = Path(compile_model(mod, tmp_path / "b", options=opts, calib=None))
    assert proto.read_text() == text            # read, not rewritten
    names = sorted(p.name for p in a.iterdir() if p.suffix == ".bin")
    assert names and names == sorted(p.name for p in b.iterdir() if p.suffix == ".bin")
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    # deterministic: writing again gives the same text
    proto.unlink()
    _quiet_compile(mod, tmp_path / "c", opts, calib)
    assert proto.read_text() == text


HAND = """num_layers: 2
quant_type: SYMMETRIC
calib_type: PERTENSOR
layers {
  layer_name: "x"
  layer_type: "TIDL_DataLayer"
  bit_depth: 1
  outputs { min: -4 max: 4 size: 1 element_type: 1 }
}
layers {
  layer_name: "y"
  layer_type: "TIDL_ConvolutionLayer"
  bit_depth: 1
  outputs { min: 0 max: 8 size: 1 element_type: 0 }
  weights { min: -1 max: 0.5 size: 1 element_type: 1 }
  bias { min: -0.25 max: 0.5 size: 4 element_type: 1 value: 0.5 value: -0.25 value: 0.125 value: 0 }
}
"""


def test_hand_written_ranges_give_the_scales_of_the_rules(conv_relu, tmp_path):
    _, mod, _ = conv_relu
    proto = tmp_path / "hand.prototxt"
    proto.write_text(HAND)
    q = tidlx.quantize(mod, {OPT: str(proto), "accuracy_level": 0})
    sub = q.subgraphs["tidl_0"]
    data, conv = sub.layers[0], sub.layers[1]
    # data convert (§6.1): accScale 1 * 2^7 = 128; [-4, 4] signed: m = 512 (a power of 2) - 1 = 511,
    # d = 511 / 2^7 = 3.99, p = 4, roundBits 2, tensorScale 128 / 4 = 32 (§6.3, §6.4)
    assert data.round_bits == 2 and sub.tensors[0].scale == 32.0 and sub.tensors[0].signed
    # conv: weightScale 2^7 / max(|-1|, |0.5|) = 128 (§4.1); bias clip 2^14 / 0.5 / 32 = 1024 > 128 (§4.4);
    # accScale 128 * 32 = 4096; [0, 8] unsigned: m = 32768, d = 128, roundBits 7, tensorScale 32
    assert conv.weight_scale == 128.0 and conv.acc_scale == 4096.0
    assert conv.round_bits == 7 and sub.tensors[1].scale == 32.0 and not sub.tensors[1].signed
    # bias: biasScale 2^7 / 0.5 = 256 (§5.1), the file's values quantized (§5.2): 128 saturates to 127;
    # inScaleFactor 128 * 32 / 256 = 16 (§5.3) -> biasA = b_q, biasB = 16 (§5.4)
    assert conv.bias_scale == 256.0
    assert list(conv.bias_a) == [127, -64, 32, 0] and list(conv.bias_b) == [16, 16, 16, 16]
    assert q.bias_calibration_errors == ()


def _bad(tmp_path, text):
    proto = tmp_path / "bad.prototxt"
    proto.write_text(text)
    return proto


@pytest.mark.parametrize("change, message", [
    (lambda t: t.replace("min: 0 max: 8", "min: 0 max: 8 oops: 1"), r"bad\.prototxt:14:\d+: .*oops"),
    (lambda t: t.replace("  outputs { min: 0 max: 8 size: 1 element_type: 0 }\n", ""),
     r"bad\.prototxt:11: layer 'y' has 0 outputs entries"),
    (lambda t: t.replace("min: 0 max: 8", "min: 0"), r"layer 'y', outputs 0 has no max"),
    (lambda t: t.replace("min: 0 max: 8", "min: 0 max: 3.4028235e38"),
     r"bad\.prototxt:11: layer 'y', outputs 0 has max 3\.40282e\+38: FLT_MAX"),
    (lambda t: t.replace("min: -4 max: 4", "min: -3.4028235e38 max: 4"), r"outputs 0 has min -3\.40282e\+38"),
    (lambda t: t.replace("size: 4 element_type: 1 value: 0.5", "size: 5 element_type: 1 value: 0.5"),
     r"layer 'y', bias has size 5 but 4 value"),
    (lambda t: t.replace("min: 0 max: 8", "min: 9 max: 8"), r"outputs 0 has min 9 > max 8"),
    (lambda t: t.replace("min: -1 max: 0.5", "min: 1 max: 0.5"), r"weights has min 1 > max 0\.5"),
    (lambda t: t.replace('"y"', '"yy"'), r"bad\.prototxt:11: layer 'yy' "
                                                       r"\(TIDL_ConvolutionLayer\) is not a layer .*closest: y"),
    (lambda t: t.replace('"TIDL_ConvolutionLayer"', '"TIDL_PoolingLayer"'),
     r"layer 'y' \(TIDL_PoolingLayer\) is not a layer of the model; the model's layer 'y' is a "
     r"TIDL_ConvolutionLayer"),
    (lambda t: t.split("layers {\n  layer_name: \"y\"")[0],
     r"no entry for layer 'y' \(TIDL_ConvolutionLayer\)"),
    (lambda t: t.replace("quant_type: SYMMETRIC", "quant_type: ASYMMETRIC"),
     r"bad\.prototxt:2: quant_type: ASYMMETRIC does not agree with quantization_scale_type 0"),
])
def test_a_malformed_or_inadequate_file_is_one_clean_error(conv_relu, tmp_path, capsys, change, message):
    path, mod, _ = conv_relu
    proto = _bad(tmp_path, change(HAND))
    with pytest.raises(QuantProtoError, match=message):
        tidlx.quantize(mod, {OPT: str(proto), "accuracy_level": 0})
    assert main(["compile", str(path), "-o", str(tmp_path / "out"), "-o", f"{OPT}={proto}", "-o",
                 "accuracy_level=0"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "bad.prototxt" in err


def test_the_messages_have_tis_field_numbers():
    net_cls, layer_cls, tensor_cls = message_classes()
    assert {f.name: f.number for f in net_cls.DESCRIPTOR.fields} == \
        {"num_layers": 1, "quant_type": 2, "calib_type": 3, "layers": 4}
    assert {f.name: f.number for f in layer_cls.DESCRIPTOR.fields} == \
        {"layer_name": 1, "layer_type": 2, "bit_depth": 3, "outputs": 4, "weights": 5, "bias": 6, "slope": 7}
    assert {f.name: f.number for f in tensor_cls.DESCRIPTOR.fields} == \
        {"min": 1, "max": 2, "size": 3, "element_type": 4, "scale": 5, "zero_point": 6, "value": 7}
    t = tensor_cls()
    assert t.max == np.float32(3.4028234664e38) and layer_cls().bit_depth == 8
    assert net_cls().SerializeToString() == b""


def test_the_option_and_its_metadata():
    spec = OPTIONS[OPT]
    assert spec.origin == "TI" and spec.steps == ("calibration", "quantization")
    assert spec.support == "partial" and spec.support_note
    assert TidlOptions.from_dict({OPT: "a.prototxt"}).quant_params_proto_path == "a.prototxt"
    assert TidlOptions().quant_params_proto_path == ""


def _save(tmp_path, nodes, x_shape, y_shape, inits, name):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape))], inits)
    path = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return tidlx.load(str(path))


def _gemm_model(tmp_path):
    """x (1x16) -> Gemm 'fc_node' (4 outputs, bias) -> y: one inner product layer, TI's name y."""
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((4, 16)) * 0.3).astype(np.float32)
    b = (rng.standard_normal(4) * 0.1).astype(np.float32)
    return _save(tmp_path, [helper.make_node("Gemm", ["x", "W", "B"], ["y"], name="fc_node", transB=1)],
                 (1, 16), (1, 4), [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")], "gemm")


GEMM_HAND = """layers { layer_name: "x" layer_type: "TIDL_DataLayer" outputs { min: -4 max: 4 } }
layers {
  layer_name: "y"
  layer_type: "TIDL_InnerProductLayer"
  outputs { min: -4 max: 8 }
  weights { min: -1 max: 0.5 }
  bias { min: -0.25 max: 0.5 size: 4 value: 0.5 value: -0.25 value: 0.125 value: 0 }
}
"""


def test_a_read_inner_product_range_is_widened_as_tis_import_does(tmp_path):
    """TI's TIDL_UpdateScaleFactors widens an inner product's max x 1.25 on the range it reads from the
    file as on a calibrated one: [-4, 8] becomes [-4, 10]. Input scale 32, weight scale 128: accScale
    4096; m = 10 x 4096 = 40960, signed: d = 40960 / 2^7 = 320 -> roundBits 9, tensorScale 4096 / 512 = 8
    (the unwidened [-4, 8] would give m = 32768 - 1, roundBits 8, tensorScale 16)."""
    mod = _gemm_model(tmp_path)
    proto = tmp_path / "gemm.prototxt"
    proto.write_text(GEMM_HAND)
    sub = tidlx.quantize(mod, {OPT: str(proto), "accuracy_level": 0}).subgraphs["tidl_0"]
    fc = sub.layers[1]
    assert fc.weight_scale == 128.0 and fc.acc_scale == 4096.0
    assert fc.round_bits == 9 and sub.tensors[1].scale == 8.0 and sub.tensors[1].signed


def test_the_written_inner_product_range_is_the_unwidened_one(tmp_path):
    """Write mode writes what TI's export writes, the collected range before the x 1.25: reading the file
    back widens it once, and the model is the one calibration gave."""
    mod = _gemm_model(tmp_path)
    proto = tmp_path / "gemm_w.prototxt"
    calib = {"x": np.random.default_rng(3).standard_normal((4, 1, 16)).astype(np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = tidlx.quantize(mod, {"accuracy_level": 0}, calib)
        q = tidlx.quantize(mod, {OPT: str(proto), "accuracy_level": 0}, calib)
    msg = message_classes()[0]()
    from google.protobuf import text_format
    text_format.Parse(proto.read_text(), msg)
    y = next(e for e in msg.layers if e.layer_name == "y")
    rng = plain.calibration["tidl_0"].tensors[plain.subgraphs["tidl_0"].layers[1].outputs[0]]
    assert rng.max == pytest.approx(rng.raw_max * 1.25) and rng.raw_max > 0
    assert y.outputs[0].max == pytest.approx(rng.raw_max, rel=1e-6)
    assert q.subgraphs["tidl_0"].tensors[1].scale == plain.subgraphs["tidl_0"].tensors[1].scale


CLIP_HAND = HAND.replace("outputs { min: 0 max: 8 size: 1 element_type: 0 }",
                         "outputs { min: -2 max: 12 size: 1 element_type: 0 }")


def test_a_read_clip_range_is_replaced_by_the_clip_bounds(tmp_path):
    """A Conv + Clip(-1, 6) whose file range is [-2, 12]: TI's import replaces a clipped layer's range by
    the clip bounds [-1, 6]. Input scale 32, weight scale 128: accScale 4096; m = 6 x 4096 = 24576, signed:
    d = 192 -> roundBits 8, tensorScale 16 (the file's [-2, 12] would give m = 49152, roundBits 9)."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.5).astype(np.float32)
    b = (rng.standard_normal(4) * 0.1).astype(np.float32)
    lo, hi = numpy_helper.from_array(np.array(-1.0, np.float32), "lo"), numpy_helper.from_array(
        np.array(6.0, np.float32), "hi")
    mod = _save(tmp_path, [helper.make_node("Conv", ["x", "W", "B"], ["conv_out"], name="conv_node", pads=[1, 1, 1, 1]),
                           helper.make_node("Clip", ["conv_out", "lo", "hi"], ["y"], name="clip_node")],
                (1, 3, 8, 8), (1, 4, 8, 8),
                [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B"), lo, hi], "conv_clip")
    proto = tmp_path / "clip.prototxt"
    proto.write_text(CLIP_HAND)
    sub = tidlx.quantize(mod, {OPT: str(proto), "accuracy_level": 0}).subgraphs["tidl_0"]
    conv = sub.layers[1]
    assert conv.acc_scale == 4096.0 and sub.tensors[1].signed
    assert conv.round_bits == 8 and sub.tensors[1].scale == 16.0


# -- quantization_scale_type 4 (docs/numerics.md §12) ----------------------------------------------------

STYLE4 = {"advanced_options:quantization_scale_type": 4, "advanced_options:calibration_iterations": 3}


def _two_convs(tmp_path):
    """x -> Conv -> Relu -> Conv 'conv2' (no activation: signed; read by a convolution, so a non-zero zero
    point, §12.2) -> Conv 'conv3' -> y."""
    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * k).astype(np.float32), n) for n, s, k in
             (("W1", (4, 3, 3, 3), 0.5), ("B1", (4,), 0.2), ("W2", (3, 4, 3, 3), 0.4), ("B2", (3,), 0.6),
              ("W3", (3, 3, 1, 1), 0.5), ("B3", (3,), 0.1))]
    return _save(tmp_path, [helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
                            helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
                            helper.make_node("Conv", ["r1", "W2", "B2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
                            helper.make_node("Conv", ["c2", "W3", "B3"], ["y"], name="conv3")],
                 (1, 3, 8, 8), (1, 3, 8, 8), inits, "two_convs")


def test_a_style_4_file_reads_back_into_the_same_fixed_point(tmp_path):
    """Write mode in style 4 writes each output's range, scale and zero point; read mode (no frames) derives
    every scale and zero point from the ranges again (§12.2): they are the written ones, and the layers'
    MMA factors, integer biases and the fixed-point outputs are those of the quantization without the file."""
    mod = _two_convs(tmp_path)
    calib = {"x": np.random.default_rng(8).standard_normal((4, 3, 8, 8)).astype(np.float32)}
    proto = tmp_path / "style4.prototxt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # fewer frames than calibration_frames
        plain = tidlx.quantize(mod, STYLE4, calib)
        tidlx.quantize(mod, {**STYLE4, OPT: str(proto)}, calib)
    with warnings.catch_warnings():
        warnings.simplefilter("error")    # read mode runs no calibration (random frames would warn)
        read = tidlx.quantize(mod, {**STYLE4, OPT: str(proto)})
    a, b = plain.subgraphs["tidl_0"], read.subgraphs["tidl_0"]
    assert b.quantization_style == 6
    assert any(t.zero_point != 0 for t in b.tensors)
    assert [(t.scale, t.zero_point, t.signed) for t in b.tensors] == [(t.scale, t.zero_point, t.signed)
                                                                      for t in a.tensors]
    msg = message_classes()[0]()
    from google.protobuf import text_format
    text_format.Parse(proto.read_text(), msg)
    assert msg.quant_type == 1   # SYMMETRIC, as TI's export writes style 4's file
    written = [layer for layer in b.layers if layer.outputs]   # the file's entries, in the layers' order
    assert [e.layer_name for e in msg.layers] == ["x", "r1", "c2", "y"] and len(written) == 4
    for entry, layer in zip(msg.layers, written):
        out, t = entry.outputs[0], b.tensors[layer.outputs[0]]
        assert (out.scale[0], int(np.uint32(out.zero_point[0]).astype(np.int32))) == (t.scale, t.zero_point)
    for la, lb in zip(a.layers, b.layers):
        for field in ("mma_scale", "mma_shift", "bias_a", "weights"):
            assert np.array_equal(np.asarray(getattr(la, field)), np.asarray(getattr(lb, field))), (la.name, field)
    x = {"x": np.random.default_rng(9).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    assert np.array_equal(read.run(x)[0], plain.run(x)[0])


def test_a_style_4_file_whose_quant_type_disagrees_is_refused(tmp_path, capsys):
    mod = _two_convs(tmp_path)
    calib = {"x": np.random.default_rng(8).standard_normal((4, 3, 8, 8)).astype(np.float32)}
    proto = tmp_path / "style4.prototxt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tidlx.quantize(mod, {**STYLE4, OPT: str(proto)}, calib)
    text = proto.read_text()
    line = text.splitlines().index("quant_type: SYMMETRIC") + 1
    proto.write_text(text.replace("quant_type: SYMMETRIC", "quant_type: ASYMMETRIC"))
    message = rf"style4\.prototxt:{line}: quant_type: ASYMMETRIC does not agree with quantization_scale_type 4"
    with pytest.raises(QuantProtoError, match=message):
        tidlx.quantize(mod, {**STYLE4, OPT: str(proto)})
    onnx_path = tmp_path / "two_convs.onnx"
    assert main(["compile", str(onnx_path), "-o", str(tmp_path / "out"), "-o", f"{OPT}={proto}",
                 "-o", "target_device=AM68A"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"style4.prototxt:{line}: quant_type: ASYMMETRIC" in err
