"""The gain a fix is worth: the emulator's prediction for emulator traces, else the time lost."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from pydantic import ByteSize

from perftool.emulator.config import EmulatorConfig, validate_config
from perftool.emulator.evaluate import Evaluation, evaluate
from perftool.errors import PerftoolError
from perftool.rules.findings import Gain
from perftool.units import duration

HELPS = 1.005  # a fix predicted to raise throughput less than this is no fix


def upper_bound(per_step_us: float | None, share: float) -> Gain:
    if per_step_us is None or math.isnan(per_step_us):
        return Gain(kind="upper_bound", text=f"up to {share:.1%} of the run time")
    return Gain(kind="upper_bound", text=f"up to {duration(per_step_us)} per step ({share:.1%})")


def predicted(config: EmulatorConfig, changes: dict[str, Any], source: str = "emulator") -> Gain | None:
    """Re-run the emulator with ``changes`` applied; None when the changed config is not valid. ``source`` says
    where the config came from (the trace's own, or a fit to it)."""
    document = config.model_dump(mode="json")
    for key, value in changes.items():
        section, _, name = key.rpartition(".")
        if document.get(section or "knobs") is None:  # e.g. a bucket size where the config has no replicas
            return None
        document[section or "knobs"][name] = value
    try:
        fixed: EmulatorConfig = validate_config(document, "fix")
    except PerftoolError:
        return None
    before, after = _baseline(config), evaluate(fixed)
    change = ", ".join(_describe(config, key, value) for key, value in changes.items())
    if not after.feasible[0]:
        return Gain(
            kind="predicted", text=f"{change}: the emulator predicts it does not run ({after.plan.infeasible[0]})"
        )
    step_before, step_after = float(before["step_time_mean_us"][0]), float(after["step_time_mean_us"][0])
    speedup = float(after["throughput"][0] / before["throughput"][0])
    return Gain(
        kind="predicted",
        text=f"{change}: step {duration(step_before)} → {duration(step_after)}, throughput ×{speedup:.2f} ({source})",
        step_time_us_before=step_before,
        step_time_us_after=step_after,
        speedup=speedup,
    )


@lru_cache(maxsize=4)
def _baseline(config: EmulatorConfig) -> Evaluation:
    """The config as written, evaluated once however many findings compare against it."""
    return evaluate(config)


def _describe(config: EmulatorConfig, key: str, value: Any) -> str:
    section, _, name = key.rpartition(".")
    current = getattr(getattr(config, section or "knobs"), name)
    label = name.replace("_", " ")
    if isinstance(value, list):
        return f"{label}: none" if not value else f"{label}: {value}"
    if isinstance(current, ByteSize):
        return f"{label} {current / 1e6:g} MB → {value / 1e6:g} MB"
    return f"{label} {_shown(current)} → {_shown(value)}"


def _shown(value: Any) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else str(value)
