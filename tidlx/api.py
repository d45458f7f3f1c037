"""The public entry points."""

from __future__ import annotations

import os
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


def load(path: str, **kwargs) -> IRModule:
    """Loads a model: ONNX (``.onnx``; ``batch=``/``shapes=`` override input shapes) or
    Relay text (``.txt``, ``.relay``; ``params=`` as for ``parse_relay``)."""
    ext = os.path.splitext(path)[1].lower()
    if ext == ".onnx":
        from .frontends.onnx import load_onnx

        return load_onnx(path, **kwargs)
    if ext in (".txt", ".relay"):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise TidlxError(f"cannot read {path}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise TidlxError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        return parse_relay(text, source_name=path, **kwargs)
    raise TidlxError(f"{path}: unknown model format '{ext}' (expected .onnx, or .txt/.relay Relay text)")


def emulate(mod: IRModule, inputs: Mapping[str, "object"], *, kernels="fast") -> list:
    """Runs @main in the float32 emulator; inputs by parameter name.

    Returns the outputs as a list of numpy arrays (a tuple-valued result gives several).
    ``kernels``: ``"fast"`` (default) or ``"reference"`` (the plain-numpy definition), see ``tidlx.emulator.run``.
    """
    from .emulator import run

    return run(mod, dict(inputs), kernels=kernels)


def partition(mod: IRModule, options=None, strategy: str = "greedy"):
    """Partitions a model for TIDL as TI's TVM flow does; returns ``(IRModule, PartitionReport)``.

    ``options``: TI's compile options as a dict (``{"deny_list": "nn.batch_norm",
    "max_num_subgraphs": 8}``), a ``TidlOptions`` or ``key=value`` strings; tidlx's own
    ``disabled_passes`` skips graph preparation passes by name (as does a ``PassContext``
    with ``disabled_passes`` in effect). ``strategy``: ``greedy`` (TVM's), ``max-offload`` or
    ``min-transfer``. The module holds ``@main`` and the ``Compiler="tidl"`` subgraphs; the
    report says what runs where and why (``print(report)``, ``report.to_json()``,
    ``report.svg()``).
    """
    from .backends.tidl.flow import partition_for_tidl

    return partition_for_tidl(mod, options, strategy)
