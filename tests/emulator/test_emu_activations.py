"""Activation patterns of the fast set (emulator/fast/_activations.py): hard-swish, hard-sigmoid and
swish chains run as one step each, bit-identical to the ops they replace (float32 swish: to the
fast set's sigmoid kernel then multiply); and the float32 sigmoid / swish of _exp.py: special
values, its error bound, same bits for any thread count, its block driver, vectorized code."""

import numpy as np
import pytest

from tidlx.emulator import EmulatorConfig, RunStats, run
from tidlx.emulator.fast._activations import Activation
from tidlx.emulator.interpreter import CUSTOM, plan_of
from tidlx.ir import Function, IRModule, TensorType, Var, call, const

SPECIAL = [-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, -3.0, 3.0, -2.9999998, 89.0, -89.0, 1e-30]


def hard_sigmoid(x, dtype):
    t = call("add", call("multiply", x, const(1 / 6, dtype)), const(0.5, dtype))
    return call("clip", t, a_min=0.0, a_max=1.0)


def models(dtype):
    return {
        "hardswish": lambda x: call("multiply", x, hard_sigmoid(x, dtype)),
        "hardswish, operands swapped": lambda x: call("multiply", hard_sigmoid(x, dtype), x),
        "hardsigmoid": lambda x: hard_sigmoid(x, dtype),
        "swish": lambda x: call("multiply", x, call("sigmoid", x)),
        "swish, operands swapped": lambda x: call("multiply", call("sigmoid", x), x),
    }


def _inputs(shape, dtype, seed):
    x = np.random.default_rng(seed).uniform(-8, 8, shape).astype(dtype)
    x.reshape(-1)[:len(SPECIAL)] = SPECIAL
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(1, 16, 112, 112), (1, 24, 1, 1)])  # parallel numba blocks / a SE gate
@pytest.mark.parametrize("name", list(models("float32")))
def test_patterns_run_as_one_step_bit_for_bit(name, shape, dtype):
    make = models(dtype)[name]
    x = _inputs(shape, dtype, len(name))
    outs = []
    for fuse in (True, False):
        var = Var("x", TensorType(shape, dtype))
        mod = IRModule({"main": Function([var], make(var))})
        stats = RunStats()
        outs.append(run(mod, {"x": x}, config=EmulatorConfig(fuse=fuse), stats=stats))
        custom = [s[3] for s in plan_of(mod, config=EmulatorConfig(fuse=fuse)).steps if s[0] == CUSTOM]
        if fuse:
            assert len(custom) == 1 and isinstance(custom[0], Activation)
            assert custom[0].kind == name.split(",")[0]
            fused_stats = stats
        else:
            assert custom == []
            assert stats.kernel_calls == fused_stats.kernel_calls and stats.steps == fused_stats.steps
    assert outs[0][0].tobytes() == outs[1][0].tobytes()


def test_chains_whose_values_are_read_elsewhere_stay_ops():
    """x read a third time, the gate read twice, a non-scalar constant: no pattern step."""
    shape = (1, 4, 8, 8)
    x = Var("x", TensorType(shape, "float32"))
    gate = hard_sigmoid(x, "float32")
    read_thrice = call("add", call("multiply", x, gate), x)
    gate2 = hard_sigmoid(x, "float32")
    gate_twice = call("add", call("multiply", x, gate2), gate2)
    vector = call("clip", call("add", call("multiply", x, const(np.full((1, 4, 1, 1), 0.2, np.float32))),
                               const(np.array(0.5, np.float32))), a_min=0.0, a_max=1.0)
    for body in (read_thrice, gate_twice, vector):
        mod = IRModule({"main": Function([x], body)})
        steps = plan_of(mod, config=EmulatorConfig(fuse=True)).steps
        kinds = [s[3].kind for s in steps if s[0] == CUSTOM and isinstance(s[3], Activation)]
        assert kinds in ([], ["hardsigmoid"])  # the gate alone may still be one step when x is only its input
        assert "hardswish" not in kinds
        value = _inputs(shape, "float32", 1)
        fused = run(mod, {"x": value}, config=EmulatorConfig(fuse=True))
        plain = run(mod, {"x": value}, config=EmulatorConfig(fuse=False))
        assert fused[0].tobytes() == plain[0].tobytes()


def test_observed_runs_see_every_value_of_the_chain():
    shape = (1, 4, 8, 8)
    x = Var("x", TensorType(shape, "float32"))
    mod = IRModule({"main": Function([x], models("float32")["hardswish"](x))})
    seen = []
    run(mod, {"x": _inputs(shape, "float32", 2)}, observers=[lambda o: seen.append(o.node.op.name)])
    assert seen == ["multiply", "add", "clip", "multiply"]


# --- the float32 sigmoid / swish of _exp.py (not numpy's bits: a stated bound) -------------------

def _sigmoid_kernel(x):
    from emu_helpers import run_kernel

    return run_kernel("sigmoid", [x])


def _swish_step(x, config=None):
    var = Var("x", TensorType(x.shape, str(x.dtype)))
    mod = IRModule({"main": Function([var], call("multiply", var, call("sigmoid", var)))})
    return run(mod, {"x": x}, config=config or EmulatorConfig())[0]


def _reference_sigmoid(x):
    with np.errstate(over="ignore"):
        return np.float32(1) / (np.float32(1) + np.exp(-x))


def _float32_range(lo, hi, stride):
    """Every ``stride``-th float32 of [lo, hi] (lo < 0 < hi), by bit pattern."""
    top_neg = int(np.array([-lo], np.float32).view(np.int32)[0])
    top_pos = int(np.array([hi], np.float32).view(np.int32)[0])
    neg = (np.arange(0, top_neg + 1, stride, dtype=np.int32) | np.int32(-2 ** 31)).view(np.float32)
    pos = np.arange(0, top_pos + 1, stride, dtype=np.int32).view(np.float32)
    return np.concatenate([neg, pos])


def test_sigmoid_and_swish_special_values_as_the_reference():
    x = np.array([-np.inf, np.inf, -1e30, 1e30, -104.0, -89.0, 89.0, 100.0, -0.0, 0.0, 1e-45, -1e-45], np.float32)
    s = _sigmoid_kernel(x)
    np.testing.assert_array_equal(s[:8], [0, 1, 0, 1, 0, 0, 1, 1])
    assert s[8] == s[9] == 0.5 and s[10] == s[11] == 0.5
    sw = _swish_step(x)
    with np.errstate(invalid="ignore"):
        want = x * _reference_sigmoid(x)
    # huge negative x: -0.0 as x * 0 in the reference; -inf * 0: NaN; signed zeros kept
    assert sw.view(np.int32)[2:].tolist() == want.view(np.int32)[2:].tolist()
    assert np.isnan(sw[0]) and sw[1] == np.inf
    nans = np.array([np.nan, -np.nan], np.float32).view(np.int32)
    nans = np.concatenate([nans, nans | 0x1234, np.array([0x7F800001, 0xFF912345], np.uint32).view(np.int32)])
    nans = nans.view(np.float32)  # quiet and signalling NaNs with payloads
    assert np.isnan(_sigmoid_kernel(nans)).all() and np.isnan(_swish_step(nans)).all()


def test_sigmoid_is_zero_exactly_where_numpy_overflows():
    """Around ln(FLT_MAX): every float32 of [-88.8, -88.6] is 0 exactly where the reference is 0."""
    lo = np.array([88.6], np.float32).view(np.int32)[0]
    hi = np.array([88.8], np.float32).view(np.int32)[0]
    x = -np.arange(lo, hi + 1, dtype=np.int32).view(np.float32)
    got, want = _sigmoid_kernel(x), _reference_sigmoid(x)
    assert np.array_equal(got == 0, want == 0)
    assert (want == 0).any() and (want != 0).any()


def test_sigmoid_error_bound_on_a_dense_sweep():
    """Every 509th float32 of [-104, 89] (4.4M values, all exponents): within the documented
    relative bound of the exact (float64) value where that is a normal float32, within half a
    subnormal ulp where it is subnormal, and within the kernel's tolerance of the reference."""
    from tidlx.emulator.fast._exp import SIGMOID_RELATIVE_ERROR
    from tidlx.emulator.fast.op_elemwise import SIGMOID_TOLERANCE
    from tidlx.ir import get_op
    from tidlx.emulator.registry import FAST

    assert get_op("sigmoid").get_attr(FAST).tolerance == SIGMOID_TOLERANCE
    x = _float32_range(-104.0, 89.0, 509)
    got = _sigmoid_kernel(x).astype(np.float64)
    exact = 1 / (1 + np.exp(-x.astype(np.float64)))
    ref = _reference_sigmoid(x).astype(np.float64)
    tiny = float(np.finfo(np.float32).tiny)
    normal = exact >= tiny
    rel = np.abs(got - exact)[normal] / exact[normal]
    assert rel.max() <= SIGMOID_RELATIVE_ERROR, rel.max()
    sub = ~normal & (ref > 0)  # below numpy's overflow both are 0 (tested above)
    assert sub.sum() > 300
    assert (np.abs(got - exact)[sub] <= SIGMOID_RELATIVE_ERROR * exact[sub] + 2.0 ** -150).all()
    assert np.max(np.abs(got - ref)) <= SIGMOID_TOLERANCE * np.max(np.abs(ref))
    big = ref >= tiny
    assert np.max(np.abs(got - ref)[big] / ref[big]) <= SIGMOID_TOLERANCE  # even element by element


@pytest.mark.parametrize("shape", [(1, 96, 112, 112), (1, 1152, 7, 7), (1, 24, 1, 1), (5,)])
def test_swish_fused_equals_sigmoid_kernel_then_multiply_for_any_threads(shape):
    x = np.random.default_rng(len(shape)).normal(0, 20, shape).astype(np.float32)
    x.reshape(-1)[:len(SPECIAL)] = SPECIAL[:x.size]
    s = _sigmoid_kernel(x)
    for config in (EmulatorConfig(threads=1), EmulatorConfig(threads=2, adapt=False), EmulatorConfig(parallel="pool"),
                   EmulatorConfig(fuse=False)):
        with np.errstate(invalid="ignore"):  # -inf * 0
            want = x * s
        assert _swish_step(x, config).tobytes() == want.tobytes(), config
        var = Var("x", TensorType(shape, "float32"))
        mod = IRModule({"main": Function([var], call("sigmoid", var))})
        assert run(mod, {"x": x}, config=config)[0].tobytes() == s.tobytes(), config


@pytest.mark.skipif(len(__import__("os").sched_getaffinity(0)) < 2, reason="one CPU: runs are serial by design")
def test_swish_and_sigmoid_run_in_numba_blocks(monkeypatch):
    from tidlx.emulator.fast import _exp

    calls = []
    for name in ("swish_flat_blocks", "sigmoid_flat_blocks"):
        driver = getattr(_exp, name)
        monkeypatch.setattr(_exp, name, lambda *a, _d=driver, _n=name: (calls.append((_n, a[-2], a[-1])), _d(*a)))
    x = np.random.default_rng(3).normal(0, 4, (1, 32, 112, 112)).astype(np.float32)
    config = EmulatorConfig(threads=2, adapt=False)
    fused = _swish_step(x, config)
    var = Var("x", TensorType(x.shape, "float32"))
    sig = run(IRModule({"main": Function([var], call("sigmoid", var))}), {"x": x}, config=config)[0]
    assert calls == [("swish_flat_blocks", x.size, 2), ("sigmoid_flat_blocks", x.size, 2)]
    assert fused.tobytes() == _swish_step(x, EmulatorConfig(threads=1)).tobytes()
    assert sig.tobytes() == _sigmoid_kernel(x).tobytes()


def test_float64_sigmoid_and_swish_keep_numpy_bits():
    x = _inputs((1, 8, 16, 16), "float64", 7)
    with np.errstate(over="ignore", invalid="ignore"):
        s = 1.0 / (1.0 + np.exp(-x))
        want = x * s
    assert _sigmoid_kernel(x).tobytes() == s.tobytes()
    assert _swish_step(x).tobytes() == want.tobytes()


def test_sigmoid_loops_are_vectorized():
    """The loops compile to AVX/AVX-512 code without library calls in the loop (checked on an
    uncached compile of the same source: numba does not disassemble cached code)."""
    import re

    from numba import njit

    from tidlx.emulator.fast import _exp

    with open("/proc/cpuinfo") as f:
        if "avx2" not in f.read().split():
            pytest.skip("no AVX2 on this CPU")
    x = np.linspace(-9, 9, 1000, dtype=np.float32)
    out = np.empty_like(x)
    for loop in (_exp.sigmoid_flat, _exp.swish_flat):
        own_flags = {k: v for k, v in loop.targetoptions.items() if k not in ("cache", "nopython")}
        fresh = njit(**own_flags)(loop.py_func)
        fresh(x, out, 0, x.size)
        asm = "\n".join(fresh.inspect_asm().values())
        assert re.search(r"vdivps\s+%[yz]mm", asm), loop.__name__  # the divide, 8 or 16 lanes at a time
        assert "expf" not in asm and "svml" not in asm, loop.__name__


def test_exp_f32_error_and_overflow():
    """_exp.exp_f32 alone: within 1e-7 relative of float64 on every 97th float32 of [-80, 88.72]
    (its measured bound: 8.1e-8), inf exactly from numpy's float32 overflow threshold on."""
    from numba import njit

    from tidlx.emulator.fast._exp import exp_f32

    @njit(error_model="numpy")
    def exp_loop(x, out):
        for i in range(x.size):
            out[i] = exp_f32(x[i])

    x = _float32_range(-80.0, 88.72283172607422, 97)
    out = np.empty_like(x)
    exp_loop(x, out)
    exact = np.exp(x.astype(np.float64))
    assert np.max(np.abs(out - exact) / exact) <= 1e-7
    edge = np.array([88.72283172607422, 88.72283935546875, 89.0], np.float32)
    exp_loop(edge, out[:3])
    with np.errstate(over="ignore"):
        assert out[:3].tolist() == np.exp(edge).tolist() and np.isinf(out[1:3]).all()
