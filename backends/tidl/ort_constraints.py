"""TI's documented operator constraints of the ONNX Runtime flow, where they are stricter than the
shared support rules (``rules/``): one check per ONNX op type, on the node and the calls it
imported to. The source is TI's table of supported ONNX operators and their constraints
(edgeai-tidl-tools ``docs/supported_ops_rts_versions.md``, the 11.0 release), which the ORT
flow's import enforces. Each reason quotes the constraint it breaks.

    reason = documented_reason(node, calls)    # None: the shared rules decide

Where TI's table lists a layer tidlx has no layer model for (Neg, Exp, Log, Sqrt, Pow, Abs,
Floor, Sin, Cos, SpaceToDepth, InstanceNormalization), the node stays on the host, and the reason
says that TI's import has the layer and tidlx does not model it (``UNMODELLED_LAYERS``).
``ort_rules.py`` holds the ORT flow's other checks (from TI's import logs and scatter layers).
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence

import numpy as np

from ...ir.expr import Call, Constant
from ...ir.types import TensorType
from .rules import where

#: TI's document, as each reason cites it.
SOURCE = "TI's supported-operator table (edgeai-tidl-tools docs/supported_ops_rts_versions.md)"

Check = Callable[["object", Sequence[Call]], Optional[str]]


def _first(calls: Sequence[Call], *ops: str) -> Optional[Call]:
    return next((c for c in calls if c.op_name in ops), None)


def _dims(expr) -> Optional[tuple]:
    t = getattr(expr, "checked_type", None)
    return tuple(int(d) for d in t.shape) if isinstance(t, TensorType) else None


def _refuse(call: Call, what: str, op_type: str, constraint: str) -> str:
    return f"{where(call)}: {what} ({SOURCE}, {op_type}: \"{constraint}\")"


# -- per ONNX op type ------------------------------------------------------------------------------

def _gemm(node, calls):
    dense = _first(calls, "nn.dense")
    if dense is None:
        return None
    trans_a = int(node.attr("transA", 0))
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    if trans_a or alpha != 1.0 or beta != 1.0:
        what = ", ".join(f"{k}={v:g}" for k, v, d in (("transA", trans_a, 0), ("alpha", alpha, 1.0),
                                                        ("beta", beta, 1.0)) if v != d)
        return _refuse(dense, what, "Gemm", "Only supported Gemm params are transA = 0, alpha = 1.0 and beta = 1.0")
    return None


def _reshape(node, calls):
    if int(node.attr("allowzero", 0)):
        return _refuse(calls[0], "allowzero=1", "Reshape", "allowzero is not supported")
    return None


def _argmax(node, calls):
    if int(node.attr("select_last_index", 0)):
        return _refuse(calls[0], "select_last_index=1", "ArgMax", "Only select_last_index = 0 (default) is supported")
    return None


def _sub(node, calls):
    sub = _first(calls, "subtract")
    out = _dims(sub) if sub is not None else None
    if out is None:
        return None
    for arg in sub.args:
        if not isinstance(arg, Constant):
            continue
        shape = (1,) * (len(out) - arg.data.ndim) + tuple(arg.data.shape)
        wide = [i for i, d in enumerate(shape) if d > 1]
        constraint = ("Constant tensor in Sub layer must be a number or 1D vector, only one dimension can be > 1; "
                      "1D vector dimension should match with channel or width dimension")
        if len(wide) > 1:
            return _refuse(sub, f"the constant of shape {tuple(arg.data.shape)} varies along more than one axis",
                           "Sub", constraint)
        if wide and wide[0] - len(shape) not in (-3, -1):
            return _refuse(sub, f"the constant of shape {tuple(arg.data.shape)} varies along neither the channel "
                                f"nor the width axis", "Sub", constraint)
    return None


def _slice(node, calls):
    sl = _first(calls, "strided_slice")
    if sl is None:
        return None
    given = [i for i in node.inputs if i]
    if node.inputs and len(given) < 4:
        return _refuse(sl, f"the Slice has {len(given)} input(s), without its axes", "Slice",
                       "Must have 4 inputs into the operator, where one is the variable (Must be <=4 dimensions) "
                       "input while the other 3 are constant/initializers & 1D")
    return _at_most_4d(sl, "Slice")


def _split(node, calls):
    part = _first(calls, "split", "strided_slice")
    return _at_most_4d(part, "Split") if part is not None else None


def _at_most_4d(call, op_type):
    dims = _dims(call.args[0])
    if dims is not None and len(dims) > 4:
        return _refuse(call, f"the input has {len(dims)} dims", op_type,
                       "Must have 4 inputs into the operator, where one is the variable (Must be <=4 dimensions) "
                       "input while the other 3 are constant/initializers & 1D")
    return None


_NEAREST_MODE = {"half_pixel": "round_prefer_ceil", "pytorch_half_pixel": "round_prefer_ceil", "asymmetric": "floor"}


def _resize(node, calls):
    resize = _first(calls, "image.resize2d")
    if resize is None:
        return None
    a = resize.attrs
    mode = a.coordinate_transformation_mode
    if mode not in ("half_pixel", "pytorch_half_pixel", "asymmetric"):
        return _refuse(resize, f"coordinate_transformation_mode={mode}", "Resize",
                       "Only 'half_pixel', 'pytorch_half_pixel' and 'asymmetric' coordinate_transformation_mode "
                       "is supported")
    if a.method == "nearest_neighbor":
        wanted = _NEAREST_MODE[mode]
        got = a.rounding_method or "round_prefer_floor"
        if got != wanted:
            constraint = ("Only 'floor' nearest mode is supported when coordinate_transformation_mode is 'asymmetric'"
                          if mode == "asymmetric" else
                          "Only 'round_prefer_ceil' nearest mode is supported when coordinate_transformation_mode "
                          "is 'half_pixel' or 'pytorch_half_pixel'")
            return _refuse(resize, f"nearest_mode={got} with coordinate_transformation_mode={mode}", "Resize",
                           constraint)
    if int(a.cubic_exclude):
        return _refuse(resize, "exclude_outside=1", "Resize", "Only default exclude_outside = 0 is supported")
    out = _dims(resize)
    if mode == "pytorch_half_pixel" and out is not None and min(out[2:]) <= 1:
        return _refuse(resize, f"an output of {out[2]}x{out[3]}", "Resize",
                       "'pytorch_half_pixel' coordinate_transformation_mode is not supported for Resize output "
                       "shapes <= 1")
    return None


def _reduce_max_min(node, calls):
    red = _first(calls, "max", "min")
    if red is not None and not red.attrs.keepdims:
        return _refuse(red, "keepdims=0", node.op_type, "Only keepdims = 1 is supported")
    return None


def _clip(node, calls):
    clip = _first(calls, "clip")
    if clip is None:
        return None
    lo, hi = float(clip.attrs.a_min), float(clip.attrs.a_max)
    if lo > 0 or hi <= 0:
        return _refuse(clip, f"min {lo:g}, max {hi:g}", "Clip", "Only min <= 0 and max > 0 is supported")
    return None


def _gather(node, calls):
    take = _first(calls, "take")
    dims = _dims(take.args[0]) if take is not None else None
    if dims is None or take.attrs.axis is None:
        return None
    axis = take.attrs.axis % len(dims)
    idx = take.args[1]
    if isinstance(idx, Constant):
        values = np.asarray(idx.data).reshape(-1)
        # TI's import turns one index on a unit axis into a reshape, and contiguous indices along
        # C, H or W into a slice; neither reads the dims before the axis
        if dims[axis] == 1 and values.size == 1:
            return None
        if values.size and np.all(np.diff(values) == 1) and axis - len(dims) >= -3:
            return None
    outer = [d for d in dims[:axis] if d != 1]
    if outer:
        return _refuse(take, f"gathering along axis {axis} of shape {dims}, whose outer dims are not 1", "Gather",
                       "Input shape of dimension higher than axis should be 1")
    return None


#: ONNX op type -> its documented constraints beyond the shared rules.
DOCUMENTED_CONSTRAINTS: Dict[str, Check] = {
    "Gemm": _gemm,
    "Reshape": _reshape,
    "ArgMax": _argmax,
    "Sub": _sub,
    "Slice": _slice,
    "Split": _split,
    "Resize": _resize,
    "ReduceMax": _reduce_max_min,
    "ReduceMin": _reduce_max_min,
    "Clip": _clip,
    "Gather": _gather,
}

#: ONNX op types TI's table lists with a TIDL layer that tidlx has no layer model for -> the layer.
UNMODELLED_LAYERS = {
    "Neg": "TIDL_NegLayer", "Exp": "TIDL_ExpLayer", "Log": "TIDL_LogLayer", "Sqrt": "TIDL_SqrtLayer",
    "Pow": "TIDL_PowLayer", "Abs": "TIDL_AbsLayer", "Floor": "TIDL_FloorLayer", "Sin": "TIDL_SinLayer",
    "Cos": "TIDL_CosLayer", "SpaceToDepth": "TIDL_SpaceToDepthLayer", "InstanceNormalization": "TIDL_InstanceNormLayer",
}


def documented_reason(node, calls: Sequence[Call]) -> Optional[str]:
    """Why TI's documented constraints keep ``node`` (an ``OnnxNode``, imported to ``calls``) on the
    host where the shared rules would not say so, or None."""
    check = DOCUMENTED_CONSTRAINTS.get(node.op_type)
    if check is None or not calls:
        return None
    return check(node, calls)


def unmodelled_reason(node, calls: Sequence[Call], message: str) -> Optional[str]:
    """The host reason of a node TI's table gives a layer tidlx does not model (``message``: the
    shared rules' reason), or None for other nodes."""
    layer = UNMODELLED_LAYERS.get(node.op_type)
    if layer is None or not calls:
        return None
    call = next((c for c in calls if message.startswith(where(c))), calls[0])
    return (f"{where(call)}: tidlx has no TIDL layer model for {call.op_name} (TI's ONNX Runtime import runs "
            f"{node.op_type} as {layer}: {SOURCE}), so it stays on the host")


__all__ = ["DOCUMENTED_CONSTRAINTS", "UNMODELLED_LAYERS", "documented_reason", "unmodelled_reason", "SOURCE"]
