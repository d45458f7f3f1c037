"""Where TIDL's ONNX Runtime import (the ORT flow) judges an ONNX node differently from the rules
of the TVM flow: one check per ONNX op type, applied to the calls the node imported to, after
the shared support rules (``rules/``). Everything else is the same oracle in both flows.

    reason = ort_node_reason("Squeeze", calls)   # None: the shared rules decide

* ``Squeeze``: at most 6 non-singleton input dims (TI's supported-operator table, 11.0; TIDL
  8.x's import took a 4-D input only, its log reading "op type - Squeeze, Number of input dims
  2 != 4 .. not supported by TIDL").
* ``ScatterND``: TIDL runs it as its ScatterElements layer (the shared rule of ``scatter_nd``
  holds TI's constraints); the node is judged by its scatter_nd alone (``ORT_LAYER_OPS``): the
  transposition of its int64 indices that the IR adds is no TIDL layer. ScatterElements does
  not import into tidlx.

Other differences of the ORT flow are not per op: no batch limit (TIDL_RELAY_MAX_BATCH_SIZE is
the TVM import's), node or output names in the layer-name lists (``ort_flow.py``). The shared
rules already hold TI's per-op batch constraints of both flows (Slice on batch 1, no Concat
along the batch axis).
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence

from ...ir.expr import Call
from ...ir.types import TensorType
from .rules import where

OrtRule = Callable[[Sequence[Call]], Optional[str]]


def _squeeze(calls: Sequence[Call]) -> Optional[str]:
    """TI's supported-operator table (11.0) limits Squeeze to at most 6 non-singleton input dims
    (TIDL 8.x's import took a 4-D input only: "Number of input dims 2 != 4")."""
    call = next((c for c in calls if c.op_name == "squeeze"), calls[0])
    t = call.args[0].checked_type if call.args else None
    if isinstance(t, TensorType) and sum(int(d) != 1 for d in t.shape) > 6:
        return (f"{where(call)}: the input has more than 6 non-singleton dims (TI's supported-operator table, "
                f"Squeeze: \"Number of non-singleton variable input dimensions must be less than <= 6\")")
    return None


#: ONNX op type -> its ORT-flow check.
ORT_RULES: Dict[str, OrtRule] = {
    "Squeeze": _squeeze,
}

#: ONNX op type -> the IR op that is the node's TIDL layer, where the node imports to more calls
#: than that one: the node's other calls (index transpositions) are the IR's form of the same
#: node and take that call's verdict (supported with it, or on the host for its reason).
ORT_LAYER_OPS: Dict[str, str] = {
    "ScatterND": "scatter_nd",
}


def ort_node_reason(op_type: str, calls: Sequence[Call]) -> Optional[str]:
    """Why TIDL's ONNX Runtime import keeps a node of ``op_type`` (imported to ``calls``) on the host
    where the shared rules would not say so, or None."""
    rule = ORT_RULES.get(op_type)
    if rule is None or not calls:
        return None
    return rule(calls)


__all__ = ["ORT_RULES", "ORT_LAYER_OPS", "ort_node_reason"]
