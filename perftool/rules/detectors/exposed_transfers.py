"""Exposed host-to-device transfers: input copies the device waits for instead of overlapping them.

Either the copy runs on the compute stream itself (an IPU without IO tiles, a synchronous
``Memcpy HtoD`` on a GPU stream) or the device idles while a copy is in flight.
"""

from __future__ import annotations

import math

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.context import TraceAnalysis
from perftool.analysis.idle import fallback_round_trips
from perftool.dialects.vocabulary import REMOTE_BUFFER_COPY
from perftool.rules.detectors.base import Detection, Detector, Scope
from perftool.trace.model import Kind, Role, Trace


def serial_copies(scope: TraceAnalysis) -> float:
    """The window's time with an input copy on the device's own streams and no compute beside it (nor a CPU
    fallback's round trip, the CPU-fallback rule's copies), µs: device time that copies overlapped with compute
    would give back, beyond the device's idle. Measured once per trace and window (the rule and the sweep's pinned
    memory read it)."""
    return scope.trace.derive(f"exposed_transfers.serial {scope.lo!r} {scope.hi!r}", lambda: _serial_copies(scope))


def _serial_copies(scope: TraceAnalysis) -> float:
    trace = scope.trace
    on_stream = scope.busy(_inputs(trace) & trace.on_roles(Role.DEVICE))
    uncovered = intervals.subtract(on_stream, scope.compute, scope.lo, scope.hi)
    round_trips = fallback_round_trips(trace, scope.lo, scope.hi)
    return intervals.total(intervals.subtract(uncovered, round_trips, scope.lo, scope.hi))


def _inputs(trace: Trace) -> np.ndarray:
    """Per event: a host-to-device input copy (a remote-buffer copy of offloaded state is none)."""
    return (trace.kind == Kind.H2D) & ~trace.name_matches(REMOTE_BUFFER_COPY)


def detect(scope: Scope, params: dict[str, float]) -> Detection | None:
    waiting = scope.idle.time("h2d") if scope.idle is not None else 0.0
    lost = serial_copies(scope) + waiting
    if lost <= 0:
        return None
    trace = scope.trace
    rows = np.flatnonzero(_inputs(trace) & scope.in_window)
    io_tiles = scope.run.io_tiles_for_batch if scope.run else 0
    values = {
        "exposed_ms_per_step": scope.per_step(lost) / 1e3,
        "copies_per_step": scope.per_step(rows.size),
        "overlap_fraction": scope.metrics["h2d.overlap_fraction"],
        "io_tiles": io_tiles,
    }
    unsized = scope.family == "ipu" and not io_tiles  # a trace that does not record the micro-batch's size
    found = Detection(
        lost,
        values,
        scope.events(rows),
        variant="unsized" if unsized else None,
        changes={"io_tiles": io_tiles} if io_tiles else {},
        occurrences=rows.size,
    )
    if io_tiles:  # Graphcore's guide sweeps powers of two: the emulator says whether the next one does better
        rounded = int(2 ** math.ceil(math.log2(io_tiles)))
        if rounded != io_tiles:
            found.alternatives = [found.instead(None, {"io_tiles": rounded}, io_tiles=rounded)]
    return found


DETECTOR = Detector(
    name="exposed_transfers",
    summary="host-to-device input copies the device waits for",
    values={
        "exposed_ms_per_step": "copy time per steady step not overlapped with compute, ms",
        "copies_per_step": "host-to-device copies per steady step",
        "overlap_fraction": "share of copy time overlapping compute (h2d.overlap_fraction)",
        "io_tiles": "the fewest IO tiles that hold a micro-batch (emulated IPUs; else 0)",
    },
    detect=detect,
)
