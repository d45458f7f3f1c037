"""``tidlx report MODEL -o FILE.html`` (tidlx/report_cli.py, backends/tidl/html_report.py), in-process
through ``tidlx.cli.main``: what the page holds, that it is the same bytes twice, that it fetches
nothing, and the command's errors."""

from __future__ import annotations

import contextlib
import html.parser
import io
import os
import re
import xml.etree.ElementTree as ET

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
from tidlx.cli import main

#: Bias calibration runs every calibration frame per iteration (TI's default: 50): one keeps it quick.
FAST = ("-o", "advanced_options:calibration_iterations=1", "-o", "advanced_options:calibration_frames=2")
SVG_NS = "{http://www.w3.org/2000/svg}"


def small_model(path) -> None:
    """conv1 + relu1 (TIDL), a softmax along the channel axis (the host: TIDL refuses that axis),
    conv2 (TIDL): two subgraphs and one host op."""
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32), "w1")
    b1 = numpy_helper.from_array((rng.standard_normal(8) * 0.1).astype(np.float32), "b1")
    w2 = numpy_helper.from_array((rng.standard_normal((4, 8, 1, 1)) * 0.5).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Softmax", ["r1"], ["s"], name="softmax", axis=1),
             helper.make_node("Conv", ["s", "w2"], ["y"], name="conv2")]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])], [w1, b1, w2])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def host_only_model(path) -> None:
    """One softmax along the channel axis: nothing for TIDL."""
    nodes = [helper.make_node("Softmax", ["x"], ["y"], name="softmax", axis=1)]
    graph = helper.make_graph(nodes, "host_only", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def run(capsys, *argv):
    code = main(["report", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


class Elements(html.parser.HTMLParser):
    """Every start tag of a page: (tag, attributes), in order."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def elements(page: str):
    parser = Elements()
    parser.feed(page)
    return parser.tags


def section(page: str, name: str) -> str:
    """The text of ``<section id="name">`` (sections do not nest)."""
    start = page.index(f'<section id="{name}">')
    return page[start:page.index("</section>", start)]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    small_model(folder / "small.onnx")
    host_only_model(folder / "host_only.onnx")
    rng = np.random.default_rng(5)
    np.savez(folder / "calib.npz", x=rng.standard_normal((2, 3, 16, 16)).astype(np.float32))
    # four times the calibrated spread: the compared frame saturates, which the findings name
    np.savez(folder / "big.npz", x=(4.0 * rng.standard_normal((1, 3, 16, 16))).astype(np.float32))
    return folder


@pytest.fixture(scope="module")
def page(files):
    """The page of the small model, calibrated on calib.npz and compared on big.npz."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["report", str(files / "small.onnx"), "--calib", str(files / "calib.npz"), "--input",
                     str(files / "big.npz"), *FAST, "-o", str(files / "report.html")])
    assert code == 0, err.getvalue()
    return {"text": (files / "report.html").read_text(encoding="utf-8"), "out": out.getvalue(),
            "err": err.getvalue()}


@pytest.fixture(scope="module")
def partition_json(files):
    _, report = tidlx.partition(tidlx.load(str(files / "small.onnx")))
    return report.to_dict()


def test_prints_where_and_the_verdict(page, files):
    assert page["out"] == f"wrote {files / 'report.html'}: exports: yes \u2014 2 TIDL subgraphs, 97.1% of MACs on " \
                          f"TIDL, 1 op on the host\n"
    assert page["err"] == ""   # calibration frames given: no warning


def test_verdict(page, partition_json):
    text = page["text"]
    assert f'<p class="verdict yes" id="verdict-line">{partition_json["verdict"]}</p>' in text
    verdict = section(text, "verdict")
    for value, label in (("2", "TIDL subgraphs"), ("97.1%", "MACs on TIDL"), ("1", "ops on the host")):
        assert f'<div class="value">{value}</div><div class="label">{label}</div>' in verdict
    assert "lowest output SQNR, 8 bit" in verdict and "lowest output SQNR, 16 bit" in verdict
    assert "random-frames-warning" not in text   # --calib given


def test_each_subgraph_with_layers_macs_and_boundary_tensors(page, partition_json):
    text = page["text"]
    subgraphs = partition_json["subgraphs"]
    assert [s["name"] for s in subgraphs] == ["tidl_0", "tidl_1"]
    for s in subgraphs:
        start = text.index(f'id="sub-{s["name"]}"')
        block = text[start:text.index("</div>\n", start)]
        assert f'({s["macs"]:,} MACs)' in block
        for layer in s["tidl_layers"]:
            assert f'<span class="name">{layer["name"]}</span>' in block
            assert f"<td>{layer['type']}</td>" in block
        for t in s["inputs"] + s["outputs"]:
            assert f'<span class="name">{t["name"]}</span>' in block
            assert "x".join(map(str, t["shape"])) in block and f'{t["bytes"]:,}' in block
    assert "conv1" in section(text, "subgraphs") and "conv2" in section(text, "subgraphs")


def test_host_ops_with_their_reasons_in_the_table_and_on_hover(page, partition_json):
    text = page["text"]
    [host] = partition_json["host_ops"]
    assert host["op"] == "nn.softmax" and "axis 1 (channel)" in host["reason"]
    [group] = partition_json["host_groups"]
    assert f"<td>{group['reason']}</td>" in section(text, "host")
    # the graph: an SVG whose host box carries the reason in its <title> (the tooltip)
    graph = section(text, "graph")
    svg = ET.fromstring(graph[graph.index("<svg"):graph.index("</svg>") + len("</svg>")])
    nodes = [g for g in svg.iter(f"{SVG_NS}g") if g.get("class") == "node"]
    groups = [g.get("data-group") for g in nodes]
    assert groups.count("tidl_0") == 1 and groups.count("tidl_1") == 1 and groups.count("host") == 1
    [host_box] = [g for g in nodes if g.get("data-group") == "host"]
    title = host_box.find(f"{SVG_NS}title").text
    assert "on the host: " in title and host["reason"] in title


def test_sqnr_chart_at_8_and_16_bit_with_saturation(page):
    text = page["text"]
    numerics = section(text, "numerics")
    start = numerics.index('<figure class="chart scroll" id="sqnr-chart" data-bits="8,16">')
    chart = numerics[start:numerics.index("</figure>", start)]
    svg = ET.fromstring(chart[chart.index("<svg"):chart.index("</svg>") + len("</svg>")])
    ids = {e.get("id") for e in svg.iter() if e.get("id")}
    for gid in ("sqnr-8bit", "sqnr-16bit", "saturation-8bit", "saturation-16bit"):
        assert f"chart-sqnr-{gid}" in ids, gid
    words = " ".join(t.text or "" for t in svg.iter(f"{SVG_NS}text"))
    assert "8 bit" in words and "16 bit" in words and "conv1" in words and "conv2" in words
    for bits in (8, 16):
        assert re.search(rf'<li id="headline-{bits}bit">{bits}-bit fixed point: output &#x27;y&#x27; [\d.]+ dB SQNR', numerics)
        assert f"SQNR {bits} bit" in numerics and f"Worst layers at {bits} bit" in numerics


def test_findings(page, files):
    numerics = section(page["text"], "numerics")
    result = tidlx.compare(tidlx.load(str(files / "small.onnx")), str(files / "big.npz"),
                           {"advanced_options:calibration_iterations": 1, "advanced_options:calibration_frames": 2},
                           str(files / "calib.npz"))
    assert result.findings and result.findings[0].kind == "saturation"
    finding = result.findings[0]
    assert (f"<strong>saturation</strong> at @{finding.subgraph} <span class=\"name\">{finding.layer}</span>"
            in numerics)
    assert finding.message.replace("'", "&#x27;") in numerics
    assert '<ul class="findings" data-bits="8">' in numerics


def test_worst_layers_values_as_histograms_and_scatter_plots(page):
    numerics = section(page["text"], "numerics")
    figures = re.findall(r'<figure class="chart scroll layer-values" data-layer="([^"]+)">', numerics)
    assert figures and set(figures) <= {"conv1", "conv2"}
    for i in range(len(figures)):
        for gid in ("histogram-float", "histogram-fixed", "scatter"):
            assert f'id="chart-values-{i}-{gid}"' in numerics


def test_fusion_check(page):
    fusion = section(page["text"], "fusion")
    assert 'id="fusion-chart"' in fusion and 'id="chart-fusion-fusion-fused"' in fusion
    assert "<td>relu/clip into layer</td>" in fusion and "disabled_fusions=FuseActivation" in fusion
    assert "fusion(s) applied" in fusion


def test_options_used(page, files):
    options = section(page["text"], "options")
    for given in ("advanced_options:calibration_iterations=1", "advanced_options:calibration_frames=2"):
        assert f"<code>{given}</code>" in options
    assert f"<td>--calib</td><td>{files / 'calib.npz'}</td>" in options
    assert f"<td>--input</td><td>{files / 'big.npz'}</td>" in options
    assert "<td>advanced_options:calibration_iterations</td><td><code>1</code></td><td><code>50</code></td>" in options


def test_ids_are_unique(page):
    ids = [attrs["id"] for _, attrs in elements(page["text"]) if "id" in attrs]
    assert len(ids) == len(set(ids)), sorted(i for i in set(ids) if ids.count(i) > 1)[:5]


def test_nothing_is_fetched(page):
    text = page["text"]
    tags = elements(text)
    assert not [t for t, _ in tags if t in ("script", "link", "iframe", "img", "object", "embed")]
    for tag, attrs in tags:
        for name in ("src", "href", "xlink:href", "action", "srcset"):
            value = (attrs.get(name) or "").strip().lower()
            assert not value.startswith(("http:", "https:", "//", "ftp:")), (tag, name, value)
            assert not value or value.startswith("#"), (tag, name, value)   # only links inside the page
    for bad in ("url(http", "url(//", "@import", "@font-face", "<base"):
        assert bad not in text.lower()
    # an address appears only as an XML namespace of the inline SVGs
    addresses = set(re.findall(r"https?://[^\s\"'<>)]+", text))
    assert addresses <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, addresses


@pytest.fixture(scope="module")
def random_pages(files):
    """The small model twice without --calib (seeded random frames), to two files."""
    pages = []
    for name in ("random_a.html", "random_b.html"):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(["report", str(files / "small.onnx"), *FAST, "--out", str(files / name)])
        assert code == 0, err.getvalue()
        pages.append(((files / name).read_bytes(), err.getvalue()))
    return pages


def test_same_bytes_twice(random_pages):
    (a, _), (b, _) = random_pages
    assert a == b


def test_random_frames_are_said_in_a_warning_box(random_pages):
    page, err = random_pages[0]
    text = page.decode("utf-8")
    for where in ("verdict", "numerics"):
        box = section(text, where)
        assert "Calibrated on seeded random frames." in box
        assert "say nothing about real data" in box
    assert '<div class="warning" id="random-frames-warning">' in text
    assert err.startswith("tidlx: warning: no calibration data given: calibrating on 2 deterministic random frame(s)")


def test_model_without_tidl_subgraph(files, capsys):
    code, out, err = run(capsys, files / "host_only.onnx", "-o", files / "host_only.html")
    assert code == 0, err
    assert out.startswith(f"wrote {files / 'host_only.html'}: exports: no \u2014 no TIDL subgraph")
    text = (files / "host_only.html").read_text(encoding="utf-8")
    assert '<p class="verdict no" id="verdict-line">exports: no' in text
    assert "No TIDL subgraph: nothing runs in fixed point." in section(text, "numerics")
    assert "No TIDL subgraph: no fusion to check." in section(text, "fusion")
    assert "softmax along axis 1 (channel)" in section(text, "host")


def test_a_quantization_that_fails_is_said_in_the_page(files, capsys, monkeypatch):
    from tidlx.backends.tidl import html_report
    from tidlx.backends.tidl.quantize import QuantizationError

    def refuse(mod, options, results):
        if int(options.tensor_bits) == 16:
            raise QuantizationError("@tidl_0: layer 'conv1' (Conv): not run in fixed point at 16 bit")
        return quantize(mod, options, results)

    quantize = html_report.quantize_model
    monkeypatch.setattr(html_report, "quantize_model", refuse)
    code, out, err = run(capsys, files / "small.onnx", "--calib", files / "calib.npz", *FAST, "-o",
                         files / "failed16.html")
    assert code == 0, err
    assert err == ("tidlx: warning: 16-bit fixed point is not in the page: @tidl_0: layer 'conv1' (Conv): not run "
                   "in fixed point at 16 bit\n")
    numerics = section((files / "failed16.html").read_text(encoding="utf-8"), "numerics")
    assert '<div class="error" id="numerics-error-16bit"><strong>16-bit fixed point: not available.</strong>' in numerics
    assert 'id="headline-8bit"' in numerics and 'id="headline-16bit"' not in numerics


@pytest.mark.parametrize("argv, message", [
    (["missing.onnx", "-o", "r.html"], "missing.onnx: no such file"),
    (["{model}", "-o", "r.html", "-o", "tensor_bits=12"], "option tensor_bits=12 is not allowed: it must be one of 8, 16"),
    (["{model}", "-o", "r.html", "-o", "no_such_option=1"], "no_such_option"),
    (["{model}"], "tidlx report: say where to write the page: -o FILE.html (or --out FILE.html)"),
    (["{model}", "-o", "a.html", "--out", "b.html"], "tidlx report: one output file, got 2: b.html, a.html"),
    (["{model}", "-o", "tensor_bits"], "tidlx report: the page is an HTML file: -o NAME.html (got 'tensor_bits'"),
    (["{model}", "-o", "{folder}/no/such/folder/r.html"], "the folder {folder}/no/such/folder does not exist"),
    (["{model}", "-o", "{folder}/dir.html"], "{folder}/dir.html: is a folder"),
    (["{model}", "-o", "r.html", "--calib", "{folder}/none.npz"], "--calib {folder}/none.npz: no such file or folder"),
    (["{model}", "-o", "r.html", "--input", "{folder}/none.npz"], "--input {folder}/none.npz: no such file or folder"),
    (["{model}", "-o", "r.html", "--mean", "a,b"], "--mean 'a,b': 'a' is not a finite number"),
    (["{model}", "-o", "r.html", "--batch", "0"], "--batch '0' is not allowed"),
])
def test_bad_input_is_one_error_line(files, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(files)
    (files / "dir.html").mkdir(exist_ok=True)
    values = {"model": files / "small.onnx", "folder": files}
    code, out, err = run(capsys, *[a.format(**values) for a in argv])
    assert code == 2
    assert out == ""
    assert err.startswith("tidlx: error: ") and err.count("\n") == 1, err
    assert message.format(**values) in err
    assert not (files / "r.html").exists()


def test_a_file_that_cannot_be_written(files, capsys):
    if os.geteuid() == 0:
        # root writes into a read-only folder; a name that is too long fails for everyone
        target = files / ("x" * 300 + ".html")
    else:
        locked = files / "locked"
        locked.mkdir(exist_ok=True)
        locked.chmod(0o500)
        target = locked / "r.html"
    code, out, err = run(capsys, files / "host_only.onnx", "-o", target)
    assert code == 2 and out == ""
    assert err.startswith(f"tidlx: error: {target}: cannot write the file (") and err.count("\n") == 1
