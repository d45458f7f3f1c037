"""Layout helpers of the lowerings: 4-D tensors in any permutation of NCHW are brought to NCHW
(and weights to OIHW/IOHW) with a transpose, lowered there, and transposed back; Relax's
legalization covers the canonical layouts only."""

from __future__ import annotations


def permute_to(ctx, x, layout: str, canonical: str):
    """``x`` (in ``layout``) with its axes in ``canonical`` order."""
    if layout == canonical:
        return x
    return ctx.emit(ctx.op.permute_dims(x, [layout.index(c) for c in canonical]))


def permute_from(ctx, x, canonical: str, layout: str):
    """``x`` (in ``canonical``) with its axes in ``layout`` order."""
    if layout == canonical:
        return x
    return ctx.emit(ctx.op.permute_dims(x, [canonical.index(c) for c in layout]))


def along(ctx, vec, axis: int, ndim: int):
    """A 1-D ``vec`` shaped to broadcast along ``axis`` of an ``ndim``-D tensor."""
    shape = [1] * ndim
    shape[axis] = ctx.shape(vec)[0] if ctx.shape(vec) else 1
    return ctx.emit(ctx.op.reshape(vec, shape))
