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

from perftool.choices import Strategy
from perftool.emulator.config import (
    TUNABLES,
    EmulatorConfig,
    knob_value,
    read_config,
    setting,
    training_change,
    validate_config,
    with_settings,
)
from perftool.emulator.evaluate import evaluate, first_job
from perftool.emulator.plan import build_plan, io_tiles_needed
from perftool.errors import PerftoolError
from perftool.yamlfile import field_error

TUNABLE = tuple(name for name, tunable in TUNABLES.items() if tunable.swept)
MAX_VALUES_PER_KNOB = 10_000
MAX_EXHAUSTIVE = 2_000_000  # configurations an exhaustive sweep may take on
MAX_SPACE = 2**62  # configurations a space may hold (flat indices stay int64)
TIME_UNITS_US = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
MAX_DEFAULT_LOOP = 256  # the longest device loop a default space tries
DEFAULT_MAX_PREFETCH = 8  # batches ahead a default space tries at most (past three, the buffer seldom helps)
DEFAULT_MAX_WORKERS = 8  # input workers a default space tries at least up to (and up to the host's cores)
DEFAULT_BUCKETS = (5_000_000, 25_000_000, 100_000_000, 400_000_000)  # gradient bucket sizes a default space tries
MOVES = 1.005  # a setting outside the knobs is swept where a value of it alone moves throughput this much


def _domain(given: Any) -> tuple:
    """A knob's values from a list, ``{range: [lo, hi(, step)]}`` or ``{pow2: [lo, hi]}``."""
    if isinstance(given, list):
        if not given:
            raise ValueError("empty list: give at least one value")
        repeated = next((value for i, value in enumerate(given) if value in given[:i]), None)
        if repeated is not None:
            raise ValueError(f"{repeated!r} is listed twice")
        return tuple(given)
    if isinstance(given, dict) and len(given) == 1:
        ((kind, bounds),) = given.items()
        if kind == "range":
            return _range(bounds)
        if kind == "pow2":
            return _pow2(bounds)
    raise ValueError("expected a list of values, {range: [lo, hi]}, {range: [lo, hi, step]} or {pow2: [lo, hi]}")


def _integers(bounds: Any, counts: tuple[int, ...], form: str) -> list[int]:
    if not (isinstance(bounds, list) and len(bounds) in counts and all(_is_int(b) for b in bounds)):
        raise ValueError(f"expected {form} with integers")
    return bounds


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _range(bounds: Any) -> tuple[int, ...]:
    lo, hi, *rest = _integers(bounds, (2, 3), "range: [lo, hi] or [lo, hi, step]")
    step = rest[0] if rest else 1
    if step < 1:
        raise ValueError(f"range step must be at least 1 (got {step})")
    if lo > hi:
        raise ValueError(f"empty range: lo {lo} is above hi {hi}")
    if (hi - lo) // step + 1 > MAX_VALUES_PER_KNOB:
        raise ValueError(f"range has more than {MAX_VALUES_PER_KNOB:,} values: use a step or pow2")
    return tuple(range(lo, hi + 1, step))


def _pow2(bounds: Any) -> tuple[int, ...]:
    lo, hi = _integers(bounds, (2,), "pow2: [lo, hi]")
    if lo < 0 or lo > hi:
        raise ValueError(f"pow2 needs 0 <= lo <= hi (got [{lo}, {hi}])")
    powers = [1 << k for k in range(hi.bit_length()) if max(lo, 1) <= 1 << k <= hi]
    if not powers:
        raise ValueError(f"no power of two between {lo} and {hi}")
    return tuple([0] if lo == 0 else []) + tuple(powers)


def _duration_us(given: Any) -> Any:
    """A time as µs: a number of milliseconds, or a string with a unit (``800us``, ``20ms``, ``1.5s``)."""
    if isinstance(given, (int, float)) and not isinstance(given, bool):
        return float(given) * 1e3
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(us|µs|ms|s)\s*", str(given), re.IGNORECASE)
    if not match:
        raise ValueError(f"not a time (got {given!r}): give milliseconds or a unit, e.g. 20ms, 800us, 1.5s")
    return float(match[1]) * TIME_UNITS_US[match[2].lower()]


Domain = Annotated[tuple, BeforeValidator(_domain)]
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
        raise PerftoolError(f"{source}: no tune: section (the search space); see `perftool schema tune`")
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


def default_space(config: EmulatorConfig) -> dict[str, Any]:
    """A search space for ``config`` that keeps its training as it is: the speed knobs its device family has,
    around its values (what ``perftool calibrate`` writes, so ``perftool tune`` runs on a fitted job as is)."""
    profile, knobs = config.profile, config.knobs
    steps, _ = config.epoch
    space: dict[str, Any] = {}
    if "loop_size" in profile.knobs:
        space["loop_size"] = {"pow2": [1, 2 ** min(steps.bit_length() - 1, MAX_DEFAULT_LOOP.bit_length() - 1)]}
    space["prefetch_depth"] = {"range": [1, max(DEFAULT_MAX_PREFETCH, knobs.prefetch_depth)]}
    if "io_tiles" in profile.knobs:
        fewest = int(io_tiles_needed(build_plan(config).input_bytes[0]))
        tiles = {0, fewest, knobs.io_tiles, *(2**k for k in range(10) if fewest <= 2**k < profile.tiles)}
        space["io_tiles"] = sorted(t for t in tiles if t < profile.tiles)
    if "device_graphs" in profile.knobs:
        space["device_graphs"] = [knobs.device_graphs, not knobs.device_graphs]
    if "offload_optimizer" in profile.knobs and config.workload.optimizer_state:
        space["offload_optimizer"] = [knobs.offload_optimizer, not knobs.offload_optimizer]
    if knobs.layout_mismatch:
        space["layout_mismatch"] = [True, False]
    if not knobs.pin_memory:
        space["pin_memory"] = [False, True]
    work = config.workload
    fewest = 0 if config.profile.host_feeds_data else 1
    most = max(DEFAULT_MAX_WORKERS, work.input_workers, config.host.cpus)
    if _moving(config, "workload.input_workers", [fewest, most]):  # how many processes load the batches
        space["workload.input_workers"] = {"range": [fewest, most]}
    replicas = config.replicas
    if replicas is not None and replicas.count > 1:  # a data-parallel job: how it reduces its gradients
        buckets = [int(replicas.bucket), *(size for size in DEFAULT_BUCKETS if size != replicas.bucket)]
        if _moving(config, "replicas.bucket", buckets):
            space["replicas.bucket"] = buckets  # as written first: a bucket size only as good wins no change
        if _moving(config, "replicas.overlap", [not replicas.overlap]):
            space["replicas.overlap"] = [replicas.overlap, not replicas.overlap]
    return space


def _moving(config: EmulatorConfig, name: str, values: Sequence[Any]) -> bool:
    """Whether one of ``values`` of setting ``name``, set alone, moves the job's throughput by :data:`MOVES` or
    more. Each value of a setting outside the knobs is a plan of its own to simulate, so one that cannot matter
    is not swept."""

    def throughput(candidate: EmulatorConfig) -> float:
        evaluation = evaluate(candidate)
        return first_job(evaluation.figures, evaluation.plan.replicas)["throughput"]

    before = throughput(config)
    after = [throughput(with_settings(config, {name: value})) for value in values if value != setting(config, name)]
    return any(moved > before * MOVES or moved < before / MOVES for moved in after)
