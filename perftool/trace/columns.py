"""Turn a piece's events (:class:`~perftool.trace.events.Events`) into the columns of a
:class:`~perftool.trace.model.Trace`.

Events repeat a few dozen (phase, name, category, pid, tid) signatures, so per piece the work is
Python code only per distinct signature and for the few metadata, counter, flow and kept-args events.
A piece becomes a compact :class:`Part` (times and signature ids); :class:`ColumnBuilder` expands each part's
signatures into phase, name, category and track columns as it arrives, while the next pieces are still being
decoded, and appends them to the trace's columns. ``B``/``E`` pairs are matched with numpy at the end
(:func:`pair_begin_end`).
"""

from __future__ import annotations

import enum
import json
import math
import re
import sys
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import msgspec
import numpy as np

from perftool import limits
from perftool.errors import TraceError
from perftool.trace.events import Events, Interner, PieceError, Signature
from perftool.trace.model import Counters, Phase, Trace, Track, file_positions, rows_at, rows_behind
from perftool.trace.store import ColumnStore, Growing, OnDisk

BEGIN, END = 100, 101  # phase codes that exist only until B/E pairs are matched
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
INT64_MAX = 2**63 - 1
_PHASE_CODES = {
    "X": Phase.COMPLETE,
    "B": BEGIN,
    "E": END,
    "i": Phase.INSTANT,
    "I": Phase.INSTANT,
    "C": Phase.COUNTER,
    "s": Phase.FLOW_START,
    "t": Phase.FLOW_STEP,
    "f": Phase.FLOW_END,
    "b": Phase.ASYNC,
    "e": Phase.ASYNC,
    "n": Phase.ASYNC,
    "S": Phase.ASYNC,
    "T": Phase.ASYNC,
    "p": Phase.ASYNC,
    "F": Phase.ASYNC,
}
_ROOM_TO_SPARE = 1.05  # room kept for the rows foreseen, beyond them: a foresight a little short costs a copy
_METADATA_PHASE = 200
_OVERFLOWING_NUMBER = re.compile(rb"\d[eE]\+?\d{3}")  # an exponent of three digits: perhaps past a double
_PHASE_LOOKUP = {**_PHASE_CODES, "M": _METADATA_PHASE}.get
_BLANK = ("", "", "", 0, 0)  # the signature of an event without phase, name, category, pid or tid


@dataclass
class Part:
    """One piece of the trace, compact for the trip from a worker process.

    Per timed event (all but metadata and counter events) only the times and a signature id
    travel; the strings live in the piece's table of distinct signatures. Flow ids, kept args,
    metadata and counters are listed for the few events that have them, by position in the piece.
    """

    count: int  # events in the piece, metadata and counter events included
    ts: np.ndarray  # float64 per timed event
    dur: np.ndarray  # float64 per timed event
    signature: np.ndarray  # int32 per timed event: index into ``signatures``
    signatures: list[Signature]
    untimed: np.ndarray  # positions of the metadata and counter events
    flow_events: np.ndarray  # positions of the events that carry a flow or async id
    flow_ids: np.ndarray  # int64: the ids; string ids as -2 - index into ``flow_keys``
    flow_keys: list[str]
    args_events: np.ndarray  # positions of the events whose args are kept
    args_refs: np.ndarray  # int32 per such event: its args' index into ``kept_args`` (equal inputs share one)
    kept_args: list[bytes]
    metadata_events: list[tuple[int | str, int | str, str, bytes]]  # pid, tid, name, args
    counter_events: list[tuple[int, float, int, bytes]]  # position, ts, signature, args
    size: int = 0  # bytes of JSON the piece held (0 where not known)


LAUNCH_MIN_US = 10.0  # kernels shorter than this keep no launch configuration: a few µs lose little to a small grid


class ArgsKept(enum.IntEnum):
    """How much of an event's ``args`` the loader keeps."""

    NONE = 0
    ALL = 1
    INPUTS = 2  # just its recorded inputs (:class:`RecordedInputs`)
    LAUNCH = 3  # just its launch configuration (:class:`LaunchConfig`), and only for long kernels


@dataclass(frozen=True)
class KeepArgs:
    """Which events keep their ``args``: those in ``categories``, and those whose name ``names`` matches
    (a regular expression; empty for none). Of those kept for their name alone, events whose name ``inputs_only``
    matches keep just their recorded inputs (``Input Dims``, ``Input dims``, ``Input type``, ``Concrete Inputs``).
    Events in ``launch_categories`` that run at least ``launch_min_us`` keep just their launch configuration.
    Reduced args are written compactly, so calls with the same inputs or launch keep the same bytes. Decided once
    per distinct signature, never per event."""

    categories: frozenset[str] = frozenset()
    names: str = ""
    inputs_only: str = ""
    launch_categories: frozenset[str] = frozenset()
    launch_min_us: float = LAUNCH_MIN_US

    def of(self, signatures: list[Signature]) -> np.ndarray:
        """Per signature: how much of its events' args is kept (an :class:`ArgsKept`). The answer for each name and
        category is kept for the pieces after (a trace's repeat theirs): the dialects' patterns run once a name."""
        known = _KEPT_BY_NAME.setdefault(self, {})
        if len(known) > _KEPT_NAMES:  # a trace of that many distinct names gains nothing from keeping them
            known.clear()
        keys = [(name, category) for _, name, category, _, _ in signatures]
        return np.fromiter(  # get, not `in` then [] : a cluster worker's other thread may clear it in between
            (kept if (kept := known.get(key)) is not None else known.setdefault(key, self._kept(*key)) for key in keys),
            np.uint8,
            len(keys),
        )

    @cached_property
    def _patterns(self) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
        """``names`` and ``inputs_only`` compiled, once (None where empty): a trace of many steps has a new name
        a step (``ProfilerStep#N``), each matched against both."""
        return (
            re.compile(self.names) if self.names else None,
            re.compile(self.inputs_only) if self.inputs_only else None,
        )

    def _kept(self, name: str, category: str) -> int:
        if category in self.categories:  # an event a dialect keeps for its category keeps all its args
            return ArgsKept.ALL
        names, inputs_only = self._patterns
        if names and names.search(name):
            return ArgsKept.INPUTS if inputs_only and inputs_only.search(name) else ArgsKept.ALL
        if category in self.launch_categories:
            return ArgsKept.LAUNCH
        return ArgsKept.NONE


_KEPT_BY_NAME: dict[KeepArgs, dict[tuple[str, str], int]] = {}  # KeepArgs.of's answers, per process
_KEPT_NAMES = 1 << 16


class RecordedInputs(msgspec.Struct, omit_defaults=True):
    """An op's recorded inputs, as PyTorch's profiler writes them (``record_shapes=True``), left as raw JSON."""

    dims: msgspec.Raw = msgspec.field(name="Input Dims", default=msgspec.Raw(b""))
    dims_before_1_10: msgspec.Raw = msgspec.field(name="Input dims", default=msgspec.Raw(b""))
    types: msgspec.Raw = msgspec.field(name="Input type", default=msgspec.Raw(b""))
    concrete: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=msgspec.Raw(b""))


class LaunchConfig(msgspec.Struct, omit_defaults=True):
    """A kernel's launch configuration, as Kineto records it with each kernel, left as raw JSON."""

    grid: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""))
    block: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""))
    registers: msgspec.Raw = msgspec.field(name="registers per thread", default=msgspec.Raw(b""))
    shared_memory: msgspec.Raw = msgspec.field(name="shared memory", default=msgspec.Raw(b""))


_REDUCERS: dict[int, msgspec.json.Decoder] = {  # by ArgsKept's value
    ArgsKept.INPUTS: msgspec.json.Decoder(RecordedInputs),
    ArgsKept.LAUNCH: msgspec.json.Decoder(LaunchConfig),
}
_KEYS: dict[int, tuple[bytes, ...]] = {  # the keys of the fields each reduction keeps, the first Kineto writes first
    ArgsKept.INPUTS: (b'"Input Dims"', b'"Input dims"', b'"Input type"', b'"Concrete Inputs"'),
    ArgsKept.LAUNCH: (b'"registers per thread"', b'"shared memory"', b'"grid"', b'"block"'),
}


def _reduced(kept: int, raw: bytes) -> bytes:
    """The part of an event's args that ``kept`` names, compactly ({} where there is none or the args do not parse)."""
    try:
        return msgspec.json.encode(_REDUCERS[kept].decode(raw))
    except (msgspec.DecodeError, UnicodeDecodeError):
        return b"{}"


KEEP_NO_ARGS = KeepArgs()  # only instant events keep theirs


def make_part(events: Events, keep_args: KeepArgs, size: int = 0) -> Part:
    """The Part of one piece's events (``size``: the piece's bytes, where known). Runs in worker processes too, so
    it takes and returns plain data.

    Events repeat a few dozen signatures, so phases, categories and tracks are looked at once per distinct
    signature, and only the few events that need them have their args or flow ids read.
    """
    n = len(events)
    signature, distinct, ts, dur = events.signature, events.distinct, events.ts, events.dur
    phase_of = np.array([_PHASE_LOOKUP(s[0], Phase.OTHER) for s in distinct], dtype=np.uint8)
    untimed_of = (phase_of == _METADATA_PHASE) | (phase_of == Phase.COUNTER)
    blank_of = np.array([s == _BLANK for s in distinct], dtype=bool)

    # jax.profiler ends its event list with an empty object: an event with no phase, name or time says nothing
    blank = blank_of[signature] & np.isnan(ts) & np.isnan(dur)
    untimed = np.flatnonzero(untimed_of[signature] | blank)
    metadata_events, counter_events = [], []
    untimed_rows = untimed.tolist()
    for i, raw, sig, when in zip(untimed_rows, events.reader.args(untimed), signature[untimed].tolist(), ts[untimed]):
        ph, name, _, pid, tid = distinct[sig]
        if ph == "M":
            metadata_events.append((pid, tid, name, raw))
        elif ph:
            counter_events.append((i, float(when), sig, raw))

    kept_of = keep_args.of(distinct)
    instant = phase_of == Phase.INSTANT
    kept_of[instant & ((kept_of == ArgsKept.NONE) | (kept_of == ArgsKept.LAUNCH))] = ArgsKept.ALL
    kept_of[untimed_of] = ArgsKept.NONE
    keeping = kept_of[signature]
    keeping[blank] = ArgsKept.NONE
    if keep_args.launch_categories:
        keeping[(keeping == ArgsKept.LAUNCH) & ~(dur >= keep_args.launch_min_us)] = ArgsKept.NONE
    args_events, args_refs, kept_args = _kept_args(events, keeping)

    flow_events = np.flatnonzero(((phase_of >= Phase.FLOW_START) & (phase_of <= Phase.ASYNC))[signature])
    flow_ids, flow_keys = _flow_ids(events.reader.ids(flow_events))

    if untimed.size:
        timed = np.ones(n, dtype=bool)
        timed[untimed] = False
        ts, dur, signature = ts[timed], dur[timed], signature[timed]
    return Part(
        count=n,
        ts=ts,
        dur=dur,
        signature=signature,
        signatures=distinct,
        untimed=untimed,
        flow_events=flow_events,
        flow_ids=flow_ids,
        flow_keys=flow_keys,
        args_events=args_events,
        args_refs=args_refs,
        kept_args=kept_args,
        metadata_events=metadata_events,
        counter_events=counter_events,
        size=size,
    )


def _kept_args(events: Events, keeping: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[bytes]]:
    """The events whose args are kept (``keeping`` says how much of each), the index of each one's args in the list
    of kept args, and that list, in order of first use: whole args each their own, reduced ones shared by all whose
    reduction is equal.

    A reduction reads the args from the first field it keeps on (:data:`_KEYS`); profilers write the varying fields
    (ids, correlation) before these, so the calls of one op with the same inputs, or kernels with the same launch,
    share that tail: the events are grouped by it (in C where the scanner read them) and each group reduced once.
    """
    rows = np.flatnonzero(keeping)
    rows = rows[events.reader.has_args(rows)]
    kinds = keeping[rows]
    reductions = Interner()  # the distinct reduced args, of any kind
    key = -1 - np.arange(len(rows))  # per row, what its kept args are: whole ones its own (< 0), else a reduction
    for kind, keys_kept in _KEYS.items():
        of_kind = np.flatnonzero(kinds == kind)
        if not of_kind.size:
            continue
        group, first = events.reader.tail_groups(rows[of_kind], keys_kept)
        firsts = rows[of_kind[first]]
        tails, raws = events.reader.tails(firsts, keys_kept), events.reader.args(firsts)
        reduced = [_reduced(kind, raw) if tail else b"{}" for raw, tail in zip(raws, tails)]
        key[of_kind] = reductions.remap(reduced)[group]
    distinct, first_use, ref = np.unique(key, return_index=True, return_inverse=True)
    by_first_use = np.argsort(first_use)
    rank = np.empty_like(by_first_use)
    rank[by_first_use] = np.arange(by_first_use.size)
    used = distinct[by_first_use].tolist()
    whole_keys = [k for k in used if k < 0]
    whole = dict(zip(whole_keys, events.reader.args(rows[np.array([-1 - k for k in whole_keys], np.int64)])))
    values = reductions.values
    return rows, rank[ref.reshape(-1)].astype(np.int32), [whole[k] if k < 0 else values[k] for k in used]


def _flow_ids(ids: list[int | str | None]) -> tuple[np.ndarray, list[str]]:
    """Integer ids stay as they are; string ids, and integers past int64 (a uint64 such as 2^64 - 1 is valid JSON),
    get local numbers (negative, below -1) to remap."""
    try:
        numbers = np.array(ids, dtype=np.int64)
        if not numbers.size or numbers.min() >= 0:
            return numbers, []
    except (ValueError, TypeError, OverflowError):
        pass
    strings = Interner()
    keyed = [i if isinstance(i, int) and 0 <= i <= INT64_MAX else str(i) for i in ids]  # past int64: a name
    string_keys = [k for k in keyed if isinstance(k, str)]
    local = strings(string_keys, len(string_keys))
    out = np.array([k if isinstance(k, int) else 0 for k in keyed], dtype=np.int64)
    is_str = np.fromiter((isinstance(k, str) for k in keyed), dtype=bool, count=len(keyed))
    out[is_str] = -2 - local
    return out, strings.values


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
        self.kept_args: list[bytes] = []
        self.metadata_events: list[tuple[int | str, int | str, str, bytes]] = []
        self.counter_events: list[tuple[int, float, int, bytes]] = []  # order, ts, signature, args
        self.count = 0  # events added, metadata and counter events included
        self.rows = 0  # ... of them timed: the rows of the columns
        self.bytes = 0  # of JSON in the parts added, where they say
        self.args_bytes = 0
        self.problems: dict[int, int] = {}  # check (as _checked lists them) -> the first row that fails it
        self.track_used = Growing(np.dtype(bool))  # per track key: whether a row lies on it

    @property
    def memory_needed(self) -> int:
        """Bytes of memory scanning what was added so far will need (:func:`perftool.limits.memory_to_scan`)."""
        return limits.memory_to_scan(
            self.count,
            len(self.signatures.ids),
            len(self.counter_events),
            len(self.kept_args),
            self.args_bytes,
            self.store.on_disk,
            self.analysis,
        )

    def keep_on_disk(self, directory: str, need: int) -> None:
        """Keep the columns in files under ``directory`` from now on (``need``: the bytes they will take there)."""
        on_disk = OnDisk(self.path, directory, need)
        for key, column in self.store.contents():
            on_disk.append(key, column)
        self.store = on_disk

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
        self.args_bytes += sum(map(len, part.kept_args)) + sum(len(raw) for *_, raw in part.counter_events)
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
        if col["ts"].size == 0 and not self.counter_events:
            raise TraceError(self.path, "empty trace: only metadata events, nothing timed")
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
            names=tables.names(),
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
        """Each counter event's numeric args as samples of the series "<event name>.<key>", on the event's track."""
        if not self.counter_events:
            return Counters.empty()
        orders, whens, signatures, _ = zip(*self.counter_events)
        decoded = self._counter_args()
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
            return Counters.empty()
        events, keys, values = zip(*samples)
        try:
            value = np.array(values, dtype=np.float64)
        except OverflowError:  # an integer past any double
            event, key = next((e, k) for e, k, v in samples if abs(v) > sys.float_info.max)
            beyond = f"event {orders[event]}: counter '{key}' is a number beyond any double"
            raise TraceError(self.path, beyond) from None
        signature = np.array(signatures, dtype=np.intp)[np.array(events, dtype=np.intp)]
        pairs = Interner()  # (name id, key): the series, before names that read alike are one
        pair = pairs(zip(tables.name.filled[signature].tolist(), keys), len(keys))
        series = Interner()
        names = tables.names()
        series_of_pair = series([f"{names[name]}.{key}" for name, key in pairs.values], len(pairs.ids))
        return Counters(
            ts=when[np.array(events, dtype=np.intp)],
            value=value,
            series=series_of_pair[pair],
            track=compact_track[tables.track.filled[signature]].astype(np.int32),
            names=[str(v) for v in series.values],
        )

    def _counter_args(self) -> list[Any]:
        """Each counter event's args decoded ({} where it has none): all in one call, or one by one to name the first
        that is not valid JSON."""
        raws = [raw or b"{}" for _, _, _, raw in self.counter_events]
        try:
            return msgspec.json.decode(b"[" + b",".join(raws) + b"]")
        except (msgspec.DecodeError, UnicodeDecodeError):
            return [self._decoded(order, raw) for (order, _, _, _), raw in zip(self.counter_events, raws)]

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
        self.phase.extend(np.array([_PHASE_LOOKUP(p, Phase.OTHER) for p in ph], dtype=np.uint8))
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


def _bound() -> str:
    return f"timestamps are µs, at most {limits.MAX_TIMESTAMP_US:.0e} from the clock's zero"
