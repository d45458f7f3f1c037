"""Where TIDL's ONNX Runtime import (the ORT flow) judges an ONNX node differently from the rules
of the TVM flow: one check per ONNX op type, applied to the calls the node imported to, after
the shared support rules (``rules/``). Everything else is the same oracle in both flows.

    reason = ort_node_reason("Squeeze", calls)   # None: the shared rules decide

* ``Squeeze``: at most 6 non-singleton input dims (TI's supported-operator table, 11.0; TIDL
  8.x's import took a 4-D input only, its log reading "op type - Squeeze, Number of input dims
  2 != 4 .. not supported by TIDL").
* ``ScatterND`` / ``ScatterElements``: TIDL runs them as its ScatterElements layer, whose
  constraints include constant all-zero ``data``; tidlx has no layer model for that layer, so
  the node stays on the host in either case and the reason says which case it is.

Other differences of the ORT flow are not per op: no batch limit (TIDL_RELAY_MAX_BATCH_SIZE is
the TVM import's), node or output names in the layer-name lists (``ort_flow.py``). The shared
rules already hold TI's per-op batch constraints of both flows (Slice on batch 1, no Concat
along the batch axis).
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence

import numpy as np

from ...ir.expr import Call, Constant
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


def _scatter(calls: Sequence[Call]) -> Optional[str]:
    call = next((c for c in calls if c.op_name == "scatter_nd"), None)
    if call is None:
        return None
    data = call.args[0]
    if not isinstance(data, Constant):
        what = f"'{data.name_hint}'" if hasattr(data, "name_hint") else "a computed tensor"
        return (f"{where(call)}: TIDL's ONNX Runtime import runs a scatter as its ScatterElements layer only on "
                f"constant all-zero data, and this one scatters into {what}")
    if np.any(np.asarray(data.data)):
        return (f"{where(call)}: TIDL's ONNX Runtime import runs a scatter as its ScatterElements layer only on "
                f"constant all-zero data, and this data has non-zero values")
    return (f"{where(call)}: TIDL's ONNX Runtime import may take this scatter as its ScatterElements layer (updates "
            f"of at most one channel, along the width); tidlx has no layer model for that layer and keeps it on "
            f"the host")


#: ONNX op type -> its ORT-flow check.
ORT_RULES: Dict[str, OrtRule] = {
    "Squeeze": _squeeze,
    "ScatterND": _scatter,
    "ScatterElements": _scatter,
}


def ort_node_reason(op_type: str, calls: Sequence[Call]) -> Optional[str]:
    """Why TIDL's ONNX Runtime import keeps a node of ``op_type`` (imported to ``calls``) on the host
    where the shared rules would not say so, or None."""
    rule = ORT_RULES.get(op_type)
    if rule is None or not calls:
        return None
    return rule(calls)


__all__ = ["ORT_RULES", "ort_node_reason"]
