"""``perftool scan --format json``: the scan as a versioned document (``perftool schema findings``)."""

from __future__ import annotations

from perftool.rules.findings import ScanReport


def render(report: ScanReport) -> str:
    return report.model_dump_json(by_alias=True, indent=2) + "\n"
