"""Built-in models written directly as ONNX (no PyTorch needed), named like a torch.onnx export."""

from __future__ import annotations

from .bevdet import bevdet_img_stage, bevdet_img_stage_tiny
from .bn_gemm import bn_between_gemms
from .errors import ModelArgumentError

__all__ = ["ModelArgumentError", "bevdet_img_stage", "bevdet_img_stage_tiny", "bn_between_gemms"]
