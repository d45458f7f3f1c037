"""TI's model surgery as passes (rules of TI's ONNX model optimizer that are on by default):
before/after Relay text compared with structural_equal (layer names included), and the emulator's
outputs before and after the pass equal within 1e-6 relative."""

import numpy as np
import pytest

import tidlx
import tidlx.ir as ir
from tidlx.ir.passes import SURGERY_PASSES, ConvertReduceMeanToMatmul, ConvertSoftmaxAxisChannelToWidth

RNG = np.random.default_rng(11)
HEADER = '#[version = "0.0.5"]\n'


def parse(text, **params):
    return tidlx.parse_relay(HEADER + text, params=params or None)


def same_outputs(before, after):
    inputs = {p.name_hint: RNG.standard_normal(p.checked_type.shape).astype(p.checked_type.dtype)
              for p in before.main.params}
    for got, want in zip(tidlx.emulate(after, inputs), tidlx.emulate(before, inputs)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def check(pass_, before, after, **params):
    """``params``: constants of ``after`` (the constants the pass makes)."""
    mod = parse(before)
    out = pass_(mod)
    ir.assert_structural_equal(out, parse(after, **params), compare_layers=True)
    ir.verify(out)
    same_outputs(mod, out)
    return out


def unchanged(pass_, text, **params):
    mod = parse(text, **params)
    ir.assert_structural_equal(pass_(mod), mod, compare_layers=True)


def test_surgery_passes_are_listed_by_name():
    assert list(SURGERY_PASSES) == ["ConvertReduceMeanToMatmul", "ConvertSoftmaxAxisChannelToWidth"]


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
