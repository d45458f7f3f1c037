"""Fusions as named steps (composites.FUSIONS, the option disabled_fusions) and check_fusions."""

import numpy as np
import pytest

import tidlx.ir as ir
from tidlx.backends.tidl.composites import FUSIONS, find_composites, group_fusions
from tidlx.backends.tidl.options import OptionError, TidlOptions
from tidlx.ir import TensorType, Var, const
from tidlx.ir.expr import Function, TupleGetItem


def _var(name, shape):
    return Var(name, TensorType(shape, "float32"))


def _c(*shape, start=1.0):
    return const((np.arange(int(np.prod(shape)), dtype="float32").reshape(shape) * 0.01 + start).astype("float32"))


def conv_bias_bn_relu():
    x = _var("x", (1, 3, 8, 8))
    c = ir.call("nn.conv2d", x, _c(4, 3, 3, 3), padding=(1, 1), layer="conv")
    b = ir.call("nn.bias_add", c, _c(4), layer="conv")
    bn = TupleGetItem(ir.call("nn.batch_norm", b, _c(4), _c(4), _c(4), _c(4), layer="bn"), 0)
    r = ir.call("nn.relu", bn, layer="relu")
    return Function([x], r)


def _shapes(groups):
    return [(g.name, tuple(c.op_name for c in g.calls)) for g in groups]


def test_all_fusions_on_is_one_conv_layer_with_every_fusion():
    (g,) = find_composites(conv_bias_bn_relu())
    assert g.name == "conv2d_bn_act"
    spec_match = g  # the group's own pattern performs all three fusions
    from tidlx.backends.tidl.composites import composite_specs
    spec = next(s for s in composite_specs() if s.name == spec_match.name)
    assert group_fusions(spec.name, spec.pattern.match(g.root).names) == tuple(FUSIONS)


@pytest.mark.parametrize("off, expected", [
    ("FuseActivation", [("conv2d_bn", ("nn.conv2d", "nn.bias_add", "nn.batch_norm"))]),
    ("FuseBatchNormIntoConv", [("conv2d_bias", ("nn.conv2d", "nn.bias_add")),
                               ("batch_norm_act", ("nn.batch_norm", "nn.relu"))]),
    ("FuseBiasIntoConv", [("batch_norm_act", ("nn.batch_norm", "nn.relu"))]),
])
def test_a_switched_off_fusion_splits_only_that_fusion(off, expected):
    groups = find_composites(conv_bias_bn_relu(), disabled_fusions=[off])
    assert _shapes(groups) == expected  # the calls left out are layers of their own (tidl.<op>)


def test_a_fusion_switched_off_at_one_layer_only():
    fn = conv_bias_bn_relu()
    assert _shapes(find_composites(fn, disabled_fusions=["FuseActivation:other"])) == \
        [("conv2d_bn_act", ("nn.conv2d", "nn.bias_add", "nn.batch_norm", "nn.relu"))]
    # named by the relu's layer: the relu joins no group (not even the BN's, as a plain anchor check would allow)
    assert _shapes(find_composites(fn, disabled_fusions=["FuseActivation:relu"])) == \
        [("conv2d_bn", ("nn.conv2d", "nn.bias_add", "nn.batch_norm"))]
    assert _shapes(find_composites(fn, disabled_fusions=["FuseBatchNormIntoConv:bn"])) == \
        [("conv2d_bias", ("nn.conv2d", "nn.bias_add")), ("batch_norm_act", ("nn.batch_norm", "nn.relu"))]


def test_disabled_fusions_option():
    assert TidlOptions().disabled_fusions == ()
    opts = TidlOptions.from_dict({"disabled_fusions": "FuseActivation, FuseBiasIntoConv:/c/Conv"})
    assert opts.disabled_fusions == ("FuseActivation", "FuseBiasIntoConv:/c/Conv")
    with pytest.raises(OptionError, match=r"'FuseActivaton' is not a composite fusion; did you mean FuseActivation"):
        TidlOptions.from_dict({"disabled_fusions": "FuseActivaton"})
