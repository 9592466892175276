"""``perftool diff --format json``: every key's change and the contributions that add up to the delta."""

from __future__ import annotations

import math

from perftool.diff.compare import TraceDiff
from perftool.diff.files import DiffResult
from perftool.diff.profile import Profile
from perftool.results import DiffReport

SCHEMA = "perftool.diff/1"


def render(result: DiffResult) -> str:
    return DiffReport.model_validate(document(result)).json_text()


def document(result: DiffResult) -> dict:
    """The diff as plain data, before its model checks it."""
    return {
        "schema": SCHEMA,
        "baseline": result.baseline,
        "candidate": result.candidate,
        "only_baseline_ranks": result.only_baseline,
        "only_candidate_ranks": result.only_candidate,
        "diffs": [trace_diff(d) for d in result.diffs],
    }


def trace_diff(diff: TraceDiff) -> dict:
    """One pair of traces compared."""
    base, cand = diff.unmatched
    return {
        "rank": diff.baseline.rank,
        "baseline": _side(diff.baseline),
        "candidate": _side(diff.candidate),
        "level": diff.level,
        "asked": diff.asked,
        "why": diff.why,
        "delta_us": diff.delta_us,
        "change": None if math.isnan(diff.change) else diff.change,
        "headline": diff.headline(),
        "rows": [
            {
                "key": row.key,
                "status": row.status,
                "baseline_calls_per_step": row.baseline_calls,
                "candidate_calls_per_step": row.candidate_calls,
                "baseline_us_per_step": row.baseline_us,
                "candidate_us_per_step": row.candidate_us,
                "baseline_paced_us_per_step": row.baseline_paced_us,
                "candidate_paced_us_per_step": row.candidate_paced_us,
                "contribution_us": row.contribution_us,
            }
            for row in diff.rows
        ],
        "remainders": [
            {
                "name": r.name,
                "baseline_us": r.baseline_us,
                "candidate_us": r.candidate_us,
                "contribution_us": r.contribution_us,
            }
            for r in diff.remainders
        ],
        "unmatched": {
            side: {"keys": u.keys, "events": u.events, "us_per_step": u.time_us}
            for side, u in (("baseline", base), ("candidate", cand))
        },
        "notes": diff.notes,
        "matched": diff.matched,
    }


def _side(side: Profile) -> dict:
    return {
        "trace": side.source,
        "device": side.device,
        "family": side.family,
        "steps": side.steps,
        "step_time_us": side.step_us,
        "step_durations_us": side.step_durations,
        "timeline": side.timeline,
    }
