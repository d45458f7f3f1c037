"""Malformed Relay text: always a RelayParseError (a TidlxError) naming file:line:col, the line and a
caret; never another exception type. A bug of ours is a TidlxInternalError, never a RelayParseError."""

from __future__ import annotations

import base64
import json
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidlx.frontends.relay import RelayParseError, parse
from tidlx.ir import IRModule
from tidlx.frontends.relay import actions as relay_actions
from tidlx.frontends.relay import assemble as relay_assemble
from tidlx.ir.errors import TidlxError, TidlxInternalError, TidlxWarning
from tidlx.ir.metadata import encode_metadata

CONV = ('def @main(%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32]) {\n'
        '  %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);\n'
        '  nn.relu(%0)\n'
        '}\n')


def parse_error(text: str, **kwargs) -> RelayParseError:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TidlxWarning)
        with pytest.raises(RelayParseError) as info:
            parse(text, source_name="model.relay", **kwargs)
    return info.value


def located(err: RelayParseError, line: int, col: int, fragment: str) -> None:
    """The message starts with file:line:col, shows the line, and has a caret under the column."""
    text = str(err)
    assert text.startswith(f"model.relay:{line}:{col}: "), text
    caret = text.split("\n")[2]
    assert caret.index("^") - 2 == col - 1, text
    assert fragment in text, text
    assert (err.line, err.column) == (line, col)


def test_the_valid_base_text_parses():
    assert isinstance(parse(CONV), IRModule)


def test_type_error_points_at_the_call():
    err = parse_error(CONV.replace("Tensor[(4, 3, 3, 3)", "Tensor[(4, 2, 3, 3)"))
    located(err, 2, 8, "nn.conv2d: input has 3 channels but weight expects 2")
    assert "%0 = nn.conv2d(" in str(err)


def test_type_error_in_a_later_def_and_in_a_closure():
    text = ('def @main(%x: Tensor[(2, 3), float32]) {\n  @f(%x)\n}\n\n'
            'def @f(%y: Tensor[(2, 3), float32]) {\n'
            '  %1 = fn (%z: Tensor[(2, 3), float32]) {\n    nn.dense(%z, %z, units=5)\n  };\n'
            '  %1(%y)\n}\n')
    located(parse_error(text), 7, 5, "units=5 but the weight has 2 rows")


def test_wrong_argument_types_for_calls_of_functions():
    text = ('def @main(%x: Tensor[(2, 3), float32]) {\n  @f(%x)\n}\n'
            'def @f(%y: Tensor[(3, 2), float32]) {\n  %y\n}\n')
    located(parse_error(text), 2, 3, "argument 0 is Tensor[(2, 3), float32], the function expects "
                                     "Tensor[(3, 2), float32]")


def test_declared_return_type_mismatch():
    located(parse_error("def @main(%x: float32) -> int32 {\n  %x\n}"), 1, 5,
            "declares return type int32 but its body has type float32")


def test_unknown_op_names_the_closest_ops():
    err = parse_error(CONV.replace("nn.relu", "nn.rellu"))
    located(err, 3, 3, "unknown op 'nn.rellu'; closest known ops: nn.relu")


def test_bad_attribute_name_names_the_close_one():
    err = parse_error(CONV.replace("padding=", "paddings="))
    located(err, 2, 26, "nn.conv2d has no attribute 'paddings'; did you mean padding")


@pytest.mark.parametrize("old, new, fragment", [
    ("channels=4", 'channels="four"', "nn.conv2d"),
    ("kernel_size=[3, 3]", "kernel_size=[5, 5]", "kernel_size=[5, 5] but the weight is 3x3"),
    ("padding=[1, 1, 1, 1]", "padding=[1, 1, 1]", "padding"),
    ("channels=4", "channels=4, groups=0", "groups"),
])
def test_bad_attribute_values(old, new, fragment):
    err = parse_error(CONV.replace(old, new))
    assert err.line == 2 and err.column == 8 and fragment in str(err), str(err)


@pytest.mark.parametrize("text, line, col, fragment", [
    ("def @main(%x: float32) {\n  add(%x, %y)\n}", 2, 11, "unbound variable %y"),
    ("def @main(%input: float32) {\n  add(%input, %inptu)\n}", 2, 15, "did you mean %input"),
    ("def @main(%x: float32) {\n  @foo(%x)\n}", 2, 3, "undefined global @foo (defined: @main)"),
    ("def @main(%x: float32) {\n  @mian2(%x)\n}\ndef @main2(%x: float32) {\n  %x\n}", 2, 3, "did you mean @main2"),
    ("def @main(%x: float32) {\n  %x\n}\ndef @main(%y: float32) {\n  %y\n}", 4, 5, "@main is defined twice"),
    ("def @main(%x: float32, %x: float32) {\n  %x\n}", 1, 24, "%x is bound twice"),
    ("def @main(%x: float32) {\n  %0 = %x;\n  %0 = %x;\n  %0\n}", 3, 3, "%0 is bound twice"),
    ("def @main(%x: float32) {\n  add(%x, %x, %x)\n}", 2, 3, "add takes 2 inputs, got 3"),
    ("def @main(%x: float32) {\n  nn.leaky_relu(alpha=0.1f, %x)\n}", 2, 17, "positional argument after attribute 'alpha'"),
    ("def @main(%x: Tensor[(1, 3), flaot32]) {\n  %x\n}", 1, 30, "unknown dtype 'flaot32'; did you mean float32"),
    ("def @main(%x: Tensor[(?, 3), float32]) {\n  %x\n}", 1, 23, "dynamic dimensions"),
    ("def @main(%x: Tensor) {\n  %x\n}", 1, 15, "needs a shape and a dtype"),
    ("def @main(%x: int32) {\n  add(%x, 4294967296)\n}", 2, 11, "does not fit in int32"),
    ("def @main(%x: int8) {\n  add(%x, 300i8)\n}", 2, 11, "out of range for int8"),
    ("def @main(%x: float16) {\n  add(%x, 1e10f16)\n}", 2, 11, "out of range for float16"),
    ("def @main(%x: float32) {\n  free_var %y: float32;\n  %x\n}", 2, 12, "free_var is only allowed"),
    ("def @main(%x: float32) {\n  @main(%x)\n}", 1, 5, "calls itself"),
    ("def @main(%x: float32) {\n  @f(%x)\n}\ndef @f(%x: float32) {\n  @g(%x)\n}\ndef @g(%x: float32) {\n  @f(%x)\n}",
     4, 5, "@f calls @g, which leads back to it (recursion is not supported)"),
    ("def @main(%x: float32) {\n  %x.1\n}", 2, 3, "projection .1 of a non-tuple"),
    ("def @main(%x: float32) {\n  add(%x, meta[relay.Function][0])\n}", 2, 11, "meta[relay.Function]"),
    ("def @main(%x: float32) {\n  add(%x, \"abc)\n}", 2, 11, "unterminated string"),
    ("def @main(%x: float32) {\n  /* never closed\n  %x\n}", 2, 3, "unterminated /* comment"),
    ("# a python comment\ndef @main(%x: float32) {\n  %x\n}", 1, 1, "'#' comments are Python"),
    ("def @main(%x: float32) {\n  %x\n}\n#[version = \"0.0.5\"]", 4, 1, "must come first"),
    ("def @main(%x: float32) {\n  nn.relu(%x))\n}", 2, 14, "unexpected ')'"),
    ("def @main(%x: float32) {\n  nn.relu(%x)\n", 2, 14, "unexpected end of text"),
    ("", 1, 1, "no definition or expression"),
    ("   \n  // only a comment\n", 2, 20, "no definition or expression"),
])
def test_located_errors(text, line, col, fragment):
    err = parse_error(text)
    assert (err.line, err.column) == (line, col), str(err)
    assert fragment in str(err), str(err)
    if text.strip() and err.line is not None and "\n  " in str(err):
        caret_line = str(err).split("\n")[2]
        assert caret_line.index("^") - 2 == col - 1


def _metadata_text(arrays, mutate=None) -> str:
    body = "def @main(%x: Tensor[(4), float32]) {\n  add(%x, meta[relay.Constant][0])\n}\n"
    section = encode_metadata(arrays)
    if mutate is not None:
        section = mutate(section)
    return body + "\n#[metadata]\n" + section


def test_metadata_round_trip_and_its_errors():
    good = _metadata_text([np.arange(4, dtype=np.float32)])
    mod = parse(good)
    assert mod.main.body.args[1].data.tolist() == [0, 1, 2, 3]

    def replace_b64(new):
        return lambda s: re.sub(r'"b64ndarrays": \[\s*"[^"]*"', f'"b64ndarrays": [\n    "{new}"', s)

    blob = base64.b64decode(json.loads(encode_metadata([np.arange(4, dtype=np.float32)]))["b64ndarrays"][0])
    cases = [
        (lambda s: s[:-40], "invalid JSON"),
        (lambda s: "[1, 2]", "must be a JSON object"),
        (replace_b64("!!notbase64"), "invalid base64"),
        (replace_b64(base64.b64encode(b"\0" * 64).decode()), "not a TVM NDArray"),
        (replace_b64(base64.b64encode(blob[:-3]).decode()), "data bytes, the header says 16"),
        (replace_b64(base64.b64encode(blob[:20]).decode()), "too short"),
        (lambda s: s.replace('"data": "0"', '"data": "7"'), "out of range"),
        (lambda s: s.replace('"relay.Constant", \n      "attrs"', '"relay.Var", \n      "attrs"'),
         "expected a relay.Constant node"),
        (lambda s: s.replace('"root": 1', '"root": 99'), "out of range"),
    ]
    for mutate, fragment in cases:
        err = parse_error(_metadata_text([np.arange(4, dtype=np.float32)], mutate))
        assert fragment in str(err), (fragment, str(err))
        assert err.line is not None and err.line >= 5, str(err)
    # the declared type of a constant must agree with the text's annotation
    err = parse_error(good.replace("meta[relay.Constant][0]", "meta[relay.Constant][0] /* ty=Tensor[(5), float32] */"))
    assert "annotated Tensor[(5), float32] but the constant is Tensor[(4), float32]" in str(err)
    # a missing index with a section present falls back to a parameter (with a warning)
    with pytest.warns(TidlxWarning, match=r"meta\[relay.Constant\]\[1\]"):
        mod = parse(good.replace("meta[relay.Constant][0]", "meta[relay.Constant][1] /* ty=Tensor[(4), float32] */"))
    assert [p.name_hint for p in mod.main.params] == ["x", "meta_const_1"]


def test_bad_params_are_tidlx_errors():
    text = "def @main(%x: Tensor[(4), float32]) {\n  add(%x, meta[relay.Constant][0] /* ty=Tensor[(4), float32] */)\n}"
    for params, fragment in [
        ("abc", "params must be a list or a mapping"),
        ({1.5: 0}, "keys are int"),
        ({-1: np.zeros(4)}, "non-negative"),
        ([np.zeros(4, dtype=np.complex64)], "dtype complex64"),
        ([object()], "dtype object"),
        ([np.zeros(5, np.float32)], "annotated Tensor[(4), float32]"),
        ({"y": np.zeros(4, np.float32)}, "@main has no parameter %y"),
        ({"x": np.zeros(3, np.float32)}, "parameter %x is Tensor[(4), float32] but the value is Tensor[(3), float32]"),
    ]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TidlxWarning)
            with pytest.raises(RelayParseError, match=re.escape(fragment)):
                parse(text, params=params)
    with pytest.raises(RelayParseError, match="must be a str"):
        parse(b"def @main() { 1f }")


def test_params_that_do_not_fit_the_text_point_at_the_parameter():
    text = ("def @main(%x: Tensor[(4), float32],\n          %w: Tensor[(4), float32]) {\n"
            "  %0 = add(%x, %w);\n  add(%0, meta[relay.Constant][0] /* ty=Tensor[(4), float32] */)\n}")
    err = parse_error(text, params={"w": np.zeros(3, np.float32)})
    located(err, 2, 11, "params['w']: parameter %w is Tensor[(4), float32] but the value is Tensor[(3), float32]")
    err = parse_error(text, params={"meta_const_0": np.zeros(5, np.float32)})  # a missing constant's parameter
    located(err, 4, 11, "parameter %meta_const_0 is Tensor[(4), float32]")
    err = parse_error(text, params={"v": np.zeros(4, np.float32)})
    located(err, 1, 5, "params['v']: @main has no parameter %v")
    # bound by name, the constants are in @main, which is still typed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TidlxWarning)
        mod = parse(text, params={"w": np.ones(4, np.float32), "meta_const_0": np.ones(4, np.float32)})
    assert [p.name_hint for p in mod.main.params] == ["x"]
    assert mod.main.body.has_type and str(mod.main.body.checked_type) == "Tensor[(4), float32]"


def _parses_or_tidlx_error(text: str) -> None:
    """Reads ``text`` or refuses it with a located RelayParseError. Anything else fails the test:
    a TidlxInternalError (a bug of ours, raised from the original exception) or any other
    exception, which would be a bug not even recognised as one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TidlxWarning)
        try:
            result = parse(text, source_name="fuzz.relay")
        except TidlxError as exc:
            assert isinstance(exc, RelayParseError), f"{type(exc).__name__}: {exc}"
            assert str(exc).startswith("fuzz.relay"), str(exc)
        else:
            assert isinstance(result, IRModule)


def test_a_bug_in_a_grammar_action_is_an_internal_error_not_a_parse_error(monkeypatch):
    def broken_get_op(name):
        raise IndexError("injected")

    monkeypatch.setattr(relay_actions, "get_op", broken_get_op)
    text = "def @main(%x: Tensor[(4), float32]) {\n  nn.relu(%x)\n}"
    with pytest.raises(TidlxInternalError) as info:
        parse(text, source_name="model.relay")
    err = info.value
    assert not isinstance(err, TidlxError)  # no ``except TidlxError`` takes it for bad input
    assert isinstance(err.__cause__, IndexError)
    # where reading was (the token after the call, whose arrival reduces it) and that it is a bug
    assert str(err).startswith("model.relay:3:1: internal error in tidlx"), str(err)
    assert "IndexError: injected" in str(err) and "bug in tidlx" in str(err)
    with pytest.raises(TidlxInternalError):
        _parses_or_tidlx_error(text)


def test_a_bug_in_type_inference_is_an_internal_error_at_the_function_being_typed(monkeypatch):
    def broken_inference(*args):
        raise KeyError("injected")

    monkeypatch.setattr(relay_assemble, "infer_expr_type", broken_inference)
    with pytest.raises(TidlxInternalError, match=r"^model\.relay:1:5: internal error in tidlx .*KeyError: 'injected'"):
        parse("def @main(%x: Tensor[(4), float32]) {\n  nn.relu(%x)\n}", source_name="model.relay")


@pytest.mark.parametrize("name", ["02_byoc_printed_ty_span_annotations.txt", "08_conv2d_frozen_with_metadata.txt",
                                  "10_resnet18_tidl_partitioned_nometa.txt"])
def test_every_truncation_of_a_sample_is_read_or_refused_cleanly(relay_samples, name):
    text = (relay_samples / name).read_text()
    step = max(1, len(text) // 400)
    for cut in range(0, len(text), step):
        _parses_or_tidlx_error(text[:cut])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_sample_text_is_read_or_refused_cleanly(relay_samples, data):
    name = data.draw(st.sampled_from(["02_byoc_printed_ty_span_annotations.txt", "03_byoc_outlined_multi_def.txt",
                                      "04b_cmsisnn_partitioned.txt", "08_conv2d_frozen_with_metadata.txt",
                                      "07b_parser_test_call_attrs_type_key.txt"]))
    text = (relay_samples / name).read_text()
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(text)))
        kind = data.draw(st.sampled_from(["delete", "insert", "replace", "duplicate"]))
        span = data.draw(st.integers(1, 12))
        noise = data.draw(st.text(alphabet="%@()[]{},;:=.-\"/*#0123456789abcfiu \n\tTensorfnletmeta", max_size=span))
        if kind == "delete":
            text = text[:pos] + text[pos + span:]
        elif kind == "insert":
            text = text[:pos] + noise + text[pos:]
        elif kind == "replace":
            text = text[:pos] + noise + text[pos + len(noise):]
        else:
            text = text[:pos] + text[pos:pos + span * 4] + text[pos:]
    _parses_or_tidlx_error(text)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.binary(max_size=300).map(lambda b: b.decode("latin-1")), st.text(max_size=300)))
def test_random_garbage_is_refused_cleanly(text):
    _parses_or_tidlx_error(text)


def test_deep_nesting_is_refused_cleanly():
    _parses_or_tidlx_error("def @main(%x: float32) {\n  " + "(" * 50000 + "%x" + ")" * 50000 + "\n}")
    _parses_or_tidlx_error("def @main(%x: " + "(" * 3000 + "float32" + ",)" * 3000 + ") {\n  %x\n}")
