"""The rule engine: run each rule's detector on a trace and turn detections into findings."""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from perftool.analysis.family import device_family
from perftool.analysis.idle import CAUSES, attribute_idle
from perftool.analysis.metrics import compute_metrics
from perftool.analysis.steps import detect_steps
from perftool.emulator.config import EmulatorConfig, training_change, validate_config
from perftool.errors import PerftoolError, TraceError
from perftool.fitting import fit, read_settings, reproduces
from perftool.rules import prediction
from perftool.rules.detectors import DETECTORS, Detection, Scope
from perftool.rules.detectors.base import Judged
from perftool.rules.findings import Finding, Fix, Gain, Impact, ScanReport, TraceFindings, UnreadTrace
from perftool.rules.known_run import KnownRun
from perftool.rules.model import Rule, Severity, fill
from perftool.trace.loader import Decoders
from perftool.trace.model import Trace
from perftool.trace_reader import load_trace
from perftool.version import __version__

FIT_MAX_STEPS = 512  # a foreign trace's fit runs its own length up to this many steps: gains are per steady step
RECURRING_OCCURRENCES = 10  # evidence seen this many separate times recurs, however few steps the trace marks
RECURRING_SHARE = 0.5  # so does evidence filling this share of the window after start-up


@dataclass(frozen=True)
class Cap:
    """Why a trace's findings are held at info (``reason``), and whether one whose evidence recurs may stand at
    warning all the same (``recurring``)."""

    reason: str
    recurring: bool = False


@dataclass(frozen=True)
class ReadOptions:
    """How traces are read and advised on: the device family and dialect (None: detected), the occurrences
    listed per finding, the most JSON a trace may hold (None: the default limit), the steps the whole job
    runs where a trace does not record it (None: unknown), and the memory budget past which a trace's columns are
    kept on disk (None: the memory available)."""

    family: str | None = None
    dialect: str | None = None
    evidence: int = 5
    max_bytes: int | None = None
    job_steps: int | None = None
    memory: int | None = None


DEFAULT_READ = ReadOptions()


def scan_files(
    paths: list[str], rules: list[Rule], read: ReadOptions = DEFAULT_READ, decoders: Decoders | None = None
) -> ScanReport:
    """Load and scan each trace in turn (one in memory at a time), decoded by ``decoders`` where given (a
    cluster's workers).

    A trace that cannot be read is listed in the report's ``unread`` with the reason; the others are
    scanned all the same. The report remembers the rules that ran (SARIF describes them).
    """
    traces, unread = [], []
    for path in paths:
        try:
            trace = load_trace(
                path, dialect=read.dialect, max_bytes=read.max_bytes, memory=read.memory, decoders=decoders
            )
        except TraceError as exc:
            unread.append(UnreadTrace(path=exc.path, problem=exc.problem))
            continue
        traces.append(scan_trace(trace, rules, read))
    report = ScanReport(tool={"name": "perftool", "version": __version__}, traces=traces, unread=unread)
    report.rules_run = rules
    return report


def scan_trace(trace: Trace, rules: list[Rule], read: ReadOptions = DEFAULT_READ) -> TraceFindings:
    """Findings of ``rules`` on one loaded trace, the largest impact first (``read``: the family advised on, the
    occurrences listed, the job's length)."""
    return analyse_trace(trace, rules, read)[0]


def analyse_trace(trace: Trace, rules: list[Rule], read: ReadOptions = DEFAULT_READ) -> tuple[TraceFindings, Scope]:
    """The findings of :func:`scan_trace`, and the scope they came from (steps, metrics, idle attribution).
    The device's idle time is attributed in a helper thread while the metrics are computed: numpy frees the
    GIL, so the two take two cores where there are two."""
    steps = detect_steps(trace)
    with ThreadPoolExecutor(1) as helper:
        attributed = helper.submit(attribute_idle, trace, *steps.window) if rules else None
        metrics = compute_metrics(trace, steps)
        emulator = _emulator_config(trace)
        run = KnownRun.of(emulator) if emulator is not None else None
        scope = Scope(trace, steps, metrics, read.family or device_family(trace), run, read.evidence, read.job_steps)
        if attributed is not None:
            scope.idle = attributed.result()
    capping = [c for c in metrics.caveats if c.caps]
    cap = Cap("; ".join(c.short for c in capping), all(c.recurring for c in capping)) if capping else None
    trace_rules = [rule for rule in rules if DETECTORS[rule.detector].level == "trace"]
    findings = [finding for rule in trace_rules if (finding := finding_of(scope, rule, cap)) is not None]
    findings.sort(key=lambda f: (-f.severity.rank, -f.impact.share, f.rule_id))
    idle = scope.idle
    window = scope.window
    found = TraceFindings(
        path=trace.source,
        dialect=trace.dialect,
        family=scope.family,
        device=metrics.device,
        world_size=distributed(trace, "world_size"),
        rank=distributed(trace, "rank", least=0),
        time_unit=trace.display_time_unit,
        step_clock=metrics.step_clock,
        caveats=[c.text for c in metrics.caveats],
        window_us=window,
        steps=scope.steady_steps,
        step_time_us=_plain(metrics["step_time_us.mean"]),
        idle={cause: idle.time(cause) / window for cause in CAUSES} if idle and window > 0 else {},
        findings=findings,
        metrics={name: _plain(value) for name, value in metrics.values.items()},
        step_durations_us=metrics.step_times_us,
        warmup_durations_us=(steps.end - steps.start)[: steps.warmup].tolist(),
        step_numbers=steps.numbers().tolist(),
        emulator=emulator.model_dump(mode="json") if emulator is not None else None,
        together=_together(scope, findings),
    )
    return found, scope


def _together(scope: Scope, findings: list[Finding]) -> Gain | None:
    """Every fix whose gain was predicted, applied at once, where there are two or more: their gains overlap (the
    same idle time, the same step), so one what-if says what they are worth together. Of two fixes setting one
    knob to different values, the more severe finding's stands."""
    run = scope.run or scope.fitted
    fixes = [f.fix.changes for f in findings if f.gain.kind == "predicted" and f.fix.changes]
    if run is None or len(fixes) < 2:
        return None
    merged: dict[str, Any] = {}
    for changes in fixes:
        merged |= {key: value for key, value in changes.items() if key not in merged}
    return run.what_if(merged)


def finding_of(scope: Judged, rule: Rule, cap: Cap | None) -> Finding | None:
    """The rule's finding on the trace, if it reaches a threshold; held at info with the reason when ``cap`` is set
    (at warning where the cap allows and its evidence recurs)."""
    if scope.window <= 0:
        return None
    params = {**DETECTORS[rule.detector].params, **rule.params}
    detection = DETECTORS[rule.detector].detect(scope, params)
    if detection is None:
        return None
    share = detection.lost_us / scope.window
    if rule.thresholds.severity(share, rule.severity) is None:
        return None
    per_step = scope.per_step(detection.lost_us)
    detector = DETECTORS[rule.detector]
    detection, gain, unproven = _fix_that_holds(
        scope, detection, lambda again: detector.detect(again, params), detector.sets_knobs
    )
    severity = graded(rule, share, gain, detection.once_per_job)
    capped = unproven
    if cap is not None and severity != Severity.INFO:
        recurs = _recurs(detection, share) if cap.recurring and not unproven else None
        capped = f"{cap.reason}, but {recurs}" if recurs else cap.reason
        severity = min(severity, Severity.WARNING if recurs else Severity.INFO, key=lambda s: s.rank)
    elif capped:
        severity = Severity.INFO
    values = {
        **detection.values,
        "lost_ms": detection.lost_us / 1e3,
        "per_step_ms": per_step / 1e3,
        "share": share,
        "family": scope.family,
    }
    return Finding(
        rule_id=rule.id,
        rule_name=rule.name,
        title=rule.title,
        severity=severity,
        message=fill(rule.message, values),
        impact=Impact(lost_us=detection.lost_us, per_step_us=_plain(per_step), share=share),
        evidence=detection.evidence,
        fix=Fix(
            family=scope.family,
            text=fill(rule.fix_for(scope.family, detection.variant), values),
            changes=detection.changes,
        ),
        gain=gain,
        fingerprint=fingerprint(rule, detection),
        values={name: _plain(value) for name, value in values.items()},
        capped=capped,
    )


def _recurs(detection: Detection, share: float) -> str | None:
    """How the detection's evidence recurs through the window, in words; None when it does not: too few separate
    occurrences filling too little of the window, or one occurrence (a first call, a one-off stall) holding most of
    the time lost."""
    longest = max((item.dur_us for item in detection.evidence), default=0.0)
    if longest > RECURRING_SHARE * detection.lost_us:
        return None
    if detection.occurrences >= RECURRING_OCCURRENCES:
        return f"it recurs {detection.occurrences:,} times"
    if share >= RECURRING_SHARE:
        return f"it fills {share:.0%} of the window"
    return None


def graded(rule: Rule, share: float, gain: Gain, once_per_job: bool = False) -> Severity:
    """The severity a finding earns from the share of the trace lost; a cost paid once per job (a compile) from the
    share of the job its predicted fix wins back where less; never above a warning on a bound alone."""
    if once_per_job and gain.kind == "predicted" and gain.speedup is not None:
        share = min(share, 1 - 1 / gain.speedup)
    severity = rule.thresholds.severity(share, rule.severity) or rule.severity
    if gain.kind == "upper_bound" and severity is Severity.ERROR:
        return Severity.WARNING
    return severity


def _fitted(scope: Scope) -> KnownRun | None:
    """An emulator config fitted to the trace (its step capped for speed), once per scope; None when the fit does
    not reproduce the trace's step time within the calibration's error."""
    if not scope.fit_tried:
        scope.fit_tried = True
        scope.fitted = _fit(scope)
    return scope.fitted


def _fit(scope: Scope) -> KnownRun | None:
    if (
        not scope.steady_steps
        or scope.idle is None
        or scope.steps.count > FIT_MAX_STEPS
        and scope.metrics["recompilations.count"]
    ):
        return None  # a compile mid-run is fitted at the trace's own length, too long to emulate here
    steps = min(scope.steps.count, FIT_MAX_STEPS)
    try:
        config = fit(scope.trace, scope, given={"workload": {"steps": steps}})
    except PerftoolError:
        return None
    if not reproduces(config, scope):
        return None
    if scope.job_steps is not None:  # the job repeats what the capture shows, each of its compiles paid once
        epochs = max(round(scope.job_steps / steps), 1)
        config = config.model_copy(update={"workload": config.workload.model_copy(update={"epochs": epochs})})
    judges = read_settings(scope.trace, config)
    return KnownRun.of(config, "emulator fitted to this trace", recorded=False, judges=judges)


def fingerprint(rule: Rule, detection: Detection) -> str:
    """Stable for the same problem in another run or file: the rule and what the detection is about."""
    return hashlib.sha256(f"{rule.id}\0{detection.key}".encode()).hexdigest()[:16]


def _fix_that_holds(
    scope: Judged, detection: Detection, redetect: Callable[[Scope], Detection | None], sets_knobs: bool = True
) -> tuple[Detection, Gain, str | None]:
    """The detection whose fix helps most, its gain, and why none helps (None when one does).

    Every fix that sets knobs (the detection's own and its alternatives) is emulated on the run the trace records
    or, for any other trace, on a fit to it: one that does not fit the device or does not shorten the step is never
    printed as the fix (see :func:`_emulated`). A foreign trace's finding is detected again with the fit's knobs, so
    its fix can name values; where the fit cannot judge it, the finding keeps its own fix with an upper bound.
    """
    most = max(detection.bound_us or 0.0, detection.lost_us)
    bound = prediction.upper_bound(scope.per_step(most), most / scope.window)
    if not sets_knobs:
        return detection, bound, None  # a fix of no knob the emulator has: nothing to predict, no fit to run for it
    if scope.run is not None:
        return _emulated(scope, detection, bound) if detection.changes else (detection, bound, None)
    if not isinstance(scope, Scope) or (fitted := _fitted(scope)) is None:  # a job's scope has no fit
        return detection, bound, None
    on_fit = copy.copy(scope)  # the same trace and its analysis, with the fit as its run
    on_fit.run = fitted
    again = redetect(on_fit)
    read = fitted.judges or frozenset()
    candidate = again if again is not None and _judged_by_fit(again, read) else detection
    if not candidate.changes or not _judged_by_fit(candidate, read):
        return detection, bound, None
    chosen, gain, unproven = _emulated(on_fit, candidate, bound)
    idle = scope.idle.total / scope.window if scope.idle is not None else 0.0
    if unproven or _past(gain, max(bound.up_to_share or 0.0, idle)):
        return detection, bound, None
    if detection.once_per_job:  # a cost paid once: what its fix wins back depends on how long the job runs
        if scope.job_steps is None:
            return chosen, prediction.over_capture(gain, fitted.describe(chosen.changes), scope.steps.count), None
        return chosen, fitted.over_job(chosen.changes) or gain, None
    return chosen, gain, None


def _past(gain: Gain, measured: float) -> bool:
    """Whether a fit's prediction wins back more than the trace shows could be won: the time the finding measured
    lost, or all the device's idle time. The fit then models the trace in a way the measurement contradicts, and
    the measured bound is what holds."""
    won_back = 1 - 1 / gain.speedup if gain.speedup else 0.0
    return won_back > measured * (1 + prediction.BOUND_SLACK)


def _judged_by_fit(detection: Detection, read: frozenset[str]) -> bool:
    """Whether a fit predicts what the detection's fixes change: each is a setting the fit ``read`` from the trace."""
    return all(key in read for option in (detection, *detection.alternatives) for key in option.changes)


def _emulated(scope: Judged, detection: Detection, bound: Gain) -> tuple[Detection, Gain, str | None]:
    """Of the detection's fixes emulated on ``scope.run``, the one that helps most: one that leaves the training as
    it is wins over one that changes it (the batch, dropped samples), then the larger speed-up. When none helps,
    the detection's own is kept with ``bound``, and the reason says why."""
    assert scope.run is not None
    helping: list[tuple[bool, float, int, Detection, Gain]] = []
    tried = []
    for order, candidate in enumerate((detection, *detection.alternatives)):
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


def _emulator_config(trace: Trace) -> EmulatorConfig | None:
    """The config an emulator trace records about itself (None for other traces or an unreadable record)."""
    if trace.dialect != "emulator":
        return None
    try:
        return validate_config(trace.metadata["perftool"]["emulator"]["config"], trace.source)
    except (KeyError, TypeError, PerftoolError):
        return None


def distributed(trace: Trace, key: str, least: int = 1) -> int | None:
    """``rank`` or ``world_size`` from Kineto's ``distributedInfo`` (None when the trace does not say)."""
    info = trace.metadata.get("distributedInfo")
    value = info.get(key) if isinstance(info, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= least else None


def _plain(value: Any) -> Any:
    """JSON has no NaN: unknown numbers become null."""
    return None if isinstance(value, float) and math.isnan(value) else value
