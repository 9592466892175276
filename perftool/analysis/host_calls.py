"""The host thread that drives the device, and the calls it makes, as a person names them.

A training or serving loop drives the device from one host thread: the one that launches its work (most runtime
calls), or, where the framework launches from threads of its own, the one that calls the compiled functions
(JAX's ``PjitFunction(train_step)``). PyTorch's training steps are driven by two: the loop's thread runs the forward
pass and the optimizer, and an autograd thread per device (``pt_autograd_0``) runs the backward pass, each launching
its own share of the kernels (:func:`driving_threads`). What a thread does is said by its outermost calls: not the
Python stack frames a profiler records around them (``train.py(40): main``, ``$train.py:40 main``), and not other
threads, which may sleep through the whole step (a progress bar's monitor, a thread pool's ``_bootstrap``).
"""

from __future__ import annotations

import numpy as np

from perftool.analysis.intervals import overlaps_any
from perftool.dialects.vocabulary import BLOCKING_COPY_CALL, COMPILED_CALL, MEMCPY, PAGEABLE, PYTHON_FRAME
from perftool.trace.model import Kind, Phase, Role, Trace, looked_up

_PYTHON_CATEGORIES = ("python_function", "python")  # Kineto's categories of the Python stack's frames
# a thread of the driving thread's process that makes this share of its launches or more drives the device beside it:
# of a training step's loop and autograd threads, the one that launches less makes 0.46-0.82 of the other's launches
# in the real captures perftool was developed on; a NCCL watchdog thread 0.01-0.02
LAUNCHING_SHARE = 0.25
COPY_KINDS = (Kind.D2H, Kind.H2D, Kind.D2D)  # the device's copies: to the host, from it, within its memory


def driving_thread(trace: Trace) -> int | None:
    """The host track that calls compiled functions most, else makes most runtime calls (launches), else has most
    events; None: no host. Found once per trace, with :func:`driving_threads`."""
    threads = driving_threads(trace)
    return threads[0] if threads else None


def driving_threads(trace: Trace) -> list[int]:
    """The host tracks that drive the device, the driving thread (:func:`driving_thread`) first: where it is chosen
    for its launches, with it the threads of its process that launch :data:`LAUNCHING_SHARE` as many or more
    (PyTorch's autograd threads); where it calls compiled functions, it alone (the threads XLA launches from run its
    calls). Found once per trace."""
    return trace.derive("host_calls.driving_threads", lambda: _driving_threads(trace))


def _driving_threads(trace: Trace) -> list[int]:
    host = np.flatnonzero(trace.on_roles(Role.HOST) & (trace.phase == Phase.COMPLETE) & (trace.kind != Kind.STEP))
    if host.size == 0:
        return []
    tracks = trace.track[host]
    compiled = np.bincount(tracks[trace.name_matches(COMPILED_CALL, host)], minlength=len(trace.tracks))
    if compiled.max() > 0:
        return [int(np.argmax(compiled))]
    launches = np.bincount(tracks[trace.kind[host] == Kind.RUNTIME], minlength=len(trace.tracks))
    if launches.max() == 0:
        return [int(np.argmax(np.bincount(tracks, minlength=len(trace.tracks))))]
    track = int(np.argmax(launches))
    pid = trace.tracks[track].pid
    beside = np.flatnonzero(launches >= LAUNCHING_SHARE * launches[track]).tolist()
    return [track, *(other for other in beside if other != track and trace.tracks[other].pid == pid)]


def python_frames(trace: Trace, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
    """Per event (or per row of ``rows``): a frame of the Python stack, as Kineto (category ``python_function``) or
    the XLA profiler's Python tracer (a ``$`` name) records it."""
    categories = np.array([c.lower() in _PYTHON_CATEGORIES for c in trace.cats] or [False])
    return looked_up(categories, trace.cat[rows]) | trace.name_matches(PYTHON_FRAME, rows)


def compiles(trace: Trace) -> np.ndarray:
    """The compile events, each compile once, in time order: those no other compile event of its thread encloses
    (torch.compile times each phase inside the one around it: ``_compile.compile_inner`` holds ``compile_attempt_0``,
    which holds ``bytecode_tracing``...). Found once per trace."""
    return trace.derive(
        "host_calls.compiles", lambda: trace.top_level_by_track(np.flatnonzero(trace.kind == Kind.COMPILE))
    )


def driving_calls(
    trace: Trace, among: np.ndarray, python_beside_compiled: bool = False, every_thread: bool = False
) -> np.ndarray:
    """Rows of ``among`` (a mask) that are the driving thread's outermost calls (with ``every_thread``, those of
    each thread that drives the device, :func:`driving_threads`), in time order: what it was doing, in its own words.
    Where the thread calls compiled functions, those calls (and, with ``python_beside_compiled``, the Python it runs
    between them); else its ops and runtime calls. With them, the outermost Python frames inside which no driving
    thread calls anything traced (:func:`_alone`: where its time goes in Python itself, a video decoder, an image
    processor, a batch loaded between jitted steps; not the loop's thread's ``backward()`` while the autograd thread
    runs the pass), never the frames around calls (``<module>``, ``main``, ``_call_impl``)."""
    tracks = driving_threads(trace)[: None if every_thread else 1]
    on_tracks = np.zeros(max(len(trace.tracks), 1), dtype=bool)
    on_tracks[tracks] = True
    rows = np.flatnonzero(
        among & looked_up(on_tracks, trace.track) & (trace.phase == Phase.COMPLETE) & (trace.kind != Kind.STEP)
    )
    frame = python_frames(trace, rows)
    compiled = trace.name_matches(COMPILED_CALL, rows)
    if compiled.any():
        calls = np.r_[rows[compiled], _alone(trace, rows, frame)] if python_beside_compiled else rows[compiled]
    else:
        calls = np.r_[rows[~frame], _alone(trace, rows, frame)]
    if len(tracks) < 2:
        return trace.top_level(calls)
    of_track = trace.track[calls]
    calls = np.concatenate([trace.top_level(calls[of_track == track]) for track in tracks])
    return calls[np.argsort(trace.ts[calls], kind="stable")]


def python_between_calls(trace: Trace, lo: float, hi: float) -> np.ndarray:
    """Rows of the driving thread's outermost Python frames overlapping [lo, hi] inside which it calls nothing
    traced (:func:`_alone`), in time order: its time in Python itself, between its ops. Empty where the trace records
    no Python stack (a capture without ``with_stack=True``)."""
    track = driving_thread(trace)
    if track is None:
        return np.zeros(0, dtype=np.int64)
    rows = np.flatnonzero(trace.spans_in(lo, hi) & (trace.track == track) & (trace.kind != Kind.STEP))
    return trace.top_level(_alone(trace, rows, python_frames(trace, rows)))


def _alone(trace: Trace, rows: np.ndarray, frame: np.ndarray) -> np.ndarray:
    """The Python frames among ``rows`` (``frame``: which of them are frames) inside which none of the other rows
    starts (none where the rows hold no frame: a capture without ``with_stack=True``, its calls not sorted for it)."""
    frames = rows[frame]
    if not frames.size:
        return frames
    traced = np.sort(trace.ts[rows[~frame]], kind="stable")  # its calls' starts (mostly in order)
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


def copies_during(trace: Trace, calls: np.ndarray) -> np.ndarray:
    """Per event: a copy on the device while one of the blocking ``calls`` (rows) runs, which the call waits for
    (a synchronous copy call's own copy, whatever memory it names)."""
    copies = np.flatnonzero(trace.of_kinds(*COPY_KINDS) & trace.on_roles(Role.DEVICE, Role.H2D, Role.D2H))
    waited_for = overlaps_any(trace.ts[copies], trace.end[copies], trace.ts[calls], trace.end[calls])
    during = np.zeros(len(trace), dtype=bool)
    during[copies[waited_for]] = True
    return during


def read_backs(trace: Trace, calls: np.ndarray) -> np.ndarray:
    """Of blocking copy ``calls`` (rows), per call: whether it reads results back. A blocking call returns when its
    own copy is done, so its copy is the one on the device's copy tracks (to or from the host) during the call that
    ends nearest the call's end: a copy to the host. Other copies may run during a long wait (the next batch's, pinned,
    on a stream of its own); a call whose copy the trace does not show may be either, and is none."""
    copies = np.flatnonzero(trace.on_roles(Role.DEVICE, Role.H2D, Role.D2H) & trace.of_kinds(Kind.D2H, Kind.H2D))
    if not copies.size:
        return np.zeros(calls.size, dtype=bool)
    copies = copies[np.argsort(trace.end[copies], kind="stable")]
    copy_starts, copy_ends = trace.ts[copies], trace.end[copies]
    starts, ends = trace.ts[calls], trace.end[calls]
    after = np.searchsorted(copy_ends, ends)  # per call, the first copy ending at or after its end
    nearest, gap = np.full(calls.size, -1), np.full(calls.size, np.inf)
    for candidate in (after - 1, after):  # the last copy to end before the call does, and the first after (clipped)
        at = np.clip(candidate, 0, copies.size - 1)
        during = (copy_starts[at] < ends) & (copy_ends[at] > starts)
        candidate_gap = np.where(during, np.abs(copy_ends[at] - ends), np.inf)
        closer = candidate_gap < gap
        nearest, gap = np.where(closer, at, nearest), np.minimum(gap, candidate_gap)
    reads = np.zeros(calls.size, dtype=bool)
    shown = nearest >= 0
    reads[shown] = trace.kind[copies[nearest[shown]]] == Kind.D2H
    return reads


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
    for track in np.flatnonzero(trace.tracks_of(rows) & trace.tracks_of(waits)).tolist():  # a thread's calls nest
        mine, its_waits = rows[trace.track[rows] == track], waits[trace.track[waits] == track]
        inside = overlaps_any(trace.ts[mine], trace.end[mine], trace.ts[its_waits], trace.end[its_waits])
        blocking[mine[inside]] = False
    return np.flatnonzero(blocking)
