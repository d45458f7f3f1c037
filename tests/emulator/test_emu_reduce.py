"""Reduction kernels against onnxruntime and numpy (exclude, keepdims, select_last_index)."""

import numpy as np
import pytest

from emu_helpers import assert_close, ort_node, rand, run_kernel

REDUCE = [("sum", "ReduceSum"), ("mean", "ReduceMean"), ("max", "ReduceMax"), ("min", "ReduceMin"),
          ("prod", "ReduceProd")]


@pytest.mark.parametrize("relay,onnx_op", REDUCE)
@pytest.mark.parametrize("axes,keepdims", [((1,), True), ((0, 2), False), ((-1,), False), (None, True)])
def test_reductions_match_onnxruntime(relay, onnx_op, axes, keepdims):
    rng = np.random.default_rng(0)
    x = rand(rng, (3, 4, 5), low=0.5, high=1.5)
    inputs = {"x": x}
    attrs = dict(keepdims=int(keepdims))
    if axes is not None:
        if onnx_op == "ReduceSum":
            inputs["axes"] = np.array(axes, np.int64)
        else:
            attrs["axes"] = list(axes)
    ref = ort_node(onnx_op, inputs, attrs, opset=13)[0]
    got = run_kernel(relay, [x], axis=axes, keepdims=keepdims)
    assert_close(got, ref, rtol=1e-5, atol=1e-6)


def test_exclude_reduces_the_other_axes():
    rng = np.random.default_rng(1)
    x = rand(rng, (2, 3, 4, 5))
    got = run_kernel("sum", [x], axis=(1,), exclude=True, keepdims=True)
    assert_close(got, x.sum(axis=(0, 2, 3), keepdims=True), rtol=1e-5)
    got = run_kernel("max", [x], axis=(0, 3), exclude=True)
    assert_close(got, x.max(axis=(1, 2)), rtol=0, atol=0)


def test_logical_reductions():
    x = np.array([[True, False, True], [True, True, True]])
    np.testing.assert_array_equal(run_kernel("all", [x], axis=(1,)), [False, True])
    np.testing.assert_array_equal(run_kernel("any", [x], axis=(0,), keepdims=True), [[True, True, True]])


@pytest.mark.parametrize("relay,onnx_op", [("argmax", "ArgMax"), ("argmin", "ArgMin")])
@pytest.mark.parametrize("last", [False, True])
def test_arg_reductions_match_onnxruntime(relay, onnx_op, last):
    x = np.array([[[1, 5, 5, 0], [2, 2, 1, 1], [3, 0, 0, 3]]], np.float32)  # ties on purpose
    for axis in (1, 2):
        for keep in (False, True):
            ref = ort_node(onnx_op, {"x": x}, dict(axis=axis, keepdims=int(keep), select_last_index=int(last)))[0]
            got = run_kernel(relay, [x], axis=(axis,), keepdims=keep, select_last_index=last)
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, ref)


def test_argmax_over_several_axes_indexes_the_flattened_block():
    x = np.zeros((2, 3, 4), np.float32)
    x[0, 2, 1] = 5
    x[1, 0, 3] = 7
    got = run_kernel("argmax", [x], axis=(1, 2))
    np.testing.assert_array_equal(got, [2 * 4 + 1, 0 * 4 + 3])


def test_variance():
    rng = np.random.default_rng(2)
    x = rand(rng, (3, 4, 5))
    mean = x.mean(axis=(1, 2), keepdims=True)
    assert_close(run_kernel("variance", [x, mean], axis=(1, 2)), x.var(axis=(1, 2)), rtol=1e-5)
    assert_close(run_kernel("variance", [x, mean], axis=(1, 2), unbiased=True, keepdims=True),
                 x.var(axis=(1, 2), ddof=1, keepdims=True), rtol=1e-5)
