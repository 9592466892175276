"""Calibration: an emulator config fitted to a trace (:mod:`perftool.predict.fitting`), and checked on what it was not
fitted to.

The fit consumes the steady mean step (its expected step, over a run of about 256 steps, is solved to be the
trace's), the device's idle time by cause and its busy time by category: agreement on those shows that the fit
took them, not that it predicts anything, so they are reported as **fitted** (within 2% and 3 points, else the fit
failed to reproduce its trace). The **checks** compare the model with the trace on figures the fit did not use:

- **held-out steps**: the same fit made to one half of the steady steps predicts the other half's mean step
  (both ways), within 5% or what the steps' own spread explains, and its device busy share within 3 points;
- **spread**: the steps' coefficient of variation over a long run of the fit, within 10 points (the fit takes the
  spread of the device's work and of the host's, not of the step they make together).

A check that fails, or a fitted figure the fit misses, makes ``perftool calibrate`` exit 1 naming the figure; the
config is written all the same.
"""

from __future__ import annotations

import copy
import math
import os
import tempfile
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from perftool.analysis import intervals
from perftool.analysis.batch import batch_size
from perftool.analysis.confidence import capture_hint
from perftool.analysis.context import TraceAnalysis
from perftool.analysis.family import job_kind, offers_loop_size, serving_engine, settings_absent
from perftool.analysis.metrics import compute_metrics
from perftool.common.errors import PerftoolError, parameter
from perftool.common.results import CalibrateReport
from perftool.common.units import plural
from perftool.dialects.kineto import EARLY_CAPTURE, EARLY_PYTORCH, early_profiler
from perftool.emulator.config import EmulatorConfig, validate_config
from perftool.emulator.devices import GENERIC
from perftool.emulator.evaluate import evaluate
from perftool.emulator.full_run import run as emulate
from perftool.emulator.space import default_space
from perftool.emulator.trace_writer import write_trace
from perftool.job.captures import why_no_job
from perftool.job.cluster import LOCAL, Cluster
from perftool.job.ranks import sole_trace
from perftool.job.scan import scan_job
from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import DEFAULT_READ, ReadOptions, analyse_trace
from perftool.predict.fitting import (
    FIT_RUN_STEPS,
    HOST_CAUSES,
    INPUT_CAUSES,
    expected_step,
    fit,
    spread,
    work_per_step,
)
from perftool.predict.interval import UNCHECKED_FIT_ERROR, mean_error
from perftool.rules.findings import TraceFindings
from perftool.trace.model import Trace

STEP_ERROR = UNCHECKED_FIT_ERROR  # the fit is good when it predicts held-out steps this closely (or as the steps'
# spread allows) ...
BATCH_ERROR = 0.10  # ... and predicts a capture at another batch size this closely
IDLE_ERROR_POINTS = 3.0  # ... and each cause of device idle, and each category of its work, within these points ...
SPREAD_POINTS = 10.0  # ... and the steps' coefficient of variation within these
FIT_STEP_ERROR = 0.02  # a fit reproduces its trace when its expected step is this close to the trace's mean
NOISE_SIGMAS = 2.0  # held-out means differ by up to this many standard errors from noise alone
EMULATED_OPS = 200_000  # the fit's trace, scanned for where its time goes, runs about this many ops
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
    """A figure of the trace against the fit's: one the fit did not use (a check), or one it took (fitted)."""

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

    def problem(self, fitted: bool = False) -> str:
        """Why the check (or, ``fitted``, the fit of a figure it took) failed, in a line."""
        off = f"{self.error:.1f} points" if self.points else f"{self.error:.1%}"
        limit = f"{self.limit:.1f} points" if self.points else f"{self.limit:.1%}"
        if fitted:
            return f"the fit did not reproduce the trace's {self.figure}: {off} off it (more than {limit})"
        return f"{self.figure} is predicted {off} off the trace's (more than {limit})"


@dataclass
class Calibration:
    """The fitted config, the figures it took from the trace, and its checks on the figures it did not use."""

    source: str
    config: EmulatorConfig
    step_time_us: tuple[float, float]  # (trace, model): the steady mean, the model's expected over a long run
    idle: dict[str, tuple[float, float]]  # cause -> (trace, model), share of the window
    at_batch: BatchCheck | None = None
    fitted: list[Check] = field(default_factory=list)  # what the fit took: the step, idle by part, busy by category
    checks: list[Check] = field(default_factory=list)  # what it did not use: held-out steps, the spread
    step_spread: float = 0.0  # the trace's steady steps' coefficient of variation (robust)
    steady_steps: int = 1
    unchecked: str = ""  # why the fit could not be checked on held-out steps, if it could not
    notes: list[str] = field(default_factory=list)  # what the trace does not say, and what to give for it
    batch_from: str = "given"  # where the batch size comes from: given, trace, or unknown (one sample a step)
    # what the trace's job is: its framework, kind (job_kind) and, serving, the engine where the trace names it
    job: dict[str, str] = field(default_factory=dict)
    absent: frozenset[str] = frozenset()  # the settings the job has nothing to set, left out of tune's space

    @property
    def step_error(self) -> float:
        trace, model = self.step_time_us
        return abs(model - trace) / trace if trace > 0 else math.inf

    @property
    def held_out_error(self) -> float | None:
        """The fit's error on the mean step of steps it did not see; None where none were held out."""
        return next((c.error for c in self.checks if c.figure.startswith("mean step")), None)

    @property
    def interval(self) -> float:
        """The relative half-width of the interval a prediction from this fit is given with
        (:func:`~perftool.predict.interval.mean_error`): its held-out error on the mean step (where nothing was held
        out, the error the check allows) and the trace's steps' spread over as many steps."""
        held = self.held_out_error
        return mean_error(STEP_ERROR if held is None else held, self.step_spread, self.steady_steps)

    @property
    def idle_error_points(self) -> float:
        return max((abs(model - trace) * 100 for trace, model in self.idle.values()), default=0.0)

    @property
    def warnings(self) -> list[str]:
        """Why the fit is not good enough to predict from, if it is not: each failed check, in a line."""
        found = [check.problem(fitted=True) for check in self.fitted if not check.passed]
        found += [check.problem() for check in self.checks if not check.passed]
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
        config["tune"] = {"space": default_space(self.config, self.absent)}  # so perftool tune runs on it as written
        config["calibration"] = {
            "source": self.source,
            "job": self.job,
            "step_time_us": {"trace": self.step_time_us[0], "model": self.step_time_us[1]},
            "step_error": self.step_error,
            "idle": {cause: {"trace": t, "model": m} for cause, (t, m) in self.idle.items()},
            "idle_error_points": self.idle_error_points,
            "interval": self.interval,
            "batch_size_from": self.batch_from,
            "fitted": [_check_document(c) for c in self.fitted],
            "checks": [_check_document(c) for c in self.checks],
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


def _check_document(check: Check) -> dict[str, Any]:
    return {
        "figure": check.figure,
        "trace": check.trace,
        "model": check.model,
        "error": check.error,
        "limit": check.limit,
        "unit": "points" if check.points else "relative",
        "passed": check.passed,
        "note": check.note,
    }


def calibrate(
    path: str,
    device: str | None = None,
    overrides: dict[str, Any] | None = None,
    cluster: Cluster = LOCAL,
    at_batch: tuple[int, str] | None = None,
    read: ReadOptions = DEFAULT_READ,
) -> Calibration:
    """Fit an emulator config to the trace at ``path`` and check it by emulating it; a directory of one trace is that
    trace. For a job's directory, the rank fitted is the one that sets the job's pace: the slowest in the job view
    (its ranks analysed on ``cluster``). ``at_batch`` (batch size, trace): a capture of the same job at another batch
    size, from which and the trace how efficiency rises with the batch is fitted; the fit then predicts that
    capture's step. ``read``: the dialect and size limit the traces are read with."""
    peers: list[float] = []
    chosen = ""  # why this rank of a job's directory was fitted
    if os.path.isdir(path):
        path, peers, chosen = (sole, [], "") if (sole := sole_trace(path)) else pacing_rank(path, cluster, read)
    trace = read.load(path, "calibrate")
    scan, scope = analyse_trace(trace, [])
    if scope.idle is None or scope.window <= 0:
        raise PerftoolError(f"{path}: no device activity to calibrate against (a host-only profile)")
    if not scope.steady_steps or scan.unjudged:
        what = f"{scan.unjudged}, no steady state" if scan.unjudged else "no steady steps"
        raise PerftoolError(f"{path}: {what} to fit a step to: {capture_hint(trace)}")
    given = copy.deepcopy(overrides or {})
    batch, batch_from = _batch(trace, scope, given)
    dataset = given.get("workload", {}).pop("dataset_samples", None)
    pending = _efficiency_from(trace, scope, given, device, at_batch, read) if at_batch is not None else None
    config = fit(trace, scope, device, given, peers)
    step = (scan.step_time_us or math.nan, expected_step(config))
    took = Check(
        f"mean step (the model's over {config.epoch[0]:,} steps)", *step, FIT_STEP_ERROR,
        note="solved for: the model's expected step is set to the trace's",
    )  # fmt: skip
    idle, fitted, spread_check = _compare(scan, config)  # before the epoch takes the dataset's length
    held_out = _held_out(trace, scope, device, given, peers)
    check = _predicted_at(config, pending) if pending is not None else None
    unchecked = "" if held_out else (
        f"only {scope.steady_steps} steady step: nothing is held out to check the fit on (capture 3 or more)"
    )  # fmt: skip
    config_written = config if dataset is None else _with_dataset(config, dataset, path)
    engine = serving_engine(trace)
    job = {"framework": scope.framework, "kind": job_kind(trace), **({"engine": engine} if engine else {}),
           **({"profiler": EARLY_PYTORCH} if early_profiler(trace) else {})}  # fmt: skip
    notes = [*([chosen] if chosen else []), *_notes(scope, config, frozenset(given), job), batch]
    return Calibration(
        path, config_written, step, idle, check, [took, *fitted], [*held_out, spread_check],
        spread(scope.steps.steady_durations), scope.steady_steps, unchecked, notes, batch_from, job,
        settings_absent(scope.family, job["framework"], job["kind"]),
    )  # fmt: skip


def _batch(trace: Trace, scope: TraceAnalysis, given: dict[str, Any]) -> tuple[str, str]:
    """Where the fit's batch size comes from (``given``, ``trace`` or ``unknown``), in a note and a word: one given
    stands; else the trace's (:func:`~perftool.analysis.batch.batch_size`), set in ``given``; else the fit runs one
    sample a step, and its throughput is steps per second."""
    if "batch_size" in given.get("knobs", {}):
        return f"batch size {given['knobs']['batch_size']}, as given", "given"
    found = batch_size(trace, scope.lo, scope.hi)
    if found is None:
        return (
            "the trace records no input shapes that give the batch size (a convolution's, attention's or embedding's "
            "first dimension): the fit takes one sample a step, so its throughput is steps per second; give "
            "--set knobs.batch_size=N for samples"
        ), "unknown"
    given.setdefault("knobs", {})["batch_size"] = found.samples
    return f"batch size {found.samples}, read from the trace ({found.source}); --set knobs.batch_size=N if not", "trace"


def _notes(
    scope: TraceAnalysis, config: EmulatorConfig, given_sections: frozenset[str], job: dict[str, str]
) -> list[str]:
    """What the fit could not take from the trace, what a what-if on it needs given (``given_sections``: the config
    sections the user gave fields of), and what the job (``job``) has no setting for."""
    reduces = any(c.name == "all_reduce" for c in scope.metrics.communication.collectives)
    contexts = [job["kind"], job["framework"]] if reduces or job["kind"] != "inference" else [job["framework"]]
    notes = [JOB_NOTES[context] for context in [*contexts, job.get("profiler")] if context in JOB_NOTES]
    if config.device_model == GENERIC:
        notes.append(
            f"the trace's device ({scope.metrics.device}) is not one perftool knows by model: the fit uses a generic "
            f"{config.device.upper()} (the reference device's memory and links, its speed fitted to the trace); "
            "name the model with --set device_model=KEY where memory or links matter to a what-if"
        )
    if "loop_size" in config.profile.knobs and not offers_loop_size(scope.family, scope.framework):
        notes.append(
            f"a {scope.framework} job on this device dispatches every step from Python: it has no loop size (steps "
            "per device call), so the fit keeps 1 and the tune space written leaves it out"
        )
    workload = config.workload
    if workload.input_workers and not workload.preprocess_us_per_sample and scope.metrics["input.time_us"] > 0:
        notes.append(
            "the trace does not show how long a batch takes to load (the input workers keep up): a what-if with "
            "fewer workers needs workload.preprocess_us_per_sample (time the data loader alone)"
        )
    if workload.preprocess_us_per_sample and "host" not in given_sections:
        notes.append(
            f"the trace does not say how many CPU cores the host gives this job: the fit takes host.cpus "
            f"{config.host.cpus} (the default), shared by the training loop and its input workers, so a what-if "
            "with more workers slows the loop only once they need more cores than that; --set host.cpus=N for the "
            "cores it has (os.sched_getaffinity in the job)"
        )
    return notes


# What a fit of such a job leaves out, and how tune names what it keeps (an inference job's, where it all-reduces)
JOB_NOTES = {
    "serving": "a serving engine's forward: the tune space written leaves out the input pipeline's settings (prefetch "
    "depth, pinned memory, input workers: the engine schedules requests and copies their inputs itself) and "
    "gradients' (it trains nothing: its all-reduces are fitted as device work); device graphs are the engine's",
    "inference": "a forward with no backward: it trains nothing, so its all-reduces are fitted as device work "
    "(tensor parallelism's, not gradients')",
    "jax": "a JAX job: device graphs are the whole step under one jax.jit (XLA replays its kernels as command "
    "buffers), and the tune space written leaves out pinned memory (jax.device_put stages its copies itself)",
    EARLY_PYTORCH: f"{EARLY_CAPTURE}: device graphs need torch.cuda.graph (1.10 or later) or torch.compile (2.0 or "
    "later), so a what-if that turns them on may need the job's PyTorch upgraded too",
}


class CalibrationFailed(PerftoolError):
    """The fit failed a check on what it was not fitted to: exit code 1."""

    exit_code = 1


def _held_out(
    trace: Trace, scope: TraceAnalysis, device: str | None, given: dict[str, Any], peers: list[float]
) -> list[Check]:
    """The fit made to each half of the steady steps, predicting the other half's mean step and device busy share:
    the worse of the two directions for each (none with fewer than two steady steps). The step passes within
    :data:`STEP_ERROR`, the busy share within :data:`IDLE_ERROR_POINTS`, or each within what the two halves' own
    spread lets their means differ by. A trace that compiles in its steady state compiles in one half only, which
    idles the device for it: its halves are compared on their step alone."""
    steps, first, count = scope.steps, scope.steps.warmup, scope.steady_steps
    if count < 2:
        return []
    cut = first + count // 2
    halves = [(slice(0, cut), first), (slice(cut, steps.count), 0)]
    parts = [_part(trace, scope, rows, warmup) for rows, warmup in halves]
    worst: dict[str, Check] = {}
    for fitted, other in ((parts[0], parts[1]), (parts[1], parts[0])):
        config = fit(trace, fitted, device, given, peers)
        figures = evaluate(config)
        durations = [part.steps.steady_durations for part in (fitted, other)]
        busy = [_busy_per_step(part) for part in (fitted, other)]
        numbers = other.steps.numbers()[other.steps.warmup :]
        which = f"of steps {numbers[0]}–{numbers[-1]}" if numbers.size > 1 else f"of step {numbers[0]}"
        note = f"held out: fitted to the other {plural(fitted.steady_steps, 'steady step')}"
        actual = float(durations[1].mean())
        checks: tuple[Check, ...] = (
            Check(f"mean step {which}", actual, float(figures["step_time_mean_us"][0]),
                  max(STEP_ERROR, _noise(durations) / actual), note=note),
            Check(f"device busy {which}", other.metrics["device.busy_fraction"],
                  float(figures["device_busy_fraction"][0]), max(IDLE_ERROR_POINTS, 100 * _noise(busy)), points=True,
                  note=note),
        )  # fmt: skip
        if scope.metrics["recompilations.count"] > 0:  # a compile in one half only: its idle is no half's figure
            checks = checks[:1]
        for held in checks:
            kind = held.figure.split(" of ")[0]
            worst[kind] = held if kind not in worst or held.error > worst[kind].error else worst[kind]
    return list(worst.values())


def _noise(halves: list[np.ndarray]) -> float:
    """How far two halves' means may differ from noise alone: :data:`NOISE_SIGMAS` standard errors of the
    difference, in the values' unit."""
    return NOISE_SIGMAS * math.sqrt(sum(float(np.var(values)) / values.size for values in halves))


def _busy_per_step(part: TraceAnalysis) -> np.ndarray:
    """The share of each steady step the device is busy."""
    steps = part.steps
    starts, ends = steps.start[steps.warmup :], steps.end[steps.warmup :]
    return intervals.totals_in(part.metrics.busy["device"], starts, ends) / (ends - starts)


def _part(trace: Trace, scope: TraceAnalysis, rows: slice, warmup: int) -> TraceAnalysis:
    """The trace seen through some of its steps (``rows``, the first ``warmup`` of them warm-up)."""
    steps = scope.steps
    number = steps.number[rows] if steps.number is not None else np.arange(steps.count)[rows]
    modes = steps.modes[rows] if steps.modes is not None else None
    part = replace(
        steps, start=steps.start[rows], end=steps.end[rows], warmup=warmup, truncated=0, number=number, modes=modes
    )
    return TraceAnalysis(trace, part, compute_metrics(trace, part), scope.family)


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
    return replace(check, step_time_us=(check.step_time_us[0], expected_step(moved)))


def _with_dataset(config: EmulatorConfig, samples: Any, path: str) -> EmulatorConfig:
    """``config`` with epochs of ``samples`` samples: its steps and short last batch follow from the batch size."""
    document = config.model_dump(mode="json", exclude_none=True)
    document["workload"] = {
        **{k: v for k, v in document["workload"].items() if k not in ("steps", "last_batch_samples")},
        "dataset_samples": samples,
    }
    return validate_config(document, f"calibration of {path}")


def pacing_rank(
    directory: str, cluster: Cluster = LOCAL, read: ReadOptions = DEFAULT_READ
) -> tuple[str, list[float], str]:
    """The trace of the rank that sets a job's pace (the one the others wait for, else the slowest step), each other
    rank's device compute per step relative to it, and why it was chosen, in a sentence."""
    report = scan_job([directory], [], read, cluster.scheduler, cluster.workers)
    if not report.traces:
        raise PerftoolError(f"{directory}: no rank trace could be read to calibrate")
    if report.job is None:
        raise PerftoolError(f"{directory}: {why_no_job(report)}; give calibrate one trace")
    slowest = report.job.slowest_rank
    waited_for = next((t for t in report.traces if t.rank == slowest), None)
    pacer = waited_for or max(report.traces, key=lambda t: t.step_time_us or 0.0)
    own = _compute_per_step(pacer)
    relative = [_compute_per_step(t) / own for t in report.traces if t is not pacer]
    why = (
        "the one the others wait for at its collectives: a fit to another would take that wait as its own time"
        if waited_for is not None and report.job.held_back_us
        else "whose step is the longest (no rank holds the others back)"
    )
    return (
        pacer.path,
        [r for r in relative if math.isfinite(r) and r > 0],
        f"fitted to rank {pacer.rank} of the job's {len(report.traces)}, {why}",
    )


def _compute_per_step(scan: TraceFindings) -> float:
    """Device compute per steady step, µs (NaN where the rank's scan does not say)."""
    fraction = scan.metrics.get("device.compute_fraction")
    return fraction * scan.window_us / scan.steps if fraction and scan.steps else math.nan


def _compare(scan: TraceFindings, config: EmulatorConfig) -> tuple[dict[str, tuple[float, float]], list[Check], Check]:
    """The trace's idle shares against those of the fitted config's emulated trace (its long run cut to
    :data:`EMULATED_OPS`), scanned like the trace: idle by part and work by category (what the fit took), and the
    check of the steps' spread (what it did not)."""
    emulated = emulate(_written_run(config, scan.steps))
    handle, path = tempfile.mkstemp(suffix=".json")
    os.close(handle)
    try:
        write_trace(emulated, path)
        model, _ = analyse_trace(load_trace(path), [])
    finally:
        os.unlink(path)
    traced, modelled = _by_part(scan.idle), _by_part(model.idle)
    idle = {part: (traced.get(part, 0.0), modelled.get(part, 0.0)) for part in IDLE_PARTS}
    significant = {part: pair for part, pair in idle.items() if max(pair) >= 0.0005}
    fitted = [
        Check(f"device idle: {part}", t, m, IDLE_ERROR_POINTS, points=True, note="share of the steady state")
        for part, (t, m) in significant.items()
    ]
    for category, (t, m) in _work(scan, model, config.replicas is not None).items():
        if max(t, m) >= 0.0005:
            fitted.append(Check(f"device busy: {category}", t, m, IDLE_ERROR_POINTS, points=True, note="share"))
    spread_check = Check(
        "step-to-step spread", spread(scan.step_durations_us), spread(model.step_durations_us), SPREAD_POINTS,
        points=True, note=f"robust coefficient of variation of the steady steps; the model's over {model.steps:,}",
    )  # fmt: skip
    return significant, fitted, spread_check


def _written_run(config: EmulatorConfig, trace_steps: int) -> EmulatorConfig:
    """The fit as its trace is written to be scanned: its long run (:data:`~perftool.predict.fitting.FIT_RUN_STEPS`)
    cut to about :data:`EMULATED_OPS` ops, a whole number of loops and no fewer steps than the trace's; a fit of the
    trace's own length (a compile in its steady state, its share the trace's) as it is."""
    steps, last = config.epoch
    if last or steps < FIT_RUN_STEPS:
        return config
    loop = config.knobs.loop_size
    cut = loop * math.ceil(max(EMULATED_OPS // config.workload.ops_per_step, trace_steps) / loop)
    return config.model_copy(update={"workload": config.workload.model_copy(update={"steps": min(cut, steps)})})


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
