"""Resize and Upsample -> image.resize2d (4-D NCHW data resized over H and W).

image.resize2d maps output to input coordinates with the ratio of the sizes, as TVM's does;
ONNX uses the given scale. They agree whenever ``input size * scale`` is a whole number.

Sizes and a changed batch: PyTorch exports ``F.interpolate(x, size=...)`` as a Resize whose
``sizes`` is a constant holding the whole output shape, N and C included, as traced: the
exported batch is baked in. When ``batch=`` changes the model's batch (``ctx.rebatch``) and a
4-D Resize's sizes give N equal to the exported batch while the data's N is the new one, and C
equal to the data's C, the Resize is a spatial resize of every image: its N follows the new
batch (a ``TidlxWarning`` names the node and both shapes). Any other N or C in sizes that
differs from the data's is resizing the batch or channel axis, which is not supported.
"""

from __future__ import annotations

import math
import warnings
from typing import List, Optional

import numpy as np

from ....ir.errors import TidlxWarning
from ..context import NodeContext
from . import converter
from .tensor import _axes

METHODS = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}
COORDINATE_MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn",
                    "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _resize2d(ctx: NodeContext, x, out_shape: List[int], method: str, coordinate_mode: str,
              rounding: str = "", roi=(0.0, 0.0, 0.0, 0.0), cubic_alpha: float = -0.75,
              cubic_exclude: int = 0, extrapolation_value: float = 0.0):
    in_shape = ctx.shape(x)
    if len(in_shape) != 4:
        raise ctx.unsupported(f"resizing {len(in_shape)}-D data (shape {tuple(in_shape)}) is not supported; "
                              f"only 4-D NCHW")
    if tuple(out_shape[:2]) != tuple(in_shape[:2]):
        raise ctx.unsupported(f"resizing the batch or channel axis ({tuple(in_shape)} -> {tuple(out_shape)}) "
                              f"is not supported; only H and W")
    if any(d <= 0 for d in out_shape):
        raise ctx.error(f"the output shape {tuple(out_shape)} is empty")
    return ctx.call("image.resize2d", x, size=(int(out_shape[2]), int(out_shape[3])), roi=tuple(roi),
                    layout="NCHW", method=method, coordinate_transformation_mode=coordinate_mode,
                    rounding_method=rounding, cubic_alpha=float(cubic_alpha), cubic_exclude=int(cubic_exclude),
                    extrapolation_value=float(extrapolation_value))


def _follow_batch(ctx: NodeContext, in_shape: List[int], out_shape: List[int]) -> None:
    """The module docstring's rule: sizes carrying the exported batch follow a ``batch=`` override."""
    rebatch = ctx.rebatch
    if rebatch is None or len(in_shape) != 4 or out_shape[0] == in_shape[0]:
        return
    if out_shape[0] not in rebatch.exported or in_shape[0] != rebatch.batch or out_shape[1] != in_shape[1]:
        return  # not the exported batch: left for _resize2d to refuse
    sizes = list(out_shape)
    out_shape[0] = in_shape[0]
    warnings.warn(f"{ctx.where}: its sizes {sizes} carry the exported batch {sizes[0]}; with batch="
                  f"{rebatch.batch} it resizes each image over H and W: {tuple(in_shape)} -> {tuple(out_shape)}",
                  TidlxWarning, stacklevel=2)


def _float_input(ctx: NodeContext, i: int, what: str) -> Optional[np.ndarray]:
    if not ctx.has_input(i):
        return None
    values = np.asarray(ctx.const(i, what), dtype=np.float64).reshape(-1)
    return values if values.size else None


@converter("Resize", produces=("image.resize2d",))
def convert_resize(ctx: NodeContext):
    x = ctx.input(0, "X")
    in_shape = list(ctx.shape(x))
    ndim = len(in_shape)
    mode = ctx.attr_choice("mode", "nearest", tuple(METHODS))
    if ctx.opset < 11:
        coordinate_mode, roi_values, sizes = "asymmetric", None, None
        scales = _float_input(ctx, 1, "scales")
    else:
        coordinate_mode = ctx.attr_choice("coordinate_transformation_mode", "half_pixel", COORDINATE_MODES)
        roi_values = _float_input(ctx, 1, "roi")
        scales = _float_input(ctx, 2, "scales")
        sizes = _float_input(ctx, 3, "sizes")
    axes = ctx.attr_ints("axes")
    axes = list(range(ndim)) if axes is None else _axes(ctx, axes, ndim)
    policy = ctx.attr_choice("keep_aspect_ratio_policy", "stretch", ("stretch", "not_larger", "not_smaller"))
    out_shape = list(in_shape)
    if sizes is not None:
        if len(sizes) != len(axes):
            raise ctx.error(f"sizes {sizes.astype(int).tolist()} must have one value per resized axis "
                            f"({len(axes)})")
        if policy == "stretch":
            for a, s in zip(axes, sizes):
                out_shape[a] = int(s)
            _follow_batch(ctx, in_shape, out_shape)
        else:
            ratios = [s / in_shape[a] for a, s in zip(axes, sizes)]
            scale = min(ratios) if policy == "not_larger" else max(ratios)
            for a in axes:
                out_shape[a] = int(math.floor(scale * in_shape[a] + 0.5))
        scale_values = [out_shape[a] / in_shape[a] for a in axes]
    elif scales is not None:
        if len(scales) != len(axes):
            raise ctx.error(f"scales {scales.tolist()} must have one value per resized axis ({len(axes)})")
        if any(s <= 0 for s in scales):
            raise ctx.error(f"scales {scales.tolist()} must be positive")
        for a, s in zip(axes, scales):
            out_shape[a] = int(math.floor(in_shape[a] * s))
        scale_values = list(scales)
    else:
        raise ctx.error("one of scales or sizes must be given")
    if int(ctx.attr("antialias", 0)) and any(s < 1 for s in scale_values):
        raise ctx.unsupported("antialias=1 when downsampling is not supported")
    roi = (0.0, 0.0, 0.0, 0.0)
    if coordinate_mode == "tf_crop_and_resize":
        if roi_values is None or len(roi_values) != 2 * len(axes):
            raise ctx.error("coordinate_transformation_mode 'tf_crop_and_resize' needs an roi with a start and "
                            "an end per resized axis")
        starts, ends = [0.0] * ndim, [1.0] * ndim
        for k, a in enumerate(axes):
            starts[a], ends[a] = float(roi_values[k]), float(roi_values[k + len(axes)])
        if ndim == 4:
            if (starts[0], starts[1], ends[0], ends[1]) != (0.0, 0.0, 1.0, 1.0):
                raise ctx.unsupported("an roi that crops the batch or channel axis is not supported")
            roi = (starts[2], starts[3], ends[2], ends[3])
    rounding = ""
    if mode == "nearest":
        rounding = ctx.attr_choice("nearest_mode", "round_prefer_floor", NEAREST_MODES)
        if ctx.opset < 11:
            rounding = "floor"
    return _resize2d(ctx, x, out_shape, METHODS[mode], coordinate_mode, rounding, roi,
                     cubic_alpha=float(ctx.attr("cubic_coeff_a", -0.75)),
                     cubic_exclude=int(ctx.attr("exclude_outside", 0)),
                     extrapolation_value=float(ctx.attr("extrapolation_value", 0.0)))


@converter("Upsample", produces=("image.resize2d",))
def convert_upsample(ctx: NodeContext):
    x = ctx.input(0, "X")
    in_shape = ctx.shape(x)
    mode = ctx.attr_choice("mode", "nearest", ("nearest", "linear", "bilinear"))
    if ctx.has_input(1):
        scales = np.asarray(ctx.const(1, "scales"), dtype=np.float64).reshape(-1)
    else:
        scales = np.asarray(ctx.attr("scales", []), dtype=np.float64)
    if len(scales) != len(in_shape):
        raise ctx.error(f"scales {scales.tolist()} must have one value per axis ({len(in_shape)})")
    out_shape = [int(math.floor(d * s)) for d, s in zip(in_shape, scales)]
    # Upsample maps coordinates as x / scale (asymmetric); nearest takes the floor.
    if mode == "nearest":
        return _resize2d(ctx, x, out_shape, "nearest_neighbor", "asymmetric", "floor")
    return _resize2d(ctx, x, out_shape, "linear", "asymmetric")
