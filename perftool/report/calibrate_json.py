"""``perftool calibrate --format json``: the fit's checks and the fitted config, as one document."""

from __future__ import annotations

from perftool.report.views import CalibrateView


def render(view: CalibrateView) -> str:
    return view.calibration.report().json_text()
