"""``perftool gate``: the verdict for people — one row per check, the failures spelled out."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from perftool.gate.run import GateResult
from perftool.report.escape import shown
from perftool.report.units import number

STYLE = {"fail": "bold red", "warn": "yellow", "pass": "green", "skip": "dim"}


def render(result: GateResult) -> Group:
    against = f"against {result.baseline}" if result.baseline else "against its budget"
    header = Text.assemble(("perftool gate ", "bold"), shown(result.candidate, "bold magenta"), " ", shown(against))
    if result.mismatches:
        header.append("\n")
        header.append(shown(f"compared anyway (--allow-mismatch): {'; '.join(result.mismatches)}", "yellow"))
    table = Table(show_header=True)
    for column, justify in (("check", "left"), ("baseline", "right"), ("candidate", "right"), ("change", "right"),
                            ("verdict", "left")):  # fmt: skip
        table.add_column(column, justify=justify, no_wrap=True)
    table.add_column("why")
    for check in result.checks:
        table.add_row(
            shown(check.name), number(check.baseline), number(check.candidate), check.change,
            Text(check.verdict.upper(), style=STYLE[check.verdict]), shown(check.detail),
        )  # fmt: skip
    counts = result.counts()
    summary = Text.assemble(
        ("\n" + result.status.upper(), STYLE[result.status]),
        f": {counts['fail']} failed, {counts['warn']} warned, {counts['pass']} passed, {counts['skip']} skipped",
    )
    return Group(header, table, summary)
