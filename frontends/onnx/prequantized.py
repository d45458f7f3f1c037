"""Prequantized (QDQ) ONNX models as TIDL imports them with ``advanced_options:prequantized_model=1``.

TIDL does not run a QDQ model's QuantizeLinear/DequantizeLinear nodes: it folds them into the layers.
A weight's DequantizeLinear gives the float weights (``(q - zp) x scale``, per output channel), which
TIDL quantizes again by its own rules; an activation's QuantizeLinear -> DequantizeLinear pair gives
the tensor's range ``[(qmin - zp) x s, (qmax - zp) x s]`` in place of calibration. ``strip_qdq`` makes
that float model and those ranges; what TIDL's prequantized import refuses (a non-zero weight zero point,
a per-channel activation scale or zero point, a QuantizeLinear read by anything but its DequantizeLinear)
is a ``PrequantizedModelError`` naming the node (docs/prequantized.md). A non-zero activation zero point
is refused too, unless the caller collects them (``strip_qdq(model, zero_points={})``): the quantization
then takes them in style 4 and refuses them in the symmetric styles."""

from typing import Dict, List, Optional, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

from .errors import OnnxImportError

_INT_LIMITS = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255), np.dtype(np.int16): (-32768, 32767),
               np.dtype(np.uint16): (0, 65535), np.dtype(np.int32): (-2 ** 31, 2 ** 31 - 1)}


class PrequantizedModelError(OnnxImportError):
    """A QDQ model TIDL's prequantized import refuses; the message names the node."""


def _where(node: onnx.NodeProto) -> str:
    return f"node '{node.name or node.output[0]}' ({node.op_type})"


def _constant(node: onnx.NodeProto, index: int, consts: Dict[str, np.ndarray]):
    if index >= len(node.input) or not node.input[index]:
        return None
    name = node.input[index]
    if name not in consts:
        raise PrequantizedModelError(f"{_where(node)}: input {index} ('{name}') is not a constant; TIDL's "
                                     f"prequantized import takes constant scales and zero points")
    return consts[name]


def _per_axis(values: np.ndarray, rank: int, axis: int) -> np.ndarray:
    """A per-axis scale or zero point shaped to broadcast along ``axis`` of a rank-``rank`` tensor."""
    if values.ndim == 0 or values.size == 1:
        return values.reshape(())
    shape = [1] * rank
    shape[axis % rank] = values.size
    return values.reshape(shape)


def _dequantized(node: onnx.NodeProto, q: np.ndarray, scale: np.ndarray, zp) -> np.ndarray:
    """A weight DequantizeLinear's float output: ``(q - zp) x scale`` in float32, as ONNX defines it."""
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    zero = np.zeros((), np.int64) if zp is None else zp.astype(np.int64)
    if np.any(zero != 0):
        raise PrequantizedModelError(f"{_where(node)}: zero point {zero.ravel()[:4].tolist()} is not 0; TIDL's "
                                     f"prequantized import takes symmetric weights")
    s = _per_axis(scale.astype(np.float32), q.ndim, axis)
    return ((q.astype(np.int64) - _per_axis(zero, q.ndim, axis)).astype(np.float32) * s).astype(np.float32)


def _fake_quantized(node: onnx.NodeProto, w: np.ndarray, scale: np.ndarray, zp) -> np.ndarray:
    """A float constant through QuantizeLinear then DequantizeLinear (round half to even, saturate)."""
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    dtype = np.dtype(np.uint8) if zp is None else zp.dtype
    lo, hi = _INT_LIMITS[dtype]
    s = _per_axis(scale.astype(np.float32), w.ndim, axis)
    q = np.clip(np.rint(w.astype(np.float32) / s), lo, hi).astype(np.int64)
    return _dequantized(node, q, scale, zp)


def activation_range(node: onnx.NodeProto, scale: np.ndarray, zp, asymmetric: bool = False) -> Tuple[float, float]:
    """An activation QuantizeLinear's range: ``[(qmin - zp) x s, (qmax - zp) x s]`` (TIDL-style clip of the
    tensor); refused with a per-channel scale or zero point, and with a non-zero zero point (an asymmetric
    feature map) unless ``asymmetric`` (the quantization decides then: docs/prequantized.md)."""
    if zp is not None and np.asarray(zp).size != 1:
        raise PrequantizedModelError(f"{_where(node)}: per-channel activation zero points "
                                     f"({np.asarray(zp).size} values: {np.asarray(zp).ravel()[:4].tolist()}"
                                     f"{' ...' if np.asarray(zp).size > 4 else ''}); TIDL takes one zero point "
                                     f"per feature map")
    if scale.size != 1:
        raise PrequantizedModelError(f"{_where(node)}: a per-channel activation scale ({scale.size} values); "
                                     f"TIDL takes one scale per feature map")
    dtype = np.dtype(np.uint8) if zp is None else zp.dtype
    if dtype not in (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16), np.dtype(np.uint16)):
        raise PrequantizedModelError(f"{_where(node)}: quantizes to {dtype}; TIDL's feature maps are 8 or 16 bit")
    zero = activation_zero_point(zp)
    if zero != 0 and not asymmetric:
        raise PrequantizedModelError(f"{_where(node)}: zero point {zero} is not 0 (an asymmetric feature map); "
                                     f"TIDL's prequantized import takes symmetric activations (quantize with "
                                     f"zero points 0: activation_type QInt8, or QUInt8 after a ReLU)")
    lo, hi = _INT_LIMITS[dtype]
    s = float(np.float32(scale.reshape(-1)[0]))
    return float(np.float32((lo - zero) * s)), float(np.float32((hi - zero) * s))


def activation_zero_point(zp) -> int:
    """An activation QuantizeLinear's one zero point (0 when it has none)."""
    return 0 if zp is None else int(np.asarray(zp).reshape(-1)[0])


def strip_qdq(model: onnx.ModelProto, zero_points: Optional[Dict[str, Tuple[str, int]]] = None
              ) -> Tuple[onnx.ModelProto, Dict[str, Tuple[float, float]]]:
    """The float model TIDL imports from a QDQ model, and the activation ranges its Q/DQ pairs give
    (ONNX tensor name -> (min, max)). Weights' DequantizeLinear nodes become float initializers;
    activation QuantizeLinear -> DequantizeLinear pairs are removed, their range kept on the tensor.

    ``zero_points``: None refuses an activation pair with a non-zero zero point; a dict takes it (its
    range holds the zero point) and receives, per tensor, the pair's node and zero point, for the
    quantization to accept (style 4) or refuse (docs/prequantized.md)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            attr = next((a for a in node.attribute if a.name == "value"), None)
            if attr is not None:
                consts[node.output[0]] = numpy_helper.to_array(attr.t)
    consumers: Dict[str, List[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.output}
    drop: set = set()
    new_consts: Dict[str, np.ndarray] = {}
    rename: Dict[str, str] = {}          # a DequantizeLinear output -> the tensor it stands for
    ranges: Dict[str, Tuple[float, float]] = {}
    quantized_to: Dict[str, str] = {}    # a QuantizeLinear output -> its float input
    for node in graph.node:
        if node.op_type == "QuantizeLinear":
            scale, zp = _constant(node, 1, consts), _constant(node, 2, consts)
            x = node.input[0]
            if x in consts:          # a float weight quantized in the graph: its fake-quantized values
                deq = _fake_quantized(node, consts[x], scale, zp)
                for dq in consumers.get(node.output[0], []):
                    if dq.op_type != "DequantizeLinear":
                        raise PrequantizedModelError(f"{_where(node)}: its output is read by {_where(dq)}; TIDL "
                                                     f"folds a QuantizeLinear only into its DequantizeLinear")
                    new_consts[dq.output[0]] = deq
                    drop.add(id(dq))
                drop.add(id(node))
                continue
            if x not in ranges:
                ranges[x] = activation_range(node, scale, zp, asymmetric=zero_points is not None)
                if zero_points is not None and activation_zero_point(zp) != 0:
                    zero_points[x] = (_where(node), activation_zero_point(zp))
            quantized_to[node.output[0]] = x
            drop.add(id(node))
        elif node.op_type == "DequantizeLinear":
            q = node.input[0]
            scale, zp = _constant(node, 1, consts), _constant(node, 2, consts)
            if q in consts:          # a quantized weight or bias
                new_consts[node.output[0]] = _dequantized(node, consts[q], scale, zp)
                drop.add(id(node))
            elif q in quantized_to:  # the second half of an activation pair
                rename[node.output[0]] = quantized_to[q]
                drop.add(id(node))
            else:
                raise PrequantizedModelError(f"{_where(node)}: dequantizes '{q}', which no QuantizeLinear "
                                             f"makes; TIDL's prequantized import takes Q/DQ pairs")
    for node in graph.node:
        if node.op_type == "QuantizeLinear" and id(node) in drop and node.output[0] in quantized_to:
            for reader in consumers.get(node.output[0], []):
                if reader.op_type != "DequantizeLinear":
                    raise PrequantizedModelError(f"{_where(node)}: its output is read by {_where(reader)}; TIDL "
                                                 f"folds a QuantizeLinear only into its DequantizeLinear")
            if node.output[0] in outputs:
                raise PrequantizedModelError(f"{_where(node)}: its integer output is a model output; TIDL's "
                                             f"prequantized import ends a QDQ model on a DequantizeLinear")
    # a graph output made by a DequantizeLinear keeps its name: the float tensor it stands for takes it
    keep_name = {src: out for out, src in rename.items() if out in outputs}
    for out, src in list(rename.items()):
        if src in keep_name:
            rename[out] = keep_name[src]
    for src, out in keep_name.items():
        if src in ranges:
            ranges[out] = ranges.pop(src)
        if zero_points is not None and src in zero_points:
            zero_points[out] = zero_points.pop(src)

    def resolved(name: str) -> str:
        name = rename.get(name, name)
        return keep_name.get(name, name)

    kept = [n for n in graph.node if id(n) not in drop]
    for node in kept:
        for i, name in enumerate(node.input):
            node.input[i] = resolved(name)
        for i, name in enumerate(node.output):
            node.output[i] = keep_name.get(name, name)
    for inp in graph.input:
        if inp.name in keep_name:
            raise PrequantizedModelError(f"model input '{inp.name}' is itself a model output through a Q/DQ pair")
    del graph.node[:]
    graph.node.extend(kept)
    used = {name for n in graph.node for name in n.input} | outputs
    old = [t for t in graph.initializer if t.name in used and t.name not in new_consts]
    del graph.initializer[:]
    graph.initializer.extend(old)
    graph.initializer.extend(numpy_helper.from_array(v, name) for name, v in new_consts.items() if name in used)
    input_names = {i.name for i in graph.input}
    ranges = {k: v for k, v in ranges.items() if k in used or k in input_names or
              any(k in n.output for n in graph.node)}
    if zero_points is not None:
        for name in [k for k in zero_points if k not in ranges]:
            del zero_points[name]
    for name in _not_negative(graph):   # TIDL's layer is unsigned there: the range starts at 0
        if name in ranges:
            ranges[name] = (max(ranges[name][0], 0.0), ranges[name][1])
    # value_info of removed tensors would only mislead shape inference
    removed = set(rename) | set(quantized_to)
    kept_info = [v for v in graph.value_info if v.name not in removed]
    del graph.value_info[:]
    graph.value_info.extend(kept_info)
    return model, ranges


#: Ops whose output is not negative when their first input is not (they move or pick values).
_SIGN_KEEPING = frozenset({"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Flatten", "Reshape",
                           "Transpose", "Squeeze", "Unsqueeze", "Resize", "Upsample", "Identity", "DepthToSpace",
                           "SpaceToDepth"})


def _not_negative(graph: onnx.GraphProto) -> set:
    """The tensors of the (float) graph that cannot be negative: a ReLU's output, a Clip's with a
    non-negative minimum, and what the sign-keeping ops make of them."""
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    out: set = set()
    for node in graph.node:
        if node.op_type == "Relu":
            out.add(node.output[0])
        elif node.op_type == "Clip":
            lo = next((a.f for a in node.attribute if a.name == "min"), None)
            if len(node.input) > 1 and node.input[1] in consts:
                lo = float(consts[node.input[1]])
            if lo is not None and lo >= 0:
                out.add(node.output[0])
        elif node.op_type in _SIGN_KEEPING and node.input and node.input[0] in out:
            out.add(node.output[0])
        elif node.op_type in ("Add", "Concat", "Max") and node.input and all(i in out for i in node.input):
            out.add(node.output[0])
    return out


def is_qdq(model: onnx.ModelProto) -> bool:
    """Whether the model holds a QuantizeLinear or DequantizeLinear node."""
    return any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in model.graph.node)


__all__ = ["strip_qdq", "is_qdq", "activation_range", "activation_zero_point", "PrequantizedModelError"]
