"""Prepared steps: the fast set's last plan transform specializes each step once, when its plan is compiled.

Called generically, a kernel re-reads its attributes on every call, checks layouts and dtypes,
reshapes its constant weights and picks its route, and a fused chain checks each stage's operands
and result: ~10-15 us on a 1x1 convolution with its bias, as long as the product of a
squeeze-excite convolution itself. Small networks run 100-180 such steps (MobileNetV3-small,
EfficientNet-B0, ShuffleNetV2), so that is a fifth to a third of their run time.

Everything a step's call would decide from its static facts — the argument and result types,
the constant arguments (weights, biases, batch-norm parameters) and the attributes — is decided
here instead: an op's *preparer* (facet ``emulator.prepare``, a ``Preparer`` record) returns a
callable specialized to one call site, or None where it has no specialized form. A fused chain
(_fusion.py) becomes one ``PreparedChain`` when its head has a fresh result and every stage has
a prepared in-place form; its run is the head, then the stages, with no per-call checks.

A conv chain with a whole form (its tail applied per block, plane or row) also absorbs a float32
swish or hard-swish step (_activations.py) that is its result's one reader (``prepare_steps``).

A prepared callable runs the very computation its kernel or epilogue would run for those facts
(the same functions, products cut in the same blocks, the same float operations in the same
order), so results are the same bits with or without this transform (``EmulatorConfig.prepare``,
``TIDLX_EMULATOR_PREPARE=0`` turns it off; tests compare the two). Steps whose facts a preparer
does not recognise keep their generic kernel.
"""

from __future__ import annotations

import math
from typing import Callable, List, NamedTuple, Optional, Tuple

import numpy as np

from ..config import active_config
from ..interpreter import CUSTOM, OP, EmulatorError, check_result, kernel_failure
from ...ir.expr import Call, Constant
from ...ir.op import declare_facet, register_op_attr
from ...ir.types import TensorType
from ..reference.op_nn import _along
from ..registry import PlanTransform
from ._fusion import Fused, stage_inputs
from ._parallel import matvec, product_plan, product_tail_plan, run_blocks

PREPARE = declare_facet("emulator.prepare", "fast set: call-site specialized forms of a kernel and of its epilogue "
                        "(fast/_prepared.py)", "tidlx.emulator")


class Preparer(NamedTuple):
    """An op's prepared forms.

    ``kernel(node, constants) -> fn(args) -> ndarray | None``: the op's kernel for one call site;
    ``constants`` holds each argument's array when the argument is a Constant node, else None.
    ``stage(node, position, constants) -> fn(x, others) -> ndarray | None``: the op applied in place
    to ``x``, a fresh float array of the type of argument ``position`` that nobody else holds (a
    fused chain's value), ``others`` the op's other arguments in order.
    """

    kernel: Optional[Callable] = None
    stage: Optional[Callable] = None


def preparer(op_name: str, *, kernel: Optional[Callable] = None, stage: Optional[Callable] = None) -> Preparer:
    record = Preparer(kernel, stage)
    register_op_attr((op_name,), PREPARE, record)
    return record


def _preparer_of(op) -> Optional[Preparer]:
    found = op.get_attr(PREPARE)
    return found if isinstance(found, Preparer) else None


def _constants(node: Call) -> tuple:
    return tuple(a.data if isinstance(a, Constant) and type(a.data) is np.ndarray else None for a in node.args)


def _tensor(t) -> Optional[Tuple[tuple, np.dtype]]:
    """(shape, numpy dtype) of a tensor type of float32/float64, else None."""
    if isinstance(t, TensorType) and t.dtype in ("float32", "float64"):
        return tuple(t.shape), np.dtype(t.dtype)
    return None


# --- the transform ----------------------------------------------------------------------------

class PreparedChain(NamedTuple):
    """Payload of a prepared fused chain: the head's callable (with its argument count), then each
    stage's in-place callable with the number of fused-step inputs it takes."""

    fused: Fused                   # the chain it stands for (describe, errors, counts)
    head: Callable                 # fn(args) -> fresh array
    head_checked: bool             # the head is the generic kernel: its result is checked
    stages: Tuple[Tuple[Callable, int], ...]
    whole: Optional[Callable] = None  # fn(values) -> the chain's result, head and stages at once
    act: Optional[object] = None      # the activation step (_activations.Activation) ``whole`` also runs

    @property
    def head_node(self) -> Call:
        return self.fused.head_node

    def describe(self) -> str:
        return self.fused.describe()

    def run(self, plan, values: list, stats):
        fused = self.fused
        n = fused.n_head_args
        if self.whole is not None:
            try:
                res = self.whole(values)
            except Exception as exc:
                if isinstance(exc, EmulatorError):
                    raise
                raise kernel_failure(plan, fused.head_node, exc) from exc
            if stats is not None:
                from ._fusion import _count_fused

                _count_fused(stats, fused)
                if self.act is not None:  # as the activation's own step counts itself
                    for name in self.act.ops:
                        stats.kernel_calls[name] = stats.kernel_calls.get(name, 0) + 1
                    stats.steps += len(self.act.ops)
            return res
        try:
            res = self.head(values[:n])
        except Exception as exc:
            if isinstance(exc, EmulatorError):
                raise
            raise kernel_failure(plan, fused.head_node, exc) from exc
        if self.head_checked:
            res = check_result(plan, fused.head_node, res, fused.head[3])
            if not (res.flags.c_contiguous and res.flags.writeable):  # the stages write a contiguous value in place
                from ._fusion import _run_fused

                return _run_fused(plan, fused, values, stats)
        at = n
        for (fn, n_others), stage in zip(self.stages, fused.stages):
            try:
                res = fn(res, values[at:at + n_others])
            except Exception as exc:
                if isinstance(exc, EmulatorError):
                    raise
                raise kernel_failure(plan, stage.node, exc) from exc
            at += n_others
        if stats is not None:
            from ._fusion import _count_fused

            _count_fused(stats, fused)
        return res


#: Whether conv chains absorb the swish / hard-swish step reading them (off: for A/B measurements)
MERGE_ACTIVATIONS = True


def prepare_steps(raw_steps: List[tuple], result_slot: int) -> List[tuple]:
    """The schedule with each step a preparer recognises replaced by its prepared form. A conv chain
    whose one reader is a float32 swish or hard-swish step (_activations.py) runs that activation too,
    on each part of its output as the tail does (``_mergeable_activation``): the merged step takes the
    chain's place and the activation's result slot."""
    readers: dict = {}
    for i, step in enumerate(raw_steps):
        for s in step[2]:
            readers.setdefault(s, []).append(i)
    readers.setdefault(result_slot, []).append(-1)
    out, merged = [], set()
    for i, step in enumerate(raw_steps):
        if i in merged:
            continue
        kind, slot, ins, payload, node = step
        if kind == OP:
            fn = _prepared_kernel(node, payload)
            if fn is not None:
                step = (kind, slot, ins, (fn,) + tuple(payload[1:]), node)
        elif kind == CUSTOM and type(payload) is Fused:
            reader = _mergeable_activation(raw_steps, readers, slot) if MERGE_ACTIVATIONS else None
            if reader is not None:
                chain = _prepared_chain(payload, raw_steps[reader][3])
                if chain is not None and chain.whole is not None:
                    merged.add(reader)
                    _, act_slot, _, _, act_node = raw_steps[reader]
                    step = (kind, act_slot, ins, chain, act_node)
                    out.append(step)
                    continue
            chain = _prepared_chain(payload)
            if chain is not None:
                step = (kind, slot, ins, chain, node)
        out.append(step)
    return out


def _mergeable_activation(raw_steps, readers, slot) -> Optional[int]:
    """The index of the step reading ``slot`` when it is that slot's one reader and a float32 swish or
    hard-swish activation step of that one input; else None."""
    from ._activations import Activation

    found = readers.get(slot, [])
    if len(found) != 1 or found[0] < 0:
        return None
    kind, _, ins, payload, node = raw_steps[found[0]]
    value = _tensor(node.checked_type)
    if kind != CUSTOM or type(payload) is not Activation or payload.kind not in ("swish", "hardswish") \
            or tuple(ins) != (slot,) or value is None or value[1] != np.float32:
        return None
    return found[0]


def _prepared_kernel(node, payload) -> Optional[Callable]:
    """The step's prepared kernel, in the interpreter's kernel signature, or None."""
    if not isinstance(node, Call):
        return None
    found = _preparer_of(node.op)
    if found is None or found.kernel is None:
        return None
    fn = found.kernel(node, _constants(node))
    if fn is None:
        return None
    return lambda args, attrs, out_type: fn(args)


def _prepared_chain(fused: Fused, act=None) -> Optional[PreparedChain]:
    """The chain's prepared form; with ``act`` (an activation step reading the chain's result) only a
    ``whole`` form that also runs it, else None."""
    if not fused.fresh:
        return None
    head_node = fused.head_node
    head = None
    found = _preparer_of(head_node.op)
    if found is not None and found.kernel is not None:
        head = found.kernel(head_node, _constants(head_node))
    checked = head is None
    if head is None:
        kernel, attrs, out_type = fused.head[0], fused.head[1], fused.head[2]
        head = lambda args: kernel(args, attrs, out_type)  # noqa: E731
    else:
        whole = _pointwise_with_tail(fused, act)
        if whole is None:
            whole = _depthwise_with_tail(fused, head, act)
        if whole is None:
            whole = _direct_with_tail(fused, head, act)
        if whole is not None:
            return PreparedChain(fused, head, False, (), whole, act)
    if act is not None:
        return None
    stages = _prepared_tail(fused) if fused.tail else None
    if stages is None:
        stages = []
        for stage in fused.stages:
            found = _preparer_of(stage.node.op)
            fn = None
            if found is not None and found.stage is not None:
                fn = found.stage(stage.node, stage.position, _constants(stage.node))
            if fn is None:
                return None
            stages.append((fn, stage.n_others))
    return PreparedChain(fused, head, checked, tuple(stages))


# --- convolutions and dense products -------------------------------------------------------------

def _conv_site(node: Call, w) -> Optional[tuple]:
    """(input (shape, dtype), result (shape, dtype), op_conv.ConvGeometry) of an NCHW/OIHW float
    convolution whose constant 4-D weights ``w`` and input share the result's dtype; else None."""
    from . import op_conv

    if node.op.name != "nn.conv2d":  # a chain's head may be another prepared op (dense, multiply)
        return None
    attrs = node.attrs
    x_t, out_t = _tensor(node.args[0].checked_type), _tensor(node.checked_type)
    if x_t is None or out_t is None or w is None or x_t[1] != out_t[1] or w.dtype != out_t[1] or w.ndim != 4:
        return None
    if attrs.data_layout != "NCHW" or attrs.kernel_layout != "OIHW" or (attrs.out_layout or "NCHW") != "NCHW":
        return None
    return x_t, out_t, op_conv.ConvGeometry(np.empty(x_t[0], x_t[1]), w, attrs)


def _is_pointwise(x_t, w, geo) -> bool:
    """A 1x1 unpadded one-group convolution of one image (a single matrix product; with strides, of
    the strided input gathered first: _pointwise_input)."""
    return x_t[0][0] == 1 and geo.groups == 1 and w.shape[2:] == (1, 1) and not any(geo.pads)


def _pointwise_input(x_t, geo) -> Tuple[int, Callable]:
    """(columns, fn): fn(x) is a pointwise convolution's input as the (C, columns) matrix of its
    product: the image itself at stride 1, else x[0, :, ::sh, ::sw] cut to the output's size, gathered
    by _jit.gather_strided over the run's threads (numpy's strided copy: one thread, ~2x slower)."""
    from . import _jit

    (_, c, h, wd), dtype = x_t
    (oh, ow), (sh, sw) = geo.out_hw, geo.strides
    if (sh, sw) == (1, 1):
        return h * wd, lambda x: x.reshape(c, h * wd)
    min_block = max(1, (1 << 18) // (oh * ow))

    def gathered(x):
        x = np.ascontiguousarray(x)
        out = np.empty((c, oh * ow), dtype)
        run_blocks(c, _jit.gather_strided, _jit.gather_strided_blocks, x[0], out, sh, sw, oh, ow, min_block=min_block)
        return out
    return oh * ow, gathered


def _prepare_conv2d(node: Call, constants) -> Optional[Callable]:
    """1x1 unpadded one-group NCHW convolutions of one image: the product of the weight matrix
    (reshaped once) and the input as a (C, H*W) matrix (strided: gathered, _pointwise_input), as
    op_conv._conv_nchw computes it (its blocks planned once: _parallel.product_plan);
    depthwise ones: op_conv._conv_depthwise with the weights made contiguous once."""
    from . import op_conv

    w = constants[1]
    site = _conv_site(node, w)
    if site is None:
        return None
    x_t, out_t, geo = site
    (n, c, h, wd), dtype = x_t
    o, i_per_group = w.shape[:2]
    out_shape = out_t[0]
    if geo.groups > 1 and i_per_group == 1:
        weights = np.ascontiguousarray(w)
        strides, dilation, pads, out_hw = geo.strides, geo.dilation, geo.pads, geo.out_hw

        def depthwise(args):
            return op_conv._conv_depthwise(args[0], weights, strides, dilation, pads, out_hw, dtype)
        return depthwise
    if not _is_pointwise(x_t, w, geo):
        return _prepare_few_channels(node, x_t, w, geo) or _prepare_direct(node, x_t, w, geo)
    matrix = w.reshape(o, c)
    cols, columns = _pointwise_input(x_t, geo)
    product = product_plan(o, c, cols, dtype)
    lanes = op_conv.pointwise_conv(w) if op_conv.pointwise_usable(o, c, cols, dtype) else None

    def pointwise(args):
        if lanes is not None and op_conv.POINTWISE_LANES:  # the A/B switch, read at call time as the generic kernel reads it
            return lanes(columns(args[0])).reshape(out_shape)
        return product(matrix, columns(args[0])).reshape(out_shape)
    return pointwise


def _prepare_direct(node: Call, x_t, w, geo) -> Optional[Callable]:
    """A float32 convolution the generic kernel would run on the direct route (op_conv.DirectConv,
    planned here once); where the run's config sends it elsewhere (Winograd settings), the generic
    kernel. None for other convolutions."""
    from . import op_conv

    if not op_conv.direct_static(x_t[0], w, geo.groups, x_t[1]):
        return None
    conv = op_conv.DirectConv(x_t[0], w, geo.strides, geo.dilation, geo.pads, geo.out_hw)
    routes = {}  # (winograd, tile_blocks) of the run's config -> whether it takes the direct route
    attrs, out_type, x_shape = node.attrs, node.checked_type, x_t[0]
    strides, dilation, out_hw = geo.strides, geo.dilation, geo.out_hw

    def takes_direct() -> bool:
        if not op_conv.DIRECT:  # the A/B switch, read at call time as the generic kernel reads it
            return False
        config = active_config()
        key = (config.winograd, config.tile_blocks)
        chosen = routes.get(key)
        if chosen is None:
            chosen = routes[key] = not op_conv.winograd_preferred(x_shape, w.shape, strides, dilation, out_hw, config)
        return chosen

    return _routed_head(conv, takes_direct, attrs, out_type)


def _routed_head(conv: Callable, takes_direct: Callable, attrs, out_type) -> Callable:
    """The prepared kernel of a convolution with its own route: ``conv(x)`` while ``takes_direct()``
    says the run takes that route, else the generic kernel; ``.conv(x, tail)`` and ``.takes_direct``
    are what _direct_with_tail uses."""
    from . import op_conv

    def head(args):
        if takes_direct():
            return conv(args[0])
        return op_conv.conv2d(args, attrs, out_type)
    head.conv, head.takes_direct = conv, takes_direct
    return head


#: Whether the few-channel convolutions (stems) have a prepared form, and so a tail form (off: for A/B)
FEW_CHANNEL_FORM = True


def _prepare_few_channels(node: Call, x_t, w, geo) -> Optional[Callable]:
    """A float32 convolution of few input channels (the stems) the generic kernel would run on
    op_conv._conv_few_channels, with its weights packed here once; the head of a conv tail
    (_direct_with_tail) as the direct route's is. None for other convolutions."""
    from . import op_conv

    dtype = x_t[1]
    if not FEW_CHANNEL_FORM or dtype != np.float32 or not op_conv._few_channels_usable(None, w, geo.groups, dtype):
        return None
    packed = op_conv.tap_panels(w)
    attrs, out_type = node.attrs, node.checked_type
    strides, dilation, pads, out_hw = geo.strides, geo.dilation, geo.pads, geo.out_hw

    def conv(x, tail=None):
        return op_conv._conv_few_channels(x, w, strides, dilation, pads, out_hw, packed, tail)

    def takes_direct() -> bool:  # the A/B switch, read at call time as the generic kernel reads it
        return op_conv.DIRECT_FEW_CHANNELS

    return _routed_head(conv, takes_direct, attrs, out_type)


def _prepare_dense(node: Call, constants) -> Optional[Callable]:
    """A dense layer of one sample with constant weights: op_nn.dense's matrix-vector product."""
    from .op_nn import dense_as_matvec

    x_t, out_t, w = _tensor(node.args[0].checked_type), _tensor(node.checked_type), constants[1]
    if x_t is None or out_t is None or w is None or not dense_as_matvec(*x_t, w, out_t[1]):
        return None
    out_shape = out_t[0]
    return lambda args: matvec(w, args[0].reshape(-1)).reshape(out_shape)


def _prepare_split(node: Call, constants) -> Optional[Callable]:
    """A split of a statically shaped tensor: the reference kernel's views (x[..., a:b, ...] along the
    axis), their slices worked out here once (np.split's per-call work: ~10 us of a ShuffleNetV2 unit's
    split, 13 of them a run)."""
    from ...ir.ops.transform import split_sizes

    x_t = _tensor(node.args[0].checked_type)
    if x_t is None or not x_t[0] or not all(isinstance(d, int) for d in x_t[0]):
        return None
    shape = x_t[0]
    axis = int(node.attrs.axis) % len(shape)
    bounds = np.cumsum(split_sizes(shape[axis], node.attrs.indices_or_sections))
    slices = tuple((slice(None),) * axis + (slice(int(start), int(stop)),)
                   for start, stop in zip((0,) + tuple(bounds[:-1]), bounds))

    def split(args):
        x = args[0]
        return tuple(x[index] for index in slices)
    return split


# --- stages ---------------------------------------------------------------------------------------

#: Whether the squeeze-excite scale has a prepared form (off: the generic kernel; for A/B measurements)
PLANE_SCALE = True


def _prepare_multiply(node: Call, constants) -> Optional[Callable]:
    """A tensor times one factor per plane, both float arrays of one dtype (the squeeze-excite scale):
    op_elemwise.multiply's plane loop with the operands' roles and the planes decided here (its
    generic form spends ~9 us of a 20 us call on them); NaN factors take the generic kernel."""
    from . import op_elemwise
    from ._jit import any_nan

    if not PLANE_SCALE:
        return None
    types = [_tensor(a.checked_type) for a in node.args]
    out_t = _tensor(node.checked_type)
    if len(types) != 2 or None in types or out_t is None or types[0][1] != types[1][1] or out_t[1] != types[0][1]:
        return None
    for t, f in ((0, 1), (1, 0)):
        split = op_elemwise.plane_split(types[t][0], types[f][0])
        if split is not None and out_t[0] == types[t][0]:
            break
    else:
        return None
    planes, inner = split
    attrs, out_type = node.attrs, node.checked_type

    def scale(args):
        tensor, factors = args[t], args[f]
        if type(tensor) is not np.ndarray or type(factors) is not np.ndarray \
                or any_nan(np.ascontiguousarray(factors).reshape(-1)):
            return op_elemwise.multiply(args, attrs, out_type)
        return op_elemwise.scale_by_planes(tensor, factors, planes, inner)
    return scale


def _stage_value(node: Call, position: int):
    """(shape, dtype) of the chain value a stage receives, and of its result, when both are the
    same float tensor type (the stages below keep the value's type)."""
    x_t, out_t = _tensor(node.args[position].checked_type), _tensor(node.checked_type)
    return x_t if x_t is not None and x_t == out_t else None


def _stage_bias_add(node: Call, position: int, constants) -> Optional[Callable]:
    """x + bias along the axis in place (op_nn.bias_add_epilogue)."""
    x_t = _stage_value(node, position)
    bias = constants[1]
    if position != 0 or x_t is None or bias is None or bias.dtype != x_t[1] or bias.ndim != 1:
        return None
    shape, _ = x_t
    axis = node.attrs.axis % len(shape)
    if bias.shape[0] != shape[axis]:
        return None
    shaped = _along(bias, axis, len(shape))

    def bias_add(x, others):
        return np.add(x, shaped, out=x)
    return bias_add


def _item0_value(node: Call):
    """(shape, dtype) of batch_norm's input when item 0 of its result has the same float type."""
    x_t = _tensor(node.args[0].checked_type)
    fields = getattr(node.checked_type, "fields", None)
    return x_t if x_t is not None and fields and _tensor(fields[0]) == x_t else None


def _stage_batch_norm(node: Call, position: int, constants) -> Optional[Callable]:
    """Item 0 of batch_norm in place with constant parameters (op_nn._batch_norm_into, out=x)."""
    from ._jit import channel_affine_inplace, channel_affine_inplace_blocks
    from .op_nn import affine_rows, cached_scale_shift

    x_t = _item0_value(node)
    params = constants[1:]
    if position != 0 or x_t is None or any(p is None or p.flags.writeable for p in params):
        return None
    shape, dtype = x_t
    axis = node.attrs.axis % len(shape)
    scale, shift = cached_scale_shift(dtype, list(params), node.attrs)
    plan = affine_rows(shape, axis, dtype)
    if plan is not None:
        rows_shape, count, min_block = plan

        def batch_norm_rows(x, others):
            run_blocks(count, channel_affine_inplace, channel_affine_inplace_blocks, x.reshape(rows_shape), scale,
                       shift, min_block=min_block)
            return x
        return batch_norm_rows
    scale_b, shift_b = _along(scale, axis, len(shape)), _along(shift, axis, len(shape))

    def batch_norm_small(x, others):
        np.multiply(x, scale_b, out=x)
        x += shift_b
        return x
    return batch_norm_small


def _stage_relu(node: Call, position: int, constants) -> Optional[Callable]:
    """relu in place (op_elemwise.relu_epilogue)."""
    from .op_elemwise import _SMALL, _relu_into

    x_t = _stage_value(node, position)
    if x_t is None:
        return None
    shape, dtype = x_t
    zero = dtype.type(0)
    if math.prod(shape) < _SMALL:
        return lambda x, others: np.maximum(x, zero, out=x)
    return lambda x, others: _relu_into(x, x)


def _stage_clip(node: Call, position: int, constants) -> Optional[Callable]:
    """np.clip in place (op_elemwise.clip_epilogue)."""
    x_t = _stage_value(node, position)
    if x_t is None:
        return None
    lo, hi = x_t[1].type(node.attrs.a_min), x_t[1].type(node.attrs.a_max)
    return lambda x, others: np.clip(x, lo, hi, out=x)


def _stage_add(node: Call, position: int, constants) -> Optional[Callable]:
    """A residual add of a value of the same type, in place (op_elemwise.add_epilogue)."""
    x_t = _stage_value(node, position)
    if x_t is None or _tensor(node.args[1 - position].checked_type) != x_t:
        return None
    return lambda x, others: np.add(x, others[0], out=x)


def _prepared_tail(fused: Fused) -> Optional[list]:
    """A one-pass tail (_tail.py) planned here from the stages' constants (_tail.tail_pass): one
    stage callable running the whole pass (taking every stage's inputs), or None where the pass
    would not run (then the stages are prepared one by one: the same bits, as the pass and the
    epilogues are)."""
    from ._tail import run_pass, tail_pass

    head = _tensor(fused.head_node.checked_type)
    if head is None:
        return None
    shape, dtype = head
    others = []  # per stage: its other arguments' constants (None: known only when the step runs)
    for stage in fused.stages:
        node = stage.node
        args = list(stage_inputs(_constants(node), stage.position))
        if stage.item0:  # batch norm: its scale and shift are computed here, so from read-only constants only
            if _item0_value(node) != head:
                return None
            args = [a if a is not None and not a.flags.writeable else None for a in args]
        if stage.tail == "add" and _tensor(node.args[1 - stage.position].checked_type) != head:
            return None
        others.append(args)
    plan = tail_pass(fused.stages, others, dtype, shape)
    if plan is None:
        return None
    add_at = None if plan.add_stage is None else sum(s.n_others for s in fused.stages[:plan.add_stage])

    def tail(x, values):
        return run_pass(x, plan, None if add_at is None else values[add_at])
    return [(tail, sum(s.n_others for s in fused.stages))]


def _chain_tail(fused: Fused):
    """(the one-pass tail plan, the residual's index among the fused step's values or None) of a chain
    whose stages are _tail.py's roles in order, one or more (bias or batch norm, residual add, relu
    or clip), as _prepared_tail plans it; None when the stages are no such tail."""
    from ._tail import ROLES, tail_pass

    positions = [ROLES.index(s.tail) if s.tail in ROLES else -1 for s in fused.stages]
    if not positions or min(positions) < 0 or any(a >= b for a, b in zip(positions, positions[1:])):
        return None
    out_t = _tensor(fused.head_node.checked_type)
    if out_t is None:
        return None
    others = []  # as _prepared_tail: each stage's constant arguments (None: known when the step runs)
    for stage in fused.stages:
        args = list(stage_inputs(_constants(stage.node), stage.position))
        if stage.item0:
            if _item0_value(stage.node) != out_t:
                return None
            args = [a if a is not None and not a.flags.writeable else None for a in args]
        if stage.tail == "add" and _tensor(stage.node.args[1 - stage.position].checked_type) != out_t:
            return None
        others.append(args)
    tail = tail_pass(fused.stages, others, out_t[1], out_t[0])
    if tail is None:
        return None
    add_at = None if tail.add_stage is None else (
        fused.n_head_args + sum(s.n_others for s in fused.stages[:tail.add_stage]))
    return tail, add_at


def _tail_operands(tail, channels: int, dtype, act=None) -> tuple:
    """(scale, shift) with one entry per channel (zeros where the tail has no affine step), then the
    tail's flags and its activation (``act``: a swish or hard-swish step it absorbs; code and float32
    constants), as _jit.tail_row's callers take them."""
    from ._jit import ACT_HARD_SWISH, ACT_NONE, ACT_SWISH

    scale = tail.scale if tail.scale is not None else np.zeros(channels, dtype)
    shift = tail.shift if tail.shift is not None else np.zeros(channels, dtype)
    code = ACT_NONE if act is None else ACT_SWISH if act.kind == "swish" else ACT_HARD_SWISH
    consts = np.asarray(act.constants if code == ACT_HARD_SWISH else (0, 0, 0, 0), np.float32)
    return scale, shift, (tail.scale is not None, tail.add_stage is not None, tail.relu, tail.clamp, tail.lo, tail.hi,
                          code, consts)


def _then(act, res: np.ndarray) -> np.ndarray:
    """``res``, then the absorbed activation step's own computation on it (the unmerged bits)."""
    if act is None:
        return res
    from ._activations import _apply

    return _apply(act, res)


def _contiguous_residual(values, add_at):
    """The chain's residual when it has one (None otherwise), and whether the fused loops can read it
    in place (a C-contiguous array: a view goes through the one-pass tail, which copies it)."""
    other = None if add_at is None else values[add_at]
    return other, other is None or (type(other) is np.ndarray and other.flags.c_contiguous)


def _pointwise_with_tail(fused: Fused, act=None) -> Optional[Callable]:
    """A 1x1 convolution (as _prepare_conv2d's pointwise product) whose chain is a conv tail
    (_chain_tail): one callable that runs the product's blocks each followed by its part of the
    tail (_parallel.product_tail_plan), or None. Where the run has no numba threads to split over,
    or the residual is not contiguous, it runs the product, then the tail's pass: the same bits
    either way, and those of the chain's stages one by one. A convolution PointwiseConv takes
    (op_conv.pointwise_usable) stores its rows with the tail at any thread count (the same bits)."""
    from . import op_conv
    from ._tail import run_pass

    w = _constants(fused.head_node)[1]
    planned, site = _chain_tail(fused), _conv_site(fused.head_node, w)
    if planned is None or site is None or not _is_pointwise(site[0], w, site[2]):
        return None
    x_t, out_t, geo = site
    (n, c, h, wd), dtype = x_t
    o = w.shape[0]
    shape = out_t[0]
    cols, columns = _pointwise_input(x_t, geo)
    blocked = product_tail_plan(o, c, cols, dtype)
    lanes = op_conv.pointwise_conv(w) if op_conv.pointwise_usable(o, c, cols, dtype) else None
    if blocked is None and lanes is None:
        return None
    tail, add_at = planned
    product = product_plan(o, c, cols, dtype)
    matrix = w.reshape(o, c)
    scale, shift, flags = _tail_operands(tail, o, dtype, act)

    def pointwise_tail(values):
        other, in_place = _contiguous_residual(values, add_at)
        b = columns(values[0])
        operands = (scale, shift, None if other is None else other.reshape(o, cols)) + flags
        if lanes is not None and op_conv.POINTWISE_LANES:  # the tail stored with the rows, at any thread count
            return lanes(b, operands).reshape(shape)
        if in_place and blocked is not None:
            res = blocked(matrix, b, operands)
            if res is not None:
                return res.reshape(shape)
        return _then(act, run_pass(product(matrix, b).reshape(shape), tail, other))
    return pointwise_tail


def _depthwise_with_tail(fused: Fused, head: Callable, act=None) -> Optional[Callable]:
    """A float32 depthwise convolution on the vector kernel (op_conv._conv_depthwise's route) whose
    chain is a conv tail (_chain_tail): one callable that, in a run with numba threads, applies the
    tail to each output plane right after the plane is computed (_jit.depthwise_conv_planes_tail),
    in the convolution's parallel region (at one thread in turn); or None. With a residual that is not
    contiguous it runs the convolution (``head``), then the tail's pass: the same bits. At one thread
    the planes' tails measured 1.02-1.04x slower than the pass on a 2-vCPU AMD EPYC Zen 5 VM; on a
    2-vCPU Intel Xeon VM (AVX-512) 1.1-2.1x faster than a pass without the store kernel (bias + clip,
    960 planes of 7x7 158 -> 75 us, 576 of 14x14 135 -> 95, 32 of 112x112 307 -> 257), and about as
    fast as the pass through the store kernel (_jit.conv_tail_stored: 84, 99, 284 us)."""
    from . import _jit, _microkernel, op_conv
    from ._tail import run_pass

    w = _constants(fused.head_node)[1]
    planned, site = _chain_tail(fused), _conv_site(fused.head_node, w)
    if planned is None or site is None or site[1][1] != np.float32 or not op_conv.DEPTHWISE_VECTOR_KERNEL \
            or not _microkernel.AVAILABLE:
        return None
    x_t, out_t, geo = site
    (n, c, h, wd), dtype = x_t
    o = w.shape[0]
    if geo.groups <= 1 or w.shape[1] != 1:
        return None
    tail, add_at = planned
    weights = np.ascontiguousarray(w, dtype)
    shape = out_t[0]
    (sh, sw), (dh, dw), (pt, pl) = geo.strides, geo.dilation, geo.pads[:2]
    scale, shift, flags = _tail_operands(tail, o, dtype, act)
    per_plane = shape[2] * shape[3] * w.shape[2] * w.shape[3]
    min_block = max(1, op_conv.DEPTHWISE_VECTOR_BLOCK_MACS // max(per_plane, 1))  # as op_conv._conv_depthwise

    def depthwise_tail(values):
        other, in_place = _contiguous_residual(values, add_at)
        if not in_place:
            return _then(act, run_pass(head(values), tail, other))
        x = np.ascontiguousarray(values[0], dtype)
        out = np.empty(shape, dtype)
        run_blocks(n * o, _jit.depthwise_conv_planes_tail, _jit.depthwise_conv_planes_tail_blocks, x, weights, out,
                   sh, sw, dh, dw, pt, pl, o // c, scale, shift, out if other is None else other, True, *flags,
                   op_conv.DEPTHWISE_FLAT_POSITIONS, _microkernel.LANES, min_block=min_block)
        return out
    return depthwise_tail


def _direct_with_tail(fused: Fused, head: Callable, act=None) -> Optional[Callable]:
    """A convolution on the direct route or the few-channel route (``head`` from _prepare_direct or
    _prepare_few_channels) whose chain is a conv tail (_chain_tail): one callable that applies the
    tail to each output row as the convolution stores it (op_conv.DirectConv, _conv_few_channels
    with a tail), at any thread count; or None. Where the run's config sends the convolution
    elsewhere, or the residual is not contiguous, it runs ``head``, then the tail's pass: the same bits."""
    from ._tail import run_pass

    conv = getattr(head, "conv", None)
    planned = _chain_tail(fused) if conv is not None else None
    if planned is None:
        return None
    tail, add_at = planned
    scale, shift, flags = _tail_operands(tail, int(fused.head_node.checked_type.shape[1]), np.float32, act)
    takes_direct, n_head = head.takes_direct, fused.n_head_args

    def direct_tail(values):
        other, in_place = _contiguous_residual(values, add_at)
        if in_place and takes_direct():
            return conv(values[0], (scale, shift, other) + flags)
        return _then(act, run_pass(head(values[:n_head]), tail, other))
    return direct_tail


preparer("nn.conv2d", kernel=_prepare_conv2d)
preparer("nn.dense", kernel=_prepare_dense)
preparer("split", kernel=_prepare_split)
preparer("multiply", kernel=_prepare_multiply)
preparer("nn.bias_add", stage=_stage_bias_add)
preparer("nn.batch_norm", stage=_stage_batch_norm)
preparer("nn.relu", stage=_stage_relu)
preparer("clip", stage=_stage_clip)
preparer("add", stage=_stage_add)

PREPARED = PlanTransform("prepared", prepare_steps, enabled=lambda config: config.prepare)

