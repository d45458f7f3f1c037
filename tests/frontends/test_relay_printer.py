"""The Relay text printer: TVM's layout, exact value spellings, metadata, names, determinism."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tidlx.frontends.relay import parse
from tidlx.ir import (Call, Constant, Function, GlobalVar, IRModule, Let, TensorType, Tuple, TupleGetItem, Var,
                      call, const)
from tidlx.ir.metadata import decode_metadata
from tidlx.ir.printer import METADATA_OMITTED, expr_to_text, format_attr_value, scalar_literal
from tidlx.ir.structural import structural_equal
from tidlx.ir.traversal import number_bindings

T4 = TensorType((1, 3, 8, 8), "float32")


def test_tidl_partitioned_module_layout():
    x = Var("input", T4)
    y = Var("tidl_0_i0", T4)
    w = const(np.ones((4, 3, 1, 1), np.float32))
    conv = call("nn.conv2d", y, w, channels=4, kernel_size=(1, 1), layer="/conv1/Conv")
    sub = Function([y], call("nn.relu", conv, layer="/relu/Relu"), TensorType((1, 4, 8, 8)),
                   {"Compiler": "tidl", "Primitive": 1, "Inline": 1, "global_symbol": "tvmgen_default_tidl_main_0"})
    main = Function([x], Call(GlobalVar("tvmgen_default_tidl_main_0"), [x]), TensorType((1, 4, 8, 8)))
    mod = IRModule({"tvmgen_default_tidl_main_0": sub, "main": main})
    text = mod.astext(show_meta_data=False)
    assert text == (
        '#[version = "0.0.5"]\n'
        'def @main(%input: Tensor[(1, 3, 8, 8), float32]) -> Tensor[(1, 4, 8, 8), float32] {\n'
        '  @tvmgen_default_tidl_main_0(%input) /* ty=Tensor[(1, 4, 8, 8), float32] */\n'
        '}\n\n'
        'def @tvmgen_default_tidl_main_0(%tidl_0_i0: Tensor[(1, 3, 8, 8), float32], Compiler="tidl", Primitive=1, '
        'Inline=1, global_symbol="tvmgen_default_tidl_main_0") -> Tensor[(1, 4, 8, 8), float32] {\n'
        '  %0 = nn.conv2d(%tidl_0_i0, meta[relay.Constant][0] /* ty=Tensor[(4, 3, 1, 1), float32] */, channels=4, '
        'kernel_size=[1, 1]) /* ty=Tensor[(1, 4, 8, 8), float32] span=/conv1/Conv:0:0 */;\n'
        '  nn.relu(%0) /* ty=Tensor[(1, 4, 8, 8), float32] span=/relu/Relu:0:0 */\n'
        '}\n\n' + METADATA_OMITTED)
    assert METADATA_OMITTED.startswith("/* For debugging purposes the metadata section has been omitted.")


def test_bindings_follow_number_bindings_with_tuples_projections_and_closures():
    x = Var("x", T4)
    bn = call("nn.batch_norm", x, *[const(np.ones(3, np.float32)) for _ in range(4)], epsilon=1e-3)
    first = TupleGetItem(bn, 0)
    p0, p1 = Var("p0", T4), Var("p1", T4)
    closure = Function([p0, p1], call("add", p0, p1), None, {"Composite": "tidl.add"})
    added = Call(closure, [first, x])
    body = Tuple([added, Tuple([first])])
    fn = Function([x], body)
    text = IRModule({"main": fn}).astext(show_meta_data=False)
    numbers = number_bindings(fn)
    assert f"  %{numbers[bn]} = nn.batch_norm(%x, meta[relay.Constant][0]" in text
    assert "epsilon=0.001f" in text
    assert f"  %{numbers[first]} = %{numbers[bn]}.0;" in text
    assert f"  %{numbers[closure]} = fn (%p0: Tensor[(1, 3, 8, 8), float32], %p1: Tensor[(1, 3, 8, 8), float32], " \
           f'Composite="tidl.add") {{' in text
    assert f"  %{numbers[added]} = %{numbers[closure]}(%{numbers[first]}, %x)" in text
    assert f"  %{numbers[body.fields[1]]} = (%{numbers[first]},);" in text
    assert text.rstrip().endswith(f"  (%{numbers[added]}, %{numbers[body.fields[1]]})\n}}\n\n{METADATA_OMITTED}"[-80:])
    # the four batch_norm constants are four meta entries, numbered in order of first use
    assert [f"meta[relay.Constant][{i}]" in text for i in range(5)] == [True] * 4 + [False]


def test_lets_print_in_order_with_their_types():
    x = Var("x", T4)
    a, b = Var("a", T4), Var("b")
    body = Let(a, call("nn.relu", x), Let(b, call("add", a, x), call("multiply", b, a)))
    text = IRModule({"main": Function([x], body)}).astext()
    lines = text.splitlines()
    assert lines[2].startswith("  let %a: Tensor[(1, 3, 8, 8), float32] = nn.relu(%x)")
    assert lines[3].startswith("  let %b = add(%a, %x)")
    assert lines[4].startswith("  %0 = multiply(%b, %a)")
    assert lines[5] == "  %0"
    assert structural_equal(parse(text), IRModule({"main": Function([x], body)}))


def test_a_let_that_is_not_in_tail_position_prints_as_a_parenthesised_block():
    x = Var("x", T4)
    v = Var("v", T4)
    inner = Let(v, call("nn.relu", x), call("add", v, v))
    body = call("multiply", inner, x)
    mod = IRModule({"main": Function([x], body)})
    text = mod.astext()
    assert "(\n" in text and "let %v" in text
    assert structural_equal(parse(text), mod)


@pytest.mark.parametrize("value, text", [
    (np.float32(1.0), "1f"), (np.float32(0.5), "0.5f"), (np.float32(-4), "-4f"), (np.float32(1e-5), "1e-05f"),
    (np.float32(0.1), "0.1f"), (np.float32(np.inf), "inff"), (np.float16(1.5), "1.5f16"),
    (np.float64(1.0), "1f64"), (np.float64(0.1), "0.1f64"), (np.int32(64), "64"), (np.int64(0), "0i64"),
    (np.int8(3), "3i8"), (np.uint8(3), "3u8"), (np.int16(-7), "-7i16"), (np.uint64(2 ** 64 - 1), "18446744073709551615u64"),
    (np.bool_(True), "True"), (np.bool_(False), "False"),
])
def test_scalar_constants_print_inline_and_read_back_exactly(value, text):
    c = Constant(np.array(value))
    assert scalar_literal(c) == text
    x = Var("x", TensorType((), c.data.dtype.name if c.data.dtype != np.bool_ else "bool"))
    op = "logical_and" if c.data.dtype == np.bool_ else "add"
    mod = IRModule({"main": Function([x], call(op, x, c))})
    printed = mod.astext()
    assert f"(%x, {text})" in printed and "meta[" not in printed
    back = parse(printed).main.body.args[1].data
    assert back.dtype == c.data.dtype and back.tobytes() == c.data.tobytes()


@pytest.mark.parametrize("value, text", [
    (3, "3"), (-1, "-1"), (1e-05, "1e-05f"), (0.02, "0.02f"), (6.0, "6f"), (0.1 + 0.2, "0.30000000000000004f"),
    ("NCHW", '"NCHW"'), ('a "q"\n', '"a \\"q\\"\\n"'), ((1, 1), "[1, 1]"), (((1, 2), (3, 4)), "[[1, 2], [3, 4]]"),
    (True, "True"), (False, "False"), (None, "None"), (np.int64(5), "5"), ((), "[]"), (float("-inf"), "-inff"),
])
def test_attribute_values_are_spelled_like_tvm(value, text):
    assert format_attr_value(value) == text


def test_float_attributes_read_back_to_the_same_double():
    x = Var("x", T4)
    for alpha in (0.1, 1 / 3, 1e-300, 123456789.125, -0.0, 2.5e-08):
        mod = IRModule({"main": Function([x], call("nn.leaky_relu", x, alpha=alpha))})
        back = parse(mod.astext()).main.body.attrs.alpha
        assert back == alpha and str(back) == str(alpha)


def test_metadata_section_holds_constants_in_first_use_order_across_the_module():
    x = Var("x", TensorType((2,), "float32"))
    shared = const(np.array([1.0, 2.0], np.float32))
    other = Constant(np.array([7, 8], np.int8))
    helper_x = Var("y", TensorType((2,), "float32"))
    helper = Function([helper_x], call("add", helper_x, shared))
    main = Function([x], call("multiply", Call(GlobalVar("helper"), [call("add", x, shared)]),
                              call("cast", call("add", call("cast", x, dtype="int8"), other), dtype="float32")))
    mod = IRModule({"helper": helper, "main": main})
    text = mod.astext(show_meta_data=True)
    body, section = text.split("\n\n#[metadata]\n")
    assert body.count("meta[relay.Constant][0]") == 2 and body.count("meta[relay.Constant][1]") == 1
    assert body.index("meta[relay.Constant][1]") < body.index("def @helper")
    arrays = decode_metadata(section)
    assert arrays[0].tolist() == [1.0, 2.0] and arrays[1].dtype == np.int8
    doc = json.loads(section)
    assert doc["attrs"] == {"tvm_version": "0.16.dev0"} and doc["root"] == 1
    again = parse(text)
    assert structural_equal(again, mod)
    c0 = again.main.body.args[0].args[0].args[1]
    assert c0 is again["helper"].body.args[1]  # one constant, shared, as in the original


def test_no_constants_no_metadata_section():
    x = Var("x", T4)
    text = IRModule({"main": Function([x], call("nn.relu", x))}).astext()
    assert "metadata" not in text and text.endswith("}")


@pytest.mark.parametrize("layer, span", [
    ("/conv1/Conv", "span=/conv1/Conv:0:0"),
    ("onnx::Conv_193", "span=onnx::Conv_193:0:0"),
    ("with space", 'span="with space":0:0'),
    ('say "hi"', 'span="say \\"hi\\"":0:0'),
    ("a */ b", 'span="a \\u002a/ b":0:0'),
    ("a /* b", 'span="a /\\u002a b":0:0'),
    ("", 'span="":0:0'),
])
def test_layer_names_become_spans_and_read_back(layer, span):
    x = Var("x", T4)
    mod = IRModule({"main": Function([x], call("nn.relu", x, layer=layer))})
    text = mod.astext()
    assert span in text
    assert parse(text).main.body.layer == layer


def test_names_are_unique_and_readable_like_tvm():
    a, b, c = Var("x", T4), Var("x", T4), Var("x1", T4)
    d, e = Var("0", T4), Var("a b", T4)
    body = call("concatenate", Tuple([a, b, c, d, e]), axis=1)
    mod = IRModule({"main": Function([a, b, c, d, e], body)})
    text = mod.astext()
    assert "def @main(%x: Tensor[(1, 3, 8, 8), float32], %x1: Tensor[(1, 3, 8, 8), float32], " \
           "%x11: Tensor[(1, 3, 8, 8), float32], %v0: Tensor[(1, 3, 8, 8), float32], " \
           "%a_b: Tensor[(1, 3, 8, 8), float32])" in text
    assert structural_equal(parse(text), mod)


def test_projection_of_a_named_value_is_parenthesised():
    """%x.0 could itself be a name; (%x).0 cannot."""
    t = Var("t", TensorType((2,)))
    u = Var("t.0", TensorType((2,)))
    pair = Var("pair")
    body = Let(pair, Tuple([t, u]), call("add", TupleGetItem(pair, 0), u))
    mod = IRModule({"main": Function([t, u], body)})
    text = mod.astext()
    assert "(%pair).0" in text and "%t.0" in text
    assert structural_equal(parse(text), mod)


def test_call_attrs_on_closure_calls_and_repr():
    p = Var("p", T4)
    closure = Function([p], call("nn.relu", p))
    x = Var("x", T4)
    expr = Call(closure, [x], {"name": "func_call_attrs", "attrs_type_key": "attrs.TestAttrs"})
    text = repr(expr)
    assert text.startswith("free_var %x: Tensor[(1, 3, 8, 8), float32];\n%0 = fn (%p")
    assert '%0(%x, name="func_call_attrs", attrs_type_key="attrs.TestAttrs")' in text
    assert expr_to_text(expr) == text
    parsed = parse(text).main
    assert structural_equal(parsed.body, expr)


def test_printing_is_deterministic_and_survives_ill_typed_modules():
    x = Var("x", T4)
    bad = call("nn.dense", x, const(np.ones((2, 5), np.float32)))  # wrong feature count
    mod = IRModule({"main": Function([x], call("nn.relu", bad))})
    first = mod.astext()
    assert mod.astext() == first and IRModule({"main": mod.main}).astext() == first
    assert str(mod) == mod.astext(show_meta_data=False) and str(mod).endswith(METADATA_OMITTED)
    assert "  nn.relu(%0)\n}" in first  # calls past the bad dense could not be typed: no annotation
    unbound = IRModule({"main": Function([], call("nn.relu", Var("ghost", T4)))})
    assert "%ghost" in unbound.astext()
