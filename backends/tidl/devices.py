"""TI's target devices and what each one changes in TIDL, every fact with the place TI states it.

    dev = device("j721s2")        # -> the AM68A record (TI's names and aliases, any case)
    dev.tables.value              # "lut": 8-bit lookup tables for sigmoid, tanh, ...; "pla" on AM62A
    dev.softmax_lanes.value       # float lanes of the C7x vector (softmax sums per lane)
    softmax_lanes(None)           # 16: the lanes without a target device
    dev.ti_scale_type.value       # quantization_scale_type TI's runner presets for the device
    resolve("tda4vh")             # -> "AM69A" (None -> None: TIDL's own defaults)

The option ``target_device`` (``options.py``) takes these names. Without it TIDL's own defaults
apply: the import's options as TI documents them and the lookup-table activations of the C7x
devices that have a table unit. A ``Fact`` is a value and its source (repository and file, or
URL, and what it says there); ``unverified`` marks a value TI's material does not state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

# -- where the facts come from --------------------------------------------------------------------------
_TOOLS = "TexasInstruments/edgeai-tidl-tools"
_RUNNER = "TexasInstruments/edgeai-tidlrunner"
SRC_DEVICE_TABLE = f"{_TOOLS} README.md, Supported Devices (device family, SOC variable, J7 part names)"
SRC_C7X = ("TI PSDK RTOS build_flags.mak (tiovx / vision_apps): SOC j721e C7X_VERSION=C7100; j721s2, j784s4, "
           "j742s2 C7120; am62a C7504; j722s C7524")
SRC_CORES = ("TI vision_apps build_flags.mak: BUILD_CPU_C7x_1..N per SOC (j721e 1, j721s2 2, j784s4 4, "
             "j742s2 3, am62a 1, j722s 2); edgeai-tidl-tools examples/jupyter_notebooks/scripts/utils.py "
             "print_soc_info (J784S4/AM69A 4xDSP C7x-MMA, J722S/AM67A 2xDSP)")
SRC_VECTOR = ("TI AUDIOLIB/DSPLIB headers: vector byte width 64 (512 bit) on C7100/C7120, 32 (256 bit) on "
              "__C7504__/__C7524__")
SRC_LUT_TABLE = ("TIDL import tidl_import_lut_common.h, TIDL_LUTMethodMapTable (8-bit): TIDL_HW_LUT_8B on "
                 "J784S4/J742S2/J721E/J721S2, TIDL_SW_NONLUT_8B on AM62A, TIDL_HW_ILUT_8B on J722S")
SRC_LUT_DOC = (f"{_TOOLS} docs/supported_ops_rts_versions.md, Feature set comparison across devices: LUT "
               f"accelerated non-linear activations (Sigmoid, Hard Sigmoid, GELU, TanH, Softmax, ELU) on every "
               f"device but AM62A")
SRC_SOFTMAX_LANES = ("TIDL's softmax reference kernel (tidl_softmax_ref.h): the denominator is summed per "
                     "lane, lanes = VEC_NELEM(float), i.e. vector bytes / 4")
SRC_PRESETS = (f"{_RUNNER} tidlrunner/edgeai_tidlrunner/rtwrapper/options/presets.py, "
               f"TARGET_DEVICE_SETTINGS_PRESETS: TDA4VM quantization_scale_type 1 (P2) and calibration "
               f"iterations factor 2; AM62A, AM67A, AM68A, AM69A 4 (asymmetric per-channel)")
SRC_RUNNER_CALIB = (f"{_RUNNER} rtwrapper/options/options_default.py: calibration_frames 12, "
                    f"calibration_iterations 12; runtime_options.py multiplies both by the device's factor "
                    f"(TDA4VM 2) only when the model asks for slow calibration (fast_calibration False)")
SRC_ASYM_DOC = (f"{_TOOLS} docs/tidl_fsg_quantization.md: asymmetric quantization on every device except "
                f"TDA4VM/AM68PA; quantization_scale_type 4 recommended where supported")
SRC_OPS = f"{_TOOLS} docs/supported_ops_rts_versions.md, operator table"

#: TIDL's own import default of ``quantization_scale_type`` (docs/model_compilation.md: 0, NP2 weights).
TIDL_DEFAULT_SCALE_TYPE = 0


@dataclass(frozen=True)
class Fact:
    """A value and where TI states it; ``unverified``: TI's material read does not state it."""

    value: Any
    source: str
    unverified: bool = False

    def as_dict(self) -> Dict[str, Any]:
        return {"value": list(self.value) if isinstance(self.value, tuple) else self.value,
                "source": self.source, "unverified": self.unverified}


@dataclass(frozen=True)
class LayerLimit:
    """A support difference TI documents for some devices: the ONNX op, what is refused, the source,
    and whether tidlx applies it as a support rule (``checked``) or only lists it."""

    op: str
    text: str
    source: str
    checked: bool

    def as_dict(self) -> Dict[str, Any]:
        return {"op": self.op, "text": self.text, "source": self.source, "checked": self.checked}


@dataclass(frozen=True)
class Device:
    """One target device under TI's name, with the facts tidlx uses or reports."""

    name: str
    aliases: Tuple[str, ...]
    soc: Fact                   # TI's J7 / AM6x part names
    c7x: Fact                   # C7x core type
    cores: Fact                 # C7x cores (what inference_mode 1 and 2 may use)
    vector_bits: Fact           # C7x vector width
    tables: Fact                # "lut" (8-bit table unit), "ilut" (J722S), "pla" (software, no table unit)
    softmax_lanes: Fact         # float lanes of the vector
    ti_scale_type: Fact         # quantization_scale_type of TI's runner presets
    runner_calibration: Fact    # (calibration_frames, calibration_iterations) of TI's runner
    layer_limits: Tuple[LayerLimit, ...] = field(default=())

    @property
    def table_kind(self) -> str:
        """§8.10.2: "pla" where the device has no table unit (TI's piecewise-linear sigmoid), else "lut"
        (TI's 8-bit tables; J722S's iLUT is the same table)."""
        return "pla" if self.tables.value == "pla" else "lut"

    def as_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"name": self.name, "aliases": list(self.aliases)}
        for key in ("soc", "c7x", "cores", "vector_bits", "tables", "softmax_lanes", "ti_scale_type",
                    "runner_calibration"):
            out[key] = getattr(self, key).as_dict()
        out["layer_limits"] = [lim.as_dict() for lim in self.layer_limits]
        return out


# -- the documented support differences ----------------------------------------------------------------
LIMIT_CONV_PAD = LayerLimit(
    "Conv", "padding greater than the input width is not supported",
    f"{SRC_OPS}, Conv: \"Padding greater than input width is not supported for AM62A and AM67A\"", True)
LIMIT_DECONV_16 = LayerLimit(
    "ConvTranspose", "16-bit transposed convolution is not supported",
    f"{SRC_OPS}, ConvTranspose: \"16-bit Deconvolution is not suppported on AM62A and AM67A\"", True)
LIMIT_CONV_3S3 = LayerLimit(
    "Conv", "kernel 3x3 with stride 3 is not supported",
    f"{SRC_OPS}, Conv: \"Kernel size 3x3 with stride 3 is not supported in AM62A and AM67A\" (tidlx refuses "
    f"stride 3 on every device already)", False)
LIMIT_MATMUL_SIGNS = LayerLimit(
    "MatMul", "signed and unsigned inputs together are not supported",
    f"{SRC_OPS}, MatMul: \"MatMul with signed & unsigned input combination is not supported in TDA4VM\" (input "
    f"signedness is known only after calibration; not checked by the partition)", False)
_SMALL_C7X_LIMITS = (LIMIT_CONV_PAD, LIMIT_DECONV_16, LIMIT_CONV_3S3)


def _lanes(bits: int) -> Fact:
    lanes = bits // 32
    if bits == 512:
        return Fact(lanes, f"{SRC_SOFTMAX_LANES}: 16 on the 512-bit C7x")
    return Fact(lanes, f"{SRC_SOFTMAX_LANES}: {lanes} on a {bits}-bit C7x by the same rule; TI's softmax code "
                       f"for this core was not read", unverified=True)


def _device(name, aliases, soc, c7x, cores, bits, tables, tables_src, scale_type, calib, limits=()) -> Device:
    return Device(
        name=name, aliases=tuple(aliases), soc=Fact(soc, SRC_DEVICE_TABLE), c7x=Fact(c7x, SRC_C7X),
        cores=Fact(cores, SRC_CORES), vector_bits=Fact(bits, SRC_VECTOR), tables=Fact(tables, tables_src),
        softmax_lanes=_lanes(bits), ti_scale_type=Fact(scale_type, f"{SRC_PRESETS}; {SRC_ASYM_DOC}"),
        runner_calibration=Fact(calib, SRC_RUNNER_CALIB), layer_limits=tuple(limits))


#: TI's target devices, in the order of TI's runner (``TargetDeviceType``).
DEVICES: Dict[str, Device] = {d.name: d for d in (
    _device("TDA4VM", ("J721E", "AM68PA"), "J721E (TDA4VM, AM68PA)", "C7100", 1, 512, "lut",
            f"{SRC_LUT_TABLE}; {SRC_LUT_DOC}", 1, (12, 12), (LIMIT_MATMUL_SIGNS,)),
    _device("AM62A", (), "AM62A", "C7504", 1, 256, "pla", f"{SRC_LUT_TABLE}; {SRC_LUT_DOC}", 4, (12, 12),
            _SMALL_C7X_LIMITS),
    _device("AM67A", ("J722S",), "J722S (AM67A)", "C7524", 2, 256, "ilut",
            f"{SRC_LUT_TABLE}; {SRC_LUT_DOC}", 4, (12, 12), _SMALL_C7X_LIMITS),
    _device("AM68A", ("J721S2", "TDA4AL", "TDA4VL"), "J721S2 (AM68A, TDA4AL, TDA4VL)", "C7120", 2,
            512, "lut", f"{SRC_LUT_TABLE}; {SRC_LUT_DOC}", 4, (12, 12)),
    _device("AM69A", ("J784S4", "TDA4VH", "TDA4AH", "TDA4VP", "TDA4AP"),
            "J784S4 (AM69A, TDA4AP, TDA4VP, TDA4AH, TDA4VH)", "C7120", 4, 512, "lut",
            f"{SRC_LUT_TABLE}; {SRC_LUT_DOC}", 4, (12, 12)),
)}

_BY_NAME: Dict[str, str] = {}
for _d in DEVICES.values():
    for _n in (_d.name,) + _d.aliases:
        _BY_NAME[_n.upper()] = _d.name


def accepted_names() -> List[str]:
    """Every name ``target_device`` takes: TI's names, then the aliases."""
    names = list(DEVICES)
    names += [a for d in DEVICES.values() for a in d.aliases]
    return names


def resolve(name: Optional[str]) -> Optional[str]:
    """TI's canonical name for ``name`` (any case, ``-``/``_``/spaces ignored), None for None/empty;
    a name no device has raises ``KeyError``."""
    if name is None:
        return None
    text = str(name).strip().upper().replace("-", "").replace("_", "").replace(" ", "")
    if not text:
        return None
    if text not in _BY_NAME:
        raise KeyError(name)
    return _BY_NAME[text]


def device(name: Optional[str]) -> Optional[Device]:
    """The record of a device (any accepted name), or None for None."""
    canonical = resolve(name)
    return None if canonical is None else DEVICES[canonical]


#: Softmax lanes without a target device: the 512-bit C7x of TIDL's reference kernel.
DEFAULT_SOFTMAX_LANES = 16


def softmax_lanes(target_device: Optional[str] = None) -> int:
    """The float lanes TIDL's softmax sums its denominator over on ``target_device`` (16 without one)."""
    dev = device(target_device)
    return DEFAULT_SOFTMAX_LANES if dev is None else int(dev.softmax_lanes.value)


def softmax_exp_rule(target_device: Optional[str] = None) -> str:
    """§8.9 how TIDL's integer softmax computes an 8-bit input's exponentials on ``target_device``
    (tidl_softmax_ref.c, TIDL 11.x, by the C7x core it is built for): "taylor" (float32 ``exp_taylor``) on
    C7504/C7524 (AM62A, AM67A), "double" (libm ``exp``) on the others and without a device."""
    dev = device(target_device)
    return "taylor" if dev is not None and dev.c7x.value in ("C7504", "C7524") else "double"


def default_scale_type(target_device: Optional[str]) -> Optional[int]:
    """The ``quantization_scale_type`` a user who names ``target_device`` and no scale type gets: TI's
    tools' preset when it is 4 (asymmetric per-channel, emulated: docs/numerics.md §12), else None
    (TIDL's own default, 0, applies; TDA4VM's preset 1 is not taken over)."""
    dev = device(target_device)
    if dev is None or dev.ti_scale_type.value != 4:
        return None
    return 4


def scale_type_warning(target_device: Optional[str], scale_type_given: bool) -> Optional[str]:
    """A warning about the device's default quantization style: none now that tidlx takes TI's tools' style
    4 on the devices that default to it (``default_scale_type``); kept for callers that ask."""
    return None


def scale_type_line(target_device: Optional[str], scale_type: int, scale_type_given: bool) -> Optional[str]:
    """What the reports say about the quantization style a device chose (None when the user chose it or
    no device did): ``target_device=AM68A: quantization_scale_type 4 (TI's tools' default on AM68A)``."""
    dev = device(target_device)
    if dev is None or scale_type_given or default_scale_type(target_device) != scale_type:
        return None
    return (f"target_device={dev.name}: quantization_scale_type {scale_type} (asymmetric per-channel), TI's "
            f"tools' default on {dev.name}")


def rules_line(target_device: Optional[str]) -> str:
    """What the reports say about the device: whose rules applied."""
    dev = device(target_device)
    if dev is None:
        return "TIDL defaults (no target_device)"
    kind = "piecewise-linear sigmoid, no tables" if dev.table_kind == "pla" else "8-bit activation tables"
    return (f"{dev.name} ({dev.soc.value}; {dev.c7x.value} x{dev.cores.value}, {kind}, softmax "
            f"{dev.softmax_lanes.value} lanes)")


__all__ = ["Fact", "LayerLimit", "Device", "DEVICES", "TIDL_DEFAULT_SCALE_TYPE", "accepted_names", "resolve",
           "device", "softmax_lanes", "softmax_exp_rule", "DEFAULT_SOFTMAX_LANES", "scale_type_warning", "default_scale_type",
           "scale_type_line", "rules_line"]
