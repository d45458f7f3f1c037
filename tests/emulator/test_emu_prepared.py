"""Prepared steps (emulator/fast/_prepared.py): each step specialized to its call site gives the
bits of the generic kernels and fused chains, falls back where its facts do not hold, and fails
naming the failing op's binding."""

import numpy as np
import pytest

from tidlx.emulator import EmulatorConfig, EmulatorError, RunStats, run
from tidlx.emulator.fast._fusion import Fused
from tidlx.emulator.fast._prepared import PreparedChain
from tidlx.emulator.interpreter import CUSTOM, OP, plan_of
from tidlx.ir import Function, IRModule, Tuple, TensorType, TupleGetItem, Var, call, const

PREPARED, GENERIC = EmulatorConfig(prepare=True), EmulatorConfig(prepare=False)


def _weights(rng, *shape):
    return const(rng.normal(0, 0.3, shape).astype(np.float32))


def _bn(rng, x, c):
    g, b, m = (rng.uniform(-1, 1, c).astype(np.float32) for _ in range(3))
    v = rng.uniform(0.5, 2, c).astype(np.float32)
    return TupleGetItem(call("nn.batch_norm", x, const(g), const(b), const(m), const(v), epsilon=1e-5), 0)


def _conv(rng, x, c_in, c_out, k=1, groups=1, stride=1):
    return call("nn.conv2d", x, _weights(rng, c_out, c_in // groups, k, k), padding=(k // 2,) * 4, channels=c_out,
                kernel_size=(k, k), groups=groups, strides=(stride, stride))


def mobile_block(shape, seed=0):
    """A MobileNet-style block: 1x1 expand + bias + relu, depthwise 3x3 + batch norm + clip,
    squeeze-excite on a 1x1 map (1x1 convs with bias), 1x1 project + bias + residual add, and a
    dense head: the chains the prepared forms cover."""
    rng = np.random.default_rng(seed)
    n, c, h, w = shape
    x = Var("x", TensorType(shape, "float32"))
    y = call("nn.relu", call("nn.bias_add", _conv(rng, x, c, 4 * c), _weights(rng, 4 * c)))
    y = call("clip", _bn(rng, _conv(rng, y, 4 * c, 4 * c, k=3, groups=4 * c), 4 * c), a_min=0.0, a_max=6.0)
    s = call("nn.global_avg_pool2d", y)
    s = call("nn.relu", call("nn.bias_add", _conv(rng, s, 4 * c, c), _weights(rng, c)))
    s = call("sigmoid", call("nn.bias_add", _conv(rng, s, c, 4 * c), _weights(rng, 4 * c)))
    y = call("multiply", y, s)
    y = call("add", call("nn.bias_add", _conv(rng, y, 4 * c, c), _weights(rng, c)), x)
    flat = call("nn.batch_flatten", call("nn.global_avg_pool2d", y))
    out = call("nn.bias_add", call("nn.dense", flat, _weights(rng, 10, c)), _weights(rng, 10))
    return Function([x], out)


def _module(fn):
    return IRModule({"main": fn})


def _prepared_payloads(mod):
    steps = plan_of(mod, config=PREPARED).steps
    chains = [s[3] for s in steps if s[0] == CUSTOM and isinstance(s[3], PreparedChain)]
    unprepared = [s[3].describe() for s in steps if s[0] == CUSTOM and isinstance(s[3], Fused)]
    return chains, unprepared


def _inputs(shape, seed=1):
    x = np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)
    x.reshape(-1)[:2] = -0.0  # (a NaN would reach the squeeze-excite pool and make every output NaN)
    return {"x": x}


@pytest.mark.parametrize("shape", [(1, 16, 32, 32), (1, 4, 5, 5)])  # numba passes / small numpy paths
def test_prepared_block_gives_the_generic_bits(shape):
    mod = _module(mobile_block(shape))
    inputs = _inputs(shape)
    for threads in (1, 2):
        prepared = run(mod, inputs, config=PREPARED.replace(threads=threads))
        generic = run(mod, inputs, config=GENERIC.replace(threads=threads))
        assert prepared[0].tobytes() == generic[0].tobytes()


def test_every_chain_of_the_block_is_prepared_and_its_heads_specialized():
    mod = _module(mobile_block((1, 16, 32, 32)))
    chains, unprepared = _prepared_payloads(mod)
    assert unprepared == []
    assert sorted(c.describe() for c in chains) == [
        "nn.conv2d+nn.batch_norm+clip", "nn.conv2d+nn.bias_add", "nn.conv2d+nn.bias_add+add",
        "nn.conv2d+nn.bias_add+nn.relu", "nn.conv2d+nn.bias_add+nn.relu", "nn.dense+nn.bias_add"]
    assert not any(c.head_checked for c in chains)  # 1x1, depthwise, dense: specialized heads


def test_run_stats_count_prepared_chains_like_fused_ones():
    mod = _module(mobile_block((1, 16, 32, 32)))
    inputs = _inputs((1, 16, 32, 32))
    counted = []
    for config in (PREPARED, GENERIC):
        stats = RunStats()
        run(mod, inputs, config=config, stats=stats)
        counted.append((stats.steps, stats.kernel_calls))
    assert counted[0] == counted[1]


def _tail_module(shape, other_view):
    """conv + batch norm + add + relu (a one-pass tail) whose other operand is either a plain
    array or a transposed view (reshaped into a contiguous copy for the one pass)."""
    rng = np.random.default_rng(7)
    c = shape[1]
    x = Var("x", TensorType(shape, "float32"))
    other = Var("other", TensorType(shape[::-1] if other_view else shape, "float32"))
    o = call("transpose", other, axes=(3, 2, 1, 0)) if other_view else other
    y = call("nn.relu", call("add", _bn(rng, _conv(rng, x, c, c), c), o))
    return _module(Function([x, other], y))


@pytest.mark.parametrize("other_view", [False, True])
def test_prepared_tail_matches_with_contiguous_and_strided_residuals(other_view):
    shape = (1, 16, 32, 32)
    mod = _tail_module(shape, other_view)
    rng = np.random.default_rng(8)
    other = rng.uniform(-1, 1, shape[::-1] if other_view else shape).astype(np.float32)
    inputs = {"x": _inputs(shape)["x"], "other": other}
    prepared, generic = run(mod, inputs, config=PREPARED), run(mod, inputs, config=GENERIC)
    assert prepared[0].tobytes() == generic[0].tobytes()
    chains, _ = _prepared_payloads(mod)
    assert [c.describe() for c in chains] == ["nn.conv2d+nn.batch_norm+add+nn.relu"]
    assert len(chains[0].stages) == 1  # the whole tail as one pass


def test_a_generic_head_with_a_strided_result_falls_back_to_the_fused_path():
    """An NHWC convolution read as NCHW hands back a transposed view: the prepared stages (which
    write a contiguous value in place) must not run on it."""
    rng = np.random.default_rng(9)
    shape = (1, 8, 8, 16)
    x = Var("x", TensorType(shape, "float32"))
    w = rng.normal(0, 0.3, (3, 3, 16, 16)).astype(np.float32)
    y = call("nn.conv2d", x, const(w), padding=(1, 1, 1, 1), channels=16, kernel_size=(3, 3), data_layout="NHWC",
             kernel_layout="HWIO", out_layout="NCHW")
    y = call("nn.relu", call("nn.bias_add", y, _weights(rng, 16)))
    mod = _module(Function([x], y))
    inputs = {"x": rng.uniform(-1, 1, shape).astype(np.float32)}
    assert run(mod, inputs, config=PREPARED)[0].tobytes() == run(mod, inputs, config=GENERIC)[0].tobytes()


def test_weights_that_are_not_constants_keep_the_generic_kernel():
    rng = np.random.default_rng(10)
    shape = (1, 8, 6, 6)
    x = Var("x", TensorType(shape, "float32"))
    w = Var("w", TensorType((4, 8, 1, 1), "float32"))
    mod = _module(Function([x, w], call("nn.relu", call("nn.conv2d", x, w, channels=4, kernel_size=(1, 1)))))
    inputs = {"x": rng.uniform(-1, 1, shape).astype(np.float32),
              "w": rng.uniform(-1, 1, (4, 8, 1, 1)).astype(np.float32)}
    chains, _ = _prepared_payloads(mod)
    assert [c.head_checked for c in chains] == [True]
    assert run(mod, inputs, config=PREPARED)[0].tobytes() == run(mod, inputs, config=GENERIC)[0].tobytes()


def test_a_lone_convolution_step_is_prepared():
    rng = np.random.default_rng(11)
    shape = (1, 8, 6, 6)
    x = Var("x", TensorType(shape, "float32"))
    conv = _conv(rng, x, 8, 4)
    mod = _module(Function([x], call("add", conv, conv)))  # read twice: no chain, an OP step
    steps = plan_of(mod, config=PREPARED).steps
    assert [s[3][0].__qualname__ for s in steps if s[0] == OP and s[6].op.name == "nn.conv2d"] == \
        ["_prepared_kernel.<locals>.<lambda>"]
    inputs = {"x": rng.uniform(-1, 1, shape).astype(np.float32)}
    assert run(mod, inputs, config=PREPARED)[0].tobytes() == run(mod, inputs, config=GENERIC)[0].tobytes()


@pytest.mark.parametrize("sections,axis", [(2, 1), ((1, 3), 1), (3, -1), ((1,), 0)])
def test_a_split_is_prepared_and_gives_the_generic_views(sections, axis):
    """ShuffleNet's channel split (and others): its slices decided once, the reference's views."""
    shape = (2, 6, 3, 6)
    x = Var("x", TensorType(shape, "float32"))
    parts = call("split", x, indices_or_sections=sections, axis=axis)
    count = sections if isinstance(sections, int) else len(sections) + 1
    items = [TupleGetItem(parts, i) for i in range(count)]
    mod = _module(Function([x], Tuple([call("negative", item) for item in items])))
    steps = plan_of(mod, config=PREPARED).steps
    assert [s[3][0].__qualname__ for s in steps if s[0] == OP and s[6].op.name == "split"] == \
        ["_prepared_kernel.<locals>.<lambda>"]
    inputs = {"x": np.random.default_rng(3).uniform(-1, 1, shape).astype(np.float32)}
    prepared, generic = run(mod, inputs, config=PREPARED), run(mod, inputs, config=GENERIC)
    assert len(prepared) == len(generic) == count
    for a, b in zip(prepared, generic):
        assert a.shape == b.shape and a.tobytes() == b.tobytes()
    want = np.split(inputs["x"], sections if isinstance(sections, int) else list(sections), axis=axis)
    for a, b in zip(prepared, want):
        np.testing.assert_array_equal(a, -b)


def test_a_failing_prepared_stage_names_its_op(monkeypatch):
    mod = _module(mobile_block((1, 4, 5, 5)))
    plan = plan_of(mod, config=PREPARED)

    def broken(x, others):
        raise ValueError("broken stage")

    steps = []
    for step in plan.steps:
        if step[0] == CUSTOM and isinstance(step[3], PreparedChain) and "clip" in step[3].describe():
            chain = step[3]
            stages = tuple((broken, f[1]) if s.op_name == "clip" else f for f, s in zip(chain.stages, chain.fused.stages))
            step = step[:3] + (chain._replace(stages=stages),) + step[4:]
        steps.append(step)
    monkeypatch.setattr(plan, "steps", tuple(steps))
    with pytest.raises(EmulatorError, match=r"binding %\d+ \(clip.*broken stage"):
        run(mod, _inputs((1, 4, 5, 5)), config=PREPARED)


def test_the_environment_turns_preparation_off(monkeypatch):
    monkeypatch.setenv("TIDLX_EMULATOR_PREPARE", "0")
    assert EmulatorConfig.from_env().prepare is False
    monkeypatch.setenv("TIDLX_EMULATOR_PREPARE", "1")
    assert EmulatorConfig.from_env().prepare is True


def _with_tail(rng, y, stages, channels, residual):
    """``y`` followed by ``stages``, tail roles in order: "bias", "bn", "add" (of ``residual``), "relu",
    "clip" (0..6)."""
    for stage in stages:
        if stage == "bias":
            y = call("nn.bias_add", y, _weights(rng, channels))
        elif stage == "bn":
            y = _bn(rng, y, channels)
        elif stage == "add":
            y = call("add", y, residual)
        elif stage == "relu":
            y = call("nn.relu", y)
        else:
            y = call("clip", y, a_min=0.0, a_max=6.0)
    return y


def _pointwise_chain_module(shape, stages, other_view=False, stride=1):
    """A 1x1 convolution of shape[1] -> shape[1] channels followed by ``stages`` (tail roles:
    "bias", "bn", "add", "relu", "clip"), large enough for its product to be cut in blocks."""
    rng = np.random.default_rng(12)
    c = shape[1]
    out_shape = _strided_shape(shape, stride)
    x = Var("x", TensorType(shape, "float32"))
    other = Var("other", TensorType(out_shape[::-1] if other_view else out_shape, "float32"))
    residual = call("transpose", other, axes=(3, 2, 1, 0)) if other_view else other
    y = _with_tail(rng, _conv(rng, x, c, c, stride=stride), stages, c, residual)
    return _module(Function([x, other], y))


def _strided_shape(shape, stride):
    return shape[:2] + tuple(-(-d // stride) for d in shape[2:])


@pytest.mark.parametrize("shape,stages,other_view,stride", [
    ((1, 64, 56, 56), ("bias", "clip"), False, 1),          # MobileNetV2's expand: blocks of columns
    ((1, 64, 16, 16), ("bn", "add", "relu"), False, 1),      # ResNet's bottleneck end
    ((1, 64, 16, 16), ("bn", "add", "relu"), True, 1),       # a strided residual: the product, then the pass
    ((1, 512, 7, 7), ("bn",), False, 1),                     # one stage; more rows than columns: blocks of rows
    ((1, 96, 20, 20), ("add", "clip"), False, 1),
    ((1, 96, 20, 20), ("clip",), False, 1),                  # each role alone
    ((1, 96, 20, 20), ("relu",), False, 1),
    ((1, 96, 20, 20), ("add",), False, 1),
    ((1, 96, 20, 20), ("bias",), False, 1),
    ((1, 128, 28, 28), ("bn",), False, 2),                   # ResNet's downsample: the strided input gathered
    ((1, 64, 45, 43), ("bn", "add", "relu"), False, 3),      # odd sizes, stride 3
])
def test_pointwise_conv_with_its_tail_per_block_gives_the_generic_bits(shape, stages, other_view, stride):
    """A 1x1 convolution's chain of tail ops runs on each product block right after it when the run
    has numba threads (_prepared._pointwise_with_tail): the bits of the generic kernels and of the
    unfused ops, at one thread (product, then the pass) and at two (per block)."""
    mod = _pointwise_chain_module(shape, stages, other_view, stride)
    chains, unprepared = _prepared_payloads(mod)
    assert unprepared == [] and [c.whole is not None for c in chains] == [True]
    rng = np.random.default_rng(13)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    x.reshape(-1)[:3] = (-0.0, np.nan, np.inf)
    out_shape = _strided_shape(shape, stride)
    inputs = {"x": x, "other": rng.uniform(-1, 1, out_shape[::-1] if other_view else out_shape).astype(np.float32)}
    for threads in (1, 2):
        prepared = run(mod, inputs, config=PREPARED.replace(threads=threads, adapt=False))[0]
        generic = run(mod, inputs, config=GENERIC.replace(threads=threads, adapt=False))[0]
        unfused = run(mod, inputs, config=GENERIC.replace(threads=threads, adapt=False, fuse=False))[0]
        assert prepared.tobytes() == generic.tobytes() == unfused.tobytes()


def test_pointwise_tail_blocks_run_in_a_two_thread_run(monkeypatch):
    """The per-block form is what a run with numba threads takes (spied), and only then; float32
    blocks store their tail through the microkernel (gemm_stored_tail_blocks)."""
    from tidlx.emulator.fast import _jit, _microkernel, _parallel

    if _parallel._numba_parallel_threads(2) < 2:
        pytest.skip("no numba parallel regions on this machine (one CPU or no thread-safe layer)")
    assert _microkernel.AVAILABLE, "the microkernel did not compile for this CPU"
    calls = []
    for name in ("gemm_tail_blocks", "gemm_stored_tail_blocks"):
        real = getattr(_jit, name)
        monkeypatch.setattr(_jit, name, lambda *args, name=name, real=real: calls.append(name) or real(*args))
    mod = _pointwise_chain_module((1, 64, 56, 56), ("bias", "clip"))
    inputs = {"x": np.ones((1, 64, 56, 56), np.float32), "other": np.ones((1, 64, 56, 56), np.float32)}
    run(mod, inputs, config=PREPARED.replace(threads=1))
    assert calls == []
    run(mod, inputs, config=PREPARED.replace(threads=2, adapt=False))
    assert calls == ["gemm_stored_tail_blocks"]


@pytest.mark.parametrize("by_rows", [True, False])
def test_stored_tail_blocks_give_the_tail_row_blocks_bits(by_rows):
    """The two per-block forms (store_rows for float32, tail_row for other dtypes or without the
    microkernel) give the same bits, NaN, infinity and -0 included."""
    from tidlx.emulator.fast import _jit

    rng = np.random.default_rng(21)
    a = rng.uniform(-1, 1, (48, 40)).astype(np.float32)
    b = rng.uniform(-1, 1, (40, 70)).astype(np.float32)
    b[0, :3] = (-0.0, np.nan, np.inf)
    other = rng.uniform(-1, 1, (48, 70)).astype(np.float32)
    scale, shift = rng.uniform(-2, 2, 48).astype(np.float32), rng.uniform(-1, 1, 48).astype(np.float32)
    flags = (True, True, False, True, np.float32(0), np.float32(6), _jit.ACT_NONE, np.zeros(4, np.float32))
    got, want = np.empty((48, 70), np.float32), np.empty((48, 70), np.float32)
    _jit.gemm_stored_tail_blocks(a, b, got, 3, by_rows, 16, scale, shift, other, *flags)
    _jit.gemm_tail_blocks(a, b, want, 3, by_rows, 16, scale, shift, other, *flags)
    assert got.tobytes() == want.tobytes()


def _depthwise_chain_module(shape, stages, k=3, stride=1, multiplier=1, nonfinite=False):
    """A depthwise convolution (``multiplier`` outputs per channel) followed by ``stages`` (as
    _pointwise_chain_module's); ``nonfinite``: plane 0's weights hold an inf and a NaN."""
    rng = np.random.default_rng(14)
    c = shape[1]
    o = c * multiplier
    x = Var("x", TensorType(shape, "float32"))
    w = rng.normal(0, 0.3, (o, 1, k, k)).astype(np.float32)
    if nonfinite:
        w[0, 0, 0, :2] = (np.inf, np.nan)
    y = call("nn.conv2d", x, const(w), padding=(k // 2,) * 4, channels=o, kernel_size=(k, k),
             groups=c, strides=(stride, stride))
    out_shape = (shape[0], o, -(-shape[2] // stride), -(-shape[3] // stride))
    other = Var("other", TensorType(out_shape, "float32"))
    y = _with_tail(rng, y, stages, o, other)
    return _module(Function([x, other], y)), out_shape


@pytest.mark.parametrize("shape,stages,k,stride,multiplier", [
    ((1, 32, 28, 28), ("bn", "clip"), 3, 1, 1),     # MobileNetV2's depthwise, 28 columns: a copied-out plane
    ((2, 24, 32, 32), ("bias", "relu"), 3, 2, 1),   # stride 2, a batch of two
    ((1, 32, 14, 14), ("bn",), 5, 1, 1),            # EfficientNet-B0's 5x5, one stage
    ((1, 8, 16, 16), ("add", "clip"), 3, 1, 2),     # a channel multiplier, a residual
    ((1, 96, 7, 7), ("relu",), 3, 1, 1),
    ((1, 96, 7, 7), ("clip",), 3, 1, 1),
])
def test_depthwise_conv_with_its_tail_per_plane_gives_the_generic_bits(shape, stages, k, stride, multiplier):
    """A depthwise convolution's chain of tail ops runs on each output plane right after it
    (_prepared._depthwise_with_tail): the bits of the generic kernels and of the unfused ops, at one
    and two threads, non-finite weights (the plain loop's planes) included."""
    for nonfinite in (False, True):  # plane 0 then takes the plain loop
        mod, out_shape = _depthwise_chain_module(shape, stages, k, stride, multiplier, nonfinite)
        _assert_whole_chain_gives_the_generic_bits(mod, shape, out_shape, seed=15)


def _assert_whole_chain_gives_the_generic_bits(mod, shape, out_shape, seed):
    """``mod``'s one chain is prepared as a whole (PreparedChain.whole), and its run gives the bits of
    the generic kernels and of the unfused ops at one and two threads, on inputs with -0, NaN and inf."""
    chains, unprepared = _prepared_payloads(mod)
    assert unprepared == [] and [c.whole is not None for c in chains] == [True]
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    x.reshape(-1)[:3] = (-0.0, np.nan, np.inf)
    inputs = {"x": x, "other": rng.uniform(-1, 1, out_shape).astype(np.float32)}
    for threads in (1, 2):
        prepared = run(mod, inputs, config=PREPARED.replace(threads=threads, adapt=False))[0]
        generic = run(mod, inputs, config=GENERIC.replace(threads=threads, adapt=False))[0]
        unfused = run(mod, inputs, config=GENERIC.replace(threads=threads, adapt=False, fuse=False))[0]
        assert prepared.tobytes() == generic.tobytes() == unfused.tobytes()


def _direct_chain_module(shape, o, stages, k, stride, dilation=1):
    """A dense k x k convolution of shape[1] -> o channels (the direct route) followed by ``stages``."""
    rng = np.random.default_rng(16)
    x = Var("x", TensorType(shape, "float32"))
    w = rng.normal(0, 0.2, (o, shape[1], k, k)).astype(np.float32)
    pad = dilation * (k // 2)
    y = call("nn.conv2d", x, const(w), padding=(pad,) * 4, channels=o, kernel_size=(k, k),
             strides=(stride, stride), dilation=(dilation, dilation))
    out_shape = (shape[0], o, -(-shape[2] // stride), -(-shape[3] // stride))
    other = Var("other", TensorType(out_shape, "float32"))
    y = _with_tail(rng, y, stages, o, other)
    return _module(Function([x, other], y)), out_shape


@pytest.mark.parametrize("shape,o,stages,k,stride,dilation", [
    ((1, 64, 14, 14), 64, ("bn", "add", "relu"), 3, 1, 1),   # ResNet's basic block end
    ((2, 24, 17, 13), 44, ("bias", "clip"), 3, 2, 1),         # stride 2, odd sizes, a batch of two
    ((1, 40, 12, 12), 36, ("bn",), 5, 1, 1),                  # 5x5, one stage
    ((1, 32, 16, 16), 20, ("add", "relu"), 3, 1, 2),          # dilated
    ((1, 48, 7, 7), 92, ("relu",), 3, 1, 1),                  # (outputs under _tail.SMALL keep their epilogues)
    ((1, 48, 7, 7), 92, ("clip",), 3, 1, 1),
    ((1, 3, 40, 40), 16, ("bn", "clip"), 3, 2, 1),            # stems: the few-channel route
    ((1, 3, 33, 35), 24, ("bias", "add", "relu"), 7, 2, 1),
])
def test_direct_conv_with_its_tail_per_row_gives_the_generic_bits(shape, o, stages, k, stride, dilation):
    """A dense convolution on the direct route (or the few-channel route of the stems) applies its
    chain of tail ops to each output row as it stores it (_prepared._direct_with_tail): the bits of
    the generic kernels and of the unfused ops, at one and two threads, with NaN, infinity and -0
    inputs."""
    mod, out_shape = _direct_chain_module(shape, o, stages, k, stride, dilation)
    _assert_whole_chain_gives_the_generic_bits(mod, shape, out_shape, seed=17)


def test_direct_tail_runs_in_the_convolution_and_follows_the_config(monkeypatch):
    """The fused chain stores its rows with the tail applied (spied: one call, with the tail); where
    the run's config keeps the convolution on Winograd (op_conv.winograd_preferred, patched here),
    the prepared chain runs the generic kernel and the pass: the bits of the generic and unfused runs."""
    from tidlx.emulator.fast import op_conv

    calls = []
    real = op_conv.DirectConv.__call__
    monkeypatch.setattr(op_conv.DirectConv, "__call__", lambda self, x, tail=None: calls.append(tail is not None)
                        or real(self, x, tail))
    mod, out_shape = _direct_chain_module((1, 32, 16, 16), 32, ("bn", "add", "relu"), 3, 1)
    rng = np.random.default_rng(18)
    inputs = {"x": rng.uniform(-1, 1, (1, 32, 16, 16)).astype(np.float32),
              "other": rng.uniform(-1, 1, out_shape).astype(np.float32)}
    run(mod, inputs, config=PREPARED)
    assert calls == [True]
    monkeypatch.setattr(op_conv, "winograd_preferred", lambda *args: True)
    mod, _ = _direct_chain_module((1, 32, 16, 16), 32, ("bn", "add", "relu"), 3, 1)  # a new plan
    calls.clear()
    prepared = run(mod, inputs, config=PREPARED)[0]
    generic = run(mod, inputs, config=GENERIC)[0]
    unfused = run(mod, inputs, config=GENERIC.replace(fuse=False))[0]
    assert calls == [] and prepared.tobytes() == generic.tobytes() == unfused.tobytes()


def _scale_module(shape, factor_shape, constant=None, factor_first=False):
    """x (shape) times a per-plane factor: a second input of ``factor_shape``, or ``constant``."""
    x = Var("x", TensorType(shape, "float32"))
    s = Var("s", TensorType(factor_shape, "float32"))
    factor = const(constant) if constant is not None else s
    y = call("multiply", factor, x) if factor_first else call("multiply", x, factor)
    y = call("nn.relu", y)  # a chain whose head is the prepared multiply
    return _module(Function([x, s], y))


@pytest.mark.parametrize("shape,factor_shape,factor_first", [
    ((1, 96, 14, 14), (1, 96, 1, 1), False),    # the squeeze-excite scale
    ((1, 96, 14, 14), (1, 96, 1, 1), True),     # factors first
    ((2, 24, 16, 16), (2, 24, 1, 1), False),    # a batch: planes over both axes
    ((1, 32, 8, 16), (32, 1, 1), False),        # fewer dimensions
])
def test_prepared_plane_scale_gives_the_generic_bits(shape, factor_shape, factor_first, monkeypatch):
    """A tensor times one factor per plane runs its plane loop with the shapes decided once (spied),
    the generic kernel's bits, NaN factors (the reference's path) included."""
    from tidlx.emulator.fast import op_elemwise

    calls = []
    real = op_elemwise.scale_by_planes
    monkeypatch.setattr(op_elemwise, "scale_by_planes", lambda *a: calls.append(a[2:]) or real(*a))
    mod = _scale_module(shape, factor_shape, factor_first=factor_first)
    rng = np.random.default_rng(19)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    x.reshape(-1)[:3] = (-0.0, np.nan, np.inf)
    for nan_factor in (False, True):
        s = rng.uniform(-2, 2, factor_shape).astype(np.float32)
        if nan_factor:
            s.reshape(-1)[1] = np.nan
        calls.clear()
        prepared = run(mod, {"x": x, "s": s}, config=PREPARED)[0]
        assert calls == ([] if nan_factor else [(int(np.prod(factor_shape)), x.size // int(np.prod(factor_shape)))])
        for config in (GENERIC, GENERIC.replace(fuse=False)):
            assert prepared.tobytes() == run(mod, {"x": x, "s": s}, config=config)[0].tobytes()


def test_a_chain_headed_by_a_constant_4d_scale_prepares():
    """A multiply by a constant (1, C, 1, 1) heading a fused chain is no convolution site (it has no
    conv attributes): the plan compiles and gives the generic bits."""
    factors = np.random.default_rng(20).uniform(-1, 1, (1, 16, 1, 1)).astype(np.float32)
    mod = _scale_module((1, 16, 20, 20), (1,), constant=factors)
    x = np.random.default_rng(21).uniform(-1, 1, (1, 16, 20, 20)).astype(np.float32)
    inputs = {"x": x, "s": np.zeros(1, np.float32)}
    assert run(mod, inputs, config=PREPARED)[0].tobytes() == run(mod, inputs, config=GENERIC)[0].tobytes()


def _activation_chain_module(shape, kind, head, shared=False):
    """``head`` ("pointwise", "depthwise" or "direct") convolution of shape[1] channels + batch norm,
    then a swish (x * sigmoid(x)) or hard-swish (x * clip(x / 6 + 0.5, 0, 1)) chain; ``shared``: the
    batch norm's value is also an output (then the activation cannot be merged)."""
    rng = np.random.default_rng(22)
    c = shape[1]
    x = Var("x", TensorType(shape, "float32"))
    if head == "pointwise":
        y = _conv(rng, x, c, c)
    elif head == "depthwise":
        y = _conv(rng, x, c, c, k=3, groups=c)
    elif head == "stem":  # 3 input channels: the few-channel route
        x = Var("x", TensorType((shape[0], 3) + tuple(shape[2:]), "float32"))
        y = _conv(rng, x, 3, c, k=3)
    else:
        y = _conv(rng, x, c, c, k=3)
    y = _bn(rng, y, c)
    if kind == "swish":
        act = call("multiply", y, call("sigmoid", y))
    else:
        scale = call("multiply", y, const(np.array(1 / 6, np.float32)))
        act = call("multiply", y, call("clip", call("add", scale, const(np.array(0.5, np.float32))), a_min=0.0,
                                       a_max=1.0))
    return _module(Function([x], Tuple([act, y]) if shared else act))


def _merged_activations(mod):
    steps = plan_of(mod, config=PREPARED).steps
    return [s[3].act.kind for s in steps if s[0] == CUSTOM and isinstance(s[3], PreparedChain) and s[3].act is not None]


@pytest.mark.parametrize("head", ["pointwise", "depthwise", "direct", "stem"])
@pytest.mark.parametrize("kind", ["swish", "hardswish"])
def test_conv_chains_absorb_their_swish_with_the_unmerged_bits(head, kind):
    """A conv chain whose one reader is a swish or hard-swish step runs it in its tail (merged in the
    plan), with the bits and the run statistics of the generic and unfused runs, at one and two
    threads (one-thread pointwise and depthwise chains run the activation after the tail's pass)."""
    shape = (1, 32, 24, 24)
    mod = _activation_chain_module(shape, kind, head)
    assert _merged_activations(mod) == [kind]
    rng = np.random.default_rng(23)
    x = rng.uniform(-8, 8, (1, 3, 24, 24) if head == "stem" else shape).astype(np.float32)
    x.reshape(-1)[:3] = (-0.0, np.nan, np.inf)
    for threads in (1, 2):
        results, counts = [], []
        for config in (PREPARED, GENERIC, GENERIC.replace(fuse=False)):
            stats = RunStats()
            results.append(run(mod, {"x": x}, config=config.replace(threads=threads, adapt=False), stats=stats)[0])
            counts.append((stats.steps, dict(stats.kernel_calls)))
        assert results[0].tobytes() == results[1].tobytes() == results[2].tobytes()
        assert counts[0] == counts[1] == counts[2]


def test_a_swish_whose_input_is_read_elsewhere_stays_a_step():
    mod = _activation_chain_module((1, 32, 24, 24), "swish", "direct", shared=True)
    assert _merged_activations(mod) == []
    x = np.random.default_rng(24).uniform(-4, 4, (1, 32, 24, 24)).astype(np.float32)
    prepared, generic = run(mod, {"x": x}, config=PREPARED), run(mod, {"x": x}, config=GENERIC)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(prepared, generic))
