"""Running subgraphs read from artifacts: TI's inference modes on emulated C7x cores, per-layer traces.

    ks = artifact_kernel_set({"tidl_0": SubgraphRun(sub, mode=1, num_cores=2)}, host="fast")
    outputs, work = run_artifacts(module, inputs, ks, fixed_observers=[tracer])

Inference modes (TI's ``advanced_options:inference_mode``, SDK 9.1+):

* 0: the whole subgraph on one core.
* 1, high throughput: the batch split across ``num_cores`` cores, each running the whole subgraph on its
  frames, in parallel (a thread per core); outputs joined on the batch axis. A subgraph that mixes the
  batch axis (a reshape or transpose that moves it, a slice or concat along it) or whose batch does not
  split runs on core 0, and the work report says so.
* 2, low latency: one frame split across cores by rows: each row-local layer (convolution, pooling,
  element-wise, concat on channels, batch norm, ReLU) computes a band of output rows per core from the
  input rows its windows reach (a halo); other layers run whole on core 0.

Every mode gives the bits of mode 0: the integer arithmetic of a pixel does not depend on which core
computes it, and a band's pads are the full tensor's pads where the band touches the tensor's edge.
"""

from __future__ import annotations

import contextvars
import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ...ir.errors import TidlxInternalError
from ...ir.text import printable
from ..interpreter import EmulatorError, run
from ..registry import KernelSet, kernel_set
from . import arith
from .arith import FixedPointError
from .kernel_set import fixed_layer_kernels, global_call_transform
from .layers import KERNELS, FixedObservation, run_subgraph
from .network import QuantizedLayer, QuantizedSubgraph, QuantizedTensor

_OBSERVERS: contextvars.ContextVar = contextvars.ContextVar("tidlx_artifact_observers", default=())
_WORK: contextvars.ContextVar = contextvars.ContextVar("tidlx_artifact_work", default=None)


def layer_macs(layer: QuantizedLayer, tensors: Sequence[QuantizedTensor]) -> int:
    """Multiply-accumulates of a layer: weighted layers only (output elements x weights per output)."""
    if layer.weights is None or not layer.outputs:
        return 0
    out = int(np.prod(tensors[layer.outputs[0]].shape, dtype=np.int64))
    if layer.type in ("Conv", "InnerProduct"):
        return out * int(np.prod(layer.weights.shape[1:], dtype=np.int64))
    return out


@dataclass
class CoreWork:
    """What one emulated core did in one subgraph call."""

    core: int
    frames: int = 0
    rows: int = 0
    macs: int = 0
    layers: int = 0


@dataclass
class SubgraphWork:
    subgraph: str
    mode: int
    num_cores: int
    cores: List[CoreWork]
    note: str = ""

    def describe(self) -> str:
        parts = [f"core {c.core}: {c.frames} frame(s), {c.rows} row(s), {c.layers} layer run(s), {c.macs:,} MACs"
                 for c in self.cores]
        return f"@{self.subgraph} (inference_mode {self.mode}, {self.num_cores} core(s)): " + "; ".join(parts) + \
            (f" [{self.note}]" if self.note else "")


@dataclass(frozen=True)
class SubgraphRun:
    """A subgraph and how it runs: TI's inference mode and number of cores."""

    subgraph: QuantizedSubgraph
    mode: int = 0
    num_cores: int = 1


# -- mode 1: the batch across cores ---------------------------------------------------------------

def batch_split_refusal(sub: QuantizedSubgraph) -> Optional[str]:
    """Why a subgraph cannot run one part of its batch per core (None: it can)."""
    batches = {t.shape[0] if t.shape else None for t in sub.tensors}
    if len(batches) != 1 or None in batches:
        return "its tensors do not share one batch axis"
    for layer in sub.layers:
        a = layer.attrs
        if layer.type == "Transpose" and tuple(a.get("perm", (0,)))[:1] != (0,):
            return f"layer {layer.describe()} moves the batch axis"
        if a.get("axis") == 0:
            return f"layer {layer.describe()} works along the batch axis"
        if layer.type == "Slice":
            for ranges in a.get("slices", ()):
                if tuple(ranges[0]) != (0, sub.tensors[layer.inputs[0]].shape[0], 1):
                    return f"layer {layer.describe()} slices the batch axis"
    return None


def _batch_part(sub: QuantizedSubgraph, frames: int) -> QuantizedSubgraph:
    """The subgraph for ``frames`` frames of its batch (shapes and full-batch slices adjusted)."""
    batch = sub.tensors[0].shape[0]
    tensors = tuple(dataclasses.replace(t, shape=(frames,) + t.shape[1:]) for t in sub.tensors)
    layers = []
    for layer in sub.layers:
        if layer.type == "Slice":
            slices = tuple(((0, frames, 1),) + tuple(r[1:]) for r in layer.attrs["slices"])
            layer = dataclasses.replace(layer, attrs={**layer.attrs, "slices": slices})
        layers.append(layer)
    assert all(t.shape[0] == batch for t in sub.tensors)
    return dataclasses.replace(sub, layers=tuple(layers), tensors=tensors)


def _run_batch_split(run_: SubgraphRun, inputs: Sequence[np.ndarray], observers) -> Tuple[list, SubgraphWork]:
    sub, cores = run_.subgraph, run_.num_cores
    batch = sub.tensors[0].shape[0] if sub.tensors and sub.tensors[0].shape else 1
    refusal = batch_split_refusal(sub)
    if refusal is None and batch % cores:
        refusal = f"its batch {batch} is not a multiple of {cores} cores"
    if refusal is not None:
        outs = run_subgraph(sub, inputs, observers)
        work = [CoreWork(0, batch, 0, sum(layer_macs(x, sub.tensors) for x in sub.layers), len(sub.layers))] + \
               [CoreWork(c) for c in range(1, cores)]
        return outs, SubgraphWork(sub.name, 1, cores, work, f"on core 0 only: {refusal}")
    per_core = batch // cores
    part = _batch_part(sub, per_core)
    seen: List[List[FixedObservation]] = [[] for _ in range(cores)]

    def core_run(c: int):
        chunk = [np.asarray(x)[c * per_core:(c + 1) * per_core] for x in inputs]
        return run_subgraph(part, chunk, [seen[c].append] if observers else ())

    with ThreadPoolExecutor(max_workers=cores) as pool:
        results = list(pool.map(core_run, range(cores)))
    outs = [np.concatenate([r[k] for r in results], axis=0) for k in range(len(sub.outputs))]
    if observers:   # one observation per layer, as mode 0 makes it: the cores' parts joined
        for i, layer in enumerate(sub.layers):
            obs = [seen[c][i] for c in range(cores)]
            joined = FixedObservation(sub.name, layer,
                                      tuple(np.concatenate([o.inputs[k] for o in obs]) for k in range(len(obs[0].inputs))),
                                      tuple(np.concatenate([o.outputs[k] for o in obs])
                                            for k in range(len(obs[0].outputs))))
            for observer in observers:
                observer(joined)
    macs = sum(layer_macs(x, part.tensors) for x in part.layers)
    work = [CoreWork(c, per_core, 0, macs, len(part.layers)) for c in range(cores)]
    return outs, SubgraphWork(sub.name, 1, cores, work)


# -- mode 2: rows across cores ----------------------------------------------------------------------

#: Layer types whose output row r depends on input rows near r (a window) or on row r only.
_WINDOWED = ("Conv", "Pool")
_ROW_LOCAL = ("EltWise", "ReLU", "BatchNorm", "Concat")


def _bands(rows: int, cores: int) -> List[Tuple[int, int]]:
    base, extra = divmod(rows, cores)
    out, start = [], 0
    for c in range(cores):
        n = base + (1 if c < extra else 0)
        out.append((start, start + n))
        start += n
    return out


def _rows_split_reason(layer: QuantizedLayer, tensors) -> Optional[str]:
    if layer.type not in _WINDOWED + _ROW_LOCAL:
        return f"{layer.type} layers run whole"
    if any(len(tensors[t].shape) != 4 for t in layer.inputs + layer.outputs):
        return "not a 4-D NCHW tensor"
    if layer.type == "Pool" and layer.attrs.get("global_pool"):
        return "a global pool"
    if layer.type == "Concat" and layer.attrs.get("axis") not in (1, -3):
        return "a concat along a spatial axis"
    if layer.type == "EltWise" and len({tensors[t].shape for t in layer.inputs + layer.outputs}) != 1:
        return "a broadcasting element-wise layer"
    return None


class _RowSplitKernels(dict):
    """A kernel table for run_subgraph that computes each row-local layer as bands of rows, one per core."""

    def __init__(self, cores: int, pool: ThreadPoolExecutor, work: List[CoreWork]):
        super().__init__()
        self.cores, self.pool, self.work = cores, pool, work
        for name, kernel in KERNELS.items():
            self[name] = self._wrap(kernel)

    def _wrap(self, kernel):
        def banded(layer, xs, tensors):
            macs = layer_macs(layer, tensors)
            if _rows_split_reason(layer, tensors) is not None:
                self.work[0].macs += macs
                self.work[0].layers += 1
                return kernel(layer, xs, tensors)
            out_shape = tensors[layer.outputs[0]].shape
            bands = [b for b in _bands(out_shape[2], self.cores)]

            def band(c: int):
                r0, r1 = bands[c]
                if r0 == r1:
                    return None
                sub_layer, sub_xs = _band_inputs(layer, xs, r0, r1, out_shape[2])
                result = kernel(sub_layer, sub_xs, tensors)[0]
                if result.shape[2] != r1 - r0:
                    raise TidlxInternalError(f"row split of {layer.describe()}: rows {r0}..{r1} gave "
                                             f"{result.shape[2]} rows")
                return result

            parts = list(self.pool.map(band, range(self.cores)))
            for c, (r0, r1) in enumerate(bands):
                self.work[c].rows += r1 - r0
                self.work[c].macs += macs * (r1 - r0) // max(1, out_shape[2])
                self.work[c].layers += 1 if r1 > r0 else 0
            return [np.concatenate([p for p in parts if p is not None], axis=2)]
        return banded


def _band_inputs(layer: QuantizedLayer, xs: List[np.ndarray], r0: int, r1: int, out_rows: int):
    """The layer and inputs that compute output rows [r0, r1): row-local layers read the same rows,
    windowed ones the rows their windows reach, with the full pads only where the band meets an edge."""
    if layer.type not in _WINDOWED:
        return layer, [x[:, :, r0:r1] for x in xs]
    a = layer.attrs
    kh = int(a["kernel"][0]) if not np.isscalar(a["kernel"]) else int(a["kernel"])
    sh = int(a["strides"][0]) if not np.isscalar(a["strides"]) else int(a["strides"])
    dil = a.get("dilations", 1)
    dh = int(dil[0]) if not np.isscalar(dil) else int(dil)
    pt, pl, pb, pr = arith._pads4(a["pads"])
    h = xs[0].shape[2]
    start = r0 * sh - pt
    end = (r1 - 1) * sh - pt + dh * (kh - 1) + 1
    band_pt = max(0, -start) if r0 > 0 else pt
    band_pb = pb if r1 == out_rows else max(0, end - h)
    start, end = max(0, start), min(h, end) if r1 < out_rows else h
    pads = (band_pt, pl, band_pb, pr)
    return dataclasses.replace(layer, attrs={**a, "pads": pads}), [xs[0][:, :, start:end]]


def _run_rows_split(run_: SubgraphRun, inputs, observers) -> Tuple[list, SubgraphWork]:
    sub, cores = run_.subgraph, run_.num_cores
    batch = sub.tensors[0].shape[0] if sub.tensors and sub.tensors[0].shape else 1
    work = [CoreWork(c, frames=batch) for c in range(cores)]
    with ThreadPoolExecutor(max_workers=cores) as pool:
        outs = run_subgraph(sub, inputs, observers, kernels=_RowSplitKernels(cores, pool, work))
    split = sum(1 for x in sub.compute_layers() if _rows_split_reason(x, sub.tensors) is None)
    return outs, SubgraphWork(sub.name, 2, cores, work,
                              f"{split} of {len(sub.compute_layers())} layers split by rows, the others on core 0")


def run_subgraph_on_cores(run_: SubgraphRun, inputs: Sequence[np.ndarray],
                          observers: Sequence[Callable[[FixedObservation], None]] = ()) -> Tuple[list, SubgraphWork]:
    """One call of a subgraph in its inference mode: its outputs and the work per core."""
    if run_.mode == 0 or run_.num_cores == 1:
        sub = run_.subgraph
        # one core: the fast kernels (the plain ones' bits); split runs keep the plain kernels, each
        # emulated core a thread of its own, without the fast kernels' thread pool inside
        outs = run_subgraph(sub, inputs, observers, kernels=fixed_layer_kernels("fast"))
        batch = sub.tensors[0].shape[0] if sub.tensors and sub.tensors[0].shape else 1
        work = [CoreWork(0, batch, 0, sum(layer_macs(x, sub.tensors) for x in sub.layers), len(sub.layers))]
        return outs, SubgraphWork(sub.name, run_.mode, 1, work)
    if run_.mode == 1:
        return _run_batch_split(run_, inputs, observers)
    if run_.mode == 2:
        return _run_rows_split(run_, inputs, observers)
    raise FixedPointError(f"@{run_.subgraph.name}: inference_mode {run_.mode} is not 0, 1 or 2")


# -- the kernel set -------------------------------------------------------------------------------

class _ArtifactStep:
    __slots__ = ("run_",)

    def __init__(self, run_: SubgraphRun):
        self.run_ = run_

    def describe(self) -> str:
        return f"@{self.run_.subgraph.name} from its artifact (inference_mode {self.run_.mode})"

    def run(self, plan, values: list, stats):
        sub = self.run_.subgraph
        try:
            outs, work = run_subgraph_on_cores(self.run_, values, _OBSERVERS.get())
        except FixedPointError as exc:
            raise EmulatorError(f"emulator: {plan.where}, the call of @{sub.name} in fixed point failed: {exc}") \
                from exc
        log = _WORK.get()
        if log is not None:
            log.append(work)
        return tuple(outs) if sub.returns_tuple else outs[0]


def artifact_kernel_set(runs: Mapping[str, SubgraphRun], host: Union[str, KernelSet] = "fast") -> KernelSet:
    """A kernel set running each subgraph of ``runs`` (by global function name) in its inference mode
    and everything else with the ``host`` set."""
    base = kernel_set(host)
    transform = global_call_transform("tidl-artifacts", {name: _ArtifactStep(r) for name, r in runs.items()})
    return KernelSet(f"artifacts+{base.name}", base.facets,
                     (transform,) + base.transforms, base.context)


def run_artifacts(mod, inputs, kernels: KernelSet, *, fixed_observers: Sequence = (), config=None,
                  entry: str = "main") -> Tuple[list, List[SubgraphWork]]:
    """Runs ``@entry``: the outputs and the work per core of every subgraph call."""
    work: List[SubgraphWork] = []
    t1 = _OBSERVERS.set(tuple(fixed_observers))
    t2 = _WORK.set(work)
    try:
        return run(mod, inputs, entry, kernels=kernels, config=config), work
    finally:
        _WORK.reset(t2)
        _OBSERVERS.reset(t1)


# -- traces (debug_level >= 3) ----------------------------------------------------------------------

TRACE_SUFFIX = ".y"
FLOAT_SUFFIX = "_float.bin"
TENSOR_INFO_SUFFIX = "tensor_info.txt"
LAYER_INFO_SUFFIX = ".layer_info.txt"


def trace_base(subgraph_number: int) -> str:
    """The start of every trace name of subgraph N, as TI's runtime writes it: ``tidl_trace_subgraph_<N>_``
    (the graph name ``subgraph_<N>`` between ``tidl_trace_`` and the fields)."""
    return f"tidl_trace_subgraph_{subgraph_number}_"


def trace_name(base: str, tensor: QuantizedTensor) -> str:
    """TI's trace name: data id, then the dims N, D1, D2, C and W x H:
    ``<base>%04d_%04d_%04d_%05d_%05d_%05dx%05d.y``."""
    from .artifact_format import padded_dims

    n, d1, d2, c, h, w = padded_dims(tensor.shape)
    return f"{base}{tensor.id:04d}_{n:04d}_{d1:04d}_{d2:05d}_{c:05d}_{w:05d}x{h:05d}{TRACE_SUFFIX}"


def layer_info_name(subgraph_number: int) -> str:
    """The layer list of subgraph N: its network record's file name and ``.layer_info.txt``, as TI names
    the list beside its ``subgraph_<N>_tidl_net.bin``: ``tidl_subgraph<N>_net.bin.layer_info.txt``."""
    return f"tidl_subgraph{subgraph_number}_net.bin{LAYER_INFO_SUFFIX}"


def tensor_info_name(subgraph_number: int) -> str:
    """tidlx's own file beside the traces: per traced tensor its element type, tensorScale and zero point,
    which a raw ``.y`` file does not carry: ``tidl_trace_subgraph_<N>_tensor_info.txt``."""
    return f"{trace_base(subgraph_number)}{TENSOR_INFO_SUFFIX}"


TENSOR_INFO_HEADER = ("# tidlx tensor_info: dataIdx elementType tensorScale zeroPoint (elementType: TI's ids U8 0, "
                      "S8 1, U16 2, S16 3, U32 4, S32 5, F32 6; a real value is (q - zeroPoint) / tensorScale)")


def _layer_info_name_column(name: str, index: int) -> str:
    text = printable(name).strip()
    return text if text else f"layer{index}"


class TraceWriter:
    """A fixed-point observer writing TI's per-layer traces: one ``.y`` per layer output (raw dense values in
    the element type, little-endian), at level 4 also ``_float.bin`` (float32 of (q - zp) / tensorScale); per
    subgraph TI's ``tidl_subgraph<N>_net.bin.layer_info.txt`` (a line ``layerIdx dataIdx name`` per traced
    tensor; the name is the rest of the line) and tidlx's ``tidl_trace_subgraph_<N>_tensor_info.txt``
    (``dataIdx elementType tensorScale zeroPoint``, after a ``#`` header line)."""

    def __init__(self, folder: str, level: int, subgraphs: Mapping[str, Tuple[int, QuantizedSubgraph]]):
        """``subgraphs``: by function name, the subgraph's number N and the subgraph."""
        self.folder, self.level = folder, level
        self.numbers = {name: n for name, (n, _) in subgraphs.items()}
        self._tensors = {name: sub.tensors for name, (_, sub) in subgraphs.items()}
        self.info: Dict[str, List[str]] = {}
        self.tensor_info: Dict[str, List[str]] = {}
        self.written = 0
        os.makedirs(folder, exist_ok=True)
        for name in os.listdir(folder):   # an earlier run's traces would mix with this run's
            ours = name.startswith("tidl_trace_subgraph") or \
                (name.startswith("tidl_subgraph") and name.endswith(LAYER_INFO_SUFFIX))
            if ours and os.path.isfile(os.path.join(folder, name)):
                os.remove(os.path.join(folder, name))

    def __call__(self, obs: FixedObservation) -> None:
        layer = obs.layer
        if layer.type == "Data" and layer.inputs:
            return     # a subgraph output: its tensor was traced where it was made
        sub = obs.subgraph
        base = trace_base(self.numbers[sub])
        tensors = self._tensors[sub]
        lines = self.info.setdefault(sub, [])
        facts = self.tensor_info.setdefault(sub, [])
        for t, value in zip(layer.outputs, obs.outputs):
            tensor = tensors[t]
            name = trace_name(base, tensor)
            array = np.ascontiguousarray(value)
            array = array.astype(array.dtype.newbyteorder("<"), copy=False)
            with open(os.path.join(self.folder, name), "wb") as f:
                f.write(array.tobytes())
            if self.level >= 4:
                real = value.astype(np.float32) if tensor.is_float else \
                    ((value.astype(np.float64) - tensor.zero_point) / tensor.scale).astype(np.float32)
                with open(os.path.join(self.folder, name[:-len(TRACE_SUFFIX)] + FLOAT_SUFFIX), "wb") as f:
                    f.write(real.astype("<f4").tobytes())
            lines.append(f"{layer.index} {tensor.id} {_layer_info_name_column(layer.name, layer.index)}")
            facts.append(f"{tensor.id} {tensor.element_type} {float(tensor.scale)!r} {int(tensor.zero_point)}")
            self.written += 1

    def finish(self) -> None:
        for sub, lines in sorted(self.info.items()):
            number = self.numbers[sub]
            with open(os.path.join(self.folder, layer_info_name(number)), "w", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in lines))
            with open(os.path.join(self.folder, tensor_info_name(number)), "w", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in [TENSOR_INFO_HEADER] + self.tensor_info[sub]))


__all__ = ["SubgraphRun", "CoreWork", "SubgraphWork", "artifact_kernel_set", "run_artifacts",
           "run_subgraph_on_cores", "batch_split_refusal", "layer_macs", "TraceWriter", "trace_name", "trace_base",
           "layer_info_name", "tensor_info_name"]
