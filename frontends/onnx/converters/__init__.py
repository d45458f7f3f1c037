"""ONNX op converters, one family per file, registered by ONNX op type.

A converter takes a ``NodeContext`` and returns the IR expression of the node's output, or a
list with one expression per output (``None`` for outputs it cannot produce).
"""

from __future__ import annotations

from typing import Callable, Dict

ConvertFn = Callable

#: ONNX op type -> converter.
CONVERTERS: Dict[str, ConvertFn] = {}

#: Ops whose outputs are constants whatever their inputs (shapes are static).
CONST_OUTPUT_OPS = frozenset({"Shape", "Size"})

#: Inputs (by position) that must be known at import time because they fix output shapes or
#: attributes of the IR op: shapes, axes, pads, slice bounds, scales.
STATIC_OPERANDS = {
    "Reshape": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 3), "Resize": (1, 2, 3), "Upsample": (1,),
    "Split": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Tile": (1,), "Expand": (1,), "ConstantOfShape": (0,),
    "ReduceMean": (1,), "ReduceSum": (1,), "ReduceMax": (1,), "ReduceMin": (1,), "ReduceProd": (1,),
    "Dropout": (2,),
}


def converter(*op_types: str):
    """Decorator: ``@converter("Relu")`` registers the function for those ONNX op types."""
    def register(fn):
        for op_type in op_types:
            if op_type in CONVERTERS:
                raise ValueError(f"converter for '{op_type}' is registered twice")
            CONVERTERS[op_type] = fn
        return fn
    return register


from . import elemwise, nn, quant, reduce, resize, tensor  # noqa: E402,F401  (registers every family)
