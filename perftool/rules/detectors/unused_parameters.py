"""DDP's search for unused parameters: with ``find_unused_parameters=True`` the reducer walks the autograd graph.

At the end of each forward, DistributedDataParallel with ``find_unused_parameters=True`` traverses the autograd graph
from the outputs to find the parameters the backward will not reach, so that it marks them ready rather than waiting
for their gradients (``torch.distributed.ddp.reducer::search_unused_parameters``). The walk is on the host and grows
with the graph, the device idle meanwhile where the forward's work is done. The time lost is the device's idle time
while the host walks; the fix (no search where every parameter gets a gradient, or one search with a static graph) is
no knob of the emulator, so the gain is that bound.
"""

from __future__ import annotations

import numpy as np

from perftool.analysis import intervals
from perftool.dialects.vocabulary import UNUSED_PARAMETER_SEARCH
from perftool.rules.detectors.base import IDLE_WHILE_VALUES, Detection, Detector, Scope


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    trace = scope.trace
    calls = scope.host_calls(UNUSED_PARAMETER_SEARCH) if scope.idle is not None else np.zeros(0, dtype=np.int64)
    if calls.size == 0:
        return None
    lost, measured = scope.idle_while(intervals.union(trace.ts[calls], trace.end[calls]))
    if lost <= 0:
        return None
    values = {"per_step": scope.per_step(calls.size), **measured}
    return Detection(lost, values, scope.events(calls), occurrences=calls.size)


DETECTOR = Detector(
    name="unused_parameters",
    summary="DistributedDataParallel walking the autograd graph every forward for unused parameters",
    values={
        "per_step": "searches per steady step",
        "host_ms_per_step": "host time per step in the searches, ms",
        **IDLE_WHILE_VALUES,
    },
    detect=detect,
    sets_knobs=False,
)
