"""Calibration: an emulator config fitted to a trace (:mod:`perftool.fitting`), and how closely emulating it
reproduces the trace: the fit is emulated, its trace scanned like the original, and the two compared on the
steady mean step time (error in %) and the device's idle time by part (error in points of the window).
"""

from __future__ import annotations

import copy
import math
import os
import tempfile
from dataclasses import dataclass, replace
from typing import Any

from perftool.emulator.config import EmulatorConfig, validate_config
from perftool.emulator.evaluate import evaluate
from perftool.emulator.run import run as emulate
from perftool.emulator.trace_writer import write_trace
from perftool.errors import PerftoolError
from perftool.fitting import HOST_CAUSES, INPUT_CAUSES, fit, work_per_step
from perftool.job.cluster import LOCAL, Cluster
from perftool.job.scan import scan_job
from perftool.rules.detectors.base import Scope
from perftool.rules.engine import ReadOptions, analyse_trace
from perftool.rules.findings import TraceFindings
from perftool.trace.model import Trace
from perftool.traces import load_trace
from perftool.tune.spec import default_space

STEP_ERROR = 0.05  # the fit is good when emulating it reproduces the steady step time this closely ...
BATCH_ERROR = 0.10  # ... and predicts a capture at another batch size this closely
IDLE_ERROR_POINTS = 3.0  # ... and each cause of device idle within this many points of the window
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
class Calibration:
    """The fitted config, and the trace's figures against the emulated fit's."""

    source: str
    config: EmulatorConfig
    step_time_us: tuple[float, float]  # (trace, model), steady mean
    idle: dict[str, tuple[float, float]]  # cause -> (trace, model), share of the window
    at_batch: BatchCheck | None = None

    @property
    def step_error(self) -> float:
        trace, model = self.step_time_us
        return abs(model - trace) / trace if trace > 0 else math.inf

    @property
    def idle_error_points(self) -> float:
        return max((abs(model - trace) * 100 for trace, model in self.idle.values()), default=0.0)

    @property
    def warnings(self) -> list[str]:
        """Why the fit is not good enough to predict from, if it is not."""
        found = []
        if self.step_error > STEP_ERROR:
            found.append(f"the fit's step time is {self.step_error:.1%} off the trace's (more than {STEP_ERROR:.0%})")
        if self.idle_error_points > IDLE_ERROR_POINTS:
            worst = max(self.idle, key=lambda part: abs(self.idle[part][1] - self.idle[part][0]))
            found.append(
                f"device idle for {worst} is {self.idle_error_points:.1f} points off the trace's "
                f"(more than {IDLE_ERROR_POINTS:.0f})"
            )
        if self.at_batch is not None and self.at_batch.error > BATCH_ERROR:
            found.append(
                f"the step at batch {self.at_batch.batch} is predicted {self.at_batch.error:.1%} off that capture's "
                f"(more than {BATCH_ERROR:.0%})"
            )
        return found

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
            "warnings": self.warnings,
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
) -> Calibration:
    """Fit an emulator config to the trace at ``path`` and check it by emulating it. For a job's directory, the
    rank fitted is the one that sets the job's pace: the slowest in the job view (its ranks analysed on
    ``cluster``). ``at_batch`` (batch size, trace): a capture of the same job at another batch size, from which
    and the trace how efficiency rises with the batch is fitted; the fit then predicts that capture's step."""
    peers: list[float] = []
    if os.path.isdir(path):
        path, peers = pacing_rank(path, cluster)
    trace = load_trace(path)
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
    pending = _efficiency_from(trace, scope, given, device, at_batch) if at_batch is not None else None
    config = fit(trace, scope, device, given, peers)
    comparison = _compare(scan, config)  # on the steps the trace shows, before the epoch takes the dataset's length
    check = _predicted_at(config, pending) if pending is not None else None
    return Calibration(path, config if dataset is None else _with_dataset(config, dataset, path), *comparison, check)


def _efficiency_from(
    trace: Trace, scope: Scope, given: dict[str, Any], device: str | None, at_batch: tuple[int, str]
) -> BatchCheck:
    """Set ``workload.half_efficiency_batch`` in ``given`` from the device work per step at the trace's batch and at
    ``at_batch``'s (a step of b samples works as long as b + h would at full efficiency). Returns the check of the
    other capture, its prediction still to make."""
    batch, other_path = at_batch
    own = given.get("knobs", {}).get("batch_size")
    if not isinstance(own, int) or isinstance(own, bool) or own == batch:
        raise PerftoolError(
            f"--at-batch {batch}={other_path}: give the trace's own batch size, another than {batch}, with "
            "--set batch_size=N"
        )
    other_trace = load_trace(other_path)
    other_scan, other_scope = analyse_trace(other_trace, [])
    if not other_scope.steady_steps:
        raise PerftoolError(f"{other_path}: no steady steps to compare a step with")
    work, other_work = work_per_step(trace, scope, device), work_per_step(other_trace, other_scope, device)
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
    moved: EmulatorConfig = validate_config(document, f"--at-batch {check.batch}={check.source}")
    return replace(check, step_time_us=(check.step_time_us[0], float(evaluate(moved)["step_time_mean_us"][0])))


def _with_dataset(config: EmulatorConfig, samples: Any, path: str) -> EmulatorConfig:
    """``config`` with epochs of ``samples`` samples: its steps and short last batch follow from the batch size."""
    document = config.model_dump(mode="json", exclude_none=True)
    document["workload"] = {
        **{k: v for k, v in document["workload"].items() if k not in ("steps", "last_batch_samples")},
        "dataset_samples": samples,
    }
    return validate_config(document, f"calibration of {path}")


def pacing_rank(directory: str, cluster: Cluster = LOCAL) -> tuple[str, list[float]]:
    """The trace of the rank that sets a job's pace (the one the others wait for, else the slowest step), and each
    other rank's device compute per step relative to it."""
    report = scan_job([directory], [], ReadOptions(), cluster.scheduler, cluster.workers)
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


def _compare(scan: TraceFindings, config: EmulatorConfig) -> tuple[tuple[float, float], dict[str, tuple[float, float]]]:
    """The trace's steady mean step and idle shares against those of the fitted config's emulated trace."""
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
    return (scan.step_time_us or math.nan, model.step_time_us or math.nan), significant


def _by_part(idle: dict[str, float]) -> dict[str, float]:
    """Idle shares per part the emulator models (it cannot tell a launch gap from other host work)."""
    found: dict[str, float] = {}
    for cause, share in idle.items():
        part = next((name for name, causes in IDLE_PARTS.items() if cause in causes), "host")
        found[part] = found.get(part, 0.0) + share
    return found
