"""Turn decoded event batches into the columns of a :class:`~perftool.trace.model.Trace`.

Per batch, the work is a handful of C-level passes (``map``/``zip`` over the structs, ``np.array``
over the resulting tuples, dictionary interning of strings); there is no per-event Python code
except for metadata and counter events, which are few. ``B``/``E`` pairs are matched afterwards
with numpy (:func:`pair_begin_end`).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import msgspec
import numpy as np

from perftool.errors import TraceError
from perftool.trace.decode import Batch
from perftool.trace.model import Counters, Phase, Trace, Track

_STRING_FIELDS = tuple(operator.attrgetter(f) for f in ("ph", "name", "cat", "pid", "tid"))

BEGIN, END = 100, 101  # phase codes that exist only until B/E pairs are matched
_COLUMNS = ("ts", "dur", "phase", "track", "name", "cat", "flow_id", "order", "args_ref")
_PHASE_CODES = {
    "X": Phase.COMPLETE, "B": BEGIN, "E": END, "i": Phase.INSTANT, "I": Phase.INSTANT,
    "C": Phase.COUNTER, "s": Phase.FLOW_START, "t": Phase.FLOW_STEP, "f": Phase.FLOW_END,
    "b": Phase.ASYNC, "e": Phase.ASYNC, "n": Phase.ASYNC, "S": Phase.ASYNC, "T": Phase.ASYNC,
    "p": Phase.ASYNC, "F": Phase.ASYNC,
}  # fmt: skip
_STRING_FLOW_BASE = 1 << 62
_METADATA_PHASE = 200
_PHASE_LOOKUP = {**_PHASE_CODES, "M": _METADATA_PHASE}.get


class _Interner:
    """Maps hashable values to dense integer ids."""

    def __init__(self) -> None:
        self.ids: dict[Hashable, int] = {}

    def __call__(self, values: Sequence[Hashable]) -> np.ndarray:
        """Ids of ``values``, adding the new ones; one dictionary pass in C per call."""
        self.remap(dict.fromkeys(values))
        return np.fromiter(map(self.ids.__getitem__, values), dtype=np.int32, count=len(values))

    def remap(self, values: Iterable[Hashable]) -> np.ndarray:
        """Ids of distinct ``values`` (another table's entries), adding the new ones."""
        ids = self.ids
        return np.array([ids.setdefault(v, len(ids)) for v in values], dtype=np.int32)

    @property
    def values(self) -> list[Any]:
        return list(self.ids)


class PieceError(Exception):
    """Bad event inside one piece; ``index`` counts from the piece's first event."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(index, message)
        self.index = index
        self.message = message


@dataclass
class Part:
    """The columns of one piece of the trace, with string tables of its own (ids are local)."""

    count: int
    columns: dict[str, np.ndarray]
    names: list[str]
    cats: list[str]
    track_keys: list[tuple[int | str, int | str]]
    flow_keys: list[int | str]
    kept_args: list[bytes]
    metadata_events: list[tuple[int | str, int | str, str, bytes]]
    counter_events: list[tuple[int, float, str, int, bytes]]  # local order, ts, name, local track, args


def make_part(batch: Batch, args_categories: frozenset[str]) -> Part:
    """Columns of one decoded batch. Runs in worker processes too, so it takes and returns plain data."""
    n = len(batch)
    names, cats = _Interner(), _Interner()
    ph, name, cat, pid, tid = (list(map(getter, batch)) for getter in _STRING_FIELDS)
    phase = np.fromiter(map(_PHASE_LOOKUP, ph, repeat(Phase.OTHER)), dtype=np.uint8, count=n)
    track, track_keys = _track_ids(pid, tid)
    cat_id = cats(cat)
    ts = _numbers(batch, "ts")
    dur = _numbers(batch, "dur")

    metadata_events, counter_events = [], []
    for i in np.flatnonzero((phase == _METADATA_PHASE) | (phase == Phase.COUNTER)).tolist():
        if phase[i] == _METADATA_PHASE:
            metadata_events.append((pid[i], tid[i], name[i], bytes(batch[i].args)))
        else:
            counter_events.append((i, float(ts[i]), name[i], int(track[i]), bytes(batch[i].args)))

    args_ref = np.full(n, -1, dtype=np.int32)
    kept_args = []
    keep_cats = [cats.ids[c] for c in args_categories if c in cats.ids]
    for i in np.flatnonzero((phase == Phase.INSTANT) | np.isin(cat_id, keep_cats)).tolist():
        raw = batch[i].args
        if len(raw):
            args_ref[i] = len(kept_args)
            kept_args.append(bytes(raw))

    flow = np.full(n, -1, dtype=np.int64)
    flow_keys: list[str] = []
    with_id = np.flatnonzero((phase >= Phase.FLOW_START) & (phase <= Phase.ASYNC))
    if with_id.size:
        flow[with_id], flow_keys = _flow_ids([batch[i].id for i in with_id.tolist()])

    columns = {
        "ts": ts, "dur": dur, "phase": phase, "track": track, "name": names(name),
        "cat": cat_id, "flow_id": flow, "order": np.arange(n, dtype=np.int64), "args_ref": args_ref,
    }  # fmt: skip
    rows = np.flatnonzero((phase != _METADATA_PHASE) & (phase != Phase.COUNTER))
    if rows.size != n:
        columns = {k: v[rows] for k, v in columns.items()}
    return Part(
        n, columns, names.values, cats.values, track_keys, flow_keys, kept_args, metadata_events, counter_events
    )


def _track_ids(pid: list, tid: list) -> tuple[np.ndarray, list[tuple[int | str, int | str]]]:
    """Local track id per event and the (pid, tid) key of each id."""
    try:
        p = np.array(pid, dtype=np.int64)
        t = np.array(tid, dtype=np.int64)
    except (ValueError, TypeError, OverflowError):  # string ids somewhere: intern the pairs
        keys = _Interner()
        return keys(list(zip(pid, tid))), keys.values
    if p.size and max(abs(p).max(), abs(t).max()) < 1 << 31:
        unique, inverse = np.unique((p << 32) + t, return_inverse=True)
        unique_pid = (unique + (1 << 31)) >> 32
        return inverse.astype(np.int32), list(zip(unique_pid.tolist(), (unique - (unique_pid << 32)).tolist()))
    keys = _Interner()
    return keys(list(zip(p.tolist(), t.tolist()))), keys.values


def _flow_ids(ids: list[int | str | None]) -> tuple[np.ndarray, list[str]]:
    """Integer ids stay as they are; string ids get local numbers (negative, below -1) to remap."""
    try:
        return np.array(ids, dtype=np.int64), []
    except (ValueError, TypeError, OverflowError):
        strings = _Interner()
        keyed = [i if isinstance(i, int) and i >= 0 else str(i) for i in ids]
        local = strings([k for k in keyed if isinstance(k, str)])
        out = np.array([k if isinstance(k, int) else 0 for k in keyed], dtype=np.int64)
        is_str = np.fromiter((isinstance(k, str) for k in keyed), dtype=bool, count=len(keyed))
        out[is_str] = -2 - local
        return out, strings.values


def _numbers(batch: Batch, field: str) -> np.ndarray:
    """Timestamps and durations: numbers, or numeric strings as Ascend tools write them."""
    getter = operator.attrgetter(field)
    try:
        return np.fromiter(map(getter, batch), dtype=np.float64, count=len(batch))
    except (ValueError, TypeError):
        values = list(map(getter, batch))
        try:
            return np.array(values, dtype=np.float64)
        except (ValueError, TypeError):
            pass
        for i, value in enumerate(values):
            try:
                float(value)
            except (ValueError, TypeError):
                raise PieceError(i, f"field '{field}': expected a number, got {value!r:.40}") from None
        return np.array([float(v) for v in values], dtype=np.float64)


class ColumnBuilder:
    """Merges parts, in file order, into the columns of one trace."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.names = _Interner()
        self.cats = _Interner()
        self.track_keys = _Interner()
        self.flow_keys = _Interner()
        self.columns: dict[str, list[np.ndarray]] = {k: [] for k in _COLUMNS}
        self.kept_args: list[bytes] = []
        self.metadata_events: list[tuple[int | str, int | str, str, bytes]] = []
        self.counter_events: list[tuple[int, float, str, int, bytes]] = []
        self.count = 0

    def error(self, exc: PieceError) -> TraceError:
        """The trace-level error for a problem in the part that would be added next."""
        return TraceError(self.path, f"event {self.count + exc.index}, {exc.message}")

    def add(self, part: Part) -> None:
        col = part.columns
        remapped = {
            "name": self.names.remap(part.names), "cat": self.cats.remap(part.cats),
            "track": self.track_keys.remap(part.track_keys),
        }  # fmt: skip
        for key, table in remapped.items():
            col[key] = table[col[key]] if table.size else col[key]
        if part.flow_keys:  # string ids: numbered after the largest integer id a trace can hold
            flow_table = self.flow_keys.remap(part.flow_keys).astype(np.int64) + _STRING_FLOW_BASE
            is_string = col["flow_id"] <= -2
            col["flow_id"][is_string] = flow_table[-2 - col["flow_id"][is_string]]
        col["order"] += self.count
        col["args_ref"][col["args_ref"] >= 0] += len(self.kept_args)
        for key in _COLUMNS:
            self.columns[key].append(col[key])
        self.kept_args.extend(part.kept_args)
        self.metadata_events.extend(part.metadata_events)
        track_table = remapped["track"]
        self.counter_events.extend(
            (self.count + i, when, name, int(track_table[track]), raw)
            for i, when, name, track, raw in part.counter_events
        )
        self.count += part.count

    def finish(self, metadata: dict[str, Any]) -> Trace:
        if self.count == 0:
            raise TraceError(self.path, "empty trace: no events")
        col = {k: np.concatenate(v) if v else np.empty(0) for k, v in self.columns.items()}
        if col["ts"].size == 0 and not self.counter_events:
            raise TraceError(self.path, "empty trace: only metadata events, nothing timed")
        self._validate(col)
        col, unclosed = pair_begin_end(self.path, col)
        if unclosed:
            metadata["perftool.unclosed_begin_events"] = unclosed
        names = [str(n) for n in self.names.values]
        used = np.unique(np.r_[col["track"], [c[3] for c in self.counter_events]].astype(np.int32))
        compact = np.full(len(self.track_keys.ids), -1, dtype=np.int32)
        compact[used] = np.arange(used.size, dtype=np.int32)
        col["track"] = compact[col["track"]]
        keys = self.track_keys.values
        tracks = self._tracks([keys[i] for i in used.tolist()])
        return Trace(
            source=self.path,
            ts=col["ts"], dur=col["dur"], phase=col["phase"].astype(np.uint8),
            track=col["track"].astype(np.int32), name=col["name"].astype(np.int32),
            cat=col["cat"].astype(np.int32), flow_id=col["flow_id"].astype(np.int64),
            order=col["order"].astype(np.int64), args_ref=col["args_ref"].astype(np.int32),
            names=names, cats=[str(c) for c in self.cats.values], tracks=tracks,
            counters=self._counters(compact), metadata=metadata, kept_args=self.kept_args,
        )  # fmt: skip

    def _validate(self, col: dict[str, np.ndarray]) -> None:
        ts, dur, phase, order = col["ts"], col["dur"], col["phase"], col["order"]
        bad = np.flatnonzero(~np.isfinite(ts))
        if bad.size:
            raise TraceError(self.path, f"event {order[bad[0]]}: missing or non-finite 'ts'")
        complete = phase == Phase.COMPLETE
        bad = np.flatnonzero(complete & ~np.isfinite(dur))
        if bad.size:
            raise TraceError(self.path, f"event {order[bad[0]]}: complete event ('X') without a finite 'dur'")
        bad = np.flatnonzero(complete & (dur < 0))
        if bad.size:
            raise TraceError(self.path, f"event {order[bad[0]]}: negative duration {dur[bad[0]]:g} µs")
        dur[~complete] = 0.0

    def _tracks(self, keys: list[tuple[int | str, int | str]]) -> list[Track]:
        """Tracks for the (pid, tid) keys that hold events, named by the metadata events."""
        process: dict[int | str, dict[str, Any]] = {}
        thread: dict[tuple[int | str, int | str], dict[str, Any]] = {}
        for pid, tid, name, raw in self.metadata_events:
            try:
                args = msgspec.json.decode(raw) if raw else {}
            except (msgspec.DecodeError, UnicodeDecodeError):  # names are optional: a bad one is left out
                args = {}
            if not isinstance(args, dict):
                continue
            if name == "process_name":
                process.setdefault(pid, {})["process_name"] = str(args.get("name", ""))
            elif name == "process_labels":
                process.setdefault(pid, {})["process_labels"] = str(args.get("labels", ""))
            elif name == "process_sort_index" and isinstance(args.get("sort_index"), int):
                process.setdefault(pid, {})["process_sort_index"] = args["sort_index"]
            elif name == "thread_name":
                thread.setdefault((pid, tid), {})["thread_name"] = str(args.get("name", ""))
            elif name == "thread_sort_index" and isinstance(args.get("sort_index"), int):
                thread.setdefault((pid, tid), {})["thread_sort_index"] = args["sort_index"]
        return [
            Track(id=i, pid=pid, tid=tid, **process.get(pid, {}), **thread.get((pid, tid), {}))
            for i, (pid, tid) in enumerate(keys)
        ]

    def _counters(self, compact_track: np.ndarray) -> Counters:
        series = _Interner()
        ts: list[float] = []
        values: list[float] = []
        keys: list[str] = []
        tracks: list[int] = []
        for order, when, name, track, raw in self.counter_events:
            try:
                args = msgspec.json.decode(raw) if raw else {}
            except (msgspec.DecodeError, UnicodeDecodeError):
                raise TraceError(self.path, f"event {order}: counter 'args' is not valid JSON in UTF-8") from None
            if not isinstance(args, dict):
                raise TraceError(self.path, f"event {order}: counter 'args' must be an object")
            if not math.isfinite(when):
                raise TraceError(self.path, f"event {order}: missing or non-finite 'ts'")
            for key, value in args.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    ts.append(when)
                    values.append(float(value))
                    keys.append(f"{name}.{key}")
                    tracks.append(int(compact_track[track]))
        if not ts:
            return Counters.empty()
        return Counters(
            ts=np.array(ts, dtype=np.float64), value=np.array(values, dtype=np.float64),
            series=series(keys), track=np.array(tracks, dtype=np.int32), names=[str(v) for v in series.values],
        )  # fmt: skip


def pair_begin_end(path: str, col: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], int]:
    """Match ``B``/``E`` events per track (nesting allowed) into complete spans.

    Events are ordered by (track, ts, file position) and the nesting depth is a running sum per
    track. A ``B`` entering depth L is closed by the next ``E`` leaving depth L, so sorting by
    (track, depth, position) puts each pair side by side. An ``E`` with no open ``B`` is an error;
    a ``B`` never closed runs to the end of the trace; their count is returned with the columns.
    """
    phase = col["phase"]
    rows = np.flatnonzero((phase == BEGIN) | (phase == END))
    if rows.size == 0:
        return col, 0
    rows = rows[np.lexsort((col["order"][rows], col["ts"][rows], col["track"][rows]))]
    track = col["track"][rows]
    is_begin = phase[rows] == BEGIN
    step = np.where(is_begin, 1, -1)
    running = np.cumsum(step)
    group_start = np.flatnonzero(np.r_[True, track[1:] != track[:-1]])
    group_size = np.diff(np.r_[group_start, rows.size])
    depth = running - np.repeat(running[group_start] - step[group_start], group_size)
    negative = np.flatnonzero(depth < 0)
    if negative.size:
        raise TraceError(path, f"event {col['order'][rows[negative[0]]]}: 'E' (end) without a matching 'B'")
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
        last = float(np.max(col["ts"] + np.where(phase == Phase.COMPLETE, col["dur"], 0.0)))
        col["dur"][unclosed] = np.maximum(last - col["ts"][unclosed], 0.0)
        col["phase"][unclosed] = Phase.COMPLETE
    keep = np.ones(phase.size, dtype=bool)
    keep[ends] = False
    return {k: v[keep] for k, v in col.items()}, int(unclosed.size)
