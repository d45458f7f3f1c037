"""nn.deformable_conv2d: the reference kernel against ONNX's DeformConv node cases (mask included) and
onnx.reference, the ONNX import, the type relation and the MAC count."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import tidlx.emulator as emulator
import tidlx.ir as ir
from tidlx.emulator.reference.op_deformable_conv import deformable_conv2d_nchw
from tidlx.frontends.onnx import from_onnx
from tidlx.ir.analysis import macs
from tidlx.ir.errors import TidlxError


def _onnx_cases():
    import onnx.backend.test.case.node as node_cases
    import onnx.backend.test.case.node.deformconv  # noqa: F401  (registers the cases)

    return {c.name: c for c in node_cases._NodeTestCases if c.model.graph.node[0].op_type == "DeformConv"}


CASES = _onnx_cases()


def _attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_passes_onnx_deformconv_cases(name):
    case = CASES[name]
    attrs = _attrs(case.model.graph.node[0])
    for inputs, (expected,) in case.data_sets:
        x, w, offset = inputs[:3]
        bias = inputs[3] if len(inputs) > 3 else None
        mask = inputs[4] if len(inputs) > 4 else None
        pads = attrs.get("pads", [0, 0, 0, 0])
        got = deformable_conv2d_nchw(x, offset, w, tuple(attrs.get("strides", (1, 1))), tuple(pads),
                                     tuple(attrs.get("dilations", (1, 1))), attrs.get("group", 1),
                                     attrs.get("offset_group", 1), np.dtype(np.float32), mask=mask)
        if bias is not None:
            got = got + bias.reshape(1, -1, 1, 1)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def _deform_model(x_shape, w_shape, offset_shape, **attrs):
    node = helper.make_node("DeformConv", ["X", "W", "offset"], ["Y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, s)
                                            for n, s in (("X", x_shape), ("W", w_shape), ("offset", offset_shape))],
                              [helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    return model


# (N, C, H, W, O, groups, offset groups, kernel, stride, dilation, pad): groups, offset groups, strides,
# dilations, 2x2 kernels; offsets of a few pixels, so samples leave the image too.
GEOMETRIES = [(2, 8, 7, 9, 4, 2, 2, 3, 1, 1, 1), (1, 4, 6, 6, 6, 1, 1, 3, 2, 2, 2), (1, 6, 5, 8, 3, 3, 3, 2, 1, 1, 0),
              (1, 4, 5, 5, 4, 4, 1, 3, 1, 1, 1)]


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_imported_deform_conv_matches_onnx_reference(geometry):
    n, c, h, w, o, groups, offset_groups, k, s, d, p = geometry
    rng = np.random.default_rng(sum(geometry))
    oh, ow = (h + 2 * p - d * (k - 1) - 1) // s + 1, (w + 2 * p - d * (k - 1) - 1) // s + 1
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    weight = rng.standard_normal((o, c // groups, k, k)).astype(np.float32)
    offset = (rng.standard_normal((n, 2 * offset_groups * k * k, oh, ow)) * 2).astype(np.float32)
    model = _deform_model(x.shape, weight.shape, offset.shape, kernel_shape=[k, k], pads=[p] * 4, strides=[s, s],
                          dilations=[d, d], group=groups, offset_group=offset_groups)
    expected = ReferenceEvaluator(model).run(None, {"X": x, "W": weight, "offset": offset})[0]
    mod = from_onnx(model)
    assert [c.op_name for c in ir.traversal.calls(mod.main.body)] == ["nn.deformable_conv2d"]
    (got,) = emulator.run(mod, {"X": x, "W": weight, "offset": offset})
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max()


def test_zero_offsets_give_the_plain_convolution():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((1, 4, 6, 7)).astype(np.float32), rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    got = deformable_conv2d_nchw(x, np.zeros((1, 18, 6, 7), np.float32), w, (1, 1), (1, 1, 1, 1), (1, 1), 2, 1,
                                 np.dtype(np.float32))
    data = ir.Var("x", ir.TensorType(x.shape, "float32"))
    conv = ir.IRModule.from_expr(ir.Function([data], ir.call("nn.conv2d", data, ir.const(w), padding=(1, 1),
                                                              groups=2)))
    np.testing.assert_allclose(got, emulator.run(conv, {"x": x})[0], rtol=1e-5, atol=1e-5)


def _call(x_shape=(1, 8, 6, 6), offset_shape=(1, 18, 6, 6), w_shape=(4, 2, 3, 3), **attrs):
    attrs = {"padding": (1, 1), "groups": 4, **attrs}
    x, off = (ir.Var(n, ir.TensorType(s, "float32")) for n, s in (("x", x_shape), ("offset", offset_shape)))
    mod = ir.IRModule.from_expr(ir.Function([x, off], ir.call("nn.deformable_conv2d", x, off,
                                                              ir.const(np.zeros(w_shape, np.float32)), **attrs)))
    mod.infer_types()
    return mod.main.body


def test_type_relation_and_macs():
    body = _call()
    assert body.checked_type == ir.TensorType((1, 4, 6, 6), "float32")
    conv_taps = 1 * 4 * 6 * 6 * 2 * 3 * 3
    assert macs(body) == conv_taps + 4 * 8 * 9 * 36  # + four bilinear taps per sampled value
    for kwargs, message in (({"offset_shape": (1, 16, 6, 6)}, "offset has shape"),
                            ({"deformable_groups": 3}, "deformable_groups 3"),
                            ({"data_layout": "NHWC"}, "NCHW"),
                            ({"w_shape": (4, 3, 3, 3)}, "channels")):
        with pytest.raises(TidlxError, match=message):
            _call(**kwargs)


def test_mask_imports_only_when_it_is_all_ones():
    def with_mask(mask):
        model = _deform_model((1, 2, 4, 4), (2, 2, 2, 2), (1, 8, 3, 3), kernel_shape=[2, 2])
        node = model.graph.node[0]
        node.input.extend(["", "mask"])
        model.graph.initializer.append(onnx.numpy_helper.from_array(mask, "mask"))
        return model

    mod = from_onnx(with_mask(np.ones((1, 4, 3, 3), np.float32)))
    assert [c.op_name for c in ir.traversal.calls(mod.main.body)] == ["nn.deformable_conv2d"]
    mask = np.ones((1, 4, 3, 3), np.float32)
    mask[0, 1, 1, 1] = 0.5
    with pytest.raises(TidlxError, match="modulation mask"):
        from_onnx(with_mask(mask))
