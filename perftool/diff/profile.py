"""Where one trace's steady step goes, per kernel, op, category and track: the tables a diff compares.

A step is timed on the timeline that paces it: the device's (its streams and copy engines) when the trace
has device work in the steady state, else the host threads'. On that timeline a step's time is exactly

    Σ time of its events − time they overlap one another + time it is idle

so the change of each event's time is its contribution to the change of step time, and the listed
contributions add up to the measured delta once the overlap and idle changes are shown beside them.

At the ``op`` level on the device timeline, each device event counts for the host op that launched it
(the outermost op around the launching call, paired by the trace's launch flows); a replayed graph's kernel for
the outermost op its launch lay in as the graph was captured, where a capture trace beside says (one call of it a
replay, with no host time); device work no flow links to an op is a remainder of its own. Host ops' own (host) time
is tabled beside it. The ``annotation`` level does the same with the outermost user annotations (``record_function``
ranges, below the step markers), which a model's code names the same on every vendor's hardware.

Every table is a group-by over name, kind or track ids with numpy; only distinct names pass through Python.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.communication import collective_parts, runs_collectives
from perftool.analysis.confidence import capture_hint
from perftool.analysis.family import device_family, device_name
from perftool.analysis.graph_captures import replay_ops
from perftool.analysis.idle import CAUSES, attribute_idle
from perftool.analysis.launches import Launches, launch_rows, with_replays
from perftool.analysis.nesting import HOST_WORK, outermost
from perftool.analysis.steps import detect_steps
from perftool.common.errors import PerftoolError
from perftool.common.threads import in_this_context
from perftool.dialects.vocabulary import COMPILED_REGION
from perftool.diff.names import loader_iterator, normalise
from perftool.job.signs import JobSigns
from perftool.pipeline.scan import distributed
from perftool.trace.model import NOT_DEVICE_WORK, Kind, Role, Trace

LAUNCHERS = ("op", "annotation")  # levels whose keys are host spans, counted for the device time they launched
DEVICE_ROLES = (Role.DEVICE, Role.H2D, Role.D2H)
IN_REPLAYS = "inside graph replays"  # the row of the time between a replayed graph's kernels (its own dependencies)
CATEGORY = {
    Kind.COMPUTE: "compute",
    Kind.COMMUNICATION: "communication",
    Kind.H2D: "copy host→device",
    Kind.D2H: "copy device→host",
    Kind.D2D: "copy device→device",
    Kind.MEMSET: "memset",
    Kind.HOST_OP: "host ops",
    Kind.RUNTIME: "runtime calls",
    Kind.SYNC: "syncs",
    Kind.INPUT: "input",
    Kind.COMPILE: "compile",
}


@dataclass
class Table:
    """Per key, per steady step: calls, the key's own time, and its time on the pacing timeline (µs)."""

    keys: list[str]
    calls: np.ndarray
    time_us: np.ndarray
    paced_us: np.ndarray

    def regrouped(self, key_of: dict[str, str]) -> Table:
        """The table with keys renamed by ``key_of`` (keys it lacks stay), rows of one new key summed."""
        keys, index = _grouped([key_of.get(key, key) for key in self.keys], np.arange(len(self.keys)))
        size = len(keys)

        def summed(values: np.ndarray) -> np.ndarray:
            return np.bincount(index, weights=values, minlength=size)

        return Table(keys, summed(self.calls), summed(self.time_us), summed(self.paced_us))


@dataclass
class Profile:
    """One trace's steady state for a diff: its mean step, how the pacing timeline spends it, and the tables."""

    source: str
    device: str
    family: str
    steps: int  # steady steps; 0: no step markers, the capture after its start-up is compared whole
    step_us: float  # mean steady step
    step_durations: list[float]  # each steady step, µs, in order
    timeline: str  # "device" or "host"
    idle_us: float  # per step, the pacing timeline idle
    idle_causes: dict[str, float]  # per step, the device's idle time by cause (its name in reports); {} on the host
    overlap_us: float  # per step, time its events overlap one another
    unlinked_us: dict[str, float]  # per step and launcher level: device time no key of the level launched
    events: int  # events on the pacing timeline in the steady state
    signs: JobSigns  # what the trace says of its job
    tables: dict[str, Table] = field(default_factory=dict)
    rank: int | None = None
    loaders: list[str] = field(default_factory=list)  # the DataLoader iterators whose fetches the steady steps hold
    compiled: bool = False  # whether the steady steps call torch.compile'd regions
    capture_hint: str = ""  # how to capture steps with the profiler that wrote the trace


def profile(trace: Trace, rank: int | None = None, stated_rank: int | None = None) -> Profile:
    """The diff's view of ``trace``: its steady steps, per level; with the rank it has in a job and the one it states
    (its own, or its file name's) for what it says of its job. Work that does not wait for the steps (the
    host's outermost ops), then the device's idle causes, run in a helper thread beside the rest: numpy frees
    the GIL, so a profile takes two cores where it has them."""
    with ThreadPoolExecutor(1) as helper:

        def beside(work: Callable[..., Any], *args: Any) -> Future:
            """``work`` done in the helper thread, its arrays made where this thread's are."""
            return helper.submit(in_this_context(work), *args)

        on_host = trace.on_roles(Role.HOST)
        outer_ops = beside(outermost, trace, np.flatnonzero(on_host & trace.of_kinds(*HOST_WORK)))
        annotations = beside(outermost, trace, np.flatnonzero(on_host & (trace.kind == Kind.ANNOTATION)))
        sources, spans = launch_rows(trace)
        steps = detect_steps(trace, Launches(trace.ts[sources], trace.end[spans]))
        lo, hi = steps.window  # without step markers: the capture after its start-up, as one "step"
        if hi <= lo:
            raise PerftoolError(f"{trace.source}: no events to compare")
        count = max(steps.steady, 1)
        in_window = trace.spans_in(lo, hi)
        device_work = np.flatnonzero(in_window & trace.on_roles(*DEVICE_ROLES) & ~trace.of_kinds(*NOT_DEVICE_WORK))
        device_rows = device_work[~collective_parts(trace)[device_work]]  # a collective once, not its tasks too
        timeline = "device" if device_rows.size else "host"
        host_rows, annotated = outer_ops.result(), annotations.result()
        device_busy = _busy(trace, device_work, lo, hi)
        causes = beside(_idle_causes, trace, lo, hi, device_busy, count)
        host_rows, annotated = host_rows[in_window[host_rows]], annotated[in_window[annotated]]
        rows = device_rows if timeline == "device" else host_rows
        clipped = _clipped(trace, rows, lo, hi)
        busy = intervals.total(device_busy if timeline == "device" else _busy(trace, rows, lo, hi))
        tables = {
            "kernel": _table(_name_keys(trace, rows), clipped, clipped, count),
            "category": _table(_kind_keys(trace, rows), clipped, clipped, count),
            "track": _table(_track_keys(trace, rows), clipped, clipped, count),
        }
        anchors = _launch_sources(trace, rows, sources, spans) if timeline == "device" else rows
        captured = _captured(trace, rows, (lo, hi)) if timeline == "device" else None
        linked = {}
        for level, spans_of_level in (("op", host_rows), ("annotation", annotated)):
            tables[level], linked[level] = _launcher_table(trace, spans_of_level, rows, anchors, (lo, hi), count,
                                                           captured if level == "op" else None)  # fmt: skip
        idle_causes = causes.result()
    per_step = 1.0 / count
    return Profile(
        source=trace.source,
        device=device_name(trace),
        family=device_family(trace),
        steps=steps.steady,
        step_us=(hi - lo) * per_step,
        step_durations=steps.steady_durations.tolist() if steps.steady else [hi - lo],
        timeline=timeline,
        idle_us=((hi - lo) - busy) * per_step,
        idle_causes=idle_causes,
        overlap_us=(float(clipped.sum()) - busy) * per_step,
        unlinked_us={level: (float(clipped.sum()) - linked[level]) * per_step for level in LAUNCHERS},
        events=int(rows.size),
        tables=tables,
        rank=rank,
        loaders=_loaders(trace, host_rows),
        compiled=any(COMPILED_REGION.match(trace.names[n]) for n in _used_names(trace, host_rows)),
        capture_hint=capture_hint(trace),
        signs=JobSigns(stated_rank, trace.dialect, distributed(trace, "world_size"), device_name(trace),
                       runs_collectives(trace, in_window)),
    )  # fmt: skip


def _loaders(trace: Trace, host_rows: np.ndarray) -> list[str]:
    """The DataLoader iterators (by class) whose fetches are among ``host_rows``, the outermost host spans."""
    return sorted({found for n in _used_names(trace, host_rows) if (found := loader_iterator(trace.names[n]))})


def _busy(trace: Trace, rows: np.ndarray, lo: float, hi: float) -> intervals.Intervals:
    """The union of the rows' spans, clipped to [lo, hi]."""
    return intervals.clip(intervals.union(trace.ts[rows], trace.end[rows]), lo, hi)


def _idle_causes(trace: Trace, lo: float, hi: float, busy: intervals.Intervals, count: int) -> dict[str, float]:
    """Per step, the idle time of the device timeline (``busy`` its work) by cause, as reports name the causes;
    {} without device work. The time between a replayed graph's kernels is no cause's (the graph's own
    dependencies, as scan counts it): where the trace replays graphs, it is a row of its own."""
    if busy[0].size == 0:
        return {}
    replayed = with_replays(trace, busy, lo, hi)
    idle = attribute_idle(trace, lo, hi, known={"device": replayed})
    if idle is None:
        return {}
    causes = {name: idle.time(cause) / count for cause, name in CAUSES.items()}
    if replayed is not busy:  # the trace replays graphs
        causes[IN_REPLAYS] = (intervals.total(replayed) - intervals.total(busy)) / count
    return causes


Keys = tuple[list[str], np.ndarray]  # the distinct keys, and each row's index into them


def _table(keys: Keys, time_us: np.ndarray, paced_us: np.ndarray, count: int) -> Table:
    """Per key: its rows' calls, time and paced time per step (keys no row has are left out)."""
    names, index = keys
    size = len(names)
    calls = np.bincount(index, minlength=size)
    used = np.flatnonzero(calls)
    return Table(
        [names[i] for i in used.tolist()],
        calls[used] / count,
        np.bincount(index, weights=time_us, minlength=size)[used] / count,
        np.bincount(index, weights=paced_us, minlength=size)[used] / count,
    )


def _grouped(labels: list[str], index: np.ndarray) -> Keys:
    """Keys from one label per id (``index`` the rows' ids): labels that coincide become one key."""
    if not labels:
        return [], np.empty(0, np.int64)
    distinct, inverse = np.unique(np.array(labels, dtype=str), return_inverse=True)
    return list(map(str, distinct)), inverse.reshape(-1)[index]


def _name_keys(trace: Trace, rows: np.ndarray) -> Keys:
    """Each row's normalised name; only the names the rows use are normalised (found by counting, not sorting)."""
    used = _used_names(trace, rows)
    keys, index = _grouped([normalise(trace.names[n]) for n in used], np.arange(len(used)))
    key_of_name = np.zeros(len(trace.names), np.int64)
    key_of_name[used] = index
    return keys, key_of_name[trace.name[rows]]


def _used_names(trace: Trace, rows: np.ndarray) -> list[int]:
    """The names (ids) the rows use, found by counting, not sorting."""
    return np.flatnonzero(np.bincount(trace.name[rows], minlength=len(trace.names))).tolist()


def _kind_keys(trace: Trace, rows: np.ndarray) -> Keys:
    labels = [CATEGORY.get(kind, "other") for kind in Kind]
    return _grouped(labels, trace.kind[rows].astype(np.int64))


def _track_keys(trace: Trace, rows: np.ndarray) -> Keys:
    return _grouped([track.label for track in trace.tracks], trace.track[rows].astype(np.int64))


class _Captured(NamedTuple):
    """Device rows of replayed graphs whose launch, as the graph was captured, lay in a host span (a capture trace
    beside says): their positions among the rows, the spans' names, each row's (an index into them), and which call
    of its span in which replay each row is (an id)."""

    at: np.ndarray
    names: list[str]
    name: np.ndarray
    call: np.ndarray


def _captured(trace: Trace, rows: np.ndarray, window: tuple[float, float]) -> _Captured:
    """:class:`_Captured` of ``rows`` (device rows in ``window``, in order)."""
    replays = replay_ops(trace, window)
    at = np.searchsorted(rows, replays.spans)
    found = at < rows.size
    found[found] = rows[at[found]] == replays.spans[found]
    launch = replays.launch[found]
    outer_call = np.array([made.outer_call for made in replays.launches], np.int64)[launch] if launch.size else launch
    named = outer_call >= 0
    # a call: its graph launch, and the span's call in the capture
    _, call = np.unique(np.c_[replays.replayed_by[found][named], outer_call[named]], axis=0, return_inverse=True)
    spans: dict[str, int] = {}
    span_of_launch = np.array([spans.setdefault(made.outer, len(spans)) for made in replays.launches], np.int64)
    used, name = np.unique(span_of_launch[launch[named]], return_inverse=True)  # the names the rows use
    span_names = list(spans)
    names = [span_names[index] for index in used.tolist()]
    return _Captured(at[found][named], names, name.reshape(-1), call.reshape(-1).astype(np.int64))


def _launcher_table(
    trace: Trace,
    host_spans: np.ndarray,
    rows: np.ndarray,
    anchors: np.ndarray,
    window: tuple[float, float],
    count: int,
    captured: _Captured | None = None,
) -> tuple[Table, float]:
    """Host spans (the outermost ops, or annotations, of their threads) with their own time, and the time of the
    pacing ``rows`` each one holds: the row whose ``anchor`` (the host event that started it: its launch, or
    the row itself on the host timeline) lies inside it. A ``captured`` row (a replayed kernel) is held by the span
    its launch lay in as the graph was captured, not by the one that replays the graph: each call of that span in a
    replay is a call, with no host time. Returns the table and the time held (µs, all steps)."""
    lo, hi = window
    captured = captured or _Captured(np.empty(0, np.int64), [], np.empty(0, np.int64), np.empty(0, np.int64))
    span_of_row = _enclosing(trace, host_spans, anchors)
    span_of_row[captured.at] = -1
    held = span_of_row >= 0
    keyed = np.r_[host_spans, host_spans[span_of_row[held]]]  # each span, then the span of each held row
    names, index = _name_keys(trace, keyed)
    first = len(names)  # the trace's spans' names, then the captured ones: one set of keys
    names, key = _grouped(names + [normalise(name) for name in captured.names], np.arange(first + len(captured.names)))
    of_span, of_row = key[index[: host_spans.size]], key[index[host_spans.size :]]
    of_captured = key[first + captured.name]
    held_us = _clipped(trace, rows[held], lo, hi)
    captured_us = _clipped(trace, rows[captured.at], lo, hi)
    calls = of_captured[np.unique(captured.call, return_index=True)[1]]  # each captured call once
    size = len(names)
    table = Table(
        names,
        (np.bincount(of_span, minlength=size) + np.bincount(calls, minlength=size)) / count,
        np.bincount(of_span, weights=_clipped(trace, host_spans, lo, hi), minlength=size) / count,
        (np.bincount(of_row, weights=held_us, minlength=size)
         + np.bincount(of_captured, weights=captured_us, minlength=size)) / count,
    )  # fmt: skip
    return table, float(held_us.sum() + captured_us.sum())


def _launch_sources(trace: Trace, device_rows: np.ndarray, sources: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """For each device row, the flow start (on the host, at the launching call) that reached it; -1: none."""
    launch_of_row = np.full(len(trace), -1, np.int32)
    launch_of_row[spans] = sources
    return launch_of_row[device_rows].astype(np.int64)


def _enclosing(trace: Trace, host_spans: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """For each anchor (a host event's row, -1: none), the position in ``host_spans`` (disjoint on each track, in
    start order) of the span on its track that holds its start; -1: none."""
    found = np.full(anchors.size, -1, np.int64)
    anchor_track = np.where(anchors >= 0, trace.track[np.maximum(anchors, 0)], -1)
    span_tracks = trace.track[host_spans]
    for track in np.flatnonzero(np.bincount(span_tracks)).tolist():
        mine_spans = np.flatnonzero(span_tracks == track)
        mine = np.flatnonzero(anchor_track == track)
        at = trace.ts[anchors[mine]]
        index = np.searchsorted(trace.ts[host_spans[mine_spans]], at, side="right") - 1
        inside = (index >= 0) & (trace.end[host_spans[mine_spans[np.maximum(index, 0)]]] >= at)
        found[mine[inside]] = mine_spans[index[inside]]
    return found


def _clipped(trace: Trace, rows: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Each row's time inside the window [lo, hi]."""
    return np.maximum(np.minimum(trace.end[rows], hi) - np.maximum(trace.ts[rows], lo), 0.0)
