"""ONNX -> IRModule: the graph walk, import-time folding of constant subgraphs, the op check.

The walk visits nodes in topological order and keeps one IR expression per ONNX tensor name.
A node whose inputs are all constants (initializers, Constant nodes, and everything computed
from shapes, which are static here) is evaluated at import time with ONNX's reference
implementation and becomes a Constant: so ``Shape -> Gather -> Concat -> Reshape`` chains fold
away and the module is static, following any ``batch=``/``shapes=`` override. Quantize and
dequantize nodes are never folded, so QDQ weights keep their quantized form.

The IR has no control flow. An ``If`` whose condition is a constant at that point of the walk
(an initializer, a Constant node, or folded to one) is replaced by its taken branch: the
branch's nodes are converted in place, reading the outer scope's tensors and the branch's own
initializers, and the branch's outputs become the If's outputs. An ``If`` whose condition is
only known at run time is refused (``ControlFlowError``, naming the node).
"""

from __future__ import annotations

from collections import ChainMap
from typing import Dict, List, Mapping, Optional, Sequence, Set

import numpy as np
import onnx

from ...ir import Constant, Expr, Function, IRModule, Tuple, Var
from ...ir.errors import TensorTooLargeError, TidlxError
from ...ir.types import TensorType, check_tensor_bytes, max_tensor_bytes
from .context import NodeContext, constant
from .converters import CONST_OUTPUT_OPS, STATIC_OPERANDS, converter_for
from .errors import ControlFlowError, OnnxGraphError, OnnxImportError, OnnxTensorTooLargeError, UnsupportedOpsError
from .graph import (DEFAULT_DOMAINS, default_opset, graph_inputs, initializers, ir_dtype, load_model,
                    node_names, outer_scope_inputs, qualified_op_type, rebatch_of, subgraphs, topological_order,
                    upgrade_opset)
from .graph import _ONNX_TO_IR_DTYPE as _ONNX_TO_IR

#: Ops never evaluated at import time even when all their inputs are constant: quantization
#: structure must survive, and random ops are not constants.
NEVER_FOLD = frozenset({
    "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul",
    "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli",
})


def from_onnx(model, batch: Optional[int] = None, shapes: Optional[Mapping[str, Sequence[int]]] = None,
              opset: Optional[int] = None) -> IRModule:
    """Imports an ONNX model (a ModelProto, serialized bytes, or a path) as a static IRModule.

    ``batch`` sets dimension 0 of every runtime input; ``shapes`` gives whole input shapes by
    name (it also turns an input with a default initializer into a real input). ``opset``
    overrides the model's default-domain opset.

    Re-batching: an input whose declared dim 0 is not the model's batch (dim 0 of the first
    input of rank >= 2, e.g. BEVDet's ``mlp_input`` 1 x cameras x 27 beside ``img``) is refused
    by a changed ``batch`` unless ``shapes`` gives it (setting its dim 0 would broadcast
    silently). Constants exported with the batch follow the new one where the rule is clear: a
    Resize's ``sizes`` (converters/resize.py) and a Reshape's constant shape with the exported
    batch in dim 0 (converters/tensor.py), each with a ``TidlxWarning``; elsewhere the error
    names the node, the exported and the new batch.
    """
    model, source = load_model(model)
    model = upgrade_opset(model, opset, source)
    return _Importer(model, source, batch, shapes, opset).run()


def load_onnx(path, batch: Optional[int] = None,
              shapes: Optional[Mapping[str, Sequence[int]]] = None) -> IRModule:
    """Imports the ONNX model file at ``path`` (see ``from_onnx``)."""
    return from_onnx(path, batch=batch, shapes=shapes)


def static_inputs(model) -> List[str]:
    """Graph inputs that feed an operand the importer needs as a constant (a shape, axes, pads,
    ...); bind them to values (make them initializers) before importing."""
    model, _ = load_model(model)
    graph = model.graph
    inits = {i.name for i in graph.initializer}
    runtime = [vi.name for vi in graph.input if vi.name not in inits]
    wanted = set()
    for node in graph.node:
        if node.domain not in DEFAULT_DOMAINS:
            continue
        for i in STATIC_OPERANDS.get(node.op_type, ()):
            if i < len(node.input) and node.input[i]:
                wanted.add(node.input[i])
    return [name for name in runtime if name in wanted]


class _Importer:
    def __init__(self, model: onnx.ModelProto, source: str, batch, shapes, opset):
        self.model = model
        self.graph = model.graph
        self.source = source
        self.opset = default_opset(model, opset, source)
        self.names = node_names(self.graph)
        self.inits = initializers(self.graph, source)
        self.inputs = graph_inputs(self.graph, self.inits.keys(), batch, shapes, source)
        self.rebatch = rebatch_of(self.graph, self.inits.keys(), batch, shapes)
        available = set(self.inits) | {vi.name for vi in self.graph.input}
        self.order = topological_order(self.graph, available, self.names, source)

    def run(self) -> IRModule:
        params = [Var(i.name, TensorType(i.shape, i.dtype)) for i in self.inputs]
        values: Dict[str, Expr] = {}
        for name, array in self.inits.items():
            values[name] = constant(array)
        for p in params:
            values[p.name_hint] = p  # an input overridden by shapes= wins over its initializer
        nodes = [self.graph.node[i] for i in self.order]
        names = [self.names[i] for i in self.order]
        self._check_supported(nodes, names, set(n for n, v in values.items() if isinstance(v, Constant)))
        # Layer name -> ONNX op type of every converted node (those of inlined If branches too),
        # for deny_list:layer_type and reports.
        self.layer_types: Dict[str, str] = {}
        self.used_names = set(self.names)
        for node, name in zip(nodes, names):
            self._convert(node, name, values)
        outputs = [values[o.name] for o in self.graph.output]
        body = outputs[0] if len(outputs) == 1 else Tuple(outputs)
        mod = IRModule({"main": Function(params, body)})
        mod.layer_types = self.layer_types
        # The graph's output names, in @main's output order (tidlx run saves the outputs under them).
        mod.attrs["output_names"] = [o.name for o in self.graph.output]
        mod.infer_types()
        return mod

    # --- the up-front op check ------------------------------------------------------------

    def _check_supported(self, nodes: Sequence[onnx.NodeProto], names: Sequence[str], const_names: Set[str]) -> None:
        """Lists every unsupported op type with its nodes (in topological order), before converting
        anything. The nodes of an If's branch are checked when the If is replaced by its branch."""
        unsupported: Dict[str, List[str]] = {}
        known = set(const_names)
        for node, name in zip(nodes, names):
            op = _qualified_op(node)
            present = [x for x in node.input if x] + outer_scope_inputs(node)
            all_known = all(x in known for x in present)
            if node.domain in DEFAULT_DOMAINS and node.op_type == "If":
                if all_known:
                    known.update(x for x in node.output if x)
            elif (node.domain in DEFAULT_DOMAINS and node.op_type not in NEVER_FOLD and all_known) or \
                    (node.domain in DEFAULT_DOMAINS and node.op_type in CONST_OUTPUT_OPS):
                known.update(x for x in node.output if x)
            elif converter_for(node.domain, node.op_type, DEFAULT_DOMAINS) is None:
                unsupported.setdefault(op, []).append(name)
        if unsupported:
            raise UnsupportedOpsError(unsupported)

    # --- one node -------------------------------------------------------------------------

    def _convert(self, node: onnx.NodeProto, name: str, values: Dict[str, Expr]) -> None:
        if node.domain in DEFAULT_DOMAINS and node.op_type == "If":
            self._inline_if(node, name, values)
            return
        self.layer_types[name] = _qualified_op(node)
        inputs = [values[x] if x else None for x in node.input]
        present = [x for x in inputs if x is not None]
        implicit = [values[x] for x in outer_scope_inputs(node)] if node.attribute else []
        # ONNX's reference implementation knows the default domain only; a custom node stays a call.
        if (node.domain in DEFAULT_DOMAINS and node.op_type not in NEVER_FOLD
                and all(isinstance(x, Constant) for x in present + implicit)):
            results = self._fold(node, name, inputs, values)
        else:
            convert = converter_for(node.domain, node.op_type, DEFAULT_DOMAINS)
            if convert is None:
                raise UnsupportedOpsError({_qualified_op(node): [name]})
            ctx = NodeContext(node, name, self.opset, inputs, self.rebatch)
            try:
                result = convert(ctx)
            except (TypeError, ValueError, IndexError, KeyError, ZeroDivisionError) as exc:
                # A malformed node the converter did not anticipate (wrong attribute kind, ...).
                raise OnnxImportError(f"{ctx.where}: malformed node ({type(exc).__name__}: {exc})") from None
            results = list(result) if isinstance(result, (list, tuple)) else [result]
        for k, out_name in enumerate(node.output):
            if not out_name:
                continue
            if k >= len(results) or results[k] is None:
                raise OnnxImportError(f"node '{name}' ({node.op_type}): output {k} ('{out_name}') is not "
                                      f"supported; only the first {sum(r is not None for r in results)} "
                                      f"output(s) can be imported")
            values[out_name] = results[k]

    # --- If: the taken branch in place of the node ------------------------------------------

    def _inline_if(self, node: onnx.NodeProto, name: str, values: Dict[str, Expr]) -> None:
        """Converts the branch an If takes in place of the If (its condition must be a constant)."""
        where = f"node '{name}' (If)"
        cond_name = node.input[0] if node.input else ""
        cond = values.get(cond_name) if cond_name else None
        if not isinstance(cond, Constant):
            what = f"'{cond_name}'" if cond_name else "(missing)"
            raise ControlFlowError(
                f"{where}: its condition {what} is only known at run time; tidlx's IR has no control flow, so "
                f"an If imports only when its condition is a constant at import time (an initializer, a Constant "
                f"node, or computed from shapes and constants): bind the inputs the condition depends on as "
                f"initializers, or export the model for one case")
        if cond.data.size != 1:
            raise OnnxImportError(f"{where}: the condition '{cond_name}' has shape {tuple(cond.data.shape)}; an If "
                                  f"takes a single boolean")
        taken = "then_branch" if bool(np.asarray(cond.data).reshape(-1)[0]) else "else_branch"
        branch = dict(subgraphs(node)).get(taken)
        if branch is None:
            raise OnnxImportError(f"{where}: attribute '{taken}' (a graph) is required but missing")
        where = f"{where}, {taken.replace('_', ' ')}"
        if branch.input:
            raise OnnxGraphError(f"{where}: an If branch takes no inputs, this one declares "
                                 f"{', '.join(repr(i.name) for i in branch.input)}")
        if len(branch.output) != len(node.output):
            raise OnnxGraphError(f"{where}: the branch has {len(branch.output)} output(s), the If "
                                 f"{len(node.output)}")
        # The branch's own tensors shadow nothing outside it: they live in a scope of their own.
        scope: Dict[str, Expr] = ChainMap({}, values)
        for init_name, array in initializers(branch, where).items():
            scope[init_name] = constant(array)
        node_names_ = node_names(branch)
        order = topological_order(branch, set(scope), node_names_, where)
        tag = taken.split("_")[0]  # then / else
        names = []
        for i in order:
            own = node_names_[i]
            layer = own if branch.node[i].name and own not in self.used_names else f"{name}/{tag}/{own}"
            self.used_names.add(layer)
            names.append(layer)
        nodes = [branch.node[i] for i in order]
        self._check_supported(nodes, names, set(n for n, v in scope.items() if isinstance(v, Constant)))
        for branch_node, layer in zip(nodes, names):
            self._convert(branch_node, layer, scope)
        for out_name, vi in zip(node.output, branch.output):
            if out_name:
                values[out_name] = scope[vi.name]

    def _fold(self, node: onnx.NodeProto, name: str, inputs: List[Optional[Expr]],
              values: Mapping[str, Expr]) -> List[Optional[Expr]]:
        from onnx.reference import ReferenceEvaluator

        feeds = {x: v.data for x, v in zip(node.input, inputs) if x}
        outputs = [o for o in node.output if o]
        self._check_fold_sizes(node, name, feeds, outputs)
        # The tensors the node's subgraphs (a Loop's body) read from the outer scope are inputs of
        # the one-node graph too, or the reference would not find them.
        implicit = {x: values[x].data for x in outer_scope_inputs(node) if x not in feeds} if node.attribute else {}
        # A one-node graph, so the reference picks the op version of the model's opset.
        graph = onnx.helper.make_graph([node], "fold", [onnx.ValueInfoProto(name=x) for x in {**feeds, **implicit}],
                                       [onnx.ValueInfoProto(name=o) for o in outputs])
        feeds = {**feeds, **implicit}
        try:
            evaluator = ReferenceEvaluator(graph, opsets={node.domain: self.opset})
            values = dict(zip(outputs, evaluator.run(None, feeds)))
        except Exception as exc:  # the reference implementation raises anything on bad input
            raise OnnxImportError(f"node '{name}' ({node.op_type}): evaluating it on its constant inputs "
                                  f"at import time failed: {type(exc).__name__}: {exc}") from None
        results: List[Optional[Expr]] = []
        for k, out_name in enumerate(node.output):
            if not out_name:
                results.append(None)
                continue
            out = values[out_name]
            if not isinstance(out, (np.ndarray, np.generic)):
                raise OnnxImportError(f"node '{name}' ({node.op_type}): output {k} is a "
                                      f"{type(out).__name__}, not a tensor")
            arr = np.asarray(out)
            ir_dtype(_np_to_onnx_type(arr.dtype, name), f"node '{name}' ({node.op_type}) output {k}")
            results.append(constant(arr))
        return results

    def _check_fold_sizes(self, node: onnx.NodeProto, name: str, feeds, outputs) -> None:
        """Refuses a fold whose result would exceed the tensor budget before evaluating it (a
        ConstantOfShape of 10 GB took 44 s and 20 GB): ONNX's shape inference on the one node, with
        the small integer inputs (shapes, repeats, pads) as values and the others as shapes only."""
        from onnx import shape_inference

        budget = max_tensor_bytes()
        if sum(a.nbytes for a in feeds.values()) * 4 <= min(budget, ALWAYS_FOLD_BYTES) and \
                node.op_type not in GROWING_OPS:
            return  # the result of an op that does not grow is about the size of its inputs
        inits, infos = [], []
        for x, a in feeds.items():
            if a.dtype.kind in "iub" and a.size <= 64:
                inits.append(onnx.numpy_helper.from_array(np.asarray(a), x))
            else:
                infos.append(onnx.helper.make_tensor_value_info(x, _np_to_onnx_type(a.dtype, name), list(a.shape)))
        graph = onnx.helper.make_graph([node], "size", infos, [onnx.ValueInfoProto(name=o) for o in outputs],
                                       inits)
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid(node.domain, self.opset)])
        try:
            inferred = shape_inference.infer_shapes(model, data_prop=True)
        except Exception:
            return  # the evaluation reports a malformed node with its own words
        for vi in inferred.graph.output:
            tt = vi.type.tensor_type
            dims = tt.shape.dim
            if not tt.HasField("shape") or not all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims):
                continue
            dtype = _ONNX_TO_IR.get(tt.elem_type)
            if dtype is None:
                continue
            try:
                t = TensorType(tuple(d.dim_value for d in dims), dtype)
            except TidlxError as exc:
                raise OnnxImportError(f"node '{name}' ({node.op_type}): output '{vi.name}': {exc}") from None
            try:
                check_tensor_bytes(t, f"node '{name}' ({node.op_type}) output '{vi.name}', evaluated at import "
                                      f"time", budget)
            except TensorTooLargeError as exc:
                raise OnnxTensorTooLargeError(str(exc)) from None


#: ONNX ops whose result may be much larger than their inputs (checked before folding even when
#: the inputs are small).
GROWING_OPS = frozenset({
    "ConstantOfShape", "Expand", "Tile", "Range", "Resize", "Upsample", "Pad", "OneHot", "EyeLike", "MatMul",
    "Gemm", "Einsum", "Add", "Sub", "Mul", "Div", "Pow", "Where", "Equal", "Less", "Greater", "And", "Or", "Xor",
    "Max", "Min", "Sum", "Mean", "Concat", "Gather", "GatherElements", "GatherND", "Col2Im", "ConvTranspose",
})
#: Folds whose inputs are this small are not size-checked unless the op may grow.
ALWAYS_FOLD_BYTES = 1 << 20


def _qualified_op(node: onnx.NodeProto) -> str:
    return qualified_op_type(node.domain, node.op_type)


def _np_to_onnx_type(dtype: np.dtype, name: str) -> int:
    try:
        return onnx.helper.np_dtype_to_tensor_dtype(dtype)
    except Exception:
        raise OnnxImportError(f"node '{name}': folded to an unsupported numpy dtype {dtype}") from None
