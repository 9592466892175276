"""``perftool gate --format json``: the verdict and every check as a versioned document."""

from __future__ import annotations

from dataclasses import asdict

from perftool.diff.compare import TraceDiff
from perftool.gate.verdict import GateResult
from perftool.results import GateReport

SCHEMA = "perftool.gate/1"
EXPLAINED = 5  # contributors to a failed step time listed by name


def render(result: GateResult) -> str:
    return GateReport.model_validate(document(result)).json_text()


def document(result: GateResult) -> dict:
    """The verdict as plain data, before its model checks it."""
    return {
        "schema": SCHEMA,
        "status": result.status,
        "fail_on": result.fail_on,
        "baseline": result.baseline,
        "candidate": result.candidate,
        "mismatches": result.mismatches,
        "counts": result.counts(),
        "checks": [asdict(check) for check in result.checks],
        "explanations": [_explanation(diff) for diff in result.explanations],
        "unexplained": result.unexplained,
        "step_times": [asdict(times) for times in result.step_times],
        "config": result.config,
    }


def _explanation(diff: TraceDiff) -> dict:
    """A failed step time's largest contributors, and the remainders that with them add up to the change."""
    listed, others = diff.contributions(EXPLAINED)
    return {
        "rank": diff.baseline.rank,
        "level": diff.level,
        "headline": diff.headline(),
        "delta_us": diff.delta_us,
        "baseline_step_us": diff.baseline.step_us,
        "candidate_step_us": diff.candidate.step_us,
        "contributors": [
            *({"name": row.key, "status": row.status, "contribution_us": row.contribution_us} for row in listed),
            *(
                [{"name": "others", "status": "both", "contribution_us": others}]
                if len(diff.rows) > len(listed)
                else []
            ),
            *({"name": r.name, "status": "remainder", "contribution_us": r.contribution_us} for r in diff.remainders),
        ],
    }
