"""Pooling kernels against onnxruntime (MaxPool, AveragePool, Global*Pool) and a numpy reference
(adaptive pools, PyTorch's window rule)."""

import numpy as np
import pytest

from emu_helpers import assert_close, ort_node, rand, run_kernel

POOL_CASES = [
    # kernel, strides, pads (t, l, b, r), ceil_mode, dilation
    ((3, 3), (2, 2), (1, 1, 1, 1), False, (1, 1)),
    ((2, 2), (2, 2), (0, 0, 0, 0), True, (1, 1)),
    ((3, 2), (2, 1), (0, 1, 1, 0), True, (1, 1)),
    ((3, 3), (1, 1), (2, 2, 2, 2), False, (2, 2)),
    ((2, 3), (3, 2), (1, 0, 0, 1), True, (1, 1)),
]


@pytest.mark.parametrize("kernel,strides,pads,ceil_mode,dilation", POOL_CASES)
def test_max_pool2d_matches_onnxruntime(kernel, strides, pads, ceil_mode, dilation):
    rng = np.random.default_rng(1)
    x = rand(rng, (2, 3, 9, 8), low=-5, high=-1)  # all negative: padding must never win
    ref = ort_node("MaxPool", {"x": x}, dict(kernel_shape=list(kernel), strides=list(strides),
                                             pads=list(pads), ceil_mode=int(ceil_mode),
                                             dilations=list(dilation)))[0]
    got = run_kernel("nn.max_pool2d", [x], pool_size=kernel, strides=strides, padding=pads,
                     ceil_mode=ceil_mode, dilation=dilation)
    assert_close(got, ref, rtol=0, atol=0)


@pytest.mark.parametrize("kernel,strides,pads,ceil_mode,dilation", [c for c in POOL_CASES if c[4] == (1, 1)])
@pytest.mark.parametrize("count_include_pad", [False, True])
def test_avg_pool2d_matches_onnxruntime(kernel, strides, pads, ceil_mode, dilation, count_include_pad):
    rng = np.random.default_rng(2)
    x = rand(rng, (1, 4, 9, 8))
    ref = ort_node("AveragePool", {"x": x}, dict(kernel_shape=list(kernel), strides=list(strides),
                                                 pads=list(pads), ceil_mode=int(ceil_mode),
                                                 count_include_pad=int(count_include_pad)))[0]
    got = run_kernel("nn.avg_pool2d", [x], pool_size=kernel, strides=strides, padding=pads,
                     ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    assert_close(got, ref, rtol=1e-6, atol=1e-6)


def test_pools_in_nhwc_layout():
    rng = np.random.default_rng(3)
    x = rand(rng, (1, 3, 7, 6))
    nhwc = x.transpose(0, 2, 3, 1).copy()
    for op in ("nn.max_pool2d", "nn.avg_pool2d"):
        ref = run_kernel(op, [x], pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
        got = run_kernel(op, [nhwc], pool_size=(3, 3), strides=(2, 2), padding=(1, 1), layout="NHWC")
        assert_close(got, ref.transpose(0, 2, 3, 1), rtol=0, atol=0)


def test_global_pools_match_onnxruntime():
    rng = np.random.default_rng(4)
    x = rand(rng, (2, 5, 7, 6))
    assert_close(run_kernel("nn.global_avg_pool2d", [x]), ort_node("GlobalAveragePool", {"x": x})[0])
    assert_close(run_kernel("nn.global_max_pool2d", [x]), ort_node("GlobalMaxPool", {"x": x})[0], rtol=0, atol=0)
    got = run_kernel("nn.global_avg_pool2d", [x.transpose(0, 2, 3, 1).copy()], layout="NHWC")
    assert got.shape == (2, 1, 1, 5)
    assert_close(got.reshape(2, 5), x.mean(axis=(2, 3)))


def adaptive_reference(x, oh, ow, reduce):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow), x.dtype)
    for i in range(oh):
        h0, h1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        for j in range(ow):
            w0, w1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            out[:, :, i, j] = reduce(x[:, :, h0:h1, w0:w1], axis=(2, 3))
    return out


@pytest.mark.parametrize("out_size", [(1, 1), (3, 2), (5, 7), (9, 8)])
def test_adaptive_pools_match_reference(out_size):
    rng = np.random.default_rng(5)
    x = rand(rng, (1, 3, 9, 8))
    assert_close(run_kernel("nn.adaptive_avg_pool2d", [x], output_size=out_size),
                 adaptive_reference(x, *out_size, np.mean), rtol=1e-6, atol=1e-6)
    assert_close(run_kernel("nn.adaptive_max_pool2d", [x], output_size=out_size),
                 adaptive_reference(x, *out_size, np.max), rtol=0, atol=0)


def test_int8_max_pool_keeps_dtype_and_pads_with_lowest():
    x = np.full((1, 1, 3, 3), -128, np.int8)
    got = run_kernel("nn.max_pool2d", [x], pool_size=(2, 2), padding=(1, 1))
    assert got.dtype == np.int8 and (got == -128).all()
