"""``tidlx diff-traces A B``: compares two folders of per-layer traces (debug_level >= 3) layer by layer
and names the first layer that differs.

    tidlx run out/model_tidl --input x.npz          # with -o debug_level=3 at compile: out/model_tidl_traces
    tidlx diff-traces out/model_tidl_traces device_traces/

Traces are paired by subgraph and data id (TI's names, TIDL-NUMERICS.md "Files and traces"), in the
order of the ``layer_info.txt`` of A (the execution order); without one, in data-id order. Exit status
0 when every trace is equal, 1 when one differs or is missing, 2 on an error.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from .ir import TidlxError

COMMAND_ORDER = 55

_TRACE = re.compile(r"^(?P<base>.*?)(?P<id>\d{4,})_(?P<n>\d{4,})_(?P<d1>\d{4,})_(?P<d2>\d{5,})_(?P<c>\d{5,})_"
                    r"(?P<w>\d{5,})x(?P<h>\d{5,})\.y$")
_INFO = re.compile(r"^(?P<base>.*)layer_info\.txt$")
_DTYPES = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u8", 8: "<i8"}


@dataclass
class TraceEntry:
    base: str
    data_id: int
    path: str
    dims: Tuple[int, ...]
    layer: Optional[int] = None
    name: str = ""
    element_type: Optional[int] = None


def read_trace_folder(folder: str) -> Dict[Tuple[str, int], TraceEntry]:
    if not os.path.isdir(folder):
        raise TidlxError(f"{folder}: no such folder" if not os.path.exists(folder) else f"{folder}: not a folder")
    traces: Dict[Tuple[str, int], TraceEntry] = {}
    infos = []
    for name in sorted(os.listdir(folder)):
        m = _TRACE.match(name)
        if m:
            key = (m.group("base"), int(m.group("id")))
            dims = tuple(int(m.group(k)) for k in ("n", "d1", "d2", "c", "h", "w"))
            traces[key] = TraceEntry(key[0], key[1], os.path.join(folder, name), dims)
        elif _INFO.match(name):
            infos.append(name)
    for name in infos:
        base = _INFO.match(name).group("base")
        path = os.path.join(folder, name)
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError as exc:
            raise TidlxError(f"{path}: cannot be read ({exc.strerror})") from None
        for i, line in enumerate(lines, 1):
            parts = line.split(" ", 4)
            try:
                layer, data_id, etype = int(parts[0]), int(parts[1]), int(parts[2])
            except (ValueError, IndexError):
                raise TidlxError(f"{path}:{i}: expected 'layer_id data_id element_type scale name', got "
                                 f"{line[:80]!r}") from None
            entry = traces.get((base, data_id))
            if entry is not None:
                entry.layer, entry.element_type = layer, etype
                entry.name = parts[4] if len(parts) > 4 else ""
    if not traces:
        raise TidlxError(f"{folder}: no trace files (<base>NNNN_NNNN_NNNN_NNNNN_NNNNN_NNNNNxNNNNN.y; run with "
                         f"debug_level 3 or more)")
    return traces


def _load(entry: TraceEntry) -> np.ndarray:
    try:
        with open(entry.path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise TidlxError(f"{entry.path}: cannot be read ({exc.strerror})") from None
    count = int(np.prod(entry.dims))
    dtype = np.dtype(_DTYPES.get(entry.element_type, "<u1"))
    if entry.element_type is None or len(raw) != count * dtype.itemsize:
        return np.frombuffer(raw, np.uint8)
    return np.frombuffer(raw, dtype)


@dataclass
class TraceDiff:
    compared: int
    first: Optional[str]       # the first differing layer, described; None: all equal
    missing: List[str]


def diff_traces(a: str, b: str) -> TraceDiff:
    ta, tb = read_trace_folder(a), read_trace_folder(b)
    order = sorted(ta.values(), key=lambda e: (e.base, e.layer if e.layer is not None else 1 << 30, e.data_id))
    missing = [f"{os.path.basename(e.path)} (only in {a})" for e in order if (e.base, e.data_id) not in tb]
    missing += [f"{os.path.basename(e.path)} (only in {b})" for k, e in sorted(tb.items()) if k not in ta]
    compared = 0
    for ea in order:
        eb = tb.get((ea.base, ea.data_id))
        if eb is None:
            continue
        compared += 1
        what = (f"layer {ea.layer} '{ea.name}'" if ea.layer is not None else "the layer") + \
            f" (subgraph trace {ea.base!r}, data id {ea.data_id})"
        if ea.dims != eb.dims:
            return TraceDiff(compared, f"{what}: dims {ea.dims} in A, {eb.dims} in B", missing)
        if eb.element_type is None:
            eb.element_type = ea.element_type
        va, vb = _load(ea), _load(eb)
        if va.shape != vb.shape:
            return TraceDiff(compared, f"{what}: {va.nbytes} bytes in A, {vb.nbytes} in B", missing)
        if not np.array_equal(va, vb):
            diff = va.astype(np.float64) != vb.astype(np.float64)
            first = int(np.argmax(diff))
            big = float(np.max(np.abs(va.astype(np.float64) - vb.astype(np.float64))))
            return TraceDiff(compared, f"{what}: {int(diff.sum())} of {va.size} values differ (first at element "
                                       f"{first}: {va[first]} vs {vb[first]}; largest difference {big:g})", missing)
    return TraceDiff(compared, None, missing)


def cmd_diff_traces(args) -> int:
    from .ir.text import printable

    result = diff_traces(args.a, args.b)
    for line in result.missing:
        print(printable(f"missing: {line}"))
    if result.first is not None:
        print(printable(f"first difference: {result.first}"))
        return 1
    print(printable(f"{result.compared} trace(s) equal" + (f", {len(result.missing)} missing" if result.missing
                                                           else "")))
    return 1 if result.missing else 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    from .cli import subcommand

    p = subcommand(
        subparsers, "diff-traces", "compare two folders of per-layer traces and name the first layer that differs",
        "Compare the per-layer fixed-point traces of two runs (debug_level 3 or more: tidlx's, or a device's "
        "with TI's names) layer by layer in execution order, and name the first layer whose values differ. "
        "Exit status 0: all equal; 1: a difference or a missing trace.",
        ["tidlx diff-traces out/model_tidl_traces device_traces/"])
    p.add_argument("a", metavar="A", help="a trace folder (its layer_info.txt gives the order)")
    p.add_argument("b", metavar="B", help="the other trace folder")
    p.set_defaults(func=cmd_diff_traces)
    return p
