"""The layout of tidlx's TIDL subgraph artifacts (docs/artifacts.md): ``tidl_subgraph<N>_net.bin`` (the
network record) and ``tidl_subgraph<N>_io_1.bin`` (the I/O descriptor), byte by byte.

Both the writer (``tidlx.backends.tidl.artifacts``) and the reader (``artifact_reader``) use these
definitions, so a layout lives in one place. Everything is little-endian; sections start at 64-byte
offsets; each file carries its size and a CRC-32 of all its bytes (the CRC field read as zero), which
sees every single-bit error and every burst up to 32 bits.

Versioning: a reader reads every ``FORMAT_MAJOR`` file; another major is refused with a message naming
the versions read; a field of a newer minor that the reader does not know is refused by name. How a
field is added: docs/artifacts.md §6.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any, List, Tuple

import numpy as np

from ...ir.errors import TidlxError

FORMAT_MAJOR = 1
FORMAT_MINOR = 0

NET_MAGIC = b"TIDLXNET"
IO_MAGIC = b"TIDLXIO\0"
NET_HEADER_SIZE = 64
IO_HEADER_SIZE = 32
SECTION_ALIGN = 64
RECORD_ALIGN = 8
#: The CRC field of either header: bytes [CRC_OFFSET, CRC_OFFSET + 4).
NET_CRC_OFFSET = 24
IO_CRC_OFFSET = 16

#: The net.bin sections, in the order they appear (tags of 4 ASCII bytes).
SECTIONS = (b"STRS", b"TENS", b"LAYR", b"IOID", b"DATA")
SECTION_ENTRY_SIZE = 24

#: TI's layer type ids (TIDL-NUMERICS.md, "The network record"): the reader checks a layer's type name
#: against its id, so a record cannot say Conv with the id of a Pool.
LAYER_TYPE_IDS = {
    "Data": 0, "Conv": 1, "Pool": 2, "ReLU": 3, "PReLU": 4, "EltWise": 5, "InnerProduct": 6, "SoftMax": 7,
    "BatchNorm": 8, "Bias": 9, "Scale": 10, "Deconv": 11, "Concat": 12, "Split": 13, "Slice": 14, "Crop": 15,
    "Flatten": 16, "DropOut": 17, "ArgMax": 18, "DetectionOutput": 19, "Shuffle": 20, "Resize": 21,
    "RoiPool": 22, "OdPostProcess": 23, "DepthToSpace": 24, "Sigmoid": 25, "Pad": 26, "ColorConversion": 27,
    "OdOutputReformat": 28, "DataConvert": 29, "Custom": 30, "BatchReshape": 31, "Reduce": 32,
    "ScatterElements": 33, "Squeeze": 34, "Tanh": 35, "HardSigmoid": 36, "ELU": 37, "Reshape": 38,
    "ConstData": 39, "Gather": 40, "Transpose": 41, "LayerNorm": 42, "GridSample": 43,
    "TopK": 44,
}
#: TI's activation type ids (same source); tidlx's activation names are lower case. 255: not TI's.
ACTIVATION_IDS = {"none": 0, "relu": 1, "prelu": 2, "relu6": 3, "clip": 4, "sigmoid": 5, "tanh": 6,
                  "hardsigmoid": 7, "elu": 8, "gelu": 9}
OTHER_ACTIVATION = 255

#: Array element codes: TI's element type ids (TIDL-NUMERICS.md), plus tidlx's 9 (float64, for
#: per-channel weight scales) and 10 (bool).
ARRAY_DTYPES = {0: np.dtype("<u1"), 1: np.dtype("<i1"), 2: np.dtype("<u2"), 3: np.dtype("<i2"),
                4: np.dtype("<u4"), 5: np.dtype("<i4"), 6: np.dtype("<f4"), 7: np.dtype("<u8"), 8: np.dtype("<i8"),
                9: np.dtype("<f8"), 10: np.dtype("?")}
ARRAY_CODES = {dt.newbyteorder("=") if dt.byteorder != "|" else dt: code for code, dt in ARRAY_DTYPES.items()}

#: Tensor element types and what they mean for a QuantizedTensor: (bits, signed); F32 is bits 0; S32 holds
#: indices (TopK, ScatterElements: docs/numerics.md §8.15).
TENSOR_ELEMENT_TYPES = {0: (8, False), 1: (8, True), 2: (16, False), 3: (16, True), 5: (32, True), 6: (0, True)}

#: Typed values (layer parameters and fields): one tag byte, then the payload.
TAG_NONE, TAG_BOOL, TAG_INT, TAG_FLOAT, TAG_STR, TAG_TUPLE, TAG_ARRAY = range(7)
MAX_NESTING = 8
MAX_RANK = 6
NO_LAYER = 0xFFFFFFFF

#: Tensor record, fixed part (80 bytes): record size, id, name, element type, rank, field count, dims
#: (N, D1, D2, C, H, W), tensorScale, zero point, roundBits, pads (top, bottom, left, right),
#: producer layer, reserved.
TENSOR_FIXED = struct.Struct("<IIIIBBH6IdiiHHHHI8x")
#: Layer record, fixed part (48 bytes): record size, index, TI type id, activation id, core id,
#: weight element size (bits), input / output / parameter / field counts, reserved, name, type name,
#: activation name.
LAYER_FIXED = struct.Struct("<IIHBBHHHHHHIIIIII")
#: I/O buffer record, fixed part (64 bytes): record size, direction (0 in, 1 out), element type,
#: rank, layout (0 NCHW), data id, dims, pads, tensorScale, zero point, name length, reserved.
IO_FIXED = struct.Struct("<IBBBBI6IHHHHdiI4x")
NET_HEADER = struct.Struct("<8sHHIQIBBBBIIIIB3xIII")
IO_HEADER = struct.Struct("<8sHHIIHHBBHI")
SECTION_ENTRY = struct.Struct("<4sIQQ")
LAYOUT_NCHW = 0

assert TENSOR_FIXED.size == 80 and LAYER_FIXED.size == 48 and IO_FIXED.size == 64
assert NET_HEADER.size == NET_HEADER_SIZE and IO_HEADER.size == IO_HEADER_SIZE


class ArtifactError(TidlxError):
    """A TIDL artifact that cannot be read or written: truncated, corrupted, of another version, or not
    matching its companion files. The message names the file and, where it helps, the offset."""


def crc32(data: bytes, crc_offset: int) -> int:
    """The file's CRC-32 with its own CRC field taken as zero."""
    crc = zlib.crc32(data[:crc_offset])
    crc = zlib.crc32(b"\0\0\0\0", crc)
    return zlib.crc32(data[crc_offset + 4:], crc) & 0xFFFFFFFF


def align(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def version_text() -> str:
    return f"{FORMAT_MAJOR}.{FORMAT_MINOR}"


def versions_read() -> str:
    """What this reader reads, for messages."""
    return f"format {FORMAT_MAJOR}.x, fields of up to {FORMAT_MAJOR}.{FORMAT_MINOR}"


def padded_dims(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """A shape as TI's six dims (N, D1, D2, C, H, W): the first axis is the batch N, the others are
    right-aligned with ones before them (NCHW -> N 1 1 C H W; (N, K) -> N 1 1 1 1 K); a 1-D shape is W."""
    shape = tuple(int(d) for d in shape)
    if len(shape) <= 1:
        return (1,) * (MAX_RANK - len(shape)) + shape
    return (shape[0],) + (1,) * (MAX_RANK - len(shape)) + shape[1:]


def unpadded_dims(dims: Tuple[int, ...], rank: int):
    """The inverse of ``padded_dims``; None when the dims that the rank leaves out are not ones."""
    dims = tuple(dims)
    if rank > MAX_RANK or len(dims) != MAX_RANK:
        return None
    if rank <= 1:
        pad, shape = dims[:MAX_RANK - rank], dims[MAX_RANK - rank:]
    else:
        pad, shape = dims[1:MAX_RANK - rank + 1], dims[:1] + dims[MAX_RANK - rank + 1:]
    return shape if all(d == 1 for d in pad) else None


def array_code(array: np.ndarray) -> int:
    dt = array.dtype
    code = ARRAY_CODES.get(dt if dt.byteorder in "=|" else dt.newbyteorder("="))
    if code is None:
        raise KeyError(str(dt))
    return code


__all__ = ["ArtifactError", "FORMAT_MAJOR", "FORMAT_MINOR", "LAYER_TYPE_IDS", "ACTIVATION_IDS", "crc32",
           "padded_dims", "versions_read", "version_text"]
