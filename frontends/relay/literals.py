"""What literal tokens mean: number literals with their dtype suffix (``1e-05f``, ``0i64``) and
the layer name in a ``/* ty=... span=NAME:line:col */`` annotation."""

from __future__ import annotations

import json
import re
from typing import Optional

import numpy as np

_INT_SUFFIX = {"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
               "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64"}
_FLOAT_SUFFIX = {"f": "float32", "f32": "float32", "f16": "float16", "f64": "float64", "": "float32"}


def span_layer(annotation: str) -> Optional[str]:
    """The layer name in ``ty=... span=NAME:line:col`` (``span="..."`` when quoted)."""
    if annotation.startswith("span="):
        span = annotation[5:]
    else:
        at = annotation.find(" span=")
        if at < 0:
            return None
        span = annotation[at + 6:]
    span = span.strip()
    if span.startswith('"'):
        end = _string_end(span)
        if end > 0:
            try:
                return json.loads(span[:end])
            except ValueError:
                pass
        return span
    # NAME:line:col; the name itself may hold ':' (onnx::Conv_193).
    head, sep, col = span.rpartition(":")
    if sep and col.isdigit():
        name, sep2, line = head.rpartition(":")
        if sep2 and line.isdigit():
            return name
    return span


def _string_end(s: str) -> int:
    i = 1
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        if s[i] == '"':
            return i + 1
        i += 1
    return -1


_NUMBER_RE = re.compile(r"(-?(?:inf|nan|\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+))"
                        r"(f16|f32|f64|f|i8|i16|i32|i64|u8|u16|u32|u64)?")


def parse_number(text: str):
    """(value, dtype) of a number literal such as ``1e-05f``, ``0i64``, ``1.5f16``, ``-4f``;
    (None, reason) when it is malformed or out of range."""
    m = _NUMBER_RE.fullmatch(text)
    if m is None:
        return None, "not a number"
    number, suffix = m.group(1), m.group(2) or ""
    if suffix in _INT_SUFFIX:
        dtype = _INT_SUFFIX[suffix]
        try:
            value = int(number)
        except ValueError:
            return None, f"{dtype} literals must be whole numbers"
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            return None, f"{value} is out of range for {dtype}"
        return value, dtype
    dtype = _FLOAT_SUFFIX[suffix]
    value = float(number)
    if np.isfinite(value):
        with np.errstate(over="ignore"):
            if not np.isfinite(np.array(value, dtype=dtype)):
                return None, f"{number} is out of range for {dtype}"
    return value, dtype
