"""The interpreter core's interfaces: kernel sets, observers and EmulatorConfig."""

import numpy as np
import pytest

from tidlx.emulator import (EmulatorConfig, EmulatorError, Kernel, KernelSet, Observation, PlanTransform, RunStats,
                            active_config, run, using_config)
from tidlx.emulator.registry import REFERENCE
from tidlx.ir import Call, Function, IRModule, TensorType, TupleGetItem, Var, call, const
from tidlx.ir.errors import TidlxError


def residual_module(shape=(1, 8, 16, 16)):
    """conv -> batch_norm -> add -> relu, plus a called function: what fusion merges and observers see."""
    rng = np.random.default_rng(0)
    c = shape[1]
    w = rng.normal(0, 0.3, (c, c, 3, 3)).astype(np.float32)
    bn = [const(v.astype(np.float32)) for v in (rng.uniform(0.5, 1.5, c), rng.uniform(-1, 1, c),
                                               rng.uniform(-1, 1, c), rng.uniform(0.5, 2, c))]
    p = Var("p", TensorType(shape, "float32"))
    mod = IRModule({"helper": Function([p], call("negative", p, layer="neg"))})
    x = Var("x", TensorType(shape, "float32"))
    y = call("nn.conv2d", x, const(w), padding=(1, 1, 1, 1), layer="conv")
    y = TupleGetItem(call("nn.batch_norm", y, *bn, layer="bn"), 0)
    y = call("nn.relu", call("add", y, x, layer="res"), layer="relu")
    mod["main"] = Function([x], Call(mod.get_global_var("helper"), [y]))
    return mod, rng.uniform(-1, 1, shape).astype(np.float32)


# --- observers ---------------------------------------------------------------------------------

def test_observers_see_every_value_fusion_would_skip_with_binding_function_and_layer():
    mod, image = residual_module()
    seen = []
    (observed,) = run(mod, {"x": image}, observers=[seen.append])
    def what(node):
        op = getattr(node, "op", None)
        return getattr(op, "name", None) or getattr(op, "name_hint", None) or type(node).__name__

    got = [(o.function, o.binding, o.layer, what(o.node)) for o in seen]
    assert got == [("main", 0, "conv", "nn.conv2d"), ("main", 1, "bn", "nn.batch_norm"),
                   ("main", 2, None, "TupleGetItem"), ("main", 3, "res", "add"), ("main", 4, "relu", "nn.relu"),
                   ("helper", None, "neg", "negative"), ("main", None, None, "helper")]
    assert all(isinstance(o, Observation) for o in seen)
    # the values are the ones the unobserved (fused) run computes, bit for bit
    (plain,) = run(mod, {"x": image})
    assert observed.tobytes() == plain.tobytes()
    assert seen[4].value.tobytes() == (-plain).tobytes() and seen[6].value.tobytes() == plain.tobytes()
    assert seen[1].value[0].tobytes() == seen[2].value.tobytes()


def test_an_observer_collects_calibration_ranges_per_layer():
    mod, image = residual_module()
    ranges = {}

    def calibrate(o):
        if o.layer is not None and isinstance(o.value, np.ndarray):
            lo, hi = ranges.get(o.layer, (np.inf, -np.inf))
            ranges[o.layer] = (min(lo, float(o.value.min())), max(hi, float(o.value.max())))

    for seed in range(2):
        run(mod, {"x": np.random.default_rng(seed).uniform(-1, 1, image.shape).astype(np.float32)},
            observers=[calibrate])
    assert set(ranges) == {"conv", "res", "relu", "neg"} and ranges["relu"][0] == 0.0


def test_observers_work_with_the_reference_set_and_a_failing_observer_stops_the_run():
    mod, image = residual_module()
    seen = []
    run(mod, {"x": image}, kernels="reference", observers=[seen.append])
    assert len(seen) >= 6

    def fail(o):
        raise RuntimeError("observer failed")

    with pytest.raises(RuntimeError, match="observer failed"):
        run(mod, {"x": image}, observers=[fail])


# --- kernel sets -------------------------------------------------------------------------------

def test_fast_and_reference_sets_agree_and_unknown_sets_are_named():
    mod, image = residual_module()
    (fast,) = run(mod, {"x": image})
    (ref,) = run(mod, {"x": image}, kernels="reference")
    np.testing.assert_allclose(fast, ref, rtol=0, atol=3e-5 * np.abs(ref).max())
    with pytest.raises(TidlxError, match="unknown kernel set 'fixed'.*fast, reference"):
        run(mod, {"x": image}, kernels="fixed")


def test_a_new_kernel_set_plugs_into_the_same_core_with_its_own_plan_transform():
    """What a fixed-point set will do: its own kernels first, the reference for the rest, a transform."""
    rewritten = []

    class Doubling(KernelSet):  # 'relu' doubles: a stand-in for another set's kernel
        def lookup(self, op):
            if op.name == "nn.relu":
                return Kernel(lambda args, attrs, t: 2 * np.maximum(args[0], 0))
            return super().lookup(op)

    def note(steps, result_slot):
        rewritten.append(len(steps))
        return steps

    kernels = Doubling("doubling", (REFERENCE,), (PlanTransform("note", note),))
    mod, image = residual_module()
    (got,) = run(mod, {"x": image}, kernels=kernels)
    (ref,) = run(mod, {"x": image}, kernels="reference")
    assert got.tobytes() == (2 * ref).tobytes() and rewritten  # the transform ran on the plans
    x = Var("x", TensorType((2,), "float32"))
    missing = KernelSet("empty", ())
    with pytest.raises(EmulatorError, match="empty kernel set has no kernel for op 'exp'"):
        run(IRModule({"main": Function([x], call("exp", x))}), {"x": np.zeros(2, np.float32)}, kernels=missing)


# --- EmulatorConfig ----------------------------------------------------------------------------

def test_from_env_reads_the_variables_with_their_meaning():
    env = {"TIDLX_EMULATOR_THREADS": "3", "TIDLX_EMULATOR_FUSE": "0", "TIDLX_EMULATOR_WINOGRAD": "4",
           "TIDLX_EMULATOR_PARALLEL": "pool", "TIDLX_EMULATOR_BLAS": "openblas", "TIDLX_EMULATOR_KEEP_MEMORY": "0"}
    assert EmulatorConfig.from_env(env) == EmulatorConfig(threads=3, fuse=False, winograd="4", parallel="pool",
                                                          blas="openblas", keep_memory=False)
    assert EmulatorConfig.from_env({}) == EmulatorConfig()
    assert EmulatorConfig.from_env({"TIDLX_EMULATOR_WINOGRAD": "0"}).winograd == "off"
    assert EmulatorConfig.from_env({"TIDLX_EMULATOR_WINOGRAD": "1"}).winograd == "auto"
    assert EmulatorConfig.from_env({"TIDLX_EMULATOR_THREADS": "many"}).threads == 0
    with pytest.raises(ValueError, match="winograd"):
        EmulatorConfig(winograd="3")


def test_runs_read_the_environment_when_they_start(monkeypatch):
    mod, image = residual_module()
    seen = []

    class Spy(KernelSet):
        def lookup(self, op):
            k = super().lookup(op)
            return Kernel(lambda args, attrs, t: seen.append(active_config()) or k.fn(args, attrs, t)) \
                if op.name == "negative" else k

    spy = Spy("spy", (REFERENCE,))
    monkeypatch.setenv("TIDLX_EMULATOR_THREADS", "1")
    run(mod, {"x": image}, kernels=spy)
    monkeypatch.setenv("TIDLX_EMULATOR_THREADS", "2")
    run(mod, {"x": image}, kernels=spy)
    run(mod, {"x": image}, kernels=spy, config=EmulatorConfig(winograd="off"))
    assert [(c.threads, c.winograd) for c in seen] == [(1, "auto"), (2, "auto"), (0, "off")]
    with using_config(EmulatorConfig(threads=5)):
        assert active_config().threads == 5
    assert active_config().threads == 2  # outside runs: the environment


def test_fusion_follows_the_config_and_counts_the_same():
    mod, image = residual_module()
    outs = []
    for fuse in (True, False):
        stats = RunStats()
        outs.append((run(mod, {"x": image}, config=EmulatorConfig(fuse=fuse), stats=stats)[0], stats))
    assert outs[0][0].tobytes() == outs[1][0].tobytes()
    assert outs[0][1].kernel_calls == outs[1][1].kernel_calls
    from tidlx.emulator.interpreter import plan_of

    fused = plan_of(mod, config=EmulatorConfig(fuse=True))
    assert len(fused.steps) < len(plan_of(mod, config=EmulatorConfig(fuse=False)).steps)
    assert plan_of(mod, config=EmulatorConfig(fuse=True), observed=True).steps != fused.steps  # observed: unfused
