"""The TIDL backend: support rules, composite layers, TI's compile options, the host reasons and
the TIDL layer model of a partitioned subgraph.

    from tidlx.backends.tidl import TidlOptions, RuleContext, explain, find_composites
    from tidlx.backends.tidl import run_flow, compare_strategies, PartitionReport
    from tidlx.backends.tidl import build_networks, TidlNetwork, TidlLayer
    from tidlx.backends.tidl import calibrate, CalibrationResult, TensorRange, load_frames
"""

from .composites import Composite, find_composites
from .context import RuleContext
from .explain import HOST_REASON_KINDS, HostReason, explain, explain_function
from .options import BATCH_ENV_VAR, BatchLimit, OptionError, TidlOptions
from .rules import check_call, layer_type, rule_info, supported_ops
from .layers import LAYER_TYPE_IDS, LayerModelError, TidlLayer, TidlNetwork, TidlTensor, build_network, build_networks
from .flow import PREP_PASSES, compare_strategies, partition_for_tidl, run_flow
from .report import PartitionReport, StrategyComparison
from .frames import CalibrationDataError, CalibrationFrames, load_frames
from .calibration import CalibrationError, CalibrationResult, TensorRange, calibrate

__all__ = ["TidlOptions", "OptionError", "BatchLimit", "BATCH_ENV_VAR", "RuleContext", "check_call",
           "layer_type", "rule_info", "supported_ops", "Composite", "find_composites", "HostReason",
           "HOST_REASON_KINDS", "explain", "explain_function", "PREP_PASSES", "compare_strategies",
           "partition_for_tidl", "run_flow", "PartitionReport", "StrategyComparison", "LAYER_TYPE_IDS",
           "LayerModelError", "TidlLayer", "TidlNetwork", "TidlTensor", "build_network", "build_networks",
           "calibrate", "CalibrationResult", "TensorRange", "CalibrationError", "CalibrationFrames",
           "CalibrationDataError", "load_frames"]
