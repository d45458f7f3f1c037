"""TI's graph preparation before TIDL partitioning: RemoveIdentityOps, ConvertMaxMinToClip,
SplitAsymmetricStrideConv and MergePadIntoConv. Before/after pairs are Relay text compared with
structural_equal (layer names included, written as ``span=NAME:0:0``); every rewrite is also run
through the emulator on random inputs, before and after."""

from pathlib import Path

import numpy as np
import pytest

import tidlx
import tidlx.emulator as emulator
import tidlx.ir as ir
from tidlx.ir.passes import (PASSES, ConvertMaxMinToClip, MergePadIntoConv, RemoveIdentityOps,
                             SplitAsymmetricStrideConv)
from tidlx.ir.transform import PassContext, Sequential

RNG = np.random.default_rng(7)
HEADER = '#[version = "0.0.5"]\n'
F32_MAX = float(np.finfo(np.float32).max)
SAMPLE_06 = (Path(__file__).resolve().parents[1] / "data" / "relay-samples"
             / "06_tidl_fork_docstring_fragments.txt")
PREP_PASSES = (RemoveIdentityOps, ConvertMaxMinToClip, SplitAsymmetricStrideConv, MergePadIntoConv)


def parse(text, **params):
    return tidlx.parse_relay(HEADER + text, params=params or None)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def random_inputs(mod):
    inputs = {}
    for p in mod.main.params:
        t = p.checked_type
        if t.dtype.startswith("float"):
            inputs[p.name_hint] = rand(*t.shape, dtype=t.dtype)
        else:
            inputs[p.name_hint] = RNG.integers(-100, 100, t.shape).astype(t.dtype)
    return inputs


def same_outputs(before, after, inputs=None, exact=False):
    inputs = inputs if inputs is not None else random_inputs(before)
    for got, want in zip(emulator.run(after, inputs), emulator.run(before, inputs)):
        assert got.dtype == want.dtype and got.shape == want.shape
        if exact:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def check(pass_, before, after, params=None, exact=False):
    """Runs ``pass_`` on ``before``; the result must equal ``after`` (layers included) and
    compute the same values."""
    mod = parse(before, **(params or {}))
    out = pass_(mod)
    ir.assert_structural_equal(out, parse(after, **(params or {})), compare_layers=True)
    ir.verify(out)
    same_outputs(mod, out, exact=exact)
    return mod, out


def unchanged(pass_, text, params=None):
    mod = parse(text, **(params or {}))
    ir.assert_structural_equal(pass_(mod), mod, compare_layers=True)


def ops_of(mod):
    return [c.op_name for c in ir.traversal.calls(mod.main.body)]


X = "%x: Tensor[(1, 3, 4, 5), float32]"
ONES_C11 = {"k": np.ones((3, 1, 1), "float32")}


# -- RemoveIdentityOps -------------------------------------------------------------------------

IDENTITIES = [
    "multiply(%x, 1f)",
    "multiply(1f, %x)",
    "multiply(%x, %k)",  # a (3, 1, 1) tensor of ones
    "divide(%x, 1f)",
    "add(%x, 0f)",
    "add(-0f, %x)",
    "subtract(%x, 0f)",
    "nn.pad(%x, 5f, pad_width=[[0, 0], [0, 0], [0, 0], [0, 0]])",
    'nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0], [0, 0], [0, 0]], pad_mode="edge")',
    "copy(%x)",
    "nn.dropout(%x, rate=0.3).0",
    "reshape(%x, newshape=[1, 3, 4, 5])",
    "reshape(%x, newshape=[0, 0, -1, 5])",
    'cast(%x, dtype="float32")',
    "transpose(%x, axes=[0, 1, 2, 3])",
    "transpose(%x, axes=[-4, 1, -2, 3])",
    "strided_slice(%x, begin=[0, 0, 0, 0], end=[1, 3, 4, 5], strides=[1, 1, 1, 1])",
    "strided_slice(%x, begin=[0], end=[100], axes=[2])",
    'strided_slice(%x, begin=[0, 0], end=[-1, -1], slice_mode="size", axes=[2, 3])',
    "strided_slice(%x, begin=[0, 0], end=[1, 3], strides=[7, 1])",  # stride 7 on a size-1 axis
    "image.resize2d(%x, size=[4, 5])",
    'image.resize2d(%x, size=[4, 5], method="nearest_neighbor", coordinate_transformation_mode="asymmetric")',
    'image.resize2d(%x, size=[4, 5], method="linear", coordinate_transformation_mode="align_corners")',
    'image.resize2d(%x, size=[4, 5], method="cubic", coordinate_transformation_mode="pytorch_half_pixel")',
    'image.resize2d(%x, size=[4, 5], method="cubic", cubic_alpha=-0.75f, cubic_exclude=1)',
    'image.resize2d(%x, size=[4, 5], method="nearest_neighbor", '
    'coordinate_transformation_mode="tf_half_pixel_for_nn")',
    'image.resize2d(%x, size=[4, 5], coordinate_transformation_mode="tf_crop_and_resize", '
    'roi=[0f, 0f, 1f, 1f])',
    "nn.upsampling(%x, scale_h=1f, scale_w=1f)",
    'nn.upsampling(%x, scale_h=1f, scale_w=1f, method="bilinear", align_corners=True)',
]


@pytest.mark.parametrize("op_text", IDENTITIES)
def test_identity_op_is_removed_and_its_user_keeps_its_layer(op_text):
    check(RemoveIdentityOps, f"""
def @main({X}, %k: Tensor[(3, 1, 1), float32]) {{
  %0 = {op_text} /* span=identity:0:0 */;
  nn.relu(%0) /* span=relu:0:0 */
}}""", f"""
def @main({X}, %k: Tensor[(3, 1, 1), float32]) {{
  nn.relu(%x) /* span=relu:0:0 */
}}""", params=ONES_C11, exact=True)


NOT_IDENTITIES = [
    "multiply(%x, 2f)",
    "multiply(%x, %k)",  # a (3, 1, 1) tensor holding a 2
    "add(%x, 1f)",
    "subtract(0f, %x)",
    "divide(1f, %x)",
    "nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0], [0, 1], [0, 0]])",
    "reshape(%x, newshape=[1, 3, 20])",
    'cast(%x, dtype="float16")',
    "transpose(%x, axes=[0, 1, 3, 2])",
    "transpose(%x)",  # no axes: reversed
    "strided_slice(%x, begin=[0], end=[4], strides=[2], axes=[2])",
    "strided_slice(%x, begin=[1], end=[4], axes=[2])",
    "strided_slice(%x, begin=[-1], end=[-5], strides=[-1], axes=[2])",  # reversed: same shape
    "image.resize2d(%x, size=[8, 10])",
    'image.resize2d(%x, size=[4, 5], coordinate_transformation_mode="tf_half_pixel_for_nn")',
    'image.resize2d(%x, size=[4, 5], method="nearest_neighbor", rounding_method="ceil", '
    'coordinate_transformation_mode="tf_half_pixel_for_nn")',
    'image.resize2d(%x, size=[4, 5], coordinate_transformation_mode="tf_crop_and_resize", '
    'roi=[0f, 0f, 0.5f, 1f])',
    'image.resize2d(%x, size=[4, 5], method="cubic", cubic_alpha=-0.6f)',
]


@pytest.mark.parametrize("op_text", NOT_IDENTITIES)
def test_ops_that_change_their_input_stay(op_text):
    unchanged(RemoveIdentityOps, f"""
def @main({X}, %k: Tensor[(3, 1, 1), float32]) {{
  %0 = {op_text};
  nn.relu(%0)
}}""", params={"k": np.full((3, 1, 1), 2, "float32")})


def test_a_broadcast_that_enlarges_the_input_is_not_an_identity():
    unchanged(RemoveIdentityOps, """
def @main(%x: Tensor[(3, 1), float32], %k: Tensor[(1, 4), float32]) {
  add(%x, %k)
}""", params={"k": np.zeros((1, 4), "float32")})
    unchanged(RemoveIdentityOps, """
def @main(%x: Tensor[(3), float32]) {
  multiply(%x, %x)
}""")


def test_the_stays_above_really_are_not_identities():
    # The resize cases kept above move pixels: check with the emulator that they do.
    x = rand(1, 3, 4, 5)
    for op_text in NOT_IDENTITIES[-4:]:
        mod = parse(f"def @main({X}) {{ {op_text} }}")
        assert not np.array_equal(emulator.run(mod, {"x": x})[0], x), op_text


def test_a_chain_of_identities_down_to_the_function_result():
    check(RemoveIdentityOps, f"""
def @main({X}) {{
  %0 = copy(%x) /* span=a:0:0 */;
  %1 = multiply(%0, 1f) /* span=b:0:0 */;
  %2 = reshape(%1, newshape=[1, 3, 4, 5]);
  %3 = nn.dropout(%2);
  %4 = add(%3.0, 0f);
  cast(%4, dtype="float32")
}}""", f"""
def @main({X}) {{
  %x
}}""", exact=True)


def test_identity_ops_between_layers_with_several_users():
    check(RemoveIdentityOps, f"""
def @main({X}) {{
  %0 = nn.relu(%x) /* span=relu:0:0 */;
  %1 = copy(%0);
  %2 = sigmoid(%1) /* span=sig:0:0 */;
  %3 = tanh(%1) /* span=tanh:0:0 */;
  (%2, %3)
}}""", f"""
def @main({X}) {{
  %0 = nn.relu(%x) /* span=relu:0:0 */;
  %1 = sigmoid(%0) /* span=sig:0:0 */;
  %2 = tanh(%0) /* span=tanh:0:0 */;
  (%1, %2)
}}""", exact=True)


def test_integer_identities():
    check(RemoveIdentityOps, """
def @main(%x: Tensor[(2, 3), int32]) {
  %0 = multiply(%x, 1);
  %1 = add(0, %0);
  %2 = divide(%1, 1);
  cast(%2, dtype="int32")
}""", """
def @main(%x: Tensor[(2, 3), int32]) {
  %x
}""", exact=True)


# -- ConvertMaxMinToClip -----------------------------------------------------------------------

def test_the_ti_sample_pattern_becomes_clip():
    with open(SAMPLE_06, encoding="utf-8") as f:
        lines = f.read().splitlines()[:2]  # %2 = maximum(%x.1, -4f); %3 = minimum(%2, 4f)
    before = "def @main(%x.1: Tensor[(1, 3, 224, 224), float32]) {\n" + "\n".join(lines) + "\n  %3\n}"
    mod = parse(before)
    out = ConvertMaxMinToClip(mod)
    ir.assert_structural_equal(out, parse("""
def @main(%x.1: Tensor[(1, 3, 224, 224), float32]) {
  clip(%x.1, a_min=-4f, a_max=4f)
}"""))
    x = rand(1, 3, 224, 224) * 5
    x[0, 0, 0, :3] = [np.inf, -np.inf, np.nan]
    got, want = emulator.run(out, {"x.1": x})[0], emulator.run(mod, {"x.1": x})[0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("body", [
    "%0 = maximum(%x, 0f) /* span=max:0:0 */;\n  minimum(%0, 6f) /* span=min:0:0 */",
    "%0 = maximum(0f, %x) /* span=max:0:0 */;\n  minimum(6f, %0) /* span=min:0:0 */",
    "%0 = minimum(%x, 6f) /* span=max:0:0 */;\n  maximum(%0, 0f) /* span=min:0:0 */",
    "%0 = minimum(6f, %x) /* span=max:0:0 */;\n  maximum(0f, %0) /* span=min:0:0 */",
    "%0 = maximum(%x, %lo) /* span=max:0:0 */;\n  minimum(%0, %hi) /* span=min:0:0 */",
])
def test_maximum_and_minimum_pair_becomes_one_clip_with_the_last_ops_layer(body):
    _, out = check(ConvertMaxMinToClip, f"""
def @main({X}, %lo: Tensor[(1, 1, 1, 1), float32], %hi: Tensor[(1), float32]) {{
  {body}
}}""", f"""
def @main({X}, %lo: Tensor[(1, 1, 1, 1), float32], %hi: Tensor[(1), float32]) {{
  clip(%x, a_min=0f, a_max=6f) /* span=min:0:0 */
}}""", params={"lo": np.zeros((1, 1, 1, 1), "float32"), "hi": np.full((1,), 6, "float32")})


def test_lone_maximum_becomes_clip_to_the_float_max():
    mod, out = check(ConvertMaxMinToClip, f"""
def @main({X}) {{
  %0 = maximum(%x, -1.5f) /* span=m:0:0 */;
  nn.relu(%0) /* span=r:0:0 */
}}""", f"""
def @main({X}) {{
  %0 = clip(%x, a_min=-1.5f, a_max={F32_MAX!r}f) /* span=m:0:0 */;
  nn.relu(%0) /* span=r:0:0 */
}}""")
    assert out.main.body.args[0].attrs.a_max == F32_MAX
    # The one documented difference: +inf comes out as the float32 max instead of +inf.
    x = rand(1, 3, 4, 5)
    x[..., :3] = [np.inf, -np.inf, np.nan]
    got, want = emulator.run(out, {"x": x})[0], emulator.run(mod, {"x": x})[0]
    np.testing.assert_array_equal(got[..., 1:], want[..., 1:])
    assert want[0, 0, 0, 0] == np.inf and got[0, 0, 0, 0] == F32_MAX


def test_integer_maximum_clips_to_the_integer_max():
    check(ConvertMaxMinToClip, """
def @main(%x: Tensor[(2, 8), int32]) {
  %0 = maximum(%x, -3);
  minimum(%0, 50)
}""", """
def @main(%x: Tensor[(2, 8), int32]) {
  clip(%x, a_min=-3f, a_max=50f)
}""", exact=True)
    check(ConvertMaxMinToClip, """
def @main(%x: Tensor[(2, 8), int32]) {
  maximum(%x, 7)
}""", """
def @main(%x: Tensor[(2, 8), int32]) {
  clip(%x, a_min=7f, a_max=2147483647f)
}""", exact=True)


def test_maximum_minimum_merge_into_an_existing_clip():
    check(ConvertMaxMinToClip, f"""
def @main({X}) {{
  %0 = clip(%x, a_min=-1f, a_max=10f) /* span=c:0:0 */;
  %1 = minimum(%0, 6f) /* span=min:0:0 */;
  maximum(%1, 0f) /* span=max:0:0 */
}}""", f"""
def @main({X}) {{
  clip(%x, a_min=0f, a_max=6f) /* span=max:0:0 */
}}""")


@pytest.mark.parametrize("body,params", [
    ("minimum(%x, 6f)", {}),  # a lone minimum stays (as in TI's pass)
    ("maximum(%x, %c)", {"c": rand(3, 1, 1)}),  # not a scalar
    ("maximum(%x, %c)", {"c": np.zeros((1, 1, 1, 1, 1), "float32")}),  # one value, but adds an axis
    ("maximum(%x, %y)", {}),  # not a constant
])
def test_max_min_that_is_not_a_clip_stays(body, params):
    decl = ""
    if params:
        decl = ", %c: Tensor[(" + ", ".join(map(str, params["c"].shape)) + "), float32]"
    unchanged(ConvertMaxMinToClip, f"""
def @main({X}, %y: Tensor[(1, 3, 4, 5), float32]{decl}) {{
  {body}
}}""", params=params)


def test_pair_with_crossed_bounds_keeps_the_minimum():
    # maximum(x, 2) alone is still a clip; the minimum with 1 below it cannot join it.
    check(ConvertMaxMinToClip, f"""
def @main({X}) {{
  %0 = maximum(%x, 2f);
  minimum(%0, 1f)
}}""", f"""
def @main({X}) {{
  %0 = clip(%x, a_min=2f, a_max={F32_MAX!r}f);
  minimum(%0, 1f)
}}""")
    # In the other order (always 2, which no single clip says) only the outer maximum converts;
    # likewise when the minimum's bound is not a scalar.
    check(ConvertMaxMinToClip, f"""
def @main({X}, %c: Tensor[(3, 1, 1), float32]) {{
  %0 = minimum(%x, 1f);
  %1 = maximum(%0, 2f);
  %2 = minimum(%x, %c);
  %3 = maximum(%2, 0f);
  (%1, %3)
}}""", f"""
def @main({X}, %c: Tensor[(3, 1, 1), float32]) {{
  %0 = minimum(%x, 1f);
  %1 = clip(%0, a_min=2f, a_max={F32_MAX!r}f);
  %2 = minimum(%x, %c);
  %3 = clip(%2, a_min=0f, a_max={F32_MAX!r}f);
  (%1, %3)
}}""", params={"c": rand(3, 1, 1)})


def test_shared_maximum_keeps_its_other_user():
    check(ConvertMaxMinToClip, f"""
def @main({X}) {{
  %0 = maximum(%x, 0f) /* span=max:0:0 */;
  %1 = minimum(%0, 6f) /* span=min:0:0 */;
  (%1, %0)
}}""", f"""
def @main({X}) {{
  %0 = clip(%x, a_min=0f, a_max=6f) /* span=min:0:0 */;
  %1 = clip(%x, a_min=0f, a_max={F32_MAX!r}f) /* span=max:0:0 */;
  (%0, %1)
}}""")


# -- SplitAsymmetricStrideConv -----------------------------------------------------------------

def test_stride_1x2_conv_becomes_stride_1_conv_and_1x1_pool_with_stride_1x2():
    w = {"w": rand(4, 3, 3, 3)}
    check(SplitAsymmetricStrideConv, """
def @main(%x: Tensor[(1, 3, 7, 9), float32], %w: Tensor[(4, 3, 3, 3), float32]) {
  %0 = nn.conv2d(%x, %w, strides=[1, 2], padding=[1, 1, 1, 1]) /* span=conv:0:0 */;
  nn.relu(%0) /* span=relu:0:0 */
}""", """
def @main(%x: Tensor[(1, 3, 7, 9), float32], %w: Tensor[(4, 3, 3, 3), float32]) {
  %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]) /* span=conv:0:0 */;
  %1 = nn.max_pool2d(%0, pool_size=[1, 1], strides=[1, 2]) /* span=conv:0:0 */;
  nn.relu(%1) /* span=relu:0:0 */
}""", params=w)


def test_a_1x2_window_would_not_be_the_same():
    # Why the pool window is 1x1: a 1x2 max of neighbouring columns is a different result.
    x, w = rand(1, 3, 6, 8), rand(4, 3, 3, 3)
    strided = parse("""
def @main(%x: Tensor[(1, 3, 6, 8), float32], %w: Tensor[(4, 3, 3, 3), float32]) {
  nn.conv2d(%x, %w, strides=[1, 2], padding=[1, 1])
}""", w=w)
    wide_window = parse("""
def @main(%x: Tensor[(1, 3, 6, 8), float32], %w: Tensor[(4, 3, 3, 3), float32]) {
  %0 = nn.conv2d(%x, %w, padding=[1, 1]);
  nn.max_pool2d(%0, pool_size=[1, 2], strides=[1, 2])
}""", w=w)
    want, wrong = emulator.run(strided, {"x": x})[0], emulator.run(wide_window, {"x": x})[0]
    assert want.shape == wrong.shape and not np.allclose(want, wrong)
    np.testing.assert_allclose(emulator.run(SplitAsymmetricStrideConv(strided), {"x": x})[0], want,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,strides,attrs,w_shape,pool_strides", [
    ((1, 3, 7, 9), (1, 2), "padding=[0, 1, 2, 0]", (4, 3, 3, 3), (1, 2)),
    ((2, 3, 8, 11), (2, 1), "padding=[1, 1]", (5, 3, 3, 3), (2, 1)),
    ((1, 3, 12, 13), (2, 4), "dilation=[2, 1]", (4, 3, 3, 2), (1, 2)),
    ((1, 4, 5, 14), (1, 3), "groups=2", (6, 2, 1, 3), (1, 3)),
    ((1, 4, 6, 6), (1, 2), "groups=4, padding=[1, 1]", (4, 1, 3, 3), (1, 2)),
])
def test_split_is_exact_for_strides_padding_dilation_and_groups(shape, strides, attrs, w_shape, pool_strides):
    sh, sw = strides
    small = min(strides)
    mod, out = check(SplitAsymmetricStrideConv, f"""
def @main(%x: Tensor[{shape}, float32], %w: Tensor[{w_shape}, float32]) {{
  nn.conv2d(%x, %w, strides=[{sh}, {sw}], {attrs}) /* span=c:0:0 */
}}""", f"""
def @main(%x: Tensor[{shape}, float32], %w: Tensor[{w_shape}, float32]) {{
  %0 = nn.conv2d(%x, %w, strides=[{small}, {small}], {attrs}) /* span=c:0:0 */;
  nn.max_pool2d(%0, pool_size=[1, 1], strides={list(pool_strides)}) /* span=c:0:0 */
}}""", params={"w": rand(*w_shape)})


def test_nhwc_conv_gets_an_nhwc_pool():
    check(SplitAsymmetricStrideConv, """
def @main(%x: Tensor[(1, 6, 9, 3), float32], %w: Tensor[(3, 3, 3, 4), float32]) {
  nn.conv2d(%x, %w, strides=[1, 2], data_layout="NHWC", kernel_layout="HWIO")
}""", """
def @main(%x: Tensor[(1, 6, 9, 3), float32], %w: Tensor[(3, 3, 3, 4), float32]) {
  %0 = nn.conv2d(%x, %w, data_layout="NHWC", kernel_layout="HWIO");
  nn.max_pool2d(%0, pool_size=[1, 1], strides=[1, 2], layout="NHWC")
}""", params={"w": rand(3, 3, 3, 4)})


def test_the_pool_goes_after_the_conv_bias():
    params = {"w": rand(4, 3, 3, 3), "b": rand(4)}
    check(SplitAsymmetricStrideConv, """
def @main(%x: Tensor[(1, 3, 6, 10), float32], %w: Tensor[(4, 3, 3, 3), float32], %b: Tensor[(4), float32]) {
  %0 = nn.conv2d(%x, %w, strides=[1, 2], padding=[1, 1]) /* span=conv:0:0 */;
  %1 = nn.bias_add(%0, %b) /* span=conv_bias:0:0 */;
  nn.relu(%1) /* span=relu:0:0 */
}""", """
def @main(%x: Tensor[(1, 3, 6, 10), float32], %w: Tensor[(4, 3, 3, 3), float32], %b: Tensor[(4), float32]) {
  %0 = nn.conv2d(%x, %w, padding=[1, 1]) /* span=conv:0:0 */;
  %1 = nn.bias_add(%0, %b) /* span=conv_bias:0:0 */;
  %2 = nn.max_pool2d(%1, pool_size=[1, 1], strides=[1, 2]) /* span=conv:0:0 */;
  nn.relu(%2) /* span=relu:0:0 */
}""", params=params)
    # With a second user of the conv, the pool stays right after the conv.
    check(SplitAsymmetricStrideConv, """
def @main(%x: Tensor[(1, 3, 6, 10), float32], %w: Tensor[(4, 3, 3, 3), float32], %b: Tensor[(4), float32]) {
  %0 = nn.conv2d(%x, %w, strides=[1, 2], padding=[1, 1]) /* span=conv:0:0 */;
  %1 = nn.bias_add(%0, %b) /* span=conv_bias:0:0 */;
  (%1, %0)
}""", """
def @main(%x: Tensor[(1, 3, 6, 10), float32], %w: Tensor[(4, 3, 3, 3), float32], %b: Tensor[(4), float32]) {
  %0 = nn.conv2d(%x, %w, padding=[1, 1]) /* span=conv:0:0 */;
  %1 = nn.max_pool2d(%0, pool_size=[1, 1], strides=[1, 2]) /* span=conv:0:0 */;
  %2 = nn.bias_add(%1, %b) /* span=conv_bias:0:0 */;
  (%2, %1)
}""", params=params)


@pytest.mark.parametrize("strides", ["[2, 2]", "[1, 1]", "[2, 3]", "[3, 2]"])
def test_equal_or_non_multiple_strides_stay(strides):
    unchanged(SplitAsymmetricStrideConv, f"""
def @main(%x: Tensor[(1, 3, 9, 9), float32], %w: Tensor[(4, 3, 3, 3), float32]) {{
  nn.conv2d(%x, %w, strides={strides})
}}""", params={"w": rand(4, 3, 3, 3)})


# -- MergePadIntoConv --------------------------------------------------------------------------

def test_zero_pad_merges_into_the_conv_padding():
    check(MergePadIntoConv, """
def @main(%x: Tensor[(1, 3, 6, 7), float32], %w: Tensor[(4, 3, 3, 3), float32]) {
  %0 = nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0], [1, 2], [0, 3]]) /* span=pad:0:0 */;
  %1 = nn.conv2d(%0, %w, padding=[1, 1]) /* span=conv:0:0 */;
  nn.relu(%1) /* span=relu:0:0 */
}""", """
def @main(%x: Tensor[(1, 3, 6, 7), float32], %w: Tensor[(4, 3, 3, 3), float32]) {
  %0 = nn.conv2d(%x, %w, padding=[2, 1, 3, 4]) /* span=conv:0:0 */;
  nn.relu(%0) /* span=relu:0:0 */
}""", params={"w": rand(4, 3, 3, 3)})


def test_zero_pad_merges_into_a_strided_nhwc_conv():
    check(MergePadIntoConv, """
def @main(%x: Tensor[(1, 7, 6, 3), float32], %w: Tensor[(3, 3, 3, 4), float32]) {
  %0 = nn.pad(%x, -0f, pad_width=[[0, 0], [1, 0], [2, 1], [0, 0]]);
  nn.conv2d(%0, %w, strides=[2, 2], padding=[0, 1, 0, 0], data_layout="NHWC", kernel_layout="HWIO")
}""", """
def @main(%x: Tensor[(1, 7, 6, 3), float32], %w: Tensor[(3, 3, 3, 4), float32]) {
  nn.conv2d(%x, %w, strides=[2, 2], padding=[1, 3, 0, 1], data_layout="NHWC", kernel_layout="HWIO")
}""", params={"w": rand(3, 3, 3, 4)})


def test_pad_with_another_user_stays_for_it():
    check(MergePadIntoConv, """
def @main(%x: Tensor[(1, 3, 5, 5), float32], %w: Tensor[(2, 3, 1, 1), float32]) {
  %0 = nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]]) /* span=pad:0:0 */;
  %1 = nn.conv2d(%0, %w) /* span=conv:0:0 */;
  (%1, %0)
}""", """
def @main(%x: Tensor[(1, 3, 5, 5), float32], %w: Tensor[(2, 3, 1, 1), float32]) {
  %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]) /* span=conv:0:0 */;
  %1 = nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]]) /* span=pad:0:0 */;
  (%0, %1)
}""", params={"w": rand(2, 3, 1, 1)})


@pytest.mark.parametrize("pool_attrs,merged_attrs", [
    ("pool_size=[3, 3]", "pool_size=[3, 3], padding=[1, 0, 1, 2], count_include_pad=True"),
    ("pool_size=[2, 2], strides=[2, 2], ceil_mode=True",
     "pool_size=[2, 2], strides=[2, 2], padding=[1, 0, 1, 2], ceil_mode=True, count_include_pad=True"),
    ("pool_size=[3, 3], padding=[1, 1], count_include_pad=True",
     "pool_size=[3, 3], padding=[2, 1, 2, 3], count_include_pad=True"),
])
def test_zero_pad_merges_into_avg_pool_counting_the_padding(pool_attrs, merged_attrs):
    check(MergePadIntoConv, f"""
def @main(%x: Tensor[(1, 2, 5, 6), float32]) {{
  %0 = nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [0, 2]]);
  nn.avg_pool2d(%0, {pool_attrs}) /* span=pool:0:0 */
}}""", f"""
def @main(%x: Tensor[(1, 2, 5, 6), float32]) {{
  nn.avg_pool2d(%x, {merged_attrs}) /* span=pool:0:0 */
}}""")


def test_minus_inf_pad_merges_into_max_pool():
    check(MergePadIntoConv, """
def @main(%x: Tensor[(1, 2, 5, 6), float32]) {
  %0 = nn.pad(%x, -inff, pad_width=[[0, 0], [0, 0], [1, 1], [2, 2]]);
  nn.max_pool2d(%0, pool_size=[3, 3], strides=[2, 2], ceil_mode=True) /* span=pool:0:0 */
}""", """
def @main(%x: Tensor[(1, 2, 5, 6), float32]) {
  nn.max_pool2d(%x, pool_size=[3, 3], strides=[2, 2], padding=[1, 2, 1, 2], ceil_mode=True) /* span=pool:0:0 */
}""", exact=True)
    check(MergePadIntoConv, """
def @main(%x: Tensor[(1, 2, 5, 6), int8]) {
  %0 = nn.pad(%x, -128i8, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]]);
  nn.max_pool2d(%0, pool_size=[3, 3])
}""", """
def @main(%x: Tensor[(1, 2, 5, 6), int8]) {
  nn.max_pool2d(%x, pool_size=[3, 3], padding=[1, 1, 1, 1])
}""", exact=True)


@pytest.mark.parametrize("pad,consumer", [
    ("nn.pad(%x, 1f, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]])", "nn.conv2d(%0, %w)"),  # non-zero value
    ("nn.pad(%x, 0f, pad_width=[[0, 0], [1, 0], [1, 1], [1, 1]])", "nn.conv2d(%0, %w4)"),  # channel axis
    ("nn.pad(%x, 0f, pad_width=[[1, 0], [0, 0], [1, 1], [1, 1]])", "nn.conv2d(%0, %w)"),  # batch axis
    ('nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]], pad_mode="edge")', "nn.conv2d(%0, %w)"),
    ("nn.pad(%x, %v, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]])", "nn.conv2d(%0, %w)"),  # not a constant
    # a zero pad read as the C/W axes of an NHWC conv
    ("nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]])",
     'nn.conv2d(%0, %wh, data_layout="NHWC", kernel_layout="HWIO")'),
    ("nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]])", "nn.max_pool2d(%0, pool_size=[2, 2])"),
    ("nn.pad(%x, -inff, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]])", "nn.avg_pool2d(%0, pool_size=[2, 2])"),
    ("nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]])",
     "nn.avg_pool2d(%0, pool_size=[2, 2], padding=[1, 1])"),  # its own padding is not counted
])
def test_pads_that_are_not_exact_to_merge_stay(pad, consumer):
    unchanged(MergePadIntoConv, f"""
def @main(%x: Tensor[(1, 3, 5, 5), float32], %v: float32, %w: Tensor[(2, 3, 1, 1), float32],
          %w4: Tensor[(2, 4, 1, 1), float32], %wh: Tensor[(1, 1, 7, 2), float32]) {{
  %0 = {pad};
  {consumer}
}}""", params={"w": rand(2, 3, 1, 1), "w4": rand(2, 4, 1, 1), "wh": rand(1, 1, 7, 2)})


# -- the four passes together, and switching each one off ---------------------------------------

MODEL = """
def @main(%x: Tensor[(1, 3, 8, 10), float32], %w1: Tensor[(8, 3, 3, 3), float32], %b1: Tensor[(8), float32],
          %w2: Tensor[(8, 8, 3, 3), float32]) {
  %0 = multiply(%x, 1f) /* span=Mul_0:0:0 */;
  %1 = nn.pad(%0, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]]) /* span=Pad_1:0:0 */;
  %2 = nn.conv2d(%1, %w1, strides=[1, 2]) /* span=Conv_2:0:0 */;
  %3 = nn.bias_add(%2, %b1) /* span=Conv_2:0:0 */;
  %4 = maximum(%3, 0f) /* span=Max_3:0:0 */;
  %5 = minimum(%4, 6f) /* span=Min_4:0:0 */;
  %6 = reshape(%5, newshape=[1, 8, 8, 5]) /* span=Reshape_5:0:0 */;
  %7 = nn.pad(%6, -inff, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]]) /* span=Pad_6:0:0 */;
  %8 = nn.max_pool2d(%7, pool_size=[3, 3], strides=[2, 2]) /* span=MaxPool_7:0:0 */;
  %9 = nn.conv2d(%8, %w2, padding=[1, 1]) /* span=Conv_8:0:0 */;
  %10 = nn.dropout(%9);
  copy(%10.0) /* span=Identity_9:0:0 */
}"""

MODEL_AFTER = f"""
def @main(%x: Tensor[(1, 3, 8, 10), float32], %w1: Tensor[(8, 3, 3, 3), float32], %b1: Tensor[(8), float32],
          %w2: Tensor[(8, 8, 3, 3), float32]) {{
  %0 = nn.conv2d(%x, %w1, padding=[1, 1, 1, 1]) /* span=Conv_2:0:0 */;
  %1 = nn.bias_add(%0, %b1) /* span=Conv_2:0:0 */;
  %2 = nn.max_pool2d(%1, pool_size=[1, 1], strides=[1, 2]) /* span=Conv_2:0:0 */;
  %3 = clip(%2, a_min=0f, a_max=6f) /* span=Min_4:0:0 */;
  %4 = nn.max_pool2d(%3, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1]) /* span=MaxPool_7:0:0 */;
  nn.conv2d(%4, %w2, padding=[1, 1]) /* span=Conv_8:0:0 */
}}"""


def model_params():
    return {"w1": rand(8, 3, 3, 3), "b1": rand(8), "w2": rand(8, 8, 3, 3)}


def prep_pipeline():
    return Sequential(list(PREP_PASSES))


def test_the_four_passes_prepare_a_small_model():
    params = model_params()
    mod = parse(MODEL, **params)
    out = prep_pipeline()(mod)
    ir.assert_structural_equal(out, parse(MODEL_AFTER, **params), compare_layers=True)
    ir.verify(out)
    same_outputs(mod, out)


@pytest.mark.parametrize("disabled", [p.name for p in PREP_PASSES])
def test_each_pass_can_be_disabled_by_name(disabled):
    params = model_params()
    mod = parse(MODEL, **params)
    with PassContext(disabled_passes=[disabled]) as ctx:
        alone = PASSES[disabled](mod)
        piped = prep_pipeline()(mod)
    ir.assert_structural_equal(alone, mod, compare_layers=True)
    assert (disabled, "disabled") in ctx.history
    assert all((p.name, "ran") in ctx.history for p in PREP_PASSES if p.name != disabled)
    # The pipeline without it differs from the full one exactly where that pass would act.
    remaining = Sequential([p for p in PREP_PASSES if p.name != disabled])(mod)
    ir.assert_structural_equal(piped, remaining, compare_layers=True)
    assert not ir.structural_equal(piped, prep_pipeline()(mod))
    same_outputs(mod, piped)


def test_passes_are_registered_under_their_names():
    for p in PREP_PASSES:
        assert PASSES[p.name] is p
    assert [p.name for p in PREP_PASSES] == ["RemoveIdentityOps", "ConvertMaxMinToClip",
                                             "SplitAsymmetricStrideConv", "MergePadIntoConv"]


def test_tidl_functions_are_left_alone():
    text = """
def @tidl_0(%i: Tensor[(1, 3, 4, 5), float32], Inline=1, Compiler="tidl", global_symbol="tidl_0", Primitive=1) {
  %0 = multiply(%i, 1f);
  %1 = maximum(%0, 0f);
  minimum(%1, 6f)
}

def @main(%x: Tensor[(1, 3, 4, 5), float32]) {
  %0 = @tidl_0(%x);
  copy(%0)
}"""
    mod = parse(text)
    out = prep_pipeline()(mod)
    assert out["tidl_0"] is mod["tidl_0"]
    assert isinstance(out.main.body, ir.Call) and not isinstance(out.main.body.op, ir.Op)


def test_long_chains_do_not_recurse():
    x = ir.Var("x", ir.TensorType((1, 4), "float32"))
    y = x
    for i in range(2000):  # 6000 nodes: deeper than Python's recursion limit
        y = ir.call("maximum", ir.call("copy", ir.call("nn.relu", y, layer=f"relu{i}")), ir.const(-1.0))
    mod = ir.IRModule.from_expr(ir.Function([x], y))
    out = prep_pipeline()(mod)
    assert ops_of(out) == ["nn.relu", "clip"] * 2000
    same_outputs(mod, out, exact=True)
