"""Reading an ONNX model: loading and validation, dtypes, input shapes, the node order."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

from ...ir.errors import TidlxWarning, closest
from ...ir.types import MAX_DIM
from .errors import DynamicShapeError, OnnxGraphError, OnnxImportError, OnnxLoadError

#: The default-domain opsets the importer reads: SUPPORTED_MIN_OPSET to MAX_OPSET. A model of an
#: older opset is converted to SUPPORTED_MIN_OPSET with onnx.version_converter on import (with a
#: TidlxWarning). MIN_OPSET is the oldest that an explicit ``opset=`` override may name (the
#: converters still know the attribute forms of opsets 7-10).
MIN_OPSET = 7
SUPPORTED_MIN_OPSET = 11
MAX_OPSET = onnx.defs.onnx_opset_version()
#: What messages say about the range.
OPSET_RANGE = (f"tidlx reads opset {SUPPORTED_MIN_OPSET} to {MAX_OPSET} and converts older models to "
               f"opset {SUPPORTED_MIN_OPSET} with onnx.version_converter")

DEFAULT_DOMAINS = ("", "ai.onnx")


def qualified_op_type(domain: str, op_type: str) -> str:
    """A node's op type as reports and the ``onnx.op_types`` facet name it: ``domain.OpType``
    outside the default domain."""
    # protobuf hands back bytes for a string field that is not valid UTF-8
    op_type = op_type.decode("utf-8", "replace") if isinstance(op_type, bytes) else op_type
    domain = domain.decode("utf-8", "replace") if isinstance(domain, bytes) else domain
    return op_type if domain in DEFAULT_DOMAINS else f"{domain}.{op_type}"

#: ONNX TensorProto element types the IR can hold, by their IR dtype name.
_ONNX_TO_IR_DTYPE = {
    onnx.TensorProto.FLOAT: "float32",
    onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.FLOAT16: "float16",
    onnx.TensorProto.BFLOAT16: "bfloat16",
    onnx.TensorProto.INT8: "int8",
    onnx.TensorProto.INT16: "int16",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.UINT8: "uint8",
    onnx.TensorProto.UINT16: "uint16",
    onnx.TensorProto.UINT32: "uint32",
    onnx.TensorProto.UINT64: "uint64",
    onnx.TensorProto.BOOL: "bool",
}
_IR_TO_ONNX_DTYPE = {v: k for k, v in _ONNX_TO_IR_DTYPE.items()}


def onnx_type_name(elem_type: int) -> str:
    try:
        return onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"element type {elem_type}"


def ir_dtype(elem_type: int, where: str) -> str:
    """The IR dtype of an ONNX element type; refuses strings, complex, float8/4-bit types."""
    dtype = _ONNX_TO_IR_DTYPE.get(elem_type)
    if dtype is None:
        raise OnnxImportError(f"{where}: ONNX type {onnx_type_name(elem_type)} is not supported "
                              f"(supported: {', '.join(onnx_type_name(t) for t in _ONNX_TO_IR_DTYPE)})")
    return dtype


def onnx_elem_type(dtype: str) -> int:
    return _IR_TO_ONNX_DTYPE[dtype]


def load_model(model_or_path) -> Tuple[onnx.ModelProto, str]:
    """The ModelProto and a name for messages (the path, or '<ModelProto>')."""
    if isinstance(model_or_path, onnx.ModelProto):
        model, source = model_or_path, "<ModelProto>"
    elif isinstance(model_or_path, (bytes, bytearray)):
        model, source = _parse_bytes(bytes(model_or_path), "<bytes>"), "<bytes>"
    elif isinstance(model_or_path, (str, os.PathLike)):
        source = os.fspath(model_or_path)
        model = _load_file(source)
    else:
        raise OnnxLoadError(f"from_onnx expects an onnx.ModelProto or a path to a .onnx file, got "
                            f"{type(model_or_path).__name__}")
    _check_model(model, source)
    return model, source


def _parse_bytes(data: bytes, source: str) -> onnx.ModelProto:
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as exc:  # protobuf raises DecodeError (and RuntimeWarning-ish variants)
        raise OnnxLoadError(f"{source}: not an ONNX model (protobuf decoding failed: {exc})") from None
    return model


def _load_file(path: str) -> onnx.ModelProto:
    if not os.path.exists(path):
        raise OnnxLoadError(f"{path}: no such file")
    if os.path.isdir(path):
        raise OnnxLoadError(f"{path}: is a directory, not an ONNX model file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise OnnxLoadError(f"cannot read {path}: {exc.strerror}") from None
    model = _parse_bytes(data, path)
    if model.HasField("graph") and _uses_external_data(model):
        try:
            onnx.external_data_helper.load_external_data_for_model(model, os.path.dirname(path) or ".")
        except Exception as exc:
            raise OnnxLoadError(f"{path}: cannot load the external tensor data: {exc}") from None
    return model


def _uses_external_data(model: onnx.ModelProto) -> bool:
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def _check_model(model: onnx.ModelProto, source: str) -> None:
    """A parsed protobuf is an ONNX model only if it has an IR version and a graph with outputs.

    (Arbitrary bytes often decode as a protobuf with unknown fields, so decoding alone proves
    nothing.)
    """
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise OnnxLoadError(f"{source}: not an ONNX model (no IR version or no graph; the file may be "
                            f"truncated or of another format)")
    if not model.graph.output:
        raise OnnxGraphError(f"{source}: the graph declares no outputs")
    _check_names(model.graph, source)


def _check_names(graph: onnx.GraphProto, source: str) -> None:
    """Every tensor name is text: protobuf hands back bytes for a string that is not valid UTF-8, and
    such a name cannot be written into any other proto (the size checks and the opset conversion do)."""
    def bad(name, where: str) -> None:
        if isinstance(name, bytes):
            raise OnnxGraphError(f"{source}: {where} has a name that is not valid UTF-8: {name!r}")

    for kind, values in (("graph input", graph.input), ("graph output", graph.output),
                         ("value_info", graph.value_info)):
        for i, vi in enumerate(values):
            bad(vi.name, f"{kind} {i}")
    for i, init in enumerate(graph.initializer):
        bad(init.name, f"initializer {i}")
    for i, node in enumerate(graph.node):
        for j, name in enumerate(node.input):
            bad(name, f"node {i} input {j}")
        for j, name in enumerate(node.output):
            bad(name, f"node {i} output {j}")


def default_opset(model: onnx.ModelProto, override: Optional[int], source: str) -> int:
    versions = [o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS]
    if override is not None:
        opset = int(override)
    elif versions:
        opset = max(versions)
    else:
        raise OnnxImportError(f"{source}: the model imports no default-domain opset; pass opset=")
    if opset < MIN_OPSET:
        raise OnnxImportError(f"{source}: opset={opset} is too old to read a model as ({OPSET_RANGE}; "
                              f"an override must name opset {MIN_OPSET} or newer)")
    if opset > MAX_OPSET:
        raise OnnxImportError(f"{source}: opset {opset} is newer than the newest this onnx knows "
                              f"({MAX_OPSET})")
    return opset


def upgrade_opset(model: onnx.ModelProto, override: Optional[int], source: str) -> onnx.ModelProto:
    """The model converted to SUPPORTED_MIN_OPSET when its default-domain opset is older (with a
    TidlxWarning saying so); unchanged otherwise, and when ``override`` names the opset to read."""
    versions = [o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS]
    if override is not None or not versions or max(versions) >= SUPPORTED_MIN_OPSET:
        return model
    old = max(versions)
    from onnx import version_converter

    # The converter sees only graph inputs as defined; initializers need not be inputs since IR v4.
    declared = {vi.name for vi in model.graph.input}
    extra = [init for init in model.graph.initializer if init.name not in declared]
    if extra:
        model = _copy(model)
        for i, init in enumerate(extra):
            try:
                model.graph.input.append(onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
            except (UnicodeError, ValueError, TypeError) as exc:   # a name that is not UTF-8, a bad element type
                raise OnnxImportError(f"{source}: initializer {i} ({init.name!r}) cannot be declared for the opset "
                                      f"conversion: {exc}") from None
    try:
        converted = version_converter.convert_version(model, SUPPORTED_MIN_OPSET)
    except Exception as exc:  # the converter raises RuntimeError, ValidationError, ... on what it cannot adapt
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        first = first.rsplit(" failed: ", 1)[-1]  # drop the converter's source file and assertion text
        raise OnnxImportError(f"{source}: opset {old} is older than tidlx reads ({OPSET_RANGE}), and the "
                              f"conversion failed: {first}; re-export the model with opset "
                              f"{SUPPORTED_MIN_OPSET} or newer") from None
    if extra:
        names = {i.name for i in extra}
        kept = [vi for vi in converted.graph.input if vi.name not in names]
        del converted.graph.input[:]
        converted.graph.input.extend(kept)
    warnings.warn(f"{source}: the model's opset {old} was converted to opset {SUPPORTED_MIN_OPSET} with "
                  f"onnx.version_converter on import ({OPSET_RANGE})", TidlxWarning, stacklevel=4)
    return converted


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def node_names(graph: onnx.GraphProto) -> List[str]:
    """Each node's layer name: its ONNX name, or ``<OpType>_<index>`` for unnamed nodes."""
    return [n.name if n.name else f"{n.op_type}_{i}" for i, n in enumerate(graph.node)]


def initializers(graph: onnx.GraphProto, source: str) -> Dict[str, np.ndarray]:
    out = {}
    for init in graph.initializer:
        ir_dtype(init.data_type, f"{source}: initializer '{init.name}'")
        try:
            out[init.name] = numpy_helper.to_array(init)
        except Exception as exc:
            raise OnnxLoadError(f"{source}: initializer '{init.name}' cannot be read: {exc}") from None
    for sparse in graph.sparse_initializer:
        raise OnnxImportError(f"{source}: sparse initializer '{sparse.values.name}' is not supported")
    return out


@dataclass(frozen=True)
class GraphInput:
    name: str
    shape: Tuple[int, ...]
    dtype: str


def graph_inputs(graph: onnx.GraphProto, init_names, batch: Optional[int],
                 shapes: Optional[Mapping[str, Sequence[int]]], source: str) -> List[GraphInput]:
    """The runtime inputs with static shapes; ``shapes`` and then ``batch`` override the model's."""
    shapes = dict(shapes or {})
    declared = [vi.name for vi in graph.input]
    for name, shape in shapes.items():
        if name not in declared:
            hint = closest(name, declared)
            raise OnnxImportError(f"{source}: shapes= names '{name}', which is not a graph input"
                                  + (f"; did you mean {', '.join(repr(h) for h in hint)}?" if hint else
                                     f" (inputs: {', '.join(repr(d) for d in declared)})"))
        if not isinstance(shape, (list, tuple)) or not all(_is_dim(d) and 0 <= d <= MAX_DIM for d in shape):
            raise OnnxImportError(f"{source}: shapes['{name}'] must be a list of non-negative ints (at most "
                                  f"{MAX_DIM}, int64), got {shape!r}")
    if batch is not None and not (_is_dim(batch) and 0 < batch <= MAX_DIM):
        raise OnnxImportError(f"{source}: batch must be a positive int (at most {MAX_DIM}, int64), got {batch!r}")
    primary = _primary_batch(graph, init_names, shapes) if batch is not None else None
    out = []
    for vi in graph.input:
        if vi.name in init_names and vi.name not in shapes:
            continue  # an input with a default value: a constant of the model
        where = f"{source}: input '{vi.name}'"
        if vi.type.WhichOneof("value") != "tensor_type":
            raise OnnxImportError(f"{where} is a {vi.type.WhichOneof('value') or 'untyped value'}, not a "
                                  f"tensor")
        dtype = ir_dtype(vi.type.tensor_type.elem_type, where)
        if vi.name in shapes:
            shape = tuple(int(d) for d in shapes[vi.name])
        else:
            if not vi.type.tensor_type.HasField("shape"):
                raise DynamicShapeError(f"{where} has no shape (not even a rank); pass shapes={{'{vi.name}': "
                                        f"[...]}}")
            dims = []
            for axis, dim in enumerate(vi.type.tensor_type.shape.dim):
                if axis == 0 and batch is not None and primary is not None and dim.HasField("dim_value") \
                        and dim.dim_value != primary[1] and int(batch) == primary[1]:
                    dims.append(int(dim.dim_value))  # the model's own batch: nothing changes
                elif axis == 0 and batch is not None:
                    if primary is not None and dim.HasField("dim_value") and dim.dim_value != primary[1]:
                        # e.g. BEVDet's mlp_input (1 x cameras x 27) beside img (cameras x 3 x H x W):
                        # its batch is not in dim 0, and setting dim 0 would broadcast silently.
                        raise OnnxImportError(
                            f"{where} is {_fmt_dims(vi)}: its dim 0 ({dim.dim_value}) is not the model's batch "
                            f"({primary[1]}, dim 0 of input '{primary[0]}'), so batch= cannot tell which of its "
                            f"dimensions to set; give its shape with shapes={{'{vi.name}': [...]}} as well")
                    dims.append(int(batch))
                elif dim.HasField("dim_value"):
                    if dim.dim_value < 0:
                        raise OnnxImportError(f"{where}: dimension {axis} is {dim.dim_value} (shape "
                                              f"{_fmt_dims(vi)}); dimensions cannot be negative; pass "
                                              f"shapes={{'{vi.name}': [...]}} to give the real shape")
                    dims.append(int(dim.dim_value))
                else:
                    what = f"'{dim.dim_param}'" if dim.dim_param else "unnamed"
                    fix = ("pass batch= or shapes=" if axis == 0 else "pass shapes=")
                    raise DynamicShapeError(f"{where}: dimension {axis} is dynamic ({what}); {fix}"
                                            f"{{'{vi.name}': [...]}} to fix it")
            shape = tuple(dims)
        out.append(GraphInput(vi.name, shape, dtype))
    return out


@dataclass(frozen=True)
class Rebatch:
    """A ``batch=`` override that changes the batch the model was exported with: ``exported``
    (dim 0 as declared of the runtime inputs whose dim 0 the override changes; one value for
    most models) becomes ``batch``. Converters of ops whose constant operands may carry the
    exported batch (a Resize's ``sizes``, a Reshape's ``shape``) read it."""

    exported: Tuple[int, ...]
    batch: int

    def describe_exported(self) -> str:
        return " or ".join(str(b) for b in self.exported)


def rebatch_of(graph: onnx.GraphProto, init_names, batch: Optional[int],
               shapes: Optional[Mapping[str, Sequence[int]]]) -> Optional[Rebatch]:
    """The ``Rebatch`` of a ``batch=`` override, or None when it changes no input's declared
    static dim 0 (inputs given by ``shapes=`` are not overridden)."""
    if batch is None:
        return None
    shapes = shapes or {}
    exported = set()
    for vi in graph.input:
        if vi.name in shapes or vi.name in init_names or vi.type.WhichOneof("value") != "tensor_type":
            continue
        dims = vi.type.tensor_type.shape.dim
        if dims and dims[0].HasField("dim_value") and int(dims[0].dim_value) != int(batch):
            exported.add(int(dims[0].dim_value))
    return Rebatch(tuple(sorted(exported)), int(batch)) if exported else None


def _primary_batch(graph: onnx.GraphProto, init_names, shapes) -> Optional[Tuple[str, int]]:
    """``(name, dim 0)`` of the first runtime input of rank >= 2 whose dim 0 is static: the
    model's batch as exported (as the TIDL flow reads the batch), or None."""
    for vi in graph.input:
        if vi.name in shapes or vi.name in init_names or vi.type.WhichOneof("value") != "tensor_type":
            continue
        dims = vi.type.tensor_type.shape.dim
        if len(dims) >= 2:
            return (vi.name, int(dims[0].dim_value)) if dims[0].HasField("dim_value") else None
    return None


def _fmt_dims(vi) -> str:
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
            for d in vi.type.tensor_type.shape.dim]
    return "[" + ", ".join(dims) + "]"


def _is_dim(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def subgraphs(node: onnx.NodeProto) -> List[Tuple[str, onnx.GraphProto]]:
    """``(attribute name, graph)`` of each subgraph of a node (an If's branches, a Loop's body)."""
    out = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out.append((a.name, a.g))
        elif a.type == onnx.AttributeProto.GRAPHS:
            out.extend((a.name, g) for g in a.graphs)
    return out


def outer_scope_inputs(node: onnx.NodeProto) -> List[str]:
    """The tensors a node's subgraphs read from the scopes around the node (ONNX's implicit
    inputs), nested subgraphs included, in the order first read."""
    out: List[str] = []
    for _, graph in subgraphs(node):
        for name in graph_outer_reads(graph):
            if name not in out:
                out.append(name)
    return out


def graph_outer_reads(graph: onnx.GraphProto) -> List[str]:
    """The tensor names a (sub)graph reads but does not define: neither its inputs, its
    initializers nor the output of one of its nodes."""
    defined = {vi.name for vi in graph.input} | {i.name for i in graph.initializer} | \
        {s.values.name for s in graph.sparse_initializer} | {o for n in graph.node for o in n.output if o}
    out: List[str] = []
    for node in graph.node:
        for name in list(node.input) + outer_scope_inputs(node):
            if name and name not in defined and name not in out:
                out.append(name)
    for vi in graph.output:
        if vi.name not in defined and vi.name not in out:
            out.append(vi.name)
    return out


def topological_order(graph: onnx.GraphProto, available: Sequence[str], names: Sequence[str],
                      source: str) -> List[int]:
    """Node indices so each node comes after the producers of its inputs (Kahn's algorithm); the
    tensors a node's subgraphs read from the outer scope count as its inputs.

    Raises for an input nobody produces (naming node and input), for a tensor produced twice,
    and for a cycle (naming the nodes on it).
    """
    nodes = list(graph.node)
    producer: Dict[str, int] = {}
    for i, node in enumerate(nodes):
        for out in node.output:
            if not out:
                continue
            if out in producer:
                raise OnnxGraphError(f"{source}: tensor '{out}' is produced by both node '{names[producer[out]]}' "
                                     f"and node '{names[i]}'")
            if out in available:
                raise OnnxGraphError(f"{source}: node '{names[i]}' ({node.op_type}) writes '{out}', which is "
                                     f"already a graph input or initializer")
            producer[out] = i
    available = set(available)
    preds: List[set] = []
    for i, node in enumerate(nodes):
        deps = set()
        implicit = outer_scope_inputs(node) if node.attribute else []
        for inp in list(node.input) + implicit:
            if not inp or inp in available:
                continue
            if inp not in producer:
                how = "reads" if inp in node.input else "reads in a subgraph"
                raise OnnxGraphError(f"{source}: node '{names[i]}' ({node.op_type}) {how} '{inp}', which is "
                                     f"not a graph input, an initializer or the output of any node "
                                     f"(missing initializer?)")
            deps.add(producer[inp])
        preds.append(deps)
    succs: List[List[int]] = [[] for _ in nodes]
    for i, deps in enumerate(preds):
        for d in deps:
            succs[d].append(i)
    waiting = [len(d) for d in preds]
    ready = [i for i, w in enumerate(waiting) if w == 0]
    ready.reverse()
    order = []
    while ready:
        i = ready.pop()
        order.append(i)
        for s in reversed(succs[i]):
            waiting[s] -= 1
            if waiting[s] == 0:
                ready.append(s)
    if len(order) != len(nodes):
        cycle = _find_cycle([i for i, w in enumerate(waiting) if w > 0], preds, waiting)
        raise OnnxGraphError(f"{source}: the graph is not a DAG: nodes "
                             f"{' -> '.join(repr(names[i]) for i in cycle)} -> {names[cycle[0]]!r} form a cycle")
    for out in graph.output:
        if out.name not in available and out.name not in producer:
            raise OnnxGraphError(f"{source}: graph output '{out.name}' is not produced by any node")
    return order


def _find_cycle(stuck: List[int], preds: List[set], waiting: List[int]) -> List[int]:
    """A cycle among the nodes Kahn's algorithm could not schedule (each has a stuck predecessor)."""
    stuck_set = set(stuck)
    path: List[int] = []
    position: Dict[int, int] = {}
    node = stuck[0]
    while node not in position:
        position[node] = len(path)
        path.append(node)
        node = min(p for p in preds[node] if p in stuck_set and waiting[p] > 0)
    cycle = path[position[node]:]
    cycle.reverse()  # producers first
    return cycle
