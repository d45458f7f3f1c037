"""BEVDet's image stage (ResNet backbone, CustomFPN neck, LSS or camera-aware depth net) written directly as ONNX.

The graph follows what ``torch.onnx.export`` (opset 17, BatchNorm not folded) gives for BEVDet's
``img_backbone`` -> ``img_neck`` -> ``img_view_transformer`` up to the BEV pool:

* ``img``: N x 3 x H x W, N = cameras (BEVDet's 6 cameras are batch 6; one sample, B = 1).
* ResNet (mmdet style='pytorch': the stride sits on the 3x3 conv), stages 3 and 4 feed the neck.
* CustomFPN (in [C3, C4] -> 256, num_outs=1, out_ids=[0], upsample nearest, no norm/act):
  lateral 1x1 convs, the stride-32 lateral resized to the stride-16 size and added, one 3x3 fpn conv.
  CustomFPN calls ``F.interpolate(x, size=prev_shape, mode='nearest')``; torch exports that as
  ``Resize(x, sizes=Concat(x.shape[:2], prev_shape))``. With static shapes the two halves are
  Constant nodes here, so the Concat is the one a real export carries (before onnx-simplifier).
* LSSViewTransformer: depth_net 1x1 conv 256 -> D + C (D = 59 bins for 1..60 m, C = 64), Slice into
  depth logits [:, :D] and context [:, D:D+C], Softmax over axis 1, then BEVDet's outer product
  ``depth.unsqueeze(1) * tran_feat.unsqueeze(2)`` (N x C x D x h x w), ``view(B, N, C, D, h, w)`` and
  ``permute(0, 1, 3, 4, 5, 2)``: the volume handed to voxel pooling is B x N x D x h x w x C, B = 1.

``depth_net="camera_aware"`` replaces the one 1x1 depth conv by BEVDet's DepthNet of
``LSSViewTransformerBEVDepth`` (bevdet_depth.py: a second input ``mlp_input``, 1 x N x 27 camera
parameters, through a BatchNorm feeding two MLPs that gate SE layers; BasicBlocks, ASPP and
optionally a deformable conv on the depth branch); the slice, softmax and outer product stay.

Outputs: ``depth`` (N x D x H/16 x W/16, sums to 1 over axis 1) and ``volume`` (1 x N x D x H/16 x
W/16 x C). Weights are He-scaled normals from ``numpy.random.Generator(PCG64(seed))`` drawn in a fixed
order, so the same arguments give byte-identical models.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import onnx

from ._onnx_graph import OnnxGraphWriter, float_tensor_info
from .errors import ModelArgumentError, save_model

OPSET = 17
IR_VERSION = 8  # the IR version that came with opset 17 (onnx 1.12); every runtime since reads it
DEFORM_CONV_OPSET = 19  # DeformConv is new in opset 19
DEFORM_CONV_IR_VERSION = 9  # the IR version of opset 19 (onnx 1.14)
DEPTH_NETS = ("lss", "camera_aware")
MODEL_NAME = "bevdet_img_stage"
FEATURE_STRIDE = 32  # the deepest backbone stage; H and W must divide by it
DEPTH_BINS = 59  # grid_config depth = [1.0, 60.0, 1.0]
TINY_CHANNEL_DIVISOR = 8
FULL_IMAGE = (256, 704)
TINY_IMAGE = (64, 192)


@dataclass(frozen=True)
class ResNetSpec:
    block: str  # "bottleneck" or "basic"
    stage_blocks: tuple[int, int, int, int]
    expansion: int


RESNETS: dict[str, ResNetSpec] = {
    "resnet50": ResNetSpec(block="bottleneck", stage_blocks=(3, 4, 6, 3), expansion=4),
    "resnet18": ResNetSpec(block="basic", stage_blocks=(2, 2, 2, 2), expansion=1),
}


@dataclass(frozen=True)
class BevdetImgStageConfig:
    """Every size the graph depends on; ``tiny`` only divides the channel widths."""

    backbone: str
    batch: int
    height: int
    width: int
    base_width: int = 64
    neck_channels: int = 256
    context_channels: int = 64
    depth_bins: int = DEPTH_BINS
    depth_net: str = "lss"
    aspp: bool = True
    dcn: bool = False

    @property
    def resnet(self) -> ResNetSpec:
        return RESNETS[self.backbone]

    def stage_channels(self, stage: int) -> int:
        return self.base_width * (2 ** stage) * self.resnet.expansion


def bevdet_img_stage(backbone: str = "resnet50", batch: int = 6, height: int | None = None,
                     width: int | None = None, seed: int = 0, path: str | os.PathLike | None = None,
                     tiny: bool = False, depth_net: str = "lss", aspp: bool = True,
                     dcn: bool = False) -> onnx.ModelProto:
    """Build BEVDet's image stage as an ONNX model (opset 17; 19 with ``dcn``); save it to ``path`` when given.

    ``height``/``width`` default to 256 x 704 (tiny: 64 x 192) and must be multiples of 32.
    ``tiny=True`` divides every channel width by 8 (depth bins stay 59) and keeps the exact graph
    structure, node names and op types of the full model.
    ``depth_net="lss"`` is LSSViewTransformer's single 1x1 conv; ``"camera_aware"`` is BEVDet's
    DepthNet (LSSViewTransformerBEVDepth) with the second input ``mlp_input`` (1 x N x 27), ``aspp``
    its ASPP block and ``dcn`` its deformable 3x3 conv (bevdet_depth.py lists the modules).
    """
    for name, value in (("tiny", tiny), ("aspp", aspp), ("dcn", dcn)):
        if not isinstance(value, bool):
            raise ModelArgumentError(MODEL_NAME, name, f"must be True or False, got {value!r}")
    if not isinstance(depth_net, str) or depth_net not in DEPTH_NETS:
        raise ModelArgumentError(MODEL_NAME, "depth_net", f"must be one of {', '.join(DEPTH_NETS)}, got {depth_net!r}")
    if depth_net == "lss" and (dcn or not aspp):
        changed = "dcn=True" if dcn else "aspp=False"
        raise ModelArgumentError(MODEL_NAME, "depth_net",
                                 f"'lss' has no ASPP or deformable conv ({changed} needs depth_net='camera_aware')")
    default_height, default_width = TINY_IMAGE if tiny else FULL_IMAGE
    height = default_height if height is None else height
    width = default_width if width is None else width
    _check_arguments(backbone, batch, height, width, seed, path)
    divisor = TINY_CHANNEL_DIVISOR if tiny else 1
    config = BevdetImgStageConfig(backbone=backbone, batch=batch, height=height, width=width,
                                  base_width=64 // divisor, neck_channels=256 // divisor,
                                  context_channels=64 // divisor, depth_net=depth_net, aspp=aspp, dcn=dcn)
    model = _build(config, seed, tiny)
    if path is not None:
        save_model(model, path, MODEL_NAME)
    return model


def bevdet_img_stage_tiny(backbone: str = "resnet50", batch: int = 6, height: int | None = None,
                          width: int | None = None, seed: int = 0,
                          path: str | os.PathLike | None = None, depth_net: str = "lss", aspp: bool = True,
                          dcn: bool = False) -> onnx.ModelProto:
    """The tiny variant (channels / 8, 64 x 192 image by default): same graph, fast to run."""
    return bevdet_img_stage(backbone=backbone, batch=batch, height=height, width=width, seed=seed,
                            path=path, tiny=True, depth_net=depth_net, aspp=aspp, dcn=dcn)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_arguments(backbone, batch, height, width, seed, path) -> None:
    if not isinstance(backbone, str) or backbone not in RESNETS:
        raise ModelArgumentError(MODEL_NAME, "backbone",
                                 f"must be one of {', '.join(sorted(RESNETS))}, got {backbone!r}")
    if not _is_int(batch) or batch < 1:
        raise ModelArgumentError(MODEL_NAME, "batch", f"must be an integer >= 1, got {batch!r}")
    for name, value in (("height", height), ("width", width)):
        if not _is_int(value) or value < FEATURE_STRIDE or value % FEATURE_STRIDE:
            raise ModelArgumentError(MODEL_NAME, name,
                                     f"must be a positive multiple of {FEATURE_STRIDE}, got {value!r}")
    if not _is_int(seed) or seed < 0:
        raise ModelArgumentError(MODEL_NAME, "seed", f"must be an integer >= 0, got {seed!r}")
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise ModelArgumentError(MODEL_NAME, "path", f"must be a file path or None, got {path!r}")


# -- graph ------------------------------------------------------------------------------------------------
def _build(config: BevdetImgStageConfig, seed: int, tiny: bool) -> onnx.ModelProto:
    writer = OnnxGraphWriter(seed)
    stride16, stride32 = _resnet(writer, config, "img")
    neck = _custom_fpn(writer, config, stride16, stride32)
    inputs = [float_tensor_info("img", [config.batch, 3, config.height, config.width])]
    opset, ir_version = OPSET, IR_VERSION
    if config.depth_net == "lss":
        depth_and_context = _lss_depth_net(writer, config, neck)
        variant = ""
    else:
        from .bevdet_depth import CAMERA_FEATURES, camera_aware_depth_net

        inputs.append(float_tensor_info("mlp_input", [1, config.batch, CAMERA_FEATURES]))
        depth_and_context = camera_aware_depth_net(writer, config, neck, "mlp_input", _basic_block)
        variant = (f", camera-aware depth net{'' if config.aspp else ' without ASPP'}"
                   f"{' with a deformable conv' if config.dcn else ''}")
        if config.dcn:
            opset, ir_version = DEFORM_CONV_OPSET, DEFORM_CONV_IR_VERSION
    depth, volume = _depth_and_volume(writer, config, depth_and_context)

    h, w = config.height // 16, config.width // 16
    outputs = [float_tensor_info(depth, [config.batch, config.depth_bins, h, w]),
               float_tensor_info(volume, [1, config.batch, config.depth_bins, h, w, config.context_channels])]
    doc = (f"BEVDet image stage: {config.backbone}{' (tiny)' if tiny else ''}, {config.batch} cameras, "
           f"{config.height}x{config.width}{variant}, seed {seed}; outputs depth N x D x h x w and "
           f"volume 1 x N x D x h x w x C (D={config.depth_bins}, C={config.context_channels})")
    return writer.make_model(MODEL_NAME, inputs, outputs, opset, ir_version, doc)


def _resnet(writer: OnnxGraphWriter, config: BevdetImgStageConfig, x: str) -> tuple[str, str]:
    """mmdet ResNet (style='pytorch'); returns the stage-3 (stride 16) and stage-4 (stride 32) features."""
    scope, prefix = "/img_backbone", "img_backbone"
    x = writer.conv(f"{scope}/conv1", f"{prefix}.conv1", x, 3, config.base_width, kernel=7, stride=2)
    x = writer.batch_norm(f"{scope}/bn1", f"{prefix}.bn1", x, config.base_width)
    x = writer.relu(f"{scope}/relu", x)
    x = writer.add_node("MaxPool", f"{scope}/maxpool", [x], ceil_mode=0, dilations=[1, 1], kernel_shape=[3, 3],
                        pads=[1, 1, 1, 1], strides=[2, 2])
    block = _bottleneck if config.resnet.block == "bottleneck" else _basic_block
    in_channels = config.base_width
    stage_outputs = []
    for stage, blocks in enumerate(config.resnet.stage_blocks):
        width = config.base_width * 2 ** stage
        layer = f"layer{stage + 1}"
        for index in range(blocks):
            stride = 2 if stage > 0 and index == 0 else 1
            x = block(writer, f"{scope}/{layer}/{layer}.{index}", f"{prefix}.{layer}.{index}", x,
                      in_channels, width, stride, config.resnet.expansion)
            in_channels = width * config.resnet.expansion
        stage_outputs.append(x)
    return stage_outputs[2], stage_outputs[3]


# The last norm of each residual branch is scaled down so 16 residual adds do not compound the variance.
RESIDUAL_BRANCH_GAMMA = 0.3


def _shortcut(writer, scope, prefix, x, in_channels, out_channels, stride) -> str:
    if stride == 1 and in_channels == out_channels:
        return x
    y = writer.conv(f"{scope}/downsample/downsample.0", f"{prefix}.downsample.0", x, in_channels, out_channels,
                    kernel=1, stride=stride, gain=1.0)
    return writer.batch_norm(f"{scope}/downsample/downsample.1", f"{prefix}.downsample.1", y, out_channels)


def _bottleneck(writer, scope, prefix, x, in_channels, width, stride, expansion) -> str:
    out_channels = width * expansion
    y = writer.conv(f"{scope}/conv1", f"{prefix}.conv1", x, in_channels, width, kernel=1)
    y = writer.batch_norm(f"{scope}/bn1", f"{prefix}.bn1", y, width)
    y = writer.relu(f"{scope}/relu", y)
    y = writer.conv(f"{scope}/conv2", f"{prefix}.conv2", y, width, width, kernel=3, stride=stride)
    y = writer.batch_norm(f"{scope}/bn2", f"{prefix}.bn2", y, width)
    y = writer.relu(f"{scope}/relu_1", y)
    y = writer.conv(f"{scope}/conv3", f"{prefix}.conv3", y, width, out_channels, kernel=1)
    y = writer.batch_norm(f"{scope}/bn3", f"{prefix}.bn3", y, out_channels, gamma_scale=RESIDUAL_BRANCH_GAMMA)
    identity = _shortcut(writer, scope, prefix, x, in_channels, out_channels, stride)
    y = writer.add_node("Add", scope, [y, identity])
    return writer.relu(f"{scope}/relu_2", y)


def _basic_block(writer, scope, prefix, x, in_channels, width, stride, expansion) -> str:
    out_channels = width * expansion
    y = writer.conv(f"{scope}/conv1", f"{prefix}.conv1", x, in_channels, width, kernel=3, stride=stride)
    y = writer.batch_norm(f"{scope}/bn1", f"{prefix}.bn1", y, width)
    y = writer.relu(f"{scope}/relu", y)
    y = writer.conv(f"{scope}/conv2", f"{prefix}.conv2", y, width, out_channels, kernel=3)
    y = writer.batch_norm(f"{scope}/bn2", f"{prefix}.bn2", y, out_channels, gamma_scale=RESIDUAL_BRANCH_GAMMA)
    identity = _shortcut(writer, scope, prefix, x, in_channels, out_channels, stride)
    y = writer.add_node("Add", scope, [y, identity])
    return writer.relu(f"{scope}/relu_1", y)


def _custom_fpn(writer: OnnxGraphWriter, config: BevdetImgStageConfig, stride16: str, stride32: str) -> str:
    """mmdet3d CustomFPN with two inputs, num_outs=1, out_ids=[0]; ConvModules without norm or act."""
    scope, prefix = "/img_neck", "img_neck"
    out = config.neck_channels
    laterals = []
    for index, (feature, stage) in enumerate(((stride16, 2), (stride32, 3))):
        laterals.append(writer.conv(f"{scope}/lateral_convs.{index}/conv", f"{prefix}.lateral_convs.{index}.conv",
                                    feature, config.stage_channels(stage), out, kernel=1, bias=True, gain=1.0))
    # F.interpolate(laterals[1], size=laterals[0].shape[2:]): sizes = Concat(N x C of the input, target h x w).
    batch_channels = writer.constant_int64(scope, [config.batch, out])
    target_size = writer.constant_int64(scope, [config.height // 16, config.width // 16])
    sizes = writer.add_node("Concat", scope, [batch_channels, target_size], axis=0)
    upsampled = writer.add_node("Resize", scope, [laterals[1], "", "", sizes],
                                coordinate_transformation_mode="asymmetric", cubic_coeff_a=-0.75, mode="nearest",
                                nearest_mode="floor")
    merged = writer.add_node("Add", scope, [laterals[0], upsampled])
    return writer.conv(f"{scope}/fpn_convs.0/conv", f"{prefix}.fpn_convs.0.conv", merged, out, out, kernel=3,
                       bias=True, gain=1.0)


def _lss_depth_net(writer: OnnxGraphWriter, config: BevdetImgStageConfig, x: str) -> str:
    """LSSViewTransformer's depth_net: one 1x1 conv to D depth logits + C context channels."""
    return writer.conv("/img_view_transformer/depth_net", "img_view_transformer.depth_net", x, config.neck_channels,
                       config.depth_bins + config.context_channels, kernel=1, bias=True, gain=1.0)


def _depth_and_volume(writer: OnnxGraphWriter, config: BevdetImgStageConfig, x: str) -> tuple[str, str]:
    """The view transformer up to the BEV pool: depth softmax and the depth x context outer product."""
    scope = "/img_view_transformer"
    depth_bins, context = config.depth_bins, config.context_channels

    def channel_slice(start: int, end: int) -> str:
        starts, ends = writer.constant_int64(scope, [start]), writer.constant_int64(scope, [end])
        axes, steps = writer.constant_int64(scope, [1]), writer.constant_int64(scope, [1])
        return writer.add_node("Slice", scope, [x, starts, ends, axes, steps])

    depth_logits = channel_slice(0, depth_bins)
    tran_feat = channel_slice(depth_bins, depth_bins + context)
    depth = writer.add_node("Softmax", scope, [depth_logits], axis=1, output_name="depth")
    depth_row = writer.add_node("Unsqueeze", scope, [depth, writer.constant_int64(scope, [1])])
    context_column = writer.add_node("Unsqueeze", scope, [tran_feat, writer.constant_int64(scope, [2])])
    volume = writer.add_node("Mul", scope, [depth_row, context_column])  # N x C x D x h x w
    h, w = config.height // 16, config.width // 16
    volume = writer.add_node("Reshape", scope, [volume, writer.constant_int64(scope, [1, config.batch, context,
                                                                                      depth_bins, h, w])],
                             allowzero=0)
    volume = writer.add_node("Transpose", scope, [volume], perm=[0, 1, 3, 4, 5, 2], output_name="volume")
    return depth, volume
