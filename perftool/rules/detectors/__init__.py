"""The detectors: each a module with a ``DETECTOR``; a rule file names one in its ``detector`` field.

Detectors are plug-ins: every package may register its own under the entry-point group
``perftool.detectors`` (``name = "package.module:DETECTOR"``), as perftool registers its built-in ones
in its ``pyproject.toml``. A rule file (``--rules DIR``) then puts a plug-in's detector to work.
"""

from __future__ import annotations

from pkgutil import iter_modules

from perftool.common.plugins import registered
from perftool.rules.detectors.base import Detection, Detector, Scope, Setting

GROUP = "perftool.detectors"
OWN = "perftool.rules.detectors."  # where perftool's own detectors live


COMMON_VALUES: dict[str, str] = {
    "lost_ms": "time lost over the analysis window, ms",
    "per_step_ms": "time lost per steady step, ms",
    "share": "share of the steady-state step time lost",
    "family": "the device family advice is given for",
}


def built_in_modules() -> list[str]:
    """The modules of this package that hold a detector (every one but :mod:`.base`)."""
    return sorted(f"{OWN}{module.name}" for module in iter_modules(__path__) if module.name != "base")


def _registered() -> tuple[dict[str, Detector], dict[str, str]]:
    """Every detector by name, and the distribution (or module) each one comes from: perftool's own are its entry
    points too (:mod:`perftool.common.plugins`)."""
    found: dict[str, Detector] = {}
    origin: dict[str, str] = {}
    for entry in registered(GROUP):
        detector = entry.load()
        if entry.value.startswith(OWN):
            found[detector.name], origin[detector.name] = detector, "perftool"
            continue
        if not isinstance(detector, Detector) or detector.name in found:
            continue  # not a detector, or a name already taken: the first one stays
        found[detector.name] = detector
        origin[detector.name] = entry.dist.name if entry.dist else entry.module
    return found, origin


DETECTORS, ORIGINS = _registered()

__all__ = [
    "COMMON_VALUES",
    "DETECTORS",
    "GROUP",
    "ORIGINS",
    "built_in_modules",
    "Detection",
    "Detector",
    "Scope",
    "Setting",
]
