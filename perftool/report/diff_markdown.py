"""``perftool diff --format markdown``: the change and its contributors as tables, for a PR comment."""

from __future__ import annotations

from perftool.common.units import duration, number, percent, plural, signed_duration
from perftool.diff.compare import TraceDiff, nothing_changed
from perftool.diff.explanation import Explanation
from perftool.diff.files import DiffResult
from perftool.report.escape import markdown_code
from perftool.report.scan_markdown import cell

TOP = 10  # contributors listed; the others share one row


def render(result: DiffResult) -> str:
    lines = [f"# perftool diff: {markdown_code(result.baseline)} → {markdown_code(result.candidate)}", ""]
    if result.is_job:
        lines += ["| rank | step time | change | largest parts |", "| ---: | ---: | ---: | --- |"]
        lines += [
            f"| {d.rank} | {duration(d.baseline.step_us)} → {duration(d.candidate.step_us)} | "
            f"{signed_duration(d.delta_us)} | {cell(', '.join(d.largest()))} |"
            for d in result.diffs
        ]
        lines += ["", f"## Rank {result.most_changed.rank}, whose step changed most", ""]
    return "\n".join([*lines, *trace_diff(result.most_changed)]) + "\n"


def trace_diff(diff: TraceDiff) -> list[str]:
    """The step change and a table of its contributors that adds up to it."""
    base, cand = diff.baseline, diff.candidate
    how = f"Compared per **{diff.level}** on the {base.timeline}'s timeline" + (
        f" ({cell(diff.why)})" if diff.why else ""
    )
    lines = [
        f"{diff.measured.capitalize()}: {duration(base.step_us)} → {duration(cand.step_us)}, **{diff.change_text}**.",
        f"{how}; device {cell(diff.devices)}.",
        "",
        _made_of(Explanation.of(diff, TOP)),
        "",
        f"Where the steps go: the {plural(min(TOP, len(diff.rows)), diff.level)} with the most time.",
        "",
        f"| {cell(diff.level)} | calls/step | {diff.paced_time}/step | of step |",
        "| --- | ---: | ---: | ---: |",
        *(
            f"| {cell(row.key)} | {number(row.baseline_calls)} → {number(row.candidate_calls)} | "
            f"{duration(row.baseline_paced_us)} → {duration(row.candidate_paced_us)} | "
            f"{percent(row.baseline_paced_us / base.step_us)} → {percent(row.candidate_paced_us / cand.step_us)} |"
            for row in diff.largest_keys(TOP)
        ),
        "",
    ]
    return [*lines, *(f"- {cell(note)}" for note in diff.notes)]


def _made_of(explained: Explanation) -> str:
    """The change's parts as a table, or where none shows, that nothing changed."""
    return nothing_changed(explained.level) if explained.unchanged else contributions_table(explained)


def contributions_table(explained: Explanation) -> str:
    """The largest contributors, the others, and the remainders: rows that add up to the delta."""
    rows = [
        f"| {cell(explained.level)} | calls/step | {explained.paced_time}/step | Δ step | of Δ |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for part in explained.shown():
        change = f"{signed_duration(part.contribution_us)} | {percent(explained.share(part.contribution_us))} |"
        if part.status == "others":
            rows.append(f"| {plural(part.keys, 'other ' + explained.level)} | | | {change}")
            continue
        time = f"{duration(part.baseline_us_per_step)} → {duration(part.candidate_us_per_step)}"
        if part.status == "remainder":
            rows.append(f"| *{part.name}* | | {time} | {change}")
            continue
        mark = {"added": " (new)", "removed": " (gone)"}.get(part.status, "")
        calls = f"{number(part.baseline_calls_per_step)} → {number(part.candidate_calls_per_step)}"
        rows.append(f"| {cell(part.name)}{mark} | {calls} | {time} | {change}")
    rows.append(f"| **step time** | | | **{signed_duration(explained.delta_us)}** | |")
    return "\n".join(rows)
