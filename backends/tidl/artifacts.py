"""Writing TIDL subgraph artifacts (docs/artifacts.md): a QuantizedSubgraph -> ``tidl_subgraph<N>_net.bin``,
``tidl_subgraph<N>_io_1.bin`` and ``tidl_subgraph<N>.json``; a QuantizedModel -> a compiled folder.

    net = encode_network(sub, NetworkInfo(calibration_options=7, inference_mode=0, num_cores=1))
    io = encode_io(sub, net, NetworkInfo(...))
    write_compiled_folder(qmodel, "out/model_tidl", options=["tensor_bits=8"], calibration="frames.npz")

The layout is ``tidlx.emulator.fixed.artifact_format``'s; the reader (``artifact_reader``) is its inverse.
Every QuantizedLayer / QuantizedTensor / QuantizedSubgraph field that has no fixed place in a record is
carried as a typed key/value under its own name, so a field added to network.py (with a default) is
written without a change here; the reader refuses a field it does not know.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import struct
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ...emulator.fixed import artifact_format as fmt
from ...emulator.fixed.artifact_format import ArtifactError
from ...emulator.fixed.network import QuantizedLayer, QuantizedSubgraph, QuantizedTensor

#: Fields with a fixed place in the records (everything else goes to the key/value fields).
LAYER_FIXED_FIELDS = ("index", "name", "type", "type_id", "inputs", "outputs", "attrs", "activation", "weight_bits")
TENSOR_FIXED_FIELDS = ("id", "name", "shape", "bits", "signed", "scale", "zero_point")
SUBGRAPH_FIXED_FIELDS = ("name", "layers", "tensors", "inputs", "outputs", "returns_tuple", "tensor_bits",
                         "quantization_style")

#: The compiled folder's files besides the subgraphs'.
MANIFEST = "tidlx_artifacts.json"
HOST_MODULE = "host_module.txt"
FOLDER_FORMAT = "tidlx-compiled-model"


@dataclass(frozen=True)
class NetworkInfo:
    """What the network record's header holds besides the subgraph: TI's options."""

    calibration_options: int = 0
    inference_mode: int = 0
    num_cores: int = 1


def subgraph_number(name: str) -> int:
    """``tidl_3`` -> 3: the N of ``tidl_subgraph<N>_net.bin``."""
    match = re.fullmatch(r"tidl_(\d+)", name)
    if not match:
        raise ArtifactError(f"@{name}: a TIDL subgraph function is named tidl_<N>")
    return int(match.group(1))


def artifact_names(n: int) -> Tuple[str, str, str]:
    """TI's names for the TVM flow (TIDL-NUMERICS.md, "Files and traces"), plus tidlx's readable JSON."""
    return f"tidl_subgraph{n}_net.bin", f"tidl_subgraph{n}_io_1.bin", f"tidl_subgraph{n}.json"


# -- building blocks --------------------------------------------------------------------------------

class _Strings:
    def __init__(self):
        self.data = bytearray()
        self.index: Dict[str, Tuple[int, int]] = {}

    def ref(self, text: str) -> Tuple[int, int]:
        if text not in self.index:
            raw = text.encode("utf-8", "surrogatepass")
            self.index[text] = (len(self.data), len(raw))
            self.data += raw
        return self.index[text]


class _Blob:
    """The DATA section: every array at a 64-byte offset."""

    def __init__(self):
        self.data = bytearray()

    def add(self, array: np.ndarray) -> int:
        self.data += b"\0" * (fmt.align(len(self.data), fmt.SECTION_ALIGN) - len(self.data))
        offset = len(self.data)
        self.data += array.tobytes(order="C")
        return offset


class _Encoder:
    def __init__(self, where: str):
        self.where = where
        self.strings = _Strings()
        self.blob = _Blob()

    def value(self, out: bytearray, value: Any, what: str, depth: int = 0) -> None:
        if depth > fmt.MAX_NESTING:
            raise ArtifactError(f"{self.where}: {what} nests deeper than {fmt.MAX_NESTING} tuples")
        if value is None:
            out += bytes([fmt.TAG_NONE])
        elif isinstance(value, (bool, np.bool_)):
            out += struct.pack("<BB", fmt.TAG_BOOL, bool(value))
        elif isinstance(value, (int, np.integer)):
            v = int(value)
            if not -(1 << 63) <= v < (1 << 63):
                raise ArtifactError(f"{self.where}: {what} = {v} does not fit 64 bits")
            out += struct.pack("<Bq", fmt.TAG_INT, v)
        elif isinstance(value, (float, np.floating)):
            out += struct.pack("<Bd", fmt.TAG_FLOAT, float(value))
        elif isinstance(value, str):
            out += struct.pack("<BII", fmt.TAG_STR, *self.strings.ref(value))
        elif isinstance(value, (tuple, list)):
            out += struct.pack("<BI", fmt.TAG_TUPLE, len(value))
            for i, item in enumerate(value):
                self.value(out, item, f"{what}[{i}]", depth + 1)
        elif isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value)
            if array.dtype.byteorder == ">":
                array = array.astype(array.dtype.newbyteorder("<"))
            try:
                code = fmt.array_code(array)
            except KeyError:
                raise ArtifactError(f"{self.where}: {what} is a {array.dtype} array; the format holds "
                                    f"{', '.join(str(d) for d in fmt.ARRAY_DTYPES.values())}") from None
            if array.ndim > 255:
                raise ArtifactError(f"{self.where}: {what} has {array.ndim} dimensions")
            out += struct.pack("<BBB", fmt.TAG_ARRAY, code, array.ndim)
            out += struct.pack(f"<{array.ndim}Q", *array.shape)
            out += struct.pack("<QQ", self.blob.add(array), array.nbytes)
        else:
            raise ArtifactError(f"{self.where}: {what} is a {type(value).__name__}; the format holds None, bool, "
                                f"int, float, str, tuples of them and numpy arrays")

    def pairs(self, out: bytearray, items: Sequence[Tuple[str, Any]], what: str) -> None:
        for key, value in items:
            out += struct.pack("<II", *self.strings.ref(key))
            self.value(out, value, f"{what} '{key}'")


def _is_default(f: dataclasses.Field, value: Any) -> bool:
    if f.default is dataclasses.MISSING or isinstance(value, np.ndarray):
        return False
    return value is f.default or (type(value) is type(f.default) and value == f.default)


def _extra_fields(obj, fixed: Sequence[str]) -> List[Tuple[str, Any]]:
    """The fields without a fixed place, those at their default left out: a reader fills in the default,
    and a reader that predates a field can read every file that leaves it at its default."""
    return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)
            if f.name not in fixed and not _is_default(f, getattr(obj, f.name))]


def _scalar_round_bits(layer: Optional[QuantizedLayer]) -> int:
    if layer is None:
        return -1
    rb = layer.round_bits
    return int(rb) if isinstance(rb, (int, np.integer)) else -1


def _tensor_element_type(tensor: QuantizedTensor, where: str) -> int:
    for code, (bits, signed) in fmt.TENSOR_ELEMENT_TYPES.items():
        if tensor.bits == bits and (bits == 0 or tensor.signed == signed):
            return code
    raise ArtifactError(f"{where}: tensor '{tensor.name}' is {tensor.bits}-bit; TIDL tensors are 8/16-bit or float32")


# -- the network record -----------------------------------------------------------------------------

def encode_network(sub: QuantizedSubgraph, info: NetworkInfo = NetworkInfo()) -> bytes:
    """``tidl_subgraph<N>_net.bin`` of one quantized subgraph (docs/artifacts.md §2)."""
    where = f"@{sub.name}"
    enc = _Encoder(where)
    producer: Dict[int, QuantizedLayer] = {}
    for layer in sub.layers:
        for t in layer.outputs:
            producer.setdefault(t, layer)

    tensors = bytearray()
    for i, t in enumerate(sub.tensors):
        if t.id != i:
            raise ArtifactError(f"{where}: tensor '{t.name}' has id {t.id} at position {i}; ids are positions")
        if len(t.shape) > fmt.MAX_RANK:
            raise ArtifactError(f"{where}: tensor '{t.name}' has {len(t.shape)} dimensions; TIDL tensors have at "
                                f"most {fmt.MAX_RANK}")
        if any(d < 0 or d >= 1 << 32 for d in t.shape):
            raise ArtifactError(f"{where}: tensor '{t.name}' has a dimension outside 0..2^32-1: {t.shape}")
        extra = bytearray()
        fields = _extra_fields(t, TENSOR_FIXED_FIELDS)
        enc.pairs(extra, fields, f"tensor '{t.name}' field")
        size = fmt.align(fmt.TENSOR_FIXED.size + len(extra), fmt.RECORD_ALIGN)
        layer = producer.get(t.id)
        tensors += fmt.TENSOR_FIXED.pack(size, t.id, *enc.strings.ref(t.name), _tensor_element_type(t, where),
                                         len(t.shape), len(fields), *fmt.padded_dims(t.shape), float(t.scale),
                                         int(t.zero_point), _scalar_round_bits(layer), 0, 0, 0, 0,
                                         fmt.NO_LAYER if layer is None else layer.index)
        tensors += extra + b"\0" * (size - fmt.TENSOR_FIXED.size - len(extra))

    layers = bytearray()
    for i, layer in enumerate(sub.layers):
        what = f"layer {layer.describe()}"
        if not 0 <= layer.type_id < 1 << 16 or not 0 <= layer.weight_bits < 1 << 16:
            raise ArtifactError(f"{where}: {what}: type id {layer.type_id} / weight bits {layer.weight_bits} do "
                                f"not fit 16 bits")
        if len(layer.inputs) >= 1 << 16 or len(layer.outputs) >= 1 << 16:
            raise ArtifactError(f"{where}: {what} has too many inputs or outputs")
        body = bytearray()
        body += struct.pack(f"<{len(layer.inputs)}I{len(layer.outputs)}I", *layer.inputs, *layer.outputs)
        attrs = list(layer.attrs.items())
        enc.pairs(body, attrs, f"{what} parameter")
        fields = _extra_fields(layer, LAYER_FIXED_FIELDS)
        enc.pairs(body, fields, f"{what} field")
        size = fmt.align(fmt.LAYER_FIXED.size + len(body), fmt.RECORD_ALIGN)
        act_id = fmt.ACTIVATION_IDS.get(layer.activation.lower(), fmt.OTHER_ACTIVATION)
        layers += fmt.LAYER_FIXED.pack(size, layer.index, layer.type_id, act_id, 0, layer.weight_bits,
                                       len(layer.inputs), len(layer.outputs), len(attrs), len(fields), 0,
                                       *enc.strings.ref(layer.name), *enc.strings.ref(layer.type),
                                       *enc.strings.ref(layer.activation))
        layers += body + b"\0" * (size - fmt.LAYER_FIXED.size - len(body))

    ioid = bytearray(struct.pack("<II", len(sub.inputs), len(sub.outputs)))
    ioid += struct.pack(f"<{len(sub.inputs) + len(sub.outputs)}I", *sub.inputs, *sub.outputs)
    sub_fields = _extra_fields(sub, SUBGRAPH_FIXED_FIELDS)
    ioid += struct.pack("<I", len(sub_fields))
    enc.pairs(ioid, sub_fields, "subgraph field")

    name_ref = enc.strings.ref(sub.name)   # before the string table is laid out
    sections = [bytes(enc.strings.data), bytes(tensors), bytes(layers), bytes(ioid), bytes(enc.blob.data)]
    table_end = fmt.NET_HEADER_SIZE + fmt.SECTION_ENTRY_SIZE * len(sections)
    offsets, pos = [], table_end
    for data in sections:
        pos = fmt.align(pos, fmt.SECTION_ALIGN)
        offsets.append(pos)
        pos += len(data)
    file_size = fmt.align(pos, fmt.SECTION_ALIGN)
    out = bytearray(file_size)
    for tag, offset, data in zip(fmt.SECTIONS, offsets, sections):
        out[offset:offset + len(data)] = data
    table = b"".join(fmt.SECTION_ENTRY.pack(tag, 0, offset, len(data))
                     for tag, offset, data in zip(fmt.SECTIONS, offsets, sections))
    out[fmt.NET_HEADER_SIZE:table_end] = table
    header = fmt.NET_HEADER.pack(fmt.NET_MAGIC, fmt.FORMAT_MAJOR, fmt.FORMAT_MINOR, fmt.NET_HEADER_SIZE, file_size,
                                 0, sub.quantization_style, sub.tensor_bits, info.inference_mode, info.num_cores,
                                 info.calibration_options, len(sub.layers), len(sub.tensors), len(sections),
                                 int(sub.returns_tuple), *name_ref, 0)
    out[:fmt.NET_HEADER_SIZE] = header
    struct.pack_into("<I", out, fmt.NET_CRC_OFFSET, fmt.crc32(bytes(out), fmt.NET_CRC_OFFSET))
    return bytes(out)


# -- the I/O descriptor -----------------------------------------------------------------------------

def encode_io(sub: QuantizedSubgraph, net: bytes, info: NetworkInfo = NetworkInfo()) -> bytes:
    """``tidl_subgraph<N>_io_1.bin``: the subgraph's inputs and outputs as the host sees them
    (docs/artifacts.md §3); tied to its network record by the record's CRC."""
    where = f"@{sub.name}"
    body = bytearray()
    for direction, ids in ((0, sub.inputs), (1, sub.outputs)):
        for t in ids:
            tensor = sub.tensors[t]
            name = tensor.name.encode("utf-8", "surrogatepass")
            size = fmt.align(fmt.IO_FIXED.size + len(name), fmt.RECORD_ALIGN)
            body += fmt.IO_FIXED.pack(size, direction, _tensor_element_type(tensor, where), len(tensor.shape),
                                      fmt.LAYOUT_NCHW, tensor.id, *fmt.padded_dims(tensor.shape), 0, 0, 0, 0,
                                      float(tensor.scale), int(tensor.zero_point), len(name))
            body += name + b"\0" * (size - fmt.IO_FIXED.size - len(name))
    size = fmt.IO_HEADER_SIZE + len(body)
    net_crc = struct.unpack_from("<I", net, fmt.NET_CRC_OFFSET)[0]
    out = bytearray(fmt.IO_HEADER.pack(fmt.IO_MAGIC, fmt.FORMAT_MAJOR, fmt.FORMAT_MINOR, size, 0, len(sub.inputs),
                                       len(sub.outputs), info.num_cores, info.inference_mode, 0, net_crc)) + body
    struct.pack_into("<I", out, fmt.IO_CRC_OFFSET, fmt.crc32(bytes(out), fmt.IO_CRC_OFFSET))
    return bytes(out)


# -- the readable form ------------------------------------------------------------------------------

def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        if value.size <= 16:
            return {"array": str(value.dtype), "shape": list(value.shape), "values": value.tolist()}
        return {"array": str(value.dtype), "shape": list(value.shape),
                "sha256": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()}
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else repr(v)
    return value


def subgraph_json(sub: QuantizedSubgraph, info: NetworkInfo, number: int) -> str:
    """``tidl_subgraph<N>.json``: the network record and I/O descriptor readable (weights as their
    shape, dtype and SHA-256), for diffs and review."""
    names = artifact_names(number)
    doc = {
        "format": f"tidlx TIDL subgraph {fmt.version_text()}",
        "files": {"net": names[0], "io": names[1]},
        "subgraph": sub.name, "tensor_bits": sub.tensor_bits, "quantization_style": sub.quantization_style,
        "calibration_options": info.calibration_options, "inference_mode": info.inference_mode,
        "num_cores": info.num_cores, "returns_tuple": sub.returns_tuple,
        "inputs": [_io_json(sub.tensors[t]) for t in sub.inputs],
        "outputs": [_io_json(sub.tensors[t]) for t in sub.outputs],
        "tensors": [{"id": t.id, "name": t.name, "shape": list(t.shape), "element_type": t.element_type,
                     "bits": t.bits, "signed": t.signed, "scale": _jsonable(t.scale),
                     **({"zero_point": int(t.zero_point)} if t.zero_point else {}),
                     **{k: _jsonable(v) for k, v in _extra_fields(t, TENSOR_FIXED_FIELDS)}} for t in sub.tensors],
        "layers": [{"index": layer.index, "name": layer.name, "type": layer.type, "type_id": layer.type_id,
                    "activation": layer.activation, "inputs": list(layer.inputs), "outputs": list(layer.outputs),
                    "weight_bits": layer.weight_bits,
                    "params": {k: _jsonable(v) for k, v in layer.attrs.items()},
                    **{k: _jsonable(v) for k, v in _extra_fields(layer, LAYER_FIXED_FIELDS)}}
                   for layer in sub.layers],
    }
    return _one_record_a_line(doc)


def _one_record_a_line(doc: Mapping[str, Any]) -> str:
    """JSON with one tensor, layer or buffer a line: a diff of two compiles shows the records that changed."""
    lines = ["{"]
    items = list(doc.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i + 1 < len(items) else ""
        if isinstance(value, list) and value and isinstance(value[0], dict):
            lines.append(f" {json.dumps(key)}: [")
            lines += [f"  {json.dumps(v, ensure_ascii=False)}{',' if j + 1 < len(value) else ''}"
                      for j, v in enumerate(value)]
            lines.append(f" ]{comma}")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}{comma}")
    return "\n".join(lines + ["}"]) + "\n"


def _io_json(t: QuantizedTensor) -> Dict[str, Any]:
    return {"data_id": t.id, "name": t.name, "shape": list(t.shape), "element_type": t.element_type,
            "scale": _jsonable(t.scale), "zero_point": int(t.zero_point), "layout": "NCHW"}


# -- the compiled folder ----------------------------------------------------------------------------

def folder_files(qmodel, *, options: Sequence[str] = (), calibration: str = "random",
                 tidlx_version: str = "", host_files: Optional[Mapping[str, bytes]] = None,
                 host_target: Optional[str] = None) -> Dict[str, bytes]:
    """Every file of a compiled folder by name (docs/artifacts.md §1), bytes that depend only on the
    model, the options and the calibration data. ``host_files``: the host part built for
    ``host_target`` (the deploy folder's files by relative path, docs/tvm.md), listed in the manifest
    under ``host``."""
    from ...ir.module import IRModule  # noqa: F401  (the module's type, for readers of this code)
    from .quantize import calibration_option_bits

    opts = qmodel.options
    info = NetworkInfo(calibration_option_bits(opts), opts.inference_mode, opts.num_cores)
    files: Dict[str, bytes] = {}
    host = qmodel.module.astext(show_meta_data=True)
    files[HOST_MODULE] = host.encode("utf-8", "surrogatepass")
    subgraphs = []
    for name in sorted(qmodel.subgraphs, key=subgraph_number):
        sub = qmodel.subgraphs[name]
        n = subgraph_number(name)
        net_name, io_name, json_name = artifact_names(n)
        net = encode_network(sub, info)
        files[net_name] = net
        files[io_name] = encode_io(sub, net, info)
        files[json_name] = subgraph_json(sub, info, n).encode("utf-8")
        subgraphs.append({"function": name, "net": net_name, "io": io_name, "json": json_name})
    host_files = host_files or {}
    clash = sorted(name for name in host_files if name in files or name == MANIFEST)
    if clash:
        raise ArtifactError(f"the host part's files {clash} collide with the TIDL artifacts' names")
    files.update(host_files)
    main = qmodel.module["main"]
    manifest = {
        "format": FOLDER_FORMAT, "version": fmt.version_text(), "tidlx_version": tidlx_version,
        "options": list(options), "calibration": calibration,
        "tensor_bits": opts.tensor_bits, "debug_level": opts.debug_level,
        "inference_mode": opts.inference_mode, "num_cores": opts.num_cores,
        "host_module": HOST_MODULE,
        "inputs": [{"name": p.name_hint, "type": str(p.checked_type)} for p in main.params],
        "output_names": list(qmodel.module.attrs.get("output_names") or []),
        "subgraphs": subgraphs,
        **({"host": {"target": host_target, "files": sorted(host_files)}} if host_target else {}),
        "sha256": {name: hashlib.sha256(data).hexdigest() for name, data in sorted(files.items())},
    }
    files[MANIFEST] = _one_record_a_line(manifest).encode("utf-8")
    return files


def write_file_atomically(path: str, data) -> None:
    """Writes ``data`` (bytes, or text as UTF-8 with ``\\n`` line ends) to ``path`` whole or not at all: a
    temporary file beside it (mode 0644), then renamed into place. Raises OSError; the temporary file
    does not stay behind."""
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_folder(files: Mapping[str, bytes], folder: str, *, force: bool = False) -> str:
    """Writes ``files`` as the folder ``folder``, atomically: into a temporary folder beside it, then
    renamed into place. An existing non-empty folder is replaced only with ``force``."""
    folder = os.path.abspath(os.fspath(folder))
    parent = os.path.dirname(folder)
    if not os.path.isdir(parent):
        raise ArtifactError(f"{folder}: the folder {parent} does not exist")
    if os.path.exists(folder):
        if not os.path.isdir(folder):
            raise ArtifactError(f"{folder}: exists and is not a folder")
        if os.listdir(folder) and not force:
            raise ArtifactError(f"{folder}: the folder exists and is not empty (use --force to replace it)")
    try:
        temp = tempfile.mkdtemp(prefix=f".{os.path.basename(folder)}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise ArtifactError(f"{folder}: cannot create a folder beside it ({exc.strerror})") from None
    try:
        for name, data in sorted(files.items()):
            if "/" in name:  # the host part's driver/ and include/ folders
                os.makedirs(os.path.join(temp, os.path.dirname(name)), exist_ok=True)
            with open(os.path.join(temp, name), "wb") as f:
                f.write(data)
        os.chmod(temp, 0o755)
        if os.path.exists(folder):
            old = temp + ".old"
            os.rename(folder, old)
            os.rename(temp, folder)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(temp, folder)
    except OSError as exc:
        shutil.rmtree(temp, ignore_errors=True)
        raise ArtifactError(f"{folder}: cannot write the compiled folder ({exc.strerror or exc})") from None
    return folder


__all__ = ["NetworkInfo", "encode_network", "encode_io", "subgraph_json", "folder_files", "write_folder",
           "artifact_names", "subgraph_number", "MANIFEST", "HOST_MODULE"]
