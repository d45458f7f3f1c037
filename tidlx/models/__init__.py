"""Built-in models written directly as ONNX (no PyTorch needed), named like a torch.onnx export."""

from __future__ import annotations

from .bev_pool import bevdet_with_bev_pool, register_bev_pool, unregister_bev_pool
from .bevdet import bevdet_img_stage, bevdet_img_stage_tiny
from .bevdet_ti import bevdet_ti_export, bevdet_ti_inputs, bevdet_ti_lidar_coor_1d
from .bn_gemm import bn_between_gemms
from .errors import ModelArgumentError

__all__ = ["ModelArgumentError", "bevdet_img_stage", "bevdet_img_stage_tiny", "bevdet_ti_export", "bevdet_ti_inputs",
           "bevdet_ti_lidar_coor_1d", "bevdet_with_bev_pool", "bn_between_gemms", "register_bev_pool",
           "unregister_bev_pool"]
