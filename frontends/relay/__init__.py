"""Relay text frontend: ``parse`` reads what TVM's ``astext()`` prints (version 0.0.5)."""

from .errors import RelayParseError
from .parser import MISSING_CONSTANT_NAME, parse

__all__ = ["parse", "RelayParseError", "MISSING_CONSTANT_NAME"]
