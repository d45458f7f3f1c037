"""Before/after pairs written as Relay text, compared with structural_equal (like TVM's pass
tests). Tensor constants are bound to @main parameters by name (``params=``); the expected
constants are computed here with numpy from the same arrays."""

import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import tidlx
import tidlx.emulator as emulator
import tidlx.ir as ir
from tidlx.ir.errors import TidlxWarning
from tidlx.ir.passes import (DeadCodeElimination, FoldBatchNormIntoConv, FoldBatchNormIntoDense, FoldConstant,
                             SimplifyInference, inference_pipeline)
from tidlx.ir.transform import PassContext

RNG = np.random.default_rng(3)
HEADER = '#[version = "0.0.5"]\n'


def parse(text, **params):
    return tidlx.parse_relay(HEADER + text, params=params or None)


def check(pass_, before, after, before_params=None, after_params=None, compare_layers=True):
    mod = parse(before, **(before_params or {}))
    out = pass_(mod)
    expected = parse(after, **(after_params or {}))
    ir.assert_structural_equal(out, expected, compare_layers=compare_layers)
    return mod, out


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def bn_params(channels):
    return {"gamma": RNG.uniform(0.5, 1.5, channels).astype("float32"), "beta": rand(channels),
            "mean": rand(channels), "var": RNG.uniform(0.2, 2.0, channels).astype("float32")}


def scale_shift(p, eps=1e-5):
    s = p["gamma"].astype(np.float64) / np.sqrt(p["var"].astype(np.float64) + eps)
    return s, p["beta"] - p["mean"] * s


BN_PARAMS_DECL = ("%gamma: Tensor[({c}), float32], %beta: Tensor[({c}), float32], "
                  "%mean: Tensor[({c}), float32], %var: Tensor[({c}), float32]")


# -- FoldConstant ----------------------------------------------------------------------------

def test_fold_constant_scalars():
    check(FoldConstant, """
def @main(%x: Tensor[(4), float32]) {
  %0 = add(2f, 3f);
  %1 = multiply(%0, 2f);
  add(%x, %1)
}""", """
def @main(%x: Tensor[(4), float32]) {
  add(%x, 10f)
}""")


def test_fold_constant_tuple_projection_and_no_fold_of_variables():
    check(FoldConstant, """
def @main(%x: Tensor[(4), float32], %y: Tensor[(4), float32]) {
  %0 = (%x, %y);
  %1 = exp(%x);
  add(%0.1, %1)
}""", """
def @main(%x: Tensor[(4), float32], %y: Tensor[(4), float32]) {
  %0 = exp(%x);
  add(%y, %0)
}""")


def test_fold_constant_leaves_tidl_functions_alone():
    text = """
def @tidl_0(%p: Tensor[(4), float32], Compiler="tidl", global_symbol="tidl_0") -> Tensor[(4), float32] {
  %0 = add(1f, 2f);
  multiply(%p, %0)
}
def @main(%x: Tensor[(4), float32]) {
  %0 = add(1f, 1f);
  %1 = multiply(%x, %0);
  @tidl_0(%1)
}"""
    expected = """
def @tidl_0(%p: Tensor[(4), float32], Compiler="tidl", global_symbol="tidl_0") -> Tensor[(4), float32] {
  %0 = add(1f, 2f);
  multiply(%p, %0)
}
def @main(%x: Tensor[(4), float32]) {
  %0 = multiply(%x, 2f);
  @tidl_0(%0)
}"""
    check(FoldConstant, text, expected)


def test_fold_constant_on_bound_weights():
    w = rand(3, 4)
    check(FoldConstant, """
def @main(%x: Tensor[(2, 4), float32], %w: Tensor[(3, 4), float32]) {
  %0 = multiply(%w, 2f);
  nn.dense(%x, %0, units=3)
}""", """
def @main(%x: Tensor[(2, 4), float32], %w2: Tensor[(3, 4), float32]) {
  nn.dense(%x, %w2, units=3)
}""", {"w": w}, {"w2": w * np.float32(2)})


# -- DeadCodeElimination ---------------------------------------------------------------------

def test_dead_code_elimination_lets_and_globals():
    check(DeadCodeElimination, """
def @unused(%p: Tensor[(4), float32]) {
  nn.relu(%p)
}
def @helper(%p: Tensor[(4), float32]) {
  exp(%p)
}
def @main(%x: Tensor[(4), float32]) {
  let %dead = sigmoid(%x);
  let %once = tanh(%x);
  let %twice = @helper(%once);
  add(%twice, %twice)
}""", """
def @helper(%p: Tensor[(4), float32]) {
  exp(%p)
}
def @main(%x: Tensor[(4), float32]) {
  %0 = tanh(%x);
  let %twice = @helper(%0);
  add(%twice, %twice)
}""")


# -- SimplifyInference -----------------------------------------------------------------------

def test_simplify_inference_batch_norm_and_dropout():
    p = bn_params(3)
    s, t = scale_shift(p)
    mod, out = check(SimplifyInference, f"""
def @main(%x: Tensor[(1, 3, 4, 4), float32], {BN_PARAMS_DECL.format(c=3)}) {{
  %0 = nn.dropout(%x, rate=0.1f);
  %1 = nn.batch_norm(%0.0, %gamma, %beta, %mean, %var) /* span=/bn1/BatchNormalization:0:0 */;
  nn.relu(%1.0) /* span=/relu/Relu:0:0 */
}}""", """
def @main(%x: Tensor[(1, 3, 4, 4), float32], %s: Tensor[(3, 1, 1), float32], %t: Tensor[(3, 1, 1), float32]) {
  %0 = multiply(%x, %s) /* span=/bn1/BatchNormalization:0:0 */;
  %1 = add(%0, %t) /* span=/bn1/BatchNormalization:0:0 */;
  nn.relu(%1) /* span=/relu/Relu:0:0 */
}""", p, {"s": s.astype("float32").reshape(3, 1, 1), "t": t.astype("float32").reshape(3, 1, 1)})
    data = {"x": rand(1, 3, 4, 4)}
    np.testing.assert_allclose(emulator.run(out, data)[0], emulator.run(mod, data)[0], rtol=1e-5, atol=1e-5)


# -- FoldBatchNormIntoConv -------------------------------------------------------------------

def test_fold_batch_norm_into_conv():
    w, b, p = rand(4, 3, 3, 3), rand(4), bn_params(4)
    s, t = scale_shift(p)
    mod, out = check(FoldBatchNormIntoConv, f"""
def @main(%x: Tensor[(1, 3, 6, 6), float32], %w: Tensor[(4, 3, 3, 3), float32], %b: Tensor[(4), float32],
          {BN_PARAMS_DECL.format(c=4)}) {{
  %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]) /* span=/conv1/Conv:0:0 */;
  %1 = nn.bias_add(%0, %b) /* span=/conv1/Conv:0:0 */;
  %2 = nn.batch_norm(%1, %gamma, %beta, %mean, %var) /* span=/bn1/BatchNormalization:0:0 */;
  nn.relu(%2.0) /* span=/relu/Relu:0:0 */
}}""", """
def @main(%x: Tensor[(1, 3, 6, 6), float32], %w: Tensor[(4, 3, 3, 3), float32], %b: Tensor[(4), float32]) {
  %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]) /* span=/conv1/Conv:0:0 */;
  %1 = nn.bias_add(%0, %b) /* span=/conv1/Conv:0:0 */;
  nn.relu(%1) /* span=/relu/Relu:0:0 */
}""", {"w": w, "b": b, **p},
        {"w": (w * s.reshape(4, 1, 1, 1)).astype("float32"), "b": (b * s + t).astype("float32")})
    data = {"x": rand(1, 3, 6, 6)}
    np.testing.assert_allclose(emulator.run(out, data)[0], emulator.run(mod, data)[0], rtol=1e-4, atol=1e-4)


# -- FoldBatchNormIntoDense (the BN + GEMM merge) --------------------------------------------

GEMM_BN_GEMM = f"""
def @main(%x: Tensor[(1, 8), float32], %w1: Tensor[(6, 8), float32], %w2: Tensor[(2, 6), float32],
          %b2: Tensor[(2), float32], {BN_PARAMS_DECL.format(c=6)}) {{
  %0 = nn.dense(%x, %w1, units=6) /* span=Gemm_1:0:0 */;
  %1 = nn.relu(%0) /* span=Relu_2:0:0 */;
  %2 = nn.batch_norm(%1, %gamma, %beta, %mean, %var) /* span=BatchNormalization_3:0:0 */;
  %3 = nn.dense(%2.0, %w2, units=2) /* span=Gemm_4:0:0 */;
  nn.bias_add(%3, %b2) /* span=Gemm_4:0:0 */
}}"""


def gemm_bn_gemm_params():
    return {"w1": rand(6, 8), "w2": rand(2, 6), "b2": rand(2), **bn_params(6)}


def test_fold_batch_norm_into_following_dense():
    params = gemm_bn_gemm_params()
    s, t = scale_shift(params)
    w2, b2 = params["w2"], params["b2"]
    mod, out = check(FoldBatchNormIntoDense, GEMM_BN_GEMM, """
def @main(%x: Tensor[(1, 8), float32], %w1: Tensor[(6, 8), float32], %w2: Tensor[(2, 6), float32],
          %b2: Tensor[(2), float32]) {
  %0 = nn.dense(%x, %w1, units=6) /* span=Gemm_1:0:0 */;
  %1 = nn.relu(%0) /* span=Relu_2:0:0 */;
  %2 = nn.dense(%1, %w2, units=2) /* span=Gemm_4:0:0 */;
  nn.bias_add(%2, %b2) /* span=Gemm_4:0:0 */
}""", params, {"w1": params["w1"], "w2": (w2 * s[None, :]).astype("float32"),
               "b2": (b2 + w2.astype(np.float64) @ t).astype("float32")})
    data = {"x": rand(1, 8)}
    np.testing.assert_allclose(emulator.run(out, data)[0], emulator.run(mod, data)[0], rtol=1e-4, atol=1e-4)


def test_bn_gemm_merge_disabled_by_name_leaves_the_text_as_it_was():
    params = gemm_bn_gemm_params()
    with PassContext(disabled_passes=["FoldBatchNormIntoDense"]):
        check(FoldBatchNormIntoDense, GEMM_BN_GEMM, GEMM_BN_GEMM, params, params)


def test_disabling_with_a_typo_names_the_pass():
    with pytest.raises(tidlx.TidlxError, match="did you mean FoldBatchNormIntoDense"):
        PassContext(disabled_passes=["FoldBatchnormIntoDense"])


# -- real printed models (tests/data/relay-samples) ------------------------------------------

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "relay-samples"


def _read_sample(name):
    return (SAMPLES / name).read_text(encoding="utf-8")


def _parse_quietly(text, params=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TidlxWarning)  # constants missing from the text
        return tidlx.parse_relay(text, params=params)


def _resnet50_constants(mod):
    """Arrays for the 259 ``meta[relay.Constant][i]`` of the ResNet-50 sample (the text has no
    metadata and no constant types): shapes follow from each constant's op and position."""
    from tidlx.ir.traversal import post_order

    types = {p: p.type_annotation for p in mod.main.params if p.type_annotation is not None}
    found = {}
    for node in post_order(mod.main.body):
        if isinstance(node, ir.TupleGetItem):
            types[node] = types[node.tuple_value].fields[node.index]
        elif isinstance(node, ir.Call):
            data = types[node.args[0]]
            for pos, arg in enumerate(node.args[1:], start=1):
                if isinstance(arg, ir.Var) and arg not in types:
                    if node.op_name == "nn.batch_norm":
                        shape = (data.shape[node.attrs.axis],)
                    elif node.op_name == "nn.conv2d":
                        shape = (node.attrs.channels, data.shape[1] // node.attrs.groups) + tuple(
                            node.attrs.kernel_size)
                    elif node.op_name == "nn.dense":
                        shape = (node.attrs.units, data.shape[-1])
                    else:
                        shape = (data.shape[-1],)
                    types[arg] = ir.TensorType(shape, "float32")
                    found[int(arg.name_hint.rsplit("_", 1)[1])] = (node.op_name, pos, shape)
            types[node] = node.op.type_rel([types[a] for a in node.args], node.attrs)
    arrays = []
    for index in range(len(found)):
        op, pos, shape = found[index]
        if op == "nn.batch_norm":
            # gamma and moving_var positive, beta and moving_mean small
            arr = RNG.uniform(0.5, 1.5, shape) if pos in (1, 4) else RNG.normal(0, 0.1, shape)
        elif op in ("nn.conv2d", "nn.dense"):
            arr = RNG.normal(0, np.sqrt(2.0 / np.prod(shape[1:])), shape)
        else:
            arr = RNG.normal(0, 0.1, shape)
        arrays.append(arr.astype("float32"))
    return arrays


def test_inference_pipeline_on_the_resnet50_sample():
    text = _read_sample("01_resnet50_meta_constants.txt")
    mod = _parse_quietly(text, _resnet50_constants(_parse_quietly(text)))
    before = Counter(c.op_name for c in ir.traversal.calls(mod.main.body))
    out = inference_pipeline()(mod)
    ir.verify(out)
    after = Counter(c.op_name for c in ir.traversal.calls(out.main.body))
    assert before["nn.batch_norm"] == 51 and after["nn.batch_norm"] == 0
    # BNs right after a conv merge into it; the pre-activation BNs (before relu/conv, on the
    # input) become multiply/add.
    convs_followed_by_bn = sum(1 for c in ir.traversal.calls(mod.main.body, "nn.batch_norm")
                               if isinstance(c.args[0], ir.Call) and c.args[0].op_name == "nn.conv2d")
    assert after["nn.bias_add"] == convs_followed_by_bn > 0
    assert after["multiply"] == 51 - convs_followed_by_bn
    assert after["nn.conv2d"] == before["nn.conv2d"]
    image = {"data": RNG.standard_normal((1, 3, 224, 224)).astype("float32")}
    want, got = emulator.run(mod, image)[0], emulator.run(out, image)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("sample", ["09_resnet18_opt_nometa.txt", "10_resnet18_tidl_partitioned_nometa.txt"])
def test_inference_pipeline_leaves_optimized_samples_alone(sample):
    mod = _parse_quietly(_read_sample(sample))
    out = inference_pipeline()(mod)
    ir.assert_structural_equal(out, mod, compare_layers=True)
    for name, fn in mod.items():
        if "Compiler" in fn.attrs:
            assert out[name] is fn
