"""``perftool emulate --format json``: the prediction as a versioned JSON document."""

from __future__ import annotations

from perftool.report.views import EmulateView


def render(view: EmulateView) -> str:
    return view.run.report(view.trace_file).json_text()
