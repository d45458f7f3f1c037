"""The grammar actions of relay.lark: ``RelayBuilder`` builds IR nodes as lark reduces productions.

LR reductions happen in text order, so names are resolved as soon as they are read: a ``%N =
...;`` binding is in scope for every later reference, a ``fn``'s parameters from its ``{`` on.
Globals may be used before their ``def``; each ``def`` is kept as a ``ParsedDef`` for module
assembly (assemble.py), which checks them at the end. Every problem in the text is raised here
as a RelayParseError at the offending token.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from ...ir.errors import OpAttributeError, UnknownOpError, closest
from ...ir.expr import Call, Constant, Expr, Function, GlobalVar, Let, Tuple, TupleGetItem, Var
from ...ir.op import get_op
from ...ir.types import DTYPES, FuncType, TensorType, TupleType, Type
from .errors import RelayParseError, SourceText
from .lexer import Tokens
from .literals import parse_number, span_layer

#: name of the parameter a missing ``meta[relay.Constant][i]`` becomes
MISSING_CONSTANT_NAME = "meta_const_{}"


class _Attr(tuple):
    """``name=value`` inside an argument or parameter list: (name, value, offset)."""
    __slots__ = ()


class _LetItem(tuple):
    """``let %x = value;`` inside a block: (var, value, offset)."""
    __slots__ = ()


@dataclass
class ParsedDef:
    """A ``def @name(...) { ... }`` as read (or the bare expression's @main), before assembly."""

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
    """Builds IR while lark parses. One parse at a time (``parse`` holds a lock); ``reset``
    starts the next.

    Methods marked ``@_cb`` are named after grammar rules (or their ``-> alias``)."""

    def reset(self, src: SourceText, toks: Tokens, meta: Dict[int, Constant],
              annotation_types: Dict[int, Optional[Type]]):
        self.src = src
        self.toks = toks
        self.meta = meta
        self.annotation_types = annotation_types  # META offset -> annotated type
        self.scopes: List[Dict[str, Expr]] = [{}]
        self.defs: Dict[str, ParsedDef] = {}
        self.global_vars: Dict[str, GlobalVar] = {}
        self.global_refs: Dict[str, int] = {}
        self.free_vars: List[Var] = []
        self.current: ParsedDef = ParsedDef("main", [], {}, None, None, 0)  # the bare expression's @main
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
        self.current = ParsedDef(name, [], {}, ret_type, None, name_tok.start_pos)
        self.in_def = True
        self.current.params, self.current.attrs = self.function_head(params, name_tok.start_pos, f"@{name}")
        return self.current

    @_cb
    def defn(self, head: ParsedDef, body):
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
