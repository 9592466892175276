"""``perftool gate --format sarif``: SARIF 2.1.0, one result per failed or warned check."""

from __future__ import annotations

import json

from perftool.common.errors import one_line
from perftool.common.version import __version__
from perftool.gate.checks import Verdict
from perftool.gate.verdict import GateResult
from perftool.report.scan_sarif import SARIF_SCHEMA, artifact_uri

_LEVEL = {Verdict.FAIL: "error", Verdict.WARN: "warning"}


def render(result: GateResult) -> str:
    flagged = [check for check in result.checks if result.counted(check) in _LEVEL]
    rule_ids = sorted({_rule_id(check.id) for check in flagged})
    results = [
        {
            "ruleId": _rule_id(check.id),
            "ruleIndex": rule_ids.index(_rule_id(check.id)),
            "level": _LEVEL[result.counted(check)],
            "message": {"text": one_line(f"{check.name}: {check.figures()}. {check.reason()}")},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": artifact_uri(result.candidate)},
                        "region": {"startLine": 1},
                    }
                }
            ],
            "partialFingerprints": {"perftoolGateCheck/v1": check.id},
        }
        for check in flagged
    ]
    rules = [
        {"id": rule_id, "shortDescription": {"text": _DESCRIPTIONS[rule_id.split("/")[1]]}} for rule_id in rule_ids
    ]
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "perftool gate", "version": __version__, "rules": rules}},
                "results": results,
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"


_DESCRIPTIONS = {
    "timing": "Step time or throughput regressed past the threshold beyond doubt, or too few steps to compare",
    "counter": "A counter that must not increase increased (recompilations, CPU fallbacks, sync points)",
    "metric": "A shared metric moved past its limit in the worse direction",
    "budget": "A metric is past its budget",
    "finding": "A new finding appeared in the candidate",
}


def _rule_id(check_id: str) -> str:
    """The rule of a check: its kind (``timing:step_time``'s, a job's ``rank3/timing:step_time``'s alike)."""
    return f"gate/{check_id.split(':')[0].rsplit('/', 1)[-1]}"
