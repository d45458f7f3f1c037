"""BEVDet's image stage + bev_pool end to end on x86: the ONNX file with the custom-domain BevPool
node -> tidlx.load -> tidlx.partition (bev_pool on the host: custom op) -> tidlx.emulate (== the
voxel pooling in plain numpy of the image stage's volume) -> TVM builds of the partitioned model
(TIDL parts in the float emulator, and tidl="inline") == the emulator within 1e-5 relative.

The tiny resnet18 variant, 6 cameras (batch 6 with max_batch_size=6, as TI's
TIDL_RELAY_MAX_BATCH_SIZE=6), 64 x 192 images."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

pytest.importorskip("tvm")

import tidlx  # noqa: E402
from tidlx.backends.tvm import build, to_relax  # noqa: E402
from tidlx.models import bevdet_img_stage_tiny, bevdet_with_bev_pool, register_bev_pool  # noqa: E402
from tidlx.models.bev_pool import INDEX_NAME, OP_NAME, bev_pool_numpy  # noqa: E402

CAMERAS = 6
RELATIVE = 1e-5


def relative_error(got, ref):
    return float(np.max(np.abs(got.astype(np.float64) - ref))) / max(float(np.max(np.abs(ref))), 1e-30)


pytestmark = pytest.mark.usefixtures("bev_pool_op")


@pytest.fixture(scope="module")
def bev_model(tmp_path_factory):
    register_bev_pool()
    path = tmp_path_factory.mktemp("bev") / "bevdet_bev_pool.onnx"
    model = bevdet_with_bev_pool("resnet18", batch=CAMERAS, tiny=True, path=path)
    index = numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == INDEX_NAME))
    mod = tidlx.load(str(path))
    frames = {"img": np.random.default_rng(0).standard_normal((CAMERAS, 3, 64, 192)).astype(np.float32)}
    partitioned, report = tidlx.partition(mod, {"max_batch_size": CAMERAS})
    yield mod, partitioned, report, frames, index
    tidlx.unregister_op(OP_NAME)


@pytest.fixture(scope="module")
def emulated(bev_model):
    mod, _, _, frames, _ = bev_model
    return tidlx.emulate(mod, frames)


def test_the_emulator_matches_the_voxel_pooling_in_numpy(bev_model, emulated):
    _, _, _, frames, index = bev_model
    depth, bev = emulated
    # the image stage alone (same seed: the same weights) gives the volume the pool reads
    from tidlx.frontends.onnx import from_onnx

    stage_depth, volume = tidlx.emulate(from_onnx(bevdet_img_stage_tiny("resnet18", batch=CAMERAS)), frames)
    assert depth.tobytes() == stage_depth.tobytes()
    expected = bev_pool_numpy(volume, index, (32, 32))
    assert bev.shape == expected.shape == (1, 8, 32, 32)
    assert relative_error(bev, expected) <= 1e-6
    assert np.count_nonzero(np.abs(bev).sum(axis=1)) > 100  # many cells are hit, not a trivial grid


def test_the_partition_keeps_bev_pool_on_the_host_as_a_custom_op(bev_model, emulated):
    _, partitioned, report, frames, _ = bev_model
    rows = [row for row in report.to_dict()["host_ops"] if row["op"] == OP_NAME]
    assert len(rows) == 1 and "custom op (registered with tidlx.register_op)" in rows[0]["reason"]
    assert report.to_dict()["subgraphs"], "the backbone still goes to TIDL"
    again = tidlx.emulate(partitioned, frames)
    assert all(relative_error(a, b) <= RELATIVE for a, b in zip(again, emulated))


def test_tvm_builds_match_the_emulator(bev_model, emulated):
    _, partitioned, _, frames, _ = bev_model
    text = to_relax(partitioned).script()
    assert 'R.call_dps_packed("tidlx.tidl_subgraph.' in text and "bevdet_bev_pool" in text
    for tidl in ("float", "inline"):
        got = build(partitioned, "x86", tidl=tidl).run(frames)
        assert len(got) == 2
        for g, ref in zip(got, emulated):
            assert g.shape == ref.shape and g.dtype == ref.dtype
            assert relative_error(g, ref) <= RELATIVE, tidl


def test_tidl_in_fixed_point_with_the_host_bev_pool_matches_the_fixed_point_emulator(bev_model, emulated):
    import warnings

    _, partitioned, _, frames, _ = bev_model
    calib = {"img": np.random.default_rng(4).standard_normal((2 * CAMERAS, 3, 64, 192)).astype(np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fewer calibration frames than TI's default of 20
        qmodel = tidlx.quantize(partitioned, {"tensor_bits": 8, "max_batch_size": CAMERAS}, calib=calib)
    built = build(qmodel, "x86")
    assert built.tidl == "fixed"
    fixed = tidlx.emulate(qmodel, frames)
    got = built.run(frames)
    for g, f in zip(got, fixed):
        assert relative_error(g, f) <= RELATIVE
    # and the TIDL part really ran in 8 bits: the BEV grid differs from the float one
    assert relative_error(got[1], emulated[1]) > 1e-3
