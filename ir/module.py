"""IRModule: named global functions (``@main`` and e.g. TIDL subgraphs)."""

from __future__ import annotations

from typing import Dict, Iterator, Mapping, Optional, Tuple

from .expr import Expr, Function, GlobalVar
from .traversal import free_vars


class IRModule:
    """Maps global names (without ``@``) to Functions, in definition order."""

    def __init__(self, functions: Optional[Mapping[str, Function]] = None,
                 attrs: Optional[Mapping[str, object]] = None):
        self._functions: Dict[str, Function] = {}
        self._gvars: Dict[str, GlobalVar] = {}
        #: Module attributes that passes carry along (``copy``), e.g. ``layer_types``.
        self.attrs: Dict[str, object] = dict(attrs or {})
        for name, fn in (functions or {}).items():
            self[name] = fn

    @classmethod
    def from_expr(cls, expr: Expr, name: str = "main") -> "IRModule":
        """Wraps an expression (a Function, or a body whose free vars become params)."""
        if not isinstance(expr, Function):
            expr = Function(free_vars(expr), expr)
        return cls({name: expr})

    @property
    def functions(self) -> Dict[str, Function]:
        return dict(self._functions)

    def items(self) -> Iterator[Tuple[str, Function]]:
        return iter(list(self._functions.items()))

    def get_global_var(self, name: str) -> GlobalVar:
        gv = self._gvars.get(name)
        if gv is None:
            gv = self._gvars[name] = GlobalVar(name)
        return gv

    def __getitem__(self, name) -> Function:
        if isinstance(name, GlobalVar):
            name = name.name_hint
        return self._functions[name]

    def __setitem__(self, name, fn: Function) -> None:
        if isinstance(name, GlobalVar):
            name = name.name_hint
        if not isinstance(fn, Function):
            raise TypeError(f"module entries must be Functions, got {type(fn).__name__}")
        self._functions[name] = fn

    def __contains__(self, name) -> bool:
        if isinstance(name, GlobalVar):
            name = name.name_hint
        return name in self._functions

    def __len__(self) -> int:
        return len(self._functions)

    def __iter__(self):
        return iter(list(self._functions))

    def copy(self) -> "IRModule":
        new = IRModule(self._functions, self.attrs)
        new._gvars = dict(self._gvars)
        return new

    @property
    def layer_types(self) -> Dict[str, str]:
        """Layer name -> the source op type (ONNX ``Conv``, ``Gemm``...), set by the importer."""
        return self.attrs.setdefault("layer_types", {})

    @layer_types.setter
    def layer_types(self, value: Mapping[str, str]) -> None:
        self.attrs["layer_types"] = dict(value)

    @property
    def main(self) -> Function:
        return self._functions["main"]

    def infer_types(self) -> "IRModule":
        from .type_infer import infer_module

        infer_module(self)
        return self

    def astext(self, show_meta_data: bool = True) -> str:
        """Relay text 0.0.5; constants in a ``#[metadata]`` section or kept out of the text."""
        from .printer import module_to_text

        return module_to_text(self, show_meta_data=show_meta_data)

    def __str__(self) -> str:
        return self.astext(show_meta_data=False)

    __repr__ = __str__
