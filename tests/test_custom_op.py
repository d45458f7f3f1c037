"""Adding an op: one ``tidlx.register_op`` call, then import, partition, emulate and print it.

The op is a per-tensor scale and shift, imported from an ONNX node of a custom domain that sits
between a convolution and a relu.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
from tidlx.cli import main
from tidlx.custom_op import CustomOpError
from tidlx.ir import TidlxError, structural_equal
from tidlx.ir.op import has_op
from tidlx.ir.types import TensorType

OP = "example.scale_shift"


@dataclass(frozen=True)
class ScaleShiftAttrs:
    scale: float = 1.0
    shift: float = 0.0


def scale_shift_rel(arg_types, attrs):
    (x,) = arg_types
    if not isinstance(x, TensorType) or x.dtype != "float32":
        from tidlx.ir import TidlxTypeError

        raise TidlxTypeError(f"{OP} takes a float32 tensor, got {x}")
    return x


def scale_shift_kernel(args, attrs, out_type):
    x = args[0]
    return x * np.float32(attrs.scale) + np.float32(attrs.shift)


@pytest.fixture
def custom_op():
    op = tidlx.register_op(OP, scale_shift_rel, scale_shift_kernel, num_inputs=1, attrs=ScaleShiftAttrs,
                           arg_names=("data",), macs=lambda call: 2 * call.checked_type.size,
                           onnx="com.example/ScaleShift")
    yield op
    tidlx.unregister_op(OP)


def _weights():
    rng = np.random.default_rng(7)
    return rng.standard_normal((4, 4, 3, 3)).astype(np.float32) * 0.2, rng.standard_normal(4).astype(np.float32)


def _model(path):
    w, b = _weights()
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("ScaleShift", ["c"], ["s"], name="scale_shift", domain="com.example", scale=2.0,
                         shift=-0.5),
        helper.make_node("Relu", ["s"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(nodes, "custom", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    onnx.save(model, str(path))
    return str(path)


def _expected(x):
    w, b = _weights()
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((1, 4, 8, 8), np.float64)
    for i in range(3):
        for j in range(3):
            conv += np.einsum("nchw,oc->nohw", padded[:, :, i:i + 8, j:j + 8], w[:, :, i, j].astype(np.float64))
    conv += b.reshape(1, 4, 1, 1)
    return np.maximum(conv * 2.0 - 0.5, 0.0)


def test_import_partition_emulate(custom_op, tmp_path):
    mod = tidlx.load(_model(tmp_path / "custom.onnx"))
    assert OP in mod.astext()
    x = np.random.default_rng(1).standard_normal((1, 4, 8, 8)).astype(np.float32)
    (out,) = tidlx.emulate(mod, {"x": x})
    np.testing.assert_allclose(out, _expected(x), rtol=1e-5, atol=1e-5)

    partitioned, report = tidlx.partition(mod)
    host = [row for row in report.to_dict()["host_ops"] if row["op"] == OP]
    assert len(host) == 1 and "custom op" in host[0]["reason"]
    assert report.to_dict()["subgraphs"], "the conv and the relu still go to TIDL"
    (again,) = tidlx.emulate(partitioned, {"x": x})
    assert again.tobytes() == out.tobytes()


def test_prints_parses_and_counts(custom_op, tmp_path):
    mod = tidlx.load(_model(tmp_path / "custom.onnx"))
    text = mod.astext(show_meta_data=True)
    assert structural_equal(tidlx.parse_relay(text), mod)
    from tidlx.ir.analysis import function_macs

    assert function_macs(mod["main"]) == 4 * 4 * 9 * 64 + 4 * 64 + 2 * 4 * 64 + 4 * 64


def test_listed_by_tidlx_ops(custom_op, capsys):
    assert main(["ops", OP]) == 0
    out = capsys.readouterr().out
    for facet in ("custom", "emulator.reference", "macs", "onnx.op_types", "com.example.ScaleShift"):
        assert facet in out
    assert "macs: tests/test_custom_op.py:" in out  # the user's function, not register_op's adapter


def test_registration_errors(custom_op):
    with pytest.raises(CustomOpError, match="already exists"):
        tidlx.register_op(OP, scale_shift_rel, scale_shift_kernel, num_inputs=1)
    with pytest.raises(CustomOpError, match="already exists"):
        tidlx.register_op("nn.conv2d", scale_shift_rel, scale_shift_kernel, num_inputs=2)
    with pytest.raises(CustomOpError, match="must be a function"):
        tidlx.register_op("example.other", scale_shift_rel, "not a kernel", num_inputs=1)
    with pytest.raises(CustomOpError, match="domain/OpType"):
        tidlx.register_op("example.other", scale_shift_rel, scale_shift_kernel, num_inputs=1, onnx="NoDomain")
    assert not has_op("example.other")  # a failed registration leaves nothing behind
    with pytest.raises(CustomOpError, match="built-in"):
        tidlx.unregister_op("nn.relu")


def test_failed_onnx_mapping_is_rolled_back(custom_op):
    # the node type is taken by the fixture's op: the second op must not stay half-registered
    with pytest.raises(TidlxError, match="twice"):
        tidlx.register_op("example.other", scale_shift_rel, scale_shift_kernel, num_inputs=1,
                          onnx="com.example/ScaleShift")
    assert not has_op("example.other")


def test_unregistered_op_is_gone(tmp_path):
    path = _model(tmp_path / "custom.onnx")
    tidlx.register_op(OP, scale_shift_rel, scale_shift_kernel, num_inputs=1, attrs=ScaleShiftAttrs,
                      onnx="com.example/ScaleShift")
    tidlx.unregister_op(OP)
    assert not has_op(OP)
    with pytest.raises(TidlxError, match="ScaleShift"):
        tidlx.load(path)


# -- the TVM lowering: te_compute ------------------------------------------------------------------------

def scale_shift_te(x, *, attrs, out_type):
    from tvm import te, tirx

    scale, shift = tirx.const(attrs.scale, "float32"), tirx.const(attrs.shift, "float32")
    return te.compute(x.shape, lambda *i: x(*i) * scale + shift, name="scale_shift")


@pytest.fixture
def custom_op_with_te():
    op = tidlx.register_op(OP, scale_shift_rel, scale_shift_kernel, num_inputs=1, attrs=ScaleShiftAttrs,
                           arg_names=("data",), onnx="com.example/ScaleShift", te_compute=scale_shift_te)
    yield op
    tidlx.unregister_op(OP)


def test_te_compute_built_by_tvm_matches_the_reference_kernel(custom_op_with_te, tmp_path):
    pytest.importorskip("tvm")
    from tidlx.backends.tvm import build, to_relax

    mod = tidlx.load(_model(tmp_path / "custom.onnx"))
    x = np.random.default_rng(2).standard_normal((1, 4, 8, 8)).astype(np.float32)
    (ref,) = tidlx.emulate(mod, {"x": x})
    assert "scale_shift" in to_relax(mod).script()  # the TE compute, as its own PrimFunc
    (whole,) = build(mod, "x86").run({"x": x})
    np.testing.assert_allclose(whole, ref, rtol=1e-5, atol=1e-6)
    partitioned, _ = tidlx.partition(mod)
    (parts,) = build(partitioned, "x86").run({"x": x})  # conv and relu in TIDL subgraphs, the op in TVM
    np.testing.assert_allclose(parts, ref, rtol=1e-5, atol=1e-6)


def test_without_te_compute_lowering_says_to_pass_one(custom_op, tmp_path):
    pytest.importorskip("tvm")
    from tidlx.backends.tvm import TvmLoweringError, to_relax

    mod = tidlx.load(_model(tmp_path / "custom.onnx"))
    with pytest.raises(TvmLoweringError, match=f"op {OP} has no TVM lowering.*te_compute="):
        to_relax(mod)


def test_unregister_removes_the_lowering(tmp_path):
    pytest.importorskip("tvm")
    from tidlx.backends.tvm import TvmLoweringError, to_relax

    path = _model(tmp_path / "custom.onnx")
    tidlx.register_op(OP, scale_shift_rel, scale_shift_kernel, num_inputs=1, attrs=ScaleShiftAttrs,
                      onnx="com.example/ScaleShift", te_compute=scale_shift_te)
    to_relax(tidlx.load(path))
    tidlx.unregister_op(OP)
    tidlx.register_op(OP, scale_shift_rel, scale_shift_kernel, num_inputs=1, attrs=ScaleShiftAttrs,
                      onnx="com.example/ScaleShift")
    try:
        with pytest.raises(TvmLoweringError, match="te_compute="):
            to_relax(tidlx.load(path))
    finally:
        tidlx.unregister_op(OP)


def test_tidlx_ops_shows_where_te_compute_is_defined(custom_op_with_te, capsys):
    assert main(["ops", OP]) == 0
    out = capsys.readouterr().out
    assert "tvm.lower: tests/test_custom_op.py:" in out


def test_te_compute_mistakes_are_lowering_errors_naming_the_op(tmp_path):
    pytest.importorskip("tvm")
    from tidlx.backends.tvm import TvmLoweringError, to_relax

    path = _model(tmp_path / "custom.onnx")

    def wrong_shape(x, *, attrs, out_type):
        from tvm import te

        return te.compute((4,), lambda i: x(0, i, 0, 0), name="wrong")

    def raises(x, *, attrs, out_type):
        raise KeyError("no such tensor")

    cases = [(wrong_shape, r"returned float32\[4\]; the type relation says Tensor\[\(1, 4, 8, 8\), float32\]"),
             (raises, "te_compute of custom op 'example.scale_shift' failed: KeyError"),
             (lambda x, *, attrs, out_type: x.shape, "must return a te.Tensor")]
    for fn, message in cases:
        tidlx.register_op(OP, scale_shift_rel, scale_shift_kernel, num_inputs=1, attrs=ScaleShiftAttrs,
                          onnx="com.example/ScaleShift", te_compute=fn)
        try:
            with pytest.raises(TvmLoweringError, match=message):
                to_relax(tidlx.load(path))
        finally:
            tidlx.unregister_op(OP)
    with pytest.raises(CustomOpError, match="te_compute must be a function"):
        tidlx.register_op(OP, scale_shift_rel, scale_shift_kernel, num_inputs=1, te_compute="te")
    assert not has_op(OP)


def test_registering_a_te_compute_imports_no_tvm():
    import subprocess
    import sys

    code = ("import sys, tidlx\n"
            "tidlx.register_op('example.noop', lambda types, attrs: types[0], lambda args, attrs, ty: args[0],\n"
            "                  num_inputs=1, te_compute=lambda x, *, attrs, out_type: x)\n"
            "from tidlx.ir.op import get_op\n"
            "assert get_op('example.noop').has_attr('tvm.lower')\n"
            "print(sorted(m for m in sys.modules if m == 'tvm' or m.startswith('tvm.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_tuple_typed_op_returns_a_list_of_te_tensors():
    pytest.importorskip("tvm")
    from tidlx.backends.tvm import build
    from tidlx.ir import Function, IRModule, TupleGetItem, TupleType, Var, call

    def rel(types, attrs):
        return TupleType([types[0], types[0]])

    def kernel(args, attrs, out_type):
        return np.maximum(args[0], 0), np.maximum(-args[0], 0)

    def te_parts(x, *, attrs, out_type):
        from tvm import te, tirx

        zero = tirx.const(0.0, "float32")
        return [te.compute(x.shape, lambda *i: tirx.max(x(*i), zero), name="positive"),
                te.compute(x.shape, lambda *i: tirx.max(-x(*i), zero), name="negative")]

    tidlx.register_op("example.sign_parts", rel, kernel, num_inputs=1, te_compute=te_parts)
    try:
        x = Var("x", TensorType((2, 5), "float32"))
        parts = call("example.sign_parts", x)
        positive, negative = TupleGetItem(parts, 0), TupleGetItem(parts, 1)
        mod = IRModule({"main": Function([x], call("subtract", positive, call("multiply", negative, negative)))})
        value = np.random.default_rng(3).standard_normal((2, 5)).astype(np.float32)
        (ref,) = tidlx.emulate(mod, {"x": value})
        (got,) = build(mod, "x86").run({"x": value})
        np.testing.assert_allclose(got, ref, rtol=1e-6)
    finally:
        tidlx.unregister_op("example.sign_parts")
