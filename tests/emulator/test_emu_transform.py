"""Shape and data-movement kernels against onnxruntime and numpy."""

import numpy as np
import pytest

from emu_helpers import ort_node, rand, run_kernel
from tidlx.ir.errors import TidlxError


def test_reshape_squeeze_expand_transpose():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(run_kernel("reshape", [x], newshape=(0, -1)), x.reshape(2, 12))
    np.testing.assert_array_equal(run_kernel("reshape", [x], newshape=(-3, -2)), x.reshape(6, 4))
    y = x.reshape(2, 1, 3, 4)
    np.testing.assert_array_equal(run_kernel("squeeze", [y], axis=(1,)), x)
    np.testing.assert_array_equal(run_kernel("expand_dims", [x], axis=1, num_newaxis=2), x.reshape(2, 1, 1, 3, 4))
    np.testing.assert_array_equal(run_kernel("transpose", [x], axes=(2, 0, 1)),
                                  ort_node("Transpose", {"x": x}, dict(perm=[2, 0, 1]))[0])
    np.testing.assert_array_equal(run_kernel("transpose", [x]), x.T)
    np.testing.assert_array_equal(run_kernel("reverse", [x], axis=1), x[:, ::-1])


def test_concatenate_stack_split():
    rng = np.random.default_rng(0)
    a, b = rand(rng, (2, 3)), rand(rng, (2, 5))
    np.testing.assert_array_equal(run_kernel("concatenate", [(a, b)], axis=1), np.concatenate([a, b], 1))
    np.testing.assert_array_equal(run_kernel("stack", [(a, a)], axis=-1), np.stack([a, a], -1))
    x = np.arange(20, dtype=np.float32).reshape(2, 10)
    parts = run_kernel("split", [x], indices_or_sections=(2, 7), axis=1)
    ref = ort_node("Split", {"x": x, "split": np.array([2, 5, 3], np.int64)}, dict(axis=1), n_outputs=3, opset=13)
    assert len(parts) == 3
    for p, r in zip(parts, ref):
        np.testing.assert_array_equal(p, r)
    halves = run_kernel("split", [x], indices_or_sections=2, axis=1)
    np.testing.assert_array_equal(halves[1], x[:, 5:])


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([1, 0], [3, 4], [0, 1], [1, 2]),
    ([-1], [-100], [1], [-1]),          # full reverse through index 0
    ([5], [1], [1], [-2]),
    ([0, -3], [2, 1000], [2, 1], [1, 1]),
    ([2], [-1], [0], [1]),
])
def test_strided_slice_matches_onnx_slice(starts, ends, axes, steps):
    x = np.arange(4 * 6 * 3, dtype=np.float32).reshape(4, 6, 3)
    ref = ort_node("Slice", {"x": x, "s": np.array(starts, np.int64), "e": np.array(ends, np.int64),
                             "a": np.array(axes, np.int64), "st": np.array(steps, np.int64)})[0]
    got = run_kernel("strided_slice", [x], begin=starts, end=ends, strides=steps, axes=axes)
    np.testing.assert_array_equal(got, ref)


def test_strided_slice_size_mode_and_implicit_axes():
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    np.testing.assert_array_equal(run_kernel("strided_slice", [x], begin=(1, 2), end=(2, -1), slice_mode="size"),
                                  x[1:3, 2:])
    np.testing.assert_array_equal(run_kernel("strided_slice", [x], begin=(1,), end=(4,)), x[1:4])


def test_take_modes():
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[0, 5], [-1, 2]], np.int32)
    np.testing.assert_array_equal(run_kernel("take", [data, idx], axis=1, mode="clip"),
                                  np.take(data, np.clip(idx, 0, 3), axis=1))
    np.testing.assert_array_equal(run_kernel("take", [data, idx], axis=1, mode="wrap"),
                                  np.take(data, idx % 4, axis=1))
    fast_idx = np.array([0, -1, 2], np.int64)
    np.testing.assert_array_equal(run_kernel("take", [data, fast_idx], axis=0, mode="fast"),
                                  ort_node("Gather", {"d": data, "i": fast_idx}, dict(axis=0))[0])
    with pytest.raises(TidlxError, match="out of range"):
        run_kernel("take", [data, np.array([4], np.int64)], axis=1, mode="fast")
    np.testing.assert_array_equal(run_kernel("take", [data, np.array([13, 2], np.int32)]), [11, 2])


def test_take_with_batch_dims():
    rng = np.random.default_rng(1)
    data = rand(rng, (2, 5, 3))
    idx = np.array([[0, 4], [3, 1]], np.int64)
    got = run_kernel("take", [data, idx], axis=1, batch_dims=1)
    ref = np.stack([data[0][[0, 4]], data[1][[3, 1]]])
    np.testing.assert_array_equal(got, ref)


def test_gather_matches_gather_elements():
    rng = np.random.default_rng(2)
    data = rand(rng, (3, 4))
    idx = np.array([[1, 0, -1], [2, 3, 0]], np.int64)
    ref = ort_node("GatherElements", {"d": data, "i": idx}, dict(axis=1))[0]
    np.testing.assert_array_equal(run_kernel("gather", [data, idx], axis=1), ref)


@pytest.mark.parametrize("mode,reduction", [("update", "none"), ("add", "add"), ("mul", "mul"),
                                            ("min", "min"), ("max", "max")])
def test_scatter_nd_matches_onnxruntime(mode, reduction):
    rng = np.random.default_rng(3)
    data = rand(rng, (4, 3, 2))
    onnx_idx = np.array([[1, 2], [3, 0], [1, 2]] if mode != "update" else [[1, 2], [3, 0], [0, 1]], np.int64)
    updates = rand(rng, (3, 2))
    ref = ort_node("ScatterND", {"d": data, "i": onnx_idx, "u": updates}, dict(reduction=reduction), opset=18)[0]
    # Relay's indices put the addressed axes first: (M, ...).
    got = run_kernel("scatter_nd", [data, onnx_idx.T.copy(), updates], mode=mode)
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_broadcast_tile_creation_shape_of():
    x = np.arange(3, dtype=np.float32).reshape(3, 1)
    np.testing.assert_array_equal(run_kernel("broadcast_to", [x], shape=(2, 3, 4)), np.broadcast_to(x, (2, 3, 4)))
    np.testing.assert_array_equal(run_kernel("tile", [x], reps=(2, 1, 3)),
                                  ort_node("Tile", {"x": x.reshape(1, 3, 1), "r": np.array([2, 1, 3], np.int64)})[0])
    assert run_kernel("zeros", [], shape=(2, 2), dtype="int8").dtype == np.int8
    np.testing.assert_array_equal(run_kernel("ones", [], shape=(2,), dtype="float32"), [1, 1])
    np.testing.assert_array_equal(run_kernel("full", [np.array(2.5, np.float32)], shape=(2,)), [2.5, 2.5])
    np.testing.assert_array_equal(run_kernel("full_like", [x, np.array(7, np.float32)]), np.full((3, 1), 7))
    got = run_kernel("shape_of", [x], dtype="int64")
    assert got.dtype == np.int64 and list(got) == [3, 1]


def test_layout_transform_blocked_and_back():
    x = np.arange(1 * 8 * 3 * 2, dtype=np.float32).reshape(1, 8, 3, 2)
    blocked = run_kernel("layout_transform", [x], src_layout="NCHW", dst_layout="NCHW4c")
    ref = x.reshape(1, 2, 4, 3, 2).transpose(0, 1, 3, 4, 2)
    np.testing.assert_array_equal(blocked, ref)
    np.testing.assert_array_equal(run_kernel("layout_transform", [blocked], src_layout="NCHW4c",
                                             dst_layout="NCHW"), x)
    nhwc = run_kernel("layout_transform", [blocked], src_layout="NCHW4c", dst_layout="NHWC")
    np.testing.assert_array_equal(nhwc, x.transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(run_kernel("layout_transform", [nhwc], src_layout="NHWC", dst_layout="NHWC2c"),
                                  x.transpose(0, 2, 3, 1).reshape(1, 3, 2, 4, 2))
