"""The TIDL backend: support rules, composite layers, TI's compile options and the host reasons.

    from tidlx.backends.tidl import TidlOptions, RuleContext, explain, find_composites
"""

from .composites import Composite, find_composites
from .context import RuleContext
from .explain import HOST_REASON_KINDS, HostReason, explain, explain_function
from .options import BATCH_ENV_VAR, BatchLimit, OptionError, TidlOptions
from .rules import RULES, check_call, layer_type

__all__ = ["TidlOptions", "OptionError", "BatchLimit", "BATCH_ENV_VAR", "RuleContext", "RULES", "check_call",
           "layer_type", "Composite", "find_composites", "HostReason", "HOST_REASON_KINDS", "explain",
           "explain_function"]
