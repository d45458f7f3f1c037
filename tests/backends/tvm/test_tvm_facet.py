"""The ``tvm.lower`` facet is part of tidlx's op table (``tidlx ops``), and neither ``import tidlx``
nor loading the facets imports apache-tvm (the lowerings import it only when they run)."""

from __future__ import annotations

import json
import subprocess
import sys

from tidlx.cli import main
from tidlx.ir.op import list_ops


def test_tidlx_ops_shows_the_tvm_lowering_of_every_op(capsys):
    assert main(["ops", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["facets"]["tvm.lower"]["owner"] == "tidlx.backends.tvm"
    assert data["facets"]["tvm.lower"]["ops"] == len(list_ops())
    conv = next(rec for rec in data["ops"] if rec["name"] == "nn.conv2d")
    assert conv["facets"]["tvm.lower"].startswith("backends/tvm/lower/nn.py:")
    assert main(["ops", "nn.conv2d"]) == 0
    assert "tvm.lower: backends/tvm/lower/nn.py" in capsys.readouterr().out


def test_import_tidlx_and_the_facets_import_no_tvm():
    code = ("import sys, tidlx; from tidlx.op_table import load_facets; load_facets(); "
            "import tidlx.backends.tvm; print(sorted(m for m in sys.modules if m == 'tvm' or m.startswith('tvm.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
