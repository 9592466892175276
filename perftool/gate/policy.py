"""What gate holds a candidate to: regression thresholds against a baseline, and budgets without one.

Defaults live here; ``gate:`` in the project config (``perftool.yaml`` or ``[tool.perftool]``)
changes them. A budget file sets absolute limits per metric. Limits are on the worse side of each
metric: above for most, below for the metrics where higher is better (:data:`HIGHER_IS_BETTER`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from perftool.analysis.metrics import METRICS
from perftool.common.yamlfile import read_model

HIGHER_IS_BETTER = frozenset(
    {
        "throughput.steps_per_s",
        "device.busy_fraction",
        "device.compute_fraction",
        "host.busy_fraction",
        "h2d.overlap_fraction",
        "d2h.overlap_fraction",
    }
)
COUNTERS = ("recompilations.count", "cpu_fallback.ops", "sync.per_step")  # must not increase at all


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # a NaN limit would pass anything


class Limit(_Strict):
    """A warn and an error level; either may be left out."""

    warn: float | None = None
    error: float | None = None

    @model_validator(mode="after")
    def _one_level(self) -> Limit:
        if self.warn is None and self.error is None:
            raise ValueError("give warn, error or both")
        return self


class GatePolicy(_Strict):
    """Thresholds for comparing a candidate with a baseline."""

    threshold: float = Field(
        0.05, gt=0, lt=1, description="relative step-time or throughput change that counts as a regression"
    )
    alpha: float = Field(0.01, gt=0, lt=0.5, description="significance level of the one-sided Mann-Whitney U test")
    metrics: dict[str, Limit] = Field(
        default_factory=lambda: {
            "device.idle_fraction": Limit(warn=0.02, error=0.05),
            "device.compute_fraction": Limit(warn=0.02, error=0.05),
            "h2d.overlap_fraction": Limit(warn=0.05, error=0.10),
            "input.fraction": Limit(warn=0.02, error=0.05),
        },
        description="per metric: how far it may move in the worse direction (absolute) before warn / error",
    )

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, metrics: dict[str, Limit]) -> dict[str, Limit]:
        return _known(metrics)


class Budget(_Strict):
    """Absolute limits per metric, for gating a candidate without a baseline."""

    metrics: dict[str, Limit] = Field(min_length=1, description="per metric: the warn and error levels")

    @field_validator("metrics")
    @classmethod
    def _consistent(cls, metrics: dict[str, Limit]) -> dict[str, Limit]:
        for name, limit in _known(metrics).items():
            higher = name in HIGHER_IS_BETTER
            if (
                limit.warn is not None
                and limit.error is not None
                and (limit.warn - limit.error) * (1 if higher else -1) < 0
            ):
                better = "higher" if higher else "lower"
                raise ValueError(f"{name}: warn must come before error ({name} is better {better})")
        return metrics


def _known(metrics: dict[str, Limit]) -> dict[str, Limit]:
    unknown = sorted(set(metrics) - set(METRICS))
    if unknown:
        raise ValueError(f"not a metric: {', '.join(unknown)} (see `perftool metrics`)")
    return metrics


def load_budget(path: str | Path) -> Budget:
    """Read and validate a budget file; errors name the file, line and field."""
    return read_model(path, "budget", Budget, "a budget must be a YAML mapping with a metrics: section")[0]
