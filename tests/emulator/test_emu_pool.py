"""Pooling kernels against onnxruntime (MaxPool, AveragePool, Global*Pool) and a numpy reference
(adaptive pools, PyTorch's window rule)."""

import warnings

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


# --- the fast global average pool (emulator/fast/_sums.py): numpy's bits ---------------------------

def _nan(bits):
    return np.array([bits], np.uint32).view(np.float32)[0]


def _global_mean_reference(x):
    from tidlx.emulator.reference.op_pool import global_avg_pool2d
    from tidlx.ir import get_op

    op = get_op("nn.global_avg_pool2d")
    attrs = op.make_attrs({})
    with np.errstate(invalid="ignore"):
        return global_avg_pool2d([x], attrs, None)


def _with_specials(x, rng):
    """Plane 0 all -0.0, plane 1 mixes -0.0 into the values, plane 2 holds +inf, plane 3 +inf and
    -inf (a NaN mean), plane 4 one NaN, plane 5 several NaNs of both signs and payloads (which NaN
    the sum keeps is the question), the rest plain values."""
    flat = x.reshape(-1, x.shape[2] * x.shape[3])
    n = flat.shape[1]
    flat[0] = -0.0
    flat[1, ::2] = -0.0
    flat[2, rng.integers(n)] = np.inf
    flat[3, ::3], flat[3, n // 2] = np.inf, -np.inf
    flat[4, rng.integers(n)] = np.nan
    nans = [np.nan, -np.nan, _nan(0x7FC01234), _nan(0xFFC00007), _nan(0x7F800001)]
    with np.errstate(invalid="ignore"):  # a signaling NaN into float64
        for i, v in zip(rng.choice(n, size=min(n, 5), replace=False), nans):
            flat[5, i] = v
    return x


#: row lengths 1..300 (every leaf length, tails of 0..7, the first splits) and the networks' planes; 7
#: planes: a group of 4 (plane_sums4) and 3 alone (plane_sums1)
GLOBAL_POOL_SHAPES = [(1, 7, 1, n) for n in range(1, 301)] + [
    (1, 7, 7, 7), (1, 7, 14, 14), (1, 7, 28, 28), (1, 7, 56, 56), (1, 7, 112, 112), (1, 1152, 7, 7),
    (1, 40, 128, 1), (1, 9, 3, 50), (2, 7, 9, 13), (1, 11, 31, 33)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_global_avg_pool_gives_numpy_bits(dtype):
    """Bytes equal to the reference (numpy's mean) over every row length 1..300 and the networks'
    plane sizes, with signed zeros, infinities and NaNs, in the serial, numba-block and pool paths."""
    from tidlx.emulator import EmulatorConfig
    from tidlx.emulator.fast import _parallel

    rng = np.random.default_rng(12)
    configs = (EmulatorConfig(threads=1), EmulatorConfig(threads=2, adapt=False), EmulatorConfig(parallel="pool"))
    bad = []
    for shape in GLOBAL_POOL_SHAPES:
        x = _with_specials((rng.standard_normal(shape) * 100).astype(dtype), rng)
        want = _global_mean_reference(x)
        assert want.shape == shape[:2] + (1, 1) and want.dtype == dtype
        for config in configs:
            with _parallel.run_context(config), np.errstate(invalid="ignore"):
                got = run_kernel("nn.global_avg_pool2d", [x])
            if got.tobytes() != want.tobytes():
                bad.append((shape, config))
    assert bad == []


def test_fast_global_avg_pool_takes_the_vector_kernel_in_blocks(monkeypatch):
    """The fast path (not numpy) for float NCHW planes: plane_means in one call for small tensors,
    in numba blocks at 2 threads; numpy's mean only for the planes whose mean is NaN."""
    from tidlx.emulator import EmulatorConfig
    from tidlx.emulator.fast import _parallel, _sums
    from tidlx.emulator.fast import op_pool as fast_pool

    calls = []
    for name in ("plane_means", "plane_means_blocks"):
        loop = getattr(_sums, name)
        monkeypatch.setattr(_sums, name, lambda *a, _l=loop, _n=name: (calls.append((_n,) + a[-2:]), _l(*a)))
    monkeypatch.setattr(fast_pool.ref, "global_avg_pool2d", None)  # any fallback fails
    rng = np.random.default_rng(13)
    big = rng.standard_normal((1, 1152, 7, 7)).astype(np.float32)
    small = rng.standard_normal((1, 16, 7, 7)).astype(np.float32)
    with _parallel.run_context(EmulatorConfig(threads=2, adapt=False)):
        got_big = run_kernel("nn.global_avg_pool2d", [big])
        got_small = run_kernel("nn.global_avg_pool2d", [small])
        two = _parallel.numba_threads() > 1
    monkeypatch.undo()
    assert got_big.tobytes() == _global_mean_reference(big).tobytes()
    assert got_small.tobytes() == _global_mean_reference(small).tobytes()
    assert calls == ([("plane_means_blocks", 1152, 2)] if two else [("plane_means", 0, 1152)]) \
        + [("plane_means", 0, 16)]

    # NaN means: which NaN two NaNs add to is the compiled loop's choice, so those planes are numpy's
    big[0, 5, 3, 3] = np.nan
    big[0, 7, 0, 0], big[0, 7, 6, 6] = _nan(0x7FC00001), _nan(0xFFC00002)
    with np.errstate(invalid="ignore"):
        got = run_kernel("nn.global_avg_pool2d", [big])
    assert got.tobytes() == _global_mean_reference(big).tobytes()
    assert np.isnan(got.reshape(-1)).nonzero()[0].tolist() == [5, 7]


def test_fast_global_avg_pool_falls_back_to_the_reference():
    """Other layouts, dtypes, strided or unaligned input and empty planes: the reference's result."""
    rng = np.random.default_rng(14)
    x = rng.standard_normal((1, 12, 9, 10)).astype(np.float32)
    unaligned = np.frombuffer(b"\0" + x.tobytes(), np.float32, x.size, 1).reshape(x.shape)
    cases = [([x.transpose(0, 2, 3, 1).copy()], {"layout": "NHWC"}), ([x[:, :, :, ::2]], {}),
             ([x.astype(np.float16)], {}), ([(x * 50).astype(np.int8)], {}), ([unaligned], {}),
             ([np.zeros((1, 3, 0, 4), np.float32)], {})]
    from tidlx.emulator.reference.op_pool import global_avg_pool2d
    from tidlx.ir import get_op

    op = get_op("nn.global_avg_pool2d")
    for args, attrs in cases:
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy's "Mean of empty slice"
            want = global_avg_pool2d(args, op.make_attrs(attrs), None)
            got = run_kernel("nn.global_avg_pool2d", args, **attrs)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (args[0].dtype, args[0].shape, attrs)


def test_fast_global_avg_pool_divides_as_numpy_above_2_to_the_24_values():
    """numpy divides by an intp count (in float64, then rounds): float32(4097 * 4097) would round."""
    x = np.random.default_rng(15).random((1, 1, 4097, 4097), dtype=np.float32)
    assert run_kernel("nn.global_avg_pool2d", [x]).tobytes() == _global_mean_reference(x).tobytes()
