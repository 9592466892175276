"""``perftool scan --format github``: GitHub Actions workflow commands, one annotation per finding."""

from __future__ import annotations

from perftool.common.errors import one_line
from perftool.rules.findings import ScanReport

_COMMAND = {"error": "error", "warning": "warning", "info": "notice"}


def render(report: ScanReport) -> str:
    lines = []
    for trace, finding in report.findings:
        properties = {"file": trace.path, "line": "1", "title": f"{finding.rule_id} {finding.rule_name}"}
        listed = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items())
        text = f"{finding.message} Fix: {finding.fix.text} Gain: {finding.gain.text}"
        lines.append(f"::{_COMMAND[finding.severity.value]} {listed}::{escape_data(text)}")
    for unread in report.unread:
        where = f"file={escape_property(unread.path)},title=perftool scan"
        lines.append(f"::error {where}::{escape_data(f'not scanned: {unread.problem}')}")
    return "".join(line + "\n" for line in lines)


def escape_data(text: str) -> str:
    """A workflow command's message: control and invisible characters escaped, then GitHub's own escapes."""
    return one_line(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")
