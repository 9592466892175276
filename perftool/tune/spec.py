"""The ``tune:`` section of an emulator config: search space, objective, constraints and strategy.

Each knob's values are a list (tried in the order given), ``{range: [lo, hi]}`` or
``{range: [lo, hi, step]}`` (both ends included), or ``{pow2: [lo, hi]}`` (the powers of two in
``[lo, hi]``, and 0 first when ``lo`` is 0). Every value is checked against the device and the
workload the way ``perftool emulate`` checks a knob, so a bad value is an error with its line.
Besides the knobs, the space may sweep ``workload.input_workers`` (how batches are fed), and
``replicas.bucket`` and ``replicas.overlap`` (how a data-parallel job reduces its gradients).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import Enum
from math import prod
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr

from perftool.common.choices import Strategy
from perftool.common.errors import PerftoolError
from perftool.common.yamlfile import field_error
from perftool.emulator.config import (
    TUNABLES,
    EmulatorConfig,
    knob_value,
    read_config,
    setting,
    training_change,
    validate_config,
)
from perftool.emulator.space import domain

TUNABLE = tuple(name for name, tunable in TUNABLES.items() if tunable.swept)
MAX_EXHAUSTIVE = 2_000_000  # configurations an exhaustive sweep may take on
MAX_SPACE = 2**62  # configurations a space may hold (flat indices stay int64)
TIME_UNITS_US = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}


def _duration_us(given: Any) -> Any:
    """A time as µs: a number of milliseconds, or a string with a unit (``800us``, ``20ms``, ``1.5s``)."""
    if isinstance(given, (int, float)) and not isinstance(given, bool):
        return float(given) * 1e3
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(us|µs|ms|s)\s*", str(given), re.IGNORECASE)
    if not match:
        raise ValueError(f"not a time (got {given!r}): give milliseconds or a unit, e.g. 20ms, 800us, 1.5s")
    return float(match[1]) * TIME_UNITS_US[match[2].lower()]


Domain = Annotated[tuple, BeforeValidator(domain)]
Knob = Literal[TUNABLE]  # type: ignore[valid-type]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Constraints(_Strict):
    """Limits a configuration must meet to count; device memory is always one."""

    max_step_time: Annotated[float, BeforeValidator(_duration_us), Field(gt=0)] | None = Field(
        None, description="longest mean step time allowed: milliseconds, or a string with a unit (20ms, 800us)"
    )
    max_memory_fraction: float | None = Field(None, gt=0, le=1, description="largest share of device memory to use")


class Objective(str, Enum):
    """What tune optimises: samples per second, or the mean step time (what the job takes)."""

    THROUGHPUT = "throughput"
    STEP_TIME = "step_time"

    def __str__(self) -> str:
        return self.value

    @property
    def figure(self) -> str:
        """The emulator's figure it reads."""
        return "throughput" if self is Objective.THROUGHPUT else "step_time_mean_us"

    @property
    def higher_is_better(self) -> bool:
        return self is Objective.THROUGHPUT


class TuneSpec(_Strict):
    """What ``perftool tune`` sweeps, what it optimises and how it searches."""

    space: dict[Knob, Domain] = Field(min_length=1, description="values to try per knob")
    objective: Objective = Field(
        Objective.THROUGHPUT, description="maximise samples/s, or minimise the mean step time (what the job takes)"
    )
    constraints: Constraints = Constraints()
    strategy: Strategy = Field(
        "auto", description="exhaustive: every configuration; local: budgeted local search; auto: by space size"
    )
    budget: int | None = Field(None, ge=1, description="most configurations to simulate (local search)")
    seed: int = Field(0, ge=0, lt=2**63, description="seed of the search's random restarts")
    tolerance: float = Field(
        0.005,
        ge=0,
        le=0.5,
        description="configurations this close to the optimum count as equal; the earliest values win",
    )
    change_training: bool = Field(
        False,
        description="also sweep values that change the training itself, not only its speed: the batch size, "
        "gradient accumulation, dropping the short last batch, int8 transfers (kept as written otherwise)",
    )
    _held: dict[str, str] = PrivateAttr(default_factory=dict)  # knob -> what its values left out would change

    @property
    def held(self) -> dict[str, str]:
        """The knobs whose training-changing values were left out of the sweep, and what they would change."""
        return self._held


class TuneConfig(EmulatorConfig):
    """An emulator config with the ``tune:`` section that ``perftool tune`` reads."""

    tune: TuneSpec = Field(exclude=True)  # type: ignore[assignment]  # the emulator's loose section, typed here


def load_tune_config(path: str | Path, overrides: Sequence[str] = ()) -> TuneConfig:
    """Read and validate a tune config; every swept value must be one the device and workload accept."""
    document, source, root, overridden = read_config(path, overrides)
    if "tune" not in document:
        raise PerftoolError(
            f"{source}: no tune: section, the settings to sweep: add one, such as tune: {{space: {{prefetch_depth: "
            "[1, 2, 4]}} (perftool knobs lists the settings each device sweeps, perftool schema tune the section's "
            "fields), or fit a config with one to a trace: perftool calibrate TRACE -o job.yaml"
        )
    config = validate_config(document, source, root, overridden, TuneConfig)
    space = {}
    for name, values in config.tune.space.items():
        accepted = []
        for value in values:
            taken, problem = knob_value(config, name, value)
            if problem:
                raise field_error(source, root, ("tune", "space", name), f"value {value!r}: {problem}", overridden)
            accepted.append(taken)
        space[name] = tuple(accepted)
    held = {} if config.tune.change_training else _keep_the_training(config, space)
    too_large = _size_problem(config.tune, prod(len(values) for values in space.values()))
    if too_large:
        raise field_error(source, root, *too_large, overridden)
    spec = config.tune.model_copy(update={"space": space})
    spec._held = held
    return config.model_copy(update={"tune": spec})


def _keep_the_training(config: TuneConfig, space: dict[str, tuple]) -> dict[str, str]:
    """Leave out of ``space`` (in place) the values that change the training, keeping the config's own; returns
    the knobs narrowed and what the values left out would change."""
    held = {}
    for name, values in space.items():
        own = setting(config, name)
        kept = tuple(v for v in values if v == own or training_change(name, v) is None)
        if kept != values:
            dropped = next(v for v in values if v not in kept)
            held[name] = training_change(name, dropped) or ""
            space[name] = kept or (own,)
    return held


def _size_problem(spec: TuneSpec, size: int) -> tuple[tuple, str] | None:
    """A space too large to index, an exhaustive sweep too large, or one that a budget would cut short."""
    if size > MAX_SPACE:
        return ("tune", "space"), f"{size:.2e} configurations is more than the 2^62 perftool can index"
    if spec.strategy != "exhaustive":
        return None
    if size > MAX_EXHAUSTIVE:
        return ("tune", "strategy"), (
            f"exhaustive over {size:,} configurations is more than the {MAX_EXHAUSTIVE:,} it sweeps; "
            "use strategy: local with a budget"
        )
    if spec.budget is not None and spec.budget < size:
        return ("tune", "budget"), (
            f"{spec.budget:,} is smaller than the space ({size:,} configurations) that strategy exhaustive "
            "sweeps; use strategy: local, or drop the budget"
        )
    return None
