"""Pass infrastructure: named module passes, Sequential pipelines and a PassContext.

    @module_pass("DropIdentities", opt_level=1)
    def drop_identities(mod, ctx): return table.rewrite(mod)

    with PassContext(opt_level=2, disabled_passes=["FoldBatchNormIntoDense"]):
        mod = Sequential([FoldConstant, FoldBatchNormIntoDense, DeadCodeElimination])(mod)

A pass takes an IRModule and returns a new one; it never changes nodes of its input.
Disabled passes (by name) are skipped wherever they run, directly or inside a Sequential.
A Sequential also skips passes whose ``opt_level`` is above the context's, unless they are in
``required_passes``; calling a pass directly always runs it (unless disabled).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

from .errors import TidlxError, closest
from .module import IRModule


class PassError(TidlxError):
    """Bad pass options (unknown pass or config name, wrong value) or a pass that broke the IR."""


# -- registry of pass names and config options ---------------------------------------------------

_PASSES: Dict[str, "Pass"] = {}


@dataclass(frozen=True)
class ConfigOption:
    key: str
    type: type
    default: Any
    doc: str = ""


_CONFIG: Dict[str, ConfigOption] = {}


def register_config(key: str, value_type: type, default: Any, doc: str = "") -> ConfigOption:
    """Declares a PassContext config key (``"FoldConstant.max_growth"``) with its type and default."""
    option = ConfigOption(key, value_type, default, doc)
    _CONFIG[key] = option
    return option


register_config("verify_each_pass", bool, False,
                "run the IR verifier after every pass and name the pass that broke the module")


def _ensure_passes_loaded() -> None:
    from . import passes  # noqa: F401  (registers the built-in passes and their config keys)


def registered_passes() -> Dict[str, "Pass"]:
    _ensure_passes_loaded()
    return dict(_PASSES)


def config_options() -> Dict[str, ConfigOption]:
    _ensure_passes_loaded()
    return dict(_CONFIG)


# -- PassContext ---------------------------------------------------------------------------------

_state = threading.local()


def _names(value, what: str) -> List[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, Iterable):
        raise PassError(f"PassContext {what} must be a list of pass names, got {type(value).__name__}")
    out = []
    for v in value:
        if not isinstance(v, str):
            raise PassError(f"PassContext {what}: pass names are strings, got {type(v).__name__}")
        out.append(v.strip())
    return out


class PassContext:
    """Options for running passes; use as a context manager to make it current.

    ``opt_level`` (0-4) gates passes in a Sequential; ``disabled_passes`` names passes to skip
    (a list or a comma-separated string); ``required_passes`` run whatever their opt_level;
    ``config`` sets registered options (see ``config_options()``).
    """

    def __init__(self, opt_level: int = 2, config: Optional[Dict[str, Any]] = None,
                 disabled_passes=(), required_passes=()):
        if isinstance(opt_level, bool) or not isinstance(opt_level, int) or not 0 <= opt_level <= 4:
            raise PassError(f"PassContext opt_level must be an integer from 0 to 4, got {opt_level!r}")
        self.opt_level = opt_level
        known = registered_passes()
        self.disabled_passes = frozenset(self._check_names(_names(disabled_passes, "disabled_passes"),
                                                           known, "disabled_passes"))
        self.required_passes = frozenset(self._check_names(_names(required_passes, "required_passes"),
                                                           known, "required_passes"))
        both = self.disabled_passes & self.required_passes
        if both:
            raise PassError(f"PassContext: {', '.join(sorted(both))} is both disabled and required")
        self.config = self._check_config(dict(config or {}))
        #: (pass name, "ran" | "disabled" | "opt_level") for every pass this context saw.
        self.history: List[tuple] = []

    @staticmethod
    def _check_names(names: List[str], known: Dict[str, "Pass"], what: str) -> List[str]:
        for name in names:
            if name not in known:
                hint = closest(name, known)
                extra = f"; did you mean {', '.join(hint)}?" if hint else f"; known passes: {', '.join(sorted(known))}"
                raise PassError(f"PassContext {what}: unknown pass '{name}'{extra}")
        return names

    @staticmethod
    def _check_config(config: Dict[str, Any]) -> Dict[str, Any]:
        options = config_options()
        for key, value in config.items():
            option = options.get(key)
            if option is None:
                hint = closest(key, options)
                extra = f"; did you mean {', '.join(hint)}?" if hint else ""
                raise PassError(f"PassContext config: unknown option '{key}'{extra}")
            ok = isinstance(value, option.type) and not (option.type is not bool and isinstance(value, bool))
            if option.type is float and isinstance(value, int) and not isinstance(value, bool):
                ok = True
            if not ok:
                raise PassError(f"PassContext config '{key}' must be {option.type.__name__}, "
                                f"got {type(value).__name__} {value!r}")
        return config

    def get_config(self, key: str):
        """The configured value of a registered option, or its default."""
        if key in self.config:
            return self.config[key]
        option = config_options().get(key)
        if option is None:
            raise PassError(f"unknown pass config option '{key}'")
        return option.default

    def is_disabled(self, name: str) -> bool:
        return name in self.disabled_passes

    def __enter__(self) -> "PassContext":
        stack = getattr(_state, "stack", None)
        if stack is None:
            stack = _state.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _state.stack.pop()

    @staticmethod
    def current() -> "PassContext":
        stack = getattr(_state, "stack", None)
        if stack:
            return stack[-1]
        default = getattr(_state, "default", None)
        if default is None:
            default = _state.default = PassContext()
        return default

    def __repr__(self) -> str:
        return (f"PassContext(opt_level={self.opt_level}, disabled_passes={sorted(self.disabled_passes)}, "
                f"config={self.config})")


# -- passes --------------------------------------------------------------------------------------

class Pass:
    """A named transformation of IRModules. Subclasses implement ``transform(mod, ctx)``."""

    name: str = ""
    opt_level: int = 0
    description: str = ""

    def __call__(self, mod: IRModule) -> IRModule:
        return self.run(mod, PassContext.current())

    def run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        if not isinstance(mod, IRModule):
            raise PassError(f"pass {self.name} takes an IRModule, got {type(mod).__name__}")
        if ctx.is_disabled(self.name):
            ctx.history.append((self.name, "disabled"))
            return mod.copy()
        out = self.transform(mod, ctx)
        if not isinstance(out, IRModule):
            raise PassError(f"pass {self.name} returned {type(out).__name__}, not an IRModule")
        if out is mod:
            out = mod.copy()
        ctx.history.append((self.name, "ran"))
        if ctx.get_config("verify_each_pass") and not isinstance(self, Sequential):
            from .verify import verify

            try:
                verify(out)
            except TidlxError as exc:
                raise PassError(f"after pass {self.name}: {exc}") from None
        return out

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, opt_level={self.opt_level})"


def _register(p: Pass) -> Pass:
    if not isinstance(p.name, str) or not p.name:
        raise PassError("a pass needs a non-empty name")
    _PASSES[p.name] = p  # a redefinition (e.g. on module reload) replaces the old one
    return p


class ModulePass(Pass):
    """A pass from a function ``fn(mod, ctx) -> IRModule``."""

    def __init__(self, name: str, fn: Callable[[IRModule, PassContext], IRModule], opt_level: int = 0,
                 description: str = ""):
        self.name, self.fn, self.opt_level = name, fn, opt_level
        self.description = description or (fn.__doc__ or "").strip().split("\n")[0]
        _register(self)

    def transform(self, mod, ctx):
        return self.fn(mod, ctx)


def module_pass(name: str, opt_level: int = 0, description: str = ""):
    """Decorator: ``@module_pass("FoldConstant", opt_level=2)`` on ``fn(mod, ctx)``."""
    def wrap(fn):
        return ModulePass(name, fn, opt_level, description)
    return wrap


class FunctionPass(Pass):
    """A pass from ``fn(func, mod, ctx) -> Function`` applied to each global function
    (external ones, e.g. ``Compiler="tidl"``, are left alone unless ``include_external``)."""

    def __init__(self, name: str, fn, opt_level: int = 0, include_external: bool = False,
                 description: str = ""):
        self.name, self.fn, self.opt_level = name, fn, opt_level
        self.include_external = include_external
        self.description = description or (fn.__doc__ or "").strip().split("\n")[0]
        _register(self)

    def transform(self, mod, ctx):
        from .rewrite import is_external

        out = mod.copy()
        for gname, func in mod.items():
            if is_external(func) and not self.include_external:
                continue
            out[gname] = self.fn(func, mod, ctx)
        return out


def function_pass(name: str, opt_level: int = 0, include_external: bool = False, description: str = ""):
    def wrap(fn):
        return FunctionPass(name, fn, opt_level, include_external, description)
    return wrap


class Sequential(Pass):
    """Runs passes in order. Passes above the context's opt_level are skipped unless required."""

    def __init__(self, passes: Sequence[Pass], name: str = "Sequential", opt_level: int = 0):
        passes = list(passes)
        for i, p in enumerate(passes):
            if not isinstance(p, Pass):
                raise PassError(f"Sequential {name}: item {i} is {type(p).__name__}, not a pass")
        self.passes, self.name, self.opt_level = passes, name, opt_level
        if name != "Sequential":
            _register(self)  # a named pipeline can be disabled by its name

    def transform(self, mod, ctx):
        for p in self.passes:
            if p.opt_level > ctx.opt_level and p.name not in ctx.required_passes:
                ctx.history.append((p.name, "opt_level"))
                continue
            mod = p.run(mod, ctx)
        return mod

    def __repr__(self) -> str:
        return f"Sequential({self.name}: {', '.join(p.name for p in self.passes)})"


__all__ = ["Pass", "ModulePass", "FunctionPass", "Sequential", "PassContext", "PassError", "module_pass",
           "function_pass", "register_config", "registered_passes", "config_options", "ConfigOption"]
