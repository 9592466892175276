"""``perftool scan --format github``: GitHub Actions workflow commands, one annotation per finding."""

from __future__ import annotations

from perftool.rules.findings import ScanReport

_COMMAND = {"error": "error", "warning": "warning", "info": "notice"}


def render(report: ScanReport) -> str:
    lines = []
    for trace, finding in report.findings:
        properties = {"file": trace.path, "line": "1", "title": f"{finding.rule_id} {finding.rule_name}"}
        listed = ",".join(f"{key}={_property(value)}" for key, value in properties.items())
        text = f"{finding.message} Fix: {finding.fix.text} Gain: {finding.gain.text}"
        lines.append(f"::{_COMMAND[finding.severity.value]} {listed}::{_data(text)}")
    return "".join(line + "\n" for line in lines)


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")
