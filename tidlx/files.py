"""The array files the CLI and the API read and write: ``.npz`` inputs, outputs and params,
and TVM params files (``save_param_dict``). Every failure is a ``TidlxError`` that names the
file (and the option it came from), never a numpy or zipfile traceback.

    arrays = read_npz("inputs.npz", what="--input")        # {name: array}
    params = read_params("resnet18.params")                 # .npz or TVM's params format
    path = write_npz("out", arrays, what="--output")        # writes out.npz, returns that path
    text = read_text("model.txt")                           # a UTF-8 text file (Relay text, a study)
"""

from __future__ import annotations

import os
import tokenize
import zipfile
import zlib
from typing import Dict, Mapping

import numpy as np

from .ir import TidlxError
from .frontends.relay.params import TVM_PARAMS_HEADER, read_tvm_params

NPZ_SUFFIX = ".npz"
_ZIP_HEADERS = (b"PK\x03\x04", b"PK\x05\x06")  # a zip with members / an empty zip
_NPY_HEADER = b"\x93NUMPY"


class ArrayFileError(TidlxError):
    """An array file that cannot be read or written."""


def _label(path: str, what: str) -> str:
    return f"{what} {path}" if what else str(path)


def _read_head(path: str, what: str, n: int = 8) -> bytes:
    label = _label(path, what)
    if os.path.isdir(path):
        raise ArrayFileError(f"{label}: is a folder, not a file")
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except FileNotFoundError:
        raise ArrayFileError(f"{label}: no such file") from None
    except OSError as exc:
        raise ArrayFileError(f"{label}: cannot read the file ({exc.strerror})") from None


def read_npz(path, what: str = "") -> Dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file by name. ``what`` (e.g. ``"--input"``) names the option
    in messages. Refused with a clear error: a missing, empty, truncated or damaged file, a
    ``.npy`` (one array without a name), another format, arrays of Python objects (pickles)."""
    path = os.fspath(path)
    label = _label(path, what)
    head = _read_head(path, what)
    if not head:
        raise ArrayFileError(f"{label}: the file is empty (0 bytes), not an .npz file")
    if head.startswith(_NPY_HEADER):
        raise ArrayFileError(f"{label}: a .npy file holds one array without a name; an .npz names each "
                             f"array (numpy.savez('{os.path.splitext(os.path.basename(path))[0]}.npz', "
                             f"NAME=array), with the model's input or parameter names)")
    if not head.startswith(_ZIP_HEADERS):
        raise ArrayFileError(f"{label}: not an .npz file (an .npz is a zip archive; this file starts with "
                             f"{head[:8]!r})")
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                _check_member(zf, info, label)
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except ValueError as exc:
        if "allow_pickle" in str(exc) or "pickle" in str(exc).lower():
            raise ArrayFileError(f"{label}: an array holds Python objects (a pickle), which tidlx does not "
                                 f"load; save numeric arrays") from None
        raise ArrayFileError(f"{label}: an array in the file is damaged ({exc})") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError,
            SyntaxError, tokenize.TokenError) as exc:
        # RuntimeError: zipfile's "is encrypted, password required" (a damaged flag bit);
        # SyntaxError / TokenError: numpy parsing a damaged .npy header (a Python dict literal)
        raise ArrayFileError(f"{label}: cannot read the .npz file: it is truncated or damaged "
                             f"({type(exc).__name__}: {exc})") from None
    return arrays


def _check_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, label: str) -> None:
    """One member of an .npz, read up to its array header: a .npy whose data fits in the bytes
    the archive says it has (a damaged header would have numpy allocate its shape first)."""
    if not info.filename.endswith(".npy"):  # numpy would return its bytes, not an array
        raise ArrayFileError(f"{label}: the member '{info.filename}' is not a numpy array (.npy); the file is "
                             f"damaged or not an .npz")
    name = info.filename[:-4]
    with zf.open(info) as member:
        version = np.lib.format.read_magic(member)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0) else
                       np.lib.format.read_array_header_2_0)
        shape, _, dtype = read_header(member)
    if dtype.hasobject:
        raise ArrayFileError(f"{label}: array '{name}' holds Python objects (a pickle), which tidlx does not "
                             f"load; save numeric arrays")
    nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize if shape else dtype.itemsize
    if nbytes > info.file_size:
        raise ArrayFileError(f"{label}: array '{name}' says it is {dtype} of shape {tuple(shape)} ({nbytes} "
                             f"bytes) but the file holds {info.file_size} bytes for it: the file is damaged")


def read_params(path, what: str = "--params") -> Dict[str, np.ndarray]:
    """Constants by name from an ``.npz`` or a TVM params file (``tvm.runtime.save_param_dict``
    / ``relay.save_param_dict``), told apart by their first bytes, whatever the file is called."""
    path = os.fspath(path)
    head = _read_head(path, what)
    if head.startswith(_ZIP_HEADERS) or head.startswith(_NPY_HEADER) or not head:
        return read_npz(path, what)
    if head != TVM_PARAMS_HEADER:
        raise ArrayFileError(f"{_label(path, what)}: neither an .npz file nor a TVM params file (the file "
                             f"starts with {head!r}; a TVM params file with {TVM_PARAMS_HEADER!r}, as "
                             f"tvm.runtime.save_param_dict writes it)")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ArrayFileError(f"{_label(path, what)}: cannot read the file ({exc.strerror})") from None
    return read_tvm_params(data, _label(path, what))


def read_text(path, error=TidlxError, what: str = "") -> str:
    """A UTF-8 text file's text; an unreadable file or one that is not UTF-8 is ``error`` naming it."""
    label = _label(path, what)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise error(f"{label}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise error(f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def npz_path(path) -> str:
    """The file ``write_npz`` writes: ``path``, with ``.npz`` added when it has another ending
    (as ``numpy.savez`` does)."""
    path = os.fspath(path)
    return path if path.endswith(NPZ_SUFFIX) else path + NPZ_SUFFIX


def npz_target(path, what: str = "") -> str:
    """``npz_path(path)``, checked before any work is done for it: its folder exists and it is
    not a folder itself."""
    target = npz_path(path)
    label = _label(target, what)
    for given in {os.fspath(path), target}:
        if os.path.isdir(given):
            raise ArrayFileError(f"{_label(given, what)}: is a folder; give a file name (e.g. "
                                 f"{os.path.join(given, 'out.npz')})")
    if not os.path.isdir(os.path.dirname(os.path.abspath(target))):
        raise ArrayFileError(f"{label}: the folder {os.path.dirname(target) or '.'} does not exist")
    return target


def write_npz(path, arrays: Mapping[str, np.ndarray], what: str = "") -> str:
    """Writes ``arrays`` to an ``.npz`` (uncompressed, as ``numpy.savez``; any name works, also
    ``file`` or one with a ``/``) and returns the path written (``npz_path``). A missing folder,
    a folder without write permission or a full disk is a clear error, and no partial file is
    left behind."""
    target = npz_target(path, what)
    label = _label(target, what)
    try:
        f = open(target, "wb")
    except OSError as exc:
        raise ArrayFileError(f"{label}: cannot write the file ({exc.strerror or exc})") from None
    try:
        with f, zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, array in arrays.items():
                with zf.open(f"{name}.npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
    except OSError as exc:  # e.g. the disk is full: no half-written file stays
        try:
            os.remove(target)
        except OSError:
            pass
        raise ArrayFileError(f"{label}: cannot write the file ({exc.strerror or exc})") from None
    return target


__all__ = ["read_npz", "read_params", "write_npz", "npz_path", "npz_target", "ArrayFileError", "NPZ_SUFFIX"]
