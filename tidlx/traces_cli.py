"""``tidlx diff-traces A B``: compares two folders of per-layer traces (debug_level >= 3) layer by layer
and names the first layer that differs. Either folder may be tidlx's (``tidlx run DIR``) or one written by
TI's tools (PC emulation or the device, ``/tmp`` after a run with debug_level 3 or 4).

    tidlx run out/model_tidl --input x.npz --debug-level 4 --trace-dir tidlx_traces
    tidlx diff-traces ti_traces/ tidlx_traces/

What is read (docs/artifacts.md §5):

* traces by TI's names: ``[C7x_<k>_]tidl_trace_<graph>_<dataId>_<batch>_<d1>_<d2>_<C>_<W>x<H>`` then ``.y``
  (raw fixed point, dense, [batch, d1, d2, C, H, W]) or ``_float.bin`` (float32, dequantized); the fields
  zero-padded to 4, 4, 4, 5, 5, 5 (or 6), 5 (or 6) digits. Files of one tensor written by several cores
  (``C7x_<k>_``) are joined along the height in core order, as TI's stitch script joins them;
* ``*.layer_info.txt``: TI's ``layerIdx dataIdx name`` a line (``subgraph_<N>_tidl_net.bin.layer_info.txt``
  from TI's artifacts, ``tidl_subgraph<N>_net.bin.layer_info.txt`` from tidlx), for the layer names and
  the execution order;
* ``tidl_trace_<graph>_tensor_info.txt``: tidlx's ``dataIdx elementType tensorScale zeroPoint`` a line,
  which gives a ``.y`` file its element type and scale.

A ``.y`` file's element size is its size over the element count of the dims in its name (1, 2 or 4
bytes). Its type comes from its folder's tensor_info; without one the ``_float.bin`` of the same tensor
is compared instead; without that, the other folder's type of the same size; else a signed type of the
size (S8, S16; 4 bytes: F32), and the table says so.

Traces are paired by graph and data id, in the execution order of A's layer_info (B's when A has none;
else data-id order). Per trace: the element count, how many elements differ, the largest difference in
LSBs (in units of tensorScale, when a scale is known), TI's metrics SNR_dB (A as the reference, capped at
100), MeanAbsDiff and MaxAbsDiff (in real values when both sides have them, else in raw integers). Exit
status 0 when every trace is equal, 1 when one differs or is missing, 2 on an error (a name, a size, a
layer_info or tensor_info line that does not parse: ``tidlx: error:`` naming the file and line).
"""

from __future__ import annotations

import argparse
import math
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from .ir import TidlxError

COMMAND_ORDER = 55

#: TI's trace name: an optional core prefix, the graph name, then data id, batch, d1, d2, C, W x H.
_TRACE = re.compile(r"^(?:C7[xX]_(?P<core>\d+)_)?tidl_trace_(?P<graph>.+?)_(?P<id>\d{4,})_(?P<n>\d{4,})_"
                    r"(?P<d1>\d{4,})_(?P<d2>\d{5,})_(?P<c>\d{5,})_(?P<w>\d{5,})x(?P<h>\d{5,})"
                    r"(?P<kind>_float\.bin|\.y)$")
_TRACE_FORM = "[C7x_<k>_]tidl_trace_<graph>_NNNN_NNNN_NNNN_NNNNN_NNNNN_NNNNNxNNNNN.y (or _float.bin)"
_LAYER_INFO = ".layer_info.txt"
_LAYER_INFO_GRAPH = (re.compile(r"^subgraph_(\d+)_tidl_net\.bin\.layer_info\.txt$"),     # TI's artifacts
                     re.compile(r"^tidl_subgraph(\d+)_net\.bin\.layer_info\.txt$"))      # tidlx's traces
_TENSOR_INFO = re.compile(r"^tidl_trace_(?P<graph>.+)_tensor_info\.txt$")

#: TI's element type ids (eTIDL_ElementType) and their little-endian numpy types.
_TYPES = {0: ("U8", "<u1"), 1: ("S8", "<i1"), 2: ("U16", "<u2"), 3: ("S16", "<i2"), 4: ("U32", "<u4"),
          5: ("S32", "<i4"), 6: ("F32", "<f4"), 7: ("U64", "<u8"), 8: ("S64", "<i8")}
_ASSUMED = {1: 1, 2: 3, 4: 6}          # element size -> the type read when nothing says (S8, S16, F32)
_F32 = 6


@dataclass
class TraceFile:
    path: str
    core: Optional[int]
    dims: Tuple[int, ...]          # N, D1, D2, C, H, W


@dataclass
class Trace:
    """One tensor's traces in one folder: its raw ``.y`` files and its ``_float.bin`` files (one each,
    or one per core), and what the folder's layer_info and tensor_info say of it."""

    graph: str
    data_id: int
    raw: List[TraceFile] = field(default_factory=list)
    floats: List[TraceFile] = field(default_factory=list)
    layer: Optional[int] = None
    name: str = ""
    element_type: Optional[int] = None
    scale: Optional[float] = None
    zero_point: int = 0
    info_path: str = ""

    @property
    def files(self) -> List[TraceFile]:
        return self.raw or self.floats

    @property
    def dims(self) -> Tuple[int, ...]:
        return _joined_dims(self.files)

    @property
    def count(self) -> int:
        return math.prod(self.dims)

    @property
    def label(self) -> str:
        return os.path.basename(self.files[0].path)


@dataclass
class TraceFolder:
    path: str
    traces: Dict[Tuple[str, int], Trace]
    layer_infos: Dict[str, str]         # graph -> layer_info file
    tensor_infos: Dict[str, str]        # graph -> tensor_info file

    def describe(self) -> str:
        graphs = sorted({g for g, _ in self.traces}, key=_natural)
        infos = ", ".join(os.path.basename(p) for _, p in sorted(self.layer_infos.items())) or "none"
        tinfos = ", ".join(os.path.basename(p) for _, p in sorted(self.tensor_infos.items())) or "none"
        cores = sorted({f.core for t in self.traces.values() for f in t.raw + t.floats if f.core is not None})
        return (f"{self.path}: {len(self.traces)} trace(s) of {', '.join(graphs)}"
                + (f" (cores {', '.join(map(str, cores))} joined along the height)" if cores else "")
                + f"; layer_info: {infos}; tensor_info: {tinfos}")


def _x(dims: Tuple[int, ...]) -> str:
    return "x".join(map(str, dims))


def _natural(text: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def _joined_dims(files: List[TraceFile]) -> Tuple[int, ...]:
    dims = list(files[0].dims)
    dims[4] = sum(f.dims[4] for f in files)
    return tuple(dims)


def _read_lines(path: str) -> List[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except OSError as exc:
        raise TidlxError(f"{path}: cannot be read ({exc.strerror})") from None


def _show(line: str) -> str:
    return repr(line if len(line) <= 80 else line[:80] + "...")


def _layer_info_graph(name: str, graphs: List[str], path: str) -> str:
    for pattern in _LAYER_INFO_GRAPH:
        m = pattern.match(name)
        if m:
            return f"subgraph_{int(m.group(1))}"
    if len(graphs) == 1:
        return graphs[0]
    raise TidlxError(f"{path}: cannot tell which graph's traces it names (the folder has traces of "
                     f"{', '.join(graphs)}); name it subgraph_<N>_tidl_net.bin.layer_info.txt")


def _parse_layer_info(path: str) -> Dict[int, Tuple[int, str]]:
    """TI's layer_info: ``layerIdx dataIdx name`` a line (the name is the rest of the line); data id ->
    (layer index, name); the first line of a data id counts."""
    out: Dict[int, Tuple[int, str]] = {}
    for i, line in enumerate(_read_lines(path), 1):
        if not line.strip():
            continue
        parts = line.split(None, 2)
        if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
            raise TidlxError(f"{path}:{i}: not a layer_info line 'layerIdx dataIdx name': {_show(line)}")
        out.setdefault(int(parts[1]), (int(parts[0]), parts[2].strip()))
    return out


def _parse_tensor_info(path: str) -> Dict[int, Tuple[int, float, int]]:
    """tidlx's tensor_info: ``dataIdx elementType tensorScale zeroPoint`` a line after ``#`` comments."""
    out: Dict[int, Tuple[int, float, int]] = {}
    for i, line in enumerate(_read_lines(path), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        try:
            if len(parts) != 4:
                raise ValueError
            data_id, etype, scale, zero = int(parts[0]), int(parts[1]), float(parts[2]), int(parts[3])
            if data_id < 0 or etype not in _TYPES or not (math.isfinite(scale) and scale > 0):
                raise ValueError
        except ValueError:
            raise TidlxError(f"{path}:{i}: not a tensor_info line 'dataIdx elementType tensorScale zeroPoint' "
                             f"(elementType 0..8, tensorScale finite and > 0): {_show(line)}") from None
        out[data_id] = (etype, scale, zero)
    return out


def _add_file(traces: Dict[Tuple[str, int], Trace], path: str, m: re.Match) -> None:
    dims = tuple(int(m.group(k)) for k in ("n", "d1", "d2", "c", "h", "w"))
    if 0 in dims:
        raise TidlxError(f"{path}: the dims in its name ({_x(dims)}) hold no element")
    key = (m.group("graph"), int(m.group("id")))
    trace = traces.setdefault(key, Trace(*key))
    files = trace.floats if m.group("kind") == "_float.bin" else trace.raw
    core = int(m.group("core")) if m.group("core") is not None else None
    for other in files:
        if other.core == core or (other.core is None) != (core is None):
            raise TidlxError(f"{path}: a second trace of {key[0]} data id {key[1]} beside "
                             f"{os.path.basename(other.path)}")
    files.append(TraceFile(path, core, dims))


def _check_cores(trace: Trace) -> None:
    for files in (trace.raw, trace.floats):
        files.sort(key=lambda f: -1 if f.core is None else f.core)
        first = files[0] if files else None
        for f in files[1:]:
            if f.dims[:4] + f.dims[5:] != first.dims[:4] + first.dims[5:]:
                raise TidlxError(f"{f.path}: core {f.core}'s part has dims {_x(f.dims)}, core {first.core}'s "
                                 f"{_x(first.dims)}: only the height may differ (cores are joined along it)")
    if trace.raw and trace.floats and _joined_dims(trace.raw) != _joined_dims(trace.floats):
        raise TidlxError(f"{trace.floats[0].path}: dims {_x(_joined_dims(trace.floats))}, those of its .y "
                         f"{_x(_joined_dims(trace.raw))}")


def read_trace_folder(folder: str) -> TraceFolder:
    """The traces of a folder (tidlx's or TI's names) with its layer_info and tensor_info."""
    if not os.path.isdir(folder):
        raise TidlxError(f"{folder}: no such folder" if not os.path.exists(folder) else f"{folder}: not a folder")
    traces: Dict[Tuple[str, int], Trace] = {}
    layer_infos, tensor_infos = [], []
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        raise TidlxError(f"{folder}: cannot be read ({exc.strerror})") from None
    for name in names:
        path = os.path.join(folder, name)
        if name.endswith(_LAYER_INFO):
            layer_infos.append(name)
        elif _TENSOR_INFO.match(name):
            tensor_infos.append(name)
        elif "tidl_trace" in name and (name.endswith(".y") or name.endswith("_float.bin")):
            m = _TRACE.match(name)
            if m is None:
                raise TidlxError(f"{path}: not a trace name TI's tools write ({_TRACE_FORM})")
            _add_file(traces, path, m)
    if not traces:
        raise TidlxError(f"{folder}: no trace files ({_TRACE_FORM}; run with debug_level 3 or more)")
    for trace in traces.values():
        _check_cores(trace)
    graphs = sorted({g for g, _ in traces}, key=_natural)
    by_graph: Dict[str, str] = {}
    for name in layer_infos:
        path = os.path.join(folder, name)
        graph = _layer_info_graph(name, graphs, path)
        if graph in by_graph:
            raise TidlxError(f"{path}: a second layer_info of {graph} beside {os.path.basename(by_graph[graph])}")
        by_graph[graph] = path
        for data_id, (layer, lname) in _parse_layer_info(path).items():
            trace = traces.get((graph, data_id))
            if trace is not None:
                trace.layer, trace.name = layer, lname
    tensor_by_graph: Dict[str, str] = {}
    for name in tensor_infos:
        path = os.path.join(folder, name)
        graph = _TENSOR_INFO.match(name).group("graph")
        tensor_by_graph[graph] = path
        for data_id, (etype, scale, zero) in _parse_tensor_info(path).items():
            trace = traces.get((graph, data_id))
            if trace is not None:
                trace.element_type, trace.scale, trace.zero_point, trace.info_path = etype, scale, zero, path
    return TraceFolder(folder, traces, by_graph, tensor_by_graph)


# -- values -----------------------------------------------------------------------------------------

def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise TidlxError(f"{path}: cannot be read ({exc.strerror})") from None


def _element_size(f: TraceFile) -> int:
    """A ``.y`` file's bytes per element: its size over the element count of its name's dims."""
    count = math.prod(f.dims)
    try:
        size = os.path.getsize(f.path)
    except OSError as exc:
        raise TidlxError(f"{f.path}: cannot be read ({exc.strerror})") from None
    if size % count or size // count not in (1, 2, 4):
        raise TidlxError(f"{f.path}: {size} bytes for the {count} elements of the dims in its name "
                         f"({_x(f.dims)}): not 1, 2 or 4 bytes an element (truncated?)")
    return size // count


def _joined(files: List[TraceFile], dtype: np.dtype, what: str) -> np.ndarray:
    parts = []
    for f in files:
        raw = _read_bytes(f.path)
        count = math.prod(f.dims)
        if len(raw) != count * dtype.itemsize:
            raise TidlxError(f"{f.path}: {len(raw)} bytes, {count * dtype.itemsize} expected for {count} elements "
                             f"of {what} (truncated?)")
        parts.append(np.frombuffer(raw, dtype).reshape(f.dims))
    return (parts[0] if len(parts) == 1 else np.concatenate(parts, axis=4)).reshape(-1)


@dataclass
class Values:
    """One side of a comparison: raw integers (centred on the zero point) and/or real values."""

    q: Optional[np.ndarray]
    real: Optional[np.ndarray]
    scale: Optional[float]          # real = q / scale
    how: str
    from_float_bin: bool = False
    assumed: bool = False


def _values(t: Trace, other: Optional[Trace], other_label: str) -> Values:
    if t.raw and t.element_type is not None:
        etype, scale, zero, how, borrowed = t.element_type, t.scale, t.zero_point, _TYPES[t.element_type][0], False
    elif t.floats:
        real = _joined(t.floats, np.dtype("<f4"), "float32").astype(np.float64)
        return Values(None, real, t.scale, "_float.bin", from_float_bin=True)
    else:
        size = _element_size(t.raw[0])
        if other is not None and other.element_type is not None and \
                np.dtype(_TYPES[other.element_type][1]).itemsize == size:
            etype, scale, zero = other.element_type, other.scale, other.zero_point
            how, borrowed = f"{_TYPES[etype][0]} as in {other_label}", True
        else:
            etype, scale, zero, borrowed = _ASSUMED[size], None, 0, False
            how = f"{_TYPES[etype][0]} assumed"
    dtype = np.dtype(_TYPES[etype][1])
    what = f"{_TYPES[etype][0]} ({'the other folder' if borrowed else os.path.basename(t.info_path) or 'assumed'})"
    values = _joined(t.raw, dtype, what)
    if etype == _F32:
        return Values(None, values.astype(np.float64), None, how, assumed="assumed" in how)
    q = values.astype(np.int64) - zero
    return Values(q, q / scale if scale else None, scale, how, assumed="assumed" in how)


@dataclass
class Row:
    graph: str
    data_id: int
    layer: Optional[int]
    name: str
    elements: int
    name_b: str = ""                    # B's name of the tensor, where it is not A's
    differ: Optional[int] = None        # None: not compared
    max_lsb: Optional[int] = None
    snr: Optional[float] = None
    mean_abs: Optional[float] = None
    max_abs: Optional[float] = None
    how: str = ""
    problem: str = ""                   # dims or sizes that differ, or why the values cannot be compared
    first: str = ""                     # the first differing element, described
    assumed: bool = False

    @property
    def differs(self) -> bool:
        return bool(self.problem) or bool(self.differ)

    def describe(self) -> str:
        who = f"layer {self.layer} '{self.name}'" if self.layer is not None else f"data id {self.data_id}"
        where = f" ({self.graph}, data id {self.data_id})"
        if self.problem:
            return f"{who}{where}: {self.problem}"
        lsb = f"{self.max_lsb} LSB, " if self.max_lsb is not None else ""
        return (f"{who}{where}: {self.differ} of {self.elements} values differ (first at element {self.first}; "
                f"largest difference {lsb}MaxAbsDiff {self.max_abs:g})")


def snr_db(ref: np.ndarray, test: np.ndarray) -> float:
    """TI's SNR_dB: 10 log10(sum ref^2 / sum (ref - test)^2), capped at 100."""
    with np.errstate(all="ignore"):
        noise = float(np.sum((ref - test) ** 2))
        signal = float(np.sum(ref ** 2))
        if noise == 0:
            return 100.0
        if signal == 0:
            return float("-inf")
        return min(100.0, 10 * math.log10(signal / noise))


def _compare(row: Row, va: Values, vb: Values, dims: Tuple[int, ...]) -> None:
    row.assumed = va.assumed or vb.assumed
    row.how = va.how if va.how == vb.how else f"{va.how} | {vb.how}"
    if va.q is not None and vb.q is not None and va.scale == vb.scale:
        lsb = np.abs(va.q - vb.q)
        differ = lsb != 0
        row.max_lsb = int(lsb.max())
        ma, mb = (va.real, vb.real) if va.real is not None and vb.real is not None else \
            (va.q.astype(np.float64), vb.q.astype(np.float64))
        show = (va.q, vb.q)
    elif va.real is not None and vb.real is not None:
        ma, mb = va.real, vb.real
        scale = va.scale or vb.scale
        with np.errstate(all="ignore"):
            delta = np.abs(ma - mb)
            if scale:
                lsb = np.rint(delta * scale)
                differ = ~((ma == mb) | (lsb == 0) | (np.isnan(ma) & np.isnan(mb)))
                finite = lsb[np.isfinite(lsb)]
                row.max_lsb = int(finite.max()) if finite.size else None
            elif va.from_float_bin or vb.from_float_bin:     # float32 rounding of a dequantized value
                tol = 4 * np.finfo(np.float32).eps * np.maximum(np.abs(ma), np.abs(mb))
                differ = ~((ma == mb) | (delta <= tol) | (np.isnan(ma) & np.isnan(mb)))
            else:
                differ = ~((ma == mb) | (np.isnan(ma) & np.isnan(mb)))
        show = (ma, mb)
    else:
        lacking = " and ".join(f"{k}'s values ({v.how})" for k, v in (("A", va), ("B", vb)) if v.real is None)
        row.problem = (f"cannot compare: A's values are {va.how}, B's {vb.how}; {lacking} have no tensorScale to "
                       f"give real values (level-4 traces give a _float.bin)")
        return
    row.differ = int(np.count_nonzero(differ))
    with np.errstate(all="ignore"):
        delta = np.abs(ma - mb)
        row.snr = snr_db(ma, mb)
        row.mean_abs = float(np.mean(delta))
        row.max_abs = float(np.max(delta))
    if row.differ:
        i = int(np.argmax(differ))
        at = ",".join(str(int(x)) for x in np.unravel_index(i, dims))
        row.first = f"{i} [n,d1,d2,c,h,w = {at}]: {show[0][i]:.9g} vs {show[1][i]:.9g}"


@dataclass
class TraceDiff:
    a: TraceFolder
    b: TraceFolder
    rows: List[Row]
    missing: List[str]

    @property
    def first(self) -> Optional[Row]:
        return next((r for r in self.rows if r.differs), None)

    @property
    def compared(self) -> int:
        return len(self.rows)


def diff_traces(a: str, b: str) -> TraceDiff:
    fa, fb = read_trace_folder(a), read_trace_folder(b)
    ta, tb = fa.traces, fb.traces

    def order(key):
        ea, eb = ta.get(key), tb.get(key)
        layer = ea.layer if ea is not None and ea.layer is not None else \
            eb.layer if eb is not None and eb.layer is not None else None
        a_first = 0 if ea is not None and ea.layer is not None else 1
        return (_natural(key[0]), a_first if layer is not None else 2, layer if layer is not None else 0, key[1])

    missing = [f"{ta[k].label} (only in {a})" for k in sorted(ta, key=order) if k not in tb]
    missing += [f"{tb[k].label} (only in {b})" for k in sorted(tb, key=order) if k not in ta]
    rows = []
    for key in sorted((k for k in ta if k in tb), key=order):
        ea, eb = ta[key], tb[key]
        layer = ea.layer if ea.layer is not None else eb.layer
        name = ea.name if ea.layer is not None else eb.name
        row = Row(key[0], key[1], layer, name, ea.count)
        if ea.layer is not None and eb.layer is not None and ea.name != eb.name:
            row.name_b = eb.name
        if ea.dims != eb.dims:
            row.problem = f"dims {_x(ea.dims)} in A, {_x(eb.dims)} in B"
        else:
            _compare(row, _values(ea, eb, "B"), _values(eb, ea, "A"), ea.dims)
        rows.append(row)
    return TraceDiff(fa, fb, rows, missing)


# -- the command ----------------------------------------------------------------------------------

def _cell(value, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "snr":
        return "inf" if value == math.inf else "-inf" if value == -math.inf else f"{value:.2f}"
    if kind == "float":
        return f"{value:.4g}"
    return str(value)


def table(result: TraceDiff) -> List[str]:
    head = ("graph", "layer", "dataIdx", "elements", "differ", "max_LSB", "SNR_dB", "MeanAbsDiff", "MaxAbsDiff",
            "values", "name")
    cells = [head]
    for r in result.rows:
        differ = "dims" if r.problem.startswith("dims") else "n/a" if r.problem else _cell(r.differ, "int")
        cells.append((r.graph, _cell(r.layer, "int"), str(r.data_id), str(r.elements), differ,
                      _cell(r.max_lsb, "int"), _cell(r.snr, "snr"), _cell(r.mean_abs, "float"),
                      _cell(r.max_abs, "float"), r.how, r.name + (f"  [B: {r.name_b}]" if r.name_b else "")))
    widths = [max(len(c[i]) for c in cells) for i in range(len(head) - 1)]
    lines = []
    for c in cells:
        parts = [c[0].ljust(widths[0])] + [c[i].rjust(widths[i]) for i in range(1, 9)] + [c[9].ljust(widths[9])]
        lines.append("  ".join(parts + [c[10]]).rstrip())
    return lines


def cmd_diff_traces(args) -> int:
    from .ir.text import printable

    result = diff_traces(args.a, args.b)
    print(printable(f"A: {result.a.describe()}"))
    print(printable(f"B: {result.b.describe()}"))
    for line in table(result):
        print(printable(line))
    for line in result.missing:
        print(printable(f"missing: {line}"))
    assumed = sum(r.assumed for r in result.rows)
    if assumed:
        print(printable(f"note: {assumed} trace(s) read by their element size alone (1 byte S8, 2 bytes S16, "
                        f"4 bytes F32): no tensor_info and no _float.bin says their type"))
    first = result.first
    if first is not None:
        differing = sum(r.differs for r in result.rows)
        print(printable(f"first difference: {first.describe()}"))
        print(printable(f"{differing} of {result.compared} trace(s) differ"
                        + (f", {len(result.missing)} missing" if result.missing else "")))
        return 1
    print(printable(f"{result.compared} trace(s) equal" + (f", {len(result.missing)} missing" if result.missing
                                                           else "")))
    return 1 if result.missing else 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    from .cli import subcommand

    p = subcommand(
        subparsers, "diff-traces", "compare two folders of per-layer traces and name the first layer that differs",
        "Compare the per-layer traces of two runs (debug_level 3 or 4: tidlx's, or TI's tools' with TI's names, "
        "also per core C7x_<k>_) layer by layer in execution order: per trace the elements and LSBs that "
        "differ and TI's SNR_dB, MeanAbsDiff and MaxAbsDiff (A is the reference), then the first layer whose "
        "values differ. Names and order come from a *.layer_info.txt in the folder (TI's layerIdx dataIdx "
        "name; copy TI's artifacts/tempDir/subgraph_<N>_tidl_net.bin.layer_info.txt beside its traces). "
        "Exit status 0: all equal; 1: a difference or a missing trace; 2: an error.",
        ["tidlx diff-traces ti_traces/ tidlx_traces/", "tidlx diff-traces out/model_tidl_traces device_traces/"])
    p.add_argument("a", metavar="A", help="a trace folder, the reference (its layer_info gives the order)")
    p.add_argument("b", metavar="B", help="the other trace folder")
    p.set_defaults(func=cmd_diff_traces)
    return p
