"""The study file of ``tidlx sweep``: which models, which option sets, which measures.

    models:                                   # a path (relative to the study file) or a built-in model
      - a.onnx
      - {path: resnet18.txt, params: resnet18.params, name: r18}
      - {builtin: bevdet_img_stage_tiny, args: {backbone: resnet18, batch: 1}}
    grid:                                     # every combination (the first key varies slowest)
      max_num_subgraphs: [4, 16]
      deny_list: ["", "nn.batch_norm"]
      strategy: [greedy, max-offload]
    options:                                  # and/or a list of option sets (crossed with the grid)
      - {tensor_bits: 8}
      - {tensor_bits: 16}
    measures: [partition, compare]
    calib: frames.npz                         # or {random: 4, seed: 0}; a model may give its own
    compare: {frames: 1, worst_layers: 3}

Every problem is a ``StudyError`` naming ``file:line`` and the key (PyYAML's marks).
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..ir import TidlxError

#: What a cell can measure.
MEASURES = ("partition", "compare")

#: The option-set keys that are not TIDL options: the partitioning strategy (``tidlx.partition``'s
#: ``strategy=``); ``flow`` and ``disabled_passes`` are options ``tidlx.partition`` takes itself.
STRATEGY_KEY = "strategy"

TOP_KEYS = ("models", "grid", "options", "measures", "calib", "compare")
MODEL_KEYS = ("path", "builtin", "name", "args", "batch", "shapes", "opset", "params", "custom_ops", "calib")
COMPARE_KEYS = ("frames", "worst_layers")
CALIB_KEYS = ("random", "seed")


class StudyError(TidlxError):
    """A study file that cannot be run as written (names the file, line and key)."""


# -- YAML with line numbers -----------------------------------------------------------------------

class _Map(dict):
    """A YAML mapping that knows its line and the line of each key's value."""
    line = 0

    def __init__(self):
        super().__init__()
        self.lines: Dict[Any, int] = {}


class _Seq(list):
    """A YAML sequence that knows its line and each item's."""
    line = 0

    def __init__(self):
        super().__init__()
        self.lines: List[int] = []


def _loader(path: str):
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader, node):
        loader.flatten_mapping(node)
        out = _Map()
        out.line = node.start_mark.line + 1
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise StudyError(f"{path}:{line}: a key must be a name, got {type(key).__name__}")
            if key in out:
                raise StudyError(f"{path}:{line}: key '{key}' is given twice (first on line {out.lines[key]})")
            out[key] = loader.construct_object(value_node, deep=True)
            out.lines[key] = line
        return out

    def sequence(loader, node):
        out = _Seq()
        out.line = node.start_mark.line + 1
        for item in node.value:
            out.append(loader.construct_object(item, deep=True))
            out.lines.append(item.start_mark.line + 1)
        return out

    Loader.add_constructor("tag:yaml.org,2002:map", mapping)
    Loader.add_constructor("tag:yaml.org,2002:seq", sequence)
    return Loader


def read_yaml(path: str, text: Optional[str] = None):
    """The document of a YAML file as ``_Map``/``_Seq``/scalars; a syntax error names file:line:column."""
    import yaml

    if text is None:
        from ..files import read_text

        text = read_text(path, StudyError, what="study")
    try:
        return yaml.load(text, Loader=_loader(path))  # noqa: S506 (a SafeLoader subclass)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else path
        raise StudyError(f"{where}: not valid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise StudyError(f"{path}: not valid YAML: {exc}") from None


# -- the study ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CalibSpec:
    """Calibration frames: an ``.npz`` (``path``) or seeded random frames (``random`` of them)."""
    path: Optional[str] = None
    random: Optional[int] = None
    seed: int = 0

    def describe(self) -> str:
        return self.path if self.path is not None else f"random {self.random} (seed {self.seed})"


@dataclass
class ModelSpec:
    """One model of the study: a file or a built-in model with its arguments, and how to load it."""
    name: str
    line: int
    path: Optional[str] = None
    builtin: Optional[str] = None
    args: Dict[str, Any] = field(default_factory=dict)
    batch: Optional[int] = None
    shapes: Optional[Dict[str, Tuple[int, ...]]] = None
    opset: Optional[int] = None
    params: Optional[str] = None
    custom_ops: Tuple[str, ...] = ()
    calib: Optional[CalibSpec] = None

    @property
    def suffix(self) -> str:
        return ".onnx" if self.builtin is not None else os.path.splitext(self.path)[1].lower()


@dataclass(frozen=True)
class OptionSet:
    """One option set: ``options`` as ``tidlx.partition`` takes them and the ``strategy``; ``values`` all
    of them as the study wrote them (the table's option columns)."""
    index: int
    values: Tuple[Tuple[str, Any], ...]
    line: int

    @property
    def strategy(self) -> str:
        return dict(self.values).get(STRATEGY_KEY, "greedy")

    @property
    def options(self) -> Dict[str, Any]:
        return {k: v for k, v in self.values if k != STRATEGY_KEY}

    def label(self) -> str:
        return " ".join(f"{k}={_text(v)}" for k, v in self.values) or "(defaults)"


@dataclass
class Study:
    path: str
    models: List[ModelSpec]
    option_sets: List[OptionSet]
    measures: Tuple[str, ...]
    compare_frames: int = 1
    worst_layers: int = 3

    @property
    def option_names(self) -> List[str]:
        """Every option key in the order the study first names it (the table's option columns)."""
        seen: Dict[str, None] = {}
        for s in self.option_sets:
            for k, _ in s.values:
                seen.setdefault(k, None)
        return list(seen)


def _text(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return "" if value is None else str(value)


def _closest(name, known) -> str:
    hint = difflib.get_close_matches(str(name), known, n=1)
    return f" (did you mean '{hint[0]}'?)" if hint else f" (known: {', '.join(known)})"


def _check_keys(path: str, mapping: "_Map", known, what: str) -> None:
    for key in mapping:
        if key not in known:
            raise StudyError(f"{path}:{mapping.lines[key]}: {what}: unknown key '{key}'{_closest(key, known)}")


def _int(path: str, line: int, where: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise StudyError(f"{path}:{line}: {where} must be an integer >= {minimum}, got {value!r}")
    return value


def _calib(path: str, base: str, line: int, where: str, value) -> Optional[CalibSpec]:
    if value is None:
        return None
    if isinstance(value, str):
        full = value if os.path.isabs(value) else os.path.join(base, value)
        if not full.lower().endswith(".npz"):
            raise StudyError(f"{path}:{line}: {where}: calibration frames are an .npz of arrays by input name "
                             f"(frames on the batch axis) or {{random: N, seed: S}}, got '{value}'")
        if not os.path.isfile(full):
            raise StudyError(f"{path}:{line}: {where}: {value}: no such file")
        return CalibSpec(path=full)
    if isinstance(value, _Map):
        _check_keys(path, value, CALIB_KEYS, where)
        if "random" not in value:
            raise StudyError(f"{path}:{value.line}: {where}: write {{random: N, seed: S}} or the path of an .npz")
        count = _int(path, value.lines["random"], f"{where}: random", value["random"], 1)
        seed = _int(path, value.lines["seed"], f"{where}: seed", value["seed"], 0) if "seed" in value else 0
        return CalibSpec(random=count, seed=seed)
    raise StudyError(f"{path}:{line}: {where}: write the path of an .npz or {{random: N, seed: S}}, "
                     f"got {type(value).__name__}")


def _model(path: str, base: str, line: int, index: int, entry, calib: Optional[CalibSpec]) -> ModelSpec:
    from ..cli import parse_shapes
    from .models import BUILTIN_MODELS

    where = f"models[{index}]"
    if isinstance(entry, str):
        entry_map = _Map()
        entry_map.line = line
        entry_map["path"] = entry
        entry_map.lines["path"] = line
        entry = entry_map
    if not isinstance(entry, _Map):
        raise StudyError(f"{path}:{line}: {where}: write a model file's path or {{path: FILE}} / "
                         f"{{builtin: NAME, args: {{...}}}}, got {type(entry).__name__}")
    _check_keys(path, entry, MODEL_KEYS, where)
    lines = entry.lines
    given = [k for k in ("path", "builtin") if k in entry]
    if len(given) != 1:
        raise StudyError(f"{path}:{entry.line}: {where}: give either 'path' (a model file) or 'builtin' "
                         f"(a built-in model of tidlx.models), "
                         f"{'not both' if given else 'neither is given'}")
    spec = ModelSpec(name="", line=entry.line)
    if "path" in entry:
        value = entry["path"]
        if not isinstance(value, str) or not value:
            raise StudyError(f"{path}:{lines['path']}: {where}: path must be a file name, got {value!r}")
        full = value if os.path.isabs(value) else os.path.join(base, value)
        if not os.path.isfile(full):
            raise StudyError(f"{path}:{lines['path']}: {where}: {value}: no such file")
        from ..api import ONNX_SUFFIXES, RELAY_SUFFIXES

        if os.path.splitext(full)[1].lower() not in ONNX_SUFFIXES + RELAY_SUFFIXES:
            raise StudyError(f"{path}:{lines['path']}: {where}: {value}: unknown model format (expected .onnx, "
                             f"or .txt/.relay Relay text)")
        spec.path = full
        default_name = os.path.splitext(os.path.basename(value))[0]
        if "args" in entry:
            raise StudyError(f"{path}:{lines['args']}: {where}: args are a built-in model's arguments; "
                             f"a model file has none")
    else:
        name = entry["builtin"]
        if name not in BUILTIN_MODELS:
            raise StudyError(f"{path}:{lines['builtin']}: {where}: unknown built-in model '{name}'"
                             f"{_closest(name, sorted(BUILTIN_MODELS))}")
        spec.builtin = name
        args = entry.get("args", _Map())
        if not isinstance(args, _Map):
            raise StudyError(f"{path}:{lines['args']}: {where}: args must be a mapping of argument names to values")
        if "path" in args:
            raise StudyError(f"{path}:{args.lines['path']}: {where}: args: the sweep builds the model in memory; "
                             f"'path' is not an argument here")
        spec.args = dict(args)
        default_name = name + (f"({','.join(f'{k}={_text(v)}' for k, v in args.items())})" if args else "")
    if "name" in entry:
        if not isinstance(entry["name"], str) or not entry["name"]:
            raise StudyError(f"{path}:{lines['name']}: {where}: name must be a non-empty string")
        spec.name = entry["name"]
    else:
        spec.name = default_name
    relay = spec.builtin is None and spec.suffix != ".onnx"
    for key in ("batch", "opset"):
        if key in entry:
            if relay:
                raise StudyError(f"{path}:{lines[key]}: {where}: {key} applies to ONNX models; Relay text has "
                                 f"its shapes written in the text")
            setattr(spec, key, _int(path, lines[key], f"{where}: {key}", entry[key], 1))
    if "shapes" in entry:
        if relay:
            raise StudyError(f"{path}:{lines['shapes']}: {where}: shapes apply to ONNX models")
        value = entry["shapes"]
        try:
            if isinstance(value, _Map):
                spec.shapes = {str(k): tuple(_int(path, value.lines[k], f"{where}: shapes: {k}", d, 0) for d in v)
                               for k, v in value.items()}
            else:
                spec.shapes = parse_shapes([str(value)], "shapes")
        except TypeError:
            raise StudyError(f"{path}:{lines['shapes']}: {where}: shapes: write {{img: [1, 3, 224, 224]}} or "
                             f"'img:1x3x224x224'") from None
        except StudyError:
            raise
        except TidlxError as exc:
            raise StudyError(f"{path}:{lines['shapes']}: {where}: {exc}") from None
    if "params" in entry:
        if not relay:
            raise StudyError(f"{path}:{lines['params']}: {where}: params bind the constants of Relay text; an "
                             f"ONNX model holds its own weights")
        value = entry["params"]
        full = value if isinstance(value, str) and os.path.isabs(value) else os.path.join(base, str(value))
        if not os.path.isfile(full):
            raise StudyError(f"{path}:{lines['params']}: {where}: params {value}: no such file")
        spec.params = full
    if "custom_ops" in entry:
        value = entry["custom_ops"]
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
            raise StudyError(f"{path}:{lines['custom_ops']}: {where}: custom_ops: write MODULE:FUNC or a list "
                             f"of them (e.g. tidlx.models:register_bev_pool)")
        spec.custom_ops = tuple(items)
    spec.calib = _calib(path, base, lines.get("calib", entry.line), f"{where}: calib", entry.get("calib")) \
        if "calib" in entry else calib
    return spec


def _option_value(path: str, line: int, where: str, value):
    """An option value as ``-o`` would take it: scalars as they are, a list of names joined by commas."""
    if isinstance(value, list):
        if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
            raise StudyError(f"{path}:{line}: {where}: a list value must hold names or numbers")
        return ",".join(str(v) for v in value)
    if isinstance(value, dict) or (value is not None and not isinstance(value, (str, int, float, bool))):
        raise StudyError(f"{path}:{line}: {where}: an option value is a number, a name or a list of names, "
                         f"got {type(value).__name__}")
    if value is None:
        return ""
    return value


def _check_option(path: str, line: int, where: str, key: str, value) -> None:
    """One option alone, as ``tidlx.partition`` would read it: an unknown name or a bad value is an
    error before any cell runs."""
    import warnings

    from ..backends.tidl.flow import resolve_options
    from ..ir.partition import get_strategy

    if not isinstance(key, str):
        raise StudyError(f"{path}:{line}: {where}: an option name is a string, got {key!r}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if key == STRATEGY_KEY:
                get_strategy(value)
            else:
                resolve_options({key: value})
    except TypeError:
        raise StudyError(f"{path}:{line}: {where}: strategy must be a name, got {value!r}") from None
    except TidlxError as exc:
        raise StudyError(f"{path}:{line}: {where}: {exc}") from None


def _grid(path: str, grid) -> List[Tuple[Tuple[Tuple[str, Any], ...], int]]:
    if not isinstance(grid, _Map) or not grid:
        raise StudyError(f"{path}:{getattr(grid, 'line', 1)}: grid: write option names with a list of values each "
                         f"(max_num_subgraphs: [4, 16])")
    axes = []
    for key, values in grid.items():
        line = grid.lines[key]
        if not isinstance(values, list):
            values = [values]
        if not values:
            raise StudyError(f"{path}:{line}: grid: {key}: the list of values is empty")
        item_lines = getattr(values, "lines", [line] * len(values))
        axis = []
        for value, value_line in zip(values, item_lines):
            value = _option_value(path, value_line, f"grid: {key}", value)
            _check_option(path, value_line, f"grid: {key}", key, value)
            axis.append((key, value))
        axes.append(axis)
    return [(tuple(combo), grid.line) for combo in itertools.product(*axes)]


def _option_list(path: str, items) -> List[Tuple[Tuple[Tuple[str, Any], ...], int]]:
    if not isinstance(items, _Seq) or not items:
        raise StudyError(f"{path}:{getattr(items, 'line', 1)}: options: write a list of option sets "
                         f"(- {{max_num_subgraphs: 4}})")
    out = []
    for k, (item, line) in enumerate(zip(items, items.lines)):
        if item is None:
            item = _Map()
        if not isinstance(item, _Map):
            raise StudyError(f"{path}:{line}: options[{k}]: an option set is a mapping of option names to values")
        values = []
        for key, value in item.items():
            value = _option_value(path, item.lines[key], f"options[{k}]: {key}", value)
            _check_option(path, item.lines[key], f"options[{k}]: {key}", key, value)
            values.append((key, value))
        out.append((tuple(values), line))
    return out


def _check_option_set(path: str, option_set: OptionSet) -> None:
    import warnings

    from ..backends.tidl.flow import resolve_options

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            resolve_options(option_set.options)
    except TidlxError as exc:
        raise StudyError(f"{path}:{option_set.line}: option set {option_set.label()}: {exc}") from None


def parse_study(data, path: str) -> Study:
    """A ``Study`` from a YAML document (read by ``read_yaml``); ``path`` names the file in errors and
    anchors relative paths."""
    base = os.path.dirname(os.path.abspath(path))
    if not isinstance(data, _Map):
        raise StudyError(f"{path}:1: a study is a mapping with at least 'models' (and 'grid' or 'options', "
                         f"'measures')")
    _check_keys(path, data, TOP_KEYS, "study")
    if "models" not in data:
        raise StudyError(f"{path}:{data.line}: study: 'models' is missing (a list of model files or built-in "
                         f"models)")
    calib = _calib(path, base, data.lines.get("calib", 1), "calib", data.get("calib"))
    models = data["models"]
    if not isinstance(models, _Seq) or not models:
        raise StudyError(f"{path}:{data.lines['models']}: models: write a list of model files or built-in models")
    specs = [_model(path, base, line, k, entry, calib) for k, (entry, line) in enumerate(zip(models, models.lines))]
    names: Dict[str, ModelSpec] = {}
    for spec in specs:
        if spec.name in names:
            raise StudyError(f"{path}:{spec.line}: models: two models are named '{spec.name}' (the other on line "
                             f"{names[spec.name].line}): give one a 'name'")
        names[spec.name] = spec
    combos: List[Tuple[Tuple[Tuple[str, Any], ...], int]] = []
    if "grid" in data and "options" in data:
        grid = _grid(path, data["grid"])
        for values, line in _option_list(path, data["options"]):
            for grid_values, _ in grid:
                given = {k for k, _ in values}
                clash = [k for k, _ in grid_values if k in given]
                if clash:
                    raise StudyError(f"{path}:{line}: options: '{clash[0]}' is also a grid key (line "
                                     f"{data['grid'].lines[clash[0]]}): give it in one place")
                combos.append((values + grid_values, line))
    elif "grid" in data:
        combos = _grid(path, data["grid"])
    elif "options" in data:
        combos = _option_list(path, data["options"])
    else:
        combos = [((), data.line)]
    option_sets = [OptionSet(k, values, line) for k, (values, line) in enumerate(combos)]
    seen: Dict[Tuple, OptionSet] = {}
    for s in option_sets:
        _check_option_set(path, s)
        key = tuple(sorted((k, json.dumps(v)) for k, v in s.values))
        if key in seen:
            raise StudyError(f"{path}:{s.line}: the option set {s.label()} is given twice")
        seen[key] = s
    measures = data.get("measures", ["partition"])
    line = data.lines.get("measures", data.line)
    if isinstance(measures, str):
        measures = [measures]
    if not isinstance(measures, list) or not measures:
        raise StudyError(f"{path}:{line}: measures: write a list of {', '.join(MEASURES)}")
    for m in measures:
        if m not in MEASURES:
            raise StudyError(f"{path}:{line}: measures: unknown measure '{m}'{_closest(m, MEASURES)}")
    study = Study(path=path, models=specs, option_sets=option_sets,
                  measures=tuple(m for m in MEASURES if m in measures))
    if "compare" in data:
        settings = data["compare"]
        line = data.lines["compare"]
        if not isinstance(settings, _Map):
            raise StudyError(f"{path}:{line}: compare: write {{frames: N, worst_layers: N}}")
        _check_keys(path, settings, COMPARE_KEYS, "compare")
        if "frames" in settings:
            study.compare_frames = _int(path, settings.lines["frames"], "compare: frames", settings["frames"], 1)
        if "worst_layers" in settings:
            study.worst_layers = _int(path, settings.lines["worst_layers"], "compare: worst_layers",
                                      settings["worst_layers"], 0)
    return study


def load_study(study) -> Study:
    """A ``Study`` from a YAML file's path, or a ``Study`` as it is."""
    if isinstance(study, Study):
        return study
    if not isinstance(study, (str, os.PathLike)):
        raise StudyError(f"a study is the path of a YAML file, got {type(study).__name__}")
    path = os.fspath(study)
    if os.path.isdir(path):
        raise StudyError(f"{path}: is a folder, not a study file")
    if not os.path.exists(path):
        raise StudyError(f"{path}: no such file")
    return parse_study(read_yaml(path), path)


def digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()
