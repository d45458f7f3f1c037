"""The support differences TI documents per target device, applied when the option
``target_device`` names one (``devices.py`` holds the limits and their sources).

    device_reason(call, options) -> None | "nn.conv2d 'c1': on AM62A (target_device) padding ..."

They come after the shared rules (a call the shared rules refuse keeps that reason) and hold in
both flows: TI's operator table is one for its ONNX Runtime and TVM imports.
"""

from __future__ import annotations

from typing import Optional

from ....ir.expr import Call
from ..devices import LIMIT_CONV_PAD, LIMIT_DECONV_16, LayerLimit, device
from ._base import shape, where


def _is_16bit(call: Call, options) -> bool:
    """Whether TIDL runs the layer of ``call`` in 16 bit: tensor_bits 16, or the layer in a 16-bit list."""
    if options.tensor_bits == 16:
        return True
    return call.layer is not None and (call.layer in options.output_feature_16bit_names
                                       or call.layer in options.params_16bit_names)


def _conv_pad_wider_than_input(call: Call, options) -> bool:
    """TI: padding greater than the input width (any side) is refused on the devices of ``LIMIT_CONV_PAD``."""
    width = shape(call.args[0])[-1]
    pads = tuple(int(p) for p in call.attrs.padding)
    return max(pads) > width


def _deconv_16bit(call: Call, options) -> bool:
    return _is_16bit(call, options)


#: Relay op -> (the limit, whether the call falls under it).
_CHECKS = {
    "nn.conv2d": (LIMIT_CONV_PAD, _conv_pad_wider_than_input),
    "nn.conv2d_transpose": (LIMIT_DECONV_16, _deconv_16bit),
}


def device_reason(call: Call, options) -> Optional[str]:
    """Why TIDL on ``options.target_device`` refuses ``call`` where the shared rules take it, or None
    (also None without a target device: TIDL's defaults)."""
    dev = device(getattr(options, "target_device", None))
    if dev is None or call.op_name not in _CHECKS:
        return None
    limit, applies = _CHECKS[call.op_name]
    if limit not in dev.layer_limits or not applies(call, options):
        return None
    return _message(call, dev.name, limit)


def _message(call: Call, name: str, limit: LayerLimit) -> str:
    extra = ""
    if limit is LIMIT_CONV_PAD:
        extra = f" (padding {list(call.attrs.padding)}, input width {shape(call.args[0])[-1]})"
    return (f"{where(call)}: on {name} (target_device) {limit.op} {limit.text}{extra}, as TI's operator table "
            f"documents for {name}")


__all__ = ["device_reason"]
