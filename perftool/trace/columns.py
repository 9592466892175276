"""Build the columns of a :class:`~perftool.trace.model.Trace` from its pieces' parts, in file order, as they arrive.

A piece's events become a compact :class:`~perftool.trace.parts.Part` (times and signature ids; :mod:`.parts`, in
the decoding processes), keeping what :mod:`.kept_args` says of their args. :class:`ColumnBuilder` expands each part's
signatures into phase, name, category and track columns as it arrives, while the next pieces are still being decoded,
checks its times, and appends it to the trace's columns (in memory, or on disk past the budget). ``B``/``E`` pairs are
matched at the end (:mod:`.pairing`), and the metadata and counters read.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

import msgspec
import numpy as np

from perftool.common import limits
from perftool.common.errors import TraceError
from perftool.common.units import plural
from perftool.trace.events import Interner, PieceError, Signature
from perftool.trace.model import (
    PROFILER_MARKS,
    Counters,
    Phase,
    Trace,
    Track,
    file_positions,
    rows_at,
    rows_behind,
)
from perftool.trace.pairing import pair_begin_end
from perftool.trace.parts import PHASE_LOOKUP, Part
from perftool.trace.store import ARRAYS_IN_FILES, BytesOnDisk, ColumnStore, Growing, OnDisk

_COLUMNS: dict[str, type] = {  # the trace's columns a part adds rows to, as they are built
    "ts": np.float64,
    "dur": np.float64,
    "phase": np.uint8,
    "track": np.int32,
    "name": np.int32,
    "cat": np.int32,
    "flow_id": np.int64,
    "args_ref": np.int32,
}
COUNTER_BATCH = 1 << 16  # counter events decoded at a time: their args as Python objects, some MB at once
_ROOM_TO_SPARE = 1.05  # room kept for the rows foreseen, beyond them: a foresight a little short costs a copy
_OVERFLOWING_NUMBER = re.compile(rb"\d[eE]\+?\d{3}")  # an exponent of three digits: perhaps past a double


class ColumnBuilder:
    """Builds the columns of one trace from its parts, in file order, as they arrive; in memory until
    :meth:`keep_on_disk`. ``expected_bytes``: the JSON the trace is expected to hold (0 where not known), from which
    the rows still to come are foreseen and room kept for them."""

    def __init__(self, path: str, analysis: str = "info", expected_bytes: int = 0) -> None:
        self.path = path
        self.analysis = analysis  # what the trace is read for: how much memory an event will need
        self.expected_bytes = expected_bytes
        self.signatures = Interner()
        self.tables = _SignatureTables()
        self.flow_keys = Interner()
        self.store = ColumnStore()
        self.kept_args: list[bytes] | BytesOnDisk = []  # in a file once the columns are on disk
        self.metadata_events: list[tuple[int | str, int | str, str, bytes]] = []
        self.counter_events: list[tuple[int, float, int, bytes]] = []  # order, ts, signature, args
        self.count = 0  # events added, metadata and counter events included
        self.rows = 0  # ... of them timed: the rows of the columns
        self.bytes = 0  # of JSON in the parts added, where they say
        self.args_bytes = 0  # of the kept args and the counter events' args
        self.kept_bytes = 0  # ... of them the kept args'
        self.problems: dict[int, int] = {}  # check (as _checked lists them) -> the first row that fails it
        self.track_used = Growing(np.dtype(bool))  # per track key: whether a row lies on it

    @property
    def memory_needed(self) -> int:
        """Bytes of memory scanning what was added so far will need (:func:`perftool.common.limits.memory_to_scan`)."""
        return limits.memory_to_scan(
            self.count,
            len(self.signatures.ids),
            len(self.counter_events),
            len(self.kept_args),
            self.args_bytes,
            self.store.on_disk,
            self.analysis,
            ARRAYS_IN_FILES,
            self.kept_bytes,
            self.tables.track_count,
        )

    @property
    def memory_foreseen(self) -> int | None:
        """Bytes of memory scanning the whole trace will need with its columns on disk, foreseen from what was added so
        far and the share of the trace's JSON it held (None where the trace's size is not known)."""
        if not self.bytes or not self.expected_bytes:
            return None
        scale = max(self.expected_bytes / self.bytes, 1.0)
        return limits.memory_to_scan(
            round(self.count * scale),
            round(len(self.signatures.ids) * scale),  # distinct names may stop growing: this errs on the safe side
            round(len(self.counter_events) * scale),
            round(len(self.kept_args) * scale),
            round(self.args_bytes * scale),
            True,
            self.analysis,
            ARRAYS_IN_FILES,
            round(self.kept_bytes * scale),
            round(self.tables.track_count * scale),  # as the distinct names: on the safe side
        )

    def keep_on_disk(self, directory: str, need: int) -> None:
        """Keep the columns in files under ``directory`` from now on (``need``: the bytes they will take there)."""
        on_disk = OnDisk(self.path, directory, need)
        for key, column in self.store.contents():
            on_disk.append(key, column)
        self.store = on_disk
        kept = on_disk.strings()
        kept.extend(self.kept_args)  # those built in memory so far, moved into the file
        self.kept_args = kept

    def error(self, exc: PieceError) -> TraceError:
        """The trace-level error for a problem in the part that would be added next."""
        return TraceError(self.path, f"event {self.count + exc.index}, {exc.message}")

    def add(self, part: Part) -> None:
        """Append the part's rows to the columns: its signatures expanded, its flow ids and kept args' references
        spread over its rows, and its times checked (:meth:`finish` names the first problem)."""
        known = len(self.signatures.ids)
        signature_table = self.signatures(part.signatures, len(part.signatures))
        self.tables.extend([part.signatures[i] for i in np.flatnonzero(signature_table >= known).tolist()])
        row_signature = signature_table.astype(np.intp)[part.signature]
        rows, tables = row_signature.size, self.tables
        flow_ids = part.flow_ids
        if part.flow_keys:  # string ids: negative (below -1, the mark of no id), apart from every integer id
            flow_table = -2 - self.flow_keys.remap(part.flow_keys).astype(np.int64)
            is_string = flow_ids <= -2
            flow_ids[is_string] = flow_table[-2 - flow_ids[is_string]]
        columns = {
            "ts": part.ts,
            "dur": part.dur,
            "phase": tables.phase.filled[row_signature],
            "track": tables.track.filled[row_signature],
            "name": tables.name.filled[row_signature],
            "cat": tables.cat.filled[row_signature],
            "flow_id": _spread(rows, part.untimed, part.flow_events, flow_ids),
            "args_ref": _spread(rows, part.untimed, part.args_events, part.args_refs + len(self.kept_args)),
        }
        columns["dur"] = self._checked(columns["ts"], columns["dur"], columns["phase"])
        self.track_used.extend(np.zeros(tables.track_count - self.track_used.size, dtype=bool))
        self.track_used.filled[columns["track"]] = True
        self.bytes += part.size
        self.store.reserve(_COLUMNS, self._expected_rows(rows))
        for key, dtype in _COLUMNS.items():
            self.store.append(key, columns[key].astype(dtype, copy=False))
        self.store.append("untimed", (part.untimed + self.count).astype(np.int64, copy=False))
        self.kept_args.extend(part.kept_args)
        kept_bytes = sum(map(len, part.kept_args))
        self.kept_bytes += kept_bytes
        self.args_bytes += kept_bytes + sum(len(raw) for *_, raw in part.counter_events)
        self.metadata_events.extend(part.metadata_events)
        self.counter_events.extend(
            (self.count + i, when, int(signature_table[signature]), raw)
            for i, when, signature, raw in part.counter_events
        )
        self.count += part.count
        self.rows += rows

    def _expected_rows(self, adding: int) -> int:
        """The rows the trace will hold, foreseen from those so far (with ``adding`` more) and the bytes they held."""
        rows = self.rows + adding
        if not self.bytes or not self.expected_bytes:
            return rows
        return max(rows, int(rows * self.expected_bytes / self.bytes * _ROOM_TO_SPARE))

    def _checked(self, ts: np.ndarray, dur: np.ndarray, phase: np.ndarray) -> np.ndarray:
        """Note the first row of these that fails each check (listed in :meth:`_raise_first_problem`); the durations
        with those of events that are not spans zeroed."""
        complete = phase == Phase.COMPLETE
        failing = (
            ~np.isfinite(ts),
            np.abs(ts) > limits.MAX_TIMESTAMP_US,
            complete & ~np.isfinite(dur),
            complete & (dur < 0),
            complete & (dur > limits.MAX_DURATION_US),
        )
        for check, bad in enumerate(failing):
            if check not in self.problems and (found := np.flatnonzero(bad)).size:
                self.problems[check] = self.rows + int(found[0])
        return np.where(complete, dur, 0.0)

    def finish(self, metadata: dict[str, Any]) -> Trace:
        if self.count == 0:
            raise TraceError(self.path, "empty trace: no events")
        store = self.store
        col = {key: store.merged(key, dtype) for key, dtype in _COLUMNS.items()}
        skipped = store.merged("untimed", np.int64)  # the file positions that are no row, so far: metadata, counters
        if col["ts"].size == 0 and not self.counter_events and not self.metadata_events:
            raise TraceError(
                self.path,
                f"not a trace: it holds {plural(self.count, 'object')} and no trace event (none has a phase 'ph', a"
                " name or a time 'ts'): a record written beside traces? Scan the trace itself",
            )
        if col["ts"].size == 0 and not self.counter_events:
            raise TraceError(self.path, "empty trace: only metadata events, nothing timed")
        names = self.tables.names()
        if len(names) <= len(PROFILER_MARKS) and set(names) <= PROFILER_MARKS:  # a counter's name is one more
            raise TraceError(self.path, "empty trace: only the profiler's own marks of its window, nothing it recorded "
                                        "(was the code to profile run inside the profiler's context?)")  # fmt: skip
        if self.problems:
            self._raise_first_problem(col, rows_behind(skipped))
        col, unclosed, skipped = pair_begin_end(self.path, col, store, skipped)
        if unclosed.size:
            metadata["perftool.unclosed_begin_events"] = int(unclosed.size)
        tables = self.tables
        present = np.zeros(tables.track_count, dtype=bool)
        present[: self.track_used.size] = self.track_used.filled
        present[[int(tables.track.filled[c[2]]) for c in self.counter_events]] = True
        used = np.flatnonzero(present)
        compact = np.full(tables.track_count, -1, dtype=np.int32)
        compact[used] = np.arange(used.size, dtype=np.int32)
        if used.size < present.size:  # tracks named by metadata alone: the others are numbered without them
            for chunk in store.chunks(col["track"].size):
                col["track"][chunk] = compact[col["track"][chunk]]
        keys = tables.track_keys()
        tracks = self._tracks([keys[i] for i in used.tolist()])
        return Trace(  # col holds the Trace's column fields, by name
            source=self.path,
            **col,  # type: ignore[arg-type]
            names=names,
            cats=tables.cats(),
            tracks=tracks,
            counters=self._counters(tables, compact),
            metadata=metadata,
            kept_args=self.kept_args,
            skipped=skipped,
            unclosed=unclosed,
            store=store,
        )

    def _raise_first_problem(self, col: dict[str, np.ndarray], behind: np.ndarray) -> None:
        """Raise the first problem :meth:`_checked` found, in the order the checks are listed, at its first event
        (``behind``: what :func:`~perftool.trace.model.file_positions` needs to name it)."""
        check = min(self.problems)
        row = self.problems[check]
        ts, dur = col["ts"], col["dur"]
        problems = (
            "missing or non-finite 'ts'",
            f"'ts' {ts[row]:.3g} µs is beyond any clock ({_bound()})",
            "complete event ('X') without a finite 'dur'",
            f"negative duration {dur[row]:g} µs",
            f"duration {dur[row]:.3g} µs is longer than any run (over 10^7 s)",
        )
        raise TraceError(self.path, f"event {file_positions(np.array([row]), behind)[0]}: {problems[check]}")

    def _tracks(self, keys: list[tuple[int | str, int | str]]) -> list[Track]:
        """Tracks for the (pid, tid) keys that hold events, named by the metadata events."""
        process: dict[int | str, dict[str, Any]] = {}
        thread: dict[tuple[int | str, int | str], dict[str, Any]] = {}
        for raw_pid, raw_tid, name, raw in self.metadata_events:
            pid, tid = track_id(raw_pid), track_id(raw_tid)
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

    def _counters(self, tables: _SignatureTables, compact_track: np.ndarray) -> Counters:
        """Each counter event's numeric args as samples of the series "<event name>.<key>", on the event's track.
        The events are decoded :data:`COUNTER_BATCH` at a time, so that their args' Python objects are few at once."""
        if not self.counter_events:
            return Counters.empty()
        pairs = Interner()  # (name id, key): the series, before names that read alike are one
        batches = [
            self._counter_batch(self.counter_events[start : start + COUNTER_BATCH], tables.name.filled, pairs)
            for start in range(0, len(self.counter_events), COUNTER_BATCH)
        ]
        when, value, pair, signature = (np.concatenate(column) for column in zip(*batches))
        if not when.size:
            return Counters.empty()
        series = Interner()
        names = tables.names()
        series_of_pair = series([f"{names[name]}.{key}" for name, key in pairs.values], len(pairs.ids))
        return Counters(
            ts=when,
            value=value,
            series=series_of_pair[pair],
            track=compact_track[tables.track.filled[signature]].astype(np.int32),
            names=[str(v) for v in series.values],
        )

    def _counter_batch(
        self, events: list[tuple[int, float, int, bytes]], name_of_signature: np.ndarray, pairs: Interner
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The samples of some counter events: each one's time, value, (name, key) pair id and signature."""
        orders, whens, signatures, raws = zip(*events)
        decoded = self._counter_args(orders, raws)
        when = np.array(whens, dtype=np.float64)
        not_object = np.fromiter((type(args) is not dict for args in decoded), dtype=bool, count=len(decoded))
        problem = not_object | ~np.isfinite(when) | (np.abs(when) > limits.MAX_TIMESTAMP_US)
        if problem.any():  # the first event with one, named as its first check fails
            first = int(np.argmax(problem))
            order, at = orders[first], float(when[first])
            if not_object[first]:
                raise TraceError(self.path, f"event {order}: counter 'args' must be an object")
            if not math.isfinite(at):
                raise TraceError(self.path, f"event {order}: missing or non-finite 'ts'")
            raise TraceError(self.path, f"event {order}: 'ts' {at:.3g} µs is beyond any clock ({_bound()})")
        samples = [
            (event, key, value)
            for event, args in enumerate(decoded)
            for key, value in args.items()
            if type(value) in (int, float)  # msgspec makes exact ints and floats; a bool is no sample
        ]
        if not samples:
            empty = np.empty(0, np.intp)
            return when[empty], when[empty], empty, empty
        event_of_sample, keys, values = zip(*samples)
        try:
            value = np.array(values, dtype=np.float64)
        except OverflowError:  # an integer past any double
            event, key = next((e, k) for e, k, v in samples if abs(v) > sys.float_info.max)
            beyond = f"event {orders[event]}: counter '{key}' is a number beyond any double"
            raise TraceError(self.path, beyond) from None
        rows = np.array(event_of_sample, dtype=np.intp)
        signature = np.array(signatures, dtype=np.intp)[rows]
        pair = pairs(zip(name_of_signature[signature].tolist(), keys), len(keys))
        return when[rows], value, pair, signature

    def _counter_args(self, orders: tuple[int, ...], raws: tuple[bytes, ...]) -> list[Any]:
        """Counter events' args decoded ({} where one has none): all in one call, or one by one to name the first that
        is not valid JSON."""
        objects = [raw or b"{}" for raw in raws]
        try:
            return msgspec.json.decode(b"[" + b",".join(objects) + b"]")
        except (msgspec.DecodeError, UnicodeDecodeError):
            return [self._decoded(order, raw) for order, raw in zip(orders, objects)]

    def _decoded(self, order: int, raw: bytes) -> Any:
        try:
            return msgspec.json.decode(raw)
        except (msgspec.DecodeError, UnicodeDecodeError):
            key = _key_past_any_double(raw)
            problem = "'args' is not valid JSON in UTF-8" if key is None else f"{key!r} is a number beyond any double"
            raise TraceError(self.path, f"event {order}: counter {problem}") from None


def _key_past_any_double(raw: bytes) -> str | None:
    """The key of counter args (valid JSON otherwise) whose number overflows a double, such as ``1e999``."""
    if not _OVERFLOWING_NUMBER.search(raw):
        return None
    try:
        args = json.loads(raw, parse_constant=lambda name: None)  # NaN and Infinity are no JSON: none of this kind
    except (ValueError, RecursionError):
        return None
    if not isinstance(args, dict):
        return None
    return next((str(k) for k, v in args.items() if isinstance(v, float) and math.isinf(v)), None)


class _SignatureTables:
    """Per distinct signature of the trace so far: its phase code, name, category and track key ids."""

    def __init__(self) -> None:
        self._names, self._cats, self._track_keys = Interner(), Interner(), Interner()
        self.phase, self.name = Growing(np.dtype(np.uint8)), Growing(np.dtype(np.int32))
        self.cat, self.track = Growing(np.dtype(np.int32)), Growing(np.dtype(np.int32))

    def extend(self, signatures: list[Signature]) -> None:
        """Add the tables' entries for signatures new to the trace, in the order they were numbered."""
        if not signatures:
            return
        ph, name, cat, pid, tid = (list(field) for field in zip(*signatures))
        self.phase.extend(np.array([PHASE_LOOKUP(p, Phase.OTHER) for p in ph], dtype=np.uint8))
        self.name.extend(self._names.remap(name))
        self.cat.extend(self._cats.remap(cat))
        self.track.extend(self._track_keys.remap(zip(map(track_id, pid), map(track_id, tid))))

    @property
    def track_count(self) -> int:
        return len(self._track_keys.ids)

    def names(self) -> list[str]:
        return [str(n) for n in self._names.values]

    def cats(self) -> list[str]:
        return [str(c) for c in self._cats.values]

    def track_keys(self) -> list[tuple[int | str, int | str]]:
        return self._track_keys.values


def track_id(value: int | str) -> int | str:
    """A pid or tid as one value however the trace spells it: PyTorch 1.8 writes a thread's id as a string
    ("1890023232") on its ops and as a number on its flows, which must land on one track. Only a string that is
    a number written plainly becomes one; any other stays a name."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and (value == "0" or value[0] != "0"):
        return int(value) if len(value) <= 18 else value
    return value


def _spread(rows: int, untimed: np.ndarray, events: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A part's column of ``rows`` holding ``values`` at its timed ``events`` (given by position in the piece; the
    ``untimed`` positions hold no row), -1 elsewhere."""
    column = np.full(rows, -1, dtype=values.dtype)
    column[rows_at(events, untimed)] = values
    return column


def _bound() -> str:
    return f"timestamps are µs, at most {limits.MAX_TIMESTAMP_US:.0e} from the clock's zero"
