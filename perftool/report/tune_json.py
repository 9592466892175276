"""``perftool tune --format json``: the sweep's answer as a versioned JSON document."""

from __future__ import annotations

from perftool.report.views import TuneView
from perftool.tune.documents import answer


def render(view: TuneView) -> str:
    return answer(view.result, view.source, view.top).json_text()
