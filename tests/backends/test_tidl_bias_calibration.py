"""Bias calibration (accuracy_level 1's BiasCalib bit, docs/numerics.md §9.5): over
``calibration_iterations``, each biased layer's bias is corrected so that its fixed-point per-channel
output mean approaches the float one on the calibration frames."""

from __future__ import annotations

import warnings

import numpy as np

import tidlx
from tidlx.backends.tidl.quantize import BIAS_CALIBRATION_FACTOR as F, bias_calibration_factor

# 16-bit weights with 8-bit outputs: §7.4's final ">> 8" truncates, a mean offset of about half an
# output step in every layer, which bias calibration is there to take out.
CHAIN = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 4, 8, 8), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3]);
  %1 = nn.bias_add(%0, meta[relay.Constant][1]);
  %2 = nn.conv2d(%1, meta[relay.Constant][2], padding=[1, 1, 1, 1], channels=8, kernel_size=[3, 3]);
  %3 = nn.bias_add(%2, meta[relay.Constant][3]);
  %4 = nn.conv2d(%3, meta[relay.Constant][4], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
  nn.bias_add(%4, meta[relay.Constant][5])
}
'''
NAMES = "tidl_0_layer1,tidl_0_layer2,tidl_0_layer3"


def _model():
    r = np.random.default_rng(7)
    shapes = ((8, 4, 3, 3), (8,), (8, 8, 3, 3), (8,), (4, 8, 3, 3), (4,))
    return tidlx.parse_relay(CHAIN, params=[(r.standard_normal(s) * 0.3).astype(np.float32) for s in shapes])


def _channel_mean_error(mod, qmodel, frames):
    """The mean |float - fixed| of the output's per-channel means over the frames."""
    ref = np.concatenate([tidlx.emulate(mod, {"x": f[None]}, kernels="reference")[0] for f in frames])
    got = np.concatenate([qmodel.run({"x": f[None]})[0] for f in frames])
    return float(np.abs(ref.mean(axis=(0, 2, 3)) - got.mean(axis=(0, 2, 3))).mean()), ref, got


def test_bias_calibration_lowers_the_mean_error():
    mod = _model()
    calib = {"x": np.random.default_rng(1).standard_normal((6, 4, 8, 8)).astype(np.float32)}
    # accuracy_level 9 with only BiasCalib against the same without it: the ranges are the same min/max
    # (not accuracy_level 0, whose BiasRange 64 also drops the bias clip and the guard)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = tidlx.quantize(mod, {"tensor_bits": 8, "accuracy_level": 9,
                                     "advanced_options:activation_clipping": 0,
                                     "advanced_options:weight_clipping": 0,
                                     "advanced_options:bias_calibration": 0,
                                     "advanced_options:params_16bit_names_list": NAMES,
                                     "advanced_options:calibration_frames": 6}, calib=calib)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calibrated = tidlx.quantize(mod, {"tensor_bits": 8, "accuracy_level": 9,
                                          "advanced_options:activation_clipping": 0,
                                          "advanced_options:weight_clipping": 0,
                                          "advanced_options:bias_calibration": 1,
                                          "advanced_options:params_16bit_names_list": NAMES,
                                          "advanced_options:calibration_frames": 6,
                                          "advanced_options:calibration_iterations": 50}, calib=calib)
    assert plain.bias_calibration_errors == ()
    errors = calibrated.bias_calibration_errors
    assert len(errors) == 50
    before, ref, got_plain = _channel_mean_error(mod, plain, calib["x"])
    after, _, got_cal = _channel_mean_error(mod, calibrated, calib["x"])
    sq = [10 * np.log10((ref ** 2).sum() / ((ref - g) ** 2).sum()) for g in (got_plain, got_cal)]
    print(f"bias calibration, 50 iterations: per-layer channel-mean error {errors[0]:.4f} -> {errors[-1]:.4f}; "
          f"output channel-mean error {before:.4f} -> {after:.4f}; SQNR {sq[0]:.1f} -> {sq[1]:.1f} dB")
    assert errors[-1] < 0.5 * errors[0]
    assert after < 0.5 * before
    assert sq[1] >= sq[0]
    # only the biases changed
    for a, b in zip(plain.subgraphs["tidl_0"].compute_layers(), calibrated.subgraphs["tidl_0"].compute_layers()):
        assert np.array_equal(a.weights, b.weights) and a.round_bits == b.round_bits
    assert any(not np.array_equal(a.bias_a, b.bias_a) for a, b in
               zip(plain.subgraphs["tidl_0"].compute_layers(), calibrated.subgraphs["tidl_0"].compute_layers()))


def test_bias_calibration_factor_schedule():
    assert F == 0.05                  # TI's biasCalibrationFactor default
    # float32 as TI's biasCalibrationFactor / TIDL_BIAS_CALIBRATION_WARMUP_FACTOR
    full, edge = float(np.float32(F)), float(np.float32(F) / np.float32(10.0))
    factors = [bias_calibration_factor(i, 50) for i in range(50)]
    assert factors[:5] == [edge] * 5 and factors[-5:] == [edge] * 5 and factors[5:45] == [full] * 40
    assert [bias_calibration_factor(i, 5) for i in range(5)] == [full] * 5     # 5 // 10 = 0 at each end
