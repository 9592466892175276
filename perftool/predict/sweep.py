"""Settings beyond the fixes scan prints: each speed setting ``tune`` sweeps by default on a fitted config (those
the fit read from the trace), tried alone on the fit's run, then the helping ones together. Where that beats every
printed fix, scan names it, so that scan and tune never disagree on what is best to do (tune on the calibrated
config sweeps every combination; this tries each setting on its own, a few values of a long range)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from perftool.emulator.config import EmulatorConfig, setting
from perftool.emulator.evaluate import evaluate, job_figures
from perftool.emulator.space import default_space, domain, moving_checks
from perftool.rules.findings import Gain
from perftool.rules.known_run import KnownRun
from perftool.rules.prediction import HELPS, what_if_configs

VALUES_TRIED = 6  # a setting with more values is tried at its ends and powers of two between
NO_DIFFERENCE = 0.001  # a setting whose change moves the combined speed-up less than this share is left out


def best_settings(
    config: EmulatorConfig, run: KnownRun, names: frozenset[str] | None = None, ahead: Sequence[dict[str, Any]] = ()
) -> tuple[dict[str, Any], Gain] | None:
    """The changes that raise the fit's throughput most, and their gain: the best value of each setting that helps
    alone (by :data:`~perftool.rules.prediction.HELPS`), all of them together where that helps more (less each one
    that changes nothing once the others are set, or that keeps the others from running); where they cannot run
    together whichever one is left out, the best one alone; then, one by one, each other setting at its best value
    alone where it helps once those are set (pinned inputs beside a pinned read-back that stalled the host); None
    where no setting helps alone. ``names`` limits the settings tried (None: every one the fit judges). The knobs'
    values are simulated in one run (a plan's columns) with the settings outside the knobs (input workers, gradient
    buckets: a plan per value) and the configs that say which of those move throughput (:func:`~perftool.emulator.
    space.moving_checks`), the plans joined where they can be (:func:`~perftool.emulator.evaluate.evaluate`); then
    the settings together and each left out of them, in another. The what-ifs of ``ahead`` (changes asked for next)
    are simulated in the first run."""
    judged = run.judges or frozenset()
    tried = {
        name: [value for value in _tried(domain(given)) if value != setting(config, name)]
        for name, given in default_space(config, checked=False).items()
        if name in judged and (names is None or name in names)
    }
    # a setting outside the knobs, a plan per value: its lowest, its highest and one between
    apart = [
        {name: value}
        for name, values in tried.items()
        if "." in name and values
        for value in sorted({values[0], values[len(values) // 2], values[-1]}, key=values.index)
    ]
    alone = _knobs_alone(config, {name: values for name, values in tried.items() if "." not in name}, [*apart, *ahead])
    space = default_space(config)  # the settings outside the knobs that move throughput, simulated already
    alone += [(name, value, gain.speedup) for changes in apart for name, value in changes.items()
              if name in space and (gain := run.what_if(changes)) and gain.speedup]  # fmt: skip
    best_alone: dict[str, tuple[Any, float]] = {}
    for name, value, speedup in alone:
        if speedup > best_alone.get(name, (None, 0.0))[1]:
            best_alone[name] = (value, speedup)
    helping = {name: best for name, best in best_alone.items() if best[1] >= HELPS}
    if not helping:
        return None
    together = {name: value for name, (value, _) in helping.items()}
    withouts = [{other: value for other, value in together.items() if other != name} for name in together]
    run.ahead([together, *withouts] if len(together) > 1 else [together])
    combined = run.what_if(together)
    for name in list(together) if len(together) > 1 else []:  # one that no longer matters once the others are set
        rest = {other: value for other, value in together.items() if other != name}
        without = run.what_if(rest)
        if _runs(without) and _speedup(without) >= _speedup(combined) * (1 - NO_DIFFERENCE):
            together, combined = rest, without
    if not _runs(combined):  # the settings cannot run together, whichever one is left out: the best one alone
        name, (value, _) = max(helping.items(), key=lambda item: item[1][1])
        together, combined = {name: value}, run.what_if({name: value})
    joining = [(name, value) for name, (value, _) in best_alone.items() if name not in helping]
    for name, value in joining:  # one that helps only once the others are set
        gain = run.what_if(together | {name: value})
        if _speedup(gain) >= _speedup(combined) * HELPS:
            together, combined = together | {name: value}, gain
    return (together, combined) if combined is not None and combined.speedup else None


def _runs(gain: Gain | None) -> bool:
    """Whether a what-if's changes run on the emulator and give a speed-up (None: not a valid configuration)."""
    return gain is not None and bool(gain.speedup)


def _speedup(gain: Gain | None) -> float:
    """A what-if's speed-up; 0 where its changes do not run, so that any change that runs does better."""
    return gain.speedup or 0.0 if gain is not None else 0.0


def _knobs_alone(
    config: EmulatorConfig, tried: dict[str, list], beside: Sequence[dict[str, Any]] = ()
) -> list[tuple[str, Any, float]]:
    """(knob, value, speed-up) for each of ``tried``'s values set alone, simulated together in one plan: the job's
    steady throughput over the config's own (a fit's gains are its steady state's). In the same run: the configs
    that say which settings outside the knobs move throughput (:func:`~perftool.emulator.space.moving_checks`) and
    the what-if of each of ``beside``'s changes (:func:`~perftool.rules.prediction.what_if_configs`), kept for what
    is asked of them next."""
    columns = [(name, value) for name, values in tried.items() for value in values]
    grid = {name: np.array([setting(config, name)] + [value if knob == name else setting(config, name)
                                                      for knob, value in columns])
            for name in tried} if columns else None  # fmt: skip  # the config as written first: every column in one run
    evaluation = evaluate(config, grid, moving_checks(config) + what_if_configs(config, beside))
    if grid is None:
        return []
    before, *after = job_figures(evaluation.figures, evaluation.plan.replicas)["throughput"]
    return [(name, value, float(moved) / before) for (name, value), moved in zip(columns, after) if moved > 0]


def _tried(values: tuple) -> list:
    """A setting's values to try: all of a short domain; the ends and powers of two between of a long one."""
    if len(values) <= VALUES_TRIED:
        return list(values)
    lo, hi = values[0], values[-1]
    return [v for v in values if v in (lo, hi) or (isinstance(v, int) and v > 0 and v & (v - 1) == 0)]
