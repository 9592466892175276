"""The rule engine's grading, by hand: a finding's severity from its share (a cost paid once per job from what its
predicted fix wins back of the job; never an error on a bound alone), a cap that holds a trace's findings at info
unless their evidence recurs, the shown floor, and the figures every finding carries."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
from conftest import REPO

from perftool.pipeline.read import load_trace
from perftool.pipeline.scan import analyse_trace
from perftool.rules.catalog import find_rule, load_catalog
from perftool.rules.detectors import DETECTORS
from perftool.rules.detectors.base import Detection
from perftool.rules.engine import Cap, _recurs, detected, finding_of, graded
from perftool.rules.findings import Evidence, Gain
from perftool.rules.model import Severity

RULES = load_catalog()
COMPILES = find_rule(RULES, "PT003")  # thresholds {warning: 0.0, error: 0.10}, at warning at least
HOST = find_rule(RULES, "PT001")  # thresholds {info: 0.02, warning: 0.05, error: 0.25}, at info at least


def _predicted(speedup: float | None) -> Gain:
    return Gain(kind="predicted", text="", speedup=speedup)


BOUND = Gain(kind="upper_bound", text="")


@pytest.mark.parametrize(
    ("share", "gain", "once_per_job", "severity"),
    [
        (0.3, _predicted(1.05), False, Severity.ERROR),  # 30% of the trace
        (0.3, _predicted(1.05), True, Severity.WARNING),  # paid once: the fix wins back 4.8% of the job
        (0.3, _predicted(1.2), True, Severity.ERROR),  # ... 16.7% of it
        (0.3, _predicted(None), True, Severity.ERROR),  # a prediction of no speed-up: the trace's share
        (0.3, BOUND, True, Severity.WARNING),  # a bound alone is never an error
        (0.3, BOUND, False, Severity.WARNING),
        (0.05, BOUND, False, Severity.WARNING),
    ],
)
def test_a_compile_is_graded_on_what_its_fix_wins_back_of_the_job(share, gain, once_per_job, severity):
    assert graded(COMPILES, share, gain, once_per_job) is severity


def test_a_bound_leaves_an_info_finding_at_info():
    assert graded(HOST, 0.03, BOUND) is Severity.INFO
    assert graded(COMPILES, 0.3, _predicted(1.05)) is Severity.ERROR  # once per job only when the finding says so


def _evidence(*durations: float) -> list[Evidence]:
    return [Evidence(ts_us=0.0, dur_us=d, track="host", name="call") for d in durations]


@pytest.mark.parametrize(
    ("lost_us", "evidence", "occurrences", "share", "said"),
    [
        (100.0, _evidence(50.0, 50.0), 10, 0.1, "it recurs 10 times"),  # the longest exactly half the time lost
        (100.0, _evidence(50.1, 49.9), 10, 0.9, None),  # one occurrence holds most of it
        (100.0, _evidence(*[10.0] * 10), 9, 0.1, None),  # nine separate occurrences in a tenth of the window
        (100.0, _evidence(*[10.0] * 10), 9, 0.5, "it fills 50% of the window"),
        (1.0, [], 0, 0.5, "it fills 50% of the window"),  # no evidence: nothing holds most of the time
    ],
)
def test_evidence_recurs_by_its_occurrences_or_the_window_it_fills(lost_us, evidence, occurrences, share, said):
    assert _recurs(Detection(lost_us, {}, evidence, occurrences=occurrences), share) == said


@pytest.fixture(scope="module")
def compiled():
    """PT003 on the NPU sample's remainder loop: one 5 s compile, 68% of the window, paid once per job."""
    _, scope = analyse_trace(
        load_trace(str(REPO / "sample_traces" / "npu" / "recompile_remainder_loop.trace.json.gz")), []
    )
    found = detected(scope, COMPILES)
    assert found is not None and found.detection.once_per_job and found.share > 0.6
    return scope, found


def test_every_finding_carries_its_cost_share_and_family_beside_the_detector_s_values(compiled):
    scope, found = compiled
    finding = finding_of(scope, found, found.detection, _predicted(2.0), None, None)
    assert finding.values["lost_ms"] == found.detection.lost_us / 1e3 == 5000.0
    assert (finding.values["share"], finding.values["family"]) == (found.share, "npu")
    assert finding.impact.per_step_us == pytest.approx(finding.values["per_step_ms"] * 1e3) == 5e6 / scope.steady_steps


def test_a_finding_paid_once_per_job_is_graded_on_the_job(compiled):
    scope, found = compiled
    assert finding_of(scope, found, found.detection, _predicted(1.05), None, None).severity is Severity.WARNING
    every_step = replace(found.detection, once_per_job=False)
    assert finding_of(scope, found, every_step, _predicted(1.05), None, None).severity is Severity.ERROR


RECURRING = {"occurrences": 12, "evidence": _evidence(*[10.0] * 12)}


@pytest.mark.parametrize(
    ("cap", "evidence", "unproven", "severity", "capped"),
    [
        (Cap("no steps"), RECURRING, None, Severity.INFO, "no steps"),
        (Cap("no steps", recurring=True), RECURRING, None, Severity.WARNING, "no steps, but it recurs 12 times"),
        (Cap("no steps", recurring=True), RECURRING, "no fix helps", Severity.INFO, "no steps"),
        (Cap("no steps", recurring=True), {}, None, Severity.INFO, "no steps"),  # one 5 s compile
        (None, {}, "no fix helps", Severity.INFO, "no fix helps"),
    ],
    ids=["capped", "recurring", "recurring, no fix proven", "once", "no fix proven"],
)
def test_a_capped_error_stands_at_warning_only_where_its_evidence_recurs(compiled, cap, evidence, unproven, severity,
                                                                         capped):  # fmt: skip
    scope, found = compiled
    detection = replace(found.detection, once_per_job=False, **evidence)  # an error on the trace's share
    finding = finding_of(scope, found, detection, _predicted(2.0), unproven, cap)
    assert (finding.severity, finding.capped) == (severity, capped)


class _Detects:
    """A detector that finds ``lost_us`` on any scope."""

    params: dict = {}
    sets_knobs = False

    def __init__(self, lost_us: float) -> None:
        self.lost_us = lost_us

    def detect(self, scope, params) -> Detection:
        return Detection(self.lost_us, {}, [])


@pytest.mark.parametrize(
    ("rule", "window", "lost_us", "shown"),
    [
        (HOST, 0.0, 1.0, False),  # no window to take a share of
        (HOST, 0.5, 0.25, True),  # a window under a microsecond is a window
        (HOST, 10_000.0, 5.0, False),  # an info finding of 0.05% of the window: below its own threshold (2%)
        (COMPILES, 10_000.0, 4.0, True),  # a warning's threshold is 0: 0.04% is shown
    ],
)
def test_what_a_rule_finds_is_shown_past_its_threshold(monkeypatch, rule, window, lost_us, shown):
    monkeypatch.setitem(DETECTORS, rule.detector, _Detects(lost_us))
    assert (detected(SimpleNamespace(window=window), rule) is not None) is shown


def test_an_info_finding_that_rounds_to_nothing_is_not_shown(monkeypatch):
    """A rule at info from 0% (as a project may set one): a cost under 0.05% of the window reads 0.0%, and is left
    out; from 0.05% it is shown."""
    always = HOST.model_copy(update={"thresholds": HOST.thresholds.model_copy(update={"info": 0.0})})
    for lost_us, shown in [(4.99, False), (5.0, True)]:
        monkeypatch.setitem(DETECTORS, always.detector, _Detects(lost_us))
        assert (detected(SimpleNamespace(window=10_000.0), always) is not None) is shown
