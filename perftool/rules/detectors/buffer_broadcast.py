"""DDP's buffer broadcast: DistributedDataParallel copies rank 0's buffers to every rank at the start of each forward.

With ``broadcast_buffers=True``, its default, each forward of a model that has buffers (BatchNorm's running
statistics) first flattens them into one tensor, broadcasts it from rank 0 and unflattens it back, a view and a copy
per buffer, all on the host before the forward's first op: milliseconds for a model of many small buffers, the device
idle meanwhile. The calls show inside DDP's ``DistributedDataParallel.forward`` annotation as
``aten::flatten_dense_tensors``, the broadcast (``c10d::broadcast_``, ``nccl:broadcast``) and
``aten::unflatten_dense_tensors``: a forward counts where it both broadcasts and flattens (a broadcast the model makes
itself flattens nothing). The time lost is the device's idle time while the host runs them, from the first to the last
of each forward's; the fix, not broadcasting buffers that need not be rank 0's at every step, is no knob of
the emulator, so the gain is that bound.
"""

from __future__ import annotations

import numpy as np

from perftool.analysis import intervals
from perftool.dialects.vocabulary import BROADCAST, BUFFER_SYNC, DDP_FORWARD
from perftool.rules.detectors.base import IDLE_WHILE_VALUES, Detection, Detector, Scope, distinct_names


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    trace = scope.trace
    forwards = scope.host_calls(DDP_FORWARD) if scope.idle is not None else np.zeros(0, dtype=np.int64)
    if forwards.size == 0:
        return None
    forwards = trace.top_level_by_track(forwards)
    forwards = forwards[np.argsort(trace.ts[forwards], kind="stable")]
    calls = scope.host_calls(BUFFER_SYNC)
    forward = scope.holding(forwards, calls)  # the forward each call starts in, if any
    calls, forward = calls[forward >= 0], forward[forward >= 0]
    # a forward's buffer sync: a broadcast and the flattening around it (a broadcast the model makes in its own
    # forward flattens nothing; flattening alone broadcasts nothing)
    broadcast = trace.name_matches(BROADCAST, calls)
    syncing = np.isin(forward, forward[broadcast]) & np.isin(forward, forward[~broadcast])
    if not syncing.any():
        return None
    order = np.argsort(forward[syncing], kind="stable")  # each forward's calls together
    calls, forward = calls[syncing][order], forward[syncing][order]
    first = np.flatnonzero(np.r_[True, forward[1:] != forward[:-1]])
    # from the first call to the last of each forward's sync
    syncs = intervals.union(np.minimum.reduceat(trace.ts[calls], first), np.maximum.reduceat(trace.end[calls], first))
    lost, measured = scope.idle_while(syncs)
    if lost <= 0:
        return None
    values = {"calls": distinct_names(trace, calls, 3), "per_step": scope.per_step(first.size), **measured}
    return Detection(lost, values, scope.events(calls), occurrences=first.size)


DETECTOR = Detector(
    name="buffer_broadcast",
    summary="DistributedDataParallel broadcasting the model's buffers from rank 0 at the start of every forward",
    values={
        "calls": "the calls that flatten, broadcast and unflatten the buffers, most time first",
        "per_step": "forwards that broadcast the buffers, per steady step",
        "host_ms_per_step": "host time per step from the first of a forward's calls to its last, ms",
        **IDLE_WHILE_VALUES,
    },
    detect=detect,
    sets_knobs=False,
)
