"""Whole models built by TVM and run in its VM (backends/tvm/build.py) against tidlx's emulators:

* unpartitioned / tidl="inline": everything TVM-generated code, vs the float emulator (1e-5 relative);
* partitioned: each TIDL subgraph a ``call_dps_packed`` into tidlx, float (vs the float emulator,
  1e-5 relative) or fixed point from a QuantizedModel (vs ``tidlx.emulate(qmodel)``, float tolerance:
  the TIDL parts are the same integers, the host part differs only by float rounding).

Builds are cached per test module (TVM compiles cost seconds).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("tvm")

import tidlx  # noqa: E402
from tidlx.backends.tvm import TvmBackendError, build, to_relax  # noqa: E402
from tidlx.ir import TidlxError  # noqa: E402

RELATIVE = 1e-5

# conv -> relu -> sin (no TIDL layer: the host) -> conv -> relu, and a pooled side output
SMALL = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3, 12, 12), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=6, kernel_size=[3, 3]);
  %1 = nn.bias_add(%0, meta[relay.Constant][1]);
  %2 = nn.relu(%1);
  %3 = sin(%2);
  %4 = nn.conv2d(%3, meta[relay.Constant][2], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
  %5 = nn.relu(%4);
  %6 = nn.max_pool2d(%5, pool_size=[2, 2], strides=[2, 2]);
  (%6, nn.global_avg_pool2d(%2))
}
'''


def _small(seed):
    r = np.random.default_rng(seed)
    params = [(r.standard_normal((6, 3, 3, 3)) * 0.4).astype(np.float32), r.standard_normal(6).astype(np.float32) * 0.1,
              (r.standard_normal((4, 6, 3, 3)) * 0.3).astype(np.float32)]
    return tidlx.parse_relay(SMALL, params)


def _frames(n, seed=3):
    return np.random.default_rng(seed).standard_normal((n, 3, 12, 12)).astype(np.float32)


def relative_error(got, ref):
    scale = max(float(np.max(np.abs(ref))), 1e-30)
    return float(np.max(np.abs(got.astype(np.float64) - ref))) / scale


def assert_close(got, ref, tolerance=RELATIVE):
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype
        assert relative_error(g, r) <= tolerance


@pytest.fixture(scope="module")
def small():
    mod = _small(0)
    partitioned, _ = tidlx.partition(mod)
    return mod, partitioned


@pytest.fixture(scope="module")
def small_built(small):
    mod, partitioned = small
    return build(mod, "x86"), build(partitioned, "x86")


def test_the_small_model_has_tidl_subgraphs_and_a_host_part(small):
    _, partitioned = small
    tidl = [name for name, fn in partitioned.items() if fn.attrs.get("Compiler") == "tidl"]
    assert len(tidl) == 2
    text = to_relax(partitioned).script()
    for name in tidl:
        assert f'R.call_dps_packed("tidlx.tidl_subgraph.{name}"' in text
    assert "sin" in text  # the host op is TVM code


def test_unpartitioned_model_matches_the_float_emulator(small, small_built):
    mod, _ = small
    whole, _ = small_built
    assert whole.subgraphs == []
    x = {"x": _frames(1)[:1]}
    assert_close(whole.run(x), tidlx.emulate(mod, x))


def test_partitioned_model_runs_tidl_subgraphs_in_the_float_emulator(small, small_built):
    mod, partitioned = small
    _, parts = small_built
    assert parts.subgraphs == ["tidl_0", "tidl_1"] and parts.tidl == "float"
    x = {"x": _frames(1)[:1]}
    ref = tidlx.emulate(partitioned, x)
    assert_close(parts.run(x), ref)
    assert_close(parts.run(x), tidlx.emulate(mod, x))


def test_partitioned_model_in_fixed_point_matches_the_fixed_point_emulator(small):
    mod, partitioned = small
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fewer calibration frames than TI's default of 20
        qmodel = tidlx.quantize(partitioned, {"tensor_bits": 8}, calib={"x": _frames(2)})
    built = build(qmodel, "x86")
    assert built.tidl == "fixed"
    x = {"x": _frames(1, seed=9)}
    fixed = tidlx.emulate(qmodel, x)
    floating = tidlx.emulate(partitioned, x)
    got = built.run(x)
    assert_close(got, fixed)
    # and it is the fixed point, not the float model: 8-bit results differ from float
    assert max(relative_error(g, f) for g, f in zip(got, floating)) > 1e-3


def test_models_with_the_same_subgraph_names_keep_their_own_subgraphs(small, small_built):
    _, parts = small_built
    other, _ = tidlx.partition(_small(1))
    other_built = build(other, "x86")
    x = {"x": _frames(1)}
    assert_close(other_built.run(x), tidlx.emulate(other, x))
    assert_close(parts.run(x), tidlx.emulate(small[1], x))


def test_bevdet_tiny_inline_and_partitioned_match_the_emulator():
    from tidlx.frontends.onnx import from_onnx
    from tidlx.models import bevdet_img_stage_tiny

    mod = from_onnx(bevdet_img_stage_tiny("resnet18", batch=1))
    x = {"img": np.random.default_rng(0).standard_normal((1, 3, 64, 192)).astype(np.float32)}
    ref = tidlx.emulate(mod, x)
    assert_close(build(mod, "x86").run(x), ref)
    partitioned, _ = tidlx.partition(mod)
    assert_close(build(partitioned, "x86").run(x), ref)


def test_bad_inputs_targets_and_modes_are_named(small, small_built):
    mod, partitioned = small
    whole, _ = small_built
    with pytest.raises(TvmBackendError, match="input 'x' must be float32 \\(1, 3, 12, 12\\)"):
        whole.run({"x": np.zeros((1, 3, 12, 11), np.float32)})
    with pytest.raises(TvmBackendError, match="unknown input\\(s\\) y"):
        whole.run({"x": _frames(1), "y": 1})
    with pytest.raises(TvmBackendError, match="input 'x' is missing"):
        whole.run({})
    with pytest.raises(TvmBackendError, match="unknown target 'riscv'"):
        build(mod, "riscv")
    with pytest.raises(TvmBackendError, match="tidl='fixed' needs a QuantizedModel"):
        build(partitioned, tidl="fixed")
    with pytest.raises(TvmBackendError, match="tidl must be one of"):
        build(partitioned, tidl="emulate")


def test_a_failing_subgraph_reaches_the_caller_as_itself(small):
    _, partitioned = small
    built = build(partitioned, "x86")

    def broken(inputs):
        raise TidlxError("@tidl_1: the subgraph failed")

    built._runners["tidl_1"] = broken
    with pytest.raises(TidlxError, match="@tidl_1: the subgraph failed"):
        built.run({"x": _frames(1)})
