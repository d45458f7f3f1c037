"""TI's BEVDet as TI exports it for TIDL (edgeai-mmdetection3d ``BEVDet_export_model``), written
directly as ONNX with tidlx's deterministic weights.

    model = tidlx.models.bevdet_ti_export("resnet50", path="bevdet_ti.onnx")   # or tiny=True
    feeds = tidlx.models.bevdet_ti_inputs(model)      # images, the zero bev_feat, lidar_coor_1d

TI's export differs from BEVDet's training graph where TIDL or ONNX needed it; this builder
follows it:

* **three inputs**: ``inputs``, the N = 6 camera images as batch N (N x 3 x H x W); ``bev_feat``,
  zeros of (Y * X + 1) x C, the BEV grid flattened plus one "dump" cell, passed in by the host;
  ``lidar_coor_1d``, int64 (N * D * h * w,): the flat BEV cell of every frustum point, computed on
  the host from the camera geometry (TI's ``GetBEVDetGeometry``), Y * X for a point outside the
  grid. The camera geometry is not in the graph.
* the image stage of ``bevdet_img_stage`` (ResNet, CustomFPN) and LSSViewTransformer's plain depth
  net: one 1x1 convolution to D = 59 depth logits and C = 64 context channels, two channel Slices,
  Softmax over the depth axis (axis 1), the outer product ``depth.unsqueeze(1) *
  tran_feat.unsqueeze(2)`` (N x C x D x h x w), Transpose to N x D x h x w x C and Reshape to
  (N * D * h * w) x C;
* the voxel pooling (bev_pool_v2 on CUDA) as ``bev_feat.index_put_((lidar_coor_1d,), feat)``,
  which torch exports as Unsqueeze of the indices (their last axis: one index each) and
  ScatterND, with ``reduction='add'`` set by TI's ONNX surgery; the dump cell sliced off, a
  Reshape to 1 x 1 x Y x X x C (B, Z, Y, X, C), a Transpose to 1 x C x 1 x Y x X and the Z
  collapse (``unbind``/``cat`` over one Z voxel: one Squeeze) to 1 x C x Y x X;
* a small BEV encoder after BEVResNet + FPN_LSS (a full-resolution stage, a stride-2 stage, its
  nearest x2 Resize concatenated with the first and one fused convolution), the CenterPoint-style
  head (shared conv, heatmap head with Sigmoid, regression heads reg 2, height 1, dim 3, rot 2,
  vel 2) and the start of TI's in-graph decode: TopK over each class's flattened heatmap, TopK
  over those, the label (the index divided by K) and the regression values gathered at the
  chosen positions.

Outputs: ``bboxes`` (1 x K x 10, the gathered regression values), ``scores`` (1 x K) and
``labels`` (1 x K, int64), K = 500 (tiny: 64). Opset 16 (TI exports with opset_version=16),
IR version 8. docs/bevdet.md says where TI's description is silent and what tidlx chose.
"""

from __future__ import annotations

import os
from typing import Dict, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .bev_pool import FULL_GRID, TINY_GRID, cameras, frustum_cell_index
from .bevdet import (DEPTH_BINS, FULL_IMAGE, TINY_CHANNEL_DIVISOR, TINY_IMAGE, BevdetImgStageConfig, _check_arguments,
                     _custom_fpn, _lss_depth_net, _resnet)
from ._onnx_graph import OnnxGraphWriter, float_tensor_info
from .errors import ModelArgumentError, save_model

MODEL_NAME = "bevdet_ti_export"
OPSET = 16
IR_VERSION = 8
NUM_CLASSES = 10  # nuScenes
#: CenterPoint's regression heads (BEVDetHead common_heads) and their channels.
REGRESSION_HEADS = (("reg", 2), ("height", 1), ("dim", 3), ("rot", 2), ("vel", 2))
BOX_CODE = sum(n for _, n in REGRESSION_HEADS)
TOPK = 500  # CenterPointBBoxCoder max_num
TINY_TOPK = 64
HEAD_CHANNELS = 64
INPUT_NAMES = ("inputs", "bev_feat", "lidar_coor_1d")
OUTPUT_NAMES = ("bboxes", "scores", "labels")


def bevdet_ti_export(backbone: str = "resnet50", batch: int = 6, height: Optional[int] = None,
                     width: Optional[int] = None, seed: int = 0, path: str | os.PathLike | None = None,
                     tiny: bool = False) -> onnx.ModelProto:
    """TI's exported BEVDet (the module doc) as an ONNX model; saved to ``path`` when given.

    The arguments are ``bevdet_img_stage``'s: ``batch`` cameras, ``height`` x ``width`` (default
    256 x 704; tiny 64 x 192), ``tiny=True`` divides the channel widths by 8 and uses a 32 x 32 grid
    of 3.2 m cells (full: TI's 128 x 128 of 0.8 m); the graph, node names and op types stay. The
    same arguments give the same bytes."""
    if not isinstance(tiny, bool):
        raise ModelArgumentError(MODEL_NAME, "tiny", f"must be True or False, got {tiny!r}")
    default_height, default_width = TINY_IMAGE if tiny else FULL_IMAGE
    height = default_height if height is None else height
    width = default_width if width is None else width
    try:
        _check_arguments(backbone, batch, height, width, seed, path)
    except ModelArgumentError as error:  # the arguments are this builder's: name it
        raise ModelArgumentError(MODEL_NAME, error.argument, str(error).split(f"'{error.argument}' ", 1)[1]) from None
    divisor = TINY_CHANNEL_DIVISOR if tiny else 1
    config = BevdetImgStageConfig(backbone=backbone, batch=batch, height=height, width=width,
                                  base_width=64 // divisor, neck_channels=256 // divisor,
                                  context_channels=64 // divisor)
    model = _build(config, seed, tiny)
    if path is not None:
        save_model(model, path, MODEL_NAME)
    return model


def bevdet_ti_grid(tiny: bool) -> tuple:
    """(X cells, Y cells, metres per cell) of the export's BEV grid."""
    return TINY_GRID if tiny else FULL_GRID


def bevdet_ti_lidar_coor_1d(batch: int, height: int, width: int, seed: int = 0, tiny: bool = False) -> np.ndarray:
    """The host's ``lidar_coor_1d`` for the export's cameras (``bev_pool.cameras``, seeded as the
    model): int64 (N * D * h * w,), the flat cell ``y * X + x`` of each frustum point in N, D, h, w
    order, ``X * Y`` (the dump cell) for a point outside the grid."""
    grid = bevdet_ti_grid(tiny)
    index = frustum_cell_index(cameras(batch, height, width, seed), height, width, DEPTH_BINS, grid)
    cells = grid[0] * grid[1]
    return np.where(index >= 0, index, cells).astype(np.int64).reshape(-1)


def bevdet_ti_inputs(model: onnx.ModelProto, seed: int = 0, images_seed: int = 0) -> Dict[str, np.ndarray]:
    """The three inputs of an exported model: seeded standard-normal images, the zero ``bev_feat``
    and ``lidar_coor_1d`` of the model's cameras (``seed``: the model's seed)."""
    shapes = {i.name: tuple(d.dim_value for d in i.type.tensor_type.shape.dim) for i in model.graph.input}
    batch, _, height, width = shapes["inputs"]
    cells = shapes["bev_feat"][0] - 1
    tiny = cells == TINY_GRID[0] * TINY_GRID[1]
    rng = np.random.default_rng(images_seed)
    return {"inputs": rng.standard_normal(shapes["inputs"], dtype=np.float32),
            "bev_feat": np.zeros(shapes["bev_feat"], np.float32),
            "lidar_coor_1d": bevdet_ti_lidar_coor_1d(batch, height, width, seed, tiny)}


# -- graph ------------------------------------------------------------------------------------------------
def _build(config: BevdetImgStageConfig, seed: int, tiny: bool) -> onnx.ModelProto:
    writer = OnnxGraphWriter(seed)
    cols, rows, cell = bevdet_ti_grid(tiny)
    cells = cols * rows
    h, w = config.height // 16, config.width // 16
    points = config.batch * config.depth_bins * h * w
    channels = config.context_channels
    stride16, stride32 = _resnet(writer, config, "inputs")
    neck = _custom_fpn(writer, config, stride16, stride32)
    depth_and_context = _lss_depth_net(writer, config, neck)
    feat = _frustum_features(writer, config, depth_and_context, points)
    bev = _voxel_pooling(writer, feat, cells, rows, cols, channels)
    top_k = TINY_TOPK if tiny else TOPK
    bev = _bev_encoder(writer, bev, channels)
    bboxes, scores, labels = _head_and_decode(writer, bev, 2 * channels, HEAD_CHANNELS // (8 if tiny else 1),
                                              rows * cols, top_k)
    inputs = [float_tensor_info("inputs", [config.batch, 3, config.height, config.width]),
              float_tensor_info("bev_feat", [cells + 1, channels]),
              helper.make_tensor_value_info("lidar_coor_1d", TensorProto.INT64, [points])]
    outputs = [float_tensor_info(bboxes, [1, top_k, BOX_CODE]),
               float_tensor_info(scores, [1, top_k]),
               helper.make_tensor_value_info(labels, TensorProto.INT64, [1, top_k])]
    doc = (f"TI's BEVDet export: {config.backbone}{' (tiny)' if tiny else ''}, {config.batch} cameras, "
           f"{config.height}x{config.width}, plain LSS depth net (D={config.depth_bins}, C={channels}), voxel "
           f"pooling as ScatterND(reduction='add') into bev_feat ({cells} + 1 cells, {cols} x {rows} of {cell} m), "
           f"BEV encoder, CenterPoint head, TopK decode (K={top_k}); seed {seed}")
    return writer.make_model(MODEL_NAME, inputs, outputs, OPSET, IR_VERSION, doc)


def _constant(writer: OnnxGraphWriter, scope: str, values) -> str:
    return writer.constant_int64(scope, list(values))


def _frustum_features(writer: OnnxGraphWriter, config: BevdetImgStageConfig, x: str, points: int) -> str:
    """depth softmax x context, (N * D * h * w) x C in N, D, h, w order (BEVDet_export_model)."""
    scope = "/img_view_transformer"
    depth_bins, context = config.depth_bins, config.context_channels

    def channel_slice(start: int, end: int) -> str:
        return writer.add_node("Slice", scope, [x, _constant(writer, scope, [start]), _constant(writer, scope, [end]),
                                                _constant(writer, scope, [1]), _constant(writer, scope, [1])])

    depth = writer.add_node("Softmax", scope, [channel_slice(0, depth_bins)], axis=1)
    tran_feat = channel_slice(depth_bins, depth_bins + context)
    depth_row = writer.add_node("Unsqueeze", scope, [depth, _constant(writer, scope, [1])])
    context_column = writer.add_node("Unsqueeze", scope, [tran_feat, _constant(writer, scope, [2])])
    feat = writer.add_node("Mul", scope, [depth_row, context_column])  # N x C x D x h x w
    feat = writer.add_node("Transpose", scope, [feat], perm=[0, 2, 3, 4, 1])  # N x D x h x w x C
    return writer.add_node("Reshape", scope, [feat, _constant(writer, scope, [points, context])], allowzero=0)


def _voxel_pooling(writer: OnnxGraphWriter, feat: str, cells: int, rows: int, cols: int, channels: int) -> str:
    """bev_feat.index_put_((lidar_coor_1d,), feat, accumulate) as ScatterND(add), then the BEV map."""
    scope = "/img_view_transformer"
    index = writer.add_node("Unsqueeze", scope, ["lidar_coor_1d", _constant(writer, scope, [-1])])
    bev = writer.add_node("ScatterND", scope, ["bev_feat", index, feat], reduction="add")
    bev = writer.add_node("Slice", scope, [bev, _constant(writer, scope, [0]), _constant(writer, scope, [cells]),
                                           _constant(writer, scope, [0]), _constant(writer, scope, [1])])
    bev = writer.add_node("Reshape", scope, [bev, _constant(writer, scope, [1, 1, rows, cols, channels])],
                          allowzero=0)
    bev = writer.add_node("Transpose", scope, [bev], perm=[0, 4, 1, 2, 3])  # 1 x C x Z x Y x X
    return writer.add_node("Squeeze", scope, [bev, _constant(writer, scope, [2])])  # Z collapse: 1 x C x Y x X


def _conv_bn_relu(writer: OnnxGraphWriter, scope: str, prefix: str, x: str, cin: int, cout: int,
                  stride: int = 1) -> str:
    y = writer.conv(f"{scope}/conv", f"{prefix}.conv", x, cin, cout, kernel=3, stride=stride)
    y = writer.batch_norm(f"{scope}/bn", f"{prefix}.bn", y, cout)
    return writer.relu(f"{scope}/relu", y)


def _bev_encoder(writer: OnnxGraphWriter, x: str, channels: int) -> str:
    """A small BEVResNet + FPN_LSS: a full-resolution and a stride-2 stage, the second resized x2
    (nearest) and concatenated with the first, one fused convolution to 2C channels."""
    backbone, neck = "/img_bev_encoder_backbone", "/img_bev_encoder_neck"
    wide = 2 * channels
    shallow = _conv_bn_relu(writer, f"{backbone}/layers.0", "img_bev_encoder_backbone.layers.0", x, channels, channels)
    deep = _conv_bn_relu(writer, f"{backbone}/layers.1", "img_bev_encoder_backbone.layers.1", shallow, channels, wide,
                         stride=2)
    scales = writer.add_node("Constant", f"{neck}/up", [],
                             value=numpy_helper.from_array(np.array([1.0, 1.0, 2.0, 2.0], np.float32), ""))
    up = writer.add_node("Resize", f"{neck}/up", [deep, "", scales], coordinate_transformation_mode="asymmetric",
                         cubic_coeff_a=-0.75, mode="nearest", nearest_mode="floor")
    merged = writer.add_node("Concat", neck, [shallow, up], axis=1)
    return _conv_bn_relu(writer, f"{neck}/conv", "img_bev_encoder_neck.conv", merged, channels + wide, wide)


def _head_and_decode(writer: OnnxGraphWriter, x: str, channels: int, head: int, plane: int, top_k: int):
    """CenterHead (one task of 10 classes) and the in-graph part of CenterPointBBoxCoder.decode."""
    scope, prefix = "/pts_bbox_head", "pts_bbox_head"
    shared = _conv_bn_relu(writer, f"{scope}/shared_conv", f"{prefix}.shared_conv", x, channels, head)

    def task_head(name: str, out: int) -> str:
        y = _conv_bn_relu(writer, f"{scope}/task_heads.0/{name}/{name}.0", f"{prefix}.task_heads.0.{name}.0",
                          shared, head, head)
        return writer.conv(f"{scope}/task_heads.0/{name}/{name}.1", f"{prefix}.task_heads.0.{name}.1", y, head, out,
                           kernel=3, bias=True, gain=1.0)

    heat = writer.add_node("Sigmoid", scope, [task_head("heatmap", NUM_CLASSES)])
    regression = [task_head(name, out) for name, out in REGRESSION_HEADS]
    boxes = writer.add_node("Concat", scope, regression, axis=1)  # 1 x 10 x Y x X
    decode = f"{scope}/bbox_coder"
    per_class = writer.add_node("Reshape", decode, [heat, _constant(writer, decode, [1, NUM_CLASSES, plane])],
                                allowzero=0)
    k = _constant(writer, decode, [top_k])
    class_scores = writer.add_node("TopK", decode, [per_class, k], axis=-1, largest=1, sorted=1)
    class_positions = f"{writer.nodes[-1].name}_output_1"
    writer.nodes[-1].output.append(class_positions)
    flat_scores = writer.add_node("Reshape", decode, [class_scores, _constant(writer, decode, [1, NUM_CLASSES * top_k])],
                                  allowzero=0)
    scores = writer.add_node("TopK", decode, [flat_scores, _constant(writer, decode, [top_k])], axis=-1, largest=1,
                             sorted=1, output_name="scores")
    chosen = f"{writer.nodes[-1].name}_output_1"
    writer.nodes[-1].output.append(chosen)
    labels = writer.add_node("Div", decode, [chosen, _constant(writer, decode, [top_k])], output_name="labels")
    flat_positions = writer.add_node("Reshape", decode, [class_positions, _constant(writer, decode, [NUM_CLASSES * top_k])],
                                     allowzero=0)
    positions = writer.add_node("Gather", decode, [flat_positions, chosen], axis=0)  # 1 x K cell positions
    box_rows = writer.add_node("Reshape", decode, [boxes, _constant(writer, decode, [1, BOX_CODE, plane])],
                               allowzero=0)
    gathered = writer.add_node("Gather", decode, [box_rows, positions], axis=2)  # 1 x BOX_CODE x 1 x K
    gathered = writer.add_node("Reshape", decode, [gathered, _constant(writer, decode, [1, BOX_CODE, top_k])], allowzero=0)
    bboxes = writer.add_node("Transpose", decode, [gathered], perm=[0, 2, 1], output_name="bboxes")
    return bboxes, scores, labels


__all__ = ["bevdet_ti_export", "bevdet_ti_inputs", "bevdet_ti_lidar_coor_1d", "bevdet_ti_grid", "INPUT_NAMES",
           "OUTPUT_NAMES"]
