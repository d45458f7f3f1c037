"""Reading TIDL subgraph artifacts (docs/artifacts.md): ``tidl_subgraph<N>_net.bin`` -> a QuantizedSubgraph
and its header, ``tidl_subgraph<N>_io_1.bin`` -> the I/O descriptor, checked against each other.

    net = read_network(data, "tidl_subgraph0_net.bin")       # NetworkArtifact: .subgraph, .inference_mode, ...
    io = read_io(data, "tidl_subgraph0_io_1.bin", net)        # IoDescriptor, checked against net

Nothing is trusted: the size, the CRC-32, the version, every offset, count, string, array and id is
checked before it is used, and any problem is an ``ArtifactError`` naming the file (and the offset
where that helps). A reader returns a whole subgraph or raises: nothing is half-loaded.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from . import artifact_format as fmt
from .artifact_checks import check_subgraph
from .artifact_format import ArtifactError
from .network import QuantizedLayer, QuantizedSubgraph, QuantizedTensor

_LAYER_FIELDS = {f.name for f in dataclasses.fields(QuantizedLayer)}
_TENSOR_FIELDS = {f.name for f in dataclasses.fields(QuantizedTensor)}
_SUBGRAPH_FIELDS = {f.name for f in dataclasses.fields(QuantizedSubgraph)}
_LAYER_FIXED = {"index", "name", "type", "type_id", "inputs", "outputs", "attrs", "activation", "weight_bits"}
_TENSOR_FIXED = {"id", "name", "shape", "bits", "signed", "scale", "zero_point"}
_SUBGRAPH_FIXED = {"name", "layers", "tensors", "inputs", "outputs", "returns_tuple", "tensor_bits",
                   "quantization_style"}


@dataclass(frozen=True)
class NetworkArtifact:
    """A network record as read: the subgraph and the header's TI options."""

    subgraph: QuantizedSubgraph
    version: Tuple[int, int]
    calibration_options: int
    inference_mode: int
    num_cores: int
    crc: int


@dataclass(frozen=True)
class IoBuffer:
    direction: str            # "in" / "out"
    data_id: int
    name: str
    shape: Tuple[int, ...]
    element_type: int
    scale: float
    zero_point: int
    layout: str


@dataclass(frozen=True)
class IoDescriptor:
    inputs: Tuple[IoBuffer, ...]
    outputs: Tuple[IoBuffer, ...]
    num_cores: int
    inference_mode: int


class _View:
    """Bounded reads of one byte range of a file; every failure names the file and the offset."""

    def __init__(self, data: bytes, path: str, start: int, end: int, what: str):
        self.data, self.path, self.pos, self.end, self.what = data, path, start, end, what

    def fail(self, message: str, at: Optional[int] = None) -> ArtifactError:
        return ArtifactError(f"{self.path}: {message} (in {self.what}, at byte {self.pos if at is None else at})")

    def take(self, n: int) -> int:
        if n < 0 or self.pos + n > self.end:
            raise self.fail(f"a record runs past the end of its section ({n} bytes wanted, "
                            f"{self.end - self.pos} left)")
        at = self.pos
        self.pos += n
        return at

    def unpack(self, st: struct.Struct) -> tuple:
        return st.unpack_from(self.data, self.take(st.size))

    def u32s(self, n: int) -> Tuple[int, ...]:
        return struct.unpack_from(f"<{n}I", self.data, self.take(4 * n))


class _Decoder:
    def __init__(self, data: bytes, path: str, strings: Tuple[int, int], blob: Tuple[int, int]):
        self.data, self.path = data, path
        self.strings, self.blob = strings, blob
        self.array_ends: List[Tuple[int, int]] = []

    def string(self, offset: int, length: int, view: _View) -> str:
        start, size = self.strings
        if offset > size or length > size - offset:
            raise view.fail(f"a string reference ({offset}, {length}) lies outside the string table "
                            f"({size} bytes)")
        raw = self.data[start + offset:start + offset + length]
        try:
            return raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise view.fail("a string is not valid UTF-8") from None

    def value(self, view: _View, depth: int = 0) -> Any:
        if depth > fmt.MAX_NESTING:
            raise view.fail(f"a value nests deeper than {fmt.MAX_NESTING} tuples")
        at = view.pos
        tag = view.unpack(_U8)[0]
        if tag == fmt.TAG_NONE:
            return None
        if tag == fmt.TAG_BOOL:
            b = view.unpack(_U8)[0]
            if b > 1:
                raise view.fail(f"a bool holds {b}", at)
            return bool(b)
        if tag == fmt.TAG_INT:
            return view.unpack(_I64)[0]
        if tag == fmt.TAG_FLOAT:
            return view.unpack(_F64)[0]
        if tag == fmt.TAG_STR:
            return self.string(*view.unpack(_REF), view)
        if tag == fmt.TAG_TUPLE:
            count = view.unpack(_U32)[0]
            if count > view.end - view.pos:      # each item takes at least one byte
                raise view.fail(f"a tuple of {count} items is longer than its record", at)
            return tuple(self.value(view, depth + 1) for _ in range(count))
        if tag == fmt.TAG_ARRAY:
            code, rank = view.unpack(_U8U8)
            dtype = fmt.ARRAY_DTYPES.get(code)
            if dtype is None:
                raise view.fail(f"array element code {code} is not one of {sorted(fmt.ARRAY_DTYPES)}", at)
            shape = struct.unpack_from(f"<{rank}Q", self.data, view.take(8 * rank))
            offset, nbytes = view.unpack(_QQ)
            count = 1
            extent = 1   # the product of the non-zero dims: numpy refuses a shape beyond int64 even at size 0
            for d in shape:
                count *= d
                extent *= max(d, 1)
            if extent >= 1 << 62:
                raise view.fail(f"an array of shape {shape} is beyond any size (its dims multiply past 2^62)", at)
            start, size = self.blob
            if count * dtype.itemsize != nbytes:
                raise view.fail(f"an array of shape {shape} ({dtype}) says it has {nbytes} bytes", at)
            if offset % fmt.SECTION_ALIGN or offset > size or nbytes > size - offset:
                raise view.fail(f"an array at DATA offset {offset} ({nbytes} bytes) is not a 64-byte aligned "
                                f"range of the DATA section ({size} bytes)", at)
            self.array_ends.append((offset, offset + nbytes))
            array = np.frombuffer(self.data, dtype, count, start + offset).reshape(shape)
            return array.astype(dtype.newbyteorder("="), copy=True)
        raise view.fail(f"value tag {tag} is not a tag of format {fmt.version_text()}", at)

    def pairs(self, view: _View, count: int) -> List[Tuple[str, Any]]:
        out: List[Tuple[str, Any]] = []
        seen = set()
        for _ in range(count):
            at = view.pos
            key = self.string(*view.unpack(_REF), view)
            if key in seen:
                raise view.fail(f"the key '{key}' appears twice", at)
            seen.add(key)
            out.append((key, self.value(view)))
        return out


_U8 = struct.Struct("<B")
_U8U8 = struct.Struct("<BB")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_REF = struct.Struct("<II")
_QQ = struct.Struct("<QQ")


def _check_version(path: str, major: int, minor: int) -> None:
    """Another major is refused; a newer minor is read (a field it adds that this reader does not know is
    refused by name where it appears)."""
    if major != fmt.FORMAT_MAJOR:
        newer = major > fmt.FORMAT_MAJOR
        raise ArtifactError(f"{path}: written in format {major}.{minor}, {'newer than' if newer else 'not'} what "
                            f"this tidlx reads ({fmt.versions_read()}); "
                            f"{'use a newer tidlx, or compile it again with this one' if newer else 'compile it again'}")


def _check_envelope(data: bytes, path: str, magic: bytes, header_size: int, crc_offset: int,
                    size_format: str, size_offset: int, what: str) -> None:
    if len(data) < header_size:
        if data[:len(magic)] != magic[:len(data)] or not data:
            raise ArtifactError(f"{path}: not a tidlx {what} (no {magic!r} magic at byte 0)")
        raise ArtifactError(f"{path}: truncated: {len(data)} bytes, shorter than the {header_size}-byte header")
    if data[:8] != magic:
        raise ArtifactError(f"{path}: not a tidlx {what} (no {magic!r} magic at byte 0)")
    major, minor = struct.unpack_from("<HH", data, 8)
    _check_version(path, major, minor)
    size = struct.unpack_from(size_format, data, size_offset)[0]
    if size != len(data):
        state = "truncated" if len(data) < size else "has extra bytes"
        raise ArtifactError(f"{path}: {state}: the header says {size} bytes, the file has {len(data)}")
    stored = struct.unpack_from("<I", data, crc_offset)[0]
    actual = fmt.crc32(data, crc_offset)
    if stored != actual:
        raise ArtifactError(f"{path}: corrupted: the CRC-32 is {actual:08x}, the header says {stored:08x}")


def read_network(data: bytes, path: str = "<net.bin>") -> NetworkArtifact:
    """A network record -> its subgraph and header (docs/artifacts.md §2)."""
    data = bytes(data)
    _check_envelope(data, path, fmt.NET_MAGIC, fmt.NET_HEADER_SIZE, fmt.NET_CRC_OFFSET, "<Q", 16, "network record")
    (_, major, minor, header_size, file_size, crc, style, tensor_bits, mode, cores, calib, n_layers, n_tensors,
     n_sections, returns_tuple, name_off, name_len, reserved) = fmt.NET_HEADER.unpack_from(data, 0)
    head = _View(data, path, 0, fmt.NET_HEADER_SIZE, "the header")
    if header_size != fmt.NET_HEADER_SIZE or n_sections != len(fmt.SECTIONS) or reserved or data[49:52] != b"\0\0\0":
        raise head.fail(f"header size {header_size} / {n_sections} sections / reserved bytes are not those of "
                        f"format {major}.{minor}", 12)
    if returns_tuple > 1 or mode > 2 or cores < 1:
        raise head.fail(f"returns-tuple {returns_tuple}, inference mode {mode} or {cores} cores is not valid", 28)
    table_end = fmt.NET_HEADER_SIZE + fmt.SECTION_ENTRY_SIZE * n_sections
    if table_end > file_size:
        raise head.fail("the section table runs past the end of the file")
    bounds: Dict[bytes, Tuple[int, int]] = {}
    previous_end = table_end
    for i, tag in enumerate(fmt.SECTIONS):
        at = fmt.NET_HEADER_SIZE + i * fmt.SECTION_ENTRY_SIZE
        got, flags, offset, size = fmt.SECTION_ENTRY.unpack_from(data, at)
        where = f"section {i} ({got!r})"
        if got != tag or flags:
            raise ArtifactError(f"{path}: {where} at byte {at}: expected section {tag!r} with flags 0")
        if offset % fmt.SECTION_ALIGN or offset < previous_end or size > file_size or offset > file_size - size:
            raise ArtifactError(f"{path}: {where} at byte {at}: offset {offset} / size {size} is not a 64-byte "
                                f"aligned range after the previous section and inside the file ({file_size} bytes)")
        if any(data[previous_end:offset]):
            raise ArtifactError(f"{path}: nonzero padding before {where}")
        bounds[tag] = (offset, size)
        previous_end = offset + size
    if any(data[previous_end:]):
        raise ArtifactError(f"{path}: nonzero padding after the last section")

    dec = _Decoder(data, path, bounds[b"STRS"], bounds[b"DATA"])
    name = dec.string(name_off, name_len, head)

    def section(tag: bytes, what: str) -> _View:
        offset, size = bounds[tag]
        return _View(data, path, offset, offset + size, what)

    tensors: List[QuantizedTensor] = []
    tensor_meta: List[Tuple[int, int]] = []
    view = section(b"TENS", "the TENS section")
    for i in range(n_tensors):
        start = view.pos
        (size, tid, n_off, n_len, etype, rank, n_fields, *rest) = view.unpack(fmt.TENSOR_FIXED)
        dims, (scale, zero_point, round_bits, pt, pb, pl, pr, producer) = rest[:6], rest[6:]
        if size < fmt.TENSOR_FIXED.size or size % fmt.RECORD_ALIGN or start + size > view.end:
            raise view.fail(f"tensor record {i} has size {size}", start)
        zp_ok = etype in fmt.TENSOR_ELEMENT_TYPES and (zero_point == 0 or (
            fmt.TENSOR_ELEMENT_TYPES[etype][0] > 0 and _zero_point_fits(zero_point, *fmt.TENSOR_ELEMENT_TYPES[etype])))
        if tid != i or etype not in fmt.TENSOR_ELEMENT_TYPES or rank > fmt.MAX_RANK or not zp_ok or (pt, pb, pl, pr) \
                != (0, 0, 0, 0) or fmt.unpadded_dims(dims, rank) is None:
            raise view.fail(f"tensor record {i}: id {tid}, element type {etype}, rank {rank}, zero point "
                            f"{zero_point}, pads or leading dims {dims} are not valid", start)
        tname = dec.string(n_off, n_len, view)
        fields = dec.pairs(view, n_fields)
        _no_trailing(view, start + size, f"tensor record {i}")
        bits, signed = fmt.TENSOR_ELEMENT_TYPES[etype]
        extra = _known_fields(fields, _TENSOR_FIELDS - _TENSOR_FIXED, f"tensor '{tname}'", view)
        tensors.append(_construct(QuantizedTensor, view, f"tensor '{tname}'", id=tid, name=tname,
                                  shape=fmt.unpadded_dims(dims, rank), bits=bits, signed=signed, scale=scale,
                                  zero_point=zero_point, **extra))
        tensor_meta.append((round_bits, producer))
    _no_trailing(view, view.end, "the TENS section")

    layers: List[QuantizedLayer] = []
    view = section(b"LAYR", "the LAYR section")
    for i in range(n_layers):
        start = view.pos
        (size, index, type_id, act_id, core, wbits, n_in, n_out, n_attrs, n_fields, reserved,
         n_off, n_len, t_off, t_len, a_off, a_len) = view.unpack(fmt.LAYER_FIXED)
        if size < fmt.LAYER_FIXED.size or size % fmt.RECORD_ALIGN or start + size > view.end or reserved or core:
            raise view.fail(f"layer record {i} has size {size}, core {core} or nonzero reserved bytes", start)
        lname = dec.string(n_off, n_len, view)
        ltype = dec.string(t_off, t_len, view)
        activation = dec.string(a_off, a_len, view)
        what = f"layer {i} '{lname}'"
        if fmt.LAYER_TYPE_IDS.get(ltype) != type_id:
            raise view.fail(f"{what}: type '{ltype}' does not have TI's layer type id {type_id}", start)
        if fmt.ACTIVATION_IDS.get(activation.lower(), fmt.OTHER_ACTIVATION) != act_id:
            raise view.fail(f"{what}: activation '{activation}' does not have TI's activation id {act_id}", start)
        ids = view.u32s(n_in + n_out)
        for t in ids:
            if t >= len(tensors):
                raise view.fail(f"{what} names tensor {t}; the record has {len(tensors)}")
        attrs = dict(dec.pairs(view, n_attrs))
        fields = dec.pairs(view, n_fields)
        _no_trailing(view, start + size, f"layer record {i}")
        extra = _known_fields(fields, _LAYER_FIELDS - _LAYER_FIXED, what, view)
        layers.append(_construct(QuantizedLayer, view, what, index=index, name=lname, type=ltype, type_id=type_id,
                                 inputs=tuple(ids[:n_in]), outputs=tuple(ids[n_in:]), attrs=attrs,
                                 activation=activation, weight_bits=wbits, **extra))
    _no_trailing(view, view.end, "the LAYR section")

    view = section(b"IOID", "the IOID section")
    n_in, n_out = view.unpack(_REF)
    if n_in + n_out > len(tensors):
        raise view.fail(f"{n_in} inputs and {n_out} outputs for {len(tensors)} tensors")
    ids = view.u32s(n_in + n_out)
    n_fields = view.unpack(_U32)[0]
    extra = _known_fields(dec.pairs(view, n_fields), _SUBGRAPH_FIELDS - _SUBGRAPH_FIXED, "the subgraph", view)
    _no_trailing(view, view.end, "the IOID section")
    sub = _construct(QuantizedSubgraph, head, "the subgraph", name=name, layers=tuple(layers),
                     tensors=tuple(tensors), inputs=tuple(ids[:n_in]), outputs=tuple(ids[n_in:]),
                     returns_tuple=bool(returns_tuple), tensor_bits=tensor_bits, quantization_style=style, **extra)
    _check_blob(dec, data, bounds[b"DATA"], path)
    _check_structure(sub, tensor_meta, path)
    check_subgraph(sub, path)
    return NetworkArtifact(sub, (major, minor), calib, mode, cores, crc)


def _zero_point_fits(zero_point: int, bits: int, signed: bool) -> bool:
    """A zero point (style 4, docs/numerics.md §12.2) is a value of its tensor's type."""
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return lo <= zero_point <= hi


def _no_trailing(view: _View, end: int, what: str) -> None:
    if view.pos > end:
        raise view.fail(f"{what} is longer than its stated size")
    if any(view.data[view.pos:end]):
        raise view.fail(f"nonzero padding at the end of {what}")
    view.pos = end


def _known_fields(fields, known, what: str, view: _View) -> Dict[str, Any]:
    out = {}
    for key, value in fields:
        if key not in known:
            raise view.fail(f"{what} has the field '{key}', which this tidlx does not know (written by a newer "
                            f"tidlx? this one reads {fmt.versions_read()})")
        out[key] = value
    return out


def _construct(cls, view: _View, what: str, **kwargs):
    try:
        return cls(**kwargs)
    except Exception as exc:   # a field of the wrong kind that the dataclass itself refuses
        raise view.fail(f"{what} cannot be built from its record: {exc}") from None


def _check_blob(dec: _Decoder, data: bytes, bounds: Tuple[int, int], path: str) -> None:
    """Every DATA byte belongs to one array or is zero padding: no byte the reader ignores."""
    start, size = bounds
    pos = 0
    for a, b in sorted(dec.array_ends):
        if a < pos:
            raise ArtifactError(f"{path}: two arrays overlap in the DATA section at offset {a}")
        if any(data[start + pos:start + a]):
            raise ArtifactError(f"{path}: nonzero bytes between arrays in the DATA section at offset {pos}")
        pos = b
    if any(data[start + pos:start + size]):
        raise ArtifactError(f"{path}: nonzero bytes after the last array in the DATA section")


def _check_structure(sub: QuantizedSubgraph, tensor_meta, path: str) -> None:
    """The record's ids and derived fields agree: each tensor made by at most one layer (the one the tensor
    names), each layer reading only what was made before it, the inputs/outputs being Data tensors."""
    producer: Dict[int, int] = {}
    made = set()
    for i, layer in enumerate(sub.layers):
        where = f"{path}: layer {i} {layer.describe()}"
        if layer.index != i:
            raise ArtifactError(f"{where}: index {layer.index} at position {i}")
        for t in layer.inputs:
            if t not in made:
                raise ArtifactError(f"{where} reads tensor {t} before any layer makes it")
        for t in layer.outputs:
            if t in producer:
                raise ArtifactError(f"{where} makes tensor {t}, which layer {producer[t]} made already")
            producer[t] = i
            made.add(t)
        if layer.type == "Data" and bool(layer.inputs) == bool(layer.outputs):
            raise ArtifactError(f"{where}: a Data layer has inputs or outputs, not both")
    for t, (round_bits, prod) in enumerate(tensor_meta):
        if prod != producer.get(t, fmt.NO_LAYER):
            raise ArtifactError(f"{path}: tensor {t} '{sub.tensors[t].name}' names producer layer {prod}, the layers "
                                f"say {producer.get(t, 'none')}")
        layer = sub.layers[prod] if prod != fmt.NO_LAYER else None
        rb = -1 if layer is None or not isinstance(layer.round_bits, int) else layer.round_bits
        if rb != round_bits:
            raise ArtifactError(f"{path}: tensor {t} '{sub.tensors[t].name}' says roundBits {round_bits}, its "
                                f"producer {rb}")
    ins = [layer.outputs[0] for layer in sub.layers if layer.type == "Data" and not layer.inputs]
    outs = [layer.inputs[0] for layer in sub.layers if layer.type == "Data" and layer.inputs]
    if sorted(ins) != sorted(sub.inputs) or sorted(outs) != sorted(sub.outputs) or len(set(sub.inputs)) != \
            len(sub.inputs) or len(set(sub.outputs)) != len(sub.outputs):
        raise ArtifactError(f"{path}: the subgraph's inputs {list(sub.inputs)} / outputs {list(sub.outputs)} are not "
                            f"those of its Data layers ({ins} / {outs})")


def read_io(data: bytes, path: str = "<io_1.bin>", net: Optional[NetworkArtifact] = None) -> IoDescriptor:
    """An I/O descriptor (docs/artifacts.md §3); with ``net``, checked to be that network record's."""
    data = bytes(data)
    _check_envelope(data, path, fmt.IO_MAGIC, fmt.IO_HEADER_SIZE, fmt.IO_CRC_OFFSET, "<I", 12, "I/O descriptor")
    (_, major, minor, size, crc, n_in, n_out, cores, mode, reserved, net_crc) = fmt.IO_HEADER.unpack_from(data, 0)
    view = _View(data, path, fmt.IO_HEADER_SIZE, len(data), "the buffers")
    if reserved or mode > 2 or cores < 1:
        raise view.fail(f"inference mode {mode}, {cores} cores or reserved bytes are not valid", 24)
    buffers: List[IoBuffer] = []
    for i in range(n_in + n_out):
        start = view.pos
        (rsize, direction, etype, rank, layout, data_id, *rest) = view.unpack(fmt.IO_FIXED)
        dims, (pt, pb, pl, pr, scale, zero_point, name_len) = rest[:6], rest[6:]
        if rsize != fmt.align(fmt.IO_FIXED.size + name_len, fmt.RECORD_ALIGN) or start + rsize > view.end:
            raise view.fail(f"buffer record {i} has size {rsize} for a {name_len}-byte name", start)
        zp_ok = etype in fmt.TENSOR_ELEMENT_TYPES and (zero_point == 0 or (
            fmt.TENSOR_ELEMENT_TYPES[etype][0] > 0 and _zero_point_fits(zero_point, *fmt.TENSOR_ELEMENT_TYPES[etype])))
        if direction != (0 if i < n_in else 1) or etype not in fmt.TENSOR_ELEMENT_TYPES or rank > fmt.MAX_RANK \
                or layout != fmt.LAYOUT_NCHW or not zp_ok or (pt, pb, pl, pr) != (0, 0, 0, 0) \
                or fmt.unpadded_dims(dims, rank) is None:
            raise view.fail(f"buffer record {i}: direction {direction}, element type {etype}, rank {rank}, layout "
                            f"{layout}, zero point, pads or leading dims are not valid", start)
        raw = data[view.take(name_len):view.pos]
        try:
            name = raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise view.fail(f"buffer record {i}: the name is not valid UTF-8") from None
        _no_trailing(view, start + rsize, f"buffer record {i}")
        buffers.append(IoBuffer("in" if direction == 0 else "out", data_id, name, fmt.unpadded_dims(dims, rank),
                                etype, scale, zero_point, "NCHW"))
    if view.pos != len(data):
        raise view.fail("bytes after the last buffer record")
    io = IoDescriptor(tuple(buffers[:n_in]), tuple(buffers[n_in:]), cores, mode)
    if net is not None:
        _check_io_matches(io, net, net_crc, path)
    return io


def _check_io_matches(io: IoDescriptor, net: NetworkArtifact, net_crc: int, path: str) -> None:
    sub = net.subgraph
    if net_crc != net.crc:
        raise ArtifactError(f"{path}: does not belong to this network record (it was written for a record with "
                            f"CRC {net_crc:08x}; the record has {net.crc:08x}): compile the folder again")
    if (io.num_cores, io.inference_mode) != (net.num_cores, net.inference_mode):
        raise ArtifactError(f"{path}: {io.num_cores} cores / inference mode {io.inference_mode}, the network record "
                            f"says {net.num_cores} / {net.inference_mode}")
    for buffers, ids, kind in ((io.inputs, sub.inputs, "inputs"), (io.outputs, sub.outputs, "outputs")):
        if len(buffers) != len(ids):
            raise ArtifactError(f"{path}: {len(buffers)} {kind}, the network record has {len(ids)}")
        for buf, t in zip(buffers, ids):
            tensor = sub.tensors[t]
            if (buf.data_id, buf.name, buf.shape, buf.element_type, buf.scale, buf.zero_point) != \
                    (tensor.id, tensor.name, tensor.shape, tensor.element_type, tensor.scale, tensor.zero_point):
                raise ArtifactError(f"{path}: {kind[:-1]} '{buf.name}' (data id {buf.data_id}, {list(buf.shape)}, "
                                    f"element type {buf.element_type}, scale {buf.scale}) is not the network "
                                    f"record's '{tensor.name}' (data id {tensor.id}, {list(tensor.shape)}, element "
                                    f"type {tensor.element_type}, scale {tensor.scale})")


__all__ = ["NetworkArtifact", "IoDescriptor", "IoBuffer", "read_network", "read_io"]
