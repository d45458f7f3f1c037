"""The channel-shuffle pattern (emulator/fast/_shuffle.py): ShuffleNet's concatenate, reshape, transpose,
reshape chain runs as one copy with the bytes of the four ops, and chains it does not cover keep them."""

import numpy as np
import pytest

from tidlx.emulator import EmulatorConfig, RunStats, run
from tidlx.emulator.fast._shuffle import ChannelShuffle
from tidlx.emulator.interpreter import CUSTOM, plan_of
from tidlx.ir import Function, IRModule, TensorType, Tuple, Var, call

FUSED, UNFUSED = EmulatorConfig(), EmulatorConfig(fuse=False)


def _shuffle_module(parts=2, channels=6, hw=(3, 5), axes=(0, 2, 1, 3, 4), groups=None, dtype="float32",
                    extra_reader=False):
    """relu of each of ``parts`` inputs (NCHW, ``channels`` each), concatenated, reshaped to ``groups``
    groups, transposed by ``axes``, reshaped back; ``extra_reader``: the transposed value also summed."""
    groups = groups or parts
    h, w = hw
    xs = [Var(f"x{i}", TensorType((1, channels, h, w), dtype)) for i in range(parts)]
    total = parts * channels
    y = call("concatenate", Tuple([call("nn.relu", x) for x in xs]), axis=1)
    y = call("reshape", y, newshape=(1, groups, total // groups, h, w))
    t = call("transpose", y, axes=axes)
    out = call("reshape", t, newshape=(1, total, h, w))
    if extra_reader:
        out = Tuple([out, call("sum", t)])
    return IRModule({"main": Function(xs, out)})


def _inputs(parts, channels=6, hw=(3, 5), dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    values = {f"x{i}": rng.uniform(-1, 1, (1, channels) + hw).astype(dtype) for i in range(parts)}
    first = values["x0"].reshape(-1)
    first[:3] = (np.nan, 0.0, np.inf)  # relu keeps NaN and inf; the copy keeps their bits
    return values


def _shuffles(mod, config=FUSED):
    return [s[3] for s in plan_of(mod, config=config).steps if s[0] == CUSTOM and isinstance(s[3], ChannelShuffle)]


@pytest.mark.parametrize("parts,dtype", [(2, "float32"), (3, "float32"), (2, "float64")])
def test_a_channel_shuffle_is_one_step_with_the_four_ops_bytes(parts, dtype):
    mod = _shuffle_module(parts=parts, dtype=dtype)
    assert [s.groups for s in _shuffles(mod)] == [parts]
    inputs = _inputs(parts, dtype=np.dtype(dtype))
    got, want = run(mod, inputs, config=FUSED), run(mod, inputs, config=UNFUSED)
    assert got[0].dtype == want[0].dtype and got[0].shape == want[0].shape
    assert got[0].tobytes() == want[0].tobytes()
    relu = [np.maximum(inputs[f"x{i}"], 0, where=~np.isnan(inputs[f"x{i}"]), out=inputs[f"x{i}"].copy())
            for i in range(parts)]
    shuffled = np.stack(relu, axis=2).reshape(1, parts * 6, 3, 5)  # channel c * g + k is input k's channel c
    np.testing.assert_array_equal(got[0], shuffled)


def test_run_stats_count_the_shuffle_as_its_four_ops():
    mod = _shuffle_module()
    inputs = _inputs(2)
    fused, unfused = RunStats(), RunStats()
    run(mod, inputs, config=FUSED, stats=fused)
    run(mod, inputs, config=UNFUSED, stats=unfused)
    for name in ("concatenate", "reshape", "transpose"):
        assert fused.kernel_calls[name] == unfused.kernel_calls[name]


@pytest.mark.parametrize("change", [
    dict(axes=(0, 1, 2, 4, 3)),     # another transpose
    dict(groups=3),                 # groups that are not the concatenated inputs
    dict(extra_reader=True),        # the transposed value read twice
])
def test_other_chains_keep_their_ops(change):
    mod = _shuffle_module(**change)
    assert _shuffles(mod) == []
    inputs = _inputs(2)
    got, want = run(mod, inputs, config=FUSED), run(mod, inputs, config=UNFUSED)
    for a, b in zip(got if isinstance(got, (list, tuple)) else [got], want if isinstance(want, (list, tuple)) else [want]):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
