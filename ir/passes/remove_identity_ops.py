"""RemoveIdentityOps: drops ops that return their input unchanged (TI's graph preparation).

Removed (the op's users then read its input; their layer names stay as they were):

* ``multiply(x, 1)`` / ``multiply(1, x)``, ``divide(x, 1)``, ``add(x, 0)`` / ``add(0, x)`` and
  ``subtract(x, 0)``, when the constant is all ones (zeros) and broadcasting it does not change
  the type of ``x`` (a ``(1, C, 1, 1)`` constant against a 2-D ``x`` is not an identity).
  ``add(-0.0, +0.0)`` gives ``+0.0``: the only bit that can change, and it compares equal.
* ``nn.pad`` with all widths zero (whatever the mode and value); ``copy``; ``nn.dropout(x).0``.
* ``reshape`` to the same shape; ``cast`` to the same dtype; ``transpose`` whose permutation is
  the identity (no ``axes`` means "reverse", an identity only up to rank 1); ``strided_slice``
  that selects every element of every axis in order.
* ``image.resize2d`` / ``nn.upsampling`` to the input's own size, when every output pixel reads
  exactly its own input pixel: the sampling coordinates are then whole numbers (half_pixel,
  pytorch_half_pixel, align_corners, asymmetric, tf_crop_and_resize with the full roi, and
  tf_half_pixel_for_nn with nearest floor rounding) and the interpolation weights are exactly
  (1, 0...) - for linear always, for cubic only with the standard ``cubic_alpha`` -0.5 or -0.75.
  Linear and cubic interpolate in float32, so integer data is only accepted up to 16 bits; the
  weight 0 times a neighbouring inf or nan would still give nan, so those resizes are identities
  for finite data (what real images hold).
"""

from __future__ import annotations

import numpy as np

from ..errors import TidlxTypeError
from ..expr import Call, Constant, Expr
from ..ops.transform import slice_ranges, transpose_axes
from ..pattern import is_constant, is_op, is_tuple_get_item, wildcard
from ..rewrite import RewriteTable
from ..transform import module_pass
from ..types import TensorType

#: Coordinate modes whose input coordinate for output index i is exactly i at scale 1.
_INTEGER_COORD_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
#: Cubic alphas whose Keys kernel is exactly (0, 1, 0, 0) at a whole-number coordinate in float32.
_EXACT_CUBIC_ALPHAS = (-0.5, -0.75)
#: Integer dtypes that pass unchanged through float32 interpolation.
_SMALL_INT_DTYPES = ("int8", "uint8", "int16", "uint16")
_FLOAT_DTYPES = ("float16", "float32", "float64")


def _all_equal_to(value):
    def check(expr: Expr) -> bool:
        return isinstance(expr, Constant) and expr.data.size > 0 and bool(np.all(expr.data == value))
    check.__name__ = f"all_{value}"
    return check


def _keeps_input_type(m) -> bool:
    x = m["x"]
    return isinstance(x.checked_type, TensorType) and m.expr.checked_type == x.checked_type


def _drop_if_same_type(m):
    return m["x"] if _keeps_input_type(m) else None


def _drop(m):
    return m["x"]


def _is_identity_transpose(call: Call) -> bool:
    t = call.args[0].checked_type
    try:
        perm = transpose_axes(t.ndim, call.attrs.axes)
    except TidlxTypeError:
        return False
    return perm == tuple(range(t.ndim))


def _is_full_slice(call: Call) -> bool:
    t = call.args[0].checked_type
    try:
        ranges = slice_ranges(t.shape, call.attrs)
    except TidlxTypeError:
        return False
    # Python ranges compare as sequences: range(0, 1, 5) == range(1) (one element, index 0).
    return all(range(b, e, s) == range(dim) for dim, (b, e, s) in zip(t.shape, ranges))


def _resize_reads_own_pixels(method: str, mode: str, rounding: str, alpha: float, roi, dtype: str) -> bool:
    if mode == "tf_crop_and_resize":
        exact_coords = tuple(roi) == (0.0, 0.0, 1.0, 1.0)
    elif mode == "tf_half_pixel_for_nn":
        # Coordinates are i + 0.5: only nearest with floor-like rounding lands back on i.
        return method == "nearest_neighbor" and rounding in ("", "floor", "round_prefer_floor")
    else:
        exact_coords = mode in _INTEGER_COORD_MODES
    if not exact_coords:
        return False
    if method == "nearest_neighbor":
        return True
    if dtype not in _FLOAT_DTYPES + _SMALL_INT_DTYPES:
        return False
    if method == "linear":
        return True
    return method == "cubic" and float(alpha) in _EXACT_CUBIC_ALPHAS


def _is_identity_resize(call: Call) -> bool:
    data_t, out_t = call.args[0].checked_type, call.checked_type
    if data_t != out_t:
        return False
    attrs = call.attrs
    return _resize_reads_own_pixels(attrs.method, attrs.coordinate_transformation_mode, attrs.rounding_method,
                                    attrs.cubic_alpha, attrs.roi, data_t.dtype)


def _is_identity_upsampling(call: Call) -> bool:
    data_t, out_t = call.args[0].checked_type, call.checked_type
    if data_t != out_t:
        return False
    attrs = call.attrs
    method = {"nearest_neighbor": "nearest_neighbor", "bilinear": "linear", "bicubic": "cubic"}.get(attrs.method)
    mode = "align_corners" if attrs.align_corners else "asymmetric"
    return method is not None and _resize_reads_own_pixels(method, mode, "", -0.5, (0.0, 0.0, 1.0, 1.0),
                                                           data_t.dtype)


def _is_zero_pad(call: Call) -> bool:
    return all(int(before) == 0 and int(after) == 0 for before, after in call.attrs.pad_width)


def _is_same_dtype_cast(call: Call) -> bool:
    return call.attrs.dtype == call.args[0].checked_type.dtype


def _unary_identity(op_name: str, predicate):
    x = wildcard().named("x")
    return is_op(op_name)(x).where(predicate) if predicate else is_op(op_name)(x)


def _binary_identity(op_name: str, value, commutative: bool):
    pattern = is_op(op_name)(wildcard().named("x"), is_constant().where(_all_equal_to(value)))
    return pattern.commutative() if commutative else pattern


REMOVE_IDENTITY_OPS = RewriteTable([
    ("multiply_by_one", _binary_identity("multiply", 1, True), _drop_if_same_type),
    ("divide_by_one", _binary_identity("divide", 1, False), _drop_if_same_type),
    ("add_zero", _binary_identity("add", 0, True), _drop_if_same_type),
    ("subtract_zero", _binary_identity("subtract", 0, False), _drop_if_same_type),
    ("zero_pad", is_op("nn.pad")(wildcard().named("x"), wildcard()).where(_is_zero_pad), _drop_if_same_type),
    ("copy", _unary_identity("copy", None), _drop),
    ("dropout", is_tuple_get_item(is_op("nn.dropout")(wildcard().named("x")), 0), _drop),
    ("same_shape_reshape", _unary_identity("reshape", None), _drop_if_same_type),
    ("same_dtype_cast", _unary_identity("cast", _is_same_dtype_cast), _drop_if_same_type),
    ("identity_transpose", _unary_identity("transpose", _is_identity_transpose), _drop_if_same_type),
    ("full_strided_slice", _unary_identity("strided_slice", _is_full_slice), _drop_if_same_type),
    ("same_size_resize", _unary_identity("image.resize2d", _is_identity_resize), _drop_if_same_type),
    ("same_size_upsampling", _unary_identity("nn.upsampling", _is_identity_upsampling), _drop_if_same_type),
], name="RemoveIdentityOps")


@module_pass("RemoveIdentityOps", opt_level=0)
def remove_identity_ops(mod, ctx):
    """Drops ops that return their input unchanged (x * 1, x + 0, zero pads, copies, ...)."""
    return REMOVE_IDENTITY_OPS.rewrite(mod)


RemoveIdentityOps = remove_identity_ops

__all__ = ["RemoveIdentityOps", "REMOVE_IDENTITY_OPS"]
