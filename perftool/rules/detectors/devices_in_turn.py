"""Devices in turn: the analysed device idle while other devices its host drives compute.

One process driving several devices (a model split over GPUs layer by layer, as Accelerate's ``device_map="auto"``
places it; a pipeline run without micro-batches; ``nn.DataParallel``'s replicas, which Hugging Face's Trainer uses on
a machine of several GPUs when it is not launched with torchrun) leaves devices waiting while others work on what they
need next. The idle attribution gives the analysed device's such time its own cause (``other_device``); the others'
waits for it are the time it computes alone while one of them does a share of the work (:data:`PARTNER`). The time
lost is the larger of its wait, and its work alone as much as spreading it over every device would save. Devices that
compute together for less than :data:`TOGETHER` of the analysed device's busy time, and where it waits more than it
keeps the others waiting, take turns (the model is split into stages run one after another); otherwise one does
more of the work than the others. The fix is no knob of the emulator, which runs one device, so the gain is that
bound.
"""

from __future__ import annotations

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.idle import other_devices_busy
from perftool.analysis.metrics import device_busy
from perftool.common.units import listed
from perftool.dialects.vocabulary import OTHER_DEVICES, SPARSE_CORE
from perftool.rules.detectors.base import Detection, Detector, Scope
from perftool.trace.model import Role

TOGETHER = 0.5  # devices computing at once for less than this share of the analysed one's busy time take turns
PARTNER = 0.25  # another device with this share of the analysed one's device time works beside it (less: a trifle)
LISTED = 3  # other devices named in the message, the rest counted


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    idle, trace = scope.idle, scope.trace
    if idle is None or not trace.other_devices_work.size:
        return None
    theirs = other_devices_busy(trace, scope.lo, scope.hi)
    mine = device_busy(trace, scope.lo, scope.hi)
    devices = trace.metadata[OTHER_DEVICES]
    shares = {name: share for name, share in devices["others"].items() if not SPARSE_CORE.search(name)}
    others = list(shares)
    waiting = idle.time("other_device")
    apart = intervals.subtract(mine, theirs, scope.lo, scope.hi)  # it computes, none of them does
    alone = intervals.total(apart)
    # the others idle while it computes alone: spread over every device, that work would take 1/N of the time
    spread = alone * (1 - 1 / (1 + len(others))) if max(shares.values(), default=0.0) >= PARTNER else 0.0
    if not max(waiting, spread) > 0:
        return None
    busy = intervals.total(mine)
    together = intervals.overlap(mine, theirs) / busy if busy > 0 else 0.0
    values = {
        "waiting_ms_per_step": scope.per_step(waiting) / 1e3,
        "alone_ms_per_step": scope.per_step(alone) / 1e3,
        "device": devices["analysed"],
        "others": listed(others, LISTED),
        "devices": 1 + len(others),
        "together_share": together,
        "others_ms_per_step": scope.per_step(intervals.total(theirs)) / 1e3,
    }
    variant = "unbalanced" if together >= TOGETHER or spread > waiting else None
    if spread > waiting:  # the others wait for it: its work while they idle
        return Detection(
            spread, values, scope.events(_work_in(scope, apart)), variant=variant, occurrences=apart[0].size
        )
    touched = intervals.touched(idle.gaps, idle.by_cause["other_device"])
    stretches = idle.gaps[0][touched], idle.gaps[1][touched]  # the idle stretches the other devices' work falls in
    rows = trace.other_devices_work
    rows = rows[np.argsort(trace.ts[rows], kind="stable")]  # in time order, as the evidence's candidates
    evidence = scope.idle_stretches(stretches, rows, who="another device")
    return Detection(waiting, values, evidence, variant=variant, occurrences=stretches[0].size)


def _work_in(scope: Scope, pieces: intervals.Intervals) -> np.ndarray:
    """The analysed device's work in the window that runs in ``pieces`` (while no other device computes)."""
    trace = scope.trace
    rows = np.flatnonzero(trace.device_work(Role.DEVICE) & scope.in_window)
    return rows[intervals.overlaps_any(trace.ts[rows], trace.end[rows], *pieces)]


DETECTOR = Detector(
    name="devices_in_turn",
    summary="the device idle while other devices its host drives compute (a model split over devices in turn)",
    values={
        "waiting_ms_per_step": "device idle per steady step while other devices its host drives compute, ms",
        "alone_ms_per_step": "device busy per steady step while none of them computes, ms",
        "device": "the device analysed, as the trace names it",
        "others": "the other devices its host drives, as the trace names them",
        "devices": "how many devices the host drives",
        "together_share": "share of the analysed device's busy time during which another of them computes too",
        "others_ms_per_step": "the other devices' busy time per steady step (their union), ms",
    },
    detect=detect,
    sets_knobs=False,
)
