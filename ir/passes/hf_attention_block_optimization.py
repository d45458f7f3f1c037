"""HfAttentionBlockOptimization: in a Hugging Face attention block, the Add -> Reshape -> Add ->
Reshape chain between the scores' MatMul and the Softmax (Swin's relative-position bias, then the
shifted-window mask added per window) becomes one Add of the two constants summed, and a scalar
Mul or Div right after the scores' MatMul moves onto Q (TI's model optimizer rule
``hf_attention_block_optimization``, on by default in TI's runner; the last rule of TI's default
order).

    %0 = add(scores, bias);                       # scores: (nW, heads, N, N), bias: (1, heads, N, N)
    %1 = reshape(%0, newshape=[1, nW, heads, N, N]);
    %2 = add(%1, mask);                           # mask: (1, nW, 1, N, N)
    %3 = reshape(%2, newshape=[nW, heads, N, N]);
    nn.softmax(%3)
    ->
    %0 = add(scores, bias + mask);                # the sum: (nW, heads, N, N)
    nn.softmax(%0)

TI's conditions: walking back from a Softmax along each node's first input (every node on the way
taking one non-constant input, that one first) reaches a MatMul of two non-constant inputs, and
the Softmax's only user is a MatMul. The first Add -> Reshape -> Add -> Reshape on that walk is
merged: the lower-rank constant gets leading ones, along each leading axis (all but the last two,
which must agree) an extent of 1 is repeated to the other's, the two are added and the sum takes
the first constant's rank. tidlx rewrites only where that is the same function: the first Add's
output has the last Reshape's shape, its input broadcast against the sum has it too, and the sum
broadcast to it equals, element for element, the first constant carried through the first Reshape
plus the second constant (which holds for Swin's windows with a batch of one; with a larger batch
TI's sum would not broadcast). Each of the four nodes must have one user (TI rewires only the
Softmax's side). All calls keep the first Add's layer name.

The scale:

    %0 = nn.batch_matmul(q, k);  multiply(%0, 0.125f)    ->    nn.batch_matmul(multiply(q, 0.125f), k)

TI moves the node after the scores' MatMul whatever its op when the MatMul has one user, taking its
first constant input as the scale and skipping it unless that constant is a scalar (rank 0): a
scalar Add would be moved too (another function) and a node without a constant input stops TI's
optimizer with an error. tidlx moves only a Mul by a rank-0 constant (either side) or a Div by one
(``x / c``; TI would write ``c / q`` for ``c / x``), when the MatMul's only user is that node. The
multiply keeps its layer name; the MatMul's reshapes keep theirs.

All three rewrites need TI's block: Q and K (the scores MatMul's operands) and V (the output MatMul's
second operand) traced back, node by node while each node has one non-constant input, to a common
node; TI walks the three branches one node each in turn, and skips a block whose three branches
all start with a Squeeze after that node (a block it has already rewritten). tidlx takes the
blocks whose branches reach the common node in the same number of ONNX nodes, where TI's walk is
sure to meet there (TI's walk also meets in some blocks of unequal branches; those are left).

The fused Q/K/V projection (TI's second step, between the two above): where the three branches
start at one Split of three outputs, TI lifts what they share before the Split, stage by stage,
each stage only when all three branches' next node has that op (the branches counted from the
Split up to their first Transpose, which must be of one length):

    %s = split(x, 3, axis=-1);                      # x: (B, N, 3C)
    q = transpose(reshape(add(bq, %s.0), [B, N, h, d]), [0, 2, 1, 3])
    k = transpose(reshape(add(bk, %s.1), [B, N, h, d]), [0, 2, 3, 1])
    v = transpose(reshape(add(bv, %s.2), [B, N, h, d]), [0, 2, 1, 3])
    ->
    %t = transpose(reshape(add(concat(bq, bk, bv), x), [B, N, 3, h, d]), [2, 0, 3, 1, 4]);
    %s = split(%t, 3, axis=0);
    q = squeeze(%s.0, axis=[0]);  k = transpose(squeeze(%s.1, axis=[0]), [0, 1, 3, 2]);
    v = squeeze(%s.2, axis=[0])

The Adds become one Add of the three constants concatenated along their first axis; the Reshapes
one Reshape to Q's shape, with an axis of 3 inserted after its second when the three parts are of
one size (the Split then takes that axis, -3, in parts of 1; else the Split's own axis gets the
parts' sum); the Transposes Q's, with the permutation ``[2, 0, 3, 1, 4]`` when the axis of 3 was
inserted (the Split then along axis 0), else Q's own (a Split along axis -2 then goes to -3, one
along -3 to -2), and K's Transpose stays after the Split, swapping its last two axes; with the
axis of 3, each output of the Split gets a Squeeze of axis 0 (TI's mark of a rewritten block). The
Split's outputs are taken in the order Q, K, V. TI reads the constants as the Adds' first inputs
and the part sizes from the Split's second input (ONNX opset 13 and later); with a constant second,
a branch holding no Transpose or branches of different lengths, TI's optimizer fails or writes a
broken model (it empties the Split's outputs first), and tidlx leaves the block. tidlx rewrites
only where TI's graph computes the same three tensors: it runs the old and the new chains on a
tensor of distinct values (where each element goes) and on zeros (which constant it gets), and
rewrites when both agree exactly; each lifted node must have one user. The merged Add, Reshape and
Transpose keep Q's layer names, the Squeezes take the Split's, K's Transpose keeps its own; K's and
V's Adds, Reshapes and V's Transpose are removed. The scale is then moved onto Q in these blocks too
(TI moves it in the blocks it found before this step).

Exactness: ``(x + c1) + c2`` becomes ``x + (c1 + c2)``, ``(q k) s`` becomes ``(q s) k``; the
results agree to rounding. The Split step moves data and adds the same constants: the same bits.
"""

from __future__ import annotations

import contextvars
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..expr import Call, Constant, Expr, TupleGetItem
from ..op import call
from ..ops.transform import split_sizes
from ..pattern import is_constant, is_op, wildcard
from ..rewrite import RewriteTable
from ..transform import module_pass
from ..traversal import post_order, rebuild
from ..types import TensorType

#: TI's name of the rule.
TI_RULE = "hf_attention_block_optimization"

_MATMULS = ("nn.batch_matmul", "nn.matmul")


def _shape(expr) -> Optional[Tuple[int, ...]]:
    t = expr.checked_type
    if not isinstance(t, TensorType):
        return None
    try:
        return tuple(int(d) for d in t.shape)
    except (TypeError, ValueError):
        return None


def _variable_args(node: Call) -> List:
    return [a for a in node.args if not isinstance(a, Constant)]


def _scores_matmul(node) -> Optional[Call]:
    """Walking back along first inputs from ``node`` (each a call of one non-constant input, that
    one first): the MatMul of two non-constant inputs it reaches, else None."""
    seen = 0
    while isinstance(node, Call) and seen < 256:
        if node.op_name in _MATMULS:
            return node if len(_variable_args(node)) == 2 else None
        args = _variable_args(node)
        if len(args) != 1 or args[0] is not node.args[0]:
            return None
        node = node.args[0]
        seen += 1
    return None


def _operand(matmul: Call, index: int):
    """The MatMul's operand as the ONNX graph has it (past the reshape tidlx's import adds)."""
    arg = matmul.args[index]
    if isinstance(arg, Call) and arg.op_name == "reshape" and arg.layer == matmul.layer:
        return arg.args[0]
    return arg


def _branch(node) -> List:
    """The nodes met walking back from ``node`` while each has one non-constant input (a split's
    output counted as the split), as TI's trace of Q, K or V."""
    out = []
    while len(out) < 4096:
        if isinstance(node, TupleGetItem):
            node = node.tuple_value
        if not isinstance(node, Call):
            break
        out.append(node)
        args = _variable_args(node)
        if len(args) != 1:
            break
        node = args[0]
    return out


def _layer_count(nodes) -> int:
    runs = 0
    for i, node in enumerate(nodes):
        if i == 0 or node.layer is None or node.layer != nodes[i - 1].layer:
            runs += 1
    return runs


def _qkv_block(scores: Call, output: Call):
    """TI's trace of Q, K (the scores MatMul's operands) and V (the output MatMul's second
    operand): the nodes of each branch before their common node, and that node; None unless the
    three reach one common node in the same number of ONNX nodes (TI's walk, one node per branch in
    turn, is sure to meet there) through nodes of their own, not all through a Squeeze just after
    it (TI's mark of a block it has already rewritten)."""
    branches = [_branch(_operand(scores, 0)), _branch(_operand(scores, 1)), _branch(_operand(output, 1))]
    if not all(branches):
        return None
    ids = [[id(n) for n in b] for b in branches]
    common = next((i for i in ids[0] if i in ids[1] and i in ids[2]), None)
    if common is None:
        return None
    prefixes = [b[:i.index(common)] for b, i in zip(branches, ids)]
    if len({_layer_count(p) for p in prefixes}) != 1 or not all(prefixes):
        return None
    seen = [set(id(n) for n in p) for p in prefixes]
    if seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2]:
        return None
    if all(p[-1].op_name == "squeeze" for p in prefixes):
        return None
    return prefixes, branches[0][ids[0].index(common)]


def qkv_traced(scores: Call, output: Call) -> bool:
    """Whether ``_qkv_block`` finds TI's block."""
    return _qkv_block(scores, output) is not None


def _output_matmul(m, node) -> Optional[Call]:
    """Walking forward from ``node`` through single users: the MatMul the Softmax reached feeds
    (through the reshapes tidlx's MatMul import adds), else None."""
    seen = 0
    while seen < 256:
        users = m.users(node) or ()
        if len(users) != 1 or not isinstance(users[0], Call) or users[0].args[0] is not node:
            return None
        node = users[0]
        if node.op_name == "nn.softmax":
            break
        if len(_variable_args(node)) != 1:
            return None
        seen += 1
    else:
        return None
    return _matmul_after_softmax(m, node)


def _matmul_after_softmax(m, softmax) -> Optional[Call]:
    """The Softmax's only user, a MatMul (past the reshapes tidlx's MatMul import adds), else None."""
    node = softmax
    while True:
        users = m.users(node) or ()
        if len(users) != 1 or not isinstance(users[0], Call):
            return None
        node = users[0]
        if node.op_name in _MATMULS:
            return node
        if node.op_name != "reshape":
            return None


def ti_merged_constant(c1: np.ndarray, c2: np.ndarray) -> Optional[np.ndarray]:
    """TI's sum of the two Adds' constants (``c1`` the first's), or None where TI's arithmetic does
    not apply (last two axes differ, leading extents neither equal nor one, a sum that does not
    fit the first constant's rank)."""
    if c1.shape[-2:] != c2.shape[-2:] or c1.ndim < 2 or c2.ndim < 2:
        return None
    rank1 = c1.ndim
    low, high = (c2, c1) if c1.ndim > c2.ndim else (c1, c2)
    low = low.reshape((1,) * (high.ndim - low.ndim) + low.shape)
    for axis in range(high.ndim - 2):
        a, b = low.shape[axis], high.shape[axis]
        if a == b:
            continue
        if a == 1:
            low = np.repeat(low, b, axis=axis)
        elif b == 1:
            high = np.repeat(high, a, axis=axis)
        else:
            return None
    total = low + high
    lead = total.shape[:total.ndim - rank1]
    if int(np.prod(lead, dtype=np.int64)) != 1:
        return None
    return total.reshape(total.shape[total.ndim - rank1:])


def _merge(m):
    reshape_b = m.expr
    add2 = reshape_b.args[0]
    reshape_a = add2.args[0]
    add1 = reshape_a.args[0]
    x = add1.args[0]
    c1, c2 = add1.args[1], add2.args[1]
    if not all(m.has_single_user(n) for n in (add1, reshape_a, add2)):
        return None
    scores, output = _scores_matmul(x), _output_matmul(m, reshape_b)
    if scores is None or output is None or not qkv_traced(scores, output):
        return None
    shapes = [_shape(e) for e in (x, add1, reshape_a, add2, reshape_b)]
    if any(s is None for s in shapes):
        return None
    x_shape, s1, a_shape, a2_shape, t_shape = shapes
    if s1 != t_shape or a2_shape != a_shape:
        return None
    first, second = c1.data, c2.data
    if first.dtype != second.dtype:
        return None
    total = ti_merged_constant(first, second)
    if total is None:
        return None
    try:
        if np.broadcast_shapes(x_shape, total.shape) != t_shape:
            return None
        want = np.broadcast_to(first, s1).reshape(a_shape) + second
    except ValueError:
        return None
    if want.shape != a_shape or not np.array_equal(np.broadcast_to(total, t_shape).reshape(-1), want.reshape(-1)):
        return None
    return call("add", x, Constant(np.ascontiguousarray(total)), layer=add1.layer)


def _scalar(expr) -> bool:
    return isinstance(expr, Constant) and expr.data.ndim == 0 and expr.data.dtype.kind == "f"


def _move_scale(m):
    scale = m.expr
    a, b = scale.args
    if scale.op_name == "divide":
        if not _scalar(b) or isinstance(a, Constant):
            return None
        scores, c = a, b
    elif _scalar(b) and not isinstance(a, Constant):
        scores, c = a, b
    elif _scalar(a) and not isinstance(b, Constant):
        scores, c = b, a
    else:
        return None
    # tidlx imports a MatMul of rank 4 as reshape -> batch_matmul -> reshape, all of the MatMul's layer
    back = scores if isinstance(scores, Call) and scores.op_name == "reshape" else None
    matmul = back.args[0] if back is not None else scores
    if not (isinstance(matmul, Call) and matmul.op_name in _MATMULS and len(_variable_args(matmul)) == 2):
        return None
    if back is not None and (not m.has_single_user(matmul) or back.layer != matmul.layer):
        return None
    output = _output_matmul(m, scale)
    if not m.has_single_user(scores) or output is None:
        return None
    if not (matmul.layer in (_SPLIT_BLOCKS.get() or ()) or qkv_traced(matmul, output)):
        return None
    q = matmul.args[0]
    front = q if isinstance(q, Call) and q.op_name == "reshape" and q.layer == matmul.layer else None
    if front is not None and not m.has_single_user(front):
        return None
    inner = front.args[0] if front is not None else q
    scaled = call(scale.op_name, inner, c, layer=scale.layer) if scale.op_name == "divide" or c is b else \
        call("multiply", c, inner, layer=scale.layer)
    if front is not None:
        scaled = call("reshape", scaled, newshape=front.attrs.newshape, layer=front.layer)
    out = Call(matmul.op, (scaled, matmul.args[1]), matmul.attrs, layer=matmul.layer)
    if back is not None:
        out = call("reshape", out, newshape=back.attrs.newshape, layer=back.layer)
    return out



# -- the fused Q/K/V Split -----------------------------------------------------------------------

#: The scores MatMuls' layers of the blocks whose Split the current run rewrote (TI moves their
#: scale too: it found the blocks before rewriting them).
_SPLIT_BLOCKS: contextvars.ContextVar = contextvars.ContextVar("hf_attention_split_blocks", default=None)

#: Probes larger than this many elements are not run (the block is left).
_MAX_PROBE = 1 << 26


class _NotPlain(Exception):
    """A node the Split check does not evaluate."""


def _plain_value(expr, source, value, cache: Dict[int, np.ndarray]):
    """``expr`` evaluated in float64 with ``source`` bound to ``value``: the adds, reshapes,
    transposes, splits and squeezes of a Q/K/V branch (numpy's semantics are these ops')."""
    key = id(expr)
    if key in cache:
        return cache[key]
    if expr is source:
        out = value
    elif isinstance(expr, Constant):
        out = expr.data.astype(np.float64)
    elif isinstance(expr, TupleGetItem):
        out = _plain_value(expr.tuple_value, source, value, cache)[expr.index]
    elif isinstance(expr, Call):
        args = [_plain_value(a, source, value, cache) for a in expr.args]
        name, attrs = expr.op_name, expr.attrs
        if name == "add":
            out = args[0] + args[1]
        elif name == "reshape":
            shape = [int(d) for d in attrs.newshape]
            if any(d <= 0 for d in shape):
                shape = _shape(expr)
                if shape is None:
                    raise _NotPlain(name)
            out = args[0].reshape(shape)
        elif name == "transpose":
            out = args[0].transpose(None if attrs.axes is None else [int(a) for a in attrs.axes])
        elif name == "squeeze":
            out = np.squeeze(args[0], axis=tuple(int(a) for a in attrs.axis))
        elif name == "split":
            axis = int(attrs.axis) % args[0].ndim
            sizes = split_sizes(args[0].shape[axis], attrs.indices_or_sections)
            out = tuple(np.split(args[0], np.cumsum(sizes)[:-1], axis=axis))
        else:
            raise _NotPlain(name)
    else:
        raise _NotPlain(type(expr).__name__)
    cache[key] = out
    return out


def _same_tensors(old: List[Expr], new: List[Expr], source: Expr, shape) -> bool:
    """Whether ``old`` and ``new`` compute the same tensors from ``source``: each element taken
    from the same place (a probe of distinct values) and given the same constant (a probe of
    zeros)."""
    size = int(np.prod(shape, dtype=np.int64))
    if size > _MAX_PROBE:
        return False
    for probe in (np.arange(size, dtype=np.float64).reshape(shape), np.zeros(shape)):
        old_cache: Dict[int, np.ndarray] = {}
        new_cache: Dict[int, np.ndarray] = {}
        try:
            for a, b in zip(old, new):
                x = _plain_value(a, source, probe, old_cache)
                y = _plain_value(b, source, probe, new_cache)
                if x.shape != y.shape or not np.array_equal(x, y):
                    return False
        except (_NotPlain, ValueError, IndexError, TypeError):
            return False
    return True


def _split_outputs(m, split: Call, prefixes) -> bool:
    """The Split has three outputs, each used once, by the Q, K and V branch in turn."""
    users = m.users(split) or ()
    if len(users) != 3 or not all(isinstance(u, TupleGetItem) for u in users):
        return False
    if sorted(u.index for u in users) != [0, 1, 2]:
        return False
    if not all(m.has_single_user(u) for u in users):
        return False
    firsts = [p[-1] for p in prefixes]
    heads = [_variable_args(f) for f in firsts]
    return all(len(h) == 1 and isinstance(h[0], TupleGetItem) and h[0].tuple_value is split for h in heads)


def _softmax_before(output: Call) -> Optional[Call]:
    """The Softmax feeding the output MatMul (past the reshapes tidlx's MatMul import adds)."""
    node = output.args[0]
    while isinstance(node, Call) and node.op_name == "reshape" and node.layer == output.layer:
        node = node.args[0]
    return node if isinstance(node, Call) and node.op_name == "nn.softmax" else None


def _swap_last_two(rank: int) -> List[int]:
    perm = list(range(rank))
    perm[-2:] = perm[-2:][::-1]
    return perm


def _lift_before_split(m):
    """TI's rewrite of a block whose Q, K and V come from one Split (module docstring)."""
    output = m.expr
    softmax = _softmax_before(output)
    if softmax is None or _matmul_after_softmax(m, softmax) is not output:
        return None
    scores = _scores_matmul(softmax)
    if scores is None:
        return None
    block = _qkv_block(scores, output)
    if block is None:
        return None
    prefixes, split = block
    if split.op_name != "split" or not _split_outputs(m, split, prefixes):
        return None
    x = split.args[0]
    x_shape = _shape(x)
    if x_shape is None:
        return None
    axis = int(split.attrs.axis) % len(x_shape)
    sizes = split_sizes(x_shape[axis], split.attrs.indices_or_sections)
    # each branch from the Split up to its first Transpose, as TI lists them
    chains = []
    for prefix in prefixes:
        forward = list(reversed(prefix))
        cut = next((i for i, n in enumerate(forward) if n.op_name == "transpose"), len(forward) - 1)
        chains.append(forward[:cut + 1])
    if len({_layer_count(c) for c in chains}) != 1:
        return None
    q, k, v = chains
    lifted = 0
    inserted_axis = False
    cur = x

    def heads_are(op_name: str) -> bool:
        return all(len(c) > lifted and c[lifted].op_name == op_name for c in chains)

    if heads_are("add"):
        adds = [c[lifted] for c in chains]
        if not all(isinstance(a.args[0], Constant) and not isinstance(a.args[1], Constant) for a in adds):
            return None  # TI reads the constant as the first input
        consts = [a.args[0].data for a in adds]
        if len({c.dtype for c in consts}) != 1 or any(c.ndim == 0 for c in consts):
            return None
        try:
            joined = np.concatenate(consts)
        except ValueError:
            return None
        cur = call("add", Constant(np.ascontiguousarray(joined)), cur, layer=adds[0].layer)
        lifted += 1
    if heads_are("reshape"):
        if len(set(sizes)) != 1:
            return None  # TI's Reshape of parts of different sizes is right for one head only
        q_shape = _shape(q[lifted])
        if q_shape is None or len(q_shape) < 2:
            return None
        shape = list(q_shape[:2]) + [3] + list(q_shape[2:])
        if int(np.prod(shape, dtype=np.int64)) != int(np.prod(x_shape, dtype=np.int64)):
            return None
        cur = call("reshape", cur, newshape=shape, layer=q[lifted].layer)
        inserted_axis = True
        axis = len(shape) - 3
        lifted += 1
    rank = len(shape) if inserted_axis else len(x_shape)
    k_transpose = None
    if heads_are("transpose"):
        q_tr, k_tr = q[lifted], k[lifted]
        perm = [2, 0, 3, 1, 4] if inserted_axis else [int(a) for a in (q_tr.attrs.axes or range(rank)[::-1])]
        if len(perm) != rank:
            return None
        cur = call("transpose", cur, axes=perm, layer=q_tr.layer)
        if inserted_axis:
            axis = 0
        elif axis == rank - 2:
            axis = rank - 3
        elif axis == rank - 3:
            axis = rank - 2
        k_out = _shape(k_tr)
        if k_out is None:
            return None
        k_transpose = (k_tr.layer, _swap_last_two(len(k_out)))
        lifted += 1
    if lifted == 0:
        return None  # TI writes a Split without outputs
    for c in chains:
        if not all(m.has_single_user(n) for n in c[:lifted]):
            return None
    parts = 3 if inserted_axis else split.attrs.indices_or_sections
    new_split = call("split", cur, indices_or_sections=parts, axis=axis, layer=split.layer)
    outs: List[Expr] = []
    for j in range(3):
        out: Expr = TupleGetItem(new_split, j)
        if inserted_axis:
            out = call("squeeze", out, axis=[0], layer=split.layer)
        if j == 1 and k_transpose is not None:
            out = call("transpose", out, axes=k_transpose[1], layer=k_transpose[0])
        outs.append(out)
    olds = [c[lifted - 1] for c in chains]
    if not _same_tensors(olds, outs, x, x_shape):
        return None
    memo = {id(old): new for old, new in zip(olds, outs)}
    for node in post_order(output, enter_functions=False):
        if id(node) in memo:
            continue
        new = rebuild(node, memo)
        if new is not node:
            memo[id(node)] = new
    blocks = _SPLIT_BLOCKS.get()
    if blocks is not None:
        blocks.add(scores.layer)
    return memo.get(id(output), output)


#: TI merges the Adds of every block first, then lifts the fused Q/K/V Splits, then moves the scales
#: (a moved scale lengthens Q's branch).
HF_ATTENTION_MERGE_ADDS = RewriteTable([
    ("attention_bias_and_window_mask",
     is_op("reshape")(is_op("add")(is_op("reshape")(is_op("add")(wildcard(), is_constant())), is_constant())),
     _merge),
], name="HfAttentionBlockOptimization")
HF_ATTENTION_LIFT_BEFORE_SPLIT = RewriteTable([
    ("fused_qkv_split", is_op(*_MATMULS)(wildcard(), wildcard()), _lift_before_split),
], name="HfAttentionBlockOptimization")
HF_ATTENTION_MOVE_SCALE = RewriteTable([
    ("scale_after_scores_matmul", is_op("multiply", "divide")(wildcard(), wildcard()), _move_scale),
], name="HfAttentionBlockOptimization")
HF_ATTENTION_BLOCK_OPTIMIZATION = (HF_ATTENTION_MERGE_ADDS, HF_ATTENTION_LIFT_BEFORE_SPLIT, HF_ATTENTION_MOVE_SCALE)


@module_pass("HfAttentionBlockOptimization", opt_level=0)
def hf_attention_block_optimization(mod, ctx):
    """TI's hf_attention_block_optimization: merges the bias and window-mask Adds before a Hugging
    Face attention block's Softmax into one Add, lifts a fused Q/K/V projection's Adds, Reshapes
    and Transposes before its Split, and moves the scores' scale onto Q."""
    token = _SPLIT_BLOCKS.set(set())
    try:
        for table in HF_ATTENTION_BLOCK_OPTIMIZATION:
            mod = table.rewrite(mod)
    finally:
        _SPLIT_BLOCKS.reset(token)
    return mod


HfAttentionBlockOptimization = hf_attention_block_optimization

__all__ = ["HfAttentionBlockOptimization", "HF_ATTENTION_BLOCK_OPTIMIZATION", "ti_merged_constant", "TI_RULE"]
