"""Relay syntax the samples do not all show: comments, names with dots, projections, types,
literals, lets, threading of missing constants through several functions."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tidlx.frontends.relay import RelayParseError, parse
from tidlx.ir import Call, Constant, Function, GlobalVar, Let, TensorType, Tuple, TupleGetItem, TupleType, Var
from tidlx.ir.errors import TidlxWarning
from tidlx.ir.structural import structural_equal
from tidlx.ir.types import FuncType


def quiet(text, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TidlxWarning)
        return parse(text, **kwargs)


def test_comments_nested_and_line_comments_are_ignored():
    mod = parse("""
        // a line comment
        def @main(%x: float32 /* a /* nested */ comment */) -> float32 {
          /* ty=not a real annotation here */ add(%x, 1f) // trailing
        }
        /* after /* nested /* deeper */ */ the end */
    """)
    assert mod.main.body.args[1].data[()] == np.float32(1)
    many = parse("def @main(%x: float32) {\n" + "/* a /* b */ c */ " * 3000 + "%x\n}")
    assert many.main.body is many.main.params[0]


def test_dotted_names_versus_projections():
    text = """
    def @main(%input.1: Tensor[(2), float32], %fc.weight: Tensor[(2), float32], %onnx::Conv_193: Tensor[(2), float32]) {
      %0 = (%input.1, %fc.weight);
      %0.0 = add(%0.1, %onnx::Conv_193);
      %2 = (%0.0, %0.0);
      %3 = multiply(%2.1, (%0).0);
      (%3, (%2).0.0)
    }
    """
    with pytest.raises(RelayParseError, match=r":7:17: .*projection \.0 of a non-tuple"):
        parse(text)  # %2.1 is fine, but (%2).0.0 projects a tensor
    ok = parse(text.replace("(%2).0.0", "(%2).0"))
    main = ok.main
    bound = main.body.fields[1]
    assert isinstance(bound, TupleGetItem) and bound.index == 0
    added = bound.tuple_value.fields[0]  # %0.0 is a bound name, not a projection
    assert isinstance(added, Call) and added.op.name == "add"
    assert isinstance(added.args[0], TupleGetItem) and added.args[0].index == 1
    assert added.args[1].name_hint == "onnx::Conv_193"


def test_types_tuples_functions_and_scalars():
    mod = parse("""
    def @main(%a: Tensor[(), float32], %b: float32, %t: (Tensor[(2, 3), int8], float16),
              %one: (float32,), %f: fn (float32, float32) -> float32) -> (float32,) {
      %0 = %f(%a, %b);
      let %c: float32 = add(%0, %t.1 /* ty=float16 */ );
      (%c,)
    }
    """.replace("%t.1 /* ty=float16 */", "%b"))
    a, b, t, one, f = mod.main.params
    assert a.type_annotation == b.type_annotation == TensorType((), "float32")
    assert t.type_annotation == TupleType((TensorType((2, 3), "int8"), TensorType((), "float16")))
    assert one.type_annotation == TupleType((TensorType((), "float32"),))
    assert f.type_annotation == FuncType((TensorType(()),) * 2, TensorType(()))
    assert isinstance(mod.main.body, Let) and mod.main.body.var.type_annotation == TensorType(())
    again = parse(mod.astext())
    assert structural_equal(again, mod)


@pytest.mark.parametrize("literal, dtype, value", [
    ("1f", "float32", 1.0), ("-4f", "float32", -4.0), ("1e-05f", "float32", np.float32(1e-05)),
    ("0.5", "float32", 0.5), ("1.5f16", "float16", 1.5), ("1f64", "float64", 1.0), ("2.5f32", "float32", 2.5),
    ("64", "int32", 64), ("-3", "int32", -3), ("0i64", "int64", 0), ("3i8", "int8", 3), ("3u8", "uint8", 3),
    ("7u16", "uint16", 7), ("-7i16", "int16", -7), ("9u32", "uint32", 9), ("True", "bool", True),
    ("False", "bool", False), ("inff", "float32", np.inf), ("-inff", "float32", -np.inf),
])
def test_literals_with_suffixes(literal, dtype, value):
    mod = parse(f"def @main() {{\n  {literal}\n}}")
    data = mod.main.body.data
    assert isinstance(mod.main.body, Constant) and data.dtype.name == dtype and data[()] == value


def test_attribute_values_of_every_kind():
    mod = parse("""
    def @main(%x: Tensor[(1, 3, 8, 8), float32]) {
      %0 = nn.leaky_relu(%x, alpha=2.5e-01f);
      %1 = clip(%0, a_min=-1f, a_max=6f);
      %2 = nn.conv2d(%1, meta[relay.Constant][0], padding=[1, 1], data_layout="NCHW", out_dtype="",
                     channels=None, kernel_size=[3, 3],);
      %3 = nn.pad(%2, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]]);
      reshape(%3, newshape=[1, -1], allowzero=False)
    }
    """, params=[np.zeros((2, 3, 3, 3), np.float32)])
    body = mod.main.body
    assert body.attrs.newshape == (1, -1) and body.attrs.allowzero is False
    pad = body.args[0]
    assert pad.attrs.pad_width == ((0, 0), (0, 0), (1, 1), (1, 1))
    conv = pad.args[0]
    assert conv.attrs.padding == (1, 1) and conv.attrs.channels is None
    clip = conv.args[0]
    assert clip.attrs.a_min == -1.0 and clip.attrs.a_max == 6.0
    assert clip.args[0].attrs.alpha == 0.25
    assert body.checked_type == TensorType((1, 2 * 10 * 10), "float32")


def test_header_is_optional_and_defs_may_come_in_any_order():
    body = """
    def @f(%a: float32) -> float32 { @g(%a) }
    def @main(%x: float32) -> float32 { @f(%x) }
    def @g(%b: float32) -> float32 { negative(%b) }
    """
    with_header = parse('#[version = "0.0.5"]\n' + body)
    without = parse(body)
    assert structural_equal(with_header, without)
    assert list(without.functions) == ["f", "main", "g"]
    assert without.main.body.checked_type == TensorType(())


def test_missing_constants_thread_through_a_chain_of_functions_and_closures():
    text = """
    def @main(%x: Tensor[(2), float32]) {
      %0 = @middle(%x);
      add(%0, meta[relay.Constant][2] /* ty=Tensor[(2), float32] */)
    }
    def @middle(%y: Tensor[(2), float32]) {
      %1 = fn (%z: Tensor[(2), float32]) {
        @leaf(%z)
      };
      %1(%y)
    }
    def @leaf(%w: Tensor[(2), float32]) {
      %5 = multiply(%w, meta[relay.Constant][0] /* ty=Tensor[(2), float32] */);
      subtract(%5, meta[relay.Constant][1])
    }
    """
    with pytest.warns(TidlxWarning) as record:
        mod = parse(text)
    messages = [str(r.message) for r in record]
    assert any("@leaf uses 2 constant(s)" in m and "untyped (no /* ty=... */ annotation): 1" in m for m in messages)
    assert any("@main uses 1 constant(s)" in m for m in messages)
    names = lambda fn: [p.name_hint for p in fn.params]  # noqa: E731
    assert names(mod["leaf"]) == ["w", "meta_const_0", "meta_const_1"]
    assert names(mod["middle"]) == ["y", "meta_const_0", "meta_const_1"]
    assert names(mod.main) == ["x", "meta_const_0", "meta_const_1", "meta_const_2"]
    closure_call = mod["middle"].body.op.body  # the call of @leaf inside the closure
    assert isinstance(closure_call.op, GlobalVar)
    assert closure_call.args[1] is mod["middle"].params[1]  # captured from @middle
    # meta[relay.Constant][1] has no annotation: leaf and its callers cannot be typed
    assert not mod.main.body.has_type
    # ... until its type is given
    typed = quiet(text.replace("meta[relay.Constant][1])", "meta[relay.Constant][1] /* ty=Tensor[(2), float32] */)"))
    assert typed.main.body.checked_type == TensorType((2,), "float32")
    # given as params, they are constants again and nothing is threaded
    full = parse(text, params=[np.ones(2, np.float32)] * 3)
    assert names(full.main) == ["x"] and names(full["leaf"]) == ["w"]


def test_free_vars_and_a_bare_expression_with_lets():
    mod = parse("""
    free_var %x: Tensor[(2), float32];
    free_var %unused: float32;
    let %y = nn.relu(%x);
    %0 = add(%y, %y);
    (%0, %y)
    """)
    assert [p.name_hint for p in mod.main.params] == ["x", "unused"]
    assert isinstance(mod.main.body, Let) and isinstance(mod.main.body.body, Tuple)
    untyped = parse("free_var %x;\nnn.relu(%x)")
    assert untyped.main.params[0].type_annotation is None and not untyped.main.body.has_type


def test_calls_of_calls_and_of_parenthesised_functions():
    mod = parse("""
    def @main(%x: float32) {
      %0 = fn (%a: float32) { fn (%b: float32) { add(%a, %b) } };
      %1 = %0(%x)(%x);
      (fn (%c: float32) { negative(%c) })(%1)
    }
    """)
    outer = mod.main.body
    assert isinstance(outer.op, Function) and isinstance(outer.args[0], Call)
    assert isinstance(outer.args[0].op, Call) and outer.checked_type == TensorType(())
    assert structural_equal(parse(mod.astext()), mod)


def test_int64_dimensions_and_unreadable_annotations():
    mod = parse("def @main(%x: Tensor[(1i64, 64i64), float32], %y: Tensor[(2, 3i64), float32]) {\n  %x\n}")
    assert [p.type_annotation.shape for p in mod.main.params] == [(1, 64), (2, 3)]
    # a /* ty=... */ that is no type this IR has is only a comment: the constant stays untyped
    for annotation in ["(flaot32, float32)", "Tensor[(?, 2), float32]", "Storage", "(((("]:
        text = f"def @main(%x: Tensor[(2), float32]) {{\n  add(%x, meta[relay.Constant][0] /* ty={annotation} */)\n}}"
        main = quiet(text).main
        assert main.params[1].type_annotation is None and not main.body.has_type
