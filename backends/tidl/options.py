"""TIDL compile options, under the names users already type in TI's flow.

    opts = TidlOptions.from_dict({"tensor_bits": 16, "deny_list": "nn.dense"})
    opts = TidlOptions.from_strings(["tensor_bits=16", "advanced_options:num_cores=2"])  # CLI -o k=v
    opts.validate_for_model(batch=6)          # checks that need the model (inference_mode 1)
    opts.check_layer_names({"conv1", ...})    # warns about list entries naming no layer

``TidlOptions`` holds Python field names (``advanced_options:num_cores`` -> ``num_cores``);
``OPTIONS`` maps each TI name to its field. Four names are tidlx's own: ``max_batch_size`` (TI
only has the environment variable ``TIDL_RELAY_MAX_BATCH_SIZE``), ``max_subgraph_io`` (TI's
fixed limit of 32 inputs/outputs per subgraph), ``min_subgraph_macs`` (TI's fixed
``min_mac_threshold = 1``: a subgraph without MACs goes back to the host) and
``disabled_fusions`` (composite fusions switched off, ``composites.FUSIONS``: FuseBatchNormIntoConv,
FuseActivation, FuseBiasIntoConv; ``Name:<layer>`` switches one off for the part of that layer
name only: the relu/clip, the batch norm, the bias). TI's import always fuses; switching a fusion
off is how ``tidlx check-fusion`` builds the unfused layer sequence.

Each spec also holds what ``tidlx options`` prints beyond its checks: where the option acts
(``STEPS``), how much of it tidlx implements (``SUPPORT``: full, partial, accepted) and a note.

The batch limit: ``max_batch_size`` when given, else the environment variable
``TIDL_RELAY_MAX_BATCH_SIZE`` (default 1). The variable is read by ``batch_limit()``, i.e. when
the limit is resolved for a check, never at import.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import warnings
from dataclasses import dataclass, fields
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from ...ir.errors import TidlxError, TidlxWarning, closest

#: The environment variable of TI's relay import that admits batch > 1.
BATCH_ENV_VAR = "TIDL_RELAY_MAX_BATCH_SIZE"

#: TIDL's hard limit on the number of subgraphs.
MAX_SUBGRAPHS = 16

#: C7x cores of the largest TDA4 part (J784S4); AM62A has one.
MAX_CORES = 4

PLATFORMS = ("J7", "AM62A")

#: tidlx's option ``tidl_version``: the TIDL releases whose rules tidlx follows (docs/numerics.md,
#: "Versions"), as the normalized strings code compares against (``options.tidl_version == "08.06"``).
TIDL_VERSIONS = ("11.00", "10.01", "08.06")
DEFAULT_TIDL_VERSION = "11.00"
#: Every accepted spelling -> its release: TI's "11.00", its SDK folder names "11_00_06_00" and the
#: short "11.0".
_VERSION_SPELLINGS = {
    "11.00": "11.00", "11_00_06_00": "11.00", "11.0": "11.00",
    "10.01": "10.01", "10_01_04_00": "10.01", "10.1": "10.01",
    "08.06": "08.06", "08_06_00_00": "08.06", "8.6": "08.06",
}


class OptionError(TidlxError):
    """A bad TIDL option: unknown name, bad value, or a value that does not fit the model."""


def parse_key_values(items: Iterable[str]) -> Dict[str, str]:
    """``["key=value", ...]`` (the CLI's ``-o key=value``) as a dict; a key may appear once."""
    if isinstance(items, str):
        items = [items]
    values: Dict[str, str] = {}
    for item in items:
        if not isinstance(item, str) or "=" not in item:
            raise OptionError(f"TIDL option {item!r} must be written key=value (e.g. tensor_bits=16)")
        key, _, value = item.partition("=")
        key = key.strip()
        if not key:
            raise OptionError(f"TIDL option {item!r} has no name before '='")
        if key in values:
            raise OptionError(f"TIDL option '{key}' is given twice ({key}={values[key]} and {key}={value})")
        values[key] = value
    return values


@dataclass(frozen=True)
class OptionSpec:
    """One TI option: its user-facing name, the TidlOptions field, how to parse and check it."""

    name: str
    field: str
    kind: str  # "int", "choice", "str", "names", "optional_int", "version", "device"
    choices: Tuple[Any, ...] = ()
    minimum: Optional[int] = None
    maximum: Optional[int] = None
    doc: str = ""
    # What ``tidlx options`` prints beyond the checks above (facts the code cannot say itself):
    origin: str = "TI"                  # "TI" (TI's option) or "tidlx" (tidlx's own)
    steps: Tuple[str, ...] = ()         # where it acts, of STEPS
    support: str = ""                   # how much of it tidlx implements, of SUPPORT
    support_note: str = ""              # what part (partial), what is missing (accepted), or how (full)
    values: str = ""                    # names options: what the names name

    def allowed(self) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(str(c) for c in self.choices)
        if self.kind in ("int", "optional_int"):
            if self.minimum is not None and self.maximum is not None:
                return f"an integer from {self.minimum} to {self.maximum}"
            if self.minimum is not None:
                return f"an integer >= {self.minimum}"
            return "an integer"
        if self.kind == "names":
            return "a comma-separated list of names"
        if self.kind == "version":
            others = [v for v in _VERSION_SPELLINGS if v not in self.choices]
            return "one of " + ", ".join(self.choices) + " (also written " + ", ".join(others) + ")"
        if self.kind == "device":
            from .devices import DEVICES, accepted_names

            aliases = [n for n in accepted_names() if n not in DEVICES]
            return f"one of {', '.join(DEVICES)} (any case; also {', '.join(aliases)})"
        return "a string"


#: Where an option acts (``OptionSpec.steps``) -> the commands that take that step.
STEPS: Dict[str, str] = {
    "partition": "tidlx partition and every command that partitions",
    "calibration": "compare, compile, check-fusion, run --mode fixed",
    "quantization": "compare, compile, check-fusion, run --mode fixed",
    "artifacts": "the folder tidlx compile writes",
    "run": "tidlx run on a compiled folder",
}

#: How much of an option tidlx implements (``OptionSpec.support``) -> what that means.
SUPPORT: Dict[str, str] = {
    "full": "as TIDL does it",
    "partial": "the part the note says",
    "accepted": "read and checked, changes none of tidlx's results",
}


def _spec(name, fld, kind, doc, choices=(), minimum=None, maximum=None, *, steps, support, note="", values="",
          origin="TI") -> OptionSpec:
    return OptionSpec(name, fld, kind, tuple(choices), minimum, maximum, doc, origin, tuple(steps), support, note,
                      values)


_SPECS = (
    _spec("tensor_bits", "tensor_bits", "choice", "8 or 16 bit activations and weights", (8, 16),
          steps=("quantization",), support="full",
          note="8- and 16-bit weights and feature maps in every TIDL layer's fixed point"),
    _spec("debug_level", "debug_level", "int", "0..6; 3 and above write per-layer traces", minimum=0, maximum=6,
          steps=("artifacts", "run"), support="partial",
          note="kept in the compiled folder; running it writes each TIDL layer's output as TI's .y traces at 3, "
               "also as float (_float.bin) at 4 and above; 1 and 2 (TI's log messages) change nothing"),
    _spec("max_num_subgraphs", "max_num_subgraphs", "int", "subgraphs kept (those with the most MACs)",
          minimum=1, maximum=MAX_SUBGRAPHS, steps=("partition",), support="full",
          note="the other subgraphs' layers go back to the host, with the reason"),
    _spec("max_num_subgraph_nodes", "max_num_subgraph_nodes", "int", "nodes per subgraph", minimum=1,
          steps=("partition",), support="full"),
    _spec("accuracy_level", "accuracy_level", "choice",
          "0 min/max calibration, 1 advanced bias calibration, 9 user-defined (advanced options)", (0, 1, 9),
          steps=("calibration", "quantization"), support="full",
          note="TI's calibration option bits: 0 is 64, BiasRange (min/max ranges; no weight-scale clip for the "
               "bias, no bias-saturation guard), 1 seven (histogram ranges, weight range limiting, bias "
               "calibration), 9 from the four advanced options (each as its row says)"),
    _spec("deny_list", "deny_list", "names", "Relay op names kept off TIDL", steps=("partition",), support="full",
          values="Relay op names (tidlx ops lists them)"),
    _spec("deny_list:layer_type", "deny_layer_types", "names", "ONNX op types kept off TIDL",
          steps=("partition",), support="full", values="ONNX op types",
          note="a type the model does not use is a warning"),
    _spec("deny_list:layer_name", "deny_layer_names", "names", "layer (ONNX node) names kept off TIDL",
          steps=("partition",), support="full", values="layer (ONNX node) names",
          note="a name matching no layer is a warning"),
    _spec("allow_list:layer_name", "allow_layer_names", "names", "only these layers may go to TIDL",
          steps=("partition",), support="full", values="layer (ONNX node) names",
          note="a name matching no layer is a warning"),
    _spec("advanced_options:calibration_frames", "calibration_frames", "int", "frames used for calibration",
          minimum=1, steps=("calibration",), support="full",
          note="the first N frames of --calib (fewer: all, with a warning); without --calib, N seeded random "
               "frames"),
    _spec("advanced_options:calibration_iterations", "calibration_iterations", "int",
          "fixed-point calibration iterations (ranges re-collected, biases calibrated)", minimum=1,
          steps=("quantization",), support="full",
          note="each re-quantizes the network and runs every calibration frame in fixed point; 1 at "
               "accuracy_level 0 in the TVM flow (flow=ort: the count, as TI's ONNX Runtime import); biases calibrated with accuracy_level 1, or 9 with bias_calibration=1"),
    _spec("advanced_options:quantization_scale_type", "quantization_scale_type", "choice",
          "0 non-power-of-2 weight scales, 1 power-of-2, 4 asymmetric per-channel", (0, 1, 4),
          steps=("quantization",), support="partial",
          note="0 (NP2Fixed), 1 (P2Dynamic) and 4 (asymmetric per-channel: conv, inner product, max and global "
               "average pool, sum, concat, ReLU, data movement; other layers are refused by name) implemented; unset with a "
               "target_device whose TI tools default to 4 (AM62A, AM67A, AM68A, AM69A): 4; 3 (TFLite "
               "prequantized) is not accepted"),
    _spec("advanced_options:output_feature_16bit_names_list", "output_feature_16bit_names", "names",
          "layers whose outputs are 16 bit", steps=("quantization",), support="full",
          values="layer (ONNX node) names", note="mixed precision; a name matching no layer is a warning"),
    _spec("advanced_options:params_16bit_names_list", "params_16bit_names", "names",
          "layers whose parameters are 16 bit", steps=("quantization",), support="full",
          values="layer (ONNX node) names", note="mixed precision; a name matching no layer is a warning"),
    _spec("advanced_options:quant_params_proto_path", "quant_params_proto_path", "str",
          "TI's quantization-parameters file (TIDLNetQuantParams text format): written when absent, read when "
          "present", steps=("calibration", "quantization"), support="partial", values="a file path",
          note="absent: calibrates and writes it; present: skips calibration and bias calibration, every range "
               "from the file, bias values from its value fields (docs/quant-proto.md); layers are named after "
               "tidlx's tensors (ONNX node names), not TI's output tensor names; a PReLU slope range and the "
               "parameters of layer norm and of element-wise layers with a constant are written, not read"),
    _spec("advanced_options:prequantized_model", "prequantized_model", "choice",
          "1: the ONNX model is prequantized (QuantizeLinear/DequantizeLinear pairs, as QAT exports them)", (0, 1),
          steps=("partition", "calibration", "quantization"), support="partial",
          note="Q/DQ pairs folded into the layers: weights dequantized and re-quantized by TIDL's rules, each "
               "activation pair's range used in place of calibration; weight zero points must be 0, an "
               "activation's non-zero zero point needs quantization_scale_type 4, one activation scale and zero "
               "point per tensor; tensors no pair covers are calibrated (docs/prequantized.md)"),
    _spec("advanced_options:activation_clipping", "activation_clipping", "choice",
          "clip activation ranges (accuracy_level 9)", (0, 1), steps=("calibration",), support="full",
          note="at accuracy_level 9: 1 histogram ranges, 0 min/max (other levels: a warning, no effect)"),
    _spec("advanced_options:weight_clipping", "weight_clipping", "choice", "clip weights (accuracy_level 9)",
          (0, 1), steps=("quantization",), support="partial",
          note="at accuracy_level 9: TI's median weight range limiting; TI's histogram weight range method is "
               "not emulated"),
    _spec("advanced_options:bias_calibration", "bias_calibration", "choice",
          "bias calibration (accuracy_level 9)", (0, 1), steps=("quantization",), support="full",
          note="at accuracy_level 9 (other levels: a warning, no effect)"),
    _spec("advanced_options:channel_wise_quantization", "channel_wise_quantization", "choice",
          "per-channel weights (accuracy_level 9)", (0, 1), steps=("quantization",), support="full",
          note="at accuracy_level 9: per-channel weight scales of depthwise convolutions, the only layers TI's "
               "symmetric styles give them; the whole network then takes power-of-2 scales (P2Dynamic)"),
    _spec("advanced_options:inference_mode", "inference_mode", "choice",
          "0 one core, 1 high throughput (one frame of the batch per core), 2 low latency", (0, 1, 2),
          steps=("partition", "artifacts", "run"), support="full",
          note="kept in the artifacts; running a compiled folder splits each subgraph across num_cores emulated "
               "cores (1: by frames, 2: by rows), same bits as 0; 1 needs a batch that is a multiple of num_cores"),
    _spec("advanced_options:num_cores", "num_cores", "int", "C7x cores used", minimum=1, maximum=MAX_CORES,
          steps=("partition", "artifacts", "run"), support="full",
          note="the cores inference_mode 1 and 2 split the work across"),
    _spec("advanced_options:c7x_codegen", "c7x_codegen", "choice", "generate C7x code for the host part", (0, 1),
          steps=(), support="accepted",
          note="checked, no effect (tidlx compile --target c7x writes the host part as C source)"),
    _spec("platform", "platform", "choice", "target SoC family", PLATFORMS, steps=(), support="accepted",
          note="checked (AM62A: num_cores must be 1); partition and fixed point are the same on both"),
    _spec("target_device", "target_device", "device",
          "TI's target device (TI's runner name; J7 aliases such as J721E, J721S2, J784S4, J722S); unset: TIDL's "
          "own defaults", steps=("partition", "quantization"), support="partial",
          note="selects the device's sigmoid (tables, or AM62A's piecewise-linear one), its documented layer "
               "limits and num_cores' maximum, and TI's tools' quantization_scale_type 4 where that is the "
               "device's default and none is given. tidlx devices lists each device's facts"),
    _spec("max_batch_size", "max_batch_size", "optional_int",
          f"largest batch offloaded (tidlx; TI: the environment variable {BATCH_ENV_VAR})", minimum=1,
          origin="tidlx", steps=("partition",), support="full",
          note=f"ops of a larger batch stay on the host; unset: {BATCH_ENV_VAR}, else 1"),
    _spec("max_subgraph_io", "max_subgraph_io", "int",
          "inputs + outputs allowed per subgraph (tidlx's name for TI's fixed 32)", minimum=1,
          origin="tidlx", steps=("partition",), support="full"),
    _spec("min_subgraph_macs", "min_subgraph_macs", "int",
          "subgraphs with fewer MACs go back to the host (tidlx's name for TI's fixed min_mac_threshold = 1; "
          "0 keeps subgraphs of pure data movement)", minimum=0, origin="tidlx", steps=("partition",),
          support="full"),
    _spec("tidl_version", "tidl_version", "version",
          "the TIDL release whose import and reference kernels tidlx follows where they differ between releases "
          "(docs/numerics.md, \"Versions\")", TIDL_VERSIONS, origin="tidlx", steps=("quantization", "run"),
          support="partial",
          note="08.06: softmax pad lanes always in the denominator, 2^7 for a float to 16-bit data convert, "
               "element-wise and concat inputs of range [0, 0] kept in min(inScale), tidlx's own activation tables "
               "instead of TI's 8-bit ones; 10.01 follows 11.00 "
               "(no difference found in TI's material); the other releases are not modelled"),
    _spec("disabled_fusions", "disabled_fusions", "names",
          "composite fusions switched off (tidlx): FuseBatchNormIntoConv, FuseActivation, FuseBiasIntoConv, "
          "or Name:<layer> for the part (relu/clip, batch norm, bias) of that layer only",
          origin="tidlx", steps=("partition", "quantization"), support="full",
          values="composite fusions, or FUSION:LAYER for that layer's part only",
          note="TI's import always fuses; tidlx check-fusion uses it to build the unfused layers"),
)

#: TI option name -> its spec, in the order of TI's documentation.
OPTIONS: Dict[str, OptionSpec] = {s.name: s for s in _SPECS}
_BY_FIELD: Dict[str, OptionSpec] = {s.field: s for s in _SPECS}

#: tidlx's option ``flow``: which of TI's two compile flows tidlx follows. Like ``disabled_passes`` it is
#: read beside TI's options (``flow.resolve_options`` accepts it, ``flow.resolve_flow`` returns it) and is
#: not a TidlOptions field.
FLOW_OPTION = "flow"
#: ``tvm``: TI's TVM (Relay) import; ``ort``: TI's ONNX Runtime import (OSRT), docs/ort-flow.md.
FLOWS = ("tvm", "ort")
DEFAULT_FLOW = "tvm"
FLOW_SPEC = _spec(
    FLOW_OPTION, "", "choice",
    "which of TI's compile flows tidlx follows: tvm (TI's TVM import) or ort (TI's ONNX Runtime import, "
    "OSRT: ONNX nodes grouped in node order)", FLOWS, origin="tidlx", steps=("partition", "artifacts"),
    support="partial",
    note="ort: TI's grouping of supported ONNX nodes in node order, its merge of subgraphs, max_num_subgraphs "
         "keeping the first subgraphs, node or output names in the layer-name lists, no batch limit, the "
         "ONNX-side rules of docs/ort-flow.md; compile also writes allowedNode.txt and onnxrtMetaData.txt. "
         "TI's fused-layer allowlist is not modelled")


def parse_flow(value) -> str:
    """The flow named by an option value (``ort``, ``ORT``, `` tvm ``); anything else is an OptionError."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in FLOWS:
            return text
    raise OptionError(f"option {FLOW_OPTION}={value!r} is not allowed: it must be one of {', '.join(FLOWS)} "
                      f"(tvm: TI's TVM import, ort: TI's ONNX Runtime import)")

#: tidlx's option ``model_surgery``: whether TI's ONNX model surgery (the rules of TI's model optimizer
#: that are on by default, run by TI's runner before the import) rewrites the model first. Read beside
#: TI's options like ``flow``; not a TidlOptions field. Unset, the flow decides: on with ``flow=ort``
#: (TI's runner runs the surgery by default), off with ``flow=tvm``.
MODEL_SURGERY_OPTION = "model_surgery"
MODEL_SURGERY_SPEC = _spec(
    MODEL_SURGERY_OPTION, "", "choice",
    "TI's default ONNX model surgery before the import (1 on, 0 off); unset: on with flow=ort, as TI's "
    "runner does, off with flow=tvm", (0, 1), origin="tidlx", steps=("partition",), support="partial",
    note="the rules of TI's model optimizer that are on by default and apply to tidlx's IR, each a graph "
         "preparation pass (docs/ort-flow.md, \"TI's model surgery\"); the others are not modelled")


def parse_model_surgery(value) -> bool:
    """The value of ``model_surgery`` (``0``/``1``, also ``True``/``False`` and their strings)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("0", "false", "off", "no"):
            return False
        if text in ("1", "true", "on", "yes"):
            return True
    raise OptionError(f"option {MODEL_SURGERY_OPTION}={value!r} is not allowed: it must be 0 or 1 (1: TI's default "
                      f"model surgery before the import)")


#: Options TIDL honours only at accuracy_level 9.
_LEVEL9_ONLY = ("activation_clipping", "weight_clipping", "bias_calibration", "channel_wise_quantization")


def suggest_option(name: str) -> List[str]:
    """Valid option names close to ``name``: a name whose part after ':' is ``name`` first
    (``weight_clipping`` -> ``advanced_options:weight_clipping``), then spelling neighbours."""
    key = name.strip().lower()
    exact_suffix = [n for n in OPTIONS if n.split(":")[-1] == key]
    if exact_suffix:
        return exact_suffix
    scored = sorted(((difflib.SequenceMatcher(None, key, n).ratio(), n) for n in OPTIONS), reverse=True)
    best = scored[0][0]
    fuzzy = [n for score, n in scored if score >= 0.6 and score >= best - 0.1]
    if fuzzy:
        return fuzzy[:3]
    return [n for n in OPTIONS if difflib.get_close_matches(key, [n.split(":")[-1]], 1, 0.75)][:3]


def _unknown_option(name: str) -> OptionError:
    hint = suggest_option(name)
    extra = f"; did you mean {' or '.join(repr(h) for h in hint)}?" if hint else \
        f"; valid options: {', '.join(OPTIONS)}"
    return OptionError(f"unknown TIDL option '{name}'{extra}")


def _bad_value(spec: OptionSpec, value, why: str = "") -> OptionError:
    reason = f" ({why})" if why else ""
    return OptionError(f"option {spec.name}={value!r} is not allowed{reason}: it must be {spec.allowed()}")


def _parse_int(spec: OptionSpec, value) -> int:
    if isinstance(value, bool):
        return int(value)  # True/False for 0/1 flags
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text, 10)
        except ValueError:
            pass
    raise _bad_value(spec, value)


def _parse_names(spec: OptionSpec, value) -> Tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = []
        for v in value:
            if not isinstance(v, str):
                raise _bad_value(spec, value, f"{v!r} is not a name")
            items.extend(v.split(","))
    else:
        raise _bad_value(spec, value)
    out: List[str] = []
    for item in items:
        item = item.strip()
        if item and item not in out:
            out.append(item)
    return tuple(out)


def parse_tidl_version(value) -> str:
    """The release named by a ``tidl_version`` value, normalized to one of ``TIDL_VERSIONS``."""
    if isinstance(value, str) and value.strip() in _VERSION_SPELLINGS:
        return _VERSION_SPELLINGS[value.strip()]
    accepted = ", ".join(_VERSION_SPELLINGS)
    raise OptionError(f"option tidl_version={value!r} is not allowed: it must be one of {', '.join(TIDL_VERSIONS)} "
                      f"(accepted spellings: {accepted})")


def _parse_device(spec: OptionSpec, value) -> Optional[str]:
    """TI's canonical device name for a target_device value (None or "" stays unset)."""
    from .devices import resolve

    if value is None:
        return None
    if not isinstance(value, str):
        raise _bad_value(spec, value)
    try:
        return resolve(value)
    except KeyError:
        raise _bad_value(spec, value) from None


def parse_value(spec: OptionSpec, value):
    """The typed value of option ``spec`` from a dict value or a ``key=value`` string."""
    if spec.kind == "version":
        return parse_tidl_version(value)
    if spec.kind == "names":
        return _parse_names(spec, value)
    if spec.kind == "str":
        if not isinstance(value, str):
            raise _bad_value(spec, value)
        return value.strip()
    if spec.kind == "optional_int" and (value is None or (isinstance(value, str) and value.strip() == "")):
        return None
    if spec.kind == "device":
        return _parse_device(spec, value)
    if spec.kind == "choice" and isinstance(spec.choices[0], str):
        if not isinstance(value, str):
            raise _bad_value(spec, value)
        text = value.strip()
        for c in spec.choices:
            if text.upper() == c.upper():
                return c
        raise _bad_value(spec, value)
    return _parse_int(spec, value)


def _check_value(spec: OptionSpec, value) -> None:
    """Range and choice checks on a typed value (also run on direct construction)."""
    if spec.kind == "names":
        if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
            raise _bad_value(spec, value)
        return
    if spec.kind == "optional_int" and value is None:
        return
    if spec.kind == "device":
        if value is not None and _parse_device(spec, value) != value:
            raise _bad_value(spec, value)
        return
    if spec.kind == "str":
        if not isinstance(value, str):
            raise _bad_value(spec, value)
        return
    if spec.kind == "choice":
        if value not in spec.choices or isinstance(value, bool):
            raise _bad_value(spec, value)
        return
    if spec.kind == "version":
        if value not in spec.choices:
            parse_tidl_version(value)   # raises, naming the accepted spellings
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad_value(spec, value)
    if spec.name == "max_num_subgraphs" and value > MAX_SUBGRAPHS:
        raise OptionError(f"option max_num_subgraphs={value} is too large: TIDL runs at most {MAX_SUBGRAPHS} "
                          f"subgraphs (the rest of the model falls back to the host)")
    if spec.minimum is not None and value < spec.minimum:
        raise _bad_value(spec, value)
    if spec.maximum is not None and value > spec.maximum:
        raise _bad_value(spec, value)


def onnx_layer_types() -> frozenset:
    """The ONNX op types ``deny_list:layer_type`` may name: those that import to some IR op (the
    union of the ops' ``onnx.op_types`` facets, which the ONNX frontend registers; custom domains
    included) and every op type of ONNX's default domain (nodes such as Identity or Dropout import
    to no op of their own but are still layers a user may name). The backend does not import the
    frontend."""
    from ...ir.op import ops_with_attr
    import onnx.defs

    registered = {t for op_types in ops_with_attr("onnx.op_types").values() for t in op_types}
    return frozenset(registered | {s.name for s in onnx.defs.get_all_schemas() if s.domain in ("", "ai.onnx")})


@dataclass(frozen=True)
class BatchLimit:
    """The largest batch offloaded and where it came from (for messages). ``value`` None: no limit
    (source ``ort``: TI's ONNX Runtime import has no TIDL_RELAY_MAX_BATCH_SIZE)."""

    value: Optional[int]
    source: str  # "option", "environment" or "ort"

    def describe(self) -> str:
        if self.value is None:
            return "none (TI's ONNX Runtime import offloads batch > 1)"
        name = "max_batch_size" if self.source == "option" else BATCH_ENV_VAR
        return f"{name}={self.value}"


@dataclass(frozen=True)
class TidlOptions:
    """TIDL compile options with TI's defaults. Build from user input with ``from_dict`` or
    ``from_strings``; direct construction takes field names and is validated the same way."""

    tensor_bits: int = 8
    debug_level: int = 0
    max_num_subgraphs: int = 16
    max_num_subgraph_nodes: int = 864
    accuracy_level: int = 1
    deny_list: Tuple[str, ...] = ()
    deny_layer_types: Tuple[str, ...] = ()
    deny_layer_names: Tuple[str, ...] = ()
    allow_layer_names: Tuple[str, ...] = ()
    calibration_frames: int = 20
    calibration_iterations: int = 50
    quantization_scale_type: int = 0
    output_feature_16bit_names: Tuple[str, ...] = ()
    params_16bit_names: Tuple[str, ...] = ()
    activation_clipping: int = 1
    weight_clipping: int = 1
    bias_calibration: int = 1
    channel_wise_quantization: int = 0
    inference_mode: int = 0
    num_cores: int = 1
    c7x_codegen: int = 0
    platform: str = "J7"
    target_device: Optional[str] = None
    max_batch_size: Optional[int] = None
    max_subgraph_io: int = 32
    min_subgraph_macs: int = 1
    disabled_fusions: Tuple[str, ...] = ()
    quant_params_proto_path: str = ""
    prequantized_model: int = 0
    tidl_version: str = DEFAULT_TIDL_VERSION

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            spec = _BY_FIELD[f.name]
            if spec.kind == "names" and isinstance(value, (list, str)):
                value = _parse_names(spec, value)
                object.__setattr__(self, f.name, value)
            if spec.kind == "version" and value not in spec.choices:
                value = parse_tidl_version(value)   # a direct construction with TI's spelling
                object.__setattr__(self, f.name, value)
            elif spec.kind == "device" and isinstance(value, str):
                value = _parse_device(spec, value)
                object.__setattr__(self, f.name, value)
            _check_value(spec, value)
        self._check_ops()
        self._check_layer_types()
        self._check_fusions()
        if self.platform == "AM62A" and self.num_cores != 1:
            raise OptionError(f"option advanced_options:num_cores={self.num_cores} is not allowed with "
                              f"platform=AM62A: AM62A has one C7x core")
        self._check_device()

    def _check_device(self) -> None:
        from .devices import device

        dev = device(self.target_device)
        if dev is not None and self.platform == "AM62A" and dev.name != "AM62A":
            raise OptionError(f"option platform=AM62A does not match target_device={dev.name} (platform AM62A is "
                              f"TI's name for the AM62A; the other devices are platform J7)")
        if dev is not None and self.num_cores > dev.cores.value:
            raise OptionError(f"option advanced_options:num_cores={self.num_cores} is not allowed with "
                              f"target_device={dev.name}: {dev.name} has {dev.cores.value} C7x "
                              f"core{'s' if dev.cores.value != 1 else ''}")

    def device_warning(self) -> Optional[str]:
        """The warning line about the device's default quantization style TI's tools would use (None when
        there is nothing to say): see ``devices.scale_type_warning``."""
        from .devices import scale_type_warning

        given = ("quantization_scale_type" in getattr(self, "_given", ())
                 or self.quantization_scale_type != TidlOptions.quantization_scale_type)
        return scale_type_warning(self.target_device, given)

    # -- validation against the registries ---------------------------------------------------
    def _check_ops(self) -> None:
        from ...ir.op import has_op, list_ops

        for name in self.deny_list:
            if not has_op(name):
                hint = closest(name, list_ops())
                extra = f"; closest Relay ops: {', '.join(hint)}" if hint else ""
                raise OptionError(f"option deny_list: '{name}' is not a Relay op{extra} (deny_list takes Relay op "
                                  f"names such as nn.batch_norm; ONNX op types go in deny_list:layer_type)")

    def _check_fusions(self) -> None:
        from .composites import FUSIONS, FusionNameError, parse_disabled_fusions

        try:
            parse_disabled_fusions(self.disabled_fusions)
        except FusionNameError as exc:
            name = str(exc)
            hint = closest(name, FUSIONS, n=1)
            extra = f"; did you mean {', '.join(hint)}?" if hint else ""
            raise OptionError(f"option disabled_fusions: '{name}' is not a composite fusion{extra} (the fusions: "
                              f"{', '.join(FUSIONS)}; Name:<layer> for one layer's part)") from None

    def _check_layer_types(self) -> None:
        if not self.deny_layer_types:
            return
        known = onnx_layer_types()
        lowered = {k.lower(): k for k in known}
        for name in self.deny_layer_types:
            if name in known:
                continue
            if name.lower() in lowered:
                raise OptionError(f"option deny_list:layer_type: '{name}' is not an ONNX op type; ONNX op types "
                                  f"are case-sensitive: did you mean '{lowered[name.lower()]}'?")
            hint = closest(name, known)
            extra = f"; closest: {', '.join(hint)}" if hint else ""
            raise OptionError(f"option deny_list:layer_type: '{name}' is not an ONNX op type the importer "
                              f"knows{extra}")

    # -- construction from user input -----------------------------------------------------------
    @classmethod
    def from_dict(cls, values: Optional[Mapping[str, Any]] = None) -> "TidlOptions":
        """Options from TI names to values (ints, strings, lists of names)."""
        if values is None:
            values = {}
        if not isinstance(values, Mapping):
            raise OptionError(f"TIDL options must be a mapping of option names to values, got "
                              f"{type(values).__name__}")
        kwargs: Dict[str, Any] = {}
        for key, value in values.items():
            if not isinstance(key, str):
                raise OptionError(f"TIDL option names must be strings, got {key!r}")
            spec = OPTIONS.get(key.strip())
            if spec is None:
                raise _unknown_option(key)
            kwargs[spec.field] = parse_value(spec, value)
        given = frozenset(kwargs)
        if "quantization_scale_type" not in kwargs:   # TI's tools' style on the device (4 on AM62A/67A/68A/69A)
            from .devices import default_scale_type
            preset = default_scale_type(kwargs.get("target_device"))
            if preset is not None:
                kwargs["quantization_scale_type"] = preset
        options = cls(**kwargs)
        object.__setattr__(options, "_given", given)
        options._warn_level9(kwargs)
        note = options.device_warning()
        if note:   # one place for every caller: a command that reads its options twice says it once
            warnings.warn(note, TidlxWarning, stacklevel=1)
        return options

    @classmethod
    def from_strings(cls, items: Iterable[str]) -> "TidlOptions":
        """Options from ``key=value`` strings (the CLI's ``-o key=value``); a key may appear once."""
        return cls.from_dict(parse_key_values(items))

    def replace(self, **changes) -> "TidlOptions":
        """A copy with some fields changed (validated again); the options the user gave stay known."""
        copy = dataclasses.replace(self, **changes)
        object.__setattr__(copy, "_given", frozenset(getattr(self, "_given", ())) | frozenset(changes))
        return copy

    def _warn_level9(self, given: Mapping[str, Any]) -> None:
        if self.accuracy_level == 9:
            return
        ignored = [_BY_FIELD[f].name for f in _LEVEL9_ONLY if f in given]
        if ignored:
            warnings.warn(f"{', '.join(ignored)} {'is' if len(ignored) == 1 else 'are'} only honoured at "
                          f"accuracy_level=9 (accuracy_level is {self.accuracy_level})", TidlxWarning, stacklevel=3)

    # -- views -------------------------------------------------------------------------------
    def as_dict(self) -> Dict[str, Any]:
        """TI name -> value, lists joined with commas (what TI's tools take)."""
        out = {}
        for spec in _SPECS:
            value = getattr(self, spec.field)
            out[spec.name] = ",".join(value) if spec.kind == "names" else value
        return out

    def batch_limit(self, environ: Optional[Mapping[str, str]] = None) -> BatchLimit:
        """The largest batch offloaded: the option, else ``TIDL_RELAY_MAX_BATCH_SIZE`` (read now), else 1."""
        if self.max_batch_size is not None:
            return BatchLimit(self.max_batch_size, "option")
        env = os.environ if environ is None else environ
        text = env.get(BATCH_ENV_VAR)
        if text is None or text.strip() == "":
            return BatchLimit(1, "environment")
        try:
            value = int(text.strip(), 10)
        except ValueError:
            value = 0
        if value < 1:
            raise OptionError(f"environment variable {BATCH_ENV_VAR}={text!r} is not allowed: it must be an "
                              f"integer >= 1")
        return BatchLimit(value, "environment")

    # -- checks that need the model --------------------------------------------------------------
    def validate_for_model(self, batch: int) -> None:
        """Checks options against the model's batch: high-throughput mode runs one frame of the
        batch per core, so the batch must be a multiple of ``num_cores``."""
        if self.inference_mode == 1 and batch % self.num_cores:
            raise OptionError(
                f"option advanced_options:inference_mode=1 (high throughput) runs one frame of the batch per "
                f"core: the model's batch {batch} is not a multiple of advanced_options:num_cores="
                f"{self.num_cores} (use a batch that is a multiple of {self.num_cores}, or inference_mode 0 or 2)")

    def check_layer_names(self, layer_names: Iterable[str]) -> List[Tuple[str, str]]:
        """Warns (TidlxWarning) about names in the layer-name lists that match no layer of the
        model; returns them as (option, name) pairs."""
        known = set(n for n in layer_names if n)
        missing: List[Tuple[str, str]] = []
        for spec_name in ("deny_list:layer_name", "allow_list:layer_name",
                          "advanced_options:output_feature_16bit_names_list",
                          "advanced_options:params_16bit_names_list"):
            spec = OPTIONS[spec_name]
            unmatched = [n for n in getattr(self, spec.field) if n not in known]
            for name in unmatched:
                missing.append((spec_name, name))
            if unmatched:
                hints = []
                for n in unmatched:
                    near = closest(n, known, n=1)
                    hints.append(f"'{n}'" + (f" (closest layer: '{near[0]}')" if near else ""))
                warnings.warn(f"option {spec_name} names {len(unmatched)} layer(s) not in the model: "
                              f"{', '.join(hints)}", TidlxWarning, stacklevel=2)
        return missing

    def check_layer_types(self, layer_types: Iterable[str]) -> List[str]:
        """Warns about ``deny_list:layer_type`` entries that no layer of the model has."""
        present = set(layer_types)
        unmatched = [t for t in self.deny_layer_types if t not in present]
        if unmatched:
            warnings.warn(f"option deny_list:layer_type names ONNX op types the model does not use: "
                          f"{', '.join(unmatched)}", TidlxWarning, stacklevel=2)
        return unmatched


def option_names() -> List[str]:
    return list(OPTIONS)


__all__ = ["TidlOptions", "OptionError", "OptionSpec", "OPTIONS", "BatchLimit", "BATCH_ENV_VAR", "MAX_SUBGRAPHS",
           "PLATFORMS", "STEPS", "SUPPORT", "parse_value", "suggest_option", "onnx_layer_types", "option_names",
           "FLOW_OPTION", "FLOWS", "DEFAULT_FLOW", "FLOW_SPEC", "parse_flow",
           "MODEL_SURGERY_OPTION", "MODEL_SURGERY_SPEC", "parse_model_surgery", "TIDL_VERSIONS",
           "DEFAULT_TIDL_VERSION", "parse_tidl_version"]
