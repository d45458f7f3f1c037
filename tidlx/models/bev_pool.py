"""BEVDet's voxel pooling as a custom op (``bevdet.bev_pool``) and the image stage that ends in it.

    tidlx.models.register_bev_pool()                       # the op, once per process (idempotent)
    tidlx.models.bevdet_with_bev_pool("resnet18", batch=6, tiny=True, path="bev.onnx")
    mod = tidlx.load("bev.onnx")                           # the BevPool node of domain tidlx.bevdet
    partitioned, report = tidlx.partition(mod, {"max_batch_size": 6})   # bev_pool: host, custom op

**The op.** ``bev_pool(volume, index)``, attribute ``grid_size = (Y, X)``:

* ``volume``: float32 (B, P1, ..., Pk, C): C context features per frustum point; BEVDet's image
  stage gives (1, N, D, h, w, C), the depth x context outer product of N cameras, D depth bins,
  an h x w feature map (``tidlx.models.bevdet``);
* ``index``: int32 (P1, ..., Pk): the flat BEV cell ``y * X + x`` of each frustum point, or -1 for
  a point outside the grid (dropped). It depends only on the camera geometry, so it is computed
  when the model is built and stored as an initializer (BEVPoolv2 precomputes its ranks the same
  way);
* output float32 (B, C, Y, X): each cell holds the sum of the features of its points. BEVDet's
  (B, C, Z, Y, X) grid with Z = 1, as its BEV encoder reads it after collapsing Z.

Sums run in point order (row-major over P1..Pk) in float32, in the reference kernel (numpy's
``add.at``, unbuffered and in order) and in the TVM lowering (a TE extern: a serial loop over the
points adding each kept point's C features into its cell; docs/custom_ops.md), so both give the
same bits. An index
below -1 or from Y * X on is an error in the emulator (it names the point); the TVM code never
writes out of the grid (it drops such a point), so check models in the emulator.

**The geometry** (``frustum_cell_index``), after BEVDet's LSSViewTransformer without image
augmentation: frustum points at pixel x = linspace(0, W - 1, w), y = linspace(0, H - 1, h) of the
H x W input and depths 1, 2, ..., D (m; D = 59 gives BEVDet's 1..60 m grid_config); pinhole
cameras with focal length 0.8 W px and the principal point at the image centre (a 64 degree
horizontal field of view), looking level and outwards from 1 m around the ego at yaws 360 k / N
degrees, 1.6 m high; the seed jitters each camera's yaw (+-2 degrees), pitch (+-1 degree) and
height (+-5 cm). A point's ego coordinates ``R K^-1 (u d, v d, d) + t`` fall into cell
``floor((p - lower) / cell)`` of the grid centred on the ego: X x Y cells of ``cell`` metres, z
from -5 to 3 m (one voxel, BEVDet's [-5, 3, 8]). The full model's default is BEVDet's 128 x 128
cells of 0.8 m (-51.2..51.2 m); the tiny model's 32 x 32 cells of 3.2 m (the same extent).
BEVDet truncates toward zero (``.long()``); floor keeps a point just below the lower bound out of
the first cell.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Optional, Tuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..ir.errors import TidlxError
from ..ir.types import TensorType
from .bevdet import DEPTH_BINS, bevdet_img_stage
from .errors import ModelArgumentError, save_model

OP_NAME = "bevdet.bev_pool"
ONNX_DOMAIN = "tidlx.bevdet"
ONNX_OP_TYPE = "BevPool"
MODEL_NAME = "bevdet_with_bev_pool"
NODE_NAME = "/img_view_transformer/BevPool"
INDEX_NAME = "img_view_transformer.bev_pool_index"
OUTPUT_NAME = "bev"

FEATURE_STRIDE = 16  # the depth net's feature map is the input / 16
FOCAL_PER_WIDTH = 0.8
CAMERA_RADIUS = 1.0  # metres from the ego origin
CAMERA_HEIGHT = 1.6
Z_RANGE = (-5.0, 3.0)  # BEVDet's grid_config z: one voxel
FULL_GRID = (128, 128, 0.8)  # X cells, Y cells, metres per cell: BEVDet's [-51.2, 51.2, 0.8]
TINY_GRID = (32, 32, 3.2)
JITTER_YAW_DEG, JITTER_PITCH_DEG, JITTER_HEIGHT_M = 2.0, 1.0, 0.05


class BevPoolError(TidlxError):
    """A bev_pool call with an index outside the grid."""


@dataclasses.dataclass(frozen=True)
class BevPoolAttrs:
    grid_size: Tuple[int, int] = (128, 128)  # (Y, X): the output's last two axes


# -- the op --------------------------------------------------------------------------------------------
def bev_pool_type(arg_types, attrs):
    from ..ir import TidlxTypeError

    volume, index = arg_types
    if not isinstance(volume, TensorType) or volume.dtype != "float32" or len(volume.shape) < 3:
        raise TidlxTypeError(f"{OP_NAME}: volume must be float32 (B, points..., C), got {volume}")
    if not isinstance(index, TensorType) or index.dtype != "int32":
        raise TidlxTypeError(f"{OP_NAME}: index must be int32 (points...), got {index}")
    if tuple(index.shape) != tuple(volume.shape[1:-1]):
        raise TidlxTypeError(f"{OP_NAME}: index shape {list(index.shape)} must be the volume's point axes "
                             f"{list(volume.shape[1:-1])} (volume {list(volume.shape)})")
    grid = attrs.grid_size
    if len(grid) != 2 or not all(isinstance(g, int) and g >= 1 for g in grid):
        raise TidlxTypeError(f"{OP_NAME}: grid_size must be two cell counts (Y, X) >= 1, got {grid}")
    return TensorType((volume.shape[0], volume.shape[-1], grid[0], grid[1]), "float32")


def bev_pool_reference(args, attrs, out_type):
    volume, index = args
    batch, channels = volume.shape[0], volume.shape[-1]
    rows, cols = attrs.grid_size
    cells = rows * cols
    flat = np.asarray(index).reshape(-1)
    bad = np.flatnonzero((flat < -1) | (flat >= cells))
    if bad.size:
        point = np.unravel_index(int(bad[0]), index.shape)
        raise BevPoolError(f"{OP_NAME}: index{list(int(p) for p in point)} is {int(flat[bad[0]])}; cell indices are "
                           f"-1 (dropped) or 0..{cells - 1} for grid_size {rows} x {cols} ({bad.size} point(s) outside)")
    kept = flat >= 0
    kept_cells = flat[kept]
    points = np.asarray(volume, np.float32).reshape(batch, -1, channels)
    grid = np.zeros((batch, cells, channels), np.float32)
    for b in range(batch):
        np.add.at(grid[b], kept_cells, points[b][kept])  # unbuffered, in point order: deterministic sums
    return np.ascontiguousarray(grid.transpose(0, 2, 1).reshape(batch, channels, rows, cols))


def bev_pool_macs(call) -> int:
    """One add per kept point and channel (all points when the index is not a constant)."""
    from ..ir.expr import Constant

    volume_type = call.args[0].checked_type
    batch, channels = int(volume_type.shape[0]), int(volume_type.shape[-1])
    index = call.args[1]
    if isinstance(index, Constant):
        points = int(np.count_nonzero(index.data >= 0))
    else:
        points = int(np.prod(index.checked_type.shape))
    return batch * points * channels


def bev_pool_te(volume, index, *, attrs, out_type):
    """TE: zero a (B, cells, C) grid, add each point's C features into its cell in point order, then
    transpose to (B, C, Y, X). Summing cell-major keeps each point's C adds in one cache line run
    (channel-major would stride by Y * X floats per add)."""
    from tvm import te, tirx
    from tvm.script.ir_builder import IRBuilder
    from tvm.script.ir_builder import tirx as T

    batch, channels = int(volume.shape[0]), int(volume.shape[-1])
    points = int(np.prod([int(d) for d in index.shape]))
    rows, cols = attrs.grid_size
    cells = rows * cols

    def body(volume_ptr, index_ptr, grid_ptr):
        vol, idx, grid = T.buffer_proxy(volume_ptr), T.buffer_proxy(index_ptr), T.buffer_proxy(grid_ptr)
        with IRBuilder() as builder:
            with T.serial(0, batch) as b:
                with T.serial(0, cells * channels) as i:
                    grid[b * cells * channels + i] = tirx.const(0.0, "float32")
                with T.serial(0, points) as p:
                    cell = idx[p]
                    # -1 is "no cell"; anything else outside the grid is dropped too, never written
                    with T.If(tirx.all(cell >= 0, cell < cells)):
                        with T.Then():
                            with T.serial(0, channels) as c:
                                grid[(b * cells + cell) * channels + c] += vol[(b * points + p) * channels + c]
        return builder.get()

    grid = te.extern([(batch, cells, channels)], [volume, index], lambda ins, outs: body(ins[0], ins[1], outs[0]),
                     dtype="float32", name="bev_pool_cells")
    return te.compute((batch, channels, rows, cols), lambda b, c, y, x: grid[b, y * cols + x, c], name="bev_pool")


def bev_pool_attrs_from_node(attributes):
    extra = sorted(set(attributes) - {"grid_size"})
    if extra:
        raise BevPoolError(f"{ONNX_DOMAIN}/{ONNX_OP_TYPE}: unknown attribute(s) {', '.join(extra)} (it takes "
                           f"grid_size = [Y, X])")
    if "grid_size" not in attributes:
        raise BevPoolError(f"{ONNX_DOMAIN}/{ONNX_OP_TYPE}: the grid_size attribute [Y, X] is missing")
    return {"grid_size": tuple(int(g) for g in attributes["grid_size"])}


def register_bev_pool():
    """Registers ``bevdet.bev_pool`` with every facet (``tidlx.register_op``); a second call is a
    no-op. Returns the Op."""
    from ..custom_op import register_op
    from ..ir.op import get_op, has_op

    if has_op(OP_NAME):
        return get_op(OP_NAME)
    return register_op(OP_NAME, bev_pool_type, bev_pool_reference, num_inputs=2, attrs=BevPoolAttrs,
                       arg_names=("volume", "index"), macs=bev_pool_macs, onnx=(ONNX_DOMAIN, ONNX_OP_TYPE),
                       onnx_attrs=bev_pool_attrs_from_node, te_compute=bev_pool_te)


def unregister_bev_pool() -> None:
    from ..custom_op import unregister_op

    unregister_op(OP_NAME)


# -- the geometry --------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Camera:
    intrinsics: np.ndarray  # 3 x 3
    rotation: np.ndarray  # camera -> ego, 3 x 3 (camera axes: x right, y down, z forward)
    translation: np.ndarray  # camera centre in the ego frame, metres


def cameras(count: int, height: int, width: int, seed: int) -> list:
    """``count`` level pinhole cameras looking outwards around the ego (the module doc)."""
    rng = np.random.default_rng(seed)
    jitter = rng.uniform(-1.0, 1.0, size=(count, 3))
    focal = FOCAL_PER_WIDTH * width
    intrinsics = np.array([[focal, 0.0, width / 2.0], [0.0, focal, height / 2.0], [0.0, 0.0, 1.0]])
    result = []
    for k in range(count):
        yaw = math.radians(360.0 * k / count + JITTER_YAW_DEG * jitter[k, 0])
        pitch = math.radians(JITTER_PITCH_DEG * jitter[k, 1])  # positive tilts the camera down
        forward = np.array([math.cos(yaw) * math.cos(pitch), math.sin(yaw) * math.cos(pitch), -math.sin(pitch)])
        right = np.array([math.sin(yaw), -math.cos(yaw), 0.0])
        down = np.cross(forward, right)
        rotation = np.stack([right, down, forward], axis=1)
        translation = np.array([CAMERA_RADIUS * math.cos(yaw), CAMERA_RADIUS * math.sin(yaw),
                                CAMERA_HEIGHT + JITTER_HEIGHT_M * jitter[k, 2]])
        result.append(Camera(intrinsics, rotation, translation))
    return result


def frustum_cell_index(camera_list, height: int, width: int, depth_bins: int, grid: Tuple[int, int, float]
                       ) -> np.ndarray:
    """int32 (N, D, h, w): the flat cell ``y * X + x`` of every frustum point, -1 outside the grid."""
    cols, rows, cell = grid
    h, w = height // FEATURE_STRIDE, width // FEATURE_STRIDE
    depth = np.arange(1, depth_bins + 1, dtype=np.float64)
    v, u = np.linspace(0, height - 1, h), np.linspace(0, width - 1, w)
    d, vv, uu = np.meshgrid(depth, v, u, indexing="ij")  # D x h x w
    pixels = np.stack([uu * d, vv * d, d], axis=-1)  # homogeneous image points scaled by depth
    lower = np.array([-cols * cell / 2.0, -rows * cell / 2.0, Z_RANGE[0]])
    size = np.array([cell, cell, Z_RANGE[1] - Z_RANGE[0]])
    index = np.empty((len(camera_list), depth_bins, h, w), np.int32)
    for n, cam in enumerate(camera_list):
        combine = cam.rotation @ np.linalg.inv(cam.intrinsics)
        ego = pixels @ combine.T + cam.translation
        voxel = np.floor((ego - lower) / size).astype(np.int64)
        inside = ((voxel[..., 0] >= 0) & (voxel[..., 0] < cols) & (voxel[..., 1] >= 0) & (voxel[..., 1] < rows)
                  & (voxel[..., 2] == 0))
        index[n] = np.where(inside, voxel[..., 1] * cols + voxel[..., 0], -1)
    return index


def bev_pool_numpy(volume: np.ndarray, index: np.ndarray, grid_size: Tuple[int, int]) -> np.ndarray:
    """The voxel pooling written out plainly (loops over points), for checking the op: (B, C, Y, X)."""
    batch, channels = volume.shape[0], volume.shape[-1]
    rows, cols = grid_size
    points = volume.reshape(batch, -1, channels).astype(np.float64)
    out = np.zeros((batch, channels, rows * cols), np.float64)
    for p, cell in enumerate(index.reshape(-1)):
        if cell >= 0:
            out[:, :, cell] += points[:, p, :]
    return out.reshape(batch, channels, rows, cols)


# -- the model -----------------------------------------------------------------------------------------
def bevdet_with_bev_pool(backbone: str = "resnet50", batch: int = 6, height: Optional[int] = None,
                         width: Optional[int] = None, seed: int = 0, path=None, tiny: bool = False,
                         grid: Optional[Tuple[int, int, float]] = None) -> onnx.ModelProto:
    """BEVDet's image stage (``bevdet_img_stage``, LSS depth net) ending in BEVDet's voxel pooling:
    one ``tidlx.bevdet/BevPool`` node takes the volume and the frustum points' cell indices (an int32
    initializer from ``batch`` cameras, see the module doc) and gives ``bev`` (1 x C x Y x X).

    Outputs ``depth`` (N x D x h x w) and ``bev``. ``grid = (X cells, Y cells, metres per cell)``
    (default 128 x 128 x 0.8, tiny 32 x 32 x 3.2). ``seed`` draws the weights and the camera
    jitter; the same arguments give the same bytes. Import with ``register_bev_pool()`` done first.
    """
    grid = _check_grid(grid, tiny)
    try:
        stage = bevdet_img_stage(backbone=backbone, batch=batch, height=height, width=width, seed=seed, tiny=tiny)
    except ModelArgumentError as error:  # the arguments are this builder's: name it
        raise ModelArgumentError(MODEL_NAME, error.argument, str(error).split(f"'{error.argument}' ", 1)[1]) from None
    graph = stage.graph
    volume = next(o for o in graph.output if o.name == "volume")
    dims = [d.dim_value for d in volume.type.tensor_type.shape.dim]  # 1, N, D, h, w, C
    channels = dims[-1]
    image = next(i for i in graph.input if i.name == "img")
    in_height, in_width = (d.dim_value for d in image.type.tensor_type.shape.dim[2:])
    index = frustum_cell_index(cameras(batch, in_height, in_width, seed), in_height, in_width, DEPTH_BINS, grid)
    cols, rows, cell = grid
    graph.initializer.append(numpy_helper.from_array(index, INDEX_NAME))
    graph.node.append(helper.make_node(ONNX_OP_TYPE, ["volume", INDEX_NAME], [OUTPUT_NAME], name=NODE_NAME,
                                       domain=ONNX_DOMAIN, grid_size=[rows, cols]))
    kept = [o for o in graph.output if o.name != "volume"]
    del graph.output[:]
    graph.output.extend(kept + [helper.make_tensor_value_info(OUTPUT_NAME, onnx.TensorProto.FLOAT,
                                                              [1, channels, rows, cols])])
    stage.opset_import.append(helper.make_opsetid(ONNX_DOMAIN, 1))
    graph.name = MODEL_NAME
    stage.doc_string = (stage.doc_string.split("; outputs")[0]
                        + f"; the volume 1 x N x D x h x w x C (C={channels}) pooled by {ONNX_DOMAIN}/{ONNX_OP_TYPE} "
                        f"into a {cols} x {rows} BEV grid of {cell} m cells ({int(np.count_nonzero(index >= 0))} of "
                        f"{index.size} frustum points inside); outputs depth N x D x h x w and bev 1 x C x Y x X")
    if path is not None:
        if not isinstance(path, (str, os.PathLike)):
            raise ModelArgumentError(MODEL_NAME, "path", f"must be a file path or None, got {path!r}")
        save_model(stage, path, MODEL_NAME)
    return stage


def _check_grid(grid, tiny: bool) -> Tuple[int, int, float]:
    if grid is None:
        return TINY_GRID if tiny else FULL_GRID
    if not (isinstance(grid, (tuple, list)) and len(grid) == 3 and all(isinstance(g, int) and not isinstance(g, bool)
                                                                      and g >= 1 for g in grid[:2])
            and isinstance(grid[2], (int, float)) and not isinstance(grid[2], bool) and grid[2] > 0):
        raise ModelArgumentError(MODEL_NAME, "grid", f"must be (X cells, Y cells, metres per cell), cells >= 1 and a "
                                 f"positive size, got {grid!r}")
    return int(grid[0]), int(grid[1]), float(grid[2])


__all__ = ["register_bev_pool", "unregister_bev_pool", "bevdet_with_bev_pool", "bev_pool_numpy",
           "frustum_cell_index", "cameras", "BevPoolAttrs", "BevPoolError", "OP_NAME", "ONNX_DOMAIN",
           "ONNX_OP_TYPE"]
