"""The TIDL layer model: what one ``Compiler="tidl"`` subgraph is as a TIDL network.

    networks = build_networks(partitioned_module)     # one TidlNetwork per Compiler="tidl" function
    net = networks[0]
    net.name, net.inputs, net.outputs                  # tidl_0; tensor ids
    for layer in net.compute_layers():
        layer.type, layer.type_id                      # "Conv", 1 (TI's numbers: TIDL-NUMERICS.md)
        layer.composite                                # "tidl.conv2d_bn_act"
        layer.params                                   # ConvParams(kernel=(3, 3), strides=(1, 1), ...)
        layer.activation                               # Activation("ReLU", 1, ())
        layer.inputs, layer.outputs                    # tensor ids: net.tensors[i]
        layer.constants                                # ConstantRef("nn.conv2d.weight", ...), ...

It is built from the IR alone (the subgraph function and its Composite functions, as the
partitioner writes them or as they parse back from Relay text), so the fixed-point emulator,
calibration, the artifact writer and the partition report read one model.

* Layers are in the order of the subgraph body (a topological order): first one ``Data``
  layer per subgraph input, then one layer per Composite call, then one ``Data`` layer per
  subgraph output (TIDL's networks begin and end with data layers).
* A Composite ``tidl.<pattern>`` (a composite group) is matched again against its pattern to
  find its parts: the anchor (the conv, dense, batch norm, ...) gives the layer type and
  parameters, an activation member the activation. ``tidl.<op>`` is one call that is a layer
  on its own; its type is the op's ``tidl.layer`` facet, its parameters the ``tidl.params``
  facet, and an activation op (relu, clip, sigmoid, ...) is also the layer's activation.
* Tensors are numbered in creation order: subgraph inputs, then each layer's outputs. A layer
  output is named after the layer (``:k`` for the k-th of several).
* Glue between layers (the projections of a multi-output layer such as a split) is not a
  layer: it only routes tensors. Every layer input is a tensor (a concatenate's tuple is built
  inside its Composite function).
* Constants are referenced, not copied: ``ConstantRef.role`` is ``<op>.<argument>``
  (``nn.batch_norm.moving_var``), in the order the layer's calls use them.

tidlx's choices where TI's list has no layer of that name: a standalone clip (or max/min with a
constant) is a ReLU layer with a Clip / ReLU6 activation, a leaky ReLU a PReLU layer with one
slope, expand_dims a Reshape, a cast a DataConvert, bias_add and per-channel scale/shift a
BatchNorm layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

from ...ir.errors import TidlxError
from ...ir.expr import Call, Constant, Expr, Function, Tuple as TupleExpr, TupleGetItem, Var
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.traversal import post_order
from ...ir.types import TensorType, TupleType
from ...emulator.fixed.artifact_format import LAYER_TYPE_IDS as _FORMAT_LAYER_TYPE_IDS
from .composites import MEMBER, _last_axis_constant as _along_last_axis, composite_specs
from .layer_params import (NO_ACTIVATION, TIDL_ACTIVATION, TIDL_PARAMS, Activation, BatchNormParams, NoParams)
from .rules import TIDL_LAYER

#: TIDL's layer types and their numbers in the network record: one table, the artifact format's (the
#: reader checks a layer's type name against its id).
LAYER_TYPE_IDS = _FORMAT_LAYER_TYPE_IDS

COMPOSITE_PREFIX = "tidl."


class LayerModelError(TidlxError):
    """A Compiler="tidl" function that is not a TIDL network: a call outside any Composite
    function, an unknown Composite name, or a Composite body that does not match its pattern."""


@dataclass(frozen=True)
class TidlTensor:
    """A tensor of the network: ``producer`` is the index of the layer writing it."""

    id: int
    name: str
    shape: Tuple[int, ...]
    dtype: str
    producer: int


@dataclass(frozen=True)
class ConstantRef:
    """A constant a layer reads (weights, biases, statistics, slopes): ``role`` is
    ``<op>.<argument>``; ``constant`` is the IR node holding the array."""

    role: str
    shape: Tuple[int, ...]
    dtype: str
    constant: Constant = field(compare=False, repr=False)


@dataclass(frozen=True)
class TidlLayer:
    """One TIDL layer. ``ops`` are its Relay calls in order, ``source_layers`` their (ONNX)
    layer names; ``function`` is the Composite function it was built from (None for Data)."""

    index: int
    name: str
    type: str
    type_id: int
    composite: Optional[str]
    ops: Tuple[str, ...]
    params: Any
    activation: Activation
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]
    constants: Tuple[ConstantRef, ...]
    source_layers: Tuple[str, ...]
    function: Optional[Function] = field(default=None, compare=False, repr=False)

    @property
    def is_data(self) -> bool:
        return self.type == "Data"

    def describe(self) -> str:
        """``Conv+ReLU``: the type, and the activation when there is one."""
        return self.type + (f"+{self.activation.type}" if self.activation.type_id else "")


@dataclass(frozen=True)
class TidlNetwork:
    """One subgraph as TIDL sees it: its layers (Data layers first and last), its tensors by id,
    and the tensor ids of its inputs and outputs (in the subgraph's parameter / result order)."""

    name: str
    layers: Tuple[TidlLayer, ...]
    tensors: Tuple[TidlTensor, ...]
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]
    _by_function: Dict[int, int] = field(default_factory=dict, compare=False, repr=False)

    def compute_layers(self) -> Tuple[TidlLayer, ...]:
        """The layers that compute (all but the Data layers)."""
        return tuple(layer for layer in self.layers if not layer.is_data)

    def layer_type_counts(self) -> Dict[str, int]:
        """Compute layers per type, in order of first appearance."""
        counts: Dict[str, int] = {}
        for layer in self.compute_layers():
            counts[layer.type] = counts.get(layer.type, 0) + 1
        return counts

    def layer_of(self, function: Function) -> Optional[TidlLayer]:
        """The layer built from a Composite function of this subgraph, or None."""
        i = self._by_function.get(id(function))
        return None if i is None else self.layers[i]


# -- building ---------------------------------------------------------------------------------------

Value = Union[int, tuple]   # a tensor id, or a tuple of values


def _flatten(value: Value) -> List[int]:
    if isinstance(value, int):
        return [value]
    out: List[int] = []
    for v in value:
        out.extend(_flatten(v))
    return out


def _tensor_type(t, where: str) -> TensorType:
    if not isinstance(t, TensorType):
        raise LayerModelError(f"{where}: expected a tensor, got {t}")
    return t


class _Builder:
    def __init__(self, name: str):
        self.name = name
        self.layers: List[TidlLayer] = []
        self.tensors: List[TidlTensor] = []
        self.by_function: Dict[int, int] = {}

    def tensor(self, name: str, ttype: TensorType, producer: int) -> int:
        t = TidlTensor(len(self.tensors), name, tuple(int(d) for d in ttype.shape), ttype.dtype, producer)
        self.tensors.append(t)
        return t.id

    def data_layer(self, name: str, inputs: Tuple[int, ...], ttype: Optional[TensorType]) -> int:
        index = len(self.layers)
        outputs = (self.tensor(name, ttype, index),) if ttype is not None else ()
        self.layers.append(TidlLayer(index, name, "Data", LAYER_TYPE_IDS["Data"], None, (), NoParams(),
                                     NO_ACTIVATION, inputs, outputs, (), ()))
        return index

    def composite_layer(self, fn: Function, inputs: List[int]) -> Value:
        index = len(self.layers)
        composite = fn.attrs.get("Composite")
        where = f"@{self.name}: Composite {composite!r}"
        parts = _Parts.of(fn, where)
        name = parts.anchor.layer or f"{self.name}_layer{index}"
        ret = fn.body.checked_type
        if isinstance(ret, TupleType):
            types = [_tensor_type(t, where) for t in ret.fields]
            outputs = tuple(self.tensor(f"{name}:{k}", t, index) for k, t in enumerate(types))
            value: Value = outputs
        else:
            outputs = (self.tensor(name, _tensor_type(ret, where), index),)
            value = outputs[0]
        calls = parts.calls
        layer_names: List[str] = []
        for c in calls:
            if c.layer and c.layer not in layer_names:
                layer_names.append(c.layer)
        self.layers.append(TidlLayer(index, name, parts.layer_type, _type_id(parts.layer_type, where), composite,
                                     tuple(c.op_name for c in calls), parts.params(where), parts.activation(),
                                     tuple(inputs), outputs, _constants(calls), tuple(layer_names), fn))
        self.by_function[id(fn)] = index
        return value


def _type_id(layer_type: str, where: str) -> int:
    if layer_type not in LAYER_TYPE_IDS:
        raise LayerModelError(f"{where}: '{layer_type}' is not a TIDL layer type")
    return LAYER_TYPE_IDS[layer_type]


def _dtype_text(constant: Constant) -> str:
    """``str(constant.data.dtype)``: for numpy's built-in dtypes the name the constant's type
    already holds (numpy's own str of a dtype is slow, and layers have thousands of constants)."""
    dtype = constant.data.dtype
    return constant.checked_type.dtype if dtype.isbuiltin == 1 else str(dtype)


def _constants(calls) -> Tuple[ConstantRef, ...]:
    out: List[ConstantRef] = []
    for c in calls:
        names = c.op.arg_names
        for i, arg in enumerate(c.args):
            role = f"{c.op_name}.{names[i] if i < len(names) else f'arg{i}'}"
            fields = arg.fields if isinstance(arg, TupleExpr) else (arg,)
            for j, f in enumerate(fields):
                if isinstance(f, Constant):
                    suffix = f".{j}" if isinstance(arg, TupleExpr) else ""
                    out.append(ConstantRef(role + suffix, tuple(int(d) for d in f.data.shape), _dtype_text(f), f))
    return tuple(out)


@dataclass
class _Parts:
    """A Composite function's calls and, for a pattern, its named members."""

    calls: Tuple[Call, ...]
    anchor: Call
    layer_type: str
    spec_name: Optional[str]
    members: Dict[str, Expr]

    @classmethod
    def of(cls, fn: Function, where: str) -> "_Parts":
        composite = fn.attrs.get("Composite")
        if not isinstance(composite, str) or not composite.startswith(COMPOSITE_PREFIX):
            raise LayerModelError(f"{where}: not a TIDL Composite (expected Composite=\"{COMPOSITE_PREFIX}...\")")
        calls = tuple(n for n in post_order(fn.body, enter_functions=False) if isinstance(n, Call))
        if not calls or not all(isinstance(c.op, Op) for c in calls):
            raise LayerModelError(f"{where}: a Composite body must be op calls")
        short = composite[len(COMPOSITE_PREFIX):]
        spec = next((s for s in composite_specs() if s.name == short), None)
        if spec is not None:
            root = fn.body.fields[0] if isinstance(fn.body, TupleExpr) and len(fn.body.fields) == 1 else fn.body
            match = spec.pattern.match(root)
            if match is None:
                raise LayerModelError(f"{where}: the body does not match the pattern {spec.name}")
            members = {k[len(MEMBER):]: v for k, v in match.names.items() if k.startswith(MEMBER)}
            anchor = next((match.get(a) for a in spec.anchors if match.get(a) is not None), calls[0])
            return cls(calls, anchor, spec.layer_type, spec.name, members)
        if len(calls) != 1 or calls[0].op_name != short:
            raise LayerModelError(f"{where}: '{short}' is neither a TIDL composite pattern nor the op of its one "
                                  f"call (patterns: {', '.join(s.name for s in composite_specs())})")
        layer_type = calls[0].op.get_attr(TIDL_LAYER)
        if layer_type is None:
            raise LayerModelError(f"{where}: TIDL has no layer for {short}")
        return cls(calls, calls[0], layer_type, None, {})

    def params(self, where: str):
        anchor = self.anchor
        build = anchor.op.get_attr(TIDL_PARAMS)
        if self.spec_name is None or anchor.op.get_attr(TIDL_LAYER) == self.layer_type:
            if build is None:
                raise LayerModelError(f"{where}: no TIDL parameters for {anchor.op_name}")
            return build(anchor)
        # A BatchNorm layer made of other ops (per-channel scale/shift, hard sigmoid, GELU): its channels
        # are the variable operand's (a scale may come first: ``multiply(c, x)``).
        data = next((a for a in anchor.args if not isinstance(a, Constant)), anchor.args[0])
        shape = tuple(int(d) for d in data.checked_type.shape)
        const = next((a for a in anchor.args if isinstance(a, Constant)), None)
        if const is not None and _along_last_axis(const.data.shape, shape):
            return BatchNormParams(shape[-1], len(shape) - 1, 0.0, self.spec_name)
        if len(shape) < 2:   # a vector's one axis, or a scalar's one value
            return BatchNormParams(shape[0] if shape else 1, 0, 0.0, self.spec_name)
        return BatchNormParams(shape[1], 1, 0.0, self.spec_name)

    def activation(self) -> Activation:
        m = self.members
        if "gelu_erf" in m:
            return Activation.of("GELU")
        if "elu_exp" in m:   # the scale of relu(1 - exp(x)) is -alpha
            return Activation.of("ELU", alpha=-_scalar(m["elu_scale"]))
        if "hs_scale" in m:
            return Activation.of("HardSigmoid", alpha=_scalar(m["hs_scale"]), beta=_scalar(m["hs_shift"]))
        act = m.get("act") if self.spec_name is not None else self.anchor
        if isinstance(act, Call):
            build = act.op.get_attr(TIDL_ACTIVATION)
            if build is not None:
                return build(act)
        return NO_ACTIVATION


def _scalar(call: Call) -> float:
    const = next(a for a in call.args if isinstance(a, Constant))
    return float(const.data.reshape(-1)[0])


def build_network(fn: Function, name: str) -> TidlNetwork:
    """The TIDL network of one ``Compiler="tidl"`` function (named ``name``, e.g. ``tidl_0``)."""
    if not fn.body.has_type:
        raise LayerModelError(f"@{name}: the function is not typed (infer the module's types first)")
    b = _Builder(name)
    values: Dict[int, Value] = {}
    inputs = []
    for p in fn.params:
        t = _tensor_type(p.checked_type, f"@{name}: parameter %{p.name_hint}")
        layer = b.data_layer(p.name_hint, (), t)
        values[id(p)] = b.layers[layer].outputs[0]
        inputs.append(values[id(p)])
    for node in post_order(fn.body, enter_functions=False):
        if id(node) in values or isinstance(node, Var):
            continue
        if isinstance(node, Function):
            continue   # a Composite function: a layer where it is called
        if isinstance(node, Call) and isinstance(node.op, Function):
            args = []
            for a in node.args:
                args.extend(_flatten(values[id(a)]))
            values[id(node)] = b.composite_layer(node.op, args)
        elif isinstance(node, TupleGetItem):
            values[id(node)] = values[id(node.tuple_value)][node.index]
        elif isinstance(node, TupleExpr):
            values[id(node)] = tuple(values[id(f)] for f in node.fields)
        elif isinstance(node, Call):
            raise LayerModelError(f"@{name}: {node.op_name or 'a call'} is not inside a Composite function, so it "
                                  f"is no TIDL layer (partition with tidlx.partition, which writes every layer as "
                                  f"one)")
        else:
            raise LayerModelError(f"@{name}: a {type(node).__name__} outside the Composite functions is not part "
                                  f"of a TIDL network")
    outputs = tuple(_flatten(values[id(fn.body)]))
    for k, tid in enumerate(outputs):
        b.data_layer(f"{name}_out{k}" if len(outputs) > 1 else f"{name}_out", (tid,), None)
    return TidlNetwork(name, tuple(b.layers), tuple(b.tensors), tuple(inputs), outputs, b.by_function)


def build_networks(mod: IRModule) -> Tuple[TidlNetwork, ...]:
    """One TidlNetwork per ``Compiler="tidl"`` function of ``mod``, in module order."""
    if not isinstance(mod, IRModule):
        raise LayerModelError(f"build_networks takes an IRModule, got {type(mod).__name__}")
    if not all(fn.body.has_type for _, fn in mod.items()):
        mod.infer_types()
    return tuple(build_network(fn, name) for name, fn in mod.items() if fn.attrs.get("Compiler") == "tidl")


__all__ = ["LAYER_TYPE_IDS", "COMPOSITE_PREFIX", "LayerModelError", "TidlTensor", "ConstantRef", "TidlLayer",
           "TidlNetwork", "build_network", "build_networks"]
