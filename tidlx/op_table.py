"""What each op has: the coverage table of the op facets (``tidlx ops``).

Each package registers its own facets when it is imported (the emulator its kernels, the TIDL
backend its rules and layer types, the TVM backend its Relax lowerings (``tvm.lower``, without
importing apache-tvm), the ONNX frontend the op types that import to each op);
``load_facets`` imports them all, so the table shows everything tidlx knows about an op and
where each fact is defined.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
from typing import Any, Dict, List

from .ir.op import Op, declared_facets, get_op, list_ops

#: The packages that register facets, imported by ``load_facets``.
FACET_PACKAGES = ("tidlx.emulator", "tidlx.backends.tidl", "tidlx.backends.tvm",
                  "tidlx.frontends.onnx.converters")

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_facets() -> None:
    """Imports every package that registers facets (idempotent)."""
    for name in FACET_PACKAGES:
        importlib.import_module(name)


def where_defined(obj: Any) -> str:
    """``emulator/reference/op_nn.py:41`` for a function, so a reader can open it."""
    fn = inspect.unwrap(obj) if callable(obj) else obj
    try:
        path = inspect.getsourcefile(fn)
        line = inspect.getsourcelines(fn)[1]
    except (TypeError, OSError):
        return getattr(fn, "__qualname__", repr(fn))
    if path is None:
        return getattr(fn, "__qualname__", repr(fn))
    rel = os.path.relpath(path, _REPO_ROOT)
    return f"{rel if not rel.startswith('..') else path}:{line}"


def describe_facet(value: Any) -> Any:
    """A JSON-able form of a facet value: plain values as they are, functions by their place."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(v, (str, int, float, bool)) for v in value):
        return list(value)
    if isinstance(value, tuple) and hasattr(value, "_asdict"):  # a NamedTuple record
        return {k: describe_facet(v) for k, v in value._asdict().items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: describe_facet(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(value):
        return where_defined(value)
    return repr(value)


def op_record(op: Op) -> Dict[str, Any]:
    """One op's row: its definition and every facet it has."""
    return {"name": op.name, "inputs": op.num_inputs, "pattern": op.pattern,
            "defined": where_defined(op.type_rel),
            "facets": {key: describe_facet(op.get_attr(key)) for key in op.facet_keys()}}


def coverage() -> Dict[str, Any]:
    """``{"facets": {key: {description, owner, ops}}, "ops": [op_record, ...]}`` for every op."""
    load_facets()
    ops = [op_record(get_op(name)) for name in list_ops()]
    facets = {}
    for key, decl in sorted(declared_facets().items()):
        facets[key] = {"description": decl.description, "owner": decl.owner,
                       "ops": sum(1 for rec in ops if key in rec["facets"])}
    return {"facets": facets, "ops": ops}


def _cell(key: str, value: Any) -> str:
    if key == "onnx.op_types" and isinstance(value, list):
        return ", ".join(value)
    if key == "tidl.layer" and isinstance(value, str):
        return value
    return "yes"


def coverage_table(data: Dict[str, Any]):
    """The rich table ``tidlx ops`` prints: one row per op, one column per facet."""
    from rich.table import Table

    keys = list(data["facets"])
    table = Table(title=f"{len(data['ops'])} ops and their facets (what runs where)")
    table.add_column("op", no_wrap=True)
    for key in keys:
        table.add_column(key, overflow="fold")
    for rec in data["ops"]:
        table.add_row(rec["name"], *[_cell(k, rec["facets"][k]) if k in rec["facets"] else "-" for k in keys])
    table.add_row("[bold]ops with it[/bold]", *[f"[bold]{data['facets'][k]['ops']}[/bold]" for k in keys])
    return table


def facet_legend(data: Dict[str, Any]) -> List[str]:
    return [f"{key}: {info['description']} (registered by {info['owner']})" for key, info in data["facets"].items()]


__all__ = ["load_facets", "coverage", "coverage_table", "op_record", "describe_facet", "where_defined",
           "FACET_PACKAGES"]
