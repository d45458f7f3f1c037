"""TI's TVM compile flow up to partitioning: options, graph preparation, composites, the
support oracle and the partitioner.

    flow = run_flow(mod, {"deny_list": "nn.batch_norm"}, strategy="greedy")
    flow.partition.module        # @main + @tidl_0, ... (Compiler="tidl")
    flow.prepared                # the module after graph preparation (what was partitioned)

    rows = compare_strategies(mod, options)   # every registered strategy on the same analysis

Steps, in TI's order:

1. Options: a dict of TI names, a ``TidlOptions``, or ``key=value`` strings (the CLI's ``-o``);
   unknown names are errors naming the closest valid name. ``validate_for_model`` runs with the
   model's batch (dim 0 of @main's first input of rank >= 2).
2. Graph preparation (``PREP_PASSES``), each pass named and disable-able: FoldConstant,
   RemoveIdentityOps, ConvertMaxMinToClip, SplitAsymmetricStrideConv, MergePadIntoConv and
   the BN + dense merge FoldBatchNormIntoDense. Disable passes with tidlx's own option
   ``disabled_passes`` (``{"disabled_passes": "FoldBatchNormIntoDense"}``, or ``-o
   disabled_passes=A,B``) or with a ``PassContext(disabled_passes=[...])`` in effect.
   The BN + dense merge respects the user's lists: a batch norm or dense that ``deny_list``,
   ``deny_list:layer_type``, ``deny_list:layer_name`` or ``allow_list:layer_name`` keeps off
   TIDL is not merged (otherwise the merge would hide the denied layer, and denying it is how
   TI's users kept the merge from breaking their import).
3. Composites (conv + BN + ReLU, ...), which TIDL runs as one layer. A composite member the
   user's lists keep off TIDL is taken out of its composite first and the rest regrouped (a
   denied conv leaves its BN + ReLU as a BatchNorm layer), so those lists move exactly the
   layers they name. Members failing a support rule or the batch limit still take their whole
   composite to the host (``explain``'s rule).
4. The support oracle: ``explain`` per call (lists, rules, batch limit).
5. ``tidlx.ir.partition.partition`` with the composites as groups and the limits
   ``max_num_subgraphs``, ``max_num_subgraph_nodes``, ``max_subgraph_io`` and
   ``min_subgraph_macs`` (1, TI's ``min_mac_threshold``: a subgraph without MACs goes back to
   the host). Inside each ``Compiler="tidl"`` function every TIDL layer is a function with
   ``Composite="tidl.<pattern>"`` (a composite group) or ``Composite="tidl.<op>"`` (a call that
   is a layer on its own), called in place; ``layers.build_networks`` reads them as TIDL
   networks.

tidlx's option ``flow`` picks TI's flow: ``tvm`` (the default, the steps above) or ``ort``, TI's
ONNX Runtime import (``ort_flow.py``, docs/ort-flow.md): the same preparation, composites and
support oracle, then TI's grouping of the ONNX nodes in node order instead of step 5.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ...ir.errors import TidlxError, TidlxWarning, closest
from ...ir.expr import Call, Constant, Function
from ...ir.module import IRModule
from ...ir.op import Op
from ...ir.partition import PartitionLimits, PartitionResult, gc_paused, list_strategies, partition
from ...ir.partition.strategies import get_strategy
from ...ir.rewrite import RewriteTable, is_external, shared_walks
from ...ir.traversal import post_order
from ...ir.transform import Pass, PassContext
from ...ir.types import TensorType
from ...emulator import registry as _emulator  # noqa: F401  (importing tidlx.emulator gives FoldConstant its evaluator)
from .composites import Composite, find_composites
from .context import RuleContext
from .explain import HostReason, explain_function, with_surgery_hints
from .options import (DEFAULT_FLOW, FLOW_OPTION, MODEL_SURGERY_OPTION, OPTIONS, BatchLimit, OptionError,
                      TidlOptions, parse_flow, parse_key_values, parse_model_surgery)

#: tidlx's own option (not TI's): preparation passes to skip, by name.
DISABLED_PASSES_OPTION = "disabled_passes"

#: TI's graph preparation, in TI's order.
PREP_PASSES = ("FoldConstant", "RemoveIdentityOps", "ConvertMaxMinToClip", "SplitAsymmetricStrideConv",
               "MergePadIntoConv", "FoldBatchNormIntoDense")

#: TI's model surgery (option ``model_surgery``): the passes made after the rules of TI's model optimizer
#: that are on by default, in the order they run, before PREP_PASSES; pass name -> TI's rule name.
SURGERY_RULES = {
    "ConvertTrConvStrideNTrToMatmul": "convert_tr_conv_stride_n_tr_to_matmul",
    "RemoveWhereLayer": "remove_where_layer",
    "ConvertTanhgeluToErfgelu": "convert_tanhgelu_to_erfgelu",
    "ConvertSpace2depthToReshpTrReshp": "convert_space2depth_to_reshp_tr_reshp",
    "ConvertDepth2spaceToReshpTrReshp": "convert_depth2space_to_reshp_tr_reshp",
    "OptimizeReshpTrReshp": "optimize_reshp_tr_reshp",
    "ConvertReducesumToMatmul": "convert_reducesum_to_matmul",
    "ConvertExpandToReshapeAndConcat": "convert_expand_to_reshape_and_concat",
    "ConvertSingleConcatToConsecutiveConcats": "convert_single_concat_to_consecutive_concats",
    "ConvertNegToMul": "convert_neg_to_mul",
    "RemoveQuantizeInitializer": "remove_quantize_initializer",
    "ExpandSliceAcrossMultipleAxis": "expand_slice_across_multiple_axis",
    "ConvertConv7x7Stride4ToStride1": "convert_conv_7x7_stride4_to_stride1",
    "ConvertConvLargePadToSmallerKernel": "convert_conv_large_pad_to_smaller_kernel",
    "PushLargeChannelDimToHeightForWidthWiseSoftmax": "push_large_channel_dim_to_height_for_width_wise_softmax",
    "ConvertSoftmaxAxisHeightToWidth": "convert_softmax_axis_height_to_width",
    "ConvertSoftmaxAxisChannelToWidth": "convert_softmax_axis_channel_to_width",
    "ConvertBatchnormInputTo4D": "convert_batchnorm_input_to_4D",
    "ConvertGatherWithSingleIndexToSlice": "convert_gather_with_single_index_to_slice",
    "ConvertLargeGlobalAvgPoolingToMatmul": "convert_large_global_avg_pooling_to_matmul",
    "ConvertReduceMeanToMatmul": "convert_reducemean_to_matmul",
    "ConvertMaxpoolToCascadedMaxpool": "convert_maxpool_to_cascaded_maxpool",
    "HfAttentionBlockOptimization": "hf_attention_block_optimization",
}
SURGERY_PASSES = tuple(SURGERY_RULES)
#: The surgery passes TI's optimizer runs on a QDQ model (one holding a QuantizeLinear): of its QDQ
#: rules, the one on by default.
QDQ_SURGERY_PASSES = ("RemoveQuantizeInitializer",)

#: What each preparation pass does to a layer it removes or rewrites (for the report).
PASS_EFFECTS = {
    "ConvertTrConvStrideNTrToMatmul": "patch-embedding convolution (kernel = stride) between NHWC transposes, "
                                      "reshapes, a transpose and a MatMul",
    "RemoveWhereLayer": "select with an all-true or all-false constant condition, replaced by the input it selects",
    "ConvertTanhgeluToErfgelu": "tanh-form GELU, its tanh term replaced by erf(x / sqrt 2) (TIDL's GELU)",
    "ConvertSpace2depthToReshpTrReshp": "space-to-depth, a rank-6 reshape, transpose and reshape",
    "ConvertDepth2spaceToReshpTrReshp": "depth-to-space, a rank-6 reshape, two transposes and a reshape",
    "OptimizeReshpTrReshp": "reshape-transpose-reshape, the axes its transpose keeps together merged "
                            "(fewer dimensions)",
    "ConvertReducesumToMatmul": "sum over height, width or both, a MatMul by a constant column of ones",
    "ConvertExpandToReshapeAndConcat": "expand, a reshape and concatenations of copies",
    "ConvertSingleConcatToConsecutiveConcats": "concatenation of three or more copies, a chain of two-input "
                                               "concatenations",
    "ConvertNegToMul": "negation, a multiply by -1",
    "RemoveQuantizeInitializer": "float constant quantized then dequantized, the quantized constant dequantized",
    "ExpandSliceAcrossMultipleAxis": "slice over several axes, one slice per axis",
    "ConvertConv7x7Stride4ToStride1": "7x7 stride-4 convolution, run at stride 1 then two 1x1 stride-2 max pools",
    "ConvertConvLargePadToSmallerKernel": "convolution padded beyond its input, its kernel cropped to the taps "
                                          "that meet the input",
    "PushLargeChannelDimToHeightForWidthWiseSoftmax": "width softmax of over 1024 channels, run on the tensor "
                                                      "reshaped to fewer channels and more rows",
    "ConvertSoftmaxAxisHeightToWidth": "softmax along the height axis, run along the width axis between two "
                                       "transposes",
    "ConvertBatchnormInputTo4D": "batch norm of a rank-2 or rank-3 tensor, run on it reshaped to 4-D",
    "ConvertGatherWithSingleIndexToSlice": "gather of one constant index, a slice and a reshape",
    "ConvertLargeGlobalAvgPoolingToMatmul": "global average pool over 1024 values or more, a MatMul by a constant "
                                            "column of 1/n",
    "ConvertMaxpoolToCascadedMaxpool": "max pool of a large odd kernel (stride 1, same padding), a chain of 3x3 "
                                       "max pools",
    "ConvertReduceMeanToMatmul": "mean over height and width (or width), a MatMul by a constant column of 1/n",
    "HfAttentionBlockOptimization": "attention scores' bias add, reshape, mask add and reshape, one add of the "
                                    "two constants summed; a fused Q/K/V projection's adds, reshapes and "
                                    "transposes lifted before its split; a scalar scale of the scores moved onto Q",
    "ConvertSoftmaxAxisChannelToWidth": "softmax along the channel axis, run along the width axis between two "
                                        "transposes",
    "FoldConstant": "computed at compile time (all its inputs are constants)",
    "RemoveIdentityOps": "an identity op (returns its input unchanged), dropped",
    "ConvertMaxMinToClip": "max/min with a constant, turned into a clip",
    "SplitAsymmetricStrideConv": "conv with unequal strides, split into conv + 1x1 max pool",
    "MergePadIntoConv": "explicit pad, merged into the padding of the conv/pool reading it",
    "FoldBatchNormIntoDense": "batch norm merged into a neighbouring dense (the BN + GEMM merge)",
}


# -- options ------------------------------------------------------------------------------------

OptionsLike = Union[None, TidlOptions, Mapping[str, object], Sequence[str], str]


def _unknown(name: str) -> OptionError:
    from .options import suggest_option

    hint = list(suggest_option(name))
    for own in (FLOW_OPTION, DISABLED_PASSES_OPTION, MODEL_SURGERY_OPTION):
        if closest(name.strip(), [own], n=1):
            hint.insert(0, own)
    extra = f"; did you mean {' or '.join(repr(h) for h in hint[:3])}?" if hint else \
        f"; valid options: {', '.join(list(OPTIONS) + [DISABLED_PASSES_OPTION, FLOW_OPTION, MODEL_SURGERY_OPTION])}"
    return OptionError(f"unknown TIDL option '{name}'{extra}")


def _pass_names(value) -> Tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str) for v in value):
        items = [part for v in value for part in v.split(",")]
    else:
        raise OptionError(f"option {DISABLED_PASSES_OPTION}={value!r} is not allowed: it must be a comma-separated "
                          f"list of pass names ({', '.join(PREP_PASSES + SURGERY_PASSES)})")
    names: List[str] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        if item not in PREP_PASSES and item not in SURGERY_PASSES:
            hint = closest(item, PREP_PASSES + SURGERY_PASSES, n=1)   # the best: the surgery names are many
            extra = f"; did you mean {', '.join(hint)}?" if hint else ""
            raise OptionError(f"option {DISABLED_PASSES_OPTION}: '{item}' is not a graph preparation pass{extra} "
                              f"(the passes: {', '.join(PREP_PASSES)}; TI's model surgery: "
                              f"{', '.join(SURGERY_PASSES)})")
        if item not in names:
            names.append(item)
    return tuple(names)


def _option_values(options: OptionsLike) -> Optional[Dict[str, object]]:
    """The options as a dict of names to values (None for None or a TidlOptions)."""
    if options is None or isinstance(options, TidlOptions):
        return None
    if isinstance(options, Mapping):
        values = dict(options)
        for key in values:
            if not isinstance(key, str):
                raise OptionError(f"TIDL option names must be strings, got {key!r}")
        return values
    if isinstance(options, (str, list, tuple)):
        return parse_key_values(options)
    raise OptionError(f"TIDL options must be a dict of option names to values, a TidlOptions or a list of "
                      f"'key=value' strings, got {type(options).__name__}")


def resolve_flow(options: OptionsLike = None) -> str:
    """The flow the options choose with tidlx's option ``flow`` (``tvm`` or ``ort``; default ``tvm``,
    also for a TidlOptions, which holds TI's options only)."""
    values = _option_values(options)
    if not values:
        return DEFAULT_FLOW
    for key, value in values.items():
        if key.strip() == FLOW_OPTION:
            return parse_flow(value)
    return DEFAULT_FLOW


def resolve_model_surgery(options: OptionsLike = None) -> bool:
    """Whether TI's model surgery runs: tidlx's option ``model_surgery`` when given, else the flow's
    default (on with ``flow=ort``, as TI's runner does; off with ``flow=tvm``)."""
    values = _option_values(options)
    for key, value in (values or {}).items():
        if key.strip() == MODEL_SURGERY_OPTION:
            return parse_model_surgery(value)
    return resolve_flow(options) == "ort"


def resolve_options(options: OptionsLike = None) -> Tuple[TidlOptions, Tuple[str, ...]]:
    """``(TidlOptions, disabled preparation passes)`` from what users pass: None, a
    TidlOptions, a dict of TI option names (plus tidlx's ``disabled_passes`` and ``flow``, which
    ``resolve_flow`` reads), or ``key=value`` strings. Unknown names raise OptionError naming
    the closest valid name."""
    if options is None:
        return TidlOptions(), ()
    if isinstance(options, TidlOptions):
        return options, ()
    values = _option_values(options)
    disabled: Tuple[str, ...] = ()
    ti_values = {}
    for key, value in values.items():
        name = key.strip()
        if name == DISABLED_PASSES_OPTION:
            disabled = _pass_names(value)
        elif name == FLOW_OPTION:
            parse_flow(value)
        elif name == MODEL_SURGERY_OPTION:
            parse_model_surgery(value)
        elif name in OPTIONS:
            ti_values[name] = value
        else:
            raise _unknown(key)
    return TidlOptions.from_dict(ti_values), disabled


def model_batch(mod: IRModule) -> int:
    """The model's batch: dim 0 of @main's first parameter of rank >= 2 (1 if none)."""
    for p in mod["main"].params:
        t = p.type_annotation if p.type_annotation is not None else p.checked_type
        if isinstance(t, TensorType) and t.ndim >= 2:
            return int(t.shape[0])
    return 1


# -- the user's lists, per call ------------------------------------------------------------------

def list_denial(call: Call, options: TidlOptions, layer_types: Mapping[str, str]) -> Optional[str]:
    """Which of the user's lists keeps ``call`` off TIDL (the option name), or None."""
    if call.op_name in options.deny_list:
        return "deny_list"
    if options.deny_layer_types and call.layer is not None \
            and layer_types.get(call.layer) in options.deny_layer_types:
        return "deny_list:layer_type"
    if call.layer is not None and call.layer in options.deny_layer_names:
        return "deny_list:layer_name"
    if options.allow_layer_names and (call.layer is None or call.layer not in options.allow_layer_names):
        return "allow_list:layer_name"
    return None


def _has_lists(options: TidlOptions) -> bool:
    return bool(options.deny_list or options.deny_layer_types or options.deny_layer_names
                or options.allow_layer_names)


# -- graph preparation ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Transformation:
    """A layer a preparation pass removed or rewrote: ``change`` is "removed" or "rewritten";
    ``ops_before``/``ops_after`` the layer's Relay ops; ``into`` the layer it merged into."""

    pass_name: str
    layer: str
    layer_type: Optional[str]
    change: str
    ops_before: Tuple[str, ...]
    ops_after: Tuple[str, ...]
    into: Optional[str]
    message: str
    #: TI's model optimizer rule the pass follows (TI's model surgery), else None.
    rule: Optional[str] = None


@dataclass(frozen=True)
class PassRecord:
    name: str
    status: str  # "ran" or "disabled"
    changes: int


class _GuardedBnDenseMerge(Pass):
    """FoldBatchNormIntoDense that leaves alone the BNs and denses the user's lists keep off
    TIDL, and records which dense each BN merged into. Named like the registered pass, so
    disabling "FoldBatchNormIntoDense" disables it; it is not registered itself."""

    name = "FoldBatchNormIntoDense"
    opt_level = 2

    def __init__(self, options: TidlOptions, layer_types: Mapping[str, str]):
        from ...ir.passes.fold_bn_dense import FOLD_BN_INTO_DENSE

        self.merged_into: Dict[str, List[str]] = {}
        self._options, self._layer_types = options, layer_types
        self._table = RewriteTable([(r.name, r.pattern, self._guard(r.fn)) for r in FOLD_BN_INTO_DENSE.rules],
                                   name="FoldBatchNormIntoDense")

    def _guard(self, fold):
        def guarded(m):
            bn = m.get("bn") if m.get("bn") is not None else m.get("mul")
            dense = m.get("producer") if m.get("producer") is not None else m.get("consumer")
            if _has_lists(self._options):
                for node in (bn, m.get("affine"), dense, m.get("bias_op")):
                    if isinstance(node, Call) and list_denial(node, self._options, self._layer_types):
                        return None
            out = fold(m)
            if out is not None and isinstance(bn, Call) and bn.layer and isinstance(dense, Call) and dense.layer:
                if bn.layer != dense.layer:  # a BN with several dense users merges into each
                    self.merged_into.setdefault(bn.layer, []).append(dense.layer)
            return out
        return guarded

    def transform(self, mod, ctx):
        return self._table.rewrite(mod)


def _layer_ops(fn: Function) -> Dict[str, Tuple[str, ...]]:
    """Layer name -> its op calls' names, in post order (layers in order of first call)."""
    out: Dict[str, List[str]] = {}
    for node in post_order(fn.body, enter_functions=False):
        if isinstance(node, Call) and isinstance(node.op, Op) and node.layer:
            out.setdefault(node.layer, []).append(node.op.name)
    return {k: tuple(v) for k, v in out.items()}


def _layer_forms(fn: Function) -> Dict[str, Tuple]:
    """Layer name -> its calls' ops, attributes and constant shapes (a rewrite that keeps the ops
    but changes a kernel or a padding changes the form)."""
    out: Dict[str, List] = {}
    for node in post_order(fn.body, enter_functions=False):
        if isinstance(node, Call) and isinstance(node.op, Op) and node.layer:
            consts = tuple(tuple(a.data.shape) for a in node.args if isinstance(a, Constant))
            out.setdefault(node.layer, []).append((node.op.name, repr(node.attrs), consts))
    return {k: tuple(v) for k, v in out.items()}


def _prep_passes(options: TidlOptions, layer_types: Mapping[str, str], model_surgery: bool = False,
                 qdq: bool = False) -> List[Pass]:
    from ...ir.passes import PASSES
    from ...ir.passes import SURGERY_PASSES as SURGERY

    names = QDQ_SURGERY_PASSES if qdq else SURGERY_PASSES
    surgery = [SURGERY[name] for name in names] if model_surgery else []
    return surgery + [PASSES[name] for name in PREP_PASSES[:-1]] + [_GuardedBnDenseMerge(options, layer_types)]


def _is_qdq(fn: Function) -> bool:
    """Whether ``fn`` quantizes (an ONNX QDQ model: QuantizeLinear imports to qnn.quantize)."""
    return any(isinstance(n, Call) and n.op_name == "qnn.quantize" for n in post_order(fn.body))


def prepare(mod: IRModule, options: TidlOptions, disabled_passes: Sequence[str] = (),
            timings: Optional[Dict[str, float]] = None, model_surgery: bool = False) \
        -> Tuple[IRModule, List[PassRecord], List[Transformation]]:
    """Runs TI's graph preparation on ``mod``; returns the prepared module, what each pass did
    and the layers it removed or rewrote. Passes in ``disabled_passes`` or disabled by the
    PassContext in effect are skipped. ``timings`` (if given) gets the seconds of each pass
    (``prepare.<pass name>``, the pass and its layer diff). ``model_surgery``: TI's model surgery
    (``SURGERY_PASSES``) runs first."""
    current = PassContext.current()
    disabled = set(disabled_passes) | set(current.disabled_passes)
    ctx = PassContext(opt_level=current.opt_level, config=dict(current.config), disabled_passes=sorted(disabled),
                      required_passes=sorted(set(current.required_passes) - disabled))
    mod = mod.copy()
    layer_types = dict(mod.layer_types)
    records: List[PassRecord] = []
    changes: List[Transformation] = []
    before = None  # the layers' ops of @main before the first pass that changes it, when one does
    # TI's optimizer runs only its QDQ rules on a model holding a QuantizeLinear
    qdq = _is_qdq(mod["main"])
    with shared_walks():  # a pass that changes nothing hands the next one the walk of the same @main
        for p in _prep_passes(options, layer_types, model_surgery, qdq):
            if ctx.is_disabled(p.name):
                records.append(PassRecord(p.name, "disabled", 0))
                continue
            started = time.perf_counter()
            old_main = mod["main"]
            mod = p.run(mod, ctx)
            if mod["main"] is old_main:  # nothing fired
                records.append(PassRecord(p.name, "ran", 0))
                if timings is not None:
                    timings[f"prepare.{p.name}"] = time.perf_counter() - started
                continue
            if before is None:
                before = _layer_ops(old_main)
            after = _layer_ops(mod["main"])
            merged = getattr(p, "merged_into", {})
            found = _diff_layers(p.name, before, after, layer_types, merged)
            if p.name in SURGERY_RULES:
                found += _reshaped_layers(p.name, old_main, mod["main"], found, layer_types)
            changes += found
            records.append(PassRecord(p.name, "ran", len(found)))
            before = after
            if timings is not None:
                timings[f"prepare.{p.name}"] = time.perf_counter() - started
    mod.layer_types = layer_types
    if not mod["main"].has_type:
        mod.infer_types()
    return mod, records, changes


def _reshaped_layers(pass_name: str, old: Function, new: Function, found, layer_types) -> List[Transformation]:
    """The layers a surgery pass rewrote keeping their ops (a cropped kernel, new padding)."""
    seen = {t.layer for t in found}
    before, after = _layer_forms(old), _layer_forms(new)
    rule = SURGERY_RULES[pass_name]
    out = []
    for layer, form in before.items():
        if layer in seen or layer not in after or after[layer] == form:
            continue
        ops = tuple(f[0] for f in form)
        message = (f"'{layer}': {'+'.join(ops)} rewritten in place by TI's {rule} rule "
                   f"({pass_name}: {PASS_EFFECTS[pass_name]})")
        out.append(Transformation(pass_name, layer, layer_types.get(layer), "rewritten", ops, ops, None, message, rule))
    return out


def _diff_layers(pass_name: str, before, after, layer_types, merged: Mapping[str, str]) -> List[Transformation]:
    out = []
    for layer, ops in before.items():
        now = after.get(layer)
        if now == ops:
            continue
        kind = layer_types.get(layer)
        if now is None:
            denses = merged.get(layer)
            into = ", ".join(denses) if denses else None
            if denses:
                targets = " and ".join(f"nn.dense '{d}'" for d in denses)
                those = "that InnerProduct layer" if len(denses) == 1 else "each of those InnerProduct layers"
                message = (f"{'+'.join(ops)} '{layer}' merged into {targets} by {pass_name} "
                           f"(TIDL then runs it as part of {those})")
            elif pass_name in SURGERY_RULES:
                message = (f"{'+'.join(ops)} '{layer}' removed by TI's {SURGERY_RULES[pass_name]} rule "
                           f"({pass_name}: {PASS_EFFECTS[pass_name]})")
            else:
                message = f"{'+'.join(ops)} '{layer}': {PASS_EFFECTS[pass_name]} by {pass_name}"
            out.append(Transformation(pass_name, layer, kind, "removed", ops, (), into, message,
                                      SURGERY_RULES.get(pass_name)))
        elif pass_name in SURGERY_RULES:
            rule = SURGERY_RULES[pass_name]
            message = (f"'{layer}': {'+'.join(ops)} -> {'+'.join(now)} by TI's {rule} rule "
                       f"({pass_name}: {PASS_EFFECTS[pass_name]})")
            out.append(Transformation(pass_name, layer, kind, "rewritten", ops, now, None, message, rule))
        else:
            message = f"'{layer}': {'+'.join(ops)} -> {'+'.join(now)} by {pass_name} ({PASS_EFFECTS[pass_name]})"
            out.append(Transformation(pass_name, layer, kind, "rewritten", ops, now, None, message))
    return out


# -- composites that respect the user's lists ----------------------------------------------------

def composites_for(fn: Function, options: TidlOptions, layer_types: Mapping[str, str],
                   context: Optional[RuleContext] = None) -> List[Composite]:
    """The composite groups of ``fn``; members the user's lists keep off TIDL are not grouped
    (the other members are regrouped around them, e.g. BN + ReLU after a denied conv). Fusions in
    the option ``disabled_fusions`` are not made (composites.py). ``context``: a RuleContext of
    ``fn`` whose walk and users the search reuses."""
    groups = find_composites(fn, disabled_fusions=options.disabled_fusions, context=context)
    if not _has_lists(options):
        return groups
    denied = [c for g in groups for c in g.calls if list_denial(c, options, layer_types)]
    if not denied:
        return groups
    return find_composites(fn, exclude=denied, disabled_fusions=options.disabled_fusions, context=context)


# -- the flow -----------------------------------------------------------------------------------

@dataclass
class Analysis:
    """The prepared module and what TIDL would do with each call: ``reasons`` (calls kept on
    the host by the oracle), ``groups`` (composites), ``ctx`` (the rule context)."""

    prepared: IRModule
    options: TidlOptions
    disabled_passes: Tuple[str, ...]
    passes: List[PassRecord]
    transformations: List[Transformation]
    ctx: RuleContext
    groups: List[Composite]
    reasons: Dict[Call, HostReason]
    batch: int
    batch_limit: BatchLimit
    timings: Dict[str, float] = field(default_factory=dict)
    #: Whether TI's model surgery ran (option ``model_surgery``).
    model_surgery: bool = False

    def oracle(self, call: Call) -> Optional[str]:
        reason = self.reasons.get(call)
        return None if reason is None else reason.message

    def limits(self) -> PartitionLimits:
        o = self.options
        return PartitionLimits(max_num_subgraphs=o.max_num_subgraphs,
                               max_num_subgraph_nodes=o.max_num_subgraph_nodes,
                               max_subgraph_io=o.max_subgraph_io, min_subgraph_macs=o.min_subgraph_macs)


@dataclass
class FlowResult:
    """``strategy`` names how the partition was made (a strategy, or ``ort`` for TI's ONNX
    Runtime grouping); ``ort`` holds the ONNX-node view of the ORT flow (``ort_flow.OrtPartition``,
    None in the TVM flow)."""

    analysis: Analysis
    partition: PartitionResult
    strategy: str
    timings: Dict[str, float]
    ort: Optional[object] = None

    @property
    def prepared(self) -> IRModule:
        return self.analysis.prepared


def _check_module(mod) -> IRModule:
    if not isinstance(mod, IRModule):
        raise TidlxError(f"partition takes an IRModule (tidlx.load(path) gives one), got {type(mod).__name__}")
    if "main" not in mod:
        raise TidlxError("the module has no @main function to partition")
    external = [name for name, fn in mod.items() if is_external(fn)]
    if external:
        raise TidlxError(f"the module is already partitioned (it has @{external[0]} with "
                         f"Compiler={mod[external[0]].attrs.get('Compiler', '?')!r}); partition the original model")
    return mod


_NAME_WARNINGS = (r"option \S+ names \d+ layer\(s\) not in the model",
                  r"option deny_list:layer_type names ONNX op types the model does not use",
                  r"option deny_list:layer_type is set but the model records no ONNX op types")


#: The options that name layers (TidlOptions.check_layer_names checks these).
_LAYER_NAME_OPTIONS = ("deny_list:layer_name", "allow_list:layer_name",
                       "advanced_options:output_feature_16bit_names_list", "advanced_options:params_16bit_names_list")


def _check_names_against(mod: IRModule, options: TidlOptions) -> None:
    """Warns about list entries naming no layer (or layer type) of the model as given."""
    if any(getattr(options, OPTIONS[name].field) for name in _LAYER_NAME_OPTIONS):  # else no walk
        options.check_layer_names(list(_layer_ops(mod["main"])))
    if options.deny_layer_types:
        if not mod.layer_types:
            warnings.warn("option deny_list:layer_type is set but the model records no ONNX op types (it was not "
                          "imported from ONNX): it denies nothing", TidlxWarning, stacklevel=4)
        else:
            options.check_layer_types(set(mod.layer_types.values()))


def analyse(mod: IRModule, options: OptionsLike = None, *, batch_limit: Optional[BatchLimit] = None,
            resolved: Optional[Tuple[TidlOptions, Tuple[str, ...]]] = None) -> Analysis:
    """Steps 1-4 of the flow: options, preparation, composites, the support oracle.
    ``batch_limit``: instead of the options' (``BatchLimit(None, "ort")``: none); ``resolved``:
    ``(TidlOptions, disabled passes)`` already resolved from ``options``."""
    t0 = time.perf_counter()
    opts, disabled = resolve_options(options) if resolved is None else resolved
    mod = _check_module(mod)
    if not mod["main"].has_type:
        mod.infer_types()
    batch = model_batch(mod)
    opts.validate_for_model(batch)
    if batch_limit is None:
        batch_limit = opts.batch_limit()  # a bad TIDL_RELAY_MAX_BATCH_SIZE is an error before any work
    _check_names_against(mod, opts)
    t1 = time.perf_counter()
    pass_times: Dict[str, float] = {}
    surgery = resolve_model_surgery(options)
    prepared, records, changes = prepare(mod, opts, disabled, pass_times, model_surgery=surgery)
    t2 = time.perf_counter()
    layer_types = dict(prepared.layer_types)
    ctx = RuleContext.for_function(prepared["main"], layer_types, find_groups=False)
    groups = composites_for(prepared["main"], opts, layer_types, context=ctx)
    for group in groups:
        for member in group.members:
            ctx.composites[member] = group
    t_groups = time.perf_counter()
    with warnings.catch_warnings():
        # explain_function checks the lists against the prepared module, where layers merged
        # away by preparation are missing; they were checked against the model above.
        for pattern in _NAME_WARNINGS:
            warnings.filterwarnings("ignore", message=pattern, category=TidlxWarning)
        reasons = explain_function(prepared, opts, ctx=ctx, batch_limit=batch_limit)
    if not surgery and reasons and not _is_qdq(prepared["main"]):
        reasons = with_surgery_hints(reasons, [rule for name, rule in SURGERY_RULES.items() if name not in disabled])
    t3 = time.perf_counter()
    return Analysis(prepared, opts, disabled, records, changes, ctx, groups, reasons, batch, batch_limit,
                    {"options": t1 - t0, "prepare": t2 - t1, **pass_times, "composites": t_groups - t2,
                     "rules": t3 - t_groups, "explain": t3 - t2}, model_surgery=surgery)



def composite_name(calls: Sequence[Call], group: Optional[Composite]) -> str:
    """The ``Composite`` attribute of one TIDL layer in a partitioned subgraph:
    ``tidl.<pattern>`` for a composite group (``tidl.conv2d_bn_act``), ``tidl.<op>`` for a call
    that is a layer on its own (``tidl.nn.max_pool2d``). The pattern says what TIDL fused, as
    TVM's composite names do (``cmsisnn.qnn_softmax``); the TIDL layer type is the layer
    model's (``layers.py``)."""
    return f"tidl.{group.name}" if group is not None else f"tidl.{calls[0].op_name}"


def partition_analysis(analysis: Analysis, strategy: str = "greedy") -> PartitionResult:
    """Step 5: the partitioner on an analysed module; each TIDL layer becomes a Composite function."""
    composite_of = analysis.ctx.composite_of
    return partition(analysis.prepared, analysis.oracle, groups=[g.calls for g in analysis.groups],
                     strategy=strategy, limits=analysis.limits(), compiler="tidl",
                     composite_name=lambda calls: composite_name(calls, composite_of(calls[0])))


def run_flow(mod: IRModule, options: OptionsLike = None, strategy: str = "greedy") -> FlowResult:
    """The whole flow: options, preparation, composites, support oracle, partitioning. With the
    option ``flow=ort`` TI's ONNX Runtime grouping partitions instead (``ort_flow.run_ort_flow``;
    ``strategy`` then partitions only a model whose ORT grouping is cyclic)."""
    get_strategy(strategy)  # an unknown strategy is an error before any work
    if resolve_flow(options) == "ort":
        from .ort_flow import run_ort_flow

        return run_ort_flow(mod, options, strategy)
    with gc_paused():
        analysis = analyse(mod, options)
        t0 = time.perf_counter()
        result = partition_analysis(analysis, strategy)
    timings = dict(analysis.timings, partition=time.perf_counter() - t0)
    return FlowResult(analysis, result, strategy, timings)


def partition_for_tidl(mod: IRModule, options: OptionsLike = None, strategy: str = "greedy",
                       model_name: Optional[str] = None):
    """``(partitioned IRModule, PartitionReport)``: what ``tidlx.partition`` returns."""
    from .report import PartitionReport

    flow = run_flow(mod, options, strategy)
    t0 = time.perf_counter()
    with gc_paused():  # as the flow: the layer model and the report are many small acyclic objects
        report = PartitionReport.from_flow(flow, model_name=model_name)
    report.timings["report"] = time.perf_counter() - t0
    report.ort = flow.ort   # the ORT flow's ONNX-node view (ort_flow.OrtPartition), None in the TVM flow
    return flow.partition.module, report


def compare_strategies(mod: IRModule, options: OptionsLike = None, strategies: Optional[Sequence[str]] = None,
                       model_name: Optional[str] = None):
    """Every strategy (default: all registered) on the same prepared and analysed model;
    returns a ``StrategyComparison`` (rows: strategy, subgraphs, % MACs on TIDL, boundary
    bytes, host ops; ``.table()``, ``.to_json()``). A strategy that fails (e.g. a registered
    one that breaks the partitioner's checks) gets a row with its error instead of stopping
    the comparison; bad options still raise."""
    from ...ir.partition import PartitionError
    from .report import PartitionReport, StrategyComparison

    if resolve_flow(options) == "ort":
        raise OptionError("comparing strategies is a question of the TVM flow: with flow=ort the partition is TI's "
                          "grouping of the ONNX nodes (a strategy partitions only a model whose grouping is cyclic)")
    names = list(list_strategies()) if strategies is None else list(strategies)
    for name in names:
        get_strategy(name)
    with gc_paused():
        analysis = analyse(mod, options)
    reports, failures = [], {}
    for name in names:
        t0 = time.perf_counter()
        try:
            with gc_paused():
                result = partition_analysis(analysis, name)
        except PartitionError as exc:
            failures[name] = str(exc)
            continue
        flow = FlowResult(analysis, result, name, dict(analysis.timings, partition=time.perf_counter() - t0))
        reports.append(PartitionReport.from_flow(flow, model_name=model_name))
    return StrategyComparison(reports, model_name=model_name, failures=failures, order=names)


__all__ = ["run_flow", "analyse", "partition_analysis", "partition_for_tidl", "compare_strategies",
           "resolve_options", "resolve_flow", "resolve_model_surgery", "prepare", "composites_for", "list_denial", "model_batch", "Analysis", "FlowResult",
           "Transformation", "PassRecord", "PREP_PASSES", "SURGERY_PASSES", "SURGERY_RULES", "DISABLED_PASSES_OPTION"]
