"""``perftool info --format json``: the trace summary as a versioned JSON document."""

from __future__ import annotations

from perftool.pipeline.info import info_report
from perftool.report.views import InfoView


def render(view: InfoView) -> str:
    return info_report(view.trace, view.metrics, view.roofline, view.folders_not_read).json_text()
