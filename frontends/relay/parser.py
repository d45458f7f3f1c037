"""Relay text -> IRModule.

The grammar (relay.lark) is LALR(1); lark calls ``RelayBuilder``'s methods as it reduces (no
parse tree is built). LR reductions happen in text order, so names are resolved as soon as they
are read: a ``%N = ...;`` binding is in scope for every later reference, a ``fn``'s parameters
from its ``{`` on. Globals may be used before their ``def``; they are checked at the end.

After the text is read, constants that the text refers to but does not hold become parameters
(threaded through the callers of the function that uses them), ``params`` given by name are
bound, and types are inferred for every function whose parameters all have types.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Mapping as _MappingABC
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple as PyTuple, Union

import numpy as np
from lark import Lark

from tidlx.ir.errors import (OpAttributeError, TidlxError, TidlxInternalError, TidlxWarning, UnknownOpError,
                             closest)
from tidlx.ir.expr import Call, Constant, Expr, Function, GlobalVar, Let, Tuple, TupleGetItem, Var
from tidlx.ir.metadata import MetadataError, decode_metadata
from tidlx.ir.module import IRModule
from tidlx.ir.op import get_op
from tidlx.ir.traversal import children, map_post_order, post_order
from tidlx.ir.type_infer import infer_expr_type
from tidlx.ir.types import DTYPES, FuncType, TensorType, TupleType, Type

from .errors import RelayParseError, SourceText
from .lexer import TERMINAL_NAMES, Tokens, tokenize

_GRAMMAR = Path(__file__).with_name("relay.lark")

#: name of the parameter a missing ``meta[relay.Constant][i]`` becomes
MISSING_CONSTANT_NAME = "meta_const_{}"

_INT_SUFFIX = {"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
               "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64"}
_FLOAT_SUFFIX = {"f": "float32", "f32": "float32", "f16": "float16", "f64": "float64", "": "float32"}


class _Attr(tuple):
    """``name=value`` inside an argument or parameter list: (name, value, offset)."""
    __slots__ = ()


class _LetItem(tuple):
    """``let %x = value;`` inside a block: (var, value, offset)."""
    __slots__ = ()


@dataclass
class _Def:
    name: str
    params: List[Var]
    attrs: Dict[str, Any]
    ret_type: Optional[Type]
    body: Optional[Expr]
    pos: int
    #: meta index -> the parameter standing for a constant missing from the text
    missing: Dict[int, Var] = field(default_factory=dict)
    missing_pos: Dict[int, int] = field(default_factory=dict)
    #: globals it calls / refers to, in first-use order
    calls: Dict[str, None] = field(default_factory=dict)
    refs: Dict[str, None] = field(default_factory=dict)
    #: some parameter (of it or of a closure in it) has no type, so it cannot be type-checked
    untyped: bool = False


def _cb(method):
    """A grammar callback: lark hands it the children as one list; it takes them as arguments.
    (lark's own v_args wrapper re-wraps on every attribute access, which costs ~10% of a parse.)"""
    def callback(self, children):
        return method(self, *children)

    callback.__name__ = method.__name__
    callback.__doc__ = method.__doc__
    return callback


class RelayBuilder:
    """Builds IR while lark parses. One parse at a time (``parse`` holds a lock).

    Methods marked ``@_cb`` are named after grammar rules (or their ``-> alias``)."""

    def reset(self, src: SourceText, toks: Tokens, meta: Dict[int, Constant],
              annotation_types: Dict[int, Optional[Type]]):
        self.src = src
        self.toks = toks
        self.meta = meta
        self.annotation_types = annotation_types  # META offset -> annotated type
        self.scopes: List[Dict[str, Expr]] = [{}]
        self.defs: Dict[str, _Def] = {}
        self.global_vars: Dict[str, GlobalVar] = {}
        self.global_refs: Dict[str, int] = {}
        self.free_vars: List[Var] = []
        self.current: _Def = _Def("main", [], {}, None, None, 0)  # the bare expression's @main
        self.in_def = False
        self.positions: Dict[Expr, int] = {}
        self.last_call: Optional[Call] = None
        self.ops: Dict[str, Any] = {}
        #: the token after the one being reduced (set by the driver): a call reduced with an
        #: annotation ahead takes its span as layer right away
        self.lookahead = None
        #: where reading is when no token is being read (the end of the text, then the def
        #: being assembled): errors that are not the text's own name it
        self.other_offset: Optional[int] = None

    def offset(self) -> Optional[int]:
        """Where reading is: the token being read, else ``other_offset``."""
        return self.lookahead.start_pos if self.lookahead is not None else self.other_offset

    # --- helpers ------------------------------------------------------------------------

    def error(self, message: str, offset: Optional[int]) -> RelayParseError:
        return self.src.error(message, offset)

    def bind(self, name: str, value: Expr, offset: int, what: str = "") -> None:
        scope = self.scopes[-1]
        if name in scope:
            raise self.error(f"%{name} is bound twice in the same scope{what}", offset)
        scope[name] = value

    def lookup(self, name: str) -> Optional[Expr]:
        for scope in reversed(self.scopes):
            value = scope.get(name)
            if value is not None:
                return value
        return None

    def resolve(self, name: str, offset: int) -> Expr:
        """A ``%name``: a bound name first (``%x.1`` may be a name), else ``%base.0.1`` as
        projections of a bound ``%base``."""
        value = self.lookup(name)
        if value is not None:
            return value
        parts = name.split(".")
        for k in range(len(parts) - 1, 0, -1):
            if not parts[k].isdigit():
                break
            base = self.lookup(".".join(parts[:k]))
            if base is not None:
                for index in parts[k:]:
                    base = TupleGetItem(base, int(index))
                    self.positions[base] = offset
                return base
        known = [n for scope in self.scopes for n in scope]
        hint = closest(name, known)
        extra = f"; did you mean {', '.join('%' + h for h in hint)}?" if hint else ""
        raise self.error(f"unbound variable %{name}{extra}", offset)

    def split_args(self, args, callee: str):
        positional, attrs = [], {}
        first_attr = None
        for item in args or ():
            if isinstance(item, _Attr):
                name, value, offset = item
                if name in attrs:
                    raise self.error(f"{callee}: attribute '{name}' is given twice", offset)
                attrs[name] = value
                first_attr = first_attr or item
            else:
                if attrs:
                    raise self.error(f"{callee}: positional argument after attribute '{first_attr[0]}' "
                                     f"(arguments come first, then name=value attributes)", first_attr[2])
                positional.append(item)
        return positional, attrs

    def function_head(self, params, offset: int, what: str):
        """Opens the scope of a function: its parameters, then its attributes."""
        variables, attrs = [], {}
        for item in params or ():
            if isinstance(item, _Attr):
                name, value, attr_offset = item
                if name in attrs:
                    raise self.error(f"{what}: attribute '{name}' is given twice", attr_offset)
                attrs[name] = value
            else:
                if attrs:
                    raise self.error(f"{what}: parameter %{item.name_hint} after attributes "
                                     f"(parameters come first, then name=value attributes)",
                                     self.positions.get(item))
                variables.append(item)
        self.scopes.append({})
        if any(v.type_annotation is None for v in variables):
            self.current.untyped = True
        for v in variables:
            self.bind(v.name_hint, v, self.positions.get(v, offset), f" (parameters of {what})")
        return variables, attrs

    def layer_ahead(self) -> Optional[str]:
        ahead = self.lookahead
        if ahead is not None and ahead.type == "ANNOT":
            return span_layer(ahead.value)
        return None

    def make_call(self, callee, args, offset: int, what: str) -> Call:
        positional, attrs = self.split_args(args, what)
        node = Call(callee, positional, attrs or None, self.layer_ahead())
        self.positions[node] = offset
        self.last_call = node
        return node

    # --- top level ----------------------------------------------------------------------

    @_cb
    def module(self, *defs):
        return None

    @_cb
    def bare_expr(self, *items):
        lets, result = (items[0], items[1]) if len(items) == 2 else ([], items[0])
        body = self.build_block(lets, result)
        main = self.current
        if len(items) == 1 and isinstance(body, Function) and not self.free_vars:
            main.params, main.attrs, main.ret_type = list(body.params), dict(body.attrs), body.ret_type
            main.body, main.pos = body.body, self.positions.get(body, 0)
        else:
            main.params, main.body = list(self.free_vars), body
            main.pos = self.positions.get(body, self.toks.tokens[0].start_pos if self.toks.tokens else 0)
        self.defs["main"] = main
        return None

    @_cb
    def def_head(self, name_tok, params, ret_type):
        name = name_tok.value
        if name in self.defs:
            raise self.error(f"@{name} is defined twice", name_tok.start_pos)
        self.current = _Def(name, [], {}, ret_type, None, name_tok.start_pos)
        self.in_def = True
        self.current.params, self.current.attrs = self.function_head(params, name_tok.start_pos, f"@{name}")
        return self.current

    @_cb
    def defn(self, head: _Def, body):
        self.scopes.pop()
        head.body = body
        self.defs[head.name] = head
        self.in_def = False
        return None

    # --- statements and blocks ----------------------------------------------------------

    @_cb
    def block(self, lets, result):
        return self.build_block(lets, result)

    paren_block = block

    @_cb
    def block_expr(self, result):
        return result

    def build_block(self, lets, result):
        """The value of statements then an expression: graph bindings are only names, so
        just the ``let``s make nodes."""
        for var, value, offset in reversed(lets):
            result = Let(var, value, result)
            self.positions[result] = offset
        return result

    @_cb
    def stmts_first(self, stmt):
        return [stmt] if stmt is not None else []

    @_cb
    def stmts_more(self, lets, stmt):
        if stmt is not None:
            lets.append(stmt)
        return lets

    @_cb
    def intlist_attr(self, tok):
        return tok.value

    @_cb
    def ttype(self, tok):
        return tok.value

    @_cb
    def bind_stmt(self, name_tok, value):
        self.bind(name_tok.value, value, name_tok.start_pos)
        return None

    @_cb
    def let_stmt(self, name_tok, ty, value):
        var = Var(name_tok.value, ty)
        self.positions[var] = name_tok.start_pos
        self.bind(var.name_hint, var, name_tok.start_pos)
        return _LetItem((var, value, name_tok.start_pos))

    @_cb
    def free_var_stmt(self, name_tok, ty):
        if self.in_def or len(self.scopes) > 1:
            raise self.error("free_var is only allowed before a top-level expression, not inside a def "
                             "or fn", name_tok.start_pos)
        var = Var(name_tok.value, ty)
        self.positions[var] = name_tok.start_pos
        self.bind(var.name_hint, var, name_tok.start_pos)
        self.free_vars.append(var)
        if ty is None:
            self.current.untyped = True
        return None

    # --- expressions --------------------------------------------------------------------

    @_cb
    def annotated(self, expr, annot):
        # A call right before its annotation took the layer when it was built (layer_ahead);
        # one in parentheses, "(f(%x)) /* span=... */", gets it here.
        if expr is self.last_call and isinstance(expr, Call) and expr.layer is None:
            layer = span_layer(annot.value)
            if layer is not None:
                node = Call(expr.op, expr.args, expr.attrs, layer)
                self.positions[node] = self.positions.get(expr)
                self.last_call = node
                return node
        return expr

    @_cb
    def var_ref(self, tok):
        self.last_call = None
        return self.resolve(tok.value, tok.start_pos)

    @_cb
    def global_ref(self, tok):
        return self.global_var(tok)

    def global_var(self, tok) -> GlobalVar:
        name = tok.value
        gv = self.global_vars.get(name)
        if gv is None:
            gv = self.global_vars[name] = GlobalVar(name)
            self.global_refs[name] = tok.start_pos
        self.current.refs[name] = None
        return gv

    @_cb
    def meta_ref(self, tok):
        index = int(tok.value)
        annotated = self.annotation_types.get(tok.start_pos)
        const = self.meta.get(index)
        if const is not None:
            if isinstance(annotated, TensorType) and annotated != const.checked_type:
                raise self.error(f"meta[relay.Constant][{index}] is annotated {annotated} but the constant "
                                 f"is {const.checked_type}", tok.start_pos)
            return const
        var = self.current.missing.get(index)
        if var is None:
            var = Var(MISSING_CONSTANT_NAME.format(index), annotated)
            if annotated is None:
                self.current.untyped = True
            self.current.missing[index] = var
            self.current.missing_pos[index] = tok.start_pos
        return var

    @_cb
    def int_literal(self, tok):
        value = int(tok.value)
        if not -2 ** 31 <= value < 2 ** 31:
            raise self.error(f"integer literal {tok.value} does not fit in int32 (write {tok.value}i64 for int64)",
                             tok.start_pos)
        return Constant(np.array(value, dtype=np.int32))

    @_cb
    def number_literal(self, tok):
        value, dtype = parse_number(tok.value)
        if value is None:
            raise self.error(f"bad number literal {tok.value}: {dtype}", tok.start_pos)
        return Constant(np.array(value, dtype=dtype))

    @_cb
    def bool_literal(self, tok):
        return Constant(np.array(tok.type == "TRUE", dtype=np.bool_))

    @_cb
    def empty_tuple(self):
        return Tuple(())

    @_cb
    def tuple(self, *fields):
        return Tuple(fields)

    @_cb
    def proj(self, expr, index_tok):
        parts = index_tok.value.split(".")
        if not all(p.isdigit() for p in parts):
            raise self.error(f"a tuple projection needs a non-negative integer index, got .{index_tok.value}",
                             index_tok.start_pos)
        for p in parts:
            expr = TupleGetItem(expr, int(p))
            self.positions[expr] = index_tok.start_pos
        return expr

    @_cb
    def op_call(self, name_tok, args):
        name = name_tok.value
        offset = name_tok.start_pos
        op = self.ops.get(name)
        if op is None:
            try:
                op = get_op(name)
            except UnknownOpError as exc:
                raise self.error(str(exc), offset) from None
            self.ops[name] = op
        positional, attrs = self.split_args(args, name)
        problem = op.arity_error(len(positional))
        if problem:
            raise self.error(problem, offset)
        try:
            attrs_obj = op.make_attrs(attrs)
        except OpAttributeError as exc:
            raise self.error(str(exc), self._attr_offset(args, exc, offset)) from None
        node = Call(op, positional, attrs_obj, self.layer_ahead())
        self.positions[node] = offset
        self.last_call = node
        return node

    @staticmethod
    def _attr_offset(args, exc, default: int) -> int:
        """Points a bad-attribute error at the attribute it names, when it names one."""
        text = str(exc)
        for item in args or ():
            if isinstance(item, _Attr) and f"'{item[0]}'" in text:
                return item[2]
        return default

    @_cb
    def var_call(self, name_tok, args):
        callee = self.resolve(name_tok.value, name_tok.start_pos)
        return self.make_call(callee, args, name_tok.start_pos, f"call of %{name_tok.value}")

    @_cb
    def global_call(self, name_tok, args):
        callee = self.global_var(name_tok)
        self.current.calls[callee.name_hint] = None
        return self.make_call(callee, args, name_tok.start_pos, f"call of @{name_tok.value}")

    @_cb
    def expr_call(self, callee, args):
        return self.make_call(callee, args, self.positions.get(callee), "call")

    @_cb
    def list_first(self, item):
        return [item]

    @_cb
    def list_more(self, items, item):
        items.append(item)
        return items

    @_cb
    def list_trailing_comma(self, items):
        return items

    @_cb
    def attr(self, name_tok, value):
        return _Attr((name_tok.value, value, name_tok.start_pos))

    # --- attribute values ---------------------------------------------------------------

    @_cb
    def int_attr(self, tok):
        return int(tok.value)

    @_cb
    def number_attr(self, tok):
        value, dtype = parse_number(tok.value)
        if value is None:
            raise self.error(f"bad number {tok.value}: {dtype}", tok.start_pos)
        return float(value) if dtype.startswith("float") else int(value)

    @_cb
    def string_attr(self, tok):
        return tok.value

    @_cb
    def true_attr(self, tok):
        return True

    @_cb
    def false_attr(self, tok):
        return False

    @_cb
    def none_attr(self, tok):
        return None

    @_cb
    def ident_attr(self, tok):
        return tok.value

    @_cb
    def list_attr(self, *values):
        return tuple(values)

    # --- functions ----------------------------------------------------------------------

    @_cb
    def fn_head(self, fn_tok, params, ret_type):
        variables, attrs = self.function_head(params, fn_tok.start_pos, "fn")
        return variables, attrs, ret_type, fn_tok.start_pos

    @_cb
    def fn(self, head, body):
        self.scopes.pop()
        variables, attrs, ret_type, offset = head
        node = Function(variables, body, ret_type, attrs)
        self.positions[node] = offset
        self.last_call = None
        return node

    @_cb
    def param(self, name_tok, ty, annot=None):
        var = Var(name_tok.value, ty)
        self.positions[var] = name_tok.start_pos
        return var

    # --- types --------------------------------------------------------------------------

    def dtype(self, tok) -> str:
        name = tok.value
        if name not in DTYPES:
            hint = closest(name, DTYPES)
            extra = f"; did you mean {', '.join(hint)}?" if hint else f" (known: {', '.join(DTYPES)})"
            raise self.error(f"unknown dtype '{name}'{extra}", tok.start_pos)
        return name

    @_cb
    def tensor_type(self, tensor_tok, dims, dtype_tok):
        return TensorType(dims or (), self.dtype(dtype_tok))

    @_cb
    def scalar_type(self, tok):
        return TensorType((), self.dtype(tok))

    @_cb
    def bare_tensor_type(self, tok):
        raise self.error("a tensor type needs a shape and a dtype: Tensor[(1, 3), float32]", tok.start_pos)

    @_cb
    def tuple_type(self, *fields):
        return TupleType(fields)

    @_cb
    def func_type(self, fn_tok, *types):
        types = [t for t in types if t is not None]
        return FuncType(tuple(types[:-1]), types[-1])

    @_cb
    def dims(self, *items):
        out = []
        for tok in items:
            if tok.type == "QMARK":
                raise self.error("dynamic dimensions ('?') are not supported: tidlx needs static shapes",
                                 tok.start_pos)
            if tok.type == "NUMBER":  # 1i64: TVM's int64 dimensions
                value, dtype = parse_number(tok.value)
                if value is None or dtype not in ("int64", "int32"):
                    raise self.error(f"a dimension must be an integer, got {tok.value}", tok.start_pos)
            else:
                value = int(tok.value)
            if value < 0:
                raise self.error(f"negative dimension {value}", tok.start_pos)
            out.append(value)
        return tuple(out)

    @_cb
    def type_only(self, ty):
        return ty


def span_layer(annotation: str) -> Optional[str]:
    """The layer name in ``ty=... span=NAME:line:col`` (``span="..."`` when quoted)."""
    if annotation.startswith("span="):
        span = annotation[5:]
    else:
        at = annotation.find(" span=")
        if at < 0:
            return None
        span = annotation[at + 6:]
    span = span.strip()
    if span.startswith('"'):
        import json

        end = _string_end(span)
        if end > 0:
            try:
                return json.loads(span[:end])
            except ValueError:
                pass
        return span
    # NAME:line:col; the name itself may hold ':' (onnx::Conv_193).
    head, sep, col = span.rpartition(":")
    if sep and col.isdigit():
        name, sep2, line = head.rpartition(":")
        if sep2 and line.isdigit():
            return name
    return span


def _string_end(s: str) -> int:
    i = 1
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        if s[i] == '"':
            return i + 1
        i += 1
    return -1


_NUMBER_RE = re.compile(r"(-?(?:inf|nan|\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+))"
                        r"(f16|f32|f64|f|i8|i16|i32|i64|u8|u16|u32|u64)?")


def parse_number(text: str):
    """(value, dtype) of a number literal such as ``1e-05f``, ``0i64``, ``1.5f16``, ``-4f``;
    (None, reason) when it is malformed or out of range."""
    m = _NUMBER_RE.fullmatch(text)
    if m is None:
        return None, "not a number"
    number, suffix = m.group(1), m.group(2) or ""
    if suffix in _INT_SUFFIX:
        dtype = _INT_SUFFIX[suffix]
        try:
            value = int(number)
        except ValueError:
            return None, f"{dtype} literals must be whole numbers"
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            return None, f"{value} is out of range for {dtype}"
        return value, dtype
    dtype = _FLOAT_SUFFIX[suffix]
    value = float(number)
    if np.isfinite(value):
        with np.errstate(over="ignore"):
            if not np.isfinite(np.array(value, dtype=dtype)):
                return None, f"{number} is out of range for {dtype}"
    return value, dtype


# --- the LALR driver ------------------------------------------------------------------------

class LalrTables:
    """lark's LALR(1) tables for relay.lark, run by a lean loop over our pre-read tokens.

    lark builds (and caches on disk) the tables and the callbacks that filter each rule's
    children and call ``RelayBuilder``; ``run`` is lark's shift/reduce loop without its
    per-token generality (rule hashing on every reduce, lexer threads), and it passes
    one-child ``?rule`` reductions through without a call.
    """

    def __init__(self, builder: "RelayBuilder"):
        self.builder = builder
        from lark.parse_tree_builder import ExpandSingleChild
        from lark.parsers.lalr_analysis import Shift

        lark = Lark(_GRAMMAR.read_text(), parser="lalr", lexer="basic", transformer=builder,
                    start=["start", "type_only"], maybe_placeholders=True, cache=True)
        inner = lark.parser.parser.parser
        table = inner.parse_table
        callbacks = inner.callbacks
        self.start_states = dict(table.start_states)
        self.end_states = dict(table.end_states)
        # state -> {terminal or rule name: (True, next state) | (False, (size, rule name, callback))};
        # callback None: a "?rule" with one child, which passes its child through unchanged.
        self.states: Dict[int, Dict[str, tuple]] = {}
        for state, row in table.states.items():
            self.states[state] = {
                sym: (True, arg) if action is Shift else
                     (False, (len(arg.expansion), arg.origin.name,
                              None if len(arg.expansion) == 1 and isinstance(callbacks[arg], ExpandSingleChild)
                              else callbacks[arg]))
                for sym, (action, arg) in row.items()}

    def run(self, src: SourceText, tokens: List[Any], start: str):
        states = self.states
        end_state = self.end_states[start]
        stack = [self.start_states[start]]
        values: List[Any] = []
        push_state, push_value = stack.append, values.append
        builder = self.builder

        def reduce(rule):
            size, origin, callback = rule
            if callback is None:  # a one-child "?rule": the child's value passes through
                del stack[-1]
            elif size:
                args = values[-size:]
                del values[-size:]
                del stack[-size:]
                push_value(callback(args))
            else:
                push_value(callback([]))
            push_state(states[stack[-1]][origin][1])
        for tok in tokens:
            ttype = tok.type
            builder.lookahead = tok
            while True:
                action = states[stack[-1]].get(ttype)
                if action is None:
                    if ttype == "ANNOT":  # an annotation where the grammar has none: a comment
                        break
                    raise _syntax_error(src, tok, states[stack[-1]])
                if action[0]:
                    push_state(action[1])
                    push_value(tok)
                    break
                reduce(action[1])
        builder.lookahead = None
        builder.other_offset = len(src.text.rstrip())  # the reductions at the end of the text
        while True:
            action = states[stack[-1]].get("$END")
            if action is None or action[0]:
                raise _syntax_error(src, None, states[stack[-1]])
            reduce(action[1])
            if stack[-1] == end_state:
                return values[-1]


_LOCK = threading.RLock()
_STATE: Dict[str, Any] = {}


def _tables() -> PyTuple[LalrTables, "RelayBuilder"]:
    if "tables" not in _STATE:
        builder = RelayBuilder()
        _STATE["tables"] = LalrTables(builder)
        _STATE["builder"] = builder
        _STATE["type_cache"] = {}
    return _STATE["tables"], _STATE["builder"]


def _syntax_error(src: SourceText, tok, row: Dict[str, tuple]) -> RelayParseError:
    expected = sorted({TERMINAL_NAMES.get(t, t) for t in row if t.isupper() and t != "ANNOT"})
    listed = ", ".join(expected[:10]) + (", ..." if len(expected) > 10 else "")
    if tok is None:
        return src.error(f"unexpected end of text; expected {listed}", len(src.text.rstrip()))
    shown = TERMINAL_NAMES.get(tok.type, tok.type)
    if tok.type in ("VAR", "GLOBAL", "IDENT", "INT", "NUMBER", "STRING"):
        shown = f"{shown} {({'VAR': '%', 'GLOBAL': '@'}.get(tok.type, '') + str(tok.value))!r}"
    elif tok.type == "META":
        shown = f"meta[relay.Constant][{tok.value}]"
    return src.error(f"unexpected {shown}; expected {listed}", tok.start_pos)


def _annotation_type(content: str, cache: Dict[str, Optional[Type]], tables: LalrTables,
                     builder: "RelayBuilder") -> Optional[Type]:
    """The type in a ``ty=...`` annotation; None when absent or not a type this IR has (an
    annotation is a comment: one that cannot be read is ignored)."""
    if not content.startswith("ty="):
        return None
    end = content.find(" span=")
    text = (content[3:] if end < 0 else content[3:end]).strip()
    if text in cache:
        return cache[text]
    sub = SourceText(text, "<annotation>")
    builder.src = sub  # type callbacks report errors against the annotation's own text
    try:
        ty = tables.run(sub, tokenize(sub).tokens, "type_only")
    except TidlxError:
        ty = None
    if len(cache) > 10000:
        cache.clear()
    cache[text] = ty
    return ty


# --- entry point ----------------------------------------------------------------------------

def parse(text: str, params: Optional[Union[Mapping, Sequence]] = None, *,
          source_name: str = "<string>") -> IRModule:
    """Parses Relay text as TVM prints it into a type-checked IRModule.

    ``params``: a list (or a mapping with int keys) supplies ``meta[relay.Constant][i]``
    (overriding a ``#[metadata]`` section); str keys bind @main's parameters of that name
    to constants. Raises ``RelayParseError`` (a ``TidlxError``) for any bad input.
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
    except Exception as exc:  # before the grammar runs: no position to give
        raise _internal_error(src, None, exc) from exc


def _internal_error(src: SourceText, offset: Optional[int], exc: Exception) -> TidlxInternalError:
    return TidlxInternalError(
        f"{src.where(offset)}: internal error in tidlx while reading this text "
        f"({type(exc).__name__}: {exc}); this is a bug in tidlx, not a problem with the text: "
        f"please report it with the text")


def _parse(src: SourceText, params) -> IRModule:
    tables, builder = _tables()
    toks = tokenize(src)
    meta = _meta_table(src, toks)
    by_name = _apply_params(params, meta)
    cache = _STATE["type_cache"]
    annotation_types = {offset: _annotation_type(content, cache, tables, builder)
                        for offset, content in toks.meta_annotations.items()}
    if not toks.tokens:
        raise src.error("no definition or expression in the text", len(src.text.rstrip()))
    builder.reset(src, toks, meta, annotation_types)
    try:
        tables.run(src, toks.tokens, "start")
        return _finish(builder, src, by_name)
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


def _to_constant(value, what: str) -> Constant:
    if isinstance(value, Constant):
        return value
    try:
        arr = np.asarray(value)
    except Exception as exc:
        raise RelayParseError(f"{what}: cannot turn {type(value).__name__} into an array ({exc})") from None
    name = "bool" if arr.dtype == np.bool_ else arr.dtype.name
    if name not in DTYPES:
        raise RelayParseError(f"{what}: dtype {arr.dtype} is not one of {', '.join(DTYPES)}")
    return Constant(arr)


def _apply_params(params, meta: Dict[int, Constant]) -> Dict[str, Constant]:
    """Fills ``meta`` from int keys (or list positions); returns the str-keyed constants."""
    if params is None:
        return {}
    if isinstance(params, _MappingABC):
        items = list(params.items())
    elif isinstance(params, (list, tuple)):
        items = list(enumerate(params))
    else:
        raise RelayParseError(f"params must be a list or a mapping, got {type(params).__name__}")
    by_name = {}
    for key, value in items:
        if isinstance(key, (bool, np.bool_)):
            raise RelayParseError(f"params key {key!r}: keys are int (meta index) or str (parameter name)")
        if isinstance(key, (int, np.integer)):
            if key < 0:
                raise RelayParseError(f"params[{key}]: meta indices are non-negative")
            meta[int(key)] = _to_constant(value, f"params[{key}]")
        elif isinstance(key, str):
            by_name[key] = _to_constant(value, f"params[{key!r}]")
        else:
            raise RelayParseError(f"params key {key!r}: keys are int (meta index) or str (parameter name)")
    return by_name


def _finish(b: RelayBuilder, src: SourceText, by_name: Dict[str, Constant]) -> IRModule:
    defs = b.defs
    positions = b.positions
    for name, offset in b.global_refs.items():
        if name not in defs:
            hint = closest(name, defs)
            extra = f"; did you mean {', '.join('@' + h for h in hint)}?" if hint else \
                f" (defined: {', '.join('@' + d for d in defs)})"
            raise src.error(f"undefined global @{name}{extra}", offset)

    needs = _thread_missing_constants(defs)
    functions: Dict[str, Function] = {}
    for name, d in defs.items():
        b.other_offset = d.pos
        extra = needs[name]
        body = d.body
        if any(needs[callee] for callee in d.calls):
            body = _pass_missing_constants(body, extra, needs, positions)
        fn = Function(d.params + [extra[i] for i in sorted(extra)], body, d.ret_type, d.attrs)
        positions[fn] = d.pos
        functions[name] = fn
        if d.missing:
            _warn_missing(src, d, by_name)

    if by_name:
        functions["main"] = _bind_by_name(functions, by_name, positions)

    mod = IRModule(functions)
    _infer(mod, src, positions, defs, b)
    return mod


def _thread_missing_constants(defs: Dict[str, _Def]) -> Dict[str, Dict[int, Var]]:
    """meta index -> parameter, for each function: its own missing constants plus those of
    every function it calls (which it must pass on), to a fixpoint."""
    needs = {name: dict(d.missing) for name, d in defs.items()}
    callees = {name: list(d.calls) for name, d in defs.items()}
    changed = True
    while changed:
        changed = False
        for name in defs:
            mine = needs[name]
            for callee in callees[name]:
                for index, var in needs.get(callee, {}).items():
                    if index not in mine:
                        mine[index] = Var(MISSING_CONSTANT_NAME.format(index), var.type_annotation)
                        if var.type_annotation is None:
                            defs[name].untyped = True
                        changed = True
    return needs


def _pass_missing_constants(body: Expr, mine: Dict[int, Var], needs, positions) -> Expr:
    def rewrite(old, new):
        if isinstance(new, Call) and isinstance(new.op, GlobalVar) and needs.get(new.op.name_hint):
            wanted = needs[new.op.name_hint]
            new = Call(new.op, tuple(new.args) + tuple(mine[i] for i in sorted(wanted)), new.attrs, new.layer)
        if new is not old and old in positions:
            positions[new] = positions[old]
        return new

    return map_post_order(body, rewrite)


def _index_ranges(indices) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"."""
    out, run = [], []
    for i in sorted(indices):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def _warn_missing(src: SourceText, d: _Def, bound_by_name) -> None:
    indices = [i for i in sorted(d.missing)
               if not (d.name == "main" and d.missing[i].name_hint in bound_by_name)]
    if not indices:
        return
    first = min(d.missing_pos[i] for i in indices)
    untyped = [i for i in indices if d.missing[i].type_annotation is None]
    typed_note = (f"; untyped (no /* ty=... */ annotation): {_index_ranges(untyped)}" if untyped else
                  ", typed from their /* ty=... */ annotations")
    threaded = "" if d.name == "main" else "; every caller of it gets the same parameters and passes them on"
    warnings.warn(TidlxWarning(
        f"{src.where(first)}: @{d.name} uses {len(indices)} constant(s) that the text does not hold "
        f"(no #[metadata] section, no params): meta[relay.Constant][{_index_ranges(indices)}]; each "
        f"becomes a parameter %{MISSING_CONSTANT_NAME.format('<i>')} of @{d.name}{typed_note}{threaded}"),
        stacklevel=5)


def _bind_by_name(functions: Dict[str, Function], by_name: Dict[str, Constant], positions) -> Function:
    main = functions.get("main")
    if main is None:
        raise RelayParseError(f"params {', '.join(map(repr, by_name))}: the text has no @main to bind them to")
    bound: Dict[Var, Constant] = {}
    for name, const in by_name.items():
        matches = [p for p in main.params if p.name_hint == name]
        if not matches:
            hint = closest(name, [p.name_hint for p in main.params])
            extra = f"; did you mean {', '.join(repr(h) for h in hint)}?" if hint else \
                f" (it has {', '.join('%' + p.name_hint for p in main.params) or 'none'})"
            raise RelayParseError(f"params[{name!r}]: @main has no parameter %{name}{extra}")
        if len(matches) > 1:
            raise RelayParseError(f"params[{name!r}]: @main has {len(matches)} parameters named %{name}")
        var = matches[0]
        if var.type_annotation is not None and var.type_annotation != const.checked_type:
            raise RelayParseError(f"params[{name!r}]: parameter %{name} is {var.type_annotation} but the "
                                  f"value is {const.checked_type}")
        bound[var] = const

    def substitute(old, new):
        if isinstance(old, Var) and old in bound:
            return bound[old]
        if new is not old and old in positions:
            positions[new] = positions[old]
        return new

    body = map_post_order(main.body, substitute)
    fn = Function([p for p in main.params if p not in bound], body, main.ret_type, main.attrs)
    positions[fn] = positions.get(main)
    return fn


# --- type inference -------------------------------------------------------------------------

def _callee_first(src: SourceText, defs: Dict[str, _Def]) -> List[str]:
    """Function names, each after the functions it uses; recursion is an error (TVM's
    Relay allows it, but nothing tidlx handles is recursive)."""
    order: List[str] = []
    done, visiting = set(), set()
    for name in defs:
        stack = [(name, False)]
        while stack:
            fname, expanded = stack.pop()
            if expanded:
                visiting.discard(fname)
                done.add(fname)
                order.append(fname)
                continue
            if fname in done:
                continue
            visiting.add(fname)
            stack.append((fname, True))
            for callee in defs[fname].refs:
                if callee in visiting:
                    what = "itself" if callee == fname else f"@{callee}, which leads back to it"
                    raise src.error(f"@{fname} calls {what} (recursion is not supported)", defs[fname].pos)
                if callee not in done and callee in defs:
                    stack.append((callee, False))
    return order


def _infer(mod: IRModule, src: SourceText, positions: Dict[Expr, int], defs: Dict[str, _Def],
           b: RelayBuilder) -> None:
    """Infers types of every function whose parameters (and closures' parameters) all have
    types and whose callees could be typed; the others stay untyped. A type error is reported
    at the line of the call that fails."""
    typed = set()
    for name in _callee_first(src, defs):
        d = defs[name]
        b.other_offset = d.pos
        if d.untyped or any(callee not in typed for callee in d.refs):
            continue
        fn = mod[name]
        try:
            infer_expr_type(fn, mod, name, fn)
        except TidlxError as exc:
            raise _located_type_error(src, fn, str(exc), positions, d.pos) from None
        except (ArithmeticError, AttributeError, KeyError, LookupError, TypeError, ValueError) as exc:
            raise _located_type_error(src, fn, f"in @{name}: type relation failed "
                                      f"({type(exc).__name__}: {exc})", positions, d.pos) from None
        typed.add(name)


def _located_type_error(src: SourceText, fn: Function, message: str, positions, default: int):
    culprit = None
    for node in post_order(fn):
        if not node.has_type and all(c.has_type for c in children(node)):
            culprit = node
            break
    offset = positions.get(culprit, default) if culprit is not None else default
    if isinstance(culprit, Call) and culprit.layer and f"'{culprit.layer}'" not in message:
        message += f" (layer '{culprit.layer}')"
    return src.error(message, offset)
