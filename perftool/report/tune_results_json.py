"""``perftool tune --results FILE.json``: every configuration looked at, with its figures or why it did not count."""

from __future__ import annotations

from perftool.report.tune_json import finite
from perftool.results import TuneRowsReport
from perftool.tune.evaluator import ROW_FIGURES
from perftool.tune.result import TuneResult

SCHEMA = "perftool.tune-results/1"


def status(result: TuneResult, row: int) -> str:
    """``ok``; ``pruned`` (ruled out before simulation); ``constraint`` (simulated, broke a constraint)."""
    if not result.rows.simulated[row]:
        return "pruned"
    return "constraint" if result.rows.reason[row] else "ok"


def render(result: TuneResult) -> str:
    figures = result.rows.figures
    rows = [
        {
            "knobs": result.knobs(row),
            "status": status(result, row),
            "reason": str(result.rows.reason[row]),
            "figures": {name: finite(figures[name][row]) for name in ROW_FIGURES},
        }
        for row in range(len(result.rows.reason))
    ]
    document = {
        "schema": SCHEMA,
        "device": result.config.device,
        "objective": result.objective.value,
        "figures": ROW_FIGURES,
        "rows": rows,
    }
    return TuneRowsReport.model_validate(document).json_text(indent=1)
