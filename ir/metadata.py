"""The ``#[metadata]`` section of Relay text: constants as TVM saves them.

The section is JSON with ``root``, ``nodes``, ``b64ndarrays`` and ``attrs``. ``nodes[root]`` is a
Map whose key ``relay.Constant`` points to an Array of ``relay.Constant`` nodes in index order;
each has ``attrs.data`` = index into ``b64ndarrays`` and ``_checked_type_`` -> a
``relay.TensorType`` node. Each ``b64ndarrays`` entry is base64 of TVM's NDArray save format,
little-endian: u64 magic, u64 reserved, i32 device type, i32 device id, i32 ndim, u8 dtype code
(0 int, 1 uint, 2 float), u8 bits, u16 lanes, i64 shape[ndim], i64 byte count, then the data.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from .errors import TidlxError

NDARRAY_MAGIC = 0xDD5E40F096B4A13F
TVM_VERSION = "0.16.dev0"  # what the section's attrs carry; TVM reads any value

# (dtype code, bits) <-> IR dtype. TVM stores bool as a 1-bit uint, one byte per element.
_CODE_BITS_TO_DTYPE = {
    (0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
    (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64", (1, 1): "bool",
    (2, 16): "float16", (2, 32): "float32", (2, 64): "float64",
}
_DTYPE_TO_CODE_BITS = {v: k for k, v in _CODE_BITS_TO_DTYPE.items()}
_HEADER = struct.Struct("<QQiiiBBH")


class MetadataError(TidlxError):
    """A ``#[metadata]`` section (or one array in it) that cannot be decoded."""


# --- one array --------------------------------------------------------------------------------

def encode_ndarray(array: np.ndarray) -> str:
    """Base64 of TVM's NDArray save format (CPU device, little-endian)."""
    arr = np.asarray(array)
    dtype = "bool" if arr.dtype == np.bool_ else arr.dtype.name
    if dtype not in _DTYPE_TO_CODE_BITS:
        raise MetadataError(f"cannot store a constant of dtype {arr.dtype} in the metadata section")
    code, bits = _DTYPE_TO_CODE_BITS[dtype]
    data = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
    blob = (_HEADER.pack(NDARRAY_MAGIC, 0, 1, 0, arr.ndim, code, bits, 1)
            + struct.pack(f"<{arr.ndim}q", *arr.shape)
            + struct.pack("<q", len(data)) + data)
    return base64.b64encode(blob).decode("ascii")


def decode_ndarray(b64: str, what: str = "array") -> np.ndarray:
    """The numpy array saved in one ``b64ndarrays`` entry (read-only is not forced)."""
    if not isinstance(b64, str):
        raise MetadataError(f"{what}: expected a base64 string, got {type(b64).__name__}")
    try:
        blob = base64.b64decode(b64.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
        raise MetadataError(f"{what}: invalid base64 ({exc})") from None
    if len(blob) < _HEADER.size:
        raise MetadataError(f"{what}: {len(blob)} bytes is too short for an NDArray header")
    magic, _reserved, _dev_type, _dev_id, ndim, code, bits, lanes = _HEADER.unpack_from(blob, 0)
    if magic != NDARRAY_MAGIC:
        raise MetadataError(f"{what}: not a TVM NDArray (magic {magic:#x}, expected {NDARRAY_MAGIC:#x})")
    if lanes != 1:
        raise MetadataError(f"{what}: vector dtypes ({lanes} lanes) are not supported")
    dtype = _CODE_BITS_TO_DTYPE.get((code, bits))
    if dtype is None:
        raise MetadataError(f"{what}: unsupported dtype (type code {code}, {bits} bits)")
    if not 0 <= ndim <= 32:
        raise MetadataError(f"{what}: implausible rank {ndim}")
    offset = _HEADER.size
    need = offset + 8 * ndim + 8
    if len(blob) < need:
        raise MetadataError(f"{what}: truncated header")
    shape = struct.unpack_from(f"<{ndim}q", blob, offset)
    offset += 8 * ndim
    (nbytes,) = struct.unpack_from("<q", blob, offset)
    offset += 8
    if any(d < 0 for d in shape):
        raise MetadataError(f"{what}: negative dimension in shape {shape}")
    itemsize = 1 if dtype == "bool" else np.dtype(dtype).itemsize
    count = 1
    for d in shape:
        count *= d
    if nbytes != count * itemsize:
        raise MetadataError(f"{what}: byte count {nbytes} does not match shape {shape} of {dtype}")
    if len(blob) - offset != nbytes:
        raise MetadataError(f"{what}: {len(blob) - offset} data bytes, the header says {nbytes}")
    np_dtype = np.dtype(np.bool_) if dtype == "bool" else np.dtype(dtype).newbyteorder("<")
    arr = np.frombuffer(blob, dtype=np_dtype, count=count, offset=offset).reshape(shape)
    return arr.astype(arr.dtype.newbyteorder("="), copy=True)


# --- the whole section ------------------------------------------------------------------------

class _NodeTable:
    """Builds TVM's node list: index 0 is the null node, references are decimal strings."""

    def __init__(self):
        self.nodes: List[Dict[str, Any]] = [{"type_key": ""}]

    def add(self, node: Dict[str, Any]) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1


def encode_metadata(constants: Sequence[np.ndarray]) -> str:
    """The JSON text of a ``#[metadata]`` section holding ``constants`` as
    ``meta[relay.Constant][0..n-1]``, laid out like TVM's own JSON writer."""
    table = _NodeTable()
    table.add({"type_key": "Map", "keys": ["relay.Constant"], "data": [2]})
    array_node = {"type_key": "Array", "data": []}
    table.add(array_node)
    virtual_device: Optional[int] = None
    for i, arr in enumerate(constants):
        const_node = {"type_key": "relay.Constant", "attrs": {}}
        const_id = table.add(const_node)
        array_node["data"].append(const_id)
        if virtual_device is None:
            vd = {"type_key": "VirtualDevice", "attrs": {}}
            virtual_device = table.add(vd)
            scope = table.add({"type_key": "runtime.String"})
            vd["attrs"] = {"device_type_int": "-1", "memory_scope": str(scope), "target": "0",
                           "virtual_device_id": "-1"}
        shape_node = {"type_key": "Array", "data": []}
        arr = np.asarray(arr)
        dtype = "bool" if arr.dtype == np.bool_ else arr.dtype.name
        type_id = table.add({"type_key": "relay.TensorType", "attrs": {}})
        shape_id = table.add(shape_node)
        table.nodes[type_id]["attrs"] = {"dtype": dtype, "shape": str(shape_id), "span": "0"}
        for d in arr.shape:
            shape_node["data"].append(table.add(
                {"type_key": "IntImm", "attrs": {"dtype": "int32", "span": "0", "value": str(int(d))}}))
        const_node["attrs"] = {"_checked_type_": str(type_id), "data": str(i), "span": "0",
                               "virtual_device_": str(virtual_device)}
    b64 = [encode_ndarray(a) for a in constants]
    return _write_json(table.nodes, b64)


def _write_json(nodes: List[Dict[str, Any]], b64: List[str]) -> str:
    def q(s: str) -> str:
        return json.dumps(s)

    def node_text(node: Dict[str, Any]) -> str:
        fields = [f'      "type_key": {q(node["type_key"])}']
        if "keys" in node:
            keys = ", \n".join(f"        {q(k)}" for k in node["keys"])
            fields.append(f'      "keys": [\n{keys}\n      ]')
        if "attrs" in node:
            items = ", \n".join(f"        {q(k)}: {q(v)}" for k, v in sorted(node["attrs"].items()))
            fields.append(f'      "attrs": {{\n{items}\n      }}')
        if "data" in node:
            fields.append(f'      "data": [{", ".join(str(d) for d in node["data"])}]')
        return "    {\n" + ", \n".join(fields) + "\n    }"

    parts = ["{", '  "root": 1, ', '  "nodes": [', ", \n".join(node_text(n) for n in nodes) + "", "  ], "]
    if b64:
        parts += ['  "b64ndarrays": [', ", \n".join(f"    {q(s)}" for s in b64), "  ], "]
    else:
        parts.append('  "b64ndarrays": [], ')
    parts += [f'  "attrs": {{"tvm_version": {q(TVM_VERSION)}}}', "}"]
    return "\n".join(parts)


def decode_metadata(text: str) -> List[np.ndarray]:
    """The constants of a ``#[metadata]`` section, in ``meta[relay.Constant][i]`` order.

    Raises ``MetadataError`` (with ``.json_pos`` = character offset in ``text`` for JSON
    syntax errors) when the section is malformed.
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        err = MetadataError(f"invalid JSON: {exc.msg}")
        err.json_pos = exc.pos
        raise err from None
    except RecursionError:
        raise MetadataError("invalid JSON: nested too deeply") from None
    if not isinstance(doc, dict):
        raise MetadataError("the section must be a JSON object with 'root' and 'nodes'")
    nodes = doc.get("nodes")
    b64 = doc.get("b64ndarrays", [])
    if not isinstance(nodes, list) or not isinstance(b64, list):
        raise MetadataError("'nodes' and 'b64ndarrays' must be lists")

    def node(ref, what: str) -> Dict[str, Any]:
        try:
            idx = int(ref)
        except (TypeError, ValueError):
            raise MetadataError(f"{what}: node reference {ref!r} is not an integer") from None
        if not 0 <= idx < len(nodes) or not isinstance(nodes[idx], dict):
            raise MetadataError(f"{what}: node reference {idx} is out of range ({len(nodes)} nodes)")
        return nodes[idx]

    root = node(doc.get("root"), "root")
    if root.get("type_key") != "Map":
        raise MetadataError(f"the root node must be a Map, got {root.get('type_key')!r}")
    constants_ref = _map_lookup(root, "relay.Constant", node)
    if constants_ref is None:
        return []
    array = node(constants_ref, "relay.Constant entry")
    refs = array.get("data", [])
    if array.get("type_key") != "Array" or not isinstance(refs, list):
        raise MetadataError("the relay.Constant entry must be an Array")
    out = []
    for i, ref in enumerate(refs):
        what = f"meta[relay.Constant][{i}]"
        const = node(ref, what)
        if const.get("type_key") != "relay.Constant":
            raise MetadataError(f"{what}: expected a relay.Constant node, got {const.get('type_key')!r}")
        attrs = const.get("attrs")
        if not isinstance(attrs, dict):
            raise MetadataError(f"{what}: the node has no attrs")
        try:
            data_idx = int(attrs.get("data"))
        except (TypeError, ValueError):
            raise MetadataError(f"{what}: attrs.data must be an index into b64ndarrays") from None
        if not 0 <= data_idx < len(b64):
            raise MetadataError(f"{what}: attrs.data {data_idx} is out of range ({len(b64)} arrays)")
        arr = decode_ndarray(b64[data_idx], what)
        _check_declared_type(attrs.get("_checked_type_"), arr, what, node)
        out.append(arr)
    return out


def _map_lookup(map_node: Dict[str, Any], key: str, node) -> Optional[Any]:
    """A Map's value for ``key``: string ``keys`` beside ``data`` (TVM >= 0.9), or
    alternating key/value node references in ``data`` (older TVM)."""
    data = map_node.get("data", [])
    if not isinstance(data, list):
        raise MetadataError("the root Map has no data list")
    keys = map_node.get("keys")
    if keys is not None:
        if not isinstance(keys, list) or len(keys) != len(data):
            raise MetadataError("the root Map's keys and data differ in length")
        for k, v in zip(keys, data):
            if k == key:
                return v
        return None
    for i in range(0, len(data) - 1, 2):
        k = node(data[i], "root Map key")
        name = k.get("repr_str", k.get("data"))
        if name == key:
            return data[i + 1]
    return None


def _check_declared_type(type_ref, arr: np.ndarray, what: str, node) -> None:
    """The constant's recorded type must agree with the decoded array (when recorded)."""
    if type_ref in (None, "0", 0):
        return
    ttype = node(type_ref, what + " type")
    if ttype.get("type_key") != "relay.TensorType":
        return
    attrs = ttype.get("attrs") or {}
    dtype = attrs.get("dtype")
    arr_dtype = "bool" if arr.dtype == np.bool_ else arr.dtype.name
    if dtype is not None and dtype != arr_dtype:
        raise MetadataError(f"{what}: the node says dtype {dtype} but the array holds {arr_dtype}")
    shape_ref = attrs.get("shape")
    if shape_ref in (None, "0", 0):
        return
    dims = node(shape_ref, what + " shape").get("data", [])
    try:
        shape = tuple(int(node(d, what + " dim").get("attrs", {}).get("value")) for d in dims)
    except (TypeError, ValueError):
        raise MetadataError(f"{what}: the recorded shape is not a list of integers") from None
    if shape != arr.shape:
        raise MetadataError(f"{what}: the node says shape {shape} but the array has shape {arr.shape}")
