"""Which op a launch on the host belongs to: ops nest (``aten::linear`` → ``aten::addmm``), and a launch belongs to
the innermost op around it on its thread."""

from __future__ import annotations

import numpy as np

from perftool.trace.model import Trace


def innermost(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Of op rows (properly nested on each track), those that contain no other of them, by track and start."""
    if rows.size < 2:
        return rows
    by_track = rows[np.argsort(trace.track[rows], kind="stable")]
    starts = trace.ts[by_track]
    same_track = trace.track[by_track[1:]] == trace.track[by_track[:-1]]
    if not np.all(starts[1:][same_track] > starts[:-1][same_track]):  # out of order, or a parent and a child at once
        by_track = by_track[np.lexsort((-trace.dur[by_track], trace.ts[by_track], trace.track[by_track]))]
    contains_next = same_track & (trace.ts[by_track[1:]] < trace.end[by_track[:-1]])
    return by_track[np.append(~contains_next, True)]


def owners(trace: Trace, ops: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """For each of ``sources`` (launches on the host, flows' ends on the device), the index into ``ops`` (spans sorted
    by track and start: innermost ops, a device's kernels) of the one on its track that starts at or last before it and
    holds it; -1 where none."""
    owner = np.full(sources.size, -1, np.int64)
    for track in np.unique(trace.track[sources]).tolist():
        mine = np.flatnonzero(trace.track[sources] == track)
        on_track = np.flatnonzero(trace.track[ops] == track)
        if not on_track.size:
            continue
        at = trace.ts[sources[mine]]
        index = np.searchsorted(trace.ts[ops[on_track]], at, side="right") - 1
        inside = (index >= 0) & (trace.end[ops[on_track[np.maximum(index, 0)]]] >= at)
        owner[mine[inside]] = on_track[index[inside]]
    return owner
