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
from .dead_code import DeadCodeElimination
from .fold_bn_conv import FoldBatchNormIntoConv
from .fold_bn_dense import FoldBatchNormIntoDense
from .fold_constant import FoldConstant
from .max_min_to_clip import ConvertMaxMinToClip
from .merge_pad_into_conv import MergePadIntoConv
from .remove_identity_ops import RemoveIdentityOps
from .simplify_inference import SimplifyInference
from .split_asymmetric_stride_conv import SplitAsymmetricStrideConv

PASSES: Dict[str, Pass] = {p.name: p for p in (
    FoldConstant, DeadCodeElimination, SimplifyInference, FoldBatchNormIntoConv, FoldBatchNormIntoDense,
    RemoveIdentityOps, ConvertMaxMinToClip, SplitAsymmetricStrideConv, MergePadIntoConv,
)}

#: The passes made after rules of TI's ONNX model optimizer (TI's model surgery), by name. They are
#: not in ``PASSES``: the TIDL flow runs them before its graph preparation when asked to.
SURGERY_PASSES: Dict[str, Pass] = {p.name: p for p in (
    ConvertReduceMeanToMatmul, ConvertSoftmaxAxisChannelToWidth,
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
           "ConvertSoftmaxAxisChannelToWidth", "ConvertReduceMeanToMatmul"]
