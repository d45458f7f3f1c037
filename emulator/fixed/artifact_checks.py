"""What the fixed-point runtime relies on, checked on a subgraph read from a network record
(docs/artifacts.md §5): a record whose framing is sound (size, CRC-32, offsets) can still be forged,
so before the reader returns a subgraph every layer's parameters are checked against what its
kernel in ``layers.py`` reads, and every tensor's shape against what its producer makes.

    check_subgraph(sub, "tidl_subgraph0_net.bin")   # raises ArtifactError naming the layer and field

What holds afterwards: each tensor fits the tensor budget (``TIDLX_MAX_TENSOR_BYTES``); each kernel's
parameters have the kinds and ranges its arith rule takes (so no Python int reaches numpy too large,
no attribute is missing); the shapes the kernels will make are the recorded ones; and the work of a
window layer (taps, padded input) stays within the budget, so a forged record cannot hang or exhaust
memory. The kernels still check their own arguments; this is the reader refusing first, by name.
"""

from __future__ import annotations

import math
from typing import Any, List, Sequence, Tuple

import numpy as np

from ...ir.types import MAX_TENSOR_BYTES_ENV, format_bytes, max_tensor_bytes
from . import arith
from .arith import FixedPointError
from .artifact_format import ArtifactError
from .network import QuantizedLayer, QuantizedSubgraph, QuantizedTensor

#: Each value the runtime holds is at most int64 (8 bytes an element).
_WORK_ITEM_BYTES = 8
#: A kernel's shift (roundBits, PReLU shift, average pool's Q) is at most 62: roundSat's range.
_MAX_SHIFT = 62
#: TIDL's pool Q and multipliers are 32-bit quantities.
_MAX_POOL_Q = 31
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
#: The largest dim a record may give (TI's dims are 32-bit).
_MAX_DIM = (1 << 31) - 1

_ONE_IN_ONE_OUT = {"Conv", "Deconv", "InnerProduct", "BatchNorm", "PReLU", "Sigmoid", "Tanh", "Pool", "ReLU",
                   "Resize", "SoftMax", "Reshape", "Flatten", "Squeeze", "Transpose", "Pad", "DepthToSpace"}
_WEIGHT_RANK = {"Conv": 4, "Deconv": 4, "InnerProduct": 2, "BatchNorm": 1, "LayerNorm": 1, "PReLU": 1}


class _Layer:
    """Checks of one layer; every failure names the file, the layer and the field."""

    def __init__(self, sub: QuantizedSubgraph, layer: QuantizedLayer, path: str, budget: int):
        self.sub, self.layer, self.path, self.budget = sub, layer, path, budget
        self.ins = [sub.tensors[t] for t in layer.inputs]
        self.outs = [sub.tensors[t] for t in layer.outputs]

    def fail(self, message: str) -> ArtifactError:
        return ArtifactError(f"{self.path}: layer {self.layer.index} {self.layer.describe()}: {message}")

    # -- values ------------------------------------------------------------------------------------

    def attr(self, key: str) -> Any:
        if key not in self.layer.attrs:
            raise self.fail(f"a {self.layer.type} layer needs the parameter '{key}'; the record has "
                            f"{sorted(self.layer.attrs)}")
        return self.layer.attrs[key]

    def integer(self, value: Any, field: str, lo: int, hi: int) -> int:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
            raise self.fail(f"{field} is {value!r}, not an integer in [{lo}, {hi}]")
        return int(value)

    def integers(self, value: Any, field: str, count: int, lo: int, hi: int) -> Tuple[int, ...]:
        if not isinstance(value, tuple) or len(value) != count:
            raise self.fail(f"{field} is {value!r}, not {count} integers")
        return tuple(self.integer(v, f"{field}[{i}]", lo, hi) for i, v in enumerate(value))

    def boolean(self, key: str) -> bool:
        value = self.attr(key)
        if not isinstance(value, bool):
            raise self.fail(f"'{key}' is {value!r}, not a bool")
        return value

    def choice(self, key: str, options: Sequence[str]) -> str:
        value = self.attr(key)
        if value not in options or not isinstance(value, str):
            raise self.fail(f"'{key}' is {value!r}, not one of {list(options)}")
        return value

    def int_array(self, value: Any, field: str, ndim: Sequence[int], lo: int, hi: int) -> np.ndarray:
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "iu" or value.ndim not in ndim:
            what = f"{value.dtype}{list(value.shape)}" if isinstance(value, np.ndarray) else repr(value)
            raise self.fail(f"{field} is {what}, not an integer array of rank {' or '.join(map(str, ndim))}")
        if value.size and (int(value.min()) < lo or int(value.max()) > hi):
            raise self.fail(f"{field} holds {int(value.min())}..{int(value.max())}, outside [{lo}, {hi}]")
        return value

    def axis(self, key: str, rank: int) -> int:
        return self.integer(self.attr(key), f"'{key}'", -rank, rank - 1) % rank

    def work(self, elements: int, what: str) -> None:
        """A kernel's intermediate of ``elements`` int64 values stays inside the tensor budget."""
        if elements * _WORK_ITEM_BYTES > self.budget:
            raise self.fail(f"{what} would need {format_bytes(elements * _WORK_ITEM_BYTES)} as int64, more than the "
                            f"tensor budget of {format_bytes(self.budget)} (raise it with {MAX_TENSOR_BYTES_ENV} if "
                            f"the record is real)")

    # -- the checks ----------------------------------------------------------------------------------

    def check(self) -> None:
        layer = self.layer
        if layer.type == "Data":
            direction = "out" if layer.inputs else "in"
            if len(layer.inputs) + len(layer.outputs) != 1 or layer.attrs.get("direction") != direction:
                raise self.fail(f"a Data layer has one tensor and the direction '{direction}'")
            if not self.ins and self.outs[0].is_float:
                raise self.fail(f"the subgraph input '{self.outs[0].name}' is a float tensor; inputs are fixed point")
            return
        n_in, n_out = len(layer.inputs), len(layer.outputs)
        tensor_product = layer.type == "InnerProduct" and "transpose_b" in layer.attrs
        if tensor_product and (n_in, n_out) != (2, 1):
            raise self.fail(f"{n_in} inputs and {n_out} outputs; a product of two tensors has two and one")
        if layer.type in _ONE_IN_ONE_OUT and not tensor_product and (n_in, n_out) != (1, 1):
            raise self.fail(f"{n_in} inputs and {n_out} outputs; a {layer.type} layer has one of each")
        if not n_in or not n_out:
            raise self.fail(f"{n_in} inputs and {n_out} outputs")
        self.common()
        shapes = getattr(self, "shape_" + layer.type, None)
        if shapes is None:
            return          # no kernel: the runtime refuses the layer by name
        expected = shapes([t.shape for t in self.ins])
        for tensor, shape in zip(self.outs, expected):
            if tuple(shape) != tensor.shape:
                raise self.fail(f"makes {list(shape)} from its inputs {[list(t.shape) for t in self.ins]}; its output "
                                f"'{tensor.name}' says {list(tensor.shape)}")

    def common(self) -> None:
        """The fields every kernel may read: roundBits, bounds, multipliers, weights, bias, activation."""
        layer, out = self.layer, self.outs[0]
        self.integer(layer.weight_bits, "the weight size", 0, 16)
        if isinstance(layer.round_bits, np.ndarray):
            rb = self.int_array(layer.round_bits, "roundBits", (1,), 0, _MAX_SHIFT)
            if rb.size != (out.shape[1] if len(out.shape) > 1 else 1):
                raise self.fail(f"{rb.size} per-channel roundBits for the output {list(out.shape)}")
        else:
            self.integer(layer.round_bits, "roundBits", 0, _MAX_SHIFT)
        if layer.bounds is not None:
            if out.is_float:
                raise self.fail("saturation bounds on a float output")
            lo, hi = self.integers(layer.bounds, "the bounds", 2, *out.fixed_type.bounds)
            if lo > hi:
                raise self.fail(f"the bounds [{lo}, {hi}] are empty")
        elif layer.type == "ReLU":
            raise self.fail("a ReLU layer needs its saturation bounds")
        if not isinstance(layer.multipliers, tuple):
            raise self.fail(f"the multipliers are {layer.multipliers!r}, not integers")
        for i, m in enumerate(layer.multipliers):
            self.integer(m, f"multiplier {i}", *_INT32)
        self.integer(layer.prelu_shift, "the PReLU shift", 0, _MAX_SHIFT)
        if layer.prelu_slopes is not None:
            self.int_array(layer.prelu_slopes, "the PReLU slopes", (0, 1), *_INT32)
        if layer.activation_table is not None:
            self.int_array(layer.activation_table, "the activation table", (1,), *_INT64)
        if not isinstance(layer.table_on_input, (bool, np.bool_)):
            raise self.fail(f"table_on_input is {layer.table_on_input!r}, not a bool")
        if layer.table_on_input and layer.activation_table is None:
            raise self.fail("table_on_input without an activation table")
        if layer.type in _WEIGHT_RANK and not (layer.type == "InnerProduct" and "transpose_b" in layer.attrs):
            self.weights()
        if layer.mma_scale is not None or layer.mma_shift is not None:
            self.mma()

    def mma(self) -> None:
        """Style 4 (docs/numerics.md §12): multipliers 0..255 and shifts, one per output channel for a
        convolution or inner product, one for a sum or a global average pool."""
        layer, out = self.layer, self.outs[0]
        if layer.mma_scale is None or layer.mma_shift is None:
            raise self.fail("an MMA multiplier without its shift, or a shift without its multiplier")
        if layer.type in ("Conv", "InnerProduct"):
            channels = out.shape[-1 if layer.type == "InnerProduct" else 1] if len(out.shape) > 1 else 1
            for value, field, hi in ((layer.mma_scale, "the MMA multipliers", 255),
                                     (layer.mma_shift, "the MMA shifts", _MAX_SHIFT)):
                arr = self.int_array(value, field, (1,), 0, hi)
                if arr.size != channels:
                    raise self.fail(f"{arr.size} values in {field} for {channels} output channels")
            if layer.prelu_slopes is not None:   # §12.12: a PReLU ending the layer
                self.prelu_negative_shifts()
        elif layer.type == "Concat":
            for value, field, lo, hi in ((layer.mma_scale, "the MMA multipliers", 0, 255),
                                         (layer.mma_shift, "the MMA shifts", 0, _MAX_SHIFT),
                                         (layer.bias_a, "the input biases", *_INT32)):
                arr = self.int_array(value, field, (1,), lo, hi)
                if arr.size != len(layer.inputs):
                    raise self.fail(f"{arr.size} values in {field} for {len(layer.inputs)} inputs")
        elif layer.type in ("Pool", "EltWise"):
            self.integer(layer.mma_scale, "the MMA multiplier", 0, 255)
            self.integer(layer.mma_shift, "the MMA shift", 0, _MAX_SHIFT)
        elif layer.type == "PReLU":   # §12.12: the positive multiplier, the channels' negative ones in the slopes
            self.integer(layer.mma_scale, "the MMA multiplier", 0, 255)
            self.integer(layer.mma_shift, "the MMA shift", 0, _MAX_SHIFT)
            self.prelu_negative_shifts()
        else:
            raise self.fail(f"a {layer.type} layer has no MMA requantization")

    def prelu_negative_shifts(self) -> None:
        """§12.12: a style-4 PReLU's negative multipliers (-255..255) and their shifts, one pair per slope."""
        layer = self.layer
        if layer.prelu_slopes is None:
            raise self.fail("a style-4 PReLU without its negative multipliers")
        slopes = self.int_array(layer.prelu_slopes, "the PReLU slopes", (1,), -255, 255)
        self.integers(self.attr("negative_shifts"), "'negative_shifts'", slopes.size, 0, _MAX_SHIFT)

    def weights(self) -> None:
        layer = self.layer
        if layer.weight_bits not in (8, 16):
            raise self.fail(f"weights of {layer.weight_bits} bits; TIDL's are 8 or 16")
        w = layer.weights
        rank = _WEIGHT_RANK[layer.type]
        want = np.dtype(np.int8 if layer.weight_bits == 8 else np.int16)
        if not isinstance(w, np.ndarray) or w.dtype != want or w.ndim != rank or 0 in w.shape:
            what = f"{w.dtype}{list(w.shape)}" if isinstance(w, np.ndarray) else repr(w)
            raise self.fail(f"the weights are {what}, not a non-empty {want} array of rank {rank}")
        shape = self.outs[0].shape
        # an inner product's output features are its last axis; a batch norm's channels its axis
        axis = -1 if layer.type in ("InnerProduct", "LayerNorm") else \
            layer.attrs.get("axis", 1) if layer.type == "BatchNorm" else 1
        channels = shape[axis] if len(shape) > 1 and isinstance(axis, int) and -len(shape) <= axis < len(shape) \
            else None
        for field in ("bias_a", "bias_b"):
            bias = self.int_array(getattr(layer, field), field, (1,), *_INT64)
            if channels is not None and bias.size != channels:
                raise self.fail(f"{field} has {bias.size} values for {channels} output channels")

    # -- per layer type: the output shapes its kernel makes from the input shapes ---------------------

    def _rank4(self, shape, what: str = "input") -> Tuple[int, int, int, int]:
        if len(shape) != 4:
            raise self.fail(f"the {what} is {list(shape)}; a {self.layer.type} layer takes N x C x H x W")
        return tuple(shape)

    def _window(self, with_dilations: bool):
        strides = self.integers(self.attr("strides"), "'strides'", 2, 1, _MAX_DIM)
        pads = self.integers(self.attr("pads"), "'pads'", 4, 0, _MAX_DIM)
        dilations = self.integers(self.attr("dilations"), "'dilations'", 2, 1, _MAX_DIM) if with_dilations \
            else (1, 1)
        return strides, pads, dilations

    def shape_Conv(self, shapes):
        n, c, h, wd = self._rank4(shapes[0])
        o, cg, kh, kw = self.layer.weights.shape
        groups = self.integer(self.attr("groups"), "'groups'", 1, _MAX_DIM)
        if self.integers(self.attr("kernel"), "'kernel'", 2, 1, _MAX_DIM) != (kh, kw):
            raise self.fail(f"'kernel' {self.attr('kernel')} is not the weights' {kh}x{kw}")
        (sh, sw), (pt, pl, pb, pr), (dh, dw) = self._window(True)
        if c % groups or o % groups or cg != c // groups:
            raise self.fail(f"weights {list(self.layer.weights.shape)} do not make {groups} groups of {c} input "
                            f"channels")
        self.work(n * c * (h + pt + pb) * (wd + pl + pr), "the padded input")
        oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
        ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
        if oh < 1 or ow < 1:
            raise self.fail(f"a {kh}x{kw} kernel does not fit the padded {h}x{wd} input")
        self.work(n * c * kh * kw * oh * ow, "the convolution's taps")
        return [(n, o, oh, ow)]

    def shape_Deconv(self, shapes):
        n, c, h, wd = self._rank4(shapes[0])
        cw, og, kh, kw = self.layer.weights.shape
        groups = self.integer(self.attr("groups"), "'groups'", 1, _MAX_DIM)
        if self.integers(self.attr("kernel"), "'kernel'", 2, 1, _MAX_DIM) != (kh, kw):
            raise self.fail(f"'kernel' {self.attr('kernel')} is not the weights' {kh}x{kw}")
        (sh, sw), (pt, pl, pb, pr), (dh, dw) = self._window(True)
        if cw != c or c % groups:
            raise self.fail(f"weights {list(self.layer.weights.shape)} do not fit {c} input channels in {groups} "
                            f"groups")
        full_h, full_w = (h - 1) * sh + dh * (kh - 1) + 1, (wd - 1) * sw + dw * (kw - 1) + 1
        self.work(n * og * groups * full_h * full_w, "the deconvolution's full output")
        self.work(n * c * h * wd * og * kh * kw // groups, "the deconvolution's products")
        oh, ow = full_h - pt - pb, full_w - pl - pr
        if oh < 1 or ow < 1:
            raise self.fail("the pads remove the whole output")
        return [(n, og * groups, oh, ow)]

    def shape_Pool(self, shapes):
        n, c, h, wd = self._rank4(shapes[0])
        kind = self.choice("pool_type", ("Max", "Avg"))
        ceil_mode, global_pool = self.boolean("ceil_mode"), self.boolean("global_pool")
        if kind == "Avg":
            if not self.layer.asymmetric:   # style 4's global pool has its multiplier and shift instead
                self.integer(self.attr("q"), "'q'", 0, _MAX_POOL_Q)
            if global_pool:
                return [(n, c, 1, 1)]
        kh, kw = self.integers(self.attr("kernel"), "'kernel'", 2, 1, _MAX_DIM)
        (sh, sw), (pt, pl, pb, pr), _ = self._window(False)
        self.work(n * c * (h + pt + pb + sh) * (wd + pl + pr + sw), "the padded input")
        try:
            oh = arith._pool_geometry(h, kh, sh, pt, pb, ceil_mode)
            ow = arith._pool_geometry(wd, kw, sw, pl, pr, ceil_mode)
        except FixedPointError as exc:
            raise self.fail(str(exc)) from None
        self.work(n * c * oh * ow * kh * kw, "the pool's windows")
        return [(n, c, oh, ow)]

    def shape_EltWise(self, shapes):
        kind = self.choice("eltwise_type", ("Sum", "Max", "Prod"))
        if "constant_operand" in self.layer.attrs:   # one tensor input and the constant in weights
            place = self.integer(self.layer.attrs["constant_operand"], "the constant operand's place", 0, 1)
            w = self.layer.weights
            want = {8: (np.dtype(np.int8), np.dtype(np.uint8)),
                    16: (np.dtype(np.int16), np.dtype(np.uint16))}.get(self.layer.weight_bits, ())
            if len(self.layer.inputs) != 1 or not isinstance(w, np.ndarray) or w.dtype not in want or w.ndim > 6:
                raise self.fail("a constant operand needs one tensor input and 8/16-bit integer weights")
            if kind != "Prod" and len(self.layer.multipliers) != 2:
                raise self.fail(f"{len(self.layer.multipliers)} multipliers for a tensor and a constant")
            shapes = list(shapes)
            shapes.insert(place, w.shape)
        else:
            self._merged_inputs(kind != "Prod", at_least=2)
        try:
            return [np.broadcast_shapes(*shapes)]
        except ValueError:
            raise self.fail(f"the input shapes {[list(s) for s in shapes]} do not broadcast") from None

    def shape_Concat(self, shapes):
        self._merged_inputs(True, at_least=1)
        rank = len(shapes[0])
        if not rank:
            raise self.fail("a scalar input cannot be joined")
        axis = self.axis("axis", rank)
        rest = {tuple(s[:axis]) + tuple(s[axis + 1:]) for s in shapes}
        if any(len(s) != rank for s in shapes) or len(rest) != 1:
            raise self.fail(f"inputs {[list(s) for s in shapes]} do not join along axis {axis}")
        return [tuple(shapes[0][:axis]) + (sum(s[axis] for s in shapes),) + tuple(shapes[0][axis + 1:])]

    def _merged_inputs(self, with_multipliers: bool, at_least: int) -> None:
        n = len(self.layer.inputs)
        if n < at_least:
            raise self.fail(f"{n} inputs; a {self.layer.type} layer has at least {at_least}")
        if with_multipliers and len(self.layer.multipliers) != n:
            raise self.fail(f"{len(self.layer.multipliers)} multipliers for {n} inputs")

    def shape_InnerProduct(self, shapes):
        if "transpose_b" in self.layer.attrs:   # a product of two tensors
            if len(shapes) != 2 or len(shapes[0]) != 3 or len(shapes[1]) != 3:
                raise self.fail(f"a matrix product of {[list(s) for s in shapes]}: two 3-D inputs expected")
            (ba, ra, ca), (bb, rb, cb) = shapes
            m, k = (ca, ra) if self.layer.attrs.get("transpose_a") else (ra, ca)
            kb, n = (cb, rb) if self.layer.attrs.get("transpose_b") else (rb, cb)
            if k != kb or (ba != bb and 1 not in (ba, bb)):
                raise self.fail(f"inputs {[list(s) for s in shapes]} do not multiply")
            return [(max(ba, bb), m, n)]
        m, k = self.layer.weights.shape
        if len(shapes[0]) < 2 or shapes[0][-1] != k:
            raise self.fail(f"the input {list(shapes[0])} is not ... x {k} for weights {m} x {k}")
        return [tuple(shapes[0][:-1]) + (m,)]

    def shape_LayerNorm(self, shapes):
        if not shapes[0] or shapes[0][-1] != self.layer.weights.size:
            raise self.fail(f"{self.layer.weights.size} scales for the input {list(shapes[0])}")
        if not isinstance(self.layer.pre_scale, float) or not self.layer.pre_scale > 0:
            raise self.fail(f"the normalized values' scale is {self.layer.pre_scale!r}, not a float > 0")
        eps = self.attr("epsilon")
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0 or eps != eps:
            raise self.fail(f"'epsilon' is {eps!r}, not a number >= 0")
        return [shapes[0]]

    def shape_BatchNorm(self, shapes):
        axis = self.layer.attrs.get("axis", 1)
        if len(shapes[0]) < 2 or not isinstance(axis, int) or not 1 <= axis < len(shapes[0]) \
                or shapes[0][axis] != self.layer.weights.size:
            raise self.fail(f"{self.layer.weights.size} weights along axis {axis} for the input {list(shapes[0])}")
        return [shapes[0]]

    def _same(self, shapes):
        return [shapes[0]]

    shape_ReLU = shape_PReLU = shape_Sigmoid = shape_Tanh = _same

    def shape_SoftMax(self, shapes):
        if shapes[0]:
            self.axis("axis", len(shapes[0]))
        if "exp" in self.layer.attrs:          # §8.9: the 8-bit exponential rule of the device's core
            self.choice("exp", arith.SOFTMAX_EXP_RULES)
        return [shapes[0]]

    def shape_Resize(self, shapes):
        n, c, h, w = self._rank4(shapes[0])
        self.choice("mode", ("Nearest", "Bilinear"))
        rh, rw = self.integers(self.attr("ratios"), "'ratios'", 2, 1, _MAX_DIM)
        return [(n, c, h * rh, w * rw)]

    def _moved(self, shapes):
        if math.prod(shapes[0]) != math.prod(self.outs[0].shape):
            raise self.fail(f"{list(shapes[0])} cannot become {list(self.outs[0].shape)}")
        return [self.outs[0].shape]

    shape_Reshape = shape_Flatten = shape_Squeeze = _moved

    def shape_Transpose(self, shapes):
        perm = self.attr("perm")
        rank = len(shapes[0])
        if not isinstance(perm, tuple) or sorted(self.integer(p, "'perm'", 0, max(rank - 1, 0)) for p in perm) != \
                list(range(rank)):
            raise self.fail(f"'perm' {perm!r} is not a permutation of the input's {rank} axes")
        return [tuple(shapes[0][p] for p in perm)]

    def shape_Slice(self, shapes):
        slices = self.attr("slices")
        rank = len(shapes[0])
        if not isinstance(slices, tuple) or len(slices) != len(self.layer.outputs):
            raise self.fail(f"'slices' gives {len(slices) if isinstance(slices, tuple) else slices!r} ranges for "
                            f"{len(self.layer.outputs)} outputs")
        out = []
        for k, ranges in enumerate(slices):
            if not isinstance(ranges, tuple) or len(ranges) != rank:
                raise self.fail(f"'slices'[{k}] is not one (begin, end, stride) per axis of {list(shapes[0])}")
            shape = []
            for axis, (d, r) in enumerate(zip(shapes[0], ranges)):
                b, e, s = self.integers(r, f"'slices'[{k}][{axis}]", 3, *_INT64)
                if s == 0:
                    raise self.fail(f"'slices'[{k}][{axis}] has stride 0")
                shape.append(len(range(d)[b:e:s]))
            out.append(tuple(shape))
        return out

    def shape_Pad(self, shapes):
        pads = self.attr("pads")
        if not isinstance(pads, tuple) or len(pads) != len(shapes[0]):
            raise self.fail(f"'pads' {pads!r} is not one (before, after) per axis of {list(shapes[0])}")
        widths = [self.integers(p, f"'pads'[{i}]", 2, 0, _MAX_DIM) for i, p in enumerate(pads)]
        return [tuple(d + a + b for d, (a, b) in zip(shapes[0], widths))]

    def shape_DepthToSpace(self, shapes):
        n, c, h, w = self._rank4(shapes[0])
        b = self.integer(self.attr("block"), "'block'", 1, _MAX_DIM)
        self.choice("mode", ("DCR", "CRD"))
        if c % (b * b):
            raise self.fail(f"{c} channels do not divide by the block {b} squared")
        return [(n, c // (b * b), h * b, w * b)]


    def shape_TopK(self, shapes):
        """§8.15: (values, indices), K along the axis; the indices int32, the values the input's type."""
        rank = len(shapes[0])
        axis = self.axis("axis", rank)
        k = self.integer(self.attr("k"), "'k'", 1, shapes[0][axis] if rank else 1)
        self.boolean("largest")
        if len(self.outs) != 2 or self.outs[1].is_float or self.outs[1].fixed_type != arith.INDEX_TYPE \
                or self.ins[0].is_float or self.outs[0].dtype != self.ins[0].dtype:
            raise self.fail("a TopK layer makes values of its input's type and int32 indices")
        out = tuple(k if a == axis else d for a, d in enumerate(shapes[0]))
        return [out, out]

    def shape_ScatterElements(self, shapes):
        """§8.16: data (a tensor or the constant in ``weights``), int32 indices (a tensor or attrs
        ``indices``), updates; the multipliers of 'add' and of the data's scale."""
        layer = self.layer
        self.choice("reduction", arith.SCATTER_REDUCTIONS)
        shapes = list(shapes)
        types = [t.fixed_type if not t.is_float else None for t in self.ins]
        if layer.weights is not None:
            w = self.int_array(layer.weights, "the constant data", tuple(range(1, 7)), *_INT64)
            shapes.insert(0, tuple(w.shape))
            types.insert(0, types[-1])
        if "indices" in layer.attrs:
            idx = self.int_array(layer.attrs["indices"], "'indices'", tuple(range(1, 7)), *_INT32)
            shapes.insert(1, tuple(idx.shape))
            types.insert(1, arith.INDEX_TYPE)
        if len(shapes) != 3 or types[1] != arith.INDEX_TYPE or None in types:
            raise self.fail("a ScatterElements layer takes data, int32 indices and updates")
        data, index, updates = shapes
        m = index[0] if index else 0
        if not 1 <= m <= len(data) or tuple(updates) != tuple(index[1:]) + tuple(data[m:]):
            raise self.fail(f"indices {list(index)} and updates {list(updates)} do not address data {list(data)}")
        for key, lo, hi in (("scale", 0, 255), ("shift", 0, 40), ("data_scale", 0, 255), ("data_shift", 0, 40)):
            if key in layer.attrs:
                self.integer(layer.attrs[key], f"'{key}'", lo, hi)
        if self.outs[0].dtype != self.ins[-1].dtype:
            raise self.fail("a ScatterElements layer's output has its updates' type")
        self.work(math.prod(data), "the accumulator")
        return [tuple(data)]


def _check_tensor(tensor: QuantizedTensor, path: str, budget: int) -> None:
    where = f"{path}: tensor {tensor.id} '{tensor.name}'"
    if any(d < 1 or d > _MAX_DIM for d in tensor.shape):
        raise ArtifactError(f"{where}: the shape {list(tensor.shape)} has a dim outside [1, {_MAX_DIM}]")
    nbytes = math.prod(tensor.shape) * 4
    if nbytes > budget:
        raise ArtifactError(f"{where}: {list(tensor.shape)} would need {format_bytes(nbytes)} as float32, more than "
                            f"the tensor budget of {format_bytes(budget)} (raise it with {MAX_TENSOR_BYTES_ENV} if "
                            f"the record is real)")
    if not tensor.is_float and not (math.isfinite(tensor.scale) and tensor.scale > 0):
        raise ArtifactError(f"{where}: tensorScale {tensor.scale} is not a finite positive number")


def check_subgraph(sub: QuantizedSubgraph, path: str) -> None:
    """Raises ArtifactError unless every tensor and layer of ``sub`` is one the runtime runs as recorded."""
    budget = max_tensor_bytes()
    for tensor in sub.tensors:
        _check_tensor(tensor, path, budget)
    for layer in sub.layers:
        _Layer(sub, layer, path, budget).check()


__all__ = ["check_subgraph"]
