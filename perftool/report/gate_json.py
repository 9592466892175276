"""``perftool gate --format json``: the verdict and every check as a versioned document."""

from __future__ import annotations

import json
from dataclasses import asdict

from perftool.gate.run import GateResult

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
    return json.dumps(document, indent=2) + "\n"
