"""``perftool gate --format markdown``: a table for ``$GITHUB_STEP_SUMMARY`` or a PR comment."""

from __future__ import annotations

from perftool.gate.checks import Verdict
from perftool.gate.verdict import GateResult
from perftool.report.diff_markdown import contributions_table
from perftool.report.escape import markdown_code
from perftool.report.scan_markdown import cell

ICON = {
    Verdict.FAIL: "❌ fail",
    Verdict.WARN: "⚠️ warn",
    Verdict.PASS: "✅ pass",
    Verdict.SKIP: "➖ skip",
    Verdict.NOT_CHECKED: "⛔ not checked",
}


def render(result: GateResult) -> str:
    against = markdown_code(result.baseline) if result.baseline else "its budget"
    lines = [
        f"# perftool gate: {ICON[result.status]}",
        "",
        f"{markdown_code(result.candidate)} against {against}: {result.tally()}.",
        "",
    ]
    if result.mismatches:
        lines += [f"Compared anyway (`--allow-mismatch`): {cell('; '.join(result.mismatches))}.", ""]
    if result.baseline is None:  # held to a budget: the limits stand where a baseline would
        lines += ["| check | limits | candidate | verdict | why |", "| --- | --- | ---: | --- | --- |"]
        rows = [
            [cell(c.name), cell(c.limit), c.shown(c.candidate), ICON[c.verdict], cell(c.reason())]
            for c in result.checks
        ]
    else:
        lines += [
            "| check | baseline | candidate | change | verdict | why |",
            "| --- | ---: | ---: | ---: | --- | --- |",
        ]
        rows = [
            [cell(c.name), c.shown(c.baseline), c.shown(c.candidate), cell(c.change), ICON[c.verdict], cell(c.reason())]
            for c in result.checks
        ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    for explained in result.explanations:
        where = f" on rank {explained.rank}" if explained.rank is not None else ""
        lines += ["", f"### Why the step time changed{where}", "", f"{cell(explained.headline)} (`perftool diff`, per "
                  f"{explained.level}).", "", contributions_table(explained)]  # fmt: skip
    if result.unexplained:
        lines += ["", f"Why the step time changed: not known, {cell(result.unexplained)}."]
    return "\n".join(lines) + "\n"
