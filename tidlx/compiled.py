"""A compiled model as a folder (docs/artifacts.md): ``tidlx.compile_model`` writes it, ``tidlx.load_compiled``
reads it back and runs it.

    tidlx.compile_model(mod, "out/model_tidl", options={"tensor_bits": 8}, calib="frames.npz")
    compiled = tidlx.load_compiled("out/model_tidl")
    outputs = compiled.run({"img": frame})                    # TIDL subgraphs from their .bin files
    outputs = compiled.run(inputs, trace_dir="traces", debug_level=4)
    compiled.last_work                                        # the work per core of the last run

The folder: ``tidl_subgraph<N>_net.bin`` / ``_io_1.bin`` / ``.json`` per TIDL subgraph, the host part as
Relay text with its constants (``host_module.txt``) and ``tidlx_artifacts.json`` (the manifest: format,
options, inputs, outputs, each file's SHA-256). Loading checks every file before anything runs: a
missing, truncated, corrupted, foreign or newer-version file is an ``ArtifactError`` naming it.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .emulator.fixed import artifact_format as fmt
from .emulator.fixed.artifact_format import ArtifactError
from .emulator.fixed.artifact_reader import IoDescriptor, NetworkArtifact, read_io, read_network
from .emulator.fixed.artifact_runtime import (SubgraphRun, SubgraphWork, TraceWriter, artifact_kernel_set,
                                              run_artifacts)
from .ir import IRModule, TidlxError

MANIFEST = "tidlx_artifacts.json"
FOLDER_FORMAT = "tidlx-compiled-model"
#: Refuse manifests larger than this before parsing them (a manifest lists files, it is small).
MAX_MANIFEST_BYTES = 16 << 20


#: ``tidlx compile --target``: where the host part is built for (backends/tvm/deploy, docs/tvm.md)
HOST_TARGETS = ("x86", "arm", "c7x")


def compile_model(mod: IRModule, folder, options=None, calib=None, *, force: bool = False,
                  option_strings: Sequence[str] = (), calibration_name: Optional[str] = None,
                  target: Optional[str] = None, progress=None, name: Optional[str] = None) -> str:
    """Quantizes ``mod`` (``tidlx.quantize(mod, options, calib)``) and writes the compiled folder
    atomically; returns its path. ``options``: TI's options (a dict, ``key=value`` strings or a
    TidlOptions); an existing non-empty ``folder`` is replaced only with ``force``.

    ``target`` (``x86``, ``arm`` or ``c7x``): the host part is also built by apache-tvm for that target
    and written beside the TIDL artifacts as TI's flow names it (deploy_lib.so or deploy_lib.c,
    deploy_graph.json, deploy_params.params, the C driver; docs/tvm.md); without it the host part is
    only the IR (host_module.txt, always written). ``progress(stage, done, total)`` is called for the
    stages ``partition``, ``calibration`` (per frame), ``quantize``, ``host`` (the TVM build) and
    ``artifacts``; ``name`` goes into the generated C files' first line (default ``model``; not the
    folder's name, so the same model gives the same bytes wherever it is written)."""
    from . import __version__
    from .backends.tidl.artifacts import folder_files, write_folder
    from .backends.tidl.calibration import _options
    from .quantize_api import quantize

    if target is not None and target not in HOST_TARGETS:
        raise TidlxError(f"target {target!r}: the host part is built for one of {', '.join(HOST_TARGETS)}")
    step = progress if progress is not None else (lambda stage, done, total: None)

    opts = _options(list(options) if isinstance(options, (list, tuple)) else options)
    if opts.inference_mode == 1:
        main = mod["main"]
        for p in main.params:
            shape = getattr(p.checked_type, "shape", None) if p.checked_type is not None else None
            if shape:
                opts.validate_for_model(int(shape[0]))
                break
    if not option_strings:
        option_strings = ([f"{k}={v}" for k, v in options.items()] if isinstance(options, Mapping)
                          else list(options) if isinstance(options, (list, tuple)) else [])
    _check_target(folder, force)
    qmodel = quantize(mod, options, calib, progress=step)   # as given: disabled_passes reach the partition
    host_files: Dict[str, bytes] = {}
    if target is not None:
        step("host", 0, 1)
        host_files = _host_part_files(qmodel, target, name or "model")
        step("host", 1, 1)
    if calibration_name is None:
        calibration_name = (os.path.basename(os.fspath(calib)) if isinstance(calib, (str, os.PathLike))
                            else "random frames (seeded)" if calib is None else "arrays given in memory")
    step("artifacts", 0, 1)
    files = folder_files(qmodel, options=option_strings, calibration=calibration_name, tidlx_version=__version__,
                         host_files=host_files, host_target=target)
    written = write_folder(files, folder, force=force)
    step("artifacts", 1, 1)
    return written


def _host_part_files(qmodel, target: str, name: str) -> Dict[str, bytes]:
    """The deploy folder of the host part (backends/tvm/deploy) as {relative path: bytes}."""
    import tempfile

    from .backends.tvm.deploy import deploy

    with tempfile.TemporaryDirectory(prefix="tidlx-host-") as temp:
        deploy(qmodel, temp, target, name=name)
        files: Dict[str, bytes] = {}
        for root, _dirs, names in os.walk(temp):
            for file_name in names:
                path = os.path.join(root, file_name)
                with open(path, "rb") as f:
                    files[os.path.relpath(path, temp).replace(os.sep, "/")] = f.read()
    return files


def _check_target(folder, force: bool) -> None:
    """The checks write_folder makes, before the (long) quantization."""
    path = os.path.abspath(os.fspath(folder))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ArtifactError(f"{path}: exists and is not a folder")
    if os.path.isdir(path) and os.listdir(path) and not force:
        raise ArtifactError(f"{path}: the folder exists and is not empty (use --force to replace it)")
    if not os.path.isdir(os.path.dirname(path)):
        raise ArtifactError(f"{path}: the folder {os.path.dirname(path)} does not exist")


@dataclass
class CompiledSubgraph:
    function: str
    number: int
    network: NetworkArtifact
    io: IoDescriptor
    files: Tuple[str, str, str]


@dataclass
class CompiledModel:
    """A compiled folder, loaded: the host module, the subgraphs read from their .bin files, the manifest."""

    folder: str
    module: IRModule
    subgraphs: Dict[str, CompiledSubgraph]
    manifest: Mapping[str, Any]
    last_work: List[SubgraphWork] = field(default_factory=list)
    last_host: str = ""
    _kernels: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def output_names(self) -> List[str]:
        return list(self.manifest.get("output_names") or [])

    @property
    def debug_level(self) -> int:
        return int(self.manifest.get("debug_level", 0))

    def quantized_subgraphs(self):
        return {name: s.network.subgraph for name, s in self.subgraphs.items()}

    @property
    def host_target(self) -> Optional[str]:
        """The target the host part was built for (``tidlx compile --target``), or None (IR only)."""
        host = self.manifest.get("host")
        return host["target"] if isinstance(host, dict) else None

    def _runs(self, inference_mode: Optional[int], num_cores: Optional[int]) -> Dict[str, SubgraphRun]:
        return {name: SubgraphRun(s.network.subgraph,
                                  s.network.inference_mode if inference_mode is None else inference_mode,
                                  s.network.num_cores if num_cores is None else num_cores)
                for name, s in self.subgraphs.items()}

    def kernel_set(self, host: str = "fast", inference_mode: Optional[int] = None, num_cores: Optional[int] = None):
        key = (host, inference_mode, num_cores)
        ks = self._kernels.get(key)
        if ks is None:
            ks = self._kernels[key] = artifact_kernel_set(self._runs(inference_mode, num_cores), host)
        return ks

    def host_route(self, host: Optional[str] = None) -> Tuple[str, str]:
        """How ``run`` runs the host part: ``("deployed" | "ir", why)``. ``host=None`` takes the built
        host part when this machine can run it (x86 and c7x: gcc; arm: the cross compiler and qemu),
        else the IR; ``"deployed"`` insists (an error says what is missing), ``"ir"`` never uses it."""
        if host not in (None, "ir", "deployed"):
            raise TidlxError(f"host must be 'ir' or 'deployed', got {host!r}")
        target = self.host_target
        if host == "ir":
            return "ir", "the IR host part (host_module.txt) in the float emulator, as asked"
        if target is None:
            if host == "deployed":
                raise TidlxError(f"{self.folder}: has no built host part (compile it with --target x86|arm|c7x)")
            return "ir", "the IR host part (host_module.txt) in the float emulator: the folder has no built host part"
        from .backends.tvm.deploy.run import missing_tools

        missing = missing_tools(target)
        if missing:
            if host == "deployed":
                raise TidlxError(f"{self.folder}: running its {target} host part needs {', '.join(missing)} "
                                 f"(make system-packages installs them)")
            return "ir", (f"the IR host part (host_module.txt) in the float emulator: the {target} host part needs "
                          f"{', '.join(missing)}, not installed here")
        how = {"x86": "deploy_lib.so (TVM-built, x86) through the C driver",
               "arm": "deploy_lib.so (TVM-built, aarch64) through the C driver under qemu-aarch64",
               "c7x": "deploy_lib.c (TVM's C source for the C7x) built for this machine with the C driver"}[target]
        return "deployed", f"the host part as {how}; TIDL subgraphs from their artifacts over the driver's pipe"

    def run(self, inputs: Mapping[str, np.ndarray], *, host_kernels: str = "fast", trace_dir=None,
            debug_level: Optional[int] = None, inference_mode: Optional[int] = None,
            num_cores: Optional[int] = None, config=None, host: Optional[str] = None) -> List[np.ndarray]:
        """Runs the model: TIDL subgraphs in fixed point from their artifacts (in the compiled
        inference mode and cores, or those given), the host part in float: built for its target
        (``tidlx compile --target``) where this machine runs it, else the IR (``host_route``; how it
        ran is in ``last_host``). With ``debug_level`` >= 3
        (default: the compiled option) per-layer traces go to ``trace_dir`` (default: ``<folder>_traces``
        beside the folder). The work per core is in ``last_work``."""
        if not isinstance(inputs, Mapping):
            raise TypeError(f"CompiledModel.run: inputs must be a mapping of input name to array, got "
                            f"{type(inputs).__name__}")
        if inference_mode not in (None, 0, 1, 2):
            raise TidlxError(f"inference_mode must be 0, 1 or 2, got {inference_mode!r}")
        if num_cores is not None and (not isinstance(num_cores, int) or num_cores < 1):
            raise TidlxError(f"num_cores must be an integer >= 1, got {num_cores!r}")
        level = self.debug_level if debug_level is None else int(debug_level)
        observers = []
        tracer = None
        if level >= 3:
            folder = os.fspath(trace_dir) if trace_dir is not None else self.folder.rstrip(os.sep) + "_traces"
            try:
                tracer = TraceWriter(folder, level, {name: (s.number, s.network.subgraph)
                                                     for name, s in self.subgraphs.items()})
            except OSError as exc:
                raise TidlxError(f"{folder}: cannot create the trace folder ({exc.strerror})") from None
            observers.append(tracer)
        route, self.last_host = self.host_route(host)
        if route == "deployed":
            outputs, work = self._run_deployed(dict(inputs), self._runs(inference_mode, num_cores), observers)
        else:
            outputs, work = run_artifacts(self.module, dict(inputs), self.kernel_set(host_kernels, inference_mode,
                                                                                     num_cores),
                                          fixed_observers=observers, config=config)
        if tracer is not None:
            tracer.finish()
        self.last_work = work
        return outputs

    def _run_deployed(self, inputs, runs: Mapping[str, SubgraphRun], observers) -> Tuple[list, List[SubgraphWork]]:
        from .backends.tvm.deploy import run_deployed
        from .emulator.fixed.artifact_runtime import run_subgraph_on_cores

        work: List[SubgraphWork] = []

        def served(run_: SubgraphRun):
            def call(arrays):
                outs, done = run_subgraph_on_cores(run_, arrays, observers)
                work.append(done)
                return outs
            return call

        outputs = run_deployed(self.folder, inputs, {name: served(r) for name, r in runs.items()})
        return outputs, work

    def __repr__(self) -> str:
        return f"CompiledModel({self.folder!r}, {len(self.subgraphs)} TIDL subgraph(s))"


def _read(path: str, limit: Optional[int] = None) -> bytes:
    try:
        if limit is not None and os.path.getsize(path) > limit:
            raise ArtifactError(f"{path}: {os.path.getsize(path)} bytes, larger than a manifest can be")
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise ArtifactError(f"{path}: missing (the compiled folder lists it)") from None
    except IsADirectoryError:
        raise ArtifactError(f"{path}: is a folder, not a file") from None
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot be read ({exc.strerror})") from None


def read_manifest(folder: str) -> Dict[str, Any]:
    path = os.path.join(folder, MANIFEST)
    if not os.path.isdir(folder):
        raise ArtifactError(f"{folder}: no such folder" if not os.path.exists(folder) else
                            f"{folder}: not a folder (a compiled model is a folder with {MANIFEST})")
    if not os.path.exists(path):
        raise ArtifactError(f"{folder}: not a compiled tidlx folder (no {MANIFEST}; tidlx compile writes one)")
    raw = _read(path, MAX_MANIFEST_BYTES)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ArtifactError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FOLDER_FORMAT:
        raise ArtifactError(f"{path}: not a tidlx compiled-model manifest (format {FOLDER_FORMAT!r})")
    version = doc.get("version")
    try:
        major, minor = (int(v) for v in str(version).split("."))
    except ValueError:
        raise ArtifactError(f"{path}: version {version!r} is not MAJOR.MINOR") from None
    if major != fmt.FORMAT_MAJOR or minor > fmt.FORMAT_MINOR:
        raise ArtifactError(f"{path}: written in format {major}.{minor}; this tidlx reads {fmt.versions_read()}")
    _expect(doc, path, {"host_module": str, "subgraphs": list, "sha256": dict, "inputs": list,
                        "output_names": list, "debug_level": int})
    for i, entry in enumerate(doc["subgraphs"]):
        if not isinstance(entry, dict):
            raise ArtifactError(f"{path}: subgraphs[{i}] is not an object")
        _expect(entry, f"{path}: subgraphs[{i}]", {"function": str, "net": str, "io": str, "json": str})
    for name in doc["sha256"]:
        if not _is_folder_path(name):
            raise ArtifactError(f"{path}: lists the file {name!r}, which is not a file name in the folder")
    host = doc.get("host")
    if host is not None:
        if not isinstance(host, dict):
            raise ArtifactError(f"{path}: 'host' is not an object")
        _expect(host, f"{path}: host", {"target": str, "files": list})
        if host["target"] not in HOST_TARGETS:
            raise ArtifactError(f"{path}: host target {host['target']!r} is not one of {', '.join(HOST_TARGETS)}")
        for name in host["files"]:
            if not isinstance(name, str) or name not in doc["sha256"]:
                raise ArtifactError(f"{path}: host file {name!r} has no SHA-256 in the manifest")
    return doc


def _is_folder_path(name) -> bool:
    """A relative path inside the folder: plain names, or the host part's driver/... and include/..."""
    if not isinstance(name, str) or not name or "\\" in name or name.startswith("/"):
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


def _expect(doc, where: str, kinds: Mapping[str, type]) -> None:
    for key, kind in kinds.items():
        if not isinstance(doc.get(key), kind) or (kind is int and isinstance(doc.get(key), bool)):
            raise ArtifactError(f"{where}: '{key}' is missing or not a {kind.__name__}")


def load_compiled(folder) -> CompiledModel:
    """Reads a compiled folder (``tidlx compile``'s) and checks every file; returns a ``CompiledModel``."""
    from .api import parse_relay

    folder = os.fspath(folder)
    doc = read_manifest(folder)
    listed = doc["sha256"]
    contents: Dict[str, bytes] = {}
    for name, digest in sorted(listed.items()):
        data = _read(os.path.join(folder, name))
        if hashlib.sha256(data).hexdigest() != digest:
            raise ArtifactError(f"{os.path.join(folder, name)}: corrupted or replaced (its SHA-256 is not the "
                                f"one {MANIFEST} records)")
        contents[name] = data
    needed = [doc["host_module"]] + [e[k] for e in doc["subgraphs"] for k in ("net", "io", "json")]
    for name in needed:
        if name not in contents:
            raise ArtifactError(f"{os.path.join(folder, MANIFEST)}: names {name!r} but gives no SHA-256 for it")
    host_path = os.path.join(folder, doc["host_module"])
    try:
        module = parse_relay(contents[doc["host_module"]].decode("utf-8", "surrogatepass"), source_name=host_path)
    except UnicodeDecodeError:
        raise ArtifactError(f"{host_path}: not UTF-8 text") from None
    subgraphs: Dict[str, CompiledSubgraph] = {}
    for entry in doc["subgraphs"]:
        fn = entry["function"]
        net_path, io_path = os.path.join(folder, entry["net"]), os.path.join(folder, entry["io"])
        net = read_network(contents[entry["net"]], net_path)
        io = read_io(contents[entry["io"]], io_path, net)
        sub = net.subgraph
        if sub.name != fn or fn in subgraphs:
            raise ArtifactError(f"{net_path}: holds @{sub.name}, the manifest says @{fn}")
        try:
            func = module[fn]
        except Exception:
            raise ArtifactError(f"{host_path}: has no @{fn}, which {entry['net']} is") from None
        if len(func.params) != len(sub.inputs):
            raise ArtifactError(f"{net_path}: @{fn} takes {len(sub.inputs)} inputs, the host module's @{fn} "
                                f"{len(func.params)}")
        for param, t in zip(func.params, sub.inputs):
            shape = tuple(int(d) for d in getattr(param.checked_type, "shape", ()))
            if shape != sub.tensors[t].shape:
                raise ArtifactError(f"{net_path}: input '{sub.tensors[t].name}' is {list(sub.tensors[t].shape)}, the "
                                    f"host module passes {list(shape)}")
        number = int(fn.rpartition("_")[2]) if fn.rpartition("_")[2].isdigit() else len(subgraphs)
        subgraphs[fn] = CompiledSubgraph(fn, number, net, io, (entry["net"], entry["io"], entry["json"]))
    offloaded = {name for name, func in module.items() if func.attrs.get("Compiler") == "tidl"}
    if offloaded != set(subgraphs):
        raise ArtifactError(f"{host_path}: its TIDL functions {sorted(offloaded)} are not the folder's subgraphs "
                            f"{sorted(subgraphs)}")
    return CompiledModel(os.path.abspath(folder), module, subgraphs, doc)




def cmd_run_compiled(args) -> int:
    """``tidlx run DIR``: runs a compiled folder on ``--input``, prints each output, saves ``--output``,
    prints the work per core; ``args.debug_level`` / ``args.trace_dir`` (when the parser has them)
    override the compiled debug_level and the trace folder."""
    from .cli import describe_values
    from .files import npz_target, read_npz, write_npz
    from .ir.text import printable

    for option, value in (("--calib", getattr(args, "calib", None)), ("-o", getattr(args, "option", None)),
                          ("--batch", getattr(args, "batch", None)), ("--shapes", getattr(args, "shapes", None)),
                          ("--opset", getattr(args, "opset", None)), ("--params", getattr(args, "params", None))):
        if value:
            raise TidlxError(f"{option} does not apply to a compiled folder ({args.model}): its options, calibration "
                             f"and shapes were fixed by tidlx compile")
    if args.output:
        npz_target(args.output, "--output")
    from .cli import register_custom_ops

    register_custom_ops(getattr(args, "custom_ops", None) or ())
    try:
        compiled = load_compiled(args.model)
    except TidlxError as exc:
        if "unknown op" not in str(exc) or getattr(args, "custom_ops", None):
            raise
        first, newline, rest = str(exc).partition("\n")
        raise TidlxError(f"{first} (a custom op? register it as when the folder was compiled: --custom-ops "
                         f"MODULE:FUNC){newline}{rest}") from None
    inputs = read_npz(args.input, "--input")
    level = getattr(args, "debug_level", None)
    trace_dir = getattr(args, "trace_dir", None)
    outputs = compiled.run(inputs, debug_level=level, trace_dir=trace_dir, host=getattr(args, "host", None))
    print(printable(f"host part: {compiled.last_host}"))
    names = compiled.output_names
    if len(names) != len(outputs) or len(set(names)) != len(names):
        names = [f"output_{i}" for i in range(len(outputs))]
    for i, (name, out) in enumerate(zip(names, outputs)):
        print(printable(f"output {i} '{name}': shape {tuple(out.shape)} {out.dtype}, {describe_values(out)}"))
    for work in compiled.last_work:
        print(printable(work.describe()))
    level = compiled.debug_level if level is None else level
    if level >= 3:
        folder = trace_dir if trace_dir is not None else compiled.folder.rstrip(os.sep) + "_traces"
        print(printable(f"wrote per-layer traces (debug_level {level}) to {folder}"))
    if args.output:
        written = write_npz(args.output, dict(zip(names, outputs)), "--output")
        print(printable(f"wrote {written} (arrays {', '.join(names)})"))
    return 0


__all__ = ["CompiledModel", "compile_model", "load_compiled", "read_manifest", "cmd_run_compiled"]
