"""The detectors: each a module with a ``DETECTOR``; a rule file names one in its ``detector`` field.

Detectors are plug-ins: every package may register its own under the entry-point group
``perftool.detectors`` (``name = "package.module:DETECTOR"``), as perftool registers its built-in ones
in its ``pyproject.toml``. A rule file (``--rules DIR``) then puts a plug-in's detector to work.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points

from perftool.rules.detectors.base import Detection, Detector, Scope, Setting

GROUP = "perftool.detectors"
BUILT_IN = (  # registered under GROUP by perftool itself; listed here too for a source tree never installed
    "host_bound",
    "input_bound",
    "recompilation",
    "cpu_fallback",
    "offload_copies",
    "strided_copies",
    "exposed_transfers",
    "sync_points",
    "blocking_copies",
    "ai_cpu_ops",
    "exposed_communication",
    "small_collectives",
    "straggler",
    "fp32_matmul",
    "unaligned_gemms",
    "small_gemms",
    "unfused_attention",
    "elementwise_chains",
    "small_grids",
    "occupancy",
)
COMMON_VALUES: dict[str, str] = {
    "lost_ms": "time lost over the analysis window, ms",
    "per_step_ms": "time lost per steady step, ms",
    "share": "share of the steady-state step time lost",
    "family": "the device family advice is given for",
}


def _registered() -> tuple[dict[str, Detector], dict[str, str]]:
    """Every detector by name, and the distribution (or module) each one comes from."""
    found: dict[str, Detector] = {}
    origin: dict[str, str] = {}
    for name in BUILT_IN:
        found[name] = import_module(f"perftool.rules.detectors.{name}").DETECTOR
        origin[name] = "perftool"
    for entry in entry_points(group=GROUP):
        if entry.value.startswith("perftool.rules.detectors."):
            continue  # a built-in one, loaded above
        detector = entry.load()
        if not isinstance(detector, Detector) or detector.name in found:
            continue  # not a detector, or a name already taken: the first one stays
        found[detector.name] = detector
        origin[detector.name] = entry.dist.name if entry.dist else entry.module
    return found, origin


DETECTORS, ORIGINS = _registered()

__all__ = ["COMMON_VALUES", "DETECTORS", "GROUP", "ORIGINS", "Detection", "Detector", "Scope", "Setting"]
