"""Every op lowers to Relax (its ``tvm.lower`` facet), and the TVM-built code computes what the
reference kernels compute.

One case (or a few) per op in CASES; all cases are one tidlx function (each case's first argument
a parameter, the rest constants, the outputs one tuple), lowered and compiled once (TVM compiles
cost seconds), run once in TVM's VM and compared output by output with the reference emulator.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")

from tidlx.backends.tvm import TvmLoweringError, build, to_relax  # noqa: E402
from tidlx.backends.tvm.facet import TVM_LOWER  # noqa: E402
from tidlx.emulator import run  # noqa: E402
from tidlx.ir import Function, IRModule, TensorType, Tuple, TupleGetItem, Var, call, const, get_op, list_ops  # noqa: E402
from tidlx.ir.expr import _dtype_name  # noqa: E402
from tidlx.ir.types import TupleType  # noqa: E402

RNG = np.random.default_rng(20261202)


def U(*shape, dtype="float32", low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape).astype(dtype)


def I(*shape, low=-5, high=5, dtype="int32"):
    return RNG.integers(low, high, shape).astype(dtype)


def B(*shape):
    return RNG.random(shape) < 0.5


def P(*shape):
    return RNG.uniform(0.2, 2.0, shape).astype("float32")


def _bn(c):
    return [U(c), U(c), U(c), P(c)]


def _tuple(*arrays):
    return ("tuple", arrays)


F4 = (1, 3, 6, 5)

# op name -> [(arguments: the first is the input (a tuple marker: a tuple of inputs), the rest constants, attrs)]
CASES = {
    "nn.conv2d": [([U(1, 3, 7, 6), U(4, 3, 3, 3)], {"padding": (1, 1, 1, 1)}),
                  ([U(1, 4, 9, 8), U(4, 2, 3, 3)], {"strides": (2, 1), "padding": (0, 1, 2, 0), "dilation": (2, 1),
                                                    "groups": 2}),
                  ([U(1, 7, 6, 3), U(3, 3, 3, 4)], {"data_layout": "NHWC", "kernel_layout": "HWIO"})],
    "nn.conv2d_transpose": [([U(1, 4, 5, 5), U(4, 3, 3, 3)], {"strides": (2, 2), "padding": (1, 1, 1, 1),
                                                              "output_padding": (1, 1)})],
    "nn.deformable_conv2d": [([U(1, 4, 6, 6), U(1, 18, 6, 6, low=-2, high=2), U(5, 4, 3, 3)],
                              {"padding": (1, 1, 1, 1)})],
    "nn.dense": [([U(2, 5), U(3, 5)], {})],
    "nn.matmul": [([U(2, 5), U(3, 5)], {"transpose_b": True}), ([U(5, 2), U(5, 3)], {"transpose_a": True})],
    "nn.batch_matmul": [([U(2, 3, 4), U(2, 5, 4)], {}), ([U(2, 4, 3), U(2, 4, 5)], {"transpose_a": True,
                                                                                    "transpose_b": False})],
    "nn.bias_add": [([U(*F4), U(3)], {}), ([U(2, 4, 5), U(5)], {"axis": -1})],
    "nn.batch_norm": [([U(*F4)] + _bn(3), {"epsilon": 1e-3}), ([U(2, 4, 5)] + _bn(5), {"axis": -1, "scale": False})],
    "nn.layer_norm": [([U(2, 4, 6), U(6), U(6)], {})],
    "nn.instance_norm": [([U(*F4), U(3), U(3)], {})],
    "nn.group_norm": [([U(1, 6, 4, 3), U(6), U(6)], {"num_groups": 3})],
    "nn.lrn": [([U(1, 6, 3, 3)], {"size": 3, "alpha": 1e-2})],
    "nn.l2_normalize": [([U(2, 5, 3)], {"eps": 1e-6, "axis": (1,)})],
    "nn.softmax": [([U(2, 5, 3)], {"axis": 1})],
    "nn.log_softmax": [([U(2, 5)], {})],
    "nn.pad": [([U(1, 2, 3, 4), np.float32(0.5)], {"pad_width": ((0, 0), (0, 1), (2, 1), (1, 0))}),
               ([U(2, 5), np.float32(0)], {"pad_width": ((1, 1), (2, 3)), "pad_mode": "reflect"}),
               ([U(2, 5), np.float32(0)], {"pad_width": ((1, 0), (2, 3)), "pad_mode": "edge"})],
    "nn.batch_flatten": [([U(2, 3, 4)], {})],
    "nn.dropout": [([U(2, 3)], {})],
    "nn.depth_to_space": [([U(1, 8, 2, 3)], {"block_size": 2}), ([U(1, 8, 2, 3)], {"block_size": 2, "mode": "CRD"})],
    "nn.space_to_depth": [([U(1, 2, 4, 6)], {"block_size": 2})],
    "nn.upsampling": [([U(*F4)], {"scale_h": 2.0, "scale_w": 2.0}),
                      ([U(*F4)], {"scale_h": 2.0, "scale_w": 1.5, "method": "bilinear", "align_corners": True})],
    "image.resize2d": [([U(*F4)], {"size": (9, 7)}),
                       ([U(*F4)], {"size": (4, 10), "method": "nearest_neighbor",
                                   "coordinate_transformation_mode": "asymmetric"}),
                       ([U(*F4)], {"size": (8, 8), "method": "cubic", "cubic_alpha": -0.75})],
    "nn.max_pool2d": [([U(1, 2, 7, 7)], {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}),
                      ([U(1, 2, 6, 6)], {"pool_size": (2, 2), "strides": (2, 2), "ceil_mode": True,
                                         "padding": (0, 0, 1, 1)})],
    "nn.avg_pool2d": [([U(1, 2, 7, 7)], {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}),
                      ([U(1, 2, 7, 7)], {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1),
                                         "count_include_pad": True})],
    "nn.global_avg_pool2d": [([U(*F4)], {})],
    "nn.global_max_pool2d": [([U(1, 6, 5, 3)], {"layout": "NHWC"})],
    "nn.adaptive_avg_pool2d": [([U(1, 2, 7, 5)], {"output_size": (3, 2)})],
    "nn.adaptive_max_pool2d": [([U(1, 2, 7, 5)], {"output_size": (2, 3)})],
    "nn.leaky_relu": [([U(3, 4)], {"alpha": 0.1})],
    "nn.prelu": [([U(*F4), U(3)], {})],
    "clip": [([U(3, 4)], {"a_min": -0.5, "a_max": 0.25}), ([I(3, 4)], {"a_min": -2.5, "a_max": 3.5})],
    "cast": [([U(3, 4, low=-9, high=9)], {"dtype": "int32"}), ([I(3, 4)], {"dtype": "float32"})],
    "where": [([B(3, 4), U(3, 4), U(1, 4)], {})],
    "divide": [([U(3, 4), P(3, 4)], {}), ([I(3, 4), I(3, 4, low=1, high=4) * np.array([1, -1, 1, -1], "int32")], {})],
    "floor_divide": [([U(3, 4), P(3, 4)], {}), ([I(3, 4), I(3, 4, low=1, high=4) * np.array([1, -1, 1, -1], "int32")], {})],
    "mod": [([U(3, 4, low=-5, high=5), P(3, 4)], {}), ([I(3, 4), I(3, 4, low=1, high=4) * np.array([1, -1, 1, -1], "int32")], {})],
    "floor_mod": [([U(3, 4, low=-5, high=5), P(3, 4)], {}), ([I(3, 4), I(3, 4, low=1, high=4) * np.array([1, -1, 1, -1], "int32")], {})],
    "power": [([P(3, 4), U(3, 4)], {})],
    "logical_not": [([B(3, 4)], {})],
    "reshape": [([U(2, 3, 4)], {"newshape": (0, -1)})],
    "squeeze": [([U(2, 1, 4)], {"axis": (1,)})],
    "expand_dims": [([U(2, 4)], {"axis": 1, "num_newaxis": 2})],
    "transpose": [([U(2, 3, 4)], {"axes": (2, 0, 1)}), ([U(2, 3)], {})],
    "reverse": [([U(2, 3, 4)], {"axis": 1})],
    "concatenate": [(_tuple(U(2, 3), U(2, 1)), {"axis": 1})],
    "stack": [(_tuple(U(2, 3), U(2, 3)), {"axis": 1})],
    "split": [([U(2, 7)], {"indices_or_sections": (2, 5), "axis": 1}), ([U(4, 3)], {"indices_or_sections": 2})],
    "strided_slice": [([U(4, 6, 5)], {"begin": (1, 0, 4), "end": (4, 6, 0), "strides": (2, 1, -2)}),
                      ([U(4, 6)], {"begin": (1,), "end": (5,), "axes": (1,)})],
    "take": [([U(4, 5), I(2, 3, low=-6, high=7)], {"axis": 1}),
             ([U(4, 5), I(3, low=-4, high=9)], {"axis": 0, "mode": "wrap"}),
             ([U(4, 5), I(3, low=-4, high=4)], {"axis": 0, "mode": "fast"}),
             ([U(3, 5), I(3, 2, low=0, high=5)], {"axis": 1, "batch_dims": 1}),
             ([U(4, 5), I(3, low=0, high=20)], {})],
    "gather": [([U(3, 4), I(3, 2, low=-4, high=4)], {"axis": 1})],
    "scatter_nd": [([U(4, 3), I(1, 2, low=0, high=4), U(2, 3)], {}),
                   ([U(4, 3), np.array([[0, 2, 0]], "int32"), U(3, 3)], {"mode": "add"})],
    "broadcast_to": [([U(1, 3)], {"shape": (2, 3)})],
    "full": [([np.float32(1.5)], {"shape": (2, 3), "dtype": "float32"})],
    "full_like": [([U(2, 3), np.float32(2.5)], {})],
    "tile": [([U(2, 3)], {"reps": (2, 1, 2)})],
    "shape_of": [([U(2, 3)], {})],
    "layout_transform": [([U(1, 8, 2, 3)], {"src_layout": "NCHW", "dst_layout": "NCHW4c"}),
                         ([U(1, 2, 3, 2, 4)], {"src_layout": "NCHW4c", "dst_layout": "NHWC"})],
    "sum": [([U(2, 3, 4)], {"axis": (1,), "keepdims": True}), ([U(2, 3, 4)], {"axis": (1,), "exclude": True})],
    "mean": [([U(2, 3, 4)], {"axis": (0, 2)}), ([I(2, 3, low=-9, high=9)], {"axis": (1,)})],
    "max": [([U(2, 3, 4)], {})],
    "min": [([U(2, 3, 4)], {"axis": (2,)})],
    "prod": [([U(2, 3, 4)], {"axis": (1,)})],
    "all": [([B(2, 3)], {"axis": (1,)})],
    "any": [([B(2, 3)], {"axis": (0,)})],
    "argmax": [([U(2, 3, 4)], {"axis": (1,)}), ([I(2, 3, 4, low=0, high=3)], {"axis": (1, 2), "select_last_index": True})],
    "argmin": [([U(2, 3, 4)], {"axis": (2,), "keepdims": True})],
    "topk": [([U(2, 7, 3)], {"k": 3, "axis": 1, "dtype": "int64"}),
             ([U(4, 6)], {"k": 2, "is_ascend": True, "ret_type": "indices"})],
    "variance": [([U(2, 3, 4), U(2, 1, 4)], {"axis": (1,), "keepdims": True}),
                 ([U(2, 3, 4), U(2, 3)], {"axis": (2,), "unbiased": True})],
}

_UNARY_POSITIVE = ("log", "sqrt", "rsqrt")
for _name in ("sigmoid", "tanh", "exp", "erf", "negative", "abs", "copy", "zeros_like", "ones_like", "floor",
              "ceil", "sign", "trunc", "sin", "cos", "nn.relu"):
    CASES.setdefault(_name, [([U(3, 5, low=-3, high=3)], {})])
for _name in _UNARY_POSITIVE:
    CASES.setdefault(_name, [([P(3, 5)], {})])
CASES["round"] = [([np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.3, -0.7]], "float32")], {})]
for _name in ("add", "subtract", "multiply", "maximum", "minimum", "equal", "not_equal", "less", "less_equal",
              "greater", "greater_equal"):
    CASES.setdefault(_name, [([U(3, 4), U(1, 4)], {}), ([I(3, 4), I(3, 1)], {})])
for _name in ("logical_and", "logical_or", "logical_xor"):
    CASES.setdefault(_name, [([B(3, 4), B(1, 4)], {})])
CASES["zeros"] = [([], {"shape": (2, 3), "dtype": "float32"})]
CASES["ones"] = [([], {"shape": (2, 3), "dtype": "int8"})]


def _q(value, dtype="float32"):
    return np.asarray(value, dtype)


Q8 = lambda *shape: RNG.integers(-128, 128, shape).astype("int8")  # noqa: E731
CASES.update({
    "qnn.quantize": [([U(3, 4, low=-3, high=3), _q(0.02), _q(3, "int32")], {"out_dtype": "int8"})],
    "qnn.dequantize": [([Q8(3, 4), _q(0.05), _q(-2, "int32")], {})],
    "qnn.requantize": [([RNG.integers(-5000, 5000, (3, 4)).astype("int32"), _q(0.003), _q(0, "int32"), _q(0.05),
                         _q(4, "int32")], {}),
                       ([RNG.integers(-5000, 5000, (1, 3, 2)).astype("int32"), _q([0.003, 0.01, 0.2]), _q(0, "int32"),
                         _q(0.05), _q(-3, "int32")], {"axis": 1, "rounding": "TONEAREST"})],
    "qnn.conv2d": [([Q8(1, 3, 5, 5), Q8(4, 3, 3, 3), _q(2, "int32"), _q(0, "int32"), _q(0.1), _q(0.05)],
                    {"padding": (1, 1, 1, 1)})],
    "qnn.dense": [([Q8(2, 6), Q8(3, 6), _q(-1, "int32"), _q([0, 1, 2], "int32"), _q(0.1), _q([0.05, 0.1, 0.2])], {})],
    "qnn.add": [([Q8(3, 4), Q8(3, 4), _q(0.1), _q(2, "int32"), _q(0.05), _q(0, "int32"), _q(0.12), _q(-1, "int32")], {})],
    "qnn.subtract": [([Q8(3, 4), Q8(1, 4), _q(0.1), _q(2, "int32"), _q(0.1), _q(2, "int32"), _q(0.1), _q(2, "int32")],
                      {})],
    "qnn.mul": [([Q8(3, 4), Q8(3, 4), _q(0.1), _q(2, "int32"), _q(0.05), _q(0, "int32"), _q(0.3), _q(1, "int32")], {})],
    "qnn.concatenate": [(("qnn_concat", (Q8(2, 3), Q8(2, 2))), {"axis": 1})],
})

U8 = lambda *shape: RNG.integers(0, 256, shape).astype("uint8")  # noqa: E731


def _lstm(seq, batch, size, hidden, dirs):
    return [U(seq, batch, size), U(dirs, 4 * hidden, size), U(dirs, 4 * hidden, hidden), U(dirs, 8 * hidden),
            U(dirs, batch, hidden), U(dirs, batch, hidden)]


def _dynamic_quantize_lstm(seq, batch, size, hidden, dirs, per_column, dtype="int8"):
    scale_shape = (dirs, 4 * hidden) if per_column else (dirs,)
    weights = Q8 if dtype == "int8" else U8
    zero_point = np.zeros(scale_shape, dtype) if dtype == "int8" else np.full(scale_shape, 121, dtype)
    return [U(seq, batch, size), weights(dirs, size, 4 * hidden), weights(dirs, hidden, 4 * hidden),
            U(dirs, 8 * hidden), U(dirs, batch, hidden), U(dirs, batch, hidden),
            U(*scale_shape, low=0.005, high=0.02), zero_point, U(*scale_shape, low=0.005, high=0.02), zero_point]


CASES.update({
    "nn.dynamic_quantize_lstm": [(_dynamic_quantize_lstm(4, 1, 3, 5, 1, False), {}),
                                 (_dynamic_quantize_lstm(3, 2, 4, 3, 2, True, "uint8"),
                                  {"direction": "bidirectional", "clip": 0.7})],
    "nn.lstm": [(_lstm(4, 2, 3, 5, 1), {}), (_lstm(3, 1, 2, 4, 1), {"direction": "reverse", "clip": 0.5}),
                (_lstm(3, 2, 3, 4, 2), {"direction": "bidirectional"})],
    "nn.conv2d_integer": [([U8(1, 3, 6, 5), Q8(4, 3, 3, 3), _q(7, "uint8"), _q([1, -2, 0, 3], "int8")],
                           {"padding": (1, 1, 1, 1)}),
                          ([U8(1, 4, 5, 5), U8(4, 2, 3, 3), _q(128, "uint8"), _q(3, "uint8")],
                           {"strides": (2, 2), "groups": 2})],
    "nn.matmul_integer": [([U8(2, 3, 5), Q8(5, 4), _q(9, "uint8"), _q([0, 1, -1, 2], "int8")], {}),
                          ([Q8(3, 5), U8(5), _q([1, 2, 3], "int8"), _q(4, "uint8")], {})],
    "dynamic_quantize_linear": [([U(3, 4, low=-2, high=3)], {}), ([U(2, 3, low=0.5, high=2)], {})],
})


def _arg_type(value):
    arr = np.asarray(value)
    return TensorType(arr.shape, _dtype_name(arr.dtype))


def _case_expr(op_name, args, attrs, tag):
    """(the call, [(param Var, input array)]) of one case."""
    if isinstance(args, tuple) and args[0] == "tuple":
        params = [(Var(f"{tag}_{i}", _arg_type(a)), a) for i, a in enumerate(args[1])]
        return call(op_name, Tuple([p for p, _ in params]), **attrs), params
    if isinstance(args, tuple) and args[0] == "qnn_concat":
        params = [(Var(f"{tag}_{i}", _arg_type(a)), a) for i, a in enumerate(args[1])]
        scales = Tuple([const(np.float32(0.1)), const(np.float32(0.07))])
        zps = Tuple([const(np.int32(0)), const(np.int32(3))])
        return call(op_name, Tuple([p for p, _ in params]), scales, zps, const(np.float32(0.1)), const(np.int32(0)),
                    **attrs), params
    if not args:
        return call(op_name, **attrs), []
    x = Var(tag, _arg_type(args[0]))
    return call(op_name, x, *[const(np.asarray(a)) for a in args[1:]], **attrs), [(x, np.asarray(args[0]))]


def _all_cases_module():
    outputs, params, labels = [], [], []
    for op_name in sorted(CASES):
        for i, (args, attrs) in enumerate(CASES[op_name]):
            expr, ps = _case_expr(op_name, args, attrs, f"c{len(labels)}")
            params += ps
            ty = expr.checked_type
            if isinstance(ty, TupleType):
                for k in range(len(ty.fields)):
                    outputs.append(TupleGetItem(expr, k))
                    labels.append(f"{op_name} case {i} output {k} {attrs}")
            else:
                outputs.append(expr)
                labels.append(f"{op_name} case {i} {attrs}")
    fn = Function([p for p, _ in params], Tuple(outputs))
    return IRModule({"main": fn}), {p.name_hint: a for p, a in params}, labels


@pytest.fixture(scope="module")
def all_cases():
    mod, inputs, labels = _all_cases_module()
    built = build(mod, "x86")
    return mod, inputs, labels, built


def test_every_op_in_the_registry_has_a_lowering_and_a_case():
    missing = [name for name in list_ops() if not get_op(name).has_attr(TVM_LOWER)]
    assert missing == [], f"ops without a tvm.lower facet: {missing}"
    assert sorted(set(list_ops()) - set(CASES)) == [], "ops without a case in CASES"


#: max |tvm - reference| / max |reference| per case (float libm differences); integers and bools exact
FLOAT_TOLERANCE = 1e-5


def test_every_case_matches_the_reference_kernels(all_cases):
    mod, inputs, labels, built = all_cases
    ref = run(mod, inputs, kernels="reference")
    got = built.run(inputs)
    assert len(got) == len(ref) == len(labels)
    bad = []
    for label, g, r in zip(labels, got, ref):
        if g.shape != r.shape or g.dtype != r.dtype:
            bad.append(f"{label}: {g.dtype} {g.shape} vs reference {r.dtype} {r.shape}")
        elif r.dtype.kind == "f":
            scale = max(float(np.max(np.abs(r[np.isfinite(r)]), initial=0)), 1e-30)
            same = (g == r) | (np.isnan(g) & np.isnan(r))  # equal infinities are no error
            with np.errstate(invalid="ignore"):  # inf - inf where they are equal
                err = float(np.max(np.where(same, 0.0, np.abs(g.astype(np.float64) - r)), initial=0)) / scale
            if not err <= FLOAT_TOLERANCE:
                bad.append(f"{label}: relative error {err:.2e}")
        elif not np.array_equal(g, r):
            bad.append(f"{label}: {np.count_nonzero(g != r)} of {r.size} elements differ")
    assert bad == [], "\n".join(bad)


def test_an_op_without_the_facet_is_a_clear_error():
    op = get_op("nn.relu")
    lowering = op.get_attr(TVM_LOWER)
    op.reset_attr(TVM_LOWER)
    try:
        x = Var("x", TensorType((2,), "float32"))
        with pytest.raises(TvmLoweringError, match=r"nn.relu has no TVM lowering.*te_compute"):
            to_relax(IRModule({"main": Function([x], call("nn.relu", x))}))
    finally:
        op.set_attr(TVM_LOWER, lowering)


def test_non_constant_qnn_scales_are_refused_by_name():
    x = Var("x", TensorType((2, 3), "float32"))
    s = Var("s", TensorType((), "float32"))
    mod = IRModule({"main": Function([x, s], call("qnn.quantize", x, s, const(np.int32(0))))})
    with pytest.raises(TvmLoweringError, match=r"qnn.quantize.*argument 1 .*must be a constant"):
        to_relax(mod)


def test_relax_text_is_deterministic():
    mod, _, _ = _all_cases_module()
    assert to_relax(mod).script() == to_relax(mod).script()
