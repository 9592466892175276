"""One configuration, emulated in full: the recorded timeline, its prediction and where the time goes."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from perftool.common.errors import PerftoolError
from perftool.common.results import EmulateReport
from perftool.emulator.config import EmulatorConfig
from perftool.emulator.evaluate import first_job, steady_figures
from perftool.emulator.plan import Plan, build_plan
from perftool.emulator.simulate import Timeline, simulate

BREAKDOWN: dict[str, str] = {
    "compute": "device compute, weight update included",
    "input_copy": "input copies the device waits for (no IO tiles)",
    "strided_copy": "layout-rearranging copies",
    "offload_copy": "optimizer state to and from remote buffers",
    "readback_copy": "results copied back to the host after each step",
    "fallback": "waiting for CPU-fallback round trips",
    "communication": "waiting for the gradient all-reduce across replicas after compute",
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
    rank: int = 0  # with replicas: the rank this run's column is
    clock_offset_us: float = 0.0  # where this rank's clock starts (ranks' clocks differ)
    host: str | None = None  # with replicas placed on hosts: the host this rank ran on

    def recorded(self, name: str) -> np.ndarray:
        """One recorded per-step quantity (per bucket too, for the all-reduce), for the steps this run has."""
        values = self.timeline.recorded[name][..., 0]
        return values[self.timeline.recorded["active"][:, 0]]

    def ranks(self) -> list[Run]:
        """With replicas, each rank's run (its own column, on its host's clock, or its own where no host is given);
        else this run."""
        if self.plan.replicas == 1:
            return [self]
        replicas = self.config.replicas
        skew = replicas.clock_skew_ms * 1e3 if replicas else 0.0
        per_host = replicas.ranks_per_host if replicas else None
        clock = np.arange(self.plan.replicas) // (per_host or 1)  # per rank, the clock it reads: its host's
        drawn = np.random.default_rng([self.config.seed, 7]).uniform(0, skew, clock[-1] + 1) if skew else None
        return [
            self._column(
                rank,
                float(drawn[clock[rank]]) if drawn is not None else 0.0,
                f"node{clock[rank]}" if per_host else None,
            )
            for rank in range(self.plan.n)
        ]

    def _column(self, rank: int, offset: float, host: str | None) -> Run:
        timeline = self.timeline
        column = Timeline(
            step_end=timeline.step_end[:, [rank]],
            device_busy=timeline.device_busy[:, [rank]],
            compile_start=timeline.compile_start[:, [rank]],
            compile_end=timeline.compile_end[:, [rank]],
            recorded={name: values[..., [rank]] for name, values in timeline.recorded.items()},
        )
        return Run(self.config, self.plan.subset(np.array([rank])), column, self.prediction, rank, offset, host)

    def trace_files(self, directory: str) -> list[str]:
        """Where a job's traces are written in ``directory`` (a run of several replicas): :func:`rank_files`."""
        return rank_files(directory, self.plan.replicas)

    def report(self, trace_file: str | None = None) -> EmulateReport:
        """``emulate --format json``: the prediction as its document; ``trace_file``, the trace written and its
        size."""
        return EmulateReport(
            device=self.config.device,
            config=self.config.model_dump(mode="json"),
            prediction=self.prediction,
            memory_bytes=float(self.plan.memory_bytes[0]),
            capacity_bytes=float(self.plan.capacity_bytes[0]),
            step_breakdown_us=self.breakdown(),
            trace=trace_file,
        )

    def breakdown(self) -> dict[str, float]:
        """Mean µs per steady-state step spent in each part of :data:`BREAKDOWN`."""
        first = int(self.prediction["warmup_steps"])
        part = {name: self.recorded(name)[first:] for name in self.timeline.recorded}
        ends = self.timeline.step_end[: self.plan.total_steps[0], 0]
        durations = np.diff(ends, prepend=0.0)[first:]
        spent = {
            "compute": part["forward_end"]
            - part["ops_start"]
            + part["compute_end"]
            - part["backward_start"]
            + part["update_end"]
            - part["update_start"],
            "input_copy": part["serial_end"] - part["dev_start"],
            "strided_copy": part["strided_end"] - part["compute_end"],
            "offload_copy": part["offload_end"] - part["update_end"],
            "readback_copy": part["dev_end"] - part["offload_end"],
            "fallback": part["backward_start"] - part["forward_end"],
            "communication": part["update_start"] - part["strided_end"],
        }
        spent["idle"] = durations - sum(spent.values())
        return {name: float(values.mean()) for name, values in spent.items()}


def run(config: EmulatorConfig) -> Run:
    """Emulate ``config`` step by step, keeping every step's timings."""
    plan = build_plan(config)
    if not plan.feasible[0]:
        raise InfeasibleConfig(plan.infeasible[0])
    timeline = simulate(plan, config.seed, record=True)
    return Run(config, plan, timeline, _job_prediction(steady_figures(plan, timeline)))


def _job_prediction(figures: dict[str, np.ndarray]) -> dict[str, float]:
    """The run's figures: with replicas, the job's (over all its columns)."""
    return first_job(figures, next(iter(figures.values())).size)


def rank_files(directory: str, replicas: int) -> list[str]:
    """Where the traces of a job of ``replicas`` ranks are written in ``directory``: ``rank<N>.trace.json.gz``."""
    width = len(str(replicas - 1))
    return [os.path.join(directory, f"rank{rank:0{width}d}.trace.json.gz") for rank in range(replicas)]
