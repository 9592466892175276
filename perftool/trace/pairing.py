"""``B``/``E`` events matched per track into complete spans, the columns read and rewritten a chunk at a time."""

from __future__ import annotations

import numpy as np

from perftool.common.errors import TraceError
from perftool.trace.model import Phase, file_positions, rows_behind
from perftool.trace.parts import BEGIN, END
from perftool.trace.store import ColumnStore


def pair_begin_end(
    path: str, col: dict[str, np.ndarray], store: ColumnStore, skipped: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Match ``B``/``E`` events per track (nesting allowed) into complete spans.

    Events are ordered by (track, ts, file position) and the nesting depth is a running sum per
    track. A ``B`` entering depth L is closed by the next ``E`` leaving depth L, so sorting by
    (track, depth, position) puts each pair side by side. An ``E`` with no open ``B`` is an error;
    a ``B`` never closed runs to the end of the trace. ``skipped``: the file positions that are no row.
    Returned: the columns less the ``E`` rows, the file positions of the ``B`` never closed, and ``skipped`` with
    the ``E`` events' positions added. The columns are read and rewritten a chunk at a time (``store``'s chunks).
    """
    phase = col["phase"]
    chunks = list(store.chunks(phase.size))
    rows = np.concatenate(
        [chunk.start + np.flatnonzero((phase[chunk] == BEGIN) | (phase[chunk] == END)) for chunk in chunks]
    )
    if rows.size == 0:
        return col, np.empty(0, dtype=np.int64), skipped
    behind = rows_behind(skipped)
    rows = rows[np.lexsort((rows, col["ts"][rows], col["track"][rows]))]  # rows are in file order
    track = col["track"][rows]
    is_begin = phase[rows] == BEGIN
    step = np.where(is_begin, 1, -1)
    running = np.cumsum(step)
    group_start = np.flatnonzero(np.r_[True, track[1:] != track[:-1]])
    group_size = np.diff(np.r_[group_start, rows.size])
    depth = running - np.repeat(running[group_start] - step[group_start], group_size)
    negative = np.flatnonzero(depth < 0)
    if negative.size:
        unmatched = file_positions(rows[negative[:1]], behind)[0]
        raise TraceError(path, f"event {unmatched}: 'E' (end) without a matching 'B'")
    level = np.where(is_begin, depth, depth + 1)
    by_level = np.lexsort((np.arange(rows.size), level, track))
    rows, is_begin = rows[by_level], is_begin[by_level]
    key_track, key_level = track[by_level], level[by_level]
    new_group = np.r_[True, (key_track[1:] != key_track[:-1]) | (key_level[1:] != key_level[:-1])]
    starts = np.flatnonzero(new_group)
    rank = np.arange(rows.size) - np.repeat(starts, np.diff(np.r_[starts, rows.size]))
    begins = np.flatnonzero(rank % 2 == 0)
    has_end = np.r_[~new_group[1:], False][begins]
    closed, unclosed = rows[begins[has_end]], rows[begins[~has_end]]
    ends = rows[begins[has_end] + 1]

    col["dur"][closed] = col["ts"][ends] - col["ts"][closed]
    col["phase"][closed] = Phase.COMPLETE
    if unclosed.size:
        last = max(
            float(np.max(col["ts"][chunk] + np.where(phase[chunk] == Phase.COMPLETE, col["dur"][chunk], 0.0)))
            for chunk in chunks
        )
        col["dur"][unclosed] = np.maximum(last - col["ts"][unclosed], 0.0)
        col["phase"][unclosed] = Phase.COMPLETE
    ends_at = file_positions(np.sort(ends), behind)
    return _without(store, col, ends), file_positions(unclosed, behind), np.sort(np.r_[skipped, ends_at])


def _without(store: ColumnStore, col: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
    """The columns less ``rows``, copied a chunk at a time into new columns of ``store``."""
    size = next(iter(col.values())).size
    keep = np.ones(size, dtype=bool)
    keep[rows] = False
    kept = {key: store.new(column.dtype, size - rows.size) for key, column in col.items()}
    written = 0
    for chunk in store.chunks(size):
        chosen = keep[chunk]
        count = int(np.count_nonzero(chosen))
        for key, column in col.items():
            kept[key][written : written + count] = column[chunk][chosen]
        written += count
    return kept
