"""Fused element-wise chains (emulator/fast/_fusion.py): bit-identical to unfused runs, in place only on
arrays no one else holds, and counted in RunStats like the unfused ops. Fused runs here leave the
chains unprepared (``prepare=False``), so that _fusion.py's own path runs; prepared chains are
compared with these in test_emu_prepared.py."""

import numpy as np
import pytest

from tidlx.emulator import EmulatorConfig, RunStats, run
from tidlx.emulator.fast import _fusion
from tidlx.emulator.interpreter import CUSTOM, plan_of
from tidlx.ir import Function, IRModule, TensorType, TupleGetItem, Var, call, const


def _bn(x, channels, seed):
    rng = np.random.default_rng(seed)
    g, b, m = (rng.uniform(-1, 1, channels).astype(np.float32) for _ in range(3))
    v = rng.uniform(0.5, 2, channels).astype(np.float32)
    return TupleGetItem(call("nn.batch_norm", x, const(g), const(b), const(m), const(v), epsilon=1e-5), 0)


def _conv(x, c_in, c_out, seed, k=3):
    w = np.random.default_rng(seed).normal(0, 0.3, (c_out, c_in, k, k)).astype(np.float32)
    return call("nn.conv2d", x, const(w), padding=(k // 2,) * 4, channels=c_out, kernel_size=(k, k))


def residual_block(shape):
    """conv-bn-relu, conv-bn, + conv-bn shortcut, relu: the ResNet chains fusion is for."""
    n, c, h, w = shape
    x = Var("x", TensorType(shape, "float32"))
    y = call("nn.relu", _bn(_conv(x, c, 2 * c, 1), 2 * c, 2))
    y = _bn(_conv(y, 2 * c, 2 * c, 3), 2 * c, 4)
    short = _bn(_conv(x, c, 2 * c, 5, k=1), 2 * c, 6)
    return Function([x], call("nn.relu", call("add", y, short)))


def _run_both(make, inputs):
    """(fused outputs, unfused outputs, fused module) for fresh modules built by ``make``."""
    results = []
    for enabled in (True, False):
        mod = IRModule({"main": make()})
        results.append((run(mod, inputs, config=EmulatorConfig(fuse=enabled, prepare=False)), mod))
    return results[0][0], results[1][0], results[0][1]


def fused_chains(mod):
    plan = plan_of(mod, "main", config=EmulatorConfig(fuse=True, prepare=False))
    return [_fusion.describe(s[3]) for s in plan.steps if s[0] == CUSTOM]


@pytest.mark.parametrize("shape", [(1, 8, 32, 32), (2, 3, 5, 5)])  # numba paths / small numpy paths
def test_residual_block_fuses_and_matches_unfused_bit_for_bit(shape):
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    fused, unfused, mod = _run_both(lambda: residual_block(shape), {"x": x})
    np.testing.assert_array_equal(fused[0], unfused[0])
    assert sorted(fused_chains(mod)) == ["nn.conv2d+nn.batch_norm", "nn.conv2d+nn.batch_norm+add+nn.relu",
                                         "nn.conv2d+nn.batch_norm+nn.relu"]


def test_values_read_twice_are_not_written_in_place():
    shape = (1, 4, 16, 16)

    def make():
        x = Var("x", TensorType(shape, "float32"))
        y = _conv(x, 4, 4, 1)
        # y is read by the batch norm and by the add: the chain must stop at y
        return Function([x], call("add", call("nn.relu", _bn(y, 4, 2)), y))

    x = np.random.default_rng(1).uniform(-1, 1, shape).astype(np.float32)
    fused, unfused, mod = _run_both(make, {"x": x})
    np.testing.assert_array_equal(fused[0], unfused[0])
    assert fused_chains(mod) == ["nn.relu+add"]  # a batch norm (a tuple) is no chain head


def test_broadcast_add_falls_back_to_the_kernel():
    shape = (1, 4, 16, 16)
    bias = np.arange(4, dtype=np.float32).reshape(1, 4, 1, 1)

    def make():
        x = Var("x", TensorType(shape, "float32"))
        return Function([x], call("nn.relu", call("add", _conv(x, 4, 4, 1), const(bias))))

    x = np.random.default_rng(2).uniform(-1, 1, shape).astype(np.float32)
    fused, unfused, mod = _run_both(make, {"x": x})
    np.testing.assert_array_equal(fused[0], unfused[0])
    assert fused_chains(mod) == ["nn.conv2d+add+nn.relu"]


def test_chains_after_views_of_constants_leave_the_constants_alone():
    data = np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64)
    kept = data.copy()
    x = Var("x", TensorType((64 * 64,), "float32"))
    body = call("add", call("nn.relu", call("reshape", const(data), newshape=(64 * 64,))), x)
    mod = IRModule({"main": Function([x], body)})
    ones = np.ones(64 * 64, np.float32)
    for _ in range(2):
        (out,) = run(mod, {"x": ones}, config=EmulatorConfig())
        np.testing.assert_array_equal(out, np.maximum(kept.reshape(-1), 0) + 1)
    np.testing.assert_array_equal(mod["main"].body.args[0].args[0].args[0].data, kept)
    np.testing.assert_array_equal(ones, 1)


def test_fused_ops_are_counted_in_run_stats():
    shape = (1, 4, 8, 8)
    mod = IRModule({"main": residual_block(shape)})
    stats = RunStats()
    run(mod, {"x": np.zeros(shape, np.float32)}, stats=stats, config=EmulatorConfig())
    assert stats.kernel_calls == {"nn.conv2d": 3, "nn.batch_norm": 3, "nn.relu": 2, "add": 1}
    assert stats.steps == 3 + 3 * 2 + 2 + 1  # a batch norm is an op and a TupleGetItem


def test_a_fused_op_failing_names_its_own_binding(monkeypatch):
    shape = (1, 4, 8, 8)
    mod = IRModule({"main": residual_block(shape)})
    from tidlx.emulator import EmulatorError

    def broken(x, others, attrs, in_place):
        raise ValueError("broken relu")

    plan = plan_of(mod, "main", config=EmulatorConfig(fuse=True, prepare=False))
    steps = []
    for step in plan.steps:
        if step[0] == CUSTOM:
            stages = tuple(s._replace(epilogue=broken) if s.op_name == "nn.relu" else s for s in step[3].stages)
            step = step[:3] + (step[3]._replace(stages=stages, tail=False),) + step[4:]
        steps.append(step)
    monkeypatch.setattr(plan, "steps", tuple(steps))
    with pytest.raises(EmulatorError, match=r"nn\.relu.*broken relu"):
        run(mod, {"x": np.zeros(shape, np.float32)}, config=EmulatorConfig(fuse=True, prepare=False))


@pytest.mark.parametrize("tail", [("bn", "add"), ("add", "relu"), ("bn", "relu"), ("bn", "add", "relu")])
def test_conv_tails_run_in_one_pass_bit_for_bit(tail, monkeypatch):
    """Each in-order subset of batch_norm -> add -> relu runs as one kernels/_tail.py pass (large
    enough here to run in parallel blocks) and equals the unfused ops exactly."""
    shape = (1, 64, 64, 64)
    other = np.random.default_rng(3).uniform(-1, 1, shape).astype(np.float32)

    def make():
        x = Var("x", TensorType(shape, "float32"))
        y = _conv(x, 64, 64, 1, k=1)
        if "bn" in tail:
            y = _bn(y, 64, 2)
        if "add" in tail:
            y = call("add", const(other), y)
        if "relu" in tail:
            y = call("nn.relu", y)
        return Function([x], y)

    passes = []
    original = _fusion.run_tail
    monkeypatch.setattr(_fusion, "run_tail", lambda *a: passes.append(original(*a)) or passes[-1])  # a spy
    x = np.random.default_rng(4).uniform(-1, 1, shape).astype(np.float32)
    fused, unfused, mod = _run_both(make, {"x": x})
    assert len(passes) == 1 and passes[0] is not None
    np.testing.assert_array_equal(fused[0], unfused[0])
    assert fused[0].tobytes() == unfused[0].tobytes()  # signed zeros too


@pytest.mark.parametrize("tail", [("bias", "relu"), ("bias", "clip"), ("bias", "add", "clip"), ("bn", "clip"),
                                  ("add", "clip"), ("bias",), ("clip",)])
@pytest.mark.parametrize("shape", [(1, 64, 64, 64), (1, 8, 5, 5)])  # numba passes / small numpy paths
def test_bias_add_and_clip_fuse_bit_for_bit(tail, shape, monkeypatch):
    """bias_add (the affine step with scale 1) and clip (ReLU6, the activation's place) join conv
    chains and one-pass tails; NaN, infinities and signed zeros come out as unfused."""
    c = shape[1]
    rng = np.random.default_rng(5)
    other = rng.uniform(-1, 1, shape).astype(np.float32)
    bias = rng.uniform(-1, 1, c).astype(np.float32)
    bias[:4] = [0.0, -0.0, np.inf, np.nan]

    def make():
        x = Var("x", TensorType(shape, "float32"))
        y = _conv(x, c, c, 1, k=1)
        if "bias" in tail:
            y = call("nn.bias_add", y, const(bias))
        if "bn" in tail:
            y = _bn(y, c, 2)
        if "add" in tail:
            y = call("add", const(other), y)
        if "clip" in tail:
            y = call("clip", y, a_min=0.0, a_max=6.0)
        if "relu" in tail:
            y = call("nn.relu", y)
        return Function([x], y)

    passes = []
    original = _fusion.run_tail
    monkeypatch.setattr(_fusion, "run_tail", lambda *a: passes.append(original(*a)) or passes[-1])  # a spy
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    x[0, :, 0, 0] = -0.0  # a 1x1 conv of zeros: signed zeros into the tail
    x[0, 0, 1, 1] = np.nan
    fused, unfused, mod = _run_both(make, {"x": x})
    assert fused_chains(mod) == ["+".join(["nn.conv2d"] + [{"bias": "nn.bias_add", "bn": "nn.batch_norm", "relu": "nn.relu"}.get(t, t)
                                                          for t in tail])]
    from tidlx.emulator.fast._tail import SMALL

    assert len(passes) == (1 if len(tail) > 1 else 0)
    assert all((p is not None) == (x.size >= SMALL) for p in passes)  # small maps: the epilogues one by one
    assert fused[0].tobytes() == unfused[0].tobytes()


@pytest.mark.parametrize("has_affine,has_add", [(True, True), (True, False), (False, True)])
def test_tail_clamp_is_np_clip_on_special_values(has_affine, has_add):
    """The one-pass clamp keeps what np.clip keeps: NaN (with its sign), -0 at a bound of 0, infinities."""
    from tidlx.emulator.fast._jit import conv_tail

    special = np.array([-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, -1, 7, 3, 6, 1e-30, -1e-30], np.float32)
    x = np.tile(special, (2, 1))
    scale = np.ones(2, np.float32)
    shift = np.full(2, -0.0, np.float32)  # x * 1 + -0 keeps -0
    other = np.full_like(x, -0.0)
    expected = x.copy()
    if has_affine:
        expected = expected * scale[:, None] + shift[:, None]
    if has_add:
        expected = expected + other
    expected = np.clip(expected, np.float32(0), np.float32(6))
    conv_tail(x, 2, scale, shift, other, has_affine, has_add, False, True, np.float32(0), np.float32(6), 0, 2)
    assert x.tobytes() == expected.tobytes()


@pytest.mark.parametrize("has_affine,has_add,relu,clamp", [(a, b, r, c) for a in (False, True) for b in (False, True)
                                                           for r, c in ((False, False), (True, False), (False, True))
                                                           if a or b or r or c])
def test_stored_tail_pass_gives_the_row_loop_bits(has_affine, has_add, relu, clamp):
    """The float32 tail pass through the store kernel (_jit.conv_tail_stored: the rows of one image at
    a time) against conv_tail's row loop: the same bits in every mode (NaN, infinities, -0), over rows
    of two images started and stopped mid-image, with a residual whose rows are spaced wider than x's."""
    from tidlx.emulator.fast import _microkernel
    from tidlx.emulator.fast._jit import conv_tail, conv_tail_stored

    assert _microkernel.AVAILABLE, "the microkernel did not compile for this CPU"
    rng = np.random.default_rng(16)
    channels, width = 5, 37
    x = rng.uniform(-8, 8, (2 * channels, width)).astype(np.float32)
    x[1, :6] = [-0.0, 0.0, np.nan, np.inf, -np.inf, 6.0]
    scale, shift = rng.uniform(-2, 2, channels).astype(np.float32), rng.uniform(-2, 2, channels).astype(np.float32)
    other = rng.uniform(-3, 3, (2 * channels, width + 11)).astype(np.float32)[:, :width]  # rows 48 floats apart
    lo, hi = np.float32(-1.5), np.float32(6.0)
    want, got = x.copy(), x.copy()
    conv_tail(want, channels, scale, shift, other, has_affine, has_add, relu, clamp, lo, hi, 2, 9)
    conv_tail_stored(got, channels, scale, shift, other, has_affine, has_add, relu, clamp, lo, hi, 2, 9)
    assert got.tobytes() == want.tobytes()
    assert got[:2].tobytes() == x[:2].tobytes() and got[9:].tobytes() == x[9:].tobytes()  # rows outside untouched
