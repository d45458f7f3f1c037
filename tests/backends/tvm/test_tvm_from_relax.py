"""frontends/relax: a TVM user's Relax module (as TVM's ONNX frontend makes it) read into tidlx,
partitioned for TIDL and handed back to TVM (backends/tvm to_relax), round trip:

    ONNX --TVM's from_onnx--> Relax --from_relax--> tidlx IR --partition--> --to_relax--> TVM's VM

checked against tidlx's own ONNX import (same numbers, same partition) and against TVM's own
build of the user's module.
"""

from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

import tidlx  # noqa: E402
from tidlx.backends.tvm import build  # noqa: E402
from tidlx.frontends.relax import RelaxImportError, from_relax  # noqa: E402
from tidlx.ir import Function, structural_equal  # noqa: E402
from tidlx.ir.traversal import post_order  # noqa: E402


def _tvm_run(relax_mod, arrays):
    from tvm import relax

    ex = tvm.compile(relax_mod, target=tvm.target.Target({"kind": "llvm"}))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(a) for a in arrays])
    return [o.numpy() for o in out] if not hasattr(out, "numpy") else [out.numpy()]


def _layers(fn):
    return [node.attrs["Composite"] for node in post_order(fn.body) if isinstance(node, Function)]


def _relative(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b))) / max(float(np.max(np.abs(b))), 1e-30)


@pytest.fixture(scope="module")
def bevdet():
    from tvm.relax.frontend.onnx import from_onnx as tvm_from_onnx
    from tidlx.frontends.onnx import from_onnx
    from tidlx.models import bevdet_img_stage_tiny

    model = bevdet_img_stage_tiny("resnet18", batch=1)
    frame = np.random.default_rng(0).standard_normal((1, 3, 64, 192)).astype(np.float32)
    return tvm_from_onnx(model, keep_params_in_input=False), from_onnx(model), frame


def test_tvm_onnx_import_reads_as_tidlx_own_import(bevdet):
    user_module, own, frame = bevdet
    mod = from_relax(user_module)
    assert [p.name_hint for p in mod.main.params] == ["img"]
    for got, want in zip(tidlx.emulate(mod, {"img": frame}), tidlx.emulate(own, {"img": frame})):
        assert got.tobytes() == want.tobytes()
    read, _ = tidlx.partition(mod)
    expected, _ = tidlx.partition(own)
    assert list(read) == list(expected) == ["main", "tidl_0", "tidl_1"]
    assert structural_equal(read["main"], expected["main"])
    # the same TIDL layers (TVM's import adds a (1, C, 1, 1) bias where tidlx's has bias_add: one layer)
    for name in ("tidl_0", "tidl_1"):
        assert _layers(read[name]) and _layers(read[name]) == _layers(expected[name])


def test_round_trip_partitioned_for_tidl_and_back_in_tvm(bevdet):
    user_module, _, frame = bevdet
    partitioned, _ = tidlx.partition(from_relax(user_module))
    handed_back = build(partitioned, "x86")
    assert handed_back.subgraphs == ["tidl_0", "tidl_1"]
    tvm_own = _tvm_run(user_module, [frame])
    for got, want in zip(handed_back.run({"img": frame}), tvm_own):
        assert _relative(got, want) <= 1e-5


def test_a_blockbuilder_module_of_many_ops_reads_and_computes_as_tvm_does():
    from tvm import relax

    rng = np.random.default_rng(5)
    w = relax.const(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    m = relax.const(rng.standard_normal((16, 6)).astype(np.float32))
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 3, 6, 6), "float32"))
    op = relax.op
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(op.nn.conv2d(x, w, padding=(1, 1, 1, 1)))
            y = bb.emit(op.nn.relu(op.add(y, relax.const(np.float32(0.1)))))
            p = bb.emit(op.nn.avg_pool2d(y, pool_size=(2, 2), strides=(2, 2)))          # 1x4x3x3
            s = bb.emit(op.strided_slice(p, axes=[1], begin=[1], end=[3]))               # 1x2x3x3
            c = bb.emit(op.concat([s, s], axis=1))                                         # 1x4x3x3
            t = bb.emit(op.permute_dims(c, [0, 2, 3, 1]))
            r = bb.emit(op.reshape(t, (9, 4)))
            mm = bb.emit(op.matmul(op.reshape(y, (9, 16)), m))                             # 9x6
            sm = bb.emit(op.nn.softmax(op.clip(mm, -1.0, 2.0), axis=1))
            mean = bb.emit(op.mean(r, axis=[1], keepdims=True))
            out = bb.emit_output(relax.Tuple([sm, op.astype(op.sigmoid(mean), "float32")]))
        bb.emit_func_output(out)
    user_module = bb.get()
    mod = from_relax(user_module)
    frame = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    for got, want in zip(tidlx.emulate(mod, {"x": frame}), _tvm_run(user_module, [frame])):
        assert got.shape == want.shape
        assert _relative(got, want) <= 1e-5


def test_an_op_tidlx_does_not_read_is_named():
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 3), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.gelu(x))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    with pytest.raises(RelaxImportError, match=r"main: binding %lv: the Relax op relax.nn.gelu has no tidlx converter"):
        from_relax(bb.get())
    with pytest.raises(RelaxImportError, match="has no function 'forward'"):
        from_relax(bb.get(), entry="forward")
