"""The columnar trace model: numpy columns, interned strings, tracks with roles.

After loading, a trace is never a list of per-event objects. Every event is one row across the
columns of :class:`Trace`; names and categories are indices into string tables, and the place an
event ran is an index into :attr:`Trace.tracks`.
"""

from __future__ import annotations

import enum
import re
from _thread import LockType
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, TypeVar

import msgspec
import numpy as np

from perftool.common.arrays import distinct, in_order
from perftool.common.threads import made_once
from perftool.common.units import duration
from perftool.trace.events import Interner
from perftool.trace.store import ColumnStore

Derived = TypeVar("Derived")


def rows_behind(skipped: np.ndarray) -> np.ndarray:
    """Per position in the file that holds no row (``skipped``, sorted), the rows before it: what
    :func:`file_positions` counts with."""
    return skipped - np.arange(skipped.size)


def file_positions(rows: np.ndarray, behind: np.ndarray) -> np.ndarray:
    """The positions in the file of ``rows``: each row's index plus the positions without a row before it (those
    with at most that many rows behind them, :func:`rows_behind`)."""
    return rows + np.searchsorted(behind, rows, side="right")


def rows_at(positions: np.ndarray, skipped: np.ndarray) -> np.ndarray:
    """The rows of events at ``positions`` in the file (each one a row, not among ``skipped``): each position less
    the positions without a row before it; what :func:`file_positions` undoes."""
    return positions - np.searchsorted(skipped, positions)


def pandas_module(needed_by: str) -> Any:
    """pandas, imported on demand: an optional dependency, for the DataFrames of notebooks."""
    try:
        import pandas
    except ImportError:
        raise ImportError(f"{needed_by} needs pandas: pip install pandas") from None
    return pandas


class Phase(enum.IntEnum):
    """Chrome Trace Event phases kept after loading (``B``/``E`` pairs become ``COMPLETE``)."""

    COMPLETE = 0  # X, and paired B/E
    INSTANT = 1  # i, I
    COUNTER = 2  # C (values live in Trace.counters)
    FLOW_START = 3  # s
    FLOW_STEP = 4  # t
    FLOW_END = 5  # f
    ASYNC = 6  # b, e, n, S, T, p, F: kept, not paired
    OTHER = 7  # any other phase letter


class Role(str, enum.Enum):
    """What a track is, independent of the vendor that wrote it. Rules ask for roles."""

    HOST = "host"  # host thread running Python, framework dispatch, runtime calls
    INPUT = "host.input"  # data loading / preprocessing workers
    DEVICE = "device"  # device compute stream
    H2D = "link.h2d"  # host-to-device transfer engine
    D2H = "link.d2h"  # device-to-host transfer engine
    COMPILER = "compiler"  # graph / op compilation
    SUMMARY = "summary"  # tracks a profiler derived from others (never double-counted)
    OTHER_DEVICE = "device.other"  # another device's tracks, where a trace holds several: shown, not analysed
    OTHER_RANK = "rank.other"  # another rank's tracks, where a trace merges several ranks': shown, not analysed
    UNKNOWN = "unknown"


class Kind(enum.IntEnum):
    """What an event is, as decided by the trace's dialect."""

    OTHER = 0
    COMPUTE = 1  # device kernel / op
    H2D = 2  # host-to-device copy
    D2H = 3  # device-to-host copy
    D2D = 4  # device-to-device copy
    MEMSET = 5
    HOST_OP = 6  # framework operator on the host (aten::*, cpu_op)
    RUNTIME = 7  # runtime API call (cudaLaunchKernel, AscendCL@...)
    STEP = 8  # one training step (ProfilerStep#N, emulator step marker)
    COMPILE = 9  # graph / op compilation
    SYNC = 10  # host waits for the device (stream synchronise, .item())
    ANNOTATION = 11  # user annotation ranges
    COMMUNICATION = 12  # collectives (nccl, hccl)
    INPUT = 13  # data loading on the host


# On a device's line, what is no work of it: step marks, spans drawn over its work (annotations), and waits, which
# are idle time.
NOT_DEVICE_WORK = (Kind.STEP, Kind.ANNOTATION, Kind.SYNC)
# Kineto's own marks of its recording: where the window starts, the session's span, and where it wrote the trace
# (stamped once it had stopped and processed what it recorded, after all of the job's events)
PROFILER_WINDOW_END = "Record Window End"
PROFILER_MARKS = frozenset({"Iteration Start: PyTorch Profiler", "PyTorch Profiler (0)", PROFILER_WINDOW_END})
# a table setting this few entries (or leaving this few unset) is read by comparing the codes with each: over a
# trace's events, a comparison costs a twentieth of a lookup
FEW_ENTRIES = 8
_DIGITS_AS_ZERO = str.maketrans("123456789", "000000000")
# what in a pattern can tell one digit from another: a digit (a literal, a class, an escape), a character by its Unicode
# name, a group matched again by name; a pattern without any matches a name as it matches its digits written 0
_TELLS_DIGITS_APART = re.compile(r"[0-9]|\\N|\(\?P=")


def _digits_as_zero(names: list[str]) -> list[str]:
    """Each of ``names`` with every digit written 0: all translated at once, joined by NUL where no name holds one
    (a trace of 16,500 step markers: 1 ms, against 10 ms a name at a time)."""
    joined = "\0".join(names)
    if joined.count("\0") != len(names) - 1:  # none, or a name holding NUL: one at a time
        return [name.translate(_DIGITS_AS_ZERO) for name in names]
    return joined.translate(_DIGITS_AS_ZERO).split("\0")


def among_kinds(values: np.ndarray, kinds: Iterable[Kind]) -> np.ndarray:
    """Whether each of ``values`` (kind codes) is one of ``kinds`` (:func:`looked_up` in a table of every kind)."""
    table = np.zeros(max(Kind) + 1, dtype=bool)
    table[list(kinds)] = True
    return looked_up(table, values)


def looked_up(table: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Per code of ``codes`` (a kind, a name, a track, a category): its entry in the boolean ``table``. Where the
    table sets :data:`FEW_ENTRIES` or fewer (or leaves that few unset), the codes are compared with each; else each
    is taken from the table (``take``, two thirds of the time indexing takes)."""
    entries = np.flatnonzero(table)
    unset = entries.size > table.size - entries.size
    if unset:
        entries = np.flatnonzero(~table)
    if entries.size > FEW_ENTRIES:
        return table.take(codes)
    found = np.zeros(codes.shape, dtype=bool)
    for code in entries.tolist():
        found |= codes == code
    return np.logical_not(found, out=found) if unset else found


@dataclass(frozen=True)
class Track:
    """One timeline: a (pid, tid) pair with its names and role."""

    id: int
    pid: int | str
    tid: int | str
    process_name: str = ""
    thread_name: str = ""
    process_labels: str = ""
    process_sort_index: int | None = None
    thread_sort_index: int | None = None
    role: Role = Role.UNKNOWN

    @property
    def label(self) -> str:
        """A name a person recognises: process and thread names, or the raw ids."""
        process = self.process_name or f"pid {self.pid}"
        thread = self.thread_name or f"tid {self.tid}"
        return f"{process} / {thread}"

    @property
    def shown_order(self) -> tuple[int, tuple[int, int | str], int, tuple[int, int | str]]:
        """Where a trace viewer lists the track: by its process's sort index, pid, its own sort index, tid (numeric
        ids before string ones); not by where the file first names it."""
        return (self.process_sort_index or 0, _id_order(self.pid), self.thread_sort_index or 0, _id_order(self.tid))


def _id_order(value: int | str) -> tuple[int, int | str]:
    """Numeric ids in numeric order, then string ids."""
    return (0, value) if isinstance(value, int) else (1, value)


@dataclass
class Counters:
    """Counter samples (``C`` events): one row per (event, series) value."""

    ts: np.ndarray  # float64, µs
    value: np.ndarray  # float64
    series: np.ndarray  # int32 index into ``names``
    track: np.ndarray  # int32 index into Trace.tracks
    names: list[str]  # "<event name>.<key>", e.g. "Memory.allocated"

    @classmethod
    def empty(cls) -> Counters:
        return cls(np.empty(0, np.float64), np.empty(0, np.float64), np.empty(0, np.int32), np.empty(0, np.int32), [])


@dataclass
class Trace:
    """A loaded trace: one row per event across the column arrays.

    Times are microseconds from the trace's own clock. :attr:`order` is each event's position in the
    file (0-based), so evidence and error messages can point back at the source.
    """

    source: str
    ts: np.ndarray  # float64
    dur: np.ndarray  # float64, 0 for instants and flows
    phase: np.ndarray  # uint8, Phase
    track: np.ndarray  # int32, index into tracks
    name: np.ndarray  # int32, index into names
    cat: np.ndarray  # int32, index into cats
    # int64, a flow's or async event's id, -1 when the event has none; string ids (and past int64) -2 - their
    # index. Kineto's launches and device work hold their correlation id (what pairs them where flows are left out).
    flow_id: np.ndarray
    skipped: np.ndarray  # int64, sorted: the positions in the file that are no row (metadata, counters, ends of B/E)
    args_ref: np.ndarray  # int32, index into the kept args, -1 when not kept
    names: list[str]
    cats: list[str]
    tracks: list[Track]
    counters: Counters = field(default_factory=Counters.empty)
    metadata: dict[str, Any] = field(default_factory=dict)
    kept_args: Sequence[bytes] = field(default_factory=list)  # in a file where the columns are on disk
    unclosed: np.ndarray = field(
        default_factory=lambda: np.empty(0, dtype=np.int64)
    )  # file positions of B never closed
    kind: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint8))  # uint8, Kind; set by the dialect
    # int64 rows: the work of the devices beside the analysed one that its own host drives too (a process running a
    # model split over several GPUs), in row order; set by the dialect, none where the trace holds one device
    other_devices_work: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    dialect: str = "generic"
    _name_tables: dict[re.Pattern, np.ndarray] = field(default_factory=dict, repr=False)
    _role_masks: dict[frozenset, np.ndarray] = field(default_factory=dict, repr=False)
    _window_masks: dict[tuple[float, float], np.ndarray] = field(default_factory=dict, repr=False)
    derived: dict[str, Any] = field(default_factory=dict, repr=False)  # what analyses derive once per trace
    _deriving: dict[str, LockType] = field(default_factory=dict, repr=False)  # one lock per key of derived
    store: ColumnStore = field(default_factory=ColumnStore, repr=False)  # where the columns are: memory or disk

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    def __repr__(self) -> str:
        """What a notebook shows: the trace in one line, not its columns."""
        span = f", span {duration(float(self.end.max() - self.ts.min()))}" if len(self) else ""
        return (
            f"Trace({self.source!r}, {self.dialect}, {len(self):,} events, {len(self.tracks):,} tracks, "
            f"{len(self.names):,} names{span})"
        )

    @cached_property
    def end(self) -> np.ndarray:
        """Per event: when it ends (``ts + dur``), kept where the columns are."""
        end = self.store.new(np.float64, len(self))
        for chunk in self.store.chunks(len(self)):
            np.add(self.ts[chunk], self.dur[chunk], out=end[chunk])
        return end

    @cached_property
    def order(self) -> np.ndarray:
        """Per event: its position in the file (int64), worked out when first asked for (few analyses ask) from the
        positions that hold no row, kept where the columns are."""
        order, behind = self.store.new(np.int64, len(self)), rows_behind(self.skipped)
        for chunk in self.store.chunks(len(self)):
            order[chunk] = file_positions(np.arange(chunk.start, chunk.stop), behind)
        return order

    def derive(self, key: str, compute: Callable[[], Derived]) -> Derived:
        """What an analysis derives from the trace once, kept under ``key``: the first thread that asks computes it,
        one asking meanwhile waits for that value rather than computing it again."""
        return made_once(self.derived, self._deriving, key, compute)

    @property
    def on_disk(self) -> bool:
        """Whether the columns are kept in files on disk, as they did not fit the memory budget."""
        return self.store.on_disk

    @property
    def display_time_unit(self) -> str:
        """The unit the trace asks viewers to display (``ms`` by default); timestamps stay in µs."""
        return str(self.metadata.get("displayTimeUnit", "ms"))

    def args(self, row: int) -> dict[str, Any] | None:
        """Decoded ``args`` of one event, or None when the loader did not keep them."""
        ref = int(self.args_ref[row])
        if ref < 0:
            return None
        try:
            value = msgspec.json.decode(self.kept_args[ref])
        except (msgspec.DecodeError, UnicodeDecodeError):  # kept unparsed at load time: bad UTF-8 shows only here
            return None
        return value if isinstance(value, dict) else None

    def args_of(self, rows: np.ndarray) -> list[dict[str, Any] | None]:
        """:meth:`args` of many rows, decoded in one call (one by one where one of them is not valid UTF-8)."""
        refs = self.args_ref[rows].tolist()
        kept = [self.kept_args[ref] for ref in refs if ref >= 0]
        try:
            decoded = iter(msgspec.json.decode(b"[" + b",".join(kept) + b"]"))
        except (msgspec.DecodeError, UnicodeDecodeError):
            return [self.args(row) for row in rows.tolist()]
        values = [next(decoded) if ref >= 0 else None for ref in refs]
        return [value if isinstance(value, dict) else None for value in values]

    def tracks_with_role(self, *roles: Role) -> np.ndarray:
        return np.array([t.id for t in self.tracks if t.role in roles], dtype=np.int32)

    def tracks_of(self, rows: np.ndarray) -> np.ndarray:
        """Per track: whether one of ``rows`` lies on it (counted, where ``np.unique`` would sort them)."""
        return np.bincount(self.track[rows], minlength=len(self.tracks)) > 0

    def innermost(self, rows: np.ndarray) -> np.ndarray:
        """Of ``rows`` (spans properly nested on each track), those that contain no other of them, by track and
        start."""
        if rows.size < 2:
            return rows
        by_track = rows[np.argsort(self.track[rows], kind="stable")]
        starts = self.ts[by_track]
        same_track = self.track[by_track[1:]] == self.track[by_track[:-1]]
        if not np.all(
            starts[1:][same_track] > starts[:-1][same_track]
        ):  # out of order, or a parent and a child at once
            by_track = by_track[np.lexsort((-self.dur[by_track], self.ts[by_track], self.track[by_track]))]
        contains_next = same_track & (self.ts[by_track[1:]] < self.end[by_track[:-1]])
        return by_track[np.append(~contains_next, True)]

    def top_level(self, rows: np.ndarray) -> np.ndarray:
        """Of ``rows`` (complete events of one track), those no other of them encloses, in time order: of events that
        start together, the longest (the first of the longest) encloses the others."""
        rows, starts = in_order(rows, self.ts)  # a thread's events come mostly in order, often wholly
        if rows.size == 0:
            return rows
        ends = self.end[rows]
        if np.all(starts[1:] != starts[:-1]):  # no two start together (most threads): one inside none that came before
            return rows[ends > np.r_[-np.inf, np.maximum.accumulate(ends)[:-1]]]
        opens = np.flatnonzero(np.r_[True, starts[1:] != starts[:-1]])  # where each run starting together opens
        group = np.repeat(np.arange(opens.size), np.diff(np.r_[opens, rows.size]))
        longest = np.maximum.reduceat(ends, opens)
        before = np.r_[-np.inf, np.maximum.accumulate(longest)[:-1]]  # the furthest any earlier run reaches
        candidates = np.flatnonzero(ends == longest[group])
        first = candidates[np.r_[True, group[candidates[1:]] != group[candidates[:-1]]]]  # one per run
        return rows[first[ends[first] > before[group[first]]]]  # one that only overlaps an earlier one (rounding) stays

    def top_level_by_track(self, rows: np.ndarray) -> np.ndarray:
        """Of ``rows`` (complete events, of any tracks), those no other of them on the same track encloses
        (:meth:`top_level`, track by track), in row order."""
        tracks = self.track[rows]
        kept = [self.top_level(rows[tracks == track]) for track in distinct(tracks).tolist()]
        return np.sort(np.concatenate(kept)) if kept else rows

    def on_roles(self, *roles: Role) -> np.ndarray:
        """Per event: whether it lies on a track with one of ``roles``."""
        key = frozenset(roles)
        if key not in self._role_masks:
            table = np.zeros(max(len(self.tracks), 1), dtype=bool)
            table[self.tracks_with_role(*roles)] = True
            self._role_masks[key] = looked_up(table, self.track)
        return self._role_masks[key]

    def of_kinds(self, *kinds: Kind) -> np.ndarray:
        """Per event: whether its kind is one of ``kinds``."""
        return among_kinds(self.kind, kinds)

    def device_work(self, *roles: Role) -> np.ndarray:
        """Per event: a span of work on a track with one of ``roles`` (device roles), not a mark, a span drawn over
        the work or a wait (:data:`NOT_DEVICE_WORK`)."""
        return self.on_roles(*roles) & (self.phase == Phase.COMPLETE) & ~self.of_kinds(*NOT_DEVICE_WORK)

    def times_moved(self) -> None:
        """Forget what was derived from the events' times (their ends, the spans in each window, the analyses'),
        after some of them moved, so that it is derived again from the times as they are."""
        self.__dict__.pop("end", None)
        self.derived.clear()
        self._window_masks.clear()

    def spans_in(self, lo: float, hi: float) -> np.ndarray:
        """Per event: a span (a complete event) overlapping the window [lo, hi]; computed once per window."""
        if (lo, hi) not in self._window_masks:
            self._window_masks[lo, hi] = (self.phase == Phase.COMPLETE) & (self.ts < hi) & (self.end > lo)
        return self._window_masks[lo, hi]

    def name_matches(self, pattern: re.Pattern, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Per event (or per row of ``rows``): whether its name matches ``pattern`` (decided once per distinct name,
        then cached)."""
        return self.by_name(self.name_table(pattern), rows)

    def name_table(self, pattern: re.Pattern) -> np.ndarray:
        """Per distinct name: whether it matches ``pattern`` (decided once, then cached). Tables of several patterns
        combine (``|``, ``& ~``) before :meth:`by_name` reads them per event: one pass over the events, not one each."""
        if pattern not in self._name_tables:
            names, of_name = (self.names, None) if _TELLS_DIGITS_APART.search(pattern.pattern) else self._name_shapes
            found = np.fromiter(map(bool, map(pattern.search, names)), dtype=bool, count=len(names))
            found = found if of_name is None else found[of_name]
            self._name_tables[pattern] = found if found.size else np.zeros(1, dtype=bool)
        return self._name_tables[pattern]

    @cached_property
    def _name_shapes(self) -> tuple[list[str], np.ndarray]:
        """The distinct names with every digit written 0 (``ProfilerStep#17`` and ``ProfilerStep#42`` are one), and
        each name's index among them: a pattern that cannot tell one digit from another is searched in those."""
        shapes = Interner()
        of_name = shapes(_digits_as_zero(self.names), len(self.names))
        return shapes.values, of_name

    def by_name(self, table: np.ndarray, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Per event (or per row of ``rows``): its name's entry in ``table`` (one entry per distinct name, as
        :meth:`name_table` gives): most vocabularies are absent, the rest name a few of the names."""
        return looked_up(table, self.name[rows])

    def to_pandas(self) -> Any:  # a pandas.DataFrame; pandas is optional
        """One row per event, for digging further in a notebook (needs pandas: ``pip install pandas``).

        Columns: ``ts`` and ``dur`` (µs, the trace's clock), ``name``, ``cat``, ``track`` (process / thread),
        ``role`` of the track, ``kind`` the dialect gave the event, ``phase``, and ``order`` (position in the file).
        """
        pandas = pandas_module("Trace.to_pandas")
        labels = np.array([t.label for t in self.tracks] or [""], dtype=object)
        roles = np.array([t.role.value for t in self.tracks] or [""], dtype=object)
        kinds = np.array([k.name.lower() for k in Kind], dtype=object)
        phases = np.array([p.name.lower() for p in Phase], dtype=object)
        return pandas.DataFrame(
            {
                "ts": self.ts,
                "dur": self.dur,
                "name": pandas.Categorical.from_codes(self.name, self.names),
                "cat": pandas.Categorical.from_codes(self.cat, self.cats),
                "track": labels[self.track],
                "role": roles[self.track],
                "kind": kinds[self.kind],
                "phase": phases[self.phase],
                "order": self.order,
            }
        )

    def with_roles(self, roles: dict[int, Role]) -> None:
        """Assign roles to tracks by id (tracks are immutable records: those whose role changes are replaced, the others
        kept as they are, so that a trace of many threads does not pay for every track at every call)."""
        self.tracks = [t if roles.get(t.id, t.role) == t.role else replace(t, role=roles[t.id]) for t in self.tracks]
        self._role_masks.clear()
