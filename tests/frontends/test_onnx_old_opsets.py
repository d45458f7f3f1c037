"""Old opsets are converted on import: 112 of the 117 pytorch-converted/-operator models
of ONNX's own test data are opset 6 and were refused ("opset 6 is too old")."""

from __future__ import annotations

import glob
import os
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper, version_converter

import tidlx
from tidlx.frontends.onnx import OnnxImportError, from_onnx
from tidlx.ir import TidlxError
from tidlx.ir.errors import TidlxWarning

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
MODELS = sorted(glob.glob(os.path.join(DATA, "pytorch-converted", "*")) +
                glob.glob(os.path.join(DATA, "pytorch-operator", "*")))


def identity_model(opset):
    nodes = [helper.make_node("Identity", ["x"], ["y"], name="id")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def test_an_old_opset_is_converted_with_a_warning():
    with pytest.warns(TidlxWarning, match=r"opset 5 was converted to opset 11 with onnx.version_converter on "
                                          r"import \(tidlx reads opset 11 to \d+ and converts older models"):
        mod = from_onnx(identity_model(5))
    out = tidlx.emulate(mod, {"x": np.arange(2, dtype=np.float32)})
    np.testing.assert_array_equal(out[0] if isinstance(out, (list, tuple)) else out, [0, 1])


def test_an_override_below_the_range_is_refused_with_the_real_range():
    with pytest.raises(OnnxImportError, match=r"opset=5 is too old .*tidlx reads opset 11 to \d+ and converts"):
        from_onnx(identity_model(12), opset=5)


def _load(d):
    m = onnx.load(os.path.join(d, "model.onnx"))
    ins = [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(d + "/test_data_set_0/input_*.pb"))]
    exp = [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(d + "/test_data_set_0/output_*.pb"))]
    return m, ins, exp


def _close(outs, refs):
    return all(np.allclose(np.asarray(o), r, rtol=1e-3, atol=1e-5, equal_nan=True) for o, r in zip(outs, refs))


def test_onnx_pytorch_test_models_import_and_match_onnxruntime():
    """Counted: of the 117 models, 97 import (20 are refused with a TidlxError: 3-D convolutions and
    pools, Selu/Elu/Softplus, PRelu-6's per-channel slope) and every imported one matches both the
    test data's outputs and onnxruntime on the converted model."""
    import onnxruntime as ort

    assert len(MODELS) == 117
    old = imported = matched = 0
    refused = []
    for d in MODELS:
        model, ins, expected = _load(d)
        opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        old += opset < 11
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", TidlxWarning)
                mod = from_onnx(model)
        except TidlxError as exc:
            assert "too old" not in str(exc), (d, exc)
            refused.append(os.path.basename(d))
            continue
        imported += 1
        outs = tidlx.emulate(mod, dict(zip([p.name_hint for p in mod["main"].params], ins)))
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        runnable = model if opset >= 11 else version_converter.convert_version(model, 11)
        sess = ort.InferenceSession(runnable.SerializeToString(), providers=["CPUExecutionProvider"])
        ref = sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), ins)})
        assert _close(outs, expected) and _close(outs, ref), d
        matched += 1
    assert old == 115
    assert imported == matched >= 97, refused


def test_conversion_keeps_layer_names_and_initializers_that_are_not_inputs():
    w = numpy_helper.from_array(np.ones((2, 3, 3, 3), np.float32), "W")
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], name="stem/conv"),
             helper.make_node("Add", ["c", "c"], ["y"], name="res/add")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    model.ir_version = 8  # W is an initializer only (IR v4+), which the converter alone calls undefined
    with pytest.warns(TidlxWarning, match="opset 6 was converted"):
        mod = from_onnx(model)
    assert [p.name_hint for p in mod["main"].params] == ["x"]
    assert mod.layer_types == {"stem/conv": "Conv", "res/add": "Add"}


def test_a_failed_conversion_is_an_import_error_naming_the_range():
    nodes = [helper.make_node("Upsample", ["x"], ["y"], name="up", scales=[1.0, 2.0], mode="nearest")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    with pytest.raises(OnnxImportError, match=r"opset 6 is older than tidlx reads \(tidlx reads opset 11 .*conversion "
                                              r"failed: Upsample in opset 1 needs"):
        from_onnx(model)
