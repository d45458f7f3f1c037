"""tidlx: will my model export to TIDL, into how many subgraphs, and are the numbers right?

Public API (stable): ``parse_relay``, ``load``, ``emulate``, ``partition``, ``IRModule.astext``,
``tidlx.ir.structural_equal``, ``tidlx.models.bevdet_img_stage``, ``register_op`` (a custom op with
every facet in one call), ``quantize`` (a ``QuantizedModel`` that ``emulate`` runs in fixed point),
``compare`` (float vs fixed point per output and per TIDL layer), ``compile_model`` / ``load_compiled``
(a compiled folder of TIDL artifacts: write it, read and run it), ``sweep`` (a study of models x
option sets on a local process pool or a Ray cluster, docs/sweep.md).
"""

from __future__ import annotations

from .ir import IRModule, TidlxError, structural_equal  # noqa: F401
from .api import load, parse_relay, partition  # noqa: F401
from .quantize_api import compare, emulate, quantize  # noqa: F401  (fixed point: emulate, float vs fixed: compare)
from .custom_op import register_op, unregister_op  # noqa: F401

__version__ = "0.1.0"
__all__ = ["IRModule", "TidlxError", "compare", "compile_model", "emulate", "load", "load_compiled", "models",
           "parse_relay", "partition", "quantize", "register_op", "structural_equal", "sweep", "unregister_op"]


def __getattr__(name):
    # tidlx.models imports onnx, tidlx.compiled the artifact reader and runtime (~40 ms): loaded when asked for.
    import importlib

    if name == "models":
        return importlib.import_module(".models", __name__)
    if name in ("compile_model", "load_compiled"):   # a compiled folder: write it, read and run it
        return getattr(importlib.import_module(".compiled", __name__), name)
    if name == "sweep":   # studies over models x option sets (tidlx/studies)
        return importlib.import_module(".studies", __name__).sweep
    raise AttributeError(f"module 'tidlx' has no attribute '{name}'")
