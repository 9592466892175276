"""Why the device is idle: every idle stretch of the analysis window attributed to one cause.

Causes are tried in the order of :data:`CAUSES`; each takes the idle time it covers that no
earlier cause took, so the parts add up to the device's idle time exactly. A blocking copy or a sync takes
the idle stretch that starts while the host is in it only until the host moves on to load or wait for its next
batch: from there the device waits for input. (A per-step sync exposes whatever the host does next, but the batch
it loads is the input's: workers that prepare it ahead remove that part, the sync or not.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.host_calls import blocking_copies
from perftool.analysis.metrics import device_busy
from perftool.analysis.steps import initialising
from perftool.dialects.vocabulary import CPU_FALLBACK
from perftool.trace.model import Kind, Phase, Role, Trace

CAUSES: dict[str, str] = {  # cause -> how reports name it
    "startup": "start-up",  # runtime or library initialisation (context creation, handles)
    "compile": "compiling",  # a graph or op compile
    "cpu_fallback": "CPU fallbacks",  # an op on the host, with its copies there and back
    "blocking_copy": "blocking copies",  # the host blocked in a copy to or from pageable memory, then re-filling
    "sync": "after syncs",  # the host blocked in a sync, then re-filling the queue
    "input_wait": "waiting for data",  # the training loop waiting for its next batch
    "other_device": "other devices computing",  # another device its host drives computing: a model split over them
    "launch": "kernel launches",  # short gaps while the host launches device work one call at a time
    "host": "host Python/dispatch",  # the host running ops or Python instead of feeding the device
    "input_pipeline": "input workers",  # workers still preparing the batch
    "h2d": "H2D copies",  # a host-to-device copy in flight
    "other": "unexplained",  # nothing traced explains it
}
SYNC_TOLERANCE_US = 1.0  # an idle stretch starting this close after a sync's end follows from it
LAUNCH_GAP_US = 30.0  # a host-caused idle stretch this short is the cost of launching one more call

_NOT_HOST_WORK = [Kind.STEP, Kind.ANNOTATION, Kind.INPUT, Kind.SYNC]


@dataclass
class IdleTime:
    """Device idle stretches in the window [lo, hi], and the pieces of them each cause explains."""

    lo: float
    hi: float
    gaps: intervals.Intervals
    by_cause: dict[str, intervals.Intervals]

    def time(self, cause: str) -> float:
        return intervals.total(self.by_cause[cause])

    @property
    def total(self) -> float:
        return intervals.total(self.gaps)


def attribute_idle(
    trace: Trace, lo: float, hi: float, known: dict[str, intervals.Intervals] | None = None
) -> IdleTime | None:
    """Attribute the device's idle time in [lo, hi] to :data:`CAUSES`; None when nothing runs on a device.

    ``known`` holds busy intervals already measured over the same window (``device``, ``h2d``; see
    :attr:`Metrics.busy <perftool.analysis.metrics.Metrics.busy>`), so they are not measured again.
    """
    spans = trace.phase == Phase.COMPLETE
    kind = trace.kind
    on_device = trace.on_roles(Role.DEVICE)
    if not (spans & on_device).any() or hi <= lo:
        return None

    def busy(mask: np.ndarray) -> intervals.Intervals:
        return intervals.busy(trace, mask, lo, hi)

    known = known or {}
    device = known["device"] if "device" in known else device_busy(trace, lo, hi)
    gaps = intervals.gaps(device, lo, hi)
    on_host = trace.on_roles(Role.HOST)
    syncs = busy(on_host & (kind == Kind.SYNC))
    copies = busy(blocking_copies(trace))
    host_work = host_busy(trace, lo, hi)
    input_waits = busy(on_host & (kind == Kind.INPUT))
    covers: dict[str, intervals.Intervals | Callable[[intervals.Intervals], np.ndarray]] = {
        "startup": busy(initialising(trace)),
        "compile": busy(kind == Kind.COMPILE),
        "cpu_fallback": fallback_round_trips(trace, lo, hi),
        "blocking_copy": lambda pieces: _starting_in(pieces, copies),
        "sync": lambda pieces: _starting_in(pieces, syncs),
        "input_wait": input_waits,
        "other_device": other_devices_busy(trace, lo, hi),
        "launch": lambda pieces: _launch_gaps(pieces, gaps, host_work),
        "host": host_work,
        "input_pipeline": busy(trace.on_roles(Role.INPUT) & (kind == Kind.INPUT)),
        "h2d": known["h2d"] if "h2d" in known else busy(kind == Kind.H2D),
    }
    by_cause: dict[str, intervals.Intervals] = {}
    remaining = gaps
    for cause, cover in covers.items():
        if not isinstance(cover, tuple):  # a cause that takes whole pieces: which of them
            taken = cover(remaining)
            loads = input_waits if cause in ("blocking_copy", "sync") else (np.empty(0), np.empty(0))
            kept, handed_on = _until(remaining[0][taken], remaining[1][taken], loads)
            by_cause[cause] = kept
            remaining = remaining[0][~taken], remaining[1][~taken]
            if handed_on[0].size:  # the rest of a piece goes on to the later causes, in time order
                remaining = intervals.union(np.r_[remaining[0], handed_on[0]], np.r_[remaining[1], handed_on[1]])
            continue
        by_cause[cause], remaining = intervals.split(remaining, cover, lo, hi)
    by_cause["other"] = remaining
    return IdleTime(lo, hi, gaps, by_cause)


def host_busy(trace: Trace, lo: float, hi: float) -> intervals.Intervals:
    """The union of the host's own calls in [lo, hi] (every call but steps, annotations, loading and syncs), measured
    once per trace and window: the idle attribution's host work, and the host's own work the fit reads."""

    def union() -> intervals.Intervals:
        return intervals.busy(trace, trace.on_roles(Role.HOST) & ~trace.of_kinds(*_NOT_HOST_WORK), lo, hi)

    return trace.derive(f"idle.host_busy {lo!r} {hi!r}", union)


def other_devices_busy(trace: Trace, lo: float, hi: float) -> intervals.Intervals:
    """The union of the other devices' work in [lo, hi], where the analysed device's host drives them too
    (:attr:`Trace.other_devices_work`)."""
    rows = trace.other_devices_work
    if rows.size == 0:
        return np.empty(0), np.empty(0)
    return intervals.clip(intervals.union(trace.ts[rows], trace.end[rows]), lo, hi)


def fallback_round_trips(trace: Trace, lo: float, hi: float) -> intervals.Intervals:
    """Each host-run fallback op widened to the device-to-host copy before it and the copy back after it."""
    ops = np.flatnonzero(trace.name_matches(CPU_FALLBACK) & (trace.phase == Phase.COMPLETE))
    if ops.size == 0:
        return np.empty(0), np.empty(0)
    starts, ends = trace.ts[ops].copy(), trace.end[ops].copy()
    reach = np.maximum(trace.dur[ops], SYNC_TOLERANCE_US)  # a copy further away than the op lasts is unrelated
    d2h = np.flatnonzero(trace.kind == Kind.D2H)
    if d2h.size:
        order = np.argsort(trace.end[d2h])
        copy_starts, copy_ends = trace.ts[d2h][order], trace.end[d2h][order]
        before = np.searchsorted(copy_ends, starts, side="right") - 1
        near = (before >= 0) & (starts - copy_ends[np.maximum(before, 0)] <= reach)
        starts = np.where(near, np.minimum(starts, copy_starts[np.maximum(before, 0)]), starts)
    h2d = np.flatnonzero(trace.kind == Kind.H2D)
    if h2d.size:
        order = np.argsort(trace.ts[h2d])
        copy_starts, copy_ends = trace.ts[h2d][order], trace.end[h2d][order]
        after = np.searchsorted(copy_starts, ends, side="left")
        index = np.minimum(after, copy_starts.size - 1)
        near = (after < copy_starts.size) & (copy_starts[index] - ends <= reach)
        ends = np.where(near, np.maximum(ends, copy_ends[index]), ends)
    return intervals.clip(intervals.union(starts, ends), lo, hi)


def _until(
    starts: np.ndarray, ends: np.ndarray, loads: intervals.Intervals
) -> tuple[intervals.Intervals, intervals.Intervals]:
    """Pieces cut where the host begins loading (one of the sorted, disjoint ``loads``) inside each, or at their start
    where it is loading already: the parts before, and the parts from there on."""
    begins, finishes = loads
    if begins.size == 0 or starts.size == 0:
        return (starts, ends), (np.empty(0), np.empty(0))
    ongoing = np.searchsorted(begins, starts, side="right") - 1  # the last load begun by each piece's start
    loading = (ongoing >= 0) & (finishes[np.maximum(ongoing, 0)] > starts)
    following = begins[np.minimum(np.searchsorted(begins, starts, side="left"), begins.size - 1)]
    at = np.where(loading, starts, following)
    cut = loading | ((following >= starts) & (following < ends))
    return (starts, np.where(cut, at, ends)), (at[cut], ends[cut])


def _starting_in(pieces: intervals.Intervals, spans: intervals.Intervals) -> np.ndarray:
    """Per idle piece: whether it starts while the host is in one of ``spans``, or just after one ends."""
    if spans[0].size == 0 or pieces[0].size == 0:
        return np.zeros(pieces[0].size, dtype=bool)
    index = np.searchsorted(spans[0], pieces[0], side="right") - 1
    return (index >= 0) & (pieces[0] <= spans[1][np.maximum(index, 0)] + SYNC_TOLERANCE_US)


def _launch_gaps(pieces: intervals.Intervals, gaps: intervals.Intervals, host: intervals.Intervals) -> np.ndarray:
    """Per idle piece: whether it lies in a stretch no longer than :data:`LAUNCH_GAP_US` and the host is busy in it."""
    if pieces[0].size == 0:
        return np.zeros(0, dtype=bool)
    stretch = np.searchsorted(gaps[0], pieces[0], side="right") - 1
    short = (gaps[1] - gaps[0])[stretch] <= LAUNCH_GAP_US
    return short & intervals.touched(pieces, host)
