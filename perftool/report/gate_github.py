"""``perftool gate --format github``: workflow-command annotations for failed and warned checks, and a notice."""

from __future__ import annotations

from perftool.gate.checks import Verdict
from perftool.gate.verdict import GateResult
from perftool.report.scan_github import escape_data, escape_property

_COMMAND = {Verdict.FAIL: "error", Verdict.WARN: "warning"}


def render(result: GateResult) -> str:
    lines = []
    for check in result.checks:
        if (verdict := result.counted(check)) in _COMMAND:
            title = escape_property(f"perftool gate: {check.name}")
            where = f"file={escape_property(result.candidate)},title={title}"
            lines.append(f"::{_COMMAND[verdict]} {where}::{escape_data(f'{check.figures()}: {check.reason()}')}")
    lines.append(f"::notice title=perftool gate::{result.status}: {escape_data(result.tally())}")
    return "".join(line + "\n" for line in lines)
