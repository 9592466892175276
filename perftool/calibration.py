"""Calibration: an emulator config fitted to a trace (:mod:`perftool.predict.fitting`), and checked on what it was not
fitted to. The fit solves for one figure, the steady mean step, so matching it proves nothing; the checks are:

- **held-out steps**: the same fit made to one half of the steady steps predicts the other half's mean step
  (both ways), within 5% or what the steps' own spread explains;
- **where the time goes**: the fit is emulated, its trace scanned like the original, and the device's idle time
  by cause and its busy time by category (compute, copies, communication) compared, within 3 points each;
- **spread**: the steps' coefficient of variation, within 10 points;
- **a long run**: the fit run for 500 steps or more keeps the step time of a run as long as the trace, within 2%
  (a fit that leans on start-up effects does not).

A check that fails makes ``perftool calibrate`` exit 1 naming the figure; the config is written all the same.
"""

from __future__ import annotations

import copy
import math
import os
import tempfile
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from perftool.analysis.context import TraceAnalysis
from perftool.analysis.metrics import compute_metrics
from perftool.emulator.config import EmulatorConfig, validate_config
from perftool.emulator.devices import GENERIC
from perftool.emulator.evaluate import evaluate
from perftool.emulator.full_run import run as emulate
from perftool.emulator.trace_writer import write_trace
from perftool.errors import PerftoolError, parameter
from perftool.job.cluster import LOCAL, Cluster
from perftool.job.scan import scan_job
from perftool.predict.fitting import HOST_CAUSES, INPUT_CAUSES, fit, spread, work_per_step
from perftool.results import CalibrateReport
from perftool.rules.findings import TraceFindings
from perftool.trace.model import Trace
from perftool.trace_reader import load_trace
from perftool.trace_scan import DEFAULT_READ, ReadOptions, analyse_trace
from perftool.tune.spec import default_space
from perftool.units import plural

STEP_ERROR = 0.05  # the fit is good when it predicts held-out steps this closely (or as the steps' spread allows) ...
BATCH_ERROR = 0.10  # ... and predicts a capture at another batch size this closely
IDLE_ERROR_POINTS = 3.0  # ... and each cause of device idle, and each category of its work, within these points ...
SPREAD_POINTS = 10.0  # ... and the steps' coefficient of variation within these
LONG_RUN_STEPS = 500  # ... and a run this long keeps the step time of one as long as the trace ...
LONG_RUN_ERROR = 0.02  # ... this closely
NOISE_SIGMAS = 2.0  # held-out means differ by up to this many standard errors from noise alone
WITHOUT_JITTER = {"compute_jitter": 0.0, "preprocess_jitter": 0.0, "host_jitter": 0.0}  # only drift tells runs apart
IDLE_PARTS = {  # the device's idle, in the parts the emulator models, each the idle causes it takes
    "host": ("startup", *HOST_CAUSES),
    "input": INPUT_CAUSES,
    "compile": ("compile",),
    "cpu_fallback": ("cpu_fallback",),
    "h2d": ("h2d",),
}


@dataclass
class BatchCheck:
    """A capture of the same job at another batch size: how efficiency rises with the batch, fitted from both,
    and the fit's prediction of that capture's step."""

    source: str
    batch: int
    step_time_us: tuple[float, float]  # (trace, model), steady mean
    note: str = ""  # why the efficiency was left flat, if it was

    @property
    def error(self) -> float:
        trace, model = self.step_time_us
        return abs(model - trace) / trace if trace > 0 else math.inf


@dataclass
class Check:
    """A figure of the trace the fit did not solve for, against the fit's prediction of it."""

    figure: str  # as people read it
    trace: float
    model: float
    limit: float  # the largest error that passes
    points: bool = False  # shares compared in points of the window (else relative to the trace's value)
    note: str = ""  # where the figure comes from

    @property
    def error(self) -> float:
        if self.points:
            return abs(self.model - self.trace) * 100
        return abs(self.model - self.trace) / self.trace if self.trace > 0 else math.inf

    @property
    def passed(self) -> bool:
        return self.error <= self.limit

    def problem(self) -> str:
        """Why the check failed, in a line."""
        off = f"{self.error:.1f} points" if self.points else f"{self.error:.1%}"
        limit = f"{self.limit:.1f} points" if self.points else f"{self.limit:.1%}"
        return f"{self.figure} is predicted {off} off the trace's (more than {limit})"


@dataclass
class Calibration:
    """The fitted config, the figure it was fitted to, and its checks on the figures it was not fitted to."""

    source: str
    config: EmulatorConfig
    step_time_us: tuple[float, float]  # (trace, model), steady mean: the figure the fit solves for
    idle: dict[str, tuple[float, float]]  # cause -> (trace, model), share of the window
    at_batch: BatchCheck | None = None
    checks: list[Check] = field(default_factory=list)
    unchecked: str = ""  # why the fit could not be checked on held-out steps, if it could not
    notes: list[str] = field(default_factory=list)  # what the trace does not say, and what to give for it

    @property
    def step_error(self) -> float:
        trace, model = self.step_time_us
        return abs(model - trace) / trace if trace > 0 else math.inf

    @property
    def idle_error_points(self) -> float:
        return max((abs(model - trace) * 100 for trace, model in self.idle.values()), default=0.0)

    @property
    def warnings(self) -> list[str]:
        """Why the fit is not good enough to predict from, if it is not: each failed check, in a line."""
        found = [check.problem() for check in self.checks if not check.passed]
        if self.unchecked:
            found.append(self.unchecked)
        if self.at_batch is not None and self.at_batch.error > BATCH_ERROR:
            found.append(
                f"the step at batch {self.at_batch.batch} is predicted {self.at_batch.error:.1%} off that capture's "
                f"(more than {BATCH_ERROR:.0%})"
            )
        return found

    def report(self) -> CalibrateReport:
        """``calibrate --format json``: the calibration record, checked by its model, and the config as ``-o`` writes
        it."""
        config = self.document()
        return CalibrateReport(calibration=config.pop("calibration"), config=config)

    def document(self) -> dict[str, Any]:
        """The config as YAML holds it, with a ``tune:`` section that keeps the training as it is and its
        ``calibration:`` block."""
        config = self.config.model_dump(mode="json", exclude_none=True)
        if "dataset_samples" in config["workload"]:  # the short last batch follows from it
            del config["workload"]["last_batch_samples"]
        config["tune"] = {"space": default_space(self.config)}  # so perftool tune runs on it as written
        config["calibration"] = {
            "source": self.source,
            "step_time_us": {"trace": self.step_time_us[0], "model": self.step_time_us[1]},
            "step_error": self.step_error,
            "idle": {cause: {"trace": t, "model": m} for cause, (t, m) in self.idle.items()},
            "idle_error_points": self.idle_error_points,
            "checks": [
                {
                    "figure": c.figure,
                    "trace": c.trace,
                    "model": c.model,
                    "error": c.error,
                    "limit": c.limit,
                    "unit": "points" if c.points else "relative",
                    "passed": c.passed,
                    "note": c.note,
                }
                for c in self.checks
            ],  # fmt: skip
            "passed": not self.warnings,
            "warnings": self.warnings,
            "notes": self.notes,
        }
        if self.at_batch is not None:
            check = self.at_batch
            config["calibration"]["at_batch"] = {
                "source": check.source,
                "batch_size": check.batch,
                "step_time_us": {"trace": check.step_time_us[0], "model": check.step_time_us[1]},
                "step_error": check.error,
                "note": check.note,
            }
        return config


def calibrate(
    path: str,
    device: str | None = None,
    overrides: dict[str, Any] | None = None,
    cluster: Cluster = LOCAL,
    at_batch: tuple[int, str] | None = None,
    read: ReadOptions = DEFAULT_READ,
) -> Calibration:
    """Fit an emulator config to the trace at ``path`` and check it by emulating it. For a job's directory, the
    rank fitted is the one that sets the job's pace: the slowest in the job view (its ranks analysed on
    ``cluster``). ``at_batch`` (batch size, trace): a capture of the same job at another batch size, from which
    and the trace how efficiency rises with the batch is fitted; the fit then predicts that capture's step. ``read``:
    the dialect and size limit the traces are read with."""
    peers: list[float] = []
    if os.path.isdir(path):
        path, peers = pacing_rank(path, cluster, read)
    trace = read.load(path, "calibrate")
    scan, scope = analyse_trace(trace, [])
    if scope.idle is None or scope.window <= 0:
        raise PerftoolError(f"{path}: no device activity to calibrate against (a host-only profile)")
    if not scope.steady_steps:
        raise PerftoolError(
            f"{path}: no steady steps to fit a step to: capture several steps past warm-up with step markers "
            "(torch.profiler.schedule and prof.step())"
        )
    given = copy.deepcopy(overrides or {})
    dataset = given.get("workload", {}).pop("dataset_samples", None)
    pending = _efficiency_from(trace, scope, given, device, at_batch, read) if at_batch is not None else None
    config = fit(trace, scope, device, given, peers)
    step, idle, checks = _compare(scan, config)  # on the steps the trace shows, before the epoch takes the dataset's
    held_out = _held_out(trace, scope, device, given, peers)
    check = _predicted_at(config, pending) if pending is not None else None
    unchecked = "" if held_out is not None else (
        f"only {scope.steady_steps} steady step: nothing is held out to check the fit on (capture 3 or more)"
    )  # fmt: skip
    checks = [*([held_out] if held_out is not None else []), *checks, _long_run(config)]
    fitted = config if dataset is None else _with_dataset(config, dataset, path)
    return Calibration(path, fitted, step, idle, check, checks, unchecked, _notes(scope, config))


def _notes(scope: TraceAnalysis, config: EmulatorConfig) -> list[str]:
    """What the fit could not take from the trace, and what a what-if on it needs given."""
    notes = []
    if config.device_model == GENERIC:
        notes.append(
            f"the trace's device ({scope.metrics.device}) is not one perftool knows by model: the fit uses a generic "
            f"{config.device.upper()} (the reference device's memory and links, its speed fitted to the trace); "
            "name the model with --set device_model=KEY where memory or links matter to a what-if"
        )
    workload = config.workload
    if workload.input_workers and not workload.preprocess_us_per_sample and scope.metrics["input.time_us"] > 0:
        notes.append(
            "the trace does not show how long a batch takes to load (the input workers keep up): a what-if with "
            "fewer workers needs workload.preprocess_us_per_sample (time the data loader alone)"
        )
    return notes


class CalibrationFailed(PerftoolError):
    """The fit failed a check on what it was not fitted to: exit code 1."""

    exit_code = 1


def _held_out(
    trace: Trace, scope: TraceAnalysis, device: str | None, given: dict[str, Any], peers: list[float]
) -> Check | None:
    """The fit made to each half of the steady steps, predicting the other half's mean step: the worse of the two
    (None with fewer than two steady steps). It passes within :data:`STEP_ERROR`, or within what the two halves'
    own spread lets their means differ by."""
    steps, first, count = scope.steps, scope.steps.warmup, scope.steady_steps
    if count < 2:
        return None
    cut = first + count // 2
    halves = [(slice(0, cut), first), (slice(cut, steps.count), 0)]
    parts = [_part(trace, scope, rows, warmup) for rows, warmup in halves]
    worst: Check | None = None
    for fitted, other in ((parts[0], parts[1]), (parts[1], parts[0])):
        config = fit(trace, fitted, device, given, peers)
        model = float(evaluate(config)["step_time_mean_us"][0])
        durations = [part.steps.steady_durations for part in (fitted, other)]
        actual = float(durations[1].mean())
        noise = NOISE_SIGMAS * math.sqrt(sum(float(np.var(d)) / d.size for d in durations)) / actual
        numbers = other.steps.numbers()[other.steps.warmup :]
        check = Check(
            f"mean step of steps {numbers[0]}–{numbers[-1]}" if numbers.size > 1 else f"step {numbers[0]}",
            actual,
            model,
            max(STEP_ERROR, noise),
            note=f"held out: fitted to the other {plural(fitted.steady_steps, 'steady step')}",
        )
        worst = check if worst is None or check.error > worst.error else worst
    return worst


def _part(trace: Trace, scope: TraceAnalysis, rows: slice, warmup: int) -> TraceAnalysis:
    """The trace seen through some of its steps (``rows``, the first ``warmup`` of them warm-up)."""
    steps = scope.steps
    number = steps.number[rows] if steps.number is not None else np.arange(steps.count)[rows]
    part = replace(steps, start=steps.start[rows], end=steps.end[rows], warmup=warmup, truncated=0, number=number)
    return TraceAnalysis(trace, part, compute_metrics(trace, part), scope.family)


def _long_run(config: EmulatorConfig) -> Check:
    """The fit's median step run for :data:`LONG_RUN_STEPS` steps (or its epoch, if longer) against a run as long as
    the trace, both without jitter: a fit that leans on how a short run starts drifts (a one-off compile the median
    leaves out)."""
    steps, _ = config.epoch
    short, longer = (
        float(evaluate(_longer(config, n, WITHOUT_JITTER))["step_time_us"][0]) for n in (steps, LONG_RUN_STEPS)
    )
    return Check(
        f"median step over {max(LONG_RUN_STEPS, steps):,} steps",
        short,
        longer,
        LONG_RUN_ERROR,
        note=f"against the fit run for the trace's {steps} steps",
    )


def _efficiency_from(
    trace: Trace,
    scope: TraceAnalysis,
    given: dict[str, Any],
    device: str | None,
    at_batch: tuple[int, str],
    read: ReadOptions,
) -> BatchCheck:
    """Set ``workload.half_efficiency_batch`` in ``given`` from the device work per step at the trace's batch and at
    ``at_batch``'s (a step of b samples works as long as b + h would at full efficiency). Returns the check of the
    other capture, its prediction still to make."""
    batch, other_path = at_batch
    own = given.get("knobs", {}).get("batch_size")
    if not isinstance(own, int) or isinstance(own, bool) or own == batch:
        raise PerftoolError(
            f"{parameter('at_batch')} {batch}={other_path}: give the trace's own batch size, another than {batch}, "
            f"with {parameter('overrides')} batch_size=N"
        )
    other_trace = read.load(other_path, "calibrate")
    other_scan, other_scope = analyse_trace(other_trace, [])
    if not other_scope.steady_steps:
        raise PerftoolError(f"{other_path}: no steady steps to compare a step with")
    work, other_work = work_per_step(trace, scope), work_per_step(other_trace, other_scope)
    per_sample = (other_work - work) / (batch - own)
    half = work / per_sample - own if per_sample > 0 else math.nan
    check = BatchCheck(other_path, batch, (other_scan.step_time_us or math.nan, math.nan))
    if not half >= 0:
        return replace(check, note="the device's work per step grows at least in proportion to the batch: "
                                   "efficiency left flat")  # fmt: skip
    given.setdefault("workload", {}).setdefault("half_efficiency_batch", half)
    return check


def _predicted_at(config: EmulatorConfig, check: BatchCheck) -> BatchCheck:
    """``check`` with the fit's steady mean step at its batch size."""
    document = config.model_dump(mode="json", exclude_none=True)
    document["knobs"]["batch_size"] = check.batch
    moved: EmulatorConfig = validate_config(document, f"{parameter('at_batch')} {check.batch}={check.source}")
    return replace(check, step_time_us=(check.step_time_us[0], float(evaluate(moved)["step_time_mean_us"][0])))


def _with_dataset(config: EmulatorConfig, samples: Any, path: str) -> EmulatorConfig:
    """``config`` with epochs of ``samples`` samples: its steps and short last batch follow from the batch size."""
    document = config.model_dump(mode="json", exclude_none=True)
    document["workload"] = {
        **{k: v for k, v in document["workload"].items() if k not in ("steps", "last_batch_samples")},
        "dataset_samples": samples,
    }
    return validate_config(document, f"calibration of {path}")


def pacing_rank(directory: str, cluster: Cluster = LOCAL, read: ReadOptions = DEFAULT_READ) -> tuple[str, list[float]]:
    """The trace of the rank that sets a job's pace (the one the others wait for, else the slowest step), and each
    other rank's device compute per step relative to it."""
    report = scan_job([directory], [], read, cluster.scheduler, cluster.workers)
    if report.job is None or not report.traces:
        raise PerftoolError(f"{directory}: no rank trace could be read to calibrate")
    slowest = report.job.slowest_rank
    chosen = next((t for t in report.traces if t.rank == slowest), None)
    pacer = chosen or max(report.traces, key=lambda t: t.step_time_us or 0.0)
    own = _compute_per_step(pacer)
    relative = [_compute_per_step(t) / own for t in report.traces if t is not pacer]
    return pacer.path, [r for r in relative if math.isfinite(r) and r > 0]


def _compute_per_step(scan: TraceFindings) -> float:
    """Device compute per steady step, µs (NaN where the rank's scan does not say)."""
    fraction = scan.metrics.get("device.compute_fraction")
    return fraction * scan.window_us / scan.steps if fraction and scan.steps else math.nan


def _compare(
    scan: TraceFindings, config: EmulatorConfig
) -> tuple[tuple[float, float], dict[str, tuple[float, float]], list[Check]]:
    """The trace's steady mean step and idle shares against those of the fitted config's emulated trace, and the
    checks of where the time goes: idle by part, work by category, the steps' spread (over a long run of the fit)."""
    fitted = emulate(config)
    handle, path = tempfile.mkstemp(suffix=".json")
    os.close(handle)
    try:
        write_trace(fitted, path)
        model, _ = analyse_trace(load_trace(path), [])
    finally:
        os.unlink(path)
    traced, modelled = _by_part(scan.idle), _by_part(model.idle)
    idle = {part: (traced.get(part, 0.0), modelled.get(part, 0.0)) for part in IDLE_PARTS}
    significant = {part: pair for part, pair in idle.items() if max(pair) >= 0.0005}
    checks = [
        Check(f"device idle: {part}", t, m, IDLE_ERROR_POINTS, points=True, note="share of the steady state")
        for part, (t, m) in significant.items()
    ]
    for category, (t, m) in _work(scan, model, config.replicas is not None).items():
        if max(t, m) >= 0.0005:
            checks.append(Check(f"device busy: {category}", t, m, IDLE_ERROR_POINTS, points=True, note="share"))
    checks.append(
        Check("step-to-step spread", spread(scan.step_durations_us), _long_spread(config), SPREAD_POINTS,
              points=True, note="robust coefficient of variation of the steady steps; the model's over a long run")
    )  # fmt: skip
    return (scan.step_time_us or math.nan, model.step_time_us or math.nan), significant, checks


def _work(scan: TraceFindings, model: TraceFindings, replicated: bool) -> dict[str, tuple[float, float]]:
    """Share of the steady state with the device computing, copying and communicating: (trace, model). Where the fit
    models communication as device work (``replicated`` off), its categories are all work together, and copies."""

    def shares(found: TraceFindings) -> dict[str, float]:
        m, window = found.metrics, found.window_us or math.nan
        copies = ((m.get("h2d.time_us") or 0.0) + (m.get("d2h.time_us") or 0.0)) / window
        if not replicated:
            return {"all work": m.get("device.busy_fraction") or 0.0, "copies": copies}
        communication = (m.get("communication.time_us") or 0.0) / window
        return {"compute": m.get("device.compute_fraction") or 0.0, "copies": copies, "communication": communication}

    traced, modelled = shares(scan), shares(model)
    return {name: (traced[name], modelled[name]) for name in traced}


def _long_spread(config: EmulatorConfig) -> float:
    """The fit's step-to-step spread over a long run (a trace-length run draws too few steps to say)."""
    long = emulate(_longer(config, LONG_RUN_STEPS))
    ends = long.timeline.step_end[: long.plan.total_steps[0], 0]
    return spread(np.diff(ends, prepend=0.0)[int(long.prediction["warmup_steps"]) :])


def _longer(config: EmulatorConfig, steps: int, workload: dict[str, float] | None = None) -> EmulatorConfig:
    """``config`` run for ``steps`` full steps, or its epoch if that is longer, with ``workload`` fields set (called
    on the fit before a dataset sets its epoch)."""
    document = config.model_dump(mode="json", exclude_none=True)
    document["workload"] = {**document["workload"], "steps": max(steps, config.epoch[0]), **(workload or {})}
    return validate_config(document, "the long run")


def _by_part(idle: dict[str, float]) -> dict[str, float]:
    """Idle shares per part the emulator models (it cannot tell a launch gap from other host work)."""
    found: dict[str, float] = {}
    for cause, share in idle.items():
        part = next((name for name, causes in IDLE_PARTS.items() if cause in causes), "host")
        found[part] = found.get(part, 0.0) + share
    return found
