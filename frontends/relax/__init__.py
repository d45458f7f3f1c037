"""Relax -> tidlx IR: ``from_relax(tvm_irmodule)`` reads a Relax module of the ops tidlx knows, as
TVM's ONNX frontend (``tvm.relax.frontend.onnx.from_onnx``) produces them, so a TVM user's module
can be partitioned for TIDL and handed back (``tidlx.backends.tvm.to_relax``).

apache-tvm is not imported here: the module given is read through its own objects.
"""

from __future__ import annotations

from .importer import CONVERTERS, RelaxImportError, from_relax

__all__ = ["from_relax", "RelaxImportError", "CONVERTERS"]
