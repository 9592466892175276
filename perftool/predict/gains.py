"""The gain each finding's fix is printed with: the fix re-run on the run the trace records (an emulator trace), or
on an emulator config fitted to the trace (any other trace), else a bound from what the trace measured.

A fix that names knob values is printed only where the emulator shows it fits the device and shortens the step: of
the detection's fixes the one that helps most wins, and where none does, the finding keeps its own with a bound.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from perftool.analysis.launches import graphs_in_use
from perftool.common.errors import PerftoolError
from perftool.common.threads import computed_once
from perftool.dialects.vocabulary import GRAPH_CAPTURE
from perftool.emulator.config import EmulatorConfig, training_change
from perftool.predict.fitting import fit, read_settings, readback_time, reproduces, spread
from perftool.predict.interval import UNCHECKED_FIT_ERROR, mean_error
from perftool.predict.sweep import best_settings
from perftool.rules import prediction
from perftool.rules.detectors import Detection, Scope
from perftool.rules.detectors.base import Judged, per_steady_step
from perftool.rules.detectors.exposed_transfers import serial_copies
from perftool.rules.engine import Detected
from perftool.rules.findings import Finding, Gain
from perftool.rules.known_run import KnownRun
from perftool.rules.model import FIX_CONTEXTS

MIN_STEADY = 3  # steady steps a trace needs before a sweep's setting is named (as a finding needs to pass info)
BEYOND = 1.02  # a setting the sweep finds is named where it wins this much more than every printed fix
FIT_MAX_STEPS = 512  # a foreign trace whose steady state compiles is fitted at its own length, up to this many steps
# The emulator runs one device: a trace whose device waits this share of its window for other devices its host drives
# (the idle cause other_device) is not fitted, as no setting of one device reproduces their turns
OTHER_DEVICES_SHARE = 0.02


@dataclass
class TraceFit:
    """An emulator config fitted to one analysed trace (its step capped for speed), made when a fix first asks for it
    (once, whichever of the rules' threads asks first; the others wait for it): None when the trace cannot be fitted
    or the fit does not reproduce its step time within the calibration's error."""

    scope: Scope

    @computed_once
    def _fit(self) -> tuple[EmulatorConfig, KnownRun] | None:
        return _fit_run(self.scope)

    @property
    def run(self) -> KnownRun | None:
        """How the fit runs, for what-ifs on it: fitted now if no fix asked for it before."""
        return self._fit[1] if self._fit is not None else None

    @property
    def config(self) -> EmulatorConfig | None:
        """The fitted config: fitted now if no fix asked for it before."""
        return self._fit[0] if self._fit is not None else None

    @property
    def made(self) -> KnownRun | None:
        """The fit where a fix has asked for it already; None otherwise (none is made for this)."""
        made = self.__dict__.get("_fit")
        return made[1] if made is not None else None


def _fit_run(scope: Scope) -> tuple[EmulatorConfig, KnownRun] | None:
    """The fitted config and how it runs, or None where the trace cannot be fitted."""
    config = _fitted(scope)
    if config is None:
        return None
    judges = read_settings(scope.trace, config)
    interval = mean_error(UNCHECKED_FIT_ERROR, spread(scope.steps.steady_durations), scope.steady_steps)
    return config, KnownRun.of(
        config, "emulator fitted to this trace", recorded=False, judges=judges, interval=interval
    )


def _fitted(scope: Scope) -> EmulatorConfig | None:
    if (
        not scope.steady_steps
        or scope.idle is None
        or scope.steps.count > FIT_MAX_STEPS
        and scope.metrics["recompilations.count"]
    ):
        return None  # a compile mid-run is fitted at the trace's own length, too long to emulate here
    if scope.idle.time("other_device") >= OTHER_DEVICES_SHARE * scope.window:
        return None
    try:
        config = fit(scope.trace, scope)
    except PerftoolError:
        return None
    if not reproduces(config, scope):
        return None
    if scope.job_steps is not None:  # the job repeats what the capture shows, each of its compiles paid once
        epochs = max(round(scope.job_steps / config.epoch[0]), 1)
        config = config.model_copy(update={"workload": config.workload.model_copy(update={"epochs": epochs})})
    return config


def fix_that_holds(scope: Judged, detected: Detected, fitted: TraceFit | None) -> tuple[Detection, Gain, str | None]:
    """The detection whose fix helps most, its gain, and why none helps (None when one does).

    Every fix that sets knobs (the detection's own and its alternatives) is emulated on the run the trace records
    or, for any other trace, on ``fitted`` (None: a job's scope, which has no fit): one that does not fit the device
    or does not shorten the step is never printed as the fix (see :func:`emulated`). A foreign trace's finding is
    detected again with the fit's knobs, so its fix can name values; where the fit cannot judge it, the finding keeps
    its own fix with an upper bound.
    """
    detection = detected.detection
    most = max(detection.bound_us or 0.0, detection.lost_us)
    bound = prediction.upper_bound(per_steady_step(scope, most), most / scope.window, most > detection.lost_us)
    if not detected.sets_knobs:
        return detection, bound, None  # a fix of no knob the emulator has: nothing to predict, no fit to run for it
    if scope.run is not None:
        return emulated(scope, detection, bound) if detection.changes else (detection, bound, None)
    if not isinstance(scope, Scope) or fitted is None or (run := fitted.run) is None:
        return detection, bound, None
    on_fit = dataclasses.replace(scope, run=run)  # the same trace and its analysis, with the fit as its run
    again = detected.redetect(on_fit)
    read = run.judges or frozenset()
    candidate = again if again is not None and _judged_by_fit(again, read) else detection
    if not candidate.changes or not _judged_by_fit(candidate, read):
        return detection, bound, None
    chosen, gain, unproven = emulated(on_fit, candidate, bound)
    idle = scope.idle.total / scope.window if scope.idle is not None else 0.0
    if unproven or _past(gain, max(bound.up_to_share or 0.0, idle)):
        return detection, bound, None
    if detection.once_per_job:  # a cost paid once: what its fix wins back depends on how long the job runs
        if scope.job_steps is None:
            return chosen, prediction.over_capture(gain, run.describe(chosen.changes), scope.steps.count), None
        return chosen, run.over_job(chosen.changes) or gain, None
    return chosen, gain, None


def together_and_beyond(scope: Scope, fitted: TraceFit, findings: list[Finding]) -> tuple[Gain | None, Gain | None]:
    """Every predicted fix at once (:func:`together`), and a setting the sweep of the fit finds beyond it and every
    printed fix (:func:`beyond`). Where the sweep runs, the joint what-if is simulated in its first run: one run
    fewer."""
    joint = _joint_changes(findings)
    found = swept_settings(scope, fitted, findings, [joint] if joint else [])
    at_once = together(scope, fitted, findings)
    return at_once, beyond(scope, findings, found, at_once)


def together(scope: Scope, fitted: TraceFit, findings: list[Finding]) -> Gain | None:
    """Every fix whose gain was predicted, applied at once, where there are two or more: their gains overlap (the
    same idle time, the same step), so one what-if says what they are worth together. Of two fixes setting one
    knob to different values, the more severe finding's stands."""
    run = scope.run or fitted.made
    joint = _joint_changes(findings)
    return run.what_if(joint) if run is not None and joint is not None else None


def _joint_changes(findings: list[Finding]) -> dict[str, Any] | None:
    """The changes of every predicted fix (:func:`together`), merged, the more severe finding's value first; None
    where fewer than two fixes were predicted."""
    fixes = [f.fix.changes for f in findings if f.gain.kind == "predicted" and f.fix.changes]
    if len(fixes) < 2:
        return None
    merged: dict[str, Any] = {}
    for changes in fixes:
        merged |= {key: value for key, value in changes.items() if key not in merged}
    return merged


def swept_settings(
    scope: Scope, fitted: TraceFit, findings: list[Finding], ahead: Sequence[dict[str, Any]] = ()
) -> tuple[dict[str, Any], Gain] | None:
    """What a sweep of the fit's settings (:func:`~perftool.predict.sweep.best_settings`) finds best, the what-ifs
    of ``ahead`` simulated in its first run; None for a trace whose fit no fix asked for, or whose job the sweep's
    settings are not (:func:`_sweep_holds`). Only settings the trace has evidence for are swept (other values,
    together): those the findings' own fixes set, and pinned memory where the input copies or the read-back go
    through pageable memory."""
    run = fitted.made
    config = fitted.config if run is not None else None
    if config is None or run is None or scope.run is not None or not _sweep_holds(scope, findings):
        return None
    evidenced = {key for f in findings for key in f.fix.changes}  # settings a finding's evidence names
    if not config.knobs.pin_memory:  # the fit read input copies from pageable memory in the trace
        evidenced.add("pin_memory")
    if not config.knobs.pin_readback:  # ... or results read back into pageable memory
        evidenced.add("pin_readback")
    return best_settings(config, run, frozenset(evidenced), ahead)


def beyond(
    scope: Scope, findings: list[Finding], found: tuple[dict[str, Any], Gain] | None, together: Gain | None
) -> Gain | None:
    """The setting the sweep ``found`` (:func:`swept_settings`) where it wins more than every fix printed and all of
    them together (by :data:`BEYOND`): that setting and its gain, and how to sweep every combination; None
    otherwise. A setting without evidence (device graphs where the host's time is neither launching nor
    dispatching ops one by one) is never named, nor a gain past what the trace shows could be won: its idle time,
    with pinned inputs the input copies the device does nothing beside, with a pinned read-back the read-back's
    copies."""
    printed = [f.gain.speedup or 0.0 for f in findings if f.gain.kind == "predicted"]
    if together is not None and together.speedup:
        printed.append(together.speedup)
    if found is None or not found[1].speedup or found[1].speedup <= max(printed, default=1.0) * BEYOND:
        return None
    changes, gain = found
    idle = scope.idle.total / scope.window if scope.idle is not None else 0.0
    copies = (  # the device's time pinning frees: input copies overlapped with compute, read-backs made faster
        (serial_copies(scope) if "pin_memory" in changes else 0.0)
        + (readback_time(scope.trace, scope) if "pin_readback" in changes else 0.0)
    ) / scope.window
    graphs_made = graphs_in_use(scope.trace, scope.in_window) or scope.trace.name_matches(GRAPH_CAPTURE).any()
    if _past(gain, idle + copies) or ("device_graphs" in changes and graphs_made):
        return None  # more than the trace's idle (and copies in the way) could give back, or graphs already made
    how = f"perftool calibrate {scope.trace.source} -o fit.yaml, then perftool tune fit.yaml, sweeps every combination"
    return gain.model_copy(update={"text": f"{gain.text}; {how}"})


def _sweep_holds(scope: Scope, findings: list[Finding]) -> bool:
    """Whether a sweep's setting may be named: the settings it tries (device graphs, pinned memory, DataLoader
    workers, and in training gradient buckets) are a PyTorch job's, so not for JAX, TensorFlow (off the families
    whose fixes are its own) or a serving engine, which schedules and copies its batches itself; and only where the
    trace has the steady steps its findings are judged on (none held at info for lack of them)."""
    other_job = set(scope.contexts) & (set(FIX_CONTEXTS) - {"inference"})
    return not other_job and not any(f.capped for f in findings) and scope.steady_steps >= MIN_STEADY


def _past(gain: Gain, measured: float) -> bool:
    """Whether a fit's prediction wins back more than the trace shows could be won: the time the finding measured
    lost, or all the device's idle time. The fit then models the trace in a way the measurement contradicts, and
    the measured bound is what holds."""
    won_back = 1 - 1 / gain.speedup if gain.speedup else 0.0
    return won_back > measured * (1 + prediction.BOUND_SLACK)


def _judged_by_fit(detection: Detection, read: frozenset[str]) -> bool:
    """Whether a fit predicts what the detection's fixes change: each is a setting the fit ``read`` from the trace."""
    return all(key in read for option in (detection, *detection.alternatives) for key in option.changes)


def emulated(scope: Judged, detection: Detection, bound: Gain) -> tuple[Detection, Gain, str | None]:
    """Of the detection's fixes emulated on ``scope.run``, the one that helps most: one that leaves the training as
    it is wins over one that changes it (the batch, dropped samples), then the larger speed-up. When none helps,
    the detection's own is kept with ``bound``, and the reason says why."""
    assert scope.run is not None
    helping: list[tuple[bool, float, int, Detection, Gain]] = []
    tried = []
    candidates = (detection, *detection.alternatives)
    scope.run.ahead([candidate.changes for candidate in candidates])
    for order, candidate in enumerate(candidates):
        gain = scope.run.what_if(candidate.changes)
        speedup = gain.speedup if gain is not None else None
        if gain is not None and speedup is not None and speedup >= prediction.HELPS:
            keeps_training = not any(training_change(k.rpartition(".")[2], v) for k, v in candidate.changes.items())
            helping.append((keeps_training, speedup, -order, candidate, gain))
        else:
            tried.append(gain.text if gain is not None else f"{candidate.changes}: not a valid configuration")
    if helping:  # a fix that leaves the training as it is comes first, then the larger speed-up
        *_, chosen, gain = max(helping, key=lambda entry: entry[:3])
        return chosen, gain, None
    return detection, bound, "no fix with knob values helps in the emulator: " + ("; ".join(tried))
