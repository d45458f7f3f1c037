"""The Relay text printer (version 0.0.5, as TVM prints it).

``module_to_text`` prints ``def``s (``@main`` first) whose bodies are ``%N = ...;`` bindings
numbered by ``traversal.number_bindings``; nested ``fn``s are bindings too. Scalar constants
are printed inline (``1f``, ``0i64``, ``True``), others as ``meta[relay.Constant][i]`` with the
data in a ``#[metadata]`` section (``ir/metadata.py``). Calls carry ``/* ty=... */`` and, when
they have a layer name, ``span=<layer>:0:0``. The same module always prints to the same bytes.

Where each binding goes: a node is printed in the innermost block (function body or
parenthesised ``let`` block) that encloses all of its uses, in post order, so it comes after
everything it uses and before everything that uses it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Dict, List, Optional

import numpy as np

from .expr import Call, Constant, Expr, Function, GlobalVar, Let, Tuple, TupleGetItem, Var
from .op import Op, non_default_attrs
from .traversal import children, is_binding as _is_binding, number_bindings, post_order
from .types import Type

VERSION_HEADER = '#[version = "0.0.5"]'
METADATA_OMITTED = ("/* For debugging purposes the metadata section has been omitted.\n"
                    " * If you would like to see the full metadata section you can set the \n"
                    " * option to `True` when invoking `astext`. \n"
                    " */")

_INDENT = "  "
# A %name the parser reads back as one name: TVM's identifier characters plus '/', '-', '::'.
_NAME_OK = re.compile(r"(?:[\w./\-]|::(?=[\w./\-]))+")
_NAME_BAD_CHAR = re.compile(r"[^\w./\-]")
_GLOBAL_OK = re.compile(r"[\w./\-]+")
_CONST_SLOT = re.compile("\x00(\\d+)\x00")

_SCALAR_SUFFIX = {
    "float32": "f", "float16": "f16", "float64": "f64", "int32": "", "int64": "i64", "int16": "i16",
    "int8": "i8", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
}


# --- values ---------------------------------------------------------------------------------

def format_float(value: float) -> str:
    """``1e-05f``, ``0.02f``, ``6f``: the shortest digits that read back to the same double."""
    text = repr(float(value))
    if text.endswith(".0"):
        text = text[:-2]
    return text + "f"


def format_attr_value(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return format_float(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attr_value(v) for v in value) + "]"
    if isinstance(value, Type):
        return json.dumps(str(value))
    return json.dumps(str(value), ensure_ascii=False)


def format_attrs(attrs) -> List[str]:
    """``name=value`` for an op's non-default attributes (field order) or a plain mapping."""
    if attrs is None:
        return []
    values = non_default_attrs(attrs) if dataclasses.is_dataclass(attrs) else dict(attrs)
    return [f"{k}={format_attr_value(v)}" for k, v in values.items()]


def scalar_literal(const: Constant) -> Optional[str]:
    """A 0-d constant inline (``1f``, ``0.5f``, ``1.5f16``, ``64``, ``0i64``, ``True``), or None
    when it has to go to the metadata section."""
    arr = const.data
    if arr.ndim != 0:
        return None
    if arr.dtype == np.bool_:
        return "True" if bool(arr) else "False"
    name = arr.dtype.name
    suffix = _SCALAR_SUFFIX.get(name)
    if suffix is None:
        return None
    if arr.dtype.kind == "f":
        # numpy's str() is the shortest text that reads back to the same value of this width.
        text = str(arr.dtype.type(arr[()]))
        if text.endswith(".0"):
            text = text[:-2]
        return text + suffix
    return f"{int(arr[()])}{suffix}"


def _span(layer: str) -> str:
    if layer and not any(c.isspace() for c in layer) and not any(s in layer for s in ('"', "*/", "/*")):
        return f"span={layer}:0:0"
    # Quoted; '*' spelled \u002a so that no '/*' or '*/' can open or close a comment.
    quoted = json.dumps(layer, ensure_ascii=False).replace("*", "\\u002a")
    return f"span={quoted}:0:0"


# --- names ----------------------------------------------------------------------------------

class _Names:
    """One printed name per Var, unique in the module, TVM style: ``x``, ``x1``, ``x2``..."""

    def __init__(self):
        self.by_var: Dict[Var, str] = {}
        self.used: Dict[str, int] = {}

    def __call__(self, var: Var) -> str:
        name = self.by_var.get(var)
        if name is None:
            name = self._unique(_sanitize(var.name_hint))
            self.by_var[var] = name
        return name

    def _unique(self, base: str) -> str:
        if base not in self.used:
            self.used[base] = 0
            return base
        n = self.used[base]
        while True:
            n += 1
            candidate = f"{base}{n}"
            if candidate not in self.used:
                self.used[base] = n
                self.used[candidate] = 0
                return candidate


def _sanitize(name: str) -> str:
    if not _NAME_OK.fullmatch(name or ""):
        name = _NAME_BAD_CHAR.sub("_", name or "").replace(":", "_")
    # TVM prefixes 'v' to names that do not start with a letter (e.g. ONNX's "0").
    if not name or not name[0].isalpha():
        name = "v" + name
    return name


def _global_name(name: str) -> str:
    return name if _GLOBAL_OK.fullmatch(name or "") else re.sub(r"[^\w./\-]", "_", name or "") or "_"


# --- blocks ---------------------------------------------------------------------------------

class _Block:
    __slots__ = ("parent", "depth", "lines", "result")

    def __init__(self, parent: Optional["_Block"], result: Expr):
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.lines: List[str] = []
        self.result = result


def _common_block(a: _Block, b: _Block) -> _Block:
    while a.depth > b.depth:
        a = a.parent
    while b.depth > a.depth:
        b = b.parent
    while a is not b:
        a, b = a.parent, b.parent
    return a


def _emission_order(root: Expr):
    """``traversal.post_order`` of ``root`` as (node, False), plus (let, True) for each Let
    between its value and its body: where its ``let`` line goes."""
    seen = set()
    stack = [(root, 0)]
    while stack:
        node, state = stack.pop()
        if state == 1:
            yield node, True
            continue
        if state == 2:
            yield node, False
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, 2))
        if isinstance(node, Let):
            stack += [(node.body, 0), (node, 1), (node.value, 0)]
            continue
        for child in reversed(children(node)):
            if id(child) not in seen:
                stack.append((child, 0))


def _indent(text: str) -> str:
    return "\n".join(_INDENT + line if line else line for line in text.split("\n"))


class _Printer:
    def __init__(self):
        self.names = _Names()
        self.constants: List[Constant] = []   # slot -> constant printed as meta[...]
        self.const_slot: Dict[Constant, int] = {}

    # -- a function's body ----------------------------------------------------------------

    def body_text(self, func: Function) -> str:
        """The lines of ``func``'s body (bindings, lets, result), not indented."""
        numbers = number_bindings(func)
        order = post_order(func.body)
        root = _Block(None, func.body)
        home: Dict[Expr, _Block] = {func.body: root}
        fn_blocks: Dict[Function, _Block] = {}
        let_blocks: Dict[Let, _Block] = {}
        users: Dict[Expr, List[Expr]] = {}
        for node in order:
            for child in children(node):
                users.setdefault(child, []).append(node)

        # Users come before their children in reverse post order.
        for node in reversed(order):
            if node is not func.body:
                block = None
                for user in users.get(node, ()):
                    if isinstance(user, Function):
                        ctx = fn_blocks[user]
                    elif isinstance(user, Let):
                        ctx = let_blocks[user]
                    else:
                        ctx = home[user]
                    block = ctx if block is None else _common_block(block, ctx)
                home[node] = block if block is not None else root
            if isinstance(node, Function):
                fn_blocks[node] = _Block(home[node], node.body)
            elif isinstance(node, Let):
                block = home[node]
                if block.result is node:  # a let in tail position continues its block
                    block.result = node.body
                    let_blocks[node] = block
                else:
                    let_blocks[node] = _Block(block, node.body)

        # number_bindings leaves some nodes unnumbered because they print inline (let values in
        # their let line). One that is used more than once needs a name all the same, else it
        # would print (and read back) twice: it gets the next free number.
        next_number = max(numbers.values(), default=-1) + 1
        for node in order:
            if node not in numbers and node is not func.body and _is_binding(node) \
                    and len(users.get(node, ())) > 1:
                numbers[node] = next_number
                next_number += 1
        self.numbers = numbers
        self.fn_blocks = fn_blocks
        self.let_blocks = let_blocks
        for node, let_line in _emission_order(func.body):
            if let_line:
                var = node.var
                ann = f": {var.type_annotation}" if var.type_annotation is not None else ""
                let_blocks[node].lines.append(f"let %{self.names(var)}{ann} = {self.ref(node.value)};")
                continue
            n = numbers.get(node)
            if n is not None:
                home[node].lines.append(f"%{n} = {self.inline(node)};")
        return self.block_text(root)

    def block_text(self, block: _Block) -> str:
        return "\n".join(block.lines + [self.ref(block.result)])

    # -- expressions ----------------------------------------------------------------------

    def ref(self, expr: Expr) -> str:
        """How a use site refers to ``expr``."""
        n = self.numbers.get(expr)
        if n is not None:
            return f"%{n}"
        if isinstance(expr, Var):
            return "%" + self.names(expr)
        if isinstance(expr, GlobalVar):
            return "@" + _global_name(expr.name_hint)
        if isinstance(expr, Constant):
            text = scalar_literal(expr)
            if text is not None:
                return text
            slot = self.const_slot.get(expr)
            if slot is None:
                slot = self.const_slot[expr] = len(self.constants)
                self.constants.append(expr)
            return f"\x00{slot}\x00"
        if isinstance(expr, Let):
            block = self.let_blocks.get(expr)
            if block is None:  # not reached from the function being printed (shared oddities)
                return f"(let %{self.names(expr.var)} = {self.ref(expr.value)};\n{self.ref(expr.body)})"
            return "(\n" + _indent(self.block_text(block)) + "\n)"
        return self.inline(expr)

    def inline(self, expr: Expr) -> str:
        """The text of ``expr`` itself (its children by reference)."""
        if isinstance(expr, Call):
            if isinstance(expr.op, Op):
                callee = expr.op.name
            else:
                callee = self.ref(expr.op)
                if isinstance(expr.op, (Function, Let)) and expr.op not in self.numbers:
                    callee = f"({callee})"
            parts = [self.ref(a) for a in expr.args] + format_attrs(expr.attrs)
            return f"{callee}({', '.join(parts)}){self.annotation(expr)}"
        if isinstance(expr, Tuple):
            if len(expr.fields) == 1:
                return f"({self.ref(expr.fields[0])},)"
            return "(" + ", ".join(self.ref(f) for f in expr.fields) + ")"
        if isinstance(expr, TupleGetItem):
            inner = self.ref(expr.tuple_value)
            # %3.0 for a binding; (%x).0 for a name, which could itself end in ".0".
            if expr.tuple_value not in self.numbers:
                inner = f"({inner})"
            return f"{inner}.{expr.index}"
        if isinstance(expr, Function):
            return self.fn_text(expr)
        return self.ref(expr)

    def annotation(self, call: Call) -> str:
        parts = []
        if call.has_type:
            parts.append(f"ty={call.checked_type}")
        if call.layer is not None:
            parts.append(_span(call.layer))
        return f" /* {' '.join(parts)} */" if parts else ""

    def params_text(self, func: Function) -> str:
        params = []
        for p in func.params:
            ann = f": {p.type_annotation}" if p.type_annotation is not None else ""
            params.append(f"%{self.names(p)}{ann}")
        params += format_attrs(func.attrs)
        ret = f" -> {func.ret_type}" if func.ret_type is not None else ""
        return f"({', '.join(params)}){ret}"

    def fn_text(self, func: Function) -> str:
        block = self.fn_blocks.get(func)
        if block is None:  # a closure reached some other way: print it on its own
            saved = (self.numbers, self.fn_blocks, self.let_blocks)
            body = self.body_text(func)
            self.numbers, self.fn_blocks, self.let_blocks = saved
        else:
            body = self.block_text(block)
        return f"fn {self.params_text(func)} {{\n{_indent(body)}\n}}"

    # -- whole texts ----------------------------------------------------------------------

    def free_var_text(self, variables) -> str:
        lines = []
        for v in variables:
            ann = f": {v.type_annotation}" if v.type_annotation is not None else ""
            lines.append(f"free_var %{self.names(v)}{ann};\n")
        return "".join(lines)

    def def_text(self, name: str, func: Function) -> str:
        header = f"def @{_global_name(name)}{self.params_text(func)} {{"
        return f"{header}\n{_indent(self.body_text(func))}\n}}"

    def finish(self, text: str, show_meta_data: bool) -> str:
        """Numbers the meta constants in order of first appearance and adds the section."""
        order: Dict[int, int] = {}

        def meta(m):
            slot = int(m.group(1))
            index = order.setdefault(slot, len(order))
            const = self.constants[slot]
            return f"meta[relay.Constant][{index}] /* ty={const.checked_type} */"

        text = _CONST_SLOT.sub(meta, text)
        if not order:
            return text
        if show_meta_data:
            from .metadata import encode_metadata

            arrays = [None] * len(order)
            for slot, index in order.items():
                arrays[index] = self.constants[slot].data
            return f"{text}\n\n#[metadata]\n{encode_metadata(arrays)}"
        return f"{text}\n\n{METADATA_OMITTED}"


def _infer_quietly(mod=None, expr: Optional[Expr] = None) -> None:
    """Types whatever can be typed, so calls get their ``/* ty=... */``; errors are the
    verifier's business, not the printer's."""
    from .errors import TidlxError
    from .type_infer import infer_expr_type, infer_module

    try:
        if mod is not None:
            infer_module(mod)
        elif expr is not None:
            infer_expr_type(expr)
    except (TidlxError, TypeError, ValueError, KeyError, IndexError, AttributeError, ArithmeticError):
        pass


def module_to_text(mod, show_meta_data: bool = True) -> str:
    """The module as Relay text; byte-for-byte the same for the same module."""
    _infer_quietly(mod=mod)
    printer = _Printer()
    names = list(mod.functions)
    if "main" in names:
        names.remove("main")
        names.insert(0, "main")
    defs = [printer.def_text(name, mod[name]) for name in names]
    text = VERSION_HEADER + "\n" + "\n\n".join(defs)
    return printer.finish(text, show_meta_data)


def expr_to_text(expr: Expr, show_meta_data: bool = False) -> str:
    """One expression, as ``repr`` shows it: ``free_var %x: T;`` lines for its free variables,
    then its bindings and its value (a ``fn`` prints as itself)."""
    from .traversal import free_vars

    _infer_quietly(expr=expr)
    printer = _Printer()
    fv = free_vars(expr)
    text = printer.free_var_text(fv) + printer.body_text(Function(fv, expr))
    return printer.finish(text, show_meta_data)
