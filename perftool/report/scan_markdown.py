"""``perftool scan --format markdown``: a table per trace, ready for a PR comment or a job summary."""

from __future__ import annotations

from perftool.common.names import NAME_IN_TABLE, as_device, readable
from perftool.common.units import duration, plural, timestamp
from perftool.report.escape import html_text, markdown
from perftool.report.overall import (
    capitalised,
    different_jobs_said,
    folders_not_read_said,
    holding_back,
    largest_cost,
    left_out_said,
    mean_step,
    overall_gains,
    several_hosts,
    steps_said,
    unjudged_said,
)
from perftool.report.roofline_rows import mfu_text
from perftool.report.scan_text import device_label, evidence_start
from perftool.rules.findings import Finding, JobView, ScanReport, TraceFindings

_ICON = {"error": "🔴 error", "warning": "🟠 warning", "info": "🔵 info"}


def render_info(report: ScanReport) -> str:
    """``info`` on a job: the ranks read, no rules run."""
    return render(report, command="info")


def render(report: ScanReport, command: str = "scan") -> str:
    """The scan; for ``info`` of a job (its ranks read, no rules run), the same without findings."""
    lines = [f"# perftool {command}", ""]
    if command == "scan" and (lead := largest_cost(report)):
        lines += [f"**{cell(lead)}**", ""]
    if report.job is not None:
        lines += _job(report.job, report.traces[0].time_unit if report.traces else "ms")
    if report.different_jobs:
        lines += [f"> {cell(capitalised(different_jobs_said(report)))}.", ""]
    if left := folders_not_read_said(report.folders_not_read):
        lines += [f"> {cell(capitalised(left))}.", ""]
    for trace in report.traces:
        lines += _trace(trace) if command == "scan" else _trace_header(trace)
    for unread in report.unread:
        lines += [f"## {cell(unread.path)}", "", f"Not read: {cell(unread.problem)}.", ""]
    if command == "scan":
        lines.append(f"{plural(len(report.findings), 'finding')} in {plural(len(report.traces), 'trace')}.")
    return "\n".join(lines) + "\n"


def _trace_header(trace: TraceFindings) -> list[str]:
    mean = mean_step(trace)
    step = f", mean step {duration(mean)}" if mean is not None else ""
    idle = f", device idle {sum(trace.idle.values()):.1%}" if trace.idle and not trace.unjudged else ""
    job = f", {trace.job_kind}" if trace.job_kind else ""
    lines = [
        f"## {cell(trace.path)}",
        "",
        f"{trace.dialect} trace, {cell(as_device(device_label(trace)))}{job}, {steps_said(trace)}{step}{idle}.",
        "",
        *(f"> note: {cell(caveat)}" for caveat in trace.caveats),
        *([""] if trace.caveats else []),
    ]
    return lines


def _trace(trace: TraceFindings) -> list[str]:
    lines = _trace_header(trace)
    if not trace.findings:
        return [*lines, unjudged_said(trace) or "No findings.", ""]
    lines += ["| severity | rule | lost | finding |", "| --- | --- | --- | --- |"]
    for finding in trace.findings:
        lost = f"{finding.impact.share:.1%}"
        if finding.impact.per_step_us is not None:
            lost += f" ({duration(finding.impact.per_step_us)}/step)"
        rule = f"`{finding.rule_id}` {cell(finding.rule_name)}"
        lines.append(f"| {_ICON[finding.severity.value]} | {rule} | {lost} | {cell(finding.message)} |")
    lines.append("")
    for label, words in overall_gains(trace):
        lines += [f"**{label.capitalize()}:** {cell(words)}", ""]
    for finding in trace.findings:
        lines += _details(finding, trace.time_unit)
    return lines


def _job(job: JobView, unit: str) -> list[str]:
    """The job view: its alignment, the slowest rank, the rank table and the job's own findings."""
    world = f" (world size {job.world_size})" if job.world_size else ""
    lines = [f"## Job of {plural(len(job.ranks), 'rank')}{world}", ""]
    if job.unlike:
        lines += [*(f"> ⚠️ The ranks differ in {cell(difference)}." for difference in job.unlike), ""]
    for left_out in left_out_said(job):
        lines += [f"> {cell(capitalised(left_out))}.", ""]
    lines += [f"Clocks: {cell(job.alignment.text)}.", ""]
    if (holder := holding_back(job)) is not None:
        lines += [f"**{capitalised(holder)}.**", ""]
    with_mfu, with_host = any(row.mfu is not None for row in job.ranks), several_hosts(job)
    mfu, host = (" MFU |", " ---: |") if with_mfu else ("", ""), (" host |", " --- |") if with_host else ("", "")
    lines += [
        f"| rank |{host[0]} step | compute | exposed comm | idle | waits | holds back |{mfu[0]} top finding |",
        f"| ---: |{host[1]} ---: | ---: | ---: | ---: | ---: | ---: |{mfu[1]} --- |",
    ]
    for row in job.ranks:
        times = (row.step_time_us, row.compute_us, row.exposed_communication_us, row.idle_us, row.wait_us)
        figures = " | ".join(duration(t) if t is not None else "—" for t in (*times, row.held_back_us))
        its_mfu = f" {mfu_text(row.mfu, row.mfu_is_lower_bound)} |" if with_mfu else ""
        its_host = f" {cell(row.host or '—')} |" if with_host else ""
        lines.append(f"| {row.rank} |{its_host} {figures} |{its_mfu} {cell(row.top_finding or '—')} |")
    lines.append("")
    for finding in job.findings:
        lines += [f"{_ICON[finding.severity.value]} `{finding.rule_id}` {cell(finding.message)}", ""]
        lines += _details(finding, unit)
    return lines


def _details(finding: Finding, unit: str) -> list[str]:
    lines = [
        f"<details><summary><code>{html_text(finding.rule_id)}</code> {html_text(finding.title)}: fix and evidence"
        "</summary>",  # HTML, where Markdown's escapes would show
        "",
        f"**Fix:** {cell(finding.fix.text)}",
        "",
        f"**Gain:** {cell(finding.gain.text)}",
        "",
        *([f"**Held at {finding.severity.value}:** {cell(finding.capped)}", ""] if finding.capped else []),
    ]
    if finding.evidence:
        lines += ["| at | lasts | track | event |", "| ---: | ---: | --- | --- |"]
        lines += [
            f"| {timestamp(evidence_start(e), unit)} | {duration(e.dur_us)} | {cell(e.track)} | "
            f"{cell(readable(e.name, NAME_IN_TABLE))} |"
            for e in finding.evidence
        ]
        lines.append("")
    return [*lines, "</details>", ""]


def cell(text: str) -> str:
    """Text from the input for a Markdown table cell or paragraph (see :func:`perftool.report.escape.markdown`)."""
    return markdown(text)
