"""``perftool gate --format markdown``: a table for ``$GITHUB_STEP_SUMMARY`` or a PR comment."""

from __future__ import annotations

from perftool.gate.run import GateResult
from perftool.report.findings_markdown import cell
from perftool.report.units import number

ICON = {"fail": "❌ fail", "warn": "⚠️ warn", "pass": "✅ pass", "skip": "➖ skip"}


def render(result: GateResult) -> str:
    against = f"`{result.baseline}`" if result.baseline else "its budget"
    counts = result.counts()
    lines = [
        f"# perftool gate: {ICON[result.status]}",
        "",
        f"`{result.candidate}` against {against}: {counts['fail']} failed, {counts['warn']} warned, "
        f"{counts['pass']} passed, {counts['skip']} skipped.",
        "",
    ]
    if result.mismatches:
        lines += [f"Compared anyway (`--allow-mismatch`): {cell('; '.join(result.mismatches))}.", ""]
    lines += ["| check | baseline | candidate | change | verdict | why |", "| --- | ---: | ---: | ---: | --- | --- |"]
    for check in result.checks:
        why = cell(check.reason())
        row = [
            cell(check.name),
            number(check.baseline),
            number(check.candidate),
            check.change,
            ICON[check.verdict],
            why,
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"
