"""``perftool gate --format json``: the verdict and every check as a versioned document."""

from __future__ import annotations

from dataclasses import asdict

from perftool.gate.run import GateResult
from perftool.results import GateReport

SCHEMA = "perftool.gate/1"


def render(result: GateResult) -> str:
    return GateReport.model_validate(document(result)).json_text()


def document(result: GateResult) -> dict:
    """The verdict as plain data, before its model checks it."""
    return {
        "schema": SCHEMA,
        "status": result.status,
        "baseline": result.baseline,
        "candidate": result.candidate,
        "mismatches": result.mismatches,
        "counts": result.counts(),
        "checks": [asdict(check) for check in result.checks],
    }
