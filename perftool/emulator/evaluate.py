"""The fast path: predicted figures for many configurations at once, without writing a trace.

The figures are measured the way ``perftool info`` measures a trace (the same warm-up rule, the
same steady-state window), so a prediction and a scan of the emulator's own trace agree.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from perftool.analysis.steps import warmup_steps
from perftool.emulator.config import EmulatorConfig
from perftool.emulator.plan import Plan, build_plan
from perftool.emulator.simulate import Timeline, simulate

WARMUP_PREFIX = 32  # leading steps examined first for warm-up
CHUNK = 4096  # configurations simulated together at most
STEP_BYTES = 12  # a simulated timeline's memory per step and configuration
PIECE_BYTES = 512 * 2**20  # the timeline of one piece simulated together: long epochs make pieces smaller
# configs as written whose evaluation is kept (the most recently asked for): more than a fit's matching round and
# the next (sixteen values and the false-position point each), or a sweep's first run and what it asks after
AS_WRITTEN_KEPT = 64

FIGURES: dict[str, str] = {
    "step_time_us": "median steady-state step time, µs",
    "step_time_mean_us": "mean steady-state step time over the job, µs (mid-epoch compiles paid once in its epochs)",
    "step_time_p10_us": "10th percentile steady-state step time, µs (with the 90th, the interval a step falls in)",
    "step_time_p90_us": "90th percentile steady-state step time, µs",
    "throughput": "steady-state samples per second over the job's epochs",
    "device_busy_fraction": "share of the steady state with the device working",
    "warmup_steps": "leading steps excluded as warm-up",
    "compiles": "graph compilations in the run",
    "recompilations": "compilations in the steady state",
    "run_time_us": "time of the whole run, compiles included, µs",
    "job_time_us": "time of the whole job, every epoch: warm-up and each graph's compile paid once, µs",
    "job_samples": "samples the whole job trains on, every epoch",
}


# how a job's figure combines its ranks' (any other figure: the slowest rank's)
JOB_COMBINE: dict[str, Callable[..., np.ndarray]] = {
    "throughput": np.sum,
    "job_samples": np.sum,
    "device_busy_fraction": np.mean,
}


def job_figures(figures: dict[str, np.ndarray], ranks: int) -> dict[str, np.ndarray]:
    """Per configuration, from ``ranks`` consecutive columns each (a data-parallel job's ranks): the job's figures,
    every rank's samples together, the mean device use, the slowest rank's times."""
    return {name: JOB_COMBINE.get(name, np.max)(values.reshape(-1, ranks), axis=1) for name, values in figures.items()}


def first_job(figures: dict[str, np.ndarray], ranks: int) -> dict[str, float]:
    """The first configuration's figures as its job's (:func:`job_figures` over its ``ranks`` columns)."""
    return {name: float(values[0]) for name, values in job_figures(figures, ranks).items()}


@dataclass
class Evaluation:
    """One entry per configuration; figures are NaN where the configuration cannot run."""

    plan: Plan
    figures: dict[str, np.ndarray]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.figures[name]

    @property
    def feasible(self) -> np.ndarray:
        return self.plan.feasible

    def row(self, index: int) -> dict[str, float]:
        return {name: float(values[index]) for name, values in self.figures.items()}


_AS_WRITTEN: OrderedDict[str, Evaluation] = OrderedDict()  # evaluations of configs as written, by their JSON
_AS_WRITTEN_LOCK = threading.Lock()


def evaluate(
    config: EmulatorConfig, grid: dict[str, np.ndarray] | None = None, beside: list[EmulatorConfig] | None = None
) -> Evaluation:
    """Predict every configuration in ``grid`` (or the config as written); infeasible ones are not simulated. A config
    as written is simulated once however many callers ask (a fit's check, each fix's baseline, a sweep's starting
    point): the emulator gives the same figures for the same config and seed. The configs ``beside`` not evaluated
    before are simulated in the same run, and kept as :func:`evaluate_all` keeps them: a sweep's values and the
    what-ifs it asks for next cost one run."""
    if grid is None:
        return evaluate_all([config, *(beside or [])])[0]
    return _evaluated(beside or [], (config, grid))[-1]


def evaluate_all(configs: list[EmulatorConfig]) -> list[Evaluation]:
    """:func:`evaluate` of each of ``configs`` as written: those not evaluated before are simulated together, in one
    run where their plans differ only per configuration (a knob, the input workers) and their seeds agree, else one
    run each. A run of a few configurations costs about what one does, so what-ifs asked for together cost one."""
    return _evaluated(configs)


def _evaluated(
    configs: list[EmulatorConfig], grid: tuple[EmulatorConfig, dict[str, np.ndarray]] | None = None
) -> list[Evaluation]:
    """:func:`evaluate_all` of ``configs``, then (where given) the evaluation of a config's ``grid``, simulated with
    them."""
    keys = [config.model_dump_json() for config in configs]
    with _AS_WRITTEN_LOCK:
        kept = {key: _AS_WRITTEN[key] for key in keys if key in _AS_WRITTEN}
    missing = {key: config for key, config in zip(keys, configs) if key not in kept}
    plans = [build_plan(config) for config in missing.values()]
    seeds = [config.seed for config in missing.values()]
    if grid is not None:
        plans.append(build_plan(*grid))
        seeds.append(grid[0].seed)
    evaluations = _simulated_together(plans, seeds)
    for key, evaluation in zip(missing, evaluations):
        for values in evaluation.figures.values():  # shared by every caller: none may change it
            values.flags.writeable = False
        kept[key] = evaluation
    with _AS_WRITTEN_LOCK:  # the most recently asked for stay
        for key in keys:
            _AS_WRITTEN[key] = kept[key]
            _AS_WRITTEN.move_to_end(key)
        while len(_AS_WRITTEN) > AS_WRITTEN_KEPT:
            _AS_WRITTEN.popitem(last=False)
    return [kept[key] for key in keys] + (evaluations[-1:] if grid is not None else [])


def _simulated_together(plans: list[Plan], seeds: list[int]) -> list[Evaluation]:
    """The evaluations of ``plans`` (each simulated with its seed), in one run where :meth:`Plan.joined` joins them
    and their seeds agree."""
    joined = Plan.joined(plans) if len(plans) > 1 and len(set(seeds)) == 1 else None
    if joined is None:
        return [evaluate_plan(plan, seed) for plan, seed in zip(plans, seeds)]
    figures = evaluate_plan(joined, seeds[0]).figures
    ends = np.cumsum([plan.n for plan in plans])
    return [Evaluation(plan, {name: values[end - plan.n : end] for name, values in figures.items()})
            for plan, end in zip(plans, ends.tolist())]  # fmt: skip


def evaluate_plan(plan: Plan, seed: int) -> Evaluation:
    """Predict the configurations of ``plan`` that are feasible; the others keep NaN figures."""
    figures = {name: np.full(plan.n, np.nan) for name in FIGURES}
    for rows in _pieces(plan):
        part = plan.subset(rows)
        for name, values in steady_figures(part, simulate(part, seed)).items():
            figures[name][rows] = values
    return Evaluation(plan, figures)


def _pieces(plan: Plan) -> Iterator[np.ndarray]:
    """The feasible columns in pieces simulated together: runs of one length (a piece runs as many steps as its
    longest), at most :data:`CHUNK` columns and :data:`PIECE_BYTES` of timeline, a configuration's ranks always
    in one piece."""
    runnable = np.flatnonzero(plan.feasible)
    steps = plan.total_steps[runnable]
    for length in np.unique(steps):
        columns = min(CHUNK, PIECE_BYTES // (STEP_BYTES * int(length)))
        size = max(columns // plan.replicas, 1) * plan.replicas
        same = runnable[steps == length]
        for first in range(0, same.size, size):
            yield same[first : first + size]


def steady_figures(plan: Plan, timeline: Timeline) -> dict[str, np.ndarray]:
    """The figures of :data:`FIGURES` from simulated timelines (arrays are ``[step, config]``)."""
    figures = {name: np.full(plan.n, np.nan) for name in FIGURES}
    totals = plan.total_steps
    for count in np.unique(totals):
        rows = np.flatnonzero(totals == count)
        ends = timeline.step_end[:count, rows]
        starts = np.vstack([np.zeros((1, rows.size)), ends[:-1]])
        durations = (ends - starts).astype(np.float32)
        warmup = _warmup(durations, starts, ends, timeline.compile_start[:, rows], timeline.compile_end[:, rows])
        for first in np.unique(warmup):
            sub = np.flatnonzero(warmup == first)
            at = rows[sub]
            steady = durations[first:, sub]
            window_start, window = starts[first, sub], ends[-1, sub] - starts[first, sub]
            samples = plan.batch[at] * steady.shape[0] - np.where(
                plan.extra_step[at], plan.batch[at] - plan.last_samples[at], 0
            )
            busy = timeline.device_busy[first:count, at].sum(axis=0, dtype=np.float64)
            stall = _compile_stall(starts, ends, sub, timeline, at, window_start)
            job_window = window - stall * (1 - 1 / plan.epochs)
            figures["step_time_us"][at] = np.median(steady, axis=0)
            figures["step_time_mean_us"][at] = job_window / steady.shape[0]
            figures["step_time_p10_us"][at], figures["step_time_p90_us"][at] = np.percentile(steady, [10, 90], axis=0)
            figures["throughput"][at] = samples / job_window * 1e6
            figures["device_busy_fraction"][at] = busy / window
            figures["warmup_steps"][at] = first
            figures["recompilations"][at] = np.sum(timeline.compile_start[:, at] >= window_start, axis=0)
            # a later epoch: the window without its compiles' stall, and its first steps at a steady step's pace
            epoch = window - stall + first * figures["step_time_us"][at]
            figures["job_time_us"][at] = ends[-1, sub] + (plan.epochs - 1) * epoch
        figures["compiles"][rows] = np.sum(~np.isnan(timeline.compile_start[:, rows]), axis=0)
        figures["run_time_us"][rows] = ends[-1]
        short = np.where(plan.extra_step[rows], plan.last_samples[rows], 0)  # a short last batch's samples
        figures["job_samples"][rows] = plan.epochs * (plan.batch[rows] * plan.steps[rows] + short)
    return figures


def _compile_stall(
    starts: np.ndarray, ends: np.ndarray, sub: np.ndarray, timeline: Timeline, at: np.ndarray, window_start: np.ndarray
) -> np.ndarray:
    """Per configuration (columns ``sub`` of ``starts`` and ``ends``, ``[step, column]``; ``at`` in the plan), µs:
    how long the compiles in the steady state (which a job of many epochs pays once) held up its steps. A compile
    stalls the step it ends in from that step's start (or its own, if later): work queued before it ran on
    meanwhile, so the steps before ended on time."""
    stall = np.zeros(at.size)
    for began, done in zip(timeline.compile_start[:, at], timeline.compile_end[:, at]):
        steady = np.flatnonzero(began >= window_start)  # not where the slot is unused (NaN)
        if not steady.size:
            continue
        columns = sub[steady]
        ending_in = np.argmax(ends[:, columns] >= done[steady], axis=0)
        held = done[steady] - np.maximum(began[steady], starts[ending_in, columns])
        stall[steady] += np.clip(held, 0.0, None)
    return stall


def _warmup(
    durations: np.ndarray, starts: np.ndarray, ends: np.ndarray, compile_start: np.ndarray, compile_end: np.ndarray
) -> np.ndarray:
    """Warm-up steps per configuration by the rule ``perftool info`` applies to traces.

    Only leading steps can be warm-up, so a short prefix decides it for almost every configuration;
    the few whose whole prefix is slow are decided on all their steps.
    """
    count = durations.shape[0]
    typical = np.median(durations[count // 2 :], axis=0)[:, None]
    warmup = np.zeros(durations.shape[1], dtype=np.int64)
    undecided = np.arange(durations.shape[1])
    for prefix in (min(count, WARMUP_PREFIX), count):
        compiling = np.zeros((prefix, undecided.size), dtype=bool)
        for slot_start, slot_end in zip(compile_start[:, undecided], compile_end[:, undecided]):
            compiling |= (slot_start < ends[:prefix, undecided]) & (slot_end > starts[:prefix, undecided])
        found = warmup_steps(durations[:prefix, undecided].T, compiling.T, typical[undecided])
        decided = (found < prefix - 1) | (prefix == count)
        warmup[undecided[decided]] = found[decided]
        undecided = undecided[~decided]
        if undecided.size == 0:
            break
    return warmup
