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

Both rewrites need TI's block: Q and K (the scores MatMul's operands) and V (the output MatMul's
second operand) traced back, node by node while each node has one non-constant input, to a common
node; TI walks the three branches one node each in turn, and skips a block whose three branches
all start with a Squeeze after that node (a block it has already rewritten). tidlx takes the
blocks whose branches reach the common node in the same number of ONNX nodes, where TI's walk is
sure to meet there (TI's walk also meets in some blocks of unequal branches; those are left).

Not modelled: where Q, K and V come from one Split, TI moves their Adds, Reshapes and Transposes
before it (one Add of the concatenated biases, one Reshape with an axis of 3, one Transpose, K's
Transpose swapping its last two axes, Squeezes after the Split).

Exactness: ``(x + c1) + c2`` becomes ``x + (c1 + c2)``, ``(q k) s`` becomes ``(q s) k``; the
results agree to rounding.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from ..expr import Call, Constant, TupleGetItem
from ..op import call
from ..pattern import is_constant, is_op, wildcard
from ..rewrite import RewriteTable
from ..transform import module_pass
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


def qkv_traced(scores: Call, output: Call) -> bool:
    """Q, K (the scores MatMul's operands) and V (the output MatMul's second operand) reach one
    common node, each in the same number of ONNX nodes (TI's walk, one node per branch in turn, is
    sure to meet there), and not all through a Squeeze just after it (TI's mark of a block it has
    already rewritten)."""
    branches = [_branch(_operand(scores, 0)), _branch(_operand(scores, 1)), _branch(_operand(output, 1))]
    if not all(branches):
        return False
    ids = [[id(n) for n in b] for b in branches]
    common = next((i for i in ids[0] if i in ids[1] and i in ids[2]), None)
    if common is None:
        return False
    prefixes = [b[:i.index(common)] for b, i in zip(branches, ids)]
    if len({_layer_count(p) for p in prefixes}) != 1 or not all(prefixes):
        return False
    seen = [set(id(n) for n in p) for p in prefixes]
    if seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2]:
        return False
    return not all(p[-1].op_name == "squeeze" for p in prefixes)


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
    if not m.has_single_user(scores) or output is None or not qkv_traced(matmul, output):
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


#: TI merges the Adds of every block first, then moves the scales (a moved scale lengthens Q's branch).
HF_ATTENTION_MERGE_ADDS = RewriteTable([
    ("attention_bias_and_window_mask",
     is_op("reshape")(is_op("add")(is_op("reshape")(is_op("add")(wildcard(), is_constant())), is_constant())),
     _merge),
], name="HfAttentionBlockOptimization")
HF_ATTENTION_MOVE_SCALE = RewriteTable([
    ("scale_after_scores_matmul", is_op("multiply", "divide")(wildcard(), wildcard()), _move_scale),
], name="HfAttentionBlockOptimization")
HF_ATTENTION_BLOCK_OPTIMIZATION = (HF_ATTENTION_MERGE_ADDS, HF_ATTENTION_MOVE_SCALE)


@module_pass("HfAttentionBlockOptimization", opt_level=0)
def hf_attention_block_optimization(mod, ctx):
    """Merges the bias and window-mask Adds before a Hugging Face attention block's Softmax into one
    Add (TI's hf_attention_block_optimization)."""
    for table in HF_ATTENTION_BLOCK_OPTIMIZATION:
        mod = table.rewrite(mod)
    return mod


HfAttentionBlockOptimization = hf_attention_block_optimization

__all__ = ["HfAttentionBlockOptimization", "HF_ATTENTION_BLOCK_OPTIMIZATION", "ti_merged_constant", "TI_RULE"]
