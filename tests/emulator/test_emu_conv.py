"""nn.conv2d / nn.conv2d_transpose kernels against a naive loop reference and onnxruntime."""

import os

import numpy as np
import pytest

from emu_helpers import assert_close, ort_node, rand, run_kernel
from tidlx.emulator import EmulatorConfig, using_config


def naive_conv_nchw(x, w, strides, pads, dilation, groups, acc=np.float64):
    """Direct definition: out[n,o,y,x] = sum over the group's channels and taps, zero padding."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    sh, sw = strides
    pt, pl, pb, pr = pads
    dh, dw = dilation
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow), acc)
    og = o // groups
    for b in range(n):
        for oc in range(o):
            g = oc // og
            for y in range(oh):
                for xx in range(ow):
                    total = 0
                    for ic in range(cg):
                        for i in range(kh):
                            for j in range(kw):
                                hy = y * sh - pt + i * dh
                                wx = xx * sw - pl + j * dw
                                if 0 <= hy < h and 0 <= wx < wd:
                                    total += acc(x[b, g * cg + ic, hy, wx]) * acc(w[oc, ic, i, j])
                    out[b, oc, y, xx] = total
    return out


def fast_reference_conv(x, w, pads):
    """Stride-1 convolution summed tap by tap in float64 (for the larger Winograd shapes)."""
    pt, pl, pb, pr = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    kh, kw = w.shape[2:]
    oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j].astype(np.float64))
    return out


CASES = [
    # (N, C, H, W, O, kh, kw, strides, pads(t,l,b,r), dilation, groups)
    (1, 3, 7, 6, 4, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (2, 4, 8, 7, 6, 3, 2, (2, 1), (0, 1, 2, 0), (1, 1), 1),       # asymmetric padding, strides
    (1, 4, 9, 9, 4, 3, 3, (1, 2), (2, 2, 2, 2), (2, 2), 2),       # dilation, groups
    (1, 6, 6, 5, 6, 3, 3, (1, 1), (1, 0, 1, 2), (1, 1), 6),       # depthwise
    (2, 3, 7, 7, 6, 3, 3, (2, 2), (1, 1, 1, 1), (1, 2), 3),       # depthwise, multiplier 2, dilation
    (1, 8, 5, 6, 5, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),       # 1x1 as a matmul
    (1, 8, 7, 6, 4, 1, 1, (2, 2), (0, 0, 0, 0), (1, 1), 1),       # strided 1x1
    (1, 6, 5, 5, 4, 1, 1, (1, 1), (1, 0, 0, 1), (1, 1), 2),       # padded grouped 1x1
    (1, 2, 3, 3, 3, 3, 3, (3, 3), (0, 0, 0, 0), (1, 1), 1),       # single output pixel
]


@pytest.mark.parametrize("case", CASES)
def test_conv2d_nchw_matches_naive_loops(case):
    n, c, h, wd, o, kh, kw, strides, pads, dilation, groups = case
    rng = np.random.default_rng(sum(case[:7]))
    x = rand(rng, (n, c, h, wd))
    w = rand(rng, (o, c // groups, kh, kw))
    got = run_kernel("nn.conv2d", [x, w], strides=strides, padding=pads, dilation=dilation, groups=groups)
    assert_close(got, naive_conv_nchw(x, w, strides, pads, dilation, groups), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", CASES[:5])
def test_conv2d_nhwc_hwio_matches_nchw(case):
    n, c, h, wd, o, kh, kw, strides, pads, dilation, groups = case
    rng = np.random.default_rng(7 + sum(case[:7]))
    x = rand(rng, (n, c, h, wd))
    w = rand(rng, (o, c // groups, kh, kw))
    ref = naive_conv_nchw(x, w, strides, pads, dilation, groups)
    got = run_kernel("nn.conv2d", [x.transpose(0, 2, 3, 1).copy(), w.transpose(2, 3, 1, 0).copy()],
                     strides=strides, padding=pads, dilation=dilation, groups=groups,
                     data_layout="NHWC", kernel_layout="HWIO")
    assert_close(got, ref.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)
    # Mixed: NHWC data with an OIHW kernel, NCHW output.
    got2 = run_kernel("nn.conv2d", [x.transpose(0, 2, 3, 1).copy(), w], strides=strides, padding=pads,
                      dilation=dilation, groups=groups, data_layout="NHWC", out_layout="NCHW")
    assert_close(got2, ref, rtol=1e-5, atol=1e-5)


@pytest.fixture(params=[True, False], ids=["tile-blocks", "whole-arrays"])
def winograd_path(request):
    """Runs a test on both float32 Winograd paths (the config it returns): blocks of 16 tiles with
    the microkernel, and whole transformed arrays with BLAS products."""
    from tidlx.emulator.fast import _microkernel

    if request.param:
        assert _microkernel.AVAILABLE, "the microkernel did not compile for this CPU"
    return EmulatorConfig(tile_blocks=request.param)


@pytest.mark.parametrize("n,c,h,w,o,pads", [
    (1, 16, 24, 24, 16, (1, 1, 1, 1)),    # even output: whole 2x2 tiles
    (2, 24, 25, 27, 20, (1, 1, 1, 1)),    # odd output sizes, batch 2
    (1, 16, 26, 25, 32, (0, 2, 1, 0)),    # asymmetric padding
    (1, 32, 24, 24, 16, (2, 2, 2, 2)),    # padding wider than the kernel reach
    (1, 16, 26, 26, 16, (0, 0, 0, 0)),    # no padding
])
def test_winograd_3x3_matches_naive_loops(n, c, h, w, o, pads, winograd_path):
    from tidlx.emulator.fast import _weights, _winograd

    config = winograd_path.replace(winograd="2")  # F(2x2, 3x3) here; F(4x4, 3x3) is tested below
    rng = np.random.default_rng(n + c + h + w + o)
    x = rand(rng, (n, c, h, w))
    wt = rand(rng, (o, c, 3, 3))
    wt.setflags(write=False)  # like a Constant's data: the transformed weights get cached
    assert _winograd.usable(x.shape, wt.shape, 1, (1, 1), (1, 1), np.dtype("float32"), config)
    ref = fast_reference_conv(x, wt, pads)
    for _ in range(2):  # second time from the weight cache
        with using_config(config):
            got = run_kernel("nn.conv2d", [x, wt], padding=pads)
        assert_close(got, ref, rtol=1e-5, atol=2e-5)
    assert id(wt) in _weights._cache


def test_winograd_weight_cache_entries_die_with_the_weights():
    from tidlx.emulator.fast import _weights, _winograd

    wt = np.ones((16, 16, 3, 3), np.float32)
    wt.setflags(write=False)
    _winograd.transformed_weights(wt, np.dtype("float32"))
    key = id(wt)
    assert key in _weights._cache
    del wt
    assert key not in _weights._cache


def relative_max_error(got, ref):
    return float(np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max())


@pytest.mark.parametrize("n,c,h,w,o,pads", [
    (1, 16, 28, 28, 16, (1, 1, 1, 1)),    # whole 4x4 tiles
    (2, 17, 29, 31, 23, (1, 1, 1, 1)),    # odd sizes and channel counts, batch 2: partial tiles
    (1, 19, 30, 27, 18, (0, 2, 1, 0)),    # asymmetric padding
    (3, 5, 9, 7, 3, (2, 2, 2, 2)),        # padding wider than the kernel reach, few channels
    (1, 16, 5, 6, 16, (0, 0, 0, 0)),      # output (3x4) smaller than one tile
    (1, 20, 33, 33, 21, (0, 0, 0, 0)),    # no padding
])
def test_winograd_f43_matches_float64_direct_convolution(n, c, h, w, o, pads, winograd_path):
    from tidlx.emulator.fast import _winograd

    rng = np.random.default_rng(7 * n + c + h + w + o)
    x = rand(rng, (n, c, h, w))
    wt = rand(rng, (o, c, 3, 3))
    ref = fast_reference_conv(x, wt, pads)
    f32 = np.dtype("float32")
    got = _winograd.conv3x3(x, wt, pads, ref.shape[2:], f32, tile=4, config=winograd_path)
    assert got.shape == ref.shape and got.dtype == f32
    # F(4x4, 3x3) in float32 measures ~1e-6..1e-5 of the largest output (F(2x2, 3x3): ~3e-7);
    # a wrong transform entry or tile offset gives errors of order 1.
    assert relative_max_error(got, ref) <= 3e-5
    f23 = _winograd.conv3x3(x, wt, pads, ref.shape[2:], f32, tile=2, config=winograd_path)
    assert relative_max_error(f23, ref) <= 3e-6


@pytest.mark.parametrize("channels,outs,columns,panels", [
    (1, 1, 16, (0, 1)),       # one input channel, one output channel: a zero-padded panel
    (7, 13, 20, (0, 3)),      # partial last panel; 20 columns run as two groups of 16
    (64, 12, 32, (1, 2)),     # a range of panels: the other rows stay untouched
    (300, 6, 16, (0, 1)),     # long sums
])
def test_microkernel_products_match_float64(channels, outs, columns, panels):
    from tidlx.emulator.fast._jit import tile_block_buffers, winograd_block_products
    from tidlx.emulator.fast._microkernel import ROWS, pack_panels

    rng = np.random.default_rng(channels + outs)
    u = rng.standard_normal((3, outs, channels)).astype(np.float32)
    up = pack_panels(u)
    assert up.shape == (3, -(-outs // ROWS), channels, ROWS)
    v, m = tile_block_buffers(3, channels, up.shape[1] * ROWS, 32)
    v[...] = rng.standard_normal(v.shape).astype(np.float32)
    m[...] = np.nan
    first, last = panels[0], min(panels[1], up.shape[1])
    winograd_block_products(up, v, m, columns, first, last)
    rows = slice(ROWS * first, min(outs, ROWS * last))
    ref = np.matmul(u.astype(np.float64), v.astype(np.float64))
    got = m[:, rows, :columns]
    assert np.abs(got - ref[:, rows, :columns]).max() <= 1e-5 * max(1.0, np.abs(ref).max())
    assert np.isnan(m[:, :ROWS * first]).all() and np.isnan(m[:, ROWS * last:]).all()


_LANES_PROBE = """
import sys
import numpy as np
from tidlx.emulator.fast import _microkernel, _winograd
rng = np.random.default_rng(5)
x = rng.standard_normal((1, 40, 15, 14)).astype(np.float32)
w = rng.standard_normal((45, 40, 3, 3)).astype(np.float32)
y = _winograd.conv3x3(x, w, (1, 1, 1, 1), (15, 14), np.float32, tile=2)
from tidlx.emulator.fast import _jit
xd = rng.standard_normal((1, 6, 23, 61)).astype(np.float32)  # 61 columns: 8 vectors of 8, two parts
wd = rng.standard_normal((6, 1, 5, 5)).astype(np.float32)
yd = np.empty((1, 6, 23, 61), np.float32)
_jit.depthwise_conv_planes(xd, wd, yd, 1, 1, 1, 1, 2, 2, 1, 0, _microkernel.LANES, 0, 6)  # the row kernel
xf = rng.standard_normal((1, 6, 11, 13)).astype(np.float32)  # 143 outputs: 8 vectors of 16 + 15, 17 of 8 + 7
yf = np.empty((1, 6, 11, 13), np.float32)
_jit.depthwise_conv_planes(xf, wd, yf, 1, 1, 1, 1, 2, 2, 1, 1 << 30, _microkernel.LANES, 0, 6)  # the flat kernel
np.save(sys.argv[1], np.concatenate([y.ravel(), yd.ravel(), yf.ravel()]))
print(_microkernel.LANES, _microkernel.ROWS)
"""


def test_kernel_width_gives_the_same_bits(tmp_path):
    """The 16-float kernels (AVX-512: products in panels of 8, depthwise rows in vectors of 16) and the
    8-float ones (panels of 6) sum each output in the same order: a tile-blocks convolution and
    depthwise ones (row and flat kernels) give the same bits with either (on a CPU without AVX-512 both processes run the
    8-float kernels)."""
    import subprocess
    import sys

    results = {}
    for lanes in ("", "8"):
        env = dict(os.environ, TIDLX_EMULATOR_LANES=lanes, TIDLX_EMULATOR_THREADS="1")
        out = tmp_path / f"y{lanes or 'host'}.npy"
        proc = subprocess.run([sys.executable, "-c", _LANES_PROBE, str(out)], env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        results[lanes] = (proc.stdout.split(), np.load(out))
    assert results["8"][0] == ["8", "6"]
    assert np.array_equal(results[""][1], results["8"][1])


@pytest.mark.parametrize("tile,h,w", [(2, 7, 7), (4, 30, 29), (2, 15, 14)])
def test_tile_blocks_give_the_same_bits_in_any_split_and_thread_count(tile, h, w):
    """Each output element is one ordered sum: serial, parallel and output-channel splits agree bitwise."""
    from tidlx.emulator.fast import _jit, _parallel, _winograd

    rng = np.random.default_rng(tile + h)
    x = rand(rng, (1, 40, h, w))
    wt = rand(rng, (45, 40, 3, 3))
    f32 = np.dtype("float32")
    serial = _winograd.conv3x3(x, wt, (1, 1, 1, 1), (h, w), f32, tile)  # outside a run: one thread
    with _parallel.run_context(EmulatorConfig()):
        parallel = _winograd.conv3x3(x, wt, (1, 1, 1, 1), (h, w), f32, tile)
    th, tw = -(-h // tile), -(-w // tile)
    up = _winograd.transformed_weights(wt, f32, tile, panels=True)
    split = np.empty((1, 45, tile * th, tile * tw), f32)
    units = -(-th * tw // 16) * 3
    _jit.winograd_tiles(x, up, split, th, tw, tile, np.array([2, 4, 5, 8], f32), 1, 1, 16, 3, 0, units)
    assert serial.tobytes() == parallel.tobytes() == split[:, :, :h, :w].copy().tobytes()
    assert relative_max_error(serial, fast_reference_conv(x, wt, (1, 1, 1, 1))) <= 3e-5


def test_f23_input_segment_is_the_patch_transform_bit_for_bit():
    """The tile blocks' F(2x2) input transform reads the plane in even and odd columns; it must give
    the bits of fill_patch + winograd_input_row (the plane-wise form) for any segment, padding and
    edge, non-finite values and signed zeros included."""
    from tidlx.emulator.fast import _jit

    rng = np.random.default_rng(11)
    for trial in range(300):
        h, w = (int(d) for d in rng.integers(1, 20, 2))
        x = rng.standard_normal((2, 3, h, w)).astype(np.float32)
        if trial % 4 == 0:
            x[0, 1, 0, 0], x[1, 2, -1, -1], x[0, 0, 0, -1] = np.inf, np.nan, -0.0
        pt, pl = (int(d) for d in rng.integers(0, 3, 2))
        th, tw = max(1, -(-(h + 2 * pt - 2) // 2)), max(1, -(-(w + 2 * pl - 2) // 2))
        ty, tx0 = int(rng.integers(0, th)), int(rng.integers(0, tw))
        count = int(rng.integers(tx0 + 1, tw + 1)) - tx0
        n, c = int(rng.integers(0, 2)), int(rng.integers(0, 3))
        by_patch = np.full((16, 3, 40), 7.0, np.float32)
        by_segment = by_patch.copy()
        patch, scratch = np.empty((1, 1, 4, 2 * tw + 2), np.float32), np.empty((4, 2 * tw + 2), np.float32)
        _jit.fill_patch(x, n, c, 2 * ty, 2 * tx0, pt, pl, patch, 2 * count + 2)
        _jit.winograd_input_row(patch, 0, 0, 0, 0, count, by_patch, c, 5, scratch)
        even, odd = np.empty((4, tw + 1), np.float32), np.empty((4, tw + 1), np.float32)
        _jit.winograd_input_segment(x, n, c, c + 1, 2 * ty, 2 * tx0, pt, pl, count, by_segment, 5, even, odd)
        assert by_segment.tobytes() == by_patch.tobytes(), (h, w, pt, pl, ty, tx0, count)


def test_f23_output_segment_is_the_row_transform_bit_for_bit():
    """The tile blocks' F(2x2) output transform of all channels of a segment in one call gives the
    bits of winograd_output_row channel by channel (non-finite values and signed zeros included)."""
    from tidlx.emulator.fast import _jit

    rng = np.random.default_rng(12)
    for trial in range(100):
        outs, th, tw = int(rng.integers(1, 14)), int(rng.integers(1, 6)), int(rng.integers(1, 12))
        m = rng.standard_normal((16, outs, 24)).astype(np.float32)
        m[3, 0, 0], m[5, -1, 2], m[7, 0, 1] = np.inf, np.nan, -0.0
        ty, tx0 = int(rng.integers(0, th)), int(rng.integers(0, tw))
        tx1 = int(rng.integers(tx0 + 1, tw + 1))
        first_out, last_out = sorted(int(d) for d in rng.integers(0, outs + 1, 2))
        by_row = np.full((2, outs, 2 * th, 2 * tw), 5.0, np.float32)
        by_segment = by_row.copy()
        for o in range(first_out, last_out):
            _jit.winograd_output_row(m, by_row, 1, o, ty, tx0, tx1, 3)
        _jit.winograd_output_segment(m, by_segment, 1, first_out, last_out, ty, tx0, tx1, 3)
        assert by_segment.tobytes() == by_row.tobytes()


def test_winograd_from_7x7_only_with_tile_blocks():
    from tidlx.emulator.fast import _winograd

    f32 = np.dtype("float32")
    blocks, whole = EmulatorConfig(), EmulatorConfig(tile_blocks=False)
    assert _winograd.usable((1, 512, 7, 7), (512, 512, 3, 3), 1, (1, 1), (1, 1), f32, blocks)
    assert not _winograd.usable((1, 512, 6, 7), (512, 512, 3, 3), 1, (1, 1), (1, 1), f32, blocks)
    assert not _winograd.usable((1, 512, 7, 7), (512, 512, 3, 3), 1, (1, 1), (1, 1), np.dtype("float64"), blocks)
    assert not _winograd.usable((1, 512, 7, 7), (512, 512, 3, 3), 1, (1, 1), (1, 1), f32, whole)
    assert _winograd.usable((1, 512, 14, 14), (512, 512, 3, 3), 1, (1, 1), (1, 1), f32, whole)
    assert not _winograd.usable((1, 512, 14, 14), (512, 512, 3, 3), 1, (1, 1), (1, 1), f32,
                                EmulatorConfig(winograd="off"))


def test_conv2d_uses_f23_in_float32_unless_f43_is_asked_for(monkeypatch, winograd_path):
    """The float32 default is F(2x2, 3x3) at every size (F(4x4, 3x3) misses the fast set's accuracy goal);
    TIDLX_EMULATOR_WINOGRAD=4 still gives F(4x4, 3x3), within the fast set's stated tolerance."""
    from tidlx.emulator.fast import _winograd

    chosen = []
    real = _winograd.tile_size
    monkeypatch.setattr(_winograd, "tile_size", lambda *a: chosen.append(real(*a)) or chosen[-1])
    rng = np.random.default_rng(3)
    x = rand(rng, (2, 24, 30, 29))
    wt = rand(rng, (32, 24, 3, 3))
    wt.setflags(write=False)
    ref = fast_reference_conv(x, wt, (1, 1, 1, 1))
    for config, bound in ((winograd_path, 3e-6), (winograd_path.replace(winograd="4"), 3e-5)):
        for _ in range(2):  # second time from the weight cache
            with using_config(config):
                got = run_kernel("nn.conv2d", [x, wt], padding=(1, 1, 1, 1))
            assert relative_max_error(got, ref) <= bound
    assert chosen == [2, 2, 4, 4]


@pytest.mark.parametrize("out_hw", [(4, 4), (7, 7), (14, 14), (16, 44), (56, 56), (128, 352)])
def test_float32_picks_f23_at_every_size_and_float64_f43_from_28x28(out_hw):
    from tidlx.emulator.fast import _winograd

    f32, f64 = np.dtype("float32"), np.dtype("float64")
    for config in (EmulatorConfig(), EmulatorConfig(tile_blocks=False)):
        assert _winograd.tile_size(out_hw, f32, config) == 2
        assert _winograd.tile_size(out_hw, f64, config) == (4 if out_hw[0] * out_hw[1] >= 784 else 2)


@pytest.mark.parametrize("mode,expected", [("2", (2, 2, 2)), ("4", (4, 4, 4)), ("1", (2, 2, 4))])
def test_winograd_mode_switch_forces_the_tile_size(mode, expected):
    from tidlx.emulator.fast import _winograd

    config = EmulatorConfig.from_env({"TIDLX_EMULATOR_WINOGRAD": mode})
    f32, f64 = np.dtype("float32"), np.dtype("float64")
    assert (_winograd.tile_size((14, 14), f32, config), _winograd.tile_size((56, 56), f32, config),
            _winograd.tile_size((56, 56), f64, config)) == expected


def test_long_channel_sums_run_in_chunks():
    """Products over 2048 channels are summed in chunks (then the chunk sums in order): the result is
    the chunked float32 sum bit for bit, and closer to float64 than one ordered chain (FCN's head)."""
    from tidlx.emulator.fast._jit import CHANNEL_CHUNK, tile_block_buffers, winograd_block_products
    from tidlx.emulator.fast._microkernel import pack_panels

    channels = 2048
    rng = np.random.default_rng(11)
    u = np.abs(rng.standard_normal((1, 6, channels))).astype(np.float32)  # same-sign terms: the chain's error grows
    up = pack_panels(u)  # one panel: 6 channels, zero rows after them when a panel holds 8
    v, m = tile_block_buffers(1, channels, up.shape[1] * up.shape[3], 16)
    v[...] = np.abs(rng.standard_normal(v.shape)).astype(np.float32)
    winograd_block_products(up, v, m, 16, 0, 1)
    products = u[0][:, :, None] * v[0][None, :, :]  # (6, C, 16), exact in float64 below
    chunked = np.zeros((6, 16), np.float32)
    for k0 in range(0, channels, CHANNEL_CHUNK):
        part = np.zeros((6, 16), np.float32)
        for k in range(k0, min(channels, k0 + CHANNEL_CHUNK)):
            part = (part.astype(np.float64) + u[0][:, k, None].astype(np.float64) * v[0][k]).astype(np.float32)
        chunked = chunked + part
    np.testing.assert_array_equal(m[0, :6], chunked)
    chain = np.zeros((6, 16), np.float32)
    for k in range(channels):
        chain = (chain.astype(np.float64) + u[0][:, k, None].astype(np.float64) * v[0][k]).astype(np.float32)
    exact = products.astype(np.float64).sum(axis=1)
    assert np.abs(m[0, :6] - exact).max() < 0.5 * np.abs(chain - exact).max()


def test_winograd_weight_cache_keeps_both_tile_sizes_until_the_weights_die():
    from tidlx.emulator.fast import _weights, _winograd

    wt = np.random.default_rng(0).standard_normal((16, 16, 3, 3)).astype(np.float32)
    wt.setflags(write=False)
    f32 = np.dtype("float32")
    u2 = _winograd.transformed_weights(wt, f32, 2)
    u4 = _winograd.transformed_weights(wt, f32, 4)
    assert u2.shape == (16, 16, 16) and u4.shape == (36, 16, 16)
    assert _winograd.transformed_weights(wt, f32, 2) is u2 and _winograd.transformed_weights(wt, f32, 4) is u4
    # corner positions of G g G^T are scaled kernel corners: (1/4)^2 w[0, 0] and w[2, 2]
    np.testing.assert_allclose(u4[0], wt[:, :, 0, 0] / 16, rtol=1e-6)
    np.testing.assert_allclose(u4[35], wt[:, :, 2, 2], rtol=1e-6)
    key = id(wt)
    del wt, u2, u4
    assert key not in _weights._cache


def test_conv2d_int8_accumulates_exactly_in_int32():
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=(1, 4, 6, 6)).astype("int8")
    w = rng.integers(-128, 128, size=(5, 4, 3, 3)).astype("int8")
    got = run_kernel("nn.conv2d", [x, w], padding=(1, 1), out_dtype="int32")
    ref = naive_conv_nchw(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1, acc=np.int64)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("strides,pads,dilation,groups", [
    ((1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 2), (1, 1, 1, 1), (1, 1), 1),
    ((2, 1), (0, 1, 2, 1), (2, 1), 2),
    ((1, 1), (1, 1, 1, 1), (1, 1), 4),
])
def test_conv2d_matches_onnxruntime(strides, pads, dilation, groups):
    rng = np.random.default_rng(11)
    x = rand(rng, (1, 4, 9, 8))
    w = rand(rng, (8, 4 // groups, 3, 3))
    ref = ort_node("Conv", {"x": x, "w": w}, dict(strides=list(strides), pads=[pads[0], pads[1], pads[2], pads[3]],
                                                  dilations=list(dilation), group=groups))[0]
    got = run_kernel("nn.conv2d", [x, w], strides=strides, padding=pads, dilation=dilation, groups=groups)
    assert_close(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("strides,pads,out_pad,dilation,groups", [
    ((1, 1), (0, 0, 0, 0), (0, 0), (1, 1), 1),
    ((2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 1),
    ((2, 3), (0, 1, 2, 0), (1, 0), (1, 1), 2),
    ((2, 2), (1, 0, 1, 0), (0, 1), (2, 2), 1),
    ((3, 3), (0, 0, 0, 0), (2, 2), (1, 1), 1),  # output padding beyond the full result: zeros
])
def test_conv2d_transpose_matches_onnxruntime(strides, pads, out_pad, dilation, groups):
    rng = np.random.default_rng(5)
    x = rand(rng, (2, 4, 5, 4))
    w = rand(rng, (4, 3, 3, 2))  # (C_in, C_out / groups, kh, kw)
    ref = ort_node("ConvTranspose", {"x": x, "w": w}, dict(
        strides=list(strides), pads=[pads[0], pads[1], pads[2], pads[3]], output_padding=list(out_pad),
        dilations=list(dilation), group=groups))[0]
    got = run_kernel("nn.conv2d_transpose", [x, w], strides=strides, padding=pads, output_padding=out_pad,
                     dilation=dilation, groups=groups, channels=3 * groups, kernel_size=(3, 2))
    assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_conv2d_transpose_nhwc_layout():
    rng = np.random.default_rng(6)
    x = rand(rng, (1, 3, 4, 5))
    w = rand(rng, (3, 2, 3, 3))
    ref = ort_node("ConvTranspose", {"x": x, "w": w}, dict(strides=[2, 2], pads=[1, 1, 1, 1]))[0]
    got = run_kernel("nn.conv2d_transpose", [x.transpose(0, 2, 3, 1).copy(), w.transpose(2, 3, 0, 1).copy()],
                     strides=(2, 2), padding=(1, 1), data_layout="NHWC", kernel_layout="HWIO")
    assert_close(got, ref.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n,c,h,w,mult,k,strides,pads,dilation", [
    (1, 5, 15, 15, 1, 3, (1, 1), (1, 1, 1, 1), (1, 1)),     # odd width: a partial last vector
    (1, 4, 32, 32, 1, 3, (1, 1), (1, 1, 1, 1), (1, 1)),     # whole vectors: written in place
    (2, 3, 19, 23, 2, 5, (2, 2), (2, 2, 2, 2), (1, 1)),     # stride 2, 5x5, multiplier 2, batch 2
    (1, 6, 40, 70, 1, 3, (2, 2), (0, 1, 1, 0), (1, 1)),     # stride 2, asymmetric pads, 4+ vectors a row
    (1, 3, 17, 21, 1, 3, (3, 1), (1, 2, 0, 3), (2, 2)),     # row stride 3, dilation 2, wide left pad
    (1, 2, 7, 7, 1, 7, (1, 2), (4, 4, 4, 4), (1, 1)),       # padding wider than the image
])
def test_depthwise_vector_rows_give_the_numba_loops_bits(n, c, h, w, mult, k, strides, pads, dilation):
    """The microkernel's depthwise rows sum the same terms in the same order as the plain loop."""
    from tidlx.emulator.fast import _jit, _microkernel

    assert _microkernel.AVAILABLE, "the microkernel did not compile for this CPU"
    rng = np.random.default_rng(n + c + h + w + k)
    x = rand(rng, (n, c, h, w))
    wt = rand(rng, (c * mult, 1, k, k))
    geometry = dict(strides=strides, padding=pads, dilation=dilation, groups=c)
    got = run_kernel("nn.conv2d", [x, wt], **geometry)
    loop = np.full_like(got, np.nan)
    _jit.depthwise_conv_nchw(x, wt, loop, strides[0], strides[1], dilation[0], dilation[1], pads[0], pads[1],
                             mult, 0, n * c * mult)
    np.testing.assert_array_equal(got, loop)
    ref = naive_conv_nchw(x, wt, strides, pads, dilation, c, acc=np.float64)
    assert relative_max_error(got, ref) <= 1e-6


def depthwise_loop_and_kernel(x, wt, strides, pads, dilation):
    """The plain numba loop's and the vector kernel's outputs (all prefilled with NaN) for one geometry;
    the kernel's from each of its routes, the row kernel's and (where it takes the geometry) the flat one's:
    asserted to be the same bytes as each other first."""
    from tidlx.emulator.fast import _jit, _microkernel

    assert _microkernel.AVAILABLE, "the microkernel did not compile for this CPU"
    n, c, h, w = x.shape
    o, _, kh, kw = wt.shape
    out_h = (h + pads[0] + pads[2] - dilation[0] * (kh - 1) - 1) // strides[0] + 1
    out_w = (w + pads[1] + pads[3] - dilation[1] * (kw - 1) - 1) // strides[1] + 1
    loop = np.full((n, o, out_h, out_w), np.nan, np.float32)
    args = (strides[0], strides[1], dilation[0], dilation[1], pads[0], pads[1], o // c)
    _jit.depthwise_conv_nchw(x, wt, loop, *args, 0, n * o)
    kernels = {}
    for route, flat_positions in (("rows", 0), ("flat", 1 << 30)):
        if route == "flat" and not _jit.depthwise_flat_usable(w, out_h, out_w, strides[0], strides[1], 1 << 30):
            continue
        kernels[route] = loop.copy()
        _jit.depthwise_conv_planes(x, wt, kernels[route], *args, flat_positions, _microkernel.LANES, 0, n * o)
    if "flat" in kernels:
        assert_same_bytes(kernels["flat"], loop, "the flat route against the plain loop")
    return loop, kernels["rows"]


def assert_same_bytes(got, want, label=""):
    assert got.shape == want.shape, label
    differ = np.count_nonzero(got.view(np.uint32) != want.view(np.uint32))
    assert got.tobytes() == want.tobytes(), f"{label}: {differ} of {got.size} values differ"


#: The networks' depthwise map widths (MobileNetV2/V3, EfficientNet-B0, ShuffleNetV2 at 224x224), and a
#: few past them: rows of 1..8 vectors in one part, 9+ vectors split in parts.
NETWORK_WIDTHS = (7, 14, 28, 56, 112, 65, 129, 200)


@pytest.mark.parametrize("k,stride", [(3, 1), (3, 2), (5, 1), (5, 2)])
def test_depthwise_kernel_gives_the_loops_bytes_at_every_width(k, stride):
    """Widths 1..40 and the networks' (every number of vectors, partial last vectors, split rows),
    heights from 1 (fewer rows than one step of rows) to 17, "same" padding."""
    rng = np.random.default_rng(k * 10 + stride)
    for w in list(range(1, 41)) + list(NETWORK_WIDTHS):
        for h in (1, 2, 3, 5, 9, 17):
            x = rand(rng, (1, 2, h, w))
            wt = rand(rng, (2, 1, k, k))
            loop, kernel = depthwise_loop_and_kernel(x, wt, (stride, stride), (k // 2,) * 4, (1, 1))
            assert_same_bytes(kernel, loop, f"{h}x{w}")


@pytest.mark.parametrize("h", list(range(1, 11)) + [56, 57, 112, 113])
def test_depthwise_kernel_gives_the_loops_bytes_at_every_height(h):
    """Heights 1..10 (rows left over after the steps of 2, 3, 4 or 8 rows) and large, on narrow and wide rows."""
    rng = np.random.default_rng(h)
    for w in (7, 14, 24, 28, 56):
        for stride in (1, 2):
            x = rand(rng, (1, 3, h, w))
            wt = rand(rng, (3, 1, 3, 3))
            loop, kernel = depthwise_loop_and_kernel(x, wt, (stride, stride), (1, 1, 1, 1), (1, 1))
            assert_same_bytes(kernel, loop, f"{h}x{w} stride {stride}")


@pytest.mark.parametrize("n,c,h,w,mult,k,strides,pads,dilation", [
    (1, 3, 20, 22, 1, 7, (1, 1), (3, 3, 3, 3), (1, 1)),     # 7x7
    (1, 3, 21, 33, 1, 7, (2, 2), (3, 2, 4, 1), (1, 1)),     # 7x7 stride 2, asymmetric pads
    (2, 3, 19, 23, 2, 5, (2, 2), (2, 2, 2, 2), (1, 1)),     # batch 2, multiplier 2 (a plane reused)
    (1, 4, 17, 30, 3, 3, (1, 1), (0, 0, 0, 0), (1, 1)),     # no padding, multiplier 3
    (1, 3, 17, 21, 1, 3, (3, 1), (1, 2, 0, 3), (2, 2)),     # row stride 3, dilation 2, wide left pad
    (1, 3, 25, 40, 1, 3, (2, 2), (2, 2, 2, 2), (2, 2)),     # stride 2, dilation 2: even taps only
    (1, 3, 25, 41, 1, 3, (2, 2), (3, 3, 3, 3), (3, 3)),     # stride 2, dilation 3: both phases
    (1, 3, 23, 45, 1, 5, (1, 3), (2, 2, 2, 2), (1, 1)),     # column stride 3: three phases
    (1, 2, 7, 7, 1, 7, (1, 2), (4, 4, 4, 4), (1, 1)),       # padding wider than the image
    (1, 2, 9, 12, 1, 3, (2, 2), (0, 5, 0, 6), (1, 1)),      # odd left pad: the copy starts on an odd column
    (1, 3, 15, 18, 1, 3, (1, 1), (2, 2, 2, 2), (2, 2)),     # flat kernel: dilation 2
    (1, 3, 12, 16, 2, 5, (1, 1), (1, 0, 3, 2), (1, 1)),     # flat kernel: asymmetric pads, rows narrower than the input
    (1, 2, 6, 5, 1, 3, (1, 1), (1, 4, 1, 4), (1, 1)),       # rows wider than the input: the row kernel
    (1, 2, 4, 3, 1, 9, (1, 1), (4, 4, 4, 4), (1, 1)),       # taps reaching past a whole row each side
])
def test_depthwise_kernel_gives_the_loops_bytes_in_any_geometry(n, c, h, w, mult, k, strides, pads, dilation):
    rng = np.random.default_rng(n + c + h + w + k)
    x = rand(rng, (n, c, h, w))
    wt = rand(rng, (c * mult, 1, k, k))
    loop, kernel = depthwise_loop_and_kernel(x, wt, strides, pads, dilation)
    assert_same_bytes(kernel, loop)
    ref = naive_conv_nchw(x, wt, strides, pads, dilation, c, acc=np.float64)
    assert relative_max_error(kernel, ref) <= 1e-6


def test_depthwise_kernel_keeps_signed_zeros_infinities_and_nans():
    """Inputs with -0, +-inf and NaN, weights with -0; and planes whose weights hold inf or NaN (the
    plain loop skips taps outside the image, where the padded plane's 0 * inf would be NaN)."""
    rng = np.random.default_rng(7)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
    for w, stride in ((30, 1), (30, 2), (7, 1), (57, 2)):
        x = rand(rng, (1, 6, 11, w))
        x[0, 0] = -0.0  # a whole plane of -0: its sums start at +0 and stay +0
        x[0, 1, rng.random((11, w)) < 0.1] = np.nan
        picks = rng.random((11, w)) < 0.15
        x[0, 2][picks] = rng.choice(specials, np.count_nonzero(picks))
        wt = rand(rng, (6, 1, 3, 3))
        wt[3] = -0.0
        wt[4, 0, 0, 0] = np.inf
        wt[5, 0, 2, 1] = np.nan
        loop, kernel = depthwise_loop_and_kernel(x, wt, (stride, stride), (1, 1, 1, 1), (1, 1))
        assert_same_bytes(kernel, loop, f"width {w} stride {stride}")
        assert np.isfinite(loop[0, 4]).any()  # the inf weight's plane: finite where its tap is off the image


def test_depthwise_route_takes_the_vector_kernel_and_gives_the_same_bits_in_any_thread_count(monkeypatch):
    """nn.conv2d's depthwise float32 route runs the vector kernel (spied), in blocks of planes fixed by
    the shape: 1 thread, 2 numba threads and the 2-thread pool give the same bytes as the plain loop."""
    from tidlx.emulator.fast import _jit, op_conv

    rng = np.random.default_rng(3)
    x = rand(rng, (2, 48, 56, 56))
    wt = rand(rng, (48, 1, 3, 3))
    calls = []
    run_blocks = op_conv.run_blocks

    def spied(count, serial, *args, **kw):
        calls.append(serial)
        return run_blocks(count, serial, *args, **kw)

    monkeypatch.setattr(op_conv, "run_blocks", spied)

    def conv():
        return run_kernel("nn.conv2d", [x, wt], strides=(1, 1), padding=(1, 1, 1, 1), groups=48)

    results = run_in_each_thread_config(conv)
    loop, _ = depthwise_loop_and_kernel(x, wt, (1, 1), (1, 1, 1, 1), (1, 1))
    for got in results:
        assert_same_bytes(got, loop)
    assert calls == [_jit.depthwise_conv_planes] * 3, "the depthwise route did not run the vector kernel"
    calls.clear()
    monkeypatch.setattr(op_conv, "DEPTHWISE_VECTOR_KERNEL", False)  # the A/B switch: the plain loop, same bytes
    assert_same_bytes(conv(), loop)
    assert calls == [_jit.depthwise_conv_nchw]


# --- dilated 3x3 convolutions through Winograd (phase sub-grids) --------------------------------

def dilated_kernel(w, dilation):
    """The 3x3 kernel spread out to its dilated footprint (zeros between the taps)."""
    dh, dw = dilation
    spread = np.zeros(w.shape[:2] + (2 * dh + 1, 2 * dw + 1), w.dtype)
    spread[:, :, ::dh, ::dw] = w
    return spread


THREAD_CONFIGS = [EmulatorConfig(threads=1), EmulatorConfig(threads=2, adapt=False),
                  EmulatorConfig(threads=2, adapt=False, parallel="pool")]


def run_in_each_thread_config(fn):
    """fn() inside a fast run context of 1 thread, 2 numba threads and the 2-thread pool."""
    from tidlx.emulator.fast import _parallel

    results = []
    for config in THREAD_CONFIGS:
        with _parallel.run_context(config):
            results.append(fn())
    return results


@pytest.mark.parametrize("n,c,h,w,o,pads,dilation", [
    (1, 16, 32, 32, 16, (2, 2, 2, 2), (2, 2)),    # FCN's "same" layout: pads = dilation
    (1, 16, 32, 32, 24, (4, 4, 4, 4), (4, 4)),    # dilation 4, 8x8 phases
    (2, 17, 29, 31, 20, (1, 3, 0, 2), (3, 2)),    # odd sizes, batch 2, asymmetric pads and dilation
    (1, 24, 33, 30, 16, (3, 3, 3, 3), (3, 3)),    # dilation 3: phases of unequal sizes
    (1, 16, 26, 27, 18, (0, 0, 0, 0), (2, 3)),    # no padding
    (1, 16, 19, 23, 16, (5, 1, 6, 2), (2, 2)),    # padding wider than the kernel reach
])
def test_dilated_winograd_matches_the_dilated_kernel(n, c, h, w, o, pads, dilation, winograd_path, monkeypatch):
    """Dilated 3x3 convolutions run as Winograd convolutions of their phase sub-grids (spied), within
    the fast set's tolerance of a float64 direct sum, the same bits at 1 and 2 threads."""
    from tidlx.emulator.fast import _winograd, op_conv
    from tidlx.emulator.fast.op_conv import TOLERANCE

    monkeypatch.setattr(op_conv, "DIRECT", False)  # these sizes take the direct route (tested below) by default
    phases = []
    real = _winograd._phase_images
    monkeypatch.setattr(_winograd, "_phase_images", lambda *a: phases.append(a[3:5]) or real(*a))
    rng = np.random.default_rng(n + c + h + w + o + sum(dilation))
    x = rand(rng, (n, c, h, w))
    wt = rand(rng, (o, c, 3, 3))
    wt.setflags(write=False)
    ref = fast_reference_conv(x, dilated_kernel(wt, dilation), pads)

    def conv():
        with using_config(winograd_path):
            return run_kernel("nn.conv2d", [x, wt], padding=pads, dilation=dilation)

    results = run_in_each_thread_config(conv)
    assert phases == [dilation] * len(THREAD_CONFIGS)
    assert results[0].shape == ref.shape
    assert relative_max_error(results[0], ref) <= min(TOLERANCE, 3e-6)
    assert all(r.tobytes() == results[0].tobytes() for r in results[1:])


@pytest.mark.parametrize("tile", [2, 4])
def test_dilated_winograd_is_the_winograd_of_each_phase(tile):
    """Output pixel (r + d k, q + d l) is phase (r, q)'s pixel (k, l), bit for bit: the phase images
    are x_padded[r::d, q::d] and their outputs interleave back."""
    from tidlx.emulator.fast import _winograd

    rng = np.random.default_rng(tile)
    x = rand(rng, (1, 16, 22, 21))
    wt = rand(rng, (16, 16, 3, 3))
    f32 = np.dtype("float32")
    d, pads = 2, (2, 2, 2, 2)
    got = _winograd.conv3x3(x, wt, pads, (22, 21), f32, tile, dilation=(d, d))
    xp = np.pad(x, ((0, 0), (0, 0), (2, 2), (2, 2)))
    for r in range(d):
        for q in range(d):
            sub = np.ascontiguousarray(xp[:, :, r::d, q::d])
            k, l = got[:, :, r::d, q::d].shape[2:]
            phase = _winograd.conv3x3(sub, wt, (0, 0, 0, 0), (k, l), f32, tile)
            np.testing.assert_array_equal(got[:, :, r::d, q::d], phase)


def test_dilated_winograd_needs_phases_of_4x4_outputs_and_can_be_turned_off(monkeypatch):
    from tidlx.emulator.fast import _winograd

    f32 = np.dtype("float32")
    usable = lambda hw, out_hw, d: _winograd.usable((1, 64) + hw, (64, 64, 3, 3), 1, (1, 1), d, f32,  # noqa: E731
                                                    EmulatorConfig(), out_hw)
    assert usable((32, 32), (32, 32), (4, 4))  # 8x8 phases
    assert usable((16, 16), (16, 16), (4, 4))  # 4x4 phases
    assert not usable((12, 12), (12, 12), (4, 4))  # 3x3 phases: most of each 2x2 tile wasted
    assert not usable((16, 16), (16, 16), (4, 6))  # 4x3 phases
    assert usable((16, 16), (16, 16), (2, 1))
    monkeypatch.setattr(_winograd, "DILATED", False)
    assert not usable((32, 32), (32, 32), (2, 2))
    assert usable((32, 32), (32, 32), (1, 1))


# --- direct convolution of few input channels (the 3-channel stems) -----------------------------

@pytest.mark.parametrize("n,c,h,w,o,k,strides,pads,dilation", [
    (1, 3, 224, 224, 16, 3, (2, 2), (1, 1, 1, 1), (1, 1)),   # MobileNetV3-small's stem: whole vectors
    (1, 3, 225, 225, 32, 3, (2, 2), (0, 0, 1, 1), (1, 1)),   # TF-style pads; 32 outputs: a partial panel
    (2, 3, 17, 37, 7, 3, (1, 1), (0, 2, 1, 0), (1, 1)),      # stride 1, batch 2, odd width (partial vectors)
    (1, 2, 15, 40, 13, 5, (2, 3), (2, 1, 0, 3), (2, 1)),     # column stride 3, dilation, asymmetric pads
    (1, 7, 9, 9, 6, 3, (1, 2), (4, 4, 4, 4), (1, 2)),        # 63 taps; padding wider than the image
    (1, 1, 8, 8, 1, 2, (1, 1), (0, 0, 0, 0), (1, 1)),        # one channel in, one out, 2x2 kernel
    (1, 3, 61, 58, 20, 7, (2, 2), (3, 3, 3, 3), (1, 1)),     # ResNet's 7x7 stem layout: 147 taps
    (1, 4, 27, 29, 8, 11, (4, 4), (2, 1, 2, 1), (1, 1)),     # 11x11 stride 4: 484 taps
])
def test_few_channel_convolutions_run_directly(n, c, h, w, o, k, strides, pads, dilation, monkeypatch):
    """Dense convolutions with at most FEW_CHANNEL_TAPS taps per output take the direct route (spied),
    within the fast set's tolerance of float64 loops, the same bits at 1 and 2 threads."""
    from tidlx.emulator.fast import op_conv

    calls = []
    real = op_conv._conv_few_channels
    monkeypatch.setattr(op_conv, "_conv_few_channels", lambda *a: calls.append(a[1].shape) or real(*a))
    rng = np.random.default_rng(n + c + h + w + o + k)
    x = rand(rng, (n, c, h, w))
    wt = rand(rng, (o, c, k, k))
    geometry = dict(strides=strides, padding=pads, dilation=dilation)
    results = run_in_each_thread_config(lambda: run_kernel("nn.conv2d", [x, wt], **geometry))
    assert calls == [wt.shape] * len(THREAD_CONFIGS)
    ref = naive_conv_nchw(x, wt, strides, pads, dilation, 1) if h * w < 2000 else \
        _strided_reference(x, wt, strides, pads, dilation)
    assert results[0].shape == ref.shape
    assert relative_max_error(results[0], ref) <= min(op_conv.TOLERANCE, 1e-6)
    assert all(r.tobytes() == results[0].tobytes() for r in results[1:])


def _strided_reference(x, w, strides, pads, dilation):
    """float64 convolution tap by tap (for the full-size stems, where the naive loops take minutes)."""
    (sh, sw), (dh, dw) = strides, dilation
    pt, pl, pb, pr = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    kh, kw = w.shape[2:]
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(kh):
        for j in range(kw):
            taps = xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
            out += np.einsum("nchw,oc->nohw", taps, w[:, :, i, j].astype(np.float64))
    return out


def test_few_channel_units_give_the_same_bits_in_any_split():
    """Units are blocks of output rows fixed by the shape: computing them in any ranges gives the
    whole call's bits."""
    from tidlx.emulator.fast import _jit, op_conv
    from tidlx.emulator.fast._microkernel import ROWS

    rng = np.random.default_rng(5)
    x = rand(rng, (2, 3, 41, 50))
    wt = rand(rng, (10, 3, 3, 3))
    whole = op_conv._conv_few_channels(x, wt, (2, 2), (1, 1), (1, 1, 1, 1), (21, 25))
    packed = op_conv.tap_panels(wt)
    assert packed.shape == (2, 27, ROWS) and not packed[1, :, 10 - ROWS:].any()
    np.testing.assert_array_equal(packed[1, :, 9 - ROWS], wt[9].ravel())
    split = np.full_like(whole, np.nan)
    units = 2 * -(-21 // op_conv.FEW_CHANNEL_BLOCK_ROWS)
    none = np.zeros(1, np.float32)
    no_tail = (none, none, split, False, False, False, False, False, np.float32(0), np.float32(0), _jit.ACT_NONE, none)
    for start, stop in ((0, 1), (1, 4), (4, units)):
        _jit.conv_few_channels(x, packed, split, 3, 3, 2, 2, 1, 1, 1, 1, op_conv.FEW_CHANNEL_BLOCK_ROWS, *no_tail, start,
                               stop)
    assert whole.tobytes() == split.tobytes()


def test_few_channel_route_takes_only_small_dense_float32_kernels():
    from tidlx.emulator.fast import op_conv

    f32, f64 = np.dtype("float32"), np.dtype("float64")
    usable = lambda x_shape, w_shape, groups=1, work=f32: op_conv._few_channels_usable(  # noqa: E731
        np.empty(x_shape, np.float32), np.empty(w_shape, np.float32), groups, work)
    assert usable((1, 3, 224, 224), (32, 3, 3, 3))
    assert usable((1, 7, 9, 9), (8, 7, 3, 3))  # 63 taps
    assert usable((1, 3, 224, 224), (64, 3, 7, 7))  # ResNet's stem: 147 taps, 3 channels
    assert usable((1, 8, 9, 9), (8, 8, 3, 3))  # 72 taps, 8 channels
    assert not usable((1, 9, 9, 9), (8, 9, 3, 3))  # 81 taps, 9 channels: im2col + sgemm
    assert usable((1, 16, 9, 9), (8, 16, 2, 2))  # 64 taps
    assert not usable((1, 16, 9, 9), (8, 16, 1, 1))  # 1x1: a plain product already
    assert not usable((1, 4, 9, 9), (8, 2, 3, 3), groups=2)
    assert not usable((1, 3, 9, 9), (8, 3, 3, 3), work=f64)


# --- Winograd products by BLAS for large weights ------------------------------------------------

def test_large_weights_take_blas_products_by_shape():
    from tidlx.emulator.fast import _winograd

    pays = _winograd.blas_products_pay
    assert pays((1, 2048, 32, 32), (512, 2048, 3, 3), (32, 32), 2)  # FCN's head
    assert pays((16, 512, 10, 10), (512, 512, 3, 3), (8, 8), 2)  # FCN's dilation-4 phases: 256 tiles
    assert pays((1, 512, 14, 14), (512, 512, 3, 3), (14, 14), 2)  # 49 tiles
    assert not pays((1, 512, 7, 7), (512, 512, 3, 3), (7, 7), 2)  # 16 tiles: tile blocks
    assert not pays((1, 256, 56, 56), (256, 256, 3, 3), (56, 56), 2)  # weights fit the caches better


@pytest.mark.parametrize("dilation", [(1, 1), (2, 2)])
def test_blas_products_route_is_spied_accurate_and_thread_independent(dilation, monkeypatch):
    """With tile blocks on, convolutions past the weight threshold run on whole arrays (spied), within
    F(2x2, 3x3)'s bound of float64 and the same bits at 1 and 2 threads (one BLAS call per position)."""
    from tidlx.emulator.fast import _winograd

    monkeypatch.setattr(_winograd, "BLAS_MIN_CHANNEL_PAIRS", 32 * 40)
    whole = []
    real = _winograd._conv3x3_f23
    monkeypatch.setattr(_winograd, "_conv3x3_f23", lambda *a: whole.append(a[0].shape) or real(*a))
    rng = np.random.default_rng(sum(dilation))
    x = rand(rng, (1, 40, 30, 29))
    wt = rand(rng, (32, 40, 3, 3))
    wt.setflags(write=False)
    pads = (dilation[0],) * 4
    ref = fast_reference_conv(x, dilated_kernel(wt, dilation), pads)
    results = run_in_each_thread_config(
        lambda: run_kernel("nn.conv2d", [x, wt], padding=pads, dilation=dilation))
    assert len(whole) == len(THREAD_CONFIGS)
    assert relative_max_error(results[0], ref) <= 3e-6
    assert all(r.tobytes() == results[0].tobytes() for r in results[1:])
    monkeypatch.setattr(_winograd, "BLAS_MIN_CHANNEL_PAIRS", 32 * 40 + 1)
    run_kernel("nn.conv2d", [x, wt], padding=pads, dilation=dilation)
    assert len(whole) == len(THREAD_CONFIGS)  # below the threshold: tile blocks


@pytest.mark.parametrize("dtype,mode,bound", [("float64", "auto", 1e-12), ("float32", "4", 3e-5)])
def test_dilated_winograd_in_float64_and_f43(dtype, mode, bound, monkeypatch):
    """float64 (F(4x4, 3x3) from 28x28 phases, whole arrays) and the F(4x4, 3x3) mode take phases too."""
    from tidlx.emulator.fast import _winograd

    tiles = []
    real = _winograd.tile_size
    monkeypatch.setattr(_winograd, "tile_size", lambda *a: tiles.append(real(*a)) or tiles[-1])
    rng = np.random.default_rng(9)
    x = rand(rng, (1, 16, 60, 58)).astype(dtype)
    wt = rand(rng, (16, 16, 3, 3)).astype(dtype)
    ref = fast_reference_conv(x, dilated_kernel(wt, (2, 2)), (2, 2, 2, 2))
    with using_config(EmulatorConfig(winograd=mode)):
        got = run_kernel("nn.conv2d", [x, wt], padding=(2, 2, 2, 2), dilation=(2, 2))
    assert got.dtype == np.dtype(dtype) and tiles == [4]  # 30x29 phases
    assert relative_max_error(got, ref) <= bound


def test_blas_route_sums_channels_in_chunks(monkeypatch):
    """The BLAS route's products add chunk sums of BLAS_CHANNEL_CHUNK channels (spied): the same bits
    as one BLAS product per chunk added in order (whether that beats one BLAS call over all 2048
    channels depends on OpenBLAS's kernels and cache settings: under 0.75x its RMS error on an Intel VM,
    0.97x on a Zen 5 VM with OPENBLAS_CORETYPE=Haswell), and exact chunk bounds hold for channel
    counts that are no multiple of the chunk."""
    from tidlx.emulator.fast import _winograd
    from tidlx.emulator.fast._jit import winograd_chunked_products

    rng = np.random.default_rng(12)
    u = np.abs(rng.standard_normal((2, 64, 2048))).astype(np.float32)
    v = np.abs(rng.standard_normal((2, 2048, 96))).astype(np.float32)
    exact = np.matmul(u.astype(np.float64), v.astype(np.float64))
    chunked = np.empty((2, 64, 96), np.float32)
    chunk = _winograd.BLAS_CHANNEL_CHUNK
    winograd_chunked_products(u, v, chunked, chunk, 0, 2)
    expected = np.matmul(u[:, :, :chunk], v[:, :chunk])
    for k0 in range(chunk, 2048, chunk):
        expected += np.matmul(u[:, :, k0:k0 + chunk], v[:, k0:k0 + chunk])
    np.testing.assert_array_equal(chunked, expected)
    assert np.abs(chunked - exact).max() <= 1e-6 * np.abs(exact).max()
    odd = np.empty((2, 64, 96), np.float32)
    winograd_chunked_products(u[:, :, :150], v[:, :150], odd, 64, 0, 2)
    ref = np.matmul(u[:, :, :150].astype(np.float64), v[:, :150].astype(np.float64))
    assert np.abs(odd - ref).max() <= 1e-5 * np.abs(ref).max()

    flags = []
    real = _winograd._products
    monkeypatch.setattr(_winograd, "_products",
                        lambda u, v, m, chunked=False: flags.append(chunked) or real(u, v, m, chunked))
    monkeypatch.setattr(_winograd, "BLAS_MIN_CHANNEL_PAIRS", 16 * 16)
    x = rand(rng, (1, 16, 16, 16))
    wt = rand(rng, (16, 16, 3, 3))
    run_kernel("nn.conv2d", [x, wt], padding=(1, 1, 1, 1))
    with using_config(EmulatorConfig(tile_blocks=False)):
        run_kernel("nn.conv2d", [x, wt], padding=(1, 1, 1, 1))
    assert flags == [True, False]  # whole arrays by config keep one BLAS call per position


DIRECT_CASES = [
    # (N, C, H, W, O, kh, kw, strides, pads(t,l,b,r), dilation)
    (1, 12, 9, 9, 8, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),        # one panel of 8 outputs
    (2, 40, 7, 6, 17, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),       # channel chunks, a partial panel, batch 2
    (1, 12, 11, 10, 9, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1)),      # stride 2: four phase planes
    (1, 10, 13, 12, 8, 3, 3, (3, 2), (0, 2, 1, 0), (1, 1)),      # strides 3 x 2, asymmetric pads
    (1, 12, 12, 12, 10, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2)),     # dilated
    (1, 12, 10, 11, 8, 3, 3, (2, 1), (3, 1, 2, 2), (2, 3)),      # dilated and strided, pads past the reach
    (1, 9, 9, 9, 8, 5, 5, (1, 1), (2, 2, 2, 2), (1, 1)),         # 5x5
    (1, 24, 6, 8, 8, 1, 3, (1, 1), (0, 1, 0, 1), (1, 1)),        # 1x3
    (1, 12, 3, 3, 8, 3, 3, (3, 3), (0, 0, 0, 0), (1, 1)),        # one output pixel
]


def _direct_calls(monkeypatch):
    """Spies op_conv.DirectConv's runs (a list that grows by one per run)."""
    from tidlx.emulator.fast import op_conv

    calls = []
    real = op_conv.DirectConv.__call__
    monkeypatch.setattr(op_conv.DirectConv, "__call__", lambda self, x, tail=None: calls.append(1) or real(self, x, tail))
    return calls


@pytest.mark.parametrize("case", DIRECT_CASES)
def test_direct_route_matches_naive_loops_with_the_same_bits_at_any_thread_count(case, monkeypatch):
    """Dense float32 convolutions with more than a few channels run on the direct route (spied):
    within 1e-5 of a float64 naive sum, the same bits at 1 and 2 numba threads and on the pool."""
    n, c, h, w, o, kh, kw, strides, pads, dilation = case
    calls = _direct_calls(monkeypatch)
    rng = np.random.default_rng(sum(case[:7]))
    x = rand(rng, (n, c, h, w))
    wt = rand(rng, (o, c, kh, kw))
    ref = naive_conv_nchw(x, wt, strides, pads, dilation, 1)
    results = run_in_each_thread_config(lambda: run_kernel("nn.conv2d", [x, wt], strides=strides, padding=pads,
                                                           dilation=dilation))
    assert len(calls) == len(THREAD_CONFIGS)
    assert results[0].shape == ref.shape
    assert relative_max_error(results[0], ref) <= 1e-5
    assert all(r.tobytes() == results[0].tobytes() for r in results[1:])


@pytest.mark.parametrize("sh, sw, pt, pl, height, width", [
    (2, 2, 1, 1, 11, 10), (2, 2, 1, 1, 12, 13), (1, 2, 0, 0, 7, 9), (3, 2, 2, 3, 10, 11), (2, 2, 0, 2, 9, 8),
    (2, 3, 1, 1, 9, 10), (1, 1, 2, 1, 6, 7)])
@pytest.mark.parametrize("bands", [1, 2, 5])
def test_phase_planes_hold_each_input_float_at_its_phase_and_place(sh, sw, pt, pl, height, width, bands):
    """_jit.fill_phase_planes against its definition: plane (c, a, b) row r column k holds input row
    r * sh + a - pt, column k * sw + b - pl, zero outside the image (stride-2 columns take a vector
    path of their own), whether each unit fills a channel's whole planes or a band of their rows."""
    from tidlx.emulator.fast import _jit

    rng = np.random.default_rng(height * width + pl)
    x = rng.standard_normal((2, 3, height, width)).astype(np.float32)
    rows, grid_w = -(-(height + pt + 1) // sh), -(-(width + pl + 1) // sw)  # past the image's last float
    plane = rows * grid_w
    xp = np.full((2, 3 * sh * sw * plane), np.nan, np.float32)
    _jit.fill_phase_planes(x, xp, sh, sw, pt, pl, rows, grid_w, bands, 0, 6 * bands)
    want = np.zeros((2, 3, sh, sw, rows, grid_w), np.float32)
    for a in range(sh):
        for b in range(sw):
            for r in range(rows):
                for k in range(grid_w):
                    y, z = r * sh + a - pt, k * sw + b - pl
                    if 0 <= y < height and 0 <= z < width:
                        want[:, :, a, b, r, k] = x[:, :, y, z]
    assert xp.reshape(want.shape).tobytes() == want.tobytes()


@pytest.mark.parametrize("count", [1, 15, 16, 17, 56])
def test_store_rows_gives_the_tail_rows_bits_in_every_mode(count):
    """_microkernel.store_rows (the convolutions' stores) against _jit.tail_row on copied rows, for
    each of its 36 modes (no activation, hard-swish, swish): the same bits (NaN, infinities and -0
    included), nothing past ``count``."""
    from numba import njit

    from tidlx.emulator.fast import _jit, _microkernel

    assert _microkernel.AVAILABLE, "the microkernel did not compile for this CPU"
    store_rows = _microkernel.store_rows

    @njit
    def by_kernel(src, dst, scale, shift, other, count, mode, lo, hi, act_consts):
        store_rows(src.ctypes.data, src.shape[1], dst.ctypes.data, dst.shape[1], src.shape[0], count,
                   scale.ctypes.data, shift.ctypes.data, other.ctypes.data, other.shape[1], mode, lo, hi,
                   act_consts.ctypes.data)

    @njit
    def by_rows(src, dst, scale, shift, other, count, has_affine, has_add, relu, clamp, lo, hi, act, act_consts):
        tmp = np.empty(count, np.float32)
        for r in range(src.shape[0]):
            dst[r, :count] = src[r, :count]
            _jit.tail_row(dst[r, :count], other[r, :count], scale[r], shift[r], tmp, has_affine, has_add, relu, clamp,
                          lo, hi, act, act_consts)

    rng = np.random.default_rng(count)
    src = (rng.standard_normal((5, 64)) * 4).astype(np.float32)
    src[0, :3], src[1, :2] = [np.nan, -0.0, 0.0], [np.inf, -np.inf]
    src[2, :4] = [-88.7, -95.0, 85.0, 1e-3]  # the swish's clamp and exp edges
    other = rng.standard_normal((5, 70)).astype(np.float32)
    scale, shift = rng.standard_normal(5).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    lo, hi = np.float32(-1.5), np.float32(2.5)
    hard_swish = np.array([1 / 6, 0.5, 0, 1], np.float32)
    modes = set()
    for act in (_jit.ACT_NONE, _jit.ACT_HARD_SWISH, _jit.ACT_SWISH):
        for has_affine in (False, True):
            for has_add in (False, True):
                for relu, clamp in ((False, False), (True, False), (False, True)):
                    mode = _jit.store_mode(True, has_affine, has_add, relu, clamp, act)
                    modes.add(mode)
                    got, want = np.full((5, 60), 7.0, np.float32), np.full((5, 60), 7.0, np.float32)
                    by_kernel(src, got, scale, shift, other, count, mode, lo, hi, hard_swish)
                    by_rows(src, want, scale, shift, other, count, has_affine, has_add, relu, clamp, lo, hi, act,
                            hard_swish)
                    assert got.tobytes() == want.tobytes(), (act, has_affine, has_add, relu, clamp)
    assert modes == set(range(36))

@pytest.mark.parametrize("vectors", [1, 2, 3])
def test_direct_kernel_widths_and_chunks_give_the_same_bits(vectors, monkeypatch):
    """Each output is one ordered sum per chunk of channels whatever the kernel's width (1..3 vectors
    a call) and however the positions are cut in chunks and strips."""
    from tidlx.emulator.fast import op_conv

    rng = np.random.default_rng(5)
    x = rand(rng, (1, 40, 23, 21))
    wt = rand(rng, (24, 40, 3, 3))
    want = op_conv.DirectConv(x.shape, wt, (1, 1), (1, 1), (1, 1, 1, 1), (23, 21))(x)
    monkeypatch.setattr(op_conv, "_direct_vectors", lambda positions, lanes: vectors)
    monkeypatch.setattr(op_conv, "DIRECT_CHUNK_FLOATS", 40 * 100)  # chunks of ~100 positions
    monkeypatch.setattr(op_conv, "DIRECT_STRIP_CALLS", 1)
    got = op_conv.DirectConv(x.shape, wt, (1, 1), (1, 1), (1, 1, 1, 1), (23, 21))
    assert got.vectors == vectors and got.splits[False][2] > 3 * 2
    assert got(x).tobytes() == want.tobytes()


def test_direct_route_counts_the_chunks_it_cuts(monkeypatch):
    """Positions per chunk are rounded up to whole kernel calls, which can leave fewer chunks than the
    chunk size asked for (811 positions, 7 chunks of at most 128 asked: 6 chunks of 144 cut): the plan's
    units count the chunks cut. Counting the asked ones sent the last units past the image's input,
    into memory out of bounds (a double free in a ResNet-18 run)."""
    from tidlx.emulator.fast import op_conv

    rng = np.random.default_rng(8)
    x = rand(rng, (1, 64, 56, 56))
    wt = rand(rng, (32, 64, 3, 3))
    want = op_conv.DirectConv(x.shape, wt, (2, 2), (1, 1), (1, 1, 1, 1), (28, 28))(x)
    monkeypatch.setattr(op_conv, "DIRECT_CHUNK_FLOATS", 1 << 15)
    conv = op_conv.DirectConv(x.shape, wt, (2, 2), (1, 1), (1, 1, 1, 1), (28, 28))
    positions, columns = 27 * conv.grid_w + 28, conv.vectors * conv.lanes
    asked = -(-positions // max(columns, (1 << 15) // (64 * 4)))
    for spatial in (False, True):
        bands, per_chunk, units = conv.splits[spatial]
        assert units == -(-positions // per_chunk) * conv.packed.shape[0]
    assert -(-positions // conv.splits[False][1]) < asked  # the case this test is for
    assert conv(x).tobytes() == want.tobytes()


@pytest.mark.parametrize("threads", [1, 2])
def test_direct_route_by_bands_gives_the_same_bits(threads, monkeypatch):
    """Where the input outweighs the weights the threads take bands of positions (and fill the phase
    planes by bands): the same sums, the same bits as panels of output channels, at any thread count."""
    from tidlx.emulator import EmulatorConfig
    from tidlx.emulator.fast import _parallel, op_conv

    rng = np.random.default_rng(9)
    x = rand(rng, (2, 16, 30, 29))
    wt = rand(rng, (24, 16, 3, 3))
    monkeypatch.setattr(_parallel, "_thread_count", lambda: 3)
    conv = op_conv.DirectConv(x.shape, wt, (1, 1), (1, 1), (1, 1, 1, 1), (30, 29))
    assert conv.splits[True][0] == 3 and conv.splits[False][0] == 1
    results = {}
    with _parallel.run_context(EmulatorConfig(threads=threads, adapt=False)):
        for spatial in (True, False):  # the bands first: no earlier call's planes in the reused memory
            monkeypatch.setattr(op_conv, "DIRECT_SPATIAL", spatial)
            results[spatial] = conv(x)
    assert results[True].tobytes() == results[False].tobytes()
    exact = naive_conv_nchw(x.astype(np.float64), wt.astype(np.float64), (1, 1), (1, 1, 1, 1), (1, 1), 1)
    assert np.abs(results[True] - exact).max() <= 1e-5 * np.abs(exact).max()


def test_direct_route_sums_long_channel_runs_in_chunks():
    """96 channels x 9 taps: chained sums of op_conv.DIRECT_CHANNEL_CHUNK channels' taps, added in order (as
    Winograd's products are), not one chain of 864 terms: against float64, clearly closer than one float32 chain."""
    from tidlx.emulator.fast import op_conv

    rng = np.random.default_rng(6)
    x = rng.uniform(0, 1, (1, 96, 8, 8)).astype(np.float32)  # all-positive terms: a chain's error adds up
    wt = rng.uniform(0, 1, (8, 96, 3, 3)).astype(np.float32)
    got = op_conv.DirectConv(x.shape, wt, (1, 1), (1, 1), (1, 1, 1, 1), (8, 8))(x)
    exact = naive_conv_nchw(x, wt, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    chain = np.zeros(exact.shape, np.float32)  # one float32 chain over (c, i, j), for all outputs at once
    for c in range(96):
        for i in range(3):
            for j in range(3):
                chain += xp[:, c:c + 1, i:i + 8, j:j + 8] * wt[None, :, c, i, j, None, None]
    assert np.abs(got - exact).max() < 0.75 * np.abs(chain - exact).max()


def test_direct_route_leaves_large_winograd_products_and_stems_to_their_routes():
    """FCN's 2048 -> 512 head at 32x32 stays on Winograd's BLAS products; a ResNet layer does not;
    the 3-channel stems keep the few-channel route; 1x1 and grouped convolutions are not direct."""
    from tidlx.emulator.fast import op_conv

    config = EmulatorConfig()
    assert op_conv.winograd_preferred((1, 2048, 32, 32), (512, 2048, 3, 3), (1, 1), (1, 1), (32, 32), config)
    assert not op_conv.winograd_preferred((1, 64, 56, 56), (64, 64, 3, 3), (1, 1), (1, 1), (56, 56), config)
    f32 = np.dtype(np.float32)
    assert op_conv.direct_static((1, 64, 56, 56), np.zeros((64, 64, 3, 3), np.float32), 1, f32)
    assert not op_conv.direct_static((1, 3, 224, 224), np.zeros((32, 3, 3, 3), np.float32), 1, f32)
    assert not op_conv.direct_static((1, 64, 56, 56), np.zeros((64, 64, 1, 1), np.float32), 1, f32)
    assert not op_conv.direct_static((1, 64, 56, 56), np.zeros((64, 32, 3, 3), np.float32), 2, f32)
    assert not op_conv.direct_static((1, 64, 56, 56), np.zeros((64, 64, 3, 3), np.float64), 1, np.dtype(np.float64))


def test_direct_plans_are_cached_per_weights_and_die_with_them():
    from tidlx.emulator.fast import _weights

    rng = np.random.default_rng(7)
    x = rand(rng, (1, 16, 10, 10))
    wt = rand(rng, (16, 16, 3, 3))
    wt.setflags(write=False)
    first = run_kernel("nn.conv2d", [x, wt], padding=(1, 1, 1, 1))
    key = id(wt)
    assert any(v[0] == "direct" for v in _weights._cache[key][1])
    assert run_kernel("nn.conv2d", [x, wt], padding=(1, 1, 1, 1)).tobytes() == first.tobytes()
    del wt
    assert key not in _weights._cache


# --- 1x1 convolutions on the pointwise tile kernel (op_conv.PointwiseConv) -------------------------

def _pointwise_or_skip():
    from tidlx.emulator.fast import _microkernel

    assert _microkernel.AVAILABLE, "the microkernel did not compile for this CPU"
    if _microkernel.LANES != 16:
        pytest.skip("the pointwise kernel runs on AVX-512 hosts only (16-float vectors of output channels)")
    assert _microkernel.pointwise_available(), "the pointwise kernel did not compile on this AVX-512 host"


def test_the_pointwise_kernel_compiles_only_when_a_convolution_needs_it():
    """Importing the emulator and running a model without such a 1x1 convolution leaves the pointwise
    kernel uncompiled (~0.2 s of LLVM); planning one compiles it."""
    import subprocess
    import sys

    _pointwise_or_skip()
    code = (
        "import numpy as np\n"
        "from tidlx.emulator import run\n"
        "from tidlx.emulator.fast import _microkernel, op_conv\n"
        "from tidlx.ir import Function, IRModule, TensorType, Var, call, const\n"
        "x = Var('x', TensorType((1, 8, 6, 6), 'float32'))\n"
        "w = const(np.ones((8, 8, 3, 3), np.float32))\n"
        "run(IRModule({'main': Function([x], call('nn.conv2d', x, w, padding=(1, 1, 1, 1)))}),"
        " {'x': np.ones((1, 8, 6, 6), np.float32)})\n"
        "print(_microkernel._pointwise_state['ready'])\n"
        "print(op_conv.pointwise_usable(160, 960, 49, np.float32), _microkernel._pointwise_state['ready'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["None", "True", "True"]


@pytest.mark.parametrize("o, c, positions", [(16, 96, 1), (64, 96, 3), (100, 130, 7), (160, 960, 49), (96, 576, 196),
                                             (48, 200, 13), (128, 64, 15), (64, 65, 22)])
def test_pointwise_kernel_gives_the_same_bits_however_the_channels_are_cut(o, c, positions, monkeypatch):
    """PointwiseConv against float64 (every tile shape: 8, 4, 2 and 1 positions, 1..3 vectors of
    channels, a last vector of channels partly padding, channels not a multiple of the chunk), NaN and
    infinities reaching the outputs they reach in the product, and the same bits whatever the count
    of CPUs the channels are first cut by and the threads of the run."""
    from tidlx.emulator.fast import _parallel, op_conv

    _pointwise_or_skip()
    rng = np.random.default_rng(o + c + positions)
    w = rand(rng, (o, c))
    x = rand(rng, (c, positions))
    if positions > 1:  # (one position: every output would be NaN)
        x[3, 0], x[5, -1] = np.nan, np.inf
    want = w.astype(np.float64) @ x.astype(np.float64)
    results = []
    for cpus in (1, 2, 3):
        monkeypatch.setattr(_parallel, "_thread_count", lambda cpus=cpus: cpus)
        conv = op_conv.PointwiseConv(w)
        assert conv.widths.sum() == -(-o // 16) and conv.widths.max() <= 3
        for threads in (1, 2):
            with _parallel.run_context(EmulatorConfig(threads=threads, adapt=False)):
                results.append(conv(x))
    got = results[0]
    assert got.shape == (o, positions) and all(r.tobytes() == got.tobytes() for r in results[1:])
    assert (np.isnan(got) == np.isnan(want)).all() and (np.isinf(got) == np.isinf(want)).all()
    finite = np.isfinite(want)
    assert np.abs(got[finite] - want[finite]).max() <= 2e-6 * np.abs(want[finite]).max()


def test_pointwise_kernel_sums_long_channel_runs_in_chunks():
    """960 channels: ordered FMA chains of op_conv.POINTWISE_CHUNK channels, the chain sums added in
    order, not one chain of 960 terms: against float64, clearly closer than one float32 chain."""
    from tidlx.emulator.fast import op_conv

    _pointwise_or_skip()
    rng = np.random.default_rng(14)
    w = rng.uniform(0, 1, (64, 960)).astype(np.float32)  # all-positive terms: a chain's error adds up
    x = rng.uniform(0, 1, (960, 49)).astype(np.float32)
    got = op_conv.PointwiseConv(w)(x)
    exact = w.astype(np.float64) @ x.astype(np.float64)
    chain = np.zeros(exact.shape, np.float32)
    for q in range(960):
        chain += w[:, q:q + 1] * x[q]
    assert np.abs(got - exact).max() < 0.5 * np.abs(chain - exact).max()


def test_pointwise_kernel_takes_the_small_maps_it_is_faster_on(monkeypatch):
    """pointwise_usable: float32 1x1 products of at most 28x28 positions with enough channels both
    ways and few padded lanes; a run of such a convolution calls the kernel, prepared or not, and
    gives the bits of the generic kernel; POINTWISE_LANES off leaves it to the sgemm."""
    from tidlx.emulator.fast import _jit, op_conv

    _pointwise_or_skip()
    usable = op_conv.pointwise_usable
    assert usable(160, 960, 49, np.float32) and usable(96, 576, 196, np.float32) and usable(128, 512, 784, np.float32)
    assert not usable(384, 64, 196, np.float32)      # few input channels
    assert not usable(32, 192, 784, np.float32)      # few output channels
    assert not usable(256, 64, 3136, np.float32)     # a large map
    assert not usable(88, 960, 49, np.float64)       # float64
    assert usable(72, 960, 49, np.float32)           # 80 lanes for 72: 1.11x
    assert not usable(68, 960, 49, np.float32)       # 80 lanes for 68: 1.18x
    from tidlx.emulator import run
    from tidlx.ir import Function, IRModule, TensorType, Var, call, const

    calls = []
    for name in ("pointwise_lanes", "pointwise_lanes_blocks"):
        real = getattr(_jit, name)
        monkeypatch.setattr(_jit, name, lambda *a, real=real: calls.append(1) or real(*a))
    rng = np.random.default_rng(15)
    x = rand(rng, (1, 192, 14, 14))
    w = rand(rng, (96, 192, 1, 1))
    var = Var("x", TensorType(x.shape, "float32"))
    mod = IRModule({"main": Function([var], call("nn.relu", call("nn.conv2d", var, const(w), channels=96,
                                                                   kernel_size=(1, 1))))})
    results = {}
    for lanes in (True, False):
        monkeypatch.setattr(op_conv, "POINTWISE_LANES", lanes)
        for prepare in (True, False):
            calls.clear()
            results[lanes, prepare] = run(mod, {"x": x}, config=EmulatorConfig(prepare=prepare))[0]
            assert bool(calls) == lanes, (lanes, prepare)
    assert results[True, True].tobytes() == results[True, False].tobytes()
    assert results[False, True].tobytes() == results[False, False].tobytes()
    a, b = results[True, True].astype(np.float64), results[False, True]
    assert np.abs(a - b).max() <= 3e-6 * np.abs(b).max()  # another summation order than the sgemm's
