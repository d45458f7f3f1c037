"""The ONNX backend node test suite, run through tidlx: import with ``from_onnx``, run on the float
emulator, compare with ONNX's expected outputs (onnx 1.23.2 builds the cases in memory).

Every case of the ops in OPS is included: a single node of the op (all of ``case/node/conv.py``,
so ``test_basic_conv_*`` too), or the ``*_expanded`` function-body variant of such a case; cases
of other ops are not loaded. Each must pass, except those in EXPECTED_FAILURES (strict: a listed
case that passes fails the suite, so the list stays true). docs/onnx-backend-tests.md mirrors
the list and the pass count.
"""

from __future__ import annotations

import importlib
import re
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.backend.base import Backend, BackendRep
from onnx.backend.test.runner import Runner

import tidlx.emulator
from tidlx.frontends.onnx import from_onnx, static_inputs
from tidlx.ir import TidlxError

#: The ONNX case modules (onnx/backend/test/case/node/<name>.py) of the ops tidlx imports.
CASE_MODULES = (
    "abs", "add", "argmax", "averagepool", "batch_normalization", "cast", "clip", "concat", "constant",
    "constantofshape", "conv", "convinteger", "convtranspose", "deformconv", "depthtospace", "dequantizelinear", "div",
    "dropout", "dynamicquantizelinear", "erf", "exp", "expand", "flatten", "gather", "gelu", "gemm",
    "globalaveragepool", "globalmaxpool", "hardsigmoid", "hardswish", "identity", "if_", "layernormalization",
    "leakyrelu", "log", "lstm", "matmul", "matmulinteger", "max", "maxpool", "min", "mul", "neg", "pad", "pow",
    "prelu", "qlinearconv", "qlinearmatmul", "quantizelinear", "reducemax", "reducemean", "reducemin", "reducesum",
    "relu", "reshape", "resize", "scatternd", "shape", "sigmoid", "slice", "softmax", "spacetodepth", "split", "sqrt",
    "squeeze", "sub", "tanh", "tile", "topk", "transpose", "unsqueeze", "upsample", "where",
)

#: The ONNX ops whose cases run.
OPS = frozenset({
    "Abs", "Add", "ArgMax", "AveragePool", "BatchNormalization", "Cast", "Clip", "Concat", "Constant",
    "ConstantOfShape", "Conv", "ConvInteger", "ConvTranspose", "DeformConv", "DepthToSpace", "DequantizeLinear", "Div",
    "Dropout", "DynamicQuantizeLinear", "Erf", "Exp", "Expand", "Flatten", "Gather", "Gelu", "Gemm",
    "GlobalAveragePool", "GlobalMaxPool", "HardSigmoid", "HardSwish", "Identity", "If", "LSTM", "LayerNormalization",
    "LeakyRelu", "Log", "MatMul", "MatMulInteger", "Max", "MaxPool", "Min", "Mul", "Neg", "PRelu", "Pad", "Pow",
    "QLinearConv", "QLinearMatMul", "QuantizeLinear", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum", "Relu",
    "Reshape", "Resize", "ScatterND", "Shape", "Sigmoid", "Slice", "Softmax", "SpaceToDepth", "Split", "Sqrt",
    "Squeeze", "Sub", "Tanh", "Tile", "TopK", "Transpose", "Unsqueeze", "Upsample", "Where",
})

# Why a case is expected to fail; each reason is a limit of tidlx (IR, emulator or importer scope).
_NARROW_TYPES = "float8, float4 and 2-/4-bit integer types have no IR dtype"
_3D = "3-D convolution and pooling: the IR has 2-D ops only (1-D ones are imported as 2-D)"
_TRAINING = "training mode (random dropout, batch statistics): tidlx imports inference graphs only"
_BLOCKED = "blocked quantization (block_size > 0) has no QNN equivalent"
_UINT16 = "QNN ops take int8, uint8 or int16 quantized data, not uint16"
_NON_TENSOR = "sequence and optional values: the IR has tensors and tuples only"
_ARGMAX = "MaxPool's Indices output (argmax) has no IR op"
_ZERO_SIZE = "zero-size tensors (an empty slice, split or reduction) are not supported by the IR"
_SCALE_MAPPING = ("image.resize2d maps coordinates with the ratio of the sizes (as TVM); ONNX uses the given "
                  "scale, which differs when input size x scale is not a whole number")
_ANTIALIAS = "antialiased downsampling has no image.resize2d equivalent"
_SYMMETRIC = "coordinate_transformation_mode 'half_pixel_symmetric' has no image.resize2d equivalent"
_MASK = ("a DeformConv modulation mask (DCNv2) has no IR equivalent: nn.deformable_conv2d is Relay's DCNv1 (the "
         "reference kernel itself takes a mask and passes this case, tests/emulator/test_emu_deformable_conv.py)")
_LSTM_FORMS = "nn.lstm is ONNX's LSTM with layout 0 and no peepholes: batch-first layout and peephole weights are refused"

#: reason -> the cases it explains. Kept in sync with docs/onnx-backend-tests.md.
_EXPECTED_FAILURES_BY_REASON = {
    _3D: (
        "test_averagepool_3d_default",
        "test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_False",
        "test_averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_True",
        "test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_False",
        "test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True",
        "test_averagepool_3d_dilations_small", "test_convtranspose_3d", "test_maxpool_3d_default",
        "test_maxpool_3d_dilations", "test_maxpool_3d_dilations_use_ref_impl",
        "test_maxpool_3d_dilations_use_ref_impl_large",
    ),
    _TRAINING: (
        "test_batchnorm_epsilon_training_mode", "test_batchnorm_example_training_mode", "test_training_dropout",
        "test_training_dropout_default", "test_training_dropout_default_mask", "test_training_dropout_mask",
        "test_training_dropout_zero_ratio", "test_training_dropout_zero_ratio_mask",
    ),
    _NARROW_TYPES: (
        "test_cast_FLOAT16_to_FLOAT4E2M1", "test_cast_FLOAT16_to_FLOAT8E4M3FN",
        "test_cast_FLOAT16_to_FLOAT8E4M3FNUZ", "test_cast_FLOAT16_to_FLOAT8E5M2",
        "test_cast_FLOAT16_to_FLOAT8E5M2FNUZ", "test_cast_FLOAT16_to_INT2", "test_cast_FLOAT16_to_INT4",
        "test_cast_FLOAT16_to_UINT2", "test_cast_FLOAT16_to_UINT4", "test_cast_FLOAT4E2M1_to_FLOAT",
        "test_cast_FLOAT4E2M1_to_FLOAT16", "test_cast_FLOAT8E4M3FNUZ_to_FLOAT",
        "test_cast_FLOAT8E4M3FNUZ_to_FLOAT16", "test_cast_FLOAT8E4M3FN_to_FLOAT",
        "test_cast_FLOAT8E4M3FN_to_FLOAT16", "test_cast_FLOAT8E5M2FNUZ_to_FLOAT",
        "test_cast_FLOAT8E5M2FNUZ_to_FLOAT16", "test_cast_FLOAT8E5M2_to_FLOAT", "test_cast_FLOAT8E5M2_to_FLOAT16",
        "test_cast_FLOAT_to_FLOAT4E2M1", "test_cast_FLOAT_to_FLOAT8E4M3FN", "test_cast_FLOAT_to_FLOAT8E4M3FNUZ",
        "test_cast_FLOAT_to_FLOAT8E5M2", "test_cast_FLOAT_to_FLOAT8E5M2FNUZ", "test_cast_FLOAT_to_INT2",
        "test_cast_FLOAT_to_INT4", "test_cast_FLOAT_to_UINT2", "test_cast_FLOAT_to_UINT4",
        "test_cast_INT2_to_FLOAT", "test_cast_INT2_to_FLOAT16", "test_cast_INT2_to_INT8", "test_cast_INT4_to_FLOAT",
        "test_cast_INT4_to_FLOAT16", "test_cast_INT4_to_INT8", "test_cast_UINT2_to_FLOAT",
        "test_cast_UINT2_to_FLOAT16", "test_cast_UINT2_to_UINT8", "test_cast_UINT4_to_FLOAT",
        "test_cast_UINT4_to_FLOAT16", "test_cast_UINT4_to_UINT8", "test_cast_e8m0_FLOAT16_to_FLOAT8E8M0",
        "test_cast_e8m0_FLOAT8E8M0_to_FLOAT", "test_cast_e8m0_FLOAT8E8M0_to_FLOAT16",
        "test_cast_e8m0_FLOAT_to_FLOAT8E8M0", "test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FN",
        "test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ", "test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2",
        "test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ", "test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FN",
        "test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ", "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2",
        "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ", "test_dequantizelinear_e4m3fn",
        "test_dequantizelinear_e4m3fn_float16", "test_dequantizelinear_e4m3fn_zero_point",
        "test_dequantizelinear_e5m2", "test_dequantizelinear_float4e2m1", "test_dequantizelinear_int2",
        "test_dequantizelinear_int4", "test_dequantizelinear_uint2", "test_dequantizelinear_uint4",
        "test_quantizelinear_e4m3fn", "test_quantizelinear_e5m2", "test_quantizelinear_float4e2m1",
        "test_quantizelinear_int2", "test_quantizelinear_int4", "test_quantizelinear_uint2",
        "test_quantizelinear_uint4",
    ),
    _BLOCKED: (
        "test_dequantizelinear_blocked", "test_quantizelinear_blocked_asymmetric",
        "test_quantizelinear_blocked_symmetric",
    ),
    _UINT16: (
        "test_dequantizelinear_uint16", "test_quantizelinear_uint16",
    ),
    _NON_TENSOR: (
        "test_identity_opt", "test_identity_sequence", "test_if_opt", "test_if_seq",
    ),
    _ARGMAX: (
        "test_maxpool_with_argmax_2d_precomputed_pads", "test_maxpool_with_argmax_2d_precomputed_strides",
    ),
    _ZERO_SIZE: (
        "test_reduce_max_empty_set", "test_reduce_max_empty_set_bool", "test_reduce_min_empty_set",
        "test_slice_start_out_of_bounds", "test_split_zero_size_splits_opset13",
        "test_split_zero_size_splits_opset18",
    ),
    _SCALE_MAPPING: (
        "test_resize_downsample_scales_cubic", "test_resize_downsample_scales_cubic_A_n0p5_exclude_outside",
        "test_resize_downsample_scales_cubic_align_corners", "test_resize_downsample_scales_linear",
        "test_resize_downsample_scales_linear_align_corners",
    ),
    _ANTIALIAS: (
        "test_resize_downsample_scales_cubic_antialias", "test_resize_downsample_scales_linear_antialias",
        "test_resize_downsample_sizes_cubic_antialias", "test_resize_downsample_sizes_linear_antialias",
    ),
    _SYMMETRIC: (
        "test_resize_downsample_scales_linear_half_pixel_symmetric",
        "test_resize_upsample_scales_linear_half_pixel_symmetric",
    ),
    _MASK: (
        "test_deform_conv_with_mask_bias",
    ),
    _LSTM_FORMS: (
        "test_lstm_batchwise", "test_lstm_with_peepholes",
    ),
}
EXPECTED_FAILURES = {name: reason for reason, names in _EXPECTED_FAILURES_BY_REASON.items() for name in names}

#: How an expected failure must fail: a clear tidlx error, except where tidlx computes other numbers.
_FAILS_WITH = {_SCALE_MAPPING: AssertionError}


def _load_cases():
    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators divide by zero on purpose
        for name in CASE_MODULES:
            importlib.import_module(f"onnx.backend.test.case.node.{name}")
    # Keep the cases of those modules' ops (other test files may have loaded more): a case is a
    # single node of the op, or "<case>_expanded[_verN]", the function body of one.
    op_of = {c.name: c.model.graph.node[0].op_type for c in node_cases._NodeTestCases
             if len(c.model.graph.node) == 1}
    cases = {}
    for c in node_cases._NodeTestCases:
        base = re.sub(r"_expanded(_ver\d+)?$", "", c.name)
        if op_of.get(base) in OPS:
            cases[c.name] = c
    return list(cases.values())


class TidlxBackendRep(BackendRep):
    """Imports when run: inputs that give shapes, axes, pads or scales are bound to the run's
    values as constants (tidlx imports static models only)."""

    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.static = set(static_inputs(model))
        inits = {i.name for i in model.graph.initializer}
        self.input_names = [vi.name for vi in model.graph.input if vi.name not in inits]

    def run(self, inputs, **kwargs):
        mod, values = self.import_with(inputs)
        return tidlx.emulator.run(mod, values)

    def import_with(self, inputs):
        """(module, its runtime inputs by name): the model imported with the static inputs bound."""
        values = dict(zip(self.input_names, inputs))
        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        for name in self.static:
            model.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(values.pop(name)), name))
        return from_onnx(model), values


class TidlxBackend(Backend):
    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        super().prepare(model, device, **kwargs)
        return TidlxBackendRep(model)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


def _to_array(x):
    return onnx.numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x


CASES = _load_cases()


def _params():
    out = []
    for case in sorted(CASES, key=lambda c: c.name):
        marks = []
        if case.name in EXPECTED_FAILURES:
            reason = EXPECTED_FAILURES[case.name]
            marks.append(pytest.mark.xfail(reason=reason, strict=True, raises=_FAILS_WITH.get(reason, TidlxError)))
        out.append(pytest.param(case, id=case.name, marks=marks))
    return out


@pytest.mark.parametrize("case", _params())
def test_node(case):
    rep = TidlxBackend.prepare(case.model, "CPU")
    for inputs, expected in case.data_sets:
        outputs = rep.run([_to_array(x) for x in inputs])
        Runner.assert_similar_outputs([_to_array(x) for x in expected], outputs, rtol=case.rtol, atol=case.atol)


def test_expected_failures_name_real_cases():
    names = {c.name for c in CASES}
    unknown = sorted(set(EXPECTED_FAILURES) - names)
    assert not unknown, f"EXPECTED_FAILURES lists cases that do not exist: {unknown}"


def test_docs_mirror_expected_failures():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "onnx-backend-tests.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^- `(test_\w+)`$", doc, flags=re.M))
    assert listed == set(EXPECTED_FAILURES), (
        f"docs/onnx-backend-tests.md differs from EXPECTED_FAILURES: only in the doc "
        f"{sorted(listed - set(EXPECTED_FAILURES))}, only in the test {sorted(set(EXPECTED_FAILURES) - listed)}")
    passing = len(CASES) - len(EXPECTED_FAILURES)
    assert f"**{passing} of {len(CASES)} cases pass; {len(EXPECTED_FAILURES)} are expected failures**" in doc
    for reason in _EXPECTED_FAILURES_BY_REASON:
        assert reason[0].upper() + reason[1:] in doc, f"reason not in the doc: {reason}"
