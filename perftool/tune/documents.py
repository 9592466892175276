"""What ``tune`` writes as JSON, made from a sweep's result: the answer (``--format json``, perftool.tune/1) and every
configuration looked at (``--results FILE.json``, perftool.tune-results/1); their renderers only write them."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field

from perftool.common.results import Document, Part
from perftool.emulator.config import setting
from perftool.tune.evaluator import ROW_FIGURES
from perftool.tune.result import TuneResult


class TunedConfiguration(Part):
    knobs: dict[str, Any]
    feasible: bool
    reason: str = Field(description="why it cannot run (out of memory, ...); empty when feasible")
    figures: dict[str, float | None]
    alike: int = Field(0, description="in the top list: how many other configurations have the same figures")


class SensitivityPoint(Part):
    value: Any
    evaluated: bool
    objective: float | None
    reason: str


class KnobSensitivity(Part):
    knob: str
    best: Any
    spread: float | None
    line: list[SensitivityPoint]


class TuneReport(Document):
    """``perftool tune --format json``: the sweep's answer."""

    schema_: Literal["perftool.tune/1"] = Field("perftool.tune/1", alias="schema")
    config: str
    device: str
    objective: Literal["throughput", "step_time"]
    strategy: Literal["exhaustive", "local"]
    space: dict[str, list[Any]]
    space_size: int
    evaluations: int
    pruned: int
    budget: int | None
    seconds: float
    baseline: TunedConfiguration
    best: TunedConfiguration
    optimum: TunedConfiguration
    speedup: float | None
    throughput_unit: str = Field(
        "samples/s", description="samples/s, or steps/s where the config is a fit whose trace did not show the batch"
    )
    failed_calibration: list[str] = Field(
        default_factory=list,
        description="why the config's calibration failed its checks (empty where it passed or there was none): "
        "its predictions come from a fit not shown to hold",
    )
    kept_for_training: dict[str, str] = Field(
        description="knobs kept as written because their other values change the training, and what they change"
    )
    best_changes_training: list[str] = Field(description="what the best configuration changes in the training")
    top: list[TunedConfiguration]
    why: dict[str, str]
    sensitivity: list[KnobSensitivity]


class TunedRow(Part):
    knobs: dict[str, Any]
    status: Literal["ok", "pruned", "constraint"] = Field(
        description="ok; pruned (ruled out before simulation); constraint (simulated, broke a constraint)"
    )
    reason: str
    figures: dict[str, float | None]


class TuneRowsReport(Document):
    """``perftool tune --results FILE.json``: every configuration looked at."""

    schema_: Literal["perftool.tune-results/1"] = Field("perftool.tune-results/1", alias="schema")
    device: str
    objective: Literal["throughput", "step_time"]
    figures: dict[str, str] = Field(description="the figures each row holds, and what each means")
    rows: list[TunedRow]


def answer(result: TuneResult, source: str, top: int = 10) -> TuneReport:
    """The sweep's answer: the space, the config as written, the best and the optimum, the ``top`` configurations, why
    each best value wins and each knob's line through the best; ``source`` is the config file swept."""
    config = result.config
    return TuneReport(
        config=source,
        device=config.device,
        objective=result.objective.value,
        strategy=result.strategy,
        space={name: values.tolist() for name, values in zip(result.space.names, result.space.values)},
        space_size=result.space.size,
        evaluations=result.evaluations,
        pruned=result.pruned,
        budget=result.budget,
        seconds=round(result.seconds, 3),
        baseline=TunedConfiguration(
            knobs={name: setting(config, name) for name in result.space.names},
            **_outcome(result.baseline.figures, 0, str(result.baseline.reason[0])),
        ),
        best=_configuration(result, result.best),
        optimum=_configuration(result, result.optimum),
        speedup=finite(result.speedup()),
        failed_calibration=result.failed_calibration,
        kept_for_training=config.tune.held,
        best_changes_training=result.training_changes(result.best),
        top=[_configuration(result, row).model_copy(update={"alike": n}) for row, n in result.distinct(top)],
        throughput_unit=result.rate_unit,
        why=result.explanation,
        sensitivity=[
            KnobSensitivity(
                knob=line.knob,
                best=line.best_value,
                spread=finite(line.spread),
                line=[
                    SensitivityPoint(
                        value=p.value, evaluated=p.row is not None, objective=finite(p.objective), reason=p.reason
                    )
                    for p in line.points
                ],
            )
            for line in result.sensitivity
        ],
    )


def every_row(result: TuneResult) -> TuneRowsReport:
    """Every configuration the sweep looked at, with its figures or why it did not count."""
    return TuneRowsReport(
        device=result.config.device,
        objective=result.objective.value,
        figures=ROW_FIGURES,
        rows=[
            TunedRow(
                knobs=result.knobs(row),
                status=status(result, row),
                reason=str(result.rows.reason[row]),
                figures=_figures(result.rows.figures, row),
            )
            for row in range(len(result.rows.reason))
        ],
    )


def status(result: TuneResult, row: int) -> Literal["ok", "pruned", "constraint"]:
    """``ok``; ``pruned`` (ruled out before simulation); ``constraint`` (simulated, broke a constraint)."""
    if not result.rows.simulated[row]:
        return "pruned"
    return "constraint" if result.rows.reason[row] else "ok"


def finite(value: float) -> float | None:
    """A number JSON can hold: NaN and infinities become null."""
    value = float(value)
    return value if math.isfinite(value) else None


def _configuration(result: TuneResult, row: int) -> TunedConfiguration:
    return TunedConfiguration(knobs=result.knobs(row), **_outcome(result.rows.figures, row, ""))


def _outcome(figures: dict, row: int, reason: str) -> dict[str, Any]:
    return {"feasible": not reason, "reason": reason, "figures": _figures(figures, row)}


def _figures(figures: dict, row: int) -> dict[str, float | None]:
    return {name: finite(figures[name][row]) for name in ROW_FIGURES}
