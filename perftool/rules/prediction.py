"""The gain a fix is worth: the emulator's prediction for emulator traces, else the time lost."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pydantic import ByteSize

from perftool.common.errors import PerftoolError
from perftool.common.units import duration, estimate, figure
from perftool.emulator.config import TUNABLES, EmulatorConfig, section_of, setting, validate_config
from perftool.emulator.evaluate import evaluate, evaluate_all, first_job
from perftool.rules.findings import Gain

HELPS = 1.005  # a fix predicted to raise throughput less than this is no fix
BOUND_SLACK = 0.10  # a prediction may win back this much (relative) past the time measured lost, no more
ONE_TIME_SHOWN = 0.01  # the job's time is shown where its one-time costs move the speed-up by this share


def upper_bound(per_step_us: float | None, share: float, beyond_cost: bool = False) -> Gain:
    """The most a fix can win back; ``beyond_cost``: more than the finding's cost, as the device idle the cause leads
    to (a late batch's copy and the dispatch after it) goes too, which the text says."""
    why = ", with the idle the cause leads to beyond its own cost" if beyond_cost else ""
    if per_step_us is None or math.isnan(per_step_us):
        return Gain(kind="upper_bound", text=f"up to {share:.1%} of the run time{why}", up_to_share=share)
    text = f"up to {duration(per_step_us)} per step ({share:.1%}{why})"
    return Gain(kind="upper_bound", text=text, up_to_share=share)


def over_capture(gain: Gain, change: str, steps: int) -> Gain:
    """A fit's prediction for a fix (``change``, in words) of a cost paid once (a compile), as the bound it is: a job
    as long as the capture wins this much, a longer one less."""
    assert gain.speedup is not None
    share = 1 - 1 / gain.speedup
    return Gain(
        kind="upper_bound",
        text=f"{change}: up to {share:.1%} of the run time, over a job as long as this capture ({steps:,} steps) on "
        "the emulator fitted to it; the cost is paid once, so a longer job gains less",
        up_to_share=share,
    )


def predicted(
    config: EmulatorConfig,
    changes: dict[str, Any],
    source: str = "emulator",
    over_job: bool = True,
    interval: float | None = None,
) -> Gain | None:
    """Re-run the emulator with ``changes`` applied; None when the changed config is not valid. ``source`` says
    where the config came from (the trace's own, or a fit to it); ``interval``: for a fit, the relative half-width
    of the interval its predicted step is given with (:mod:`perftool.predict.interval`), its digits no more than
    that interval allows.

    With ``over_job`` the speed-up is the whole job's, as the config states it (its epochs of steps), with every
    one-time cost paid once: warm-up, each graph's compile. A job of unknown length (a fit to a capture) is judged
    on its steady state, as a long job would be."""
    fixed = _fixed(config, changes)
    if fixed is None:
        return None
    before, after = _figures(config), _figures(fixed)
    if isinstance(before, str):  # a config that does not run as written predicts nothing
        return None
    change = described(config, changes)
    if isinstance(after, str):
        return Gain(kind="predicted", text=f"{change}: the emulator predicts it does not run ({after})")
    step_before, step_after = before["step_time_mean_us"], after["step_time_mean_us"]
    steady = after["throughput"] / before["throughput"]
    speedup = _job_throughput(after) / _job_throughput(before) if over_job else steady
    bounds = (step_after * (1 - interval), step_after * (1 + interval)) if interval else None
    after_text = estimate(step_after, *bounds) if bounds else duration(step_after)
    text = f"{change}: step {duration(step_before)} → {after_text}"
    if abs(speedup - steady) > ONE_TIME_SHOWN * steady:  # one-time costs change what the job gains
        steps, _ = config.epoch
        epochs = config.workload.epochs
        text += (
            f"; the job ({epochs:,} × {steps:,} steps, compiles once) {duration(before['job_time_us'])}"
            f" → {duration(after['job_time_us'])}"
        )
    return Gain(
        kind="predicted",
        text=f"{text}, throughput ×{speedup:.2f} ({source})",
        step_time_us_before=step_before,
        step_time_us_after=step_after,
        step_time_us_after_interval=bounds,
        speedup=speedup,
        over="job" if over_job else "steady_state",
    )


def ahead(config: EmulatorConfig, changes: list[dict[str, Any]]) -> None:
    """Simulate the what-ifs of each of ``changes`` to ``config`` together now (:func:`evaluate_all`), where they
    are valid configurations, so that :func:`predicted` of each costs nothing after."""
    evaluate_all([config, *what_if_configs(config, changes)])


def what_if_configs(config: EmulatorConfig, changes: Sequence[dict[str, Any]]) -> list[EmulatorConfig]:
    """The configs :func:`predicted` simulates for each of ``changes`` to ``config``, where they are valid: a run
    that simulates them beside its own makes those what-ifs cost nothing after."""
    return [fixed for each in changes if (fixed := _fixed(config, each)) is not None]


def _fixed(config: EmulatorConfig, changes: dict[str, Any]) -> EmulatorConfig | None:
    """``config`` with ``changes`` applied; None where that is no valid configuration."""
    document = config.model_dump(mode="json")
    for key, value in changes.items():
        section, name = section_of(key)
        if document.get(section) is None:  # e.g. a bucket size where the config has no replicas
            return None
        document[section][name] = value
    try:
        return validate_config(document, "fix")
    except PerftoolError:
        return None


def _job_throughput(figures: dict[str, float]) -> float:
    return figures["job_samples"] / figures["job_time_us"]


def _figures(config: EmulatorConfig) -> dict[str, float] | str:
    """The config's figures (a data-parallel job's: all its ranks), or why it cannot run."""
    evaluation = evaluate(config)
    if not evaluation.feasible[0]:
        return str(evaluation.plan.infeasible[0])
    return first_job(evaluation.figures, evaluation.plan.replicas)


def described(config: EmulatorConfig, changes: dict[str, Any]) -> str:
    """``changes`` to ``config`` in words: "loop size 64 → 50, prefetch depth 1 → 4"."""
    return ", ".join(_describe(config, key, value) for key, value in changes.items())


def _describe(config: EmulatorConfig, key: str, value: Any) -> str:
    current = setting(config, key)
    label = TUNABLES[key].label if key in TUNABLES else section_of(key)[1].replace("_", " ")
    if isinstance(value, list):
        return f"{label}: {', '.join(map(_entry, value)) or 'none'}"
    if isinstance(current, ByteSize):
        return f"{label} {figure(current, 'bytes')} → {figure(value, 'bytes')}"
    return f"{label} {_shown(current)} → {_shown(value)}"


def _entry(entry: Any) -> str:
    """One entry of a list setting in words: a slow rank as "rank 4 (compute ×1.12)", its factors other than 1."""
    if not isinstance(entry, dict) or "rank" not in entry:
        return str(entry)
    factors = [f"{name} ×{value:g}" for name, value in entry.items() if name != "rank" and value != 1.0]
    return f"rank {entry['rank']} ({', '.join(factors)})" if factors else f"rank {entry['rank']}"


def _shown(value: Any) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else str(value)
