"""TI's target devices: the option target_device (TI's names, J7 aliases, bad values), ``tidlx devices``,
the device's documented layer limits in both flows, the warning about TI's default quantization style,
and the report's line saying whose rules applied."""

import json
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
from tidlx.backends.tidl import devices, numerics as nx
from tidlx.backends.tidl.options import OptionError, TidlOptions
from tidlx.cli import main
from tidlx.ir.errors import TidlxWarning

TI_NAMES = ("TDA4VM", "AM62A", "AM67A", "AM68A", "AM69A")


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def quiet_options(values):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TidlOptions.from_dict(values)


# -- the option ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("given, canonical", [
    ("TDA4VM", "TDA4VM"), ("j721e", "TDA4VM"), ("AM68PA", "TDA4VM"), ("am62a", "AM62A"), ("AM-62A", "AM62A"),
    ("J722S", "AM67A"), ("am67a", "AM67A"), ("j721s2", "AM68A"), ("TDA4VL", "AM68A"), ("J784S4", "AM69A"),
    ("tda4vh", "AM69A"), (" AM69A ", "AM69A")])
def test_names_and_aliases_become_ti_names(given, canonical):
    assert quiet_options({"target_device": given}).target_device == canonical
    # a device whose TI tools default to quantization_scale_type 4 takes it when none is given
    style = devices.default_scale_type(canonical) or devices.TIDL_DEFAULT_SCALE_TYPE
    assert quiet_options({"target_device": given}) == TidlOptions(target_device=canonical,
                                                                  quantization_scale_type=style)


def test_unset_is_tidl_defaults():
    assert TidlOptions().target_device is None
    assert devices.softmax_lanes(None) == 16 and devices.softmax_lanes("AM62A") == 8
    assert devices.softmax_lanes("j784s4") == 16
    assert TidlOptions.from_strings([]).device_warning() is None
    assert nx.table_device(None) == "lut"


@pytest.mark.parametrize("bad", ["TDA5", "J7", "AM62", "", 3])
def test_a_bad_device_is_an_option_error_listing_the_names(bad):
    if bad == "":   # an empty value is unset, as for TI's tools
        assert TidlOptions.from_dict({"target_device": bad}).target_device is None
        return
    with pytest.raises(OptionError) as err:
        TidlOptions.from_dict({"target_device": bad})
    text = str(err.value)
    assert "target_device" in text and all(name in text for name in TI_NAMES) and "J784S4" in text


def test_num_cores_is_bounded_by_the_device():
    assert quiet_options({"target_device": "AM69A", "advanced_options:num_cores": 4}).num_cores == 4
    with pytest.raises(OptionError, match="AM68A has 2 C7x cores"):
        TidlOptions.from_dict({"target_device": "j721s2", "advanced_options:num_cores": 3})
    with pytest.raises(OptionError, match="AM62A has 1 C7x core"):
        TidlOptions.from_strings(["target_device=AM62A", "advanced_options:num_cores=2"])
    with pytest.raises(OptionError, match="platform=AM62A does not match target_device=AM68A"):
        TidlOptions.from_dict({"platform": "AM62A", "target_device": "AM68A"})
    assert quiet_options({"platform": "AM62A", "target_device": "am62a"}).target_device == "AM62A"


def test_device_records_against_ti_sources():
    """The facts as TI's sources state them (each with a source), written here from TI's material."""
    c7x = {"TDA4VM": "C7100", "AM62A": "C7504", "AM67A": "C7524", "AM68A": "C7120", "AM69A": "C7120"}
    cores = {"TDA4VM": 1, "AM62A": 1, "AM67A": 2, "AM68A": 2, "AM69A": 4}
    for name in TI_NAMES:
        dev = devices.DEVICES[name]
        assert dev.c7x.value == c7x[name] and dev.cores.value == cores[name]
        assert dev.ti_scale_type.value == (1 if name == "TDA4VM" else 4)
        assert dev.runner_calibration.value == (12, 12)
        assert dev.softmax_lanes.value == dev.vector_bits.value // 32
        assert dev.softmax_lanes.unverified == (dev.vector_bits.value != 512)
        assert (dev.table_kind == "pla") == (name == "AM62A")
        for key in ("soc", "c7x", "cores", "vector_bits", "tables", "softmax_lanes", "ti_scale_type",
                    "runner_calibration"):
            assert getattr(dev, key).source


# -- tidlx devices ---------------------------------------------------------------------------------------

def test_devices_table_lists_every_device_with_sources(capsys):
    code, out, err = run_cli(capsys, "devices")
    assert code == 0 and err == ""
    rows = {line.strip("│").split("│")[0].strip(): line for line in out.splitlines() if line.startswith("│")}
    assert set(rows) == set(TI_NAMES)
    assert "C7504" in rows["AM62A"] and "piecewise-linear" in rows["AM62A"] and "8 *" in rows["AM62A"]
    assert "J784S4" in rows["AM69A"] and "16" in rows["AM69A"]
    assert "sources" in out and "TIDL_LUTMethodMapTable" in out and "presets.py" in out


def test_devices_json_and_selection(capsys):
    code, out, err = run_cli(capsys, "devices", "j722s", "am67a", "--json")
    assert code == 0 and err == ""
    records = json.loads(out)
    assert [r["name"] for r in records] == ["AM67A"]
    assert records[0]["c7x"] == {"value": "C7524", "source": devices.SRC_C7X, "unverified": False}
    assert records[0]["tables"]["value"] == "ilut"
    assert {lim["op"] for lim in records[0]["layer_limits"]} == {"Conv", "ConvTranspose"}
    code, out, err = run_cli(capsys, "devices", "TDA5")
    assert code == 2 and "unknown target device 'TDA5'" in err and "AM69A" in err


# -- layer limits, both flows ----------------------------------------------------------------------------

def _wide_pad_conv(path, pad=3):
    """A Conv whose padding (pad) exceeds its input's width (2)."""
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="wide_pad", pads=[pad] * 4, kernel_shape=[3, 3])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("flow", ["tvm", "ort"])
def test_padding_wider_than_the_input_on_am62a_and_am67a(tmp_path, capsys, flow):
    path = _wide_pad_conv(tmp_path / "wide_pad.onnx")
    verdicts = {}
    for device in (None, "AM62A", "j722s", "AM68A", "TDA4VM"):
        extra = ["-o", f"target_device={device}"] if device else []
        code, out, err = run_cli(capsys, "partition", path, "--flow", flow, "--json", *extra)
        assert code == 0, err
        data = json.loads(out)
        verdicts[device] = [h["reason"] for h in data["host_ops"]]
    assert verdicts[None] == verdicts["AM68A"] == verdicts["TDA4VM"] == []
    for device, name in (("AM62A", "AM62A"), ("j722s", "AM67A")):
        assert len(verdicts[device]) == 1
        assert f"on {name} (target_device) Conv padding greater than the input width" in verdicts[device][0]
    # padding up to the width is taken
    narrow = _wide_pad_conv(tmp_path / "narrow.onnx", pad=2)
    code, out, err = run_cli(capsys, "partition", narrow, "--flow", flow, "--json", "-o", "target_device=AM62A")
    assert code == 0 and json.loads(out)["host_ops"] == []


DECONV = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 4, 8, 8), float32]) {
  nn.conv2d_transpose(%x, meta[relay.Constant][0], channels=4, kernel_size=[2, 2], strides=[2, 2])
}
'''


def test_16bit_deconvolution_on_am67a():
    mod = tidlx.parse_relay(DECONV, params=[np.ones((4, 4, 2, 2), np.float32)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hosts = {}
        for opts in ({"tensor_bits": 16}, {"tensor_bits": 8, "target_device": "AM67A"},
                     {"tensor_bits": 16, "target_device": "AM68A"}, {"tensor_bits": 16, "target_device": "AM67A"}):
            _, report = tidlx.partition(mod, opts)
            hosts[str(opts)] = [h.reason for h in report.host_ops]
    assert [len(v) for v in hosts.values()] == [0, 0, 0, 1]
    assert "on AM67A (target_device) ConvTranspose 16-bit transposed convolution" in list(hosts.values())[-1][0]


# -- the device's quantization style and the report line --------------------------------------------------

@pytest.mark.parametrize("device, style4", [("AM68A", True), ("am62a", True), ("J784S4", True), ("J722S", True),
                                            ("TDA4VM", False)])
def test_style4_is_the_devices_default_when_the_scale_type_is_not_given(device, style4):
    """TI's tools' preset: quantization_scale_type 4 on AM62A/AM67A/AM68A/AM69A (emulated, no warning);
    TDA4VM keeps TIDL's own default 0."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opts = TidlOptions.from_dict({"target_device": device})
    texts = [str(w.message) for w in caught if issubclass(w.category, TidlxWarning)]
    assert texts == [] and opts.device_warning() is None
    assert opts.quantization_scale_type == (4 if style4 else devices.TIDL_DEFAULT_SCALE_TYPE)
    line = devices.scale_type_line(opts.target_device, opts.quantization_scale_type, False)
    assert (line is not None) == style4
    if style4:
        assert "quantization_scale_type 4" in line and "TI's tools' default" in line
    for given in (0, 1):   # given by the user: no warning, the value stands
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            chosen = TidlOptions.from_dict({"target_device": device, "advanced_options:quantization_scale_type": given})
        assert chosen.device_warning() is None and chosen.quantization_scale_type == given
        assert not [w for w in caught if "quantization_scale_type 4" in str(w.message)]


def test_report_says_whose_rules_applied(tmp_path, capsys):
    path = _wide_pad_conv(tmp_path / "m.onnx", pad=1)
    code, out, err = run_cli(capsys, "partition", path)
    assert code == 0 and "target device: TIDL defaults (no target_device)" in out
    assert "quantization_scale_type 4" not in out + err
    code, out, err = run_cli(capsys, "partition", path, "-o", "target_device=am62a")
    assert code == 0
    assert "target device: AM62A (AM62A; C7504 x1, piecewise-linear sigmoid" in out
    assert "warning" not in out + err
    code, out, err = run_cli(capsys, "partition", path, "--json", "-o", "target_device=J784S4",
                             "-o", "advanced_options:quantization_scale_type=1")
    device = json.loads(out)["device"]
    assert device["target_device"] == "AM69A" and device["warning"] is None
    assert device["rules"].startswith("AM69A (J784S4")
    _, report = tidlx.partition(tidlx.load(str(path)))
    assert report.to_dict()["device"] == {"target_device": None, "rules": "TIDL defaults (no target_device)",
                                          "warning": None}


def test_compare_reports_the_device(tmp_path, capsys):
    path = _wide_pad_conv(tmp_path / "m.onnx", pad=1)
    code, out, err = run_cli(capsys, "compare", path, "--json", "-o", "target_device=AM68A",
                             "-o", "advanced_options:calibration_iterations=1")
    assert code == 0, err
    device = json.loads(out)["device"]
    assert device["target_device"] == "AM68A" and device["warning"] is None
    code, out, err = run_cli(capsys, "compare", path, "-o", "advanced_options:calibration_iterations=1")
    assert code == 0 and "target device: TIDL defaults (no target_device)" in out


@pytest.mark.parametrize("command", ["compare", "report"])
def test_a_style4_device_runs_without_a_warning(tmp_path, capsys, command):
    path = _wide_pad_conv(tmp_path / "m.onnx", pad=1)
    extra = ["--out", tmp_path / "r.html"] if command == "report" else []
    code, out, err = run_cli(capsys, command, path, "-o", "target_device=J721S2",
                             "-o", "advanced_options:calibration_iterations=1", *extra)
    assert code == 0, err
    assert "quantization_scale_type 4" not in err and "target_device" not in err
    if command == "report":
        page = (tmp_path / "r.html").read_text(encoding="utf-8")
        assert "AM68A (J721S2 (AM68A, TDA4AL, TDA4VL); C7120 x2" in page and "does not emulate" not in page


SIGMOID_NET = '''#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3, 8, 8), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
  sigmoid(%0)
}
'''
RELU_NET = SIGMOID_NET.replace("sigmoid(%0)", "nn.relu(%0)")


def _quantized(text, options):
    mod = tidlx.parse_relay(text, params=[np.random.default_rng(1).standard_normal((4, 3, 3, 3)).astype(np.float32)])
    calib = {"x": np.random.default_rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        q = tidlx.quantize(mod, {"accuracy_level": 0, "advanced_options:calibration_iterations": 1, **options},
                           calib=calib)
    return q, [str(w.message) for w in caught if "style-4 rule" in str(w.message)]


def test_the_devices_style_4_where_tidlx_has_its_rules_else_style_0_with_a_warning():
    """AM68A without a scale type: TI's tools' style 4 for a conv + ReLU and for a sigmoid (TI's table,
    §12.12); a sigmoid with tidl_version 08.06 (no style-4 rule yet) takes TIDL's default style 0 and a
    warning names the layer; asked for explicitly, style 4 on it is an error naming it."""
    from tidlx.backends.tidl.quantize import QuantizationError

    q, said = _quantized(RELU_NET, {"target_device": "AM68A"})
    (sub,) = q.subgraphs.values()
    assert q.options.quantization_scale_type == 4 and not said
    assert any(t.zero_point for t in sub.tensors if not t.is_float) or sub.layers[0].type == "Data"
    q, said = _quantized(SIGMOID_NET, {"target_device": "AM68A"})
    assert q.options.quantization_scale_type == 4 and not said
    q, said = _quantized(SIGMOID_NET, {"target_device": "AM68A", "tidl_version": "08.06"})
    assert q.options.quantization_scale_type == 0
    assert len(said) == 1 and "no style-4 rule yet for @tidl_0" in said[0] and "Sigmoid" in said[0]
    with pytest.raises(QuantizationError, match="style-4 rule"):
        _quantized(SIGMOID_NET, {"target_device": "AM68A", "tidl_version": "08.06",
                                 "advanced_options:quantization_scale_type": 4})
