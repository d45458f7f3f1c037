"""The tokenizer of Relay text.

One compiled regex reads the whole text into tokens before parsing starts, so the
``#[metadata]`` section at the end is known before the first ``meta[relay.Constant][i]`` is
built. ``/* ... */`` comments (nested ones too) are read as one token: those that hold a
``ty=`` / ``span=`` annotation become ANNOT tokens, the rest are dropped. The parser takes ANNOT
tokens only where the grammar accepts them, so an annotation in an odd place is a comment like
any other.
"""

from __future__ import annotations

import json
import re
from typing import Dict, List, Optional, Tuple

from ...ir.errors import TidlxError, closest
from ...ir.types import DTYPES, TensorType

from .errors import SourceText

# Each match is leading whitespace, then one token (the group named after its kind); the last
# alternative catches any other character, so matches follow each other without gaps.
_TOKEN_RE = re.compile(r"""\s*(?:
    (?P<intlist>\[\s*-?\d+\s*(?:,\s*-?\d+\s*)*,?\s*\])
  | (?P<punct>[()\[\]{},;:=.?])
  | (?P<var>%(?:[\w./\-]|::(?=[\w./\-]))+)
  | (?P<comment>/\*[^*/]*(?:(?:\*(?!/)|/(?!\*))[^*/]*)*\*/)
  | (?P<nested_comment>/\*)
  | (?P<ident>[A-Za-z_][\w.]*+(?<!\bTensor)(?<!\bmeta))
  | (?P<int>-?\d+(?![\w.]))
  | (?P<ttype>Tensor\[\s*\((?P<dims>\s*(?:\d+(?:i64|i32)?\s*(?:,\s*\d+(?:i64|i32)?\s*)*,?\s*)?)\)\s*,\s*(?P<dtype>[A-Za-z_]\w*)\s*\])
  | (?P<meta>meta\s*\[\s*(?P<meta_kind>[A-Za-z_][\w.]*)\s*\]\s*\[\s*(?P<meta_index>\d+)\s*\])
  | (?P<glob>@[\w./\-]+)
  | (?P<number>-?(?:inf|nan)f(?:16|32|64)?(?![\w.])
              |-?(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+)(?:f16|f32|f64|f|i8|i16|i32|i64|u8|u16|u32|u64)?)
  | (?P<keyword_ident>[A-Za-z_][\w.]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<arrow>->)
  | (?P<line_comment>//[^\n]*)
  | (?P<hash>\#\[\s*(?P<hash_kind>version|metadata)\b[^\]\n]*\])
  | (?P<other>\S)
)""", re.X | re.S)

_PUNCT = {
    "(": "_LPAR", ")": "_RPAR", "[": "_LBRACK", "]": "_RBRACK", "{": "_LBRACE", "}": "_RBRACE",
    ",": "_COMMA", ";": "_SEMI", ":": "_COLON", "=": "_EQ", ".": "_DOT", "?": "QMARK",
}

_KEYWORDS = {
    "def": "_DEF", "fn": "FN", "let": "_LET", "free_var": "_FREE_VAR", "Tensor": "TENSOR",
    "True": "TRUE", "False": "FALSE", "None": "NONE",
    # non-finite floats read as names; they are numbers
    **{f"{v}f{w}": "NUMBER" for v in ("inf", "nan") for w in ("", "16", "32", "64")},
}

_COMMENT_EDGE_RE = re.compile(r"/\*|\*/")

#: What parse errors call each terminal.
TERMINAL_NAMES = {
    "VAR": "a %variable", "GLOBAL": "a @global", "IDENT": "a name", "INT": "an integer",
    "NUMBER": "a number", "STRING": "a string", "META": "meta[relay.Constant][i]",
    "ANNOT": "a /* ty=... */ annotation", "FN": "'fn'", "_DEF": "'def'", "_LET": "'let'",
    "_FREE_VAR": "'free_var'", "TENSOR": "'Tensor'", "TRUE": "'True'", "FALSE": "'False'",
    "NONE": "'None'", "INTLIST": "a list of integers", "TTYPE": "a tensor type", "QMARK": "'?'", "_ARROW": "'->'", "$END": "the end of the text",
}
TERMINAL_NAMES.update({name: f"'{ch}'" for ch, name in _PUNCT.items()})


class Tok:
    """A token: its grammar terminal, its value (a name without its sigil, a decoded string,
    a parsed list or type) and the character offset where it starts."""

    __slots__ = ("type", "value", "start_pos")
    # lark's parser copies these from the last token into its end-of-text token; offsets are
    # all the frontend keeps (SourceText turns them into line and column when needed)
    line = column = end_line = end_column = end_pos = None

    def __init__(self, type_: str, value, start_pos: int):
        self.type = type_
        self.value = value
        self.start_pos = start_pos

    def __repr__(self) -> str:
        return f"Tok({self.type}, {self.value!r}, {self.start_pos})"


class Tokens:
    """The tokens of one text, plus what the tokenizer learned on the way."""

    def __init__(self):
        self.tokens: List[Tok] = []
        #: offset of a META token -> the content of the annotation comment right after it
        self.meta_annotations: Dict[int, str] = {}
        #: (offset of '#[metadata]', offset where its JSON starts, the JSON text)
        self.metadata: Optional[Tuple[int, int, str]] = None


def tokenize(src: SourceText) -> Tokens:
    out = Tokens()
    start = 0
    while start is not None:
        start = _tokenize_from(src, out, start)
    return out


def _tokenize_from(src: SourceText, out: Tokens, start: int) -> Optional[int]:
    """Appends the tokens from ``start`` on; returns where to go on after a nested comment (the
    regex reads only flat comments), or None at the end."""
    text = src.text
    tokens = out.tokens
    append = tokens.append
    punct = _PUNCT
    keywords = _KEYWORDS
    for m in _TOKEN_RE.finditer(text, start):
        kind = m.lastgroup
        pos = m.start(kind)
        end = m.end()
        if kind == "punct":
            ch = text[pos]
            append(Tok(punct[ch], ch, pos))
        elif kind == "var":
            append(Tok("VAR", text[pos + 1:end], pos))
        elif kind == "comment" or kind == "nested_comment":
            if kind == "nested_comment":
                end = _comment_end(src, pos)
            content = text[pos + 2:end - 2].strip()
            if content.startswith(("ty=", "span=")):
                if tokens and tokens[-1].type == "META":
                    out.meta_annotations[tokens[-1].start_pos] = content
                append(Tok("ANNOT", content, pos))
            if kind == "nested_comment":
                return end
        elif kind == "ident" or kind == "keyword_ident":
            value = text[pos:end]
            append(Tok(keywords.get(value, "IDENT"), value, pos))
        elif kind == "intlist":
            append(Tok("INTLIST", _int_list(text[pos:end]), pos))
        elif kind == "int":
            append(Tok("INT", text[pos:end], pos))
        elif kind == "ttype":
            append(Tok("TTYPE", _tensor_type(src, m, pos), pos))
        elif kind == "meta":
            meta_kind = m.group("meta_kind")
            if meta_kind != "relay.Constant":
                raise src.error(f"meta[{meta_kind}][...] is not supported (only meta[relay.Constant][i])", pos)
            append(Tok("META", m.group("meta_index"), pos))
        elif kind == "glob":
            append(Tok("GLOBAL", text[pos + 1:end], pos))
        elif kind == "number":
            append(Tok("NUMBER", text[pos:end], pos))
        elif kind == "string":
            append(Tok("STRING", _decode_string(src, text[pos:end], pos), pos))
        elif kind == "arrow":
            append(Tok("_ARROW", "->", pos))
        elif kind == "line_comment":
            pass
        elif kind == "hash":
            if m.group("hash_kind") == "metadata":
                out.metadata = (pos, end, text[end:])
                return None
            if tokens:
                raise src.error("#[version = ...] must come first, before any definition", pos)
        else:
            ch = text[pos]
            if ch == '"':
                raise src.error("unterminated string (a string ends with \" on the same line)", pos)
            if ch == "#":
                raise src.error("'#' starts no Relay construct here (only #[version = \"...\"] and "
                                "#[metadata] are Relay; '#' comments are Python, not Relay text)", pos)
            raise src.error(f"unexpected character {ch!r}", pos)
    return None


def _int_list(literal: str) -> tuple:
    """``[1, 1, -1]`` read in one go (attribute lists are most of a conv net's tokens)."""
    # strip() first: the pattern's \s takes every Unicode space (\x1d too), int() does not
    return tuple(int(x.strip()) for x in literal[1:-1].split(",") if x.strip())


_TENSOR_TYPES: Dict[str, TensorType] = {}


def _tensor_type(src: SourceText, m, pos: int) -> TensorType:
    """``Tensor[(1, 3, 224, 224), float32]`` read in one go (types repeat, so they are cached)."""
    key = m.group()
    ty = _TENSOR_TYPES.get(key)
    if ty is None:
        dtype = m.group("dtype")
        if dtype not in DTYPES:
            hint = closest(dtype, DTYPES)
            extra = f"; did you mean {', '.join(hint)}?" if hint else f" (known: {', '.join(DTYPES)})"
            raise src.error(f"unknown dtype '{dtype}'{extra}", m.start("dtype"))
        # TVM prints int64 dimensions with their suffix: Tensor[(1i64, 3i64), float32]
        dims = tuple(int(x.strip().split("i")[0]) for x in m.group("dims").split(",") if x.strip())
        try:
            ty = TensorType(dims, dtype)
        except TidlxError as exc:  # a negative dimension or one beyond int64
            raise src.error(str(exc), m.start("dims")) from None
        if len(_TENSOR_TYPES) < 10000:
            _TENSOR_TYPES[key] = ty
    return ty


def _comment_end(src: SourceText, start: int) -> int:
    """Offset just past the ``*/`` closing the comment opened at ``start`` (comments nest)."""
    depth = 0
    for m in _COMMENT_EDGE_RE.finditer(src.text, start):
        if m.group() == "/*":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return m.end()
    raise src.error("unterminated /* comment", start)


def _decode_string(src: SourceText, literal: str, pos: int) -> str:
    if "\\" not in literal:
        return literal[1:-1]
    try:
        return json.loads(literal)
    except ValueError:
        raise src.error(f"bad escape in string {literal}", pos) from None
