"""The page of ``tidlx report`` in a real browser: headless Chromium (Debian's ``chromium``, which
``make test`` installs through ``make system-packages`` when run as root) loads it from disk, dumps
the DOM after load and takes a screenshot. The graph and the charts must be in the DOM, drawn on
the screenshot (their colours), with no console message (the page has no script, so any would be an
error). Set ``TIDLX_REPORT_SCREENSHOT=FILE.png`` to keep the screenshot's top 1400x2000 pixels."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess

import numpy as np
import pytest

from test_cli_report import FAST, elements, small_model  # sibling module: pytest puts this folder on sys.path
from tidlx.cli import main

BROWSERS = ("chromium", "chromium-browser")
WIDTH, HEIGHT = 1400, 2000
#: Tall enough for the whole page of the small model (the screenshot is of the window).
FULL_HEIGHT = 9000


def chromium() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("chromium is not installed: `make test` installs it (make system-packages, run as root, apt-gets "
                "Debian's chromium package); or apt-get install chromium")


def hex_colour(text: str):
    return tuple(int(text[i:i + 2], 16) for i in (1, 3, 5))


def pixels_of(image: np.ndarray, colour: str, tolerance: int = 12) -> int:
    """How many pixels of the RGB image are within ``tolerance`` of ``colour`` in every channel."""
    want = np.array(hex_colour(colour), dtype=np.int16)
    return int(np.count_nonzero(np.all(np.abs(image.astype(np.int16) - want) <= tolerance, axis=-1)))


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    browser = chromium()
    folder = tmp_path_factory.mktemp("report_browser")
    small_model(folder / "small.onnx")
    np.savez(folder / "calib.npz", x=np.random.default_rng(5).standard_normal((2, 3, 16, 16)).astype(np.float32))
    page = folder / "report.html"
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(["report", str(folder / "small.onnx"), "--calib", str(folder / "calib.npz"), *FAST,
                     "-o", str(page)]) == 0, err.getvalue()
    shot = folder / "report.png"
    argv = [browser, "--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            "--enable-logging=stderr", "--v=0", f"--user-data-dir={folder / 'profile'}",
            f"--window-size={WIDTH},{FULL_HEIGHT}", f"--screenshot={shot}", "--dump-dom", page.as_uri()]
    if os.geteuid() == 0:
        argv.insert(1, "--no-sandbox")   # Chromium refuses to run as root inside its sandbox
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=folder)
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.is_file(), done.stderr[-2000:]
    from PIL import Image

    with Image.open(shot) as im:
        image = np.asarray(im.convert("RGB"))
    keep = os.environ.get("TIDLX_REPORT_SCREENSHOT")
    if keep:
        Image.fromarray(image[:HEIGHT, :WIDTH]).save(keep, optimize=True)
    return {"source": page.read_text(encoding="utf-8"), "dom": done.stdout, "log": done.stderr, "image": image}


def test_no_console_message(loaded):
    lines = [line for line in loaded["log"].splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert not lines, lines[:5]


def test_graph_and_charts_are_in_the_dom_after_load(loaded):
    dom = elements(loaded["dom"])
    source = elements(loaded["source"])
    nodes = [a for t, a in dom if t == "g" and a.get("class") == "node"]
    assert len(nodes) == len([a for t, a in source if t == "g" and a.get("class") == "node"]) == 5
    assert sorted(a["data-group"] for a in nodes) == ["host", "io", "io", "tidl_0", "tidl_1"]
    ids = {a["id"] for _, a in dom if "id" in a}
    for wanted in ("verdict-line", "sqnr-chart", "chart-sqnr-sqnr-8bit", "chart-sqnr-sqnr-16bit",
                   "chart-sqnr-saturation-8bit", "chart-sqnr-saturation-16bit", "chart-values-0-histogram-float",
                   "chart-values-0-scatter", "fusion-chart", "chart-fusion-fusion-fused"):
        assert wanted in ids, wanted
    svgs = [a for t, a in dom if t == "svg"]
    assert len(svgs) == len([a for t, a in source if t == "svg"]) >= 4


def test_graph_and_charts_are_drawn(loaded):
    from tidlx.backends.tidl.report_charts import BITS_COLOURS, FUSED_COLOUR
    from tidlx.backends.tidl.svg import HOST_COLOUR, SUBGRAPH_COLOURS

    image = loaded["image"]
    assert image.shape[:2] == (FULL_HEIGHT, WIDTH)
    # the graph's boxes: both subgraphs and the host op (each box is 170x34 px)
    for colour in (SUBGRAPH_COLOURS[0], SUBGRAPH_COLOURS[1], HOST_COLOUR):
        assert pixels_of(image, colour) > 2000, colour
    # the SQNR chart's lines and markers at 8 and 16 bit, and the fusion chart's dots
    for colour, least in ((BITS_COLOURS[8], 150), (BITS_COLOURS[16], 150), (FUSED_COLOUR, 40)):
        assert pixels_of(image, colour) > least, colour
