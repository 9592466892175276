"""Per-knob sensitivity: how far the objective moves along each knob, the others held at the best.

Each knob's *line* is the best configuration with that one knob set to each of its values. The
spread is the gap between the line's best and worst configurations that count, as a share of the
best configuration's objective. Values the search never looked at (local search) are left out.
"""

from __future__ import annotations

import numpy as np

from perftool.tune.result import KnobLine, LinePoint, TuneResult


def objective_values(result: TuneResult) -> np.ndarray:
    """The objective in its own units per row (samples/s, or µs per step), NaN where a row does not count."""
    return np.where(result.rows.feasible, result.rows.figures[result.objective.figure], np.nan)


def knob_lines(result: TuneResult) -> list[KnobLine]:
    """Every knob's line through the best configuration, the knob that moves the objective most first."""
    best = result.rows.points[result.best]
    values = objective_values(result)
    lines = []
    for j, name in enumerate(result.space.names):
        points = []
        for index, value in enumerate(result.space.values[j].tolist()):
            point = best.copy()
            point[j] = index
            row = result.row_of(point)
            objective = float(values[row]) if row is not None else float("nan")
            points.append(LinePoint(value, row, objective, str(result.rows.reason[row]) if row is not None else ""))
        value = result.space.values[j][best[j]].item()
        lines.append(KnobLine(name, value, points, result.objective.higher_is_better))
    return sorted(lines, key=lambda line: -line.spread)
