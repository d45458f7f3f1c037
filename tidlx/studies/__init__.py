"""Studies over models x option sets: ``tidlx.sweep`` and ``tidlx sweep`` (docs/sweep.md).

    result = tidlx.sweep("study.yaml", jobs=4, out="runs/study")      # a local process pool
    result = tidlx.sweep("study.yaml", ray="local")                     # each cell a Ray task
    result.results, result.cached, result.rows[0]["tidl_macs_percent"]

A study (``study.py``) lists models, option sets and measures; each (model, option set) is a cell,
run by ``cells.run_cell`` on a local pool or Ray (``engines.py``). Each cell's row is cached under
``out/cache`` by the hash of what it depends on, so a rerun computes only what changed.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..ir import TidlxError
from .cells import COMPARE_COLUMNS, PARTITION_COLUMNS, SQNR_PREFIX, Cell, Payload
from .study import Study, StudyError, digest, load_study

__all__ = ["Study", "StudyError", "SweepResult", "load_study", "sweep"]

#: The results table's file names (parquet when pyarrow is importable).
PARQUET_NAME = "results.parquet"
CSV_NAME = "results.csv"
SUMMARY_NAME = "summary.html"
CACHE_FOLDER = "cache"


@dataclass
class SweepResult:
    """What a sweep did: ``cells`` in the study, ``cached`` of them read from the cache, ``failed`` rows
    with an error, the ``results`` file, and the table itself (``columns``, ``rows`` as dicts)."""
    cells: int
    cached: int
    failed: int
    results: str
    columns: List[str]
    rows: List[Dict[str, Any]] = field(repr=False)
    html: Optional[str] = None

    def summary(self) -> Dict[str, Any]:
        return {"cells": self.cells, "cached": self.cached, "failed": self.failed, "results": self.results}


# -- the fingerprint of the code that computes a row ----------------------------------------------

_FINGERPRINT: Optional[str] = None


def code_fingerprint() -> str:
    """tidlx's version and a hash of its source files (the Python files and grammars of every package):
    a cached row is reused only by the code that computed it."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        import importlib

        from .. import __version__

        parts = [__version__.encode()]
        for package in ("tidlx", "tidlx.ir", "tidlx.frontends", "tidlx.backends", "tidlx.emulator"):
            for root in importlib.import_module(package).__path__:
                for dirpath, dirnames, filenames in os.walk(root):
                    dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__")))
                    for name in sorted(filenames):
                        if name.endswith((".py", ".lark")):
                            full = os.path.join(dirpath, name)
                            parts.append(f"{package}/{os.path.relpath(full, root)}".encode())
                            with open(full, "rb") as f:
                                parts.append(f.read())
        _FINGERPRINT = digest(*parts)
    return _FINGERPRINT


# -- planning: the study as cells and payloads ---------------------------------------------------

def _read_bytes(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise StudyError(f"{path}: cannot read {what} ({exc.strerror})") from None


def plan(study: Study) -> Tuple[List[Cell], Dict[str, Payload]]:
    """The study's cells (models in study order, each with every option set in order) and the payloads
    they share, each keyed by its content hash."""
    from .models import BUILTIN_MODELS, build_model

    payloads: Dict[str, Payload] = {}

    def add(data: bytes, suffix: str) -> str:
        key = digest(data)
        payloads.setdefault(key, Payload(key, suffix, data))
        return key

    fingerprint = code_fingerprint()
    total = len(study.models) * len(study.option_sets)
    cells: List[Cell] = []
    for spec in study.models:
        if spec.builtin is not None:
            try:
                data = build_model(spec.builtin, spec.args)
            except StudyError as exc:
                raise StudyError(f"{study.path}:{spec.line}: model '{spec.name}': {exc}") from None
            custom_ops = tuple(BUILTIN_MODELS[spec.builtin]) + tuple(spec.custom_ops)
        else:
            data = _read_bytes(spec.path, "the model")
            custom_ops = tuple(spec.custom_ops)
        model_key = add(data, spec.suffix)
        params_key = add(_read_bytes(spec.params, "the params"), ".npz" if spec.params.endswith(".npz")
                         else os.path.splitext(spec.params)[1]) if spec.params else None
        shapes = tuple(sorted(spec.shapes.items())) if spec.shapes is not None else None
        load = tuple((k, v) for k, v in (("batch", spec.batch), ("shapes", shapes), ("opset", spec.opset))
                     if v is not None)
        compare = "compare" in study.measures
        calib_key = calib_random = None
        if compare and spec.calib is not None:
            if spec.calib.path is not None:
                calib_key = add(_read_bytes(spec.calib.path, "the calibration frames"), ".npz")
            else:
                calib_random = (spec.calib.random, spec.calib.seed)
        for option_set in study.option_sets:
            options = tuple((k, v) for k, v in option_set.values if k != "strategy")
            identity = {"tidlx": fingerprint, "model": model_key, "params": params_key,
                        "load": [[k, v] for k, v in load], "custom_ops": list(custom_ops),
                        "options": sorted([k, v] for k, v in options), "strategy": option_set.strategy,
                        "measures": list(study.measures),
                        "calib": [calib_key, calib_random] if compare else None,
                        "compare": [study.compare_frames, study.worst_layers] if compare else None}
            key = digest(json.dumps(identity, sort_keys=True, default=str).encode())
            cells.append(Cell(index=len(cells), total=total, model=spec.name, option_set=option_set.index,
                              model_key=model_key, model_suffix=spec.suffix, params_key=params_key, load=load,
                              custom_ops=custom_ops, options=options, strategy=option_set.strategy,
                              measures=study.measures, calib_key=calib_key, calib_random=calib_random,
                              compare_frames=study.compare_frames, worst_layers=study.worst_layers, key=key))
    return cells, payloads


# -- the cache -----------------------------------------------------------------------------------

class Cache:
    """One JSON file per cell row under ``out/cache``, named by the cell's key."""

    def __init__(self, out: str):
        self.root = os.path.join(out, CACHE_FOLDER)

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key[:2], key + ".json")

    def get(self, key: str) -> Optional[Dict[str, Any]]:
        try:
            with open(self._path(key), encoding="utf-8") as f:
                row = json.load(f)
        except (OSError, ValueError):   # absent, or cut short by an interrupted write: computed again
            return None
        return row if isinstance(row, dict) else None

    def put(self, key: str, row: Dict[str, Any]) -> None:
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(row, f, sort_keys=True, allow_nan=True)
        os.replace(tmp, path)


# -- the table -----------------------------------------------------------------------------------

def table_columns(study: Study, rows: List[Dict[str, Any]]) -> List[str]:
    """model, option_set, the options (as the study first names them), the measures, error, warnings,
    then the ``time_*`` columns (sorted)."""
    columns = ["model", "option_set"] + study.option_names
    if "partition" in study.measures:
        columns += list(PARTITION_COLUMNS)
    if "compare" in study.measures:
        columns += list(COMPARE_COLUMNS)
        columns += sorted({k for row in rows for k in row if k.startswith(SQNR_PREFIX)})
    columns += ["error", "warnings"]
    columns += sorted({k for row in rows for k in row if k.startswith("time_")})
    return columns


def _column_type(values: List[Any]) -> str:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "bool"
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "int"
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return "float"
    return "str"


def _typed(values: List[Any], kind: str) -> List[Any]:
    if kind == "float":
        return [None if v is None else float(v) for v in values]
    if kind == "str":
        return [None if v is None else (v if isinstance(v, str) else json.dumps(v) if isinstance(v, bool)
                                        else str(v)) for v in values]
    return values


def write_table(columns: List[str], rows: List[Dict[str, Any]], out: str) -> str:
    """``out/results.parquet`` (pyarrow) or ``out/results.csv``; returns its path."""
    data = {}
    for c in columns:
        values = [row.get(c) for row in rows]
        kind = _column_type(values)
        data[c] = (kind, _typed(values, kind))
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        pa = None
    if pa is not None:
        types = {"bool": pa.bool_(), "int": pa.int64(), "float": pa.float64(), "str": pa.string()}
        table = pa.table({c: pa.array(values, type=types[kind]) for c, (kind, values) in data.items()})
        path = os.path.join(out, PARQUET_NAME)
        tmp = path + ".tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, path)
        return path
    import csv

    path = os.path.join(out, CSV_NAME)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for k in range(len(rows)):
            writer.writerow(["" if data[c][1][k] is None else repr(data[c][1][k]) if data[c][0] == "float"
                             else data[c][1][k] for c in columns])
    os.replace(tmp, path)
    return path


def read_table(path: str) -> Tuple[List[str], List[Dict[str, Any]]]:
    """The columns and rows of a results file that ``write_table`` wrote (CSV values as text)."""
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        return list(table.column_names), table.to_pylist()
    import csv

    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), [dict(r) for r in reader]


# -- the sweep -----------------------------------------------------------------------------------

def default_out(study: Study) -> str:
    """``<study>-sweep`` next to the study file."""
    stem = os.path.splitext(os.path.basename(study.path))[0]
    return os.path.join(os.path.dirname(os.path.abspath(study.path)), f"{stem}-sweep")


#: ``progress(done, total, cached, failed, seconds_left)``; seconds_left is None until a cell is computed.
Progress = Callable[[int, int, int, int, Optional[float]], None]


def sweep(study, *, jobs: Optional[int] = None, ray: Optional[str] = None, out: Optional[str] = None,
          progress: Optional[Progress] = None, summary: bool = True) -> SweepResult:
    """Runs a study (the path of a YAML file, or a ``Study``): every model with every option set, the
    study's measures on each, rows cached under ``out`` (default: ``<study>-sweep`` next to the file).

    ``jobs``: worker processes of the local pool (default: the CPUs), or the CPUs of ``ray="local"``.
    ``ray``: a Ray cluster's address, ``"auto"``, or ``"local"`` to start Ray on this machine (default:
    ``RAY_ADDRESS`` when set, else the local pool); in a process that has started Ray already, that
    Ray is used. ``summary``: also write ``summary.html``, the Pareto front of each model (summary.py).
    Returns a ``SweepResult``; a failed cell is a row with its ``error``.
    """
    from .engines import SweepBackendError, default_jobs, ray_address, run_local, run_ray

    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise SweepBackendError(f"jobs must be an integer >= 1, got {jobs!r}")
    address = ray_address(ray)
    study = load_study(study)
    out = os.fspath(out) if out is not None else default_out(study)
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise TidlxError(f"{out}: cannot create the output folder ({exc.strerror})") from None
    cells, payloads = plan(study)
    cache = Cache(out)
    rows: List[Optional[Dict[str, Any]]] = [None] * len(cells)
    todo = []
    for cell in cells:
        row = cache.get(cell.key)
        if row is None:
            todo.append(cell)
        else:
            rows[cell.index] = row
    cached = len(cells) - len(todo)
    failed = sum(1 for r in rows if r is not None and r.get("error"))
    done = cached
    report = progress or (lambda *args: None)
    report(done, len(cells), cached, failed, None)
    if address is None:
        engine = run_local(todo, payloads, jobs or default_jobs())
    else:
        engine = run_ray(todo, payloads, jobs, address)
    started = time.monotonic()
    for cell, row in engine:
        if row.pop("_cacheable", False):
            cache.put(cell.key, row)
        rows[cell.index] = row
        done += 1
        failed += bool(row.get("error"))
        computed = done - cached
        left = (time.monotonic() - started) / computed * (len(cells) - done)
        report(done, len(cells), cached, failed, left)
    table = []
    for cell, row in zip(cells, rows):
        option_set = study.option_sets[cell.option_set]
        table.append({"model": cell.model, "option_set": cell.option_set, **dict(option_set.values), **row})
    columns = table_columns(study, table)
    results = write_table(columns, table, out)
    table = [{c: r.get(c) for c in columns} for r in table]
    html = None
    if summary:
        from .summary import render_summary

        html = os.path.join(out, SUMMARY_NAME)
        with open(html + ".tmp", "w", encoding="utf-8") as f:
            f.write(render_summary(f"tidlx sweep: {os.path.basename(study.path)}", columns, table,
                                   study.option_names))
        os.replace(html + ".tmp", html)
    return SweepResult(cells=len(cells), cached=cached, failed=failed, results=results, columns=columns, rows=table,
                       html=html)
