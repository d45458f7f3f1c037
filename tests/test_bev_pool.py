"""BEVDet's voxel pooling as a custom op (tidlx/models/bev_pool.py): the op's semantics, its geometry,
the model with the custom-domain BevPool node, and the op's TE lowering on its own."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import tidlx
from tidlx.frontends.onnx import from_onnx
from tidlx.ir import TidlxError
from tidlx.ir.op import get_op, has_op
from tidlx.models import ModelArgumentError, bevdet_with_bev_pool, register_bev_pool
from tidlx.models.bev_pool import (INDEX_NAME, OP_NAME, bev_pool_numpy, cameras,
                                   frustum_cell_index)


@pytest.fixture(scope="module", autouse=True)
def bev_pool_op():
    register_bev_pool()
    yield
    tidlx.unregister_op(OP_NAME)


def _index_of(model):
    return numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == INDEX_NAME))


def _pool_model(points=(2, 3, 5), channels=4, grid=(3, 4), index=None, seed=0, batch=1):
    """A graph of one BevPool node: volume input (batch, *points, channels), index initializer."""
    rng = np.random.default_rng(seed)
    cells = grid[0] * grid[1]
    if index is None:
        index = rng.integers(-1, cells, size=points).astype(np.int32)
    node = helper.make_node("BevPool", ["volume", "index"], ["bev"], name="pool", domain="tidlx.bevdet",
                            grid_size=list(grid))
    graph = helper.make_graph(
        [node], "pool", [helper.make_tensor_value_info("volume", onnx.TensorProto.FLOAT, [batch, *points, channels])],
        [helper.make_tensor_value_info("bev", onnx.TensorProto.FLOAT, [batch, channels, *grid])],
        [numpy_helper.from_array(index, "index")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("tidlx.bevdet", 1)])
    volume = rng.standard_normal((batch, *points, channels)).astype(np.float32)
    return model, volume, index


# -- the op ----------------------------------------------------------------------------------------------

def test_the_op_sums_points_into_cells_and_drops_index_minus_one():
    index = np.array([[0, 2, -1], [2, 2, 5]], np.int32)  # cell 2 gets three points, one point is dropped
    model, volume, _ = _pool_model(points=(2, 3), channels=3, grid=(2, 3), index=index, batch=2)
    (bev,) = tidlx.emulate(from_onnx(model), {"volume": volume})
    assert bev.shape == (2, 3, 2, 3)
    points = volume.reshape(2, 6, 3)
    np.testing.assert_allclose(bev[:, :, 0, 2], points[:, 1] + points[:, 3] + points[:, 4], rtol=1e-6)
    np.testing.assert_array_equal(bev[:, :, 0, 0], points[:, 0])
    np.testing.assert_array_equal(bev[:, :, 1, 2], points[:, 5])
    assert not bev[:, :, 0, 1].any() and not bev[:, :, 1, 0].any() and not bev[:, :, 1, 1].any()
    assert np.isclose(bev.sum(), points[:, [0, 1, 3, 4, 5]].sum(), rtol=1e-5)  # the -1 point is nowhere
    np.testing.assert_allclose(bev, bev_pool_numpy(volume, index, (2, 3)), rtol=1e-6)


def test_random_indices_match_the_plain_loop():
    model, volume, index = _pool_model(points=(4, 7, 3, 5), channels=6, grid=(5, 6), seed=3)
    assert (index == -1).any()
    (bev,) = tidlx.emulate(from_onnx(model), {"volume": volume})
    np.testing.assert_allclose(bev, bev_pool_numpy(volume, index, (5, 6)), rtol=1e-5, atol=1e-6)


def test_an_index_outside_the_grid_is_an_error_naming_the_point():
    index = np.array([[0, 12, -1]], np.int32)  # 12 cells: 0..11
    model, volume, _ = _pool_model(points=(1, 3), channels=2, grid=(3, 4), index=index)
    with pytest.raises(TidlxError, match=r"bevdet.bev_pool .pool.. failed: .*index\[0, 1\] is 12; cell indices are -1 \(dropped\) or 0..11"):
        tidlx.emulate(from_onnx(model), {"volume": volume})
    index = np.array([[0, -2, 1]], np.int32)
    model, volume, _ = _pool_model(points=(1, 3), channels=2, grid=(3, 4), index=index)
    with pytest.raises(TidlxError, match=r"bevdet.bev_pool .pool.. failed: .*index\[0, 1\] is -2"):
        tidlx.emulate(from_onnx(model), {"volume": volume})


def test_ill_typed_calls_and_attributes_are_named():
    model, _, _ = _pool_model(points=(2, 3), channels=2)
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.zeros((3, 2), np.int32), "index"))
    with pytest.raises(TidlxError, match=r"index shape \[3, 2\] must be the volume's point axes \[2, 3\]"):
        from_onnx(model)
    model, _, _ = _pool_model(points=(2, 3), channels=2)
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.zeros((2, 3), np.int64), "index"))
    with pytest.raises(TidlxError, match="index must be int32"):
        from_onnx(model)
    model, _, _ = _pool_model(points=(2, 3), channels=2)
    model.graph.node[0].attribute.append(helper.make_attribute("grid", [2, 2]))
    with pytest.raises(TidlxError, match="unknown attribute\\(s\\) grid"):
        from_onnx(model)


def test_registration_is_idempotent_and_sets_every_facet(capsys):
    from tidlx.cli import main

    op = register_bev_pool()
    assert register_bev_pool() is op
    for facet in ("custom", "emulator.reference", "macs", "onnx.op_types", "tvm.lower"):
        assert op.has_attr(facet), facet
    assert main(["ops", OP_NAME]) == 0
    out = capsys.readouterr().out
    for facet in ("emulator.reference", "macs", "tvm.lower"):  # each where bev_pool.py defines it
        assert f"{facet}: tidlx/models/bev_pool.py:" in out
    assert "tidlx.bevdet.BevPool" in out


def test_macs_count_the_kept_points():
    from tidlx.ir.analysis import function_macs

    index = np.array([[0, 2, -1], [2, -1, 5]], np.int32)
    model, _, _ = _pool_model(points=(2, 3), channels=3, grid=(2, 3), index=index, batch=2)
    assert function_macs(from_onnx(model)["main"]) == 2 * 4 * 3


# -- geometry and the model -------------------------------------------------------------------------------

def test_frustum_geometry():
    cams = cameras(6, 256, 704, seed=0)
    index = frustum_cell_index(cams, 256, 704, 59, (128, 128, 0.8))
    assert index.shape == (6, 59, 16, 44) and index.dtype == np.int32
    assert index.min() == -1 and index.max() < 128 * 128
    kept = index >= 0
    assert 0.3 < kept.mean() < 0.9  # far points leave the grid, the lowest rows hit the ground early
    # the nearest bins of every camera are inside the grid, near the ego (the centre cells)
    near = index[:, 0][index[:, 0] >= 0]
    assert near.size and np.all(np.abs(near // 128 - 64) <= 3) and np.all(np.abs(near % 128 - 64) <= 3)
    # the front camera (yaw 0) looks along +x: deeper points have larger x (column) indices
    front = index[0, :, 8, 22]
    cols = front[front >= 0] % 128
    assert cols.size > 10 and np.all(np.diff(cols) >= 0) and cols[-1] > 100
    # six cameras around the ego cover cells on every side
    rows_cols = np.stack([index[kept] // 128, index[kept] % 128])
    assert rows_cols.min() < 20 and rows_cols.max() > 108


def test_the_model_is_the_image_stage_plus_a_bev_pool_node(tmp_path):
    model = bevdet_with_bev_pool("resnet18", batch=6, tiny=True, path=tmp_path / "bev.onnx")
    assert onnx.load(str(tmp_path / "bev.onnx")).SerializeToString() == model.SerializeToString()
    assert model.SerializeToString() == bevdet_with_bev_pool("resnet18", batch=6, tiny=True).SerializeToString()
    assert model.SerializeToString() != bevdet_with_bev_pool("resnet18", batch=6, tiny=True, seed=1).SerializeToString()
    node = model.graph.node[-1]
    assert (node.domain, node.op_type, list(node.input)) == ("tidlx.bevdet", "BevPool", ["volume", INDEX_NAME])
    assert [o.name for o in model.graph.output] == ["depth", "bev"]
    assert any(o.domain == "tidlx.bevdet" for o in model.opset_import)
    index = _index_of(model)
    assert index.shape == (6, 59, 4, 12) and (index == -1).any()
    mod = tidlx.load(str(tmp_path / "bev.onnx"))
    assert OP_NAME in mod.astext()
    assert mod["main"].checked_type.ret_type.fields[1].shape == (1, 8, 32, 32)


def test_bad_model_arguments_are_named():
    with pytest.raises(ModelArgumentError, match="'grid' must be"):
        bevdet_with_bev_pool("resnet18", tiny=True, grid=(32, 32))
    with pytest.raises(ModelArgumentError, match="'grid' must be"):
        bevdet_with_bev_pool("resnet18", tiny=True, grid=(32, 0, 1.0))
    with pytest.raises(ModelArgumentError, match="bevdet_with_bev_pool: argument 'backbone' must be one of"):
        bevdet_with_bev_pool("resnet7", tiny=True)
    with pytest.raises(ModelArgumentError, match="bevdet_with_bev_pool: argument 'height' must be a positive multiple"):
        bevdet_with_bev_pool("resnet18", tiny=True, height=70)


def test_without_registration_the_node_is_refused_by_name():
    model, _, _ = _pool_model()
    tidlx.unregister_op(OP_NAME)
    try:
        assert not has_op(OP_NAME)
        with pytest.raises(TidlxError, match="tidlx.bevdet.BevPool .node 'pool'.; a custom domain's node imports once "
                                             "its op is registered: tidlx.register_op"):
            from_onnx(model)
    finally:
        register_bev_pool()


# -- the TE lowering, on its own --------------------------------------------------------------------------

def test_the_te_lowering_gives_the_reference_bits():
    pytest.importorskip("tvm")
    from tidlx.backends.tvm import build

    model, volume, index = _pool_model(points=(3, 11, 2, 5), channels=5, grid=(4, 6), seed=5, batch=2)
    mod = from_onnx(model)
    (ref,) = tidlx.emulate(mod, {"volume": volume})
    (got,) = build(mod, "x86").run({"volume": volume})
    # the same float32 additions in the same (point) order
    assert got.tobytes() == ref.tobytes()
    np.testing.assert_allclose(got, bev_pool_numpy(volume, index, (4, 6)), rtol=1e-5, atol=1e-6)


def test_the_te_lowering_never_writes_outside_the_grid():
    pytest.importorskip("tvm")
    from tidlx.backends.tvm import build

    index = np.array([[3, 1_000_000, -7, 3, -1, 0]], np.int32)  # the emulator refuses these; TVM code drops them
    model, volume, _ = _pool_model(points=(1, 6), channels=2, grid=(2, 2), index=index)
    (got,) = build(from_onnx(model), "x86").run({"volume": volume})
    points = volume.reshape(6, 2)
    np.testing.assert_allclose(got[0, :, 1, 1], points[0] + points[3], rtol=1e-6)
    np.testing.assert_array_equal(got[0, :, 0, 0], points[5])
    assert not got[0, :, 0, 1].any() and not got[0, :, 1, 0].any()
    assert get_op(OP_NAME).has_attr("tvm.lower")


def test_an_index_given_at_run_time_works_too():
    pytest.importorskip("tvm")
    from tidlx.backends.tvm import build
    from tidlx.ir import Function, IRModule, TensorType, Var, call
    from tidlx.ir.analysis import function_macs

    volume = Var("volume", TensorType((2, 3, 4, 5), "float32"))
    index = Var("index", TensorType((3, 4), "int32"))
    mod = IRModule({"main": Function([volume, index], call(OP_NAME, volume, index, grid_size=(2, 3)))})
    rng = np.random.default_rng(8)
    inputs = {"volume": rng.standard_normal((2, 3, 4, 5)).astype(np.float32),
              "index": rng.integers(-1, 6, size=(3, 4)).astype(np.int32)}
    (ref,) = tidlx.emulate(mod, inputs)
    np.testing.assert_allclose(ref, bev_pool_numpy(inputs["volume"], inputs["index"], (2, 3)), rtol=1e-5, atol=1e-6)
    (got,) = build(mod, "x86").run(inputs)
    assert got.tobytes() == ref.tobytes()
    assert function_macs(mod["main"]) == 2 * 12 * 5  # not a constant: every point counts
