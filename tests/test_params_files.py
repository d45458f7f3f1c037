"""The array files tidlx reads and writes (tidlx/files.py, frontends/relay/params.py): TVM params
files as TVM writes them (tests/data/tvm_params/, made by apache-tvm itself), .npz inputs and
outputs, and every way such a file can be bad: a clean TidlxError naming the file (and, for a
TVM params file, the byte offset), never a numpy, zipfile or struct traceback."""

from __future__ import annotations

import errno
import importlib.util
import os
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tidlx
from tidlx.files import ArrayFileError, npz_path, read_npz, read_params, write_npz
from tidlx.frontends.relay.params import ParamsFileError, read_tvm_params

DATA = Path(__file__).parent / "data" / "tvm_params"


def _fixture_module():
    spec = importlib.util.spec_from_file_location("make_fixtures", DATA / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the value definitions; tvm is imported only to write the files
    return module


FIXTURES = _fixture_module()


def test_reads_every_dtype_tvm_writes():
    got = read_params(DATA / "dtypes.params")
    want = FIXTURES.arrays()
    assert list(got) == list(want)
    for name, array in want.items():
        assert got[name].dtype == array.dtype and got[name].shape == array.shape, name
        assert np.array_equal(got[name], array), name
        assert got[name].flags.writeable and got[name].dtype.isnative


def test_the_same_file_as_npz_reads_the_same(tmp_path):
    want = FIXTURES.arrays()
    path = write_npz(tmp_path / "p.npz", want)
    got = read_params(path)
    assert list(got) == list(want) and all(np.array_equal(got[k], want[k]) for k in want)


def _tvm_file(arrays, *, device=1, lanes=1, dtype_override=None, shape_override=None, extra=b"") -> bytes:
    """A params file as TVM's SaveParams lays it out (the layout the reader documents)."""
    codes = {"i": 0, "u": 1, "f": 2, "b": 6}
    out = [struct.pack("<QQ", 0xF7E58D4F05049CB7, 0), struct.pack("<Q", len(arrays))]
    for name in arrays:
        raw = name.encode()
        out.append(struct.pack("<Q", len(raw)) + raw)
    out.append(struct.pack("<Q", len(arrays)))
    for a in arrays.values():
        code, bits = dtype_override or (codes[a.dtype.kind], a.dtype.itemsize * 8)
        out.append(struct.pack("<QQiii", 0xDD5E40F096B4A13F, 0, device, 0, a.ndim))
        out.append(struct.pack("<BBH", code, bits, lanes) + struct.pack(f"<{a.ndim}q", *(shape_override or a.shape)))
        out.append(struct.pack("<q", a.nbytes) + a.astype(a.dtype.newbyteorder("<")).tobytes())
    return b"".join(out) + extra


def test_the_layout_matches_the_files_tvm_wrote():
    assert _tvm_file(FIXTURES.conv_weights()) == (DATA / "conv.params").read_bytes()


def test_every_truncation_is_an_error_at_its_byte():
    data = (DATA / "dtypes.params").read_bytes()
    for n in range(len(data)):
        with pytest.raises(ParamsFileError) as info:
            read_tvm_params(data[:n], "cut.params")
        message = str(info.value)
        assert message.startswith("cut.params: byte ") and ("the file ends inside" in message
                                                             or "more than its" in message), (n, message)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_files_give_params_errors_or_arrays(data):
    raw = bytearray((DATA / "dtypes.params").read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    try:
        arrays = read_tvm_params(bytes(raw), "damaged.params")
    except ParamsFileError as exc:
        assert str(exc).startswith("damaged.params: byte ")
    else:
        assert all(isinstance(a, np.ndarray) for a in arrays.values())


@pytest.mark.parametrize("data, message", [
    (b"", "byte 0: the file ends inside the file header"),
    (b"\x00" * 16, "byte 0: not a TVM params file: it starts with 0x0000000000000000"),
    (_tvm_file({"w": np.ones(2, np.float32)}, device=2), "array 'w' is saved for device type 2"),
    (_tvm_file({"w": np.ones(2, np.float32)}, lanes=4), "array 'w' has a vector dtype (4 lanes)"),
    (_tvm_file({"w": np.ones(2, np.float32)}, dtype_override=(5, 64)), "array 'w' has dtype complex64"),
    (_tvm_file({"w": np.ones(2, np.float32)}, dtype_override=(4, 16)), "bfloat16 only inside its IR"),
    (_tvm_file({"w": np.ones(2, np.int8)}, dtype_override=(6, 8)) [:-2] + b"\x02\x00", "holds byte values other"),
    (_tvm_file({"w": np.ones(2, np.float32), "v": np.ones(1, np.float32)})[:24] + struct.pack("<Q", 2 ** 62),
     "the file says it holds"),
    (_tvm_file({"w": np.zeros((0, 4), np.float32)}, shape_override=(0, 2 ** 62)), "larger than any array can be"),
])
def test_bad_tvm_files(data, message):
    with pytest.raises(ParamsFileError) as info:
        read_tvm_params(data, "m.params")
    assert str(info.value).startswith("m.params: byte ") and message in str(info.value)


def test_odd_files_names_and_trailing_bytes():
    w = np.arange(3, dtype=np.float32)
    bad_name = _tvm_file({"w": w}).replace(b"\x01\x00\x00\x00\x00\x00\x00\x00w", b"\x01" + b"\x00" * 7 + b"\xff")
    with pytest.raises(ParamsFileError, match=r"byte 32: name 0 is not UTF-8"):
        read_tvm_params(bad_name, "n")
    data = _tvm_file({"w": w})
    twice = data[:16] + struct.pack("<Q", 2) + data[24:33] + data[24:33] + struct.pack("<Q", 2) + data[41:] + data[41:]
    with pytest.raises(ParamsFileError, match="array 'w' appears twice"):
        read_tvm_params(twice, "twice")
    with pytest.warns(tidlx.ir.errors.TidlxWarning, match="3 bytes after the last array"):
        assert np.array_equal(read_tvm_params(_tvm_file({"w": w}, extra=b"abc"), "x")["w"], w)


@pytest.mark.parametrize("content, message", [
    (b"", "the file is empty (0 bytes), not an .npz file"),
    (b"hello world", "not an .npz file (an .npz is a zip archive"),
    (None, "a .npy file holds one array without a name"),
    ("truncated", "truncated or damaged"),
    ("pickle", "holds Python objects (a pickle)"),
])
def test_bad_npz_inputs(tmp_path, content, message):
    path = tmp_path / "in.npz"
    if content is None:
        np.save(path.with_suffix(".npy"), np.zeros(3))
        path = path.with_suffix(".npy")
    elif content == "truncated":
        np.savez(path, x=np.zeros((64, 64), np.float32))
        path.write_bytes(path.read_bytes()[:3000])
    elif content == "pickle":
        np.savez(path, x=np.array([{"a": 1}], dtype=object))
    else:
        path.write_bytes(content)
    with pytest.raises(ArrayFileError) as info:
        read_npz(path, "--input")
    assert str(info.value).startswith(f"--input {path}: ") and message in str(info.value)


def test_missing_files_and_folders(tmp_path):
    with pytest.raises(ArrayFileError, match="no such file"):
        read_npz(tmp_path / "nope.npz", "--input")
    with pytest.raises(ArrayFileError, match="is a folder"):
        read_params(tmp_path)
    (tmp_path / "w.bin").write_bytes(b"GGUF\x03\x00\x00\x00")
    with pytest.raises(ArrayFileError, match="neither an .npz file nor a TVM params file"):
        read_params(tmp_path / "w.bin")


def test_write_npz_any_name_and_the_suffix(tmp_path):
    arrays = {"file": np.ones(2), "allow_pickle": np.zeros(1), "/head/Conv_output_0": np.arange(3)}
    written = write_npz(tmp_path / "out", arrays)
    assert written == str(tmp_path / "out.npz") == npz_path(tmp_path / "out")
    with np.load(written) as saved:
        assert sorted(saved.files) == sorted(arrays)
        assert all(np.array_equal(saved[k], v) for k, v in arrays.items())


def test_write_npz_errors_leave_no_file(tmp_path, monkeypatch):
    with pytest.raises(ArrayFileError, match="the folder .*missing does not exist"):
        write_npz(tmp_path / "missing" / "out.npz", {"y": np.ones(1)}, "--output")
    (tmp_path / "dir.npz").mkdir()
    with pytest.raises(ArrayFileError, match="is a folder"):
        write_npz(tmp_path / "dir.npz", {"y": np.ones(1)}, "--output")

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(np.lib.format, "write_array", full_disk)
    with pytest.raises(ArrayFileError, match="cannot write the file .No space left on device"):
        write_npz(tmp_path / "out.npz", {"y": np.ones(1)}, "--output")
    assert not (tmp_path / "out.npz").exists()


def test_write_into_a_folder_without_write_permission():
    # as root, permission bits stop no write; sysfs refuses new files to everyone
    if not os.path.isdir("/sys/kernel"):
        pytest.skip("no /sys/kernel here")
    with pytest.raises(ArrayFileError, match=r"--output /sys/kernel/out.npz: cannot write the file \("):
        write_npz("/sys/kernel/out.npz", {"y": np.ones(1)}, "--output")


def test_npz_file_is_not_zip_of_other_content(tmp_path):
    path = tmp_path / "x.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("x.npy", b"not an array")
    with pytest.raises(ArrayFileError) as info:
        read_npz(path, "--input")
    assert "damaged" in str(info.value)


def _small_npz(tmp_path) -> bytes:
    path = tmp_path / "small.npz"
    np.savez(path, img=np.arange(12, dtype=np.float32).reshape(3, 4), n=np.array([1, 2], np.int64))
    return path.read_bytes()


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_npz_inputs_give_clean_errors(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("npz")
    raw = bytearray(_small_npz(folder))
    if data.draw(st.booleans()):
        raw = raw[:data.draw(st.integers(0, len(raw) - 1))]
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    path = folder / "damaged.npz"
    path.write_bytes(bytes(raw))
    try:
        arrays = read_npz(path, "--input")
    except ArrayFileError as exc:
        assert str(exc).startswith(f"--input {path}: ")
    else:
        assert all(isinstance(a, np.ndarray) for a in arrays.values())
