"""The LALR parser: lark's own ``Lark(parser="lalr")`` on relay.lark, fed the tokens of lexer.py,
calling the grammar actions of actions.py as it reduces (no parse tree is built).

A hand-written shift/reduce loop over lark's tables was 1.23-1.31x faster on a whole ResNet-50
parse (7.0 vs 9.2 ms; ``git show 249ae0f:benchmarks/bench_relay_parse.py``, --compare-drivers),
but both are far under the 50 ms goal, and the loop read lark's private table layout; lark's own
parse needs only its public custom-lexer and ``on_error`` hooks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from lark import Lark
from lark.exceptions import UnexpectedToken
from lark.lexer import Lexer

from ...ir.errors import TidlxError
from ...ir.types import Type
from .actions import RelayBuilder
from .errors import RelayParseError, SourceText
from .lexer import TERMINAL_NAMES, Tok, tokenize

GRAMMAR = Path(__file__).with_name("relay.lark")

#: how many annotation types ``annotation_type`` remembers (they repeat: a few per model)
_TYPE_CACHE_SIZE = 10000


class RelayGrammar:
    """relay.lark's LALR parser with one ``RelayBuilder`` as its actions. One parse at a time."""

    def __init__(self):
        self.builder = RelayBuilder()
        self._type_cache: Dict[str, Optional[Type]] = {}
        self._lark = Lark(GRAMMAR.read_text(), parser="lalr", lexer=_TokenFeed, transformer=self.builder,
                          start=["start", "type_only"], maybe_placeholders=True, cache=True)

    def run(self, src: SourceText, tokens: List[Tok], start: str) -> Any:
        """The value of the ``start`` rule's action over ``tokens`` (of ``src``)."""
        stream = _TokenStream(tokens, self.builder, len(src.text.rstrip()))
        try:
            return self._lark.parse(stream, start=start, on_error=_skip_stray_annotation)
        except UnexpectedToken as exc:
            raise _syntax_error(src, exc) from None

    def annotation_type(self, content: str) -> Optional[Type]:
        """The type in a ``ty=...`` annotation; None when absent or not a type this IR has (an
        annotation is a comment: one that cannot be read is ignored)."""
        if not content.startswith("ty="):
            return None
        end = content.find(" span=")
        text = (content[3:] if end < 0 else content[3:end]).strip()
        cache = self._type_cache
        if text in cache:
            return cache[text]
        sub = SourceText(text, "<annotation>")
        self.builder.src = sub  # type actions report errors against the annotation's own text
        try:
            ty = self.run(sub, tokenize(sub).tokens, "type_only")
        except TidlxError:
            ty = None
        if len(cache) >= _TYPE_CACHE_SIZE:
            cache.clear()
        cache[text] = ty
        return ty


class _TokenStream:
    """What ``lark.parse`` reads: the pre-read tokens as one iterator, because lark calls the
    lexer again when it resumes after ``on_error`` and must go on where it was."""

    __slots__ = ("tokens", "builder", "end")

    def __init__(self, tokens: List[Tok], builder: RelayBuilder, end: int):
        self.tokens: Iterator[Tok] = iter(tokens)
        self.builder = builder
        self.end = end


class _TokenFeed(Lexer):
    """lark's lexer for relay.lark: hands over the tokens of a ``_TokenStream``, telling the
    builder which one is being read (module-level so lark can cache its tables on disk)."""

    def __init__(self, lexer_conf):
        pass

    def lex(self, stream: _TokenStream):
        builder = stream.builder
        for tok in stream.tokens:
            builder.lookahead = tok  # actions reduced with this token ahead read it
            yield tok
        builder.lookahead = None
        builder.other_offset = stream.end  # the reductions at the end of the text


def _skip_stray_annotation(exc) -> bool:
    """An annotation where the grammar has none is a comment: skip it and go on."""
    return isinstance(exc, UnexpectedToken) and exc.token.type == "ANNOT"


def _syntax_error(src: SourceText, exc: UnexpectedToken) -> RelayParseError:
    tok = exc.token
    expected = sorted({TERMINAL_NAMES.get(t, t) for t in exc.expected if t != "ANNOT"})
    listed = ", ".join(expected[:10]) + (", ..." if len(expected) > 10 else "")
    if tok.type == "$END":
        return src.error(f"unexpected end of text; expected {listed}", len(src.text.rstrip()))
    shown = TERMINAL_NAMES.get(tok.type, tok.type)
    if tok.type in ("VAR", "GLOBAL", "IDENT", "INT", "NUMBER", "STRING"):
        shown = f"{shown} {({'VAR': '%', 'GLOBAL': '@'}.get(tok.type, '') + str(tok.value))!r}"
    elif tok.type == "META":
        shown = f"meta[relay.Constant][{tok.value}]"
    return src.error(f"unexpected {shown}; expected {listed}", tok.start_pos)
