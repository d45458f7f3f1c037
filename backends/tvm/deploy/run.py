"""Runs a deploy folder on this machine: ``run_deployed(directory, inputs, model)``.

The folder's driver is built with the check files (``driver/check/``: a ``main`` and the pipe bridge)
by the host gcc (x86, and c7x's C source built for x86) or aarch64-linux-gnu-gcc (arm, run under
``qemu-aarch64 -L /usr/aarch64-linux-gnu``), cached by the hash of everything that goes into it.
The driver reads the inputs from its stdin and runs ``model_run``; each TIDL subgraph call comes
back over its stdout and is served here by tidlx (the float emulator, or a QuantizedModel's
fixed-point layers), so the host part runs as TVM's code and the TIDL parts give tidlx's numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import tempfile
import threading
from typing import Callable, Dict, List, Mapping, Optional

import numpy as np

from ....ir.errors import TidlxInternalError
from ....ir.module import IRModule
from ..errors import TvmBackendError
from .folder import AARCH64_CC, DEPLOY_C_SOURCE, DEPLOY_GRAPH, DEPLOY_LIB, TARGETS
from .graph import GRAPH_FORMAT, GRAPH_VERSION

#: the aarch64 sysroot of libc6-dev-arm64-cross (qemu-aarch64 -L)
AARCH64_SYSROOT = "/usr/aarch64-linux-gnu"
QEMU_AARCH64 = "qemu-aarch64"
HOST_CC = "gcc"
#: how the driver is compiled for running here (the -Werror check of the folder is a test's)
BUILD_FLAGS = ["-std=c99", "-O2", "-Wall"]
#: part of the cache key: bump when the way drivers are built changes
DRIVER_BUILD_VERSION = 1
INSTALL_HINT = "make system-packages, or apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"


def read_graph(directory) -> dict:
    """The folder's deploy_graph.json, checked to be tidlx's schema."""
    path = os.path.join(os.fspath(directory), DEPLOY_GRAPH)
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise TvmBackendError(f"{path}: no such file (write the folder with deploy(model, directory, target))") from None
    except (OSError, ValueError) as exc:
        raise TvmBackendError(f"{path}: not readable as JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != GRAPH_FORMAT or doc.get("version") != GRAPH_VERSION:
        raise TvmBackendError(f"{path}: not a {GRAPH_FORMAT} version {GRAPH_VERSION} file")
    _check_graph(doc, path)
    return doc


def _ids(value) -> bool:
    return isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in value)


def _check_graph(doc: dict, path: str) -> None:
    """The fields run_deployed and the tools read, with their types: an edited or damaged file is a
    TvmBackendError naming the field, not a KeyError inside the run."""
    def fail(what: str):
        return TvmBackendError(f"{path}: {what}")

    if doc.get("target") not in TARGETS:
        raise fail(f"'target' {doc.get('target')!r} is not one of {', '.join(TARGETS)}")
    tensors = doc.get("tensors")
    if not isinstance(tensors, list):
        raise fail("'tensors' is missing or not a list")
    by_id = {}
    for k, t in enumerate(tensors):
        if not (isinstance(t, dict) and isinstance(t.get("id"), int) and _ids(t.get("shape"))
                and isinstance(t.get("dtype"), str) and isinstance(t.get("bytes"), int)):
            raise fail(f"tensors[{k}] lacks an int 'id', an int list 'shape', a str 'dtype' or an int 'bytes'")
        by_id[t["id"]] = t
    ids = set(by_id)
    for key in ("inputs", "heads"):
        if not _ids(doc.get(key)) or not set(doc[key]) <= ids:
            raise fail(f"'{key}' is not a list of the tensors' ids")
    for tid in doc["inputs"]:
        if not isinstance(by_id[tid].get("name"), str):
            raise fail(f"input tensor {tid} has no str 'name'")
    nodes = doc.get("nodes")
    if not isinstance(nodes, list):
        raise fail("'nodes' is missing or not a list")
    for k, n in enumerate(nodes):
        if not (isinstance(n, dict) and n.get("kind") in ("kernel", "tidl") and isinstance(n.get("name"), str)
                and _ids(n.get("inputs")) and _ids(n.get("outputs"))
                and set(n["inputs"]) | set(n["outputs"]) <= ids):
            raise fail(f"nodes[{k}] lacks a 'kind' (kernel or tidl), a str 'name' or 'inputs'/'outputs' lists of "
                       f"the tensors' ids")
        if n["kind"] == "tidl" and not isinstance(n.get("subgraph"), int):
            raise fail(f"nodes[{k}] is a TIDL call without an int 'subgraph'")


def missing_tools(target: str) -> List[str]:
    """What building and running a folder of ``target`` needs and is not installed (empty: ready)."""
    missing = []
    if target == "arm":
        if shutil.which(AARCH64_CC) is None:
            missing.append(f"{AARCH64_CC} (apt-get install gcc-aarch64-linux-gnu)")
        if not os.path.isdir(os.path.join(AARCH64_SYSROOT, "lib")):
            missing.append(f"{AARCH64_SYSROOT} (apt-get install libc6-dev-arm64-cross)")
        if shutil.which(QEMU_AARCH64) is None:
            missing.append(f"{QEMU_AARCH64} (apt-get install qemu-user)")
    elif shutil.which(HOST_CC) is None:
        missing.append(f"{HOST_CC} (apt-get install gcc)")
    return missing


def cache_root() -> str:
    root = os.environ.get("TIDLX_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tidlx")
    return os.path.join(root, "deploy-drivers")


def _driver_inputs(directory: str, target: str):
    """(compiler, C sources, the library to link or None, include dirs), all paths in the folder."""
    sources = []
    for sub in ("driver", os.path.join("driver", "check")):
        folder = os.path.join(directory, sub)
        sources += sorted(os.path.join(sub, n) for n in os.listdir(folder) if n.endswith(".c"))
    library = None
    if target == "c7x":
        sources.append(DEPLOY_C_SOURCE)
    else:
        library = DEPLOY_LIB
    cc = AARCH64_CC if target == "arm" else HOST_CC
    includes = ["include", "driver", os.path.join("driver", "check")]
    return cc, sources, library, includes


def _hash_inputs(directory: str, cc: str, sources, library, includes) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([DRIVER_BUILD_VERSION, cc, BUILD_FLAGS, sources, library]).encode())
    headers = []
    for inc in includes:
        for dirpath, _, files in os.walk(os.path.join(directory, inc)):
            headers += [os.path.relpath(os.path.join(dirpath, f), directory) for f in files if f.endswith(".h")]
    for rel in sorted(set(sources + headers + ([library] if library else []))):
        h.update(rel.encode() + b"\0")
        with open(os.path.join(directory, rel), "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()[:24]


def build_driver(directory, target: Optional[str] = None) -> str:
    """The path of the folder's check driver, built (or found in the cache) for ``target`` (default: the
    folder's own)."""
    directory = os.path.abspath(os.fspath(directory))
    target = target or read_graph(directory)["target"]
    missing = missing_tools(target)
    if missing:
        raise TvmBackendError(f"running a {target} deploy folder needs {'; '.join(missing)} ({INSTALL_HINT})")
    cc, sources, library, includes = _driver_inputs(directory, target)
    for rel in sources + ([library] if library else []):
        if not os.path.isfile(os.path.join(directory, rel)):
            raise TvmBackendError(f"{os.path.join(directory, rel)}: missing (the folder is not a complete "
                                  f"{target} deploy folder)")
    key = _hash_inputs(directory, cc, sources, library, includes)
    final = os.path.join(cache_root(), key)
    exe = os.path.join(final, "driver")
    if os.path.isfile(exe):
        return exe
    try:
        os.makedirs(cache_root(), exist_ok=True)
        work = tempfile.mkdtemp(prefix=f".{key}-", dir=cache_root())
    except OSError as exc:
        raise TvmBackendError(f"the deploy driver cache {cache_root()} is not writable ({exc.strerror}); set "
                              f"TIDLX_CACHE_DIR to a writable directory") from None
    try:
        argv = [cc, *BUILD_FLAGS, *[f"-I{os.path.join(directory, i)}" for i in includes],
                *[os.path.join(directory, s) for s in sources]]
        if library:
            shutil.copyfile(os.path.join(directory, library), os.path.join(work, library))
            # the library's runtime calls resolve to the driver's own (-rdynamic); found beside it
            argv += [f"-L{work}", f"-l:{library}", f"-Wl,-rpath,{final}", "-rdynamic"]
        argv += ["-o", os.path.join(work, "driver"), "-lm"]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise TidlxInternalError(f"building the deploy driver of {directory} failed ({' '.join(argv[:1])} "
                                     f"exit {done.returncode}):\n{done.stderr.strip()[-4000:]}")
        try:
            os.rename(work, final)
        except OSError:  # built meanwhile by another process: use that one
            if not os.path.isfile(exe):
                raise
    finally:
        if os.path.isdir(work):
            shutil.rmtree(work, ignore_errors=True)
    return exe


def _subgraph_runners(model, kernels: str) -> Dict[str, Callable]:
    """name -> run(list of input arrays) -> list of output arrays, from what ``run_deployed`` was given."""
    from ..build import _is_quantized_model, _subgraph_runners as runners_of

    if model is None:
        return {}
    if isinstance(model, Mapping):
        return dict(model)
    if _is_quantized_model(model):
        return runners_of(model.module, "fixed", model, kernels)
    if isinstance(model, IRModule):
        return runners_of(model, "float", None, kernels)
    raise TvmBackendError(f"run_deployed: the TIDL subgraphs run from a tidlx IRModule (float emulator), a "
                          f"QuantizedModel (fixed point) or a mapping of subgraph name to function, got "
                          f"{type(model).__name__}")


def _spec(tensor: dict):
    return tuple(tensor["shape"]), np.dtype(tensor["dtype"])


class _Pipe:
    def __init__(self, proc, what: str):
        self.proc = proc
        self.what = what

    def read(self, n: int) -> bytes:
        data = self.proc.stdout.read(n) if n else b""
        if len(data) != n:
            raise EOFError
        return data

    def write(self, data: bytes) -> None:
        self.proc.stdin.write(data)


def run_deployed(directory, inputs: Mapping[str, np.ndarray], model=None, *, kernels: str = "fast",
                 timeout: float = 600.0) -> List[np.ndarray]:
    """Builds (cached) and runs the deploy folder ``directory`` on ``inputs`` (name -> array); returns the
    outputs in order; a run longer than ``timeout`` seconds (the served subgraphs included) is killed. The TIDL subgraph calls run from ``model``: the partitioned IRModule (float
    emulator with ``kernels``), its QuantizedModel (fixed point), or ``{subgraph name: fn(list of
    arrays) -> list of arrays}``; a folder without TIDL calls needs none."""
    directory = os.path.abspath(os.fspath(directory))
    doc = read_graph(directory)
    target = doc["target"]
    tensors = {t["id"]: t for t in doc["tensors"]}
    if not isinstance(inputs, Mapping):
        raise TvmBackendError(f"run_deployed: inputs must be a mapping of input name to array, got "
                              f"{type(inputs).__name__}")
    names = [tensors[i]["name"] for i in doc["inputs"]]
    unknown = sorted(set(inputs) - set(names))
    if unknown:
        raise TvmBackendError(f"run_deployed: unknown input(s) {', '.join(unknown)}; the model takes {', '.join(names)}")
    payload = []
    for tid, name in zip(doc["inputs"], names):
        if name not in inputs:
            raise TvmBackendError(f"run_deployed: input '{name}' is missing")
        shape, dtype = _spec(tensors[tid])
        value = np.asarray(inputs[name])
        if value.shape != shape or value.dtype != dtype:
            raise TvmBackendError(f"run_deployed: input '{name}' must be {dtype} {shape}, got {value.dtype} {value.shape}")
        payload.append(np.ascontiguousarray(value).astype(dtype.newbyteorder("<"), copy=False).tobytes())
    calls = {n["subgraph"]: n for n in doc["nodes"] if n["kind"] == "tidl"}
    runners = _subgraph_runners(model, kernels)
    absent = sorted({n["name"] for n in calls.values()} - set(runners))
    if absent:
        raise TvmBackendError(f"run_deployed: {directory} calls TIDL subgraph(s) {', '.join('@' + a for a in absent)}; "
                              f"pass the partitioned model (or its QuantizedModel) to run them")
    exe = build_driver(directory, target)
    argv = [QEMU_AARCH64, "-L", AARCH64_SYSROOT, exe] if target == "arm" else [exe]
    with tempfile.TemporaryFile() as stderr:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        expired = threading.Event()

        def stop():  # a driver that hangs (or a pipe that never answers) ends after timeout seconds
            expired.set()
            proc.kill()

        watchdog = threading.Timer(timeout, stop)
        watchdog.daemon = True
        watchdog.start()
        pipe = _Pipe(proc, directory)
        failure: Optional[BaseException] = None
        outputs: List[np.ndarray] = []
        try:
            for data in payload:
                pipe.write(data)
            proc.stdin.flush()
            while True:
                tag = pipe.read(4)
                if tag == b"DONE":
                    for tid in doc["heads"]:
                        shape, dtype = _spec(tensors[tid])
                        raw = pipe.read(tensors[tid]["bytes"])
                        outputs.append(np.frombuffer(raw, dtype.newbyteorder("<")).astype(dtype).reshape(shape))
                    break
                if tag != b"TIDL":
                    raise TidlxInternalError(f"run_deployed: the driver sent {tag!r}, not a TIDL call or DONE")
                number, count = struct.unpack("<ii", pipe.read(8))
                node = calls.get(number)
                if node is None or count != len(node["inputs"]):
                    raise TidlxInternalError(f"run_deployed: the driver called TIDL subgraph {number} with {count} "
                                             f"inputs, which the graph does not have")
                arrays = []
                for tid in node["inputs"]:
                    (size,) = struct.unpack("<Q", pipe.read(8))
                    shape, dtype = _spec(tensors[tid])
                    if size != tensors[tid]["bytes"]:
                        raise TidlxInternalError(f"run_deployed: @{node['name']} input of {size} bytes, the graph "
                                                 f"says {tensors[tid]['bytes']}")
                    arrays.append(np.frombuffer(pipe.read(size), dtype.newbyteorder("<")).astype(dtype).reshape(shape))
                try:
                    results = list(runners[node["name"]](arrays))
                    reply = _reply(node, results, tensors)
                except BaseException as exc:
                    failure = exc
                    pipe.write(b"FAIL")
                    proc.stdin.flush()
                    break
                pipe.write(b"OKAY" + reply)
                proc.stdin.flush()
        except (EOFError, BrokenPipeError):
            pass  # the driver stopped: its exit status and stderr say why
        finally:
            try:
                proc.stdin.close()
            except BrokenPipeError:
                pass
            proc.wait()
            watchdog.cancel()
            proc.stdout.close()
        stderr.seek(0)
        message = stderr.read().decode(errors="replace").strip()
    if expired.is_set():
        raise TidlxInternalError(f"run_deployed: the driver of {directory} ran longer than {timeout} s (killed)")
    if failure is not None:
        raise failure
    if proc.returncode != 0 or len(outputs) != len(doc["heads"]):
        status = (f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}")
        raise TidlxInternalError(f"run_deployed: the driver of {directory} ({target}) failed ({status}): "
                                 f"{message[-4000:] or 'no message'}")
    return outputs


def _reply(node: dict, results: List[np.ndarray], tensors: dict) -> bytes:
    if len(results) != len(node["outputs"]):
        raise TidlxInternalError(f"@{node['name']} gave {len(results)} outputs, the graph has {len(node['outputs'])}")
    out = []
    for tid, value in zip(node["outputs"], results):
        shape, dtype = _spec(tensors[tid])
        value = np.asarray(value)
        if value.shape != shape:
            raise TidlxInternalError(f"@{node['name']} gave an output of shape {value.shape}, the graph has {shape}")
        out.append(np.ascontiguousarray(value.astype(dtype.newbyteorder("<"), copy=False)).tobytes())
    return b"".join(out)


__all__ = ["run_deployed", "build_driver", "read_graph", "missing_tools", "cache_root", "AARCH64_SYSROOT"]
