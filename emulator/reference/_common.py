"""Helpers shared by the kernel families (reference and fast): dtypes, layouts, attribute forms."""

from __future__ import annotations

from functools import lru_cache
from typing import Tuple

import numpy as np

from ...ir.errors import TidlxError
from ...ir.ops._rel import expand_padding, pair  # noqa: F401  (re-exported for the families)


@lru_cache(maxsize=None)
def _np_dtype(name: str) -> np.dtype:
    return np.dtype(name)


def out_dtype(out_type) -> np.dtype:
    """The numpy dtype of a kernel's (tensor) output type."""
    return _np_dtype(out_type.dtype)


def to_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    """A view of a 4-D tensor in ``layout`` (a permutation of NCHW) as NCHW."""
    if layout == "NCHW":
        return x
    check_layout(layout, "NCHW")
    return x.transpose([layout.index(c) for c in "NCHW"])


def from_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    """A view of an NCHW tensor in ``layout``."""
    if layout == "NCHW":
        return x
    check_layout(layout, "NCHW")
    return x.transpose(["NCHW".index(c) for c in layout])


def check_layout(layout: str, letters: str) -> None:
    if len(layout) != len(letters) or sorted(layout) != sorted(letters):
        raise TidlxError(f"layout '{layout}' is not supported by the emulator (a permutation of {letters})")


def weight_to_oihw(w: np.ndarray, layout: str) -> np.ndarray:
    if layout == "OIHW":
        return w
    check_layout(layout, "OIHW")
    return w.transpose([layout.index(c) for c in "OIHW"])


def spatial_axes(layout: str) -> Tuple[int, int]:
    """(H axis, W axis) of a 2-D layout such as NCHW, NHWC or NCHW4c."""
    h, w = layout.find("H"), layout.find("W")
    if h < 0 or w < 0:
        raise TidlxError(f"layout '{layout}' has no H and W axes")
    return h, w


def to_planes(x: np.ndarray, layout: str):
    """``x`` as a C-contiguous stack of (H, W) planes, shape (P, H, W), with what ``from_planes``
    needs to undo it: the axis permutation and the leading (non-spatial) shape."""
    h_axis, w_axis = spatial_axes(layout)
    others = [a for a in range(x.ndim) if a not in (h_axis, w_axis)]
    perm = others + [h_axis, w_axis]
    moved = np.ascontiguousarray(x.transpose(perm))
    lead = moved.shape[:-2]
    return moved.reshape((-1,) + moved.shape[-2:]), perm, lead


def from_planes(planes: np.ndarray, perm, lead) -> np.ndarray:
    """The (P, H', W') planes back in the layout ``to_planes`` took them from."""
    out = planes.reshape(tuple(lead) + planes.shape[-2:])
    if list(perm) == sorted(perm):
        return out
    return out.transpose(np.argsort(perm))


def int_matmul_dtype(a: np.dtype, b: np.dtype) -> np.dtype:
    """The dtype to multiply integer operands in: float64 is exact for 8/16-bit products
    summed over realistic reductions and runs on BLAS; wider integers stay int64."""
    if max(a.itemsize, b.itemsize) <= 2:
        return np.dtype(np.float64)
    return np.dtype(np.int64)


def matmul_any(a: np.ndarray, b: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``a @ b`` with the result in ``dtype``: floats on BLAS, integers exactly."""
    if a.dtype.kind == "f" and b.dtype.kind == "f" and dtype.kind == "f":
        if a.dtype != dtype:
            a = a.astype(dtype)
        if b.dtype != dtype:
            b = b.astype(dtype)
        return np.matmul(a, b)
    if a.dtype.kind == "f" and b.dtype.kind == "f":
        work = np.dtype(np.float64)
    else:
        work = int_matmul_dtype(a.dtype, b.dtype)
    res = np.matmul(a.astype(work), b.astype(work))
    if dtype.kind in "iu" and res.dtype.kind == "f":
        res = np.rint(res)
    return res.astype(dtype)
