"""The float emulator's benchmark set: real architectures built with onnx.helper, seeded weights.

One function per model, each returning an ``onnx.ModelProto`` whose bytes depend only on its
arguments (weights from ``numpy.random.default_rng(seed)``, no downloads). The shapes follow
torchvision's definitions (layer counts, channels, kernel sizes, strides, activations); batch
norm is folded into each convolution's bias, as ``torch.onnx.export`` writes an eval-mode model.

* ``resnet18``, ``resnet50``: basic / bottleneck blocks, 224x224.
* ``mobilenet_v2``: inverted residuals, depthwise 3x3, ReLU6 (Clip).
* ``mobilenet_v3_small``: depthwise 3x3/5x5, squeeze-excite (HardSigmoid gate), hard-swish.
* ``efficientnet_b0``: MBConv with squeeze-excite, swish (Sigmoid * x).
* ``shufflenet_v2``: channel split, channel shuffle (Reshape/Transpose/Reshape), x1.0 widths.
* ``fcn_resnet50``: ResNet-50 with dilated layer3/layer4 (output stride 8), FCN head, bilinear
  Resize back to the input, 256x256.
* ``bevdet_img_stage``: ``tidlx.models.bevdet_img_stage(backbone="resnet18", batch=1)``.

``MODELS`` maps a short name to ``(builder, description)``.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 14  # HardSwish is opset 14
IR_VERSION = 8


def make_divisible(value: float, divisor: int = 8) -> int:
    """torchvision's channel rounding (never below 90% of ``value``)."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


class GraphBuilder:
    """Accumulates nodes and seeded initializers; each helper returns its output's name."""

    def __init__(self, name: str, seed: int):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.count = 0

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def const(self, stem: str, array: np.ndarray) -> str:
        name = self.fresh(stem)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def node(self, op: str, inputs, stem: str = "", **attrs) -> str:
        out = self.fresh(stem or op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=out, **attrs))
        return out

    def conv(self, x, in_c, out_c, k, stride=1, groups=1, dilation=1, act=None, gain=1.0, bias=True):
        """Conv (batch norm folded into the bias) then ``act``; He-scaled weights times ``gain``."""
        fan_in = in_c // groups * k * k
        w = self.rng.normal(0, gain * np.sqrt(2.0 / fan_in), (out_c, in_c // groups, k, k)).astype(np.float32)
        inputs = [x, self.const("w", w)]
        if bias:
            inputs.append(self.const("b", self.rng.uniform(-0.1, 0.1, out_c).astype(np.float32)))
        pad = dilation * (k - 1) // 2
        y = self.node("Conv", inputs, "conv", kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4,
                      group=groups, dilations=[dilation, dilation])
        return self.act(y, act)

    def act(self, x, kind):
        if kind is None:
            return x
        if kind == "relu":
            return self.node("Relu", [x])
        if kind == "relu6":
            lo, hi = self.const("lo", np.array(0, np.float32)), self.const("hi", np.array(6, np.float32))
            return self.node("Clip", [x, lo, hi], "relu6")
        if kind == "hswish":
            return self.node("HardSwish", [x])
        if kind == "swish":
            return self.node("Mul", [x, self.node("Sigmoid", [x])], "swish")
        raise ValueError(f"unknown activation {kind!r}")

    def dense(self, x, in_f, out_f):
        w = self.rng.normal(0, np.sqrt(1.0 / in_f), (out_f, in_f)).astype(np.float32)
        b = self.rng.uniform(-0.1, 0.1, out_f).astype(np.float32)
        return self.node("Gemm", [x, self.const("fc_w", w), self.const("fc_b", b)], "fc", transB=1)

    def classifier(self, x, in_f, classes=1000):
        flat = self.node("Flatten", [self.node("GlobalAveragePool", [x], "pool")])
        return self.dense(flat, in_f, classes)

    def squeeze_excite(self, x, channels, squeeze, inner_act, gate):
        pooled = self.node("GlobalAveragePool", [x], "se_pool")
        s = self.conv(pooled, channels, squeeze, 1, act=inner_act)
        s = self.conv(s, squeeze, channels, 1)
        if gate == "hsigmoid":
            s = self.node("HardSigmoid", [s], alpha=1.0 / 6, beta=0.5)
        else:
            s = self.node("Sigmoid", [s])
        return self.node("Mul", [x, s], "se_scale")

    def model(self, input_shape, output: str, output_shape) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, self.name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(input_shape))],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, list(output_shape))], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="tidlx-benchmarks")
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        return model


# --- ResNets ------------------------------------------------------------------------------

# Residual branches end with a damped conv so activations keep their scale through deep nets
# (a trained net's last batch norm in a block does the same).
RESIDUAL_GAIN = 0.3


def _resnet_stem(g: GraphBuilder) -> str:
    x = g.conv("input", 3, 64, 7, stride=2, act="relu")
    return g.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])


def _basic_block(g, x, in_c, out_c, stride):
    y = g.conv(x, in_c, out_c, 3, stride, act="relu")
    y = g.conv(y, out_c, out_c, 3, gain=RESIDUAL_GAIN)
    short = g.conv(x, in_c, out_c, 1, stride) if stride != 1 or in_c != out_c else x
    return g.node("Relu", [g.node("Add", [y, short])])


def _bottleneck(g, x, in_c, width, stride, dilation=1, first_dilation=None):
    out_c = width * 4
    y = g.conv(x, in_c, width, 1, act="relu")
    # torchvision puts the stride (or dilation) on the 3x3 conv (ResNet v1.5).
    y = g.conv(y, width, width, 3, stride, dilation=first_dilation or dilation, act="relu")
    y = g.conv(y, width, out_c, 1, gain=RESIDUAL_GAIN)
    short = g.conv(x, in_c, out_c, 1, stride) if stride != 1 or in_c != out_c else x
    return g.node("Relu", [g.node("Add", [y, short])])


def _resnet50_body(g: GraphBuilder, dilate_last_two: bool = False) -> str:
    x, in_c, dilation = _resnet_stem(g), 64, 1
    for stage, (width, blocks, stride) in enumerate(((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))):
        first_dilation = dilation
        if dilate_last_two and stage >= 2:
            # replace_stride_with_dilation=[False, True, True]: the stride becomes dilation.
            dilation, stride = dilation * stride, 1
        for block in range(blocks):
            x = _bottleneck(g, x, in_c, width, stride if block == 0 else 1, dilation,
                            first_dilation if block == 0 else None)
            in_c = width * 4
    return x


def resnet18(image: int = 224, seed: int = 0) -> onnx.ModelProto:
    g = GraphBuilder("resnet18", seed)
    x, in_c = _resnet_stem(g), 64
    for width, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            x = _basic_block(g, x, in_c, width, stride if block == 0 else 1)
            in_c = width
    return g.model([1, 3, image, image], g.classifier(x, 512), [1, 1000])


def resnet50(image: int = 224, seed: int = 1) -> onnx.ModelProto:
    g = GraphBuilder("resnet50", seed)
    return g.model([1, 3, image, image], g.classifier(_resnet50_body(g), 2048), [1, 1000])


def fcn_resnet50(image: int = 256, classes: int = 21, seed: int = 2) -> onnx.ModelProto:
    """torchvision's fcn_resnet50 (no auxiliary head): dilated ResNet-50, FCNHead, bilinear upsampling."""
    g = GraphBuilder("fcn_resnet50", seed)
    x = _resnet50_body(g, dilate_last_two=True)
    x = g.conv(x, 2048, 512, 3, act="relu")
    x = g.conv(x, 512, classes, 1)
    sizes = g.const("sizes", np.array([1, classes, image, image], np.int64))
    out = g.node("Resize", [x, "", "", sizes], "upsample", mode="linear",
                 coordinate_transformation_mode="half_pixel")
    return g.model([1, 3, image, image], out, [1, classes, image, image])


# --- mobile nets ------------------------------------------------------------------------

def mobilenet_v2(image: int = 224, seed: int = 3) -> onnx.ModelProto:
    g = GraphBuilder("mobilenet_v2", seed)
    x, in_c = g.conv("input", 3, 32, 3, 2, act="relu6"), 32
    for expand, out_c, repeats, stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                                           (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(repeats):
            s, hidden = stride if i == 0 else 1, in_c * expand
            y = g.conv(x, in_c, hidden, 1, act="relu6") if expand != 1 else x
            y = g.conv(y, hidden, hidden, 3, s, groups=hidden, act="relu6")
            y = g.conv(y, hidden, out_c, 1, gain=RESIDUAL_GAIN if s == 1 and in_c == out_c else 1.0)
            x = g.node("Add", [x, y]) if s == 1 and in_c == out_c else y
            in_c = out_c
    x = g.conv(x, in_c, 1280, 1, act="relu6")
    return g.model([1, 3, image, image], g.classifier(x, 1280), [1, 1000])


# (kernel, expanded, out, squeeze-excite, activation, stride): torchvision's mobilenet_v3_small.
MOBILENET_V3_SMALL = ((3, 16, 16, True, "relu", 2), (3, 72, 24, False, "relu", 2), (3, 88, 24, False, "relu", 1),
                      (5, 96, 40, True, "hswish", 2), (5, 240, 40, True, "hswish", 1),
                      (5, 240, 40, True, "hswish", 1), (5, 120, 48, True, "hswish", 1),
                      (5, 144, 48, True, "hswish", 1), (5, 288, 96, True, "hswish", 2),
                      (5, 576, 96, True, "hswish", 1), (5, 576, 96, True, "hswish", 1))


def mobilenet_v3_small(image: int = 224, seed: int = 4) -> onnx.ModelProto:
    g = GraphBuilder("mobilenet_v3_small", seed)
    x, in_c = g.conv("input", 3, 16, 3, 2, act="hswish"), 16
    for k, hidden, out_c, se, act, stride in MOBILENET_V3_SMALL:
        residual = stride == 1 and in_c == out_c
        y = g.conv(x, in_c, hidden, 1, act=act) if hidden != in_c else x
        y = g.conv(y, hidden, hidden, k, stride, groups=hidden, act=act)
        if se:
            y = g.squeeze_excite(y, hidden, make_divisible(hidden / 4), "relu", "hsigmoid")
        y = g.conv(y, hidden, out_c, 1, gain=RESIDUAL_GAIN if residual else 1.0)
        x = g.node("Add", [x, y]) if residual else y
        in_c = out_c
    x = g.conv(x, in_c, 576, 1, act="hswish")
    flat = g.node("Flatten", [g.node("GlobalAveragePool", [x], "pool")])
    x = g.act(g.dense(flat, 576, 1024), "hswish")
    return g.model([1, 3, image, image], g.dense(x, 1024, 1000), [1, 1000])


# (expand ratio, kernel, stride, out channels, repeats): EfficientNet-B0.
EFFICIENTNET_B0 = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
                   (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))


def efficientnet_b0(image: int = 224, seed: int = 5) -> onnx.ModelProto:
    g = GraphBuilder("efficientnet_b0", seed)
    x, in_c = g.conv("input", 3, 32, 3, 2, act="swish"), 32
    for expand, k, stride, out_c, repeats in EFFICIENTNET_B0:
        for i in range(repeats):
            s, hidden = stride if i == 0 else 1, in_c * expand
            residual = s == 1 and in_c == out_c
            y = g.conv(x, in_c, hidden, 1, act="swish") if expand != 1 else x
            y = g.conv(y, hidden, hidden, k, s, groups=hidden, act="swish")
            y = g.squeeze_excite(y, hidden, max(1, in_c // 4), "swish", "sigmoid")
            y = g.conv(y, hidden, out_c, 1, gain=RESIDUAL_GAIN if residual else 1.0)
            x = g.node("Add", [x, y]) if residual else y
            in_c = out_c
    x = g.conv(x, in_c, 1280, 1, act="swish")
    return g.model([1, 3, image, image], g.classifier(x, 1280), [1, 1000])


def _channel_shuffle(g: GraphBuilder, x: str, channels: int, size: int) -> str:
    grouped = g.node("Reshape", [x, g.const("shape", np.array([1, 2, channels // 2, size, size], np.int64))])
    swapped = g.node("Transpose", [grouped], perm=[0, 2, 1, 3, 4])
    return g.node("Reshape", [swapped, g.const("shape", np.array([1, channels, size, size], np.int64))])


def shufflenet_v2(image: int = 224, seed: int = 6) -> onnx.ModelProto:
    """torchvision's shufflenet_v2_x1_0."""
    g = GraphBuilder("shufflenet_v2", seed)
    x = g.conv("input", 3, 24, 3, 2, act="relu")
    x = g.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    in_c, size = 24, image // 4
    for out_c, repeats in ((116, 4), (232, 8), (464, 4)):
        half = out_c // 2
        for i in range(repeats):
            if i == 0:
                size //= 2
                left = g.conv(x, in_c, in_c, 3, 2, groups=in_c)
                left = g.conv(left, in_c, half, 1, act="relu")
                right = g.conv(x, in_c, half, 1, act="relu")
                right = g.conv(right, half, half, 3, 2, groups=half)
            else:
                split = g.const("split", np.array([half, half], np.int64))
                left, right = g.fresh("split_a"), g.fresh("split_b")
                g.nodes.append(helper.make_node("Split", [x, split], [left, right], name=left, axis=1))
                right = g.conv(right, half, half, 1, act="relu")
                right = g.conv(right, half, half, 3, 1, groups=half)
            right = g.conv(right, half, half, 1, act="relu")
            x = _channel_shuffle(g, g.node("Concat", [left, right], axis=1), out_c, size)
            in_c = out_c
    x = g.conv(x, in_c, 1024, 1, act="relu")
    return g.model([1, 3, image, image], g.classifier(x, 1024), [1, 1000])


def bevdet_img_stage() -> onnx.ModelProto:
    from tidlx.models import bevdet_img_stage as build

    return build(backbone="resnet18", batch=1)


MODELS = {
    "resnet18": (resnet18, "ResNet-18, 224x224"),
    "resnet50": (resnet50, "ResNet-50, 224x224"),
    "mobilenet_v2": (mobilenet_v2, "MobileNetV2, 224x224"),
    "mobilenet_v3_small": (mobilenet_v3_small, "MobileNetV3-small, 224x224"),
    "efficientnet_b0": (efficientnet_b0, "EfficientNet-B0, 224x224"),
    "shufflenet_v2": (shufflenet_v2, "ShuffleNetV2 x1.0, 224x224"),
    "fcn_resnet50": (fcn_resnet50, "FCN ResNet-50, 256x256"),
    "bevdet_img_stage": (bevdet_img_stage, "BEVDet image stage, 256x704"),
}
