"""``perftool emulate --format json``: the prediction as a versioned JSON document."""

from __future__ import annotations

from perftool.emulator.full_run import Run
from perftool.report.views import EmulateView
from perftool.results import EmulateReport

SCHEMA = "perftool.emulate/1"


def render(view: EmulateView) -> str:
    return EmulateReport.model_validate(document(view.run, view.trace_file)).json_text()


def document(run: Run, written: str | None = None) -> dict:
    """The prediction as plain data, before its model checks it."""
    return {
        "schema": SCHEMA,
        "device": run.config.device,
        "config": run.config.model_dump(mode="json"),
        "prediction": run.prediction,
        "memory_bytes": float(run.plan.memory_bytes[0]),
        "capacity_bytes": float(run.plan.capacity_bytes[0]),
        "step_breakdown_us": run.breakdown(),
        "trace": written,
    }
