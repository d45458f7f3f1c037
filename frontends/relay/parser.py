"""Relay text -> IRModule: ``parse``, the frontend's entry point.

Reading one text goes through four parts, one file each: lexer.py reads all tokens first (so the
``#[metadata]`` section at the end is known before the first ``meta[relay.Constant][i]``);
lalr.py runs lark's LALR parser over them, whose reductions call the grammar actions of
actions.py, which build the IR; assemble.py turns the definitions read into a type-checked
IRModule. This file holds the inputs (metadata, ``params``) and the error policy: bad input is
a RelayParseError naming ``file:line:col``; a bug of ours is a TidlxInternalError, never
disguised as bad input.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping as _MappingABC
from typing import Dict, Mapping, Optional, Sequence, Union

import numpy as np

from ...ir.errors import TidlxError, TidlxInternalError
from ...ir.expr import Constant
from ...ir.metadata import MetadataError, decode_metadata
from ...ir.module import IRModule
from ...ir.types import DTYPES, Type
from .actions import MISSING_CONSTANT_NAME
from .assemble import assemble_module
from .errors import RelayParseError, SourceText
from .lalr import RelayGrammar
from .lexer import Tokens, tokenize

_LOCK = threading.RLock()  # one parse at a time: the grammar's actions are one RelayBuilder
_GRAMMAR: Dict[str, RelayGrammar] = {}  # built at first use (lark's tables load from its disk cache)


def parse(text: str, params: Optional[Union[Mapping, Sequence]] = None, *,
          source_name: str = "<string>") -> IRModule:
    """Parses Relay text as TVM prints it into a type-checked IRModule.

    ``params``: a list (or a mapping with int keys) supplies ``meta[relay.Constant][i]``
    (overriding a ``#[metadata]`` section); str keys bind @main's parameters of that name
    to constants. Raises ``RelayParseError`` (a ``TidlxError``) for any bad input, and
    ``TidlxInternalError`` (not a TidlxError) for a bug in tidlx.
    """
    if not isinstance(text, str):
        raise RelayParseError(f"Relay text must be a str, got {type(text).__name__}", str(source_name))
    src = SourceText(text, str(source_name))
    try:
        with _LOCK:
            return _parse(src, params)
    except (RelayParseError, TidlxInternalError):
        raise
    except TidlxError as exc:  # bad input found by the IR (not by this frontend): same report
        raise RelayParseError(str(exc), src.source_name) from None
    except RecursionError:
        raise RelayParseError("the text is nested too deeply to read", src.source_name) from None
    except MemoryError:
        raise RelayParseError("the text is too large to read", src.source_name) from None
    except Exception as exc:  # not located by _parse: before the grammar runs
        raise _internal_error(src, None, exc) from exc


def _parse(src: SourceText, params) -> IRModule:
    grammar = _GRAMMAR.get("relay")
    if grammar is None:
        grammar = _GRAMMAR["relay"] = RelayGrammar()
    builder = grammar.builder
    toks = tokenize(src)
    meta = _meta_table(src, toks)
    by_name = _apply_params(src, params, meta)
    annotation_types: Dict[int, Optional[Type]] = {}
    for offset, content in toks.meta_annotations.items():
        try:
            annotation_types[offset] = grammar.annotation_type(content)
        except (TidlxError, RecursionError, MemoryError):
            raise
        except Exception as exc:
            raise _internal_error(src, offset, exc) from exc
    if not toks.tokens:
        raise src.error("no definition or expression in the text", len(src.text.rstrip()))
    builder.reset(src, toks, meta, annotation_types)
    try:
        grammar.run(src, toks.tokens, "start")
        return assemble_module(builder, src, by_name)
    except RelayParseError:
        raise
    except TidlxError as exc:  # bad input found by the IR (e.g. a node's constructor): located here
        raise src.error(str(exc), builder.offset()) from None
    except (RecursionError, MemoryError):
        raise
    except Exception as exc:  # a bug of ours or of an op's type relation, never the text's fault
        raise _internal_error(src, builder.offset(), exc) from exc
    finally:
        builder.reset(None, None, {}, {})  # drop references to this text's nodes


def _internal_error(src: SourceText, offset: Optional[int], exc: Exception) -> TidlxInternalError:
    return TidlxInternalError(
        f"{src.where(offset)}: internal error in tidlx while reading this text "
        f"({type(exc).__name__}: {exc}); this is a bug in tidlx, not a problem with the text: "
        f"please report it with the text")


def _meta_table(src: SourceText, toks: Tokens) -> Dict[int, Constant]:
    if toks.metadata is None:
        return {}
    hash_pos, json_pos, json_text = toks.metadata
    try:
        arrays = decode_metadata(json_text)
    except MetadataError as exc:
        offset = json_pos + exc.json_pos if hasattr(exc, "json_pos") else hash_pos
        raise src.error(f"#[metadata] section: {exc}", offset) from None
    return {i: Constant(a) for i, a in enumerate(arrays)}


def _to_constant(src: SourceText, value, what: str) -> Constant:
    if isinstance(value, Constant):
        return value
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError, OverflowError) as exc:  # numpy refuses the value
        raise src.error(f"{what}: cannot turn {type(value).__name__} into an array ({exc})", None) from None
    name = "bool" if arr.dtype == np.bool_ else arr.dtype.name
    if name not in DTYPES:
        raise src.error(f"{what}: dtype {arr.dtype} is not one of {', '.join(DTYPES)}", None)
    return Constant(arr)


def _apply_params(src: SourceText, params, meta: Dict[int, Constant]) -> Dict[str, object]:
    """Fills ``meta`` from int keys (or list positions); returns the str-keyed values (assembly
    binds them into @main)."""
    if params is None:
        return {}
    if isinstance(params, _MappingABC):
        items = list(params.items())
    elif isinstance(params, (list, tuple)):
        items = list(enumerate(params))
    else:
        raise src.error(f"params must be a list or a mapping, got {type(params).__name__}", None)
    by_name = {}
    for key, value in items:
        if isinstance(key, (bool, np.bool_)):
            raise src.error(f"params key {key!r}: keys are int (meta index) or str (parameter name)", None)
        if isinstance(key, (int, np.integer)):
            if key < 0:
                raise src.error(f"params[{key}]: meta indices are non-negative", None)
            meta[int(key)] = _to_constant(src, value, f"params[{key}]")
        elif isinstance(key, str):
            by_name[key] = value
        else:
            raise src.error(f"params key {key!r}: keys are int (meta index) or str (parameter name)", None)
    return by_name


__all__ = ["parse", "MISSING_CONSTANT_NAME"]
