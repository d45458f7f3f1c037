"""Quantization of TIDL subgraphs into plain data (backends/tidl/quantize.py): the records hold what
numerics.py's rules give for the model's own float weights and the calibrated ranges, per layer type,
style and width; options the fixed point does not support yet are refused by name."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import tidlx
from tidlx.backends.tidl import numerics as nx
from tidlx.backends.tidl.options import TidlOptions
from tidlx.backends.tidl.quantize import QuantizationError, calibration_option_bits, data_convert_acc_scale
from tidlx.emulator.fixed.arith import FixedPointError

COVERAGE = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 4, 16, 16), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3]);
  %1 = nn.bias_add(%0, meta[relay.Constant][1]);
  %2 = clip(%1, a_min=0f, a_max=6f);
  %3 = nn.conv2d(%2, meta[relay.Constant][2], padding=[2, 2, 2, 2], dilation=[2, 2], groups=8, channels=8, kernel_size=[3, 3]);
  %4 = nn.conv2d(%2, meta[relay.Constant][3], strides=[2, 2], padding=[1, 1, 1, 1], groups=2, channels=8, kernel_size=[3, 3]);
  %5 = nn.avg_pool2d(%3, pool_size=[2, 2], strides=[2, 2]);
  %6 = multiply(%5, %4);
  %7 = concatenate((%6, %4), axis=1);
  %8 = nn.batch_norm(%7, meta[relay.Constant][4], meta[relay.Constant][5], meta[relay.Constant][6], meta[relay.Constant][7]);
  %9 = %8.0;
  %10 = image.resize2d(%9, size=[16, 16], method="nearest_neighbor", coordinate_transformation_mode="asymmetric", rounding_method="floor");
  %11 = image.resize2d(%9, size=[16, 16], method="linear", coordinate_transformation_mode="half_pixel");
  %12 = add(%10, %11);
  %13 = nn.relu(%12);
  clip(%13, a_min=0f, a_max=2f)
}
'''

CONV_BN = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3, 12, 12), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=6, kernel_size=[3, 3]);
  %1 = nn.bias_add(%0, meta[relay.Constant][1]);
  %2 = nn.batch_norm(%1, meta[relay.Constant][2], meta[relay.Constant][3], meta[relay.Constant][4], meta[relay.Constant][5]);
  %3 = %2.0;
  %4 = nn.relu(%3);
  nn.global_avg_pool2d(%4)
}
'''


def _params(seed, *shapes_and_kinds):
    r = np.random.default_rng(seed)
    out = []
    for shape, kind in shapes_and_kinds:
        if kind == "pos":
            out.append((r.random(shape) + 0.5).astype(np.float32))
        else:
            out.append((r.standard_normal(shape) * kind).astype(np.float32))
    return out


def coverage_model():
    params = _params(0, ((8, 4, 3, 3), 0.3), ((8,), 0.1), ((8, 1, 3, 3), 0.4), ((8, 4, 3, 3), 0.3),
                     ((16,), "pos"), ((16,), 0.1), ((16,), 0.1), ((16,), "pos"))
    return tidlx.parse_relay(COVERAGE, params=params), params


def conv_bn_model():
    params = _params(1, ((6, 3, 3, 3), 0.3), ((6,), 0.2), ((6,), "pos"), ((6,), 0.1), ((6,), 0.1), ((6,), "pos"))
    return tidlx.parse_relay(CONV_BN, params=params), params


def _frames(shape, n, seed):
    return np.random.default_rng(seed).standard_normal((n,) + shape[1:]).astype(np.float32)


def _quantize(mod, calib, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # fewer frames than calibration_frames
        return tidlx.quantize(mod, options, calib=calib)


def _sqnr(reference, value):
    reference = np.asarray(reference, np.float64)
    return 10 * np.log10((reference ** 2).sum() / ((reference - value) ** 2).sum())


@pytest.mark.parametrize("bits", [8, 16])
def test_conv_with_bias_and_batch_norm_folded(bits):
    """The Conv record: the model's weights with bias and batch norm folded per channel (computed here
    from the constants), quantized by §4; roundBits/tensorScale by §6; biasA x biasB ~ the bias in the
    accumulator domain; ReLU as the unsigned type's bounds."""
    mod, (w, b, gamma, beta, mean, var) = conv_bn_model()
    q = _quantize(mod, {"x": _frames((1, 3, 12, 12), 6, seed=2)}, tensor_bits=bits, accuracy_level=0)
    sub = q.subgraphs["tidl_0"]
    conv, gap = sub.compute_layers()
    assert (conv.type, conv.type_id, conv.activation, gap.type) == ("Conv", 1, "relu", "Pool")
    k = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + 1e-5)
    w_folded = w.astype(np.float64) * k[:, None, None, None]
    b_folded = (b.astype(np.float64) - mean) * k + beta
    x = sub.tensors[sub.inputs[0]]
    data = sub.layers[0]     # §6.1: 2^7 at 8 bit, TI 11.x's 2^round(log2(32767 / absMax)) at 16
    rng = q.calibration["tidl_0"].tensors[data.outputs[0]]
    assert data.acc_scale == 2.0 ** nx.data_convert_input_q(bits, True, rng.min, rng.max) == \
        (data_convert_acc_scale(8) if bits == 8 else 2.0 ** round(math.log2(32767 / max(-rng.min, rng.max))))
    assert x.scale == nx.tensor_scale(data.acc_scale, data.round_bits)
    ws = nx.weight_scale(nx.weight_abs_max(w_folded), bits)   # accuracy_level 0 is BiasRange 64: no §4.4 clip
    assert conv.weight_scale == ws
    assert conv.weights.dtype == (np.int8 if bits == 8 else np.int16)
    assert np.array_equal(conv.weights, nx.quantize_weights(w_folded, ws, bits))
    assert conv.acc_scale == ws * x.scale
    out = sub.tensors[conv.outputs[0]]
    assert out.scale == conv.acc_scale / 2 ** conv.round_bits and not out.signed and out.bits == bits
    assert out.element_type == (0 if bits == 8 else 2)   # U8 / U16
    assert conv.bounds == (0, 2 ** bits - 1)
    in_accumulator = conv.bias_a * conv.bias_b
    bias_scale = nx.bias_scale(float(np.abs(b_folded).max()), bits)     # §5: TI's bias at the weights' width
    assert conv.bias_scale == bias_scale
    bq = nx.quantize_bias(b_folded, bias_scale, bits)
    want_a, want_b = nx.split_bias(bq, nx.in_scale_factor(ws, x.scale, bias_scale), bits, x.bits, x.signed)
    assert np.array_equal(conv.bias_a, want_a) and np.array_equal(conv.bias_b, want_b)
    # about b x weightScale x inScale: within one step of b_q (1/256 of absMax at 8 bit) and biasB's
    # truncated isf (isf is about 15 here at 8 bit)
    wanted = b_folded * ws * x.scale
    assert np.abs(in_accumulator - wanted).max() <= 0.1 * np.abs(wanted).max()


def test_coverage_model_records():
    mod, _ = coverage_model()
    q = _quantize(mod, {"x": _frames((1, 4, 16, 16), 8, seed=1)}, tensor_bits=8)
    sub = q.subgraphs["tidl_0"]
    layers = sub.compute_layers()
    assert [layer.type for layer in layers] == ["Conv", "Conv", "Pool", "Conv", "EltWise", "Concat", "BatchNorm",
                                                "Resize", "Resize", "EltWise", "ReLU"]
    relu6 = layers[0]
    # §4.7: the float32 2^8 / 6, the type's bounds only
    assert sub.tensors[relu6.outputs[0]].scale == float(np.float32(256 / 6)) and "forced" in relu6.notes[0]
    assert relu6.bounds == (0, 255)
    depthwise, avg, grouped = layers[1], layers[2], layers[3]
    assert depthwise.attrs["groups"] == 8 and depthwise.attrs["dilations"] == (2, 2)
    assert grouped.attrs["groups"] == 2 and grouped.attrs["strides"] == (2, 2)
    assert avg.attrs["q"] == 8                                # 2x2 stride 2 at 8 bit
    concat = layers[5]
    scales = [sub.tensors[t].scale for t in concat.inputs]
    assert concat.multipliers == nx.eltwise_multipliers(sub.tensors[concat.outputs[0]].scale, concat.round_bits,
                                                        scales)
    for resize in layers[7:9]:                                 # type and scale kept
        assert sub.tensors[resize.outputs[0]] == type(sub.tensors[0])(
            resize.outputs[0], sub.tensors[resize.outputs[0]].name, (1, 16, 16, 16),
            sub.tensors[resize.inputs[0]].bits, sub.tensors[resize.inputs[0]].signed,
            sub.tensors[resize.inputs[0]].scale)
    relu, clip = layers[9], layers[10]          # the add's ReLU is the element-wise layer's (TI's fusion)
    assert relu.activation == "relu" and clip.activation == "clip"
    clip_scale = sub.tensors[clip.outputs[0]].scale
    assert clip.bounds == (0, min(255, math.floor(2.0 * clip_scale + 0.5)))


# Measured (seed 1 frames, seed 3 input): 8 bit 17.8 dB, 16 bit 65.9 dB (NP2); P2 18.0 / 64.4 dB.
@pytest.mark.parametrize("style", [0, 1])
def test_coverage_model_runs_close_to_float(style):
    mod, _ = coverage_model()
    x = {"x": _frames((1, 4, 16, 16), 1, seed=3)}
    reference = tidlx.emulate(mod, x, kernels="reference")[0]
    calib = {"x": _frames((1, 4, 16, 16), 8, seed=1)}
    s = {bits: _sqnr(reference, tidlx.emulate(_quantize(mod, calib, tensor_bits=bits, **{
        "advanced_options:quantization_scale_type": style}), x)[0]) for bits in (8, 16)}
    print(f"coverage model, quantization_scale_type={style}: 8 bit {s[8]:.1f} dB, 16 bit {s[16]:.1f} dB")
    # 16 bit is held back by TI's calibration: ranges are the mean of the frames' maxima, so frames above them
    # saturate, and 50 iterations of bias calibration partly fit the biases to that on the calibration frames
    assert s[8] >= 15.0 and s[16] >= s[8] + 25.0


def test_p2_scales_are_powers_of_2():
    """P2Dynamic: weight scales and every tensorScale are powers of 2 (no ReLU6 in this model)."""
    mod, _ = conv_bn_model()
    q = _quantize(mod, {"x": _frames((1, 3, 12, 12), 6, seed=2)}, **{"advanced_options:quantization_scale_type": 1})
    sub = q.subgraphs["tidl_0"]
    assert sub.quantization_style == nx.P2_DYNAMIC
    for t in sub.tensors:
        assert math.frexp(t.scale)[0] == 0.5, t
    assert math.frexp(sub.compute_layers()[0].weight_scale)[0] == 0.5


GUARD = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3, 8, 8), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
  %1 = nn.conv2d(%0, meta[relay.Constant][1], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
  %2 = nn.bias_add(%1, meta[relay.Constant][2]);
  %3 = nn.avg_pool2d(%0, pool_size=[2, 2], strides=[2, 2]);
  %4 = nn.conv2d(%3, meta[relay.Constant][3], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
  %5 = nn.bias_add(%4, meta[relay.Constant][4]);
  (%2, %5)
}
'''


def test_bias_saturation_guard_reads_ti_ratio_and_skips_average_pools():
    """§6.6: conv0 feeds conv1 and an average pool; conv1 and conv2 (after the pool) have small weights
    and large biases (weightScale / biasScale = absMax(b) / absMax(w) = 400 with TI's bias scale), so
    conv0's roundBits goes up by the guard's count over §6.3's; the pool's does not (TI skips average
    pools)."""
    r = np.random.default_rng(5)
    w0 = (r.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    small = np.full((4, 4, 3, 3), 0.01, np.float32) * np.sign(r.standard_normal((4, 4, 3, 3))).astype(np.float32)
    big = np.array([4.0, -2.0, 1.0, 3.0], np.float32)
    mod = tidlx.parse_relay(GUARD, params=[w0, small, big, small, big])
    # accuracy_level 9 without its four options: min/max ranges, and no BiasRange 64 (level 0's) to skip the guard
    q = _quantize(mod, {"x": _frames((1, 3, 8, 8), 4, seed=6)}, tensor_bits=8, accuracy_level=9,
                  **{f"advanced_options:{k}": 0 for k in ("activation_clipping", "weight_clipping", "bias_calibration",
                                                           "channel_wise_quantization")})
    sub = q.subgraphs["tidl_0"]
    conv0, conv1, pool, conv2 = sub.compute_layers()
    assert (conv0.type, conv1.type, pool.type, conv2.type) == ("Conv", "Conv", "Pool", "Conv")
    ratio = nx.consumer_weight_to_bias_scale(nx.weight_scale(0.01, 8), nx.bias_scale(4.0, 8))
    assert ratio == pytest.approx(400.0)
    for layer, guarded in ((conv0, True), (pool, False)):
        out = sub.tensors[layer.outputs[0]]
        rng = q.calibration["tidl_0"].tensors[layer.outputs[0]]
        rb = nx.round_bits(layer.acc_scale, rng.min, rng.max, 8, out.signed)
        if guarded:
            assert rb > 0
            rb = nx.bias_saturation_guard(rb, nx.tensor_scale(layer.acc_scale, rb), ratio, 8, out.signed)
            assert any("bias-saturation guard" in n for n in layer.notes)
        assert layer.round_bits == rb, layer.name
    assert not any("bias-saturation guard" in n for n in pool.notes)
    # accuracy_level 0 (BiasRange 64): neither the guard nor §4.4's clip
    q0 = _quantize(mod, {"x": _frames((1, 3, 8, 8), 4, seed=6)}, tensor_bits=8, accuracy_level=0)
    conv0, conv1 = q0.subgraphs["tidl_0"].compute_layers()[:2]
    rng = q0.calibration["tidl_0"].tensors[conv0.outputs[0]]
    assert conv0.round_bits == nx.round_bits(conv0.acc_scale, rng.min, rng.max, 8, rng.min < 0)
    assert conv1.weight_scale == nx.weight_scale(float(np.abs(small).max()), 8) and not conv1.notes


def test_calibration_option_bits():
    assert calibration_option_bits(TidlOptions(accuracy_level=1)) == 7
    assert calibration_option_bits(TidlOptions(accuracy_level=0)) == 64      # BiasRange, TI's OSRT map
    assert calibration_option_bits(TidlOptions(accuracy_level=9, activation_clipping=0, weight_clipping=1,
                                               bias_calibration=0)) == 2


def test_a_layer_without_a_style_4_rule_is_refused_by_name():
    """quantization_scale_type 4 quantizes the layers docs/numerics.md §12 has rules for; another one is a
    QuantizationError naming it (a constant minus a tensor: §12.11 takes the constant second only)."""
    text = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 2, 4, 4), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=2, kernel_size=[3, 3]);
  subtract(meta[relay.Constant][1], %0)
}
'''
    mod = tidlx.parse_relay(text, params=[np.ones((2, 2, 3, 3), np.float32), np.full((1, 2, 4, 4), 2, np.float32)])
    with pytest.raises(QuantizationError, match=r"layer 'tidl_0_layer2' \(EltWise\): quantization_scale_type 4 "
                                                r"\(asymmetric per-channel\): .* has no style-4 rule"):
        _quantize(mod, {"x": _frames((1, 2, 4, 4), 2, seed=0)}, **{"advanced_options:quantization_scale_type": 4})


def test_an_elementwise_layer_with_a_constant_holds_it_quantized():
    text = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 2, 4, 4), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=2, kernel_size=[3, 3]);
  multiply(%0, meta[relay.Constant][1])
}
'''
    mod = tidlx.parse_relay(text, params=[np.ones((2, 2, 3, 3), np.float32), np.full((1, 2, 4, 4), 2, np.float32)])
    qmodel = _quantize(mod, {"x": _frames((1, 2, 4, 4), 2, seed=0)})
    layer = qmodel.subgraphs["tidl_0"].layer("tidl_0_layer2")
    assert layer.type == "EltWise" and layer.attrs["eltwise_type"] == "Prod"
    # the constant 2 quantized as a data convert would: unsigned 8 bit at tensorScale 128 (§6.3 keeps
    # roundBits 0 for m = 256 exactly), so 2 x 128 saturates to 255
    assert layer.weights.dtype == np.uint8 and layer.weight_scale == 128.0
    assert layer.weights.shape == (1, 2, 4, 4) and (layer.weights == 255).all()


@pytest.mark.parametrize("merge, expected", [
    ("add(%1, %1)", lambda y: 2 * y),
    ("multiply(%1, %1)", lambda y: y * y),
    ("concatenate((%1, %1), axis=1)", lambda y: np.concatenate([y, y], axis=1)),
])
def test_a_merging_layer_reading_one_tensor_twice(tmp_path, merge, expected):
    # outlining gives the layer's Composite one parameter; TIDL's layer lists the data id twice
    text = f'''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 4, 8, 8), float32]) {{
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
  %1 = nn.relu(%0);
  {merge}
}}
'''
    (w,) = _params(3, ((4, 4, 3, 3), 0.3))
    mod = tidlx.parse_relay(text, params=[w])
    calib = {"x": _frames((1, 4, 8, 8), 4, seed=1)}
    q = _quantize(mod, calib, tensor_bits=16)
    (sub,) = q.subgraphs.values()
    merging = [layer for layer in sub.layers if layer.type in ("EltWise", "Concat")]
    assert len(merging) == 1 and len(merging[0].inputs) == 2 and len(set(merging[0].inputs)) == 1
    x = _frames((1, 4, 8, 8), 1, seed=2)
    (float_out,) = tidlx.emulate(mod, {"x": x})
    (fixed,) = tidlx.emulate(q, {"x": x})
    assert float_out.shape == fixed.shape
    y = np.maximum(tidlx.emulate(tidlx.parse_relay(text.replace(merge, "%1"), params=[w]), {"x": x})[0], 0)
    np.testing.assert_allclose(float_out, expected(y), rtol=1e-5, atol=1e-6)
    assert _sqnr(float_out, fixed) > 40
    # the folder keeps the repeated input and runs with the same bits
    folder = tmp_path / "m"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tidlx.compile_model(mod, folder, {"tensor_bits": 16}, calib)
    (again,) = tidlx.load_compiled(folder).run({"x": x})
    np.testing.assert_array_equal(again, fixed)


SOFTMAX_ROWS = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 4, 6, 10), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
  nn.softmax(%0, axis=-1)
}
'''


def test_tidl_version_switches_the_release_rules():
    """tidl_version 08.06 against the default 11.00 on one model: a float input to 16 bit enters through
    a data convert at 2^7 (11.x: 2^round(log2(32767 / absMax))); at 8 bit (same input scale in both) a
    softmax over rows of 10 (< 16 lanes) adds 08.06's 6 pad lanes to its denominators (11.x: none), so
    every output is at most 11.x's and the rows sum below 1."""
    mod = tidlx.parse_relay(SOFTMAX_ROWS, params=_params(5, ((4, 4, 3, 3), 0.3)))
    calib = {"x": _frames((1, 4, 6, 10), 4, seed=6)}
    new16 = _quantize(mod, calib, tensor_bits=16, accuracy_level=0)
    old16 = _quantize(mod, calib, tensor_bits=16, accuracy_level=0, tidl_version="8.6")
    assert old16.options.tidl_version == "08.06" and new16.options.tidl_version == "11.00"
    assert old16.subgraphs["tidl_0"].layers[0].acc_scale == 128.0
    assert new16.subgraphs["tidl_0"].layers[0].acc_scale > 1024.0

    new = _quantize(mod, calib, accuracy_level=0)
    old = _quantize(mod, calib, accuracy_level=0, tidl_version="08_06_00_00")
    soft = {v: [layer for layer in q.subgraphs["tidl_0"].layers if layer.type == "SoftMax"][0]
            for v, q in (("old", old), ("new", new))}
    assert soft["old"].attrs.get("narrow_row_pads") == 1 and "narrow_row_pads" not in soft["new"].attrs
    x = {"x": _frames((1, 4, 6, 10), 1, seed=7)}
    new_out, old_out = tidlx.emulate(new, x)[0], tidlx.emulate(old, x)[0]
    assert np.all(old_out <= new_out) and not np.array_equal(old_out, new_out)
    assert np.abs(new_out.sum(axis=-1) - 1).max() < 1e-5 and old_out.sum(axis=-1).max() < 1 - 1e-4
    # 10.01 follows 11.00
    same = _quantize(mod, calib, accuracy_level=0, tidl_version="10_01_04_00")
    assert np.array_equal(tidlx.emulate(same, x)[0].view(np.int32), new_out.view(np.int32))
