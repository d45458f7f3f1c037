"""The public entry points."""

from __future__ import annotations

import os
from typing import Mapping, Optional, Sequence, Union

from .ir import IRModule, TidlxError


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


def emulate(mod: IRModule, inputs: Mapping[str, "object"]) -> list:
    """Runs @main in the float32 reference emulator; inputs by parameter name.

    Returns the outputs as a list of numpy arrays (a tuple-valued result gives several).
    """
    from .emulator import run

    return run(mod, dict(inputs))
