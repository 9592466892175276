"""``perftool rules explain ID --format markdown``: one rule's page in Markdown, as the documentation site shows it."""

from __future__ import annotations

from perftool.report.escape import markdown
from perftool.report.rule_page import rule_page
from perftool.rules.model import Rule


def page(rule: Rule) -> str:
    """The page ``perftool rules explain`` prints, in Markdown."""
    shown = rule_page(rule)
    lines = [f"# {shown.heading}", "", f"**{markdown(shown.title)}**", "", f"*{markdown(shown.detector)}*"]
    for title, body in shown.sections:
        lines += ["", f"## {title}", "", markdown(body)]
    lines += ["", "## How to fix", ""]
    cause = None
    for fix in shown.fixes:
        if fix.cause != cause:
            cause = fix.cause
            lines.append(f"- when the cause is {cause}:")
        lines.append(f"{'    ' if cause else ''}- **{fix.family}**: {markdown(fix.text)}")
    for title, body in shown.after_fixes:
        lines += ["", f"## {title}", ""] + [f"- {markdown(line)}" for line in body.splitlines()]
    return "\n".join(lines) + "\n"
