"""The IR core: construction, type inference, verifier, structural equality and hashing."""

import numpy as np
import pytest

from tidlx.ir import (Call, Function, GlobalVar, IRModule, Let, TensorType, TidlxError, TidlxTypeError, Tuple,
                      TupleGetItem, TupleType, Var, VerifyError, call, const, get_op, structural_equal,
                      structural_hash, verify)
from tidlx.ir.errors import OpAttributeError, UnknownOpError
from tidlx.ir.traversal import number_bindings, post_order


def t(*shape, dtype="float32"):
    return TensorType(shape, dtype)


def conv_relu(name="x"):
    x = Var(name, t(1, 3, 8, 8))
    w = const(np.arange(4 * 3 * 9, dtype="float32").reshape(4, 3, 3, 3))
    y = call("nn.relu", call("nn.conv2d", x, w, padding=[1, 1], channels=4, layer="conv1"), layer="relu1")
    return Function([x], y)


def test_nodes_are_immutable():
    x = Var("x", t(2))
    with pytest.raises(AttributeError):
        x.name_hint = "y"
    c = const(np.ones(3, "float32"))
    with pytest.raises(ValueError):
        c.data[0] = 5


def test_type_inference_conv_relu():
    f = conv_relu()
    assert f.body.checked_type == t(1, 4, 8, 8)
    assert str(f.checked_type) == "fn (Tensor[(1, 3, 8, 8), float32]) -> Tensor[(1, 4, 8, 8), float32]"


def test_batch_norm_tuple_and_projection():
    x = Var("x", t(1, 4, 2, 2))
    vec = const(np.ones(4, "float32"))
    bn = call("nn.batch_norm", x, vec, vec, vec, vec)
    assert isinstance(bn.checked_type, TupleType)
    assert TupleGetItem(bn, 0).checked_type == t(1, 4, 2, 2)
    with pytest.raises(TidlxTypeError, match="out of range"):
        TupleGetItem(bn, 3).checked_type


def test_type_error_names_op_and_layer():
    x = Var("x", t(1, 3, 8, 8))
    w = const(np.ones((4, 5, 3, 3), "float32"))
    bad = call("nn.conv2d", x, w, layer="backbone.conv1")
    with pytest.raises(TidlxTypeError, match=r"nn.conv2d 'backbone.conv1': input has 3 channels"):
        bad.checked_type


def test_broadcast_error():
    a, b = Var("a", t(2, 3)), Var("b", t(4, 3))
    with pytest.raises(TidlxTypeError, match="do not broadcast"):
        call("add", a, b).checked_type


def test_unknown_op_and_attribute_suggestions():
    with pytest.raises(UnknownOpError, match="closest known ops: nn.conv2d"):
        get_op("nn.conv2dd")
    with pytest.raises(OpAttributeError, match="did you mean padding"):
        call("nn.conv2d", Var("x", t(1, 1, 3, 3)), Var("w", t(1, 1, 1, 1)), paddings=[1, 1])
    with pytest.raises(TidlxError, match="takes 2 inputs"):
        call("add", Var("x", t(1)))


def test_verify_names_function_and_binding():
    x = Var("x", t(1, 3, 8, 8))
    w = const(np.ones((4, 5, 3, 3), "float32"))
    body = call("nn.relu", call("nn.conv2d", x, w))
    mod = IRModule({"main": Function([x], body)})
    with pytest.raises(TidlxTypeError, match=r"in @main, binding %0: nn.conv2d"):
        verify(mod)


def test_verify_unbound_var_and_undefined_global():
    x, y = Var("x", t(2)), Var("y", t(2))
    with pytest.raises(VerifyError, match="%y are used but never bound"):
        verify(IRModule({"main": Function([x], call("add", x, y))}))
    with pytest.raises(VerifyError, match="@missing"):
        verify(IRModule({"main": Function([x], Call(GlobalVar("missing"), [x]))}))


def test_verify_var_bound_twice():
    x = Var("x", t(2))
    inner = Function([x], x)
    with pytest.raises(VerifyError, match="bound twice"):
        verify(IRModule({"main": Function([x], Call(inner, [x]))}))


def test_module_calls_and_let():
    a = Var("a", t(2, 2))
    sub = Function([a], call("nn.relu", a), attrs={"Compiler": "tidl", "Primitive": 1})
    x = Var("x", t(2, 2))
    v = Var("v")
    mod = IRModule()
    mod["tidl_0"] = sub
    body = Let(v, Call(mod.get_global_var("tidl_0"), [x]), call("add", v, v))
    mod["main"] = Function([x], body)
    verify(mod)
    assert mod["main"].checked_type.ret_type == t(2, 2)
    assert v.checked_type == t(2, 2)


def test_structural_equal_alpha_and_differences():
    assert structural_equal(conv_relu("x"), conv_relu("renamed"))
    assert structural_hash(conv_relu("x")) == structural_hash(conv_relu("renamed"))
    f1 = conv_relu()
    x = Var("x", t(1, 3, 8, 8))
    w = const(np.arange(4 * 3 * 9, dtype="float32").reshape(4, 3, 3, 3))
    other_attr = Function([x], call("nn.relu", call("nn.conv2d", x, w, padding=[1, 1], channels=4, strides=[1, 1],
                                                     dilation=[2, 2])))
    assert not structural_equal(f1, other_attr)
    w2 = const(np.arange(4 * 3 * 9, dtype="float32").reshape(4, 3, 3, 3) + 1)
    other_const = Function([x], call("nn.relu", call("nn.conv2d", x, w2, padding=[1, 1], channels=4)))
    assert not structural_equal(f1, other_const)
    assert structural_hash(f1) != structural_hash(other_const)


def test_structural_equal_layers_only_on_request():
    a = Var("a", t(2))
    b = Var("b", t(2))
    f = Function([a], call("nn.relu", a, layer="one"))
    g = Function([b], call("nn.relu", b, layer="two"))
    assert structural_equal(f, g)
    assert not structural_equal(f, g, compare_layers=True)


def test_structural_equal_respects_sharing_and_var_binding():
    x = Var("x", t(2))
    shared = call("nn.relu", x)
    f = Function([x], call("add", shared, shared))
    y = Var("y", t(2))
    g = Function([y], call("add", call("nn.relu", y), call("nn.relu", y)))
    assert not structural_equal(f, g)
    p, q = Var("p", t(2)), Var("q", t(2))
    swapped1 = Function([p, q], call("subtract", p, q))
    r, s = Var("r", t(2)), Var("s", t(2))
    swapped2 = Function([r, s], call("subtract", s, r))
    assert not structural_equal(swapped1, swapped2)


def test_long_chain_is_iterative():
    x = Var("x", t(4))
    y = x
    for _ in range(20000):
        y = call("nn.relu", y)
    f = Function([x], y)
    assert f.checked_type.ret_type == t(4)
    assert len(post_order(f)) == 20002
    assert len(number_bindings(f)) == 19999
    assert structural_equal(f, f)
    structural_hash(f)


def test_tuple_types():
    a, b = Var("a", t(1)), Var("b", t(2, dtype="int8"))
    tup = Tuple([a, b])
    assert tup.checked_type == TupleType((t(1), t(2, dtype="int8")))


def test_structural_equal_global_vars_by_name():
    """Two calls of one global function are equal whether or not they share a GlobalVar object
    (the Relay parser shares one per name; builders need not). Found by the round-trip property."""
    t = TensorType((1, 4), "float32")
    x = Var("x", t)
    shared = GlobalVar("f")
    one = Tuple([Call(shared, [x]), Call(shared, [x])])
    x2 = Var("x", t)
    two = Tuple([Call(GlobalVar("f"), [x2]), Call(GlobalVar("f"), [x2])])
    assert structural_equal(one, two) and structural_equal(two, one)
    x3 = Var("x", t)
    assert not structural_equal(one, Tuple([Call(GlobalVar("f"), [x3]), Call(GlobalVar("g"), [x3])]))
