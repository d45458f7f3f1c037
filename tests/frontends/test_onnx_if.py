"""ONNX ``If`` nodes: a constant condition (an initializer, a Constant node, or folded to one at
import) imports as the taken branch inlined in the graph, its nodes reading tensors of the outer
scope and the branch's own initializers; a condition known only at run time is a clean
``ControlFlowError`` naming the node. Each model is built with onnx.helper, loaded with
``tidlx.load`` and run with ``tidlx.emulate`` against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
from tidlx.frontends.onnx import ControlFlowError, UnsupportedOpsError, from_onnx, static_inputs
from tidlx.ir import TidlxError

RNG = np.random.default_rng(11)
F = TensorProto.FLOAT


def vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def branch(name, nodes, outputs, inits=()):
    """A branch graph: no inputs, outputs by (name, shape)."""
    return helper.make_graph(nodes, name, [], [vi(o, s) for o, s in outputs], list(inits))


def model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", [vi(n, s) for n, s in inputs], [vi(n, s) for n, s in outputs], list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def const_bool(name, value):
    return numpy_helper.from_array(np.array(value, dtype=bool), name)


def check_against_onnxruntime(m, tmp_path, feeds):
    """Loads the model with tidlx.load, emulates it, and compares every output with onnxruntime's."""
    path = tmp_path / "model.onnx"
    onnx.save(m, str(path))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    mod = tidlx.load(str(path))
    got = tidlx.emulate(mod, feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)
    return mod


def test_constant_true_if_reads_an_outer_tensor(tmp_path):
    then_g = branch("then", [helper.make_node("Relu", ["r"], ["t_out"], name="then_relu")], [("t_out", [2, 4])])
    else_g = branch("else", [helper.make_node("Neg", ["r"], ["e_out"], name="else_neg")], [("e_out", [2, 4])])
    nodes = [helper.make_node("Add", ["x", "x"], ["r"], name="add"),
             helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g)]
    m = model(nodes, [("x", [2, 4])], [("y", [2, 4])], [const_bool("cond", True)])
    mod = check_against_onnxruntime(m, tmp_path, {"x": RNG.standard_normal((2, 4)).astype(np.float32)})
    text = mod.astext()
    assert "nn.relu" in text and "negative" not in text  # only the taken branch is imported
    assert mod.layer_types["then_relu"] == "Relu" and "else_neg" not in mod.layer_types


def test_constant_false_if_from_a_constant_node_takes_the_else_branch(tmp_path):
    then_g = branch("then", [helper.make_node("Relu", ["r"], ["t_out"])], [("t_out", [3])])
    # the else branch reads an outer tensor and an initializer of its own
    else_g = branch("else", [helper.make_node("Mul", ["r", "w"], ["e_out"])], [("e_out", [3])],
                    [numpy_helper.from_array(np.array([1.5, -2.0, 0.5], np.float32), "w")])
    nodes = [helper.make_node("Constant", [], ["cond"], value=numpy_helper.from_array(np.array([False]), "c")),
             helper.make_node("Sigmoid", ["x"], ["r"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)]
    m = model(nodes, [("x", [3])], [("y", [3])])
    mod = check_against_onnxruntime(m, tmp_path, {"x": RNG.standard_normal(3).astype(np.float32)})
    # an unnamed branch node gets a layer name under the If's
    assert mod.layer_types == {"Constant_0": "Constant", "Sigmoid_1": "Sigmoid", "If_2/else/Mul_0": "Mul"}


def test_condition_folded_at_import_and_several_outputs(tmp_path):
    # cond = (Shape(x)[0] == 2): computed from shapes at import time
    then_g = branch("then", [helper.make_node("Add", ["x", "b"], ["t0"]), helper.make_node("Tanh", ["t0"], ["t1"])],
                    [("t0", [2, 3]), ("t1", [2, 3])])
    else_g = branch("else", [helper.make_node("Identity", ["x"], ["e0"]), helper.make_node("Identity", ["x"], ["e1"])],
                    [("e0", [2, 3]), ("e1", [2, 3])])
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Equal", ["n", "two"], ["cond"]),
             helper.make_node("If", ["cond"], ["y0", "y1"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Mul", ["y0", "y1"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array(2, np.int64), "two"),
             numpy_helper.from_array(RNG.standard_normal((2, 3)).astype(np.float32), "b")]
    m = model(nodes, [("x", [2, 3])], [("y", [2, 3]), ("y0", [2, 3])], inits)
    check_against_onnxruntime(m, tmp_path, {"x": RNG.standard_normal((2, 3)).astype(np.float32)})


def test_nested_ifs_read_every_enclosing_scope(tmp_path):
    # outer If (true) -> its then branch holds an inner If (Constant-node condition, false) whose
    # else branch reads a tensor of the main graph and one of the outer branch
    inner_then = branch("inner_then", [helper.make_node("Neg", ["a"], ["it"])], [("it", [2, 2])])
    inner_else = branch("inner_else", [helper.make_node("Sub", ["a", "mid"], ["ie"], name="inner_sub")],
                        [("ie", [2, 2])])
    outer_then = branch("outer_then", [
        helper.make_node("Exp", ["a"], ["mid"], name="outer_exp"),
        helper.make_node("Constant", [], ["inner_cond"], value=numpy_helper.from_array(np.array(False), "c")),
        helper.make_node("If", ["inner_cond"], ["inner_out"], name="inner_if", then_branch=inner_then,
                         else_branch=inner_else),
        helper.make_node("Mul", ["inner_out", "k"], ["ot"], name="outer_mul"),
    ], [("ot", [2, 2])], [numpy_helper.from_array(np.float32(3.0), "k")])
    outer_else = branch("outer_else", [helper.make_node("Identity", ["a"], ["oe"])], [("oe", [2, 2])])
    nodes = [helper.make_node("Abs", ["x"], ["a"], name="abs"),
             helper.make_node("If", ["cond"], ["y"], name="outer_if", then_branch=outer_then, else_branch=outer_else)]
    m = model(nodes, [("x", [2, 2])], [("y", [2, 2])], [const_bool("cond", [True])])
    mod = check_against_onnxruntime(m, tmp_path, {"x": RNG.standard_normal((2, 2)).astype(np.float32)})
    assert {"outer_exp", "inner_sub", "outer_mul"} <= set(mod.layer_types)


def test_if_listed_before_the_producer_of_the_tensor_its_branch_reads(tmp_path):
    then_g = branch("then", [helper.make_node("Relu", ["r"], ["t_out"])], [("t_out", [4])])
    else_g = branch("else", [helper.make_node("Neg", ["r"], ["e_out"])], [("e_out", [4])])
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Sin", ["x"], ["r"])]
    m = model(nodes, [("x", [4])], [("y", [4])], [const_bool("cond", True)])
    mod = from_onnx(m)
    x = RNG.standard_normal(4).astype(np.float32)
    np.testing.assert_allclose(tidlx.emulate(mod, {"x": x})[0], np.maximum(np.sin(x), 0), rtol=1e-6)


def test_branch_output_may_be_an_outer_tensor_or_a_branch_initializer():
    # (onnxruntime refuses a branch that returns an outer tensor directly; ONNX allows it)
    then_g = helper.make_graph([], "then", [], [vi("r", [3])])
    else_g = branch("else", [], [("c", [3])], [numpy_helper.from_array(np.ones(3, np.float32), "c")])
    nodes = [helper.make_node("Cos", ["x"], ["r"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Add", ["y", "x"], ["z"])]
    x = RNG.standard_normal(3).astype(np.float32)
    for cond, expected in ((True, np.cos(x) + x), (False, 1 + x)):
        m = model(nodes, [("x", [3])], [("z", [3])], [const_bool("cond", cond)])
        np.testing.assert_allclose(tidlx.emulate(from_onnx(m), {"x": x})[0], expected, rtol=1e-6)


def test_runtime_condition_is_a_clean_error_naming_the_node():
    then_g = branch("then", [helper.make_node("Relu", ["x"], ["t_out"])], [("t_out", [2])])
    else_g = branch("else", [helper.make_node("Neg", ["x"], ["e_out"])], [("e_out", [2])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], name="vad_if", then_branch=then_g, else_branch=else_g)]
    m = model(nodes, [("x", [2])], [("y", [2])], [numpy_helper.from_array(np.float32(0), "zero")])
    with pytest.raises(ControlFlowError, match=r"node 'vad_if' \(If\): its condition 'cond' is only known at run "
                                               r"time; tidlx's IR has no control flow") as info:
        from_onnx(m)
    assert isinstance(info.value, TidlxError)
    # a runtime input feeding the condition directly is one to bind
    nodes = [helper.make_node("If", ["flag"], ["y"], name="sr_if", then_branch=then_g, else_branch=else_g)]
    m = model(nodes, [("x", [2]), ("flag", [])], [("y", [2])])
    m.graph.input[1].type.tensor_type.elem_type = TensorProto.BOOL
    assert static_inputs(m) == ["flag"]
    with pytest.raises(ControlFlowError, match="sr_if"):
        from_onnx(m)
    m.graph.input.pop()
    m.graph.initializer.append(const_bool("flag", False))
    x = np.array([1.0, -2.0], np.float32)
    np.testing.assert_array_equal(tidlx.emulate(from_onnx(m), {"x": x})[0], -x)


def test_unsupported_ops_are_reported_in_the_taken_branch_only():
    bad = branch("bad", [helper.make_node("Hardmax", ["x"], ["v"], name="hardmax")], [("v", [3])])
    good = branch("good", [helper.make_node("Relu", ["x"], ["g"])], [("g", [3])])
    for cond, taken_bad in ((True, True), (False, False)):
        nodes = [helper.make_node("If", ["cond"], ["y"], name="if", then_branch=bad, else_branch=good)]
        m = model(nodes, [("x", [3])], [("y", None)], [const_bool("cond", cond)])
        if taken_bad:
            with pytest.raises(UnsupportedOpsError, match=r"Hardmax \(node 'hardmax'\)"):
                from_onnx(m)
        else:
            x = np.array([1.0, -2.0, 3.0], np.float32)
            np.testing.assert_array_equal(tidlx.emulate(from_onnx(m), {"x": x})[0], np.maximum(x, 0))


def test_loop_of_constants_reading_the_outer_scope_folds(tmp_path):
    # a Loop whose inputs and outer-scope reads are all constants is evaluated at import time
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "step"], ["acc_out"])],
        "body", [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("acc_in", [2])],
        [vi("cond_out", [], TensorProto.BOOL), vi("acc_out", [2])])
    nodes = [helper.make_node("Constant", [], ["step"], value=numpy_helper.from_array(np.array([0.5, -1.0],
                                                                                              np.float32), "s")),
             helper.make_node("Loop", ["trips", "keep_going", "start"], ["total"], body=body),
             helper.make_node("Add", ["x", "total"], ["y"])]
    inits = [numpy_helper.from_array(np.array(3, np.int64), "trips"), const_bool("keep_going", True),
             numpy_helper.from_array(np.zeros(2, np.float32), "start")]
    m = model(nodes, [("x", [2])], [("y", [2])], inits)
    check_against_onnxruntime(m, tmp_path, {"x": RNG.standard_normal(2).astype(np.float32)})
