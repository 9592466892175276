"""Synchronisation points: the host blocks on the device every step (``loss.item()``, stream syncs).

Each sync drains the device's queue: once it returns, the device idles until the host has launched
the next work. The time lost is that idle time; the fix, reading back less often, is emulated as a loop
that no longer waits for each step.
"""

from __future__ import annotations

import numpy as np

from perftool.analysis.serving import OVERLAP_SCHEDULER, sglang_overlap
from perftool.rules.detectors.base import Detection, Detector, Scope, Setting, distinct_names, names_key
from perftool.trace.model import Kind, Role


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    trace = scope.trace
    rows = np.flatnonzero((trace.kind == Kind.SYNC) & trace.on_roles(Role.HOST) & scope.in_window)
    per_step = scope.metrics["sync.per_step"]
    if scope.idle is None or rows.size == 0 or not _often_enough(scope, per_step, params["min_per_step"]):
        return None  # without device tracks, a sync costs nothing this trace can show
    lost = scope.idle.time("sync")
    if lost <= 0:
        return None  # syncs the device never waits after (it was still busy) cost nothing
    names = distinct_names(trace, rows, 3)
    values = {
        "per_step": per_step,
        "names": names,
        "drain_ms_per_step": scope.per_step(lost) / 1e3,
        "overlap_scheduler": sglang_overlap(trace, scope.contexts),
    }
    changes = {"workload.sync_each_step": False}
    return Detection(
        lost, values, scope.events(rows), key=names_key(trace, rows), changes=changes, occurrences=rows.size
    )


def _often_enough(scope: Scope, per_step: float, least: float) -> bool:
    """Whether the syncs come ``least`` times a step, allowing for one step's sync past the window's end where the
    syncs recur (two or more in the window): one sync alone, at the end of a two-step capture, is no sync a step."""
    if per_step >= least:
        return True
    if not scope.steady_steps or not per_step >= 0:
        return False  # no steps to count syncs in (NaN a step)
    seen = round(per_step * scope.steady_steps)
    return seen >= 2 and per_step + 1 / scope.steady_steps >= least


DETECTOR = Detector(
    name="sync_points",
    summary="host-device synchronisations every step (.item(), stream synchronise)",
    values={
        "per_step": "synchronisations per steady step (nested ones count once)",
        "names": "the synchronising calls, most time first",
        "drain_ms_per_step": "device idle per step after the syncs drain its queue, ms",
        "overlap_scheduler": OVERLAP_SCHEDULER,
    },
    detect=detect,
    settings={"min_per_step": Setting(1.0, "report when at least this many syncs happen per step")},
)
