"""The host's own work in a trace's window: its traced calls with the short gaps between them counted in (Python the
profiler does not record), less the time it waits (loading batches, syncs, copies that block it); and of that, the
part spent dispatching the step's ops one by one, which replaying the step as a device graph leaves out."""

from __future__ import annotations

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.context import TraceAnalysis
from perftool.analysis.host_calls import blocking_copies
from perftool.analysis.idle import host_busy
from perftool.dialects.vocabulary import ALLOCATION, DEALLOCATION, GRAPH_LAUNCH, LAUNCH, MEMCPY
from perftool.trace.model import Kind, Role, Trace

UNTRACED_PYTHON_US = 1000.0  # a host gap this short between traced calls is Python the profiler does not record
BETWEEN_OPS_US = 100.0  # a gap this short between two dispatching calls is the model's Python from one op to the next
ONE_TIME_LAUNCH = 10.0  # a launch call this many times the median launch's length loads code; it is not overhead


def own_work(trace: Trace, scope: TraceAnalysis) -> intervals.Intervals:
    """The host's own work in the window: every traced call but steps, annotations, loading and syncs, measured once
    per trace and window."""

    def own() -> intervals.Intervals:
        return _bridged(trace, scope, host_busy(trace, scope.lo, scope.hi))

    return trace.derive(f"host_work.own {scope.lo!r} {scope.hi!r}", own)


def dispatch_per_step(trace: Trace, scope: TraceAnalysis) -> float:
    """The host's time per steady step dispatching the step's ops one by one, µs: its runtime calls and the ops that
    make them, with the gaps between them up to :data:`BETWEEN_OPS_US` (the model's Python from one op to the next),
    less its waits, the allocator's calls (churn, even inside an op) and launches that load code (paid once). A
    device graph's replay leaves this out; ops that run on the host alone, Python that runs no op (preprocessing,
    logging) and the allocator it does not. Measured once per trace and window (the detector and the fit read it)."""
    key = f"host_work.dispatch {scope.lo!r} {scope.hi!r}"
    return trace.derive(key, lambda: intervals.total(_dispatching(trace, scope)) / max(scope.steady_steps, 1))


def _dispatching(trace: Trace, scope: TraceAnalysis) -> intervals.Intervals:
    """The host's dispatch in the window (:func:`dispatch_per_step`), as intervals."""
    host, launching = trace.on_roles(Role.HOST), kernel_launches(trace)
    apart = host & (allocator_calls(trace) | launching & ~typical_launches(trace))
    rows = host & ((trace.kind == Kind.RUNTIME) | launching) & ~apart  # a launch by its name, whatever its kind
    ops = np.flatnonzero(host & (trace.kind == Kind.HOST_OP) & scope.in_window)
    rows[_calling(trace, ops, np.flatnonzero(rows & scope.in_window))] = True
    bridged = _bridged(trace, scope, scope.busy(rows), BETWEEN_OPS_US)
    return intervals.subtract(bridged, scope.busy(apart), scope.lo, scope.hi)


def _calling(trace: Trace, ops: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """Of ``ops`` (rows), those inside which one of ``calls`` (rows) starts on the op's own track."""
    ops, op_ts, op_track = _by_track_and_start(trace, ops)
    _, call_ts, call_track = _by_track_and_start(trace, calls)
    op_end = trace.end[ops]
    keep = np.zeros(ops.size, dtype=bool)
    for a0, a1 in _runs(op_track):
        b0, b1 = np.searchsorted(call_track, [op_track[a0], op_track[a0] + 1])
        if b0 == b1:
            continue
        at, starts = call_ts[b0:b1], op_ts[a0:a1]
        first = np.minimum(np.searchsorted(at, starts), at.size - 1)  # the first call starting at or after the op
        keep[a0:a1] = (at[first] >= starts) & (at[first] <= op_end[a0:a1])
    return ops[keep]


def _by_track_and_start(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``rows`` in order of track, then start; and their starts and tracks in that order (each read once)."""
    starts, tracks = trace.ts[rows], trace.track[rows]
    order = np.lexsort((starts, tracks))
    return rows[order], starts[order], tracks[order]


def _runs(values: np.ndarray) -> list[tuple[int, int]]:
    """The [first, end) positions of each run of equal ``values`` (sorted)."""
    edges = np.flatnonzero(values[1:] != values[:-1]) + 1
    bounds = np.r_[0, edges, values.size].tolist() if values.size else []
    return list(zip(bounds[:-1], bounds[1:]))


def kernel_launches(trace: Trace) -> np.ndarray:
    """Per event: a call launching device work one call at a time (not a copy, not a graph replay)."""
    return trace.by_name(trace.name_table(LAUNCH) & ~trace.name_table(MEMCPY) & ~trace.name_table(GRAPH_LAUNCH))


def allocator_calls(trace: Trace) -> np.ndarray:
    """Per event: a call that allocates or frees device memory."""
    return trace.by_name(trace.name_table(ALLOCATION) | trace.name_table(DEALLOCATION))


def typical_launches(trace: Trace) -> np.ndarray:
    """Per event: a kernel launch (:func:`kernel_launches`) that is launch overhead (:func:`_typical`); found once per
    trace (the host-bound rule's measure reads it twice, a scan's helper finds it beside the steps)."""
    return trace.derive("host_work.typical_launches", lambda: _typical(trace, kernel_launches(trace)))


def _typical(trace: Trace, launching: np.ndarray) -> np.ndarray:
    """Of ``launching`` (the trace's kernel launches), the calls no longer than :data:`ONE_TIME_LAUNCH` times the
    median: a call far longer (a first launch loading its code) is not launch overhead."""
    longest = ONE_TIME_LAUNCH * float(np.median(trace.dur[launching])) if launching.any() else 0.0
    return launching & (trace.dur <= longest)


def _bridged(
    trace: Trace, scope: TraceAnalysis, busy: intervals.Intervals, bridge_us: float = UNTRACED_PYTHON_US
) -> intervals.Intervals:
    """The window's time in ``busy`` (the union of the host's calls), the gaps between its pieces up to
    ``bridge_us`` bridged, less the host's waits."""
    starts, ends = busy
    if starts.size > 1:  # a run of work ends where a longer gap follows
        follows_gap = np.concatenate([[True], starts[1:] - ends[:-1] > bridge_us])
        starts, ends = starts[follows_gap], ends[np.concatenate([follows_gap[1:], [True]])]
    return intervals.subtract((starts, ends), _waits(trace, scope), scope.lo, scope.hi)


def _waits(trace: Trace, scope: TraceAnalysis) -> intervals.Intervals:
    """The host's waits in the window (loading batches, syncs, copies that block it), measured once per trace and
    window (the host's own work and its dispatch both leave them out)."""

    def waiting() -> intervals.Intervals:
        return scope.busy((trace.on_roles(Role.HOST) & trace.of_kinds(Kind.INPUT, Kind.SYNC)) | blocking_copies(trace))

    return trace.derive(f"host_work.waits {scope.lo!r} {scope.hi!r}", waiting)
