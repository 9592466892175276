"""``scan --format perfetto``: the trace with its findings on it, for Perfetto UI and ``chrome://tracing``.

The capture's own events are copied as its file writes them (:func:`~perftool.trace.loader.events_as_written`),
after a process of perftool's own (:data:`~perftool.dialects.vocabulary.FINDINGS_PROCESS`) in the Chrome Trace Event
Format: a track with the analysis window, the steady steps and, apart, the warm-up steps; then a track per finding,
whose slices are its occurrences over the very stretches it blames, named by rule and cost, with the message, the fix
and the gain in their args, and a flow arrow from each to the trace event it names. Slices that overlap go on lanes
of their own, as the format asks of one thread's slices. A later scan of the written file leaves that process out
(:func:`perftool.dialects.apply`), so it finds what the original gave.

A job of many ranks becomes one timeline: each rank's events are moved onto the reference rank's clock by the offset
the job view measured on their shared collectives, a piece at a time (memory does not grow with the job), each rank's
processes named by the rank with its offset and how well it aligned in their args; a rank that could not be aligned
keeps its own clock and says so. The job's findings (the straggler) are drawn where they happen on that clock.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import msgspec

from perftool.analysis.graph_captures import CAPTURES_FROM, capture_files
from perftool.common.errors import PerftoolError
from perftool.common.units import duration
from perftool.dialects.hlo import PROGRAMS_FROM, programs_space
from perftool.dialects.vocabulary import FINDINGS_CATEGORY, FINDINGS_PROCESS, MERGED_RANK_PIDS
from perftool.report.overall import perfetto_track, rank_aligned, rank_label
from perftool.rules.findings import Evidence, Finding, JobView, ScanReport, TraceFindings
from perftool.trace.loader import check_copyable, events_as_written

PID = 2_147_483_000  # the findings' process: an id no profiler hands out (pids stay below 2^22 on Linux)
FIRST_FINDING_TID = 10
LANES = 100  # a finding's tracks: one per lane of overlapping occurrences
RANK_TIDS = 100_000  # each rank's tracks in the findings' process, from (its position + 1) times this
MOVED_DIGITS = -3  # a time written as a string is moved to the nanosecond at least (10^-3 µs)
_MARK = msgspec.json.encode(FINDINGS_CATEGORY)  # in every event perftool draws


@dataclass
class Placement:
    """Where one trace's events land on the written timeline: its rank (None: a trace alone), the offset its clock
    is moved by, µs, and its processes' ids there."""

    rank: int | None = None
    offset_us: float = 0.0
    aligned_on: int | None = None  # the collectives its offset was measured on; None: not aligned
    named: set[int | str] = field(default_factory=set)  # its processes already named

    def pid(self, pid: int | str) -> int | str:
        if self.rank is None:
            return pid
        own = (
            pid
            if isinstance(pid, int) and 0 <= pid < MERGED_RANK_PIDS
            else zlib.crc32(str(pid).encode()) % MERGED_RANK_PIDS
        )
        return (self.rank + 1) * MERGED_RANK_PIDS + own

    @property
    def label(self) -> str:
        return rank_label(self.rank, self.aligned_on is not None)


def render(report: ScanReport) -> Iterator[bytes]:
    """The annotated trace of a scan, as blocks of JSON: one trace as written, or a job's ranks on one clock."""
    if report.job is None and len(report.traces) != 1:
        raise PerftoolError(
            f"--format perfetto annotates one trace or one job ({len(report.traces)} traces scanned): scan each alone"
        )
    for trace in report.traces:  # before a byte is written: a stream is refused
        check_copyable(trace.path)
    places = _placements(report)
    ours = [
        _meta("process_name", 0, name=FINDINGS_PROCESS),
        _meta("process_sort_index", 0, sort_index=-1),
    ]
    for position, trace in enumerate(report.traces):
        place = places[trace.path]
        block = (position + 1) * RANK_TIDS if report.job is not None else 0
        ours += _annotations(trace, place, block, f"{place.label}: " if report.job is not None else "")
    if report.job is not None:
        for index, finding in enumerate(report.job.findings):
            ours += _finding(finding, FIRST_FINDING_TID + index * LANES, _straggler(report, finding, places))
    yield b'{"traceEvents":[' + b",".join(msgspec.json.encode(event) for event in ours)
    metadata: dict[str, Any] = {}
    each: list[dict[str, Any]] = []  # in a job, each rank's own top-level keys
    for trace in report.traces:
        each.append(metadata if report.job is None else {})
        yield from _events(trace.path, places[trace.path], each[-1])
    if report.job is not None:
        metadata = _job_metadata(report, places, each)
    elif space := programs_space(report.traces[0].path, metadata):
        metadata[PROGRAMS_FROM] = space  # an XLA trace's programs stay where they are: the annotations name them
    elif captures := capture_files(report.traces[0].path, metadata):
        metadata[CAPTURES_FROM] = [str(p.resolve()) for p in captures]  # so are a replay's graph captures
    metadata.pop("traceEvents", None)
    yield b"]" + b"".join(b"," + msgspec.json.encode(key) + b":" + msgspec.json.encode(value)
                          for key, value in metadata.items()) + b"}\n"  # fmt: skip


def _job_metadata(report: ScanReport, places: dict[str, Placement], each: list[dict[str, Any]]) -> dict[str, Any]:
    """A job timeline's top-level keys: the first rank's own (its devices' properties, the job, its format's keys),
    and perftool's: how many ranks it merges and how they aligned, and where the ranks are the emulator's traces,
    each rank's tracks renumbered as placed, so that the timeline is read in the ranks' own dialect."""
    assert report.job is not None
    first = {key: value for key, value in each[0].items() if key not in ("traceEvents", "perftool")}
    ours: dict[str, Any] = {"merged_ranks": len(report.traces), "alignment": report.job.alignment.text}
    recorded = [record for own in each if isinstance(record := own.get("perftool"), dict) and "emulator" in record]
    if len(recorded) == len(each):
        ours["emulator"] = recorded[0]["emulator"]
        ours["tracks"] = [
            {**track, "pid": places[trace.path].pid(track["pid"])}
            for trace, record in zip(report.traces, recorded, strict=True)
            for track in record.get("tracks", [])
            if isinstance(track, dict) and isinstance(track.get("pid"), int | str)
        ]
    return first | {"perftool": ours}


def _placements(report: ScanReport) -> dict[str, Placement]:
    """Each trace's placement: as it is alone; in a job, moved onto the reference rank's clock where aligned."""
    if report.job is None:
        return {trace.path: Placement() for trace in report.traces}
    alignment = report.job.alignment
    places = {}
    for trace in report.traces:
        rank = trace.rank if trace.rank is not None else _rank_of(report.job, trace.path)
        aligned = rank_aligned(report.job, rank)
        places[trace.path] = (
            Placement(rank, alignment.offsets_us[rank], alignment.matched.get(rank)) if aligned else Placement(rank)
        )
    return places


def _rank_of(job: JobView, path: str) -> int:
    return next(row.rank for row in job.ranks if row.path == path)


def _straggler(report: ScanReport, finding: Finding, places: dict[str, Placement]) -> Placement | None:
    """The placement of the rank a job finding is about (its occurrences are on that rank's clock)."""
    rank = finding.values.get("rank")
    return next((places[t.path] for t in report.traces if t.rank == rank), None)


def _events(path: str, place: Placement, metadata: dict[str, Any]) -> Iterator[bytes]:
    """A trace's events as written, after a comma each run, less the findings an earlier annotation drew (a trace
    annotated again is annotated once); in a job, each event moved to its place."""
    for run in events_as_written(path, metadata):
        raw = bytes(run)
        if not raw.strip():
            continue
        if place.rank is None and _MARK not in raw:  # the common case: the run as it is, never decoded
            yield b"," + raw
            continue
        events = [e for e in msgspec.json.decode(b"[" + raw + b"]") if not _drawn(e)]
        if place.rank is not None:
            events = [_placed(event, place) for event in events if event]
            named = [_meta_for(pid, place) for pid in {e["pid"] for e in events if "pid" in e} - place.named]
            place.named.update(e["pid"] for e in named)
            events = named + events
        if events:
            yield b"," + msgspec.json.encode(events)[1:-1]


def _drawn(event: Any) -> bool:
    """Whether ``event`` is one of perftool's findings drawn on the trace before."""
    return isinstance(event, dict) and event.get("cat") == FINDINGS_CATEGORY


def _placed(event: Any, place: Placement) -> Any:
    """One event of a rank on the job's timeline: its process renumbered and named by the rank, its time moved by
    the rank's offset, its flow or async id kept apart from other ranks' ids."""
    if not isinstance(event, dict):
        return event
    if "pid" in event and isinstance(event["pid"], int | str):
        event["pid"] = place.pid(event["pid"])
    if isinstance(event.get("ts"), int | float | str) and place.offset_us:
        event["ts"] = _moved(event["ts"], place.offset_us)
    if "id" in event and event.get("ph") in ("s", "t", "f", "b", "e", "n", "S", "T", "p", "F"):
        event["id"] = f"rank{place.rank}:{event['id']}"
    if event.get("ph") == "M" and event.get("name") == "process_name" and isinstance(event.get("args"), dict):
        event["args"] = {**event["args"], **_rank_args(place), "name": f"{place.label} · {event['args'].get('name')}"}
        place.named.update([event["pid"]] if "pid" in event else [])
    elif event.get("ph") == "M" and event.get("name") == "process_sort_index" and isinstance(event.get("args"), dict):
        index = event["args"].get("sort_index")
        event["args"] = {"sort_index": (place.rank or 0) * MERGED_RANK_PIDS + (index if isinstance(index, int) else 0)}
    return event


def _moved(ts: int | float | str, offset_us: float) -> int | float | str:
    """A time moved back by ``offset_us``. A time written as a string (torch_npu's microseconds since the epoch to the
    nanosecond, 1.7e15: more digits than a double holds) is moved exactly, to the digits it was written with (at least
    to the nanosecond), and stays a string; one that is no number stays as it is."""
    if not isinstance(ts, str):
        return ts - offset_us
    try:
        written = Decimal(ts.strip())
        if not written.is_finite():
            return ts
        digits = Decimal(1).scaleb(min(int(written.as_tuple().exponent), MOVED_DIGITS))
        return str((written - Decimal(repr(offset_us))).quantize(digits))
    except (InvalidOperation, ValueError):  # not a number, or more digits than a Decimal's context holds
        return ts


def _meta_for(pid: int | str, place: Placement) -> dict[str, Any]:
    """A process of a rank that its trace does not name: named by the rank."""
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
            "args": {"name": f"{place.label} · pid {int(pid) % MERGED_RANK_PIDS}", **_rank_args(place)}}  # fmt: skip


def _rank_args(place: Placement) -> dict[str, Any]:
    return {"rank": place.rank, "clock_offset_us": place.offset_us, "aligned_on_collectives": place.aligned_on}


def _annotations(trace: TraceFindings, place: Placement, block: int, prefix: str) -> list[dict[str, Any]]:
    """One trace's tracks in perftool's process, from tid ``block``: the window and steps, each finding."""
    events = [
        _meta("thread_name", block + 1, name=f"{prefix}steady window and steps"),
        _meta("thread_name", block + 2, name=f"{prefix}warm-up steps"),
    ]
    events += _steps(trace, place, block)
    for index, finding in enumerate(trace.findings):
        events += _finding(finding, block + FIRST_FINDING_TID + index * LANES, place, prefix)
    return events


def _steps(trace: TraceFindings, place: Placement, block: int) -> list[dict[str, Any]]:
    """The analysis window, and each step on it: the steady ones inside the window's slice, the warm-up apart."""
    events = []
    moved = -place.offset_us
    if len(trace.window_at_us) == 2:
        lo, hi = trace.window_at_us
        what = f"{trace.steps} steady steps" if trace.steps else "no steady steps: the trace after start-up"
        events.append(_slice(f"analysis window ({what})", block + 1, lo + moved, hi - lo, {"clock": trace.step_clock}))
    lengths = [*trace.warmup_durations_us, *trace.step_durations_us]
    warmup = len(trace.warmup_durations_us)
    numbers = trace.step_numbers or list(range(len(lengths)))
    for position, (start, length) in enumerate(zip(trace.step_starts_us, lengths)):
        name = f"{'warm-up' if position < warmup else 'steady'} step {numbers[position]}"
        events.append(_slice(name, block + (2 if position < warmup else 1), start + moved, length, {}))
    return events


def _finding(finding: Finding, first_tid: int, place: Placement | None, prefix: str = "") -> list[dict[str, Any]]:
    """A finding's occurrences as slices on lanes from ``first_tid``, each with an arrow to the event it names
    (``place``: where the trace they are on lies; None: nowhere known, drawn as they are)."""
    place = place or Placement()
    cost = f"{finding.impact.share:.1%}" + (
        f", {duration(finding.impact.per_step_us)} per step" if finding.impact.per_step_us is not None else ""
    )
    args = {
        "rule": f"{finding.rule_id} {finding.rule_name}",
        "severity": finding.severity.value,
        "cost": cost,
        "message": finding.message,
        "fix": finding.fix.text,
        "gain": finding.gain.text,
        "fingerprint": finding.fingerprint,
    }
    events: list[dict[str, Any]] = []
    lanes: list[float] = []  # where each lane's last slice ends
    for number, item in enumerate(sorted(finding.evidence, key=lambda e: e.ts_us)):
        start = item.ts_us - place.offset_us
        lane = next((i for i, end in enumerate(lanes) if end <= start), len(lanes))
        if lane == len(lanes):
            lanes.append(0.0)
            suffix = f" ({lane + 1})" if lane else ""
            title = f"{prefix}{perfetto_track(finding)}{suffix}"
            events.append(_meta("thread_name", first_tid + lane, name=title))
        lanes[lane] = start + item.dur_us
        tid = first_tid + lane
        occurrence = {**args, "occurrence": item.name, "on": item.track}
        events.append(_slice(f"{finding.rule_id} {finding.rule_name} · {cost}", tid, start, item.dur_us, occurrence))
        events += _arrow(item, tid, f"perftool:{first_tid}:{number}", place)  # a string id: none of the trace's
    return events


def _arrow(item: Evidence, tid: int, flow: str, place: Placement) -> list[dict[str, Any]]:
    """A flow from the occurrence's slice to the trace event it names, where it names one."""
    if item.event is None:
        return []
    target = item.event
    start = _flow("s", flow, PID, tid, item.ts_us - place.offset_us)
    end = _flow("f", flow, place.pid(target.pid), target.tid, target.ts_us - place.offset_us)
    return [start, {**end, "bp": "e"}]


def _flow(phase: str, flow: str, pid: int | str, tid: int | str, ts: float) -> dict[str, Any]:
    return {"ph": phase, "id": flow, "name": "names", "cat": FINDINGS_CATEGORY, "pid": pid, "tid": tid, "ts": ts}


def _slice(name: str, tid: int, ts: float, dur: float, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "X", "name": name, "cat": FINDINGS_CATEGORY, "pid": PID, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def _meta(what: str, tid: int, **args: Any) -> dict[str, Any]:
    return {"ph": "M", "name": what, "cat": FINDINGS_CATEGORY, "pid": PID, "tid": tid, "args": args}
