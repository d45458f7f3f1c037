"""Activation patterns of the fast set (emulator/fast/_activations.py): hard-swish, hard-sigmoid and
swish chains run as one step each, bit-identical to the ops they replace."""

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
