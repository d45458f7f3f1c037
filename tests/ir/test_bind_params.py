"""bind_params_by_name: parameters become constants by name (TVM's relay.build_module.bind_params_by_name)."""

import numpy as np
import pytest

from tidlx.ir import Function, TensorType, Var, bind_params_by_name, call, structural_equal
from tidlx.ir.bind_params import BindParamsError
from tidlx.ir.errors import TidlxError
from tidlx.ir.expr import Constant
from tidlx.ir.traversal import post_order


def conv_net():
    x = Var("x", TensorType((1, 3, 8, 8), "float32"))
    w = Var("weight", TensorType((4, 3, 3, 3), "float32"))
    b = Var("b", TensorType((4,), "float32"))
    y = call("nn.bias_add", call("nn.conv2d", x, w, padding=[1, 1], channels=4, layer="conv"), b, layer="conv")
    # %weight is used twice: both uses must become the same constant
    z = call("add", y, call("nn.conv2d", x, w, padding=[1, 1], channels=4, layer="conv2"))
    return Function([x, w, b], z, None, {"Primitive": 1})


def test_named_parameters_become_constants_and_leave_the_parameter_list():
    func = conv_net()
    weight = np.arange(4 * 3 * 9, dtype=np.float32).reshape(4, 3, 3, 3)
    bias = Constant(np.ones(4, np.float32))
    bound = bind_params_by_name(func, {"weight": weight, "b": bias})
    assert [p.name_hint for p in bound.params] == ["x"]
    assert bound.attrs == func.attrs and bound.ret_type == func.ret_type
    nodes = post_order(bound.body)
    assert not any(isinstance(n, Var) and n.name_hint in ("weight", "b") for n in nodes)
    weights = [n for n in nodes if isinstance(n, Constant) and n.data.shape == (4, 3, 3, 3)]
    assert len(weights) == 1 and np.array_equal(weights[0].data, weight)  # one node for both uses
    assert any(n is bias for n in nodes)  # a Constant is used as given
    # the original is untouched, and binding nothing changes nothing
    assert [p.name_hint for p in func.params] == ["x", "weight", "b"]
    assert bind_params_by_name(func, {}) is func
    x = Var("x", TensorType((1, 3, 8, 8), "float32"))
    expected_w, expected_b = Constant(weight), bias
    y = call("nn.bias_add", call("nn.conv2d", x, expected_w, padding=[1, 1], channels=4, layer="conv"),
             expected_b, layer="conv")
    z = call("add", y, call("nn.conv2d", x, expected_w, padding=[1, 1], channels=4, layer="conv2"))
    assert structural_equal(bound, Function([x], z, None, {"Primitive": 1}))


def test_values_that_cannot_be_bound_are_tidlx_errors_naming_the_parameter():
    func = conv_net()
    cases = [
        ({"wieght": np.zeros((4, 3, 3, 3), np.float32)}, "params['wieght']: @main has no parameter %wieght; "
                                                            "did you mean 'weight'?", None),
        ({"zz": 1}, "params['zz']: @main has no parameter %zz (it has %x, %weight, %b)", None),
        ({"b": np.zeros(5, np.float32)}, "params['b']: parameter %b is Tensor[(4), float32] but the value is "
                                          "Tensor[(5), float32]", "b"),
        ({"b": np.zeros(4, np.complex64)}, "params['b']: dtype complex64 is not one of", "b"),
        ({"b": [[1.0], [1.0, 2.0]]}, "params['b']: cannot turn list into an array", "b"),
    ]
    for params, message, param in cases:
        with pytest.raises(BindParamsError) as info:
            bind_params_by_name(func, params, func_name="main")
        assert str(info.value).startswith(message), str(info.value)
        assert isinstance(info.value, TidlxError)
        assert (info.value.param.name_hint if info.value.param is not None else None) == param
    twice = Function([Var("a", None), Var("a", None)], Var("c", None))
    with pytest.raises(BindParamsError, match="the function has 2 parameters named %a"):
        bind_params_by_name(twice, {"a": 1.0})
