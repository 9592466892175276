"""``perftool info --format json``: the trace summary as a versioned JSON document."""

from __future__ import annotations

from perftool.report.views import InfoView
from perftool.trace_info import info_report


def render(view: InfoView) -> str:
    return info_report(view.trace, view.metrics, view.roofline).json_text()
