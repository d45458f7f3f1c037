"""The fixed-point layer kernels: one per TIDL layer type, over the plain data of network.py.

    outputs = run_subgraph(sub, [float_or_int_input, ...], observers=[seen.append])

Each kernel reads its layer's fields and calls the runtime rule of ``arith.py`` (docs/numerics.md
§7, §8); nothing here chooses a scale or a shift. The subgraph's inputs are converted to fixed
point and its outputs back to float32 (§8.12, the Data layers). A layer type without a kernel is a
FixedPointError naming the layer: never a float fallback.

Observers get a ``FixedObservation`` per layer (Data layers included): the layer record, its input
arrays and its output arrays, integers in their TIDL dtypes (float32 for softmax and the output
data converts).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from . import arith, arith_asym
from .arith import FixedPointError
from .network import QuantizedLayer, QuantizedSubgraph, QuantizedTensor


class FixedObservation(NamedTuple):
    subgraph: str
    layer: QuantizedLayer
    inputs: Tuple[np.ndarray, ...]
    outputs: Tuple[np.ndarray, ...]


Kernel = Callable[[QuantizedLayer, List[np.ndarray], Tuple[QuantizedTensor, ...]], List[np.ndarray]]
KERNELS: Dict[str, Kernel] = {}


def fixed_kernel(*layer_types: str):
    """Registers a function as the fixed-point kernel of these TIDL layer types."""
    def register(fn: Kernel) -> Kernel:
        for t in layer_types:
            KERNELS[t] = fn
        return fn
    return register


def _out(layer: QuantizedLayer, tensors, k: int = 0) -> QuantizedTensor:
    return tensors[layer.outputs[k]]


def has_own_activation(layer: QuantizedLayer) -> bool:
    """The layer ends in a PReLU or a table activation (§8.10.1, §8.10.2), not in plain saturation."""
    return layer.activation_table is not None or layer.prelu_slopes is not None


def pre_activation(layer: QuantizedLayer, tensors) -> Tuple[arith.FixedType, Optional[Tuple[int, int]]]:
    """The type and bounds a weighted layer's accumulator rule requantizes to: the output's with the
    layer's bounds (a PReLU's slopes act on the accumulator before it, §8.10.1), or, before a table
    activation, the signed pre-activation type of the output's width without bounds."""
    out = _out(layer, tensors).fixed_type
    if layer.activation_table is not None:
        return arith.FixedType(out.bits, True), None
    return out, layer.bounds


def negative_slopes(layer: QuantizedLayer) -> Optional[Tuple[np.ndarray, int]]:
    """A PReLU layer's (slope factors, shift) for its accumulator rule (§8.10.1), else None."""
    return None if layer.prelu_slopes is None else (layer.prelu_slopes, layer.prelu_shift)


def activate(layer: QuantizedLayer, pre: np.ndarray, tensors) -> np.ndarray:
    """A weighted layer's table activation after its accumulator rule (identity otherwise)."""
    if layer.activation_table is not None:
        return arith.lookup_activation(pre, layer.activation_table, _out(layer, tensors).fixed_type)
    return pre


def zero_point_free(layer: QuantizedLayer, tensors) -> None:
    """§12.13: TI's batch norm, deconvolution and average pool kernels have no zero-point term; in style 4
    their input has zero point 0 (its producer's symmetric scale), anything else is refused, not run wrong."""
    x = tensors[layer.inputs[0]]
    if x.zero_point != 0:
        raise FixedPointError(f"layer {layer.describe()}: its input '{x.name}' has zero point {x.zero_point}; a "
                              f"{layer.type} layer takes zero point 0 (docs/numerics.md §12.13)")


def asym_pre_activation(layer: QuantizedLayer, tensors) -> Tuple[arith.FixedType, Optional[Tuple[int, int]]]:
    """A style-4 weighted layer's requantization target: its output with its bounds, or before a table
    activation the signed pre-activation type of the output's width, whose zero point is in the table
    (§12.12)."""
    out = _out(layer, tensors).fixed_type
    if layer.activation_table is not None:
        return arith.FixedType(out.bits, True), None
    return out, layer.bounds


def asym_prelu(layer: QuantizedLayer, acc: np.ndarray, tensors) -> np.ndarray:
    """§12.12: a style-4 weighted layer's accumulator (no output zero point in its bias) through the
    positive or the channel's negative multiplier and shift, the output's zero point added."""
    out = _out(layer, tensors)
    return arith_asym.prelu_requantize(acc, layer.mma_scale, layer.mma_shift, layer.prelu_slopes,
                                       layer.attrs["negative_shifts"], out.zero_point, out.fixed_type,
                                       axis=1, bounds=layer.bounds)


@fixed_kernel("Conv")
def conv_kernel(layer, xs, tensors):
    a = layer.attrs
    if layer.asymmetric:   # §12.6: padding with the input's zero point, MMA requantization
        geometry = dict(zero_point=tensors[layer.inputs[0]].zero_point, strides=a["strides"], pads=a["pads"],
                        dilations=a["dilations"], groups=a["groups"])
        if layer.prelu_slopes is not None:   # §12.12: the slopes' multipliers on the accumulator
            acc = arith_asym.convolution_accumulator(xs[0], layer.weights, layer.bias_a, **geometry)
            return [asym_prelu(layer, acc, tensors)]
        ptype, bounds = asym_pre_activation(layer, tensors)
        pre = arith_asym.convolution_mma(xs[0], layer.weights, layer.bias_a, layer.mma_scale, layer.mma_shift, ptype,
                                         bounds=bounds, **geometry)
        return [activate(layer, pre, tensors)]
    ptype, bounds = pre_activation(layer, tensors)
    pre = arith.convolution(xs[0], layer.weights, layer.bias_a, layer.bias_b, layer.round_bits, ptype,
                            strides=a["strides"], pads=a["pads"], dilations=a["dilations"], groups=a["groups"],
                            bounds=bounds, negative_slopes=negative_slopes(layer))
    return [activate(layer, pre, tensors)]


@fixed_kernel("Deconv")
def deconv_kernel(layer, xs, tensors):
    a = layer.attrs
    zero_point_free(layer, tensors)
    ptype, bounds = pre_activation(layer, tensors)
    pre = arith.deconvolution(xs[0], layer.weights, layer.bias_a, layer.bias_b, layer.round_bits, ptype,
                              strides=a["strides"], pads=a["pads"], dilations=a["dilations"], groups=a["groups"],
                              bounds=bounds, negative_slopes=negative_slopes(layer))
    return [activate(layer, pre, tensors)]


@fixed_kernel("InnerProduct")
def inner_product_kernel(layer, xs, tensors):
    """An input of more than two axes is a stack of rows (per-tensor scales, so the rows are
    independent): the product runs on its rows, the leading axes come back."""
    ptype, bounds = pre_activation(layer, tensors)
    if "transpose_b" in layer.attrs:   # two tensors: a matrix product
        return [arith.matmul(xs[0], xs[1], layer.round_bits, _out(layer, tensors).fixed_type,
                             transpose_a=bool(layer.attrs["transpose_a"]), transpose_b=bool(layer.attrs["transpose_b"]),
                             bounds=layer.bounds)]
    x = np.asarray(xs[0])
    rows = x.reshape(-1, x.shape[-1]) if x.ndim > 2 else x
    if layer.asymmetric:   # §12.6 (§12.12: a PReLU's or a table's own requantization)
        if layer.prelu_slopes is not None:
            y = asym_prelu(layer, arith_asym.inner_product_accumulator(rows, layer.weights, layer.bias_a), tensors)
        else:
            ptype, bounds = asym_pre_activation(layer, tensors)
            y = activate(layer, arith_asym.inner_product_mma(rows, layer.weights, layer.bias_a, layer.mma_scale,
                                                             layer.mma_shift, ptype, bounds=bounds), tensors)
        return [y.reshape(x.shape[:-1] + y.shape[-1:]) if x.ndim > 2 else y]
    pre = arith.inner_product(rows, layer.weights, layer.bias_a, layer.bias_b, layer.round_bits, ptype,
                              bounds=bounds, negative_slopes=negative_slopes(layer))
    return [activate(layer, pre.reshape(x.shape[:-1] + pre.shape[-1:]) if x.ndim > 2 else pre, tensors)]


@fixed_kernel("BatchNorm")
def batch_norm_kernel(layer, xs, tensors):
    if layer.table_on_input:    # TI's activation batch norm: its table over the input's values (§8.10.2)
        return [arith.lookup_activation(xs[0], layer.activation_table, _out(layer, tensors).fixed_type)]
    zero_point_free(layer, tensors)
    ptype, bounds = pre_activation(layer, tensors)
    pre = arith.batch_norm(xs[0], layer.weights, layer.bias_a, layer.bias_b, layer.round_bits, ptype,
                           bounds=bounds, axis=int(layer.attrs.get("axis", 1)), negative_slopes=negative_slopes(layer))
    return [activate(layer, pre, tensors)]


@fixed_kernel("PReLU")
def prelu_kernel(layer, xs, tensors):
    """A standalone PReLU / leaky ReLU layer: TI's batch norm of weight 1 and bias 0 with the PReLU
    activation (§8.10.1): ``x w[c]``, the slopes on the negative accumulators, one roundSat."""
    if layer.table_on_input and layer.activation_table is not None:   # TI's leaky ReLU table (§8.10.1, §12.12)
        return [arith.lookup_activation(xs[0], layer.activation_table, _out(layer, tensors).fixed_type)]
    if layer.asymmetric:   # §12.12: the positive or the channel's negative multiplier on q - zx, zy added
        if layer.prelu_slopes is None:
            raise FixedPointError(f"layer {layer.describe()}: a style-4 PReLU layer needs its negative multipliers")
        return [arith_asym.prelu_mma(xs[0], tensors[layer.inputs[0]].zero_point, int(layer.mma_scale),
                                     int(layer.mma_shift), layer.prelu_slopes, layer.attrs["negative_shifts"],
                                     _out(layer, tensors).zero_point, _out(layer, tensors).fixed_type,
                                     axis=int(layer.attrs.get("axis", 1)), bounds=layer.bounds)]
    if layer.prelu_slopes is None or layer.weights is None:
        raise FixedPointError(f"layer {layer.describe()}: a PReLU layer needs its weights and slopes")
    return batch_norm_kernel(layer, xs, tensors)


@fixed_kernel("Sigmoid", "Tanh")
def activation_kernel(layer, xs, tensors):
    """A standalone table activation layer: its input requantized by roundBits to the pre-activation
    type (§7.1), then the table (§8.10.2)."""
    arith.FixedType.of(xs[0], f"layer {layer.describe()} input")
    if layer.activation_table is None:
        raise FixedPointError(f"layer {layer.describe()}: a {layer.type} layer needs its table")
    if layer.table_on_input:    # TI's table over the input's own values (§8.10.2)
        return [arith.lookup_activation(xs[0], layer.activation_table, _out(layer, tensors).fixed_type)]
    ptype, _ = pre_activation(layer, tensors)
    pre = arith.round_sat(xs[0], layer.round_bits, *ptype.bounds).astype(ptype.dtype)
    return [activate(layer, pre, tensors)]


@fixed_kernel("Pool")
def pool_kernel(layer, xs, tensors):
    a = layer.attrs
    out = _out(layer, tensors).fixed_type
    if a["pool_type"] == "Max":
        return [arith.max_pool(xs[0], a["kernel"], a["strides"], a["pads"], ceil_mode=a["ceil_mode"])]
    if layer.asymmetric:
        raise FixedPointError(f"layer {layer.describe()}: an average pool with MMA factors; style 4 runs average "
                              f"pools as TI's symmetric layer (docs/numerics.md §12.13)")
    zero_point_free(layer, tensors)   # §12.13
    if a["global_pool"]:
        return [arith.global_average_pool(xs[0], a["q"], layer.round_bits, out, bounds=layer.bounds)]
    return [arith.average_pool(xs[0], a["kernel"], a["strides"], a["pads"], a["q"], layer.round_bits, out,
                               ceil_mode=a["ceil_mode"], bounds=layer.bounds)]


@fixed_kernel("EltWise")
def eltwise_kernel(layer, xs, tensors):
    """§8.5; a layer with a constant operand holds it in ``weights`` (attrs ``constant_operand``: its
    place among the operands)."""
    kind = layer.attrs["eltwise_type"]
    out = _out(layer, tensors).fixed_type
    if "constant_operand" in layer.attrs:
        xs = list(xs)
        xs.insert(int(layer.attrs["constant_operand"]), layer.weights)
    if layer.asymmetric:   # §12.7, §12.11: the inputs' zero points in attrs
        c, s, k = int(layer.mma_scale), int(layer.mma_shift), int(layer.bias_a)
        if kind == "Sum":
            return [arith_asym.eltwise_sum_mma(xs, layer.multipliers, k, c, s, out, bounds=layer.bounds)]
        if kind == "Prod":
            return [arith_asym.eltwise_product_mma(xs, layer.attrs["zero_points"], k, c, s, out, bounds=layer.bounds)]
        if kind == "Max":
            return [arith_asym.eltwise_max_mma(xs, layer.attrs["zero_points"], layer.multipliers, k, c, s, out,
                                               bounds=layer.bounds)]
        raise FixedPointError(f"layer {layer.describe()}: style 4 has no element-wise {kind!r} kernel")
    if kind == "Sum":
        return [arith.eltwise_sum(xs, layer.multipliers, layer.round_bits, out, bounds=layer.bounds)]
    if kind == "Max":
        return [arith.eltwise_max(xs, layer.multipliers, layer.round_bits, out, bounds=layer.bounds)]
    if kind == "Prod":
        return [arith.eltwise_product(xs, layer.round_bits, out, bounds=layer.bounds)]
    raise FixedPointError(f"layer {layer.describe()}: element-wise type {kind!r} has no fixed-point kernel")


@fixed_kernel("Concat")
def concat_kernel(layer, xs, tensors):
    if layer.asymmetric:   # §12.8
        return [arith_asym.concat_mma(xs, layer.mma_scale, layer.mma_shift, layer.bias_a,
                                      _out(layer, tensors).fixed_type, axis=layer.attrs["axis"], bounds=layer.bounds)]
    return [arith.concat(xs, layer.multipliers, layer.round_bits, _out(layer, tensors).fixed_type,
                         axis=layer.attrs["axis"], bounds=layer.bounds)]


@fixed_kernel("ReLU")
def saturate_kernel(layer, xs, tensors):
    """A standalone ReLU/ReLU6/Clip layer: the input saturated to the layer's bounds, scale kept (§8.10)."""
    out = _out(layer, tensors).fixed_type
    arith.FixedType.of(xs[0], f"layer {layer.describe()} input")
    if layer.bounds is None:
        raise FixedPointError("a saturation layer needs its bounds")
    lo, hi = layer.bounds
    return [arith.round_sat(xs[0], 0, lo, hi).astype(out.dtype)]


@fixed_kernel("Resize")
def resize_kernel(layer, xs, tensors):
    rh, rw = layer.attrs["ratios"]
    if layer.attrs["mode"] == "Nearest":
        return [arith.resize_nearest(xs[0], rh, rw)]
    return [arith.resize_bilinear(xs[0], rh, rw)]


@fixed_kernel("SoftMax")
def softmax_kernel(layer, xs, tensors):
    """§8.9: float32 out; an output that layers of the subgraph read is fixed point, by TI's integer
    kernel (``arith.softmax_fixed``; ``exp``: the 8-bit exponential rule of the device)."""
    out = _out(layer, tensors)
    if not out.is_float:
        return [arith.softmax_fixed(xs[0], tensors[layer.inputs[0]].scale, out.scale, out.fixed_type,
                                    axis=layer.attrs["axis"], exp_rule=str(layer.attrs.get("exp", "double")))]
    return [arith.softmax(xs[0], tensors[layer.inputs[0]].scale, axis=layer.attrs["axis"],
                          narrow_row_pads=bool(layer.attrs.get("narrow_row_pads", 0)),
                          lanes=int(layer.attrs.get("lanes", arith.SOFTMAX_LANES)))]


# -- data movement (§8.11): values copied, type and scale unchanged ------------------------------

@fixed_kernel("DataConvert")
def data_convert_kernel(layer, xs, tensors):
    """A cast at the graph's inputs or outputs: the integers pass as they are (their scale is kept)."""
    arith.FixedType.of(xs[0], f"layer {layer.describe()} input")
    return [xs[0].astype(_out(layer, tensors).fixed_type.dtype, copy=False)]


@fixed_kernel("LayerNorm")
def layer_norm_kernel(layer, xs, tensors):
    """§8.14: the normalization into the signed pre-activation type at ``pre_scale``, then the scale and
    shift per feature as a batch norm along the last axis."""
    out = _out(layer, tensors).fixed_type
    x = xs[0]
    pre = arith.layer_norm_core(x, tensors[layer.inputs[0]].scale, layer.pre_scale, layer.attrs["epsilon"],
                                arith.FixedType(out.bits, True))
    return [arith.batch_norm(pre, layer.weights, layer.bias_a, layer.bias_b, layer.round_bits, out,
                             bounds=layer.bounds, axis=pre.ndim - 1)]


@fixed_kernel("ArgMax")
def argmax_kernel(layer, xs, tensors):
    """The index of the largest value along the axis, the first of equal ones (numpy's argmax)."""
    arith.FixedType.of(xs[0], f"layer {layer.describe()} input")
    axis = int(layer.attrs["axis"])
    return [np.expand_dims(np.argmax(xs[0], axis=axis), axis).astype(_out(layer, tensors).fixed_type.dtype)]


@fixed_kernel("Reduce")
def reduce_kernel(layer, xs, tensors):
    """Reduce max / min: a value of the input, at its type and scale."""
    arith.FixedType.of(xs[0], f"layer {layer.describe()} input")
    fn = np.max if layer.attrs["reduce"] == "max" else np.min
    return [fn(xs[0], axis=tuple(layer.attrs["axes"]), keepdims=bool(layer.attrs["keepdims"]))]


@fixed_kernel("Reshape", "Flatten", "Squeeze")
def reshape_kernel(layer, xs, tensors):
    arith.check_moved(xs[0], f"layer {layer.describe()} input")
    return [xs[0].reshape(_out(layer, tensors).shape)]


@fixed_kernel("Transpose")
def transpose_kernel(layer, xs, tensors):
    arith.check_moved(xs[0], f"layer {layer.describe()} input")
    return [np.ascontiguousarray(np.transpose(xs[0], layer.attrs["perm"]))]


@fixed_kernel("Slice")
def slice_kernel(layer, xs, tensors):
    """Per output, (begin, end, stride) for every axis."""
    arith.check_moved(xs[0], f"layer {layer.describe()} input")
    return [np.ascontiguousarray(xs[0][tuple(slice(b, e, s) for b, e, s in ranges)])
            for ranges in layer.attrs["slices"]]


@fixed_kernel("Pad")
def pad_kernel(layer, xs, tensors):
    # the input's zero point: 0 in the symmetric styles, its own in style 4 (§8.11, §12.8)
    return [arith.pad_with_zero_point(xs[0], layer.attrs["pads"], tensors[layer.inputs[0]].zero_point)]


@fixed_kernel("DepthToSpace")
def depth_to_space_kernel(layer, xs, tensors):
    return [arith.depth_to_space(xs[0], layer.attrs["block"], layer.attrs["mode"])]


@fixed_kernel("TopK")
def topk_kernel(layer, xs, tensors):
    """§8.15: the values at the input's type and scale, the indices as int32."""
    a = layer.attrs
    values, indices = arith.topk(xs[0], int(a["k"]), int(a["axis"]), bool(a["largest"]))
    return [values, indices]


@fixed_kernel("ScatterElements")
def scatter_elements_kernel(layer, xs, tensors):
    """§8.16: (data, indices, updates), a constant data in ``weights`` and constant indices in attrs
    ``indices``; the multiplier and shift of 'add' and of the data's scale."""
    a = layer.attrs
    xs = list(xs)
    if layer.weights is not None:
        xs.insert(0, layer.weights)
    if "indices" in a:
        xs.insert(1, np.asarray(a["indices"]))
    if len(xs) != 3:
        raise FixedPointError(f"layer {layer.describe()}: ScatterElements takes data, indices and updates, got "
                              f"{len(xs)} operands")
    return [arith.scatter_elements(xs[0], xs[1], xs[2], a["reduction"], _out(layer, tensors).fixed_type,
                                   scale=int(a.get("scale", 1)), shift=int(a.get("shift", 0)),
                                   data_scale=int(a.get("data_scale", 1)), data_shift=int(a.get("data_shift", 0)))]


# -- the subgraph ---------------------------------------------------------------------------------

def _convert_in(tensor: QuantizedTensor, value: np.ndarray, where: str) -> np.ndarray:
    """§8.12: a float input to fixed point at its tensorScale; an integer input enters as it is."""
    value = np.asarray(value)
    if value.dtype.kind == "f" and tensor.zero_point:   # §12.9
        return arith_asym.data_convert_to_fixed_zp(value, tensor.scale, tensor.zero_point, tensor.fixed_type)
    if value.dtype.kind == "f":
        return arith.data_convert_to_fixed(value, tensor.scale, tensor.fixed_type)
    if tensor.fixed_type == arith.INDEX_TYPE and value.dtype.kind in "iu":   # §8.15: int64 indices -> int32
        if value.size and (value.min() < -2**31 or value.max() >= 2**31):
            raise FixedPointError(f"{where}: index input '{tensor.name}' has values outside int32 (TIDL's index "
                                  f"type)")
        return value.astype(np.int32)
    if value.dtype != tensor.dtype:
        raise FixedPointError(f"{where}: input '{tensor.name}' is {value.dtype}, the subgraph takes {tensor.dtype}")
    return value


def _convert_out(tensor: QuantizedTensor, value: np.ndarray) -> np.ndarray:
    """§8.12: fixed point out to the host as float32; softmax's float output passes as it is."""
    if tensor.is_float:
        return value
    if tensor.fixed_type == arith.INDEX_TYPE:   # §8.15: TIDL's int32 indices reach the host as int64
        return value.astype(np.int64)
    return arith.data_convert_to_float(value, tensor.scale, tensor.zero_point)


def run_subgraph(sub: QuantizedSubgraph, inputs: Sequence[np.ndarray],
                 observers: Sequence[Callable[[FixedObservation], None]] = (),
                 kernels: Optional[Mapping[str, Kernel]] = None) -> List[np.ndarray]:
    """Runs one quantized subgraph: float (or integer) inputs in ``sub.inputs`` order, float32 outputs in
    ``sub.outputs`` order. Each value is freed after its last reader. ``kernels``: the kernel of each
    layer type (default ``KERNELS``, the plain ones); a faster table must give the same bits. Layers
    with a PReLU or table activation always run the plain kernel."""
    kernels = KERNELS if kernels is None else kernels
    if len(inputs) != len(sub.inputs):
        raise FixedPointError(f"@{sub.name} takes {len(sub.inputs)} inputs, got {len(inputs)}")
    last_use: Dict[int, int] = {}
    for i, layer in enumerate(sub.layers):
        for t in layer.inputs:
            last_use[t] = i
    values: Dict[int, np.ndarray] = {}
    given = dict(zip(sub.inputs, inputs))
    results: Dict[int, np.ndarray] = {}
    for i, layer in enumerate(sub.layers):
        if layer.type == "Data" and not layer.inputs:          # a subgraph input: data convert in
            tensor = sub.tensors[layer.outputs[0]]
            raw = given[tensor.id]
            outs = [_convert_in(tensor, raw, f"@{sub.name}")]
            ins: Tuple[np.ndarray, ...] = (raw,)
        elif layer.type == "Data":                               # a subgraph output: data convert out
            tensor = sub.tensors[layer.inputs[0]]
            ins = (values[tensor.id],)
            outs = [_convert_out(tensor, ins[0])]
            results[tensor.id] = outs[0]
        else:
            # A layer ending in its own activation (§8.10.1-2) runs the plain kernel: a faster table's
            # kernels are written for plain saturation.
            # A style-4 layer (§12) runs the plain kernel too: the faster ones have no MMA requantization.
            plain = has_own_activation(layer) or layer.asymmetric
            kernel = KERNELS.get(layer.type) if plain else kernels.get(layer.type)
            if kernel is None:
                raise FixedPointError(f"@{sub.name}: layer {layer.describe()}: TIDL fixed point does not support "
                                      f"{layer.type} layers yet")
            ins = tuple(values[t] for t in layer.inputs)
            for t, v in zip(layer.inputs, ins):
                if sub.tensors[t].is_float:
                    raise FixedPointError(f"@{sub.name}: layer {layer.describe()} reads the float tensor "
                                          f"'{sub.tensors[t].name}'; fixed point takes integer inputs only")
            try:
                outs = kernel(layer, list(ins), sub.tensors)
            except FixedPointError as exc:
                raise FixedPointError(f"@{sub.name}: layer {layer.describe()}: {exc}") from exc
            if len(outs) != len(layer.outputs):     # an unset output would fail later, far from its cause
                raise FixedPointError(f"@{sub.name}: layer {layer.describe()} made {len(outs)} output(s), the layer "
                                      f"has {len(layer.outputs)}")
            for t, v in zip(layer.outputs, outs):
                expected = sub.tensors[t]
                if v.dtype != expected.dtype or tuple(v.shape) != expected.shape:
                    raise FixedPointError(f"@{sub.name}: layer {layer.describe()} made {v.dtype}{list(v.shape)}, "
                                          f"its output '{expected.name}' is {expected.dtype}{list(expected.shape)}")
        if layer.type != "Data" or not layer.inputs:
            for t, v in zip(layer.outputs, outs):
                values[t] = v
        for observer in observers:
            observer(FixedObservation(sub.name, layer, ins, tuple(outs)))
        for t in layer.inputs:
            if last_use.get(t) == i and t not in sub.outputs:
                values.pop(t, None)
    return [results[t] for t in sub.outputs]


__all__ = ["FixedObservation", "KERNELS", "fixed_kernel", "run_subgraph"]
