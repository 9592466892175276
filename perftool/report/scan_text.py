"""``perftool scan``: findings for people, rendered with rich, one read from problem to fix."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from perftool.analysis.idle import CAUSES
from perftool.common.names import as_device, readable
from perftool.common.units import duration, plural, timestamp
from perftool.report import job_text
from perftool.report.console import add_columns, cut
from perftool.report.escape import shown
from perftool.report.overall import (
    different_jobs_said,
    folders_not_read_said,
    largest_cost,
    mean_step,
    overall_gains,
    steps_said,
    unjudged_said,
)
from perftool.rules.findings import Evidence, Finding, ScanReport, TraceFindings

STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold blue"}


def render(report: ScanReport) -> Group:
    parts: list[RenderableType] = []
    if lead := largest_cost(report):
        parts.append(shown(lead, "bold"))
    if left := folders_not_read_said(report.folders_not_read):
        parts.append(shown(f"note: {left}", "yellow"))
    if report.job is not None:
        return Group(*parts, job_text.render(report, report.job, _finding), Text(""), summary_line(report))
    if report.different_jobs:
        parts.append(shown(f"note: {different_jobs_said(report)}", "yellow"))
    for trace in report.traces:
        parts += [_header(trace), *(_finding(finding, trace.time_unit) for finding in trace.findings)]
        if gains := overall_gains(trace):
            overall = Table.grid(padding=(0, 1))
            overall.add_column(style="bold", justify="right")
            overall.add_column()
            for label, words in gains:
                overall.add_row(label, shown(words))
            parts += [Text(""), overall]
        if unjudged := unjudged_said(trace):
            parts.append(Text(f"  {unjudged}", style="yellow"))
        elif not trace.findings:
            parts.append(Text("  no findings", style="green"))
        parts.append(Text(""))
    parts.append(summary_line(report))
    return Group(*parts)


def summary_line(report: ScanReport) -> Text:
    found = [finding for _, finding in report.findings]
    unread = f" {len(report.unread)} more not scanned (see the errors below)." if report.unread else ""
    scanned = f"{plural(len(report.traces), 'rank')} of a job" if report.job else plural(len(report.traces), "trace")
    if not found:
        return Text(f"No findings in {scanned}.{unread}", style="bold green")
    counts = {level: sum(f.severity.value == level for f in found) for level in STYLE}
    text = Text(f"{plural(len(found), 'finding')} in {scanned}: ", style="bold")
    for level, count in counts.items():
        if count:
            text.append(f"{count} {level}  ", style=STYLE[level])
    return text.append(unread.strip(), style="bold red")


def _header(trace: TraceFindings) -> Text:
    text = Text.assemble(("perftool scan ", "bold"), shown(trace.path, "bold magenta"))
    mean = mean_step(trace)
    step = f" · mean step {duration(mean)}" if mean is not None else ""
    if mean is not None and trace.step_clock == "device":
        step += " (on the device)"
    text.append(f"\n{trace.dialect} trace · ")
    text.append(shown(as_device(device_label(trace))))
    text.append(f"{f' · {trace.job_kind}' if trace.job_kind else ''} · {steps_said(trace)}{step}")
    for caveat in trace.caveats:
        text.append("\n")
        text.append(shown(f"note: {caveat}", "yellow"))
    if trace.idle and not trace.unjudged:  # no steady state's idle where the capture is none
        idle = sum(trace.idle.values())
        parts = [f"{CAUSES[c]} {trace.idle[c]:.1%}" for c in CAUSES if trace.idle.get(c, 0) >= 0.0005]
        text.append(f"\ndevice idle {idle:.1%}" + (f": {', '.join(parts)}" if parts else ""))
    return text


def device_label(trace: TraceFindings) -> str:
    """The device by name, with the family whose advice applies (saved results before names: the family)."""
    if not trace.device:
        return trace.family
    return trace.device if trace.family == "generic" else f"{trace.device} ({trace.family})"


def _finding(finding: Finding, unit: str) -> Group:
    level = finding.severity.value
    per_step = finding.impact.per_step_us
    cost = (
        f"{finding.impact.share:.1%} of the steady state ({duration(per_step)} per step)"
        if per_step is not None
        else f"{finding.impact.share:.1%} of the trace"
    )
    head = Text.assemble(
        "\n",
        (f"{level.upper():<8}", STYLE[level]),
        (f"{finding.rule_id} {finding.rule_name}", "bold"),
        f" · {finding.title} · {cost}",
    )
    body = Table.grid(padding=(0, 1))
    body.add_column(style="dim", justify="right")
    body.add_column()
    body.add_row("what", shown(finding.message))
    body.add_row("fix", shown(finding.fix.text, "green"))
    body.add_row("gain", shown(finding.gain.text))
    if finding.capped:
        held = f"held at {finding.severity.value}: {finding.capped} (see the notes above)"
        body.add_row("note", Text(held, style="yellow"))
    parts: list[RenderableType] = [head, body]
    if finding.evidence:
        parts.append(_evidence(finding, unit))
    return Group(*parts)


def _evidence(finding: Finding, unit: str) -> Table:
    table = Table(box=None, padding=(0, 1), show_edge=False, header_style="dim")
    add_columns(table, [("at", "right"), ("lasts", "right"), ("track", "left"), ("event", "left")])
    for item in finding.evidence:
        name = cut(shown(readable(item.name)))
        table.add_row(timestamp(evidence_start(item), unit), duration(item.dur_us), shown(item.track), name)
    return table


def evidence_start(item: Evidence) -> float:
    """When an occurrence starts, from the trace's start as Perfetto shows it (older saved results: as recorded)."""
    return item.at_us if item.at_us is not None else item.ts_us
