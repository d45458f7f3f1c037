"""Acceptance of the fixed point on the built-in BEVDet image stage: resnet18 with the default
camera-aware depth net and with LSS, at 8 and 16 bit, TI's default calibration (accuracy_level 1).

* SQNR of every output (depth, volume) against the float model, printed; 16 bit must be >= 8 bit + 15 dB
  (TI's calibration takes the mean of the frames' maxima, so the frames above it saturate at any width,
  and the bias iterations fit the biases to that saturation on the calibration frames).
* The same bits twice, and with 1 and 2 emulator threads.

The tiny models use TI's default calibration (accuracy_level 1: histogram ranges, median weight
ranges, bias calibration, here over 3 iterations instead of 50 to keep the test short); the full-size
ones min/max (accuracy_level 0): at full size the histogram's percentile shrink drops 0.01% of each
tensor's values and the test frame's largest values saturate (measured at level 1: LSS volume 16 bit
34.9 dB). Full-size camera-aware stays near 35 dB at 16 bit even at level 0 (measured: depth 20.7 ->
35.3, volume 13.9 -> 35.2 dB) because of TIDL's own arithmetic, so it is an expected failure (xfail): the
ASPP global average pool multiplies by ``round(2^12 / (16 x 44)) = 6`` for 5.82 (docs/numerics.md §8.6,
TI's Q = 12), a 3.1% gain error that no width removes. `tidlx compare` names that pool the worst layer
(30.2 dB), and with Q = 20 the outputs reach 64.4 / 59.6 dB; test_global_pool_multiplier_caps_the_sqnr_at_704_positions
pins the cause on a lone pool.
"""

from __future__ import annotations

import os
import tempfile
import warnings

import numpy as np
import pytest

import tidlx
from tidlx.backends.tidl.metrics import sqnr_db
from tidlx.emulator.config import EmulatorConfig
from tidlx.models import bevdet_img_stage

CALIBRATION_FRAMES = 8
#: bias calibration iterations (TI's default is 50; a few keep the test short)
BIAS_ITERATIONS = 3
SLOW = pytest.mark.skipif(not os.environ.get("TIDLX_SLOW_TESTS"),
                          reason="full-size BEVDet: set TIDLX_SLOW_TESTS=1 (about a minute per model)")


def _model(depth_net: str, tiny: bool):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bevdet.onnx")
        bevdet_img_stage(backbone="resnet18", batch=1, tiny=tiny, depth_net=depth_net, path=path)
        mod = tidlx.load(path)
    partitioned, _ = tidlx.partition(mod)
    rng = np.random.default_rng(1)
    calib = {}
    for param in mod["main"].params:
        shape = tuple(int(s) for s in param.checked_type.shape)
        calib[param.name_hint] = rng.standard_normal((CALIBRATION_FRAMES,) + shape[1:]).astype(np.float32)
    test = {name: frames[:1] for name, frames in calib.items()}
    return partitioned, calib, test


def _quantize(partitioned, calib, bits, accuracy_level):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tidlx.quantize(partitioned, {"tensor_bits": bits, "accuracy_level": accuracy_level,
                                            "advanced_options:calibration_frames": CALIBRATION_FRAMES,
                                            "advanced_options:calibration_iterations": BIAS_ITERATIONS},
                              calib=calib)


def _accept(depth_net: str, tiny: bool, accuracy_level: int):
    partitioned, calib, test = _model(depth_net, tiny)
    reference = tidlx.emulate(partitioned, test, kernels="reference")
    names = ("depth", "volume")
    figures = {}
    for bits in (8, 16):
        qmodel = _quantize(partitioned, calib, bits, accuracy_level)
        one = qmodel.run(test, config=EmulatorConfig(threads=1))
        again = qmodel.run(test, config=EmulatorConfig(threads=1))
        two = qmodel.run(test, config=EmulatorConfig(threads=2))
        for a, b, c in zip(one, again, two):
            assert a.tobytes() == b.tobytes() == c.tobytes(), "fixed point is not deterministic"
        figures[bits] = [sqnr_db(r, v) for r, v in zip(reference, one)]
    size = "tiny" if tiny else "full size"
    for k, name in enumerate(names):
        print(f"BEVDet resnet18 {size} {depth_net} accuracy_level {accuracy_level}, {name}: 8 bit {figures[8][k]:.1f} dB, 16 bit "
              f"{figures[16][k]:.1f} dB (+{figures[16][k] - figures[8][k]:.1f})")
    for k, name in enumerate(names):
        assert figures[8][k] >= 10.0, (name, figures)
        assert figures[16][k] >= figures[8][k] + 15.0, (name, figures)
    return figures


@pytest.mark.parametrize("depth_net", ["camera_aware", "lss"])
def test_bevdet_tiny_fixed_point(depth_net):
    _accept(depth_net, tiny=True, accuracy_level=1)


@SLOW
@pytest.mark.parametrize("depth_net", [
    pytest.param("camera_aware", marks=pytest.mark.xfail(strict=True, reason="TIDL's global average pool "
                                                                                 "multiplier (Q = 12) caps 16 bit near 35 dB")),
    "lss"])
def test_bevdet_full_size_fixed_point(depth_net):
    _accept(depth_net, tiny=False, accuracy_level=0)


def _global_pool_sqnr(height: int, width: int, bits: int) -> float:
    """SQNR of a lone global average pool over H x W positive values in TIDL's fixed point."""
    mod = tidlx.parse_relay(f'''
def @main(%x: Tensor[(1, 8, {height}, {width}), float32]) {{
  %0 = nn.relu(%x);
  nn.global_avg_pool2d(%0)
}}''')
    frames = {"x": np.random.default_rng(3).standard_normal((4, 8, height, width)).astype(np.float32)}
    test = {"x": frames["x"][:1]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qmodel = tidlx.quantize(mod, {"tensor_bits": bits, "accuracy_level": 0}, calib=frames)
    return sqnr_db(tidlx.emulate(mod, test, kernels="reference")[0], qmodel.run(test)[0])


def test_global_pool_multiplier_caps_the_sqnr_at_704_positions(monkeypatch):
    """Why full-size camera-aware BEVDet stays near 35 dB at 16 bit: TIDL's global average pool multiplies
    by round(2^12 / (H x W)) (TIDL-NUMERICS.md, Q = 12). Over BEVDet's 16 x 44 = 704 positions that is 6
    for 5.82, a +3.1% gain: 20 log10(1 / 0.031) = 30.1 dB whatever the width. Measured on the full model
    with `tidlx.compare`: the pool is its worst layer (30.2 dB) and with Q = 20 the outputs reach 64.4 /
    59.6 dB (35.3 / 35.2 with TI's Q)."""
    s16 = _global_pool_sqnr(16, 44, 16)
    print(f"global average pool over 16 x 44, 16 bit: {s16:.1f} dB")
    assert 29.0 < s16 < 31.5
    assert _global_pool_sqnr(16, 32, 16) > 60.0           # 512 positions: 2^12 / 512 = 8 exactly

    from tidlx.backends.tidl import numerics as nx
    plain = nx.average_pool_q
    monkeypatch.setattr(nx, "average_pool_q", lambda k, s, b, global_pool=False: 20 if global_pool else plain(k, s, b))
    assert _global_pool_sqnr(16, 44, 16) > 60.0
