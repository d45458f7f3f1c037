"""The graph context support rules need beyond one call: users, graph inputs and outputs,
composite groups and the ONNX op type of each layer.

    ctx = RuleContext.for_function(mod["main"], layer_types=mod_layer_types)
    ctx = RuleContext.for_expr(call)   # a bare expression: its free vars are the graph inputs
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional

from ...ir.expr import Call, Expr, Function, Tuple, Var
from ...ir.module import IRModule
from ...ir.traversal import free_vars, post_order, users


class RuleContext:
    """What rules may ask about the graph around a call.

    ``users`` maps each node to the nodes using it; ``graph_inputs`` are the function's
    parameters; ``graph_outputs`` the function's result (the fields of a tuple result).
    ``layer_types`` maps layer names (``call.layer``) to ONNX op types, as the ONNX importer
    records them; ``composites`` maps every member of a composite group to its group.
    """

    def __init__(self, function: Function, layer_types: Optional[Mapping[str, str]] = None,
                 find_groups: bool = True):
        if not isinstance(function, Function):
            raise TypeError(f"RuleContext needs a Function, got {type(function).__name__}")
        self.function = function
        order = post_order(function.body, enter_functions=False)
        # Without nested functions that walk is the whole graph, and the users come from it.
        whole = not any(isinstance(node, Function) for node in order)
        self.users: Dict[Expr, List[Expr]] = users(function.body, order if whole else None)
        self.graph_inputs = frozenset(function.params)
        body = function.body
        outputs = list(body.fields) if isinstance(body, Tuple) else [body]
        self.graph_outputs = frozenset(outputs)
        self.layer_types: Dict[str, str] = dict(layer_types or {})
        self.composites: Dict[Expr, "object"] = {}
        self._order: Optional[List[Expr]] = order
        self._calls: Optional[List[Call]] = None
        if find_groups:
            from .composites import find_composites

            for group in find_composites(function):
                for member in group.members:
                    self.composites[member] = group

    @classmethod
    def for_function(cls, function: Function, layer_types: Optional[Mapping[str, str]] = None,
                     find_groups: bool = True) -> "RuleContext":
        return cls(function, layer_types, find_groups)

    @classmethod
    def for_module(cls, mod: IRModule, name: str = "main", find_groups: bool = True) -> "RuleContext":
        """The context of ``mod[name]``, with the module's ONNX layer types when it carries them
        (``mod.layer_types``, set by the ONNX importer)."""
        return cls(mod[name], getattr(mod, "layer_types", None), find_groups)

    @classmethod
    def for_expr(cls, expr: Expr, layer_types: Optional[Mapping[str, str]] = None,
                 find_groups: bool = True) -> "RuleContext":
        """A context for a bare expression: its free variables are the graph inputs, the
        expression the graph output."""
        if isinstance(expr, Function):
            return cls(expr, layer_types, find_groups)
        return cls(Function(free_vars(expr), expr), layer_types, find_groups)

    # -- questions rules ask ---------------------------------------------------------------------
    def users_of(self, expr: Expr) -> List[Expr]:
        return self.users.get(expr, [])

    def is_graph_input(self, expr: Expr) -> bool:
        return isinstance(expr, Var) and expr in self.graph_inputs

    def is_graph_output(self, expr: Expr) -> bool:
        return expr in self.graph_outputs

    def layer_type(self, call: Call) -> Optional[str]:
        """The ONNX op type of the layer a call came from, if known."""
        if call.layer is None:
            return None
        return self.layer_types.get(call.layer)

    def composite_of(self, expr: Expr):
        """The composite group ``expr`` belongs to, or None."""
        return self.composites.get(expr)

    def post_order(self) -> List[Expr]:
        """The nodes of the function's body in post order, not entering inner functions (walked
        once: the IR is immutable). A new list each time."""
        if self._order is None:
            self._order = post_order(self.function.body, enter_functions=False)
        return list(self._order)

    def calls(self) -> List[Call]:
        """The op calls of the function, in post order."""
        from ...ir.op import Op

        if self._calls is None:
            self._calls = [n for n in self.post_order() if isinstance(n, Call) and isinstance(n.op, Op)]
        return list(self._calls)

    def layer_names(self) -> List[str]:
        seen: Dict[str, None] = {}
        for c in self.calls():
            if c.layer:
                seen.setdefault(c.layer, None)
        return list(seen)


__all__ = ["RuleContext"]
