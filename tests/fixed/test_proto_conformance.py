"""End-to-end conformance from a quantization-parameters file (docs/quant-proto.md): each case is an ONNX
model and a TIDLNetQuantParams text with ranges chosen here; tidlx quantizes from the file and runs in fixed
point, and every layer's integers (and the scale of every tensor) must equal the ones proto_oracle.py
derives from the same ranges with oracle.py's rules (docs/numerics.md), never tidlx's own functions.

The ranges are chosen to reach the rules' branches: ReLU6 and symmetric Clip outputs (§4.7's forced
scale), a bias whose split needs a smaller producer scale (§6.6's guard), a bias that clips the weight
scale (§4.4), ranges at and next to powers of 2 (§6.3's `m - 1`), signed and unsigned tensors, 8- and
16-bit tensors (`tensor_bits`), and the rules that differ between `tidl_version` 11.00 and 08.06 (§6.1's
16-bit data convert and `[0, 0]` inputs, §8.9's pad lanes).
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest

import tidlx
from tidlx.emulator.fixed.kernel_set import fixed_point_kernel_set, run_fixed
from proto_oracle import Net

OPT = "advanced_options:quant_params_proto_path"


def _rng(seed):
    return np.random.default_rng(seed)


def _w(seed, shape, scale=0.5):
    """Weights on a grid of 1/64 (exactly representable; the rules' rounding still matters through the
    scales, which are not powers of 2)."""
    return np.round(_rng(seed).standard_normal(shape) * scale * 64) / 64


# ---- single layers ------------------------------------------------------------------------------


def conv_case(act, bias=True, x_range=(-4.0, 4.0), out_range=None, clip=(-2.0, 2.0), **extra):
    def build(bits, version, per_channel=False):
        net = Net(bits, version, per_channel)
        net.input("x", (1, 3, 6, 6), x_range)
        b = _w(2, 4, 0.3) if bias else None
        rng = out_range or {"none": (-6.0, 6.0), "relu": (0.0, 8.0), "relu6": (0.0, 6.0), "clip": clip,
                            "prelu": (-3.0, 6.0), "leaky": (-1.5, 7.0)}[act]
        slopes = {"prelu": [0.25, 0.1, -0.5, 0.75], "leaky": [0.1]}.get(act)
        if act == "prelu":      # a PReLU after a conv is its own layer (TI's PReLU layer: a batch norm)
            net.conv("c", "x", _w(1, (4, 3, 3, 3)), b, (-6.0, 6.0), pads=(1, 1, 1, 1), **extra)
            net.prelu("p", "c", slopes, rng)
        else:
            net.conv("c", "x", _w(1, (4, 3, 3, 3)), b, rng, act=act, pads=(1, 1, 1, 1), slopes=slopes,
                     clip=clip if act == "clip" else None, **extra)
        return net
    return build


def depthwise(bits, version, per_channel=False):
    net = Net(bits, version, per_channel)
    net.input("x", (1, 4, 6, 6), (0.0, 4.0))
    # channels of very different magnitudes: per channel, their roundBits differ (§8.1.1)
    w = _w(3, (4, 1, 3, 3)) * np.array([1.0, 0.2, 3.0, 0.05]).reshape(4, 1, 1, 1)
    net.conv("dw", "x", w, _w(4, 4, 0.2), (-5.0, 5.0), pads=(1, 1, 1, 1), groups=4)
    net.conv("pw", "dw", _w(28, (2, 4, 1, 1)), _w(29, 2, 0.2), (-6.0, 6.0))
    return net


def depthwise_relu6(bits, version, per_channel=False):
    """Per channel, §4.7 forces each channel's scale while the output's roundBits come from the whole
    layer's weight scale (§4.5): the tensorScale is not the ReLU6's."""
    net = Net(bits, version, per_channel)
    net.input("x", (1, 4, 6, 6), (0.0, 4.0))
    w = _w(3, (4, 1, 3, 3)) * np.array([1.0, 0.2, 3.0, 0.05]).reshape(4, 1, 1, 1)
    net.conv("dw", "x", w, _w(4, 4, 0.2), (0.0, 6.0), act="relu6", pads=(1, 1, 1, 1), groups=4)
    return net


def deconv(bits, version, per_channel=False):
    net = Net(bits, version, per_channel)
    net.input("x", (1, 3, 4, 4), (-2.0, 2.0))
    net.conv("up", "x", _w(5, (3, 2, 2, 2)), _w(6, 2, 0.2), (-3.0, 3.0), strides=(2, 2), deconv=True)
    return net


def gemm(matmul):
    def build(bits, version, per_channel=False):
        net = Net(bits, version, per_channel)
        net.input("x", (1, 16), (-3.0, 3.0))
        net.gemm("fc", "x", _w(7, (5, 16)), _w(8, 5, 0.5), (-10.0, 12.5), matmul=matmul)
        return net
    return build


def gemm_relu(bits, version, per_channel=False):
    net = Net(bits, version, per_channel)
    net.input("x", (1, 16), (-3.0, 3.0))
    net.gemm("fc", "x", _w(31, (6, 16)), _w(32, 6, 0.5), (0.0, 10.0), act="relu")
    return net


def batch_norm(bits, version, per_channel=False):
    net = Net(bits, version, per_channel)
    net.input("x", (1, 4, 4, 4), (-2.0, 2.0))
    net.batch_norm("bn", "x", [1.5, -0.5, 2.0, 0.75], [0.125, -0.25, 0.5, 0.0], [0.5, -0.25, 0.0, 1.0],
                   [4.0, 1.0, 0.25, 1.0], (-9.0, 9.0))
    return net


def standalone_prelu(leaky):
    def build(bits, version, per_channel=False):
        net = Net(bits, version, per_channel)
        net.input("x", (1, 4, 4, 4), (-4.0, 4.0))
        net.conv("c", "x", _w(27, (4, 4, 1, 1)), None, (-4.0, 4.0))    # a subgraph needs MACs
        net.pool("mp", "c", "MaxPool", (-4.0, 4.0))                     # a leaky ReLU would fuse into the conv
        net.prelu("p", "mp", [0.1] if leaky else [0.25, -0.125, 0.6, 1.5], (-1.0, 4.0), leaky=leaky)
        return net
    return build


def two_tensor(op, out_range, c_range=(-3.0, 3.0), act="none", clip=None, x_range=(-2.0, 2.0)):
    def build(bits, version, per_channel=False):
        net = Net(bits, version, per_channel)
        net.input("x", (1, 4, 4, 4), x_range)
        net.conv("c", "x", _w(9, (4, 4, 1, 1)), None, c_range)
        if op == "Concat":
            net.concat("m", ("x", "c"), out_range)
        else:
            net.eltwise("m", op, ("x", "c"), out_range, act=act, clip=clip)
        return net
    return build


def standalone_clip(clip):
    def build(bits, version, per_channel=False):
        net = Net(bits, version, per_channel)
        net.input("x", (1, 4, 4, 4), (-4.0, 4.0))
        net.conv("c", "x", _w(30, (4, 4, 1, 1)), None, (-4.0, 4.0))
        net.pool("mp", "c", "MaxPool", (-4.0, 4.0))                     # a clip would fuse into the conv
        net.relu("r", "mp", (max(clip[0], 0.0) if clip else 0.0, clip[1] if clip else 4.0), clip=clip)
        return net
    return build


def pool(op, kernel=(2, 2), strides=(2, 2), pads=(0, 0, 0, 0), out_range=(-2.0, 2.0)):
    def build(bits, version, per_channel=False):
        net = Net(bits, version, per_channel)
        net.input("x", (1, 3, 6, 6), (-3.0, 3.0))
        net.pool("p", "x", op, out_range, kernel, strides, pads)
        return net
    return build


def resize(mode):
    def build(bits, version, per_channel=False):
        net = Net(bits, version, per_channel)
        net.input("x", (1, 2, 4, 4), (-3.0, 3.0))
        net.conv("c", "x", _w(25, (2, 2, 1, 1)), None, (-3.0, 3.0))    # a subgraph needs MACs
        net.resize("r", "c", mode, (-3.0, 3.0))
        return net
    return build


def table(kind, out_range, x_range=(-4.0, 4.0)):
    def build(bits, version, per_channel=False):
        net = Net(bits, version, per_channel)
        net.input("x", (1, 2, 4, 4), x_range)
        net.table("t", "x", kind, out_range)
        return net
    return build


def softmax(width):
    def build(bits, version, per_channel=False):
        net = Net(bits, version, per_channel)
        net.input("x", (1, width), (-4.0, 4.0))
        net.softmax("s", "x")
        return net
    return build


def depth_to_space(mode):
    def build(bits, version, per_channel=False):
        net = Net(bits, version, per_channel)
        net.input("x", (1, 8, 2, 3), (-3.0, 3.0))
        net.conv("c", "x", _w(26, (8, 8, 1, 1)), None, (-3.0, 3.0))    # a subgraph needs MACs
        net.depth_to_space("d", "c", 2, mode, (-3.0, 3.0))
        return net
    return build


# ---- short chains ------------------------------------------------------------------------------


def conv_relu_conv(bits, version, per_channel=False):
    """The second conv's bias (|b| up to 8 against weights up to 0.5: weightScale / biasScale = 16) needs
    the first conv's output scale halved: §6.6's guard fires on c1 (8 bit)."""
    net = Net(bits, version, per_channel)
    net.input("x", (1, 3, 6, 6), (-4.0, 4.0))
    net.conv("c1", "x", _w(10, (4, 3, 3, 3)), _w(11, 4, 0.3), (0.0, 8.0), act="relu", pads=(1, 1, 1, 1))
    net.conv("c2", "c1", _w(12, (3, 4, 1, 1)) * 0.25, [2.0, -8.0, 0.5], (-16.0, 16.0), w_range=(-0.5, 0.5))
    return net


def residual(bits, version, per_channel=False):
    net = Net(bits, version, per_channel)
    net.input("x", (1, 4, 4, 4), (-2.0, 2.0))
    net.conv("c1", "x", _w(13, (4, 4, 3, 3)), _w(14, 4, 0.2), (0.0, 4.0), act="relu", pads=(1, 1, 1, 1))
    net.conv("c2", "c1", _w(15, (4, 4, 3, 3)), _w(16, 4, 0.2), (-4.0, 4.0), pads=(1, 1, 1, 1))
    net.eltwise("s", "Add", ("c2", "x"), (0.0, 5.0), act="relu")
    return net


def conv_sigmoid_head(bits, version, per_channel=False):
    net = Net(bits, version, per_channel)
    net.input("x", (1, 3, 4, 4), (0.0, 1.0))
    net.conv("c", "x", _w(17, (2, 3, 3, 3)), _w(18, 2, 0.5), (-6.0, 6.0), pads=(1, 1, 1, 1))
    net.table("sig", "c", "Sigmoid", (0.0, 1.0))
    return net


def classifier(bits, version, per_channel=False):
    net = Net(bits, version, per_channel)
    net.input("x", (1, 3, 6, 6), (-4.0, 4.0))
    net.conv("c", "x", _w(19, (8, 3, 3, 3)), _w(20, 8, 0.2), (0.0, 6.0), act="relu6", pads=(1, 1, 1, 1))
    net.pool("gap", "c", "GlobalAveragePool", (0.0, 3.75))
    net.flatten("f", "gap", (0.0, 3.75))
    net.gemm("fc", "f", _w(21, (5, 8)), _w(22, 5, 0.5), (-5.0, 7.5))
    return net


def mixed_precision(bits, version, per_channel=False):
    """§3, §7.4: the middle conv has 16-bit weights and an 8-bit output (two-step requantization), its
    bias at 16 bit, and its producer's guard takes the 16-bit consumer's limit."""
    net = conv_relu_conv(bits, version, per_channel)
    net.params_16bit.add("c2")
    return net


def zero_range_input(bits, version, per_channel=False):
    """§6.1: a sum whose input c2 has the range [0, 0]: 11.00 leaves its scale out of min(inScales),
    08.06 takes it."""
    net = Net(bits, version, per_channel)
    net.input("x", (1, 2, 4, 4), (-2.0, 2.0))
    net.conv("c1", "x", _w(23, (2, 2, 1, 1)), None, (-3.0, 3.0))
    net.conv("c2", "x", _w(24, (2, 2, 1, 1)) * 1024, None, (0.0, 0.0))    # the smaller scale
    net.eltwise("s", "Add", ("c1", "c2"), (-3.0, 3.0))
    return net


CASES = {
    "conv_bias_relu": conv_case("relu"),
    "conv_no_bias": conv_case("none", bias=False),
    "conv_bias_from_file": conv_case("none", b_file=[0.5, -0.25, 0.0625, -0.4375]),
    "conv_relu6_forced": conv_case("relu6"),
    "conv_clip_symmetric_forced": conv_case("clip"),
    # a clip at neither [0, c] nor [-c, c]: its range, no forced scale, the type's saturation (§8.10)
    "conv_clip_offset_unsigned": conv_case("clip", clip=(0.5, 3.0)),
    "conv_clip_offset_signed": conv_case("clip", clip=(-1.0, 3.0)),
    "conv_prelu": conv_case("prelu"),
    "conv_leaky_relu": conv_case("leaky"),
    "conv_bias_clips_weight_scale": conv_case("none", w_range=(-0.25, 0.25), b_range=(-64.0, 64.0)),
    "conv_power_of_2_range": conv_case("none", out_range=(-4.0, 4.0)),
    "conv_unsigned_input": conv_case("relu", x_range=(0.0, 2.0), out_range=(0.0, 4.0)),
    # §6.3 at the input (accScale 2^7): max 1 gives m = 128, a power of 2, so m - 1 and roundBits 0; one
    # float32 step of 2^-20 above, roundBits 1
    "input_range_at_power_of_2": conv_case("none", x_range=(-1.0, 1.0)),
    "input_range_above_power_of_2": conv_case("none", x_range=(-1.0, 1.0 + 2.0 ** -20)),
    "gemm_relu": gemm_relu,
    "depthwise": depthwise,
    "depthwise_relu6": depthwise_relu6,
    "deconv": deconv,
    "gemm": gemm(False),
    "matmul": gemm(True),
    "batch_norm": batch_norm,
    "prelu": standalone_prelu(False),
    "leaky_relu": standalone_prelu(True),
    "add": two_tensor("Add", (-4.0, 4.0)),
    "mul": two_tensor("Mul", (-6.0, 6.0)),
    "concat": two_tensor("Concat", (-3.0, 3.0)),
    "add_relu": two_tensor("Add", (0.0, 4.0), act="relu"),
    "add_relu6_forced": two_tensor("Add", (0.0, 6.0), act="relu6"),
    # inputs at scale about 1: accScale 2^6 is below 2 x 256/6, so roundBits is lowered to 0
    "add_relu6_lowered_to_0": two_tensor("Add", (0.0, 6.0), act="relu6", x_range=(-100.0, 100.0),
                                         c_range=(-100.0, 100.0)),
    "add_clip_symmetric_forced": two_tensor("Add", (-1.5, 1.5), act="clip", clip=(-1.5, 1.5)),
    "add_clip_offset": two_tensor("Add", (-0.5, 2.0), act="clip", clip=(-0.5, 2.0)),
    "mul_relu": two_tensor("Mul", (0.0, 5.0), act="relu"),
    "standalone_relu": standalone_clip(None),
    "standalone_clip": standalone_clip((0.5, 3.0)),
    "max_pool": pool("MaxPool"),
    "average_pool_2x2_s2": pool("AveragePool"),
    "average_pool_3x3_s1": pool("AveragePool", (3, 3), (1, 1), (1, 1, 1, 1)),
    "global_average_pool": pool("GlobalAveragePool", out_range=(-1.0, 1.25)),
    "resize_nearest": resize("nearest"),
    "resize_bilinear": resize("bilinear"),
    "sigmoid": table("Sigmoid", (0.0, 1.0)),
    "tanh": table("Tanh", (-1.0, 1.0)),
    "sigmoid_narrow_range": table("Sigmoid", (0.125, 0.875)),
    "hard_sigmoid": table("HardSigmoid", (0.0, 1.0)),
    "elu": table("Elu", (-0.75, 4.0)),
    "softmax_20": softmax(20),
    "softmax_10": softmax(10),
    "depth_to_space_dcr": depth_to_space("DCR"),
    "depth_to_space_crd": depth_to_space("CRD"),
    "conv_relu_conv": conv_relu_conv,
    "residual": residual,
    "conv_sigmoid_head": conv_sigmoid_head,
    "classifier": classifier,
    "zero_range_input": zero_range_input,
    "mixed_precision_16bit_weights": mixed_precision,
}

# the branches each case is there for at 8 bit, 11.00 (checked on the expected side, so that a change of
# ranges cannot quietly stop exercising them)
BRANCHES = {
    "conv_relu6_forced": {"forced:c"},
    "conv_clip_symmetric_forced": {"forced:c"},
    "conv_bias_clips_weight_scale": {"bias_clip:c"},
    "conv_power_of_2_range": {"power_of_2_range:x"},
    "input_range_at_power_of_2": {"power_of_2_range:x"},
    "tanh": {"power_of_2_range:t"},
    "conv_relu_conv": {"guard:c1"},
    "classifier": {"forced:c"},
    "leaky_relu": {"leaky_table:p"},
    "add_relu6_forced": {"lowered:m"},
    "add_clip_symmetric_forced": {"lowered:m"},
    "conv_clip_offset_unsigned": {"clip_beyond_its_bounds:c"},
    "conv_clip_offset_signed": {"clip_beyond_its_bounds:c"},
    "add_clip_offset": {"clip_beyond_its_bounds:m"},
    "add_relu6_lowered_to_0": {"lowered_to_0:m"},
    "zero_range_input": {"zero_range_left_out:s"},
}

PER_CHANNEL_BRANCHES = {"depthwise": {"per_channel_round_bits:dw"},
                        "depthwise_relu6": {"forced:dw", "per_channel_scale_not_the_clip's:dw"}}

# 16 bit and 08.06: a hard sigmoid is a folded batch norm with Clip [0, 1] (§8.10), an ELU tidlx's own table
# after a batch norm (not modelled here)
EIGHT_BIT_ONLY = {"hard_sigmoid", "elu", "mixed_precision_16bit_weights"}
# the cases whose rules differ between 11.00 and 08.06
VERSIONED = {"leaky_relu", "add_relu6_forced", "softmax_10", "softmax_20", "zero_range_input", "conv_bias_relu", "add",
             "sigmoid", "tanh", "sigmoid_narrow_range", "conv_sigmoid_head"}

# PerChannelWeight (accuracy_level 9, channel_wise_quantization 1): the network P2Dynamic, depthwise per channel
PER_CHANNEL = ("depthwise", "depthwise_relu6", "conv_bias_relu", "conv_relu6_forced", "conv_bias_clips_weight_scale",
               "conv_relu_conv", "residual", "classifier", "gemm", "batch_norm", "prelu")

PARAMS = ([(name, 8, "11.00", False) for name in CASES]
          + [(name, 16, "11.00", False) for name in CASES if name not in EIGHT_BIT_ONLY]
          + [(name, bits, "08.06", False) for name in sorted(VERSIONED) for bits in (8, 16)]
          + [(name, bits, "11.00", True) for name in PER_CHANNEL for bits in (8, 16)])


def run_case(net: Net, tmp_path, seed=0):
    """tidlx from the file, run with its fast and its plain (reference) layer kernels: the input, and per
    kernel set {layer name: (integers or float32, QuantizedTensor)} and the model's outputs."""
    path = tmp_path / "m.onnx"
    onnx.save(net.onnx(), str(path))
    proto = tmp_path / "q.prototxt"
    proto.write_text(net.proto())
    mod = tidlx.load(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        options = {OPT: str(proto), "tensor_bits": net.bits, "tidl_version": net.version}
        if net.params_16bit:
            options["advanced_options:params_16bit_names_list"] = ",".join(sorted(net.params_16bit))
        if net.per_channel:
            options.update({"accuracy_level": 9, "advanced_options:channel_wise_quantization": 1})
        qmodel = tidlx.quantize(mod, options)
    lo, hi = net.layers[0].out_range
    x = _rng(seed).uniform(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo), net.x_shape).astype(np.float32)
    runs = {}
    for kernels in ("fast", "reference"):
        seen = {}
        outputs = run_fixed(qmodel.module, {net.layers[0].name: x},
                            fixed_point_kernel_set(qmodel.subgraphs, "reference", fixed=kernels),
                            fixed_observers=[_observer(net, qmodel, seen)])
        runs[kernels] = (seen, outputs)
    assert len(qmodel.subgraphs) == 1, "the whole model is one TIDL subgraph"
    return x, runs


def _observer(net, qmodel, seen):
    def observe(obs):
        sub = qmodel.subgraphs[obs.subgraph]
        layer = obs.layer
        if layer.type == "Data":
            if layer.inputs:
                return
            name = net.layers[0].name
        else:
            name = layer.name
        seen[name] = (obs.outputs[0], sub.tensors[layer.outputs[0]])
    return observe


@pytest.mark.parametrize("name, bits, version, per_channel", PARAMS,
                         ids=[f"{n}-{b}bit-{v}" + ("-per_channel" if c else "") for n, b, v, c in PARAMS])
def test_every_layer_gives_the_integers_of_the_rules(name, bits, version, per_channel, tmp_path):
    net = CASES[name](bits, version, per_channel)
    x, runs = run_case(net, tmp_path)
    want, info, floats = net.expected(x)
    if version == "11.00" and bits == 8:
        branches = BRANCHES.get(name, set()) | (PER_CHANNEL_BRANCHES.get(name, set()) if per_channel else set())
        assert branches <= net.events, f"the case no longer reaches {branches - net.events}"
    for kernels, (seen, outputs) in runs.items():
        for layer in net.layers:
            assert layer.name in seen, f"no layer '{layer.name}' observed; tidlx's layers: {sorted(seen)}"
            got, tensor = seen[layer.name]
            b, signed, scale = info[layer.name]
            if b:
                assert (tensor.bits, tensor.signed, tensor.scale) == (b, signed, scale), \
                    f"{kernels} kernels, layer '{layer.name}': tensor (bits, signed, scale)"
                assert got.dtype == want[layer.name].dtype, f"{kernels} kernels, layer '{layer.name}': dtype"
            diff = np.flatnonzero(np.asarray(got).ravel() != np.asarray(want[layer.name]).ravel())
            assert got.shape == want[layer.name].shape and diff.size == 0, \
                (f"{kernels} kernels, layer '{layer.name}': {diff.size} of {got.size} values differ; first at "
                 f"{diff[:3]}: tidlx {np.asarray(got).ravel()[diff[:3]]}, "
                 f"rules {np.asarray(want[layer.name]).ravel()[diff[:3]]}")
        for out_name, got in zip(net.output_names(), outputs):
            np.testing.assert_array_equal(np.asarray(got, np.float32).reshape(floats[out_name].shape),
                                          floats[out_name])
