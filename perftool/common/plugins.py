"""Entry points: how perftool finds its detectors (``perftool.detectors``) and output formats
(``perftool.formats``), its own and other packages' alike.

perftool's own are listed once, in its ``pyproject.toml``. Where perftool runs from a source tree never
installed, no distribution lists them, so they are read from that file instead.
"""

from __future__ import annotations

import sys
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

OWN = "perftool."  # where perftool's own plug-ins live
_SOURCE_TREE_PROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@cache
def registered(group: str) -> tuple[EntryPoint, ...]:
    """The entry points of ``group``: perftool's own first, in the order its ``pyproject.toml`` lists them, then
    other packages'."""
    found = list(entry_points(group=group))
    own = [entry for entry in found if entry.value.startswith(OWN)]
    others = [entry for entry in found if not entry.value.startswith(OWN)]
    return (*(own or _listed_in_source_tree(group)), *others)


def _listed_in_source_tree(group: str) -> list[EntryPoint]:
    try:
        project = tomllib.loads(_SOURCE_TREE_PROJECT.read_text(encoding="utf-8"))
    except OSError:
        return []
    listed = project.get("project", {}).get("entry-points", {}).get(group, {})
    return [EntryPoint(name, value, group) for name, value in listed.items()]
