"""perftool's layers: no module imports one that (through others) imports it back, and no package does either, so
every import points down the picture in docs/development.md's "How it is built". Imports inside functions count too."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from graphlib import CycleError, TopologicalSorter

from conftest import REPO

PACKAGE = REPO / "perftool"


def _imports() -> dict[str, set[str]]:
    """Each module of perftool (dotted name) and the modules of perftool it imports."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("perftool"):
                found = [f"{node.module}.{alias.name}" for alias in node.names]
                graph[name] |= {f if f in modules else str(node.module) for f in found}
            elif isinstance(node, ast.Import):
                graph[name] |= {alias.name for alias in node.names if alias.name in modules}
    return {name: {t for t in targets if t in modules and t != name} for name, targets in graph.items()}


def _circle(graph: dict[str, set[str]]) -> list[str]:
    """A circle of imports in ``graph``, or [] when there is none."""
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        return list(exc.args[1])
    return []


def _rooms(graph: dict[str, set[str]], room: Callable[[str], str]) -> dict[str, set[str]]:
    rooms: dict[str, set[str]] = {}
    for name, targets in graph.items():
        rooms.setdefault(room(name), set()).update(room(t) for t in targets if room(t) != room(name))
    return rooms


def _package(name: str) -> str:
    """The package a module belongs to under perftool (``perftool.rules`` for ``perftool.rules.engine``); the
    package's own ``__init__`` (the lazy front door) is left out, as nothing in perftool imports through it."""
    return ".".join(name.split(".")[:2])


def test_no_module_imports_itself_back():
    graph = _imports()
    assert len(graph) > 100  # every module was read
    assert _circle(graph) == []


def test_no_package_imports_itself_back():
    graph = _imports()
    packages = _rooms({k: v - {"perftool"} for k, v in graph.items() if k != "perftool"}, _package)
    assert {"perftool.trace", "perftool.rules", "perftool.predict", "perftool.api"} <= set(packages)
    assert _circle(packages) == []


def _picture_order() -> list[str]:
    """The packages in the order the picture in docs/development.md ("How it is built") lists them, top to bottom."""
    page = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    picture = page.split("## How it is built", 1)[1].split("```", 2)[1]
    return re.findall(r"^ (perftool\.\w+)", picture, flags=re.MULTILINE)


def test_the_documented_picture_is_true():
    """Each package the picture lists imports only packages listed above it."""
    order = _picture_order()
    assert {"perftool.trace", "perftool.rules", "perftool.predict", "perftool.api", "perftool.cli"} <= set(order)
    place = {package: index for index, package in enumerate(order)}
    packages = _rooms({k: v - {"perftool"} for k, v in _imports().items() if k != "perftool"}, _package)
    upward = [(a, b) for a, targets in packages.items() for b in targets if place.get(b, -1) > place.get(a, len(order))]
    assert upward == []


LAYERS = (  # every package and top-level module of perftool, bottom up: each imports only from layers below its own
    ("common",),  # errors, units, limits, names, documents, output files, start-up
    ("hardware",),
    ("trace",),  # reading: pieces, columns, the Trace
    ("dialects",),
    ("analysis",),  # steps, metrics, idle causes
    ("roofline", "emulator"),
    ("rules",),  # detectors and the engine
    ("predict",),
    ("pipeline",),  # read, info, scan
    ("job",),
    ("diff", "tune"),
    ("gate",),
    ("report",),  # the formats
    ("api",),
    ("cli",),
    ("__main__",),
)


def test_every_package_and_module_has_a_layer_and_imports_only_below_it():
    """A new package or top-level module fails here until it is given its place; an import sideways (within a
    layer) or upwards fails too, naming both ends."""
    layer = {f"perftool.{name}": tier for tier, names in enumerate(LAYERS) for name in names}
    rooms = _rooms({k: v - {"perftool"} for k, v in _imports().items() if k != "perftool"}, _package)
    found = set(rooms) | {target for targets in rooms.values() for target in targets}
    assert found - set(layer) == set(), "give each a place in LAYERS"
    assert set(layer) - found == set(), "LAYERS names what perftool no longer has"
    wrong = sorted((a, b) for a, targets in rooms.items() for b in targets if layer[b] >= layer[a])
    assert wrong == []


def test_the_layer_check_sees_an_import_sideways_or_upwards():
    rooms = {"perftool.analysis": {"perftool.rules"}, "perftool.roofline": {"perftool.emulator"}}  # up; sideways
    layer = {f"perftool.{name}": tier for tier, names in enumerate(LAYERS) for name in names}
    assert [(a, b) for a, targets in rooms.items() for b in targets if layer[b] >= layer[a]] == [
        ("perftool.analysis", "perftool.rules"),
        ("perftool.roofline", "perftool.emulator"),
    ]


def test_the_checks_find_a_circle_where_there_is_one():
    assert set(_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})) == {"a", "b", "c"}
    assert _circle({"a": {"b"}, "b": set()}) == []
    assert _rooms({"p.x.m": {"p.y.n"}, "p.y.n": {"p.x.o"}, "p.x.o": set()}, _package) == {
        "p.x": {"p.y"},
        "p.y": {"p.x"},
    }
    assert _circle(_rooms({"p.x.m": {"p.y.n"}, "p.y.n": {"p.x.o"}, "p.x.o": set()}, _package))


def test_the_top_level_holds_the_layers_packages_and_nothing_else():
    """``ls perftool`` reads as the picture: a package per layer, beside the package's own two files."""
    modules = {path.name for path in PACKAGE.glob("*.py")}
    packages = {path.name for path in PACKAGE.iterdir() if path.is_dir() and any(path.glob("*.py"))}
    assert modules == {"__init__.py", "__main__.py"}
    assert packages == {name for names in LAYERS for name in names} - {"__main__"}
