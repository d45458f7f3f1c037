"""A small ONNX graph writer that names nodes and weights the way ``torch.onnx.export`` does.

Node names are ``/<module path>/<OpType>`` (``/img_backbone/layer1/layer1.0/conv1/Conv``), a second node
of the same type in the same scope gets ``_1``, ``_2`` ...; tensors are ``<node name>_output_0``;
weights are the PyTorch state-dict keys (``img_backbone.layer1.0.conv1.weight``). Deny lists and
reports key on these names, so they must look like a real export.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# torch.nn.BatchNorm2d defaults as torch exports them (momentum is exported as 1 - 0.1).
BN_EPSILON = 1e-5
BN_MOMENTUM = 0.9


class OnnxGraphWriter:
    """Collects nodes and initializers in creation order; weights come from one seeded generator."""

    def __init__(self, seed: int):
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._uses_in_scope: dict[tuple[str, str], int] = {}

    # -- naming ----------------------------------------------------------------------------------------
    def _node_name(self, scope: str, op_type: str) -> str:
        key = (scope, op_type)
        count = self._uses_in_scope.get(key, 0)
        self._uses_in_scope[key] = count + 1
        suffix = "" if count == 0 else f"_{count}"
        return f"{scope}/{op_type}{suffix}"

    def add_node(self, op_type: str, scope: str, inputs: list[str], output_name: str | None = None,
                 **attributes) -> str:
        """Append a node; its output is ``<node name>_output_0`` unless a graph output name is given."""
        name = self._node_name(scope, op_type)
        output = output_name or f"{name}_output_0"
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=name, **attributes))
        return output

    # -- weights ---------------------------------------------------------------------------------------
    def weight(self, name: str, values: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(values, dtype=np.float32), name))
        return name

    def constant_int64(self, scope: str, values: list[int]) -> str:
        """A Constant node holding an int64 vector (torch exports Slice/Reshape/Unsqueeze operands so)."""
        tensor = numpy_helper.from_array(np.asarray(values, dtype=np.int64), "")
        return self.add_node("Constant", scope, [], value=tensor)

    # -- layers ----------------------------------------------------------------------------------------
    def conv_weight(self, param_prefix: str, in_channels: int, out_channels: int, kernel: int,
                    gain: float = 2.0) -> str:
        """He-scaled normal weights (``gain`` 2 before a ReLU, 1 otherwise), O x I x k x k."""
        std = np.sqrt(gain / (in_channels * kernel * kernel))
        w = self.rng.standard_normal((out_channels, in_channels, kernel, kernel), dtype=np.float32) * std
        return self.weight(f"{param_prefix}.weight", w)

    def bias(self, param_prefix: str, channels: int) -> str:
        b = self.rng.standard_normal(channels, dtype=np.float32) * 0.01
        return self.weight(f"{param_prefix}.bias", b)

    def conv(self, scope: str, param_prefix: str, x: str, in_channels: int, out_channels: int,
             kernel: int, stride: int = 1, bias: bool = False, gain: float = 2.0, dilation: int = 1) -> str:
        """Conv2d with He-scaled normal weights, padding dilation * (k // 2) (the output keeps its size)."""
        inputs = [x, self.conv_weight(param_prefix, in_channels, out_channels, kernel, gain)]
        if bias:
            inputs.append(self.bias(param_prefix, out_channels))
        pad = dilation * (kernel // 2)
        return self.add_node("Conv", scope, inputs, dilations=[dilation, dilation], group=1,
                             kernel_shape=[kernel, kernel], pads=[pad, pad, pad, pad], strides=[stride, stride])

    def linear(self, scope: str, param_prefix: str, x: str, in_features: int, out_features: int,
               gain: float = 2.0) -> str:
        """nn.Linear as torch exports it: Gemm(x, W, b, transB=1) with W of shape out x in."""
        std = np.sqrt(gain / in_features)
        w = self.rng.standard_normal((out_features, in_features), dtype=np.float32) * std
        inputs = [x, self.weight(f"{param_prefix}.weight", w), self.bias(param_prefix, out_features)]
        return self.add_node("Gemm", scope, inputs, alpha=1.0, beta=1.0, transB=1)

    def batch_norm(self, scope: str, param_prefix: str, x: str, channels: int, gamma_scale: float = 1.0) -> str:
        """Inference BatchNormalization with random statistics near the identity (variance kept positive).

        ``gamma_scale`` < 1 on the last norm of a residual branch keeps the residual stream from doubling
        its variance at every block (the same idea as zero-init-residual, without dead branches).
        """
        gamma = self.rng.uniform(0.8, 1.2, channels).astype(np.float32) * np.float32(gamma_scale)
        beta = self.rng.normal(0.0, 0.05, channels).astype(np.float32)
        mean = self.rng.normal(0.0, 0.05, channels).astype(np.float32)
        var = self.rng.uniform(0.8, 1.2, channels).astype(np.float32)
        inputs = [x,
                  self.weight(f"{param_prefix}.weight", gamma),
                  self.weight(f"{param_prefix}.bias", beta),
                  self.weight(f"{param_prefix}.running_mean", mean),
                  self.weight(f"{param_prefix}.running_var", var)]
        return self.add_node("BatchNormalization", scope, inputs, epsilon=BN_EPSILON, momentum=BN_MOMENTUM)

    def relu(self, scope: str, x: str) -> str:
        return self.add_node("Relu", scope, [x])

    # -- model -----------------------------------------------------------------------------------------
    def make_model(self, graph_name: str, inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
                   opset: int, ir_version: int, doc_string: str) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, graph_name, inputs, outputs, initializer=self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                  producer_name="tidlx", producer_version="0.1.0", doc_string=doc_string)
        model.ir_version = ir_version
        return model


def float_tensor_info(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
