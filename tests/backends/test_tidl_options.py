"""TIDL compile options: TI's names and defaults, parsing from dicts and strings, validation."""

import dataclasses
import warnings

import pytest

from tidlx.backends.tidl.options import (BATCH_ENV_VAR, OPTIONS, BatchLimit, OptionError, TidlOptions,
                                         suggest_option)
from tidlx.ir.errors import TidlxError, TidlxWarning


def test_defaults_are_tis():
    opts = TidlOptions()
    assert opts.as_dict() == {
        "tensor_bits": 8, "debug_level": 0, "max_num_subgraphs": 16, "max_num_subgraph_nodes": 864,
        "accuracy_level": 1, "deny_list": "", "deny_list:layer_type": "", "deny_list:layer_name": "",
        "allow_list:layer_name": "", "advanced_options:calibration_frames": 20,
        "advanced_options:calibration_iterations": 50, "advanced_options:quantization_scale_type": 0,
        "advanced_options:output_feature_16bit_names_list": "", "advanced_options:params_16bit_names_list": "",
        "advanced_options:activation_clipping": 1, "advanced_options:weight_clipping": 1,
        "advanced_options:bias_calibration": 1, "advanced_options:channel_wise_quantization": 0,
        "advanced_options:inference_mode": 0, "advanced_options:num_cores": 1,
        "advanced_options:c7x_codegen": 0, "platform": "J7", "target_device": None,
        "max_batch_size": None, "max_subgraph_io": 32,
        "min_subgraph_macs": 1, "disabled_fusions": "", "advanced_options:quant_params_proto_path": "",
            "advanced_options:prequantized_model": 0,
        "tidl_version": "11.00",
    }
    assert TidlOptions.from_dict({}) == opts == TidlOptions.from_strings([])
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.tensor_bits = 16


def test_from_dict_with_typed_and_string_values():
    opts = TidlOptions.from_dict({
        "tensor_bits": 16, "debug_level": "3", "accuracy_level": 9, "deny_list": "nn.batch_norm, nn.dense",
        "deny_list:layer_type": ["Conv", "MaxPool"], "deny_list:layer_name": "a,b, ,a",
        "advanced_options:calibration_frames": "5", "advanced_options:quantization_scale_type": 4,
        "advanced_options:inference_mode": 1, "advanced_options:num_cores": 2, "platform": "j7",
        "advanced_options:weight_clipping": 0, "max_batch_size": "6", "max_subgraph_io": 24,
    })
    assert opts.tensor_bits == 16 and opts.debug_level == 3 and opts.accuracy_level == 9
    assert opts.deny_list == ("nn.batch_norm", "nn.dense")
    assert opts.deny_layer_types == ("Conv", "MaxPool")
    assert opts.deny_layer_names == ("a", "b")
    assert opts.calibration_frames == 5 and opts.quantization_scale_type == 4
    assert (opts.inference_mode, opts.num_cores, opts.platform) == (1, 2, "J7")
    assert opts.weight_clipping == 0 and opts.max_batch_size == 6 and opts.max_subgraph_io == 24
    assert TidlOptions.from_dict(opts.as_dict()) == opts


def test_from_strings_is_the_cli_form():
    opts = TidlOptions.from_strings(["tensor_bits=16", "deny_list=nn.dense,nn.softmax",
                                     "advanced_options:num_cores = 4", "allow_list:layer_name=conv1"])
    assert opts == TidlOptions(tensor_bits=16, deny_list=("nn.dense", "nn.softmax"), num_cores=4,
                               allow_layer_names=("conv1",))
    with pytest.raises(OptionError, match=r"TIDL option 'tensor_bits' must be written key=value"):
        TidlOptions.from_strings(["tensor_bits"])
    with pytest.raises(OptionError, match=r"TIDL option 'debug_level' is given twice"):
        TidlOptions.from_strings(["debug_level=1", "debug_level=2"])
    with pytest.raises(OptionError, match="has no name before '='"):
        TidlOptions.from_strings(["=3"])


def test_unknown_names_suggest_the_closest():
    with pytest.raises(OptionError) as e:
        TidlOptions.from_dict({"tensor_bit": 8})
    assert str(e.value) == "unknown TIDL option 'tensor_bit'; did you mean 'tensor_bits'?"
    with pytest.raises(OptionError, match=r"unknown TIDL option 'weight_clipping'; did you mean "
                                          r"'advanced_options:weight_clipping'"):
        TidlOptions.from_strings(["weight_clipping=0"])
    with pytest.raises(OptionError, match=r"did you mean 'advanced_options:num_cores'"):
        TidlOptions.from_dict({"advanced_options:num_core": 2})
    with pytest.raises(OptionError, match="valid options: tensor_bits, debug_level"):
        TidlOptions.from_dict({"zzzz": 1})
    assert suggest_option("calibration_frames")[0] == "advanced_options:calibration_frames"
    assert isinstance(OptionError("x"), TidlxError)


@pytest.mark.parametrize("name, value, expected", [
    ("tensor_bits", 12, "option tensor_bits=12 is not allowed: it must be one of 8, 16"),
    ("tensor_bits", "eight", "option tensor_bits='eight' is not allowed: it must be one of 8, 16"),
    ("debug_level", 7, "option debug_level=7 is not allowed: it must be an integer from 0 to 6"),
    ("accuracy_level", 2, "option accuracy_level=2 is not allowed: it must be one of 0, 1, 9"),
    ("advanced_options:quantization_scale_type", 3, "must be one of 0, 1, 4"),
    ("advanced_options:inference_mode", "3", "option advanced_options:inference_mode=3 is not allowed"),
    ("advanced_options:num_cores", 0, "it must be an integer from 1 to 4"),
    ("advanced_options:calibration_frames", -1, "it must be an integer >= 1"),
    ("advanced_options:activation_clipping", 2, "must be one of 0, 1"),
    ("platform", "J8", "option platform='J8' is not allowed: it must be one of J7, AM62A"),
    ("max_batch_size", 0, "option max_batch_size=0 is not allowed: it must be an integer >= 1"),
    ("max_num_subgraph_nodes", "1.5", "option max_num_subgraph_nodes='1.5' is not allowed"),
    ("deny_list", 5, "option deny_list=5 is not allowed: it must be a comma-separated list of names"),
])
def test_bad_values_name_option_value_and_what_is_allowed(name, value, expected):
    with pytest.raises(OptionError) as e:
        TidlOptions.from_dict({name: value})
    assert expected in str(e.value)


def test_max_num_subgraphs_is_at_most_16():
    assert TidlOptions.from_dict({"max_num_subgraphs": "16"}).max_num_subgraphs == 16
    with pytest.raises(OptionError, match=r"option max_num_subgraphs=17 is too large: TIDL runs at most 16 "
                                          r"subgraphs"):
        TidlOptions.from_strings(["max_num_subgraphs=17"])
    with pytest.raises(OptionError, match="max_num_subgraphs=20 is too large"):
        TidlOptions(max_num_subgraphs=20)


def test_deny_list_ops_are_checked_against_the_registry():
    with pytest.raises(OptionError) as e:
        TidlOptions.from_dict({"deny_list": "nn.dense, nn.batchnorm"})
    assert "option deny_list: 'nn.batchnorm' is not a Relay op; closest Relay ops: nn.batch_norm" in str(e.value)
    with pytest.raises(OptionError, match="ONNX op types go in deny_list:layer_type"):
        TidlOptions.from_dict({"deny_list": "BatchNormalization"})


def test_deny_list_layer_types_are_onnx_op_types_the_importer_knows():
    assert TidlOptions.from_dict({"deny_list:layer_type": "Softmax,Resize"}).deny_layer_types == ("Softmax", "Resize")
    with pytest.raises(OptionError, match=r"'conv' is not an ONNX op type; ONNX op types are case-sensitive: "
                                          r"did you mean 'Conv'\?"):
        TidlOptions.from_dict({"deny_list:layer_type": "conv"})
    with pytest.raises(OptionError, match=r"'Softmaxx' is not an ONNX op type the importer knows; closest: Softmax"):
        TidlOptions.from_dict({"deny_list:layer_type": "Softmaxx"})


def test_inference_mode_1_needs_batch_divisible_by_num_cores():
    opts = TidlOptions.from_dict({"advanced_options:inference_mode": 1, "advanced_options:num_cores": 4})
    opts.validate_for_model(batch=8)
    with pytest.raises(OptionError) as e:
        opts.validate_for_model(batch=6)
    assert ("option advanced_options:inference_mode=1 (high throughput) runs one frame of the batch per core: "
            "the model's batch 6 is not a multiple of advanced_options:num_cores=4") in str(e.value)
    TidlOptions(inference_mode=2, num_cores=4).validate_for_model(batch=6)
    TidlOptions(inference_mode=0, num_cores=4).validate_for_model(batch=3)


def test_am62a_has_one_core():
    TidlOptions.from_dict({"platform": "AM62A"})
    with pytest.raises(OptionError, match="platform=AM62A: AM62A has one C7x core"):
        TidlOptions.from_dict({"platform": "AM62A", "advanced_options:num_cores": 2})


def test_level9_only_options_warn_below_level_9():
    with pytest.warns(TidlxWarning, match=r"advanced_options:weight_clipping is only honoured at accuracy_level=9 "
                                          r"\(accuracy_level is 1\)"):
        TidlOptions.from_dict({"advanced_options:weight_clipping": 0})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TidlOptions.from_dict({"accuracy_level": 9, "advanced_options:weight_clipping": 0})


def test_check_layer_names_warns_about_names_not_in_the_model():
    opts = TidlOptions.from_dict({"deny_list:layer_name": "conv1,conv_9", "allow_list:layer_name": "conv1",
                                  "advanced_options:params_16bit_names_list": "fc"})
    with pytest.warns(TidlxWarning) as record:
        missing = opts.check_layer_names({"conv1", "relu1"})
    assert missing == [("deny_list:layer_name", "conv_9"), ("advanced_options:params_16bit_names_list", "fc")]
    texts = [str(w.message) for w in record]
    assert "option deny_list:layer_name names 1 layer(s) not in the model: 'conv_9' (closest layer: 'conv1')" in texts
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert TidlOptions.from_dict({"deny_list:layer_name": "conv2"}).check_layer_names(["conv2"]) == []
    with pytest.warns(TidlxWarning, match="does not use: MaxPool"):
        assert TidlOptions(deny_layer_types=("MaxPool",)).check_layer_types({"Conv"}) == ["MaxPool"]


def test_batch_limit_from_option_or_environment(monkeypatch):
    monkeypatch.delenv(BATCH_ENV_VAR, raising=False)
    assert TidlOptions().batch_limit() == BatchLimit(1, "environment")
    monkeypatch.setenv(BATCH_ENV_VAR, "6")
    assert TidlOptions().batch_limit() == BatchLimit(6, "environment")
    assert TidlOptions(max_batch_size=2).batch_limit() == BatchLimit(2, "option")
    assert TidlOptions().batch_limit(environ={}) == BatchLimit(1, "environment")
    monkeypatch.setenv(BATCH_ENV_VAR, "0")
    with pytest.raises(OptionError, match="TIDL_RELAY_MAX_BATCH_SIZE='0' is not allowed"):
        TidlOptions().batch_limit()


def test_every_option_has_a_field_and_a_doc():
    names = {f.name for f in dataclasses.fields(TidlOptions)}
    assert {s.field for s in OPTIONS.values()} == names
    assert all(s.doc for s in OPTIONS.values())
    assert "tidlx's name" in OPTIONS["max_subgraph_io"].doc


@pytest.mark.parametrize("given, release", [
    ("11.00", "11.00"), ("11_00_06_00", "11.00"), ("11.0", "11.00"),
    ("10.01", "10.01"), ("10_01_04_00", "10.01"), ("10.1", "10.01"),
    ("08.06", "08.06"), ("08_06_00_00", "08.06"), ("8.6", "08.06"), (" 8.6 ", "08.06"),
])
def test_tidl_version_spellings_normalize(given, release):
    assert TidlOptions.from_dict({"tidl_version": given}).tidl_version == release
    assert TidlOptions.from_strings([f"tidl_version={given}"]).tidl_version == release
    assert TidlOptions(tidl_version=given).tidl_version == release


def test_tidl_version_defaults_to_11():
    assert TidlOptions().tidl_version == "11.00"


@pytest.mark.parametrize("bad", ["9.1", "11", "11.01", "", 11, 8.6, None])
def test_tidl_version_refuses_other_releases(bad):
    with pytest.raises(OptionError) as info:
        TidlOptions.from_dict({"tidl_version": bad})
    text = str(info.value)
    assert "tidl_version" in text and "11.00, 10.01, 08.06" in text and "08_06_00_00" in text
