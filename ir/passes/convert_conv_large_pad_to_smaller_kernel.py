"""ConvertConvLargePadToSmallerKernel: a convolution whose padding exceeds its input (TI's test:
a left or right pad above the height, or a top or bottom pad above the width, as TI's rule reads
the two sizes) gets the kernel cropped to the taps TI's rule keeps and smaller padding (TI's model
optimizer rule ``convert_conv_large_pad_to_smaller_kernel``, on by default in TI's runner). TIDL
refuses a Conv whose input width is below its left or right padding; DeepLab's ASPP, dilation 36
on a 32x32 map, is the case in the field.

    nn.conv2d(x, w, padding=[36, 36, 36, 36], dilation=[36, 36], kernel_size=[3, 3])   # x: 32x32
    ->
    nn.conv2d(x, w[:, :, 1:2, 1:2], padding=[0, 0, 0, 0], dilation=[36, 36], kernel_size=[1, 1])

TI's rule keeps, per axis, the taps from ``(e - p0 - 1) // d`` to ``(e - p1 - 1) // d`` (e the
dilated kernel extent, p0/p1 the pads before/after, d the dilation) and pads both sides with
``((out - 1) * stride - in + k') // 2``. That is the same convolution only when every tap it drops
meets padding alone at every output position and that padding matches; tidlx rewrites exactly
those convolutions and leaves the others (where TI's rewrite would change the output). The call
keeps its layer name.

Exactness: the dropped taps only ever multiplied padding zeros; the results are equal.
"""

from __future__ import annotations

from typing import Optional, Tuple

from ..expr import Call, Constant
from ..op import call
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass

#: TI's name of the rule.
TI_RULE = "convert_conv_large_pad_to_smaller_kernel"


def _axis(size: int, k: int, d: int, s: int, p0: int, p1: int) -> Optional[Tuple[int, int, int]]:
    """``(first kept tap, last kept tap, new pad)`` along one axis when TI's crop is exact, else None."""
    extent = (k - 1) * d + 1
    first, last = (extent - p0 - 1) // d, (extent - p1 - 1) // d
    if not 0 <= first <= last < k:
        return None
    out = (size + p0 + p1 - extent) // s + 1
    useful = [r for r in range(k) if any(0 <= o * s + r * d - p0 < size for o in range(out))]
    if useful and (useful[0] < first or useful[-1] > last):
        return None
    new_k = last - first + 1
    pad = ((out - 1) * s - size + (new_k - 1) * d + 1) // 2
    if pad < 0 or p0 - first * d != pad or p1 - (k - 1 - last) * d != pad:
        return None
    return first, last, pad


def cropped(conv: Call):
    """``(rows, cols, pad_h, pad_w)`` of TI's cropped kernel for ``conv`` when the rule applies and
    is exact, else None."""
    if not isinstance(conv, Call) or conv.op_name != "nn.conv2d" or not isinstance(conv.args[1], Constant):
        return None
    a = conv.attrs
    if a.data_layout != "NCHW" or a.kernel_layout != "OIHW" or len(a.padding) != 4:
        return None
    _, _, h, w = (int(v) for v in conv.args[0].checked_type.shape)
    top, left, bottom, right = (int(p) for p in a.padding)
    # TI's test, with its height and width names swapped
    if not (h < left or h < right or w < top or w < bottom):
        return None
    kh, kw = conv.args[1].data.shape[2:]
    rows = _axis(h, kh, int(a.dilation[0]), int(a.strides[0]), top, bottom)
    cols = _axis(w, kw, int(a.dilation[1]), int(a.strides[1]), left, right)
    if rows is None or cols is None:
        return None
    return rows[:2], cols[:2], rows[2], cols[2]


def _convert(m):
    conv = m.expr
    found = cropped(conv)
    if found is None:
        return None
    (r0, r1), (c0, c1), ph, pw = found
    weight = Constant(conv.args[1].data[:, :, r0:r1 + 1, c0:c1 + 1].copy())
    attrs = {f: getattr(conv.attrs, f) for f in conv.attrs.__dataclass_fields__}
    attrs.update(padding=(ph, pw, ph, pw), kernel_size=(r1 - r0 + 1, c1 - c0 + 1))
    return call("nn.conv2d", conv.args[0], weight, layer=conv.layer, **attrs)


CONVERT_CONV_LARGE_PAD_TO_SMALLER_KERNEL = RewriteTable([
    ("conv_padded_beyond_its_input", is_op("nn.conv2d"), _convert),
], name="ConvertConvLargePadToSmallerKernel")


@module_pass("ConvertConvLargePadToSmallerKernel", opt_level=0)
def convert_conv_large_pad_to_smaller_kernel(mod, ctx):
    """Crops the kernel of a convolution padded beyond its input to the taps that meet the input
    (TI's convert_conv_large_pad_to_smaller_kernel, where it is exact)."""
    return CONVERT_CONV_LARGE_PAD_TO_SMALLER_KERNEL.rewrite(mod)


ConvertConvLargePadToSmallerKernel = convert_conv_large_pad_to_smaller_kernel

__all__ = ["ConvertConvLargePadToSmallerKernel", "CONVERT_CONV_LARGE_PAD_TO_SMALLER_KERNEL", "cropped", "TI_RULE"]
