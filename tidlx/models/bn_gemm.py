"""The seed's failure case as a small ONNX model: a BatchNormalization between two Gemms.

    model = tidlx.models.bn_between_gemms()                 # onnx.ModelProto, deterministic bytes
    tidlx.models.bn_between_gemms(path="bn_gemm.onnx")      # also saved

The graph, named as ``torch.onnx.export`` names an ``nn.Sequential`` MLP (scopes ``/fc1``, ``/bn``, ...;
weights ``fc1.weight``, ``bn.running_mean``, ...)::

    features (batch x in_features)
    fc1 = Linear(in_features, hidden)          /fc1/Gemm
    bn  = BatchNorm1d(hidden)                  /bn/BatchNormalization   the BN between the two Gemms
    fc2 = Linear(hidden, hidden)               /fc2/Gemm
    act = ReLU                                 /act/Relu
    head = Linear(hidden, out_features)        /head/Gemm  -> scores (batch x out_features)

The batch norm's statistics are far from the identity (means around 0.5, variances between 0.2 and 4,
scales of both signs between 0.3 and 2.5, shifts around 0), so folding it into a Gemm really changes
that Gemm's weights and bias. Every number comes from one seeded generator: the same arguments give
the same bytes.

TI's flow (``FoldBatchNormIntoDense``) folds the BN into ``/fc1/Gemm``, the Gemm before it; ``tidlx
check-fusion --builtin bn-gemm`` compares that fold with the BN kept as its own TIDL layer, in fixed point.
"""

from __future__ import annotations

import os

import numpy as np
import onnx

from ._onnx_graph import BN_EPSILON, BN_MOMENTUM, OnnxGraphWriter, float_tensor_info
from .errors import ModelArgumentError, save_model

MODEL_NAME = "bn_between_gemms"
OPSET = 17
IR_VERSION = 8
#: The layer name of the batch norm (what deny_list:layer_name takes).
BN_LAYER = "/bn/BatchNormalization"


def _check(name: str, value, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ModelArgumentError(MODEL_NAME, name, f"must be an integer >= {minimum}, got {value!r}")
    return value


def bn_between_gemms(in_features: int = 12, hidden: int = 24, out_features: int = 6, batch: int = 1,
                     seed: int = 0, path: str | os.PathLike | None = None) -> onnx.ModelProto:
    """Build Gemm -> BatchNormalization -> Gemm -> Relu -> Gemm as ONNX (opset 17); save it to ``path``
    when given. Input ``features`` (batch x in_features), output ``scores`` (batch x out_features)."""
    for name, value, minimum in (("in_features", in_features, 1), ("hidden", hidden, 1),
                                 ("out_features", out_features, 1), ("batch", batch, 1), ("seed", seed, 0)):
        _check(name, value, minimum)
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise ModelArgumentError(MODEL_NAME, "path", f"must be a file path or None, got {path!r}")
    writer = OnnxGraphWriter(seed)
    x = writer.linear("/fc1", "fc1", "features", in_features, hidden, gain=1.0)
    rng = writer.rng
    gamma = (rng.uniform(0.3, 2.5, hidden) * rng.choice([-1.0, 1.0], hidden, p=[0.2, 0.8])).astype(np.float32)
    beta = rng.normal(0.0, 0.3, hidden).astype(np.float32)
    mean = rng.normal(0.5, 0.4, hidden).astype(np.float32)
    var = rng.uniform(0.2, 4.0, hidden).astype(np.float32)
    x = writer.add_node("BatchNormalization", "/bn",
                        [x, writer.weight("bn.weight", gamma), writer.weight("bn.bias", beta),
                         writer.weight("bn.running_mean", mean), writer.weight("bn.running_var", var)],
                        epsilon=BN_EPSILON, momentum=BN_MOMENTUM)
    x = writer.linear("/fc2", "fc2", x, hidden, hidden)
    x = writer.relu("/act", x)
    std = np.sqrt(1.0 / hidden)
    w = writer.rng.standard_normal((out_features, hidden), dtype=np.float32) * np.float32(std)
    writer.add_node("Gemm", "/head", [x, writer.weight("head.weight", w), writer.bias("head", out_features)],
                    output_name="scores", alpha=1.0, beta=1.0, transB=1)
    doc = (f"Gemm -> BatchNormalization -> Gemm -> Relu -> Gemm: {in_features} -> {hidden} -> {hidden} -> "
           f"{out_features} features, batch {batch}, seed {seed} (the seed's BN between two Gemms)")
    model = writer.make_model(MODEL_NAME, [float_tensor_info("features", [batch, in_features])],
                              [float_tensor_info("scores", [batch, out_features])], OPSET, IR_VERSION, doc)
    if path is not None:
        save_model(model, path, MODEL_NAME)
    return model


__all__ = ["bn_between_gemms", "BN_LAYER"]
