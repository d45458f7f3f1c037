"""Data movement and reductions: reshape, transpose, squeeze/unsqueeze, flatten, concat, slices,
split, gather, scatter, pad, depth-to-space, resize, reduce max/min, argmax and topk."""

from __future__ import annotations

from ....ir.ops.reduce import reduced_axes
from ....ir.ops.transform import slice_ranges, transpose_axes
import numpy as np

from ._base import axis_name, axis_word, const_value, fmt_shape, is_const, norm_axis, rule, shape, ttype


@rule("reshape", layer="Reshape")
def reshape(call, ctx):
    return None


@rule("squeeze", layer="Squeeze")
def squeeze(call, ctx):
    return None


@rule("expand_dims", layer="Reshape")
def expand_dims(call, ctx):
    return None


@rule("transpose", layer="Transpose")
def transpose(call, ctx):
    ndim = len(shape(call.args[0]))
    perm = transpose_axes(ndim, call.attrs.axes)
    if ndim >= 2 and perm[0] != 0:
        return f"axes={list(perm)} moves the batch axis, which TIDL's Transpose does not support"
    return None


@rule("nn.batch_flatten", layer="Flatten")
def batch_flatten(call, ctx):
    n = shape(call.args[0])[0]
    if n != 1:
        return f"batch {n} is not supported (Flatten needs N=1)"
    return None


@rule("concatenate", layer="Concat")
def concatenate(call, ctx):
    ndim = ttype(call).ndim
    axis = norm_axis(call.attrs.axis, ndim)
    if ndim >= 2 and axis == 0:
        return "concatenating along the batch axis is not supported (Concat: axis -3, -2 or -1)"
    if axis - ndim not in (-3, -2, -1):
        return f"concatenating along {axis_word(axis, ndim)} is not supported (Concat: axis -3, -2 or -1)"
    return None


def _batch_one(call, what: str):
    data = shape(call.args[0])
    if len(data) >= 2 and data[0] != 1:
        return f"input batch {data[0]} is not supported ({what} needs batch 1)"
    return None


@rule("strided_slice", layer="Slice")
def strided_slice(call, ctx):
    reason = _batch_one(call, "Slice")
    if reason:
        return reason
    data = shape(call.args[0])
    for axis, (begin, end, stride) in enumerate(slice_ranges(data, call.attrs)):
        if stride != 1:
            return f"stride {stride} on {axis_word(axis, len(data))} is not supported (Slice: stride 1)"
    return None


@rule("split", layer="Slice")
def split(call, ctx):
    reason = _batch_one(call, "Split")
    if reason:
        return reason
    ndim = len(shape(call.args[0]))
    axis = norm_axis(call.attrs.axis, ndim)
    if ndim >= 2 and axis == 0:
        return "splitting along the batch axis is not supported"
    return None


@rule("take", layer="Gather", int_args=(1,))
def take(call, ctx):
    data, indices = call.args
    if call.attrs.axis is None:
        return "a gather over the flattened data (no axis) is not supported (Gather needs an axis)"
    if is_const(data):
        return "gathering from constant data is not supported (Gather: the data must be variable)"
    ind = shape(indices)
    if len(ind) != 1:
        return f"indices of shape {fmt_shape(ind)} are not supported (Gather: 1-D indices)"
    return None


@rule("nn.pad", layer="Pad")
def pad(call, ctx):
    attrs = call.attrs
    if attrs.pad_mode != "constant":
        return f"pad_mode={attrs.pad_mode} is not supported (Pad: constant padding with 0)"
    value = const_value(call.args[1])
    if value is None or value != 0.0:
        shown = "a variable" if value is None else value
        return f"pad value {shown} is not supported (Pad: constant padding with 0)"
    ndim = len(shape(call.args[0]))
    for axis, widths in enumerate(attrs.pad_width):
        if any(w != 0 for w in widths) and axis_name(axis, ndim) not in ("H", "W"):
            return (f"padding {axis_word(axis, ndim)} by {list(widths)} is not supported (Pad: height and "
                    f"width only)")
    return None


@rule("nn.depth_to_space", layer="DepthToSpace")
def depth_to_space(call, ctx):
    attrs = call.attrs
    if attrs.layout != "NCHW":
        return f"layout {attrs.layout} is not supported (DepthToSpace takes NCHW data)"
    if attrs.block_size not in (2, 4, 8):
        return f"block_size={attrs.block_size} is not supported (DepthToSpace: 2, 4 or 8)"
    return None


def _power_of_two(x: int) -> bool:
    return x >= 1 and x & (x - 1) == 0


@rule("image.resize2d", layer="Resize")
def resize2d(call, ctx):
    attrs = call.attrs
    if attrs.layout != "NCHW":
        return f"layout {attrs.layout} is not supported (Resize takes NCHW data)"
    if attrs.method not in ("nearest_neighbor", "linear"):
        return f"method={attrs.method} is not supported (Resize: nearest or linear)"
    _, _, h, w = shape(call.args[0])
    _, _, oh, ow = shape(call)
    scales = (oh / h, ow / w)
    text = f"{oh / h:g}x{ow / w:g} (height x width, {h}x{w} -> {oh}x{ow})"
    if oh < h or ow < w:
        return f"scales {text} downscale, which is not supported (Resize: equal power-of-2 upscales)"
    if scales[0] != scales[1]:
        return f"scales {text} differ, which is not supported (Resize: equal power-of-2 scales)"
    if oh % h or not _power_of_two(oh // h):
        return f"scale {text} is not a power of 2 (Resize: equal power-of-2 scales)"
    mode = attrs.coordinate_transformation_mode
    if attrs.method == "linear" and mode not in ("half_pixel", "pytorch_half_pixel"):
        return (f"bilinear resize with coordinate_transformation_mode={mode} is not supported (TIDL's bilinear "
                f"resize samples at half-pixel centres)")
    return None


@rule("nn.upsampling", layer="Resize")
def upsampling(call, ctx):
    attrs = call.attrs
    if attrs.layout != "NCHW":
        return f"layout {attrs.layout} is not supported (Resize takes NCHW data)"
    if attrs.method not in ("nearest_neighbor", "bilinear"):
        return f"method={attrs.method} is not supported (Resize: nearest or linear)"
    if attrs.method == "bilinear":
        return ("bilinear upsampling samples at pixel corners (align_corners) or asymmetric coordinates, which is "
                "not supported (TIDL's bilinear resize samples at half-pixel centres)")
    sh, sw = attrs.scale_h, attrs.scale_w
    if sh < 1 or sw < 1:
        return f"scales {sh:g}x{sw:g} downscale, which is not supported (Resize: equal power-of-2 upscales)"
    if sh != sw:
        return f"scales {sh:g}x{sw:g} differ, which is not supported (Resize: equal power-of-2 scales)"
    if not float(sh).is_integer() or not _power_of_two(int(sh)):
        return f"scale {sh:g} is not a power of 2 (Resize: equal power-of-2 scales)"
    return None


@rule("max", "min", layer="Reduce")
def reduce_max_min(call, ctx):
    ndim = len(shape(call.args[0]))
    axes = reduced_axes(ndim, call.attrs)
    if ndim < 2 or axes != (ndim - 2,):
        names = ", ".join(f"{a} ({axis_name(a, ndim)})" for a in axes)
        return f"reducing over axes {names} is not supported (ReduceMax/ReduceMin: height axis only, axis -2)"
    return None


@rule("argmax", layer="ArgMax", int_output=True)
def argmax(call, ctx):
    attrs = call.attrs
    ndim = len(shape(call.args[0]))
    axes = reduced_axes(ndim, attrs)
    if ndim < 3 or axes != (ndim - 3,):
        names = ", ".join(f"{a} ({axis_name(a, ndim)})" for a in axes)
        return f"argmax over axes {names} is not supported (ArgMax: channel axis only, axis -3)"
    if not attrs.keepdims:
        return "keepdims=False is not supported (ArgMax: keepdims=1)"
    if attrs.select_last_index:
        return "select_last_index=True is not supported"
    return None



#: TIDL's ScatterElements layer: the ScatterND reductions it runs (TI's import maps 'mul' to an
#: unsupported reduction).
SCATTER_REDUCTIONS = ("update", "add", "max", "min")
#: ONNX's names of the scatter_nd modes, for the reasons (ONNX's 'none' is the IR's 'update').
_ONNX_REDUCTION = {"update": "none", "add": "add", "mul": "mul", "max": "max", "min": "min"}
#: The most non-singleton dims of the scatter's first variable input (TIDL's ScatterElements layer).
SCATTER_MAX_DIMS = 4


@rule("scatter_nd", layer="ScatterElements", int_args=(1,))
def scatter_nd(call, ctx):
    """TI's allowlisting constraints of the ScatterElements layer for ScatterND (edgeai-tidl-tools
    docs/operators.md #20, TI's constraint table of the layer): 'mul' is refused; at most 4
    non-singleton dims on the first variable input; with 'add', updates of at most one channel (the
    third axis from the end, when updates have one); every index writes an element or a line
    (indices address at least rank - 1 axes); a constant ``data`` must be all zero unless the
    reduction is 'none' (a variable ``data`` is taken as zero, with a warning in TI's import)."""
    data, indices, updates = call.args
    mode = call.attrs.mode
    if mode not in SCATTER_REDUCTIONS:
        return (f"reduction '{_ONNX_REDUCTION.get(mode, mode)}' is not supported (ScatterND: none, add, max or "
                f"min; TIDL's ScatterElements layer has no 'mul')")
    variable = next((a for a in (data, indices, updates) if not is_const(a)), None)
    if variable is not None:
        dims = [d for d in shape(variable) if d != 1]
        if len(dims) > SCATTER_MAX_DIMS:
            return (f"its first variable input {fmt_shape(shape(variable))} has {len(dims)} non-singleton dims "
                    f"(ScatterND: at most {SCATTER_MAX_DIMS})")
    upd = shape(updates)
    if mode == "add" and len(upd) >= 3 and upd[-3] > 1:
        return (f"updates {fmt_shape(upd)} have {upd[-3]} channels (axis -3) with reduction 'add' (ScatterND: "
                f"updates of at most 1 channel)")
    rank, addressed = len(shape(data)), shape(indices)[0]
    if rank - addressed >= 2:
        return (f"each index addresses {addressed} of the {rank} axes of data {fmt_shape(shape(data))}, so it "
                f"writes a slice of rank {rank - addressed} (ScatterND: indices' last dimension at least "
                f"rank - 1 = {rank - 1}: an element or a line per index)")
    if mode != "update" and is_const(data) and np.any(np.asarray(data.data)):
        return (f"constant data with non-zero values and reduction '{_ONNX_REDUCTION[mode]}' (ScatterND: a "
                f"constant data input must be all zero)")
    return None


@rule("topk", layer="TopK", int_output=True)
def topk(call, ctx):
    """TI's constraints of the TopK layer (edgeai-tidl-tools docs/operators.md #30): sorted results
    only, K an initializer (the IR holds K as an attribute: a K computed at run time does not
    import), along the width or the height axis."""
    attrs = call.attrs
    if not attrs.sorted:
        return "sorted=0 is not supported (TopK: sorted results only)"
    ndim = len(shape(call.args[0]))
    axis = norm_axis(attrs.axis, ndim)
    if axis_name(axis, ndim) not in ("W", "H"):
        return f"TopK along {axis_word(axis, ndim)} is not supported (TopK: width or height axis only)"
    return None
