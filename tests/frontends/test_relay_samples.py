"""The Relay parser and printer on real text printed by TVM (tests/data/relay-samples)."""

from __future__ import annotations

import base64
import struct
import warnings

import numpy as np
import pytest

import tidlx
from tidlx.frontends.relay import RelayParseError, parse
from tidlx.ir import Call, Constant, Function, GlobalVar, Op, TensorType, Tuple, TupleGetItem, Var
from tidlx.ir.errors import TidlxWarning
from tidlx.ir.structural import structural_equal
from tidlx.ir.traversal import calls, post_order

WHOLE_SAMPLES = [
    "01_resnet50_meta_constants.txt",
    "02_byoc_printed_ty_span_annotations.txt",
    "03_byoc_outlined_multi_def.txt",
    "04a_cmsisnn_qnn_tflite_import.txt",
    "04b_cmsisnn_partitioned.txt",
    "07a_parser_test_free_var_expr.txt",
    "07b_parser_test_call_attrs_type_key.txt",
    "08_conv2d_frozen_with_metadata.txt",
    "09_resnet18_opt_nometa.txt",
    "10_resnet18_tidl_partitioned_nometa.txt",
]


def read(samples, name: str) -> str:
    return (samples / name).read_text(encoding="utf-8")


def quiet_parse(text: str, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TidlxWarning)
        return parse(text, **kwargs)


def sample_05_fns(samples) -> list:
    """Sample 05 is two bare fn expressions from a doc page: drop its '#' lines and tabs."""
    lines = [line.replace("\t", "") for line in read(samples, "05_convert_layout_doc_fn_exprs.txt").splitlines()
             if not line.lstrip().startswith("#")]
    texts = "\n".join(lines).split("\n\n")
    return [t for t in texts if t.strip()]


def sample_06_modules(samples) -> list:
    """Sample 06 is docstring fragments: wrap them, verbatim, in minimal modules."""
    lines = read(samples, "06_tidl_fork_docstring_fragments.txt").splitlines()
    clip = ("def @main(%x.1: Tensor[(1, 3, 224, 224), float32]) {\n"
            + "\n".join(lines[0:2]) + "\n  %3\n}\n")
    argmax = ("def @main(%MobilenetV2/MobilenetV2/input: Tensor[(1, 512, 512, 32), uint8]) {\n"
              + "\n".join(lines[2:4]) + "\n}\n\n"
              "def @tidl_0(%tidl_0_i0: Tensor[(1, 512, 512, 32), uint8], Compiler=\"tidl\") "
              "-> Tensor[(1, 512, 512, 32), uint8] {\n  copy(%tidl_0_i0)\n}\n")
    return [clip, argmax]


def all_texts(samples):
    out = [(name, read(samples, name)) for name in WHOLE_SAMPLES]
    out += [(f"05[{i}]", t) for i, t in enumerate(sample_05_fns(samples))]
    out += [(f"06[{i}]", t) for i, t in enumerate(sample_06_modules(samples))]
    return out


def test_every_sample_parses_prints_and_parses_back_equal(relay_samples):
    texts = all_texts(relay_samples)
    assert len(texts) == 14
    for name, text in texts:
        mod = quiet_parse(text, source_name=name)
        assert "main" in mod, name
        printed = mod.astext(show_meta_data=True)
        assert printed.startswith('#[version = "0.0.5"]\ndef @main('), name
        again = quiet_parse(printed, source_name=name + " (printed)")
        assert structural_equal(mod, again), name
        assert structural_equal(mod, again, compare_layers=True), name
        assert again.astext(show_meta_data=True) == printed, name  # a fixpoint after one round


def test_sample_01_resnet50_untyped_constants_become_parameters(relay_samples):
    text = read(relay_samples, "01_resnet50_meta_constants.txt")
    with pytest.warns(TidlxWarning, match=r"259 constant.*meta\[relay.Constant\]\[0-258\].*untyped .*: 0-258"):
        mod = parse(text)
    main = mod.main
    assert [p.name_hint for p in main.params[:2]] == ["data", "meta_const_0"]
    assert len(main.params) == 1 + 259
    assert all(p.type_annotation is None for p in main.params[1:])
    ops = [c.op.name for c in calls(main)]
    assert ops.count("nn.conv2d") == 53 and ops.count("nn.batch_norm") == 51
    assert ops[-3:] == ["reshape", "nn.dense", "add"]
    # Untyped parameters: the module is read but not type-checked.
    assert not main.body.has_type
    reshape = next(c for c in calls(main) if c.op.name == "reshape")
    assert tuple(reshape.attrs.newshape) == (0, -1)
    projections = [n for n in post_order(main) if isinstance(n, TupleGetItem)]
    assert len(projections) == 51 and all(p.index == 0 for p in projections)


def test_params_fill_the_meta_table_and_bind_main_parameters(relay_samples):
    """TVM's init_meta_table: constants given as params instead of a #[metadata] section."""
    text = read(relay_samples, "09_resnet18_opt_nometa.txt")
    untyped = quiet_parse(text)
    arrays = [np.full(p.type_annotation.shape, i, np.float32) for i, p in enumerate(untyped.main.params[1:])]
    mod = parse(text, params=arrays)
    assert [p.name_hint for p in mod.main.params] == ["input"]
    conv = next(calls(mod.main, "nn.conv2d"))
    assert conv.args[1].data.shape == (64, 3, 7, 7) and conv.args[1].data[0, 0, 0, 0] == 0
    assert mod.main.body.args[1].data[0] == 41
    # str keys bind @main's parameters by name (here the ones standing for missing constants)
    by_name = parse(text, params={f"meta_const_{i}": a for i, a in enumerate(arrays)})
    assert structural_equal(by_name, mod)
    with pytest.raises(RelayParseError, match=r"params\[0\]: .*|annotated Tensor\[\(64, 3, 7, 7\), float32\]"):
        parse(text, params=[np.zeros((3,), np.float32)])
    with pytest.raises(RelayParseError, match="@main has no parameter %inptu; did you mean 'input'"):
        quiet_parse(text, params={"inptu": np.zeros((1, 3, 224, 224), np.float32)})


def test_sample_02_spans_closures_and_param_annotations(relay_samples):
    mod = quiet_parse(read(relay_samples, "02_byoc_printed_ty_span_annotations.txt"))
    main = mod.main
    assert isinstance(main.body, Tuple) and len(main.body.fields) == 2
    assert main.body.checked_type == mod.main.ret_type
    outer = main.body.fields[1].op
    assert isinstance(outer, Function) and outer.attrs["Compiler"] == "cublas"
    assert outer.attrs["Primitive"] == 1 and outer.attrs["global_symbol"] == "tvmgen_default_cublas_main_3"
    inner = outer.body.op
    assert isinstance(inner, Function) and inner.attrs["Composite"] == "cublas.batch_matmul"
    # span=index:a:b gives every call the layer name "index"
    assert {c.layer for c in post_order(main) if isinstance(c, Call)} == {"index"}
    # The three constants are typed from their /* ty=... */ annotations.
    assert [str(p.type_annotation) for p in main.params[2:]] == [
        "Tensor[(2304, 768), float16]", "Tensor[(2304), float16]", "Tensor[(600, 32, 64), float16]"]


def test_sample_03_forward_reference_to_a_later_def_threads_constants(relay_samples):
    with pytest.warns(TidlxWarning, match="@main uses 3 constant"):
        mod = parse(read(relay_samples, "03_byoc_outlined_multi_def.txt"))
    assert list(mod.functions) == ["main", "tvmgen_default_cutlass_main_0"]
    first = mod.main.body.fields[0]
    assert isinstance(first.op, GlobalVar) and first.op.name_hint == "tvmgen_default_cutlass_main_0"
    assert mod["tvmgen_default_cutlass_main_0"].attrs["Compiler"] == "cutlass"


def test_sample_04_qnn_scalars_with_their_own_annotations(relay_samples):
    mod = parse(read(relay_samples, "04a_cmsisnn_qnn_tflite_import.txt"))
    deq = next(calls(mod.main, "qnn.dequantize"))
    scale, zero_point = deq.args[1:]
    assert isinstance(scale, Constant) and scale.data.dtype == np.float32 and scale.data[()] == np.float32(0.02)
    assert isinstance(zero_point, Constant) and zero_point.data.dtype == np.int32 and zero_point.data[()] == 64
    assert mod.main.body.checked_type == TensorType((1, 16, 16, 3), "int8")
    partitioned = parse(read(relay_samples, "04b_cmsisnn_partitioned.txt"))
    sub = partitioned["tvmgen_default_cmsisnn_0"]
    assert sub.attrs["Compiler"] == "cmsisnn" and isinstance(sub.body.op, Function)


def test_sample_05_bare_fn_expressions_become_main(relay_samples):
    first, second = (parse(t) for t in sample_05_fns(relay_samples))
    assert [p.name_hint for p in first.main.params] == ["x", "weight1", "weight2"]
    conv = next(calls(first.main, "nn.conv2d"))
    assert conv.attrs.data_layout == "NHWC" and conv.attrs.kernel_layout == "HWIO"
    assert first.main.body.checked_type == TensorType((1, 56, 56, 32), "float32")
    transforms = list(calls(second.main, "layout_transform"))
    assert len(transforms) == 4 and transforms[0].attrs.src_layout == "NHWC"
    assert second.main.body.checked_type == first.main.body.checked_type


def test_sample_06_dotted_and_slashed_names(relay_samples):
    clip, argmax = (parse(t) for t in sample_06_modules(relay_samples))
    assert clip.main.params[0].name_hint == "x.1"
    maximum = next(calls(clip.main, "maximum"))
    assert maximum.args[0] is clip.main.params[0]  # a name, not a projection of %x
    assert maximum.args[1].data[()] == np.float32(-4.0)
    assert argmax.main.params[0].name_hint == "MobilenetV2/MobilenetV2/input"
    assert argmax.main.body.checked_type == TensorType((1, 512, 512), "int32")


def test_sample_07_free_vars_and_generic_call_attrs(relay_samples):
    free = parse(read(relay_samples, "07a_parser_test_free_var_expr.txt"))
    assert [p.name_hint for p in free.main.params] == ["x", "y"]
    assert free.main.body.attrs.data_layout == "NHWC"
    closure_call = parse(read(relay_samples, "07b_parser_test_call_attrs_type_key.txt")).main.body
    assert isinstance(closure_call.op, Function)
    assert dict(closure_call.attrs) == {"name": "func_call_attrs", "attrs_type_key": "attrs.TestAttrs"}
    dense = next(calls(closure_call.op, "nn.dense"))
    assert dense.attrs.units is None


def test_sample_08_metadata_constants_decode_exactly(relay_samples):
    text = read(relay_samples, "08_conv2d_frozen_with_metadata.txt")
    mod = parse(text)
    conv = next(calls(mod.main, "nn.conv2d"))
    bias_add = mod.main.body
    weight, bias = conv.args[1], bias_add.args[1]
    assert isinstance(weight, Constant) and isinstance(bias, Constant)
    assert weight.data.shape == (4, 3, 3, 2) and weight.data.dtype == np.float32
    assert bias.data.shape == (4,) and bias.data.dtype == np.float32
    # Independently of tidlx's decoder: the bias data are the last 16 bytes of its b64 entry.
    b64 = text.split('"b64ndarrays": [')[1].split('"')
    weight_raw, bias_raw = base64.b64decode(b64[1]), base64.b64decode(b64[3])
    assert np.array_equal(bias.data, np.frombuffer(bias_raw[-16:], "<f4"))
    assert np.array_equal(weight.data.ravel(), np.frombuffer(weight_raw[-4 * 72:], "<f4"))
    assert struct.unpack("<f", bias_raw[-16:-12])[0] == pytest.approx(-0.174544, abs=1e-6)
    assert conv.layer == "Conv_0" and bias_add.layer == "3@@Conv_0"
    assert conv.attrs.kernel_size == (3, 2) and conv.attrs.padding == (0, 0, 0, 0)
    # Stripping the section and giving the arrays as params reads the same module.
    bare = text.split("#[metadata]")[0]
    assert structural_equal(parse(bare, params=[weight.data, bias.data]), mod, compare_layers=True)
    assert structural_equal(parse(bare, params={0: weight.data, 1: bias.data}), mod)


def test_sample_09_typed_from_annotations_without_metadata(relay_samples):
    with pytest.warns(TidlxWarning) as record:
        mod = parse(read(relay_samples, "09_resnet18_opt_nometa.txt"), source_name="09.txt")
    assert len(record) == 1 and "09.txt:3:" in str(record[0].message)
    main = mod.main
    assert len(main.params) == 1 + 42
    assert main.params[1].type_annotation == TensorType((64, 3, 7, 7), "float32")
    assert main.body.checked_type == TensorType((1, 1000), "float32")
    assert main.body.layer == "logits@@/fc/Gemm"
    layers = [c.layer for c in calls(main, "nn.conv2d")]
    assert layers[0] == "/conv1/Conv" and "/layer4/layer4.1/conv2/Conv" in layers


def test_sample_10_tidl_functions_and_their_layers(relay_samples):
    with pytest.warns(TidlxWarning):
        mod = parse(read(relay_samples, "10_resnet18_tidl_partitioned_nometa.txt"))
    tidl = [name for name, fn in mod.items() if fn.attrs.get("Compiler") == "tidl"]
    assert tidl == ["tvmgen_default_tidl_main_0", "tvmgen_default_tidl_main_41"]
    first, last = mod[tidl[0]], mod[tidl[1]]
    assert first.attrs["Primitive"] == 1 and first.attrs["global_symbol"] == tidl[0]
    first_layers = [c.layer for c in calls(first)]
    assert first_layers[:4] == ["/conv1/Conv", "/conv1/Conv", "/relu/Relu", "/maxpool/MaxPool"]
    assert first_layers[-1] == "/layer4/layer4.1/relu_1/Relu"
    assert [c.layer for c in calls(last)] == ["/fc/Gemm", "logits@@/fc/Gemm"]
    # Constants used inside the TIDL functions become their parameters, passed from @main.
    assert len(first.params) == 1 + 40 and len(last.params) == 1 + 2
    assert len(mod.main.params) == 1 + 42
    call_first = next(n for n in post_order(mod.main) if isinstance(n, Call) and isinstance(n.op, GlobalVar)
                      and n.op.name_hint == tidl[0])
    assert [a.name_hint for a in call_first.args[1:3]] == ["meta_const_0", "meta_const_1"]
    assert all(fn.body.has_type for _, fn in mod.items())
    text = mod.astext()
    assert text.count('Compiler="tidl"') == 2
    assert "span=/layer1/layer1.0/conv1/Conv:0:0" in text


def test_public_wrapper_and_load(relay_samples, tmp_path):
    text = read(relay_samples, "08_conv2d_frozen_with_metadata.txt")
    assert structural_equal(tidlx.parse_relay(text), parse(text))
    path = tmp_path / "model.relay"
    path.write_text(text)
    assert structural_equal(tidlx.load(str(path)), parse(text))
    with pytest.raises(RelayParseError, match=r"model\.relay:1:1"):
        path.write_text("?")
        tidlx.load(str(path))
