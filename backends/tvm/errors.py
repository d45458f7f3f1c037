"""Errors of the TVM backend (each names the call, function or target it is about)."""

from __future__ import annotations

from ...ir.errors import TidlxError


class TvmBackendError(TidlxError):
    """A model, option or target the TVM backend cannot take."""


class TvmLoweringError(TvmBackendError):
    """An op or expression that has no Relax lowering, or attributes a lowering cannot express."""


class TvmNotInstalledError(TvmBackendError):
    """apache-tvm is not importable."""


def require_tvm():
    """``tvm``, or a TvmNotInstalledError that says how to install it."""
    try:
        import tvm
    except ImportError as exc:
        raise TvmNotInstalledError(
            "the TVM backend needs apache-tvm: pip install 'tidlx[tvm]' (apache-tvm==0.27.0.post1); "
            f"importing it failed: {exc}") from None
    return tvm
