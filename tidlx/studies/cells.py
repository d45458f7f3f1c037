"""One cell of a study: one model with one option set, measured in a worker process.

The parent turns the study into ``Cell``s (small, picklable) and ``Payload``s (model bytes and
calibration frames, shipped to each worker once); ``run_cell`` measures a cell with tidlx's public
API and returns its row: the measures, ``error`` (None when it ran), ``warnings`` and ``time_*``.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

#: The measures' columns, in table order (compare adds one ``sqnr_db:<output>`` column per output).
PARTITION_COLUMNS = ("subgraphs", "tidl_macs_percent", "tidl_macs", "total_macs", "host_ops", "boundary_bytes")
COMPARE_COLUMNS = ("sqnr_db_min", "worst_layer", "worst_layer_sqnr_db", "worst_layers")
SQNR_PREFIX = "sqnr_db:"


@dataclass(frozen=True)
class Payload:
    """Bytes a cell needs and that many cells share: a model file (``suffix`` says its format), a
    Relay params file, or calibration frames (an ``.npz``); ``key`` is their content hash."""
    key: str
    suffix: str
    data: bytes


@dataclass(frozen=True)
class Cell:
    index: int
    total: int
    model: str
    option_set: int
    model_key: str
    model_suffix: str
    params_key: Optional[str]
    load: Tuple[Tuple[str, Any], ...]          # batch, shapes (as pairs), opset for tidlx.load
    custom_ops: Tuple[str, ...]
    options: Tuple[Tuple[str, Any], ...]
    strategy: str
    measures: Tuple[str, ...]
    calib_key: Optional[str]                    # an .npz payload, or None: random frames
    calib_random: Optional[Tuple[int, int]]     # (count, seed) of random frames
    compare_frames: int
    worst_layers: int
    key: str                                    # the cache key

    @property
    def name(self) -> str:
        """The cell as the progress and Ray's dashboard show it."""
        text = " ".join(f"{k}={v}" for k, v in self.options)
        if self.strategy != "greedy" or not text:
            text = f"{text} strategy={self.strategy}".strip()
        return f"sweep {self.index + 1}/{self.total} {self.model} #{self.option_set}: {text}"


# -- the worker side --------------------------------------------------------------------------------

#: Payloads a worker holds, by key (set once per worker: ``install_payloads``).
_PAYLOADS: Dict[str, Payload] = {}
#: Files written from payloads in this process (tidlx.load reads files), by key.
_FILES: Dict[str, str] = {}
#: Models loaded in this process, by (model key, params key, load arguments, custom ops).
_MODULES: Dict[Tuple, Any] = {}
_REGISTERED: set = set()
_TMP: Optional[str] = None


def install_payloads(payloads: Mapping[str, Payload]) -> None:
    """Makes payloads available to ``run_cell`` in this process (a pool worker's initializer)."""
    _PAYLOADS.update(payloads)


def _file(payload: Payload) -> str:
    global _TMP
    path = _FILES.get(payload.key)
    if path is None:
        if _TMP is None:
            _TMP = tempfile.mkdtemp(prefix="tidlx-sweep-")
        path = os.path.join(_TMP, payload.key[:32] + payload.suffix)
        with open(path, "wb") as f:
            f.write(payload.data)
        _FILES[payload.key] = path
    return path


def _payload(key: str, given: Mapping[str, Payload]) -> Payload:
    payload = given.get(key) or _PAYLOADS.get(key)
    if payload is None:
        raise RuntimeError(f"payload {key[:12]} was not shipped to this worker")
    return payload


def _load(cell: Cell, payloads: Mapping[str, Payload]):
    from ..api import load, relay_params
    from ..cli import register_custom_ops

    todo = [s for s in cell.custom_ops if s not in _REGISTERED]
    if todo:
        register_custom_ops(todo)
        _REGISTERED.update(todo)
    # advanced_options:prequantized_model=1 imports a QDQ model as TIDL's prequantized import does (as the CLI)
    prequantized = str(dict(cell.options).get("advanced_options:prequantized_model", "0")).strip() == "1" \
        and cell.model_suffix == ".onnx"
    key = (cell.model_key, cell.params_key, cell.load, cell.custom_ops, prequantized)
    mod = _MODULES.get(key)
    if mod is None:
        path = _file(_payload(cell.model_key, payloads))
        params = relay_params(_file(_payload(cell.params_key, payloads))) if cell.params_key else None
        load_args = dict(cell.load)
        if "shapes" in load_args:
            load_args["shapes"] = dict(load_args["shapes"])
        if prequantized:
            load_args["prequantized"] = True
        mod = load(path, params=params, **load_args)   # an ONNX model keeps its file for the ORT flow
        _MODULES[key] = mod
    return mod


def _calib(cell: Cell, payloads: Mapping[str, Payload], mod):
    if cell.calib_key is not None:
        from ..files import read_npz

        return read_npz(_file(_payload(cell.calib_key, payloads)), "calib")
    if cell.calib_random is not None:
        from ..backends.tidl.frames import model_inputs, random_frames

        count, seed = cell.calib_random
        return random_frames(model_inputs(mod), count, seed)
    return None


def _number(value):
    """A float for the table (numpy scalars as Python floats)."""
    return None if value is None else float(value)


def _measure(cell: Cell, payloads: Mapping[str, Payload], row: Dict[str, Any]) -> None:
    from ..api import partition
    from ..quantize_api import compare

    t0 = time.perf_counter()
    mod = _load(cell, payloads)
    row["time_load"] = time.perf_counter() - t0
    options = dict(cell.options)
    t0 = time.perf_counter()
    partitioned, report = partition(mod, options, cell.strategy)
    row["time_partition"] = time.perf_counter() - t0
    if "partition" in cell.measures:
        row.update(subgraphs=report.num_subgraphs, tidl_macs_percent=float(report.tidl_macs_percent),
                   tidl_macs=int(report.tidl_macs), total_macs=int(report.total_macs),
                   host_ops=len(report.host_ops), boundary_bytes=int(report.boundary_bytes))
    if "compare" in cell.measures:
        t0 = time.perf_counter()
        if not report.subgraphs:
            raise _NothingToCompare("no TIDL subgraph: every op runs on the host in float, there is no fixed "
                                    "point to compare")
        calib = _calib(cell, payloads, mod)
        result = compare(partitioned, options=options, calib=calib, frames=cell.compare_frames)
        row["time_compare"] = time.perf_counter() - t0
        sqnrs = [_number(o.sqnr_db) for o in result.outputs]
        row["sqnr_db_min"] = min(sqnrs) if sqnrs else None
        for o, value in zip(result.outputs, sqnrs):
            row[f"{SQNR_PREFIX}{o.name}"] = value
        worst = list(result.layers[:cell.worst_layers])
        row["worst_layer"] = worst[0].layer if worst else None
        row["worst_layer_sqnr_db"] = _number(worst[0].sqnr_db) if worst else None
        row["worst_layers"] = "; ".join(f"{w.layer} ({w.type}) {float(w.sqnr_db):.2f} dB" for w in worst)


class _NothingToCompare(Exception):
    pass


def run_cell(cell: Cell, payloads: Optional[Mapping[str, Payload]] = None) -> Dict[str, Any]:
    """The row of one cell. Every failure becomes the row's ``error`` (``cacheable`` says whether it
    is tidlx's answer about the input, which a rerun would repeat, or an accident of the run)."""
    from ..ir import TidlxError
    from ..ir.text import printable

    payloads = payloads or {}
    row: Dict[str, Any] = {}
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            _measure(cell, payloads, row)
            error, cacheable = None, True
        except (TidlxError, _NothingToCompare) as exc:
            error, cacheable = f"{type(exc).__name__}: {printable(exc)}", True
        except Exception as exc:  # a bug or a broken worker: the row says so, the study goes on
            frames = traceback.extract_tb(exc.__traceback__)
            where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
            error, cacheable = f"{type(exc).__name__}: {printable(exc)}{where}", False
    seen: Dict[str, None] = {}
    for w in caught:
        seen.setdefault(printable(str(w.message)), None)
    row["error"] = error
    row["warnings"] = "\n".join(seen) or None
    row["time_cell"] = time.perf_counter() - started
    row["_cacheable"] = cacheable
    return row


def row_json(row: Mapping[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, allow_nan=True)
