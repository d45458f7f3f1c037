"""TVM's params files: what ``tvm.runtime.save_param_dict`` (``relay.save_param_dict``) writes.

A TVM user keeps a model as Relay text (``mod.astext(show_meta_data=False)``) and its weights
as a params file; ``read_tvm_params`` reads the file into ``{name: numpy array}`` for
``tidlx.load(path, params=...)`` / ``tidlx ... --params FILE``. The reader is tidlx's own, from
the byte layout of TVM's ``SaveParams`` (src/runtime/file_utils.cc) and ``SaveDLTensor``
(include/tvm/runtime/ndarray.h), every integer little-endian:

    u64 0xF7E58D4F05049CB7       the params-list magic
    u64 reserved
    u64 N, then N names          each: u64 length, that many bytes (UTF-8)
    u64 N, then N arrays         each:
        u64 0xDD5E40F096B4A13F   the array magic
        u64 reserved
        i32 device_type, i32 device_id     always CPU (1, 0): TVM saves every array from the host
        i32 ndim
        u8 code, u8 bits, u16 lanes        DLPack's dtype: code 0 int, 1 uint, 2 float, 4 bfloat,
                                           6 bool (TVM before DLPack 0.8: bool is uint, 1 bit)
        ndim x i64 shape
        i64 byte count           product(shape) * ceil(bits / 8)
        the data, C order

Every way a file can fail to be this is an error that names the file and the byte offset.
"""

from __future__ import annotations

import struct
import warnings
from typing import Dict, Tuple

import numpy as np

from ...ir.errors import TidlxError, TidlxWarning

TVM_PARAMS_MAGIC = 0xF7E58D4F05049CB7
TVM_ARRAY_MAGIC = 0xDD5E40F096B4A13F
#: The file's first 8 bytes.
TVM_PARAMS_HEADER = struct.pack("<Q", TVM_PARAMS_MAGIC)

#: (DLPack type code, bits) -> numpy dtype (little-endian).
_DTYPES: Dict[Tuple[int, int], str] = {
    (0, 8): "i1", (0, 16): "<i2", (0, 32): "<i4", (0, 64): "<i8",
    (1, 8): "u1", (1, 16): "<u2", (1, 32): "<u4", (1, 64): "<u8",
    (2, 16): "<f2", (2, 32): "<f4", (2, 64): "<f8",
    (1, 1): "bool", (6, 8): "bool",
}
_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "handle", 4: "bfloat", 5: "complex", 6: "bool"}
_CPU = 1
#: More dimensions than any tensor has: a larger count is a damaged file, not a tensor.
_MAX_NDIM = 64
#: numpy's limit on an array's size (its dimensions, zeros aside, multiplied).
_MAX_BYTES = 2 ** 63 - 1


class ParamsFileError(TidlxError):
    """A params file that cannot be read; the message names the file and the byte offset."""


class _Reader:
    def __init__(self, data: bytes, source: str):
        self.data = memoryview(data)
        self.source = source
        self.pos = 0

    def error(self, message: str, at: int = None) -> ParamsFileError:
        return ParamsFileError(f"{self.source}: byte {self.pos if at is None else at}: {message}")

    def take(self, n: int, what: str) -> memoryview:
        if n > len(self.data) - self.pos:
            raise self.error(f"the file ends inside {what} (it needs {n} bytes, {len(self.data) - self.pos} "
                             f"are left; the file is {len(self.data)} bytes: truncated?)")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str, what: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))

    def count(self, what: str, item_bytes: int) -> int:
        """A u64 count of items of at least ``item_bytes`` bytes each, checked against the bytes left."""
        at = self.pos
        (n,) = self.unpack("<Q", f"the number of {what}")
        if n * item_bytes > len(self.data) - self.pos:
            raise self.error(f"the file says it holds {n} {what}, more than its {len(self.data)} bytes can "
                             f"(a damaged file, or not a TVM params file)", at)
        return n


def read_tvm_params(data: bytes, source: str = "<params>") -> Dict[str, np.ndarray]:
    """The arrays of a TVM params file (``data``: its bytes), by name, in file order."""
    r = _Reader(data, source)
    (magic,) = r.unpack("<Q", "the file header")
    if magic != TVM_PARAMS_MAGIC:
        raise r.error(f"not a TVM params file: it starts with 0x{magic:016X}, a params file with "
                      f"0x{TVM_PARAMS_MAGIC:016X} (what tvm.runtime.save_param_dict writes)", 0)
    r.unpack("<Q", "the file header")  # reserved
    names = []
    for i in range(r.count("names", 8)):
        length = r.count(f"bytes in name {i}", 1)
        at = r.pos
        raw = bytes(r.take(length, f"name {i}"))
        try:
            names.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise r.error(f"name {i} is not UTF-8 ({exc.reason})", at + exc.start) from None
    at = r.pos
    n_arrays = r.count("arrays", 40)
    if n_arrays != len(names):
        raise r.error(f"the file names {len(names)} arrays but holds {n_arrays}", at)
    arrays: Dict[str, np.ndarray] = {}
    for name in names:
        at = r.pos
        array = _read_array(r, name)
        if name in arrays:
            raise r.error(f"array '{name}' appears twice", at)
        arrays[name] = array
    if r.pos != len(r.data):
        warnings.warn(TidlxWarning(f"{source}: {len(r.data) - r.pos} bytes after the last array (from byte "
                                   f"{r.pos}) are not part of the params and were ignored"), stacklevel=2)
    return arrays


def _read_array(r: _Reader, name: str) -> np.ndarray:
    what = f"array '{name}'"
    at = r.pos
    magic, _reserved = r.unpack("<QQ", f"the header of {what}")
    if magic != TVM_ARRAY_MAGIC:
        raise r.error(f"{what} does not start with the array magic 0x{TVM_ARRAY_MAGIC:016X} (found "
                      f"0x{magic:016X}): the file is damaged", at)
    at = r.pos
    device_type, device_id, ndim = r.unpack("<iii", f"the header of {what}")
    if device_type != _CPU:
        raise r.error(f"{what} is saved for device type {device_type} (id {device_id}); TVM saves every "
                      f"array as a CPU array (device type 1)", at)
    if not 0 <= ndim <= _MAX_NDIM:
        raise r.error(f"{what} has {ndim} dimensions", at + 8)
    at = r.pos
    code, bits, lanes = r.unpack("<BBH", f"the dtype of {what}")
    if lanes != 1:
        raise r.error(f"{what} has a vector dtype ({lanes} lanes), which tidlx cannot hold", at)
    dtype = _DTYPES.get((code, bits))
    if dtype is None:
        kind = _CODE_NAMES.get(code, f"type code {code}")
        extra = " (tidlx keeps bfloat16 only inside its IR, not as numpy data)" if code == 4 else ""
        raise r.error(f"{what} has dtype {kind}{bits}, which tidlx does not read{extra}", at)
    at = r.pos
    shape = r.unpack(f"<{ndim}q", f"the shape of {what}") if ndim else ()
    if any(d < 0 for d in shape):
        raise r.error(f"{what} has a negative dimension in its shape {list(shape)}", at)
    elements = int(np.prod(shape, dtype=object)) if shape else 1
    item = (bits + 7) // 8
    if int(np.prod([d for d in shape if d] or [1], dtype=object)) * item > _MAX_BYTES:
        raise r.error(f"{what} has the shape {list(shape)}, larger than any array can be", at)
    at = r.pos
    (nbytes,) = r.unpack("<q", f"the byte count of {what}")
    if nbytes != elements * item:
        raise r.error(f"{what} of shape {list(shape)} and {item}-byte elements says it has {nbytes} bytes of "
                      f"data; it must have {elements * item}", at)
    raw = r.take(nbytes, f"the data of {what}")
    if dtype == "bool":
        values = np.frombuffer(raw, dtype=np.uint8)
        if values.size and values.max() > 1:
            raise r.error(f"{what} is bool but holds byte values other than 0 and 1", r.pos - nbytes)
        return values.astype(np.bool_).reshape(shape)
    return np.frombuffer(raw, dtype=dtype).astype(np.dtype(dtype).newbyteorder("="), copy=True).reshape(shape)


__all__ = ["read_tvm_params", "ParamsFileError", "TVM_PARAMS_MAGIC", "TVM_ARRAY_MAGIC", "TVM_PARAMS_HEADER"]
