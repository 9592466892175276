"""``perftool calibrate --format json``: the fit's checks and the fitted config, as one document."""

from __future__ import annotations

from perftool.report.views import CalibrateView
from perftool.results import CalibrateReport

SCHEMA = "perftool.calibrate/1"


def render(view: CalibrateView) -> str:
    config = view.calibration.document()
    calibration = config.pop("calibration")
    return CalibrateReport(schema_=SCHEMA, calibration=calibration, config=config).json_text()
