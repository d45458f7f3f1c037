"""TI's quantization-parameters file (``advanced_options:quant_params_proto_path``), docs/quant-proto.md.

    opts = {"advanced_options:quant_params_proto_path": "model_quant.prototxt"}
    qmodel = tidlx.quantize(mod, opts, calib)   # absent: calibrates and writes the file; present: reads it

The file is TI's ``TIDLNetQuantParams`` message (``tidl_quant_params.proto``) in protobuf text format.
The messages are built here from TI's field names and numbers (``descriptor_pb2``), parsed and printed
by ``google.protobuf.text_format``.

* Write mode (the file does not exist): calibration and quantization run as without the option, then
  the file is written: one ``layers`` entry per TIDL layer (``layer_name``, ``layer_type`` as TI spells
  it, ``bit_depth`` in bytes), each with its output ranges (``outputs``), and for a weighted layer the
  range of its weights and of its bias with the bias ``value``s it was quantized with (after bias
  calibration). The model is then quantized again from the file as written, so that a later compile
  reading the file gives the same artifacts.
* Read mode (the file exists): calibration and bias calibration are skipped; every range comes from
  the file and every scale is derived from it by docs/numerics.md (§4.1 from the weights' min/max,
  §5.1 from the bias's min/max, §6 from the outputs' min/max after §6.2's layer rules, as TI's
  ``TIDL_UpdateScaleFactors`` treats them); the bias values are the file's.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from ...ir.errors import TidlxError
from ...ir.expr import Call, Tuple as TupleExpr
from ...ir.module import IRModule
from .layers import LAYER_TYPE_IDS, TidlLayer, TidlNetwork, build_networks

#: TI's ``TIDL_LayerString`` (tidl_import_common.cpp), indexed by TI's layer type id; the two entries
#: with trailing blanks are spelt as TI's table spells them.
TI_LAYER_STRINGS = (
    "TIDL_DataLayer", "TIDL_ConvolutionLayer", "TIDL_PoolingLayer", "TIDL_ReLULayer", "TIDL_PReLULayer",
    "TIDL_EltWiseLayer", "TIDL_InnerProductLayer", "TIDL_SoftMaxLayer", "TIDL_BatchNormLayer", "TIDL_BiasLayer",
    "TIDL_ScaleLayer", "TIDL_Deconv2DLayer", "TIDL_ConcatLayer", "TIDL_SplitLayer", "TIDL_SliceLayer",
    "TIDL_CropLayer", "TIDL_FlattenLayer", "TIDL_DropOutLayer", "TIDL_ArgMaxLayer", "TIDL_DetectionOutputLayer",
    "TIDL_ShuffleChannelLayer", "TIDL_ResizeLayer", "TIDL_RoiPoolingLayer", "TIDL_OdPostProcessingLayer",
    "TIDL_DepthToSpaceLayer", "TIDL_SigmoidLayer", "TIDL_PadLayer", "TIDL_ColorConversionLayer",
    "TIDL_OdOutputReformatLayer", "TIDL_DataConvertLayer", "TIDL_CustomLayer          ",
    "TIDL_BatchReshapeLayer    ", "TIDL_ReduceLayer", "TIDL_ScatterElementsLayer", "TIDL_SqueezeLayer",
    "TIDL_TanhLayer", "TIDL_HardSigmoidLayer", "TIDL_ELULayer", "TIDL_ReshapeLayer", "TIDL_ConstDataLayer",
    "TIDL_GatherLayer", "TIDL_TransposeLayer", "TIDL_LayerNormLayer",
)

#: FLT_MAX: TI's default for an unset ``min`` (negated) and ``max``, i.e. "not calibrated".
FLT_MAX = float(np.finfo(np.float32).max)

#: ``TidlQuantType`` and ``TidlCalibType`` values (tidl_quant_params.proto).
SYMMETRIC, ASYMMETRIC = 1, 2
PERTENSOR, PERCHANNEL = 1, 2


class QuantProtoError(TidlxError):
    """The quantization-parameters file cannot be read or does not fit the model."""


def ti_layer_type(layer: TidlLayer) -> str:
    """TI's layer type string of ``layer`` (its type id indexes ``TI_LAYER_STRINGS``)."""
    return TI_LAYER_STRINGS[LAYER_TYPE_IDS[layer.type]]


# -- the messages ------------------------------------------------------------------------------------

_CLASSES = None


def message_classes():
    """(TIDLNetQuantParams, TidlLayerQuantParams, TidlTensorQuantParams): message classes built from TI's
    ``tidl_quant_params.proto`` field names, numbers, types and defaults (proto2, package
    ``tidl_quant_params``)."""
    global _CLASSES
    if _CLASSES is not None:
        return _CLASSES
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="tidlx_tidl_quant_params.proto", package="tidl_quant_params",
                                             syntax="proto2")

    def enum(name, values):
        e = fdp.enum_type.add(name=name)
        for vname, number in values:
            e.value.add(name=vname, number=number)

    enum("TidlQuantType", (("SYMMETRIC", SYMMETRIC), ("ASYMMETRIC", ASYMMETRIC)))
    enum("TidlCalibType", (("PERTENSOR", PERTENSOR), ("PERCHANNEL", PERCHANNEL)))

    def message(name, fields):
        m = fdp.message_type.add(name=name)
        for fname, number, ftype, label, extra in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if "type_name" in extra:
                f.type_name = extra["type_name"]
            if "default" in extra:
                f.default_value = extra["default"]
            if extra.get("packed"):
                f.options.packed = True

    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    tensor = ".tidl_quant_params.TidlTensorQuantParams"
    message("TIDLNetQuantParams", (
        ("num_layers", 1, F.TYPE_INT32, opt, {}),
        ("quant_type", 2, F.TYPE_ENUM, opt, {"type_name": ".tidl_quant_params.TidlQuantType",
                                              "default": "SYMMETRIC"}),
        ("calib_type", 3, F.TYPE_ENUM, opt, {"type_name": ".tidl_quant_params.TidlCalibType",
                                              "default": "PERTENSOR"}),
        ("layers", 4, F.TYPE_MESSAGE, rep, {"type_name": ".tidl_quant_params.TidlLayerQuantParams"}),
    ))
    message("TidlLayerQuantParams", (
        ("layer_name", 1, F.TYPE_STRING, opt, {}),
        ("layer_type", 2, F.TYPE_STRING, opt, {}),
        ("bit_depth", 3, F.TYPE_UINT32, opt, {"default": "8"}),
        ("outputs", 4, F.TYPE_MESSAGE, rep, {"type_name": tensor}),
        ("weights", 5, F.TYPE_MESSAGE, rep, {"type_name": tensor}),
        ("bias", 6, F.TYPE_MESSAGE, rep, {"type_name": tensor}),
        ("slope", 7, F.TYPE_MESSAGE, rep, {"type_name": tensor}),
    ))
    message("TidlTensorQuantParams", (
        ("min", 1, F.TYPE_FLOAT, opt, {"default": "-3.4028234664e+38"}),
        ("max", 2, F.TYPE_FLOAT, opt, {"default": "3.4028234664e+38"}),
        ("size", 3, F.TYPE_UINT32, opt, {}),
        ("element_type", 4, F.TYPE_UINT32, opt, {}),
        ("scale", 5, F.TYPE_DOUBLE, rep, {"packed": True}),
        ("zero_point", 6, F.TYPE_UINT32, rep, {"packed": True}),
        ("value", 7, F.TYPE_DOUBLE, rep, {"packed": True}),
    ))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    _CLASSES = tuple(message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tidl_quant_params.{n}"))
                     for n in ("TIDLNetQuantParams", "TidlLayerQuantParams", "TidlTensorQuantParams"))
    return _CLASSES


# -- names -------------------------------------------------------------------------------------------

def _onnx_first_outputs(partitioned: IRModule) -> Dict[str, str]:
    """ONNX node name -> its first output tensor's name, for a module loaded from an ONNX file (the
    node list recorded on it, or read from the file it came from); empty otherwise."""
    from .ort_flow import ONNX_NODES_ATTR, ONNX_SOURCE_ATTR, onnx_nodes

    recorded = partitioned.attrs.get(ONNX_NODES_ATTR)
    if recorded:
        return {str(name): str(outputs[0]) for name, _, _, outputs, *_ in recorded if outputs}
    source = partitioned.attrs.get(ONNX_SOURCE_ATTR)
    if isinstance(source, str) and os.path.isfile(source):
        return {n.name: n.outputs[0] for n in onnx_nodes(source) if n.outputs}
    return {}


def _root_node(layer: TidlLayer) -> Optional[str]:
    """The ONNX node of the call that makes the layer's output (a fused group's last call)."""
    fn = layer.function
    if fn is None:
        return None
    body = fn.body
    root = body.fields[0] if isinstance(body, TupleExpr) and len(body.fields) == 1 else body
    return root.layer if isinstance(root, Call) and root.layer else None


def ti_layer_names(partitioned: IRModule, networks) -> Dict[Tuple[str, int], str]:
    """(subgraph, layer index) -> the layer's name in the file, as TI's ONNX import names it: a data
    layer of a subgraph input that is a model input after that input tensor; every other layer after
    its first output tensor in the model, the first output of the ONNX node that makes the layer's
    output (a fused group's last node). Where that is not known (not an ONNX model), or two layers of
    one type would share it, the layer's tidlx name (its ONNX node's)."""
    from .calibration import CalibrationError, TidlTensorSources

    sources = TidlTensorSources(partitioned, networks, CalibrationError, "the quantization-parameters file")
    input_name = {(sg, tid): name for name, places in sources.from_inputs.items() for sg, tid in places}
    first_output = _onnx_first_outputs(partitioned)
    names: Dict[Tuple[str, int], str] = {}
    fallback: Dict[Tuple[str, int], str] = {}
    types: Dict[Tuple[str, int], str] = {}
    for net in networks:
        for layer in net.layers:
            if not layer.outputs:
                continue
            key = (net.name, layer.index)
            tid = layer.outputs[0]
            fallback[key] = net.tensors[tid].name
            types[key] = layer.type
            if layer.is_data:
                names[key] = input_name.get((net.name, tid), fallback[key])
            else:
                names[key] = first_output.get(_root_node(layer) or "", fallback[key])
    seen: Dict[Tuple[str, str], int] = {}
    for key, name in names.items():
        seen[(name, types[key])] = seen.get((name, types[key]), 0) + 1
    return {key: (fallback[key] if seen[(name, types[key])] > 1 else name) for key, name in names.items()}


# -- what read mode gives the quantizer ----------------------------------------------------------------

@dataclass(frozen=True)
class GivenParams:
    """A weighted layer's parameters from the file: the weights' range (None: not in the file) and
    the bias's range and values (None: not in the file)."""

    weight_min: Optional[float] = None
    weight_max: Optional[float] = None
    bias_min: Optional[float] = None
    bias_max: Optional[float] = None
    bias_values: Optional[Tuple[float, ...]] = None

    @property
    def weight_abs_max(self) -> Optional[float]:
        if self.weight_min is None:
            return None
        return max(abs(self.weight_min), abs(self.weight_max))

    @property
    def bias_abs_max(self) -> Optional[float]:
        if self.bias_min is None:
            return None
        return max(abs(self.bias_min), abs(self.bias_max))


def given_bias(given: GivenParams, bias: np.ndarray, where: str) -> np.ndarray:
    """The file's bias values in place of the layer's float ``bias`` (one per output channel)."""
    if len(given.bias_values) != len(bias):
        raise QuantProtoError(f"{where}: the quantization-parameters file gives {len(given.bias_values)} bias "
                              f"value(s); the layer has {len(bias)} output channels")
    return np.array(given.bias_values, np.float64)


def _weighted_plan_layer(layer: TidlLayer) -> bool:
    """The layers whose weight and bias scales the quantizer's weighted plan derives (docs/numerics.md §4-§5)."""
    from .quantize import WEIGHTED, _is_tensor_product

    return layer.type in WEIGHTED and not _is_tensor_product(layer)


# -- reading ---------------------------------------------------------------------------------------------

def _entry_lines(text: str) -> List[int]:
    """The line of each ``layer_name`` field in the text, in order (the i-th layer's, when each has one)."""
    return [text.count("\n", 0, m.start()) + 1 for m in re.finditer(r"\blayer_name\s*:", text)]


def parse(path: str):
    """The file's ``TIDLNetQuantParams`` message; a text-format error names ``path:line:column``."""
    from google.protobuf import text_format

    net_cls = message_classes()[0]
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise QuantProtoError(f"{path}: cannot read the quantization-parameters file: {exc}") from None
    msg = net_cls()
    try:
        text_format.Parse(text, msg)
    except text_format.ParseError as exc:
        where = f"{path}:{exc.GetLine()}:{exc.GetColumn()}" if exc.GetLine() else path
        detail = str(exc).split(" : ", 1)[-1] if exc.GetLine() else str(exc)
        raise QuantProtoError(f"{where}: not a TIDLNetQuantParams text message: {detail}") from None
    return msg, text


def _range(path: str, what: str, tensor) -> Tuple[float, float]:
    """A tensor entry's (min, max), checked: both set, finite, within +-FLT_MAX exclusive, min <= max."""
    lo, hi = float(tensor.min), float(tensor.max)
    for side, v in (("min", lo), ("max", hi)):
        if not tensor.HasField(side):
            raise QuantProtoError(f"{path}: {what} has no {side}: a range needs both min and max")
        if not math.isfinite(v) or abs(v) >= FLT_MAX:
            raise QuantProtoError(f"{path}: {what} has {side} {v:g}: FLT_MAX bounds mean not calibrated; give "
                                  f"the range")
    if lo > hi:
        raise QuantProtoError(f"{path}: {what} has min {lo:.9g} > max {hi:.9g}")
    return lo, hi


#: The ``quantization_scale_type`` whose files TI's export marks ``ASYMMETRIC`` (TFLite-style asymmetric,
#: TI's quantization style AsymNP2_TFL); every other style's file says ``SYMMETRIC``, style 4's too.
ASYMMETRIC_FILE_SCALE_TYPE = 3


def check_quant_type(path: str, msg, text: str, quantization_scale_type: Optional[int]) -> None:
    """The file's ``quant_type`` agrees with the compile's ``quantization_scale_type`` as TI's export writes
    it (``TIDL_exportQuantParamsToProtoTxt``: ASYMMETRIC only for its TFLite style, scale type 3;
    SYMMETRIC for 0, 1 and 4). TI's read ignores the field; tidlx refuses a disagreeing file, whose ranges
    were collected for another style (docs/quant-proto.md). ``None``: not checked."""
    if quantization_scale_type is None or not msg.HasField("quant_type"):
        return
    asymmetric_file = msg.quant_type == ASYMMETRIC
    if asymmetric_file == (quantization_scale_type == ASYMMETRIC_FILE_SCALE_TYPE):
        return
    found = re.search(r"^[ \t]*quant_type[ \t]*:", text, re.MULTILINE)
    line = text.count("\n", 0, found.start()) + 1 if found else 0
    written = "ASYMMETRIC" if asymmetric_file else "SYMMETRIC"
    wanted = "SYMMETRIC" if asymmetric_file else "ASYMMETRIC"
    raise QuantProtoError(
        f"{path}:{line}: quant_type: {written} does not agree with quantization_scale_type "
        f"{quantization_scale_type}: TI's export writes ASYMMETRIC only for quantization_scale_type "
        f"{ASYMMETRIC_FILE_SCALE_TYPE} (TFLite-style asymmetric) and SYMMETRIC for 0, 1 and 4 (style 4's zero "
        f"points are in outputs.zero_point), so a file for this compile says {wanted}")


def read(path: str, partitioned: IRModule, networks=None, accuracy_level: int = 0,
         quantization_scale_type: Optional[int] = None):
    """The ranges of every TIDL subgraph of ``partitioned`` from the file at ``path``, as ``calibrate``
    returns them (``{subgraph: CalibrationResult}`` with method ``proto`` and ``given`` per weighted
    layer). Every layer with an output tensor must be in the file with a range for each output; a
    layer of the file matching no layer of the model is an error naming the closest names; a
    ``quant_type`` that disagrees with ``quantization_scale_type`` is an error (``check_quant_type``).
    With ``quantization_scale_type`` 4 the ranges are read as for the other styles: each scale and zero
    point is derived from its range again (docs/numerics.md §12.2), the file's are not read."""
    from .calibration import CalibrationResult, tensor_range

    networks = tuple(networks) if networks is not None else build_networks(partitioned)
    msg, text = parse(path)
    check_quant_type(path, msg, text, quantization_scale_type)
    names = ti_layer_names(partitioned, networks)
    lines = _entry_lines(text)

    def line_of(i: int) -> int:
        return lines[i] if i < len(lines) else 0

    by_key: Dict[Tuple[str, str], Tuple[int, object]] = {}
    for i, entry in enumerate(msg.layers):
        key = (entry.layer_name, entry.layer_type)
        by_key.setdefault(key, (i, entry))
    wanted = {(names[(net.name, layer.index)], ti_layer_type(layer))
              for net in networks for layer in net.layers if (net.name, layer.index) in names}
    for key, (i, _) in by_key.items():
        if key not in wanted:
            name, ltype = key
            line = line_of(i)
            known = sorted({n for n, _ in wanted})
            close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
            same_name = sorted(t for n, t in wanted if n == name)
            hint = (f"; the model's layer '{name}' is a {same_name[0]}" if same_name else
                    f"; closest: {', '.join(close)}" if close else f"; the model's layers: {', '.join(known[:8])}"
                    + (" ..." if len(known) > 8 else ""))
            raise QuantProtoError(f"{path}:{line}: layer '{name}' ({ltype.strip()}) is not a layer of the model"
                                  f"{hint}")
    results: Dict[str, CalibrationResult] = {}
    for net in networks:
        tensors: Dict[int, TensorRange] = {}
        given: Dict[int, GivenParams] = {}
        for layer in net.layers:
            if not layer.outputs:
                continue
            name, ltype = names[(net.name, layer.index)], ti_layer_type(layer)
            found = by_key.get((name, ltype))
            if found is None:
                raise QuantProtoError(f"{path}: no entry for layer '{name}' ({ltype.strip()}) of @{net.name}; "
                                      f"every layer needs its output range")
            i, entry = found
            at, where = f"{path}:{line_of(i)}", f"layer '{name}'"
            if len(entry.outputs) < len(layer.outputs):
                raise QuantProtoError(f"{at}: {where} has {len(entry.outputs)} outputs entr"
                                      f"{'y' if len(entry.outputs) == 1 else 'ies'}; the layer has "
                                      f"{len(layer.outputs)} output(s), each needs its range")
            for k, tid in enumerate(layer.outputs):
                lo, hi = _range(at, f"{where}, outputs {k}", entry.outputs[k])
                # TI's TIDL_UpdateScaleFactors takes the file's range as a collected one: §6.2's layer
                # rules (x 1.25, the clip bounds) apply to it as to calibration's
                tensors[tid] = tensor_range(None if layer.is_data else layer, lo, hi, "proto", 0, (lo, hi), None)
            if _weighted_plan_layer(layer):
                given[layer.index] = _given(at, where, entry)
        results[net.name] = CalibrationResult(net.name, tensors, accuracy_level, "proto", 0, net, None,
                                              given=given)
    return results


def _given(path: str, where: str, entry) -> GivenParams:
    w_lo = w_hi = b_lo = b_hi = None
    values = None
    if len(entry.weights):
        w_lo, w_hi = _range(path, f"{where}, weights", entry.weights[0])
    if len(entry.bias):
        b = entry.bias[0]
        b_lo, b_hi = _range(path, f"{where}, bias", b)
        if b.size != len(b.value):
            raise QuantProtoError(f"{path}: {where}, bias has size {b.size} but {len(b.value)} value(s); TI needs "
                                  f"one value per bias element")
        values = tuple(float(v) for v in b.value) if b.size else None
    return GivenParams(w_lo, w_hi, b_lo, b_hi, values)


# -- writing ---------------------------------------------------------------------------------------------

def _element_type(bits: int, signed: bool) -> int:
    """TI's element type id (docs/numerics.md §1.2)."""
    return {(8, False): 0, (8, True): 1, (16, False): 2, (16, True): 3}.get((bits, signed), 6)


def _set_range(t, lo: float, hi: float) -> None:
    t.min, t.max = float(lo), float(hi)


def written_range(rng) -> Tuple[float, float]:
    """The output range the file holds for a TensorRange, as TI's export writes a layer's
    ``minTensorValue``/``maxTensorValue``: the collected range before §6.2's layer rules (no x 1.25), but
    the clip bounds for a ReLU6 or two-sided Clip (TI's ``TIDL_UpdateScaleFactors`` stores them back)."""
    if rng.method in ("relu6", "clip"):
        return rng.min, rng.max
    return rng.raw_min, rng.raw_max


def _weights_range(layer: TidlLayer, options, where: str) -> Tuple[float, float]:
    """The folded weights' (min, max), within the range limiting of docs/numerics.md §4.3 when it applies."""
    from . import numerics as nx
    from .quantize import WEIGHT_RANGE_BIT, _fold, calibration_option_bits

    w = _fold(layer, where).folded_weights()
    abs_max = nx.weight_abs_max(w)
    if calibration_option_bits(options) & WEIGHT_RANGE_BIT:
        wbits, _ = nx.layer_bit_widths(layer.name, options.tensor_bits, options.output_feature_16bit_names,
                                       options.params_16bit_names)
        abs_max = nx.limit_weight_range_median(w, abs_max, wbits)
    return max(float(w.min()), -abs_max), min(float(w.max()), abs_max)


def build_message(model, float_biases: Mapping[Tuple[str, int], np.ndarray]):
    """The ``TIDLNetQuantParams`` message of a ``QuantizedModel``: its ranges, scales and bias values."""
    from .quantize import PER_CHANNEL_WEIGHT_BIT, _fold, calibration_option_bits

    net_cls = message_classes()[0]
    msg = net_cls()
    opts = model.options
    msg.quant_type = SYMMETRIC
    msg.calib_type = PERCHANNEL if calibration_option_bits(opts) & PER_CHANNEL_WEIGHT_BIT else PERTENSOR
    networks = build_networks(model.module)
    names = ti_layer_names(model.module, networks)
    count = 0
    for net in networks:
        sub = model.subgraphs[net.name]
        calib = model.calibration[net.name]
        qlayers = {q.index: q for q in sub.layers}
        qtensors = {t.id: t for t in sub.tensors}
        for layer in net.layers:
            if not layer.outputs:
                continue
            q = qlayers[layer.index]
            entry = msg.layers.add(layer_name=names[(net.name, layer.index)], layer_type=ti_layer_type(layer))
            wbits = q.weight_bits if getattr(q, "weight_bits", None) else opts.tensor_bits
            entry.bit_depth = (wbits + 7) // 8
            for tid in layer.outputs:
                rng, qt = calib.tensors[tid], qtensors[tid]
                out = entry.outputs.add(size=1, element_type=_element_type(qt.bits, qt.signed))
                _set_range(out, *written_range(rng))
                out.scale.append(float(qt.scale))
                # style 4: the tensor's zero point (TI writes its int32 tensorZeroPoint into the uint32 field)
                out.zero_point.append(int(qt.zero_point) & 0xFFFFFFFF)
            if not _weighted_plan_layer(layer):
                continue
            where = f"@{net.name}: layer '{layer.name}'"
            lo, hi = _weights_range(layer, opts, where)
            wt = entry.weights.add(element_type=_element_type(wbits, True))
            _set_range(wt, lo, hi)
            scales = np.atleast_1d(np.asarray(q.weight_scale, np.float64))
            wt.size = len(scales)
            wt.scale.extend(float(s) for s in scales)
            wt.zero_point.extend([0] * len(scales))
            bias = float_biases.get((net.name, layer.index))
            if bias is None:
                continue
            original = _fold(layer, where).bias
            b = entry.bias.add(size=len(bias), element_type=_element_type(wbits, True))
            _set_range(b, float(np.min(original)), float(np.max(original)))
            b.scale.append(float(q.bias_scale))
            b.zero_point.append(0)
            b.value.extend(float(v) for v in np.asarray(bias, np.float64).reshape(-1))
        count += sum(1 for layer in net.layers if layer.outputs)
    msg.num_layers = count
    return msg


def write(path: str, model, float_biases: Mapping[Tuple[str, int], np.ndarray]) -> None:
    """Writes the file of ``model`` (atomically, UTF-8, text format as protobuf prints it)."""
    from google.protobuf import text_format

    from .artifacts import write_file_atomically

    text = text_format.MessageToString(build_message(model, float_biases))
    try:
        write_file_atomically(path, text)
    except OSError as exc:
        raise QuantProtoError(f"{path}: cannot write the quantization-parameters file: {exc}") from None


def exists(path: str) -> bool:
    """Read mode: the file exists and is not empty (TI's ``TIDL_isQuantParamsProtoTxtFileEmpty``)."""
    return bool(path) and os.path.isfile(path) and os.path.getsize(path) > 0


def from_proto(calibration: Mapping) -> bool:
    """Whether ``calibration`` (``{subgraph: CalibrationResult}``) was read from a file."""
    return any(getattr(r, "given", None) is not None for r in calibration.values())


def quantize_with_proto(partitioned: IRModule, options, calibration):
    """``quantize_model`` with ``options.quant_params_proto_path`` set and ranges not from the file:
    read mode when the file exists, else write mode (quantize, write, then quantize from the file)."""
    from .quantize import quantize_model

    path = options.quant_params_proto_path
    networks = build_networks(partitioned)
    if not exists(path):
        first = quantize_model(partitioned, options.replace(quant_params_proto_path=""), calibration)
        write(path, first, first.float_biases)
    level = next(iter(calibration.values())).accuracy_level if calibration else options.accuracy_level
    return quantize_model(partitioned, options, read(path, partitioned, networks, level,
                                                     options.quantization_scale_type))


__all__ = ["QuantProtoError", "TI_LAYER_STRINGS", "ti_layer_type", "ti_layer_names", "message_classes", "parse",
           "read", "write", "build_message", "exists", "from_proto", "quantize_with_proto", "GivenParams",
           "FLT_MAX", "check_quant_type"]
