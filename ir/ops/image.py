"""Image ops: image.resize2d."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import TidlxTypeError
from ..op import define_op
from ..types import TensorType
from ._rel import check_choice, check_dtype_name, int_tuple, pair, positive, spatial_layout, tensor_arg

RESIZE_METHODS = ("nearest_neighbor", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn",
                    "tf_crop_and_resize")
ROUNDING_METHODS = ("", "round", "floor", "ceil", "round_prefer_floor", "round_prefer_ceil")


@dataclass(frozen=True)
class Resize2DAttrs:
    size: tuple = ()
    roi: tuple = (0.0, 0.0, 0.0, 0.0)
    layout: str = "NCHW"
    method: str = "linear"
    coordinate_transformation_mode: str = "half_pixel"
    rounding_method: str = ""
    cubic_alpha: float = -0.5
    cubic_exclude: int = 0
    extrapolation_value: float = 0.0
    out_dtype: str = ""

    def __post_init__(self):
        if isinstance(self.size, int) and not isinstance(self.size, bool):
            object.__setattr__(self, "size", (self.size,))
        if isinstance(self.roi, (tuple, list)):
            # Relay prints roi as floats; integers written by hand mean the same.
            object.__setattr__(self, "roi", tuple(float(v) for v in self.roi))


def resize2d_rel(arg_types, attrs):
    data = tensor_arg(arg_types, 0, "data")
    layout = spatial_layout(attrs.layout)
    if data.ndim != layout.ndim:
        raise TidlxTypeError(f"data has rank {data.ndim} but layout '{attrs.layout}' has {layout.ndim} axes")
    check_choice(attrs.method, RESIZE_METHODS, "method")
    check_choice(attrs.coordinate_transformation_mode, COORDINATE_MODES, "coordinate_transformation_mode")
    check_choice(attrs.rounding_method, ROUNDING_METHODS, "rounding_method")
    if len(attrs.roi) != 4:
        raise TidlxTypeError(f"roi must have 4 values, got {list(attrs.roi)}")
    sizes = int_tuple(attrs.size, "size")
    if len(sizes) != 2:
        raise TidlxTypeError(f"size must be [height, width], got {list(sizes)}")
    oh, ow = (positive(s, "size") for s in pair(sizes, "size"))
    if attrs.out_dtype:
        dtype = check_dtype_name(attrs.out_dtype, "out_dtype")
    else:
        dtype = data.dtype
    shape = list(data.shape)
    shape[layout.index("H")], shape[layout.index("W")] = oh, ow
    return TensorType(tuple(shape), dtype)


define_op("image.resize2d", num_inputs=1, attrs=Resize2DAttrs, type_rel=resize2d_rel, arg_names=("data",),
            pattern="injective")
