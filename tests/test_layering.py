"""The packages import each other in one direction only (docs/architecture.md).

Every import of every module is read from its source, including imports inside functions and
``importlib.import_module`` calls with a literal name, and resolved to the tidlx package it
reaches. Allowed:

    ir        <- nothing of ours
    frontends -> ir
    emulator  -> ir
    backends  -> ir, emulator
    tidlx     -> anything (the public API, the CLI, the built-in models)

so ``ir`` never reaches up, no package below ``tidlx`` reaches the API/CLI/SVG/models, and
``backends``/``emulator`` never read a frontend (ONNX op types come from the op facets).
"""

from __future__ import annotations

import ast
import graphlib
import os
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: folder -> the package it installs as (setup.py's package_dir)
FOLDERS = {"ir": "tidlx.ir", "frontends": "tidlx.frontends", "backends": "tidlx.backends",
           "emulator": "tidlx.emulator", "tidlx": "tidlx"}

ALLOWED = {
    "ir": set(),
    "frontends": {"ir"},
    "emulator": {"ir"},
    "backends": {"ir", "emulator"},
    "tidlx": {"ir", "frontends", "emulator", "backends"},
}


def layer_of(module: str) -> Optional[str]:
    """The layer a dotted module name belongs to, or None when it is not ours."""
    if module != "tidlx" and not module.startswith("tidlx."):
        return None
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in ("ir", "frontends", "backends", "emulator"):
        return parts[1]
    return "tidlx"


def modules() -> Iterator[Tuple[str, str, bool]]:
    """(path, dotted module name, is a package __init__) of every module we ship."""
    for folder, package in FOLDERS.items():
        root = os.path.join(REPO, folder)
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__")))
            rel = os.path.relpath(dirpath, root)
            pkg = package if rel == "." else package + "." + rel.replace(os.sep, ".")
            for name in sorted(filenames):
                if name.endswith(".py"):
                    is_init = name == "__init__.py"
                    yield os.path.join(dirpath, name), pkg if is_init else f"{pkg}.{name[:-3]}", is_init


def imported_names(path: str, module: str, is_init: bool) -> Iterator[Tuple[str, int]]:
    """(absolute module name, line) of each import in the file, wherever it stands."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    package = module if is_init else module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield target, node.lineno
            for alias in node.names:  # `from . import x` may name a submodule
                yield f"{target}.{alias.name}", node.lineno
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            name = node.args[0].value
            if name.startswith(".") and len(node.args) > 1:
                dots = len(name) - len(name.lstrip("."))
                base = package.split(".")
                base = base[:len(base) - (dots - 1)]
                name = ".".join(base + [name.lstrip(".")])
            yield name, node.lineno


def _is_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or \
        (isinstance(func, ast.Name) and func.id in ("import_module", "__import__"))


def package_edges() -> Dict[Tuple[str, str], List[str]]:
    """(from layer, to layer) -> the places (file:line -> module) that import across."""
    edges: Dict[Tuple[str, str], List[str]] = {}
    for path, module, is_init in modules():
        src = layer_of(module)
        for target, line in imported_names(path, module, is_init):
            dst = layer_of(target)
            if dst is None or dst == src:
                continue
            places = edges.setdefault((src, dst), [])
            place = f"{os.path.relpath(path, REPO)}:{line}"
            if not any(p.startswith(place + " ") for p in places):  # once per import statement
                places.append(f"{place} imports {target}")
    return edges


def back_edges(edges) -> List[str]:
    out = []
    for (src, dst), places in sorted(edges.items()):
        if dst not in ALLOWED[src]:
            out.append(f"{src} -> {dst}: " + "; ".join(sorted(set(places))))
    return out


def test_modules_are_found():
    found = {m for _, m, _ in modules()}
    assert {"tidlx.ir.op", "tidlx.emulator.interpreter", "tidlx.backends.tidl.flow", "tidlx.api",
            "tidlx.frontends.onnx.importer"} <= found


def test_no_back_edges_between_packages():
    problems = back_edges(package_edges())
    assert not problems, "imports against the layering:\n" + "\n".join(problems)


def test_package_graph_has_no_cycle():
    graph: Dict[str, Set[str]] = {layer: set() for layer in ALLOWED}
    for src, dst in package_edges():
        graph[src].add(dst)
    graphlib.TopologicalSorter(graph).static_order()  # raises CycleError on a cycle


@pytest.mark.parametrize("source, module, is_init, expected", [
    ("from ...ir.op import get_op\n", "tidlx.backends.tidl.flow", False, "tidlx.ir.op"),
    ("def f():\n    from tidlx.svg import render\n", "tidlx.backends.tidl.report", False, "tidlx.svg"),
    ("import importlib\nimportlib.import_module('tidlx.models')\n", "tidlx.ir.x", False, "tidlx.models"),
    ("from .. import emulator\n", "tidlx.ir", True, "tidlx.emulator"),
])
def test_imports_are_resolved(tmp_path, source, module, is_init, expected):
    """The checker itself: relative, nested and importlib imports all count."""
    path = tmp_path / "m.py"
    path.write_text(source)
    assert expected in {name for name, _ in imported_names(str(path), module, is_init)}


def test_a_back_edge_is_reported():
    edges = {("ir", "emulator"): ["ir/passes/x.py:3 imports tidlx.emulator.registry"],
             ("backends", "frontends"): ["backends/tidl/options.py:9 imports tidlx.frontends.onnx"]}
    problems = back_edges(edges)
    assert len(problems) == 2 and "ir -> emulator" in problems[1] and "backends -> frontends" in problems[0]
