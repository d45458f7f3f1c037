"""The layers the first fixed-point slice did not take (docs/numerics.md §8.2, §8.10.1-2, §8.11):
deconvolution, PReLU / leaky ReLU, sigmoid, tanh, hard sigmoid, pad and depth-to-space, quantized from
a model and run in fixed point against the float model."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import tidlx
from tidlx.backends.tidl import numerics as nx
from tidlx.emulator.fixed import arith

LAYERS = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 4, 8, 8), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3]);
  %1 = nn.leaky_relu(%0, alpha=0.1f);
  %2 = nn.conv2d_transpose(%1, meta[relay.Constant][1], channels=8, kernel_size=[2, 2], strides=[2, 2]);
  %3 = nn.bias_add(%2, meta[relay.Constant][2]);
  %4 = nn.relu(%3);
  %5 = nn.pad(%4, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]]);
  %6 = nn.conv2d(%5, meta[relay.Constant][3], strides=[2, 2], channels=8, kernel_size=[2, 2]);
  %7 = nn.prelu(%6, meta[relay.Constant][4]);
  %8 = nn.depth_to_space(%7, block_size=2);
  %9 = sigmoid(%8);
  %10 = nn.conv2d(%9, meta[relay.Constant][5], channels=4, kernel_size=[1, 1]);
  %11 = tanh(%10);
  %12 = nn.batch_norm(%11, meta[relay.Constant][6], meta[relay.Constant][7], meta[relay.Constant][8], meta[relay.Constant][9]);
  %13 = %12.0;
  %14 = sigmoid(%13);
  nn.pad(%14, 0f, pad_width=[[0, 0], [0, 0], [1, 0], [0, 2]])
}
'''


def _params(seed):
    r = np.random.default_rng(seed)
    shapes = [((8, 4, 3, 3), 0.3), ((8, 8, 2, 2), 0.3), ((8,), 0.1), ((8, 8, 2, 2), 0.3), ((8,), "slope"),
              ((4, 2, 1, 1), 1.0), ((4,), "pos"), ((4,), 0.1), ((4,), 0.1), ((4,), "pos")]
    out = []
    for shape, kind in shapes:
        if kind == "pos":
            out.append((r.random(shape) + 0.5).astype(np.float32))
        elif kind == "slope":
            out.append((r.random(shape) * 0.3 + 0.05).astype(np.float32))
        else:
            out.append((r.standard_normal(shape) * kind).astype(np.float32))
    return out


def layers_model():
    return tidlx.parse_relay(LAYERS, params=_params(0))


def _frames(n, seed):
    return np.random.default_rng(seed).standard_normal((n, 4, 8, 8)).astype(np.float32)


def _quantize(mod, calib, **options):
    options.setdefault("advanced_options:calibration_iterations", 3)   # bias calibration: a few, for time
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tidlx.quantize(mod, options, calib=calib)


def _sqnr(reference, value):
    reference = np.asarray(reference, np.float64)
    return 10 * np.log10((reference ** 2).sum() / ((reference - value) ** 2).sum())


def test_layer_records():
    q = _quantize(layers_model(), {"x": _frames(6, 1)}, tensor_bits=8)
    sub = q.subgraphs["tidl_0"]
    layers = sub.compute_layers()
    kinds = [(layer.type, layer.activation) for layer in layers]
    # (graph preparation folds the pad before the strided conv into its padding)
    assert kinds == [("Conv", "prelu"), ("Deconv", "relu"), ("Conv", "none"), ("PReLU", "prelu"),
                     ("DepthToSpace", "none"), ("Sigmoid", "sigmoid"), ("Conv", "none"), ("Tanh", "tanh"),
                     ("BatchNorm", "sigmoid"), ("Pad", "none")], kinds
    leaky, deconv, _, prelu, d2s, sigmoid, _, tanh, bn, pad = layers
    # §8.10.1: one slope of 0.1 at slopeScale 128 / 0.1 = 1280 is 127 (128 clamped to int8): the 8.8
    # factor (int)(127 x 256 / 1280) = 25; a signed output
    assert leaky.prelu_slopes.tolist() == [25] and leaky.prelu_shift == 8
    assert sub.tensors[leaky.outputs[0]].signed
    assert prelu.prelu_slopes.shape == (8,)
    # the standalone PReLU is TI's batch norm of weight 1.0: 127 at weight scale 128, no bias
    assert prelu.weights.tolist() == [127] * 8 and prelu.weight_scale == 128.0
    assert prelu.acc_scale == 128.0 * sub.tensors[prelu.inputs[0]].scale
    # §4.4 applies to the deconvolution's bias; its weights keep ConvTranspose's layout
    assert deconv.weights.shape == (8, 8, 2, 2) and deconv.attrs["strides"] == (2, 2)
    assert pad.attrs["pads"] == ((0, 0), (0, 0), (1, 0), (0, 2))
    assert d2s.attrs == {"block": 2, "mode": "DCR"}
    # §8.10.2 (TIDL 11.x, 8 bit): TI's 256-entry tables; the output scale is 128 x the table's input scale
    # over a power of 2 (an activation batch norm's accScale); sigmoid unsigned, tanh signed. A standalone
    # layer's table is indexed by its input (roundBits 0), a fused one's by the requantized accumulator.
    for layer, signed, on_input in ((sigmoid, False, True), (tanh, True, True), (bn, False, False)):
        out = sub.tensors[layer.outputs[0]]
        ratio = 128 * layer.pre_scale / out.scale
        assert out.signed == signed and ratio >= 1 and math.frexp(ratio)[0] == 0.5, (layer.name, ratio)
        assert layer.activation_table.shape == (256,) and layer.table_on_input == on_input
        if on_input:
            assert layer.round_bits == 0 and layer.pre_scale == sub.tensors[layer.inputs[0]].scale
        else:
            # tensorScale in float32 (§6.4)
            assert layer.pre_scale == float(np.float32(layer.acc_scale / 2 ** layer.round_bits))
    assert sub.tensors[d2s.outputs[0]].scale == sub.tensors[prelu.outputs[0]].scale


def test_standalone_sigmoid_kernel_is_the_table_of_its_input():
    """§8.10.2 (TI 11.x): the runtime indexes the table by the input's own values."""
    q = _quantize(layers_model(), {"x": _frames(6, 1)}, tensor_bits=8)
    sub = q.subgraphs["tidl_0"]
    sigmoid = [layer for layer in sub.compute_layers() if layer.type == "Sigmoid"][0]
    seen = {}
    q.run({"x": _frames(1, 2)}, fixed_observers=[lambda o: seen.setdefault(o.layer.name, o)])
    obs = seen[sigmoid.name]
    lo = -128 if obs.inputs[0].dtype == np.int8 else 0
    assert np.array_equal(obs.outputs[0], sigmoid.activation_table[obs.inputs[0].astype(np.int64) - lo].astype(np.uint8))


# Measured (seed 1 calibration frames, seed 2 input): 8 bit 44.9 dB, 16 bit 54.3 dB (NP2), 45.9 and 93.7 dB (P2).
@pytest.mark.parametrize("style", [0, 1])
def test_layers_run_close_to_float(style):
    mod = layers_model()
    x = {"x": _frames(1, 2)}
    reference = tidlx.emulate(mod, x, kernels="reference")[0]
    calib = {"x": _frames(8, 1)}
    s = {bits: _sqnr(reference, tidlx.emulate(_quantize(mod, calib, tensor_bits=bits, **{
        "advanced_options:quantization_scale_type": style}), x)[0]) for bits in (8, 16)}
    print(f"deconv/prelu/sigmoid/tanh/pad/depth-to-space model, quantization_scale_type={style}: "
          f"8 bit {s[8]:.1f} dB, 16 bit {s[16]:.1f} dB")
    # 16 bit is held back by TI's calibration: ranges are the mean of the frames' maxima, so frames above them
    # saturate, and 50 iterations of bias calibration partly fit the biases to that on the calibration frames
    assert s[8] >= 20.0 and s[16] >= s[8] + 6.0


def test_gelu_after_a_conv_is_a_table_activation():
    text = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 2, 4, 4), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=2, kernel_size=[3, 3]);
  %1 = multiply(%0, 0.707107f);
  %2 = erf(%1);
  %3 = add(%2, 1f);
  %4 = multiply(%0, 0.5f);
  multiply(%4, %3)
}
'''
    mod = tidlx.parse_relay(text, params=[np.ones((2, 2, 3, 3), np.float32)])
    qmodel = _quantize(mod, {"x": np.ones((2, 2, 4, 4), np.float32)})
    tables = [layer for sub in qmodel.subgraphs.values() for layer in sub.layers
              if layer.activation_table is not None]
    assert len(tables) == 1 and tables[0].type == "BatchNorm"


DEPTHWISE = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 8, 10, 10), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], groups=8, channels=8, kernel_size=[3, 3]);
  %1 = nn.bias_add(%0, meta[relay.Constant][1]);
  nn.relu(%1)
}
'''


def _depthwise_params():
    r = np.random.default_rng(5)
    # channel magnitudes from 1/64 to 1: one per-tensor scale wastes most bits of the small channels
    magnitude = (2.0 ** -np.arange(0, 8, dtype=np.float64) * 0.8).astype(np.float32)
    w = (r.standard_normal((8, 1, 3, 3)) * magnitude[:, None, None, None]).astype(np.float32)
    b = (r.standard_normal(8) * 0.05).astype(np.float32)
    return [w, b]


def depthwise_model():
    return tidlx.parse_relay(DEPTHWISE, params=_depthwise_params())


def _per_channel_options(on: bool, bits: int = 8):
    # a 16-bit output (8-bit weights) so that the output's rounding does not hide the weights' error
    return {"tensor_bits": bits, "accuracy_level": 9,
            "advanced_options:output_feature_16bit_names_list": "tidl_0_layer1", "advanced_options:activation_clipping": 0,
            "advanced_options:weight_clipping": 0, "advanced_options:bias_calibration": 0,
            "advanced_options:channel_wise_quantization": int(on)}


def test_per_channel_depthwise_records_and_gain():
    """§4.5/§8.1.1: per-channel weight scales and roundBits; every channel lands exactly on the output
    scale; per channel is closer to float than per tensor on channels of unequal size (the worst
    channel's SQNR)."""
    mod = depthwise_model()
    calib = {"x": np.random.default_rng(1).standard_normal((6, 8, 10, 10)).astype(np.float32)}
    x = {"x": calib["x"][:1]}
    reference = tidlx.emulate(mod, x, kernels="reference")[0]
    figures = {}
    for on in (False, True):
        q = _quantize(mod, calib, **_per_channel_options(on))
        conv = q.subgraphs["tidl_0"].compute_layers()[0]
        assert conv.per_channel is on
        if on:
            sub = q.subgraphs["tidl_0"]
            in_scale, out_scale = sub.tensors[conv.inputs[0]].scale, sub.tensors[conv.outputs[0]].scale
            assert conv.round_bits.shape == (8,) and conv.weight_scale.shape == (8,)
            for ws, rb in zip(conv.weight_scale, conv.round_bits):
                assert ws * in_scale / out_scale == pytest.approx(2.0 ** rb, rel=1e-12)
            assert len(set(conv.round_bits.tolist())) > 1
            # per-channel weights make the network P2Dynamic: each channel's weight scale is 128 over its
            # absMax rounded up to a power of 2, or less where the bias clips it (§4.4)
            assert sub.quantization_style == nx.P2_DYNAMIC
            w = _depthwise_params()[0]
            p2 = [128.0 / 2.0 ** np.ceil(np.log2(np.abs(w[c]).max())) for c in range(8)]
            assert all(ws <= want and 2.0 ** np.round(np.log2(ws)) == ws for ws, want in zip(conv.weight_scale, p2))
            assert sum(ws == want for ws, want in zip(conv.weight_scale, p2)) >= 4
        out = tidlx.emulate(q, x)[0]
        assert q.subgraphs["tidl_0"].tensors[conv.outputs[0]].bits == 16 and conv.weight_bits == 8
        figures[on] = min(_sqnr(reference[:, c], out[:, c]) for c in range(8) if np.abs(reference[:, c]).max() > 0)
    print(f"depthwise, 8-bit weights, worst channel: per tensor {figures[False]:.1f} dB, per channel {figures[True]:.1f} dB")
    assert figures[True] >= figures[False] + 3.0


CHAIN = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 4, 8, 8), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3]);
  %1 = nn.relu(%0);
  %2 = nn.conv2d(%1, meta[relay.Constant][1], padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3]);
  %3 = nn.bias_add(%2, meta[relay.Constant][2]);
  nn.conv2d(%3, meta[relay.Constant][3], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3])
}
'''


def test_mixed_precision_a_16_bit_layer_between_8_bit_ones():
    """§3: the middle conv named in both lists has 16-bit weights (int16, an int16 bias) and a 16-bit
    output; its neighbours stay 8 bit and the last conv reads the 16-bit tensor as it is (no convert
    layer between widths)."""
    r = np.random.default_rng(3)
    params = [(r.standard_normal(s) * 0.3).astype(np.float32) for s in ((8, 4, 3, 3), (8, 8, 3, 3), (8,), (4, 8, 3, 3))]
    mod = tidlx.parse_relay(CHAIN, params=params)
    calib = {"x": _frames(6, 1)}
    x = {"x": calib["x"][:1]}
    names = "tidl_0_layer2"
    mixed = _quantize(mod, calib, tensor_bits=8, accuracy_level=0,
                      **{"advanced_options:output_feature_16bit_names_list": names,
                         "advanced_options:params_16bit_names_list": names})
    plain = _quantize(mod, calib, tensor_bits=8, accuracy_level=0)
    sub = mixed.subgraphs["tidl_0"]
    first, middle, last = sub.compute_layers()
    assert middle.name == names
    assert (first.weight_bits, middle.weight_bits, last.weight_bits) == (8, 16, 8)
    assert middle.weights.dtype == np.int16 and first.weights.dtype == last.weights.dtype == np.int8
    assert [sub.tensors[layer.outputs[0]].bits for layer in (first, middle, last)] == [8, 16, 8]
    # the 16-bit layer's bias in its int64 accumulator domain: about b x weightScale x inScale, within
    # biasB's truncated isf (§5.4: isf is about 21 here, biasB 21)
    wanted = params[2].astype(np.float64) * middle.weight_scale * sub.tensors[middle.inputs[0]].scale
    assert np.abs(middle.bias_a * middle.bias_b - wanted).max() <= 0.05 * np.abs(wanted).max()
    seen = {}
    mixed.run(x, fixed_observers=[lambda o: seen.setdefault(o.layer.name, o)])
    assert seen[last.name].inputs[0].dtype == np.int16 and seen[last.name].outputs[0].dtype == np.int8
    reference = tidlx.emulate(mod, x, kernels="reference")[0]
    s_mixed, s_plain = _sqnr(reference, mixed.run(x)[0]), _sqnr(reference, plain.run(x)[0])
    print(f"8-16-8 chain: all 8 bit {s_plain:.1f} dB, middle layer 16 bit {s_mixed:.1f} dB")
    assert s_mixed >= s_plain


CLIPPED = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 4, 8, 8), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3]);
  %1 = clip(%0, a_min=-2f, a_max=2f);
  %2 = nn.conv2d(%1, meta[relay.Constant][1], padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3]);
  clip(%2, a_min=0f, a_max=6f)
}
'''


def test_clip_forced_scales_symmetric_and_below_one():
    """§4.7 in the quantizer: a symmetric clip [-2, 2] forces the signed 2^7 / 2 = 64; the second layer's
    clip [0, 6] forces 256 / 6 from its weight scale's largest power of 2 under the ratio, and both keep
    the type's bounds only. Scaling the input by 2^10 puts the first layer's ratio below 1: the weight
    scale then drops by a power of 2 below outScale, roundBits 0, tensorScale = accScale."""
    r = np.random.default_rng(3)
    w = [(r.standard_normal((8, 4, 3, 3)) * 0.3).astype(np.float32),
         (r.standard_normal((8, 8, 3, 3)) * 0.1).astype(np.float32)]
    mod = tidlx.parse_relay(CLIPPED, params=w)
    for gain in (1.0, 2.0 ** 10):
        frames = _frames(4, 1) * np.float32(gain)
        q = _quantize(mod, {"x": frames}, tensor_bits=8)
        sub = q.subgraphs["tidl_0"]
        first, second = sub.compute_layers()
        x_scale = sub.tensors[first.inputs[0]].scale
        out1, out2 = sub.tensors[first.outputs[0]], sub.tensors[second.outputs[0]]
        assert out1.signed and not out2.signed
        assert first.bounds == (-128, 127) and second.bounds == (0, 255)
        for layer, out, clip_scale in ((first, out1, 64.0), (second, out2, float(np.float32(256 / 6)))):
            acc = float(np.float32(layer.weight_scale * sub.tensors[layer.inputs[0]].scale))
            ratio = acc / clip_scale
            assert ratio == 2.0 ** round(np.log2(ratio))         # a power of 2, above or below 1
            if ratio >= 1:
                assert out.scale == clip_scale and layer.round_bits == round(np.log2(ratio))
            else:
                assert layer.round_bits == 0 and out.scale == pytest.approx(acc, rel=1e-7)
        if gain > 1:   # the input scale is 2^10 smaller: the first layer's ratio is below 1
            assert x_scale * first.weight_scale < 64.0 and first.round_bits == 0
        tidlx.emulate(q, {"x": frames[:1]})


def test_per_channel_depthwise_with_relu6_forces_each_channel():
    """§4.5 with §4.7: every channel's weight scale is forced to outScale x 2^k / inScale (k its own); the
    output's roundBits come from the clip's range at the whole layer's accScale (its P2 weight scale over
    every weight), so its tensorScale is that accScale / 2^roundBits, not the clip's, and it saturates to
    its type; each channel's roundBits is the truncated log2 of its accScale over it."""
    mod = tidlx.parse_relay(DEPTHWISE.replace("nn.relu(%1)", "clip(%1, a_min=0f, a_max=6f)"),
                            params=_depthwise_params())
    calib = {"x": np.random.default_rng(1).standard_normal((4, 8, 10, 10)).astype(np.float32)}
    q = _quantize(mod, calib, **{**_per_channel_options(True), "advanced_options:output_feature_16bit_names_list": ""})
    sub = q.subgraphs["tidl_0"]
    conv = sub.compute_layers()[0]
    in_scale, out = sub.tensors[conv.inputs[0]].scale, sub.tensors[conv.outputs[0]]
    clip_scale = float(np.float32(256 / 6))
    assert conv.per_channel and conv.bounds == (0, 255) and not out.signed
    whole = 128.0 / 2.0 ** np.ceil(np.log2(np.abs(_depthwise_params()[0]).max()))
    acc = whole * in_scale
    rb0 = int(np.ceil(np.log2(6.0 * acc / 256.0)))          # §6.3 on [0, 6], unsigned 8 bit
    assert out.scale == acc / 2.0 ** max(rb0, 0) and out.scale != clip_scale
    for ws, rb in zip(conv.weight_scale, conv.round_bits):
        ratio = float(np.float32(ws * in_scale)) / clip_scale
        assert ratio == 2.0 ** np.round(np.log2(ratio))
        assert rb == max(0, int(np.floor(np.log2(float(np.float32(ws * in_scale)) / out.scale))))
    tidlx.emulate(q, {"x": calib["x"][:1]})


ZERO_CONSTANT = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3, 4, 4), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=3, kernel_size=[3, 3]);
  multiply(%0, meta[relay.Constant][1])
}
'''


@pytest.mark.parametrize("version", ["11.00", "08.06"])
def test_an_all_zero_constant_has_scale_1(version):
    """§6.1: a constant whose values are all 0 is at tensorScale 1 (TI: no weight scale, made 1, and
    roundBits 0 on its [0, 0] range), so x * 0 accumulates at the input's own scale, and its [0, 0] output
    keeps that accScale (roundBits 0)."""
    r = np.random.default_rng(2)
    params = [(r.standard_normal((3, 3, 3, 3)) * 0.3).astype(np.float32), np.zeros((1, 3, 4, 4), np.float32)]
    mod = tidlx.parse_relay(ZERO_CONSTANT, params=params)
    q = _quantize(mod, {"x": r.standard_normal((3, 3, 4, 4)).astype(np.float32)}, tidl_version=version)
    (sub,) = q.subgraphs.values()
    (layer,) = [l for l in sub.layers if l.type == "EltWise"]
    x = sub.tensors[layer.inputs[0]]
    assert layer.weight_scale == 1.0 and not np.any(layer.weights)
    assert layer.acc_scale == x.scale and layer.round_bits == 0
    assert sub.tensors[layer.outputs[0]].scale == x.scale
