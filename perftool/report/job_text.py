"""``perftool scan`` on a job of many ranks: the job view for people, then the findings across ranks."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from rich.console import Group, JustifyMethod, RenderableType
from rich.table import Table
from rich.text import Text

from perftool.common.names import as_device
from perftool.common.units import duration, plural
from perftool.report.console import add_columns
from perftool.report.escape import shown
from perftool.report.overall import folders_not_read_said, holding_back, left_out_said, several_hosts
from perftool.report.roofline_rows import mfu_text
from perftool.rules.findings import Finding, JobView, ScanReport, TraceFindings, biggest_first

FindingView = Callable[[Finding, str], RenderableType]  # one finding in full, in a time unit
MAX_RANK_ROWS = 32  # beyond this many ranks, the table lists the slowest ones


def render_info(report: ScanReport) -> Group:
    """``info`` on a job: its job view, without findings."""
    assert report.job is not None  # info shows a job's report only
    left = folders_not_read_said(report.folders_not_read)
    return Group(*([shown(f"note: {left}", "yellow")] if left else []), render(report, report.job, command="info"))


def render(report: ScanReport, job: JobView, finding_view: FindingView | None = None, command: str = "scan") -> Group:
    """The job's header, rank table and communication, its own findings, then each rule's findings across
    ranks with the worst rank's in full (``finding_view`` renders one finding; None: no findings are shown, as for
    ``info``)."""
    unit = report.traces[0].time_unit if report.traces else "ms"
    parts: list[RenderableType] = [_header(report, job, command), _ranks(job)]
    if job.groups:
        parts.append(_groups(job))
    if finding_view is not None:  # the job's findings and each rule's across ranks, the largest cost first
        listed = [(biggest_first(f), [finding_view(f, unit)]) for f in job.findings]
        listed += _across_ranks(report.traces, finding_view)
        parts += [part for _, shown_parts in sorted(listed, key=lambda item: item[0]) for part in shown_parts]
    return Group(*parts)


def _header(report: ScanReport, job: JobView, command: str) -> Text:
    first = report.traces[0]
    world = f" (world size {job.world_size})" if job.world_size else ""
    title = f"job of {plural(len(job.ranks), 'rank')}{world}"
    text = Text.assemble((f"perftool {command} ", "bold"), (title, "bold magenta"))
    text.append(f"\n{first.dialect} traces · ")
    text.append(shown(as_device(first.device or first.family)))
    text.append(f" · {first.job_kind}" if first.job_kind else "")
    if job.missing_ranks:
        listed = ", ".join(map(str, job.missing_ranks[:10])) + (" …" if len(job.missing_ranks) > 10 else "")
        text.append(f"\nnote: no trace for ranks {listed}", style="yellow")
    for left_out in left_out_said(job):
        text.append("\n")
        text.append(shown(f"note: {left_out}", "yellow"))
    for difference in job.unlike:
        text.append("\nwarning: the ranks differ in ", style="yellow")
        text.append(shown(difference, "yellow"))
    text.append("\n")
    text.append(shown(f"clocks: {job.alignment.text}", "dim"))
    if (holder := holding_back(job)) is not None:
        text.append(f"\n{holder}", style="bold")
    if job.imbalance:
        parts = [f"{name} {value:.1%}" for name, value in job.imbalance.items()]
        text.append(f"\nload imbalance (max over mean): {', '.join(parts)}")
    return text


def _ranks(job: JobView) -> Table:
    rows = job.ranks
    title = "Ranks (ms per steady step)"
    if len(rows) > MAX_RANK_ROWS:
        rows = sorted(rows, key=lambda r: -(r.held_back_us or r.step_time_us or 0.0))[:MAX_RANK_ROWS]
        title += f": the {MAX_RANK_ROWS} slowest of {len(job.ranks)}"
        rows.sort(key=lambda r: r.rank)
    table = Table(title=title, title_justify="left")
    with_mfu = any(row.mfu is not None for row in rows)
    with_host = several_hosts(job)
    headers = ["step", "compute", "exposed comm", "idle", "waits", "holds back", *(["MFU"] if with_mfu else [])]
    hosts: list[tuple[str, JustifyMethod]] = [("host", "left")] if with_host else []
    add_columns(table, [("rank", "right"), *hosts, *((h, "right") for h in headers), ("top", "left")], overflow="fold")
    for row in rows:
        times = (row.step_time_us, row.compute_us, row.exposed_communication_us, row.idle_us, row.wait_us)
        table.add_row(
            str(row.rank),
            *([shown(row.host or "—")] if with_host else []),
            *(_time(value) for value in (*times, row.held_back_us)),
            *([mfu_text(row.mfu, row.mfu_is_lower_bound, short=True)] if with_mfu else []),
            shown(row.top_finding.split()[0] if row.top_finding else "—"),
            style="bold" if row.rank == job.slowest_rank else None,
        )
    return table


def _time(value: float | None) -> str:
    """µs as ms with two decimals: the table's unit, so every column stays narrow at 80 columns."""
    return f"{value / 1e3:,.2f}" if value is not None else "—"


def _groups(job: JobView) -> Table:
    table = Table(title="Communication per process group (per step, mean over its ranks)", title_justify="left")
    add_columns(table, [("group", "left"), ("parallelism", "left"), ("ranks", "right"), ("time", "right"),
                        ("exposed", "right")], overflow="fold")  # fmt: skip
    for group in job.groups:
        table.add_row(
            shown(group.name), group.parallelism, str(group.ranks), duration(group.time_us), duration(group.exposed_us)
        )
    return table


def _across_ranks(
    traces: list[TraceFindings], finding_view: FindingView
) -> list[tuple[tuple[float, int, str], list[RenderableType]]]:
    """Per rule: the ranks it was found on, and the worst rank's finding in full; each with the worst's place in the
    order findings are listed in (:func:`~perftool.rules.findings.biggest_first`)."""
    by_rule: dict[str, list[tuple[TraceFindings, Finding]]] = defaultdict(list)
    for trace in traces:
        for finding in trace.findings:
            by_rule[finding.rule_id].append((trace, finding))
    listed = []
    for found in by_rule.values():
        trace, worst = min(found, key=lambda pair: biggest_first(pair[1]))
        ranks = ", ".join(str(t.rank) for t, _ in found[:16]) + (" …" if len(found) > 16 else "")
        title = f"\n{worst.rule_id} on {len(found)} of {len(traces)} ranks ({ranks}); rank {trace.rank} worst:"
        listed.append((biggest_first(worst), [Text(title, style="bold"), finding_view(worst, trace.time_unit)]))
    return listed
