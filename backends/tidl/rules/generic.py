"""Rules applied to every call before its op rule: what TIDL takes at all (an op with a layer,
float32 tensors, rank <= 6, static shapes) and the batch limit."""

from __future__ import annotations

from typing import Optional

from ....ir.expr import Call, Constant
from ....ir.op import CUSTOM_OP, Op
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


def call_batch(call: Call) -> int:
    """The batch a call works on: axis 0 of its result and of its non-constant inputs (rank >= 2),
    the largest. Inputs count too: a reshape of N x ... to 1 x N x ... still handles N frames."""
    batch = 1
    types = list(tensor_types(call.checked_type))
    for arg in call.args:
        if not isinstance(arg, Constant):
            types.extend(tensor_types(arg.checked_type))
    for t in types:
        if t.ndim >= 2:
            batch = max(batch, t.shape[0])
    return batch


def batch_reason(call: Call, limit) -> Optional[str]:
    """TI's relay import refuses ops whose batch exceeds TIDL_RELAY_MAX_BATCH_SIZE; ``limit`` is a
    BatchLimit (options.batch_limit())."""
    from ..options import BATCH_ENV_VAR

    batch = call_batch(call)
    if batch <= limit.value:
        return None
    if limit.source == "option":
        return (f"{where(call)}: batch {batch} > max_batch_size={limit.value}: set the option "
                f"max_batch_size={batch}")
    return (f"{where(call)}: batch {batch} > {BATCH_ENV_VAR}={limit.value}: set the environment variable "
            f"{BATCH_ENV_VAR}={batch} or the option max_batch_size={batch}")
