"""The rules at work on an analysed trace (or a job): what each rule's detector finds past a threshold
(:func:`detected`), and the finding it becomes once the prediction stage has chosen its fix and gain
(:func:`finding_of`): its severity, message, evidence and fingerprint."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perftool.rules.detectors import DETECTORS, Detection, Scope
from perftool.rules.detectors.base import Judged, per_steady_step
from perftool.rules.findings import Finding, Fix, Gain, Impact
from perftool.rules.model import Rule, Severity, fill, over_the_trace

SHOWN_SHARE = 0.0005  # an info finding costing less rounds to 0.0% of the step: nothing to report
RECURRING_OCCURRENCES = 10  # evidence seen this many separate times recurs, however few steps the trace marks
RECURRING_SHARE = 0.5  # so does evidence filling this share of the window after start-up


@dataclass(frozen=True)
class Cap:
    """Why a trace's findings are held at info (``reason``), and whether one whose evidence recurs may stand at
    warning all the same (``recurring``)."""

    reason: str
    recurring: bool = False


@dataclass(frozen=True)
class Detected:
    """What a rule's detector found past one of its thresholds: the detection, the share of the window it lost, how
    to detect it again on another run of the same trace (``redetect``), and whether its fixes may set knobs."""

    rule: Rule
    detection: Detection
    share: float
    redetect: Callable[[Scope], Detection | None]
    sets_knobs: bool


def detected(scope: Judged, rule: Rule) -> Detected | None:
    """What the rule's detector finds on the trace (or job), if it reaches one of the rule's thresholds."""
    if scope.window <= 0:
        return None
    detector = DETECTORS[rule.detector]
    params = {**detector.params, **rule.params}
    detection = detector.detect(scope, params)
    if detection is None:
        return None
    share = detection.lost_us / scope.window
    if rule.thresholds.severity(share, rule.severity) is None or share < SHOWN_SHARE and rule.severity is Severity.INFO:
        return None  # below the rule's thresholds, or an info finding of a cost that reads 0.0%
    return Detected(rule, detection, share, lambda again: detector.detect(again, params), detector.sets_knobs)


def finding_of(
    scope: Judged, found: Detected, chosen: Detection, gain: Gain, unproven: str | None, cap: Cap | None
) -> Finding:
    """The finding of what a rule ``found``, with the fix ``chosen`` for it and that fix's ``gain`` (the prediction
    stage's, :mod:`perftool.predict.gains`; ``unproven``: why no fix with knob values helps). Held at info with the
    reason when ``cap`` is set (at warning where the cap allows and its evidence recurs)."""
    rule, share, detection = found.rule, found.share, chosen
    per_step = per_steady_step(scope, found.detection.lost_us)
    severity = graded(rule, share, gain, detection.once_per_job)
    capped = unproven
    if cap is not None and severity != Severity.INFO:
        recurs = _recurs(detection, share) if cap.recurring and not unproven else None
        capped = f"{cap.reason}, but {recurs}" if recurs else cap.reason
        severity = min(severity, Severity.WARNING if recurs else Severity.INFO, key=lambda s: s.rank)
    elif capped:
        severity = Severity.INFO
    worded = over_the_trace if not scope.steady_steps else str  # a trace without steps: figures in the whole trace
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
        title=rule.title_for(detection.variant),
        severity=severity,
        message=fill(worded(rule.message), values),
        impact=Impact(lost_us=detection.lost_us, per_step_us=plain(per_step), share=share),
        evidence=detection.evidence,
        fix=Fix(
            family=scope.family,
            text=fill(worded(rule.fix_for(scope.family, detection.variant, scope.contexts)), values),
            changes=detection.changes,
        ),
        gain=gain,
        fingerprint=fingerprint(rule, detection),
        values={name: plain(value) for name, value in values.items()},
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


def fingerprint(rule: Rule, detection: Detection) -> str:
    """Stable for the same problem in another run or file: the rule and what the detection is about."""
    return hashlib.sha256(f"{rule.id}\0{detection.key}".encode()).hexdigest()[:16]


def plain(value: Any) -> Any:
    """JSON has no NaN: unknown numbers become null."""
    return None if isinstance(value, float) and math.isnan(value) else value
