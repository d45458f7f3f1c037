"""Shared helpers of the emulator tests: call a kernel as the interpreter would, and run a
single ONNX node in onnxruntime for reference."""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from tidlx.emulator.registry import get_kernel
from tidlx.ir import TensorType, TupleType, get_op
from tidlx.ir.expr import _dtype_name


def type_of(value):
    if isinstance(value, (tuple, list)):
        return TupleType(tuple(type_of(v) for v in value))
    value = np.asarray(value)
    return TensorType(value.shape, _dtype_name(value.dtype))


def run_kernel(op_name: str, args: Sequence, **attrs):
    """The kernel's result for ``args``, with the out_type from the op's type relation; checks
    that the result matches that type (as the interpreter does)."""
    op = get_op(op_name)
    attr_obj = op.make_attrs(attrs)
    out_type = op.type_rel([type_of(a) for a in args], attr_obj)
    res = get_kernel(op_name)(list(args), attr_obj, out_type)
    _check_type(res, out_type, op_name)
    return res


def _check_type(res, t, what):
    if isinstance(t, TupleType):
        assert isinstance(res, tuple) and len(res) == len(t.fields), what
        for r, f in zip(res, t.fields):
            _check_type(r, f, what)
        return
    res = np.asarray(res)
    assert res.shape == t.shape, f"{what}: kernel gave shape {res.shape}, type says {t.shape}"
    assert res.dtype == np.dtype(t.dtype), f"{what}: kernel gave {res.dtype}, type says {t.dtype}"


_ONNX_TYPES = {np.dtype(k): v for k, v in {
    "float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE, "int8": TensorProto.INT8,
    "uint8": TensorProto.UINT8, "int16": TensorProto.INT16, "int32": TensorProto.INT32,
    "int64": TensorProto.INT64, "bool": TensorProto.BOOL}.items()}


def ort_node(op_type: str, inputs: Dict[str, Optional[np.ndarray]], attrs: Optional[dict] = None,
             n_outputs: int = 1, opset: int = 17, domain: str = "") -> list:
    """Runs one ONNX node in onnxruntime. ``inputs`` maps names to arrays in input order (None
    for an omitted optional input); every array is fed as a graph input."""
    names = [n if v is not None else "" for n, v in inputs.items()]
    outs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, names, outs, domain=domain, **(attrs or {}))
    graph_inputs = [helper.make_tensor_value_info(n, _ONNX_TYPES[v.dtype], v.shape)
                    for n, v in inputs.items() if v is not None]
    graph_outputs = [helper.make_empty_tensor_value_info(o) for o in outs]
    graph = helper.make_graph([node], "one_node", graph_inputs, graph_outputs)
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {n: v for n, v in inputs.items() if v is not None})


def assert_close(actual, expected, rtol=1e-5, atol=1e-6):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)


def rand(rng, shape, dtype="float32", low=-1.0, high=1.0):
    if np.dtype(dtype).kind == "f":
        return rng.uniform(low, high, size=shape).astype(dtype)
    return rng.integers(int(low), int(high), size=shape, endpoint=True).astype(dtype)


__all__ = ["run_kernel", "ort_node", "assert_close", "rand", "type_of", "numpy_helper", "onnx"]
