"""The demo's numerics answer (tidlx/demo.py, ``_numerics``): SQNR per output at 8 and 16 bit and the
worst layers on the tiny resnet18 model, as tidlx compare reports them."""

from __future__ import annotations

import io

from rich.console import Console

from tidlx.demo import NUMERICS_WORST_LAYERS, _numerics


def test_numerics_answer(tmp_path):
    buffer = io.StringIO()
    figures = _numerics(Console(file=buffer, width=400, highlight=False), str(tmp_path))
    out = buffer.getvalue()
    assert set(figures) == {8, 16} and set(figures[8]) == {"depth", "volume"}
    for name in ("depth", "volume"):
        assert 5.0 < figures[8][name] < figures[16][name]
    assert "7. fixed point" in out and "tiny resnet18, batch 1" in out
    assert "compared on another (seed 2)" in out
    for bits in (8, 16):
        line = next(line for line in out.splitlines() if line.startswith(f"   worst layers at {bits} bit"))
        assert line.count(" dB / ") == NUMERICS_WORST_LAYERS
        assert "Reshape" not in line and "Transpose" not in line   # data movement left out
    assert f"{figures[8]['depth']:.1f} dB" in out
    # the BN feeding two GEMMs, fused vs kept, in fixed point (backends/tidl/fusion_check.py)
    assert "the BatchNorm feeding two GEMMs, 8-bit fixed point" in out
    assert out.count("in fixed point, fused vs the BN as its own TIDL layer") == 1
    assert "deny_list=nn.batch_norm:" in out and "disabled_passes=FoldBatchNormIntoDense:" in out
