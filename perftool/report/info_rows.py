"""What ``perftool info`` shows of one trace, as plain rows: the text, markdown and HTML formats each lay
these out their own way, so the three say the same things."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from perftool.analysis.family import job_said
from perftool.analysis.metrics import Metrics
from perftool.common.units import duration, percent, plural
from perftool.report.overall import folders_not_read_said
from perftool.trace.model import Trace, Track

if TYPE_CHECKING:
    from perftool.report.views import InfoView

TRACKS_LISTED = 100  # in the tables for people; JSON lists every track
TRACK_HEADERS = ("process", "thread", "pid:tid", "role", "events")
OP_HEADERS = ("op", "count", "total", "share")
COLLECTIVE_HEADERS = ("collective", "calls", "time", "exposed", "size", "busbw")


@dataclass(frozen=True)
class CollectiveRow:
    cells: tuple[str, str, str, str, str, str]
    group: bool  # a process group's line under the collective types


def notes(view: InfoView) -> list[str]:
    """The notes every info format shows under its headline: the trace's caveats, then the folders beside it in the
    directory named for it that hold traces of their own, not read."""
    left = folders_not_read_said(view.folders_not_read)
    return [caveat.text for caveat in view.metrics.caveats] + ([left] if left else [])


def headline(trace: Trace, metrics: Metrics) -> str:
    """``kineto trace · 12,345 events · 9 tracks · span 1.234 s · device NVIDIA A100``."""
    span = duration(metrics.values["trace.span_us"], trace.display_time_unit)
    counted = f"{plural(len(trace), 'event')} · {plural(len(trace.tracks), 'track')}"
    return f"{trace.dialect} trace · {counted} · span {span} · "


def job_part(trace: Trace) -> str:
    """`` · vLLM serving``: what the job is, as the advice takes it (:func:`~perftool.analysis.family.job_said`), to
    follow the device in the headline; empty where the device computes nothing."""
    job = job_said(trace)
    return f" · {job}" if job else ""


def timeline_rows(metrics: Metrics, unit: str) -> list[tuple[str, str]]:
    """The steady state in (what, figures) rows: steps, step time, device, host, copies, communication, compiles,
    syncs."""
    m = metrics.values
    rows = []
    if m["steps.count"]:
        rows.append(
            ("steps", f"{m['steps.count']:,.0f} ({m['steps.warmup']:,.0f} warm-up, {m['steps.steady']:,.0f} steady)")
        )
        rows.append((
            "step time" + (" (device)" if metrics.step_clock == "device" else ""),
            f"median {duration(m['step_time_us.median'], unit)} · p90 {duration(m['step_time_us.p90'], unit)}"
            f" · min {duration(m['step_time_us.min'], unit)} · max {duration(m['step_time_us.max'], unit)}",
        ))  # fmt: skip
    else:
        rows.append(("steps", "no step markers: figures cover the whole trace"))
    rows.append(("window", duration(m["window.duration_us"], unit)))
    if math.isnan(m["device.busy_fraction"]):
        rows.append(("device", "none: no device activity in this trace (host-only profile)"))
    else:
        rows.append((
            "device",
            f"busy {percent(m['device.busy_fraction'])} · idle {percent(m['device.idle_fraction'])} "
            f"({plural(m['device.idle_gaps.count'], 'gap')}, longest {duration(m['device.idle_gap_us.max'], unit)}) · "
            f"compute {percent(m['device.compute_fraction'])}",
        ))  # fmt: skip
    if m["device.ops.count"] > 0:
        rows.append(
            ("device ops", f"{m['device.ops.count']:,.0f} · median {duration(m['device.op_time_us.median'], unit)}")
        )
    rows.append(("host", f"busy {percent(m['host.busy_fraction'])} · data loading {percent(m['input.fraction'])}"))
    for prefix, label in (("h2d", "host→device"), ("d2h", "device→host")):
        if m[f"{prefix}.count"]:
            rows.append((
                label,
                f"{plural(m[f'{prefix}.count'], 'copy')} · {duration(m[f'{prefix}.time_us'], unit)} · "
                f"{percent(m[f'{prefix}.overlap_fraction'])} overlapped with compute",
            ))  # fmt: skip
    if m["communication.count"] or m["communication.time_us"]:
        rows.append((
            "communication",
            f"{m['communication.count']:,.0f} collectives · {duration(m['communication.time_us'], unit)} · "
            f"{percent(m['communication.overlap_fraction'])} overlapped with compute · exposed "
            f"{duration(m['communication.exposed_us'], unit)} ({percent(m['communication.exposed_fraction'])})"
            + _tasks(m, unit),
        ))  # fmt: skip
    rows.append(("compile", _compiles(m, unit)))
    syncs = f"{m['sync.count']:,.0f}"
    rows.append(("sync points", f"{syncs} ({m['sync.per_step']:.1f} per step)" if m["steps.steady"] else syncs))
    return rows


def _compiles(m: dict[str, float], unit: str) -> str:
    """How many compiles, their time, how many of them recorded device graphs rather than compiled, and how many came
    after warm-up ("none" where there were none)."""
    compiled, recorded, recompiled = m["compile.count"], m["compile.graph_recordings"], m["recompilations.count"]
    if not compiled:
        return "none"
    time = duration(m["compile.time_us"], unit)
    if recorded:
        what = "a device graph recording" if recorded == 1 else "device graph recordings"
        share = "" if compiled == 1 else "all " if recorded == compiled else f"{recorded:,.0f} of them "
        time += f", {share}{what}"
    after = f" · {recompiled:,.0f} after warm-up" if not math.isnan(recompiled) else ""  # NaN: no steps to be after
    return f"{compiled:,.0f} ({time}){after}"


def _tasks(m: dict[str, float], unit: str) -> str:
    """What the collectives' tasks did, where they say: waited for peers, moved data ("" where no task says)."""
    waiting, moving = m["communication.waiting_us"], m["communication.transfer_us"]
    if not waiting and not moving:
        return ""
    return f" · tasks waiting for peers {duration(waiting, unit)}, moving data {duration(moving, unit)}"


def top_ops_title(metrics: Metrics) -> str:
    scope = "device ops" if metrics.top_ops_scope == "device" else "host ops (inclusive)"
    return f"Top {scope} by time" if metrics.top_ops else f"Top {scope} by time: none in the steady state"


def top_op_rows(metrics: Metrics, unit: str) -> list[tuple[str, str, str, str]]:
    """(full name, count, total, share) per op, the most time first."""
    return [(op.name, f"{op.count:,}", duration(op.total_us, unit), percent(op.share)) for op in metrics.top_ops]


def collective_rows(metrics: Metrics, unit: str) -> list[CollectiveRow]:
    """Per collective type: calls, time, exposed time, size and bus bandwidth (the algorithm's where the ranks are
    unknown); then a line per process group."""
    rows = []
    for c in metrics.collectives:
        size = f"{c.bytes / c.count / 1e6:,.2f} MB avg" if c.bytes is not None else "—"
        bandwidth = f"{c.busbw_gbps:,.1f} GB/s" if c.busbw_gbps is not None else "—"
        if c.algbw_gbps is not None and c.group_size is None:  # no ranks to scale by: the algorithm's, said so
            bandwidth = f"{c.algbw_gbps:,.1f} GB/s algbw"
        ranks = f" ×{c.group_size}" if c.group_size else ""
        cells = (c.name + ranks, f"{c.count:,}", duration(c.time_us, unit), duration(c.exposed_us, unit), size,
                 bandwidth)  # fmt: skip
        rows.append(CollectiveRow(cells, group=False))
    for g in metrics.groups:
        named = g.name if g.name.startswith("group ") else f"group {g.name}"  # a group known by its number: "group 3"
        cells = (f"{named} ({g.parallelism})", f"{g.count:,}", duration(g.time_us, unit),
                 duration(g.exposed_us, unit), "", "")  # fmt: skip
        rows.append(CollectiveRow(cells, group=True))
    return rows


def listed_tracks(trace: Trace, metrics: Metrics) -> tuple[list[Track], str | None]:
    """The tracks a table lists (the :data:`TRACKS_LISTED` busiest, in the order a trace viewer lists them), and a
    line saying how many more there are, if any."""
    events, samples = metrics.track_events, metrics.track_samples
    listed = trace.tracks
    if len(listed) > TRACKS_LISTED:  # the busiest; a table of a million rows helps no one
        listed = sorted(listed, key=lambda t: (-(events[t.id] + samples[t.id]), t.shown_order))[:TRACKS_LISTED]
    ordered = sorted(listed, key=lambda t: t.shown_order)
    more = len(trace.tracks) - len(listed)
    return ordered, (f"… {plural(more, 'more track')} with fewer events (--format json lists all)" if more else None)


def track_cells(track: Track, metrics: Metrics) -> tuple[str, str, str, str, str]:
    """A track's row: process (with its labels), thread, pid:tid, role, and its events and counter samples."""
    events, samples = metrics.track_events[track.id], metrics.track_samples[track.id]
    process = track.process_name + (f" ({track.process_labels})" if track.process_labels else "")
    count = f"{int(events):,}" + (f" + {int(samples):,} counter samples" if samples else "")
    return process or "—", track.thread_name or "—", f"{track.pid}:{track.tid}", track.role.value, count
