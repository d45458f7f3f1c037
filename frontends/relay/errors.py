"""RelayParseError: every problem in Relay text, reported as ``file:line:col`` plus the line and a caret."""

from __future__ import annotations

import bisect
from typing import List, Optional

from ...ir.errors import TidlxError


class RelayParseError(TidlxError):
    """Relay text that cannot be read: syntax, unknown ops or attributes, types, metadata."""

    def __init__(self, message: str, source_name: str = "<string>", line: Optional[int] = None,
                 column: Optional[int] = None, line_text: Optional[str] = None):
        self.reason = message
        self.source_name = source_name
        self.line = line
        self.column = column
        if line is None:
            full = f"{source_name}: {message}"
        else:
            full = f"{source_name}:{line}:{column}: {message}"
            if line_text is not None:
                shown = line_text.rstrip("\r\n")
                # Keep tabs under tabs so the caret lines up in any tab width.
                pad = "".join(c if c == "\t" else " " for c in shown[:max(column - 1, 0)])
                full += f"\n  {shown}\n  {pad}^"
        super().__init__(full)


class SourceText:
    """The text being parsed: turns character offsets into line, column and the line's text."""

    def __init__(self, text: str, source_name: str):
        self.text = text
        self.source_name = source_name
        self._line_starts: Optional[List[int]] = None

    def _starts(self) -> List[int]:
        if self._line_starts is None:
            starts = [0]
            find = self.text.find
            i = find("\n")
            while i >= 0:
                starts.append(i + 1)
                i = find("\n", i + 1)
            self._line_starts = starts
        return self._line_starts

    def line_col(self, offset: int):
        """1-based line and column of a character offset."""
        offset = max(0, min(offset, len(self.text)))
        starts = self._starts()
        idx = bisect.bisect_right(starts, offset) - 1
        return idx + 1, offset - starts[idx] + 1

    def line_text(self, line: int) -> str:
        starts = self._starts()
        if not 1 <= line <= len(starts):
            return ""
        begin = starts[line - 1]
        end = starts[line] - 1 if line < len(starts) else len(self.text)
        return self.text[begin:end]

    def where(self, offset: Optional[int]) -> str:
        """``file:line:col`` of an offset (just the file when unknown)."""
        if offset is None:
            return self.source_name
        line, col = self.line_col(offset)
        return f"{self.source_name}:{line}:{col}"

    def error(self, message: str, offset: Optional[int]) -> RelayParseError:
        if offset is None:
            return RelayParseError(message, self.source_name)
        line, col = self.line_col(offset)
        return RelayParseError(message, self.source_name, line, col, self.line_text(line))
