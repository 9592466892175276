"""What an input pipeline's traced workers show: their batches in the order the training loop takes them, and the
prefetch depth they run with.

A data loader hands its workers batches in turn (batch *i* to worker *i mod workers*, as PyTorch's DataLoader does)
and the loop takes them in that order, whichever worker finishes first. Each worker keeps up to ``depth`` prepared
batches in the buffer, so a worker that finds the buffer full waits, and starts its next batch the moment the device
takes one: batch *i* starts as batch *i − depth × workers* is copied to the device. Where the workers' batches are
traced and the device copies one batch per batch prepared, the batches between a worker's resume and the copy it
coincides with give the depth. A buffer that never fills gives no reading: the workers then never wait, and no
deeper prefetch could help.
"""

from __future__ import annotations

import numpy as np

from perftool.common.arrays import distinct
from perftool.dialects.vocabulary import REMOTE_BUFFER_COPY
from perftool.trace.model import Kind, Role, Trace

COINCIDES_US = 5.0  # a worker's resume this close to a copy's start is that copy freeing its slot
MIN_RESUMES = 3  # resumes that must agree before the depth counts as read


def batches_in_order(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """The input workers' batches among ``rows`` in the order the loop takes them: each worker's in turn, the
    workers in the order their first batches start."""
    rows = rows[np.argsort(trace.ts[rows], kind="stable")]
    _, first = np.unique(trace.track[rows], return_index=True)
    workers = trace.track[rows[np.sort(first)]]
    own = [rows[trace.track[rows] == worker] for worker in workers]
    turns = min(len(batches) for batches in own)
    ordered = np.stack([batches[:turns] for batches in own], axis=1).ravel()  # a worker's extra batches: unpaired
    return np.concatenate([ordered, *(batches[turns:] for batches in own)])


def depth_in_use(trace: Trace) -> int | None:
    """Batches each input worker keeps ready, where the trace shows them (None: workers untraced, copies not one per
    batch, or a buffer that never filled)."""
    batches = np.flatnonzero((trace.kind == Kind.INPUT) & trace.on_roles(Role.INPUT))
    copies = np.flatnonzero((trace.kind == Kind.H2D) & ~trace.name_matches(REMOTE_BUFFER_COPY))
    if batches.size == 0 or batches.size != copies.size:
        return None
    batches = batches_in_order(trace, batches)
    copy_starts = np.sort(trace.ts[copies])
    track, start, end = trace.track[batches], trace.ts[batches], trace.end[batches]
    by_worker = np.lexsort((start, track))  # positions in the loop's order, each worker's batches together
    follows = track[by_worker[1:]] == track[by_worker[:-1]]
    waited = follows & (start[by_worker[1:]] > end[by_worker[:-1]] + COINCIDES_US)
    resumed = by_worker[1:][waited]  # positions of the batches a worker started after waiting for a free slot
    at = start[resumed]
    copy = np.searchsorted(copy_starts, at - COINCIDES_US)
    found = copy < copy_starts.size
    coincides = found & (copy_starts[np.minimum(copy, copy_starts.size - 1)] <= at + COINCIDES_US)
    if not coincides.any():
        return None
    values, counts = np.unique(resumed[coincides] - copy[coincides], return_counts=True)
    batches_ahead, agreeing = int(values[np.argmax(counts)]), int(counts.max())
    workers = distinct(track).size
    if agreeing < MIN_RESUMES or batches_ahead < workers or batches_ahead % workers:
        return None
    return batches_ahead // workers
