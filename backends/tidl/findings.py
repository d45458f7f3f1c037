"""Why a layer of a quantized model lost accuracy: the causes ``tidlx compare`` names, worst first.

    found = findings(qmodel, layer_figures, observed_ranges)   # compare.py calls it
    found[0].kind, found[0].layer, found[0].message

Three causes that a per-layer SQNR alone does not explain, each read from the quantized model and the
compared frames (no extra run):

* ``saturation``: the compared frames reach beyond the range the tensor was calibrated for, and its
  integers sit at the type's extremes (a held-out frame brighter, larger or stranger than the
  calibration frames); the finding says how far beyond and what share of the values saturate.
* ``global-average-pool multiplier``: TIDL averages an H x W map with the integer multiplier
  ``round(2^Q / (H W))`` (docs/numerics.md §8.6, TI's ``TIDL_refPoolingProcess``), which scales the
  average by ``m H W / 2^Q``: off by more than 1% on large maps, and 0 (the output is all zeros) when
  ``H W > 2^(Q+1)``.
* ``per-channel weight range``: one weight scale for all output channels (every layer but per-channel
  depthwise ones) is set by the channel of the largest weight, so channels of small weights keep few
  of the weights' bits; the finding counts the channels left with fewer than half of them.

Each finding belongs to a layer; findings are ordered by that layer's SQNR (its own error with
``--isolated``, else the accumulated one), lowest first, then by kind, subgraph and layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from ...emulator.fixed.arith import global_average_pool_multiplier
from .quantize import QuantizedModel

#: A saturation finding needs at least this share of a tensor's integers at the type's extremes (%).
SATURATION_MIN_PCT = 0.01
#: A global average pool's scale error worth a finding (relative).
POOL_SCALE_ERROR = 0.01
#: Weighted layer types with one weight scale per layer (unless per-channel).
_WEIGHTED = ("Conv", "Deconv", "InnerProduct", "BatchNorm")


@dataclass(frozen=True)
class Finding:
    """One cause of error at one layer: ``kind`` (``saturation``, ``global-average-pool multiplier``,
    ``per-channel weight range``), where, the layer's SQNR the order follows, and a sentence."""

    kind: str
    subgraph: str
    layer: str
    index: int
    sqnr_db: float
    message: str

    def to_dict(self) -> Dict[str, object]:
        return {"kind": self.kind, "subgraph": self.subgraph, "layer": self.layer,
                "sqnr_db": self.sqnr_db if math.isfinite(self.sqnr_db) else None, "message": self.message}


def _saturation(qmodel: QuantizedModel, sub_name: str, layer, saturated_pct: Optional[float],
                observed: Mapping[Tuple[str, int], Tuple[float, float]]) -> Optional[str]:
    if saturated_pct is None or saturated_pct < SATURATION_MIN_PCT or not layer.outputs:
        return None
    tid = layer.outputs[0]
    seen = observed.get((sub_name, tid))
    calibrated = qmodel.calibration[sub_name].tensors.get(tid)
    if seen is None or calibrated is None:
        return None
    lo, hi = seen
    beyond = []
    if hi > calibrated.max and calibrated.max > 0:
        beyond.append(f"up to {hi:.4g} where the calibrated range ends at {calibrated.max:.4g} "
                      f"({hi / calibrated.max:.2f}x)")
    if lo < calibrated.min and calibrated.min < 0:
        beyond.append(f"down to {lo:.4g} where it starts at {calibrated.min:.4g} ({lo / calibrated.min:.2f}x)")
    if not beyond:
        return None
    return (f"the compared frames reach {' and '.join(beyond)}: {saturated_pct:.2g}% of the integers saturate "
            f"(calibrate on frames like these, or widen the range)")


def _pool_multiplier(sub, layer) -> Optional[str]:
    attrs = layer.attrs
    if layer.type != "Pool" or attrs.get("pool_type") != "Avg" or not attrs.get("global_pool") or "q" not in attrs:
        return None
    shape = sub.tensors[layer.inputs[0]].shape
    if len(shape) != 4:
        return None
    area = int(shape[2]) * int(shape[3])
    q = int(attrs["q"])
    multiplier = global_average_pool_multiplier(shape[2], shape[3], q)   # the runtime's own rule
    factor = multiplier * area / float(1 << q)
    if multiplier == 0:
        return (f"a {'x'.join(str(d) for d in shape[2:])} map ({area} values) is averaged with the multiplier "
                f"round(2^{q} / {area}) = 0: the output is all zeros")
    if abs(factor - 1.0) <= POOL_SCALE_ERROR:
        return None
    return (f"a {'x'.join(str(d) for d in shape[2:])} map ({area} values) is averaged with the multiplier "
            f"round(2^{q} / {area}) = {multiplier}, which scales the mean by {factor:.3f} "
            f"({abs(factor - 1.0) * 100:.0f}% {'high' if factor > 1 else 'low'})")


def _weight_range(layer) -> Optional[str]:
    if layer.type not in _WEIGHTED or layer.weights is None or layer.per_channel or layer.weights.ndim < 1:
        return None
    w = np.abs(np.asarray(layer.weights, np.int64))
    axis = 1 if layer.type == "Deconv" else 0
    per_channel = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1).max(axis=1) if w.ndim > 1 else w
    if per_channel.size < 2:
        return None
    half = layer.weight_bits // 2
    few = int(np.count_nonzero(per_channel < (1 << (half - 1))))   # fewer than half the bits, sign aside
    if few == 0:
        return None
    smallest = int(per_channel.min())
    return (f"one weight scale for {per_channel.size} channels: {few} of them keep fewer than {half} of the "
            f"{layer.weight_bits} bits (the smallest channel's largest weight is {smallest} of "
            f"{int(per_channel.max())})"
            + ("; 16-bit weights (params_16bit_names) keep more of them" if layer.weight_bits == 8 else "")
            + "; TI's per-channel style (quantization_scale_type 4) would keep them")


def findings(qmodel: QuantizedModel, layers, observed: Mapping[Tuple[str, int], Tuple[float, float]]
             ) -> Tuple[Finding, ...]:
    """The findings of a comparison: ``layers`` are its ``LayerComparison`` records, ``observed`` the float
    (min, max) of each compared tensor over the compared frames, by (subgraph, tensor id)."""
    out: List[Finding] = []
    for record in layers:
        sub = qmodel.subgraphs[record.subgraph]
        layer = sub.layers[record.index]
        sqnr = record.isolated_sqnr_db if record.isolated_sqnr_db is not None else record.sqnr_db
        order = sqnr if not math.isnan(sqnr) else math.inf
        for kind, message in (("saturation", _saturation(qmodel, record.subgraph, layer, record.saturated_pct,
                                                          observed)),
                              ("global-average-pool multiplier", _pool_multiplier(sub, layer)),
                              ("per-channel weight range", _weight_range(layer))):
            if message is not None:
                out.append(Finding(kind, record.subgraph, layer.name, layer.index, order, message))
    return tuple(sorted(out, key=lambda f: (f.sqnr_db, f.kind, f.subgraph, f.layer, f.index)))


__all__ = ["Finding", "findings", "SATURATION_MIN_PCT", "POOL_SCALE_ERROR"]
