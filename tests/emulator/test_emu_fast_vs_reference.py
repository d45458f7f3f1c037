"""The fast kernel set against the reference set (its definition), driven by the facet registry.

Every op with an ``emulator.fast`` kernel is run through both sets on the cases below (a fast
kernel without a case fails the test, so a new one is covered as soon as it is registered), under
several configs; results are compared byte for byte (signed zeros and NaNs count) where the fast
kernel promises the reference's bits (``Kernel.tolerance`` None), else within its stated
tolerance. Ops without a fast kernel run their reference kernel in the fast set too (checked).
The built-in models run through both sets as well.
"""

from __future__ import annotations


import numpy as np
import pytest

from tidlx.emulator import EmulatorConfig, FAST_SET, REFERENCE_SET, run
from tidlx.emulator.registry import FAST, REFERENCE
from tidlx.ir import Function, IRModule, TensorType, Tuple, Var, call, const, get_op, list_ops
from tidlx.ir.op import ops_with_attr
from tidlx.ir.expr import _dtype_name

RNG = np.random.default_rng(20261201)


def _uniform(shape, dtype="float32", low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape).astype(dtype)


def _special(shape, dtype="float32", nan=True, inf=True):
    """Floats with ties and specials: -0.0, +0.0, +-1, +-inf (and NaN): what bit-identity is about."""
    values = [-0.0, 0.0, -1.0, 1.0, 0.5, -0.5] + ([np.inf, -np.inf] if inf else []) + ([np.nan] if nan else [])
    x = RNG.choice(np.array(values, dtype), size=shape)
    mixed = _uniform(shape, dtype)
    return np.where(RNG.random(shape) < 0.5, x, mixed).astype(dtype)


def _bn_params(c):
    return [_uniform(c), _uniform(c), _uniform(c), _uniform(c, low=0.5, high=2.0)]


def _conv(shape, w_shape, **attrs):
    return ([_uniform(shape), _uniform(w_shape)], attrs)


# op name -> [(arguments (the first is the input, the rest become constants), attributes)]
CASES = {
    "nn.relu": [([_special((2, 3))], {}), ([_special((1, 8, 32, 32))], {}),       # numpy / numba paths
                ([_special((3, 50, 100), "float64")], {}), ([RNG.integers(-5, 5, (4, 6)).astype("int32")], {})],
    "erf": [([_special((3, 5), nan=False)], {}), ([_uniform((1, 4, 32, 32), low=-3, high=3)], {})],
    "nn.batch_norm": [([_special((2, 3, 4, 5), nan=False)] + _bn_params(3), {"epsilon": 1e-3}),
                      ([_uniform((1, 16, 32, 32))] + _bn_params(16), {}),
                      ([_uniform((2, 16, 8, 40))] + _bn_params(16), {"center": False, "scale": False}),
                      ([_uniform((4, 6, 40, 30))] + _bn_params(30), {"axis": -1})],
    "nn.conv2d": [
        _conv((1, 3, 7, 6), (4, 3, 3, 3), padding=(1, 1, 1, 1)),
        _conv((2, 4, 8, 7), (6, 4, 3, 2), strides=(2, 1), padding=(0, 1, 2, 0)),
        _conv((1, 4, 9, 9), (4, 2, 3, 3), strides=(1, 2), padding=(2, 2, 2, 2), dilation=(2, 2), groups=2),
        _conv((1, 6, 6, 5), (6, 1, 3, 3), padding=(1, 0, 1, 2), groups=6),                  # depthwise
        _conv((2, 3, 7, 7), (6, 1, 3, 3), strides=(2, 2), padding=(1, 1, 1, 1), dilation=(1, 2), groups=3),
        _conv((1, 8, 5, 6), (5, 8, 1, 1)),                                                   # 1x1: a matmul
        _conv((1, 8, 7, 6), (4, 8, 1, 1), strides=(2, 2)),
        _conv((1, 16, 24, 24), (16, 16, 3, 3), padding=(1, 1, 1, 1)),                         # Winograd
        _conv((2, 24, 30, 29), (32, 24, 3, 3), padding=(1, 1, 1, 1)),                         # F(4x4, 3x3)
        _conv((1, 64, 7, 7), (64, 64, 3, 3), padding=(1, 1, 1, 1)),                           # tile blocks at 7x7
        _conv((1, 3, 64, 64), (16, 3, 7, 7), strides=(2, 2), padding=(3, 3, 3, 3)),           # im2col in numba
        ([_uniform((1, 9, 10, 8)), _uniform((3, 3, 8, 16))],
         {"padding": (1, 1, 1, 1), "data_layout": "NHWC", "kernel_layout": "HWIO"}),
        ([RNG.integers(-128, 128, (1, 4, 6, 6)).astype("int8"), RNG.integers(-128, 128, (5, 4, 3, 3)).astype("int8")],
         {"padding": (1, 1), "out_dtype": "int32"}),
    ],
    "nn.dense": [([_uniform((1, 1024)), _uniform((1000, 1024))], {}),                  # blocks of rows
                 ([_uniform((2, 300)), _uniform((500, 300))], {}),
                 ([_special((3, 20), nan=False, inf=False), _uniform((7, 20))], {}),
                 ([_special((1, 9), nan=False, inf=False), _uniform((5, 9))], {})],
    "nn.max_pool2d": [
        ([_special((1, 8, 17, 16))], {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}),
        ([_special((2, 3, 9, 10))], {"pool_size": (2, 3), "strides": (2, 2), "ceil_mode": True}),
        ([_special((1, 4, 11, 11))], {"pool_size": (3, 3), "dilation": (2, 2), "padding": (2, 1, 0, 1)}),
        ([_special((1, 12, 10, 5))], {"pool_size": (2, 2), "layout": "NHWC"}),
        ([RNG.integers(-128, 128, (1, 3, 8, 8)).astype("int8")], {"pool_size": (3, 3), "padding": (1, 1)}),
        ([_special((1, 64, 56, 56), nan=False)], {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1)}),
    ],
    "nn.avg_pool2d": [
        ([_special((1, 8, 17, 16), nan=False)], {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}),
        ([_uniform((2, 3, 9, 10))], {"pool_size": (2, 3), "strides": (2, 2), "ceil_mode": True,
                                     "count_include_pad": True, "padding": (1, 0, 1, 1)}),
        ([_uniform((1, 4, 11, 11))], {"pool_size": (3, 3), "dilation": (2, 2), "padding": (2, 1, 0, 1)}),
        ([_uniform((1, 12, 10, 5))], {"pool_size": (2, 2), "layout": "NHWC"}),
        ([RNG.integers(-128, 128, (1, 3, 8, 8)).astype("int8")], {"pool_size": (3, 3), "padding": (1, 1)}),
    ],
    "nn.adaptive_avg_pool2d": [([_special((1, 8, 13, 11), nan=False)], {"output_size": (3, 4)}),
                               ([_uniform((2, 5, 7, 7))], {"output_size": (1, 1)}),
                               ([_uniform((1, 9, 6, 4))], {"output_size": (4, 3), "layout": "NHWC"}),
                               ([RNG.integers(-9, 9, (1, 3, 5, 5)).astype("int32")], {"output_size": (2, 2)})],
    "nn.adaptive_max_pool2d": [([_special((1, 8, 13, 11))], {"output_size": (3, 4)}),
                               ([_special((2, 5, 7, 7))], {"output_size": (1, 1)}),
                               ([RNG.integers(-9, 9, (1, 3, 5, 5)).astype("int32")], {"output_size": (2, 2)})],
    "image.resize2d": [
        ([_special((1, 3, 5, 6), nan=False)], {"size": (10, 12), "method": "linear"}),
        ([_uniform((2, 4, 7, 5))], {"size": (9, 11), "method": "linear", "coordinate_transformation_mode": "align_corners"}),
        ([_uniform((1, 3, 6, 6))], {"size": (13, 8), "method": "cubic", "cubic_alpha": -0.75}),
        ([_uniform((1, 3, 6, 6))], {"size": (4, 9), "method": "cubic", "cubic_exclude": 1,
                                    "coordinate_transformation_mode": "asymmetric"}),
        ([_special((1, 3, 5, 6))], {"size": (10, 12), "method": "nearest_neighbor"}),
        ([_uniform((1, 7, 8, 4))], {"size": (8, 14), "method": "linear", "layout": "NHWC"}),
        ([_uniform((1, 64, 16, 44), "float64")], {"size": (32, 88), "method": "linear"}),
    ],
    "nn.upsampling": [([_uniform((1, 4, 5, 6))], {"scale_h": 2.0, "scale_w": 2.0}),
                      ([_special((1, 4, 5, 6), nan=False)], {"scale_h": 2.0, "scale_w": 2.0, "method": "bilinear",
                                                             "align_corners": True}),
                      ([_uniform((1, 2, 4, 4))], {"scale_h": 3.0, "scale_w": 2.0, "method": "bicubic"})],
    "sigmoid": [([_special((3, 5), nan=False)], {}), ([_uniform((1, 32, 64, 64), low=-30, high=30)], {}),  # numba blocks
                ([_uniform((1, 8, 4, 4), low=-104, high=-80)], {}), ([_uniform((3, 40), "float64", -50, 50)], {})],
    "multiply": [([_special((1, 32, 16, 16)), _special((1, 32, 1, 1), nan=False)], {}),  # squeeze-excite scales
                 ([_uniform((1, 64, 1, 1)), _special((1, 64, 28, 28))], {}),
                 ([_special((2, 48, 7, 7)), _uniform((2, 48, 1, 1))], {}),
                 ([_special((1, 8, 4, 4)), _special((1, 8, 4, 4))], {})],                     # the reference's
    "nn.global_avg_pool2d": [([_special((1, 1152, 7, 7))], {}), ([_special((1, 32, 112, 112))], {}),  # blocks
                             ([_special((2, 5, 3, 43), "float64")], {}), ([_special((1, 6, 1, 5))], {}),
                             ([_uniform((1, 7, 6, 5))], {"layout": "NHWC"}),                   # the reference's
                             ([RNG.integers(-9, 9, (1, 3, 5, 5)).astype("int32")], {})],
}

#: the fast set under each config must keep its promise (bits or tolerance)
CONFIGS = {
    "default": EmulatorConfig(),
    "one-thread": EmulatorConfig(threads=1),
    "pool": EmulatorConfig(parallel="pool"),
    "winograd-2-whole-arrays": EmulatorConfig(winograd="2", tile_blocks=False),
    "winograd-4": EmulatorConfig(winograd="4"),
    "no-winograd-no-fusion": EmulatorConfig(winograd="off", fuse=False),
}


def _type_of(a: np.ndarray) -> TensorType:
    return TensorType(a.shape, _dtype_name(a.dtype))


def one_op_module(op_name, args, attrs) -> IRModule:
    """@main(%x) = op(%x, constants...): the first argument is the input, the others constants."""
    x = Var("x", _type_of(args[0]))
    return IRModule({"main": Function([x], call(op_name, x, *[const(a) for a in args[1:]], **attrs))})


def assert_fast_keeps_its_promise(fast_outs, ref_outs, tolerance, what):
    assert len(fast_outs) == len(ref_outs), what
    for f, r in zip(fast_outs, ref_outs):
        assert f.shape == r.shape and f.dtype == r.dtype, what
        if tolerance is None:
            if f.tobytes() != r.tobytes():
                rows = max(f.size, 1)
                differ = np.count_nonzero((f.view(np.uint8).reshape(rows, -1) != r.view(np.uint8).reshape(rows, -1))
                                          .any(axis=1))
                diff = np.nanmax(np.abs(f.astype(np.float64) - r.astype(np.float64)), initial=0)
                raise AssertionError(f"{what}: not the reference's bits: {differ} of {f.size} elements differ, max "
                                     f"|diff| {diff} (0: signed zeros or NaNs differ)")
        else:
            scale = max(float(np.max(np.abs(r.astype(np.float64)))), 1e-30)
            err = float(np.max(np.abs(f.astype(np.float64) - r.astype(np.float64)))) / scale
            assert err <= tolerance, f"{what}: |fast - reference| / max|reference| = {err:.2e} > {tolerance:.0e}"


def test_every_op_has_a_reference_kernel_and_every_fast_kernel_a_case():
    assert [n for n in list_ops() if not get_op(n).has_attr(REFERENCE)] == []
    missing = sorted(set(ops_with_attr(FAST)) - set(CASES))
    assert missing == [], f"fast kernels without a case in CASES: {missing}"


@pytest.mark.parametrize("config_name", list(CONFIGS))
@pytest.mark.parametrize("op_name", sorted(ops_with_attr(FAST)))
def test_fast_kernel_against_reference(op_name, config_name):
    tolerance = get_op(op_name).get_attr(FAST).tolerance
    for i, (args, attrs) in enumerate(CASES.get(op_name, ())):
        mod = one_op_module(op_name, args, attrs)
        ref = run(mod, {"x": args[0]}, kernels="reference")
        fast = run(mod, {"x": args[0]}, kernels="fast", config=CONFIGS[config_name])
        assert_fast_keeps_its_promise(fast, ref, tolerance, f"{op_name} case {i} ({attrs})")


def test_ops_without_a_fast_kernel_run_their_reference_kernel_in_the_fast_set():
    for name in list_ops():
        op = get_op(name)
        if not op.has_attr(FAST):
            assert FAST_SET.lookup(op).fn is REFERENCE_SET.lookup(op).fn, name


def test_fused_chains_against_reference():
    """conv -> batch_norm -> add -> relu tails (one numba pass) and their epilogues: the reference's bits
    after the conv (the conv's own tolerance aside, so compare against a reference run on the fast conv)."""
    rng = np.random.default_rng(4)
    shape = (1, 32, 40, 40)
    w = rng.normal(0, 0.2, (32, 32, 1, 1)).astype(np.float32)
    other = _special(shape, nan=False, inf=False)
    x = Var("x", TensorType(shape, "float32"))
    from tidlx.ir import TupleGetItem

    y = call("nn.conv2d", x, const(w))
    y = TupleGetItem(call("nn.batch_norm", y, *[const(p) for p in _bn_params(32)]), 0)
    y = call("nn.relu", call("add", y, const(other)))
    z = call("nn.relu", TupleGetItem(call("nn.batch_norm", call("nn.conv2d", x, const(w)),
                                          *[const(p) for p in _bn_params(32)]), 0))
    mod = IRModule({"main": Function([x], Tuple([y, z]))})
    image = _special(shape, nan=False, inf=False)
    fused = run(mod, {"x": image}, config=EmulatorConfig(fuse=True))
    unfused = run(mod, {"x": image}, config=EmulatorConfig(fuse=False))
    ref = run(mod, {"x": image}, kernels="reference")
    for f, u, r in zip(fused, unfused, ref):
        assert f.tobytes() == u.tobytes()
        assert np.max(np.abs(f - r)) <= 3e-5 * np.max(np.abs(r))


MODEL_TOLERANCE = 1e-4  # max |fast - reference| / max |reference| over a whole model (Winograd, BLAS order)


def _model_outputs(model, seed=0):
    from tidlx.frontends.onnx import from_onnx

    dims = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    feeds = {model.graph.input[0].name: np.random.default_rng(seed).standard_normal(dims, dtype=np.float32)}
    mod = from_onnx(model)
    fast = run(mod, feeds)
    ref = run(mod, feeds, kernels="reference")
    return fast, ref


@pytest.mark.parametrize("tiny", [True, False], ids=["tiny", "full-size"])
def test_builtin_bevdet_fast_against_reference(tiny):
    from tidlx.models import bevdet_img_stage

    fast, ref = _model_outputs(bevdet_img_stage(backbone="resnet18", batch=1, tiny=tiny))
    assert len(fast) == len(ref) == 2
    for f, r in zip(fast, ref):
        assert f.shape == r.shape and f.dtype == r.dtype and np.all(np.isfinite(f))
        err = float(np.max(np.abs(f.astype(np.float64) - r))) / float(np.max(np.abs(r)))
        assert err <= MODEL_TOLERANCE, err
