"""TI's model surgery as passes (rules of TI's ONNX model optimizer that are on by default):
before/after Relay text compared with structural_equal (layer names included), and the emulator's
outputs before and after the pass equal within 1e-6 relative."""

import numpy as np
import pytest

import tidlx
import tidlx.ir as ir
from tidlx.ir.passes import SURGERY_PASSES, ConvertSoftmaxAxisChannelToWidth

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
    mod = parse(before, **params)
    out = pass_(mod)
    ir.assert_structural_equal(out, parse(after, **params), compare_layers=True)
    ir.verify(out)
    same_outputs(mod, out)
    return out


def unchanged(pass_, text, **params):
    mod = parse(text, **params)
    ir.assert_structural_equal(pass_(mod), mod, compare_layers=True)


def test_surgery_passes_are_listed_by_name():
    assert list(SURGERY_PASSES) == ["ConvertSoftmaxAxisChannelToWidth"]


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
