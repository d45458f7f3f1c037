"""Showing strings that come from users (layer names, tensor names, paths, option values) safely.

A layer may be called anything an exporter allowed: ``/blocks[attn]/Softmax`` (rich markup
syntax), ``a[/]b``, a name with an escape sequence or a NUL in it. Printed as is, such a name
is changed (rich reads ``[attn]`` as a style), crashes the printer (``[/]``), drives the terminal
(``\\x1b[2J``) or makes an SVG that is not XML (XML 1.0 has no NUL). ``printable`` turns every
such character into a visible escape so the name is shown whole and can be read back;
``xml_text`` also escapes ``& < > " '`` for XML and HTML text and attributes. Rich markup is not
the business of this module: the CLI and the reports hand names to rich as ``Text`` (which rich
never parses for markup), after ``printable``.
"""

from __future__ import annotations

import re
from html import escape as _html_escape

#: C0 controls, DEL, C1 controls, the bidirectional and line/paragraph separators that reorder
#: or break what a terminal shows, the byte-order mark, lone surrogates (a file name that was not
#: UTF-8, as Python decodes it) and the two XML non-characters.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                          "\ufeff\ud800-\udfff\ufffe\uffff]")


def _escape(match: "re.Match[str]") -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, keep: str = "") -> str:
    """``str(text)`` with each control character as a visible escape (``\\x1b``, ``\\u202e``);
    characters in ``keep`` (e.g. ``"\\n"`` for multi-line text) stay as they are."""
    text = str(text)
    if not _UNPRINTABLE.search(text):
        return text
    if not keep:
        return _UNPRINTABLE.sub(_escape, text)
    return _UNPRINTABLE.sub(lambda m: m.group() if m.group() in keep else _escape(m), text)


def xml_text(text: object, keep: str = "") -> str:
    """``printable(text, keep)`` escaped for XML/HTML text and attribute values."""
    return _html_escape(printable(text, keep), quote=True)


__all__ = ["printable", "xml_text"]
