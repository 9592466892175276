"""Input the training process prepares itself, inside the step, where no worker prepares it ahead.

PyTorch's DataLoader with ``num_workers=0`` records each batch it loads in the loop (``_SingleProcessDataLoaderIter``).
A job that calls its preprocessing directly records no loader, only the Python frames of that work: a Hugging Face
pipeline called on a video decodes it and runs its image processor (``read_video_pyav``, ``_preprocess_image``) in
the loop's own thread before the forward. Both are input loading: the device waits for it, and workers that prepare
the next input while the device computes remove it. The loop's outermost such frames are marked as loading
(:data:`~perftool.trace.model.Kind.INPUT`) once the dialect has assigned kinds, so that the idle attribution, the
input-bound rule and the fit read them as they read a loader's batches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.family import job_kind
from perftool.analysis.host_calls import driving_calls, driving_threads, python_frames
from perftool.common.arrays import distinct
from perftool.dialects.vocabulary import IN_PROCESS_LOADING, INPUT_PREPARATION, MODULE_CALL, POST_PROCESSING
from perftool.trace.model import Kind, Phase, Role, Trace

if TYPE_CHECKING:
    from perftool.analysis.context import TraceAnalysis


def mark_preparation(trace: Trace) -> None:
    """Mark as loading the Python frames in which the threads driving the device prepare inputs
    (:data:`~perftool.dialects.vocabulary.INPUT_PREPARATION`, not :data:`~perftool.dialects.vocabulary.
    POST_PROCESSING`), the outermost of each thread's, but none that meets on its thread the loading the trace
    records already (a DataLoader's own preprocessing frames are its batch's), a module's call (what runs inside a
    model is the model's) or the handling of outputs. Another thread's frames stay its own: a thread that prepares
    inputs beside the loop is what prepares them ahead. A serving engine prepares each iteration's batch itself,
    with no input workers to hand it to: its frames stay its own."""
    frames = _preparing(trace)
    if not frames.any() or job_kind(trace) == "serving":
        return
    rows = trace.top_level_by_track(np.flatnonzero(frames & np.isin(trace.track, driving_threads(trace))))
    python = python_frames(trace)
    apart = (
        (trace.kind == Kind.INPUT)
        | python & trace.name_matches(MODULE_CALL)
        | python & trace.name_matches(POST_PROCESSING)
    )
    trace.kind[rows[~_meets(trace, rows, np.flatnonzero(trace.on_roles(Role.HOST) & apart))]] = Kind.INPUT


def loading_per_batch(trace: Trace, scope: TraceAnalysis) -> np.ndarray | None:
    """How long the training process itself takes to load each batch in the window, µs: each batch its DataLoader
    loads in the loop (:data:`~perftool.dialects.vocabulary.IN_PROCESS_LOADING`), one a call; where it prepares
    inputs in Python (:func:`mark_preparation`), one batch a steady step, all its loading in the step however many
    calls it takes. None where it loads none (or prepares inputs in no steady step)."""
    loading = (trace.kind == Kind.INPUT) & trace.on_roles(Role.HOST) & scope.in_window
    loader, prepared = loading & trace.name_matches(IN_PROCESS_LOADING), loading & python_frames(trace)
    if not prepared.any():
        return trace.dur[loader] if loader.any() else None
    rows = np.flatnonzero(loader | prepared)
    steps = scope.steps
    union = intervals.union(trace.ts[rows], trace.end[rows])
    per_step = intervals.totals_in(union, steps.start[steps.warmup :], steps.end[steps.warmup :])
    return per_step if per_step.size else None


def preparing_frames(trace: Trace, loads: np.ndarray) -> np.ndarray:
    """Where the time of ``loads`` (rows of the loop's own Python marked as loading by :func:`mark_preparation`)
    goes: the loop's outermost Python frames in them that run Python alone (a decoder, an image processor's steps;
    :func:`~perftool.analysis.host_calls.driving_calls`), not the frames around its ops (a load that runs no op is
    its own)."""
    inside = np.zeros(len(trace), dtype=bool)
    work = np.flatnonzero(trace.on_roles(Role.HOST) & trace.of_kinds(Kind.HOST_OP, Kind.RUNTIME, Kind.OTHER))
    inside[work[_within(trace, work, loads)]] = True
    inside[loads] = True
    calls = driving_calls(trace, inside)
    return calls[python_frames(trace, calls)]


def _meets(trace: Trace, rows: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Per row of ``rows``: whether one of ``others`` (rows) on its track overlaps it."""
    met = np.zeros(rows.size, dtype=bool)
    for track in distinct(trace.track[rows]).tolist():
        mine, theirs = trace.track[rows] == track, others[trace.track[others] == track]
        met[mine] = intervals.overlaps_any(
            trace.ts[rows[mine]], trace.end[rows[mine]], trace.ts[theirs], trace.end[theirs]
        )
    return met


def _within(trace: Trace, rows: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """Per row of ``rows``: whether it lies within one of ``spans`` (rows, none inside another) on its track."""
    within = np.zeros(rows.size, dtype=bool)
    for track in distinct(trace.track[spans]).tolist():
        mine, theirs = np.flatnonzero(trace.track[rows] == track), spans[trace.track[spans] == track]
        theirs = theirs[np.argsort(trace.ts[theirs], kind="stable")]
        last = np.searchsorted(trace.ts[theirs], trace.ts[rows[mine]], side="right") - 1  # the last begun by each
        ends = trace.end[theirs][np.maximum(last, 0)]
        within[mine] = (last >= 0) & (trace.end[rows[mine]] <= ends)
    return within


def _preparing(trace: Trace) -> np.ndarray:
    """Per event: a host's Python frame that prepares inputs, by its file and function."""
    frames = trace.on_roles(Role.HOST) & (trace.phase == Phase.COMPLETE) & trace.name_matches(INPUT_PREPARATION)
    frames &= ~trace.name_matches(POST_PROCESSING)
    return frames & python_frames(trace) if frames.any() else frames
