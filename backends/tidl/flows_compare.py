"""The same model through TI's two flows, side by side: what the TVM flow and the ORT flow each
offload, and where they differ (``tidlx partition --flow both``).

    both = compare_flows(mod, {"max_batch_size": 6})
    both.reports["tvm"], both.reports["ort"]      # PartitionReport of each flow
    both.differences                              # FlowDifference per layer one flow keeps on the host
    print("\\n".join(both.lines()))

The options apply to both flows (``flow`` itself is set per flow; giving it is an error). A layer
is compared by its name (the ONNX node name): ``host_in`` names the flow that keeps it on the
host, with that flow's reason; the other flow offloads it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...ir.errors import TidlxError
from .options import FLOW_OPTION, FLOWS

BOTH = "both"


@dataclass(frozen=True)
class FlowDifference:
    """A layer one flow keeps on the host while the other offloads it."""

    layer: str
    op: str
    host_in: str
    reason: str

    def describe(self) -> str:
        """The reason, led by the op and layer when it does not name them itself."""
        return self.reason if self.reason.startswith(self.op) else f"{self.op} '{self.layer}': {self.reason}"

    def to_dict(self) -> Dict[str, Any]:
        return {"layer": self.layer, "op": self.op, "host_in": self.host_in, "reason": self.reason}


@dataclass
class FlowComparison:
    model: Optional[str]
    reports: Dict[str, Any]
    differences: Tuple[FlowDifference, ...]

    def lines(self) -> List[str]:
        """One block per flow (verdict, headline, warnings; TI's summary line for the ORT flow),
        then the layers where the flows differ."""
        out: List[str] = []
        for flow in FLOWS:
            r = self.reports[flow]
            out.append(f"flow={flow}: {r.verdict()}")
            out.append(f"  {r.headline()}")
            if getattr(r, "ort", None) is not None:
                out.append(f"  {r.ort.summary_line()}")
            out += [f"  warning: {w}" for w in r.batch_warnings()]
        if not self.differences:
            out.append("the two flows keep the same layers on the host")
            return out
        for flow in FLOWS:
            other = next(f for f in FLOWS if f != flow)
            only = [d for d in self.differences if d.host_in == flow]
            if not only:
                continue
            out.append(f"on the host with flow={flow} only ({len(only)}; flow={other} offloads them):")
            out += [f"  {d.describe()}" for d in only]
        return out

    def to_dict(self) -> Dict[str, Any]:
        doc = {"model": self.model, "flows": {}, "differences": [d.to_dict() for d in self.differences]}
        for flow in FLOWS:
            r = self.reports[flow]
            d = r.to_dict()
            if getattr(r, "ort", None) is not None:
                d["ort"] = r.ort.to_dict()
            doc["flows"][flow] = d
        return doc

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False) + "\n"


def _host_layers(report) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for h in report.host_ops:
        if h.layer is not None:
            out.setdefault(h.layer, h)
    return out


def compare_flows(mod, options=None, strategy: str = "greedy", model_name: Optional[str] = None) -> FlowComparison:
    """Partitions ``mod`` with ``options`` in both flows (``flow.partition_for_tidl``) and lists the
    layers one keeps on the host and the other does not."""
    from .flow import partition_for_tidl

    given = options or {}
    named = [o for o in given if str(o).partition("=")[0].strip() == FLOW_OPTION] if isinstance(given, (list, tuple)) \
        else [k for k in given if k == FLOW_OPTION]
    if named:
        raise TidlxError(f"both flows are compared: the option {FLOW_OPTION} names one of them; leave it out")
    reports = {}
    for flow in FLOWS:
        if isinstance(given, (list, tuple)):
            opts: Any = list(given) + [f"{FLOW_OPTION}={flow}"]
        else:
            opts = dict(given, **{FLOW_OPTION: flow})
        _, reports[flow] = partition_for_tidl(mod, opts, strategy, model_name=model_name)
    hosts = {flow: _host_layers(reports[flow]) for flow in FLOWS}
    differences: List[FlowDifference] = []
    order: Sequence[str] = list(dict.fromkeys(list(hosts["tvm"]) + list(hosts["ort"])))
    for layer in order:
        where = [flow for flow in FLOWS if layer in hosts[flow]]
        if len(where) == 1:
            h = hosts[where[0]][layer]
            differences.append(FlowDifference(layer, h.op, where[0], h.reason))
    return FlowComparison(model_name, reports, tuple(differences))


__all__ = ["BOTH", "FlowComparison", "FlowDifference", "compare_flows"]
