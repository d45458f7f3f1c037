"""RemoveQuantizeInitializer: a constant float weight quantized then dequantized (FP32 -> Q -> DQ)
becomes the quantized constant dequantized (INT8 -> DQ) (TI's model optimizer rule
``remove_quantize_initializer``, on by default in TI's runner; one of the three rules TI's optimizer
runs on a QDQ model, the only one of them on by default).

    %0 = qnn.quantize(w, s, z, out_dtype="int8");   # w: a float constant
    qnn.dequantize(%0, s2, z2)
    ->
    qnn.dequantize(q, s2, z2)                        # q = clip(round(w / s) + z) as int8

TI computes ``q`` in float32: the weight divided by the scale (a per-channel scale laid along axis
0), rounded half to even, plus the zero point, clipped to the range of the dequantize's zero-point
type when it is int8 or uint8 and cast to it. That is what the quantize computes when its scale
lies along axis 0 (or is one value) and the values fit the type; tidlx rewrites only then: a
per-channel scale along another axis (TI would lay it along axis 0) and an int16 weight whose
values overflow (TI's cast wraps them, the quantize saturates) stay. The quantize's only user must
be the dequantize (TI moves only its first user to the constant). The dequantize keeps its layer
name.

Exactness: the dequantize reads the values the quantize computed; the results are equal.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..expr import Constant
from ..op import call
from ..pattern import is_constant, is_op
from ..rewrite import RewriteTable
from ..transform import module_pass

#: TI's name of the rule.
TI_RULE = "remove_quantize_initializer"

#: The types TI clips to (other types are cast without clipping).
_CLIPPED = {"int8": (-128, 127), "uint8": (0, 255)}


def quantized_weight(weight: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, dtype: str) -> Optional[np.ndarray]:
    """``weight`` quantized as TI's rule does (scale and zero point one value or laid along axis 0),
    or None where TI's cast would wrap a value the quantize saturates."""
    weight = np.asarray(weight, dtype=np.float32)
    scale = np.asarray(scale, dtype=np.float32)
    zero_point = np.asarray(zero_point)
    along = (-1,) + (1,) * (weight.ndim - 1) if weight.ndim else (-1,)
    q = np.round(np.divide(weight, scale.reshape(along))) + zero_point.reshape(along).astype(np.float32)
    if weight.ndim == 0:
        q = q.reshape(())
    if dtype in _CLIPPED:
        q = np.clip(q, *_CLIPPED[dtype])
    else:
        info = np.iinfo(dtype)
        if q.min(initial=0) < info.min or q.max(initial=0) > info.max:
            return None
    return q.astype(dtype)


def _convert(m):
    dq = m.expr
    quant = dq.args[0]
    if not m.has_single_user(quant):
        return None
    weight, scale, zero_point = (a.data for a in quant.args[:3])
    if not np.issubdtype(weight.dtype, np.floating):
        return None
    per_channel = np.size(scale) > 1 or np.size(zero_point) > 1
    if per_channel and (weight.ndim == 0 or int(quant.attrs.axis) % weight.ndim != 0):
        return None
    q = quantized_weight(weight, scale, zero_point, str(quant.attrs.out_dtype))
    if q is None or q.shape != weight.shape:
        return None
    return call("qnn.dequantize", Constant(q), *dq.args[1:], layer=dq.layer, out_dtype=dq.attrs.out_dtype,
                axis=dq.attrs.axis)


REMOVE_QUANTIZE_INITIALIZER = RewriteTable([
    ("quantized_constant", is_op("qnn.dequantize")(is_op("qnn.quantize")(is_constant(), is_constant(), is_constant()),
                                                   is_constant(), is_constant()), _convert),
], name="RemoveQuantizeInitializer")


@module_pass("RemoveQuantizeInitializer", opt_level=0)
def remove_quantize_initializer(mod, ctx):
    """Dequantizes each quantized float constant from its quantized values (TI's
    remove_quantize_initializer)."""
    return REMOVE_QUANTIZE_INITIALIZER.rewrite(mod)


RemoveQuantizeInitializer = remove_quantize_initializer

__all__ = ["RemoveQuantizeInitializer", "REMOVE_QUANTIZE_INITIALIZER", "quantized_weight", "TI_RULE"]
