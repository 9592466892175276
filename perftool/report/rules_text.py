"""``perftool rules list`` and ``perftool rules explain ID``: the catalogue, one page per rule."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from perftool.report.rule_page import rule_page, thresholds
from perftool.rules.catalog import RulesReport
from perftool.rules.detectors import ORIGINS
from perftool.rules.model import Rule


def catalogue(report: RulesReport) -> Table:
    """One row per rule: id and name over its title, detector over where it comes from, severity over thresholds."""
    table = Table(show_header=True, box=box.SIMPLE_HEAD)
    table.add_column("rule", min_width=24, ratio=3)
    table.add_column("detector", no_wrap=True)
    table.add_column("severity (thresholds)", min_width=16, ratio=2)
    for rule in report.rules:
        name = rule.name if rule.enabled else f"{rule.name} (disabled)"
        table.add_row(
            Text.assemble((f"{rule.id} {name}", "bold"), "\n", (rule.title, "dim")),
            Text.assemble(rule.detector, "\n", (f"from {ORIGINS.get(rule.detector, '?')}", "dim")),
            Text.assemble(rule.severity.value, "\n", (thresholds(rule, "\n"), "dim")),  # one level a line: 80 wide
        )
    return table


def page(rule: Rule) -> Group:
    """What it finds, why it matters, how to fix it, an example: from the rule file."""
    shown = rule_page(rule)
    parts: list[RenderableType] = [
        Text.assemble((shown.heading, "bold"), f" — {shown.title}"),
        Text(shown.detector, style="dim"),
        *(_section(title, body) for title, body in shown.sections),
        Text("\nHow to fix", style="bold"),
    ]
    cause = None
    for fix in shown.fixes:
        if fix.cause != cause:
            cause = fix.cause
            parts.append(_indented(Text(f"when the cause is {cause}:", style="green"), 2))
        parts.append(_indented(Text.assemble((fix.family + ": ", "green"), fix.text), 4 if cause else 2))
    parts += [_section(title, body) for title, body in shown.after_fixes]
    return Group(*parts)


def _section(title: str, body: str) -> Group:
    return Group(Text("\n" + title, style="bold"), *(_indented(Text(line), 2) for line in body.splitlines()))


def _indented(text: Text, width: int) -> Padding:
    return Padding(text, (0, 0, 0, width))
