"""``tidlx.register_op``: a new operator with every facet, in one call.

An op that neither TIDL nor the IR knows (BEVDet's voxel pooling, a user's own layer) needs, to go
through tidlx end to end: an IR definition (arity, attributes, type relation), a float reference
kernel for the emulator, a MAC count for the reports, the TIDL decision (a custom op runs on the
host, and the partition report says so), optionally the ONNX node type that imports to it, and
optionally its TVM lowering (``te_compute``: a TE compute the TVM backend emits with ``emit_te``).
``register_op`` sets all of them; ``unregister_op`` removes them again (tests, notebooks).
docs/custom_ops.md is the worked example (BEVDet's voxel pooling, tidlx/models/bev_pool.py).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Optional, Sequence, Tuple, Union

from .ir.errors import TidlxError
from .ir.op import CUSTOM_OP, Op, define_op, get_op, has_op, register_op_attr, undefine_op

#: facet keys this module sets (each declared by the package that owns it)
_REFERENCE = "emulator.reference"
_MACS = "macs"


class CustomOpError(TidlxError):
    """``register_op`` was given something it cannot register."""


@dataclasses.dataclass(frozen=True)
class CustomRegistration:
    """The ``custom`` facet's value: what ``register_op`` set up beyond the op's own facets."""

    onnx_node: Optional[Tuple[str, str]] = None  # (domain, op type) imported as this op


def _onnx_node(onnx: Union[None, str, Tuple[str, str]]) -> Optional[Tuple[str, str]]:
    if onnx is None:
        return None
    if isinstance(onnx, str):
        domain, sep, op_type = onnx.rpartition("/")
        if not sep:
            domain, sep, op_type = onnx.rpartition("::")
        if not sep:
            raise CustomOpError(f"register_op: onnx={onnx!r} must be 'domain/OpType' (e.g. 'com.example/BevPool')")
        return domain, op_type
    if isinstance(onnx, tuple) and len(onnx) == 2 and all(isinstance(p, str) for p in onnx):
        return onnx
    raise CustomOpError(f"register_op: onnx must be 'domain/OpType' or a (domain, op_type) pair, got {onnx!r}")


def register_op(name: str, type_relation: Callable, reference_kernel: Callable, *, num_inputs: int,
                attrs: Optional[type] = None, arg_names: Sequence[str] = (), macs: Optional[Callable] = None,
                pattern: str = "opaque", onnx: Union[None, str, Tuple[str, str]] = None,
                onnx_attrs: Optional[Callable] = None, te_compute: Optional[Callable] = None) -> Op:
    """Registers a new op and all its facets; returns the ``Op``.

    * ``type_relation(arg_types, attrs) -> Type``: the output type (raise ``tidlx.ir.TidlxTypeError``
      with a reason for ill-typed calls);
    * ``reference_kernel(args, attrs, out_type) -> ndarray``: the float semantics (numpy arrays in);
    * ``num_inputs``, ``attrs`` (a frozen dataclass of the op's attributes with defaults or None),
      ``arg_names`` and ``pattern`` (TVM's fusion pattern) as for built-in ops;
    * ``macs(call) -> int``: multiply-accumulates of one call (default: one per output element);
    * ``onnx="domain/OpType"``: nodes of that custom domain import as this op; ``onnx_attrs(dict)
      -> dict`` maps the node's attributes to the op's (default: the same names);
    * ``te_compute(*tensors, attrs, out_type) -> te.Tensor``: the op in TVM's tensor expression
      language, for ``tidlx.backends.tvm`` (one ``te.Tensor`` per argument, in order (a tuple-typed
      argument as a list of them); ``attrs`` and ``out_type`` as for the reference kernel; return
      the output tensor, or a list of them for a tuple-typed op). It becomes the op's ``tvm.lower``
      facet, emitted with ``BlockBuilder.emit_te``; apache-tvm is imported only when a lowering runs,
      so import ``tvm`` inside the function. Without it, lowering the op is a TvmLoweringError.

    TIDL has no layer for a custom op: the partitioner keeps it on the host with the reason
    "custom op". Registering a name twice is an error; ``unregister_op`` undoes a registration.
    """
    from . import emulator  # noqa: F401  (declares the kernel facets)

    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise CustomOpError(f"register_op: the name must be a non-empty string without spaces, got {name!r}")
    if has_op(name):
        raise CustomOpError(f"register_op: op '{name}' already exists (unregister_op('{name}') first if it is "
                            f"yours)")
    for what, fn in (("type_relation", type_relation), ("reference_kernel", reference_kernel)):
        if not callable(fn):
            raise CustomOpError(f"register_op('{name}'): {what} must be a function, got {type(fn).__name__}")
    if macs is not None and not callable(macs):
        raise CustomOpError(f"register_op('{name}'): macs must be a function (call -> int)")
    if te_compute is not None and not callable(te_compute):
        raise CustomOpError(f"register_op('{name}'): te_compute must be a function (*te tensors, attrs, out_type "
                            f"-> te.Tensor), got {type(te_compute).__name__}")
    if not isinstance(num_inputs, int) or isinstance(num_inputs, bool) or num_inputs < 0:
        raise CustomOpError(f"register_op('{name}'): num_inputs must be a count >= 0, got {num_inputs!r}")
    if attrs is not None and not (isinstance(attrs, type) and dataclasses.is_dataclass(attrs)):
        raise CustomOpError(f"register_op('{name}'): attrs must be a dataclass type (frozen, with defaults)")
    node = _onnx_node(onnx)
    try:
        op = define_op(name, num_inputs=num_inputs, type_rel=type_relation, attrs=attrs, arg_names=arg_names,
                       pattern=pattern)
    except ValueError as exc:
        raise CustomOpError(f"register_op('{name}'): {exc}") from None
    try:
        # the marker records what was registered, so unregister_op can undo exactly that
        op.set_attr(CUSTOM_OP, CustomRegistration(onnx_node=node))
        register_op_attr(name, _REFERENCE, reference_kernel)
        if macs is not None:
            # wraps: `tidlx ops NAME` shows where the user's macs is defined, not this adapter
            register_op_attr(name, _MACS, functools.wraps(macs)(lambda call, where: int(macs(call))))
        if node is not None:
            from .frontends.onnx.custom import register_custom_node

            register_custom_node(node[0], node[1], name, onnx_attrs)
        if te_compute is not None:
            from .backends.tvm.facet import lowers  # the facet's declaration only: no apache-tvm

            lowers(name)(_te_lowering(name, te_compute))
    except BaseException:
        _forget(name, node)
        raise
    return op


def _te_lowering(name: str, te_compute: Callable) -> Callable:
    """The ``tvm.lower`` facet of a custom op: ``te_compute`` emitted through ``ctx.emit_te``.

    A failure inside ``te_compute`` or a result of the wrong type or shape is the user's code, so it
    is a TvmLoweringError naming the op and the call (not an internal error of tidlx)."""
    from .backends.tvm.errors import TvmLoweringError

    @functools.wraps(te_compute)  # `tidlx ops NAME` shows where te_compute is defined
    def lower(ctx, call, args):
        te = ctx.te
        out_type = call.checked_type

        def compute(*tensors):
            try:
                result = te_compute(*tensors, attrs=call.attrs, out_type=out_type)
            except TidlxError:
                raise
            except Exception as exc:
                raise TvmLoweringError(f"{ctx.where}: te_compute of custom op '{name}' failed: "
                                       f"{type(exc).__name__}: {exc}") from exc
            _check_te_result(ctx, name, result, out_type, te)
            return result

        return ctx.emit_te(compute, *args, primfunc_name_hint=name.replace(".", "_"))

    return lower


def _check_te_result(ctx, name: str, result: Any, out_type, te) -> None:
    from .backends.tvm.errors import TvmLoweringError
    from .ir.types import TensorType, TupleType

    wanted = list(out_type.fields) if isinstance(out_type, TupleType) else [out_type]
    got = list(result) if isinstance(result, (list, tuple)) and isinstance(out_type, TupleType) else [result]
    if len(got) != len(wanted) or not all(isinstance(t, te.Tensor) for t in got):
        what = (f"a list of {len(wanted)} te.Tensor" if isinstance(out_type, TupleType) else "a te.Tensor")
        raise TvmLoweringError(f"{ctx.where}: te_compute of custom op '{name}' must return {what}, got "
                               f"{type(result).__name__}")
    for k, (tensor, ty) in enumerate(zip(got, wanted)):
        shape = tuple(int(d) for d in tensor.shape)
        want = (tuple(int(d) for d in ty.shape), ty.dtype) if isinstance(ty, TensorType) else None
        if want is None or (shape, str(tensor.dtype)) != want:
            place = f" output {k}" if len(wanted) > 1 else ""
            raise TvmLoweringError(f"{ctx.where}: te_compute of custom op '{name}' returned{place} "
                                   f"{str(tensor.dtype)}{list(shape)}; the type relation says {ty}")


def unregister_op(name: str) -> None:
    """Removes an op registered with ``register_op``, its facets and its ONNX mapping."""
    if not has_op(name):
        return
    registration = get_op(name).get_attr(CUSTOM_OP)
    if registration is None:
        raise CustomOpError(f"unregister_op: '{name}' is a built-in op, not one registered with register_op")
    _forget(name, registration.onnx_node)


def _forget(name: str, node: Optional[Tuple[str, str]]) -> None:
    if node is not None:
        from .frontends.onnx.custom import unregister_custom_node

        unregister_custom_node(*node)
    undefine_op(name)  # the facets hang on the Op record and go with it


__all__ = ["register_op", "unregister_op", "CustomOpError"]
