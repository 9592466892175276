"""One rank reduced to what the job view needs, computed where the rank's trace lies: its scan (metrics,
step times, findings), its communication, and the timing of its collectives — never its events."""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass, field

import numpy as np

from perftool.analysis.communication import COLLECTIVES, GroupStat, covered
from perftool.analysis.host_calls import python_between_calls
from perftool.analysis.idle import CAUSES
from perftool.common.errors import TraceError
from perftool.common.names import host_call
from perftool.job.ranks import host_from_name, rank_from_name
from perftool.job.signs import JobSigns
from perftool.pipeline.scan import ReadOptions, analyse_trace
from perftool.rules.detectors.base import Scope
from perftool.rules.findings import TraceFindings, UnreadTrace
from perftool.rules.model import Rule
from perftool.trace.seen import FileSeen
from perftool.trace.store import trim_heap

MAX_TIMELINE_CALLS = 4096  # collectives kept per rank for clock alignment and waits: whole steps, in order
MAX_STEPS_SHOWN = 256  # steady steps a rank sends one by one (compute and communication in each)
PYTHON_FRAMES_KEPT = 16  # a host-only rank's Python frames it sends, those that take most of its steps
# Collectives every member of a group leaves together: their ends mark one instant on every rank's clock.
SYNCHRONISING = frozenset(COLLECTIVES) - {"send_recv"}


@dataclass
class Timeline:
    """The synchronising collectives of the first steady steps: type, group, step number, start and end
    (µs on the rank's own clock), in time order; ``steps`` steady steps are covered."""

    type: np.ndarray  # int8, index into COLLECTIVES
    group: list[str]  # group name per call
    step: np.ndarray  # int64, the step number the call started in
    start: np.ndarray
    end: np.ndarray
    steps: int = 0

    @classmethod
    def empty(cls) -> Timeline:
        return cls(np.empty(0, np.int8), [], np.empty(0, np.int64), np.empty(0), np.empty(0))


@dataclass
class StepParts:
    """The first steady steps one by one (numbered as the scan's ``step_numbers`` after its warm-up): each step's
    device compute and its time with a collective running (µs)."""

    compute: np.ndarray
    communication: np.ndarray

    @classmethod
    def empty(cls) -> StepParts:
        return cls(np.empty(0), np.empty(0))


@dataclass
class RankSummary:
    """What one rank's analysis sends back."""

    rank: int | None  # None: neither the trace nor its name gives one, and it is not in a job's directory
    scan: TraceFindings
    breakdown_us: dict[str, float]  # per steady step: compute, exposed communication, idle, input wait
    groups: list[GroupStat] = field(default_factory=list)
    timeline: Timeline = field(default_factory=Timeline.empty)
    first_us: float = 0.0  # the trace's first event, on its clock (evidence times are shown from here)
    steps: StepParts = field(default_factory=StepParts.empty)
    mfu: float | None = None  # model FLOPs utilisation of the steady steps, where the roofline can say
    mfu_is_lower_bound: bool = False  # part of the device time is in ops without a model
    stated_rank: int | None = None  # the rank the trace or its name states (``rank3``), not a directory's guess
    python_us: dict[str, float] = field(default_factory=dict)  # per steady step, a host-only rank's time in the
    # Python frames between its ops that take most of it, by frame as a person reads it, where its trace records them
    host: str | None = None  # the host it ran on, where its trace or its file's name says (:func:`host_of`)

    @property
    def signs(self) -> JobSigns:
        """What the trace says of its job."""
        scan = self.scan
        return JobSigns(self.stated_rank, scan.dialect, scan.world_size, scan.device, bool(self.groups))


def summarise_rank(
    file: FileSeen, position: int, rules: list[Rule], read: ReadOptions, in_job: bool = True
) -> RankSummary | UnreadTrace:
    """Load and scan one rank's trace and summarise it; an unreadable trace, or another file than the one seen
    where the job was named (:meth:`~perftool.trace.seen.FileSeen.check`), comes back as an :class:`UnreadTrace`.
    In a Dask worker (a daemon process) the trace is decoded in the worker itself, so a worker holds one rank's
    load at a time. The rank is the trace's own, else its file name's; in a job named outright (``in_job``), else
    its ``position`` among the job's files."""
    path = file.given
    try:
        file.check()
        trace = read.load(file.path, "scan")
    except TraceError as exc:
        return UnreadTrace(path=path, problem=exc.problem)
    scan, scope = analyse_trace(trace, rules, read)
    scan.path = path
    stated = scan.rank if scan.rank is not None else rank_from_name(path, False)  # the trace's, else its name's
    given = (stated, rank_from_name(path, in_job), position if in_job else None)
    scan.rank = next((rank for rank in given if rank is not None), None)
    if len(scan.merged_ranks) > 1:  # no one rank's, whatever its name or place
        scan.rank = stated = None
    python = python_between_calls(trace, scope.lo, scope.hi) if scope.idle is None else None
    summary = RankSummary(
        scan.rank,
        scan,
        _breakdown(scope, python),
        scope.metrics.groups,
        _timeline(scope),
        scope.steps.first,
        _steps(scope),
        scope.roofline.mfu,
        scope.roofline.is_lower_bound,
        stated,
        _most_time(scope, python) if python is not None else {},
        host_of(trace.metadata, path),
    )
    if multiprocessing.current_process().daemon:  # a worker that analyses rank after rank stays at one rank's peak
        del trace, scope
        trim_heap()
    return summary


def host_of(metadata: dict, path: str) -> str | None:
    """The host a rank's trace was captured on: the one it records (Kineto's ``host_name``), else the one its name
    gives (:func:`~perftool.job.ranks.host_from_name`); None where neither says."""
    recorded = metadata.get("host_name")
    return recorded if isinstance(recorded, str) and recorded.strip() else host_from_name(path)


def _breakdown(scope: Scope, python: np.ndarray | None) -> dict[str, float]:
    """Per steady step, µs: device compute, exposed communication, device idle, and idle by cause; a rank without a
    device, the time no host thread runs a traced call (``host.untraced``) and, where its trace records its Python
    stack (``python``: the driving thread's frames between its ops), the time in those frames (``host.python``)."""
    m = scope.metrics
    steps = scope.steady_steps or 1
    window = scope.window
    idle = scope.idle
    parts = {
        "compute": m["device.compute_fraction"] * window / steps,
        "exposed_communication": m["communication.exposed_us"] / steps,
        "idle": m["device.idle_fraction"] * window / steps,
    }
    if idle is not None:
        return parts | {f"idle.{cause}": idle.time(cause) / steps for cause in CAUSES}
    parts["host.untraced"] = (1.0 - m["host.busy_fraction"]) * window / steps
    if python is not None and python.size:
        parts["host.python"] = float(_in_window(scope, python).sum()) / steps
    return parts


def _in_window(scope: Scope, rows: np.ndarray) -> np.ndarray:
    """Per row (spans overlapping the steady window), its time inside the window."""
    trace = scope.trace
    return np.minimum(trace.end[rows], scope.hi) - np.maximum(trace.ts[rows], scope.lo)


def _most_time(scope: Scope, python: np.ndarray) -> dict[str, float]:
    """Per steady step, the time of the :data:`PYTHON_FRAMES_KEPT` frames among ``python`` (none inside another)
    that take most of the steady window, by name as a person reads it (names that read the same summed), the most
    first."""
    trace = scope.trace
    names, index = np.unique(trace.name[python], return_inverse=True)
    per_name = np.bincount(index, weights=_in_window(scope, python), minlength=names.size) / (scope.steady_steps or 1)
    found: dict[str, float] = {}
    for name, time in zip(names.tolist(), per_name.tolist()):
        readable = host_call(trace.names[name])
        found[readable] = found.get(readable, 0.0) + time
    return dict(sorted(found.items(), key=lambda item: -item[1])[:PYTHON_FRAMES_KEPT])


def _steps(scope: Scope) -> StepParts:
    """The first :data:`MAX_STEPS_SHOWN` steady steps, one by one."""
    steps = scope.steps
    first = steps.warmup
    last = min(steps.count, first + MAX_STEPS_SHOWN)
    starts, ends = steps.start[first:last], steps.end[first:last]
    busy = scope.metrics.busy
    return StepParts(
        compute=covered(busy["compute"], starts, ends),
        communication=covered(busy["communication"], starts, ends),
    )


def _timeline(scope: Scope) -> Timeline:
    """The collectives of whole steady steps, from the first, up to :data:`MAX_TIMELINE_CALLS`."""
    comms = scope.metrics.communication
    calls, trace = comms.calls, scope.trace
    kinds = np.array([COLLECTIVES.index(n) if n in SYNCHRONISING else -1 for n in calls.names], dtype=np.int8)
    chosen = np.flatnonzero((kinds[calls.type] >= 0) & (comms.in_window_us > 0))
    if chosen.size == 0:
        return Timeline.empty()
    steps = scope.steps
    start, end = trace.ts[calls.rows[chosen]], trace.end[calls.rows[chosen]]
    if steps.count:
        index = np.clip(np.searchsorted(steps.start, start, side="right") - 1, 0, steps.count - 1)
        step = steps.numbers()[index]
        last_step = _last_whole_step(index, MAX_TIMELINE_CALLS)
        keep = index <= last_step
        covered = int(last_step - steps.warmup + 1)
    else:
        step = np.zeros(chosen.size, dtype=np.int64)
        keep = np.arange(chosen.size) < MAX_TIMELINE_CALLS
        covered = 0
    chosen = chosen[keep]
    return Timeline(
        type=kinds[calls.type[chosen]],
        group=[calls.groups[g] for g in calls.group[chosen].tolist()],
        step=step[keep].astype(np.int64),
        start=start[keep],
        end=end[keep],
        steps=covered,
    )


def _last_whole_step(index: np.ndarray, limit: int) -> int:
    """The last step whose calls, with every call before them, number at most ``limit`` (at least the first)."""
    if index.size <= limit:
        return int(index[-1])
    return max(int(index[limit]) - 1, int(index[0]))
