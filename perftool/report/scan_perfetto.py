"""``scan --format perfetto``: the trace with its findings on it, for Perfetto UI and ``chrome://tracing``.

The capture's own events are copied as its file writes them (:func:`~perftool.trace.loader.events_as_written`),
after a process of perftool's own (:data:`~perftool.dialects.vocabulary.FINDINGS_PROCESS`) in the Chrome Trace Event
Format: a track with the analysis window, the steady steps and, apart, the warm-up steps; then a track per finding,
whose slices are its occurrences over the very stretches it blames, named by rule and cost, with the message, the fix
and the gain in their args, and a flow arrow from each to the trace event it names. Slices that overlap go on lanes
of their own, as the format asks of one thread's slices. A later scan of the written file leaves that process out
(:func:`perftool.dialects.apply`), so it finds what the original gave.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from perftool.dialects.vocabulary import FINDINGS_CATEGORY, FINDINGS_PROCESS
from perftool.errors import PerftoolError
from perftool.rules.findings import Evidence, Finding, ScanReport, TraceFindings
from perftool.trace.loader import events_as_written
from perftool.units import duration

PID = 2_147_483_000  # the findings' process: an id no profiler hands out (pids stay below 2^22 on Linux)
WINDOW_TID, WARMUP_TID = 1, 2
FIRST_FINDING_TID = 10
LANES = 100  # a finding's tracks: one per lane of overlapping occurrences


def render(report: ScanReport) -> Iterator[bytes]:
    """The annotated trace of a scan of one trace, as blocks of JSON."""
    if report.job is not None or len(report.traces) != 1:
        raise PerftoolError(
            f"--format perfetto annotates one trace at a time ({len(report.traces)} scanned): scan each on its own"
        )
    (trace,) = report.traces
    ours = _annotations(trace)
    metadata: dict[str, Any] = {}
    yield b'{"traceEvents":[' + b",".join(msgspec.json.encode(event) for event in ours)
    for run in events_as_written(trace.path, metadata):
        if bytes(run).strip():
            yield b","
            yield bytes(run)
    metadata.pop("traceEvents", None)
    yield b"]" + b"".join(b"," + msgspec.json.encode(key) + b":" + msgspec.json.encode(value)
                          for key, value in metadata.items()) + b"}\n"  # fmt: skip


def _annotations(trace: TraceFindings) -> list[dict[str, Any]]:
    """perftool's process: its names, the window and steps, then each finding's occurrences."""
    events = [
        _meta("process_name", 0, name=FINDINGS_PROCESS),
        _meta("process_sort_index", 0, sort_index=-1),
        _meta("thread_name", WINDOW_TID, name="steady window and steps"),
        _meta("thread_name", WARMUP_TID, name="warm-up steps"),
    ]
    events += _steps(trace)
    for index, finding in enumerate(trace.findings):
        events += _finding(finding, FIRST_FINDING_TID + index * LANES)
    return events


def _steps(trace: TraceFindings) -> list[dict[str, Any]]:
    """The analysis window, and each step on it: the steady ones inside the window's slice, the warm-up apart."""
    events = []
    if len(trace.window_at_us) == 2:
        lo, hi = trace.window_at_us
        what = f"{trace.steps} steady steps" if trace.steps else "no steady steps: the trace after start-up"
        events.append(_slice(f"analysis window ({what})", WINDOW_TID, lo, hi - lo, {"step_clock": trace.step_clock}))
    lengths = [*trace.warmup_durations_us, *trace.step_durations_us]
    warmup = len(trace.warmup_durations_us)
    numbers = trace.step_numbers or list(range(len(lengths)))
    for position, (start, length) in enumerate(zip(trace.step_starts_us, lengths)):
        name = f"{'warm-up' if position < warmup else 'steady'} step {numbers[position]}"
        events.append(_slice(name, WARMUP_TID if position < warmup else WINDOW_TID, start, length, {}))
    return events


def _finding(finding: Finding, first_tid: int) -> list[dict[str, Any]]:
    """A finding's occurrences as slices on lanes from ``first_tid``, each with an arrow to the event it names."""
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
        lane = next((i for i, end in enumerate(lanes) if end <= item.ts_us), len(lanes))
        if lane == len(lanes):
            lanes.append(0.0)
            suffix = f" ({lane + 1})" if lane else ""
            events.append(_meta("thread_name", first_tid + lane, name=f"{finding.rule_id} {finding.title}{suffix}"))
        lanes[lane] = item.ts_us + item.dur_us
        name = f"{finding.rule_id} {finding.rule_name} · {cost}"
        tid = first_tid + lane
        events.append(_slice(name, tid, item.ts_us, item.dur_us, {**args, "occurrence": item.name, "on": item.track}))
        events += _arrow(item, tid, f"perftool:{finding.fingerprint}:{number}")  # a string id: none of the trace's
    return events


def _arrow(item: Evidence, tid: int, flow: str) -> list[dict[str, Any]]:
    """A flow from the occurrence's slice to the trace event it names, where it names one."""
    if item.event is None:
        return []
    target = item.event
    start = _flow("s", flow, PID, tid, item.ts_us)
    return [start, {**_flow("f", flow, target.pid, target.tid, target.ts_us), "bp": "e"}]


def _flow(phase: str, flow: str, pid: int | str, tid: int | str, ts: float) -> dict[str, Any]:
    return {"ph": phase, "id": flow, "name": "names", "cat": FINDINGS_CATEGORY, "pid": pid, "tid": tid, "ts": ts}


def _slice(name: str, tid: int, ts: float, dur: float, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "ph": "X",
        "name": name,
        "cat": FINDINGS_CATEGORY,
        "pid": PID,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def _meta(what: str, tid: int, **args: Any) -> dict[str, Any]:
    return {"ph": "M", "name": what, "pid": PID, "tid": tid, "args": args}
