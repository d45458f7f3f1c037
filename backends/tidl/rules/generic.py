"""Rules applied to every call before its op rule: what TIDL takes at all (an op with a layer,
float32 tensors, rank <= 6, static shapes) and the batch limit."""

from __future__ import annotations

from typing import Optional

from ....ir.expr import Call, Constant
from ....ir.op import CUSTOM_OP, Op
from ....ir.types import TensorType, TupleType
from ._base import TIDL_NO_LAYER, TIDL_RULE, fmt_shape, tensor_types, where

#: TIDL tensors are N, D1, D2, C, H, W.
MAX_RANK = 6
FLOAT_DTYPE = "float32"
#: dtypes of pre-quantized graphs, which tidlx's TIDL flow does not take.
QUANTIZED_DTYPES = ("int8", "uint8", "int16", "uint16")


def op_reason(call: Call) -> Optional[str]:
    """Whether TIDL has a layer for the call's op at all."""
    if not isinstance(call.op, Op):
        return f"{where(call)}: calls of functions are not offloaded op by op"
    name = call.op.name
    if name.startswith("qnn."):
        return (f"{where(call)}: pre-quantized (QNN) ops are out of scope: tidlx offloads float32 graphs, which "
                f"TIDL quantizes itself (import the float model)")
    if call.op.has_attr(CUSTOM_OP):
        return (f"{where(call)}: custom op (registered with tidlx.register_op): TIDL has no layer for it, it runs "
                f"on the host")
    if not call.op.has_attr(TIDL_RULE):
        return f"{where(call)}: {call.op.get_attr(TIDL_NO_LAYER) or f'TIDL has no layer for {name}'}"
    return None


def _dtype_reason(call: Call, what: str, dtype: str) -> str:
    if dtype in QUANTIZED_DTYPES:
        return (f"{where(call)}: {what} has dtype {dtype}; pre-quantized graphs are out of scope (tidlx offloads "
                f"float32 graphs, which TIDL quantizes itself)")
    return f"{where(call)}: {what} has dtype {dtype}; TIDL imports float32 graphs"


def type_reason(call: Call) -> Optional[str]:
    """Static shapes, rank <= 6 and float32 for the call's inputs and output (op exemptions from
    the rule table: integer indices, integer argmax results, casts)."""
    if _plain_float_tensors(call):
        return None  # nothing below can object (the common case, checked without building the list)
    info = call.op.get_attr(TIDL_RULE)
    tensors = []
    for i, arg in enumerate(call.args):
        exempt = info is not None and (info.any_dtype or i in info.int_args)
        tensors += [(f"input {i}", t, exempt) for t in tensor_types(arg.checked_type)]
    exempt_out = info is not None and (info.any_dtype or info.int_output)
    tensors += [("the output", t, exempt_out) for t in tensor_types(call.checked_type)]
    for what, t, exempt in tensors:
        if any(d < 0 for d in t.shape):
            return f"{where(call)}: {what} has a dynamic shape {fmt_shape(t.shape)}; TIDL needs static shapes"
        if t.ndim > MAX_RANK:
            return (f"{where(call)}: {what} has rank {t.ndim} (shape {fmt_shape(t.shape)}); TIDL tensors have at "
                    f"most {MAX_RANK} dims (N, D1, D2, C, H, W)")
    for what, t, exempt in tensors:
        if not exempt and t.dtype != FLOAT_DTYPE:
            return _dtype_reason(call, what, t.dtype)
    return None


def _plain_float_tensors(call: Call) -> bool:
    """Whether the call's result and inputs are all float32 tensors (or tuples of them, as a
    batch norm's result) of static shape and rank <= MAX_RANK: then type_reason has nothing to say."""
    t = call.checked_type
    if t.__class__ is not TensorType or t.dtype != FLOAT_DTYPE or len(t.shape) > MAX_RANK \
            or (t.shape and min(t.shape) < 0):
        if not _plain_float(t):
            return False
    for arg in call.args:
        t = arg.checked_type
        if t.__class__ is not TensorType or t.dtype != FLOAT_DTYPE or len(t.shape) > MAX_RANK \
                or (t.shape and min(t.shape) < 0):
            if not _plain_float(t):
                return False
    return True


def _plain_float(t) -> bool:
    if t.__class__ is TensorType:
        return t.dtype == FLOAT_DTYPE and len(t.shape) <= MAX_RANK and not (t.shape and min(t.shape) < 0)
    if t.__class__ is TupleType:
        return all(_plain_float(f) for f in t.fields)
    return False


def _batch_tensors(call: Call):
    """(what, type) of the tensors whose axis 0 is the call's batch: its result and its
    non-constant inputs, rank >= 2."""
    out = [("the output", t) for t in tensor_types(call.checked_type)]
    for i, arg in enumerate(call.args):
        if not isinstance(arg, Constant):
            out += [(f"input {i}", t) for t in tensor_types(arg.checked_type)]
    return [(what, t) for what, t in out if t.ndim >= 2]


def call_batch(call: Call) -> int:
    """The batch a call works on: axis 0 of its result and of its non-constant inputs (rank >= 2),
    the largest. Inputs count too: a reshape of N x ... to 1 x N x ... still handles N frames."""
    batch = 1
    t = call.checked_type
    for t in ((t,) if t.__class__ is TensorType else tensor_types(t)):
        if len(t.shape) >= 2 and t.shape[0] > batch:
            batch = t.shape[0]
    for arg in call.args:
        if isinstance(arg, Constant):
            continue
        t = arg.checked_type
        if t.__class__ is TensorType:  # the common case, without a list
            if len(t.shape) >= 2 and t.shape[0] > batch:
                batch = t.shape[0]
            continue
        for t in tensor_types(t):
            if len(t.shape) >= 2 and t.shape[0] > batch:
                batch = t.shape[0]
    return batch


def model_batch(ctx) -> int:
    """The model's own batch: axis 0 of the function's first parameter of rank >= 2 (as the flow
    reports it; later parameters may be weights of text printed without metadata); 1 if none."""
    for p in ctx.function.params:
        t = p.type_annotation if p.type_annotation is not None else p.checked_type
        if getattr(t, "ndim", 0) >= 2:
            return int(t.shape[0])
    return 1


def batch_reason(call: Call, limit, ctx=None) -> Optional[str]:
    """TI's relay import refuses ops whose batch exceeds TIDL_RELAY_MAX_BATCH_SIZE; ``limit`` is a
    BatchLimit (options.batch_limit()).

    TIDL reads axis 0 of every tensor as the batch. When the model's own batch (axis 0 of its
    inputs, from ``ctx``) is within the limit, a larger axis 0 is another axis moved there (the 197
    tokens of a ViT after a reshape to 197 x 768): raising the limit is not the answer, keeping a
    leading 1 is, and the reason says so."""
    from ..options import BATCH_ENV_VAR

    batch = call_batch(call)
    if batch <= limit.value:
        return None
    own = model_batch(ctx) if ctx is not None else None
    if own is not None and own <= limit.value:
        what, t = next((w, t) for w, t in _batch_tensors(call) if t.shape[0] == batch)
        lead = fmt_shape((1,) + tuple(t.shape))
        return (f"{where(call)}: TIDL reads dimension 0 as the batch, and {what} {fmt_shape(t.shape)} has "
                f"{batch} there while the model's batch is {own}: an axis of the model (not its batch) ends "
                f"up in the batch position, so raising the batch limit does not help; keep a leading 1 "
                f"(e.g. {lead}, as the model's reshapes or MatMuls can) so that dimension 0 stays {own}")
    if limit.source == "option":
        return (f"{where(call)}: batch {batch} > max_batch_size={limit.value}: set the option "
                f"max_batch_size={batch}")
    return (f"{where(call)}: batch {batch} > {BATCH_ENV_VAR}={limit.value}: set the environment variable "
            f"{BATCH_ENV_VAR}={batch} or the option max_batch_size={batch}")
