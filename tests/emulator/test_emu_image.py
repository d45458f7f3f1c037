"""image.resize2d against onnxruntime's Resize (opset 13/18, sizes input), and nn.upsampling."""

import numpy as np
import pytest

from emu_helpers import assert_close, ort_node, rand, run_kernel

MODES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"]
SIZES = [((5, 7), (10, 14)), ((6, 4), (4, 9)), ((5, 5), (1, 3)), ((7, 6), (12, 5))]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def ort_resize(x, out_hw, mode, onnx_mode, nearest="round_prefer_floor", cubic_a=-0.75, exclude=0, roi=None,
               extrapolation=0.0):
    sizes = np.array(x.shape[:2] + tuple(out_hw), np.int64)
    inputs = {"x": x, "roi": None, "scales": None, "sizes": sizes}
    if roi is not None:
        inputs["roi"] = np.array([0, 0, roi[0], roi[1], 1, 1, roi[2], roi[3]], np.float32)
    attrs = dict(mode=onnx_mode, coordinate_transformation_mode=mode, nearest_mode=nearest,
                 cubic_coeff_a=cubic_a, exclude_outside=exclude, extrapolation_value=extrapolation)
    return ort_node("Resize", inputs, attrs, opset=13)[0]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("in_hw,out_hw", SIZES)
@pytest.mark.parametrize("rounding", NEAREST)
def test_nearest_matches_onnxruntime(mode, in_hw, out_hw, rounding):
    rng = np.random.default_rng(0)
    x = rand(rng, (1, 2) + in_hw)
    ref = ort_resize(x, out_hw, mode, "nearest", nearest=rounding)
    got = run_kernel("image.resize2d", [x], size=out_hw, method="nearest_neighbor",
                     coordinate_transformation_mode=mode, rounding_method=rounding)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("mode", MODES[:4])
@pytest.mark.parametrize("in_hw,out_hw", SIZES)
def test_linear_matches_onnxruntime(mode, in_hw, out_hw):
    rng = np.random.default_rng(1)
    x = rand(rng, (2, 3) + in_hw)
    ref = ort_resize(x, out_hw, mode, "linear")
    got = run_kernel("image.resize2d", [x], size=out_hw, method="linear", coordinate_transformation_mode=mode)
    assert_close(got, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"])
@pytest.mark.parametrize("in_hw,out_hw", SIZES[:3])
@pytest.mark.parametrize("exclude", [0, 1])
def test_cubic_matches_onnxruntime(mode, in_hw, out_hw, exclude):
    rng = np.random.default_rng(2)
    x = rand(rng, (1, 2) + in_hw)
    ref = ort_resize(x, out_hw, mode, "cubic", cubic_a=-0.75, exclude=exclude)
    got = run_kernel("image.resize2d", [x], size=out_hw, method="cubic", coordinate_transformation_mode=mode,
                     cubic_alpha=-0.75, cubic_exclude=exclude)
    assert_close(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method,onnx_mode", [("linear", "linear"), ("nearest_neighbor", "nearest"),
                                               ("cubic", "cubic")])
def test_tf_crop_and_resize_with_extrapolation(method, onnx_mode):
    rng = np.random.default_rng(3)
    x = rand(rng, (1, 2, 6, 5))
    roi = (0.2, -0.3, 1.1, 0.8)  # (h0, w0, h1, w1), reaching outside the image
    ref = ort_resize(x, (7, 6), "tf_crop_and_resize", onnx_mode, nearest="round_prefer_ceil", roi=roi,
                     extrapolation=-9.0)
    got = run_kernel("image.resize2d", [x], size=(7, 6), method=method, roi=roi,
                     coordinate_transformation_mode="tf_crop_and_resize", rounding_method="round_prefer_ceil",
                     cubic_alpha=-0.75, extrapolation_value=-9.0)
    assert_close(got, ref, rtol=1e-5, atol=1e-5)
    assert (got == -9.0).any()


def test_nhwc_layout_and_uint8():
    rng = np.random.default_rng(4)
    x = rand(rng, (1, 3, 5, 4))
    ref = run_kernel("image.resize2d", [x], size=(8, 7), method="linear")
    got = run_kernel("image.resize2d", [x.transpose(0, 2, 3, 1).copy()], size=(8, 7), method="linear",
                     layout="NHWC")
    assert_close(got, ref.transpose(0, 2, 3, 1), rtol=1e-6, atol=1e-6)
    q = rng.integers(0, 256, (1, 1, 4, 4)).astype(np.uint8)
    ref_q = ort_resize(q, (8, 8), "asymmetric", "nearest", nearest="floor")
    got_q = run_kernel("image.resize2d", [q], size=(8, 8), method="nearest_neighbor",
                       coordinate_transformation_mode="asymmetric", rounding_method="floor")
    assert got_q.dtype == np.uint8
    np.testing.assert_array_equal(got_q, ref_q)


def test_upsampling_is_asymmetric_resize():
    rng = np.random.default_rng(5)
    x = rand(rng, (1, 2, 3, 4))
    got = run_kernel("nn.upsampling", [x], scale_h=2.0, scale_w=2.0)
    np.testing.assert_array_equal(got, x.repeat(2, axis=2).repeat(2, axis=3))
    bil = run_kernel("nn.upsampling", [x], scale_h=2.0, scale_w=2.0, method="bilinear", align_corners=True)
    ref = ort_resize(x, (6, 8), "align_corners", "linear")
    assert_close(bil, ref, rtol=1e-5, atol=1e-6)
