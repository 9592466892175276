"""One configuration, emulated in full: the recorded timeline, its prediction and where the time goes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perftool.emulator.config import EmulatorConfig
from perftool.emulator.evaluate import steady_figures
from perftool.emulator.plan import Plan, build_plan
from perftool.emulator.simulate import Timeline, simulate
from perftool.errors import PerftoolError

BREAKDOWN: dict[str, str] = {
    "compute": "device compute, weight update included",
    "input_copy": "input copies the device waits for (no IO tiles)",
    "strided_copy": "layout-rearranging copies",
    "offload_copy": "optimizer state to and from remote buffers",
    "fallback": "waiting for CPU-fallback round trips",
    "idle": "device idle: host dispatch, compile, waiting for input",
}


class InfeasibleConfig(PerftoolError):
    """The configuration cannot run on the device (out of memory, IO tiles too few)."""


@dataclass
class Run:
    config: EmulatorConfig
    plan: Plan
    timeline: Timeline
    prediction: dict[str, float]

    def recorded(self, name: str) -> np.ndarray:
        """One recorded per-step quantity, for the steps this run has."""
        values = self.timeline.recorded[name][:, 0]
        return values[self.timeline.recorded["active"][:, 0]]

    def breakdown(self) -> dict[str, float]:
        """Mean µs per steady-state step spent in each part of :data:`BREAKDOWN`."""
        first = int(self.prediction["warmup_steps"])
        part = {name: self.recorded(name)[first:] for name in self.timeline.recorded}
        ends = self.timeline.step_end[: self.plan.total_steps[0], 0]
        durations = np.diff(ends, prepend=0.0)[first:]
        spent = {
            "compute": part["forward_end"]
            - part["serial_end"]
            + part["compute_end"]
            - part["backward_start"]
            + part["update_end"]
            - part["strided_end"],
            "input_copy": part["serial_end"] - part["dev_start"],
            "strided_copy": part["strided_end"] - part["compute_end"],
            "offload_copy": part["dev_end"] - part["update_end"],
            "fallback": part["backward_start"] - part["forward_end"],
        }
        spent["idle"] = durations - sum(spent.values())
        return {name: float(values.mean()) for name, values in spent.items()}


def run(config: EmulatorConfig) -> Run:
    """Emulate ``config`` step by step, keeping every step's timings."""
    plan = build_plan(config)
    if not plan.feasible[0]:
        raise InfeasibleConfig(plan.infeasible[0])
    timeline = simulate(plan, config.seed, record=True)
    prediction = {name: float(values[0]) for name, values in steady_figures(plan, timeline).items()}
    return Run(config, plan, timeline, prediction)
