"""The built-in passes, one per file. ``PASSES`` maps each name to its pass, ``SURGERY_PASSES`` the
passes made after rules of TI's ONNX model optimizer.

    from tidlx.ir.passes import PASSES, FoldConstant
    new_mod = FoldConstant(mod)
"""

from __future__ import annotations

from typing import Dict

from ..transform import Pass, Sequential
from .convert_reducemean_to_matmul import ConvertReduceMeanToMatmul
from .convert_softmax_axis_channel_to_width import ConvertSoftmaxAxisChannelToWidth
from .convert_batchnorm_input_to_4D import ConvertBatchnormInputTo4D
from .convert_conv_7x7_stride4_to_stride1 import ConvertConv7x7Stride4ToStride1
from .convert_conv_large_pad_to_smaller_kernel import ConvertConvLargePadToSmallerKernel
from .convert_depth2space_to_reshp_tr_reshp import ConvertDepth2spaceToReshpTrReshp
from .convert_expand_to_reshape_and_concat import ConvertExpandToReshapeAndConcat
from .convert_gather_with_single_index_to_slice import ConvertGatherWithSingleIndexToSlice
from .convert_large_global_avg_pooling_to_matmul import ConvertLargeGlobalAvgPoolingToMatmul
from .convert_maxpool_to_cascaded_maxpool import ConvertMaxpoolToCascadedMaxpool
from .convert_neg_to_mul import ConvertNegToMul
from .convert_reducesum_to_matmul import ConvertReducesumToMatmul
from .convert_single_concat_to_consecutive_concats import ConvertSingleConcatToConsecutiveConcats
from .convert_softmax_axis_height_to_width import ConvertSoftmaxAxisHeightToWidth
from .convert_space2depth_to_reshp_tr_reshp import ConvertSpace2depthToReshpTrReshp
from .convert_tanhgelu_to_erfgelu import ConvertTanhgeluToErfgelu
from .convert_tr_conv_stride_n_tr_to_matmul import ConvertTrConvStrideNTrToMatmul
from .expand_slice_across_multiple_axis import ExpandSliceAcrossMultipleAxis
from .push_large_channel_dim_to_height_for_width_wise_softmax import PushLargeChannelDimToHeightForWidthWiseSoftmax
from .remove_quantize_initializer import RemoveQuantizeInitializer
from .remove_where_layer import RemoveWhereLayer
from .hf_attention_block_optimization import HfAttentionBlockOptimization
from .dead_code import DeadCodeElimination
from .fold_bn_conv import FoldBatchNormIntoConv
from .fold_bn_dense import FoldBatchNormIntoDense
from .fold_constant import FoldConstant
from .max_min_to_clip import ConvertMaxMinToClip
from .optimize_reshp_tr_reshp import OptimizeReshpTrReshp
from .merge_pad_into_conv import MergePadIntoConv
from .remove_identity_ops import RemoveIdentityOps
from .simplify_inference import SimplifyInference
from .split_asymmetric_stride_conv import SplitAsymmetricStrideConv

PASSES: Dict[str, Pass] = {p.name: p for p in (
    FoldConstant, DeadCodeElimination, SimplifyInference, FoldBatchNormIntoConv, FoldBatchNormIntoDense,
    RemoveIdentityOps, ConvertMaxMinToClip, SplitAsymmetricStrideConv, MergePadIntoConv,
)}

#: The passes made after rules of TI's ONNX model optimizer (TI's model surgery), by name. They are
#: not in ``PASSES``: the TIDL flow runs them before its graph preparation when asked to, in TI's
#: order (the order of TI's optimizer: its rules sorted by their dependencies).
SURGERY_PASSES: Dict[str, Pass] = {p.name: p for p in (
    ConvertTrConvStrideNTrToMatmul,
    RemoveWhereLayer,
    ConvertTanhgeluToErfgelu,
    ConvertSpace2depthToReshpTrReshp,
    ConvertDepth2spaceToReshpTrReshp,
    OptimizeReshpTrReshp,
    ConvertReducesumToMatmul,
    ConvertExpandToReshapeAndConcat,
    ConvertSingleConcatToConsecutiveConcats,
    ConvertNegToMul,
    RemoveQuantizeInitializer,
    ExpandSliceAcrossMultipleAxis,
    ConvertConv7x7Stride4ToStride1,
    ConvertConvLargePadToSmallerKernel,
    PushLargeChannelDimToHeightForWidthWiseSoftmax,
    ConvertSoftmaxAxisHeightToWidth,
    ConvertSoftmaxAxisChannelToWidth,
    ConvertBatchnormInputTo4D,
    ConvertGatherWithSingleIndexToSlice,
    ConvertLargeGlobalAvgPoolingToMatmul,
    ConvertReduceMeanToMatmul,
    ConvertMaxpoolToCascadedMaxpool,
    HfAttentionBlockOptimization,
)}


def inference_pipeline() -> Sequential:
    """The standard preparation of an imported model: fold the BNs into their neighbours where
    possible, turn the remaining ones into multiply/add, fold constants, drop dead code.
    Disable any step by name through ``PassContext(disabled_passes=[...])``."""
    return Sequential([FoldConstant, FoldBatchNormIntoConv, FoldBatchNormIntoDense, SimplifyInference,
                       FoldBatchNormIntoConv, FoldBatchNormIntoDense, FoldConstant, DeadCodeElimination],
                      name="InferencePipeline")


__all__ = ["PASSES", "SURGERY_PASSES", "FoldConstant", "DeadCodeElimination", "SimplifyInference", "FoldBatchNormIntoConv",
           "FoldBatchNormIntoDense", "inference_pipeline",
           "RemoveIdentityOps", "ConvertMaxMinToClip", "SplitAsymmetricStrideConv", "MergePadIntoConv",
           "ConvertSoftmaxAxisChannelToWidth", "ConvertReduceMeanToMatmul",
           "ConvertTrConvStrideNTrToMatmul",
           "RemoveWhereLayer",
           "ConvertTanhgeluToErfgelu",
           "ConvertSpace2depthToReshpTrReshp",
           "ConvertDepth2spaceToReshpTrReshp",
           "OptimizeReshpTrReshp",
           "ConvertReducesumToMatmul",
           "ConvertExpandToReshapeAndConcat",
           "ConvertSingleConcatToConsecutiveConcats",
           "ConvertNegToMul",
           "RemoveQuantizeInitializer",
           "ExpandSliceAcrossMultipleAxis",
           "ConvertConv7x7Stride4ToStride1",
           "ConvertConvLargePadToSmallerKernel",
           "PushLargeChannelDimToHeightForWidthWiseSoftmax",
           "ConvertSoftmaxAxisHeightToWidth",
           "ConvertBatchnormInputTo4D",
           "ConvertGatherWithSingleIndexToSlice",
           "ConvertLargeGlobalAvgPoolingToMatmul",
           "ConvertMaxpoolToCascadedMaxpool", "HfAttentionBlockOptimization"]
