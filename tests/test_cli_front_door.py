"""The CLI and the Python API: names shown as they are (never rich markup, control
characters escaped, valid SVG), ``tidlx run``'s files, the Python API's argument errors, the
loading options on every command (``--params`` with TVM's params files, ``--batch``,
``--shapes``, ``--opset``), ``--version``, ``python -m tidlx``, help with examples, the verdict
line and host ops grouped by reason, output that is not wrapped, and ``demo --out``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import tidlx
from tidlx.cli import build_parser, main, parse_shapes
from tidlx.ir.text import printable, xml_text

DATA = Path(__file__).parent / "data" / "tvm_params"
ESC = "\x1b"


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def softmax_model(path, layer: str, *, axis: int = 1, shape=(1, 4, 8, 8), opset: int = 17):
    """Conv -> Softmax over the channels (TIDL refuses it: the host op) -> Relu, the softmax named ``layer``."""
    w = onnx.numpy_helper.from_array(np.ones((4, shape[1], 1, 1), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="/stem/Conv"),
             helper.make_node("Softmax", ["c"], ["s"], name=layer, axis=axis),
             helper.make_node("Relu", ["s"], ["y"], name="/head/Relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [shape[0], 4] + list(shape[2:]))],
                              initializer=[w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return path


# -- names: never markup, control characters escaped -----------------------------------------------------

@pytest.mark.parametrize("layer", ["/blocks[attn]/Softmax", "/blocks[bold]x[/bold]/Softmax", "/a[/]b",
                                   "/a:thumbs_up:/Softmax"])
def test_layer_names_are_printed_whole(tmp_path, capsys, layer):
    path = softmax_model(tmp_path / "m.onnx", layer)
    code, out, err = run_cli(capsys, "partition", path)
    assert code == 0 and err == ""
    assert layer in out  # in the host-op group, exactly as the model names it
    code, out, _ = run_cli(capsys, "partition", path, "--verbose")
    assert code == 0 and f"nn.softmax '{layer}'" in out
    # and a user can copy it into deny_list:layer_name
    code, out, err = run_cli(capsys, "partition", path, "-o", f"deny_list:layer_name={layer}", "--json")
    assert code == 0 and err == "" and [h["kind"] for h in json.loads(out)["host_ops"]] == ["deny_list:layer_name"]
    _, report = tidlx.partition(tidlx.load(str(path)))
    assert layer in str(report)


def test_a_path_with_markup_characters(tmp_path, capsys):
    folder = tmp_path / "runs["
    folder.mkdir()
    path = softmax_model(folder / "]m.onnx", "/s/Softmax")  # the path holds "[/]"
    code, out, err = run_cli(capsys, "show", path, "--counts-only")
    assert code == 0 and f"ops in {path}" in out and "Traceback" not in err
    code, out, err = run_cli(capsys, "partition", path)
    assert code == 0 and "]m.onnx: " in out
    code, out, err = run_cli(capsys, "partition", path, "--svg", folder / "[red]g.svg")
    assert code == 0 and f"wrote {folder / '[red]g.svg'}" in err


def test_control_characters_are_escaped_everywhere(tmp_path, capsys):
    layer = "/a\x1b[31mred\x07\x00\u202eb/Softmax"
    path = softmax_model(tmp_path / "m.onnx", layer)
    shown = "/a\\x1b[31mred\\x07\\x00\\u202eb/Softmax"
    for argv in (["partition", path], ["partition", path, "--verbose"], ["partition", path, "--print-relay"],
                 ["show", path]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 0 and shown in out, argv
        assert ESC not in out + err and "\x00" not in out and "\u202e" not in out, argv
    svg = tmp_path / "g.svg"
    code, _, _ = run_cli(capsys, "partition", path, "--svg", svg)
    root = ET.parse(svg).getroot()  # well-formed XML
    assert any(shown in (t.text or "") for t in root.iter("{http://www.w3.org/2000/svg}title"))
    # a warning that quotes a name the user typed
    code, _, err = run_cli(capsys, "partition", path, "-o", "deny_list:layer_name=/x\x1b[2J")
    assert code == 0 and "/x\\x1b[2J" in err and ESC not in err
    # an error that quotes one
    code, _, err = run_cli(capsys, "partition", tmp_path / "nope\x1b[2J.onnx")
    assert code == 2 and "nope\\x1b[2J.onnx: no such file" in err and ESC not in err


def test_printable_and_xml_text():
    assert printable("plain /a[b]/c") == "plain /a[b]/c"
    assert printable("a\x1bb\x00\x7f\x9b\u2066") == "a\\x1bb\\x00\\x7f\\x9b\\u2066"
    assert printable("two\nlines\tand\x01", keep="\n\t") == "two\nlines\tand\\x01"
    assert printable("bad \udcff byte") == "bad \\udcff byte"  # a file name that was not UTF-8
    assert xml_text('<a href="x">&\x00') == "&lt;a href=&quot;x&quot;&gt;&amp;\\x00"
    ET.fromstring(f"<t a=\"{xml_text(chr(0) + chr(0xFFFE) + chr(0xD800))}\">{xml_text(chr(8))}</t>")


# -- tidlx run: files --------------------------------------------------------------------------------------

@pytest.fixture()
def relu_model(tmp_path):
    """y = relu(x), positive = x > 0, with a dynamic batch N."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu"),
             helper.make_node("Greater", ["x", "zero"], ["positive"], name="gt")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4]),
                               helper.make_tensor_value_info("positive", TensorProto.BOOL, ["N", 4])],
                              initializer=[onnx.numpy_helper.from_array(np.zeros(1, np.float32), "zero")])
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_bytes(b""), "the file is empty (0 bytes)"),
    (lambda p: (np.savez(p, x=np.ones((64, 4), np.float32)), p.write_bytes(p.read_bytes()[:900])),
     "truncated or damaged"),
    (lambda p: (np.save(p.with_suffix(".npy"), np.ones((2, 4), np.float32)), os.replace(p.with_suffix(".npy"), p)),
     "a .npy file holds one array without a name"),
    (lambda p: p.write_text("x = 1\n"), "not an .npz file"),
    (lambda p: p.mkdir(), "is a folder"),
])
def test_run_bad_input_files(relu_model, tmp_path, capsys, make, message):
    bad = tmp_path / "in.npz"
    make(bad)
    code, out, err = run_cli(capsys, "run", relu_model, "--batch", "2", "--input", bad)
    assert code == 2 and out == "" and err.startswith(f"tidlx: error: --input {bad}: ") and message in err


def test_run_output_names_suffix_and_zero_size(relu_model, tmp_path, capsys):
    np.savez(tmp_path / "in.npz", x=np.array([[1, -1, 2, 0], [3, 3, -3, 0]], np.float32))
    code, out, err = run_cli(capsys, "run", relu_model, "--batch", "2", "--input", tmp_path / "in.npz",
                             "--output", tmp_path / "foo")
    assert code == 0, err
    assert "output 0 'y': shape (2, 4) float32, min 0, max 3" in out
    assert "output 1 'positive': shape (2, 4) bool, 4 of 8 true" in out
    assert f"wrote {tmp_path / 'foo.npz'} (arrays y, positive)" in out  # the file it wrote
    with np.load(tmp_path / "foo.npz") as saved:
        assert sorted(saved.files) == ["positive", "y"] and saved["y"].max() == 3
    # a zero-size output: no min/max to print
    np.savez(tmp_path / "empty.npz", x=np.zeros((0, 4), np.float32))
    code, out, err = run_cli(capsys, "run", relu_model, "--shapes", "x:0x4", "--input", tmp_path / "empty.npz",
                             "--output", tmp_path / "empty_out.npz")
    assert code == 0, err
    assert "output 0 'y': shape (0, 4) float32, empty (no elements)" in out
    with np.load(tmp_path / "empty_out.npz") as saved:
        assert saved["y"].shape == (0, 4)


def test_run_output_places_that_cannot_be_written(relu_model, tmp_path, capsys, monkeypatch):
    np.savez(tmp_path / "in.npz", x=np.ones((1, 4), np.float32))
    base = ["run", relu_model, "--batch", "1", "--input", tmp_path / "in.npz", "--output"]
    code, out, err = run_cli(capsys, *base, tmp_path / "missing" / "o.npz")
    assert code == 2 and out == "" and "the folder" in err and "missing does not exist" in err  # before the run
    code, _, err = run_cli(capsys, *base, tmp_path)
    assert code == 2 and "is a folder" in err
    if os.path.isdir("/sys/kernel"):  # a folder nobody may write to, root included
        code, _, err = run_cli(capsys, *base, "/sys/kernel/o.npz")
        assert code == 2 and "--output /sys/kernel/o.npz: cannot write the file (" in err

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np.lib.format, "write_array", full_disk)
    code, _, err = run_cli(capsys, *base, tmp_path / "o.npz")
    assert code == 2 and "cannot write the file (No space left on device)" in err and "Traceback" not in err
    assert not (tmp_path / "o.npz").exists()


def test_demo_out_that_cannot_be_written(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    code, out, err = run_cli(capsys, "demo", "--tiny", "--backbone", "resnet18", "--batch", "1",
                             "--out", tmp_path / "file" / "sub")
    assert code == 2 and err.startswith(f"tidlx: error: --out {tmp_path / 'file' / 'sub'}: cannot create the folder")
    if os.path.isdir("/sys/kernel"):
        code, out, err = run_cli(capsys, "demo", "--tiny", "--backbone", "resnet18", "--batch", "1",
                                 "--out", "/sys/kernel")
        assert code == 2 and err.startswith("tidlx: error: ") and "/sys/kernel/bevdet_resnet18_b1_tiny.onnx" in err
        assert "cannot be written" in err and "Traceback" not in err


def test_kernel_compilations_counts_only_real_compiles():
    from numba import njit

    from tidlx.demo import kernel_compilations

    @njit
    def twice(x):
        return 2 * x

    with kernel_compilations() as first:
        twice(3)
    with kernel_compilations() as again:
        twice(4)
    assert first.count >= 1 and again.count == 0


# -- the Python API ----------------------------------------------------------------------------------------

def test_api_argument_errors(tmp_path, relay_samples):
    path = softmax_model(tmp_path / "m.onnx", "/s/Softmax")
    mod = tidlx.load(str(path))
    _, report = tidlx.partition(mod, strategy=None)  # the default, as options=None is
    assert report.strategy == "greedy"
    with pytest.raises(TypeError, match=r"a partition strategy is named by a str \(greedy, "):
        tidlx.partition(mod, strategy=3)
    with pytest.raises(tidlx.TidlxError, match=r"batch= applies to ONNX models; Relay text has its shapes"):
        tidlx.load(str(relay_samples / "09_resnet18_opt_nometa.txt"), batch=2)
    with pytest.raises(tidlx.TidlxError, match=r"batch/shapes= apply to ONNX models"):
        tidlx.load(str(relay_samples / "09_resnet18_opt_nometa.txt"), batch=2, shapes={"input": [1]})
    with pytest.raises(tidlx.TidlxError, match="params= binds the weights of Relay text"):
        tidlx.load(str(path), params={"w": np.ones(1)})
    with pytest.raises(TypeError, match=r"tidlx.load: path must be a file path \(str or os.PathLike\), got int"):
        tidlx.load(5)
    with pytest.raises(TypeError, match="tidlx.emulate: inputs must be a mapping of input name to array"):
        tidlx.emulate(mod, [np.ones((1, 4, 8, 8), np.float32)])


def test_opset_is_an_argument_of_load_and_the_cli(tmp_path, capsys):
    path = softmax_model(tmp_path / "m.onnx", "/s/Softmax")
    model = onnx.load(str(path))
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    onnx.save(model, str(path))
    with pytest.raises(tidlx.TidlxError, match="opset=") as info:
        tidlx.load(str(path))
    assert "opset" in str(info.value)
    assert tidlx.load(str(path), opset=17)["main"] is not None  # what the message says works
    code, _, err = run_cli(capsys, "partition", path)
    assert code == 2 and "opset=" in err and "(on the command line: --opset N)" in err
    code, out, err = run_cli(capsys, "partition", path, "--opset", "17", "--json")
    assert code == 0 and json.loads(out)["host_ops"][0]["op"] == "nn.softmax"


# -- loading options on every command ----------------------------------------------------------------------

def test_params_bind_a_tvm_params_file(capsys, tmp_path):
    model = DATA / "conv.txt"
    code, out, err = run_cli(capsys, "partition", model, "--json")
    assert code == 0 and "the weight is not a constant" in out  # without the params: not the real report
    code, out, err = run_cli(capsys, "partition", model, "--params", DATA / "conv.params", "--json")
    data = json.loads(out)
    assert code == 0 and err == "" and data["host_ops"] == [] and data["totals"]["tidl_macs_percent"] == 100.0
    assert data["verdict"] == "exports: yes \u2014 1 TIDL subgraph, 100% of MACs on TIDL, 0 ops on the host"
    code, out, _ = run_cli(capsys, "show", model, "--params", DATA / "conv.params", "--counts-only")
    assert code == 0 and "nn.conv2d" in out
    # run: the same numbers as binding the arrays by hand
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.savez(tmp_path / "in.npz", input=x)
    code, out, _ = run_cli(capsys, "run", model, "--params", DATA / "conv.params", "--input", tmp_path / "in.npz",
                           "--output", tmp_path / "out.npz")
    weights = tidlx.files.read_params(DATA / "conv.params")
    want = tidlx.emulate(tidlx.load(str(model), params=weights), {"input": x})[0]
    with np.load(tmp_path / "out.npz") as saved:
        assert code == 0 and np.array_equal(saved["output_0"], want)
    assert np.array_equal(tidlx.emulate(tidlx.load(str(model), params=str(DATA / "conv.params")),
                                        {"input": x})[0], want)


def test_params_npz_fills_meta_constants(relay_samples, tmp_path, capsys):
    sample = relay_samples / "09_resnet18_opt_nometa.txt"
    with pytest.warns(tidlx.ir.errors.TidlxWarning):
        unbound = tidlx.load(str(sample))
    rng = np.random.default_rng(1)
    consts = {}
    for p in unbound["main"].params[1:]:
        index = int(p.name_hint.rsplit("_", 1)[1])  # meta_const_<i>
        t = p.type_annotation
        consts[f"meta[relay.Constant][{index}]"] = rng.standard_normal(tuple(t.shape)).astype(t.dtype) * 0.1
    np.savez(tmp_path / "resnet18.npz", **consts)
    code, out, err = run_cli(capsys, "partition", sample, "--params", tmp_path / "resnet18.npz")
    assert code == 0 and err == ""  # every constant bound: no warning
    assert out.splitlines()[0] == "exports: yes \u2014 1 TIDL subgraph, 100% of MACs on TIDL, 0 ops on the host"


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_bytes((DATA / "conv.params").read_bytes()[:500]), "bad.params: byte 140: the file ends inside "
                                                                         "the data of array 'conv.weight'"),
    (lambda p: p.write_bytes(b"\x00" * 32), "neither an .npz file nor a TVM params file"),
    (lambda p: np.savez(p, **{"conv.weigth": np.ones((8, 3, 3, 3), np.float32)}), "did you mean 'conv.weight'"),
    (lambda p: np.savez(p, **{"conv.weight": np.ones((8, 3, 1, 1), np.float32)}), "is Tensor[(8, 3, 3, 3), "
                                                                                  "float32] but the value is"),
])
def test_bad_params_files(tmp_path, capsys, make, message):
    bad = tmp_path / "bad.params"
    make(bad)
    if not bad.exists():  # numpy added .npz
        os.replace(str(bad) + ".npz", bad)
    code, out, err = run_cli(capsys, "partition", DATA / "conv.txt", "--params", bad)
    assert code == 2 and out == "" and err.startswith("tidlx: error: ") and message in err and "Traceback" not in err


def test_params_and_shapes_apply_to_one_kind_of_model(tmp_path, capsys):
    path = softmax_model(tmp_path / "m.onnx", "/s/Softmax")
    code, _, err = run_cli(capsys, "show", path, "--params", DATA / "conv.params")
    assert code == 2 and "--params binds the constants of Relay text" in err
    for option in (["--batch", "2"], ["--shapes", "x:1x3x8x8"], ["--opset", "17"]):
        code, _, err = run_cli(capsys, "run", DATA / "conv.txt", *option, "--input", "x.npz")
        assert code == 2 and f"{option[0]} applies to ONNX models" in err


def test_batch_and_shapes_on_every_command(relu_model, tmp_path, capsys):
    code, _, err = run_cli(capsys, "show", relu_model)
    assert code == 2 and "dimension 0 is dynamic" in err and "(on the command line: --batch N, --shapes NAME:DIMS" in err
    code, out, _ = run_cli(capsys, "show", relu_model, "--batch", "3")
    assert code == 0 and "Tensor[(3, 4), float32]" in out
    code, out, _ = run_cli(capsys, "show", relu_model, "--shapes", "x:5,4")
    assert code == 0 and "Tensor[(5, 4), float32]" in out
    code, out, _ = run_cli(capsys, "partition", relu_model, "--shapes", "x:[2,4]", "--json")
    assert code == 0 and json.loads(out)["batch"]["model"] == 2
    code, _, err = run_cli(capsys, "partition", relu_model, "--shapes", "y:2x4")
    assert code == 2 and "names 'y', which is not a graph input" in err
    for bad, message in (("x", "write NAME:DIMS"), ("x:2xa", "dimension 'a' is not an integer >= 0"),
                         ("x:2x4,x:3x4", "gives input 'x' twice")):
        code, _, err = run_cli(capsys, "show", relu_model, "--shapes", bad)
        assert code == 2 and message in err, bad


BROADCAST_447G = """#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3), float32]) {
  broadcast_to(%x, shape=[40000, 1000, 1000, 3])
}
"""


def test_max_tensor_bytes_raises_the_budget(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TIDLX_MAX_TENSOR_BYTES", raising=False)
    path = tmp_path / "big.txt"
    path.write_text(BROADCAST_447G, encoding="utf-8")
    code, _, err = run_cli(capsys, "show", path, "--counts-only")
    first = err.splitlines()[0]
    assert code == 2 and "more than the tensor budget of 4294967296 bytes" in first
    assert first.endswith("(on the command line: --max-tensor-bytes SIZE)")
    code, out, _ = run_cli(capsys, "show", path, "--counts-only", "--max-tensor-bytes", "1T")
    assert code == 0 and "broadcast_to" in out  # typed only: nothing was allocated
    code, _, err = run_cli(capsys, "partition", path, "--max-tensor-bytes", "lots")
    assert code == 2 and "--max-tensor-bytes='lots' is not a size in bytes" in err


def test_parse_shapes():
    assert parse_shapes([]) is None
    assert parse_shapes(["img:6x3x256x704,mask:6x1x64x176"]) == {"img": (6, 3, 256, 704), "mask": (6, 1, 64, 176)}
    assert parse_shapes(["img:1,3,224,224", "mask:[1,1]"]) == {"img": (1, 3, 224, 224), "mask": (1, 1)}
    assert parse_shapes(["input:0:1x3x8x8"]) == {"input:0": (1, 3, 8, 8)}
    assert parse_shapes(["scalar:"]) == {"scalar": ()}


# -- the command line itself -------------------------------------------------------------------------------

def test_version_and_python_m(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"tidlx {tidlx.__version__}"
    done = subprocess.run([sys.executable, "-m", "tidlx", "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == f"tidlx {tidlx.__version__}"


def test_every_command_has_a_description_and_examples():
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert {"show", "run", "partition", "ops", "demo"} <= set(commands)
    for name, sub in commands.items():
        text = sub.format_help()
        assert sub.description and len(sub.description) > 40, name
        assert "examples:\n  tidlx " in text, name
    assert "examples:" in parser.format_help()
    for name in ("show", "run", "partition"):
        options = commands[name].format_help()
        assert all(o in options for o in ("--params", "--batch", "--shapes", "--opset", "--max-tensor-bytes")), name


# -- the partition answer ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bevdet_b6(tmp_path_factory):
    from tidlx.models import bevdet_img_stage

    path = tmp_path_factory.mktemp("models") / "bevdet_tiny_b6.onnx"
    bevdet_img_stage("resnet50", batch=6, tiny=True, path=str(path))
    return path


def test_verdict_first_and_host_ops_grouped_by_reason(bevdet_b6, capsys, monkeypatch):
    monkeypatch.delenv("TIDL_RELAY_MAX_BATCH_SIZE", raising=False)
    code, out, err = run_cli(capsys, "partition", bevdet_b6)
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("exports: no \u2014 no TIDL subgraph: 190 ops on the host (")
    # 186 batch refusals are one row: the host-op table is a few lines, not 190 rows
    start = next(i for i, line in enumerate(lines) if line.startswith("ops on the host, and why"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("\u2514"))
    table = lines[start:end + 1]
    assert len(table) <= 14, "\n".join(table)
    batch_row = next(line for line in table if line.startswith("\u2502 batch "))
    assert "186: nn.conv2d x57" in batch_row and "/img_backbone/conv1/Conv" in batch_row
    assert ("batch 6 > TIDL_RELAY_MAX_BATCH_SIZE=1: set the environment variable TIDL_RELAY_MAX_BATCH_SIZE=6 or "
            "the option max_batch_size=6") in batch_row  # one line: not a terminal, not wrapped
    assert "... and 179 more" in out
    code, verbose, _ = run_cli(capsys, "partition", bevdet_b6, "--verbose")
    assert code == 0 and verbose.count("batch 6 > TIDL_RELAY_MAX_BATCH_SIZE=1") == 186
    code, out, _ = run_cli(capsys, "partition", bevdet_b6, "-o", "max_batch_size=6")
    assert out.splitlines()[0].startswith("exports: yes \u2014 ")


def test_verdict_and_groups_in_the_api(tmp_path):
    path = softmax_model(tmp_path / "m.onnx", "/s/Softmax")
    _, report = tidlx.partition(tidlx.load(str(path)))
    assert report.exports and report.verdict().startswith("exports: yes \u2014 ")
    assert report.verdict().endswith(", 1 op on the host")
    (group,) = report.host_groups()
    assert (group.kind, group.layers, len(group.ops)) == ("rule", ["/s/Softmax"], 1)
    assert not group.reason.startswith("nn.softmax")  # the op and layer are in the row, not the reason
    data = json.loads(report.to_json())
    assert data["verdict"] == report.verdict() and data["totals"]["exports"] is True
    assert data["host_groups"] == [group.to_dict()]
    assert str(report).splitlines()[0] == report.verdict()


def test_share_is_never_rounded_to_all_or_nothing():
    from tidlx.backends.tidl.report import _share

    assert [_share(a, b) for a, b in ((10, 10), (0, 10), (9999, 10000), (1, 100000), (996, 1000), (1, 2))] == [
        "100%", "0%", "99.9%", "<0.1%", "99.6%", "50%"]


def test_general_reason_of_composite_members():
    from tidlx.backends.tidl.report import HostOp, general_reason

    def host(op, layer, reason):
        return HostOp(layer, op, "batch", reason, 0, None, None, False)

    core = "batch 6 > TIDL_RELAY_MAX_BATCH_SIZE=1: set it"
    assert general_reason(host("nn.conv2d", "c", f"nn.conv2d 'c': {core}")) == core
    assert general_reason(host("nn.relu", "r", f"nn.relu 'r' is part of one TIDL Convolution layer (cbr_1) with "
                                               f"nn.conv2d 'c': {core}")) == core
    assert general_reason(host("nn.relu", "r", f"its composite group stays on the host with nn.conv2d 'c': "
                                               f"nn.conv2d 'c': {core}")) == core
    assert general_reason(host("transpose", "t", "its subgraph has 0 MACs < min_subgraph_macs 1")) == (
        "its subgraph has 0 MACs < min_subgraph_macs 1")
