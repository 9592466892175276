"""``perftool gate --format json``: the verdict and every check as a versioned document."""

from __future__ import annotations

from dataclasses import asdict

from perftool.gate.run import GateResult
from perftool.results import GateReport

SCHEMA = "perftool.gate/1"


def render(result: GateResult) -> str:
    document = {
        "schema": SCHEMA,
        "status": result.status,
        "baseline": result.baseline,
        "candidate": result.candidate,
        "mismatches": result.mismatches,
        "counts": result.counts(),
        "checks": [asdict(check) for check in result.checks],
    }
    return GateReport.model_validate(document).json_text()
