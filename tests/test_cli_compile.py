"""The compiled folder (docs/artifacts.md): ``tidlx compile`` / ``tidlx.compile_model`` write it atomically
and deterministically, ``tidlx inspect`` reads it, ``tidlx.load_compiled(dir).run`` executes it with the
bits of the in-memory fixed-point emulation (8 and 16 bit), inference modes 1 and 2 give the bits of
mode 0, traces and ``tidlx diff-traces``, and damaged folders are clean errors."""

from __future__ import annotations

import json
import os
import shutil
import warnings

import numpy as np
import onnx
import pytest

import tidlx
from tidlx.cli import main
from tidlx.compiled import compile_model, load_compiled
from tidlx.emulator.fixed.artifact_format import ArtifactError
from tidlx.frontends.onnx import from_onnx
from tidlx.models import bevdet_img_stage

SHAPE = (2, 3, 64, 192)


def frames(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("compile")
    model = root / "tiny_b2.onnx"
    onnx.save(bevdet_img_stage(backbone="resnet18", batch=2, tiny=True), str(model))
    np.savez(root / "calib.npz", img=frames((4,) + SHAPE[1:], 0))
    np.savez(root / "x.npz", img=frames(SHAPE, 1))
    return root


@pytest.fixture(scope="module")
def model(files):
    return from_onnx(onnx.load(str(files / "tiny_b2.onnx")))


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # fewer calibration frames than calibration_frames
        return fn(*args, **kwargs)


@pytest.fixture(scope="module")
def compiled8(files):
    out = files / "out8"
    assert main(["compile", str(files / "tiny_b2.onnx"), "-o", str(out), "-o", "max_batch_size=6", "--calib",
                 str(files / "calib.npz")]) == 0
    return out


def _tree(folder):
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


def test_the_folder_holds_the_documented_files(compiled8):
    names = sorted(os.listdir(compiled8))
    assert names == ["host_module.txt", "tidl_subgraph0.json", "tidl_subgraph0_io_1.bin", "tidl_subgraph0_net.bin",
                     "tidl_subgraph1.json", "tidl_subgraph1_io_1.bin", "tidl_subgraph1_net.bin",
                     "tidlx_artifacts.json"]
    manifest = json.loads((compiled8 / "tidlx_artifacts.json").read_text())
    assert manifest["format"] == "tidlx-compiled-model" and manifest["version"] == "1.0"
    assert manifest["options"] == ["max_batch_size=6"] and manifest["calibration"] == "calib.npz"
    assert manifest["output_names"] == ["depth", "volume"]
    assert sorted(manifest["sha256"]) == [n for n in names if n != "tidlx_artifacts.json"]


def test_compiling_twice_gives_byte_identical_folders(files, compiled8):
    again = files / "again"
    assert main(["compile", str(files / "tiny_b2.onnx"), "--out", str(again), "-o", "max_batch_size=6", "--calib",
                 str(files / "calib.npz")]) == 0
    assert _tree(again) == _tree(compiled8)


def test_an_existing_folder_is_kept_without_force(files, compiled8, capsys):
    before = _tree(compiled8)
    code = main(["compile", str(files / "tiny_b2.onnx"), "-o", str(compiled8), "-o", "tensor_bits=16"])
    assert code == 2 and "exists and is not empty (use --force" in capsys.readouterr().err
    assert _tree(compiled8) == before
    forced = files / "forced"
    shutil.copytree(compiled8, forced)
    assert main(["compile", str(files / "tiny_b2.onnx"), "-o", str(forced), "-o", "tensor_bits=16", "-o",
                 "max_batch_size=6", "--calib", str(files / "calib.npz"), "--force"]) == 0
    assert json.loads((forced / "tidlx_artifacts.json").read_text())["tensor_bits"] == 16
    assert not [n for n in os.listdir(files) if n.endswith(".tmp") or n.endswith(".old")]   # no leftovers


def test_compile_option_errors(files, capsys):
    model = str(files / "tiny_b2.onnx")
    assert main(["compile", model, "-o", "tensor_bits=16"]) == 2
    assert "say where to write the folder" in capsys.readouterr().err
    assert main(["compile", model, "-o", "a", "-o", "b"]) == 2
    assert "one output folder, got 2" in capsys.readouterr().err
    assert main(["compile", model, "-o", str(files / "x"), "-o", "tensor_bits=12"]) == 2
    assert "tensor_bits" in capsys.readouterr().err
    assert main(["compile", model, "-o", str(files / "no" / "such" / "dir")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_the_host_module_round_trips(compiled8, model):
    """host_module.txt reads back structurally equal to the partitioned module and runs the same."""
    qmodel = _quiet(tidlx.quantize, model, {"max_batch_size": 6}, str(compiled8.parent / "calib.npz"))
    back = tidlx.parse_relay((compiled8 / "host_module.txt").read_text())
    assert tidlx.structural_equal(back, qmodel.module)
    x = {"img": frames(SHAPE, 3)}
    for a, b in zip(tidlx.emulate(back, x), tidlx.emulate(qmodel.module, x)):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("bits", [8, 16])
def test_running_the_folder_equals_in_memory_fixed_point(files, model, bits):
    calib = {"img": frames((4,) + SHAPE[1:], 0)}
    options = {"tensor_bits": bits, "max_batch_size": 6}
    folder = compile_model(model, files / f"api{bits}", options, calib)
    qmodel = _quiet(tidlx.quantize, model, options, calib)
    x = {"img": frames(SHAPE, 1)}
    from_files = load_compiled(folder).run(x)
    in_memory = tidlx.emulate(qmodel, x)
    assert len(from_files) == len(in_memory) == 2
    for a, b in zip(from_files, in_memory):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_inspect_prints_the_layer_table(compiled8, capsys):
    assert main(["inspect", str(compiled8)]) == 0
    out = capsys.readouterr().out
    assert "tidl_subgraph0_net.bin: @tidl_0, format 1.0, 8 bit" in out and "Conv+relu" in out
    assert "/img_backbone/conv1/Conv" in out and "roundBits" in out
    assert main(["inspect", str(compiled8 / "tidl_subgraph0_net.bin"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    conv = doc["layers"][1]
    assert conv["type"] == "Conv" and conv["macs"] > 0 and conv["outputs"][0]["bits"] == 8
    assert main(["inspect", str(compiled8 / "tidl_subgraph1_io_1.bin")]) == 0
    assert "data id 0 'tidl_1_i0'" in capsys.readouterr().out


def _damaged(compiled8, tmp_path, name, change):
    folder = tmp_path / "damaged"
    shutil.copytree(compiled8, folder)
    path = folder / name
    path.write_bytes(change(path.read_bytes()))
    return folder


@pytest.mark.parametrize("name, change, message", [
    ("tidl_subgraph0_net.bin", lambda b: b[:-100], "tidl_subgraph0_net.bin: corrupted or replaced"),
    ("host_module.txt", lambda b: b + b" ", "host_module.txt: corrupted or replaced"),
    ("tidlx_artifacts.json", lambda b: b.replace(b'"version": "1.0"', b'"version": "2.0"'),
     "written in format 2.0; this tidlx reads format 1.x"),
    ("tidlx_artifacts.json", lambda b: b[:50], "tidlx_artifacts.json: not valid JSON"),
])
def test_a_damaged_folder_is_a_clean_error(compiled8, tmp_path, capsys, name, change, message):
    folder = _damaged(compiled8, tmp_path, name, change)
    with pytest.raises(ArtifactError, match=message):
        load_compiled(folder)
    assert main(["inspect", str(folder)]) == 2
    assert message.split(":")[0] in capsys.readouterr().err


def test_a_damaged_record_with_a_matching_manifest_is_refused_by_the_record(compiled8, tmp_path):
    """A bit flip in a .bin whose manifest hash was updated too: the record's own CRC refuses it."""
    folder = tmp_path / "forged"
    shutil.copytree(compiled8, folder)
    path = folder / "tidl_subgraph1_net.bin"
    data = bytearray(path.read_bytes())
    data[200] ^= 4
    path.write_bytes(bytes(data))
    manifest = json.loads((folder / "tidlx_artifacts.json").read_text())
    import hashlib

    manifest["sha256"]["tidl_subgraph1_net.bin"] = hashlib.sha256(bytes(data)).hexdigest()
    (folder / "tidlx_artifacts.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match=r"tidl_subgraph1_net.bin: corrupted: the CRC-32 is"):
        load_compiled(folder)


# -- inference modes ---------------------------------------------------------------------------------

def test_modes_1_and_2_give_the_bits_of_mode_0(compiled8, files):
    compiled = load_compiled(compiled8)
    x = {"img": frames(SHAPE, 4)}
    mode0 = compiled.run(x)
    for mode, cores in ((1, 2), (2, 2), (2, 3)):
        got = compiled.run(x, inference_mode=mode, num_cores=cores)
        for a, b in zip(got, mode0):
            assert np.array_equal(a, b), (mode, cores)
        work = {w.subgraph: w for w in compiled.last_work}
        backbone = work["tidl_0"]
        assert backbone.mode == mode and len(backbone.cores) == cores
        if mode == 1:
            assert [c.frames for c in backbone.cores] == [1, 1] and backbone.cores[0].macs == backbone.cores[1].macs
        else:
            assert all(c.rows > 0 and c.macs > 0 for c in backbone.cores)
        print(backbone.describe())


def test_mode_2_on_the_coverage_model(tmp_path):
    """Row bands through every row-local layer type the quantizer makes: strided, dilated, grouped and
    padded convolutions, average pooling, product, concat, batch norm, resize (on core 0), on 3 cores."""
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "backends"))
    from test_tidl_quantize import coverage_model

    mod, _ = coverage_model()
    calib = {"x": frames((8, 4, 16, 16), 1)}
    folder = compile_model(mod, tmp_path / "cov", {"tensor_bits": 8}, calib)
    compiled = load_compiled(folder)
    x = {"x": frames((1, 4, 16, 16), 3)}
    mode0 = compiled.run(x)
    for cores in (2, 3, 5):
        assert np.array_equal(compiled.run(x, inference_mode=2, num_cores=cores)[0], mode0[0]), cores
    assert np.array_equal(mode0[0], tidlx.emulate(_quiet(tidlx.quantize, mod, {"tensor_bits": 8}, calib), x)[0])


def test_bevdet_batch_6_in_mode_1_on_2_cores(tmp_path, capsys):
    model = tmp_path / "b6.onnx"
    onnx.save(bevdet_img_stage(backbone="resnet18", batch=6, tiny=True), str(model))
    np.savez(tmp_path / "x.npz", img=frames((6, 3, 64, 192), 5))
    out = tmp_path / "b6"
    assert main(["compile", str(model), "-o", str(out), "-o", "max_batch_size=6", "-o",
                 "advanced_options:inference_mode=1", "-o", "advanced_options:num_cores=2"]) == 0
    compiled = load_compiled(out)
    x = {"img": frames((6, 3, 64, 192), 5)}
    mode1 = compiled.run(x)
    work = {w.subgraph: w for w in compiled.last_work}
    assert [c.frames for c in work["tidl_0"].cores] == [3, 3]
    for a, b in zip(mode1, compiled.run(x, inference_mode=0)):
        assert np.array_equal(a, b)
    assert main(["run", str(out), "--input", str(tmp_path / "x.npz"), "--output", str(tmp_path / "y.npz")]) == 0
    printed = capsys.readouterr().out
    assert "@tidl_0 (inference_mode 1, 2 core(s)): core 0: 3 frame(s)" in printed and "core 1: 3 frame(s)" in printed
    assert np.array_equal(np.load(tmp_path / "y.npz")["depth"], mode1[0])


def test_mode_1_needs_a_batch_that_splits(files, model):
    with pytest.raises(tidlx.TidlxError, match="not a multiple of advanced_options:num_cores=3"):
        compile_model(model, files / "bad_mode", {"advanced_options:inference_mode": 1,
                                                  "advanced_options:num_cores": 3})


# -- traces ------------------------------------------------------------------------------------------

def test_traces_and_diff_traces(compiled8, tmp_path, capsys):
    compiled = load_compiled(compiled8)
    x = {"img": frames(SHAPE, 6)}
    compiled.run(x, debug_level=4, trace_dir=tmp_path / "a")
    compiled.run(x, debug_level=3, trace_dir=tmp_path / "b", inference_mode=1, num_cores=2)
    a, b = sorted(os.listdir(tmp_path / "a")), sorted(os.listdir(tmp_path / "b"))
    raw = [n for n in a if n.endswith(".y")]
    assert [n for n in a if n.endswith("_float.bin")] and not [n for n in b if n.endswith("_float.bin")]
    assert "tidl_subgraph0_net.bin.layer_info.txt" in a and "tidl_subgraph1_net.bin.layer_info.txt" in a
    assert "tidl_trace_subgraph_0_tensor_info.txt" in a and "tidl_trace_subgraph_1_tensor_info.txt" in a
    sub = compiled.subgraphs["tidl_0"].network.subgraph
    first_conv = sub.layers[1]
    t = sub.tensors[first_conv.outputs[0]]
    name = f"tidl_trace_subgraph_0_{t.id:04d}_0002_0001_00001_{t.shape[1]:05d}_{t.shape[3]:05d}x{t.shape[2]:05d}.y"
    assert name in raw
    assert (tmp_path / "a" / name).stat().st_size == int(np.prod(t.shape))            # u8: a byte a value
    values = (np.fromfile(tmp_path / "a" / name, np.uint8) / t.scale).astype(np.float32)   # q / tensorScale
    assert np.array_equal(np.fromfile(tmp_path / "a" / name.replace(".y", "_float.bin"), "<f4"), values)
    info = (tmp_path / "a" / "tidl_subgraph0_net.bin.layer_info.txt").read_text().splitlines()
    assert info[1] == f"1 {t.id} /img_backbone/conv1/Conv"                 # TI's layerIdx dataIdx name
    tensor_info = (tmp_path / "a" / "tidl_trace_subgraph_0_tensor_info.txt").read_text().splitlines()
    assert tensor_info[0].startswith("#") and tensor_info[2] == f"{t.id} 0 {t.scale!r} 0"   # U8, tensorScale

    assert main(["diff-traces", str(tmp_path / "a"), str(tmp_path / "b")]) == 0   # mode 1 traces = mode 0's
    assert f"{len(raw)} trace(s) equal" in capsys.readouterr().out
    changed = bytearray((tmp_path / "b" / name).read_bytes())
    changed[7] ^= 1
    (tmp_path / "b" / name).write_bytes(bytes(changed))
    later = sub.layers[5]
    assert main(["diff-traces", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    first = [line for line in out.splitlines() if line.startswith("first difference: ")]
    assert len(first) == 1 and first[0].startswith("first difference: layer 1 '/img_backbone/conv1/Conv'")
    assert f"1 of {int(np.prod(t.shape))} values differ" in first[0] and later.name not in first[0]
    assert main(["diff-traces", str(tmp_path / "a"), str(tmp_path / "nothing")]) == 2


def test_every_truncation_and_1000_flips_are_exit_2_on_the_cli(compiled8, tmp_path, capsys):
    """The CLI on a small artifact (tidl_subgraph1_net.bin and its io_1.bin): every single-byte truncation
    point and 1,000 random bit flips give exit status 2 and a 'tidlx: error:' line naming the file."""
    net = (compiled8 / "tidl_subgraph1_net.bin").read_bytes()
    io = (compiled8 / "tidl_subgraph1_io_1.bin").read_bytes()
    target = tmp_path / "tidl_subgraph1_net.bin"
    counts = {"truncations": 0, "flips": 0}
    for n in range(len(net)):
        target.write_bytes(net[:n])
        code = main(["inspect", str(target)])
        err = capsys.readouterr().err
        counts["truncations"] += code == 2 and err.startswith("tidlx: error: ") and str(target) in err
    rng = np.random.default_rng(3)
    io_target = tmp_path / "tidl_subgraph1_io_1.bin"
    for _ in range(1000):
        which = int(rng.integers(2))
        blob = bytearray(net if which == 0 else io)
        bit = int(rng.integers(len(blob) * 8))
        blob[bit // 8] ^= 1 << (bit % 8)
        path = target if which == 0 else io_target
        path.write_bytes(bytes(blob))
        code = main(["inspect", str(path)])
        err = capsys.readouterr().err
        counts["flips"] += code == 2 and err.startswith("tidlx: error: ") and str(path) in err
    with capsys.disabled():
        print(f"\nCLI (tidlx inspect): {counts['truncations']}/{len(net)} truncations and {counts['flips']}/1000 bit "
              f"flips exit 2")
    assert counts == {"truncations": len(net), "flips": 1000}


def test_run_dir_refuses_options_that_do_not_apply(compiled8, files, capsys):
    np.savez(files / "x_run.npz", img=frames(SHAPE, 6))
    assert main(["run", str(compiled8), "--input", str(files / "x_run.npz"), "-o", "tensor_bits=16"]) == 2
    assert "-o does not apply to a compiled folder" in capsys.readouterr().err


def test_run_dir_writes_traces_on_request(compiled8, files, tmp_path, capsys):
    np.savez(files / "x_run.npz", img=frames(SHAPE, 6))
    traces = tmp_path / "traces"
    assert main(["run", str(compiled8), "--input", str(files / "x_run.npz"), "--debug-level", "3",
                 "--trace-dir", str(traces)]) == 0
    assert "wrote per-layer traces (debug_level 3)" in capsys.readouterr().out
    assert (traces / "tidl_subgraph0_net.bin.layer_info.txt").is_file()
    assert main(["run", str(files / "x_run.npz"), "--input", str(files / "x_run.npz"), "--debug-level", "3"]) == 2

def test_compile_takes_disabled_passes(tmp_path, capsys):
    """disabled_passes reaches the partition: the BN between two GEMMs stays a TIDL BatchNorm layer."""
    from tidlx.models import bn_between_gemms

    bn_between_gemms(path=tmp_path / "bn.onnx")
    types = []
    for name, extra in (("folded", []), ("kept", ["-o", "disabled_passes=FoldBatchNormIntoDense"])):
        assert main(["compile", str(tmp_path / "bn.onnx"), "-o", str(tmp_path / name), "-o", "accuracy_level=0"]
                    + extra) == 0
        types.append(open(tmp_path / name / "tidl_subgraph0.json").read().count('"BatchNorm"'))
    assert types[0] == 0 and types[1] >= 1
