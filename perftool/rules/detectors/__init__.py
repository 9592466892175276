"""The detectors, one module each; a rule file names one of them in its ``detector`` field."""

from __future__ import annotations

from perftool.rules.detectors import (
    ai_cpu_ops,
    blocking_copies,
    cpu_fallback,
    exposed_transfers,
    host_bound,
    input_bound,
    offload_copies,
    recompilation,
    strided_copies,
    sync_points,
)
from perftool.rules.detectors.base import Detection, Detector, Scope

DETECTORS: dict[str, Detector] = {
    module.DETECTOR.name: module.DETECTOR
    for module in (
        host_bound,
        input_bound,
        recompilation,
        cpu_fallback,
        offload_copies,
        strided_copies,
        exposed_transfers,
        sync_points,
        blocking_copies,
        ai_cpu_ops,
    )
}
COMMON_VALUES: dict[str, str] = {
    "lost_ms": "time lost over the analysis window, ms",
    "per_step_ms": "time lost per steady step, ms",
    "share": "share of the steady-state step time lost",
    "family": "the device family advice is given for",
}

__all__ = ["COMMON_VALUES", "DETECTORS", "Detection", "Detector", "Scope"]
