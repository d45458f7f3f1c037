"""Dense/matmul, normalization, softmax, pad, flatten and pixel-shuffle kernels against
onnxruntime (the ONNX op each Relay op comes from) or numpy."""

import numpy as np
import pytest

from emu_helpers import assert_close, ort_node, rand, run_kernel


def test_dense_matches_gemm():
    rng = np.random.default_rng(0)
    x, w = rand(rng, (3, 16)), rand(rng, (5, 16))
    ref = ort_node("Gemm", {"x": x, "w": w}, dict(transB=1))[0]
    assert_close(run_kernel("nn.dense", [x, w]), ref)


def test_dense_on_int8_accumulates_exactly():
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (2, 64)).astype("int8")
    w = rng.integers(-128, 128, (3, 64)).astype("int8")
    got = run_kernel("nn.dense", [x, w], out_dtype="int32")
    np.testing.assert_array_equal(got, x.astype(np.int64) @ w.astype(np.int64).T)


def test_matmul_and_batch_matmul():
    rng = np.random.default_rng(2)
    a, b = rand(rng, (2, 3, 4)), rand(rng, (4, 5))
    ref = ort_node("MatMul", {"a": a, "b": b})[0]
    assert_close(run_kernel("nn.matmul", [a, b]), ref)
    assert_close(run_kernel("nn.matmul", [a.reshape(6, 4), b.T.copy()], transpose_b=True), ref.reshape(6, 5))
    assert_close(run_kernel("nn.matmul", [a.reshape(6, 4).T.copy(), b], transpose_a=True), ref.reshape(6, 5))
    x, y = rand(rng, (2, 3, 4)), rand(rng, (2, 5, 4))
    assert_close(run_kernel("nn.batch_matmul", [x, y]), x @ y.transpose(0, 2, 1))
    y1 = rand(rng, (1, 4, 5))
    assert_close(run_kernel("nn.batch_matmul", [x, y1], transpose_b=False), x @ y1)


def test_bias_add_on_axis():
    rng = np.random.default_rng(3)
    x, b = rand(rng, (2, 3, 4, 5)), rand(rng, (4,))
    assert_close(run_kernel("nn.bias_add", [x, b], axis=2), x + b.reshape(1, 1, 4, 1))
    assert_close(run_kernel("nn.bias_add", [x, rand(rng, (5,))], axis=-1).shape, (2, 3, 4, 5))


def test_batch_norm_matches_onnxruntime():
    rng = np.random.default_rng(4)
    x = rand(rng, (2, 6, 5, 4))
    gamma, beta, mean = rand(rng, (6,)), rand(rng, (6,)), rand(rng, (6,))
    var = rand(rng, (6,), low=0.1, high=2.0)
    ref = ort_node("BatchNormalization", {"x": x, "g": gamma, "b": beta, "m": mean, "v": var},
                   dict(epsilon=1e-3))[0]
    out, m_out, v_out = run_kernel("nn.batch_norm", [x, gamma, beta, mean, var], epsilon=1e-3)
    assert_close(out, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(m_out, mean)
    np.testing.assert_array_equal(v_out, var)
    # center/scale off ignore beta/gamma
    out2 = run_kernel("nn.batch_norm", [x, gamma, beta, mean, var], epsilon=1e-3, center=False, scale=False)[0]
    assert_close(out2, (x - mean.reshape(1, 6, 1, 1)) / np.sqrt(var.reshape(1, 6, 1, 1) + 1e-3), atol=1e-5)


def test_layer_instance_group_norm():
    rng = np.random.default_rng(5)
    x = rand(rng, (2, 6, 4, 3), low=-3, high=3)
    g, b = rand(rng, (3,)), rand(rng, (3,))
    ref = ort_node("LayerNormalization", {"x": x, "g": g, "b": b}, dict(axis=-1, epsilon=1e-5))[0]
    assert_close(run_kernel("nn.layer_norm", [x, g, b], axis=-1), ref, rtol=1e-4, atol=1e-5)
    g6, b6 = rand(rng, (6,)), rand(rng, (6,))
    ref = ort_node("InstanceNormalization", {"x": x, "g": g6, "b": b6}, dict(epsilon=1e-5))[0]
    assert_close(run_kernel("nn.instance_norm", [x, g6, b6]), ref, rtol=1e-4, atol=1e-5)
    got = run_kernel("nn.group_norm", [x, g6, b6], num_groups=3, epsilon=1e-5)
    grouped = x.reshape(2, 3, 2, 4, 3).astype(np.float64)
    norm = (grouped - grouped.mean(axis=(2, 3, 4), keepdims=True)) / np.sqrt(
        grouped.var(axis=(2, 3, 4), keepdims=True) + 1e-5)
    assert_close(got, norm.reshape(x.shape) * g6.reshape(1, 6, 1, 1) + b6.reshape(1, 6, 1, 1), atol=1e-5)


@pytest.mark.parametrize("size", [3, 5])
def test_lrn_matches_onnxruntime(size):
    rng = np.random.default_rng(6)
    x = rand(rng, (1, 7, 3, 3), low=-2, high=2)
    ref = ort_node("LRN", {"x": x}, dict(size=size, alpha=1e-2, beta=0.75, bias=1.5))[0]
    assert_close(run_kernel("nn.lrn", [x], size=size, alpha=1e-2, beta=0.75, bias=1.5), ref, rtol=1e-5, atol=1e-6)


def test_lrn_even_size_uses_the_onnx_window():
    # onnxruntime refuses even sizes; the ONNX spec sums channels c - 1 .. c + 2 for size 4.
    rng = np.random.default_rng(6)
    x = rand(rng, (1, 7, 2, 2), low=-2, high=2).astype(np.float64)
    sq = np.pad(x ** 2, ((0, 0), (1, 2), (0, 0), (0, 0)))
    window = sum(sq[:, k:k + 7] for k in range(4))
    ref = x / (1.5 + 1e-2 / 4 * window) ** 0.75
    got = run_kernel("nn.lrn", [x.astype(np.float32)], size=4, alpha=1e-2, beta=0.75, bias=1.5)
    assert_close(got, ref, rtol=1e-5, atol=1e-6)


def test_l2_normalize():
    rng = np.random.default_rng(7)
    x = rand(rng, (2, 4, 3))
    ref = ort_node("LpNormalization", {"x": x}, dict(axis=1, p=2))[0]
    assert_close(run_kernel("nn.l2_normalize", [x], axis=(1,), eps=1e-12), ref)


@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_softmax_and_log_softmax(axis):
    rng = np.random.default_rng(8)
    x = rand(rng, (3, 4, 5), low=-30, high=30)
    assert_close(run_kernel("nn.softmax", [x], axis=axis),
                 ort_node("Softmax", {"x": x}, dict(axis=axis), opset=13)[0], rtol=1e-5, atol=1e-7)
    assert_close(run_kernel("nn.log_softmax", [x], axis=axis),
                 ort_node("LogSoftmax", {"x": x}, dict(axis=axis), opset=13)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_matches_onnxruntime(mode):
    rng = np.random.default_rng(9)
    x = rand(rng, (1, 2, 4, 5))
    pads = np.array([0, 0, 1, 2, 0, 1, 3, 0], np.int64)
    inputs = {"x": x, "pads": pads}
    if mode == "constant":
        inputs["value"] = np.array(1.5, np.float32)
    ref = ort_node("Pad", inputs, dict(mode=mode))[0]
    got = run_kernel("nn.pad", [x, np.array(1.5, np.float32)], pad_width=((0, 0), (0, 1), (1, 3), (2, 0)),
                     pad_mode=mode)
    assert_close(got, ref, rtol=0, atol=0)


def test_batch_flatten_and_dropout():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(run_kernel("nn.batch_flatten", [x]), ort_node("Flatten", {"x": x})[0])
    out, mask = run_kernel("nn.dropout", [x], rate=0.3)
    np.testing.assert_array_equal(out, x)
    assert mask.shape == x.shape


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_matches_onnxruntime(mode):
    x = np.arange(2 * 8 * 2 * 3, dtype=np.float32).reshape(2, 8, 2, 3)
    ref = ort_node("DepthToSpace", {"x": x}, dict(blocksize=2, mode=mode))[0]
    np.testing.assert_array_equal(run_kernel("nn.depth_to_space", [x], block_size=2, mode=mode), ref)
    nhwc = run_kernel("nn.depth_to_space", [x.transpose(0, 2, 3, 1).copy()], block_size=2, mode=mode,
                      layout="NHWC")
    np.testing.assert_array_equal(nhwc, ref.transpose(0, 2, 3, 1))


def test_space_to_depth_matches_onnxruntime_and_inverts():
    x = np.arange(2 * 3 * 4 * 6, dtype=np.float32).reshape(2, 3, 4, 6)
    ref = ort_node("SpaceToDepth", {"x": x}, dict(blocksize=2))[0]
    got = run_kernel("nn.space_to_depth", [x], block_size=2)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(run_kernel("nn.depth_to_space", [got], block_size=2, mode="DCR"), x)
    crd = run_kernel("nn.space_to_depth", [x], block_size=2, mode="CRD")
    np.testing.assert_array_equal(run_kernel("nn.depth_to_space", [crd], block_size=2, mode="CRD"), x)
