"""Ops that TIDL has no layer for and that always run on the host (facet ``tidl.no_layer``: the
body of their host reason): recurrent layers (also onnxruntime's dynamically quantized LSTM) and the
dynamically quantized integer ops."""

from __future__ import annotations

from ....ir.op import register_op_attr
from ._base import TIDL_NO_LAYER

register_op_attr("nn.lstm", TIDL_NO_LAYER, "runs on the host (Arm): TIDL has no LSTM layer")

DYNAMIC_QUANTIZATION = ("dynamically quantized ops run on the host: TIDL quantizes at import, not at run time "
                        "(import the float model and let TIDL calibrate it)")
for _name in ("dynamic_quantize_linear", "nn.conv2d_integer", "nn.matmul_integer"):
    register_op_attr(_name, TIDL_NO_LAYER, DYNAMIC_QUANTIZATION)

register_op_attr("nn.dynamic_quantize_lstm", TIDL_NO_LAYER,
                 "runs on the host (Arm): dynamically quantized LSTM (onnxruntime contrib op), TIDL has no LSTM layer")
