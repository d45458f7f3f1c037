"""Module assembly: from the definitions the grammar actions read to a type-checked IRModule.

Once the text is read: every global it uses must be defined; the functions are ordered callee
first (graphlib; recursion is refused); constants the text refers to but does not hold become
parameters, threaded through the callers of the function that uses them, with a warning; types
are inferred for every function whose parameters all have types, a type error reported at the
call that fails; last, ``params`` given by name are bound into @main (ir.bind_params_by_name).
"""

from __future__ import annotations

import graphlib
import warnings
from typing import Dict, List, Mapping, Set

from ...ir.bind_params import BindParamsError, bind_params_by_name
from ...ir.errors import TidlxError, TidlxWarning, closest
from ...ir.expr import Call, Expr, Function, GlobalVar, Var
from ...ir.module import IRModule
from ...ir.traversal import children, map_post_order, post_order
from ...ir.type_infer import infer_expr_type
from .actions import MISSING_CONSTANT_NAME, ParsedDef, RelayBuilder
from .errors import RelayParseError, SourceText


def assemble_module(b: RelayBuilder, src: SourceText, by_name: Mapping[str, object]) -> IRModule:
    """The module of the definitions ``b`` read from ``src``; ``by_name``: values for @main's
    parameters of those names."""
    defs, positions = b.defs, b.positions
    for name, offset in b.global_refs.items():
        if name not in defs:
            hint = closest(name, defs)
            extra = f"; did you mean {', '.join('@' + h for h in hint)}?" if hint else \
                f" (defined: {', '.join('@' + d for d in defs)})"
            raise src.error(f"undefined global @{name}{extra}", offset)
    order = _callee_first(src, defs)

    needs = _thread_missing_constants(defs, order)
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

    mod = IRModule(functions)
    typed = _infer(mod, src, positions, defs, order, b)
    if by_name:
        _bind_main_params(mod, src, by_name, defs, positions, "main" in typed)
    return mod


def _callee_first(src: SourceText, defs: Dict[str, ParsedDef]) -> List[str]:
    """Function names, each after the functions it uses; recursion is an error (TVM's Relay
    allows it, but nothing tidlx handles is recursive)."""
    uses = {name: [callee for callee in d.refs if callee in defs] for name, d in defs.items()}
    try:
        return list(graphlib.TopologicalSorter(uses).static_order())
    except graphlib.CycleError as exc:
        cycle = exc.args[1]  # [f, ..., f]: consecutive names call one another (one way or the other)
        first, second = cycle[0], cycle[1]
        caller, callee = (first, second) if second in defs[first].refs else (second, first)
        what = "itself" if caller == callee else f"@{callee}, which leads back to it"
        raise src.error(f"@{caller} calls {what} (recursion is not supported)", defs[caller].pos) from None


def _thread_missing_constants(defs: Dict[str, ParsedDef], order: List[str]) -> Dict[str, Dict[int, Var]]:
    """meta index -> parameter, for each function: its own missing constants plus those of
    every function it calls (which it must pass on); callees first, so one pass does it."""
    needs: Dict[str, Dict[int, Var]] = {}
    for name in order:
        d = defs[name]
        mine = dict(d.missing)
        for callee in d.calls:
            for index, var in needs[callee].items():
                if index not in mine:
                    mine[index] = Var(MISSING_CONSTANT_NAME.format(index), var.type_annotation)
                    if var.type_annotation is None:
                        d.untyped = True
        needs[name] = mine
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


def _warn_missing(src: SourceText, d: ParsedDef, bound_by_name) -> None:
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
        stacklevel=5)  # the caller of parse(): _warn_missing, assemble_module, _parse, parse


def _infer(mod: IRModule, src: SourceText, positions: Dict[Expr, int], defs: Dict[str, ParsedDef],
           order: List[str], b: RelayBuilder) -> Set[str]:
    """Infers types of every function whose parameters (and closures' parameters) all have
    types and whose callees could be typed; the others stay untyped. A type error is reported
    at the line of the call that fails. Returns the names of the typed functions."""
    typed: Set[str] = set()
    for name in order:
        d = defs[name]
        b.other_offset = d.pos
        if d.untyped or any(callee not in typed for callee in d.refs):
            continue
        fn = mod[name]
        try:
            infer_expr_type(fn, mod, name, fn)
        except TidlxError as exc:
            raise _located_type_error(src, fn, str(exc), positions, d.pos) from None
        typed.add(name)
    return typed


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


def _bind_main_params(mod: IRModule, src: SourceText, by_name: Mapping[str, object],
                      defs: Dict[str, ParsedDef], positions: Dict[Expr, int], typed: bool) -> None:
    """Binds ``by_name`` into @main. Types are inferred before binding, so a type error still
    points at its call; a bound value has its parameter's exact type, so the new @main types
    as the old one did."""
    if "main" not in mod:
        raise RelayParseError(f"params {', '.join(map(repr, by_name))}: the text has no @main to bind them to",
                              src.source_name)
    d = defs["main"]
    try:
        fn = bind_params_by_name(mod["main"], by_name, func_name="main")
    except BindParamsError as exc:
        missing_at = {var: d.missing_pos[i] for i, var in d.missing.items()}
        offset = positions.get(exc.param, missing_at.get(exc.param, d.pos))
        raise src.error(str(exc), offset) from None
    mod["main"] = fn
    if typed:
        infer_expr_type(fn, mod, "main", fn)
