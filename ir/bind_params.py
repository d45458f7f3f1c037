"""Binding parameters to constants by name, like TVM's ``relay.build_module.bind_params_by_name``:
weights that arrive as function parameters (e.g. from Relay text printed without metadata) become
constants of the function, so passes such as FoldConstant and the TIDL rules see them."""

from __future__ import annotations

from typing import Dict, Mapping, Optional

import numpy as np

from .errors import TidlxError, closest
from .expr import Constant, Function, Var
from .traversal import map_post_order
from .types import DTYPES


class BindParamsError(TidlxError):
    """A value that cannot be bound: no parameter of that name, a name two parameters share, or a
    value whose type differs from the parameter's. ``param`` is the parameter concerned (None
    when the function has no parameter of that name)."""

    def __init__(self, message: str, name: str, param: Optional[Var] = None):
        self.name = name
        self.param = param
        super().__init__(message)


def bind_params_by_name(func: Function, params: Mapping[str, object], *,
                        func_name: Optional[str] = None) -> Function:
    """``func`` with each parameter named in ``params`` replaced by that value as a constant and
    dropped from the parameter list (the others keep their order).

    Values are Constants or anything ``numpy.asarray`` takes. Unlike TVM, which skips names that
    match no parameter, an unknown name is an error: a misspelled weight name would otherwise
    leave the weight an input without a word. Also an error, as in TVM: a name that two
    parameters share. A typed parameter must get a value of exactly its type. ``func_name`` (e.g.
    ``"main"``) only names the function in error messages.
    """
    label = f"@{func_name}" if func_name else "the function"
    bound: Dict[Var, Constant] = {}
    for name, value in params.items():
        matches = [p for p in func.params if p.name_hint == name]
        if not matches:
            names = [p.name_hint for p in func.params]
            hint = closest(name, names)
            extra = (f"; did you mean {', '.join(repr(h) for h in hint)}?" if hint else
                     f" (it has {', '.join('%' + n for n in names) or 'none'})")
            raise BindParamsError(f"params[{name!r}]: {label} has no parameter %{name}{extra}", name)
        if len(matches) > 1:
            raise BindParamsError(f"params[{name!r}]: {label} has {len(matches)} parameters named %{name}",
                                  name, matches[0])
        var = matches[0]
        const = _as_constant(value, name, var)
        if var.type_annotation is not None and var.type_annotation != const.checked_type:
            raise BindParamsError(f"params[{name!r}]: parameter %{name} is {var.type_annotation} but the "
                                  f"value is {const.checked_type}", name, var)
        bound[var] = const
    if not bound:
        return func

    def substitute(old, new):
        return bound.get(old, new) if isinstance(old, Var) else new

    body = map_post_order(func.body, substitute)
    return Function([p for p in func.params if p not in bound], body, func.ret_type, func.attrs)


def _as_constant(value, name: str, var: Var) -> Constant:
    if isinstance(value, Constant):
        return value
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, OverflowError) as exc:  # numpy refuses the value
        raise BindParamsError(f"params[{name!r}]: cannot turn {type(value).__name__} into an array ({exc})",
                              name, var) from None
    dtype = "bool" if array.dtype == np.bool_ else array.dtype.name
    if dtype not in DTYPES:
        raise BindParamsError(f"params[{name!r}]: dtype {array.dtype} is not one of {', '.join(DTYPES)}",
                              name, var)
    return Constant(array)


__all__ = ["bind_params_by_name", "BindParamsError"]
