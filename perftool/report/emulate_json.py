"""``perftool emulate --format json``: the prediction as a versioned JSON document."""

from __future__ import annotations

import json

from perftool.emulator.run import Run

SCHEMA = "perftool.emulate/1"


def render(run: Run, written: str | None = None) -> str:
    document = {
        "schema": SCHEMA,
        "device": run.config.device,
        "config": run.config.model_dump(mode="json"),
        "prediction": run.prediction,
        "memory_bytes": float(run.plan.memory_bytes[0]),
        "capacity_bytes": float(run.plan.capacity_bytes[0]),
        "step_breakdown_us": run.breakdown(),
        "trace": written,
    }
    return json.dumps(document, indent=2) + "\n"
