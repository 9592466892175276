"""Devices in turn: the analysed device idle while other devices its host drives compute.

One process driving several devices (a model split over GPUs layer by layer, as Accelerate's ``device_map="auto"``
places it; a pipeline run without micro-batches; ``nn.DataParallel``'s replicas) leaves each device waiting while the
others work on what it needs next. The idle attribution gives that time its own cause (``other_device``: the analysed
device idle while another device of the same host computes); the time lost is that. Devices that compute together
for less than :data:`TOGETHER` of the analysed device's busy time take turns (the model is split into stages run one
after another); otherwise they run at once and one waits for the others' larger share. The fix is no knob of the
emulator, which runs one device, so the gain is that bound.
"""

from __future__ import annotations

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.idle import other_devices_busy
from perftool.analysis.metrics import device_busy
from perftool.common.units import listed
from perftool.dialects.vocabulary import OTHER_DEVICES, SPARSE_CORE
from perftool.rules.detectors.base import Detection, Detector, Scope

TOGETHER = 0.5  # devices computing at once for less than this share of the analysed one's busy time take turns
LISTED = 3  # other devices named in the message, the rest counted


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    idle, trace = scope.idle, scope.trace
    if idle is None or not idle.time("other_device") > 0:
        return None
    waiting = idle.time("other_device")
    rows = trace.other_devices_work
    rows = rows[np.argsort(trace.ts[rows], kind="stable")]  # in time order, as the evidence's candidates
    theirs = other_devices_busy(trace, scope.lo, scope.hi)
    mine = device_busy(trace, scope.lo, scope.hi)
    together = intervals.overlap(mine, theirs) / intervals.total(mine) if intervals.total(mine) > 0 else 0.0
    devices = trace.metadata[OTHER_DEVICES]
    others = [name for name in devices["others"] if not SPARSE_CORE.search(name)]
    values = {
        "waiting_ms_per_step": scope.per_step(waiting) / 1e3,
        "device": devices["analysed"],
        "others": listed(others, LISTED),
        "devices": 1 + len(others),
        "together_share": together,
        "others_ms_per_step": scope.per_step(intervals.total(theirs)) / 1e3,
    }
    touched = intervals.touched(idle.gaps, idle.by_cause["other_device"])
    stretches = idle.gaps[0][touched], idle.gaps[1][touched]  # the idle stretches the other devices' work falls in
    evidence = scope.idle_stretches(stretches, rows, who="another device")
    variant = "unbalanced" if together >= TOGETHER else None
    return Detection(waiting, values, evidence, variant=variant, occurrences=stretches[0].size)


DETECTOR = Detector(
    name="devices_in_turn",
    summary="the device idle while other devices its host drives compute (a model split over devices in turn)",
    values={
        "waiting_ms_per_step": "device idle per steady step while other devices its host drives compute, ms",
        "device": "the device analysed, as the trace names it",
        "others": "the other devices its host drives, as the trace names them",
        "devices": "how many devices the host drives",
        "together_share": "share of the analysed device's busy time during which another of them computes too",
        "others_ms_per_step": "the other devices' busy time per steady step (their union), ms",
    },
    detect=detect,
    sets_knobs=False,
)
