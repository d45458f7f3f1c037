"""``tidlx devices``: TI's target devices (the option ``target_device``), what each changes in tidlx and
where TI states each fact.

    tidlx devices                 # one table, then the sources of its columns
    tidlx devices am62a j784s4    # these devices only (TI's names or aliases, any case)
    tidlx devices --json          # the records of backends/tidl/devices.py, each fact with its source
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import List

COMMAND_ORDER = 61

#: The columns of the table: (heading, Device attribute).
COLUMNS = (("C7x", "c7x"), ("cores", "cores"), ("vector bits", "vector_bits"), ("activations", "tables"),
           ("softmax lanes", "softmax_lanes"), ("TI's scale type", "ti_scale_type"),
           ("TI runner calib.", "runner_calibration"))

_TABLES = {"lut": "8-bit tables", "ilut": "8-bit tables (iLUT)", "pla": "piecewise-linear sigmoid"}


def _cell(key: str, fact) -> str:
    value = fact.value
    if key == "tables":
        text = _TABLES.get(value, str(value))
    elif key == "runner_calibration":
        text = f"{value[0]} frames / {value[1]} it."
    else:
        text = str(value)
    return text + (" *" if fact.unverified else "")


def _chosen(names: List[str]):
    from .backends.tidl.devices import DEVICES, accepted_names, resolve
    from .backends.tidl.options import OptionError

    if not names:
        return list(DEVICES.values())
    out = []
    for name in names:
        try:
            dev = DEVICES[resolve(name)]
        except KeyError:
            raise OptionError(f"unknown target device {name!r}: the devices are {', '.join(accepted_names())}") \
                from None
        if dev not in out:
            out.append(dev)
    return out


def source_lines(devices) -> List[str]:
    """Where each column's facts come from (a column whose devices differ: one line per device)."""
    lines = ["sources (* = not stated by TI's material read; derived as the source says):"]
    for heading, key in (("TI's names and aliases", "soc"),) + COLUMNS:
        sources = []
        for dev in devices:
            src = getattr(dev, key).source
            if src not in sources:
                sources.append(src)
        if len(sources) == 1:
            lines.append(f"- {heading}: {sources[0]}")
        else:
            for dev in devices:
                lines.append(f"- {heading}, {dev.name}: {getattr(dev, key).source}")
    limits = []
    for dev in devices:
        for lim in dev.layer_limits:
            state = "checked by the partition" if lim.checked else "listed, not checked"
            limits.append(f"- {dev.name}: {lim.op} {lim.text} ({state}); {lim.source}")
    lines.append("documented layer limits:" if limits else "documented layer limits: none for these devices")
    lines.extend(limits)
    return lines


def cmd_devices(args) -> int:
    from rich.table import Table
    from rich.text import Text

    from .backends.tidl.devices import TIDL_DEFAULT_SCALE_TYPE
    from .cli import make_console
    from .ir.text import printable

    devices = _chosen(args.name)
    if args.json:
        sys.stdout.write(json.dumps([d.as_dict() for d in devices], indent=1) + "\n")
        return 0
    console = make_console()
    table = Table(title="TI's target devices (-o target_device=NAME)", title_justify="left")
    table.add_column("device")
    table.add_column("aliases")
    for heading, _ in COLUMNS:
        table.add_column(heading)
    table.add_column("layer limits", justify="right")
    for dev in devices:
        table.add_row(Text(dev.name), Text(", ".join(dev.aliases) or "-"),
                      *(Text(_cell(key, getattr(dev, key))) for _, key in COLUMNS), Text(str(len(dev.layer_limits))))
    console.print(table)
    notes = [
        "what tidlx applies: activations (sigmoid as TI's tables or AM62A's piecewise-linear one), the layer "
        "limits marked checked, num_cores at most the device's cores. Reported only: softmax lanes, cores for "
        "inference_mode 1 and 2, TI's runner calibration frames/iterations.",
        f"TI's scale type: what TI's runner presets for the device; where it is 4 (asymmetric per-channel) "
        f"tidlx takes it unless advanced_options:quantization_scale_type is given; elsewhere TIDL's default "
        f"{TIDL_DEFAULT_SCALE_TYPE}.",
        "without target_device: TIDL's own defaults (8-bit activation tables, no device layer limits).",
    ]
    for line in notes + source_lines(devices):
        console.print(Text(printable(line)))
    return 0


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Adds the ``devices`` command to ``tidlx``'s subparsers."""
    from .cli import subcommand

    p = subcommand(
        subparsers, "devices", "TI's target devices: what each changes (option target_device) and TI's sources",
        "List TI's target devices by TI's name (TDA4VM, AM62A, AM67A, AM68A, AM69A) with their J7 aliases, "
        "the facts tidlx uses or reports for each (C7x core and count, vector width, activation tables or "
        "piecewise-linear sigmoid, softmax lanes, TI's default quantization style, TI's runner calibration, "
        "documented layer limits) and where TI states each fact. Select a device with -o target_device=NAME "
        "on partition, compare, compile and report, or the options dict of the Python API.",
        ["tidlx devices", "tidlx devices am62a j784s4", "tidlx devices --json > devices.json"])
    p.add_argument("name", nargs="*", metavar="NAME", help="only these devices (TI's names or aliases, any case)")
    p.add_argument("--json", action="store_true", help="print the device records as JSON, each fact with its "
                                                       "source")
    p.set_defaults(func=cmd_devices)
    return p
