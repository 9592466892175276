"""The host thread that drives the device, and the calls it makes, as a person names them.

A training or serving loop drives the device from one host thread: the one that launches its work (most runtime
calls), or, where the framework launches from threads of its own, the one that calls the compiled functions
(JAX's ``PjitFunction(train_step)``). What that thread does is said by its outermost calls: not the Python
stack frames a profiler records around them (``train.py(40): main``, ``$train.py:40 main``), and not other
threads, which may sleep through the whole step (a progress bar's monitor, a thread pool's ``_bootstrap``).
"""

from __future__ import annotations

import numpy as np

from perftool.analysis.intervals import overlaps_any
from perftool.dialects.vocabulary import BLOCKING_COPY_CALL, COMPILED_CALL, MEMCPY, PAGEABLE, PYTHON_FRAME
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


def compiles(trace: Trace) -> np.ndarray:
    """The compile events, each compile once, in time order: those no other compile event of its thread encloses
    (torch.compile times each phase inside the one around it: ``_compile.compile_inner`` holds ``compile_attempt_0``,
    which holds ``bytecode_tracing``...). Found once per trace."""
    return trace.derive(
        "host_calls.compiles", lambda: trace.top_level_by_track(np.flatnonzero(trace.kind == Kind.COMPILE))
    )


def driving_calls(trace: Trace, among: np.ndarray, python_beside_compiled: bool = False) -> np.ndarray:
    """Rows of ``among`` (a mask) that are the driving thread's outermost calls, in time order: what it was doing, in
    its own words. Where the thread calls compiled functions, those calls (and, with ``python_beside_compiled``, the
    Python it runs between them); else its ops and runtime calls. With them, the outermost Python frames inside which
    it calls nothing traced (:func:`_alone`: where its time goes in Python itself, a video decoder, an image
    processor, a batch loaded between jitted steps), never the frames around calls (``<module>``, ``main``,
    ``_call_impl``)."""
    track = driving_thread(trace)
    if track is None:
        return np.zeros(0, dtype=np.int64)
    rows = np.flatnonzero(among & (trace.track == track) & (trace.phase == Phase.COMPLETE) & (trace.kind != Kind.STEP))
    compiled = trace.name_matches(COMPILED_CALL, rows)
    if compiled.any():
        return trace.top_level(np.r_[rows[compiled], _alone(trace, rows)] if python_beside_compiled else rows[compiled])
    return trace.top_level(np.r_[rows[~python_frames(trace, rows)], _alone(trace, rows)])


def python_between_calls(trace: Trace, lo: float, hi: float) -> np.ndarray:
    """Rows of the driving thread's outermost Python frames overlapping [lo, hi] inside which it calls nothing
    traced (:func:`_alone`), in time order: its time in Python itself, between its ops. Empty where the trace records
    no Python stack (a capture without ``with_stack=True``)."""
    track = driving_thread(trace)
    if track is None:
        return np.zeros(0, dtype=np.int64)
    rows = np.flatnonzero(trace.spans_in(lo, hi) & (trace.track == track) & (trace.kind != Kind.STEP))
    return trace.top_level(_alone(trace, rows))


def _alone(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """The Python frames among ``rows`` inside which none of the other rows starts."""
    frame = python_frames(trace, rows)
    traced = np.sort(trace.ts[rows[~frame]], kind="stable")  # its calls' starts (mostly in order)
    frames = rows[frame]
    first_inside = np.searchsorted(traced, trace.ts[frames])  # the first traced call starting in the frame, if any
    return frames[np.r_[traced, np.inf][first_inside] >= trace.end[frames]]


def blocking_copies(trace: Trace) -> np.ndarray:
    """Per event: a host copy call that blocks until its copy is done.

    A synchronous copy call (``cudaMemcpy``, ``hipMemcpyWithStream``), or an asynchronous one that
    overlaps a device copy to or from pageable memory, which the runtime cannot do asynchronously; not the copy
    inside a synchronising op (``aten::item``'s read of a scalar, which HIP makes with ``hipMemcpyWithStream`` where
    CUDA makes ``cudaMemcpyAsync`` and a stream synchronisation): that op is the wait. Found once per trace (the idle
    attribution, the host's waits, the fit and a rule ask), kept as rows: they are few.
    """
    blocking = np.zeros(len(trace), dtype=bool)
    blocking[trace.derive("host_calls.blocking_copies", lambda: _blocking_copies(trace))] = True
    return blocking


def _blocking_copies(trace: Trace) -> np.ndarray:
    calls = trace.on_roles(Role.HOST) & (trace.kind == Kind.RUNTIME) & trace.name_matches(MEMCPY)
    blocking = calls & trace.name_matches(BLOCKING_COPY_CALL)
    pageable = np.flatnonzero(trace.name_matches(PAGEABLE) & trace.of_kinds(Kind.H2D, Kind.D2H))
    rows = np.flatnonzero(calls & ~blocking)
    if pageable.size and rows.size:
        blocking[rows] = overlaps_any(trace.ts[rows], trace.end[rows], trace.ts[pageable], trace.end[pageable])
    rows = np.flatnonzero(blocking)
    if rows.size == 0:
        return rows
    waits = np.flatnonzero((trace.kind == Kind.SYNC) & trace.on_roles(Role.HOST) & (trace.phase == Phase.COMPLETE))
    for track in np.intersect1d(trace.track[rows], trace.track[waits]).tolist():  # a thread's calls nest
        mine, its_waits = rows[trace.track[rows] == track], waits[trace.track[waits] == track]
        inside = overlaps_any(trace.ts[mine], trace.end[mine], trace.ts[its_waits], trace.end[its_waits])
        blocking[mine[inside]] = False
    return np.flatnonzero(blocking)
