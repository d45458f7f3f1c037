"""Float vs fixed point per output and per layer (backends/tidl/compare.py, tidlx.compare): figures
checked by hand on a one-layer model, against metrics.py on a conv model, pooled over frames; the
order worst first and deterministic; a model without TIDL subgraphs refused by name."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import tidlx
from tidlx.backends.tidl import metrics
from tidlx.backends.tidl.compare import CompareError, compare, format_db

RELU = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 1, 2, 4), float32]) {
  nn.relu(%x)
}
'''

CONV = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3, 12, 12), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=6, kernel_size=[3, 3]);
  %1 = nn.bias_add(%0, meta[relay.Constant][1]);
  %2 = nn.relu(%1);
  %3 = nn.conv2d(%2, meta[relay.Constant][2], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
  %4 = nn.max_pool2d(%3, pool_size=[2, 2], strides=[2, 2]);
  %5 = reshape(%4, newshape=[1, 144]);
  (%3, %5)
}
'''

# minmax (accuracy_level 0) ranges: the input's range is [-3, 3], so (docs/numerics.md §6.1, §6.3,
# §6.4) the 8-bit data convert has accScale 2^7 = 128, m = 3 * 128 = 384, d = 384 / 2^7 = 3, p = 4,
# roundBits 2: tensorScale 32. The ReLU keeps it (unsigned). Fixed point: floor(x * 32 + 0.5) / 32.
X = np.array([-3.0, 0.1, 0.7, 1.25, 2.5, -0.5, 3.0, 0.02], np.float32).reshape(1, 1, 2, 4)
#             q: -96,   3,  22,   40,  80,  -16,  96,    1
FIXED = np.array([-3.0, 0.09375, 0.6875, 1.25, 2.5, -0.5, 3.0, 0.03125])


def hand_sqnr(reference, fixed) -> float:
    reference = np.asarray(reference, np.float64)
    return 10 * math.log10(float(np.sum(reference ** 2)) / float(np.sum((reference - fixed) ** 2)))


def conv_model():
    r = np.random.default_rng(4)
    params = [(r.standard_normal((6, 3, 3, 3)) * 0.3).astype(np.float32),
              (r.standard_normal(6) * 0.1).astype(np.float32),
              (r.standard_normal((4, 6, 3, 3)) * 0.2).astype(np.float32)]
    return tidlx.parse_relay(CONV, params=params)


def frames(n, seed, shape=(1, 3, 12, 12)):
    return {"x": np.random.default_rng(seed).standard_normal((n,) + shape[1:]).astype(np.float32)}


def quiet_compare(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # fewer frames than calibration_frames
        return tidlx.compare(*args, **kwargs)


def test_sqnr_by_hand_on_one_relu():
    mod = tidlx.parse_relay(RELU)
    result = quiet_compare(mod, {"x": X}, {"accuracy_level": 0}, {"x": X})
    q = tidlx.quantize(mod, {"accuracy_level": 0}, {"x": X})
    assert [t.scale for t in q.subgraphs["tidl_0"].tensors] == [32.0, 32.0]
    relu_ref = np.maximum(X.astype(np.float64), 0).reshape(-1)
    relu_fixed = np.maximum(FIXED, 0)
    # 10 log10(17.3129 / 3.21875e-4) = 47.31 dB: errors 0.00625, 0.0125, 0.01125 (0.1, 0.7, 0.02)
    assert hand_sqnr(relu_ref, relu_fixed) == pytest.approx(47.3068, abs=1e-3)
    (out,) = result.outputs
    assert out.sqnr_db == pytest.approx(hand_sqnr(relu_ref, relu_fixed), abs=1e-5)
    assert out.max_abs_err == pytest.approx(0.0125, abs=1e-6)
    assert out.saturated_pct == 0.0 and out.fed_by == "@tidl_0:tidl_0_layer1"
    by_type = {layer.type: layer for layer in result.layers}
    assert by_type["ReLU"].sqnr_db == pytest.approx(out.sqnr_db, abs=1e-9)
    assert by_type["ReLU"].op == "ReLU (nn.relu)"
    # the input convert: the negative values are exact too, so the same noise over more signal
    assert by_type["Data"].sqnr_db == pytest.approx(hand_sqnr(X.reshape(-1), FIXED), abs=1e-5)
    assert [layer.type for layer in result.layers] == ["ReLU", "Data"]   # worst first
    assert result.frames == 1 and result.tensor_bits == 8
    assert result.headline() == ("8-bit fixed point: output 'output_0' 47.3 dB SQNR; worst layer 'tidl_0_layer1' "
                                 "(ReLU) 47.3 dB")


def test_saturation_by_hand():
    """Calibrated on [-3, 3], compared on a frame reaching +-5: 5 * 32 = 160 saturates at 127 and -160 at -128."""
    mod = tidlx.parse_relay(RELU)
    wide = X.copy().reshape(-1)
    wide[0], wide[6] = -5.0, 5.0
    wide = wide.reshape(X.shape)
    result = quiet_compare(mod, {"x": wide}, {"accuracy_level": 0}, {"x": X})
    data = next(layer for layer in result.layers if layer.type == "Data")
    assert data.saturated_pct == pytest.approx(25.0)            # 2 of 8 at -128 / 127
    assert data.max_abs_err == pytest.approx(5.0 - 127 / 32)
    relu = next(layer for layer in result.layers if layer.type == "ReLU")
    # the ReLU's output is unsigned 8 bit: 127 is no saturation of it, and its zeros are ReLU's floor
    assert relu.saturated_pct == 0.0
    assert relu.max_abs_err == pytest.approx(5.0 - 127 / 32)


def test_one_frame_is_exactly_metrics_figures():
    mod = conv_model()
    calib = frames(6, seed=1)
    x = frames(1, seed=9)
    result = quiet_compare(mod, x, {"tensor_bits": 8}, calib)
    qmodel = quiet_quantize(mod, {"tensor_bits": 8}, calib)
    reference = tidlx.emulate(qmodel.module, x, kernels="reference")
    fixed = qmodel.run(x, host_kernels="reference")
    for out, ref, val in zip(result.outputs, reference, fixed):
        assert out.sqnr_db == pytest.approx(metrics.sqnr_db(ref, val), rel=1e-12)
        assert out.max_abs_err == metrics.max_abs_err(ref, val)
    assert [o.name for o in result.outputs] == ["output_0", "output_1"]
    assert result.outputs[1].fed_by is not None and result.outputs[1].saturated_pct is not None
    assert result.outputs[0].sqnr_db > 15.0


def quiet_quantize(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tidlx.quantize(*args, **kwargs)


def test_frames_are_pooled():
    """Two frames: SQNR of the sums of both frames' signal and noise, the larger max abs error."""
    mod = conv_model()
    calib = frames(6, seed=1)
    two = frames(2, seed=5)
    qmodel = quiet_quantize(mod, {}, calib)
    pooled = tidlx.compare(qmodel, two)
    signal = noise = err = 0.0
    for k in range(2):
        frame = {"x": two["x"][k:k + 1]}
        ref = tidlx.emulate(qmodel.module, frame, kernels="reference")[0].astype(np.float64)
        val = qmodel.run(frame, host_kernels="reference")[0].astype(np.float64)
        signal += float(np.sum(ref ** 2))
        noise += float(np.sum((ref - val) ** 2))
        err = max(err, float(np.max(np.abs(ref - val))))
    assert pooled.frames == 2 and pooled.inputs == "2 frames from the given arrays"
    assert pooled.outputs[0].sqnr_db == pytest.approx(10 * math.log10(signal / noise), rel=1e-12)
    assert pooled.outputs[0].max_abs_err == err
    first = tidlx.compare(qmodel, two, frames=1)
    assert first.frames == 1 and first.inputs == "frame 0 of 2 from the given arrays"


def test_worst_first_and_deterministic():
    mod = conv_model()
    a = quiet_compare(mod, None, {}, frames(4, seed=2), isolated=True)
    b = quiet_compare(mod, None, {}, frames(4, seed=2), isolated=True)
    assert a.to_json() == b.to_json()
    keys = [(layer.sqnr_db, layer.subgraph, layer.layer) for layer in a.layers]
    assert keys == sorted(keys)
    assert a.layers[0].sqnr_db <= a.layers[-1].sqnr_db
    # the input convert, 2 convs, the max pool and the reshape; the reshape moves the pool's values, so
    # the two tie and are ordered by name
    assert [(layer.type, layer.layer) for layer in a.layers] == [
        ("Conv", "tidl_0_layer2"), ("Pool", "tidl_0_layer3"), ("Reshape", "tidl_0_layer4"), ("Conv", "tidl_0_layer1"),
        ("Data", "tidl_0_i0")]
    assert a.layers[1].sqnr_db == a.layers[2].sqnr_db
    assert a.inputs.startswith("calibration frame 0 of 4")
    # the first layer after the input convert reads exactly the converted input: its own error is its error
    conv1 = next(layer for layer in a.layers if layer.type == "Conv" and layer.ops[-1] == "nn.relu")
    assert conv1.isolated_sqnr_db == pytest.approx(conv1.sqnr_db, abs=1e-9)
    conv2 = next(layer for layer in a.layers if layer.type == "Conv" and layer.ops[-1] != "nn.relu")
    assert conv2.isolated_sqnr_db > conv2.sqnr_db


def test_no_tidl_subgraph_is_refused_by_name():
    mod = tidlx.parse_relay(RELU)
    with pytest.raises(CompareError, match="no TIDL subgraph"):
        quiet_compare(mod, None, {"deny_list": "nn.relu"}, {"x": X})


def test_a_quantized_model_without_inputs_runs_on_a_seeded_random_frame():
    mod = tidlx.parse_relay(RELU)
    qmodel = quiet_quantize(mod, {"accuracy_level": 0}, {"x": X})
    result = tidlx.compare(qmodel)
    assert result.inputs == "one random frame (seed 0; no inputs given)"
    assert result.to_json() == tidlx.compare(qmodel).to_json()
    with pytest.raises(CompareError, match="already quantized"):
        tidlx.compare(qmodel, calib={"x": X})


def test_bad_arguments():
    mod = tidlx.parse_relay(RELU)
    with pytest.raises(CompareError, match="frames must be"):
        compare(mod, frames=0)
    with pytest.raises(TypeError, match="IRModule or a QuantizedModel"):
        compare("model.onnx")
    with pytest.raises(tidlx.TidlxError, match="no such calibration file"):
        compare(mod, None, {}, "/nonexistent/frames.npz")


def test_json_has_no_infinities():
    """An exact layer (the ReLU of values that are multiples of 1/32) has inf SQNR: null in JSON, with a note."""
    mod = tidlx.parse_relay(RELU)
    exact = (np.round(X * 32) / 32).astype(np.float32)
    result = quiet_compare(mod, {"x": exact}, {"accuracy_level": 0}, {"x": exact})
    assert result.outputs[0].sqnr_db == math.inf and format_db(result.outputs[0].sqnr_db) == "exact"
    data = result.to_dict()
    assert data["outputs"][0]["sqnr_db"] is None and data["outputs"][0]["sqnr_note"] == "exact (no error)"
    assert "Infinity" not in result.to_json()


def test_the_calibration_is_said_as_ti_runs_it():
    result = quiet_compare(conv_model(), frames(1, seed=3), {"advanced_options:calibration_iterations": 2},
                           frames(3, seed=1))
    assert result.calibration == "a float pass on 3 frame(s), then 2 fixed-point iterations (histogram ranges, biases)"
    result = quiet_compare(conv_model(), frames(1, seed=3), {"accuracy_level": 0}, frames(3, seed=1))
    assert result.calibration == "a float pass on 3 frame(s), then 1 fixed-point iteration (minmax ranges)"


def test_progress_over_calibration_quantization_and_frames():
    seen = []
    quiet_compare(conv_model(), frames(2, seed=3), {"advanced_options:calibration_iterations": 1}, frames(3, seed=1),
                  progress=lambda stage, done, total: seen.append((stage, done, total)))
    # quantize: its start, then each fixed-point frame of the one calibration iteration
    assert seen == [("calibration", 1, 3), ("calibration", 2, 3), ("calibration", 3, 3), ("quantize", 0, 1),
                    ("quantize", 1, 3), ("quantize", 2, 3), ("quantize", 3, 3),
                    ("compare", 0, 2), ("compare", 1, 2), ("compare", 2, 2)]


HOST_TAIL = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 1, 2, 4), float32]) {
  %0 = nn.relu(%x);
  %1 = clip(%x, a_min=0f, a_max=1f);
  %2 = add(%0, %0);
  (%2, add(%0, %1))
}
'''


def test_the_tensor_feeding_an_output():
    """Through a host op with one computed input (twice), the subgraph output it reads; from two, none."""
    mod = tidlx.parse_relay(HOST_TAIL)
    result = quiet_compare(mod, {"x": X}, {"accuracy_level": 0, "deny_list": "add"}, {"x": X})
    first, second = result.outputs
    assert first.fed_by is not None and first.fed_by.startswith("@tidl_0:") and first.saturated_pct == 0.0
    assert second.fed_by is None and second.saturated_pct is None
    # add(relu, relu) = 2 relu: the same relative error as the ReLU layer
    relu = next(layer for layer in result.layers if layer.type == "ReLU" and layer.ops == ("nn.relu",))
    assert first.sqnr_db == pytest.approx(relu.sqnr_db, abs=1e-9)
