"""Per-knob sensitivity: how far the objective moves along each knob, the others held at the best.

Each knob's *line* is the best configuration with that one knob set to each of its values. The
spread is the gap between the line's best and worst configurations that count, as a share of the
best configuration's objective. Values the search never looked at (local search) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # the result carries these modules' work: imported for its type only
    from perftool.tune.search import TuneResult


@dataclass
class LinePoint:
    value: Any
    row: int | None  # None: never looked at
    objective: float  # NaN when not looked at or not counting
    reason: str  # why it does not count ('' when it does)


@dataclass
class KnobLine:
    knob: str
    best_value: Any
    points: list[LinePoint]
    higher_is_better: bool

    @property
    def counted(self) -> list[LinePoint]:
        return [p for p in self.points if not np.isnan(p.objective)]

    @property
    def spread(self) -> float:
        """(best − worst objective on the line) / the best configuration's objective; 0 with fewer than two."""
        values = [p.objective for p in self.counted]
        best = next(p.objective for p in self.points if p.value == self.best_value)
        return (max(values) - min(values)) / best if len(values) > 1 else 0.0

    def extremes(self) -> tuple[LinePoint, LinePoint]:
        """The worst and the best value on the line that count."""
        sign = 1 if self.higher_is_better else -1
        ordered = sorted(self.counted, key=lambda p: (sign * p.objective, p.value == self.best_value))
        return ordered[0], ordered[-1]

    def neighbours(self) -> list[LinePoint]:
        """The nearest values before and after the best one in the knob's list that were looked at."""
        at = next(i for i, p in enumerate(self.points) if p.value == self.best_value)
        before = next((p for p in reversed(self.points[:at]) if p.row is not None), None)
        after = next((p for p in self.points[at + 1 :] if p.row is not None), None)
        return [p for p in (before, after) if p is not None]

    def at(self, value: Any) -> LinePoint | None:
        return next((p for p in self.points if p.value == value), None)


def objective_values(result: TuneResult) -> np.ndarray:
    """The objective in its own units per row (samples/s, or µs per step), NaN where a row does not count."""
    name = "throughput" if result.objective == "throughput" else "step_time_mean_us"
    return np.where(result.rows.feasible, result.rows.figures[name], np.nan)


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
        lines.append(KnobLine(name, value, points, result.objective == "throughput"))
    return sorted(lines, key=lambda line: -line.spread)
