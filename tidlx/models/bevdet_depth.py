"""BEVDet's camera-aware DepthNet (``LSSViewTransformerBEVDepth.depth_net``, as in BEVDepth) as ONNX.

The module tree of BEVDet's ``DepthNet(in_channels, mid_channels, context_channels, depth_channels)``
(mmdet3d/models/necks/view_transformer.py) and the ONNX nodes each part becomes here, in the order
``DepthNet.forward`` runs them (scope ``/img_view_transformer/depth_net``; weights
``img_view_transformer.depth_net.<module>.<param>``). N = cameras, h x w = the stride-16 feature size,
M = mid_channels (= the neck's 256), C = context channels (64), D = depth bins (59)::

    mlp_input (1 x N x 27)            the 27 camera parameters per camera (intrinsics, image-aug
                                      rotation/translation, BEV-aug, sensor2ego), from get_mlp_input
    reshape(-1, 27)                   Reshape                      -> N x 27
    bn = BatchNorm1d(27)              bn/BatchNormalization        the one BN feeding two MLPs
    reduce_conv.0/1/2                 Conv 3x3 (bias), BatchNormalization, Relu on the neck feature
    context_mlp = Mlp(27, M, M)       fc1/Gemm -> act/Relu -> fc2/Gemm (dropouts vanish at export)
    [..., None, None]                 Unsqueeze                    -> N x M x 1 x 1
    context_se = SELayer(M)           conv_reduce/Conv 1x1 -> act1/Relu -> conv_expand/Conv 1x1
                                      -> gate/Sigmoid -> Mul (x * gate, the gate broadcast over h x w)
    context_conv                      Conv 1x1 M -> C (bias)
    depth_mlp, depth_se               the same as context_mlp, context_se, on the same bn output
    depth_conv.0/1/2 = BasicBlock     conv1/bn1/relu/conv2/bn2/Add/relu_1 (M -> M, no downsample)
    depth_conv.3 = ASPP (aspp=True)   aspp1: atrous_conv 1x1 + bn + relu; aspp2/3/4: 3x3 at dilation
                                      6/12/18 (padding = dilation) + bn + relu; global_avg_pool.0-3:
                                      GlobalAveragePool, Conv 1x1, BatchNormalization, Relu, then
                                      Resize (bilinear, align_corners) back to h x w; Concat of the
                                      five (5M); conv1 1x1 5M -> M, bn1, relu (dropout vanishes)
    depth_conv.4 = DCN (dcn=True)     mmcv DeformConv2dPack(M, M, 3, padding=1, groups=4):
                                      conv_offset/Conv 3x3 M -> 18 (bias) gives the offsets,
                                      DeformConv (ONNX opset 19, group 4, offset_group 1, no bias)
    depth_conv.<last>                 Conv 1x1 M -> D (bias): the depth logits
    torch.cat([depth, context], 1)    Concat                       -> N x (D + C) x h x w

``LSSViewTransformerBEVDepth`` then slices depth and context, takes the softmax over depth and the
depth x context outer product exactly as the LSS view transformer (bevdet.py). mmcv initializes
``conv_offset`` to zeros (the DCN starts as a plain conv); here it gets small random weights, as a
trained network has, so the offsets really move the samples.
"""

from __future__ import annotations

from ._onnx_graph import OnnxGraphWriter

#: BEVDepth's camera parameters per camera (get_mlp_input).
CAMERA_FEATURES = 27
ASPP_DILATIONS = (6, 12, 18)
#: mmcv DCN in BEVDet's DepthNet: groups=4, one offset group, 3x3.
DCN_GROUPS = 4
DCN_OFFSET_GROUPS = 1
DCN_KERNEL = 3


def camera_aware_depth_net(writer: OnnxGraphWriter, config, x: str, mlp_input: str, basic_block) -> str:
    """``DepthNet.forward(x, mlp_input)``: returns the N x (D + C) x h x w concat of depth logits and context.

    ``config`` is bevdet.BevdetImgStageConfig; ``basic_block`` is bevdet's ResNet BasicBlock writer."""
    scope, prefix = "/img_view_transformer/depth_net", "img_view_transformer.depth_net"
    mid = config.neck_channels
    features = writer.add_node("Reshape", scope, [mlp_input, writer.constant_int64(scope, [-1, CAMERA_FEATURES])],
                               allowzero=0)
    camera = writer.batch_norm(f"{scope}/bn", f"{prefix}.bn", features, CAMERA_FEATURES)

    x = writer.conv(f"{scope}/reduce_conv/reduce_conv.0", f"{prefix}.reduce_conv.0", x, config.neck_channels, mid,
                    kernel=3, bias=True)
    x = writer.batch_norm(f"{scope}/reduce_conv/reduce_conv.1", f"{prefix}.reduce_conv.1", x, mid)
    x = writer.relu(f"{scope}/reduce_conv/reduce_conv.2", x)

    def mlp(name: str) -> str:
        hidden = writer.linear(f"{scope}/{name}/fc1", f"{prefix}.{name}.fc1", camera, CAMERA_FEATURES, mid)
        hidden = writer.relu(f"{scope}/{name}/act", hidden)
        out = writer.linear(f"{scope}/{name}/fc2", f"{prefix}.{name}.fc2", hidden, mid, mid, gain=1.0)
        return writer.add_node("Unsqueeze", scope, [out, writer.constant_int64(scope, [2, 3])])

    def se_layer(name: str, gate_input: str) -> str:
        y = writer.conv(f"{scope}/{name}/conv_reduce", f"{prefix}.{name}.conv_reduce", gate_input, mid, mid,
                        kernel=1, bias=True)
        y = writer.relu(f"{scope}/{name}/act1", y)
        y = writer.conv(f"{scope}/{name}/conv_expand", f"{prefix}.{name}.conv_expand", y, mid, mid, kernel=1,
                        bias=True, gain=1.0)
        gate = writer.add_node("Sigmoid", f"{scope}/{name}/gate", [y])
        return writer.add_node("Mul", f"{scope}/{name}", [x, gate])

    context = se_layer("context_se", mlp("context_mlp"))
    context = writer.conv(f"{scope}/context_conv", f"{prefix}.context_conv", context, mid, config.context_channels,
                          kernel=1, bias=True, gain=1.0)

    depth = se_layer("depth_se", mlp("depth_mlp"))
    conv_scope, conv_prefix = f"{scope}/depth_conv", f"{prefix}.depth_conv"
    index = 0
    for _ in range(3):
        depth = basic_block(writer, f"{conv_scope}/depth_conv.{index}", f"{conv_prefix}.{index}", depth, mid, mid,
                            1, 1)
        index += 1
    if config.aspp:
        depth = _aspp(writer, config, f"{conv_scope}/depth_conv.{index}", f"{conv_prefix}.{index}", depth)
        index += 1
    if config.dcn:
        depth = _deformable_conv(writer, f"{conv_scope}/depth_conv.{index}", f"{conv_prefix}.{index}", depth, mid)
        index += 1
    depth = writer.conv(f"{conv_scope}/depth_conv.{index}", f"{conv_prefix}.{index}", depth, mid, config.depth_bins,
                        kernel=1, bias=True, gain=1.0)
    return writer.add_node("Concat", scope, [depth, context], axis=1)


def _conv_bn_relu(writer, scope, prefix, x, in_channels, out_channels, kernel, dilation=1,
                  names=("atrous_conv", "bn", "relu")) -> str:
    conv, bn, relu = names
    y = writer.conv(f"{scope}/{conv}", f"{prefix}.{conv}", x, in_channels, out_channels, kernel=kernel,
                    dilation=dilation)
    y = writer.batch_norm(f"{scope}/{bn}", f"{prefix}.{bn}", y, out_channels)
    return writer.relu(f"{scope}/{relu}", y)


def _aspp(writer: OnnxGraphWriter, config, scope: str, prefix: str, x: str) -> str:
    """BEVDet's ASPP(inplanes=M, mid_channels=M): four atrous branches and image pooling, fused by a 1x1 conv."""
    mid = config.neck_channels
    branches = [_conv_bn_relu(writer, f"{scope}/aspp1", f"{prefix}.aspp1", x, mid, mid, kernel=1)]
    for number, dilation in enumerate(ASPP_DILATIONS, start=2):
        branches.append(_conv_bn_relu(writer, f"{scope}/aspp{number}", f"{prefix}.aspp{number}", x, mid, mid,
                                      kernel=3, dilation=dilation))
    pool_scope, pool_prefix = f"{scope}/global_avg_pool", f"{prefix}.global_avg_pool"
    pooled = writer.add_node("GlobalAveragePool", f"{pool_scope}/global_avg_pool.0", [x])
    pooled = writer.conv(f"{pool_scope}/global_avg_pool.1", f"{pool_prefix}.1", pooled, mid, mid, kernel=1)
    pooled = writer.batch_norm(f"{pool_scope}/global_avg_pool.2", f"{pool_prefix}.2", pooled, mid)
    pooled = writer.relu(f"{pool_scope}/global_avg_pool.3", pooled)
    # F.interpolate(x5, size=x4.size()[2:], mode='bilinear', align_corners=True), exported with static sizes.
    batch_channels = writer.constant_int64(scope, [config.batch, mid])
    target_size = writer.constant_int64(scope, [config.height // 16, config.width // 16])
    sizes = writer.add_node("Concat", scope, [batch_channels, target_size], axis=0)
    branches.append(writer.add_node("Resize", scope, [pooled, "", "", sizes],
                                    coordinate_transformation_mode="align_corners", cubic_coeff_a=-0.75,
                                    mode="linear", nearest_mode="floor"))
    merged = writer.add_node("Concat", scope, branches, axis=1)
    return _conv_bn_relu(writer, scope, prefix, merged, 5 * mid, mid, kernel=1, names=("conv1", "bn1", "relu"))


def _deformable_conv(writer: OnnxGraphWriter, scope: str, prefix: str, x: str, channels: int) -> str:
    """mmcv DeformConv2dPack(M, M, 3, padding=1, groups=4): offsets from conv_offset, then DeformConv."""
    pad = DCN_KERNEL // 2
    offset_channels = DCN_OFFSET_GROUPS * 2 * DCN_KERNEL * DCN_KERNEL
    offsets = writer.conv(f"{scope}/conv_offset", f"{prefix}.conv_offset", x, channels, offset_channels,
                          kernel=DCN_KERNEL, bias=True, gain=1.0)
    weight = writer.conv_weight(prefix, channels // DCN_GROUPS, channels, DCN_KERNEL)
    return writer.add_node("DeformConv", scope, [x, weight, offsets], dilations=[1, 1], group=DCN_GROUPS,
                           kernel_shape=[DCN_KERNEL, DCN_KERNEL], offset_group=DCN_OFFSET_GROUPS,
                           pads=[pad, pad, pad, pad], strides=[1, 1])
