"""The ``onnx.op_types`` facet and custom-domain nodes.

Each converter states the IR ops it can build and hangs its ONNX op type on them. The check:
over every model the ONNX tests import (the backend node suite and the per-op cases), each call
in the imported module is of an op whose facet names the ONNX op type of the node it came from
(the call's layer). Fewer ops than declared is fine (folded at import, or another form).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import test_onnx_backend as backend_suite  # sibling test modules: pytest puts this folder on sys.path
import test_onnx_ops as ops_suite
from tidlx.frontends.onnx import (ONNX_OP_TYPES, OnnxImportError, OnnxRegistrationError, UnsupportedOpsError,
                                  from_onnx, register_custom_node, unregister_custom_node)
from tidlx.frontends.onnx.converters import CONVERTERS, converter
from tidlx.ir import TidlxError, get_op
from tidlx.ir.errors import TidlxTypeError, UnknownOpError
from tidlx.ir.op import define_op, ops_with_attr, undefine_op
from tidlx.ir.traversal import calls


def undeclared_calls(mod) -> list:
    """``(layer, ONNX op type, IR op)`` of each call whose op does not declare its node's op type."""
    out = []
    for _, func in mod.items():
        for c in calls(func):
            op_type = mod.layer_types.get(c.layer)
            if op_type not in c.op.get_attr(ONNX_OP_TYPES, ()):
                out.append((c.layer, op_type, c.op.name))
    return out


def test_backend_node_cases_build_only_declared_ops():
    imported, problems = 0, {}
    for case in backend_suite.CASES:
        rep = backend_suite.TidlxBackend.prepare(case.model, "CPU")
        for inputs, _ in case.data_sets:
            try:
                mod, _ = rep.import_with([backend_suite._to_array(x) for x in inputs])
            except TidlxError:
                if case.name in backend_suite.EXPECTED_FAILURES:
                    break  # a listed limit of the importer; test_node checks how it fails
                raise
            imported += 1
            if undeclared_calls(mod):
                problems[case.name] = undeclared_calls(mod)
    assert not problems, f"calls of ops that do not declare their node's ONNX op type: {problems}"
    assert imported >= len(backend_suite.CASES) - len(backend_suite.EXPECTED_FAILURES)


def test_op_cases_build_only_declared_ops():
    problems = {}
    for case in ops_suite.CASES:
        found = undeclared_calls(from_onnx(ops_suite.build_model(case)))
        if found:
            problems[case.id] = found
    assert not problems, f"calls of ops that do not declare their node's ONNX op type: {problems}"


def test_a_missing_declaration_is_reported():
    relu = get_op("nn.relu")
    declared = relu.get_attr(ONNX_OP_TYPES)
    mod = from_onnx(ops_suite.build_model(next(c for c in ops_suite.CASES if c.id == "relu")))
    assert undeclared_calls(mod) == []
    relu.set_attr(ONNX_OP_TYPES, tuple(t for t in declared if t != "Relu"), replace=True)
    try:
        assert undeclared_calls(mod) == [("relu_node", "Relu", "nn.relu")]
    finally:
        relu.set_attr(ONNX_OP_TYPES, declared, replace=True)


def test_facet_values_are_sorted_and_name_converters():
    facet = ops_with_attr(ONNX_OP_TYPES)
    assert facet["nn.conv2d"] == ("Conv",)
    assert facet["nn.relu"] == ("Elu", "Relu")   # ONNX Elu imports through two relus
    assert facet["add"] == tuple(sorted(facet["add"])) and {"Add", "Sum", "Mean", "Gemm"} <= set(facet["add"])
    for name, op_types in facet.items():
        assert op_types == tuple(sorted(set(op_types))), name
        assert set(op_types) <= set(CONVERTERS), (name, set(op_types) - set(CONVERTERS))


def test_converter_registration_refuses_unknown_ops():
    with pytest.raises(UnknownOpError, match="unknown op 'nn.reluu'; closest known ops: nn.relu"):
        converter("TidlxTestRelu", produces=("nn.relu", "nn.reluu"))(lambda ctx: None)
    with pytest.raises(TypeError, match="must be a tuple of IR op names"):
        converter("TidlxTestRelu", produces="nn.relu")(lambda ctx: None)
    assert "TidlxTestRelu" not in CONVERTERS and get_op("nn.relu").get_attr(ONNX_OP_TYPES) == ("Elu", "Relu")


# --- custom-domain nodes -------------------------------------------------------------------------

DOMAIN = "com.example.tidlx_test"


@dataclass(frozen=True)
class ScaledAddAttrs:
    alpha: float = 1.0


def _same_shape_rel(arg_types, attrs):
    a, b = arg_types
    if a != b:
        raise TidlxTypeError(f"test.scaled_add takes two tensors of one type, got {a} and {b}")
    return a


@pytest.fixture
def scaled_add():
    """A test op, ``test.scaled_add(a, b, alpha) = a + alpha * b``, defined for one test."""
    op = define_op("test.scaled_add", num_inputs=2, attrs=ScaledAddAttrs, type_rel=_same_shape_rel,
                   pattern="broadcast")
    try:
        yield op
    finally:
        for op_type in ("ScaledAdd", "ScaledAdd2"):
            unregister_custom_node(DOMAIN, op_type)
        undefine_op("test.scaled_add")


def custom_model(inputs=("a", "b"), op_type="ScaledAdd", inits=None, **attrs) -> onnx.ModelProto:
    node = helper.make_node(op_type, list(inputs), ["y"], name="custom_node", domain=DOMAIN, **attrs)
    feeds = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("a", "b")
             if n in inputs and n not in (inits or {})]
    graph = helper.make_graph([node], "custom", feeds, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              [numpy_helper.from_array(v, k) for k, v in (inits or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)])


def test_custom_node_imports_as_the_registered_op(scaled_add):
    with pytest.raises(UnsupportedOpsError, match=f"{DOMAIN}.ScaledAdd"):
        from_onnx(custom_model(alpha=0.5))
    register_custom_node(DOMAIN, "ScaledAdd", "test.scaled_add")
    assert scaled_add.get_attr(ONNX_OP_TYPES) == (f"{DOMAIN}.ScaledAdd",)
    mod = from_onnx(custom_model(alpha=0.5))
    (c,) = calls(mod["main"])
    assert c.op is scaled_add and c.attrs == ScaledAddAttrs(alpha=0.5) and c.layer == "custom_node"
    assert mod.layer_types == {"custom_node": f"{DOMAIN}.ScaledAdd"}
    assert undeclared_calls(mod) == []
    # Constant inputs do not fold it away: ONNX's reference implementation does not know the op.
    mod = from_onnx(custom_model(inits={"a": np.ones((2, 3), np.float32), "b": np.ones((2, 3), np.float32)}))
    assert [c.op.name for c in calls(mod["main"])] == ["test.scaled_add"]


def test_custom_node_attrs_from_node(scaled_add):
    register_custom_node(DOMAIN, "ScaledAdd", "test.scaled_add",
                         attrs_from_node=lambda attrs: {"alpha": attrs.get("scale", 1.0) * 2})
    register_custom_node(DOMAIN, "ScaledAdd2", "test.scaled_add")
    assert scaled_add.get_attr(ONNX_OP_TYPES) == (f"{DOMAIN}.ScaledAdd", f"{DOMAIN}.ScaledAdd2")
    (c,) = calls(from_onnx(custom_model(scale=0.25))["main"])
    assert c.attrs == ScaledAddAttrs(alpha=0.5)
    unregister_custom_node(DOMAIN, "ScaledAdd")
    assert scaled_add.get_attr(ONNX_OP_TYPES) == (f"{DOMAIN}.ScaledAdd2",)
    unregister_custom_node(DOMAIN, "ScaledAdd2")
    assert not scaled_add.has_attr(ONNX_OP_TYPES)
    with pytest.raises(UnsupportedOpsError):
        from_onnx(custom_model(scale=0.25))


def test_custom_node_errors_name_the_node(scaled_add):
    register_custom_node(DOMAIN, "ScaledAdd", "test.scaled_add")
    where = rf"node 'custom_node' \({DOMAIN}.ScaledAdd\)"
    with pytest.raises(OnnxImportError, match=rf"{where}.*has no attribute 'beta'"):
        from_onnx(custom_model(beta=1.0))
    with pytest.raises(OnnxImportError, match=rf"{where}: test.scaled_add takes 2 input"):
        from_onnx(custom_model(inputs=("a",)))
    unregister_custom_node(DOMAIN, "ScaledAdd")
    register_custom_node(DOMAIN, "ScaledAdd", "test.scaled_add", attrs_from_node=lambda attrs: attrs["missing"])
    with pytest.raises(OnnxImportError, match=r"node 'custom_node'.*attrs_from_node of test.scaled_add failed: "
                                              r"KeyError"):
        from_onnx(custom_model())


def test_custom_node_registration_errors(scaled_add):
    with pytest.raises(OnnxRegistrationError, match="default ONNX domain"):
        register_custom_node("", "Relu", "test.scaled_add")
    with pytest.raises(OnnxRegistrationError, match="unknown op 'test.scaled_ad'.*test.scaled_add"):
        register_custom_node(DOMAIN, "ScaledAdd", "test.scaled_ad")
    with pytest.raises(OnnxRegistrationError, match="attrs_from_node must be a function"):
        register_custom_node(DOMAIN, "ScaledAdd", "test.scaled_add", attrs_from_node={"alpha": 1.0})
    assert not scaled_add.has_attr(ONNX_OP_TYPES) and get_op("nn.relu").get_attr(ONNX_OP_TYPES) == ("Elu", "Relu")
    register_custom_node(DOMAIN, "ScaledAdd", "test.scaled_add")
    with pytest.raises(OnnxRegistrationError, match="registered twice"):
        register_custom_node(DOMAIN, "ScaledAdd", "test.scaled_add")
    assert scaled_add.get_attr(ONNX_OP_TYPES) == (f"{DOMAIN}.ScaledAdd",)
