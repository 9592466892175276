"""What a sweep found: every configuration it looked at, the best and the one recommended, and each knob's line
through the best (see :mod:`perftool.tune.sensitivity`); the renderers read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from perftool.emulator.config import EmulatorConfig, setting, training_change, with_settings
from perftool.tune.evaluator import Rows
from perftool.tune.space import Space
from perftool.tune.spec import Objective, TuneConfig


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


@dataclass
class TuneResult:
    """Everything a sweep found, with the rows of every configuration it looked at."""

    config: TuneConfig
    space: Space
    strategy: str
    budget: int | None
    rows: Rows
    evaluations: int
    pruned: int
    seconds: float
    baseline: Rows  # the config as written (one row)
    optimum: int  # row with the best objective
    best: int  # row perftool recommends (see the module docstring)
    sensitivity: list[KnobLine] = field(default_factory=list)  # each knob moved with the others at the best
    explanation: dict[str, str] = field(default_factory=dict)  # per knob: why its best value wins

    @property
    def objective(self) -> Objective:
        return self.config.tune.objective

    @property
    def failed_calibration(self) -> list[str]:
        """Why the config's calibration (``perftool calibrate``'s record in it) failed its checks, a line each; empty
        where it passed or the config was not calibrated. A sweep of such a fit predicts from a model not shown to
        hold."""
        record = self.config.calibration or {}
        if record.get("passed", True):
            return []
        return [str(warning) for warning in record.get("warnings") or ["its checks failed"]]

    def knobs(self, row: int) -> dict:
        return self.space.knobs(self.rows.points[row])

    def training_changes(self, row: int) -> list[str]:
        """What configuration ``row`` changes in the training itself against the config as written."""
        return [
            f"{name.replace('_', ' ')} {setting(self.config, name)} → {value}: {what}"
            for name, value in self.knobs(row).items()
            if value != setting(self.config, name) and (what := training_change(name, value))
        ]

    def best_config(self) -> EmulatorConfig:
        """The config as written with the best knob values: what ``perftool emulate`` should run."""
        best = with_settings(self.config, self.knobs(self.best))
        return EmulatorConfig.model_validate({**dict(best), "tune": None})

    def speedup(self) -> float:
        """How much better the best is than the baseline on the objective (NaN when the baseline cannot run at all)."""
        figure = self.objective.figure
        ratio = float(self.rows.figures[figure][self.best] / self.baseline.figures[figure][0])
        return ratio if self.objective.higher_is_better else 1 / ratio

    def ranked(self) -> np.ndarray:
        """Rows that count, best objective first."""
        score = self.rows.score(self.objective)
        order = np.argsort(-score, kind="stable")
        return order[np.isfinite(score[order])]

    def distinct(self, top: int) -> list[tuple[int, int]]:
        """The ``top`` best rows with figures of their own, each with how many rows ranked after it have the same
        (step and throughput to the nanosecond: they differ only in knobs that change nothing), so that a list of the
        best is not ten copies of one configuration."""
        figures = self.rows.figures
        first: dict[tuple[float, float], int] = {}
        alike: dict[int, int] = {}
        for row in self.ranked().tolist():
            key = (round(float(figures["step_time_mean_us"][row]), 3), round(float(figures["throughput"][row]), 9))
            if key in first:
                alike[first[key]] += 1
            else:
                first[key] = row
                alike[row] = 0
        return list(alike.items())[:top]

    @property
    def rate_unit(self) -> str:
        """What the throughput counts: samples a second, or steps a second where the config is a fit to a trace that
        did not show its batch size (one sample a step)."""
        unknown = (self.config.calibration or {}).get("batch_size_from") == "unknown"
        return "steps/s" if unknown else "samples/s"

    def row_of(self, point: np.ndarray) -> int | None:
        """The row holding ``point``, when it was looked at."""
        return self._row_by_flat.get(int(self.space.flat(point[None, :])[0]))

    @cached_property
    def _row_by_flat(self) -> dict[int, int]:
        return {flat: row for row, flat in enumerate(self.space.flat(self.rows.points).tolist())}
