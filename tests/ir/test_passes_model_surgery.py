"""TI's model surgery as passes (rules of TI's ONNX model optimizer that are on by default):
before/after Relay text compared with structural_equal (layer names included), and the emulator's
outputs before and after the pass equal within 1e-6 relative."""

import numpy as np
import pytest

import tidlx
import tidlx.ir as ir
from tidlx.ir.passes import (SURGERY_PASSES, ConvertBatchnormInputTo4D, ConvertConv7x7Stride4ToStride1,
                             ConvertConvLargePadToSmallerKernel, ConvertDepth2spaceToReshpTrReshp,
                             ConvertSpace2depthToReshpTrReshp,
                             ConvertExpandToReshapeAndConcat, ConvertGatherWithSingleIndexToSlice,
                             ConvertLargeGlobalAvgPoolingToMatmul, ConvertMaxpoolToCascadedMaxpool, ConvertNegToMul,
                             ConvertReducesumToMatmul, ConvertReduceMeanToMatmul, ConvertSingleConcatToConsecutiveConcats,
                             ConvertSoftmaxAxisChannelToWidth, ConvertSoftmaxAxisHeightToWidth, ConvertTanhgeluToErfgelu,
                             ConvertTrConvStrideNTrToMatmul,
                             ExpandSliceAcrossMultipleAxis, HfAttentionBlockOptimization, OptimizeReshpTrReshp,
                             PushLargeChannelDimToHeightForWidthWiseSoftmax,
                             RemoveQuantizeInitializer, RemoveWhereLayer)

RNG = np.random.default_rng(11)
HEADER = '#[version = "0.0.5"]\n'


def parse(text, **params):
    return tidlx.parse_relay(HEADER + text, params=params or None)


def same_outputs(before, after, rtol=1e-6, atol=1e-7):
    inputs = {p.name_hint: RNG.standard_normal(p.checked_type.shape).astype(p.checked_type.dtype)
              for p in before.main.params}
    for got, want in zip(tidlx.emulate(after, inputs), tidlx.emulate(before, inputs)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def check(pass_, before, after, before_params=None, tolerance=(1e-6, 1e-7), **params):
    """``params``: constants of ``after`` (the constants the pass makes); ``before_params``: those
    of ``before``; ``tolerance``: (rtol, atol) of the outputs before and after."""
    mod = parse(before, **(before_params or {}))
    out = pass_(mod)
    kept = {k: v for k, v in (before_params or {}).items() if f"%{k}:" in after}
    ir.assert_structural_equal(out, parse(after, **kept, **params), compare_layers=True)
    ir.verify(out)
    same_outputs(mod, out, *tolerance)
    return out


def unchanged(pass_, text, **params):
    mod = parse(text, **params)
    ir.assert_structural_equal(pass_(mod), mod, compare_layers=True)


def test_surgery_passes_are_listed_by_name_in_ti_order():
    """TI's optimizer runs its rules in the topological order of their dependencies; these are
    the modelled rules that are on by default, in that order."""
    assert list(SURGERY_PASSES) == [
        "ConvertTrConvStrideNTrToMatmul", "RemoveWhereLayer", "ConvertTanhgeluToErfgelu",
        "ConvertSpace2depthToReshpTrReshp",
        "ConvertDepth2spaceToReshpTrReshp", "OptimizeReshpTrReshp", "ConvertReducesumToMatmul", "ConvertExpandToReshapeAndConcat",
        "ConvertSingleConcatToConsecutiveConcats", "ConvertNegToMul", "RemoveQuantizeInitializer",
        "ExpandSliceAcrossMultipleAxis",
        "ConvertConv7x7Stride4ToStride1", "ConvertConvLargePadToSmallerKernel",
        "PushLargeChannelDimToHeightForWidthWiseSoftmax",
        "ConvertSoftmaxAxisHeightToWidth", "ConvertSoftmaxAxisChannelToWidth", "ConvertBatchnormInputTo4D",
        "ConvertGatherWithSingleIndexToSlice", "ConvertLargeGlobalAvgPoolingToMatmul", "ConvertReduceMeanToMatmul",
        "ConvertMaxpoolToCascadedMaxpool", "HfAttentionBlockOptimization"]


# -- ConvertSoftmaxAxisChannelToWidth ----------------------------------------------------------

@pytest.mark.parametrize("axis", [1, -3])
def test_channel_softmax_runs_along_width_between_transposes(axis):
    check(ConvertSoftmaxAxisChannelToWidth, f"""
def @main(%x: Tensor[(1, 59, 4, 12), float32]) {{
  nn.softmax(%x, axis={axis}) /* span=sm:0:0 */
}}""", """
def @main(%x: Tensor[(1, 59, 4, 12), float32]) {
  %0 = transpose(%x, axes=[0, 3, 2, 1]) /* span=sm:0:0 */;
  %1 = nn.softmax(%0, axis=-1) /* span=sm:0:0 */;
  transpose(%1, axes=[0, 3, 2, 1]) /* span=sm:0:0 */
}""")


def test_channel_softmax_at_rank_5_swaps_axes_minus_3_and_minus_1():
    check(ConvertSoftmaxAxisChannelToWidth, """
def @main(%x: Tensor[(2, 3, 5, 4, 6), float32]) {
  %0 = nn.relu(%x) /* span=r:0:0 */;
  nn.softmax(%0, axis=2) /* span=sm:0:0 */
}""", """
def @main(%x: Tensor[(2, 3, 5, 4, 6), float32]) {
  %0 = nn.relu(%x) /* span=r:0:0 */;
  %1 = transpose(%0, axes=[0, 1, 4, 3, 2]) /* span=sm:0:0 */;
  %2 = nn.softmax(%1, axis=-1) /* span=sm:0:0 */;
  transpose(%2, axes=[0, 1, 4, 3, 2]) /* span=sm:0:0 */
}""")


def test_channel_softmax_at_rank_3_as_ti_rule_takes_it():
    check(ConvertSoftmaxAxisChannelToWidth, """
def @main(%x: Tensor[(8, 4, 6), float32]) {
  nn.softmax(%x, axis=0) /* span=sm:0:0 */
}""", """
def @main(%x: Tensor[(8, 4, 6), float32]) {
  %0 = transpose(%x, axes=[2, 1, 0]) /* span=sm:0:0 */;
  %1 = nn.softmax(%0, axis=-1) /* span=sm:0:0 */;
  transpose(%1, axes=[2, 1, 0]) /* span=sm:0:0 */
}""")


@pytest.mark.parametrize("shape,axis", [((1, 3, 4, 5), -1), ((1, 3, 4, 5), 2), ((1, 3, 4, 5), 0), ((4, 5), 0)])
def test_other_softmaxes_stay(shape, axis):
    ty = f"Tensor[({', '.join(map(str, shape))}), float32]"
    unchanged(ConvertSoftmaxAxisChannelToWidth, f"""
def @main(%x: {ty}) {{
  nn.softmax(%x, axis={axis}) /* span=sm:0:0 */
}}""")


# -- ConvertReduceMeanToMatmul -----------------------------------------------------------------

X4 = "%x: Tensor[(1, 8, 4, 6), float32]"


@pytest.mark.parametrize("keep,out", [("True", "[1, 8, 1, 1]"), ("False", "[1, 8]")])
def test_mean_over_the_plane_is_a_matmul_by_a_constant_column(keep, out):
    check(ConvertReduceMeanToMatmul, f"""
def @main({X4}) {{
  mean(%x, axis=[2, 3], keepdims={keep}) /* span=rm:0:0 */
}}""", f"""
def @main({X4}, %k: Tensor[(1, 24), float32]) {{
  %0 = reshape(%x, newshape=[1, 1, 8, 24]) /* span=rm:0:0 */;
  %1 = nn.dense(%0, %k, units=1) /* span=rm:0:0 */;
  reshape(%1, newshape={out}) /* span=rm:0:0 */
}}""", k=np.full((1, 24), 1 / 24, "float32"))


def test_mean_over_the_width_is_a_matmul():
    check(ConvertReduceMeanToMatmul, f"""
def @main({X4}) {{
  mean(%x, axis=[-1], keepdims=True) /* span=rm:0:0 */
}}""", f"""
def @main({X4}, %k: Tensor[(1, 6), float32]) {{
  nn.dense(%x, %k, units=1) /* span=rm:0:0 */
}}""", k=np.full((1, 6), 1 / 6, "float32"))


@pytest.mark.parametrize("axes", ["[1]", "[2]", "[1, 2, 3]"])
def test_other_means_stay(axes):
    unchanged(ConvertReduceMeanToMatmul, f"""
def @main({X4}) {{
  mean(%x, axis={axes}, keepdims=True) /* span=rm:0:0 */
}}""")


def test_mean_of_a_layer_norm_stays():
    unchanged(ConvertReduceMeanToMatmul, f"""
def @main({X4}) {{
  %0 = mean(%x, axis=[-1], keepdims=True) /* span=rm:0:0 */;
  %1 = subtract(%x, %0) /* span=sub:0:0 */;
  multiply(%1, %1) /* span=sq:0:0 */
}}""")


# -- RemoveWhereLayer --------------------------------------------------------------------------

X = "%x: Tensor[(1, 4, 3, 5), float32], %y: Tensor[(1, 4, 3, 5), float32]"
COND = "%c: Tensor[(1, 4, 3, 5), bool]"


@pytest.mark.parametrize("value,picked", [(True, "%x"), (False, "%y")])
def test_select_by_a_constant_condition_is_the_input_it_selects(value, picked):
    check(RemoveWhereLayer, f"""
def @main({X}, {COND}) {{
  %0 = where(%c, %x, %y) /* span=w:0:0 */;
  nn.relu(%0) /* span=r:0:0 */
}}""", f"""
def @main({X}) {{
  nn.relu({picked}) /* span=r:0:0 */
}}""", before_params={"c": np.full((1, 4, 3, 5), value)})


def test_mixed_or_broadcast_selects_stay():
    mixed = np.zeros((1, 4, 3, 5), bool)
    mixed[0, 0, 0, 0] = True
    unchanged(RemoveWhereLayer, f"""
def @main({X}, {COND}) {{
  where(%c, %x, %y) /* span=w:0:0 */
}}""", c=mixed)
    unchanged(RemoveWhereLayer, """
def @main(%x: Tensor[(1, 4, 1, 5), float32], %y: Tensor[(1, 4, 3, 5), float32], %c: Tensor[(1, 4, 3, 5), bool]) {
  where(%c, %x, %y) /* span=w:0:0 */
}""", c=np.ones((1, 4, 3, 5), bool))


# -- ConvertTanhgeluToErfgelu ------------------------------------------------------------------

TANH_GELU = """
def @main(%x: Tensor[(1, 16, 8), float32], %a: float32, %b: float32, %h: float32, %one: float32) {
  %0 = multiply(%x, %x) /* span=sq:0:0 */;
  %1 = multiply(%0, %x) /* span=cube:0:0 */;
  %2 = multiply(%1, %a) /* span=ca:0:0 */;
  %3 = add(%x, %2) /* span=sum:0:0 */;
  %4 = multiply(%3, %b) /* span=cb:0:0 */;
  %5 = tanh(%4) /* span=t:0:0 */;
  %6 = add(%5, %one) /* span=one:0:0 */;
  %7 = multiply(%x, %h) /* span=half:0:0 */;
  multiply(%7, %6) /* span=out:0:0 */
}"""
GELU_CONSTANTS = {"a": np.float32(0.044715), "b": np.float32(0.7978845608), "h": np.float32(0.5),
                  "one": np.float32(1.0)}


def test_tanh_gelu_becomes_the_erf_form():
    out = check(ConvertTanhgeluToErfgelu, TANH_GELU, """
def @main(%x: Tensor[(1, 16, 8), float32], %h: float32, %one: float32, %s: float32) {
  %0 = divide(%x, %s) /* span=t:0:0 */;
  %1 = erf(%0) /* span=t:0:0 */;
  %2 = add(%1, %one) /* span=one:0:0 */;
  %3 = multiply(%x, %h) /* span=half:0:0 */;
  multiply(%3, %2) /* span=out:0:0 */
}""", before_params=GELU_CONSTANTS, tolerance=(0, 1e-3), s=np.float32(1.4142135381698608))
    from tidlx.backends.tidl.composites import find_composites
    assert [g.name for g in find_composites(out.main)] == ["gelu"]   # TIDL's GELU activation


def test_tanh_of_other_constants_stays():
    unchanged(ConvertTanhgeluToErfgelu, TANH_GELU, **{**GELU_CONSTANTS, "b": np.float32(0.5)})


# -- ConvertReducesumToMatmul ------------------------------------------------------------------

#: The MatMul adds in another order than the sum: equal to float32 rounding of the sums.
SUM_TOLERANCE = (1e-5, 1e-6)

@pytest.mark.parametrize("keep,out", [("True", "[1, 8, 1, 1]"), ("False", "[1, 8]")])
def test_sum_over_the_plane_is_a_matmul_by_ones(keep, out):
    check(ConvertReducesumToMatmul, f"""
def @main({X4}) {{
  sum(%x, axis=[2, 3], keepdims={keep}) /* span=rs:0:0 */
}}""", f"""
def @main({X4}, %k: Tensor[(1, 24), float32]) {{
  %0 = reshape(%x, newshape=[1, 1, 8, 24]) /* span=rs:0:0 */;
  %1 = nn.dense(%0, %k, units=1) /* span=rs:0:0 */;
  reshape(%1, newshape={out}) /* span=rs:0:0 */
}}""", tolerance=SUM_TOLERANCE, k=np.ones((1, 24), "float32"))


def test_sum_over_the_width_is_a_matmul_and_a_squeeze():
    check(ConvertReducesumToMatmul, f"""
def @main({X4}) {{
  sum(%x, axis=[3]) /* span=rs:0:0 */
}}""", f"""
def @main({X4}, %k: Tensor[(1, 6), float32]) {{
  %0 = nn.dense(%x, %k, units=1) /* span=rs:0:0 */;
  reshape(%0, newshape=[1, 8, 4]) /* span=rs:0:0 */
}}""", tolerance=SUM_TOLERANCE, k=np.ones((1, 6), "float32"))


def test_sum_over_the_height_runs_between_transposes():
    check(ConvertReducesumToMatmul, f"""
def @main({X4}) {{
  sum(%x, axis=[-2], keepdims=True) /* span=rs:0:0 */
}}""", f"""
def @main({X4}, %k: Tensor[(1, 4), float32]) {{
  %0 = transpose(%x, axes=[0, 1, 3, 2]) /* span=rs:0:0 */;
  %1 = nn.dense(%0, %k, units=1) /* span=rs:0:0 */;
  transpose(%1, axes=[0, 1, 3, 2]) /* span=rs:0:0 */
}}""", tolerance=SUM_TOLERANCE, k=np.ones((1, 4), "float32"))


@pytest.mark.parametrize("axes", ["[1]", "[1, 2]", "[1, 2, 3]"])
def test_other_sums_stay(axes):
    unchanged(ConvertReducesumToMatmul, f"""
def @main({X4}) {{
  sum(%x, axis={axes}, keepdims=True) /* span=rs:0:0 */
}}""")


# -- ConvertExpandToReshapeAndConcat, ConvertSingleConcatToConsecutiveConcats ------------------

def test_expand_is_a_reshape_and_concatenations_of_copies():
    check(ConvertExpandToReshapeAndConcat, """
def @main(%x: Tensor[(3, 1, 5), float32]) {
  broadcast_to(%x, shape=[1, 3, 4, 5]) /* span=e:0:0 */
}""", """
def @main(%x: Tensor[(3, 1, 5), float32]) {
  %0 = reshape(%x, newshape=[1, 3, 1, 5]) /* span=e:0:0 */;
  concatenate((%0, %0, %0, %0), axis=-2) /* span=e:0:0 */
}""")


def test_expand_along_two_axes_concatenates_twice():
    check(ConvertExpandToReshapeAndConcat, """
def @main(%x: Tensor[(1, 1, 2, 1), float32]) {
  broadcast_to(%x, shape=[1, 2, 2, 3]) /* span=e:0:0 */
}""", """
def @main(%x: Tensor[(1, 1, 2, 1), float32]) {
  %0 = concatenate((%x, %x), axis=-3) /* span=e:0:0 */;
  concatenate((%0, %0, %0), axis=-1) /* span=e:0:0 */
}""")


def test_concatenation_of_copies_is_a_chain_of_two_input_ones():
    check(ConvertSingleConcatToConsecutiveConcats, """
def @main(%x: Tensor[(1, 3, 1, 5), float32]) {
  concatenate((%x, %x, %x, %x), axis=-2) /* span=c:0:0 */
}""", """
def @main(%x: Tensor[(1, 3, 1, 5), float32]) {
  %0 = concatenate((%x, %x), axis=-2) /* span=c:0:0 */;
  %1 = concatenate((%x, %0), axis=-2) /* span=c:0:0 */;
  concatenate((%x, %1), axis=-2) /* span=c:0:0 */
}""")


def test_concatenations_of_two_copies_or_of_different_tensors_stay():
    unchanged(ConvertSingleConcatToConsecutiveConcats, """
def @main(%x: Tensor[(1, 3, 1, 5), float32], %y: Tensor[(1, 3, 1, 5), float32]) {
  %0 = concatenate((%x, %x), axis=1) /* span=c:0:0 */;
  concatenate((%x, %y, %x), axis=1) /* span=d:0:0 */
}""")


# -- ConvertNegToMul ---------------------------------------------------------------------------

def test_negation_is_a_multiply_by_minus_one():
    check(ConvertNegToMul, f"""
def @main({X4}) {{
  negative(%x) /* span=n:0:0 */
}}""", f"""
def @main({X4}, %k: Tensor[(1), float32]) {{
  multiply(%x, %k) /* span=n:0:0 */
}}""", k=np.array([-1], "float32"))


# -- ExpandSliceAcrossMultipleAxis -------------------------------------------------------------

def test_slice_over_two_axes_is_two_slices_in_the_listed_order():
    check(ExpandSliceAcrossMultipleAxis, """
def @main(%x: Tensor[(1, 8, 9, 9), float32]) {
  strided_slice(%x, begin=[2, 1], end=[7, 5], strides=[2, 1], axes=[3, 2]) /* span=s:0:0 */
}""", """
def @main(%x: Tensor[(1, 8, 9, 9), float32]) {
  %0 = strided_slice(%x, begin=[2], end=[7], strides=[2], axes=[3]) /* span=s:0:0 */;
  strided_slice(%0, begin=[1], end=[5], strides=[1], axes=[2]) /* span=s:0:0 */
}""")


def test_slice_over_one_axis_stays():
    unchanged(ExpandSliceAcrossMultipleAxis, """
def @main(%x: Tensor[(1, 8, 9, 9), float32]) {
  strided_slice(%x, begin=[2], end=[7], strides=[1], axes=[3]) /* span=s:0:0 */
}""")


# -- ConvertConv7x7Stride4ToStride1 ------------------------------------------------------------

CONV_ARGS = "%x: Tensor[(1, 3, 30, 29), float32], %w: Tensor[(8, 3, 7, 7), float32], %b: Tensor[(8), float32]"
CONV_PARAMS = {"w": RNG.standard_normal((8, 3, 7, 7)).astype("float32"),
               "b": RNG.standard_normal(8).astype("float32")}


def test_conv_7x7_stride_4_runs_at_stride_1_then_subsamples_after_its_bias():
    check(ConvertConv7x7Stride4ToStride1, f"""
def @main({CONV_ARGS}) {{
  %0 = nn.conv2d(%x, %w, strides=[4, 4], padding=[3, 3, 3, 3], channels=8, kernel_size=[7, 7]) /* span=c:0:0 */;
  %1 = nn.bias_add(%0, %b) /* span=c:0:0 */;
  nn.relu(%1) /* span=r:0:0 */
}}""", f"""
def @main({CONV_ARGS}) {{
  %0 = nn.conv2d(%x, %w, padding=[3, 3, 3, 3], channels=8, kernel_size=[7, 7]) /* span=c:0:0 */;
  %1 = nn.bias_add(%0, %b) /* span=c:0:0 */;
  %2 = nn.max_pool2d(%1, pool_size=[1, 1], strides=[2, 2], padding=[0, 0, 0, 0]) /* span=c:0:0 */;
  %3 = nn.max_pool2d(%2, pool_size=[1, 1], strides=[2, 2], padding=[0, 0, 0, 0]) /* span=c:0:0 */;
  nn.relu(%3) /* span=r:0:0 */
}}""", before_params=CONV_PARAMS)


def test_conv_7x7_stride_4_without_bias_and_unpadded():
    check(ConvertConv7x7Stride4ToStride1, f"""
def @main({CONV_ARGS}) {{
  nn.conv2d(%x, %w, strides=[4, 4], channels=8, kernel_size=[7, 7]) /* span=c:0:0 */
}}""", f"""
def @main({CONV_ARGS}) {{
  %0 = nn.conv2d(%x, %w, channels=8, kernel_size=[7, 7]) /* span=c:0:0 */;
  %1 = nn.max_pool2d(%0, pool_size=[1, 1], strides=[2, 2], padding=[0, 0, 0, 0]) /* span=c:0:0 */;
  nn.max_pool2d(%1, pool_size=[1, 1], strides=[2, 2], padding=[0, 0, 0, 0]) /* span=c:0:0 */
}}""", before_params=CONV_PARAMS)


def test_other_convs_stay():
    unchanged(ConvertConv7x7Stride4ToStride1, f"""
def @main({CONV_ARGS}) {{
  nn.conv2d(%x, %w, strides=[2, 2], padding=[3, 3, 3, 3], channels=8, kernel_size=[7, 7]) /* span=c:0:0 */
}}""", **CONV_PARAMS)


# -- PushLargeChannelDimToHeightForWidthWiseSoftmax --------------------------------------------

def test_width_softmax_of_many_channels_moves_channels_into_rows():
    # C*H = 3300 rows of 8; the counts c from ceil(26400 / 32768) = 1 up to 1099 that divide 3300
    # give heights 3300/c; of those, height 60 (c = 55) has the largest fraction of height/64
    # (60/64 = 0.9375; no divisor of 3300 is 61-63 above a multiple of 64).
    check(PushLargeChannelDimToHeightForWidthWiseSoftmax, """
def @main(%x: Tensor[(1, 1100, 3, 8), float32]) {
  nn.softmax(%x, axis=-1) /* span=sm:0:0 */
}""", """
def @main(%x: Tensor[(1, 1100, 3, 8), float32]) {
  %0 = reshape(%x, newshape=[1, 55, 60, 8]) /* span=sm:0:0 */;
  %1 = nn.softmax(%0, axis=-1) /* span=sm:0:0 */;
  reshape(%1, newshape=[1, 1100, 3, 8]) /* span=sm:0:0 */
}""")


@pytest.mark.parametrize("shape,axis", [((1, 1024, 4, 8), -1), ((1, 1100, 3, 8), 2), ((1, 2048, 4, 8), -1)])
def test_other_softmaxes_keep_their_shape(shape, axis):
    ty = f"Tensor[({', '.join(map(str, shape))}), float32]"
    unchanged(PushLargeChannelDimToHeightForWidthWiseSoftmax, f"""
def @main(%x: {ty}) {{
  nn.softmax(%x, axis={axis}) /* span=sm:0:0 */
}}""")


# -- ConvertSoftmaxAxisHeightToWidth -----------------------------------------------------------

@pytest.mark.parametrize("axis", [2, -2])
def test_height_softmax_runs_along_width_between_transposes(axis):
    check(ConvertSoftmaxAxisHeightToWidth, f"""
def @main(%x: Tensor[(1, 3, 7, 12), float32]) {{
  nn.softmax(%x, axis={axis}) /* span=sm:0:0 */
}}""", """
def @main(%x: Tensor[(1, 3, 7, 12), float32]) {
  %0 = transpose(%x, axes=[0, 1, 3, 2]) /* span=sm:0:0 */;
  %1 = nn.softmax(%0, axis=-1) /* span=sm:0:0 */;
  transpose(%1, axes=[0, 1, 3, 2]) /* span=sm:0:0 */
}""")


def test_height_softmax_at_rank_2():
    check(ConvertSoftmaxAxisHeightToWidth, """
def @main(%x: Tensor[(7, 12), float32]) {
  nn.softmax(%x, axis=0) /* span=sm:0:0 */
}""", """
def @main(%x: Tensor[(7, 12), float32]) {
  %0 = transpose(%x, axes=[1, 0]) /* span=sm:0:0 */;
  %1 = nn.softmax(%0, axis=-1) /* span=sm:0:0 */;
  transpose(%1, axes=[1, 0]) /* span=sm:0:0 */
}""")


@pytest.mark.parametrize("axis", [1, 3, -1])
def test_other_axes_stay_for_the_height_rule(axis):
    unchanged(ConvertSoftmaxAxisHeightToWidth, f"""
def @main(%x: Tensor[(1, 3, 7, 12), float32]) {{
  nn.softmax(%x, axis={axis}) /* span=sm:0:0 */
}}""")


# -- ConvertBatchnormInputTo4D -----------------------------------------------------------------

BN_PARAMS = {k: RNG.uniform(0.5, 1.5, 6).astype("float32") for k in ("g", "b", "m", "v")}
BN_ARGS = "%g: Tensor[(6), float32], %b: Tensor[(6), float32], %m: Tensor[(6), float32], %v: Tensor[(6), float32]"


@pytest.mark.parametrize("shape,four", [((2, 6), "[2, 6, 1, 1]"), ((1, 6, 5), "[1, 6, 5, 1]")])
def test_batch_norm_below_rank_4_runs_in_4d(shape, four):
    ty = f"Tensor[({', '.join(map(str, shape))}), float32]"
    check(ConvertBatchnormInputTo4D, f"""
def @main(%x: {ty}, {BN_ARGS}) {{
  %0 = nn.batch_norm(%x, %g, %b, %m, %v) /* span=bn:0:0 */;
  %0.0
}}""", f"""
def @main(%x: {ty}, {BN_ARGS}) {{
  %0 = reshape(%x, newshape={four}) /* span=bn:0:0 */;
  %1 = nn.batch_norm(%0, %g, %b, %m, %v) /* span=bn:0:0 */;
  %2 = %1.0;
  reshape(%2, newshape=[{', '.join(map(str, shape))}]) /* span=bn:0:0 */
}}""", before_params=BN_PARAMS)


def test_batch_norm_in_4d_stays():
    unchanged(ConvertBatchnormInputTo4D, f"""
def @main(%x: Tensor[(1, 6, 2, 2), float32], {BN_ARGS}) {{
  %0 = nn.batch_norm(%x, %g, %b, %m, %v) /* span=bn:0:0 */;
  %0.0
}}""", **BN_PARAMS)


# -- ConvertGatherWithSingleIndexToSlice -------------------------------------------------------

@pytest.mark.parametrize("axis,shape", [(1, "[1, 4, 6]"), (-1, "[1, 8, 4]")])
def test_gather_of_one_index_is_a_slice_and_a_reshape(axis, shape):
    norm = axis % 4
    check(ConvertGatherWithSingleIndexToSlice, f"""
def @main({X4}) {{
  take(%x, 3, axis={axis}) /* span=g:0:0 */
}}""", f"""
def @main({X4}) {{
  %0 = strided_slice(%x, begin=[3], end=[4], strides=[1], axes=[{norm}]) /* span=g:0:0 */;
  reshape(%0, newshape={shape}) /* span=g:0:0 */
}}""")


@pytest.mark.parametrize("index,axis", [("3", 0), ("-1", 1), ("%i", 1)])
def test_other_gathers_stay(index, axis):
    unchanged(ConvertGatherWithSingleIndexToSlice, f"""
def @main({X4}, %i: Tensor[(2), int64]) {{
  take(%x, {index}, axis={axis}) /* span=g:0:0 */
}}""", i=np.array([1, 2], "int64"))
    unchanged(ConvertGatherWithSingleIndexToSlice, """
def @main(%x: Tensor[(8, 6), float32]) {
  take(%x, 3, axis=1) /* span=g:0:0 */
}""")


# -- ConvertLargeGlobalAvgPoolingToMatmul ------------------------------------------------------

def test_global_average_pool_over_1024_values_is_a_matmul():
    check(ConvertLargeGlobalAvgPoolingToMatmul, """
def @main(%x: Tensor[(1, 4, 32, 32), float32]) {
  nn.global_avg_pool2d(%x) /* span=gap:0:0 */
}""", """
def @main(%x: Tensor[(1, 4, 32, 32), float32], %k: Tensor[(1, 1024), float32]) {
  %0 = reshape(%x, newshape=[1, 4, 1024]) /* span=gap:0:0 */;
  %1 = nn.dense(%0, %k, units=1) /* span=gap:0:0 */;
  reshape(%1, newshape=[1, 4, 1, 1]) /* span=gap:0:0 */
}""", k=np.full((1, 1024), 1 / 1024, "float32"))


def test_global_average_pool_below_1024_values_stays():
    unchanged(ConvertLargeGlobalAvgPoolingToMatmul, """
def @main(%x: Tensor[(1, 4, 31, 33), float32]) {
  nn.global_avg_pool2d(%x) /* span=gap:0:0 */
}""")


# -- ConvertMaxpoolToCascadedMaxpool -----------------------------------------------------------

POOL3 = "nn.max_pool2d({}, pool_size=[3, 3], padding=[1, 1, 1, 1]) /* span=mp:0:0 */"


@pytest.mark.parametrize("k", [5, 9, 13])
def test_same_max_pool_of_a_large_odd_kernel_is_a_chain_of_3x3_pools(k):
    n = (k - 1) // 2
    lines = [f"  %{i} = " + POOL3.format("%x" if i == 0 else f"%{i - 1}") + ";" for i in range(n - 1)]
    last = "  " + POOL3.format("%x" if n == 1 else f"%{n - 2}")
    check(ConvertMaxpoolToCascadedMaxpool, f"""
def @main(%x: Tensor[(1, 4, 20, 17), float32]) {{
  nn.max_pool2d(%x, pool_size=[{k}, {k}], padding=[{n}, {n}, {n}, {n}]) /* span=mp:0:0 */
}}""", "\ndef @main(%x: Tensor[(1, 4, 20, 17), float32]) {\n" + "\n".join(lines + [last]) + "\n}")


@pytest.mark.parametrize("attrs", ["pool_size=[5, 5], strides=[2, 2], padding=[2, 2, 2, 2]",
                                   "pool_size=[5, 5]", "pool_size=[4, 4], padding=[2, 2, 1, 1]",
                                   "pool_size=[3, 3], padding=[1, 1, 1, 1]",
                                   "pool_size=[5, 3], padding=[2, 1, 2, 1]"])
def test_other_max_pools_stay(attrs):
    unchanged(ConvertMaxpoolToCascadedMaxpool, f"""
def @main(%x: Tensor[(1, 4, 20, 17), float32]) {{
  nn.max_pool2d(%x, {attrs}) /* span=mp:0:0 */
}}""")


# -- ConvertConvLargePadToSmallerKernel --------------------------------------------------------

ASPP_W = RNG.standard_normal((6, 4, 3, 3)).astype("float32")


@pytest.mark.parametrize("size,rate", [(32, 36), (8, 12), (5, 6)])
def test_dilated_conv_padded_beyond_its_input_keeps_its_centre_tap(size, rate):
    """Each tap but the centre one is `rate` away from it, beyond the `size`-wide input: it only
    ever meets padding."""
    check(ConvertConvLargePadToSmallerKernel, f"""
def @main(%x: Tensor[(1, 4, {size}, {size}), float32], %w: Tensor[(6, 4, 3, 3), float32]) {{
  nn.conv2d(%x, %w, padding=[{rate}, {rate}, {rate}, {rate}], dilation=[{rate}, {rate}], channels=6, kernel_size=[3, 3]) /* span=c:0:0 */
}}""", f"""
def @main(%x: Tensor[(1, 4, {size}, {size}), float32], %k: Tensor[(6, 4, 1, 1), float32]) {{
  nn.conv2d(%x, %k, padding=[0, 0, 0, 0], dilation=[{rate}, {rate}], channels=6, kernel_size=[1, 1]) /* span=c:0:0 */
}}""", before_params={"w": ASPP_W}, k=ASPP_W[:, :, 1:2, 1:2])


def test_7x7_conv_on_a_single_pixel_keeps_its_centre_tap():
    w = RNG.standard_normal((6, 4, 7, 7)).astype("float32")
    check(ConvertConvLargePadToSmallerKernel, """
def @main(%x: Tensor[(1, 4, 1, 1), float32], %w: Tensor[(6, 4, 7, 7), float32]) {
  nn.conv2d(%x, %w, padding=[3, 3, 3, 3], channels=6, kernel_size=[7, 7]) /* span=c:0:0 */
}""", """
def @main(%x: Tensor[(1, 4, 1, 1), float32], %k: Tensor[(6, 4, 1, 1), float32]) {
  nn.conv2d(%x, %k, padding=[0, 0, 0, 0], channels=6, kernel_size=[1, 1]) /* span=c:0:0 */
}""", before_params={"w": w}, tolerance=(1e-5, 1e-6), k=w[:, :, 3:4, 3:4])


@pytest.mark.parametrize("size,k,rate,pad", [(2, 7, 1, 3), (32, 3, 24, 24), (16, 3, 1, 1)])
def test_convs_whose_crop_would_drop_taps_on_the_input_stay(size, k, rate, pad):
    """(2, 7, 1, 3): TI's rule would keep only the centre row of a 7x7 kernel on a 2-row input,
    whose rows 2 and 4 also meet it; the others are padded less than their input."""
    unchanged(ConvertConvLargePadToSmallerKernel, f"""
def @main(%x: Tensor[(1, 4, {size}, {size}), float32], %w: Tensor[(6, 4, {k}, {k}), float32]) {{
  nn.conv2d(%x, %w, padding=[{pad}, {pad}, {pad}, {pad}], dilation=[{rate}, {rate}], channels=6, kernel_size=[{k}, {k}]) /* span=c:0:0 */
}}""", w=np.ones((6, 4, k, k), "float32"))


# -- ConvertSpace2depthToReshpTrReshp / ConvertDepth2spaceToReshpTrReshp -----------------------

def test_space_to_depth_is_a_rank_6_reshape_transpose_reshape():
    """An oblong input with C, H and W all different: the values must land in ONNX's order."""
    check(ConvertSpace2depthToReshpTrReshp, """
def @main(%x: Tensor[(1, 3, 4, 6), float32]) {
  nn.space_to_depth(%x, block_size=2) /* span=focus:0:0 */
}""", """
def @main(%x: Tensor[(1, 3, 4, 6), float32]) {
  %0 = reshape(%x, newshape=[1, 3, 2, 2, 3, 2]) /* span=focus:0:0 */;
  %1 = transpose(%0, axes=[0, 3, 5, 1, 2, 4]) /* span=focus:0:0 */;
  reshape(%1, newshape=[1, 12, 2, 3]) /* span=focus:0:0 */
}""")


def test_space_to_depth_in_crd_order_or_nhwc_stays():
    unchanged(ConvertSpace2depthToReshpTrReshp, """
def @main(%x: Tensor[(1, 3, 4, 6), float32]) {
  nn.space_to_depth(%x, block_size=2, mode="CRD")
}""")
    unchanged(ConvertSpace2depthToReshpTrReshp, """
def @main(%x: Tensor[(1, 4, 6, 3), float32]) {
  nn.space_to_depth(%x, block_size=2, layout="NHWC")
}""")


@pytest.mark.parametrize("mode, split, first", [
    ("DCR", [1, 2, 2, 3, 4, 5], [0, 3, 4, 1, 2, 5]),
    ("CRD", [1, 3, 2, 2, 4, 5], [0, 1, 4, 2, 3, 5]),
])
def test_depth_to_space_is_a_reshape_two_transposes_and_a_reshape(mode, split, first):
    check(ConvertDepth2spaceToReshpTrReshp, f"""
def @main(%x: Tensor[(1, 12, 4, 5), float32]) {{
  nn.depth_to_space(%x, block_size=2, mode="{mode}") /* span=shuffle:0:0 */
}}""", f"""
def @main(%x: Tensor[(1, 12, 4, 5), float32]) {{
  %0 = reshape(%x, newshape={split}) /* span=shuffle:0:0 */;
  %1 = transpose(%0, axes={first}) /* span=shuffle:0:0 */;
  %2 = transpose(%1, axes=[0, 1, 2, 3, 5, 4]) /* span=shuffle:0:0 */;
  reshape(%2, newshape=[1, 3, 8, 10]) /* span=shuffle:0:0 */
}}""")


def test_depth_to_space_of_nhwc_stays():
    unchanged(ConvertDepth2spaceToReshpTrReshp, """
def @main(%x: Tensor[(1, 4, 5, 12), float32]) {
  nn.depth_to_space(%x, block_size=2, layout="NHWC")
}""")


# -- OptimizeReshpTrReshp ----------------------------------------------------------------------

def test_axes_the_transpose_keeps_together_are_merged():
    check(OptimizeReshpTrReshp, """
def @main(%x: Tensor[(1, 8, 4, 6), float32]) {
  %0 = reshape(%x, newshape=[1, 2, 4, 4, 6]) /* span=r1:0:0 */;
  %1 = transpose(%0, axes=[0, 2, 3, 1, 4]) /* span=t:0:0 */;
  reshape(%1, newshape=[1, 4, 8, 6]) /* span=r2:0:0 */
}""", """
def @main(%x: Tensor[(1, 8, 4, 6), float32]) {
  %0 = reshape(%x, newshape=[1, 2, 16, 6]) /* span=r1:0:0 */;
  %1 = transpose(%0, axes=[0, 2, 1, 3]) /* span=t:0:0 */;
  reshape(%1, newshape=[1, 4, 8, 6]) /* span=r2:0:0 */
}""")


def test_a_rank_6_shuffle_with_a_leading_run_is_merged():
    """Runs [2, 3, 4, 5] and [0, 1]: the middle tensor becomes 2-D."""
    check(OptimizeReshpTrReshp, """
def @main(%x: Tensor[(6, 4, 5), float32]) {
  %0 = reshape(%x, newshape=[2, 3, 2, 2, 5, 1]) /* span=r1:0:0 */;
  %1 = transpose(%0, axes=[2, 3, 4, 5, 0, 1]) /* span=t:0:0 */;
  reshape(%1, newshape=[20, 6]) /* span=r2:0:0 */
}""", """
def @main(%x: Tensor[(6, 4, 5), float32]) {
  %0 = reshape(%x, newshape=[6, 20]) /* span=r1:0:0 */;
  %1 = transpose(%0, axes=[1, 0]) /* span=t:0:0 */;
  reshape(%1, newshape=[20, 6]) /* span=r2:0:0 */
}""")


def test_ti_renumbering_is_the_runs_order_only_for_some_permutations():
    from tidlx.ir.passes.optimize_reshp_tr_reshp import consecutive_runs, merged, ti_renumbered

    # the space-to-depth sequence: runs [0], [3], [5], [1, 2], [4]; TI's numbers differ from their order
    assert consecutive_runs([0, 3, 5, 1, 2, 4]) == [[0], [3], [5], [1, 2], [4]]
    assert ti_renumbered([0, 3, 5, 1, 4]) == [0, 2, 3, 1, 4]
    assert merged([1, 3, 2, 2, 3, 2], [0, 3, 5, 1, 2, 4]) is None
    x = np.arange(72.0).reshape(1, 3, 4, 6)
    shape, perm = [1, 3, 2, 2, 3, 2], [0, 3, 5, 1, 2, 4]
    want = x.reshape(shape).transpose(perm).reshape(1, 12, 2, 3)
    ti = x.reshape(1, 6, 2, 3, 2).transpose(0, 2, 3, 1, 4).reshape(1, 12, 2, 3)
    assert not np.array_equal(ti, want)


@pytest.mark.parametrize("body", [
    # the space-to-depth sequence: TI's rewrite would compute other values
    """%0 = reshape(%x, newshape=[1, 3, 2, 2, 3, 2]);
  %1 = transpose(%0, axes=[0, 3, 5, 1, 2, 4]);
  reshape(%1, newshape=[1, 12, 2, 3])""",
    # no run to merge
    """%0 = reshape(%x, newshape=[1, 3, 4, 6]);
  %1 = transpose(%0, axes=[0, 3, 2, 1]);
  reshape(%1, newshape=[1, 6, 4, 3])""",
    # the transpose has a second user
    """%0 = reshape(%x, newshape=[1, 3, 2, 2, 6]);
  %1 = transpose(%0, axes=[0, 2, 3, 1, 4]);
  %2 = reshape(%1, newshape=[1, 12, 6]);
  (%2, %1)""",
])
def test_other_reshape_transpose_reshapes_stay(body):
    unchanged(OptimizeReshpTrReshp, f"""
def @main(%x: Tensor[(1, 3, 4, 6), float32]) {{
  {body}
}}""")


def test_space_to_depth_after_ti_default_surgery_keeps_its_values():
    """TI's order: the space-to-depth rule, then optimize_reshp_tr_reshp, which leaves its sequence."""
    mod = parse("""
def @main(%x: Tensor[(1, 3, 4, 6), float32]) {
  nn.space_to_depth(%x, block_size=2)
}""")
    from tidlx.ir.expr import Call
    from tidlx.ir.traversal import post_order

    out = OptimizeReshpTrReshp(ConvertSpace2depthToReshpTrReshp(mod))
    assert [c.op_name for c in post_order(out.main.body) if isinstance(c, Call)] == \
        ["reshape", "transpose", "reshape"]
    same_outputs(mod, out)


# -- ConvertTrConvStrideNTrToMatmul ------------------------------------------------------------

PATCH_W = RNG.standard_normal((6, 3, 2, 2)).astype("float32")
PATCH_B = RNG.standard_normal(6).astype("float32")


def _patch_dense_weight():
    """The MatMul's (kh, kw, C, O) weight, as nn.dense holds it: (O, kh*kw*C), by explicit loops."""
    out = np.zeros((6, 12), "float32")
    for o in range(6):
        for i in range(2):
            for j in range(2):
                for c in range(3):
                    out[o, (i * 2 + j) * 3 + c] = PATCH_W[o, c, i, j]
    return out


@pytest.mark.parametrize("with_bias", [True, False])
def test_patch_embedding_between_nhwc_transposes_is_a_matmul(with_bias):
    conv = "nn.conv2d(%0, %w, strides=[2, 2], padding=[0, 0, 0, 0], channels=6, kernel_size=[2, 2]) /* span=patch:0:0 */"
    body = (f"%1 = {conv};\n  %2 = nn.bias_add(%1, %b) /* span=patch:0:0 */;" if with_bias else f"%2 = {conv};")
    add = ("%4 = add(%3, %bb) /* span=patch:0:0 */;" if with_bias else "%4 = %3;")
    after_params = {"wd": _patch_dense_weight(), **({"bb": PATCH_B} if with_bias else {})}
    decl = ", %bb: Tensor[(6), float32]" if with_bias else ""
    check(ConvertTrConvStrideNTrToMatmul, f"""
def @main(%x: Tensor[(1, 4, 6, 3), float32], %w: Tensor[(6, 3, 2, 2), float32], %b: Tensor[(6), float32]) {{
  %0 = transpose(%x, axes=[0, 3, 1, 2]) /* span=t1:0:0 */;
  {body}
  transpose(%2, axes=[0, 2, 3, 1]) /* span=t2:0:0 */
}}""", f"""
def @main(%x: Tensor[(1, 4, 6, 3), float32], %wd: Tensor[(6, 12), float32]{decl}) {{
  %0 = reshape(%x, newshape=[1, 2, 2, 3, 2, 3]) /* span=patch:0:0 */;
  %1 = transpose(%0, axes=[0, 1, 3, 2, 4, 5]) /* span=patch:0:0 */;
  %2 = reshape(%1, newshape=[1, 6, 12]) /* span=patch:0:0 */;
  %3 = nn.dense(%2, %wd, units=6) /* span=patch:0:0 */;
  {add}
  reshape(%4, newshape=[1, 2, 3, 6]) /* span=patch:0:0 */
}}""", before_params={"w": PATCH_W, "b": PATCH_B}, tolerance=(1e-5, 1e-6), **after_params)


@pytest.mark.parametrize("perm_in, perm_out, conv_attrs", [
    ("[0, 3, 2, 1]", "[0, 2, 3, 1]", "strides=[2, 2]"),                          # not NHWC -> NCHW
    ("[0, 3, 1, 2]", "[0, 3, 2, 1]", "strides=[2, 2]"),                          # not NCHW -> NHWC
    ("[0, 3, 1, 2]", "[0, 2, 3, 1]", "strides=[2, 1]"),                          # width stride differs
    ("[0, 3, 1, 2]", "[0, 2, 3, 1]", "strides=[2, 2], padding=[1, 1, 1, 1]"),    # padded
    ("[0, 3, 1, 2]", "[0, 2, 3, 1]", "strides=[1, 1]"),                          # kernel != stride
])
def test_other_transpose_conv_transposes_stay(perm_in, perm_out, conv_attrs):
    unchanged(ConvertTrConvStrideNTrToMatmul, f"""
def @main(%x: Tensor[(1, 6, 6, 3), float32], %w: Tensor[(6, 3, 2, 2), float32]) {{
  %0 = transpose(%x, axes={perm_in});
  %1 = nn.conv2d(%0, %w, {conv_attrs}, channels=6, kernel_size=[2, 2]);
  transpose(%1, axes={perm_out})
}}""", w=PATCH_W)


# -- RemoveQuantizeInitializer -----------------------------------------------------------------

QW = RNG.standard_normal((4, 3, 1, 1)).astype("float32")
QS = np.array([0.01, 0.02, 0.03, 0.004], "float32")


def _quantized_by_hand(w, scale, zero, lo, hi):
    """round-half-even(w / scale) + zero, saturated, channel by channel along axis 0."""
    out = np.empty(w.shape, "int64")
    for o in range(w.shape[0]):
        for idx in np.ndindex(*w.shape[1:]):
            v = float(np.float32(w[(o,) + idx]) / np.float32(scale[o]))
            out[(o,) + idx] = min(max(int(round(v)) + int(zero[o]), lo), hi)
    return out


@pytest.mark.parametrize("dtype, zero, lo, hi", [("int8", [0, 1, -2, 3], -128, 127), ("uint8", [128] * 4, 0, 255)])
def test_a_quantized_float_weight_is_its_quantized_constant_dequantized(dtype, zero, lo, hi):
    z = np.array(zero, "int32")
    header = ("%x: Tensor[(1, 3, 5, 5), float32], %s: Tensor[(4), float32], %z: Tensor[(4), int32]")
    q = _quantized_by_hand(QW * 20, QS, z, lo, hi).astype(dtype)
    assert q.min() == lo and q.max() == hi      # some values saturate
    check(RemoveQuantizeInitializer, f"""
def @main({header}, %w: Tensor[(4, 3, 1, 1), float32]) {{
  %0 = qnn.quantize(%w, %s, %z, out_dtype="{dtype}", axis=0) /* span=wq:0:0 */;
  %1 = qnn.dequantize(%0, %s, %z, axis=0) /* span=wdq:0:0 */;
  nn.conv2d(%x, %1, channels=4, kernel_size=[1, 1]) /* span=conv:0:0 */
}}""", f"""
def @main({header}, %q: Tensor[(4, 3, 1, 1), {dtype}]) {{
  %0 = qnn.dequantize(%q, %s, %z, axis=0) /* span=wdq:0:0 */;
  nn.conv2d(%x, %0, channels=4, kernel_size=[1, 1]) /* span=conv:0:0 */
}}""", before_params={"w": QW * 20, "s": QS, "z": z}, q=q)


def test_quantized_weights_along_another_axis_or_shared_stay():
    w = RNG.standard_normal((3, 4, 1, 1)).astype("float32")
    unchanged(RemoveQuantizeInitializer, """
def @main(%w: Tensor[(3, 4, 1, 1), float32], %s: Tensor[(4), float32], %z: Tensor[(4), int32]) {
  %0 = qnn.quantize(%w, %s, %z, out_dtype="int8", axis=1);
  qnn.dequantize(%0, %s, %z, axis=1)
}""", w=w, s=QS, z=np.zeros(4, "int32"))
    unchanged(RemoveQuantizeInitializer, """
def @main(%w: Tensor[(4, 3, 1, 1), float32], %s: Tensor[(4), float32], %z: Tensor[(4), int32]) {
  %0 = qnn.quantize(%w, %s, %z, out_dtype="int8", axis=0);
  (qnn.dequantize(%0, %s, %z, axis=0), %0)
}""", w=QW, s=QS, z=np.zeros(4, "int32"))


# -- HfAttentionBlockOptimization --------------------------------------------------------------

ATT_BIAS = RNG.standard_normal((1, 2, 4, 4)).astype("float32")     # (1, heads, N, N)
ATT_MASK = RNG.standard_normal((1, 3, 1, 4, 4)).astype("float32")  # (1, windows, 1, N, N)
ATT_HEADER = "%x: Tensor[(6, 4, 5), float32]"
#: Q, K and V from one common node, one node each (TI traces them back to it)
QKV = """  %h = nn.relu(%x) /* span=h:0:0 */;
  %q = tanh(%h) /* span=tq:0:0 */;
  %k = transpose(%h, axes=[0, 2, 1]) /* span=tk:0:0 */;
  %v = sigmoid(%h) /* span=tv:0:0 */;
"""


def _swin_scores(bias_shape="(1, 2, 4, 4)", mask_shape="(1, 3, 1, 4, 4)", windows="[1, 3, 2, 4, 4]",
                 back="[3, 2, 4, 4]", tail=""):
    return f"""
def @main({ATT_HEADER}, %bias: Tensor[{bias_shape}, float32], %mask: Tensor[{mask_shape}, float32]) {{
{QKV}  %0 = nn.batch_matmul(%q, %k, transpose_b=False) /* span=qk:0:0 */;
  %1 = reshape(%0, newshape=[3, 2, 4, 4]) /* span=qk:0:0 */;
  %2 = add(%1, %bias) /* span=bias_add:0:0 */;
  %3 = reshape(%2, newshape={windows}) /* span=to_windows:0:0 */;
  %4 = add(%3, %mask) /* span=mask_add:0:0 */;
  %5 = reshape(%4, newshape={back}) /* span=from_windows:0:0 */;
  %6 = nn.softmax(%5) /* span=sm:0:0 */;
  %7 = reshape(%6, newshape=[6, 4, 4]) /* span=pv:0:0 */;
  nn.batch_matmul(%7, %v, transpose_b=False) /* span=pv:0:0 */{tail}
}}"""


def test_attention_bias_and_window_mask_adds_become_one_add():
    """Swin's relative-position bias, then the shifted-window mask added per window: one Add of the
    two constants summed (the sum computed here by numpy broadcasting, per window)."""
    summed = ATT_BIAS + ATT_MASK.reshape(3, 1, 4, 4)
    check(HfAttentionBlockOptimization, _swin_scores(), f"""
def @main({ATT_HEADER}, %c: Tensor[(3, 2, 4, 4), float32]) {{
{QKV}  %0 = nn.batch_matmul(%q, %k, transpose_b=False) /* span=qk:0:0 */;
  %1 = reshape(%0, newshape=[3, 2, 4, 4]) /* span=qk:0:0 */;
  %2 = add(%1, %c) /* span=bias_add:0:0 */;
  %3 = nn.softmax(%2) /* span=sm:0:0 */;
  %4 = reshape(%3, newshape=[6, 4, 4]) /* span=pv:0:0 */;
  nn.batch_matmul(%4, %v, transpose_b=False) /* span=pv:0:0 */
}}""", before_params={"bias": ATT_BIAS, "mask": ATT_MASK}, tolerance=(1e-5, 1e-6), c=summed)


def test_ti_merged_constant_follows_ti_arithmetic():
    from tidlx.ir.passes.hf_attention_block_optimization import ti_merged_constant

    got = ti_merged_constant(ATT_BIAS, ATT_MASK)
    np.testing.assert_array_equal(got, ATT_BIAS + ATT_MASK.reshape(3, 1, 4, 4))
    assert ti_merged_constant(ATT_BIAS, ATT_MASK[..., :3]) is None           # last two axes differ
    assert ti_merged_constant(np.ones((2, 2, 4, 4), "float32"), np.ones((1, 3, 1, 4, 4), "float32")) is None


def test_adds_the_merge_would_change_stay():
    # the chain reads the scores' windows and heads as (2, 3) windows: TI's sum, (2, 2, 4, 4), does
    # not broadcast against the scores (TI would write an invalid model)
    unchanged(HfAttentionBlockOptimization, _swin_scores(mask_shape="(1, 2, 1, 4, 4)", windows="[1, 2, 3, 4, 4]"),
              bias=ATT_BIAS, mask=RNG.standard_normal((1, 2, 1, 4, 4)).astype("float32"))
    # the first Add's value used elsewhere too
    unchanged(HfAttentionBlockOptimization, _swin_scores().replace(
        "nn.batch_matmul(%7, %v, transpose_b=False) /* span=pv:0:0 */",
        "(nn.batch_matmul(%7, %v, transpose_b=False) /* span=pv:0:0 */, %2)"), bias=ATT_BIAS, mask=ATT_MASK)


def test_a_softmax_not_feeding_a_matmul_stays():
    """The same chain whose Softmax feeds a Relu: not an attention block."""
    text = _swin_scores().replace("%7 = reshape(%6, newshape=[6, 4, 4]) /* span=pv:0:0 */;\n"
                                  "  nn.batch_matmul(%7, %v, transpose_b=False) /* span=pv:0:0 */",
                                  "nn.relu(%6) /* span=r:0:0 */")
    assert "nn.relu" in text
    unchanged(HfAttentionBlockOptimization, text, bias=ATT_BIAS, mask=ATT_MASK)


def _scaled_scores(scale, header_extra=""):
    return f"""
def @main({ATT_HEADER}{header_extra}) {{
{QKV}  %0 = reshape(%q, newshape=[6, 4, 5]) /* span=qk:0:0 */;
  %1 = nn.batch_matmul(%0, %k, transpose_b=False) /* span=qk:0:0 */;
  %2 = reshape(%1, newshape=[3, 2, 4, 4]) /* span=qk:0:0 */;
  %3 = {scale} /* span=scale:0:0 */;
  %4 = nn.softmax(%3) /* span=sm:0:0 */;
  %5 = reshape(%4, newshape=[6, 4, 4]) /* span=pv:0:0 */;
  nn.batch_matmul(%5, %v, transpose_b=False) /* span=pv:0:0 */
}}"""


@pytest.mark.parametrize("scale, moved", [("multiply(%2, 0.125f)", "multiply(%q, 0.125f)"),
                                          ("multiply(0.125f, %2)", "multiply(0.125f, %q)"),
                                          ("divide(%2, 8f)", "divide(%q, 8f)")])
def test_a_scalar_scale_after_the_scores_matmul_moves_onto_q(scale, moved):
    check(HfAttentionBlockOptimization, _scaled_scores(scale), f"""
def @main({ATT_HEADER}) {{
{QKV}  %0 = {moved} /* span=scale:0:0 */;
  %1 = reshape(%0, newshape=[6, 4, 5]) /* span=qk:0:0 */;
  %2 = nn.batch_matmul(%1, %k, transpose_b=False) /* span=qk:0:0 */;
  %3 = reshape(%2, newshape=[3, 2, 4, 4]) /* span=qk:0:0 */;
  %4 = nn.softmax(%3) /* span=sm:0:0 */;
  %5 = reshape(%4, newshape=[6, 4, 4]) /* span=pv:0:0 */;
  nn.batch_matmul(%5, %v, transpose_b=False) /* span=pv:0:0 */
}}""", tolerance=(1e-5, 1e-6))


def test_scales_the_move_would_change_stay():
    unchanged(HfAttentionBlockOptimization, _scaled_scores("divide(8f, %2)"))           # TI would write 8 / q
    unchanged(HfAttentionBlockOptimization, _scaled_scores("add(%2, 0.125f)"))          # not a scale
    unchanged(HfAttentionBlockOptimization, _scaled_scores("multiply(%2, %s)", ", %s: Tensor[(1), float32]"),
              s=np.array([0.125], "float32"))                                           # rank 1: TI skips it
    unchanged(HfAttentionBlockOptimization, _scaled_scores("multiply(%2, 0.125f)").replace(
        "nn.batch_matmul(%5, %v, transpose_b=False) /* span=pv:0:0 */",
        "(nn.batch_matmul(%5, %v, transpose_b=False) /* span=pv:0:0 */, %2)"))        # scores used elsewhere


def test_a_block_whose_q_k_v_do_not_meet_stays():
    """TI traces Q, K and V back to one node; graph inputs do not meet, and a block TI has already
    rewritten (a Squeeze after the common node on every branch) is left alone."""
    loose = _swin_scores().replace(f"def @main({ATT_HEADER}, ", "def @main(%q: Tensor[(6, 4, 5), float32], "
                                   "%k: Tensor[(6, 5, 4), float32], %v: Tensor[(6, 4, 5), float32], ").replace(QKV, "")
    assert "%h" not in loose
    unchanged(HfAttentionBlockOptimization, loose, bias=ATT_BIAS, mask=ATT_MASK)
    squeezed = _scaled_scores("multiply(%2, 0.125f)").replace(f"def @main({ATT_HEADER})",
                                                               "def @main(%x: Tensor[(6, 1, 4, 5), float32])").replace(
        QKV, """  %h = nn.relu(%x) /* span=h:0:0 */;
  %sq = squeeze(%h, axis=[1]) /* span=sq:0:0 */;
  %sk = squeeze(%h, axis=[1]) /* span=sk:0:0 */;
  %sv = squeeze(%h, axis=[1]) /* span=sv:0:0 */;
  %q = tanh(%sq) /* span=tq:0:0 */;
  %k = transpose(%sk, axes=[0, 2, 1]) /* span=tk:0:0 */;
  %v = sigmoid(%sv) /* span=tv:0:0 */;
""")
    unchanged(HfAttentionBlockOptimization, squeezed)
    # the same with a Relu instead of the Squeezes is rewritten
    text = str(HfAttentionBlockOptimization(parse(squeezed.replace("squeeze(%h, axis=[1])", "nn.relu(%h)")
                                                  .replace("(6, 1, 4, 5)", "(6, 4, 5)"))))
    assert text.index("multiply(") < text.index("nn.batch_matmul(")      # the scale moved onto Q


# the fused Q/K/V projection: one Split of (1, 4, 18) into Q, K and V of 2 heads of 3
QKV_BIAS = [RNG.standard_normal(6).astype("float32") for _ in range(3)]
FUSED_HEADER = "%x: Tensor[(1, 4, 18), float32], %bq: Tensor[(6), float32], %bk: Tensor[(6), float32], " \
               "%bv: Tensor[(6), float32]"


def _fused_qkv(k_axes="[0, 2, 3, 1]", sections="3", q_bias="add(%bq, %s.0)", order=(0, 1, 2)):
    return f"""
def @main({FUSED_HEADER}) {{
  %s = split(%x, indices_or_sections={sections}, axis=2) /* span=qkv_split:0:0 */;
  %q0 = {q_bias} /* span=q_bias:0:0 */;
  %q1 = reshape(%q0, newshape=[1, 4, 2, 3]) /* span=q_heads:0:0 */;
  %q = transpose(%q1, axes=[0, 2, 1, 3]) /* span=q_tr:0:0 */;
  %k0 = add(%bk, %s.{order[1]}) /* span=k_bias:0:0 */;
  %k1 = reshape(%k0, newshape=[1, 4, 2, 3]) /* span=k_heads:0:0 */;
  %k = transpose(%k1, axes={k_axes}) /* span=k_tr:0:0 */;
  %v0 = add(%bv, %s.{order[2]}) /* span=v_bias:0:0 */;
  %v1 = reshape(%v0, newshape=[1, 4, 2, 3]) /* span=v_heads:0:0 */;
  %v = transpose(%v1, axes=[0, 2, 1, 3]) /* span=v_tr:0:0 */;
  %0 = reshape(%q, newshape=[2, 4, 3]) /* span=qk:0:0 */;
  %1 = reshape(%k, newshape=[2, 3, 4]) /* span=qk:0:0 */;
  %2 = nn.batch_matmul(%0, %1, transpose_b=False) /* span=qk:0:0 */;
  %3 = reshape(%2, newshape=[1, 2, 4, 4]) /* span=qk:0:0 */;
  %4 = divide(%3, 2f) /* span=scale:0:0 */;
  %5 = nn.softmax(%4) /* span=sm:0:0 */;
  %6 = reshape(%5, newshape=[2, 4, 4]) /* span=pv:0:0 */;
  %7 = reshape(%v, newshape=[2, 4, 3]) /* span=pv:0:0 */;
  nn.batch_matmul(%6, %7, transpose_b=False) /* span=pv:0:0 */
}}""".replace("%s.0) /* span=q_bias", f"%s.{order[0]}) /* span=q_bias")


def test_a_fused_qkv_split_gets_the_shared_add_reshape_and_transpose_before_it():
    """TI's rewrite of a fused Q/K/V projection: one Add of the three biases concatenated, one
    Reshape with an axis of 3, one Transpose [2, 0, 3, 1, 4], the Split along axis 0 with a Squeeze
    after each part, K's Transpose swapping its last two axes; then the scale moves onto Q."""
    params = dict(zip(("bq", "bk", "bv"), QKV_BIAS))
    check(HfAttentionBlockOptimization, _fused_qkv(), """
def @main(%x: Tensor[(1, 4, 18), float32], %b: Tensor[(18), float32]) {
  %0 = add(%b, %x) /* span=q_bias:0:0 */;
  %1 = reshape(%0, newshape=[1, 4, 3, 2, 3]) /* span=q_heads:0:0 */;
  %2 = transpose(%1, axes=[2, 0, 3, 1, 4]) /* span=q_tr:0:0 */;
  %s = split(%2, indices_or_sections=3, axis=0) /* span=qkv_split:0:0 */;
  %q = squeeze(%s.0, axis=[0]) /* span=qkv_split:0:0 */;
  %k0 = squeeze(%s.1, axis=[0]) /* span=qkv_split:0:0 */;
  %k = transpose(%k0, axes=[0, 1, 3, 2]) /* span=k_tr:0:0 */;
  %v = squeeze(%s.2, axis=[0]) /* span=qkv_split:0:0 */;
  %3 = divide(%q, 2f) /* span=scale:0:0 */;
  %4 = reshape(%3, newshape=[2, 4, 3]) /* span=qk:0:0 */;
  %5 = reshape(%k, newshape=[2, 3, 4]) /* span=qk:0:0 */;
  %6 = nn.batch_matmul(%4, %5, transpose_b=False) /* span=qk:0:0 */;
  %7 = reshape(%6, newshape=[1, 2, 4, 4]) /* span=qk:0:0 */;
  %8 = nn.softmax(%7) /* span=sm:0:0 */;
  %9 = reshape(%8, newshape=[2, 4, 4]) /* span=pv:0:0 */;
  %10 = reshape(%v, newshape=[2, 4, 3]) /* span=pv:0:0 */;
  nn.batch_matmul(%9, %10, transpose_b=False) /* span=pv:0:0 */
}""", before_params=params, tolerance=(1e-5, 1e-6), b=np.concatenate(QKV_BIAS))


@pytest.mark.parametrize("variant", [
    dict(order=(1, 0, 2)),                       # the Split's parts feed K, Q, V: TI's Q, K, V order differs
    dict(k_axes="[0, 2, 1, 3]"),                 # K not transposed for the scores: TI's swap computes K^T
    dict(q_bias="add(%s.0, %bq)"),               # the bias second: TI reads the constant as the first input
])
def test_fused_qkv_splits_the_lift_would_change_stay(variant):
    """The Split and its branches stay (the scale still moves onto Q: the block is TI's)."""
    params = dict(zip(("bq", "bk", "bv"), QKV_BIAS))
    text = str(HfAttentionBlockOptimization(parse(_fused_qkv(**variant), **params)))
    assert "split(%x, indices_or_sections=3, axis=2)" in text and "squeeze" not in text
    assert text.index("divide(") < text.index("nn.batch_matmul(")


def test_equal_parts_given_as_split_indices_are_lifted_too():
    params = dict(zip(("bq", "bk", "bv"), QKV_BIAS))
    mod = parse(_fused_qkv(sections="[6, 12]"), **params)
    out = HfAttentionBlockOptimization(mod)
    assert "axes=[2, 0, 3, 1, 4]" in str(out)
    same_outputs(mod, out, 1e-5, 1e-6)


def test_a_reshape_tidlx_adds_to_a_matmul_is_not_an_onnx_reshape():
    """reshape -> transpose -> MatMul: the reshape before the batch_matmul is tidlx's import of a
    rank-4 MatMul (of the MatMul's layer); TI's optimize_reshp_tr_reshp never sees it."""
    unchanged(OptimizeReshpTrReshp, """
def @main(%x: Tensor[(1, 4, 6), float32], %y: Tensor[(2, 4, 3), float32]) {
  %0 = reshape(%x, newshape=[1, 4, 2, 3]) /* span=k_heads:0:0 */;
  %1 = transpose(%0, axes=[0, 2, 3, 1]) /* span=k_tr:0:0 */;
  %2 = reshape(%1, newshape=[2, 3, 4]) /* span=qk:0:0 */;
  nn.batch_matmul(%y, %2, transpose_b=False) /* span=qk:0:0 */
}""")
    # the same three as ONNX nodes of their own are rewritten
    out = OptimizeReshpTrReshp(parse("""
def @main(%x: Tensor[(1, 4, 6), float32], %y: Tensor[(2, 4, 3), float32]) {
  %0 = reshape(%x, newshape=[1, 4, 2, 3]) /* span=k_heads:0:0 */;
  %1 = transpose(%0, axes=[0, 2, 3, 1]) /* span=k_tr:0:0 */;
  %2 = reshape(%1, newshape=[2, 3, 4]) /* span=k_flat:0:0 */;
  nn.batch_matmul(%y, %2, transpose_b=False) /* span=qk:0:0 */
}"""))
    assert "newshape=[1, 4, 6]" in str(out)
