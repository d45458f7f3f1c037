"""The demo's numerics answer (tidlx/demo.py, ``_numerics``): SQNR per output at 8 and 16 bit and the
worst layers on the tiny resnet18 model, as tidlx compare reports them."""

from __future__ import annotations

import io

from rich.console import Console

from tidlx.demo import NUMERICS_16BIT_GAIN_DB, NUMERICS_WORST_LAYERS, _numerics


def test_numerics_answer(tmp_path):
    buffer = io.StringIO()
    figures = _numerics(Console(file=buffer, width=400, highlight=False), str(tmp_path))
    out = buffer.getvalue()
    assert set(figures) == {8, 16} and set(figures[8]) == {"depth", "volume"}
    for name in ("depth", "volume"):
        assert figures[8][name] > 5.0 and figures[16][name] > 5.0
    # TI's ranges are the mean of the frames' ranges: with 4 random frames the held-out one saturates, and
    # where 16 bit gains little the demo says so
    flat = [name for name in ("depth", "volume") if figures[16][name] < figures[8][name] + NUMERICS_16BIT_GAIN_DB]
    assert ("16 bit gains little on" in out) == bool(flat)
    assert all(f"'{name}'" in out.split("16 bit gains little on")[1].split(":")[0] for name in flat)
    assert "7. fixed point" in out and "tiny resnet18, batch 1" in out
    assert "compared on another (seed 2)" in out
    assert "rules: TIDL 11.00's import and reference kernels (option tidl_version" in out
    assert "TI's calibration loop: a float pass, then 2 fixed-point iterations" in out
    for bits in (8, 16):
        line = next(line for line in out.splitlines() if line.startswith(f"   worst layers at {bits} bit"))
        assert line.count(" dB / ") == NUMERICS_WORST_LAYERS
        assert "Reshape" not in line and "Transpose" not in line   # data movement left out
    assert f"{figures[8]['depth']:.1f} dB" in out
    # the BN feeding two GEMMs, fused vs kept, in fixed point (backends/tidl/fusion_check.py)
    assert "the BatchNorm feeding two GEMMs, 8-bit fixed point" in out
    assert out.count("in fixed point, fused vs the BN as its own TIDL layer") == 1
    assert "deny_list=nn.batch_norm:" in out and "disabled_passes=FoldBatchNormIntoDense:" in out
