"""What every detector shares: the scope it reads and the detection it returns."""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.context import TraceAnalysis
from perftool.analysis.launches import launch_rows
from perftool.common.arrays import distinct
from perftool.common.names import host_call, shortened
from perftool.common.ranking import largest
from perftool.common.threads import computed_once
from perftool.roofline.figures import Roofline, roofline
from perftool.rules.findings import EventRef, Evidence
from perftool.rules.known_run import KnownRun
from perftool.trace.model import Kind, Phase, Role, Trace

# the value Scope.idle_while gives beside host_ms_per_step, which each detector describes in its own words
IDLE_WHILE_VALUES = {"idle_ms_per_step": "device idle per step meanwhile, ms"}


@dataclass(frozen=True)
class Scope(TraceAnalysis):
    """One analysed trace as the detectors see it, with the run it records (emulator traces) or a fit stands in for
    (``dataclasses.replace(scope, run=...)``: the same analysis, another run)."""

    run: KnownRun | None  # how the trace was run, where it records it (emulator traces)
    evidence_count: int = 5
    job_steps: int | None = None  # the steps the whole job runs, where the user states it (a trace does not)
    roofline_from: Callable[[], Roofline] | None = field(default=None, kw_only=True, repr=False, compare=False)

    @computed_once
    def roofline(self) -> Roofline:
        """Each modelled op's FLOPs and bytes in the window against the device's roofline (read by the detectors of
        ops below it, on the rules' threads: made once), where it was made already (a helper thread's) that one."""
        return self.roofline_from() if self.roofline_from is not None else roofline(self.trace, self.steps)

    def events(self, rows: np.ndarray) -> list[Evidence]:
        """The longest of ``rows`` as evidence (of equal ones, the earliest: the same whatever the file's order)."""
        trace = self.trace
        worst = rows[largest(trace.dur[rows], self.evidence_count, ties=trace.ts[rows])]
        return [
            Evidence(
                ts_us=float(trace.ts[row]),
                at_us=float(trace.ts[row]) - self.steps.first,
                dur_us=float(trace.dur[row]),
                track=trace.tracks[trace.track[row]].label,
                name=trace.names[trace.name[row]],
                event=self.event_ref(row),
            )
            for row in worst.tolist()
        ]

    def host_calls(self, pattern: re.Pattern) -> np.ndarray:
        """The host's calls in the window (complete events) whose name ``pattern`` matches, in row order; none, with
        no pass over the events, where the trace names none."""
        trace = self.trace
        if not trace.name_table(pattern).any():
            return np.zeros(0, dtype=np.int64)
        named = trace.name_matches(pattern) & trace.on_roles(Role.HOST)
        return np.flatnonzero(named & (trace.phase == Phase.COMPLETE) & self.in_window)

    def holding(self, calls: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Per row of ``rows``: the index into ``calls`` (sorted by start, none inside another on its thread) of the
        call on its thread it starts inside (an op inside an optimizer's step, a launch inside its op); -1 where
        none."""
        trace = self.trace
        if calls.size == 0:
            return np.full(rows.size, -1, dtype=np.int64)
        call = np.searchsorted(trace.ts[calls], trace.ts[rows], side="right") - 1
        held = calls[np.maximum(call, 0)]
        inside = (call >= 0) & (trace.ts[rows] < trace.end[held]) & (trace.track[rows] == trace.track[held])
        return np.where(inside, call, -1)

    def launched_in(self, calls: np.ndarray) -> tuple[np.ndarray, float]:
        """The trace's launches made inside ``calls`` (as :meth:`holding` takes them): per launch, the index of the
        call its thread makes it in, -1 where none; and the device time (µs, their union) of the work those start."""
        sources, spans = launch_rows(self.trace)
        held = self.holding(calls, sources)
        launched = spans[held >= 0]
        return held, intervals.total(intervals.union(self.trace.ts[launched], self.trace.end[launched]))

    def idle_while(self, busy: intervals.Intervals) -> tuple[float, dict[str, float]]:
        """The device's idle time while the host is in ``busy`` (its calls' spans, disjoint and sorted), µs, and the
        values that say so per step: ``host_ms_per_step``, ``idle_ms_per_step`` (0 idle where the trace has no
        device)."""
        waiting = intervals.overlap(self.idle.gaps, busy) if self.idle is not None else 0.0
        return waiting, {
            "host_ms_per_step": self.per_step(intervals.total(busy)) / 1e3,
            "idle_ms_per_step": self.per_step(waiting) / 1e3,
        }

    def event_ref(self, row: int) -> EventRef:
        """Trace event ``row`` as its file writes it."""
        track = self.trace.tracks[self.trace.track[row]]
        return EventRef(pid=track.pid, tid=track.tid, ts_us=float(self.trace.ts[row]))

    def idle_stretches(self, pieces: intervals.Intervals, candidates: np.ndarray, who: str = "host") -> list[Evidence]:
        """The longest device idle ``pieces``, each named after the ``candidates`` row overlapping it most (what
        ``who`` runs meanwhile)."""
        trace = self.trace
        starts, ends = pieces
        worst = largest(ends - starts, self.evidence_count)
        track = _busiest_device_track(trace)
        found = []
        begin, finish = trace.ts[candidates], trace.end[candidates]
        in_order = bool(np.all(begin[1:] >= begin[:-1]) and np.all(finish[1:] >= finish[:-1]))
        for start, end in zip(starts[worst].tolist(), ends[worst].tolist()):
            most = overlapping_most(begin, finish, in_order, start, end)
            best = candidates[most] if most is not None else None
            name = f"idle while {who} runs {host_call(trace.names[trace.name[best]])}" if best is not None else "idle"
            found.append(
                Evidence(
                    ts_us=start,
                    at_us=start - self.steps.first,
                    dur_us=end - start,
                    track=track,
                    name=name,
                    event=self.event_ref(int(best)) if best is not None else None,
                )
            )
        return found


def _busiest_device_track(trace: Trace) -> str:
    """The label of the device track that computes most (else whose events take most time; of equal ones, the
    first by label): where a person looks for a gap in the device's work, whichever track the file happens to list
    first (not a stream of collectives or of waits). Found once."""

    def busiest() -> str:
        tracks = trace.tracks_with_role(Role.DEVICE)
        if not tracks.size:
            return "device"
        device = trace.on_roles(Role.DEVICE)
        compute = device & (trace.kind == Kind.COMPUTE)
        chosen = compute if compute.any() else device
        time = np.bincount(trace.track[chosen], weights=trace.dur[chosen], minlength=len(trace.tracks))
        best = min(tracks.tolist(), key=lambda track: (-time[track], trace.tracks[track].label))
        return trace.tracks[best].label

    return trace.derive("detectors._busiest_device_track", busiest)


def overlapping_most(begin: np.ndarray, finish: np.ndarray, in_order: bool, start: float, end: float) -> int | None:
    """Of the spans [begin, finish], the index of the one sharing most time with [start, end], the first of equals;
    None where none shares any. Where ``in_order`` (both begin and finish in order, as a thread's top-level calls
    are), only the spans between two binary searches can overlap, and only they are read."""
    near = slice(None)
    if in_order:
        near = slice(int(np.searchsorted(finish, start, side="right")), int(np.searchsorted(begin, end)))
    shared = np.minimum(finish[near], end) - np.maximum(begin[near], start)
    if not shared.size or shared.max() <= 0:
        return None
    return int(np.argmax(shared)) + (near.start or 0)


class Judged(Protocol):
    """What a finding is measured against: a trace's :class:`Scope`, or a job's (:mod:`perftool.job.view`)."""

    @property
    def window(self) -> float: ...

    @property
    def steady_steps(self) -> int: ...

    @property
    def family(self) -> str: ...

    @property
    def contexts(self) -> tuple[str, ...]: ...

    @property
    def run(self) -> KnownRun | None: ...

    @property
    def evidence_count(self) -> int: ...

    def per_step(self, value: float) -> float: ...  # the window's where there are no steps


def per_steady_step(scope: Judged, value: float) -> float:
    """``value`` per steady step, NaN where there are none: a finding's impact and gain, which are null without steps
    (a detector's values take the window as one step, :meth:`Judged.per_step`)."""
    return scope.per_step(value) if scope.steady_steps else math.nan


@dataclass
class Detection:
    """What a detector measured: the time lost, the values templates may use, and the occurrences."""

    lost_us: float
    values: dict[str, Any]
    evidence: list[Evidence]
    key: str = ""  # what distinguishes this detection from others of its rule (fingerprints)
    variant: str | None = None  # which of the rule's fix variants applies
    changes: dict[str, Any] = field(default_factory=dict)  # emulator config fields the fix sets
    alternatives: list[Detection] = field(default_factory=list)  # other fixes, tried in order if this one fails
    bound_us: float | None = None  # the most a fix can win back where more than lost_us (idle the cause leads to)
    once_per_job: bool = False  # the time lost is paid once in a job (a compile): graded on what the job gains
    occurrences: int = 0  # how many separate events show it in the window (calls, copies, compiles)

    def instead(self, variant: str | None, changes: dict[str, Any], **values: Any) -> Detection:
        """The same problem with another fix: its variant, the knobs it sets and the values its text names."""
        return replace(self, variant=variant, changes=changes, values={**self.values, **values}, alternatives=[])


@dataclass(frozen=True)
class Detector:
    """A detector module's entry: its name, the values it provides, its settings and its function."""

    name: str
    summary: str
    values: dict[str, str]  # value name -> meaning
    detect: Callable[[Any, dict[str, float]], Detection | None]  # a Scope, or a job's view for level "job"
    settings: dict[str, Setting] = field(default_factory=dict)  # what a rule file's params may set
    level: Literal["trace", "job"] = "trace"  # what it reads: one trace, or a job of many ranks
    sets_knobs: bool = True  # whether its fixes may set emulator knobs (False: its gain is a bound, and no fit runs)
    reads_roofline: bool = False  # whether it reads the roofline (then made while the metrics are computed)

    @property
    def params(self) -> dict[str, float]:
        """Each setting's default."""
        return {name: setting.default for name, setting in self.settings.items()}


@dataclass(frozen=True)
class Setting:
    """One detector setting: its default, its type (float, or int for counts) and what it means, in a line."""

    default: float
    meaning: str
    kind: type = float

    def check(self, value: float) -> str | None:
        """Why ``value`` does not suit this setting (None when it does)."""
        if self.kind is int and not float(value).is_integer():
            return f"expected a whole number (got {value!r})"
        return None


def distinct_names(
    trace: Trace,
    rows: np.ndarray,
    limit: int = 4,
    shown: Callable[[str], str] = str,
    time: np.ndarray | None = None,
) -> str:
    """The names among ``rows``, most time first (each row's ``time`` where given, else its duration), as one short
    list, each as ``shown`` writes it; of equal times (to the nanosecond, whatever order the sums were added in), the
    first by name: the same whatever order the file lists events in."""
    names_of = trace.name[rows]
    ids = np.flatnonzero(np.bincount(names_of, minlength=len(trace.names)))
    weights = trace.dur[rows] if time is None else time
    totals = np.round(np.bincount(names_of, weights=weights, minlength=len(trace.names))[ids], 3)
    count = ids.size
    if count > limit:  # those at the limit-th total or above, the few it lists among them
        kept = totals >= np.partition(totals, count - limit)[count - limit]
        ids, totals = ids[kept], totals[kept]
    listed = heapq.nsmallest(limit, zip((-totals).tolist(), (shown(trace.names[i]) for i in ids.tolist())))
    names = [name for _, name in listed]
    more = count - len(names)
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def names_key(trace: Trace, rows: np.ndarray) -> str:
    """What a finding about ``rows`` is about, for its fingerprint: their distinct names, sorted. Never the names in
    the order of their time or of their first appearance, which two captures of the same job need not share (a
    finding in both was reported both fixed and new), nor a Python object's address in one run."""
    return "\n".join(sorted({host_call(trace.names[i]) for i in distinct(trace.name[rows]).tolist()}))


GPU_WORD_VALUES: dict[str, str] = {  # the values of :func:`~perftool.analysis.family.gpu_words`
    "cores": "what the device's maker calls its cores: SMs (NVIDIA) or CUs (AMD)",
    "core": "one of them: SM or CU",
    "stream": "its streams: CUDA stream or HIP stream",
    "warps": "its thread groups: warps or wavefronts",
    "graph": "a step captured for replay: a CUDA graph or a HIP graph",
}

KERNEL_RUN_VALUES: dict[str, str] = {  # the values of :func:`kernel_runs`, for a detector's ``values``
    "names": "the kernels, most time first",
    "per_step": "such kernel runs per steady step",
    "kernel_ms_per_step": "their device time per steady step, ms",
}


def kernel_runs(scope: Scope, rows: np.ndarray) -> dict[str, Any]:
    """What kernel-launch findings say of the kernel runs ``rows``: their names, runs and device time per step."""
    return {
        "names": distinct_names(scope.trace, rows, 3, shortened),
        "per_step": scope.per_step(float(rows.size)),
        "kernel_ms_per_step": scope.per_step(float(scope.trace.dur[rows].sum())) / 1e3,
    }
