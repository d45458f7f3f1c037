"""Small networks described once, built three ways: an ONNX model, TI's quantization-parameters file
(text TIDLNetQuantParams with given ranges) and the integers docs/numerics.md gives every layer.

    net = Net(bits=8, version="11.00")
    net.input("x", (1, 3, 8, 8), (-4, 4))
    net.conv("c1", "x", w, b, (0, 8), act="relu")
    net.onnx()          # the ModelProto (node names = layer names, each layer's output tensor named after it)
    net.proto()         # the file's text
    net.expected(x)     # {layer name: integers (or float32 for softmax)}, {layer name: (bits, signed, scale)}

The expected side uses oracle.py only (an implementation written from docs/numerics.md, importing nothing
of tidlx): the import-side rules (§4-§6 from the file's ranges) and the kernels (§7-§8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import oracle as o

F32 = np.float32


@dataclass
class Layer:
    kind: str
    name: str
    inputs: Tuple[str, ...]
    out_range: Tuple[float, float]
    params: Dict[str, Any] = field(default_factory=dict)
    proto_type: str = ""


def _fmt(v) -> str:
    return repr(float(F32(v)))


class Net:
    def __init__(self, bits=8, version="11.00", per_channel=False):
        """``per_channel``: calibration option PerChannelWeight (accuracy_level 9 with
        channel_wise_quantization): the whole network P2Dynamic (§2), depthwise weights per channel (§4.5)."""
        self.bits = bits
        self.version = version
        self.per_channel = per_channel
        self.params_16bit: set = set()     # layers named in params_16bit_names_list (§3: 16-bit weights)
        self.layers: List[Layer] = []
        self.x_shape = None
        self.events: set = set()     # the rules' branches the expected integers went through

    # ---- description --------------------------------------------------------------------------

    def _add(self, kind, name, inputs, out_range, proto_type, **params):
        self.layers.append(Layer(kind, name, tuple(inputs), tuple(map(float, out_range)), params, proto_type))
        return name

    def input(self, name, shape, rng):
        self.x_shape = tuple(shape)
        return self._add("input", name, (), rng, "TIDL_DataLayer")

    def conv(self, name, src, w, b, rng, act="none", w_range=None, b_range=None, strides=(1, 1), pads=(0, 0, 0, 0),
             groups=1, slopes=None, clip=None, deconv=False, b_file=None):
        """act: none, relu, relu6, clip (clip=(lo, hi)), leaky (slopes=(alpha,)): the layer's activation (a
        PReLU after a convolution is a layer of its own: ``prelu``)."""
        w = np.asarray(w, np.float32)
        kind = "deconv" if deconv else "conv"
        return self._add(kind, name, (src,), rng, "TIDL_Deconv2DLayer" if deconv else "TIDL_ConvolutionLayer",
                         w=w, b=None if b is None else np.asarray(b, np.float32), act=act,
                         b_file=None if b_file is None else np.asarray(b_file, np.float64),
                         w_range=w_range or (float(w.min()), float(w.max())),
                         b_range=None if b is None else (b_range or (float(np.min(b)), float(np.max(b)))),
                         strides=strides, pads=pads, groups=groups, slopes=slopes, clip=clip)

    def gemm(self, name, src, w, b, rng, w_range=None, b_range=None, matmul=False, act="none"):
        w = np.asarray(w, np.float32)     # M x K
        return self._add("gemm", name, (src,), rng, "TIDL_InnerProductLayer", w=w, act=act,
                         b=None if b is None else np.asarray(b, np.float32), matmul=matmul,
                         w_range=w_range or (float(w.min()), float(w.max())),
                         b_range=None if b is None else (b_range or (float(np.min(b)), float(np.max(b)))))

    def batch_norm(self, name, src, gamma, beta, mean, var, rng, w_range=None, b_range=None):
        """Exact folding: gamma / sqrt(var) and beta - mean * that are exact in binary (epsilon 0)."""
        gamma, beta, mean, var = (np.asarray(a, np.float32) for a in (gamma, beta, mean, var))
        w = gamma / np.sqrt(var)
        b = beta - mean * w
        return self._add("bn", name, (src,), rng, "TIDL_BatchNormLayer", gamma=gamma, beta=beta, mean=mean, var=var,
                         w=w, b=b, w_range=w_range or (float(w.min()), float(w.max())),
                         b_range=b_range or (float(b.min()), float(b.max())))

    def prelu(self, name, src, slopes, rng, leaky=False):
        return self._add("prelu", name, (src,), rng, "TIDL_PReLULayer", slopes=list(slopes), leaky=leaky)

    def eltwise(self, name, op, srcs, rng, act="none", clip=None):
        """act: none, relu, relu6, clip (clip=(lo, hi)): TI's element-wise layer with its activation."""
        return self._add("eltwise", name, srcs, rng, "TIDL_EltWiseLayer", op=op, act=act, clip=clip)

    def concat(self, name, srcs, rng):
        return self._add("concat", name, srcs, rng, "TIDL_ConcatLayer")

    def pool(self, name, src, op, rng, kernel=(2, 2), strides=(2, 2), pads=(0, 0, 0, 0)):
        return self._add("pool", name, (src,), rng, "TIDL_PoolingLayer", op=op, kernel=kernel, strides=strides,
                         pads=pads)

    def relu(self, name, src, rng, clip=None):
        return self._add("relu", name, (src,), rng, "TIDL_ReLULayer", clip=clip)

    def resize(self, name, src, mode, rng):
        return self._add("resize", name, (src,), rng, "TIDL_ResizeLayer", mode=mode)

    def table(self, name, src, kind, rng, alpha=0.2, beta=0.5):
        ptype = {"Sigmoid": "TIDL_SigmoidLayer", "Tanh": "TIDL_TanhLayer", "HardSigmoid": "TIDL_BatchNormLayer",
                 "Elu": "TIDL_BatchNormLayer"}[kind]
        return self._add("table", name, (src,), rng, ptype, op=kind, alpha=alpha, beta=beta)

    def softmax(self, name, src, rng=(0, 1)):
        return self._add("softmax", name, (src,), rng, "TIDL_SoftMaxLayer")

    def depth_to_space(self, name, src, block, mode, rng):
        return self._add("d2s", name, (src,), rng, "TIDL_DepthToSpaceLayer", block=block, mode=mode)

    def flatten(self, name, src, rng):
        return self._add("flatten", name, (src,), rng, "TIDL_FlattenLayer")

    # ---- the ONNX model -----------------------------------------------------------------------

    def onnx(self):
        nodes, inits = [], []

        def const(n, a):
            inits.append(numpy_helper.from_array(np.asarray(a, np.float32), n))
            return n

        for L in self.layers:
            p, n = L.params, L.name
            ins = list(L.inputs)
            if L.kind in ("conv", "deconv"):
                args = ins + [const(n + "_W", p["w"])] + ([const(n + "_B", p["b"])] if p["b"] is not None else [])
                out = n if p["act"] == "none" else n + "_pre"
                nodes.append(helper.make_node("ConvTranspose" if L.kind == "deconv" else "Conv", args, [out], name=n,
                                              strides=list(p["strides"]), pads=list(p["pads"]), group=p["groups"]))
                act = p["act"]
                if act == "relu":
                    nodes.append(helper.make_node("Relu", [out], [n], name=n + "_act"))
                elif act in ("relu6", "clip"):
                    lo, hi = (0.0, 6.0) if act == "relu6" else p["clip"]
                    nodes.append(helper.make_node("Clip", [out, const(n + "_lo", lo), const(n + "_hi", hi)], [n],
                                                  name=n + "_act"))
                elif act == "leaky":
                    nodes.append(helper.make_node("LeakyRelu", [out], [n], name=n + "_act",
                                                  alpha=float(p["slopes"][0])))
            elif L.kind == "gemm":
                if p["matmul"]:
                    out = n if p["b"] is None else n + "_mm"
                    nodes.append(helper.make_node("MatMul", ins + [const(n + "_W", p["w"].T)], [out], name=n))
                    if p["b"] is not None:
                        nodes.append(helper.make_node("Add", [out, const(n + "_B", p["b"])], [n], name=n + "_bias"))
                else:
                    args = ins + [const(n + "_W", p["w"])] + ([const(n + "_B", p["b"])] if p["b"] is not None else [])
                    out = n if p["act"] == "none" else n + "_pre"
                    nodes.append(helper.make_node("Gemm", args, [out], name=n, transB=1))
                    if p["act"] == "relu":
                        nodes.append(helper.make_node("Relu", [out], [n], name=n + "_act"))
            elif L.kind == "bn":
                nodes.append(helper.make_node("BatchNormalization", ins + [const(n + k, p[v]) for k, v in (
                    ("_g", "gamma"), ("_b", "beta"), ("_m", "mean"), ("_v", "var"))], [n], name=n, epsilon=0.0))
            elif L.kind == "prelu":
                if p["leaky"]:
                    nodes.append(helper.make_node("LeakyRelu", ins, [n], name=n, alpha=float(p["slopes"][0])))
                else:
                    slope = const(n + "_slope", np.reshape(p["slopes"], (-1, 1, 1)))
                    nodes.append(helper.make_node("PRelu", ins + [slope], [n], name=n))
            elif L.kind == "eltwise":
                out = n if p["act"] == "none" else n + "_pre"
                nodes.append(helper.make_node(p["op"], ins, [out], name=n))
                if p["act"] == "relu":
                    nodes.append(helper.make_node("Relu", [out], [n], name=n + "_act"))
                elif p["act"] in ("relu6", "clip"):
                    lo, hi = (0.0, 6.0) if p["act"] == "relu6" else p["clip"]
                    nodes.append(helper.make_node("Clip", [out, const(n + "_lo", lo), const(n + "_hi", hi)], [n],
                                                  name=n + "_act"))
            elif L.kind == "concat":
                nodes.append(helper.make_node("Concat", ins, [n], name=n, axis=1))
            elif L.kind == "pool":
                if p["op"] == "GlobalAveragePool":
                    nodes.append(helper.make_node("GlobalAveragePool", ins, [n], name=n))
                else:
                    nodes.append(helper.make_node(p["op"], ins, [n], name=n, kernel_shape=list(p["kernel"]),
                                                  strides=list(p["strides"]), pads=list(p["pads"])))
            elif L.kind == "relu":
                if p["clip"] is None:
                    nodes.append(helper.make_node("Relu", ins, [n], name=n))
                else:
                    nodes.append(helper.make_node("Clip", ins + [const(n + "_lo", p["clip"][0]),
                                                                 const(n + "_hi", p["clip"][1])], [n], name=n))
            elif L.kind == "resize":
                nodes.append(helper.make_node("Resize", ins + ["", const(n + "_scales", [1, 1, 2, 2])], [n], name=n,
                                              mode="nearest" if p["mode"] == "nearest" else "linear",
                                              coordinate_transformation_mode="half_pixel" if p["mode"] != "nearest"
                                              else "asymmetric", nearest_mode="floor"))
            elif L.kind == "table":
                attrs = ({"alpha": p["alpha"], "beta": p["beta"]} if p["op"] == "HardSigmoid"
                         else {"alpha": p["alpha"]} if p["op"] == "Elu" else {})
                nodes.append(helper.make_node(p["op"], ins, [n], name=n, **attrs))
            elif L.kind == "softmax":
                nodes.append(helper.make_node("Softmax", ins, [n], name=n, axis=-1))
            elif L.kind == "d2s":
                nodes.append(helper.make_node("DepthToSpace", ins, [n], name=n, blocksize=p["block"], mode=p["mode"]))
            elif L.kind == "flatten":
                nodes.append(helper.make_node("Flatten", ins, [n], name=n, axis=1))
        consumed = {i for L in self.layers for i in L.inputs}
        outs = [L.name for L in self.layers if L.kind != "input" and L.name not in consumed]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(self.layers[0].name, TensorProto.FLOAT,
                                                                             list(self.x_shape))],
                                  [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs], inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])

    def output_names(self):
        consumed = {i for L in self.layers for i in L.inputs}
        return [L.name for L in self.layers if L.kind != "input" and L.name not in consumed]

    # ---- the file ------------------------------------------------------------------------------

    def proto(self) -> str:
        lines = [f"num_layers: {len(self.layers)}", "quant_type: SYMMETRIC", "calib_type: PERTENSOR"]
        for L in self.layers:
            lo, hi = L.out_range
            lines += ["layers {", f'  layer_name: "{L.name}"', f'  layer_type: "{L.proto_type}"',
                      f"  bit_depth: {self.bits // 8}", f"  outputs {{ min: {_fmt(lo)} max: {_fmt(hi)} }}"]
            p = L.params
            if "w_range" in p:
                lines.append(f"  weights {{ min: {_fmt(p['w_range'][0])} max: {_fmt(p['w_range'][1])} }}")
            if p.get("b") is not None:
                values = " ".join(f"value: {float(v)!r}" for v in self._bias_values(L))
                lines.append(f"  bias {{ min: {_fmt(p['b_range'][0])} max: {_fmt(p['b_range'][1])} "
                             f"size: {len(p['b'])} {values} }}")
            lines.append("}")
        return "\n".join(lines) + "\n"

    # ---- the expected integers -------------------------------------------------------------------

    @staticmethod
    def _bias_values(L):
        """The float bias the file gives (docs/quant-proto.md: `value` wins over the model's bias)."""
        return L.params["b"] if L.params.get("b_file") is None else L.params["b_file"]

    def _consumers(self, name):
        return [L for L in self.layers if name in L.inputs]

    def _weight_scales(self, L):
        """(§4.1 weight scale, §5.1 bias scale) from the file's ranges; (None, 0) for a layer without."""
        p = L.params
        if "w_range" not in p:
            return None, 0.0
        wbits = self._weight_bits(L)
        ws = o.weight_scale(max(abs(p["w_range"][0]), abs(p["w_range"][1])), wbits, self.per_channel)
        bs = 0.0 if p.get("b") is None else o.bias_scale(max(abs(p["b_range"][0]), abs(p["b_range"][1])), wbits,
                                                        self.per_channel)
        return ws, bs

    def _weight_bits(self, L):
        """§3: a layer's processing (weight) width."""
        return 16 if L.name in self.params_16bit else self.bits

    def _is_per_channel(self, L):
        """§4.5: a depthwise convolution (one input and one output channel per group) with PerChannelWeight."""
        p = L.params
        return (self.per_channel and L.kind == "conv" and p["groups"] > 1 and p["w"].shape[0] == p["groups"]
                and p["w"].shape[1] == 1)

    def _guard(self, L, rb, acc, signed, forced=False):
        """§6.6 on layer L's output: raise roundBits for the biases of its consumers."""
        if rb <= 0:
            return rb
        ratios = []
        for c in self._consumers(L.name):
            ws, bs = self._weight_scales(c)
            ratios.append(o.consumer_weight_to_bias_scale(ws, bs, self._is_per_channel(c)) if ws is not None
                          else 1 / 256)
        ratio = 0.0001 if forced else o.max_weight_to_bias_scale(ratios)
        widths = [self._weight_bits(c) for c in self._consumers(L.name)] or [self.bits]
        raised = o.bias_saturation_guard(rb, o.tensor_scale(acc, rb), ratio, min(widths), signed)
        if raised > rb:
            self.events.add(f"guard:{L.name}")
        return raised

    def _round_bits(self, L, acc, rlo, rhi, bits, signed):
        """§6.3, noting when the range lands on a power of 2 (the signed `m - 1` branch)."""
        m = max(abs(F32(rlo) * F32(acc)), abs(F32(rhi) * F32(acc)))
        if signed and m > 0 and float(m) == 2.0 ** o.ceil_log2_double(float(m)):
            self.events.add(f"power_of_2_range:{L.name}")
        return o.round_bits(acc, rlo, rhi, bits, signed)

    def _quant_range(self, L):
        """§6.2 on the file's range, as TI's import treats a range it reads: a ReLU6's or two-sided Clip's
        bounds replace it; an inner product's or global average pool's max x 1.25."""
        p = L.params
        if p.get("act") == "relu6":
            return 0.0, 6.0
        clip = p.get("clip")
        if clip is not None and p.get("act", "clip") == "clip" and all(math.isfinite(v) for v in clip):
            return float(clip[0]), float(clip[1])
        widen = L.kind == "gemm" or (L.kind == "pool" and p.get("op") == "GlobalAveragePool")
        return o.output_range(L.out_range[0], L.out_range[1], widen)

    def _forced_clip(self, L):
        act = L.params.get("act")
        if act == "relu6":
            return 6.0, False
        if act == "clip":
            lo, hi = L.params["clip"]
            if hi > 0 and (lo == 0 or lo == -hi):
                return float(hi), lo < 0
        return None

    def _signed(self, L, rlo, info):
        """§3: the output's signedness by the layer's structure. Weighted layers signed unless ReLU, ReLU6 or
        a Clip with min >= 0 follows; element-wise / concat signed when an input is; pooling and data
        movement their input's; a ReLU layer unsigned, a Clip layer by its min; PReLU signed; a float input
        by its range (the TVM flow, which these files' models take)."""
        p = L.params
        act = p.get("act", "none")
        clip = p.get("clip")
        unsigned_act = act in ("relu", "relu6") or (act == "clip" and clip is not None and clip[0] >= 0)
        if L.kind == "input":
            return rlo < 0
        if L.kind in ("conv", "deconv", "gemm", "bn"):
            return not unsigned_act
        if L.kind in ("eltwise", "concat"):
            return any(info[s][1] for s in L.inputs) and not unsigned_act
        if L.kind in ("pool", "resize", "d2s", "flatten"):
            return info[L.inputs[0]][1]
        if L.kind == "relu":
            return clip is not None and clip[0] < 0
        if L.kind == "prelu":
            return True
        return rlo < 0

    def expected(self, x):
        """Every layer's output integers (softmax: float32) and its (bits, signed, tensorScale), and the
        subgraph outputs back in float (§8.12)."""
        bits = self.bits
        vals: Dict[str, np.ndarray] = {}
        info: Dict[str, Tuple[int, bool, float]] = {}
        for L in self.layers:
            p, (rlo, rhi) = L.params, self._quant_range(L)
            signed = self._signed(L, rlo, info)
            lo, hi = o.bounds(bits, signed)
            if L.kind == "input":
                absmax = max(abs(rlo), abs(rhi))
                if bits == 8 or self.version == "08.06":
                    acc = 2.0 ** 7
                else:
                    s = float(F32((32767.0 if signed else 65535.0) / absmax))
                    acc = 2.0 ** max(0, int(math.floor(math.log(s) / math.log(2.0) + 0.5)))
                rb = self._guard(L, self._round_bits(L, acc, rlo, rhi, bits, signed), acc, signed)
                ts = o.tensor_scale(acc, rb)
                vals[L.name] = o.data_convert_to_fixed(x, ts, bits, signed).astype(o.dtype(bits, signed))
                info[L.name] = (bits, signed, ts)
                continue
            src = L.inputs[0]
            q_in = vals[src]
            in_bits, in_signed, in_scale = info[src]
            if self._is_per_channel(L):
                out, ts = self._per_channel_depthwise(L, q_in, in_bits, in_signed, in_scale, signed, lo, hi)
            elif L.kind in ("conv", "deconv", "gemm", "bn"):
                wbits = self._weight_bits(L)
                ws, bs = self._weight_scales(L)
                if L.kind in ("conv", "deconv") and bs:
                    babs = max(abs(p["b_range"][0]), abs(p["b_range"][1]))
                    ws, clipped = o.clip_weight_scale_for_bias(ws, in_scale, babs, wbits, in_signed, self.per_channel)
                    if clipped:
                        self.events.add(f"bias_clip:{L.name}")
                forced = self._forced_clip(L)
                if forced is not None:
                    ts, ws, rb = o.clip_output_scale(forced[0], bits, ws, in_scale, forced[1])
                    self.events.add(f"forced:{L.name}")
                    signed = forced[1]
                    lo, hi = o.bounds(bits, signed)
                    acc = float(F32(ts) * F32(2.0 ** rb))
                else:
                    acc = float(F32(F32(in_scale) * F32(ws)))
                    rb = self._guard(L, self._round_bits(L, acc, rlo, rhi, bits, signed), acc, signed)
                    ts = o.tensor_scale(acc, rb)
                    if p.get("act") == "relu":
                        lo = max(lo, 0)
                    # §8.10: any other clip saturates to the type only
                wq = o.quantize_weights(p["w"], ws, wbits)
                n_out = p["w"].shape[1] * p["groups"] if L.kind == "deconv" else p["w"].shape[0]
                if p.get("b") is None:
                    ba, bb = [0] * n_out, [1] * n_out
                else:
                    bq = o.quantize_bias(self._bias_values(L), bs, wbits)
                    isf = o.in_scale_factor(ws, in_scale, bs)
                    ba, bb = o.split_bias(bq, [isf] * n_out, wbits, in_bits, in_signed)
                common = (ba, bb, rb, wbits, bits, signed, lo, hi)
                if L.kind == "conv" and p["act"] == "leaky":
                    slopes = np.asarray(p["slopes"], np.float64).reshape(-1)
                    sscale = o.prelu_slope_scale(slopes, bits, False)
                    factors, shift = o.prelu_slope_factors(o.quantize_prelu_slopes(slopes, sscale, bits), sscale, bits)
                    if len(factors) == 1:
                        factors = factors * n_out
                    out = self._conv_prelu(q_in, wq, ba, bb, factors, shift, rb, bits, lo, hi, p)
                elif L.kind == "conv":
                    out = o.convolution(q_in, wq, *common, p["strides"], p["pads"], (1, 1), p["groups"])
                elif L.kind == "deconv":
                    out = o.deconvolution(q_in, wq, *common, p["strides"], p["pads"], (1, 1), p["groups"])
                elif L.kind == "gemm":
                    out = o.inner_product(q_in.reshape(q_in.shape[0], -1), wq, *common)
                else:
                    out = o.batch_norm(q_in, wq, *common)
            elif L.kind == "prelu" and p["leaky"] and self.version != "08.06":
                # §8.10.1, TIDL 10.x/11.x: the leaky ReLU's table over the input's own values, accScale
                # 2^(bits-1) x inScale, a signed output
                acc = float(F32(F32(2 ** (bits - 1)) * F32(in_scale)))
                signed = True
                rb = self._guard(L, self._round_bits(L, acc, rlo, rhi, bits, signed), acc, signed)
                ts = o.tensor_scale(acc, rb)
                table = o.leaky_relu_table(in_scale, bits, in_signed, ts, p["slopes"][0])
                out = o.lookup(q_in, table, o.bounds(bits, in_signed)[0])
                self.events.add(f"leaky_table:{L.name}")
            elif L.kind == "prelu":
                # §8.10.1: TI's batch norm of weight 1.0 (quantized at 2^(bits-1)), bias 0, the slopes on the
                # accumulator
                ws = o.weight_scale(1.0, bits, False)
                acc = float(F32(F32(in_scale) * F32(ws)))
                rb = self._guard(L, self._round_bits(L, acc, rlo, rhi, bits, signed), acc, signed)
                ts = o.tensor_scale(acc, rb)
                slopes = np.asarray(p["slopes"], np.float64)
                sscale = o.prelu_slope_scale(slopes, bits, False)
                factors, shift = o.prelu_slope_factors(o.quantize_prelu_slopes(slopes, sscale, bits), sscale, bits)
                n_ch = q_in.shape[1]
                wq = o.quantize_weights(np.ones(n_ch), ws, bits)
                out = o.batch_norm(q_in, wq, [0] * n_ch, [1] * n_ch, rb, bits, bits, signed, lo, hi,
                                   slopes=(factors, shift))
            elif L.kind in ("eltwise", "concat"):
                scales = [info[s][2] for s in L.inputs]
                ranges = {s.name: s.out_range for s in self.layers}
                if L.kind == "eltwise" and L.params["op"] == "Mul":
                    acc = float(F32(np.prod([F32(s) for s in scales])))
                else:
                    kept = [s for s, n in zip(scales, L.inputs) if self.version == "08.06" or ranges[n] != (0.0, 0.0)]
                    if len(kept) < len(scales) and min(kept) != min(scales):
                        self.events.add(f"zero_range_left_out:{L.name}")
                    q = (6 if bits == 8 else 14) if L.kind == "eltwise" else (7 if bits == 8 else 15)
                    acc = float(F32(min(kept or scales)) * F32(2 ** q))
                forced = self._forced_clip(L)
                clip_scale = None
                if forced is not None:      # §4.7's scale for the output, §6.5's lowering
                    signed = forced[1]
                    lo, hi = o.bounds(bits, signed)
                    clip_scale = float(F32(2 ** (bits - 1 if forced[1] else bits)) / F32(forced[0]))
                elif p.get("act") == "relu":
                    lo = max(lo, 0)
                rb = self._guard(L, self._round_bits(L, acc, rlo, rhi, bits, signed), acc, signed, forced is not None)
                if L.kind == "eltwise" and L.params["op"] == "Mul":
                    ts = o.tensor_scale(acc, rb)
                else:
                    rb0 = rb
                    rb, ts = o.merging_round_bits(rb, acc, clip_scale, False)
                    if rb < rb0:
                        self.events.add(f"lowered:{L.name}" if rb else f"lowered_to_0:{L.name}")
                ins = [vals[s] for s in L.inputs]
                if L.kind == "concat":
                    out = o.concat(ins, o.eltwise_multipliers(ts, rb, scales), rb, lo, hi, 1)
                elif L.params["op"] == "Mul":
                    out = o.eltwise("prod", ins, (), rb, lo, hi, [info[s][0] for s in L.inputs])
                else:
                    out = o.eltwise("sum" if L.params["op"] == "Add" else "max", ins,
                                    o.eltwise_multipliers(ts, rb, scales), rb, lo, hi, None)
            elif L.kind == "pool":
                if p["op"] == "MaxPool":
                    signed, ts = in_signed, in_scale
                    out = o.max_pool(q_in, p["kernel"], p["strides"], p["pads"], False)
                else:
                    glob = p["op"] == "GlobalAveragePool"
                    q = 8 if (not glob and bits == 8 and p["kernel"] in ((2, 2), (3, 3))
                              and p["strides"] == (2, 2)) else 12
                    acc = float(F32(F32(2 ** q) * F32(in_scale)))
                    rb = self._round_bits(L, acc, rlo, rhi, bits, signed)
                    ts = o.tensor_scale(acc, rb)
                    if glob:
                        out = o.global_average_pool(q_in, q, rb, bits, lo, hi)
                    else:
                        out = o.average_pool(q_in, p["kernel"], p["strides"], p["pads"], q, rb, bits, lo, hi, False)
            elif L.kind == "relu":
                ts = in_scale
                act = "relu" if p["clip"] is None else "clip"
                c = p["clip"] or (None, None)
                lo, hi = o.activation_bounds(bits, signed, act, ts, c[0], c[1])
                out = np.clip(q_in.astype(np.int64), lo, hi)
            elif L.kind in ("resize", "d2s", "flatten"):
                signed, ts = in_signed, in_scale
                if L.kind == "resize":
                    out = (o.resize_nearest if p["mode"] == "nearest" else o.resize_bilinear)(q_in, 2, 2)
                elif L.kind == "d2s":
                    out = o.depth_to_space(q_in, p["block"], p["mode"])
                else:
                    out = q_in.reshape(q_in.shape[0], -1)
            elif L.kind == "table" and (bits == 16 or self.version == "08.06"):
                # §8.10.2, tidlx's own tables: the input requantized to a signed pre-activation whose range is
                # the inverse function of the output's, then the table at the function's full-range scale
                kind = p["op"]
                assert kind in ("Sigmoid", "Tanh"), kind
                signed = kind == "Tanh"
                lo, hi = o.bounds(bits, signed)
                ts = 2.0 ** (bits - 1 if signed else bits)
                plo, phi = o.table_pre_range(kind, rlo, rhi, bits)
                rb = o.round_bits(in_scale, plo, phi, bits, True)
                pre_scale = in_scale / 2 ** rb
                pre_lo, pre_hi = o.bounds(bits, True)
                pre = np.array([o.round_sat(int(v), rb, pre_lo, pre_hi) for v in q_in.ravel()]).reshape(q_in.shape)
                table = o.activation_table(kind, pre_scale, bits, ts, signed)
                out = o.lookup(pre, table, pre_lo)
                self.events.add(f"own_table:{L.name}")
            elif L.kind == "table":
                kind = {"Elu": "ELU"}.get(p["op"], p["op"])
                signed = kind != "Sigmoid"
                acc = float(F32(F32(2 ** (bits - 1)) * F32(in_scale)))
                rb = self._guard(L, self._round_bits(L, acc, rlo, rhi, bits, signed), acc, signed)
                ts = o.tensor_scale(acc, rb)
                table = o.ti_activation_table(kind, in_scale, in_signed, ts, signed, p["alpha"], p["beta"])
                out = o.lookup(q_in, table, o.bounds(8, in_signed)[0])
            elif L.kind == "softmax":
                out = o.softmax_last_axis(q_in, in_scale, narrow_row_pads=self.version == "08.06")
                vals[L.name] = out
                info[L.name] = (0, True, 1.0)
                continue
            else:
                raise AssertionError(L.kind)
            if L.kind in ("conv", "eltwise") and p.get("act") == "clip" and self._forced_clip(L) is None:
                c_lo, c_hi = p["clip"]   # values the clip's own bounds would have clamped
                q = np.asarray(out)
                if (q < math.floor(c_lo * ts + 0.5)).any() or (q > math.floor(c_hi * ts + 0.5)).any():
                    self.events.add(f"clip_beyond_its_bounds:{L.name}")
            vals[L.name] = np.asarray(out).astype(o.dtype(bits, signed))
            info[L.name] = (bits, signed, ts)
        floats = {n: vals[n] if info[n][0] == 0 else o.data_convert_to_float(vals[n], info[n][2])
                  for n in self.output_names()}
        return vals, info, floats

    def _per_channel_depthwise(self, L, q_in, in_bits, in_signed, in_scale, signed, lo, hi):
        """§4.5 and §8.1.1: each channel's P2 scale from its own weights (the file has one range per tensor),
        clipped by the whole bias's limit; the output scale from the whole layer's weight scale."""
        p, bits = L.params, self.bits
        (rlo, rhi) = self._quant_range(L)
        w = p["w"]
        scales = [o.weight_scale(float(np.max(np.abs(w[c]))), bits, True) for c in range(w.shape[0])]
        bs = 0.0
        if p.get("b") is not None:
            babs = max(abs(p["b_range"][0]), abs(p["b_range"][1]))
            bs = o.bias_scale(babs, bits, True)
            scales = [o.clip_weight_scale_for_bias(s, in_scale, babs, bits, in_signed, True)[0] for s in scales]
        forced = self._forced_clip(L)
        if forced is not None:      # §4.7 on each channel's scale; the output saturates to its type
            scales = [o.clip_output_scale(forced[0], bits, sc, in_scale, forced[1])[1] for sc in scales]
            signed = forced[1]
            lo, hi = o.bounds(bits, signed)
            self.events.add(f"forced:{L.name}")
        # accuracy_level 9 keeps weight_clipping 1: WeightRange on
        acc = float(F32(F32(in_scale) * F32(o.per_channel_layer_weight_scale(w, bits, True))))
        rb = self._guard(L, self._round_bits(L, acc, rlo, rhi, bits, signed), acc, signed, forced is not None)
        ts = o.tensor_scale(acc, rb)
        rbs = o.depthwise_per_channel_round_bits(scales, in_scale, ts)
        if len(set(rbs)) > 1:
            self.events.add(f"per_channel_round_bits:{L.name}")
        wq = o.quantize_weights(w, np.reshape(scales, (-1, 1, 1, 1)), bits)
        n_out = w.shape[0]
        if p.get("b") is None:
            ba, bb = [0] * n_out, [1] * n_out
        else:
            bq = o.quantize_bias(self._bias_values(L), bs, bits)
            ba, bb = o.split_bias(bq, [o.in_scale_factor(s, in_scale, bs) for s in scales], bits, in_bits, in_signed)
        if p.get("act") == "relu":
            lo = max(lo, 0)
        clip_scale = None if forced is None else \
            float(np.float32(2 ** (bits - 1 if forced[1] else bits)) / np.float32(forced[0]))
        if forced is not None and ts != clip_scale:
            self.events.add(f"per_channel_scale_not_the_clip's:{L.name}")
        out = o.convolution(q_in, wq, ba, bb, rbs, bits, bits, signed, lo, hi, p["strides"], p["pads"], (1, 1),
                            p["groups"])
        return out, ts

    @staticmethod
    def _conv_prelu(q_in, wq, ba, bb, factors, shift, rb, bits, lo, hi, p):
        """§8.10.1 after §8.1: the convolution's accumulator (round_bits 0, no saturation: kept exact) with
        the slopes on its negative values, then the one roundSat."""
        big = 2 ** 62
        acc = o.convolution(q_in, wq, ba, bb, 0, bits, 32, True, -big, big, p["strides"], p["pads"], (1, 1),
                            p["groups"])
        out = np.zeros(acc.shape, np.int64)
        for idx in np.ndindex(*acc.shape):
            a = o.prelu_accumulator(int(acc[idx]), int(factors[idx[1]]), shift)
            out[idx] = o.round_sat(a, rb, lo, hi)
        return out
