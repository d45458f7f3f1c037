"""The input surfaces of tidlx, each a function of bytes that must either succeed or raise a
TidlxError (a clean error naming the place). Anything else is a failure: a bug of tidlx
(TidlxInternalError included) or an exception that escaped as a traceback.

Used by ``fuzz/run.py`` (coverage-guided, atheris; ``make fuzz``) and by the hypothesis version
in ``tests/fuzz/test_fuzz_surfaces.py``. ``SEEDS`` gives each surface a few valid inputs.
"""

from __future__ import annotations

import io
import os
import tempfile
import warnings
from typing import Callable, Dict, List

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import tidlx
from tidlx.frontends.onnx import from_onnx
from tidlx.ir.errors import TidlxError
from tidlx.ir.types import tensor_budget

#: Budget while fuzzing: a mutated model may ask for any size; 64 MiB keeps runs small.
FUZZ_BUDGET = 64 << 20

RELAY_SEEDS = [
    b'#[version = "0.0.5"]\ndef @main(%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32]) {\n'
    b'  %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);\n'
    b'  %1 = nn.relu(%0);\n  nn.max_pool2d(%1, pool_size=[2, 2], strides=[2, 2])\n}\n',
    b'#[version = "0.0.5"]\ndef @main(%x: Tensor[(2, 8), float32]) {\n  %0 = reshape(%x, newshape=[4, 4]);\n'
    b'  %1 = (%0, %0);\n  %2 = concatenate(%1, axis=1);\n  %3 = split(%2, indices_or_sections=2, axis=1);\n'
    b'  %4 = %3.0;\n  add(%4, 1f)\n}\n',
    b'#[version = "0.0.5"]\ndef @f(%a: Tensor[(3), float32]) -> Tensor[(3), float32] {\n  sigmoid(%a)\n}\n'
    b'def @main(%x: Tensor[(3), float32]) {\n  let %y = @f(%x);\n  broadcast_to(%y, shape=[2, 3])\n}\n',
]


def _onnx_seed(nodes, inputs, inits=(), opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def onnx_seed_models() -> List[onnx.ModelProto]:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    w = numpy_helper.from_array(np.full((4, 3, 3, 3), 0.1, np.float32), "W")
    shape = numpy_helper.from_array(np.array([1, -1], np.int64), "s")
    return [
        _onnx_seed([helper.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                    helper.make_node("Relu", ["c"], ["r"], name="relu"),
                    helper.make_node("Reshape", ["r", "s"], ["y"], name="flat")], [x], [w, shape]),
        _onnx_seed([helper.make_node("Shape", ["x"], ["sh"], name="shape"),
                    helper.make_node("ConstantOfShape", ["sh"], ["z"], name="zeros"),
                    helper.make_node("Add", ["x", "z"], ["a"], name="add"),
                    helper.make_node("Softmax", ["a"], ["y"], name="softmax", axis=1)], [x]),
        _onnx_seed([helper.make_node("MaxPool", ["x"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
                    helper.make_node("Transpose", ["p"], ["y"], name="t", perm=[0, 2, 3, 1])], [x], opset=6),
    ]


OPTION_SEEDS = [b"deny_list=nn.batch_norm", b"max_num_subgraphs=4\nmin_subgraph_macs=0",
                b"deny_list:layer_name=relu", b"tensor_bits=16\nadvanced_options:calibration_frames=2",
                b"disabled_passes=FoldBatchNormIntoDense\nmax_batch_size=2"]


def _npz_bytes(arrays: Dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


NPZ_SEEDS = [_npz_bytes({"x": np.ones((1, 3, 8, 8), np.float32)}), _npz_bytes({"x": np.zeros((2, 3), np.int8)}),
             _npz_bytes({})]

_NPZ_MODEL = None


def _npz_model():
    global _NPZ_MODEL
    if _NPZ_MODEL is None:
        _NPZ_MODEL = from_onnx(onnx_seed_models()[0])
    return _NPZ_MODEL


# --- the surfaces -----------------------------------------------------------------------------

def relay_text(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    mod = tidlx.parse_relay(text)
    tidlx.partition(mod)


def onnx_bytes(data: bytes) -> None:
    mod = from_onnx(data)
    tidlx.partition(mod)


def onnx_graph(data: bytes) -> None:
    """Structural mutations of a valid graph, driven by the bytes: drop, duplicate or rewire
    nodes, change attributes, dims and element types."""
    rng = np.random.default_rng(int.from_bytes(data[:8].ljust(8, b"\0"), "little"))
    ops = data[8:]
    models = onnx_seed_models()
    model = models[(ops[0] if ops else 0) % len(models)]
    graph = model.graph
    names = [o for n in graph.node for o in n.output] + [i.name for i in graph.input] + [i.name for i in graph.initializer]
    for b in ops[1:24]:
        kind = b % 8
        if not graph.node:
            break
        node = graph.node[int(rng.integers(len(graph.node)))]
        if kind == 0:
            graph.node.remove(node)
        elif kind == 1:
            graph.node.append(node)
        elif kind == 2 and node.input:
            node.input[int(rng.integers(len(node.input)))] = names[int(rng.integers(len(names)))]
        elif kind == 3 and node.attribute:
            attr = node.attribute[int(rng.integers(len(node.attribute)))]
            if attr.ints:
                attr.ints[int(rng.integers(len(attr.ints)))] = int(rng.integers(-3, 1 << 33)) if b & 16 else 0
            else:
                attr.i = int(rng.integers(-5, 5))
        elif kind == 4 and graph.input:
            dims = graph.input[0].type.tensor_type.shape.dim
            if dims:
                dims[int(rng.integers(len(dims)))].dim_value = int(rng.choice([0, 1, -1, 7, 1 << 31, 1 << 62]))
        elif kind == 5 and graph.input:
            graph.input[0].type.tensor_type.elem_type = int(rng.integers(0, 26))
        elif kind == 6:
            node.op_type = str(rng.choice(["Relu", "Conv", "Gemm", "Expand", "Tile", "Resize", "Slice", "Foo"]))
        elif kind == 7:
            model.opset_import[0].version = int(rng.integers(1, 30))
    mod = from_onnx(model)
    tidlx.partition(mod)


def options(data: bytes) -> None:
    items = [line for line in data.decode("utf-8", "replace").splitlines() if line]
    from tidlx.backends.tidl.options import TidlOptions

    TidlOptions.from_strings(items)
    mod = _npz_model()
    tidlx.partition(mod, dict(item.split("=", 1) if "=" in item else (item, "") for item in items))


def npz_inputs(data: bytes) -> None:
    from tidlx.files import read_npz

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "inputs.npz")
        with open(path, "wb") as f:
            f.write(data)
        arrays = read_npz(path)
    tidlx.emulate(_npz_model(), arrays, kernels="reference")


#: A network record may hold any shapes: above this many input elements the parsed subgraph is not run.
ARTIFACT_RUN_ELEMENTS = 1 << 16

ARTIFACT_SEED_MODEL = """
def @main(%x: Tensor[(1, 3, 8, 8), float32]) {
  %0 = nn.conv2d(%x, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3]);
  %1 = nn.relu(%0);
  %2 = nn.max_pool2d(%1, pool_size=[2, 2], strides=[2, 2]);
  %22 = nn.avg_pool2d(%1, pool_size=[2, 2], strides=[2, 2]);
  %3 = add(%2, %22);
  %4 = nn.global_avg_pool2d(%3);
  %5 = nn.batch_flatten(%4);
  nn.dense(%5, meta[relay.Constant][1], units=2)
}
"""

_ARTIFACT_SEEDS: List[bytes] = []


def _artifact_seeds() -> List[bytes]:
    """Network records of a small conv/pools/add/dense subgraph at 8 and 16 bit (written by tidlx)."""
    if not _ARTIFACT_SEEDS:
        from tidlx.backends.tidl.artifacts import NetworkInfo, encode_network
        rng = np.random.default_rng(0)
        consts = [rng.standard_normal((4, 3, 3, 3)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)]
        mod = tidlx.parse_relay(ARTIFACT_SEED_MODEL, consts)
        frames = {"x": rng.standard_normal((2, 3, 8, 8)).astype(np.float32)}
        for bits in (8, 16):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                qmodel = tidlx.quantize(mod, {"tensor_bits": bits, "accuracy_level": 0}, calib=frames)
            for sub in qmodel.subgraphs.values():
                _ARTIFACT_SEEDS.append(encode_network(sub, NetworkInfo(7, 0, 1)))
    return list(_ARTIFACT_SEEDS)


def artifact(data: bytes) -> None:
    """A network record (tidl_subgraph<N>_net.bin) read and, when small, run in fixed point. The size
    and CRC-32 of a record with the right magic are fixed up first, so the fuzzer reaches the parser
    and the runtime behind the envelope (a damaged envelope is tested in tests/backends)."""
    import struct

    from tidlx.emulator.fixed import artifact_format as fmt
    from tidlx.emulator.fixed.artifact_reader import read_network
    from tidlx.emulator.fixed.layers import run_subgraph

    blob = bytearray(data)
    if len(blob) >= fmt.NET_HEADER_SIZE and blob[:8] == fmt.NET_MAGIC:
        struct.pack_into("<Q", blob, 16, len(blob))
        struct.pack_into("<I", blob, fmt.NET_CRC_OFFSET, fmt.crc32(bytes(blob), fmt.NET_CRC_OFFSET))
    sub = read_network(bytes(blob), "fuzz_net.bin").subgraph
    shapes = [sub.tensors[t].shape for t in sub.inputs]
    if sum(int(np.prod(s)) for s in shapes) <= ARTIFACT_RUN_ELEMENTS:
        run_subgraph(sub, [np.ones(s, np.float32) for s in shapes])


SURFACES: Dict[str, Callable[[bytes], None]] = {
    "relay": relay_text, "onnx-bytes": onnx_bytes, "onnx-graph": onnx_graph, "options": options, "npz": npz_inputs,
    "artifact": artifact,
}


def seeds(surface: str) -> List[bytes]:
    if surface == "relay":
        return list(RELAY_SEEDS)
    if surface == "onnx-bytes":
        return [m.SerializeToString() for m in onnx_seed_models()]
    if surface == "onnx-graph":
        return [bytes([i] * 12) for i in range(8)]
    if surface == "options":
        return list(OPTION_SEEDS)
    if surface == "artifact":
        return _artifact_seeds()
    return list(NPZ_SEEDS)


def check(surface: str, data: bytes):
    """Runs one input; returns None when it succeeded or raised a TidlxError, else the exception."""
    with warnings.catch_warnings(), tensor_budget(FUZZ_BUDGET):
        warnings.simplefilter("ignore")
        try:
            SURFACES[surface](data)
        except TidlxError:
            return None
        except RecursionError as exc:  # deep nesting must be reported as a TidlxError too
            return exc
        except Exception as exc:  # noqa: BLE001 - every other exception is a finding
            return exc
    return None
