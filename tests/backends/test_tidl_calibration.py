"""Calibration (backends/tidl/calibration.py) and its frames (backends/tidl/frames.py): the ranges TIDL's
import collects per tensor of each subgraph, checked against values computed here by hand in numpy."""

import math
import time
import warnings

import numpy as np
import pytest

import tidlx
import tidlx.ir as ir
from tidlx.backends.tidl import build_networks
from tidlx.backends.tidl.calibration import (CalibrationError, TensorRange, calibrate, frame_channel_means,
                                             running_channel_mean)
from tidlx.backends.tidl.frames import CalibrationDataError, load_frames, resize_bilinear
from tidlx.ir import TensorType, Var, const
from tidlx.ir.errors import TidlxError, TidlxWarning
from tidlx.ir.expr import Function
from tidlx.ir.module import IRModule

pytestmark = pytest.mark.filterwarnings("ignore:.*fewer than calibration_frames")

H, W = 64, 80


def eye_conv(x, channels, gain, layer):
    weight = np.zeros((channels, channels, 1, 1), np.float32)
    weight[np.arange(channels), np.arange(channels)] = gain
    return ir.call("nn.conv2d", x, const(weight), channels=channels, kernel_size=(1, 1), layer=layer)


def two_subgraph_model(batch=1):
    """tidl_0: conv (identity weights) + relu -> max pool 2x2; host: softmax over channels (TIDL takes width
    and height only); tidl_1: conv (weights x 3) -> max pool."""
    x = Var("x", TensorType((batch, 2, H, W), "float32"))
    c1 = ir.call("nn.relu", eye_conv(x, 2, 1.0, "conv1"), layer="relu1")
    p1 = ir.call("nn.max_pool2d", c1, pool_size=(2, 2), strides=(2, 2), layer="pool1")
    s = ir.call("nn.softmax", p1, axis=1, layer="softmax")
    c2 = eye_conv(s, 2, 3.0, "conv2")
    p2 = ir.call("nn.max_pool2d", c2, pool_size=(2, 2), strides=(2, 2), layer="pool2")
    mod = IRModule({"main": Function([x], p2)})
    mod.infer_types()
    return mod


def partition(mod, **options):
    partitioned, report = tidlx.partition(mod, options or None)
    return partitioned


def by_layer(result):
    """Ranges by the first ONNX-style layer name of the producing layer (inputs by tensor name)."""
    out = {}
    for tensor_id, rng in result.tensors.items():
        tensor = result.network.tensors[tensor_id]
        layer = result.network.layers[tensor.producer]
        out[layer.source_layers[-1] if layer.source_layers else tensor.name] = rng
    return out


def maxpool2(a):
    n, c, h, w = a.shape
    return a.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def softmax1(a):
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def host_reference(x):
    """The model in numpy (float64), each tensor the calibration should see."""
    conv1 = np.maximum(x.astype(np.float64), 0.0)
    pool1 = maxpool2(conv1)
    soft = softmax1(pool1)
    conv2 = 3.0 * soft
    return {"x": x, "relu1": conv1, "pool1": pool1, "softmax": soft, "conv2": conv2, "pool2": maxpool2(conv2)}


def frames_of(*arrays):
    return {"x": np.concatenate(arrays).astype(np.float32)}


RNG = np.random.default_rng(11)
FRAMES = [RNG.uniform(-2.0, 3.0, (1, 2, H, W)).astype(np.float32) for _ in range(3)]


def test_two_subgraphs_and_the_layers_they_hold():
    partitioned = partition(two_subgraph_model())
    nets = build_networks(partitioned)
    assert [n.name for n in nets] == ["tidl_0", "tidl_1"]
    assert [layer.describe() for layer in nets[0].compute_layers()] == ["Conv+ReLU", "Pool"]
    assert [layer.describe() for layer in nets[1].compute_layers()] == ["Conv", "Pool"]


def mean_of_frames(values):
    """TI's running mean over frames (quantRangeUpdateFactor -1), written out: frame 0 sets m, frame k gives
    m * (1 - 1/(k+1)) + v * 1/(k+1), every operation in float32."""
    m = np.float32(values[0])
    for k, v in enumerate(values[1:], start=1):
        b = np.float32(1.0) / np.float32(k + 1)
        m = m * (np.float32(1.0) - b) + np.float32(v) * b
    return float(m)


def test_float_pass_ranges_are_the_mean_of_per_frame_min_max_with_boundaries_from_the_host_part():
    partitioned = partition(two_subgraph_model())
    results = calibrate(partitioned, {"accuracy_level": 0}, frames_of(*FRAMES))
    assert list(results) == ["tidl_0", "tidl_1"]
    refs = [host_reference(f) for f in FRAMES]

    def expected(key):
        if key in ("x", "softmax"):   # a subgraph's input (TI's input data convert): min/max over the frames
            return (min(float(r[key].min()) for r in refs), max(float(r[key].max()) for r in refs))
        return (mean_of_frames([np.float32(r[key].min()) for r in refs]),
                mean_of_frames([np.float32(r[key].max()) for r in refs]))

    r0, r1 = by_layer(results["tidl_0"]), by_layer(results["tidl_1"])
    assert set(r0) == {"tidl_0_i0", "relu1", "pool1"} and set(r1) == {"tidl_1_i0", "conv2", "pool2"}
    for name, key in (("tidl_0_i0", "x"), ("relu1", "relu1"), ("pool1", "pool1")):
        assert (r0[name].min, r0[name].max) == expected(key), name
        assert r0[name].method == "minmax" and r0[name].frames == 3
    # tidl_1's input is the host softmax of tidl_0's output: the run went through the host part
    assert r1["tidl_1_i0"].min == pytest.approx(expected("softmax")[0], rel=1e-6)
    assert r1["tidl_1_i0"].max == pytest.approx(expected("softmax")[1], rel=1e-6)
    assert (r1["conv2"].min, r1["conv2"].max) == pytest.approx(expected("conv2"), rel=1e-6)
    assert (r1["pool2"].min, r1["pool2"].max) == pytest.approx(expected("pool2"), rel=1e-6)
    assert r0["relu1"].max < r0["relu1"].observed_max == max(float(r["relu1"].max()) for r in refs)
    # level 1 has the same float pass: its histogram belongs to the fixed-point iterations
    level1 = calibrate(partitioned, {"accuracy_level": 1}, frames_of(*FRAMES))
    assert all(level1[n].tensors == results[n].tensors for n in results)


def test_statistics_read_every_batch_item_of_each_frame():
    """TI's statistics loop over the batch (TIDL_TensorMinMaxStats): the input convert's running min/max
    sees both items of each frame."""
    partitioned = partition(two_subgraph_model(batch=2), max_batch_size=2)
    assert [n.name for n in build_networks(partitioned)] == ["tidl_0", "tidl_1"]
    huge = np.full((1, 2, H, W), 1000.0, np.float32)
    # frames on the batch axis: frame k is rows 2k, 2k+1; each frame's index 1 holds 1000 or -1000
    stacked = np.concatenate([FRAMES[0], huge, FRAMES[1], -huge])
    results = calibrate(partitioned, {"accuracy_level": 0}, {"x": stacked})
    r0 = by_layer(results["tidl_0"])
    assert (r0["tidl_0_i0"].min, r0["tidl_0_i0"].max) == (-1000.0, 1000.0) and r0["tidl_0_i0"].frames == 2


def test_channel_means_move_once_per_batch_item():
    """TI's TIDL_TensorPerChannelMeanStats updates the running means once per batch item with the frame's
    factor: frame 0 ends at its last item's means."""
    first = running_channel_mean(None, np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), 0)
    assert first.tolist() == [3.0, 4.0]
    # frame 1, u = 1/2: [3, 4] -> [4, 5] -> [5.5, 6.5]
    assert running_channel_mean(first, np.array([[5.0, 6.0], [7.0, 8.0]], np.float32), 1).tolist() == [5.5, 6.5]
    means = frame_channel_means(np.arange(8, dtype=np.float32).reshape(2, 2, 2))
    assert means.tolist() == [[0.5, 2.5], [4.5, 6.5]]


def test_fast_kernels_give_the_reference_ranges_within_their_tolerance():
    partitioned = partition(two_subgraph_model())
    ref = calibrate(partitioned, {"accuracy_level": 1}, frames_of(*FRAMES))
    fast = calibrate(partitioned, {"accuracy_level": 1}, frames_of(*FRAMES), kernels="fast")
    for name in ref:
        for tid, r in ref[name].tensors.items():
            f = fast[name].tensors[tid]
            assert (f.min, f.max) == pytest.approx((r.min, r.max), abs=3e-5 * max(abs(r.min), abs(r.max))), tid
    with pytest.raises(CalibrationError, match="kernels must be 'reference' or 'fast'"):
        calibrate(partitioned, None, frames_of(*FRAMES), kernels="fixed")


def rules_model():
    """conv + clip(-1, 2) -> conv + relu6 -> global average pool -> flatten -> dense + bias: one subgraph."""
    x = Var("x", TensorType((1, 2, 8, 8), "float32"))
    a = ir.call("clip", eye_conv(x, 2, 4.0, "conv_clip"), a_min=-1.0, a_max=2.0, layer="clip")
    b = ir.call("clip", eye_conv(a, 2, 1.0, "conv_relu6"), a_min=0.0, a_max=6.0, layer="relu6")
    g = ir.call("nn.global_avg_pool2d", b, layer="gap")
    f = ir.call("nn.batch_flatten", g, layer="flatten")
    d = ir.call("nn.dense", f, const(np.array([[1.0, 2.0], [-1.0, 0.5]], np.float32)), units=2, layer="fc")
    d = ir.call("nn.bias_add", d, const(np.array([0.5, -0.25], np.float32)), layer="fc")
    mod = IRModule({"main": Function([x], d)})
    mod.infer_types()
    return mod


@pytest.mark.parametrize("level", [0, 1])
def test_range_rules_clip_relu6_global_pool_and_inner_product(level):
    x = np.random.default_rng(3).uniform(-1.0, 1.0, (2, 2, 8, 8)).astype(np.float32)
    results = calibrate(partition(rules_model()), {"accuracy_level": level}, {"x": x})
    (name, result), = results.items()
    assert [layer.describe() for layer in result.network.compute_layers()] == \
        ["Conv+Clip", "Conv+ReLU6", "Pool", "Flatten", "InnerProduct"]
    r = by_layer(result)
    assert (r["clip"].min, r["clip"].max, r["clip"].method) == (-1.0, 2.0, "clip")
    assert (r["relu6"].min, r["relu6"].max, r["relu6"].method) == (0.0, 6.0, "relu6")
    # by hand: clip(4x, -1, 2) then relu6, the mean over the plane, then the dense
    a = np.clip(4.0 * x.astype(np.float64), -1.0, 2.0)
    gap = np.clip(a, 0.0, 6.0).mean(axis=(2, 3))
    fc = gap @ np.array([[1.0, 2.0], [-1.0, 0.5]]).T + np.array([0.5, -0.25])
    # the two frames (batch rows) give the mean of their min and max at both levels (the float pass)
    gap_lo, gap_hi = mean_of_frames(gap.min(axis=1)), mean_of_frames(gap.max(axis=1))
    fc_lo, fc_hi = mean_of_frames(fc.min(axis=1)), mean_of_frames(fc.max(axis=1))
    assert r["gap"].method == "minmax, x 1.25" and r["fc"].method == "minmax, x 1.25"
    # the max x 1.25, the min kept (docs/numerics.md 6.2, as TI); raw_* keep the range before the rule
    assert (r["gap"].min, r["gap"].max) == pytest.approx((gap_lo, 1.25 * gap_hi), rel=1e-6)
    assert (r["fc"].min, r["fc"].max) == pytest.approx((fc_lo, 1.25 * fc_hi), rel=1e-6)
    assert (r["fc"].raw_min, r["fc"].raw_max) == pytest.approx((fc_lo, fc_hi), rel=1e-6)
    assert r["flatten"].max == pytest.approx(gap_hi, rel=1e-6) and r["flatten"].method == "minmax"


def test_a_clip_with_one_bound_calibrates_the_other_side():
    # preparation makes maximum(x, 0.5) a clip(0.5, FLT_MAX): the max side is calibrated, not FLT_MAX
    x = Var("x", TensorType((1, 2, 8, 8), "float32"))
    m = ir.call("maximum", eye_conv(x, 2, 1.0, "conv"), const(np.float32(0.5)), layer="max")
    mod = IRModule({"main": Function([x], m)})
    mod.infer_types()
    values = np.linspace(-3.0, 3.0, 128, dtype=np.float32).reshape(1, 2, 8, 8)
    (result,) = calibrate(partition(mod), {"accuracy_level": 0}, {"x": values}).values()
    layer, = result.network.compute_layers()
    assert layer.describe() == "Conv+Clip"
    rng = result.tensors[layer.outputs[0]]
    assert (rng.min, rng.max, rng.method) == (0.5, 3.0, "minmax, clip")


def test_results_are_deterministic_and_plain_data():
    partitioned = partition(two_subgraph_model())
    with pytest.warns(TidlxWarning):
        first = calibrate(partitioned, {"advanced_options:calibration_frames": 2})
    with pytest.warns(TidlxWarning):
        second = calibrate(partition(two_subgraph_model()), {"advanced_options:calibration_frames": 2})
    assert first == second
    rng = first["tidl_0"].tensors[0]
    assert isinstance(rng, TensorRange) and all(isinstance(v, float) for v in (rng.min, rng.max))
    assert first["tidl_0"].frames == 2 and first["tidl_0"].accuracy_level == 1


# -- frames -------------------------------------------------------------------------------------------

def test_random_frames_are_seeded_and_said_so():
    mod = two_subgraph_model()
    with pytest.warns(TidlxWarning, match=r"no calibration data given: calibrating on 3 deterministic random"):
        a = load_frames(None, mod, 3)
    with pytest.warns(TidlxWarning, match="random"):
        b = load_frames(None, mod, 3)
    with pytest.warns(TidlxWarning):
        c = load_frames(None, mod, 3, seed=1)
    assert len(a) == 3 and a.random and all(f["x"].dtype == np.float32 and f["x"].shape == (1, 2, H, W) for f in a)
    assert all(np.array_equal(p["x"], q["x"]) for p, q in zip(a, b))
    assert not np.array_equal(a[0]["x"], c[0]["x"]) and not np.array_equal(a[0]["x"], a[1]["x"])


def test_frames_from_npz_on_the_batch_axis(tmp_path):
    mod = two_subgraph_model(batch=2)
    data = np.random.default_rng(0).standard_normal((6, 2, H, W)).astype(np.float64)  # 3 frames of batch 2
    np.savez(tmp_path / "frames.npz", x=data)
    frames = load_frames(str(tmp_path / "frames.npz"), mod)
    assert len(frames) == 3 and frames.source == str(tmp_path / "frames.npz")
    assert frames[1]["x"].dtype == np.float32 and np.array_equal(frames[1]["x"], data[2:4].astype(np.float32))
    np.savez(tmp_path / "stacked.npz", x=data.reshape(3, 2, 2, H, W))                # (F, N, ...) as well
    assert np.array_equal(load_frames(tmp_path / "stacked.npz", mod)[2]["x"], frames[2]["x"])
    assert len(load_frames(str(tmp_path / "frames.npz"), mod, 2)) == 2


def test_calibrate_reads_an_npz_path_and_uses_calibration_frames(tmp_path):
    np.savez(tmp_path / "f.npz", x=np.concatenate(FRAMES))
    partitioned = partition(two_subgraph_model())
    results = calibrate(partitioned, {"accuracy_level": 0, "advanced_options:calibration_frames": 2},
                        str(tmp_path / "f.npz"))
    r0 = by_layer(results["tidl_0"])
    assert r0["tidl_0_i0"].frames == 2
    assert r0["tidl_0_i0"].max == max(float(FRAMES[0].max()), float(FRAMES[1].max()))
    with pytest.warns(TidlxWarning, match=r"3 calibration frame\(s\) available, fewer than calibration_frames=5"):
        results = calibrate(partitioned, {"accuracy_level": 0, "advanced_options:calibration_frames": 5},
                            str(tmp_path / "f.npz"))
    assert results["tidl_1"].frames == 3


def test_frames_from_a_folder_of_npy_images_with_mean_and_scale(tmp_path):
    x = Var("img", TensorType((2, 3, 4, 6), "float32"))
    mod = IRModule({"main": Function([x], ir.call("nn.relu", x))})
    mod.infer_types()
    for k in range(5):   # 5 images: two frames of batch 2, one image left over
        image = np.empty((2, 3, 3), np.uint8)
        image[...] = np.array([10, 20, 30], np.uint8) * (k + 1)
        np.save(tmp_path / f"cam{k}.npy", image)
    (tmp_path / "notes.txt").write_text("not an image")
    with pytest.warns(TidlxWarning, match=r"5 images make 2 frame\(s\) of batch 2; the last 1"):
        frames = load_frames(str(tmp_path), mod, mean=[10.0, 20.0, 30.0], scale=[0.5, 0.25, 2.0])
    assert len(frames) == 2 and frames[0]["img"].shape == (2, 3, 4, 6) and frames[0]["img"].dtype == np.float32
    # cam2.npy is frame 1, batch 0: channel c holds (v*(3) - mean) * scale everywhere
    assert np.array_equal(frames[1]["img"][0, :, 0, 0], np.array([(30 - 10) * 0.5, (60 - 20) * 0.25, (90 - 30) * 2.0],
                                                                 np.float32))
    assert np.all(frames[1]["img"][0] == frames[1]["img"][0, :, :1, :1])


def test_resize_is_bilinear_with_half_pixel_centres():
    image = np.array([[0.0, 1.0]])[:, :, None]          # 1 x 2 x 1
    out = resize_bilinear(image, 1, 4)
    assert np.allclose(out[0, :, 0], [0.0, 0.25, 0.75, 1.0])
    assert resize_bilinear(np.arange(12.0).reshape(3, 4, 1), 3, 4).shape == (3, 4, 1)


# -- bad input -----------------------------------------------------------------------------------------

def test_npz_errors_name_the_file_and_the_input(tmp_path):
    mod = two_subgraph_model()
    path = tmp_path / "frames.npz"
    np.savez(path, image=np.zeros((1, 2, H, W), np.float32))
    with pytest.raises(CalibrationDataError, match=rf"{path}: no array for input 'x' \(it has 'image'"):
        load_frames(str(path), mod)
    np.savez(path, x=np.zeros((3, 2, H, W + 1), np.float32))
    with pytest.raises(CalibrationDataError, match=rf"{path}: input 'x' has shape \(3, 2, 64, 81\), which is no "
                                                   rf"stack of frames of the input's shape \(1, 2, 64, 80\)"):
        load_frames(str(path), mod)
    np.savez(path, x=np.zeros((1, 2, H, W), np.complex64))
    with pytest.raises(CalibrationDataError, match=r"input 'x' has dtype complex64, which does not convert"):
        load_frames(str(path), mod)
    np.savez(path, x=np.zeros((1, 2, H, W), np.float32), y=np.zeros(3))
    with pytest.raises(CalibrationDataError, match=r"'y' is no input of the model \(its inputs are 'x'\)"):
        load_frames(str(path), mod)
    with pytest.raises(CalibrationDataError, match=r"missing\.npz: no such calibration file"):
        load_frames(str(tmp_path / "missing.npz"), mod)
    (tmp_path / "junk.npz").write_bytes(b"not a zip archive at all")
    with pytest.raises(CalibrationDataError, match=r"junk\.npz: not a readable \.npz"):
        load_frames(str(tmp_path / "junk.npz"), mod)
    np.save(tmp_path / "one.npy", np.zeros((1, 2, H, W), np.float32))
    with pytest.raises(CalibrationDataError, match=r"one\.npy: one array, not an \.npz archive"):
        load_frames(str(tmp_path / "one.npy"), mod)
    assert issubclass(CalibrationDataError, TidlxError)


def test_folder_errors_name_the_folder_or_the_file(tmp_path):
    x = Var("img", TensorType((1, 3, 4, 6), "float32"))
    mod = IRModule({"main": Function([x], ir.call("nn.relu", x))})
    mod.infer_types()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CalibrationDataError, match=rf"{empty}: no calibration images in the folder"):
        load_frames(str(empty), mod)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(CalibrationDataError, match=r"a\.npy: not a readable \.npy image"):
        load_frames(str(bad), mod)
    gray = tmp_path / "gray"
    gray.mkdir()
    np.save(gray / "g.npy", np.zeros((5, 5), np.uint8))
    with pytest.raises(CalibrationDataError, match=r"g\.npy: image of shape \(5, 5, 1\) for input 'img' of 3"):
        load_frames(str(gray), mod)
    with pytest.raises(CalibrationDataError, match=r"mean must be one finite number or 3"):
        load_frames(str(gray), mod, mean=[1.0, 2.0])
    pngs = tmp_path / "png"
    pngs.mkdir()
    (pngs / "p.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    try:
        import PIL  # noqa: F401
        expected = r"p\.png: not a readable image"
    except ImportError:
        expected = r"p\.png: reading \.png images needs Pillow, which is not installed"
    with pytest.raises(CalibrationDataError, match=expected):
        load_frames(str(pngs), mod)
    two = IRModule({"main": Function([x, Var("y", TensorType((1, 3), "float32"))], x)})
    two.infer_types()
    with pytest.raises(CalibrationDataError, match=r"a folder of images feeds a model with one NCHW image input"):
        load_frames(str(gray), two)


def test_calibration_errors():
    partitioned = partition(two_subgraph_model())
    nan = FRAMES[0].copy()
    nan[0, 1, 3, 4] = np.nan
    with pytest.raises(CalibrationError, match=r"frame 1, @tidl_0: tensor 'tidl_0_i0' has non-finite values"):
        calibrate(partitioned, {"accuracy_level": 0}, frames_of(FRAMES[0], nan))
    with pytest.raises(CalibrationDataError, match=r"no array for input 'x'"):
        calibrate(partitioned, None, {"img": FRAMES[0]})
    with pytest.raises(CalibrationError, match="calibrate takes the IRModule"):
        calibrate("model.onnx")
    with pytest.warns(TidlxWarning, match="no Compiler=\"tidl\" subgraph"):
        assert calibrate(two_subgraph_model(), None, frames_of(FRAMES[0])) == {}
    with pytest.raises(TidlxError, match="calibration_frames"):
        calibrate(partitioned, {"advanced_options:calibration_frames": 0}, frames_of(FRAMES[0]))


# -- the built-in model ---------------------------------------------------------------------------------

def test_tiny_bevdet_image_stage_calibrates_every_tensor():
    from tidlx.frontends.onnx.importer import from_onnx

    mod = from_onnx(tidlx.models.bevdet_img_stage(backbone="resnet18", batch=1, tiny=True))
    partitioned = partition(mod)
    (name, img_type), = [(p.name_hint, p.checked_type) for p in partitioned["main"].params]
    data = {name: np.random.default_rng(5).uniform(-2, 2, (4,) + tuple(img_type.shape[1:])).astype(np.float32)}
    start = time.perf_counter()
    results = calibrate(partitioned, {"advanced_options:calibration_frames": 4}, data)
    elapsed = time.perf_counter() - start
    nets = build_networks(partitioned)
    assert list(results) == [n.name for n in nets] == ["tidl_0", "tidl_1"]
    for net in nets:
        r = results[net.name]
        assert set(r.tensors) == {t.id for t in net.tensors}
        assert all(rng.frames == 4 and rng.min <= rng.max and math.isfinite(rng.max) for rng in r.tensors.values())
        # no clip, global pool or dense in this model: every range lies within what was observed
        assert all(rng.observed_min <= rng.min and rng.max <= rng.observed_max for rng in r.tensors.values())
    # tidl_1's first input is the host's softmax over depth: in (0, 1)
    depth = results["tidl_1"].by_name()["tidl_1_i0"]
    assert 0.0 < depth.observed_min and depth.observed_max < 1.0
    # the image input (TI's input data convert): the min and max over the frames
    image = results["tidl_0"].by_name()["tidl_0_i0"]
    assert image.method == "minmax" and (image.min, image.max) == (image.observed_min, image.observed_max)
    again = calibrate(partitioned, {"advanced_options:calibration_frames": 4}, data)
    assert again == results
    print(f"tiny BEVDet-R18 calibration over 4 frames: {elapsed:.2f} s")


def test_progress_is_called_after_every_frame():
    import tidlx
    from tidlx.backends.tidl.calibration import calibrate

    mod = tidlx.parse_relay('''
def @main(%x: Tensor[(1, 2, 4, 4), float32]) {
  nn.relu(%x)
}''')
    partitioned, _ = tidlx.partition(mod)
    seen = []
    frames = {"x": np.random.default_rng(0).standard_normal((3, 2, 4, 4)).astype(np.float32)}
    calibrate(partitioned, {"accuracy_level": 0}, frames, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
