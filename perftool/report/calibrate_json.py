"""``perftool calibrate --format json``: the fitted config and every check of it, as the fit's document."""

from __future__ import annotations

import json

from perftool.report.views import CalibrateView


def render(view: CalibrateView) -> str:
    return json.dumps(view.calibration.document(), indent=2) + "\n"
