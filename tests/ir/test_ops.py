"""Type relations of the op registry: output types, Relay's special cases, and refused calls."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidlx.ir import OpAttributeError, TensorType, TidlxTypeError, Tuple, TupleType, Var, call, const, get_op
from tidlx.ir import list_ops
from tidlx.ir.op import PATTERNS


def var(shape, dtype="float32", name="x"):
    return Var(name, TensorType(shape, dtype))


def out(name, *args, **attrs):
    return call(name, *args, **attrs).checked_type


def shape_of_out(name, *args, **attrs):
    t = out(name, *args, **attrs)
    assert isinstance(t, TensorType), t
    return t.shape


def refused(match, name, *args, **attrs):
    with pytest.raises(TidlxTypeError, match=match):
        call(name, *args, **attrs).checked_type


def scalar(value, dtype):
    return const(np.array(value, dtype=dtype))


# --- the registry itself ---------------------------------------------------------------------

REQUIRED = """
nn.conv2d nn.conv2d_transpose nn.dense nn.matmul nn.batch_matmul nn.bias_add nn.batch_norm nn.relu
nn.leaky_relu nn.prelu clip sigmoid tanh exp log sqrt rsqrt erf negative abs nn.softmax nn.log_softmax
nn.max_pool2d nn.avg_pool2d nn.global_avg_pool2d nn.global_max_pool2d nn.adaptive_avg_pool2d nn.pad
nn.batch_flatten nn.layer_norm nn.depth_to_space nn.space_to_depth nn.dropout nn.upsampling add subtract
multiply divide maximum minimum power reshape transpose squeeze expand_dims concatenate stack split
strided_slice take image.resize2d mean sum max min prod argmax argmin cast copy where zeros_like ones_like
scatter_nd broadcast_to tile shape_of layout_transform gather reverse qnn.quantize qnn.dequantize
qnn.requantize qnn.conv2d qnn.dense qnn.add qnn.mul qnn.concatenate equal not_equal less less_equal greater
greater_equal
""".split()


def test_required_ops_are_registered():
    missing = [name for name in REQUIRED if name not in list_ops()]
    assert missing == []


@pytest.mark.parametrize("name", list_ops())
def test_every_op_is_well_formed(name):
    op = get_op(name)
    assert op.pattern in PATTERNS
    assert op.num_inputs >= 0
    assert len(op.arg_names) == op.num_inputs
    if op.attrs_type is not None:
        assert dataclasses.is_dataclass(op.attrs_type)
        assert op.attrs_type.__dataclass_params__.frozen
        defaults = op.make_attrs()  # every field has a default, as in TVM
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(defaults, dataclasses.fields(defaults)[0].name, 0)
        hash(defaults)


def test_attribute_lists_become_tuples_and_ints_become_one_tuples():
    x = var((1, 3, 4, 4))
    assert call("mean", x, axis=1).attrs == call("mean", x, axis=[1]).attrs
    assert call("nn.pad", x, const(0.0), pad_width=[[0, 0]] * 4).attrs.pad_width == ((0, 0),) * 4
    assert call("nn.conv2d", x, var((8, 3, 3, 3)), padding=1).attrs.padding == (1,)


def test_unknown_attribute_is_refused_with_a_hint():
    with pytest.raises(OpAttributeError, match="did you mean padding"):
        call("nn.conv2d", var((1, 3, 4, 4)), var((8, 3, 3, 3)), paddin=[1, 1])


def test_type_error_names_op_and_layer():
    x, w = var((1, 4, 8, 8)), var((8, 3, 3, 3))
    with pytest.raises(TidlxTypeError, match=r"nn\.conv2d 'stem\.conv'.*4 channels"):
        call("nn.conv2d", x, w, layer="stem.conv").checked_type


def test_tensor_inputs_are_required():
    x = var((2, 2))
    refused("must be a tensor", "nn.relu", Tuple([x, x]))


# --- element-wise ----------------------------------------------------------------------------

def test_binary_broadcast_and_compare():
    assert shape_of_out("add", var((2, 1, 4)), var((3, 1))) == (2, 3, 4)
    assert out("less", var((2, 3)), var((3,))) == TensorType((2, 3), "bool")
    refused("do not broadcast", "multiply", var((2, 3)), var((4,)))
    refused("different dtypes", "add", var((2,)), var((2,), "int32"))


def test_unary_cast_clip_where_prelu():
    x = var((2, 3))
    assert out("sigmoid", x) == TensorType((2, 3))
    assert out("cast", x, dtype="int8") == TensorType((2, 3), "int8")
    refused("not a known dtype", "cast", x, dtype="int7")
    refused("a_min=2.0 is greater", "clip", x, a_min=2.0, a_max=1.0)
    assert out("where", var((2, 1), "bool"), x, var((3,))) == TensorType((2, 3))
    assert out("nn.prelu", var((1, 4, 2, 2)), var((4,))) == TensorType((1, 4, 2, 2))
    refused(r"alpha must have shape \(4,\)", "nn.prelu", var((1, 4, 2, 2)), var((3,)))
    refused("out of range", "nn.prelu", var((1, 4)), var((4,)), axis=2)
    refused("must have dtype bool", "logical_not", x)


# --- convolution -----------------------------------------------------------------------------

@pytest.mark.parametrize("padding, expected_hw", [
    ((1,), (8, 8)),            # one value: all sides
    ((1, 2), (8, 10)),         # (top/bottom, left/right)
    ((1, 0, 0, 2), (7, 8)),    # (top, left, bottom, right)
    ((0, 0), (6, 6)),
])
def test_conv2d_padding_forms(padding, expected_hw):
    t = out("nn.conv2d", var((1, 3, 8, 8)), var((16, 3, 3, 3)), padding=padding)
    assert t == TensorType((1, 16) + expected_hw)


def test_conv2d_strides_dilation_groups_layouts():
    x = var((2, 8, 15, 15))
    assert shape_of_out("nn.conv2d", x, var((4, 8, 3, 3)), strides=[2, 2], padding=[1, 1]) == (2, 4, 8, 8)
    assert shape_of_out("nn.conv2d", x, var((4, 8, 3, 3)), dilation=[2, 2]) == (2, 4, 11, 11)
    # depthwise: groups == channels, weight (C, 1, kh, kw)
    assert shape_of_out("nn.conv2d", x, var((8, 1, 3, 3)), groups=8, padding=[1, 1]) == (2, 8, 15, 15)
    assert shape_of_out("nn.conv2d", x, var((6, 4, 1, 1)), groups=2) == (2, 6, 15, 15)
    nhwc = out("nn.conv2d", var((1, 9, 9, 3)), var((3, 3, 3, 16)), data_layout="NHWC", kernel_layout="HWIO",
               strides=[2, 2])
    assert nhwc == TensorType((1, 4, 4, 16))
    mixed = out("nn.conv2d", var((1, 3, 9, 9)), var((16, 3, 3, 3)), out_layout="NHWC", out_dtype="float16")
    assert mixed == TensorType((1, 7, 7, 16), "float16")


def test_conv2d_refusals():
    x = var((1, 8, 8, 8))
    refused("8 channels but weight expects 3 x groups 1", "nn.conv2d", x, var((4, 3, 3, 3)))
    refused("not divisible by groups 4", "nn.conv2d", x, var((6, 2, 3, 3)), groups=4)
    refused("kernel_size=", "nn.conv2d", x, var((4, 8, 3, 3)), kernel_size=[5, 5])
    refused("channels=5", "nn.conv2d", x, var((4, 8, 3, 3)), channels=5)
    refused("output would be empty", "nn.conv2d", var((1, 8, 2, 2)), var((4, 8, 3, 3)))
    refused("must be 4-D", "nn.conv2d", var((8, 8, 8)), var((4, 8, 3, 3)))
    refused("data_layout 'NCWH?' is not supported|data_layout 'NCDW'", "nn.conv2d", x, var((4, 8, 3, 3)),
            data_layout="NCDW")
    refused("padding must have 1, 2 or 4", "nn.conv2d", x, var((4, 8, 3, 3)), padding=[1, 1, 1])
    refused("strides must be a positive", "nn.conv2d", x, var((4, 8, 3, 3)), strides=[0, 1])


def test_conv2d_transpose():
    x = var((1, 8, 5, 5))
    # default IOHW: (in, out/groups, kh, kw)
    assert shape_of_out("nn.conv2d_transpose", x, var((8, 4, 4, 4)), strides=[2, 2], padding=[1, 1]) \
        == (1, 4, 10, 10)
    assert shape_of_out("nn.conv2d_transpose", x, var((8, 4, 3, 3)), strides=[2, 2], padding=[1, 1],
                        output_padding=[1, 1]) == (1, 4, 10, 10)
    assert shape_of_out("nn.conv2d_transpose", x, var((8, 2, 3, 3)), groups=2) == (1, 4, 7, 7)
    assert shape_of_out("nn.conv2d_transpose", x, var((4, 8, 2, 2)), kernel_layout="OIHW",
                        strides=[2, 2]) == (1, 4, 10, 10)
    refused("output_padding", "nn.conv2d_transpose", x, var((8, 4, 3, 3)), strides=[2, 2], output_padding=[2, 2])
    refused("8 channels but the weight", "nn.conv2d_transpose", x, var((4, 8, 3, 3)))


# --- dense / matmul --------------------------------------------------------------------------

def test_dense_matmul_batch_matmul():
    assert shape_of_out("nn.dense", var((2, 5, 16)), var((10, 16))) == (2, 5, 10)
    refused("16 features but weight expects 12", "nn.dense", var((2, 16)), var((10, 12)))
    refused("units=3", "nn.dense", var((2, 16)), var((10, 16)), units=3)
    assert shape_of_out("nn.matmul", var((4, 6)), var((6, 3))) == (4, 3)
    assert shape_of_out("nn.matmul", var((6, 4)), var((3, 6)), transpose_a=True, transpose_b=True) == (4, 3)
    refused("reduction sizes differ", "nn.matmul", var((4, 6)), var((3, 6)))
    assert shape_of_out("nn.batch_matmul", var((2, 4, 6)), var((2, 5, 6))) == (2, 4, 5)
    assert shape_of_out("nn.batch_matmul", var((1, 4, 6)), var((3, 6, 5)), transpose_b=False) == (3, 4, 5)
    assert out("nn.batch_matmul", var((2, 4, 6), "int8"), var((2, 5, 6), "int8"), out_dtype="int32").dtype == "int32"
    refused("batch sizes 2 and 3", "nn.batch_matmul", var((2, 4, 6)), var((3, 5, 6)))
    refused("must be 3-D", "nn.batch_matmul", var((4, 6)), var((2, 5, 6)))


# --- bias, normalization, softmax ------------------------------------------------------------

def test_bias_add_and_norms():
    x = var((1, 4, 3, 3))
    assert out("nn.bias_add", x, var((4,))) == x.checked_type
    assert out("nn.bias_add", var((1, 3, 3, 4)), var((4,)), axis=-1) == TensorType((1, 3, 3, 4))
    refused(r"bias must have shape \(4,\)", "nn.bias_add", x, var((3,)))
    vec = var((4,))
    bn = out("nn.batch_norm", x, vec, vec, vec, vec)
    assert bn == TupleType((x.checked_type, TensorType((4,)), TensorType((4,))))
    refused("moving_var must have shape", "nn.batch_norm", x, vec, vec, vec, var((5,)))
    seq = var((2, 7, 32))
    assert out("nn.layer_norm", seq, var((32,)), var((32,))) == seq.checked_type
    refused(r"gamma must have shape \(32,\)", "nn.layer_norm", seq, var((7,)), var((32,)))
    refused("not divisible by num_groups 3", "nn.group_norm", x, vec, vec, num_groups=3)


def test_softmax():
    x = var((2, 10))
    assert out("nn.softmax", x) == x.checked_type
    assert out("nn.log_softmax", x, axis=0) == x.checked_type
    refused("axis 2 is out of range for rank 2", "nn.softmax", x, axis=2)


# --- pooling ---------------------------------------------------------------------------------

@pytest.mark.parametrize("ceil_mode, expected", [(False, 2), (True, 3)])
def test_max_pool_ceil_mode(ceil_mode, expected):
    t = out("nn.max_pool2d", var((1, 2, 6, 6)), pool_size=[3, 3], strides=[2, 2], ceil_mode=ceil_mode)
    assert t == TensorType((1, 2, expected, expected))


def test_pool_padding_dilation_layouts():
    x = var((1, 64, 112, 112))
    assert shape_of_out("nn.max_pool2d", x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1]) == (1, 64, 56, 56)
    assert shape_of_out("nn.avg_pool2d", x, pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 1, 1],
                        count_include_pad=True) == (1, 64, 56, 56)
    assert shape_of_out("nn.max_pool2d", var((1, 1, 7, 7)), pool_size=[3, 3], dilation=[2, 2]) == (1, 1, 3, 3)
    assert shape_of_out("nn.max_pool2d", var((1, 8, 8, 3)), pool_size=[2, 2], strides=[2, 2],
                        layout="NHWC") == (1, 4, 4, 3)
    assert shape_of_out("nn.global_avg_pool2d", x) == (1, 64, 1, 1)
    assert shape_of_out("nn.global_max_pool2d", var((1, 7, 7, 5)), layout="NHWC") == (1, 1, 1, 5)
    assert shape_of_out("nn.adaptive_avg_pool2d", x, output_size=[7, 5]) == (1, 64, 7, 5)
    assert shape_of_out("nn.adaptive_avg_pool2d", x, output_size=[1]) == (1, 64, 1, 1)
    assert shape_of_out("nn.adaptive_avg_pool2d", x) == (1, 64, 112, 112)


def test_pool_refusals():
    refused("larger than the padded input", "nn.max_pool2d", var((1, 1, 2, 2)), pool_size=[3, 3])
    refused("must have unsplit H and W", "nn.max_pool2d", var((1, 1, 4, 4)), pool_size=[2, 2], layout="NCDW")
    refused("rank 3 but layout 'NCHW'", "nn.avg_pool2d", var((1, 4, 4)), pool_size=[2, 2])
    refused("pool_size must have 2 values", "nn.max_pool2d", var((1, 1, 4, 4)), pool_size=[2, 2, 2])
    refused("output_size must have 1 or 2", "nn.adaptive_avg_pool2d", var((1, 1, 4, 4)), output_size=[1, 2, 3])


# --- pad, flatten, pixel shuffles, dropout, upsampling ------------------------------------------

def test_pad():
    x = var((1, 3, 4, 5))
    t = out("nn.pad", x, const(0.0), pad_width=[[0, 0], [0, 0], [1, 1], [2, 0]])
    assert t == TensorType((1, 3, 6, 7))
    assert shape_of_out("nn.pad", x, const(0.0), pad_width=[[0, 0], [0, 0], [3, 3], [4, 4]],
                        pad_mode="edge") == (1, 3, 10, 13)
    refused("pad_value must be a scalar", "nn.pad", x, const([0.0]), pad_width=[[0, 0]] * 4)
    refused("one \\[before, after\\] pair per axis", "nn.pad", x, const(0.0), pad_width=[[1, 1]] * 3)
    refused("is negative", "nn.pad", x, const(0.0), pad_width=[[0, 0], [0, 0], [-1, 0], [0, 0]])
    refused("reflect padding", "nn.pad", x, const(0.0), pad_width=[[0, 0], [0, 0], [4, 0], [0, 0]],
            pad_mode="reflect")
    refused("pad_mode='wrap'", "nn.pad", x, const(0.0), pad_width=[[0, 0]] * 4, pad_mode="wrap")


def test_flatten_pixel_shuffles_dropout():
    assert shape_of_out("nn.batch_flatten", var((2, 3, 4, 5))) == (2, 60)
    assert shape_of_out("nn.depth_to_space", var((1, 16, 3, 5)), block_size=2) == (1, 4, 6, 10)
    assert shape_of_out("nn.depth_to_space", var((1, 3, 5, 18)), block_size=3, layout="NHWC", mode="CRD") \
        == (1, 9, 15, 2)
    assert shape_of_out("nn.space_to_depth", var((1, 4, 6, 10)), block_size=2) == (1, 16, 3, 5)
    refused("not divisible by block_size\\^2 = 4", "nn.depth_to_space", var((1, 6, 3, 3)), block_size=2)
    refused("divisible by block_size 2", "nn.space_to_depth", var((1, 4, 5, 6)), block_size=2)
    refused("mode='XYZ'", "nn.depth_to_space", var((1, 4, 3, 3)), block_size=2, mode="XYZ")
    x = var((2, 8))
    assert out("nn.dropout", x) == TupleType((x.checked_type, x.checked_type))
    refused("rate=1.5", "nn.dropout", x, rate=1.5)


def test_upsampling_rounds_half_away_from_zero():
    assert shape_of_out("nn.upsampling", var((1, 2, 4, 3)), scale_h=2.0, scale_w=2.0) == (1, 2, 8, 6)
    # 1 * 2.5 = 2.5 rounds to 3 (TVM's round), not 2 (Python's banker's rounding)
    assert shape_of_out("nn.upsampling", var((1, 2, 1, 1)), scale_h=2.5, scale_w=1.5) == (1, 2, 3, 2)
    assert shape_of_out("nn.upsampling", var((1, 4, 4, 2)), scale_h=2.0, scale_w=3.0, layout="NHWC") \
        == (1, 8, 12, 2)
    refused("scales must be positive", "nn.upsampling", var((1, 2, 4, 3)), scale_h=0.0, scale_w=2.0)


# --- reshape ---------------------------------------------------------------------------------

@pytest.mark.parametrize("ishape, newshape, expected", [
    ((2, 3, 4), (0, -1), (2, 12)),
    ((2, 3, 4), (-1,), (24,)),
    ((2, 3, 4), (4, 0, 2), (4, 3, 2)),                # 0 copies the input dim at the same position
    ((2, 3, 4), (0, -2), (2, 3, 4)),                  # -2 copies the remaining dims
    ((2, 3, 4, 5), (-3, 4, 5), (6, 4, 5)),            # -3 merges two dims
    ((2, 3, 4, 5), (0, -3, 0), (2, 12, 5)),
    ((2, 6, 4), (0, -4, 2, 3, 0), (2, 2, 3, 4)),      # -4 splits a dim in two
    ((2, 6, 4), (0, -4, -1, 3, -2), (2, 2, 3, 4)),
    ((2, 6, 4), (-4, 1, 2, -1), (1, 2, 24)),
    ((1, 2048, 1, 1), (0, -1), (1, 2048)),
])
def test_reshape_special_values(ishape, newshape, expected):
    assert shape_of_out("reshape", var(ishape), newshape=newshape) == expected


def test_reshape_refusals():
    x = var((2, 3, 4))
    refused("more than one -1", "reshape", x, newshape=[-1, -1])
    refused("cannot reshape", "reshape", x, newshape=[5, 5])
    refused("-1 cannot be inferred", "reshape", x, newshape=[5, -1])
    refused("refers past", "reshape", x, newshape=[1, 1, 1, 24, 0])
    refused("-4 splits dim 2 into 3 x 1", "reshape", x, newshape=[-4, 3, 1, 0, 0])
    refused("invalid value -7", "reshape", x, newshape=[-7])


# --- transpose, squeeze, expand_dims, reverse ----------------------------------------------------

def test_transpose_squeeze_expand_dims_reverse():
    x = var((2, 3, 4))
    assert shape_of_out("transpose", x) == (4, 3, 2)
    assert shape_of_out("transpose", x, axes=[0, -1, 1]) == (2, 4, 3)
    refused("names an axis twice", "transpose", x, axes=[0, 0, 1])
    refused("must list each of the 3 axes", "transpose", x, axes=[0, 1])
    y = var((1, 3, 1, 4))
    assert shape_of_out("squeeze", y) == (3, 4)
    assert shape_of_out("squeeze", y, axis=[-2]) == (1, 3, 4)
    refused("cannot squeeze axis 1 of size 3", "squeeze", y, axis=[1])
    assert shape_of_out("expand_dims", x, axis=1, num_newaxis=2) == (2, 1, 1, 3, 4)
    assert shape_of_out("expand_dims", x, axis=-1) == (2, 3, 4, 1)
    refused("out of range for rank 4", "expand_dims", x, axis=4)
    assert out("reverse", x, axis=-1) == x.checked_type
    refused("out of range", "reverse", x, axis=3)


# --- concatenate, stack, split -----------------------------------------------------------------

def test_concatenate_and_stack():
    a, b = var((1, 2, 4), name="a"), var((1, 5, 4), name="b")
    assert shape_of_out("concatenate", Tuple([a, b]), axis=1) == (1, 7, 4)
    assert shape_of_out("concatenate", Tuple([a, a]), axis=-1) == (1, 2, 8)
    refused("differs from tensor 0's", "concatenate", Tuple([a, b]), axis=0)
    refused("rank 2 but tensor 0 has rank 3", "concatenate", Tuple([a, var((1, 2))]), axis=1)
    refused("different dtypes", "concatenate", Tuple([a, var((1, 2, 4), "int8")]), axis=1)
    refused("must be a tuple", "concatenate", a)
    assert shape_of_out("stack", Tuple([a, a, a]), axis=1) == (1, 3, 2, 4)
    assert shape_of_out("stack", Tuple([a, a]), axis=-1) == (1, 2, 4, 2)
    refused("tensor 1 has shape", "stack", Tuple([a, b]))


def test_split_sections_and_indices():
    x = var((2, 10, 3))
    t = out("split", x, indices_or_sections=5, axis=1)
    assert t == TupleType((TensorType((2, 2, 3)),) * 5)
    t = out("split", x, indices_or_sections=[2, 7], axis=1)
    assert [f.shape for f in t.fields] == [(2, 2, 3), (2, 5, 3), (2, 3, 3)]
    t = out("split", x, indices_or_sections=[1], axis=-3)
    assert [f.shape for f in t.fields] == [(1, 10, 3), (1, 10, 3)]
    refused("cannot be split into 3 equal sections", "split", x, indices_or_sections=3, axis=1)
    refused("must be ascending", "split", x, indices_or_sections=[7, 2], axis=1)
    refused("must be ascending", "split", x, indices_or_sections=[2, 10], axis=1)


# --- strided_slice -------------------------------------------------------------------------------

@pytest.mark.parametrize("attrs, expected", [
    (dict(begin=[0, 1], end=[2, 3]), (2, 2, 6)),
    (dict(begin=[-3], end=[-1]), (2, 5, 6)),                                 # negative indices
    (dict(begin=[0, 0, 0], end=[100, 100, 2147483647]), (4, 5, 6)),          # clamped ends (ONNX INT_MAX)
    (dict(begin=[0, 0, -100], end=[4, 5, 3]), (4, 5, 3)),                    # clamped begin
    (dict(begin=[0, 0, 0], end=[4, 5, 6], strides=[1, 2, 4]), (4, 3, 2)),
    (dict(begin=[-1], end=[-2147483648], strides=[-1]), (4, 5, 6)),          # full reverse
    (dict(begin=[3], end=[0], strides=[-2]), (2, 5, 6)),
    (dict(begin=[1], end=[3], axes=[2]), (4, 5, 2)),
    (dict(begin=[1, 0], end=[-1, 2], axes=[-1, 0]), (2, 5, 4)),
    (dict(begin=[1, 2], end=[2, -1], slice_mode="size"), (2, 3, 6)),         # size mode, -1 = to the end
    (dict(begin=[0], end=[1]), (1, 5, 6)),
])
def test_strided_slice(attrs, expected):
    assert shape_of_out("strided_slice", var((4, 5, 6)), **attrs) == expected


def test_strided_slice_refusals():
    x = var((4, 5, 6))
    refused("is empty", "strided_slice", x, begin=[3], end=[1])
    refused("stride of axis 0 is 0", "strided_slice", x, begin=[0], end=[2], strides=[0])
    refused("end has 1 values but axes has 2", "strided_slice", x, begin=[0, 0], end=[1], axes=[0, 1])
    refused("more values", "strided_slice", x, begin=[0, 0, 0, 0], end=[1, 1, 1, 1])
    refused("slice_mode='step'", "strided_slice", x, begin=[0], end=[1], slice_mode="step")


# --- take, gather, scatter_nd ----------------------------------------------------------------------

def test_take_gather_scatter_nd():
    data = var((5, 6, 7))
    idx = var((2, 3), "int32", name="i")
    assert shape_of_out("take", data, idx) == (2, 3)
    assert shape_of_out("take", data, idx, axis=1) == (5, 2, 3, 7)
    assert shape_of_out("take", data, var((5, 4), "int64"), axis=1, batch_dims=1) == (5, 4, 7)
    assert shape_of_out("take", data, const(np.int32(2)), axis=0) == (6, 7)
    refused("indices must have dtype", "take", data, var((2,)), axis=0)
    refused("batch_dims=2", "take", data, idx, axis=1, batch_dims=2)
    refused("mode='nearest'", "take", data, idx, mode="nearest")
    assert shape_of_out("gather", data, var((5, 2, 7), "int64"), axis=1) == (5, 2, 7)
    refused("rank of data", "gather", data, var((5, 2), "int64"), axis=1)
    updates = var((3, 7))
    assert out("scatter_nd", data, var((2, 3), "int64"), updates) == data.checked_type
    refused(r"updates must have shape \(3, 7\)", "scatter_nd", data, var((2, 3), "int64"), var((3, 6)))
    refused("indices address 4 axes", "scatter_nd", data, var((4, 3), "int64"), updates)


# --- broadcast_to, tile, shape_of, creation ops ------------------------------------------------------

def test_broadcast_tile_shape_of_creation():
    assert shape_of_out("broadcast_to", var((3, 1)), shape=[2, 3, 4]) == (2, 3, 4)
    refused("cannot be broadcast to", "broadcast_to", var((3, 2)), shape=[3, 4])
    refused("shape attribute is required", "broadcast_to", var((3, 2)))
    assert shape_of_out("tile", var((2, 3)), reps=[2, 1, 3]) == (2, 2, 9)
    assert shape_of_out("tile", var((2, 3, 4)), reps=[2]) == (2, 3, 8)
    refused("must be positive", "tile", var((2, 3)), reps=[0, 1])
    assert out("shape_of", var((2, 3, 4))) == TensorType((3,), "int32")
    assert out("shape_of", var((2, 3)), dtype="int64") == TensorType((2,), "int64")
    refused("dtype='float32'", "shape_of", var((2, 3)), dtype="float32")
    assert out("zeros", shape=[2, 2], dtype="int8") == TensorType((2, 2), "int8")
    assert out("full", const(1.5), shape=[3]) == TensorType((3,), "float32")


# --- layout_transform ----------------------------------------------------------------------------

@pytest.mark.parametrize("shape, src, dst, expected", [
    ((1, 3, 8, 9), "NCHW", "NHWC", (1, 8, 9, 3)),
    ((1, 8, 9, 3), "NHWC", "NCHW", (1, 3, 8, 9)),
    ((16, 3, 3, 5), "OIHW", "HWIO", (3, 5, 3, 16)),
    ((3, 5, 3, 16), "HWIO", "OIHW", (16, 3, 3, 5)),
    ((1, 8, 5, 5), "NCHW", "NCHW4c", (1, 2, 5, 5, 4)),
    ((1, 2, 5, 5, 4), "NCHW4c", "NHWC", (1, 5, 5, 8)),
])
def test_layout_transform(shape, src, dst, expected):
    assert shape_of_out("layout_transform", var(shape), src_layout=src, dst_layout=dst) == expected


def test_layout_transform_refusals():
    x = var((1, 6, 5, 5))
    refused("cannot be split by 4", "layout_transform", x, src_layout="NCHW", dst_layout="NCHW4c")
    refused("have different axes", "layout_transform", x, src_layout="NCHW", dst_layout="NCDW")
    refused("rank 4 but src_layout 'NCH'", "layout_transform", x, src_layout="NCH", dst_layout="NHC")
    refused("repeats an axis", "layout_transform", x, src_layout="NCHH", dst_layout="NHCH")
    refused("must have size 4", "layout_transform", var((1, 2, 5, 5, 3)), src_layout="NCHW4c",
            dst_layout="NCHW")


# --- reductions ----------------------------------------------------------------------------------

@pytest.mark.parametrize("attrs, expected", [
    (dict(), ()),
    (dict(axis=[1]), (2, 4, 5)),
    (dict(axis=[2, 3], keepdims=True), (2, 3, 1, 1)),
    (dict(axis=[]), ()),                                  # empty means all axes, as in TVM
    (dict(axis=[], exclude=True, keepdims=True), (1, 1, 1, 1)),
    (dict(axis=[-1]), (2, 3, 4)),
    (dict(axis=[1], exclude=True), (3,)),
    (dict(axis=[0, 1], exclude=True, keepdims=True), (2, 3, 1, 1)),
])
def test_reduce_shapes(attrs, expected):
    assert shape_of_out("mean", var((2, 3, 4, 5)), **attrs) == expected


def test_reduce_dtypes_and_refusals():
    x = var((2, 3, 4))
    assert out("argmax", x, axis=[1]) == TensorType((2, 4), "int32")
    assert out("argmin", x, axis=[2], keepdims=True, select_last_index=True) == TensorType((2, 3, 1), "int32")
    assert out("sum", var((2, 3), "int8"), axis=[0]) == TensorType((3,), "int8")
    assert out("any", var((2, 3), "bool"), axis=[1]) == TensorType((2,), "bool")
    refused("out of range for rank 3", "max", x, axis=[3])
    refused("names an axis twice", "prod", x, axis=[1, -2])
    mean = call("mean", x, axis=[2], keepdims=True)
    assert out("variance", x, mean, axis=[2]) == TensorType((2, 3))
    refused("mean must have the reduced shape", "variance", x, var((2, 4)), axis=[2])


# --- image.resize2d --------------------------------------------------------------------------------

def test_resize2d():
    x = var((1, 3, 10, 12))
    assert out("image.resize2d", x, size=[20, 24]) == TensorType((1, 3, 20, 24))
    assert shape_of_out("image.resize2d", var((1, 10, 12, 3)), size=[5, 6], layout="NHWC",
                        method="nearest_neighbor", coordinate_transformation_mode="asymmetric",
                        rounding_method="floor") == (1, 5, 6, 3)
    assert out("image.resize2d", x, size=[5, 5], out_dtype="float16").dtype == "float16"
    assert call("image.resize2d", x, size=[5, 5], roi=[0, 0, 1, 1]).attrs.roi == (0.0, 0.0, 1.0, 1.0)
    refused("size must be \\[height, width\\]", "image.resize2d", x, size=[20])
    refused("method='bilinear'", "image.resize2d", x, size=[20, 24], method="bilinear")
    refused("coordinate_transformation_mode='center'", "image.resize2d", x, size=[2, 2],
            coordinate_transformation_mode="center")
    refused("size must be a positive", "image.resize2d", x, size=[0, 4])


# --- QNN -------------------------------------------------------------------------------------------

def test_quantize_dequantize_requantize():
    x = var((1, 4, 3, 3))
    s, zp = scalar(0.5, "float32"), scalar(3, "int32")
    assert out("qnn.quantize", x, s, zp) == TensorType((1, 4, 3, 3), "int8")
    assert out("qnn.quantize", x, s, zp, out_dtype="uint8").dtype == "uint8"
    per_channel = const(np.ones(4, np.float32))
    assert out("qnn.quantize", x, per_channel, zp, axis=1).dtype == "int8"
    refused("output_scale has 4 values but the channel axis has 3", "qnn.quantize", x, per_channel, zp)
    refused("output_scale must have dtype float32", "qnn.quantize", x, zp, zp)
    refused("output_zero_point must have dtype int32", "qnn.quantize", x, s, s)
    refused("out_dtype='float32'", "qnn.quantize", x, s, zp, out_dtype="float32")
    q = var((1, 4, 3, 3), "int8")
    assert out("qnn.dequantize", q, s, zp) == TensorType((1, 4, 3, 3), "float32")
    refused("data must have dtype", "qnn.dequantize", x, s, zp)
    acc = var((2, 8), "int32")
    assert out("qnn.requantize", acc, s, zp, s, zp) == TensorType((2, 8), "int8")
    assert out("qnn.requantize", acc, const(np.ones(8, np.float32)), zp, s, zp, out_dtype="uint8",
               rounding="UPWARD").dtype == "uint8"
    refused("rounding='DOWN'", "qnn.requantize", acc, s, zp, s, zp, rounding="DOWN")
    refused("scalar or a 1-D", "qnn.requantize", acc, const(np.ones((2, 8), np.float32)), zp, s, zp)


def test_qnn_conv2d_and_dense():
    x = var((1, 3, 8, 8), "uint8")
    w = var((16, 3, 3, 3), "int8", name="w")
    izp, kzp = scalar(128, "int32"), scalar(0, "int32")
    isc, ksc = scalar(0.02, "float32"), const(np.full(16, 0.01, np.float32))
    assert out("qnn.conv2d", x, w, izp, kzp, isc, ksc, padding=[1, 1]) == TensorType((1, 16, 8, 8), "int32")
    assert get_op("qnn.conv2d").make_attrs().out_dtype == "int32"
    refused("kernel_scale has 8 values", "qnn.conv2d", x, w, izp, kzp, isc, const(np.ones(8, np.float32)))
    refused("data must have dtype", "qnn.conv2d", var((1, 3, 8, 8)), w, izp, kzp, isc, ksc)
    refused("input_zero_point must be a scalar", "qnn.conv2d", x, w, const(np.zeros(3, np.int32)), kzp, isc, ksc)
    d = var((2, 32), "int8")
    dw = var((10, 32), "int8", name="dw")
    assert out("qnn.dense", d, dw, izp, kzp, isc, isc, units=10) == TensorType((2, 10), "int32")
    refused("units=5", "qnn.dense", d, dw, izp, kzp, isc, isc, units=5)


def test_qnn_add_mul_concatenate():
    a, b = var((1, 4, 3, 3), "int8", name="a"), var((1, 4, 1, 1), "int8", name="b")
    s, zp = scalar(0.1, "float32"), scalar(0, "int32")
    assert out("qnn.add", a, b, s, zp, s, zp, s, zp) == TensorType((1, 4, 3, 3), "int8")
    assert out("qnn.mul", a, a, s, zp, s, zp, s, zp, lhs_axis=1, rhs_axis=1).shape == (1, 4, 3, 3)
    refused("rhs has int32", "qnn.add", a, var((1, 4, 3, 3), "int32"), s, zp, s, zp, s, zp)
    refused("output_scale must have dtype float32", "qnn.mul", a, b, s, zp, s, zp, zp, zp)
    t = out("qnn.concatenate", Tuple([a, a]), Tuple([s, s]), Tuple([zp, zp]), s, zp, axis=1)
    assert t == TensorType((1, 8, 3, 3), "int8")
    refused("input_scales has 1 entries for 2 tensors", "qnn.concatenate", Tuple([a, a]), Tuple([s]),
            Tuple([zp, zp]), s, zp, axis=1)
    refused("tensor 1 has dtype uint8", "qnn.concatenate", Tuple([a, var((1, 4, 3, 3), "uint8")]),
            Tuple([s, s]), Tuple([zp, zp]), s, zp, axis=1)


# --- strided_slice against numpy's slicing (same canonicalization rules) -----------------------------

_index = st.integers(min_value=-12, max_value=12)


@settings(max_examples=200, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=3),
       slices=st.lists(st.tuples(_index, _index, st.sampled_from([-3, -2, -1, 1, 2, 3])), min_size=1, max_size=3))
def test_strided_slice_matches_numpy(shape, slices):
    slices = slices[:len(shape)]
    begin, end, strides = (list(v) for v in zip(*slices))
    expected = np.empty(shape)[tuple(slice(b, e, s) for b, e, s in slices)].shape
    expr = call("strided_slice", var(tuple(shape)), begin=begin, end=end, strides=strides)
    if 0 in expected:
        with pytest.raises(TidlxTypeError, match="is empty"):
            expr.checked_type
    else:
        assert expr.checked_type.shape == expected
