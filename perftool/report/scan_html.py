"""``perftool scan --format html``: the scan of a trace (or of a job's ranks) as one self-contained page.

Per trace: its key figures, the step-time series with warm-up and steady state marked, where a steady
step goes (compute, exposed communication, other device work, each idle cause), and the findings, most
severe first, with their impact, fix, gain and evidence; evidence times are from the trace's start in its
display unit, as Perfetto shows them. A job adds each rank's compute, communication and waits step by step,
the per-rank breakdown, and its straggler called out.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from perftool.analysis.idle import CAUSES
from perftool.common.units import duration, number, percent, plural, timestamp
from perftool.dialects.vocabulary import FINDINGS_PROCESS
from perftool.report import job_info_json, scan_json, svg
from perftool.report.escape import html_text
from perftool.report.html_page import Cell, Name, facts, page, paragraph, section, table
from perftool.report.overall import (
    capitalised,
    different_jobs_said,
    folders_not_read_said,
    holding_back,
    largest_cost,
    left_out_said,
    mean_step,
    overall_gains,
    perfetto_track,
    rank_aligned,
    rank_label,
    several_hosts,
    steps_said,
    unjudged_said,
)
from perftool.report.roofline_rows import mfu_text
from perftool.report.scan_text import evidence_start
from perftool.rules.findings import Finding, JobView, RankSteps, ScanReport, TraceFindings

SHOWN = 0.0005  # a part of a steady step under this share of it is left out of the breakdown
HEAT_CELLS = 60_000  # cells per heat map at most: a job of many ranks draws fewer steps of each
MIN_STEPS_DRAWN = 16  # ... but never fewer than these


def render_info(report: ScanReport) -> str:
    """``info`` on a job: the ranks read, no rules run."""
    return render(report, command="info")


def render(report: ScanReport, command: str = "scan") -> str:
    """The scan; for ``info`` of a job (its ranks read, no rules run), the same without findings."""
    title = f"perftool {command}" + (": job" if report.job is not None else "")
    subtitle = ", ".join(t.path for t in report.traces[:3]) + (" …" if len(report.traces) > 3 else "")
    findings = command == "scan"
    body = []
    if findings and (lead := largest_cost(report)):
        body.append(paragraph(lead, "warn"))
    if report.job is not None:
        body.append(job_section(report, report.job, findings))
    if report.different_jobs:
        body.append(paragraph(capitalised(different_jobs_said(report)) + "."))
    if left := folders_not_read_said(report.folders_not_read):
        body.append(paragraph(capitalised(left) + "."))
    for trace in report.traces if report.job is None else []:
        body += trace_sections(trace, findings)
    if report.unread:
        rows = [[u.path, u.problem] for u in report.unread]
        body.append(section("Traces that could not be read", table("unread", ["trace", "why"], rows, wrapped=(0, 1))))
    document = scan_json.render(report) if findings else job_info_json.render(report)  # what --format json writes
    return page(title, subtitle, body, document)


def trace_sections(trace: TraceFindings, findings: bool = True, job: JobView | None = None) -> list[str]:
    """One trace: its figures, step series, steady step breakdown and (``findings``) its findings."""
    step = mean_step(trace)
    rate = f"{1e6 / step:,.1f} steps/s" if step else "—"
    steady = steps_said(trace) if trace.unjudged else f"{trace.steps} ({len(trace.warmup_durations_us)} warm-up before)"
    figures = facts([
        ("device", trace.device or trace.family),
        ("job", trace.job_kind or "—"),
        ("dialect", trace.dialect),
        ("steady steps", steady),
        ("step time (mean)", duration(step) if step else "—"),
        ("throughput", rate),
        ("steps timed on", f"the {trace.step_clock}"),
    ])  # fmt: skip
    parts = [figures, *(paragraph(caveat, "warn") for caveat in trace.caveats)]
    steps = [*trace.warmup_durations_us, *trace.step_durations_us]
    numbers = trace.step_numbers if len(trace.step_numbers) == len(steps) else list(range(len(steps)))
    if steps:
        parts.append(svg.series("steps", _series_caption(trace), steps, len(trace.warmup_durations_us), numbers))
    breakdown = steady_step(trace)
    if breakdown:
        parts.append(svg.stacked("breakdown", "Where a steady step goes (per step)", [("", breakdown)], duration))
    where = f" ({trace.path})" if trace.rank is None else f" (rank {trace.rank}: {trace.path})"
    return [section("Trace" + where, *parts), *([findings_section(trace, job)] if findings else [])]


def _series_caption(trace: TraceFindings) -> str:
    """What the step chart shows, and the warm-up steps drawn off its scale (the steady steps')."""
    if not trace.warmup_durations_us:
        return "Step time, step by step (no warm-up step: all are steady)"
    highest = max(trace.step_durations_us, default=math.inf)
    off_scale = [d for d in trace.warmup_durations_us if d > highest]
    beyond = f"; {plural(len(off_scale), 'warm-up step')} above the scale (▲), up to {duration(max(off_scale))}"
    return "Step time, step by step, on the steady steps' scale: warm-up shaded" + (beyond if off_scale else "")


def steady_step(trace: TraceFindings) -> list[tuple[str, float]]:
    """A steady step's time in parts: device compute, exposed communication, other device work, idle by cause."""
    step = trace.step_time_us
    compute = trace.metrics.get("device.compute_fraction")
    if not step or compute is None or not trace.idle:
        return []
    exposed = trace.metrics.get("communication.exposed_fraction") or 0.0
    idle = {CAUSES[cause]: share for cause, share in trace.idle.items() if share > 0}
    other = max(1.0 - compute - exposed - sum(idle.values()), 0.0)
    shares = [("device compute", compute), ("exposed communication", exposed), ("other device work", other)]
    shares += [(f"idle: {name}", share) for name, share in idle.items()]
    return [(name, share * step) for name, share in shares if share >= SHOWN]


def findings_section(trace: TraceFindings, job: JobView | None = None) -> str:
    """A trace's findings (with its ``job``: one rank's, whose tracks in the job's annotated trace carry the rank)."""
    if not trace.findings:
        return section(
            "Findings", paragraph(unjudged_said(trace) or "No findings: nothing the rules look for costs time here.")
        )
    overall = [paragraph(f"{label.capitalize()}: {words}") for label, words in overall_gains(trace)]
    where = paragraph(
        "Each finding's occurrences are slices on a track of its own (named below each finding) in the trace with its "
        "findings drawn on it: scan the same traces with --format perfetto -o annotated.json.gz and open that file in "
        "Perfetto UI.",
        "info",
    )
    prefix = f"{rank_label(trace.rank, rank_aligned(job, trace.rank))}: " if job is not None else ""
    return section("Findings", *overall, where, *(_finding(f, trace.time_unit, prefix) for f in trace.findings))


def _finding(finding: Finding, unit: str, prefix: str = "") -> str:
    severity = finding.severity.value
    per_step = finding.impact.per_step_us
    impact = f"{percent(finding.impact.share)} of the " + (
        f"steady state, {duration(per_step)} per step" if per_step is not None else "trace"
    )
    parts = [
        f'<article class="finding sev-{severity}" data-rule="{html_text(finding.rule_id)}">',
        f'<h3><span class="{severity}">{html_text(severity)}</span> {html_text(finding.rule_id)} '
        f"{html_text(finding.title)}</h3>",
        paragraph(finding.message),
        paragraph(f"Impact: {impact}"),
    ]
    if finding.capped:
        parts.append(paragraph(f"Held at {finding.severity.value}: {finding.capped}", "info"))
    if finding.fix is not None:
        parts.append(paragraph(f"Fix: {finding.fix.text}"))
    if finding.gain is not None:
        parts.append(paragraph(f"Gain: {finding.gain.text}"))
    if finding.evidence:
        rows: list[list[Cell]] = [
            [timestamp(evidence_start(e), unit), duration(e.dur_us, unit), e.track, Name(e.name)]
            for e in finding.evidence
        ]
        parts.append(table("evidence", ["at (from the trace's start)", "lasts", "track", "what"], rows, (0, 1), (2, 3)))
        parts.append(
            paragraph(f"In the annotated trace: the track “{prefix}{perfetto_track(finding)}” of “{FINDINGS_PROCESS}”.")
        )
    return "".join(parts) + "</article>"


def job_section(report: ScanReport, job: JobView, findings: bool = True) -> str:
    """The ranks side by side: heat maps of their steps, their breakdown, the straggler, the job's findings."""
    parts = [paragraph(f"The ranks differ in {difference}: the view compares unlike ranks.", "warn")
             for difference in job.unlike]  # fmt: skip
    parts += [paragraph(f"{capitalised(left_out)}.") for left_out in left_out_said(job)]
    if (holder := holding_back(job)) is not None:
        parts.append(paragraph(f"{capitalised(holder)}.", "warn"))
    if any(r.per_step for r in job.ranks):
        parts.append(rank_steps(job))
    breakdowns = [(f"rank {t.rank}", steady_step(t)) for t in report.traces if steady_step(t)]
    if breakdowns:
        parts.append(svg.stacked("rank-breakdown", "Where each rank's steady step goes", breakdowns, duration))
    with_mfu, with_host = any(r.mfu is not None for r in job.ranks), several_hosts(job)
    hosts = ["host"] if with_host else []
    figures = ["steps", "step time", "compute", "exposed comm.", "idle", "waits", "holds back", *(["MFU"] * with_mfu)]
    headers = ["rank", *hosts, *figures, "top finding"]
    table_rows: list[list[Cell]] = [
        [(str(r.rank), "fail" if r.rank == job.slowest_rank else ""), *([r.host or "—"] if with_host else []),
         number(r.steps), _us(r.step_time_us), _us(r.compute_us), _us(r.exposed_communication_us), _us(r.idle_us),
         _us(r.wait_us), _us(r.held_back_us), *([mfu_text(r.mfu, r.mfu_is_lower_bound)] if with_mfu else []),
         r.top_finding or ""]
        for r in job.ranks
    ]  # fmt: skip
    numeric = (0, *range(1 + len(hosts), 1 + len(hosts) + len(figures)))
    parts.append(table("ranks", headers, table_rows, numeric, (*range(1, 1 + len(hosts)), len(headers) - 1)))
    parts += [_finding(f, "ms") for f in job.findings]
    traces = [section_part for t in report.traces for section_part in trace_sections(t, findings, job=job)]
    return section(f"Job of {len(job.ranks)} ranks", *parts) + "".join(traces)


def rank_steps(job: JobView) -> str:
    """Each rank's compute, communication and waits step by step: a straggler computes longest and waits least."""
    shown = [r.per_step for r in job.ranks]
    numbers = max((steps.step for steps in shown if steps is not None), key=len)
    first = min(len(numbers), max(MIN_STEPS_DRAWN, HEAT_CELLS // len(shown)))  # a page a browser opens

    def cells(part: Callable[[RankSteps], list[float] | None]) -> list[list[float] | None]:
        """Each rank's first steps of one part; None for a rank without that part."""
        values = [part(steps) if steps is not None else None for steps in shown]
        return [row[:first] if row is not None else None for row in values]

    panels = [
        ("device compute", cells(lambda steps: steps.compute_us)),
        ("communication (a collective running)", cells(lambda steps: steps.communication_us)),
        ("waiting in collectives for other ranks", cells(lambda steps: steps.wait_us)),
    ]
    straggler = f"rank {job.slowest_rank}" if job.slowest_rank is not None else None
    steps_drawn = f", the first {first} of {len(numbers)} steps" if first < len(numbers) else ""
    caption = f"Each rank's steady steps one by one (lighter is more time{steps_drawn})" + (
        f": {straggler}, in bold, is the one the others wait for" if straggler else ""
    )
    rows = [f"rank {r.rank}" for r in job.ranks]
    return svg.heat_maps("ranks", caption, rows, numbers[:first], panels, straggler)


def _us(value: float | None) -> str:
    return duration(value) if value is not None else "—"
