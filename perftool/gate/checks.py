"""The checks gate runs, each a pass / warn / fail / skip / not checked with the numbers behind it.

Against a baseline:

- **timing**: the steady-state step time (median) and throughput fail only when the change is
  beyond the threshold *and* the candidate is slower beyond doubt: the one-sided Mann–Whitney U
  test on the per-step samples at ``alpha`` from :data:`~perftool.gate.stats.MIN_SAMPLES` steps a
  side, and with fewer (from :data:`MIN_STEPS`) a bound: every candidate step slower than every
  baseline step by more than the threshold. Beyond the threshold without that is a warning. With
  fewer than :data:`MIN_STEPS` steps on a side the timing is *not checked*, which fails the gate
  unless ``fail_on`` is ``never`` (:func:`status`): a gate that cannot see the step time must not pass
  a slower candidate in silence;
- **counters** (:data:`~perftool.gate.policy.COUNTERS`) fail on any increase; ``sync.per_step`` is
  compared as a count over the candidate's steps (more than half a sync more fails);
- **metrics** with limits fail (or warn) when they move that far in the worse direction;
- **findings** in the candidate whose fingerprint the baseline lacks fail at ``fail_on`` or above
  and warn below it; findings in both pass.

Without a baseline, a budget's absolute limits are checked, and (when ``fail_on`` asks) every
finding of the candidate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from enum import Enum
from typing import Annotated

import numpy as np
from pydantic import Field
from pydantic.dataclasses import dataclass

from perftool.analysis.confidence import said_capture_hint
from perftool.analysis.metrics import unit_of
from perftool.common.units import change, figure, plural
from perftool.gate.policy import COUNTERS, HIGHER_IS_BETTER, Budget, GatePolicy, Limit
from perftool.gate.stats import MIN_SAMPLES, p_greater
from perftool.rules.findings import Finding, TraceFindings


class Verdict(str, Enum):
    """A check's answer; a gate's status is the worst of pass, warn and fail among its checks."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"  # not measured on both sides
    NOT_CHECKED = "not_checked"  # measured, but too little to judge: fails unless --fail-on never

    def __str__(self) -> str:
        return self.value

    @property
    def rank(self) -> int:
        """How bad: skip, pass, warn, fail (a check not made counts as warn or fail, :func:`counted`)."""
        return _RANK[self]


_RANK = {Verdict.SKIP: 0, Verdict.PASS: 1, Verdict.WARN: 2, Verdict.FAIL: 3}
MIN_STEPS = 3  # steady steps a side below which the timing is not checked


@dataclass
class Check:
    """One question gate asked, and its answer, as ``gate --format json`` writes it."""

    id: Annotated[
        str,
        Field(
            description='stable: "timing:step_time", "counter:<metric>", "metric:<metric>", "budget:<metric>", '
            '"finding:<fingerprint>"; a job\'s prefixed "rank<N>/" or "job/"'
        ),
    ]
    name: Annotated[str, Field(description="what people read")]
    verdict: Annotated[
        Verdict,
        Field(description="not_checked: the check could not be made (too few steps); fails the gate unless fail_on is "
              "never"),
    ]  # fmt: skip
    baseline: float | None
    candidate: float | None
    change: Annotated[str, Field(description='the change, formatted ("+10.2%", "+1", "+0.3 pts"), or empty')]
    limit: Annotated[str, Field(description="what would fail, in words")]
    detail: str = ""
    unit: Annotated[
        str, Field(description="of baseline and candidate: us, fraction, bytes, count, or one written out (steps/s)")
    ] = "count"

    def shown(self, value: float | None) -> str:
        """``value`` (the baseline or the candidate) in the check's unit."""
        return figure(value, self.unit)

    def figures(self) -> str:
        """``baseline X, candidate Y (change)`` in words."""
        return f"baseline {self.shown(self.baseline)}, candidate {self.shown(self.candidate)} " + (
            f"({self.change or 'no change'})"
        )

    def reason(self) -> str:
        """Why it passed, warned or failed: the detail, else the limit."""
        return self.detail or self.limit


def counted(check: Check, fail_on: str) -> Verdict:
    """What a check counts as: its verdict, where one not made fails unless ``fail_on`` is never (then warns)."""
    if check.verdict is Verdict.NOT_CHECKED:
        return Verdict.WARN if fail_on == "never" else Verdict.FAIL
    return check.verdict


def status(checks: list[Check], fail_on: str) -> Verdict:
    """The worst verdict, each check as it counts: fail, else warn, else pass."""
    return max((counted(check, fail_on) for check in checks), key=lambda verdict: verdict.rank, default=Verdict.PASS)


def compare(baseline: TraceFindings, candidate: TraceFindings, policy: GatePolicy, fail_on: str) -> list[Check]:
    """Every check of a candidate against its baseline."""
    return [
        *_timing(baseline, candidate, policy),
        *(_counter(name, baseline, candidate) for name in COUNTERS),
        *(_metric(name, limit, baseline, candidate) for name, limit in policy.metrics.items()),
        *new_findings(baseline.findings, candidate.findings, fail_on, baseline.rules),
    ]


def against_budget(candidate: TraceFindings, budget: Budget, fail_on: str) -> list[Check]:
    """Every budget limit on the candidate, and its findings at ``fail_on`` or above."""
    checks = [_budget(name, limit, candidate) for name, limit in budget.metrics.items()]
    if fail_on != "never":
        checks += [
            _finding_check(f, Verdict.FAIL if f.severity.reaches(fail_on) else Verdict.PASS, "")
            for f in candidate.findings
        ]
    return checks


def _timing(baseline: TraceFindings, candidate: TraceFindings, policy: GatePolicy) -> list[Check]:
    a, b = np.array(baseline.step_durations_us), np.array(candidate.step_durations_us)
    names = (("timing:step_time", "step time (median)", "us"), ("timing:throughput", "throughput", "steps/s"))
    if min(a.size, b.size) < MIN_STEPS:
        short = baseline if a.size < MIN_STEPS else candidate  # its profiler's way to capture more
        why = (
            f"comparing step times needs {MIN_STEPS} steady steps a side, and the baseline has "
            f"{a.size}, the candidate {b.size} ({said_capture_hint(short.dialect, short.job_kind, short.framework)})"
        )
        return [
            Check(check_id, name, Verdict.NOT_CHECKED, None, None, "", "", why, unit) for check_id, name, unit in names
        ]
    if min(a.size, b.size) >= MIN_SAMPLES:
        p = p_greater(a, b)
        limit = f"> {policy.threshold:.0%} worse and significant (p < {policy.alpha})"
        significant = p < policy.alpha
        p_shown = "p < 0.0001" if p < 1e-4 else f"p = {p:.2g} {'<' if significant else '≥'} {policy.alpha:g}"
        test = Test(significant, f"{'significant' if significant else 'not significant'} ({p_shown})", limit)
    else:  # too few steps for a rank test at any usual alpha: a bound on every pair of steps instead
        gap, least = float(b.min() / a.max() - 1), min(a.size, b.size)
        apart = gap > policy.threshold
        evidence = (f"{'every candidate step slower' if apart else 'the steps overlap'}: the fastest candidate step "
                    f"{gap:+.1%} on the slowest baseline one, {least} steps a side")  # fmt: skip
        worse = f"{policy.threshold:.0%}"
        limit = f"> {worse} worse, every candidate step > {worse} slower than every baseline one"
        test = Test(apart, evidence, limit)
    step_change = float(np.median(b) / np.median(a) - 1)
    rate_a, rate_b = a.size / a.sum() * 1e6, b.size / b.sum() * 1e6
    rate_change = float(rate_b / rate_a - 1)
    (step_id, step_name, step_unit), (rate_id, rate_name, rate_unit) = names
    return [
        _timed(step_id, step_name, step_unit, (float(np.median(a)), float(np.median(b))), step_change, test, policy),
        _timed(rate_id, rate_name, rate_unit, (rate_a, rate_b), -rate_change, test, policy, shown_change=rate_change),
    ]


@dataclass(frozen=True)
class Test:
    """Whether a slower candidate is slower beyond doubt, the figures that say so, and the rule in words."""

    beyond_doubt: bool
    evidence: str
    limit: str


def _timed(
    check_id: str,
    name: str,
    unit: str,
    values: tuple[float, float],
    worse_by: float,
    test: Test,
    policy: GatePolicy,
    shown_change: float | None = None,
) -> Check:
    """``worse_by``: the relative change in the worse direction (positive: a regression)."""
    beyond = worse_by > policy.threshold
    verdict = Verdict.FAIL if beyond and test.beyond_doubt else Verdict.WARN if beyond else Verdict.PASS
    detail = {
        Verdict.FAIL: f"{worse_by:.1%} worse, {test.evidence}",
        Verdict.WARN: f"{worse_by:.1%} worse, {test.evidence}: noisy, rerun or take more steps",
        Verdict.PASS: "",
    }[verdict]
    change = worse_by if shown_change is None else shown_change
    return Check(check_id, name, verdict, *values, f"{change:+.1%}", test.limit, detail, unit)


def _counter(name: str, baseline: TraceFindings, candidate: TraceFindings) -> Check:
    base, cand = _value(baseline, name), _value(candidate, name)
    limit, unit = "any increase", unit_of(name)
    if base is None or cand is None:
        return Check(f"counter:{name}", name, Verdict.SKIP, base, cand, "", limit, "not measured on both traces", unit)
    if name == "sync.per_step":  # a rate: compare counts over the candidate's steps
        steps = len(candidate.step_durations_us) or 1
        extra = (cand - base) * steps
        verdict = Verdict.FAIL if extra > 0.5 else Verdict.PASS
        detail = f"{extra:+.0f} syncs over the candidate's {plural(steps, 'step')}" if verdict is Verdict.FAIL else ""
        return Check(f"counter:{name}", name, verdict, base, cand, change(cand - base, unit), limit, detail, unit)
    verdict = Verdict.FAIL if cand > base else Verdict.PASS
    detail = f"{cand - base:,.0f} more than the baseline" if verdict is Verdict.FAIL else ""
    return Check(f"counter:{name}", name, verdict, base, cand, change(cand - base, unit), limit, detail, unit)


def _metric(name: str, limit: Limit, baseline: TraceFindings, candidate: TraceFindings) -> Check:
    base, cand = _value(baseline, name), _value(candidate, name)
    worse_side, unit = "lower" if name in HIGHER_IS_BETTER else "higher", unit_of(name)
    words = _levels(limit, f"{worse_side} by", lambda bound: change(bound, unit).lstrip("+"))
    if base is None or cand is None:
        return Check(f"metric:{name}", name, Verdict.SKIP, base, cand, "", words, "not measured on both traces", unit)
    worse_by = (base - cand) if name in HIGHER_IS_BETTER else (cand - base)
    verdict = _level(worse_by, limit)
    moved = change(abs(worse_by), unit).lstrip("+")
    detail = f"{moved} {worse_side}: past the {_word(verdict)} limit" if verdict is not Verdict.PASS else ""
    return Check(f"metric:{name}", name, verdict, base, cand, change(cand - base, unit), words, detail, unit)


def _budget(name: str, limit: Limit, candidate: TraceFindings) -> Check:
    value = _value(candidate, name)
    higher, unit = name in HIGHER_IS_BETTER, unit_of(name)
    words = _levels(limit, "below" if higher else "above", lambda bound: figure(bound, unit))
    if value is None:
        return Check(f"budget:{name}", name, Verdict.SKIP, None, None, "", words, "not measured on this trace", unit)
    verdict = _level(value, limit, below=higher)
    detail = ""
    if verdict is not Verdict.PASS:
        bound = limit.error if verdict is Verdict.FAIL else limit.warn
        side = "below" if higher else "above"
        detail = f"{figure(value, unit)} is {side} the {_word(verdict)} limit of {figure(bound, unit)}"
    return Check(f"budget:{name}", name, verdict, None, value, "", words, detail, unit)


def _level(value: float, limit: Limit, below: bool = False) -> Verdict:
    """fail past the error level, warn past the warn level; past means above, or below when ``below``."""

    def past(bound: float | None) -> bool:
        return bound is not None and (value < bound if below else value > bound)

    return Verdict.FAIL if past(limit.error) else Verdict.WARN if past(limit.warn) else Verdict.PASS


def _word(verdict: Verdict) -> str:
    return "error" if verdict is Verdict.FAIL else "warn"


def _levels(limit: Limit, side: str, shown: Callable[[float], str]) -> str:
    levels = (("warn", limit.warn), ("error", limit.error))
    return ", ".join(f"{level} {side} {shown(value)}" for level, value in levels if value is not None)


def new_findings(
    baseline: list[Finding], candidate: list[Finding], fail_on: str, judged: Collection[str] = ()
) -> list[Check]:
    """Each candidate finding against the baseline's, and each baseline finding gone. ``judged``: the rules the
    baseline's scan ran, where its document says (a finding of another rule, one added since, is no regression)."""
    known = {finding.fingerprint for finding in baseline}
    checks = []
    for finding in candidate:
        if finding.fingerprint in known:
            checks.append(_finding_check(finding, Verdict.PASS, "also in the baseline"))
        elif judged and finding.rule_id not in judged:
            detail = f"not judged in the baseline, whose scan ran no {finding.rule_id}"
            checks.append(_finding_check(finding, Verdict.PASS, detail))
        else:
            verdict = Verdict.FAIL if finding.severity.reaches(fail_on) else Verdict.WARN
            checks.append(_finding_check(finding, verdict, "new in the candidate"))
    current = {finding.fingerprint for finding in candidate}
    checks += [
        _finding_check(f, Verdict.PASS, "fixed: only in the baseline") for f in baseline if f.fingerprint not in current
    ]
    return checks


def _finding_check(finding: Finding, verdict: Verdict, detail: str) -> Check:
    text = f"{finding.severity.value} {finding.rule_id} {finding.rule_name}"
    return Check(
        f"finding:{finding.fingerprint}",
        text,
        verdict,
        None,
        None,
        f"{finding.impact.share:.1%} of the step",
        "new finding at --fail-on or above",
        f"{detail}: {finding.title}" if detail else finding.title,
    )


def _value(trace: TraceFindings, name: str) -> float | None:
    value = trace.metrics.get(name)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
