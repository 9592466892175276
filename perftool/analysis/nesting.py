"""Which op a launch on the host belongs to: ops nest (``aten::linear`` → ``aten::addmm``), and a launch belongs to
the innermost op around it on its thread; and the outermost spans of a thread, the ops a step is made of."""

from __future__ import annotations

import numpy as np

from perftool.common.arrays import distinct
from perftool.trace.model import Kind, Phase, Trace

# The host spans a step's ops are, at their outermost: what diff's op level names (the host ops, runtime calls, waits,
# input fetches, compiles and collectives no other of them holds)
HOST_WORK = [Kind.HOST_OP, Kind.RUNTIME, Kind.SYNC, Kind.INPUT, Kind.COMPILE, Kind.COMMUNICATION]


def owners(trace: Trace, ops: np.ndarray, sources: np.ndarray) -> np.ndarray:
    """For each of ``sources`` (launches on the host, flows' ends on the device), the index into ``ops`` (spans sorted
    by track and start: innermost ops, a device's kernels) of the one on its track that starts at or last before it and
    holds it; -1 where none."""
    owner = np.full(sources.size, -1, np.int64)
    for track in distinct(trace.track[sources]).tolist():
        mine = np.flatnonzero(trace.track[sources] == track)
        on_track = np.flatnonzero(trace.track[ops] == track)
        if not on_track.size:
            continue
        at = trace.ts[sources[mine]]
        index = np.searchsorted(trace.ts[ops[on_track]], at, side="right") - 1
        inside = (index >= 0) & (trace.end[ops[on_track[np.maximum(index, 0)]]] >= at)
        owner[mine[inside]] = on_track[index[inside]]
    return owner


def outermost(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """The rows (complete events) no other of ``rows`` on the same track encloses, track by track in start order.

    Rows are put in start order (a stable sort, nearly free on the start-ordered tracks profilers write);
    of rows starting together the longest encloses the others."""
    rows = rows[trace.phase[rows] == Phase.COMPLETE]
    kept = []
    for track in np.flatnonzero(np.bincount(trace.track[rows])).tolist():
        mine = rows[trace.track[rows] == track]
        mine = mine[np.argsort(trace.ts[mine], kind="stable")]
        ts, end = trace.ts[mine], trace.end[mine]
        opens = np.r_[True, ts[1:] != ts[:-1]]  # the first row of each run of equal starts
        group = np.cumsum(opens) - 1
        group_end = np.maximum.reduceat(end, np.flatnonzero(opens))
        reach = np.r_[-np.inf, np.maximum.accumulate(group_end)[:-1]]  # furthest end of the runs before each run
        longest = np.flatnonzero(end == group_end[group])
        longest = longest[np.r_[True, group[longest][1:] != group[longest][:-1]]]  # one per run
        kept.append(mine[longest[ts[longest] >= reach[group[longest]]]])
    return np.concatenate(kept) if kept else rows


def innermost_around(trace: Trace, spans: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each of ``rows``, the row of the innermost of ``spans`` (properly nested on each track) on its track that
    holds it from start to end; -1 where none does. Found from the span starting last at or before it, then up through
    the spans around that one until one reaches the row's end."""
    spans = spans[np.lexsort((-trace.end[spans], trace.ts[spans], trace.track[spans]))]  # of equal starts, the longest
    parent = _parents(trace, spans)
    found = np.full(rows.size, -1, np.int64)
    for track in distinct(trace.track[rows]).tolist():
        mine = np.flatnonzero(trace.track[rows] == track)
        on_track = np.flatnonzero(trace.track[spans] == track)
        if on_track.size:
            index = np.searchsorted(trace.ts[spans[on_track]], trace.ts[rows[mine]], side="right") - 1
            found[mine] = np.where(index >= 0, on_track[np.maximum(index, 0)], -1)
    while (short := (found >= 0) & (trace.end[spans[np.maximum(found, 0)]] < trace.end[rows])).any():
        found[short] = parent[found[short]]
    return np.where(found >= 0, spans[np.maximum(found, 0)], -1)


def _parents(trace: Trace, spans: np.ndarray) -> np.ndarray:
    """Each of ``spans`` (by track, then start, the longest first of equal starts)'s position of the nearest one around
    it on its track; -1 for none."""
    parent = np.full(spans.size, -1, np.int64)
    open_spans: list[int] = []
    track_before = None
    for at, (track, end) in enumerate(zip(trace.track[spans].tolist(), trace.end[spans].tolist())):
        if track != track_before:
            open_spans, track_before = [], track
        while open_spans and trace.end[spans[open_spans[-1]]] < end:
            open_spans.pop()
        parent[at] = open_spans[-1] if open_spans else -1
        open_spans.append(at)
    return parent
