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

from collections import Counter

import numpy as np

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
    workers = np.unique(trace.track[batches])
    ahead: Counter[int] = Counter()
    for worker in workers:
        own = np.flatnonzero(trace.track[batches] == worker)  # this worker's batches, by position in start order
        waited = trace.ts[batches[own[1:]]] > trace.end[batches[own[:-1]]] + COINCIDES_US
        for position in own[1:][waited]:
            start = trace.ts[batches[position]]
            copy = int(np.searchsorted(copy_starts, start - COINCIDES_US))
            if copy < copy_starts.size and copy_starts[copy] <= start + COINCIDES_US:
                ahead[int(position) - copy] += 1
    if not ahead:
        return None
    batches_ahead, agreeing = ahead.most_common(1)[0]
    if agreeing < MIN_RESUMES or batches_ahead < workers.size or batches_ahead % workers.size:
        return None
    return batches_ahead // workers.size
