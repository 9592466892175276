"""``perftool tune --format json``: the sweep's answer as a versioned JSON document."""

from __future__ import annotations

import math
from typing import Any

from perftool.emulator.config import setting
from perftool.report.views import TuneView
from perftool.results import TuneReport
from perftool.tune.evaluator import ROW_FIGURES
from perftool.tune.result import TuneResult

SCHEMA = "perftool.tune/1"


def render(view: TuneView) -> str:
    return TuneReport.model_validate(document(view.result, view.source, view.top)).json_text()


def document(result: TuneResult, source: str, top: int = 10) -> dict:
    """The sweep's answer as plain data, before its model checks it."""
    config = result.config
    return {
        "schema": SCHEMA,
        "config": source,
        "device": config.device,
        "objective": result.objective.value,
        "strategy": result.strategy,
        "space": {name: values.tolist() for name, values in zip(result.space.names, result.space.values)},
        "space_size": result.space.size,
        "evaluations": result.evaluations,
        "pruned": result.pruned,
        "budget": result.budget,
        "seconds": round(result.seconds, 3),
        "baseline": {
            "knobs": {name: setting(config, name) for name in result.space.names},
            **_outcome(result.baseline.figures, 0, str(result.baseline.reason[0])),
        },
        "best": _configuration(result, result.best),
        "optimum": _configuration(result, result.optimum),
        "speedup": finite(result.speedup()),
        "kept_for_training": result.config.tune.held,
        "best_changes_training": result.training_changes(result.best),
        "top": [_configuration(result, row) for row in result.ranked()[:top].tolist()],
        "why": result.explanation,
        "sensitivity": [
            {
                "knob": line.knob,
                "best": line.best_value,
                "spread": finite(line.spread),
                "line": [
                    {
                        "value": p.value,
                        "evaluated": p.row is not None,
                        "objective": finite(p.objective),
                        "reason": p.reason,
                    }
                    for p in line.points
                ],
            }
            for line in result.sensitivity
        ],
    }


def _configuration(result: TuneResult, row: int) -> dict[str, Any]:
    return {"knobs": result.knobs(row), **_outcome(result.rows.figures, row, "")}


def _outcome(figures: dict, row: int, reason: str) -> dict[str, Any]:
    return {
        "feasible": not reason,
        "reason": reason,
        "figures": {name: finite(figures[name][row]) for name in ROW_FIGURES},
    }


def finite(value: float) -> float | None:
    """A number JSON can hold: NaN and infinities become null."""
    value = float(value)
    return value if math.isfinite(value) else None
