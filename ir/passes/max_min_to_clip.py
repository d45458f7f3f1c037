"""ConvertMaxMinToClip: ``maximum``/``minimum`` with a scalar constant become ``clip`` (TI's
ConvertMaxMinToClip; TIDL has a clip layer but no max/min with a constant).

* ``minimum(maximum(x, c), d)`` -> ``clip(x, c, d)``, which is TI's Relay pattern
  (``%2 = maximum(%x.1, -4f); %3 = minimum(%2, 4f)``).
* ``maximum(minimum(x, d), c)`` -> ``clip(x, c, d)`` when ``c <= d`` (with ``c > d`` the pair
  always gives ``c``, which no clip expresses: it stays).
* A lone ``maximum(x, c)`` -> ``clip(x, c, M)`` with M the largest finite value of the dtype
  (TI's "float max"). A lone ``minimum`` is left alone, as TI does.
* ``minimum(clip(x, lo, hi), d)`` -> ``clip(x, lo, min(hi, d))`` and ``maximum(clip(x, lo, hi), c)``
  -> ``clip(x, max(lo, c), hi)`` when the bounds stay ordered. This is how the first form is
  reached: bottom-up, the inner ``maximum`` is a lone one first.

Either argument order of ``maximum``/``minimum`` matches. The constant must hold one value and
broadcasting it must not change the type of ``x`` (a ``(1, C, 1, 1)`` constant against a 2-D
tensor is not a clip); it must be exactly representable as the clip bound for ``x``'s dtype.
The clip takes the layer of the op whose output it replaces (the last of the pair).

Exactness: ``clip`` computes ``min(max(x, lo), hi)``, so every rewrite gives the same values,
nan included. The one difference: the lone ``maximum`` maps ``+inf`` to M instead of ``+inf``.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..expr import Call, Constant
from ..op import call
from ..pattern import is_constant, is_op, wildcard
from ..rewrite import RewriteTable
from ..transform import module_pass
from ..types import TensorType

_CLIP_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "uint8", "uint16", "uint32")


def _scalar_value(constant: Constant, dtype: str) -> Optional[float]:
    """The single value of ``constant`` as a clip bound, or None when it holds several or the
    Python float would not round-trip to the dtype's value."""
    data = constant.data
    if data.size != 1 or data.dtype.name != dtype:
        return None
    value = data.reshape(()).item()
    bound = float(value)
    if np.isnan(bound) or np.asarray(bound).astype(data.dtype) != data.reshape(()):
        return None
    return bound


def _largest(dtype: str) -> float:
    np_dtype = np.dtype(dtype)
    return float(np.finfo(np_dtype).max if np_dtype.kind == "f" else np.iinfo(np_dtype).max)


def _bound_of(m, x_key: str = "x", const_key: str = "c") -> Optional[float]:
    """The scalar bound of the matched call, when it broadcasts without changing ``x``'s type."""
    x_t = m[x_key].checked_type
    if not isinstance(x_t, TensorType) or x_t.dtype not in _CLIP_DTYPES or m.expr.checked_type != x_t:
        return None
    return _scalar_value(m[const_key], x_t.dtype)


def _clip(x, lo: float, hi: float) -> Optional[Call]:
    if not lo <= hi:
        return None
    return call("clip", x, a_min=lo, a_max=hi)


def _lone_maximum(m):
    lo = _bound_of(m)
    if lo is None:
        return None
    return _clip(m["x"], lo, _largest(m["x"].checked_type.dtype))


def _maximum_of_minimum(m):
    lo, hi = _bound_of(m), _bound_of(m, "x", "d")
    if lo is None or hi is None or m["inner"].checked_type != m["x"].checked_type:
        return None
    return _clip(m["x"], lo, hi)


def _minimum_of_clip(m):
    hi = _bound_of(m, "clip", "d")
    if hi is None:
        return None
    attrs = m["clip"].attrs
    return _clip(m["clip"].args[0], attrs.a_min, min(attrs.a_max, hi))


def _maximum_of_clip(m):
    lo = _bound_of(m, "clip", "c")
    if lo is None:
        return None
    attrs = m["clip"].attrs
    return _clip(m["clip"].args[0], max(attrs.a_min, lo), attrs.a_max)


def _binary(op_name: str, data, const_name: str):
    return is_op(op_name)(data, is_constant().named(const_name)).commutative()


CONVERT_MAX_MIN_TO_CLIP = RewriteTable([
    ("minimum_of_clip", _binary("minimum", is_op("clip").named("clip"), "d"), _minimum_of_clip),
    ("maximum_of_clip", _binary("maximum", is_op("clip").named("clip"), "c"), _maximum_of_clip),
    ("maximum_of_minimum", _binary("maximum", _binary("minimum", wildcard().named("x"), "d").named("inner"), "c"),
     _maximum_of_minimum),
    ("lone_maximum", _binary("maximum", wildcard().named("x"), "c"), _lone_maximum),
], name="ConvertMaxMinToClip")


@module_pass("ConvertMaxMinToClip", opt_level=0)
def convert_max_min_to_clip(mod, ctx):
    """Turns maximum/minimum with scalar constants into clip (TI's ConvertMaxMinToClip)."""
    return CONVERT_MAX_MIN_TO_CLIP.rewrite(mod)


ConvertMaxMinToClip = convert_max_min_to_clip

__all__ = ["ConvertMaxMinToClip", "CONVERT_MAX_MIN_TO_CLIP"]
