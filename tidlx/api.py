"""The public entry points."""

from __future__ import annotations

import os
import re
from typing import Mapping, Optional, Sequence, Union

from .ir import IRModule, TidlxError
from . import emulator as _emulator  # noqa: F401  (registers FoldConstant's constant evaluator)


def parse_relay(text: str, params: Optional[Union[Mapping, Sequence]] = None, *,
                source_name: str = "<string>") -> IRModule:
    """Parses Relay text as TVM prints it (``#[version = "0.0.5"]``).

    ``params`` supplies constants that the text refers to but does not contain: a list
    (or a mapping with int keys) fills ``meta[relay.Constant][i]``; str keys bind @main's
    parameters of that name to constants.
    """
    from .frontends.relay import parse

    return parse(text, params=params, source_name=source_name)


#: ONNX files; anything else ``load`` reads is Relay text.
ONNX_SUFFIXES = (".onnx",)
RELAY_SUFFIXES = (".txt", ".relay")


def load(path, *, batch: Optional[int] = None, shapes: Optional[Mapping[str, Sequence[int]]] = None,
         opset: Optional[int] = None, params=None, prequantized: bool = False) -> IRModule:
    """Loads a model file.

    * ONNX (``.onnx``): ``batch=`` sets dimension 0 of every input, ``shapes=`` whole input
      shapes by name (``{"img": (6, 3, 256, 704)}``), ``opset=`` the opset to read the model as.
    * Relay text (``.txt``, ``.relay``), as TVM prints it: ``params=`` supplies the constants the
      text refers to but does not hold (printed without metadata): a mapping (str keys bind
      @main's parameters of that name, int keys fill ``meta[relay.Constant][i]``), a list, or
      the path of an ``.npz`` or TVM params file (``tvm.runtime.save_param_dict``), whose keys
      ``meta[relay.Constant][i]`` fill the meta table and the others bind by name. Its shapes
      are written in the text, so ``batch``/``shapes``/``opset`` are refused.

    ``prequantized=True`` (what ``advanced_options:prequantized_model=1`` asks of the CLI): an ONNX QDQ
    model is imported as TIDL's prequantized import does, its Q/DQ pairs folded away, weights
    dequantized, and each activation pair's range kept for calibration (docs/prequantized.md).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"tidlx.load: path must be a file path (str or os.PathLike), got {type(path).__name__}")
    path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError(f"tidlx.load: path must be a file path as str, got {type(path).__name__}")
    ext = os.path.splitext(path)[1].lower()
    if ext in ONNX_SUFFIXES:
        if params is not None:
            raise TidlxError(f"{path}: params= binds the weights of Relay text; an ONNX model holds its own "
                             f"(its initializers)")
        from .frontends.onnx import from_onnx

        if prequantized:
            return _load_prequantized(path, batch, shapes, opset)
        mod = from_onnx(path, batch=batch, shapes=shapes, opset=opset)
        mod.attrs[ONNX_SOURCE_ATTR] = path   # TI's ONNX Runtime flow numbers the file's nodes (read when asked)
        return mod
    if ext in RELAY_SUFFIXES:
        given = [name for name, value in (("batch", batch), ("shapes", shapes), ("opset", opset))
                 if value is not None]
        if given:
            raise TidlxError(f"{path}: {'/'.join(given)}= appl{'ies' if len(given) == 1 else 'y'} to ONNX "
                             f"models; Relay text has its shapes written in the text")
        if isinstance(params, (str, os.PathLike)):
            params = relay_params(params)
        from .files import read_text

        return parse_relay(read_text(path), params=params, source_name=path)
    raise TidlxError(f"{path}: unknown model format '{ext}' (expected .onnx, or .txt/.relay Relay text)")


def _load_prequantized(path: str, batch, shapes, opset) -> IRModule:
    """An ONNX QDQ model as TIDL's prequantized import sees it: the float model of ``strip_qdq`` and
    its ranges on the module (``QDQ_RANGES_ATTR``); the node list is the stripped model's."""
    import onnx

    from .backends.tidl.calibration import QDQ_RANGES_ATTR, QDQ_ZERO_POINTS_ATTR
    from .backends.tidl.ort_flow import attach_onnx_nodes
    from .frontends.onnx import from_onnx
    from .frontends.onnx.prequantized import PrequantizedModelError, is_qdq, strip_qdq

    try:
        proto = onnx.load(path)
    except Exception as exc:
        raise TidlxError(f"{path}: not an ONNX model ({type(exc).__name__}: {exc})") from None
    if not is_qdq(proto):
        raise PrequantizedModelError(f"{path}: prequantized_model=1 but the model has no QuantizeLinear/"
                                     f"DequantizeLinear node (compile it without the option: it is calibrated)")
    zero_points: dict = {}   # asymmetric activation pairs: the quantization takes them in style 4 only
    try:
        stripped, ranges = strip_qdq(proto, zero_points)
    except PrequantizedModelError as exc:
        raise PrequantizedModelError(f"{path}: {exc}") from None
    mod = from_onnx(stripped, batch=batch, shapes=shapes, opset=opset)
    attach_onnx_nodes(mod, stripped)
    mod.attrs[QDQ_RANGES_ATTR] = dict(ranges)
    mod.attrs[QDQ_ZERO_POINTS_ATTR] = {name: (f"{path}: {where}", zp) for name, (where, zp) in zero_points.items()}
    return mod


#: The module attribute holding the path of the ONNX file a module was loaded from.
ONNX_SOURCE_ATTR = "onnx_source"

#: A params key that fills the meta table instead of binding a parameter by name.
_META_KEY = re.compile(r"meta\[relay\.Constant\]\[(\d+)\]")


def relay_params(path, what: str = "params") -> dict:
    """The constants of an ``.npz`` or TVM params file as ``parse_relay`` takes them: keys
    ``meta[relay.Constant][i]`` as int ``i`` (the meta table), the others as parameter names."""
    from .files import read_params

    out: dict = {}
    for name, array in read_params(path, what).items():
        meta = _META_KEY.fullmatch(name)
        out[int(meta.group(1)) if meta else name] = array
    return out


def emulate(mod: IRModule, inputs: Mapping[str, "object"], *, kernels="fast") -> list:
    """Runs @main in the float32 emulator; inputs by parameter name.

    Returns the outputs as a list of numpy arrays (a tuple-valued result gives several).
    ``kernels``: ``"fast"`` (default) or ``"reference"`` (the plain-numpy definition), see ``tidlx.emulator.run``.
    """
    from .emulator import run

    if not isinstance(inputs, Mapping):
        raise TypeError(f"tidlx.emulate: inputs must be a mapping of input name to array "
                        f"({{'img': array}}), got {type(inputs).__name__}")
    return run(mod, dict(inputs), kernels=kernels)


def partition(mod: IRModule, options=None, strategy: Optional[str] = "greedy"):
    """Partitions a model for TIDL as TI's TVM flow does; returns ``(IRModule, PartitionReport)``.

    ``options``: TI's compile options as a dict (``{"deny_list": "nn.batch_norm",
    "max_num_subgraphs": 8}``), a ``TidlOptions`` or ``key=value`` strings; tidlx's own
    ``disabled_passes`` skips graph preparation passes by name (as does a ``PassContext``
    with ``disabled_passes`` in effect). ``strategy``: ``greedy`` (TVM's; also for None),
    ``max-offload`` or ``min-transfer``. The module holds ``@main`` and the ``Compiler="tidl"`` subgraphs; the
    report says what runs where and why (``print(report)``, ``report.to_json()``,
    ``report.svg()``).
    """
    from .backends.tidl.flow import partition_for_tidl

    return partition_for_tidl(mod, options, "greedy" if strategy is None else strategy)
