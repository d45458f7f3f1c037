"""Traces in TI's formats: tidlx writes TI's trace names and TI's three-column layer_info, and
``tidlx diff-traces`` reads folders written the way TI's tools write them: written here by hand with TI's
names (a multi-core prefix, a 6-digit width, 1- and 2-byte elements, a ``_float.bin`` alone, a
three-column layer_info), compared with tidlx's traces of the same model and frame; every malformed
input is one ``tidlx: error:`` line naming the file, exit status 2."""

from __future__ import annotations

import os
import re
import shutil
import warnings

import numpy as np
import onnx
import pytest

from tidlx.cli import main
from tidlx.compiled import load_compiled
from tidlx.models import bevdet_img_stage

SHAPE = (2, 3, 64, 192)

#: The name TI's scripts read (an optional core prefix; data id, batch, d1, d2, C, W x H).
TI_TRACE = re.compile(r"^(?:C7[xX]_(\d+)_)?tidl_trace_(.+?)_(\d{4})_(\d{4})_(\d{4})_(\d{5})_(\d{5})_(\d+)x(\d+)"
                      r"(_float\.bin|\.y)$")


def frames(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def ti_name(graph, data_id, dims, kind=".y", core=None, width_digits=5):
    """A trace name as TI's runtime writes it; ``dims`` N, D1, D2, C, H, W."""
    n, d1, d2, c, h, w = dims
    prefix = f"C7x_{core}_" if core is not None else ""
    return (f"{prefix}tidl_trace_{graph}_{data_id:04d}_{n:04d}_{d1:04d}_{d2:05d}_{c:05d}_{w:0{width_digits}d}"
            f"x{h:05d}{kind}")


def six(shape):
    """TI's six dims of a shape: the batch, then the other axes right-aligned after ones."""
    shape = tuple(shape)
    return (shape[0],) + (1,) * (6 - len(shape)) + shape[1:]


def run_cli(args, capsys):
    code = main(["diff-traces"] + [str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The tiny BEVDet image stage compiled at 8 and 16 bits, each run on one frame with level-4 traces."""
    root = tmp_path_factory.mktemp("ti_traces")
    model = root / "tiny_b2.onnx"
    onnx.save(bevdet_img_stage(backbone="resnet18", batch=2, tiny=True), str(model))
    np.savez(root / "calib.npz", img=frames((4,) + SHAPE[1:], 0))
    out = {}
    for bits in (8, 16):
        folder = root / f"c{bits}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # fewer calibration frames than calibration_frames
            assert main(["compile", str(model), "-o", str(folder), "-o", "max_batch_size=6", "-o",
                         f"tensor_bits={bits}", "--calib", str(root / "calib.npz")]) == 0
        compiled = load_compiled(folder)
        compiled.run({"img": frames(SHAPE, 7)}, debug_level=4, trace_dir=root / f"tidlx{bits}")
        out[bits] = (compiled, root / f"tidlx{bits}")
    return out


def traced(compiled):
    """Per subgraph number: (layer index, layer name, tensor) of every traced tensor, in layer order."""
    result = {}
    for s in compiled.subgraphs.values():
        sub = s.network.subgraph
        result[s.number] = [(layer.index, layer.name, sub.tensors[t]) for layer in sub.layers
                            if not (layer.type == "Data" and layer.inputs) for t in layer.outputs]
    return result


def roles(compiled):
    """The data ids of subgraph 0 written in TI's less common forms."""
    ids = [t.id for _, _, t in traced(compiled)[0]]
    return {"cores": ids[1], "one_core": ids[2], "wide": ids[3], "float_only": ids[4], "level4": ids[5]}


def write_ti_folder(compiled, tidlx_traces, dest, layer_info=True):
    """A folder of traces of the same run as TI's tools write it: TI's names, no tensor_info, TI's
    ``subgraph_<N>_tidl_net.bin.layer_info.txt``; one tensor in two cores' parts (C7x_1_, C7x_2_, joined
    along the height), one prefixed by one core, one with a 6-digit width, one as ``_float.bin`` only
    (float32 (q - 0) / tensorScale computed in float32), one as ``.y`` and ``_float.bin`` (level 4)."""
    dest.mkdir()
    special = roles(compiled)
    for number, tensors in traced(compiled).items():
        graph = f"subgraph_{number}"
        lines = []
        for layer_index, layer_name, t in tensors:
            dims = six(t.shape)
            q = np.fromfile(tidlx_traces / ti_name(graph, t.id, dims), t.dtype)
            assert q.size == int(np.prod(dims))
            lines.append(f"{layer_index} {t.id} {layer_name}")
            real = q.astype(np.float32) / np.float32(t.scale)
            role = next((r for r, i in special.items() if i == t.id), None) if number == 0 else None
            if role == "cores":
                rows = dims[4] // 2 + 1
                parts = np.split(q.reshape(dims), [rows], axis=4)
                for core, part in enumerate(parts, 1):
                    part_dims = dims[:4] + (part.shape[4],) + dims[5:]
                    part.tofile(dest / ti_name(graph, t.id, part_dims, core=core))
            elif role == "one_core":
                q.tofile(dest / ti_name(graph, t.id, dims, core=1))
            elif role == "wide":
                q.tofile(dest / ti_name(graph, t.id, dims, width_digits=6))
            elif role == "float_only":
                real.astype("<f4").tofile(dest / ti_name(graph, t.id, dims, "_float.bin"))
            elif role == "level4":
                q.tofile(dest / ti_name(graph, t.id, dims))
                real.astype("<f4").tofile(dest / ti_name(graph, t.id, dims, "_float.bin"))
            else:
                q.tofile(dest / ti_name(graph, t.id, dims))
        if layer_info:
            (dest / f"subgraph_{number}_tidl_net.bin.layer_info.txt").write_text("".join(x + "\n" for x in lines))
    return dest


def row_of(out, data_id, name):
    rows = [line for line in out.splitlines() if line.startswith("subgraph_0 ") and line.endswith(" " + name)]
    rows = [r for r in rows if r.split()[2] == str(data_id)]
    assert len(rows) == 1, out
    return rows[0].split()


# -- what tidlx writes -----------------------------------------------------------------------------

def test_tidlx_writes_ti_names_and_ti_layer_info(runs):
    compiled, folder = runs[8]
    names = sorted(os.listdir(folder))
    traces = [n for n in names if n.endswith(".y") or n.endswith("_float.bin")]
    assert traces and all(TI_TRACE.match(n) for n in traces)
    assert {TI_TRACE.match(n).group(2) for n in traces} == {"subgraph_0", "subgraph_1"}
    assert not [n for n in names if n.startswith("tidl_trace_subgraph0")]
    assert set(names) - set(traces) == {"tidl_subgraph0_net.bin.layer_info.txt",
                                        "tidl_subgraph1_net.bin.layer_info.txt",
                                        "tidl_trace_subgraph_0_tensor_info.txt",
                                        "tidl_trace_subgraph_1_tensor_info.txt"}
    for number, tensors in traced(compiled).items():
        lines = (folder / f"tidl_subgraph{number}_net.bin.layer_info.txt").read_text().splitlines()
        assert lines == [f"{i} {t.id} {name}" for i, name, t in tensors]          # three columns
        info = (folder / f"tidl_trace_subgraph_{number}_tensor_info.txt").read_text().splitlines()
        assert info[0].startswith("# tidlx tensor_info: dataIdx elementType tensorScale zeroPoint")
        assert info[1:] == [f"{t.id} {t.element_type} {float(t.scale)!r} 0" for _, _, t in tensors]
        for _, _, t in tensors:
            y = folder / ti_name(f"subgraph_{number}", t.id, six(t.shape))
            assert y.stat().st_size == int(np.prod(t.shape)) * t.dtype.itemsize


def test_an_earlier_runs_files_are_removed(runs, tmp_path):
    compiled, _ = runs[8]
    folder = tmp_path / "t"
    folder.mkdir()
    stale = ["tidl_trace_subgraph_0_9999_0001_0001_00001_00001_00001x00001.y", "tidl_subgraph7_net.bin.layer_info.txt",
             "tidl_trace_subgraph0_layer_info.txt"]
    for name in stale + ["mine.txt"]:
        (folder / name).write_bytes(b"x")
    compiled.run({"img": frames(SHAPE, 7)}, debug_level=3, trace_dir=folder)
    left = set(os.listdir(folder))
    assert "mine.txt" in left and not left & set(stale)


# -- TI's folders against tidlx's -------------------------------------------------------------------

@pytest.mark.parametrize("bits", [8, 16])
def test_a_ti_folder_of_the_same_run_is_equal(runs, tmp_path, capsys, bits):
    compiled, tidlx_traces = runs[bits]
    ti = write_ti_folder(compiled, tidlx_traces, tmp_path / "ti")
    special = roles(compiled)
    cores = {TI_TRACE.match(n).group(1) or "" for n in os.listdir(ti) if n.endswith(".y")}
    assert cores == {"", "1", "2"}
    one = {t.id: t for _, _, t in traced(compiled)[0]}
    kinds = {np.dtype(t.dtype).name for t in one.values()}
    assert kinds == ({"uint8", "int8"} if bits == 8 else {"uint16", "int16"})
    count = sum(len(v) for v in traced(compiled).values())

    code, out, err = run_cli([ti, tidlx_traces], capsys)
    assert (code, err) == (0, ""), out + err
    assert out.splitlines()[-1] == f"{count} trace(s) equal"
    header = out.splitlines()[2].split()
    assert header[:9] == ["graph", "layer", "dataIdx", "elements", "differ", "max_LSB", "SNR_dB", "MeanAbsDiff",
                          "MaxAbsDiff"]
    assert "cores 1, 2 joined along the height" in out.splitlines()[0]
    assert "subgraph_0_tidl_net.bin.layer_info.txt" in out.splitlines()[0]
    for i, name, t in traced(compiled)[0]:
        row = row_of(out, t.id, name)
        assert row[1] == str(i) and row[3] == str(int(np.prod(t.shape)))
        assert row[4:7] == ["0", "0", "100.00"]
        if t.id in (special["float_only"], special["level4"]):    # float32 rounding of q / tensorScale
            assert float(row[7]) < 1e-6 and float(row[8]) < 1e-6
        else:
            assert row[7:9] == ["0", "0"]
        want = {"uint8": "U8", "int8": "S8", "uint16": "U16", "int16": "S16"}[np.dtype(t.dtype).name]
        if t.id in (special["float_only"], special["level4"]):
            assert row[9:12] == ["_float.bin", "|", want], row          # no tensor_info: the float trace
        else:
            assert row[9:12] == [want, "as", "in"], row                  # the type of B's tensor_info
    assert main(["diff-traces", str(tidlx_traces), str(ti)]) == 0         # either side first
    capsys.readouterr()


def test_a_changed_value_names_the_first_differing_layer(runs, tmp_path, capsys):
    compiled, tidlx_traces = runs[8]
    tensors = traced(compiled)[0]
    special = roles(compiled)
    layer_index, layer_name, t = tensors[8]                      # a plain .y in the middle
    assert t.id not in special.values()
    ti = write_ti_folder(compiled, tidlx_traces, tmp_path / "ti")
    path = ti / ti_name("subgraph_0", t.id, six(t.shape))
    q = np.fromfile(path, t.dtype)
    was = int(q[100])
    q[100] = was + 1 if was < np.iinfo(t.dtype).max else was - 1
    q.tofile(path)
    code, out, err = run_cli([ti, tidlx_traces], capsys)
    assert code == 1 and err == ""
    first = [line for line in out.splitlines() if line.startswith("first difference: ")]
    at = ",".join(str(int(x)) for x in np.unravel_index(100, six(t.shape)))
    assert first == [f"first difference: layer {layer_index} '{layer_name}' (subgraph_0, data id {t.id}): 1 of "
                     f"{int(np.prod(t.shape))} values differ (first at element 100 [n,d1,d2,c,h,w = {at}]: "
                     f"{int(q[100])} vs {was}; largest difference 1 LSB, MaxAbsDiff {1 / t.scale:g})"], out
    row = row_of(out, t.id, layer_name)
    assert row[4:6] == ["1", "1"] and float(row[6]) < 100 and float(row[8]) == pytest.approx(1 / t.scale, rel=1e-3)
    for i, name, other in tensors[:8]:
        assert row_of(out, other.id, name)[4] == "0"
    assert out.splitlines()[-1] == f"1 of {sum(len(v) for v in traced(compiled).values())} trace(s) differ"


@pytest.mark.parametrize("where", ["core2", "float_only", "wide", "one_core"])
def test_a_changed_value_in_each_ti_form_is_found(runs, tmp_path, capsys, where):
    compiled, tidlx_traces = runs[8]
    special = roles(compiled)
    by_id = {t.id: (i, name, t) for i, name, t in traced(compiled)[0]}
    ti = write_ti_folder(compiled, tidlx_traces, tmp_path / "ti")
    layer_index, layer_name, t = by_id[special["cores" if where == "core2" else where]]
    dims = six(t.shape)
    if where == "core2":                                         # a value in core 2's rows
        rows = dims[4] // 2 + 1
        part_dims = dims[:4] + (dims[4] - rows,) + dims[5:]
        path = ti / ti_name("subgraph_0", t.id, part_dims, core=2)
        q = np.fromfile(path, t.dtype).reshape(part_dims)
        q[1, 0, 0, 2, 3, 5] ^= 1
        q.tofile(path)
        element = int(np.ravel_multi_index((1, 0, 0, 2, rows + 3, 5), dims))
    elif where == "float_only":
        path = ti / ti_name("subgraph_0", t.id, dims, "_float.bin")
        f = np.fromfile(path, "<f4")
        f[33] += np.float32(1 / t.scale)                          # one LSB
        f.tofile(path)
        element = 33
    else:
        path = ti / ti_name("subgraph_0", t.id, dims, core=1 if where == "one_core" else None,
                            width_digits=6 if where == "wide" else 5)
        q = np.fromfile(path, t.dtype)
        q[7] ^= 1
        q.tofile(path)
        element = 7
    code, out, _ = run_cli([ti, tidlx_traces], capsys)
    assert code == 1
    first = [line for line in out.splitlines() if line.startswith("first difference: ")][0]
    assert first.startswith(f"first difference: layer {layer_index} '{layer_name}' (subgraph_0, data id {t.id}): "
                            f"1 of {int(np.prod(dims))} values differ (first at element {element} ")
    assert "largest difference 1 LSB" in first
    assert row_of(out, t.id, layer_name)[4:6] == ["1", "1"]


def test_ti_folders_alone_are_read_by_element_size_and_say_so(runs, tmp_path, capsys):
    compiled, tidlx_traces = runs[16]
    ti = write_ti_folder(compiled, tidlx_traces, tmp_path / "ti")
    copy = tmp_path / "copy"
    shutil.copytree(ti, copy)
    code, out, _ = run_cli([ti, copy], capsys)
    assert code == 0
    assert "S16 assumed" in out and "S8 assumed" not in out
    assert re.search(r"note: \d+ trace\(s\) read by their element size alone \(1 byte S8, 2 bytes S16, 4 bytes F32\)",
                     out)
    special = roles(compiled)
    by_id = {t.id: (name, t) for _, name, t in traced(compiled)[0]}
    name, t = by_id[special["float_only"]]
    assert row_of(out, t.id, name)[9] == "_float.bin"
    # 8-bit TI traces alone: one byte an element, read as S8
    compiled8, tidlx8 = runs[8]
    ti8 = write_ti_folder(compiled8, tidlx8, tmp_path / "ti8")
    code, out, _ = run_cli([ti8, ti8], capsys)
    assert code == 0 and "S8 assumed" in out and "U8" not in out


def test_names_come_from_b_without_a_layer_info_in_a(runs, tmp_path, capsys):
    compiled, tidlx_traces = runs[8]
    ti = write_ti_folder(compiled, tidlx_traces, tmp_path / "ti", layer_info=False)
    code, out, _ = run_cli([ti, tidlx_traces], capsys)
    assert code == 0 and "layer_info: none" in out.splitlines()[0]
    i, name, t = traced(compiled)[0][3]
    assert row_of(out, t.id, name)[1] == str(i)


def test_different_tensor_bits_are_compared_in_real_values(runs, tmp_path, capsys):
    """TI's 8-bit traces (.y without a scale of their own, and one _float.bin) against tidlx's 16-bit
    traces: the .y files cannot be read in real values, the _float.bin can."""
    compiled8, tidlx8 = runs[8]
    _, tidlx16 = runs[16]
    ti = write_ti_folder(compiled8, tidlx8, tmp_path / "ti")
    code, out, _ = run_cli([ti, tidlx16], capsys)
    assert code == 1
    special = roles(compiled8)
    by_id = {t.id: (name, t) for _, name, t in traced(compiled8)[0]}
    name, t = by_id[special["float_only"]]
    row = row_of(out, t.id, name)
    assert int(row[4]) > 0 and 15 < float(row[6]) < 60              # 8 against 16 bits: a real SNR
    assert re.search(r"first difference: layer 0 '\S+' \(subgraph_0, data id 0\): cannot compare: A's values are "
                     r"S8 assumed, B's S16; A's values \(S8 assumed\) have no tensorScale", out), out
    assert row_of(out, by_id[special["cores"]][1].id, by_id[special["cores"]][0])[4:9] == ["n/a", "-", "-", "-", "-"]


# -- synthetic folders: every form and every malformed input ------------------------------------------

DIMS = (1, 1, 1, 2, 3, 4)


def small_folder(folder, *, info=True):
    """Two int8 traces of subgraph_0 (data ids 0 and 1) by TI's names, and TI's layer_info."""
    folder.mkdir()
    rng = np.random.default_rng(1)
    arrays = {i: rng.integers(-100, 100, DIMS).astype("<i1") for i in (0, 1)}
    for data_id, q in arrays.items():
        q.tofile(folder / ti_name("subgraph_0", data_id, DIMS))
    if info:
        (folder / "subgraph_0_tidl_net.bin.layer_info.txt").write_text("0 0 input\n1 1 conv out\n")
    return folder


def test_small_ti_folders_compare(tmp_path, capsys):
    a = small_folder(tmp_path / "a")
    b = small_folder(tmp_path / "b")
    code, out, _ = run_cli([a, b], capsys)
    assert code == 0 and out.splitlines()[-1] == "2 trace(s) equal"
    assert row_of(out, 1, "conv out")[1:3] == ["1", "1"]                  # a name with a space
    q = np.fromfile(b / ti_name("subgraph_0", 1, DIMS), "<i1")
    q[5] += 3
    q.tofile(b / ti_name("subgraph_0", 1, DIMS))
    code, out, _ = run_cli([a, b], capsys)
    assert code == 1 and "first difference: layer 1 'conv out' (subgraph_0, data id 1): 1 of 24 values differ" in out
    assert row_of(out, 1, "conv out")[4:6] == ["1", "3"]
    # a trace only on one side
    os.remove(b / ti_name("subgraph_0", 0, DIMS))
    code, out, _ = run_cli([a, b], capsys)
    assert code == 1 and f"missing: {ti_name('subgraph_0', 0, DIMS)} (only in {a})" in out


def test_float_traces_without_a_scale_allow_float32_rounding(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    x = np.random.default_rng(2).standard_normal(DIMS).astype("<f4")
    x.tofile(a / ti_name("subgraph_0", 3, DIMS, "_float.bin"))
    y = x.copy()
    y[0, 0, 0, 1, 2, 3] = np.nextafter(y[0, 0, 0, 1, 2, 3], np.float32(np.inf))   # one float32 ulp
    y.tofile(b / ti_name("subgraph_0", 3, DIMS, "_float.bin"))
    code, out, _ = run_cli([a, b], capsys)
    assert code == 0, out
    y[0, 0, 0, 1, 2, 3] += 1e-3
    y.tofile(b / ti_name("subgraph_0", 3, DIMS, "_float.bin"))
    code, out, _ = run_cli([a, b], capsys)
    assert code == 1 and "first difference: data id 3 (subgraph_0, data id 3): 1 of 24 values differ (first at " \
        "element 23 [n,d1,d2,c,h,w = 0,0,0,1,2,3]" in out


def test_values_that_cannot_be_compared_are_a_finding(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    np.zeros(DIMS, "<f4").tofile(a / ti_name("subgraph_0", 3, DIMS, "_float.bin"))
    np.zeros(DIMS, "<i1").tofile(b / ti_name("subgraph_0", 3, DIMS))
    code, out, _ = run_cli([a, b], capsys)
    assert code == 1 and "first difference: data id 3 (subgraph_0, data id 3): cannot compare: A's values are " \
        "_float.bin, B's S8 assumed; B's values (S8 assumed) have no tensorScale" in out


COUNT = int(np.prod(DIMS))
GOOD = ti_name("subgraph_0", 0, DIMS)

MALFORMED = {
    "a 3-digit data id": ("tidl_trace_subgraph_0_001_0001_0001_00001_00002_00004x00003.y", b"\0" * COUNT, None),
    "a 4-digit width": ("tidl_trace_subgraph_0_0001_0001_0001_00001_00002_0004x00003.y", b"\0" * COUNT, None),
    "no fields": ("tidl_trace_subgraph_0_float.bin", b"\0" * 4, None),
    "a zero dim": ("tidl_trace_subgraph_0_0005_0001_0001_00001_00000_00004x00003.y", b"", None),
    "a size that does not divide": (ti_name("subgraph_0", 1, DIMS), b"\0" * (COUNT + 1), None),
    "3 bytes an element": (ti_name("subgraph_0", 1, DIMS), b"\0" * (COUNT * 3), None),
    "an empty .y": (ti_name("subgraph_0", 1, DIMS), b"", None),
    "a truncated _float.bin": (ti_name("subgraph_0", 1, DIMS, "_float.bin"), b"\0" * (COUNT * 4 - 2), None),
    "a truncated .y of a typed tensor": (ti_name("subgraph_0", 1, DIMS), b"\0" * COUNT,
                                         ("tidl_trace_subgraph_0_tensor_info.txt", "#\n1 3 8.0 0\n", None)),
    "a layer_info line without a data id": ("subgraph_0_tidl_net.bin.layer_info.txt", b"0 0 input\n1 x conv\n", 2),
    "a layer_info line of two columns": ("subgraph_0_tidl_net.bin.layer_info.txt", b"0 0 input\n\n1 1\n", 3),
    "a negative layer_info index": ("subgraph_0_tidl_net.bin.layer_info.txt", b"-1 0 input\n", 1),
    "a binary layer_info": ("subgraph_0_tidl_net.bin.layer_info.txt", b"\x00\xff\x13garbage\n", 1),
    "a tensor_info type that is not TI's": ("tidl_trace_subgraph_0_tensor_info.txt", b"# h\n0 9 1.0 0\n", 2),
    "a tensor_info scale of zero": ("tidl_trace_subgraph_0_tensor_info.txt", b"0 1 0 0\n", 1),
    "a tensor_info scale that is not a number": ("tidl_trace_subgraph_0_tensor_info.txt", b"0 1 nan 0\n", 1),
    "a tensor_info line of three columns": ("tidl_trace_subgraph_0_tensor_info.txt", b"#\n#\n0 1 4.0\n", 3),
    "cores of different widths": ("C7x_2_" + ti_name("subgraph_0", 0, DIMS[:5] + (5,)), b"\0" * 30,
                                  ("C7x_1_" + GOOD, b"\0" * COUNT, None)),
    "a core part beside an unprefixed trace": ("C7x_1_" + GOOD, b"\0" * COUNT, None),
    "the same trace with 5- and 6-digit widths": (ti_name("subgraph_0", 0, DIMS, width_digits=6), b"\0" * COUNT,
                                                  None),
    "a .y and a _float.bin of other dims": (ti_name("subgraph_0", 0, DIMS[:5] + (8,), "_float.bin"),
                                            b"\0" * (COUNT * 8), None),
    "a layer_info of no known graph in a folder of two": ("net.layer_info.txt", b"0 0 x\n",
                                                          (ti_name("subgraph_1", 0, DIMS), b"\0" * COUNT, None)),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
@pytest.mark.parametrize("side", ["A", "B"])
def test_each_malformed_input_is_one_error_line_naming_the_file(tmp_path, capsys, case, side):
    name, content, extra = MALFORMED[case]
    good = small_folder(tmp_path / "good", info=False)
    bad = small_folder(tmp_path / "bad", info=False)
    if case in ("cores of different widths",):
        os.remove(bad / GOOD)
    files = [(name, content)]
    line = None
    if isinstance(extra, tuple):
        files.append((extra[0], extra[1] if isinstance(extra[1], bytes) else extra[1].encode()))
    elif isinstance(extra, int):
        line = extra
    for fname, data in files:
        (bad / fname).write_bytes(data)
    code, out, err = run_cli([bad, good] if side == "A" else [good, bad], capsys)
    assert code == 2, (case, out, err)
    assert err.startswith("tidlx: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert str(bad / name) in err or (str(bad) + os.sep in err and name in err), err    # the file, by path
    if line is not None:
        assert f"{bad / name}:{line}: " in err, err


def test_typed_core_parts_join_along_the_height(tmp_path, capsys):
    """A tensor_info gives a folder's .y files their type; two cores' parts (C7x_1_, C7X_2_) of one
    tensor are one trace, joined along the height."""
    a = small_folder(tmp_path / "a", info=False)
    (a / "tidl_trace_subgraph_0_tensor_info.txt").write_text("# h\n0 1 4.0 0\n1 1 8.0 0\n")
    (a / "subgraph_0_tidl_net.bin.layer_info.txt").write_text("0 0 input\n1 1 conv\n")
    os.remove(a / GOOD)
    q = np.arange(COUNT, dtype="<i1").reshape(DIMS)
    q[:, :, :, :, :2].tofile(a / ("C7x_1_" + ti_name("subgraph_0", 0, DIMS[:4] + (2,) + DIMS[5:])))
    q[:, :, :, :, 2:].tofile(a / ("C7X_2_" + ti_name("subgraph_0", 0, DIMS[:4] + (1,) + DIMS[5:])))
    b = tmp_path / "b"
    b.mkdir()
    q.tofile(b / GOOD)
    shutil.copy(a / ti_name("subgraph_0", 1, DIMS), b)
    code, out, err = run_cli([a, b], capsys)
    assert (code, err) == (0, ""), out + err
    assert row_of(out, 0, "input")[9:12] == ["S8", "|", "S8"]
    assert row_of(out, 0, "input")[6:9] == ["100.00", "0", "0"]


def test_the_order_is_the_layer_order_of_a_layer_info(tmp_path, capsys):
    a = small_folder(tmp_path / "a", info=False)
    b = small_folder(tmp_path / "b", info=False)
    (a / "subgraph_0_tidl_net.bin.layer_info.txt").write_text("0 1 made first\n1 0 made second\n")
    for data_id in (0, 1):
        q = np.fromfile(b / ti_name("subgraph_0", data_id, DIMS), "<i1")
        q[data_id] += 1
        q.tofile(b / ti_name("subgraph_0", data_id, DIMS))
    code, out, _ = run_cli([a, b], capsys)
    assert code == 1
    assert [line.split()[2] for line in out.splitlines() if line.startswith("subgraph_0 ")] == ["1", "0"]
    assert "first difference: layer 0 'made first' (subgraph_0, data id 1): 1 of 24 values differ (first at " \
        "element 1 " in out


def test_b_names_are_shown_where_they_differ(tmp_path, capsys):
    a = small_folder(tmp_path / "a")
    b = small_folder(tmp_path / "b", info=False)
    (b / "tidl_subgraph0_net.bin.layer_info.txt").write_text("0 0 input\n1 1 conv_output_0\n")
    code, out, _ = run_cli([a, b], capsys)
    assert code == 0
    rows = [line for line in out.splitlines() if line.startswith("subgraph_0 ")]
    assert rows[0].endswith("  input") and rows[1].endswith("  conv out  [B: conv_output_0]")
