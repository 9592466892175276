"""The host thread that drives the device, and the calls it makes, as a person names them.

A training or serving loop drives the device from one host thread: the one that launches its work (most runtime
calls), or, where the framework launches from threads of its own, the one that calls the compiled functions
(JAX's ``PjitFunction(train_step)``). What that thread does is said by its outermost calls: not the Python
stack frames a profiler records around them (``train.py(40): main``, ``$train.py:40 main``), and not other
threads, which may sleep through the whole step (a progress bar's monitor, a thread pool's ``_bootstrap``).
"""

from __future__ import annotations

import numpy as np

from perftool.dialects.vocabulary import COMPILED_CALL, PYTHON_FRAME
from perftool.trace.model import Kind, Phase, Role, Trace

_PYTHON_CATEGORIES = ("python_function", "python")  # Kineto's categories of the Python stack's frames


def driving_thread(trace: Trace) -> int | None:
    """The host track that calls compiled functions most, else makes most runtime calls (launches), else has most
    events; None: no host. Found once per trace."""
    return trace.derive("host_calls.driving_thread", lambda: _driving_thread(trace))


def _driving_thread(trace: Trace) -> int | None:
    host = np.flatnonzero(trace.on_roles(Role.HOST) & (trace.phase == Phase.COMPLETE) & (trace.kind != Kind.STEP))
    if host.size == 0:
        return None
    tracks = trace.track[host]
    for calls in (trace.name_matches(COMPILED_CALL, host), trace.kind[host] == Kind.RUNTIME):
        per_track = np.bincount(tracks, weights=calls, minlength=len(trace.tracks))
        if per_track.max() > 0:
            return int(np.argmax(per_track))
    return int(np.argmax(np.bincount(tracks, minlength=len(trace.tracks))))


def python_frames(trace: Trace, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
    """Per event (or per row of ``rows``): a frame of the Python stack, as Kineto (category ``python_function``) or
    the XLA profiler's Python tracer (a ``$`` name) records it."""
    categories = np.array([c.lower() in _PYTHON_CATEGORIES for c in trace.cats] or [False])
    return categories[trace.cat[rows]] | trace.name_matches(PYTHON_FRAME, rows)


def top_level(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Of ``rows`` (complete events of one track), those no other of them encloses, in time order: of events that
    start together, the longest (the first of the longest) encloses the others."""
    rows = rows[np.argsort(trace.ts[rows], kind="stable")]  # a thread's events come mostly in order: a linear pass
    if rows.size == 0:
        return rows
    starts, ends = trace.ts[rows], trace.end[rows]
    if np.all(starts[1:] != starts[:-1]):  # no two start together (most threads): one inside none that came before
        return rows[ends > np.r_[-np.inf, np.maximum.accumulate(ends)[:-1]]]
    opens = np.flatnonzero(np.r_[True, starts[1:] != starts[:-1]])  # where each run of events starting together opens
    group = np.repeat(np.arange(opens.size), np.diff(np.r_[opens, rows.size]))
    longest = np.maximum.reduceat(ends, opens)
    before = np.r_[-np.inf, np.maximum.accumulate(longest)[:-1]]  # the furthest any earlier run reaches
    candidates = np.flatnonzero(ends == longest[group])
    first = candidates[np.r_[True, group[candidates[1:]] != group[candidates[:-1]]]]  # one per run
    return rows[first[ends[first] > before[group[first]]]]  # one that only overlaps an earlier one (rounding) stays


def driving_calls(trace: Trace, among: np.ndarray) -> np.ndarray:
    """Rows of ``among`` (a mask) that are the driving thread's outermost calls, in time order: what it was doing, in
    its own words. Where the thread calls compiled functions, those calls; else its ops and runtime calls, and the
    outermost Python frames inside which it runs no op or runtime call (where the time goes in Python itself: a
    video decoder, an image processor), never the frames around ops (``<module>``, ``main``, ``_call_impl``)."""
    track = driving_thread(trace)
    if track is None:
        return np.zeros(0, dtype=np.int64)
    mine = among & (trace.track == track) & (trace.phase == Phase.COMPLETE) & (trace.kind != Kind.STEP)
    compiled = mine & trace.name_matches(COMPILED_CALL)
    if compiled.any():
        return top_level(trace, np.flatnonzero(compiled))
    rows = np.flatnonzero(mine)
    frame = python_frames(trace, rows)
    traced = np.sort(trace.ts[rows[~frame]], kind="stable")  # its ops' and runtime calls' starts (mostly in order)
    frames = rows[frame]
    first_inside = np.searchsorted(traced, trace.ts[frames])  # the first traced call starting in the frame, if any
    pure = np.r_[traced, np.inf][first_inside] >= trace.end[frames]
    return top_level(trace, np.r_[rows[~frame], frames[pure]])
