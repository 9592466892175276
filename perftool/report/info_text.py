"""``perftool info``: the trace summary for people, rendered with rich."""

from __future__ import annotations

import math

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from perftool.analysis.metrics import Metrics
from perftool.report.console import NamesAndFigures, add_columns, cut
from perftool.report.escape import shown
from perftool.report.names import readable
from perftool.trace.model import Role, Trace
from perftool.units import duration, percent, plural

_ROLE_STYLE = {Role.DEVICE: "green", Role.HOST: "cyan", Role.INPUT: "cyan", Role.UNKNOWN: "dim"}

TRACKS_LISTED = 100  # in the text table; JSON lists every track


def render(trace: Trace, metrics: Metrics) -> Group:
    """Header, tracks, timeline figures and top ops, as one rich renderable."""
    unit = trace.display_time_unit
    m = metrics.values
    header = Text.assemble(
        ("perftool info ", "bold"),
        shown(trace.source, "bold magenta"),
        f"\n{trace.dialect} trace · {len(trace):,} events · {len(trace.tracks)} tracks · "
        f"span {duration(m['trace.span_us'], unit)} · device ",
        shown(metrics.device),
    )
    for caveat in metrics.caveats:
        header.append("\n")
        header.append(shown(f"note: {caveat.text}", "yellow"))
    parts: list[RenderableType] = [header, _tracks(trace, metrics), _timeline(metrics, unit), _top_ops(metrics, unit)]
    if metrics.collectives:
        parts.append(collectives_table(metrics, unit))
    return Group(*parts)


def _tracks(trace: Trace, metrics: Metrics) -> Table:
    table = Table(title="Tracks", title_justify="left", expand=False)
    add_columns(
        table, [("process", "left"), ("thread", "left"), ("pid:tid", "right"), ("role", "left"), ("events", "right")]
    )
    events, samples = metrics.track_events, metrics.track_samples
    listed = trace.tracks
    if len(listed) > TRACKS_LISTED:  # the busiest, in the trace's order; a table of a million rows helps no one
        listed = sorted(listed, key=lambda t: -(events[t.id] + samples[t.id]))[:TRACKS_LISTED]
    ordered = sorted(
        listed,
        key=lambda t: (
            t.process_sort_index if t.process_sort_index is not None else 0,
            _id_key(t.pid),
            t.thread_sort_index if t.thread_sort_index is not None else 0,
            _id_key(t.tid),
        ),
    )
    for t in ordered:
        process = t.process_name + (f" ({t.process_labels})" if t.process_labels else "")
        count = f"{int(events[t.id]):,}" + (f" + {int(samples[t.id]):,} counter samples" if samples[t.id] else "")
        table.add_row(
            shown(process or "—"),
            shown(t.thread_name or "—"),
            shown(f"{t.pid}:{t.tid}"),
            Text(t.role.value, style=_ROLE_STYLE.get(t.role, "")),
            count,
        )
    if len(trace.tracks) > len(listed):
        left = plural(len(trace.tracks) - len(listed), "more track")
        table.add_row(f"… {left} with fewer events (--format json lists all)")
    return table


def _id_key(value: int | str) -> tuple[int, int | str]:
    """Numeric ids in numeric order, then string ids."""
    return (0, value) if isinstance(value, int) else (1, value)


def _timeline(metrics: Metrics, unit: str) -> Table:
    m = metrics.values
    table = Table(title="Timeline (steady state)", title_justify="left", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    if m["steps.count"]:
        table.add_row(
            "steps", f"{m['steps.count']:,.0f} ({m['steps.warmup']:,.0f} warm-up, {m['steps.steady']:,.0f} steady)"
        )
        table.add_row(
            "step time" + (" (device)" if metrics.step_clock == "device" else ""),
            f"median {duration(m['step_time_us.median'], unit)} · p90 {duration(m['step_time_us.p90'], unit)}"
            f" · min {duration(m['step_time_us.min'], unit)} · max {duration(m['step_time_us.max'], unit)}",
        )
    else:
        table.add_row("steps", "no step markers: figures cover the whole trace")
    table.add_row("window", duration(m["window.duration_us"], unit))
    if math.isnan(m["device.busy_fraction"]):
        table.add_row("device", "none: no device activity in this trace (host-only profile)")
    else:
        table.add_row(
            "device",
            f"busy {percent(m['device.busy_fraction'])} · idle {percent(m['device.idle_fraction'])} "
            f"({m['device.idle_gaps.count']:,.0f} gaps, longest {duration(m['device.idle_gap_us.max'], unit)}) · "
            f"compute {percent(m['device.compute_fraction'])}",
        )
    if m["device.ops.count"] > 0:
        table.add_row(
            "device ops", f"{m['device.ops.count']:,.0f} · median {duration(m['device.op_time_us.median'], unit)}"
        )
    table.add_row("host", f"busy {percent(m['host.busy_fraction'])} · data loading {percent(m['input.fraction'])}")
    for prefix, label in (("h2d", "host→device"), ("d2h", "device→host")):
        if m[f"{prefix}.count"]:
            table.add_row(
                label,
                f"{m[f'{prefix}.count']:,.0f} copies · {duration(m[f'{prefix}.time_us'], unit)} · "
                f"{percent(m[f'{prefix}.overlap_fraction'])} overlapped with compute",
            )
    if m["communication.count"] or m["communication.time_us"]:
        table.add_row(
            "communication",
            f"{m['communication.count']:,.0f} collectives · {duration(m['communication.time_us'], unit)} · "
            f"{percent(m['communication.overlap_fraction'])} overlapped with compute · exposed "
            f"{duration(m['communication.exposed_us'], unit)} ({percent(m['communication.exposed_fraction'])})",
        )
    table.add_row(
        "compile",
        f"{m['compile.count']:,.0f} ({duration(m['compile.time_us'], unit)}) · "
        f"{m['recompilations.count']:,.0f} after warm-up"
        if m["compile.count"]
        else "none",
    )
    table.add_row(
        "sync points",
        f"{m['sync.count']:,.0f} ({m['sync.per_step']:.1f} per step)"
        if m["steps.steady"]
        else f"{m['sync.count']:,.0f}",
    )
    return table


def _top_ops(metrics: Metrics, unit: str) -> NamesAndFigures | Text:
    scope = "device ops" if metrics.top_ops_scope == "device" else "host ops (inclusive)"
    if not metrics.top_ops:
        return Text(f"Top {scope} by time: none in the steady state", style="dim")
    table = Table(title=f"Top {scope} by time", title_justify="left")
    rows = [
        (cut(shown(readable(op.name))), f"{op.count:,}", duration(op.total_us, unit), percent(op.share))
        for op in metrics.top_ops
    ]
    return NamesAndFigures(table, "op", [("count", "right"), ("total", "right"), ("share", "right")], rows)


def collectives_table(metrics: Metrics, unit: str) -> Table:
    """Per collective type: calls, time, exposed time, size and bandwidths; then the process groups."""
    table = Table(title="Collectives (steady state)", title_justify="left")
    add_columns(
        table,
        [("collective", "left"), ("calls", "right"), ("time", "right"), ("exposed", "right"), ("size", "right"),
         ("busbw", "right")],
        overflow="fold",
    )  # fmt: skip
    for c in metrics.collectives:
        size = f"{c.bytes / c.count / 1e6:,.2f} MB avg" if c.bytes is not None else "—"
        bandwidth = f"{c.busbw_gbps:,.1f} GB/s" if c.busbw_gbps is not None else "—"
        ranks = f" ×{c.group_size}" if c.group_size else ""
        table.add_row(
            c.name + ranks, f"{c.count:,}", duration(c.time_us, unit), duration(c.exposed_us, unit), size, bandwidth
        )
    for g in metrics.groups:
        table.add_row(
            Text(f"group {g.name} ({g.parallelism})", style="dim"),
            f"{g.count:,}",
            duration(g.time_us, unit),
            duration(g.exposed_us, unit),
            "",
            "",
        )
    return table
